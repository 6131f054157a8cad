//! How IR values are represented in Cranelift IR.
//!
//! | IR scalar | CLIF scalar | in memory |
//! | --- | --- | --- |
//! | bool | `i8`, 0 or 1 | 1 byte, nonzero is true |
//! | i32, u32 | `i32` | 4 bytes |
//! | u8, i8, u16, i16 (memory only) | their value type's `i32` | 1, 2 bytes (`uload8`/`sload8`, `istore8`, ...) |
//! | i64 | `i64` | 8 bytes |
//! | f16, bf16 | `i16` (the bits; arithmetic converts to f32 and back) | 2 bytes |
//! | f32, f64 | `f32`, `f64` | 4, 8 bytes |
//!
//! A vector is either *lane-wise* (one CLIF scalar per lane) or *packed* in 128-bit
//! SIMD chunks: `vec4<f32>` is one `f32x4`, `vec4<i32|u32>` one `i32x4`, `vec2<f64>` one
//! `f64x2`, `vec4<f64>` two `f64x2`, and likewise for i64. No value wider than 128 bits
//! is ever emitted. Other vectors (2-lane 32-bit, f16/bf16, bool) are lane-wise.

use cranelift_codegen::ir::types;
use cranelift_codegen::ir::Type as ClifType;
use kernelc_ir::{ScalarType, Type};

/// The CLIF type of one lane of an IR scalar type (of a narrow storage type: of the
/// value a load of it yields).
pub(crate) fn scalar_clif(s: ScalarType) -> ClifType {
    match s {
        ScalarType::Bool => types::I8,
        ScalarType::I32
        | ScalarType::U32
        | ScalarType::U8
        | ScalarType::I8
        | ScalarType::U16
        | ScalarType::I16 => types::I32,
        ScalarType::I64 => types::I64,
        ScalarType::F16 | ScalarType::Bf16 => types::I16,
        ScalarType::F32 => types::F32,
        ScalarType::F64 => types::F64,
    }
}

/// The CLIF type of an element in memory (bool is a byte).
pub(crate) fn memory_clif(s: ScalarType) -> ClifType {
    match s {
        ScalarType::Bool | ScalarType::U8 | ScalarType::I8 => types::I8,
        ScalarType::U16 | ScalarType::I16 | ScalarType::F16 | ScalarType::Bf16 => types::I16,
        ScalarType::I32 | ScalarType::U32 => types::I32,
        ScalarType::I64 => types::I64,
        ScalarType::F32 => types::F32,
        ScalarType::F64 => types::F64,
    }
}

/// The packed layout of a vector type: the SIMD chunk type and the number of chunks.
/// `None` for scalars and for vectors that are kept lane-wise.
pub(crate) fn packed_layout(ty: Type, simd: bool) -> Option<(ClifType, usize)> {
    if !simd {
        return None;
    }
    let chunk = match ty.scalar {
        ScalarType::F32 if ty.lanes == 4 => types::F32X4,
        ScalarType::I32 | ScalarType::U32 if ty.lanes == 4 => types::I32X4,
        ScalarType::F64 if ty.lanes >= 2 => types::F64X2,
        ScalarType::I64 if ty.lanes >= 2 => types::I64X2,
        _ => return None,
    };
    let chunks = ty.lanes as usize / chunk.lane_count() as usize;
    Some((chunk, chunks))
}

/// The integer vector type of the same shape (the type of a comparison mask).
pub(crate) fn mask_of(chunk: ClifType) -> ClifType {
    chunk.as_int()
}
