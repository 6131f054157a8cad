//! Checking launch arguments against a kernel's parameters: one check, one error type,
//! shared by every executor (the interpreter, the CPU JIT, later devices).

use crate::kernel::Param;
use crate::types::ScalarType;
use thiserror::Error;

/// What a caller binds to one parameter, as far as the check is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgShape {
    /// A buffer of `len` units (elements or bytes: the caller's unit, see
    /// [`check_args`]), with its element type when the caller knows it.
    Buffer { elem: Option<ScalarType>, len: u64 },
    /// A uniform scalar of this type.
    Scalar(ScalarType),
}

impl ArgShape {
    fn kind_name(&self) -> &'static str {
        match self {
            ArgShape::Buffer { .. } => "buffer",
            ArgShape::Scalar(_) => "scalar",
        }
    }
}

/// An argument that does not fit its parameter.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("kernel `{kernel}` takes {expected} arguments, {found} were given")]
    Count {
        kernel: String,
        expected: usize,
        found: usize,
    },
    #[error(
        "kernel `{kernel}`: argument {index} (`{param}`) must be a {expected}, a {found} was given"
    )]
    Kind {
        kernel: String,
        index: usize,
        param: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "kernel `{kernel}`: argument {index} (`{param}`) must be of type {expected}, found {found}"
    )]
    Type {
        kernel: String,
        index: usize,
        param: String,
        expected: ScalarType,
        found: ScalarType,
    },
    #[error("kernel `{kernel}`: buffer argument {index} (`{param}`) must have {expected} {unit}, found {found}")]
    Length {
        kernel: String,
        index: usize,
        param: String,
        expected: u64,
        found: u64,
        unit: &'static str,
    },
}

/// Checks `args` against `params` of kernel `kernel`: count, buffer or scalar, types,
/// and buffer lengths, measured in `unit` (`"elements"` or `"bytes"`): a buffer of
/// `len` elements of `elem` must have `len * units_per_element(elem)` units.
pub fn check_args(
    kernel: &str,
    params: &[Param],
    args: &[ArgShape],
    unit: &'static str,
    units_per_element: fn(ScalarType) -> u64,
) -> Result<(), ArgError> {
    if args.len() != params.len() {
        return Err(ArgError::Count {
            kernel: kernel.to_string(),
            expected: params.len(),
            found: args.len(),
        });
    }
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        let at = || (kernel.to_string(), index, param.name().to_string());
        match (param, *arg) {
            (
                Param::Buffer { elem, len, .. },
                ArgShape::Buffer {
                    elem: found,
                    len: found_len,
                },
            ) => {
                if let Some(found) = found.filter(|f| f != elem) {
                    let (kernel, index, param) = at();
                    return Err(ArgError::Type {
                        kernel,
                        index,
                        param,
                        expected: *elem,
                        found,
                    });
                }
                let expected = len.saturating_mul(units_per_element(*elem));
                if found_len != expected {
                    let (kernel, index, param) = at();
                    return Err(ArgError::Length {
                        kernel,
                        index,
                        param,
                        expected,
                        found: found_len,
                        unit,
                    });
                }
            }
            (Param::Scalar { ty, .. }, ArgShape::Scalar(found)) => {
                if found != *ty {
                    let (kernel, index, param) = at();
                    return Err(ArgError::Type {
                        kernel,
                        index,
                        param,
                        expected: *ty,
                        found,
                    });
                }
            }
            (_, arg) => {
                let expected = match param {
                    Param::Buffer { .. } => "buffer",
                    Param::Scalar { .. } => "scalar",
                };
                let (kernel, index, param) = at();
                return Err(ArgError::Kind {
                    kernel,
                    index,
                    param,
                    expected,
                    found: arg.kind_name(),
                });
            }
        }
    }
    Ok(())
}
