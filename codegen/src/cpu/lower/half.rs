//! f16 and bf16 conversions, inline in Cranelift IR (bit manipulation, no branches).
//!
//! They reproduce the `half` crate bit for bit, which the interpreter uses:
//! widening is exact and quiets NaNs (sets the top mantissa bit, keeps the payload);
//! narrowing from f32 rounds to nearest even, overflows to infinity, and maps a NaN to
//! a quiet NaN keeping the top payload bits. Narrowing from f64 is a helper call
//! (`kernelc_cpu_f64_to_f16`/`_bf16`), because `half`'s result there depends on the
//! host (see [`crate::cpu::helpers`]).

use super::Lower;
use crate::cpu::helpers::HelperId;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::Ieee32;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_module::Module;
use kernelc_ir::ScalarType;

impl<M: Module> Lower<'_, '_, M> {
    fn i32c(&mut self, v: u32) -> Value {
        self.iconst(types::I32, v as u64)
    }

    fn f32_bits(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::I32, MemFlagsData::new(), v)
    }

    fn f32_from_bits(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::F32, MemFlagsData::new(), v)
    }

    /// f16 bits (`i16`) to f32, exactly.
    pub(crate) fn f16_to_f32(&mut self, h: Value) -> Value {
        let x = self.b.ins().uextend(types::I32, h);
        let em = self.b.ins().band_imm_u(x, 0x7FFF);
        let sign = self.b.ins().band_imm_u(x, 0x8000);
        let sign = self.b.ins().ishl_imm_u(sign, 16);
        let shifted = self.b.ins().ishl_imm_u(em, 13);
        // Normal: rebias the exponent by 127 - 15.
        let bias = self.i32c(112 << 23);
        let normal = self.b.ins().iadd(shifted, bias);
        // Subnormal (or zero): em * 2^-24, exact and never an f32 subnormal.
        let count = self.b.ins().fcvt_from_uint(types::F32, em);
        let scale = self.b.ins().f32const(Ieee32::with_bits(0x3380_0000)); // 2^-24
        let sub = self.b.ins().fmul(count, scale);
        let sub = self.f32_bits(sub);
        // Infinity and NaN: all-ones exponent, NaNs quieted.
        let exp_ones = self.i32c(0x7F80_0000);
        let special = self.b.ins().bor(shifted, exp_ones);
        let f16_inf = self.i32c(0x7C00);
        let is_nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, em, f16_inf);
        let quiet_bit = self.i32c(0x0040_0000);
        let zero = self.i32c(0);
        let quiet = self.b.ins().select(is_nan, quiet_bit, zero);
        let special = self.b.ins().bor(special, quiet);
        let min_normal = self.i32c(0x0400);
        let is_sub = self.b.ins().icmp(IntCC::UnsignedLessThan, em, min_normal);
        let finite = self.b.ins().select(is_sub, sub, normal);
        let is_special = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, em, f16_inf);
        let r = self.b.ins().select(is_special, special, finite);
        let r = self.b.ins().bor(r, sign);
        self.f32_from_bits(r)
    }

    /// f32 to f16 bits (`i16`), rounding to nearest even.
    pub(crate) fn f32_to_f16(&mut self, f: Value) -> Value {
        let x = self.f32_bits(f);
        let hi = self.b.ins().ushr_imm_u(x, 16);
        let sign = self.b.ins().band_imm_u(hi, 0x8000);
        let a = self.b.ins().band_imm_u(x, 0x7FFF_FFFF);
        let top = self.b.ins().ushr_imm_u(a, 13);
        // NaN: quiet, keep the top 10 payload bits.
        let payload = self.b.ins().band_imm_u(top, 0x3FF);
        let nan = self.b.ins().bor_imm_u(payload, 0x7E00);
        // Normal: rebias, then round to nearest even by adding 0xFFF + lsb.
        let lsb = self.b.ins().band_imm_u(top, 1);
        let rebias = self.i32c(0u32.wrapping_sub(112 << 23).wrapping_add(0xFFF));
        let normal = self.b.ins().iadd(a, rebias);
        let normal = self.b.ins().iadd(normal, lsb);
        let normal = self.b.ins().ushr_imm_u(normal, 13);
        // Subnormal: let the FPU round |f| + 0.5 (whose ulp is 2^-24, the f16 subnormal
        // step); the low bits are the f16 result.
        let af = self.f32_from_bits(a);
        let half = self.b.ins().f32const(0.5);
        let sum = self.b.ins().fadd(af, half);
        let sum = self.f32_bits(sum);
        let half_bits = self.i32c(0x3F00_0000);
        let sub = self.b.ins().isub(sum, half_bits);
        let min_normal = self.i32c(0x3880_0000); // 2^-14
        let is_normal = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, a, min_normal);
        let r = self.b.ins().select(is_normal, normal, sub);
        let overflow = self.i32c(0x477F_F000); // 65520: rounds to infinity
        let is_inf = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, a, overflow);
        let inf = self.i32c(0x7C00);
        let r = self.b.ins().select(is_inf, inf, r);
        let f32_inf = self.i32c(0x7F80_0000);
        let is_nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, f32_inf);
        let r = self.b.ins().select(is_nan, nan, r);
        let r = self.b.ins().bor(r, sign);
        self.b.ins().ireduce(types::I16, r)
    }

    /// bf16 bits (`i16`) to f32, exactly (NaNs quieted).
    pub(crate) fn bf16_to_f32(&mut self, h: Value) -> Value {
        let x = self.b.ins().uextend(types::I32, h);
        let a = self.b.ins().band_imm_u(x, 0x7FFF);
        let inf = self.i32c(0x7F80);
        let is_nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, inf);
        let quiet_bit = self.i32c(0x40);
        let zero = self.i32c(0);
        let quiet = self.b.ins().select(is_nan, quiet_bit, zero);
        let x = self.b.ins().bor(x, quiet);
        let x = self.b.ins().ishl_imm_u(x, 16);
        self.f32_from_bits(x)
    }

    /// f32 to bf16 bits (`i16`), rounding to nearest even.
    pub(crate) fn f32_to_bf16(&mut self, f: Value) -> Value {
        let x = self.f32_bits(f);
        let hi = self.b.ins().ushr_imm_u(x, 16);
        let nan = self.b.ins().bor_imm_u(hi, 0x40);
        let lsb = self.b.ins().band_imm_u(hi, 1);
        let round = self.i32c(0x7FFF);
        let r = self.b.ins().iadd(x, round);
        let r = self.b.ins().iadd(r, lsb);
        let r = self.b.ins().ushr_imm_u(r, 16);
        let a = self.b.ins().band_imm_u(x, 0x7FFF_FFFF);
        let inf = self.i32c(0x7F80_0000);
        let is_nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, inf);
        let r = self.b.ins().select(is_nan, nan, r);
        self.b.ins().ireduce(types::I16, r)
    }

    /// f64 to f16 or bf16 bits, by the `half` crate (a helper call).
    pub(crate) fn f64_to_narrow(&mut self, s: ScalarType, v: Value) -> Result<Value, CodegenError> {
        let id = if s == ScalarType::Bf16 {
            HelperId::F64ToBf16
        } else {
            HelperId::F64ToF16
        };
        let bits = self.call_helper(id, &[v])?;
        Ok(self.b.ins().ireduce(types::I16, bits))
    }
}
