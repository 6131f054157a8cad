//! IR types as naga types, and the types WGSL lacks.

use super::{unsupported, TARGET};
use crate::CodegenError;
use kernelc_ir::{ScalarType, Type};
use naga::{Handle, Span, TypeInner, UniqueArena, VectorSize};

/// The naga scalar a value of an IR scalar type is held in: f16 and bf16 values are
/// held as f32 (see `half`), a narrow storage type's values as its value type;
/// `Unsupported` for the 64-bit types.
pub(super) fn scalar(ty: ScalarType) -> Result<naga::Scalar, CodegenError> {
    match ty {
        ScalarType::Bool => Ok(naga::Scalar::BOOL),
        ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => Ok(naga::Scalar::I32),
        ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => Ok(naga::Scalar::U32),
        ScalarType::F32 | ScalarType::F16 | ScalarType::Bf16 => Ok(naga::Scalar::F32),
        ScalarType::I64 | ScalarType::F64 => Err(unsupported_type(ty)),
    }
}

/// The error for a scalar type WGSL has no equivalent of.
pub(super) fn unsupported_type(ty: ScalarType) -> CodegenError {
    let why = match ty {
        ScalarType::I64 => "WGSL has no 64-bit integers",
        ScalarType::F64 => "WGSL has no 64-bit floats",
        _ => "not available here",
    };
    unsupported(format!("the type {ty} ({why})"))
}

/// The naga scalar an element of `ty` is stored as in a buffer or shared array:
/// bool as a `u32` word (host-shareable memory has no bool; in buffers bool and the
/// narrow integers are packed into such words, see [`crate::shader::Packing`]), f16
/// as WGSL's `f16`; there is no 16-bit type to store bf16 in.
pub(super) fn memory_scalar(ty: ScalarType) -> Result<naga::Scalar, CodegenError> {
    match ty {
        ScalarType::Bool | ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
            Ok(naga::Scalar::U32)
        }
        ScalarType::F16 => Ok(naga::Scalar::F16),
        ScalarType::Bf16 => Err(unsupported(
            "memory of bf16 (WGSL has no 16-bit type to store bfloat16 in)",
        )),
        other => scalar(other),
    }
}

pub(super) fn vector_size(lanes: u8) -> Result<Option<VectorSize>, CodegenError> {
    match lanes {
        1 => Ok(None),
        2 => Ok(Some(VectorSize::Bi)),
        4 => Ok(Some(VectorSize::Quad)),
        other => Err(CodegenError::Backend {
            target: TARGET,
            message: format!("internal error: a vector of {other} lanes"),
        }),
    }
}

/// `scalar` or `vecN<scalar>`.
pub(super) fn inner(s: naga::Scalar, lanes: u8) -> Result<TypeInner, CodegenError> {
    Ok(match vector_size(lanes)? {
        None => TypeInner::Scalar(s),
        Some(size) => TypeInner::Vector { size, scalar: s },
    })
}

pub(super) fn intern(types: &mut UniqueArena<naga::Type>, inner: TypeInner) -> Handle<naga::Type> {
    types.insert(naga::Type { name: None, inner }, Span::UNDEFINED)
}

/// The naga type of an IR value type.
pub(super) fn value_type(
    types: &mut UniqueArena<naga::Type>,
    ty: Type,
) -> Result<Handle<naga::Type>, CodegenError> {
    let inner = inner(scalar(ty.scalar)?, ty.lanes)?;
    Ok(intern(types, inner))
}
