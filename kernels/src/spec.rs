//! The vocabulary every spec shares: [`OpSpec`] and [`OpKind`] (made by the
//! catalogue in [`crate::ops`]), [`TensorSig`], [`Alias`], and the validation helpers
//! the families use. Every family's spec types are re-exported here, so
//! `use kernelc_kernels::spec::*` names every op.
//!
//! A spec is what a caller asks for and what lowering turns into kernels: every shape is
//! a constant, axes are already normalised (use [`normalize_axis`](crate::shape::normalize_axis)
//! for `dim: i32` style arguments), and every attribute the math needs is a field.
//!
//! **Buffers.** [`OpSpec::inputs`] and [`OpSpec::outputs`] list the buffers in a fixed
//! order with names, dtypes and shapes; data is row-major (C order) unless the spec says
//! otherwise (GEMM's `layout`). Outputs that update an input in place (Adam's moments,
//! batch-norm running stats, `accumulate`/`beta != 0` forms) are listed by
//! [`OpSpec::aliases`]: the output may share the input's buffer, and every element is
//! read before it is written by the same invocation.
//!
//! **f16 / bf16** are storage types: where a spec accepts them, kernels load, widen to
//! f32, compute and accumulate in f32, and round once on store. The f64 references
//! ignore storage precision (except where rounding is the op's meaning: `cast`, GEMM's
//! `input_rounding`).
//!
//! **Index tensors** (gather/scatter indices, cross-entropy targets, rope positions,
//! max-pool argmax) are `u32`, `i32` or `i64` (ONNX and PyTorch indices), or `f32`
//! holding integral values (rumus keeps ids in f32 buffers; exact below 2^24). An index
//! outside its range reads as zero and is skipped by scatters: no kernel ever reads or
//! writes out of bounds.
//!
//! **Integer dtypes** are i32, u32, i64 and the narrow storage types u8, i8, u16, i16,
//! which kernels compute in i32/u32 and wrap on store: their `+ − ×` wrap at their own
//! width, as NumPy's and PyTorch's do. i64 needs a target with 64-bit integers (the
//! CPU, CUDA, SPIR-V with `Int64`); elsewhere lowering refuses it with
//! `LowerError::UnsupportedDtype`. Bool is one byte, 0 or 1.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use crate::error::SpecError;

pub use crate::ops::*;

/// One buffer of an op: its name (`"a"`, `"x"`, `"weight"`, `"indices"`, ...), dtype
/// and shape (row-major; a flat `[len]` where the layout is strided).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorSig {
    pub name: String,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
}

impl TensorSig {
    pub fn new(name: &str, dtype: ScalarType, shape: Vec<usize>) -> TensorSig {
        TensorSig {
            name: name.to_string(),
            dtype,
            shape,
        }
    }

    /// Number of elements (1 for rank 0).
    pub fn numel(&self) -> usize {
        crate::shape::numel(&self.shape)
    }
}

/// Output `output` updates input `input` in place (indices into
/// [`OpSpec::inputs`] / [`OpSpec::outputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Alias {
    pub input: usize,
    pub output: usize,
}

impl Alias {
    /// The aliases of an op whose one output starts from the prior value in input
    /// `input` when `accumulates` (none otherwise).
    pub fn prior_when(accumulates: bool, input: usize) -> Vec<Alias> {
        if accumulates {
            vec![Alias { input, output: 0 }]
        } else {
            Vec::new()
        }
    }
}

impl OpSpec {
    /// The kind's name (`"gemm"`, `"unary"`, ...), equal to the `"op"` JSON tag.
    pub fn kind_name(&self) -> &'static str {
        self.kind().name()
    }

    /// Every kind name, in catalogue order.
    pub fn all_kind_names() -> &'static [&'static str] {
        OpKind::NAMES
    }
}

impl OpKind {
    /// The kind whose name is `name`.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| k.name() == name)
    }
}

// ---- validation helpers shared by the families ----

/// f16, bf16, f32, f64.
pub(crate) const FLOATS: &[ScalarType] = &[
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::F64,
];

/// Floats and every integer type: i32, u32, i64 and the narrow storage types (u8,
/// i8, u16, i16, computed in i32/u32 and wrapped on store).
pub(crate) const NUMERIC: &[ScalarType] = &[
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::F64,
    ScalarType::I32,
    ScalarType::U32,
    ScalarType::I64,
    ScalarType::U8,
    ScalarType::I8,
    ScalarType::U16,
    ScalarType::I16,
];

/// Floats and the signed integer types (negation and `abs` are defined on them).
pub(crate) const SIGNED: &[ScalarType] = &[
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::F64,
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::I8,
    ScalarType::I16,
];

/// Index tensor dtypes: u32, i32, i64, or f32 holding integral values.
pub(crate) const INDEX: &[ScalarType] = &[
    ScalarType::U32,
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::F32,
];

pub(crate) fn check_dtype(
    op: &str,
    dtype: ScalarType,
    allowed: &[ScalarType],
) -> Result<(), SpecError> {
    if allowed.contains(&dtype) {
        Ok(())
    } else {
        Err(SpecError::UnsupportedDtype {
            op: op.to_string(),
            dtype,
            allowed: allowed.to_vec(),
        })
    }
}

/// Whether a count is 0 (a serde `skip_serializing_if` for offsets that default to 0).
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub(crate) fn check_finite(name: &str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(SpecError::bad_attr(name, v, "must be finite"))
    }
}

pub(crate) fn check_non_negative(name: &str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(SpecError::bad_attr(name, v, "must be finite and >= 0"))
    }
}

/// `a * b` for shapes computed from attributes, saturating instead of overflowing.
pub(crate) fn mul(a: usize, b: usize) -> usize {
    a.saturating_mul(b)
}

/// Serde for f64 attributes that keeps every value exact through JSON: finite values
/// as numbers (bit for bit, with serde_json's `float_roundtrip`), and the values JSON
/// has no number for as strings, `"inf"`, `"-inf"` and `"nan"` (`"Infinity"`,
/// `"-Infinity"` and `"NaN"` are read too). serde_json alone writes ±∞ and NaN as
/// `null`, which reads back as an error: a `fill` with −∞ could not be stored.
pub mod exact_f64 {
    use serde::de::{self, Deserializer, Visitor};
    use serde::Serializer;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str("nan")
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        struct Float;
        impl Visitor<'_> for Float {
            type Value = f64;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or \"inf\", \"-inf\" or \"nan\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "inf" | "+inf" | "Infinity" | "+Infinity" => Ok(f64::INFINITY),
                    "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
                    "nan" | "NaN" => Ok(f64::NAN),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(Float)
    }
}
