//! `Cast`, `Bitcast`, and the f16 rounding every f16 result goes through.
//!
//! * float -> int: `OpConvertFTo*` only on in-range values (it is undefined outside),
//!   the rest saturates, NaN -> 0.
//! * int -> float and f64 -> f32: `OpConvert*ToF` / `OpFConvert` (rounding to nearest).
//! * -> f16: computed in f32, then [`Emitter::round_to_f16`]. From i32/u32/i64 the f32
//!   step cannot change the result (every integer below 65520 in magnitude is exact in
//!   f32, and everything at or above it is infinity in f16); from f64 the f32 step
//!   rounds to odd (see [`Emitter::f64_to_narrow`]) so the result is rounded once.
//! * -> bf16: [`Emitter::round_to_bf16`] after an exact or rounded-to-odd step (from
//!   i32/u32 in integer arithmetic, from f64 as for f16; from i64 through f64, as the
//!   interpreter does).
//! * -> bool: `x != 0` (unordered for floats: NaN -> true). bool -> number: 0 or 1.

use super::emitter::{Emitter, Val, R};
use super::internal;
use kernelc_ir::{Scalar, ScalarType, Type};
use rspirv::spirv::{Op, Word};
use ScalarType::*;

impl Emitter<'_> {
    pub(crate) fn cast(&mut self, to: ScalarType, a: Val) -> R<Val> {
        let from = a.ty.scalar;
        let ty = a.ty.with_scalar(to);
        if from == to {
            return Ok(Val { id: a.id, ty });
        }
        let reg = self.reg_type(ty)?;
        let lanes = a.ty.lanes;
        let id = if to == Bool {
            let bools = reg;
            let zero = self.zero(a.ty)?;
            let op = if from.is_float() {
                Op::FUnordNotEqual
            } else {
                Op::INotEqual
            };
            self.ins(op, bools, &[a.id, zero])?
        } else if from == Bool {
            let one = self.splat_const(Scalar::one(to), lanes)?;
            let zero = self.zero(ty)?;
            self.ins(Op::Select, reg, &[a.id, one, zero])?
        } else {
            match (from.is_float(), to.is_float()) {
                (false, false) => self.int_to_int(from, to, a, reg)?,
                (false, true) => self.int_to_float(from, to, a, reg)?,
                (true, false) => self.float_to_int(from, to, a, reg)?,
                (true, true) => self.float_to_float(from, to, a, reg)?,
            }
        };
        Ok(Val { id, ty })
    }

    fn int_to_float(&mut self, from: ScalarType, to: ScalarType, a: Val, reg: Word) -> R<Word> {
        let lanes = a.ty.lanes;
        let op = if from == U32 {
            Op::ConvertUToF
        } else {
            Op::ConvertSToF
        };
        Ok(match to {
            F32 | F64 => self.ins(op, reg, &[a.id])?,
            F16 => {
                let v = self.ins(op, reg, &[a.id])?;
                self.round_to_f16(v, lanes)?
            }
            // The interpreter rounds i64 -> f64 -> bf16; i32/u32 go exactly to f64
            // first, so they are rounded once.
            Bf16 if from == I64 => {
                let f64s = self.reg_type(Type::vector(F64, lanes))?;
                let wide = self.ins(op, f64s, &[a.id])?;
                self.f64_to_narrow(Bf16, wide, lanes)?
            }
            Bf16 => self.int32_to_bf16(from, a.id, lanes)?,
            _ => return Err(internal(format!("cast {from} -> {to}"))),
        })
    }

    /// i32/u32 -> bf16 rounded once: the magnitude is rounded to odd at 16 significant
    /// bits in integer arithmetic (exact in f32, and 16 > 8 + 2 bits keep the final
    /// rounding correct), converted exactly, and rounded to bf16.
    fn int32_to_bf16(&mut self, from: ScalarType, x: Word, lanes: u8) -> R<Word> {
        let u32s = self.reg_type(Type::vector(U32, lanes))?;
        let f32s = self.reg_type(Type::vector(F32, lanes))?;
        let bools = self.reg_type(Type::vector(Bool, lanes))?;
        let zero = self.u32s(0, lanes)?;
        let one = self.u32s(1, lanes)?;
        let (negative, magnitude) = if from == I32 {
            let i32s = self.reg_type(Type::vector(I32, lanes))?;
            let izero = self.zero(Type::vector(I32, lanes))?;
            let negative = self.ins(Op::SLessThan, bools, &[x, izero])?;
            let negated = self.ins(Op::SNegate, i32s, &[x])?;
            let abs = self.ins(Op::Select, i32s, &[negative, negated, x])?;
            (Some(negative), self.ins(Op::Bitcast, u32s, &[abs])?)
        } else {
            (None, x)
        };
        let msb = self.glsl(super::emitter::Glsl::FindUMsb, u32s, &[magnitude])?;
        let fifteen = self.u32s(15, lanes)?;
        let wide = self.u32s(0x1_0000, lanes)?;
        let is_wide = self.ins(Op::UGreaterThanEqual, bools, &[magnitude, wide])?;
        let excess = self.ins(Op::ISub, u32s, &[msb, fifteen])?;
        let shift = self.ins(Op::Select, u32s, &[is_wide, excess, zero])?;
        let unit = self.ins(Op::ShiftLeftLogical, u32s, &[one, shift])?;
        let low_mask = self.ins(Op::ISub, u32s, &[unit, one])?;
        let low = self.ins(Op::BitwiseAnd, u32s, &[magnitude, low_mask])?;
        let kept = self.ins(Op::BitwiseXor, u32s, &[magnitude, low])?;
        let inexact = self.ins(Op::INotEqual, bools, &[low, zero])?;
        let sticky = self.ins(Op::Select, u32s, &[inexact, unit, zero])?;
        let odd = self.ins(Op::BitwiseOr, u32s, &[kept, sticky])?;
        let mut v = self.ins(Op::ConvertUToF, f32s, &[odd])?;
        if let Some(negative) = negative {
            let negated = self.float_op(Op::FNegate, f32s, &[v])?;
            v = self.ins(Op::Select, f32s, &[negative, negated, v])?;
        }
        self.round_to_bf16(v, lanes)
    }

    /// Rounds f32 values to the nearest bf16 value (ties to even), as f32: integer
    /// arithmetic on the bits (bf16 is the upper half of an f32). NaN passes through.
    pub(crate) fn round_to_bf16(&mut self, x: Word, lanes: u8) -> R<Word> {
        let f32s = self.reg_type(Type::vector(F32, lanes))?;
        let u32s = self.reg_type(Type::vector(U32, lanes))?;
        let bools = self.reg_type(Type::vector(Bool, lanes))?;
        let bits = self.ins(Op::Bitcast, u32s, &[x])?;
        let sixteen = self.u32s(16, lanes)?;
        let one = self.u32s(1, lanes)?;
        let shifted = self.ins(Op::ShiftRightLogical, u32s, &[bits, sixteen])?;
        let lsb = self.ins(Op::BitwiseAnd, u32s, &[shifted, one])?;
        let half_minus_one = self.u32s(0x7fff, lanes)?;
        let biased = self.ins(Op::IAdd, u32s, &[bits, half_minus_one])?;
        let biased = self.ins(Op::IAdd, u32s, &[biased, lsb])?;
        let keep = self.u32s(0xffff_0000, lanes)?;
        let rounded = self.ins(Op::BitwiseAnd, u32s, &[biased, keep])?;
        let nan = self.is_nan(bools, x)?;
        let out = self.ins(Op::Select, u32s, &[nan, bits, rounded])?;
        self.ins(Op::Bitcast, f32s, &[out])
    }

    fn int_to_int(&mut self, from: ScalarType, to: ScalarType, a: Val, reg: Word) -> R<Word> {
        let lanes = a.ty.lanes;
        Ok(match (from, to) {
            // i32 <-> u32: the same bits.
            (I32, U32) | (U32, I32) => self.ins(Op::Bitcast, reg, &[a.id])?,
            (I32, I64) => self.ins(Op::SConvert, reg, &[a.id])?,
            (U32, I64) => {
                // OpUConvert's result must be unsigned in shaders: widen as u64, then
                // reinterpret.
                let u64_ty = self.u64_ty();
                let u64s = self.vector_of(u64_ty, lanes);
                let wide = self.ins(Op::UConvert, u64s, &[a.id])?;
                self.ins(Op::Bitcast, reg, &[wide])?
            }
            (I64, I32) => self.ins(Op::SConvert, reg, &[a.id])?,
            (I64, U32) => {
                let i32s = self.reg_type(Type::vector(I32, lanes))?;
                let low = self.ins(Op::SConvert, i32s, &[a.id])?;
                self.ins(Op::Bitcast, reg, &[low])?
            }
            _ => return Err(internal(format!("cast {from} -> {to}"))),
        })
    }

    /// Truncating, saturating, NaN -> 0. Values in `(MIN - 1, MAX + 1)` are converted
    /// (`OpConvertFTo*` truncates them into range); others are never handed to it.
    fn float_to_int(&mut self, from: ScalarType, to: ScalarType, a: Val, reg: Word) -> R<Word> {
        let lanes = a.ty.lanes;
        let fty = a.ty;
        let freg = self.reg_type(fty)?;
        let bools = self.reg_type(fty.with_scalar(Bool))?;
        // Bounds: `x > below` and `x < above` is the convertible range; `below` is
        // MIN - 1 (rounded to the float type: then `x > below` may drop MIN itself,
        // which then saturates to MIN anyway).
        let (below, above, min, max) = match to {
            I32 => (
                -2147483649.0,
                2147483648.0,
                Scalar::I32(i32::MIN),
                Scalar::I32(i32::MAX),
            ),
            U32 => (-1.0, 4294967296.0, Scalar::U32(0), Scalar::U32(u32::MAX)),
            I64 => (
                -9223372036854775808.0 - 1.0,
                9223372036854775808.0,
                Scalar::I64(i64::MIN),
                Scalar::I64(i64::MAX),
            ),
            _ => return Err(internal(format!("cast {from} -> {to}"))),
        };
        let as_float = |v: f64| {
            if from == F64 {
                Scalar::F64(v.to_bits())
            } else {
                Scalar::F32((v as f32).to_bits())
            }
        };
        let below = self.splat_const(as_float(below), lanes)?;
        let above = self.splat_const(as_float(above), lanes)?;
        let fzero = self.zero(fty)?;
        let izero = self.zero(a.ty.with_scalar(to))?;
        let min = self.splat_const(min, lanes)?;
        let max = self.splat_const(max, lanes)?;
        let gt_below = self.ins(Op::FOrdGreaterThan, bools, &[a.id, below])?;
        let lt_above = self.ins(Op::FOrdLessThan, bools, &[a.id, above])?;
        let in_range = self.and(bools, gt_below, lt_above)?;
        let safe = self.ins(Op::Select, freg, &[in_range, a.id, fzero])?;
        let op = if to == U32 {
            Op::ConvertFToU
        } else {
            Op::ConvertFToS
        };
        let t = self.ins(op, reg, &[safe])?;
        let r = self.ins(Op::Select, reg, &[in_range, t, izero])?;
        let too_big = self.ins(Op::FOrdGreaterThanEqual, bools, &[a.id, above])?;
        let r = self.ins(Op::Select, reg, &[too_big, max, r])?;
        let too_small = self.ins(Op::FOrdLessThanEqual, bools, &[a.id, below])?;
        self.ins(Op::Select, reg, &[too_small, min, r])
    }

    fn float_to_float(&mut self, from: ScalarType, to: ScalarType, a: Val, reg: Word) -> R<Word> {
        let lanes = a.ty.lanes;
        Ok(match (from, to) {
            // f16/bf16 values are already f32 registers on their grid.
            (F16 | Bf16, F32) => a.id,
            (F32 | Bf16, F16) => self.round_to_f16(a.id, lanes)?,
            (F32 | F16, Bf16) => self.round_to_bf16(a.id, lanes)?,
            (F16 | Bf16 | F32, F64) | (F64, F32) => self.ins(Op::FConvert, reg, &[a.id])?,
            (F64, F16 | Bf16) => self.f64_to_narrow(to, a.id, lanes)?,
            _ => return Err(internal(format!("cast {from} -> {to}"))),
        })
    }

    /// f64 -> f16/bf16 rounded once: f64 -> f32 rounded to odd (truncate, then set the
    /// lowest bit if inexact), which keeps enough bits (24 > 11 + 2) for the final
    /// rounding to be the correctly rounded one.
    fn f64_to_narrow(&mut self, to: ScalarType, x: Word, lanes: u8) -> R<Word> {
        let f64s = self.reg_type(Type::vector(F64, lanes))?;
        let f32s = self.reg_type(Type::vector(F32, lanes))?;
        let u32s = self.reg_type(Type::vector(U32, lanes))?;
        let bools = self.reg_type(Type::vector(Bool, lanes))?;
        let y = self.ins(Op::FConvert, f32s, &[x])?;
        let back = self.ins(Op::FConvert, f64s, &[y])?;
        let back_abs = self.glsl(super::emitter::Glsl::FAbs, f64s, &[back])?;
        let x_abs = self.glsl(super::emitter::Glsl::FAbs, f64s, &[x])?;
        let inexact = self.ins(Op::FOrdNotEqual, bools, &[back, x])?;
        let rounded_up = self.ins(Op::FOrdGreaterThan, bools, &[back_abs, x_abs])?;
        let bits = self.ins(Op::Bitcast, u32s, &[y])?;
        let one = self.u32s(1, lanes)?;
        let zero = self.u32s(0, lanes)?;
        let down = self.ins(Op::Select, u32s, &[rounded_up, one, zero])?;
        let truncated = self.ins(Op::ISub, u32s, &[bits, down])?;
        let sticky = self.ins(Op::Select, u32s, &[inexact, one, zero])?;
        let odd = self.ins(Op::BitwiseOr, u32s, &[truncated, sticky])?;
        let y_odd = self.ins(Op::Bitcast, f32s, &[odd])?;
        if to == Bf16 {
            self.round_to_bf16(y_odd, lanes)
        } else {
            self.round_to_f16(y_odd, lanes)
        }
    }

    /// Rounds f32 values to the nearest f16 value (ties to even), as f32: integer bit
    /// manipulation only, so the result does not depend on the device's rounding
    /// mode. Overflow gives infinity; NaN and infinities pass through.
    pub(crate) fn round_to_f16(&mut self, x: Word, lanes: u8) -> R<Word> {
        let f32s = self.reg_type(Type::vector(F32, lanes))?;
        let u32s = self.reg_type(Type::vector(U32, lanes))?;
        let bools = self.reg_type(Type::vector(Bool, lanes))?;
        let c = |e: &mut Self, v: u32| e.u32s(v, lanes);
        let bits = self.ins(Op::Bitcast, u32s, &[x])?;
        let sign_mask = c(self, 0x8000_0000)?;
        let sign = self.ins(Op::BitwiseAnd, u32s, &[bits, sign_mask])?;
        let abs_mask = c(self, 0x7fff_ffff)?;
        let a = self.ins(Op::BitwiseAnd, u32s, &[bits, abs_mask])?;

        // Normal f16 range: drop 13 mantissa bits, ties to even; a carry into the
        // exponent is right, and past the largest f16 gives infinity.
        let thirteen = c(self, 13)?;
        let one = c(self, 1)?;
        let shifted = self.ins(Op::ShiftRightLogical, u32s, &[a, thirteen])?;
        let lsb = self.ins(Op::BitwiseAnd, u32s, &[shifted, one])?;
        let half_minus_one = c(self, 0x0fff)?;
        let biased = self.ins(Op::IAdd, u32s, &[a, half_minus_one])?;
        let biased = self.ins(Op::IAdd, u32s, &[biased, lsb])?;
        let keep = c(self, !0x1fff)?;
        let normal = self.ins(Op::BitwiseAnd, u32s, &[biased, keep])?;
        let f16_inf = c(self, 0x4780_0000)?; // 65536: the first value past f16's range
        let f32_inf = c(self, 0x7f80_0000)?;
        let overflow = self.ins(Op::UGreaterThanEqual, bools, &[normal, f16_inf])?;
        let normal = self.ins(Op::Select, u32s, &[overflow, f32_inf, normal])?;

        // Subnormal f16 range (|x| < 2^-14): round the significand to a multiple of
        // 2^-24, i.e. shift it right by 126 - exponent (clamped to 31, where the
        // result is 0), ties to even, and scale back exactly.
        let twenty_three = c(self, 23)?;
        let exp = self.ins(Op::ShiftRightLogical, u32s, &[a, twenty_three])?;
        let mant_mask = c(self, 0x007f_ffff)?;
        let mant = self.ins(Op::BitwiseAnd, u32s, &[a, mant_mask])?;
        let implicit = c(self, 0x0080_0000)?;
        let m = self.ins(Op::BitwiseOr, u32s, &[mant, implicit])?;
        let k126 = c(self, 126)?;
        let s = self.ins(Op::ISub, u32s, &[k126, exp])?;
        let k31 = c(self, 31)?;
        let s = self.glsl(super::emitter::Glsl::UMin, u32s, &[s, k31])?;
        let q = self.ins(Op::ShiftRightLogical, u32s, &[m, s])?;
        let unit = self.ins(Op::ShiftLeftLogical, u32s, &[one, s])?;
        let rem_mask = self.ins(Op::ISub, u32s, &[unit, one])?;
        let rem = self.ins(Op::BitwiseAnd, u32s, &[m, rem_mask])?;
        let s_minus_one = self.ins(Op::ISub, u32s, &[s, one])?;
        let half = self.ins(Op::ShiftLeftLogical, u32s, &[one, s_minus_one])?;
        let above_half = self.ins(Op::UGreaterThan, bools, &[rem, half])?;
        let at_half = self.ins(Op::IEqual, bools, &[rem, half])?;
        let q_lsb = self.ins(Op::BitwiseAnd, u32s, &[q, one])?;
        let q_odd = self.ins(Op::IEqual, bools, &[q_lsb, one])?;
        let tie_up = self.and(bools, at_half, q_odd)?;
        let up = self.or(bools, above_half, tie_up)?;
        let zero = c(self, 0)?;
        let inc = self.ins(Op::Select, u32s, &[up, one, zero])?;
        let q = self.ins(Op::IAdd, u32s, &[q, inc])?;
        let qf = self.ins(Op::ConvertUToF, f32s, &[q])?;
        let scale = self.splat_const(Scalar::f32(f32::from_bits(0x3380_0000)), lanes)?; // 2^-24
        let sub = self.float_op(Op::FMul, f32s, &[qf, scale])?;
        let sub = self.ins(Op::Bitcast, u32s, &[sub])?;

        let min_normal = c(self, 0x3880_0000)?; // 2^-14
        let is_sub = self.ins(Op::ULessThan, bools, &[a, min_normal])?;
        let mag = self.ins(Op::Select, u32s, &[is_sub, sub, normal])?;
        let special = self.ins(Op::UGreaterThanEqual, bools, &[a, f32_inf])?;
        let mag = self.ins(Op::Select, u32s, &[special, a, mag])?;
        let out = self.ins(Op::BitwiseOr, u32s, &[mag, sign])?;
        self.ins(Op::Bitcast, f32s, &[out])
    }

    pub(crate) fn bitcast(&mut self, to: ScalarType, a: Val) -> R<Val> {
        let ty = a.ty.with_scalar(to);
        let from = a.ty.scalar;
        if from == to {
            return Ok(Val { id: a.id, ty });
        }
        if from == Bool || to == Bool || from.size_bytes() != to.size_bytes() {
            return Err(internal(format!("bitcast {from} -> {to}")));
        }
        if matches!(from, F16 | Bf16) || matches!(to, F16 | Bf16) {
            return Err(super::unsupported(format!(
                "a bitcast from {from} to {to} (16-bit floats live in f32 registers here)"
            )));
        }
        let reg = self.reg_type(ty)?;
        Ok(Val {
            id: self.ins(Op::Bitcast, reg, &[a.id])?,
            ty,
        })
    }
}

