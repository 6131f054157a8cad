//! Rounding a float to a narrower float type, to nearest even, once.
//!
//! The PTX form is LLVM's `fptrunc` (NVPTX has every conversion). On a CPU, `fptrunc`
//! to f16 from f64, and to bf16 from anything, is a call into compiler-rt, which a
//! JIT-loaded kernel cannot count on (and x86's `vcvtneps2bf16` flushes subnormals),
//! so the CPU form rounds in integer arithmetic: f32 → bf16 on the bits, f64 → f16
//! and f64 → bf16 through f32 rounded to odd (truncated, its last bit set when
//! inexact: 24 bits keep both targets' single rounding exact), then f32 → f16 by
//! `fptrunc` (F16C's `vcvtps2ph`, exact to nearest even).

use super::{Flavor, Lower, OrInternal};
use crate::CodegenError;
use inkwell::types::FloatType;
use inkwell::values::{FloatValue, IntValue};
use inkwell::FloatPredicate;

impl<'ctx> Lower<'_, 'ctx> {
    /// `v` rounded to `to` (narrower or equal), to nearest even.
    pub(super) fn round_float(
        &self,
        v: FloatValue<'ctx>,
        to: FloatType<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let (f64t, f32t) = (self.ctx.f64_type(), self.ctx.f32_type());
        let (half, bf16) = (self.ctx.f16_type(), self.ctx.bf16_type());
        let from = v.get_type();
        if self.flavor == Flavor::Ptx || from == to || (to != half && to != bf16) {
            return self.b.build_float_trunc(v, to, "").or_internal();
        }
        let v = if from == f64t {
            self.round_to_odd_f32(v)?
        } else {
            v
        };
        debug_assert!(v.get_type() == f32t);
        if to == half {
            return self.b.build_float_trunc(v, half, "").or_internal();
        }
        let bits = self.f32_to_bf16_bits(v)?;
        Ok(self
            .b
            .build_bit_cast(bits, bf16, "")
            .or_internal()?
            .into_float_value())
    }

    /// An f64 as the f32 truncated toward zero with its last bit set when inexact.
    fn round_to_odd_f32(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let b = &self.b;
        let (f64t, f32t, i32t) = (
            self.ctx.f64_type(),
            self.ctx.f32_type(),
            self.ctx.i32_type(),
        );
        let nearest = b.build_float_trunc(x, f32t, "").or_internal()?;
        let back = b.build_float_ext(nearest, f64t, "").or_internal()?;
        // Ordered and unequal: a NaN is exact (and stays a NaN).
        let inexact = b
            .build_float_compare(FloatPredicate::ONE, back, x, "inexact")
            .or_internal()?;
        let fabs = |v: FloatValue<'ctx>| -> Result<FloatValue<'ctx>, CodegenError> {
            let f = self.call_intrinsic("llvm.fabs", &[f64t.into()], &[v.into()])?;
            Ok(f.into_float_value())
        };
        let away = b
            .build_float_compare(FloatPredicate::OGT, fabs(back)?, fabs(x)?, "")
            .or_internal()?;
        // Rounded away from zero: one step back toward it (the magnitude's bits).
        let down = b.build_and(inexact, away, "").or_internal()?;
        let bits = b
            .build_bit_cast(nearest, i32t, "")
            .or_internal()?
            .into_int_value();
        let step = b.build_int_z_extend(down, i32t, "").or_internal()?;
        let bits = b.build_int_sub(bits, step, "").or_internal()?;
        let odd = b.build_int_z_extend(inexact, i32t, "").or_internal()?;
        let bits = b.build_or(bits, odd, "").or_internal()?;
        Ok(b.build_bit_cast(bits, f32t, "")
            .or_internal()?
            .into_float_value())
    }

    /// The bf16 bits (`i16`) of an f32 rounded to nearest even; a NaN stays a quiet
    /// NaN of the same sign.
    fn f32_to_bf16_bits(&self, v: FloatValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let b = &self.b;
        let (i32t, i16t) = (self.ctx.i32_type(), self.ctx.i16_type());
        let c = |n: u64| i32t.const_int(n, false);
        let bits = b
            .build_bit_cast(v, i32t, "")
            .or_internal()?
            .into_int_value();
        let upper = b.build_right_shift(bits, c(16), false, "").or_internal()?;
        let lsb = b.build_and(upper, c(1), "").or_internal()?;
        let bias = b.build_int_add(lsb, c(0x7fff), "").or_internal()?;
        let rounded = b.build_int_add(bits, bias, "").or_internal()?;
        let rounded = b
            .build_right_shift(rounded, c(16), false, "")
            .or_internal()?;
        let quiet = b.build_or(upper, c(0x40), "").or_internal()?;
        let nan = b
            .build_float_compare(FloatPredicate::UNO, v, v, "nan")
            .or_internal()?;
        let out = b
            .build_select(nan, quiet, rounded, "")
            .or_internal()?
            .into_int_value();
        b.build_int_truncate(out, i16t, "").or_internal()
    }
}
