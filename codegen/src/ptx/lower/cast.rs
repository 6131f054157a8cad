//! `Cast`: value conversion with the interpreter's rounding and saturation
//! (`kernelc_ir::eval::cast_scalar`), one lane at a time.
//!
//! * float -> int: `llvm.fptosi.sat`/`llvm.fptoui.sat` (truncate, saturate at the
//!   target range, NaN -> 0: exactly the IR's rule), from f32 for f16/bf16 (exact).
//! * int -> f32/f64: one rounding to nearest even (`cvt.rn`). int -> f16/bf16: through
//!   f64 and one more rounding, as the interpreter (exact for i32/u32; i64 rounds to
//!   f64 first, as there).
//! * float -> float: `fpext` (exact) or `fptrunc` (one rounding, also from f64 straight
//!   to f16/bf16).
//! * -> bool: `x != 0` (NaN -> true); bool -> number: 0 or 1.

use super::value::{float, int};
use super::{Lower, OrInternal};
use crate::ptx::internal;
use crate::CodegenError;
use inkwell::types::FloatType;
use inkwell::values::BasicValueEnum;
use inkwell::{FloatPredicate, IntPredicate};
use kernelc_ir::ScalarType::{self, *};

/// The least integer that rounds to f16's infinity (halfway between 65504 and 2¹⁶,
/// ties to even).
const F16_OVERFLOW: i64 = 65520;

impl<'ctx> Lower<'_, 'ctx> {
    /// One lane from `from` to `to`.
    pub(super) fn cast_scalar(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if from == to {
            return Ok(x);
        }
        if to == Bool {
            return self.cast_to_bool(from, x);
        }
        if from == Bool {
            return self.cast_from_bool(to, x);
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => self.int_to_int(from, to, x),
            (false, true) => self.int_to_float(from, to, x),
            (true, false) => self.float_to_int(from, to, x),
            (true, true) => self.float_to_float(from, to, x),
        }
    }

    fn cast_to_bool(
        &mut self,
        from: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if from.is_float() {
            let v = self.widen_float(from, x)?;
            let zero = v.get_type().const_zero();
            return Ok(self
                .b
                .build_float_compare(FloatPredicate::UNE, v, zero, "")
                .or_internal()?
                .into());
        }
        let v = int(x)?;
        Ok(self
            .b
            .build_int_compare(IntPredicate::NE, v, v.get_type().const_zero(), "")
            .or_internal()?
            .into())
    }

    fn cast_from_bool(
        &mut self,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let x = int(x)?;
        Ok(match to {
            I32 | U32 | I64 => {
                let t = int(self.zero(to))?.get_type();
                self.b.build_int_z_extend(x, t, "").or_internal()?.into()
            }
            _ => {
                // 0.0 or 1.0, exactly, in every float type.
                let t = self.float_type(to)?;
                self.b
                    .build_unsigned_int_to_float(x, t, "")
                    .or_internal()?
                    .into()
            }
        })
    }

    fn int_to_int(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let x = int(x)?;
        let (i32t, i64t) = (self.ctx.i32_type(), self.ctx.i64_type());
        Ok(match (from, to) {
            (I64, _) => self.b.build_int_truncate(x, i32t, "").or_internal()?,
            (I32, I64) => self.b.build_int_s_extend(x, i64t, "").or_internal()?,
            (_, I64) => self.b.build_int_z_extend(x, i64t, "").or_internal()?,
            // i32 <-> u32: the same bits.
            _ => x,
        }
        .into())
    }

    fn int_to_float(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let x = int(x)?;
        let convert = |l: &Self, t: FloatType<'ctx>| {
            if from == U32 {
                l.b.build_unsigned_int_to_float(x, t, "").or_internal()
            } else {
                l.b.build_signed_int_to_float(x, t, "").or_internal()
            }
        };
        match to {
            F32 | F64 => Ok(convert(self, self.float_type(to)?)?.into()),
            // Via f64, as the interpreter.
            _ => {
                let wide = convert(self, self.ctx.f64_type())?;
                let t = self.float_type(to)?;
                let rounded = self.round_float(wide, t)?;
                if to != F16 {
                    return Ok(rounded.into());
                }
                // LLVM folds `fptrunc (sitofp x)` to `sitofp x` to half when `x`'s
                // significant bits fit its significand, whatever its magnitude (so
                // `i32::MIN` cast to f16 and back was `i32::MIN`): an integer past f16's
                // range becomes ±∞ here explicitly. From 65520 on, f16 rounds to ∞.
                let limit = |v: i64| x.get_type().const_int(v as u64, true);
                let (ge, le) = match from {
                    U32 => (IntPredicate::UGE, None),
                    _ => (IntPredicate::SGE, Some(IntPredicate::SLE)),
                };
                let b = &self.b;
                let above = b
                    .build_int_compare(ge, x, limit(F16_OVERFLOW), "")
                    .or_internal()?;
                let inf = t.const_float(f64::INFINITY);
                let mut v = b.build_select(above, inf, rounded, "").or_internal()?;
                if let Some(le) = le {
                    let below = b
                        .build_int_compare(le, x, limit(-F16_OVERFLOW), "")
                        .or_internal()?;
                    let neg_inf = t.const_float(f64::NEG_INFINITY);
                    v = b
                        .build_select(below, neg_inf, float(v)?, "")
                        .or_internal()?;
                }
                Ok(v)
            }
        }
    }

    fn float_to_int(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let v = self.widen_float(from, x)?;
        let (name, ty) = match to {
            U32 => ("llvm.fptoui.sat", self.ctx.i32_type()),
            I32 => ("llvm.fptosi.sat", self.ctx.i32_type()),
            I64 => ("llvm.fptosi.sat", self.ctx.i64_type()),
            other => return Err(internal(format!("float to {other}"))),
        };
        self.call_intrinsic(name, &[ty.into(), v.get_type().into()], &[v.into()])
    }

    fn float_to_float(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if from == F64 {
            // One rounding straight from f64, also to f16/bf16 (as `Scalar::from_f64`).
            let t = self.float_type(to)?;
            return Ok(self.round_float(float(x)?, t)?.into());
        }
        // f32, f16 and bf16 all widen exactly to f32.
        let v = self.widen_float(from, x)?;
        match to {
            F64 => Ok(self
                .b
                .build_float_ext(v, self.ctx.f64_type(), "")
                .or_internal()?
                .into()),
            F32 => Ok(v.into()),
            _ => self.narrow_float(to, v),
        }
    }
}