/// An f16 value from the low 16 bits of a u32 word, as an exact f32.
pub(crate) fn f16_bits_to_f32(e: &mut Emitter, word: Word) -> R<Word> {
    let u = e.u32_ty();
    let f = e.f32_ty();
    let b = e.bool_ty();
    let k = |e: &mut Emitter, v: u32| e.const_u32(v);
    let sign_bit = k(e, 0x8000);
    let sign = e.ins(Op::BitwiseAnd, u, &[word, sign_bit])?;
    let sixteen = k(e, 16);
    let sign = e.ins(Op::ShiftLeftLogical, u, &[sign, sixteen])?;
    let ten = k(e, 10);
    let exp = e.ins(Op::ShiftRightLogical, u, &[word, ten])?;
    let five_bits = k(e, 0x1f);
    let exp = e.ins(Op::BitwiseAnd, u, &[exp, five_bits])?;
    let ten_bits = k(e, 0x3ff);
    let mant = e.ins(Op::BitwiseAnd, u, &[word, ten_bits])?;
    let thirteen = k(e, 13);
    let mant_hi = e.ins(Op::ShiftLeftLogical, u, &[mant, thirteen])?;
    // Normal: rebias the exponent (127 - 15 = 112).
    let rebias = k(e, 112);
    let exp32 = e.ins(Op::IAdd, u, &[exp, rebias])?;
    let twenty_three = k(e, 23);
    let exp32 = e.ins(Op::ShiftLeftLogical, u, &[exp32, twenty_three])?;
    let normal = e.ins(Op::BitwiseOr, u, &[exp32, mant_hi])?;
    // Infinity / NaN.
    let inf = k(e, 0x7f80_0000);
    let special = e.ins(Op::BitwiseOr, u, &[inf, mant_hi])?;
    // Subnormal (and zero): mant * 2^-24, exact.
    let mant_f = e.ins(Op::ConvertUToF, f, &[mant])?;
    let scale = e.const_f32(f32::from_bits(0x3380_0000));
    let sub = e.float_op(Op::FMul, f, &[mant_f, scale])?;
    let sub = e.ins(Op::Bitcast, u, &[sub])?;
    let zero = k(e, 0);
    let is_sub = e.ins(Op::IEqual, b, &[exp, zero])?;
    let is_special = e.ins(Op::IEqual, b, &[exp, five_bits])?;
    let mag = e.ins(Op::Select, u, &[is_special, special, normal])?;
    let mag = e.ins(Op::Select, u, &[is_sub, sub, mag])?;
    let out = e.ins(Op::BitwiseOr, u, &[mag, sign])?;
    e.ins(Op::Bitcast, f, &[out])
}
