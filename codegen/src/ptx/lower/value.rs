//! Lowered values and the LLVM types of IR types.
//!
//! A value is held lane by lane: an IR vector of `n` lanes is `n` LLVM scalars. Only
//! memory accesses use LLVM vector types (one wide load or store); the arithmetic on
//! lanes is scalar, which is what the NVPTX backend would make of it anyway, and keeps
//! every operation one whose lowering is well trodden.
//!
//! LLVM types: bool `i1`, i32/u32 `i32`, i64 `i64`, f16 `half`, bf16 `bfloat`, f32
//! `float`, f64 `double`. In memory bool is an `i8` (0 or 1), and the narrow storage
//! types (u8, i8, u16, i16), whose values are `i32`, are `i8` and `i16`.

use super::{Lower, OrInternal};
use crate::ptx::internal;
use crate::CodegenError;
use inkwell::types::{BasicTypeEnum, FloatType};
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use kernelc_ir::{Scalar, ScalarType, Type};

/// A lowered IR value: its type and one LLVM value per lane.
#[derive(Clone, Debug)]
pub(in crate::ptx) struct Val<'ctx> {
    pub ty: Type,
    pub lanes: Vec<BasicValueEnum<'ctx>>,
}

impl<'ctx> Val<'ctx> {
    pub fn scalar(s: ScalarType, v: BasicValueEnum<'ctx>) -> Self {
        Val {
            ty: Type::scalar(s),
            lanes: vec![v],
        }
    }

    /// The first (for a scalar: the only) lane.
    pub fn first(&self) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        self.lanes
            .first()
            .copied()
            .ok_or_else(|| internal("a value without lanes"))
    }
}

/// A checked `into_int_value` (inkwell's panics on other values).
pub(in crate::ptx) fn int(v: BasicValueEnum<'_>) -> Result<IntValue<'_>, CodegenError> {
    IntValue::try_from(v).map_err(|_| internal(format!("expected an integer, got {v:?}")))
}

/// A checked `into_float_value`.
pub(in crate::ptx) fn float(v: BasicValueEnum<'_>) -> Result<FloatValue<'_>, CodegenError> {
    FloatValue::try_from(v).map_err(|_| internal(format!("expected a float, got {v:?}")))
}

impl<'ctx> Lower<'_, 'ctx> {
    /// The LLVM type of a value of `s` (of a narrow storage type: of the value a load
    /// of it yields).
    pub(in crate::ptx) fn scalar_type(&self, s: ScalarType) -> BasicTypeEnum<'ctx> {
        let c = self.ctx;
        match s {
            ScalarType::Bool => c.bool_type().into(),
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => c.i32_type().into(),
            ScalarType::I64 => c.i64_type().into(),
            ScalarType::F16 => c.f16_type().into(),
            ScalarType::Bf16 => c.bf16_type().into(),
            ScalarType::F32 => c.f32_type().into(),
            ScalarType::F64 => c.f64_type().into(),
        }
    }

    /// The LLVM type of a value of the float type `s`.
    pub(in crate::ptx) fn float_type(
        &self,
        s: ScalarType,
    ) -> Result<FloatType<'ctx>, CodegenError> {
        let c = self.ctx;
        Ok(match s {
            ScalarType::F16 => c.f16_type(),
            ScalarType::Bf16 => c.bf16_type(),
            ScalarType::F32 => c.f32_type(),
            ScalarType::F64 => c.f64_type(),
            other => return Err(internal(format!("{other} is not a float type"))),
        })
    }

    /// The LLVM type of an element of `s` in memory (bool is a byte).
    pub(in crate::ptx) fn memory_type(&self, s: ScalarType) -> BasicTypeEnum<'ctx> {
        match s {
            ScalarType::Bool | ScalarType::U8 | ScalarType::I8 => self.ctx.i8_type().into(),
            ScalarType::U16 | ScalarType::I16 => self.ctx.i16_type().into(),
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::I64
            | ScalarType::F16
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::F64 => self.scalar_type(s),
        }
    }

    /// The zero (`false`) of `s`.
    pub(in crate::ptx) fn zero(&self, s: ScalarType) -> BasicValueEnum<'ctx> {
        self.scalar_type(s).const_zero()
    }

    /// A literal, bit for bit (floats are built from their bits, so NaN payloads and
    /// signed zeros survive).
    pub(in crate::ptx) fn literal(&self, s: Scalar) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let c = self.ctx;
        let from_bits = |bits: IntValue<'ctx>, ty: ScalarType| {
            self.b
                .build_bit_cast(bits, self.scalar_type(ty), "")
                .or_internal()
        };
        Ok(match s {
            Scalar::Bool(b) => c.bool_type().const_int(b as u64, false).into(),
            Scalar::I32(v) => c.i32_type().const_int(v as u32 as u64, false).into(),
            Scalar::U32(v) => c.i32_type().const_int(v as u64, false).into(),
            Scalar::I64(v) => c.i64_type().const_int(v as u64, false).into(),
            Scalar::F16(b) => from_bits(c.i16_type().const_int(b as u64, false), s.ty())?,
            Scalar::Bf16(b) => from_bits(c.i16_type().const_int(b as u64, false), s.ty())?,
            Scalar::F32(b) => from_bits(c.i32_type().const_int(b as u64, false), s.ty())?,
            Scalar::F64(b) => from_bits(c.i64_type().const_int(b, false), s.ty())?,
        })
    }
}
