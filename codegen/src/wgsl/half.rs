//! f16 and bf16 values, held as f32.
//!
//! The IR computes f16/bf16 arithmetic in f32 and rounds each result back; this
//! target holds every f16/bf16 *value* as the f32 of equal value and does the rounding
//! itself, in integer arithmetic on the bits (round to nearest, ties to even, with
//! f16's subnormals and overflow to infinity), because WGSL leaves the rounding of
//! f32 -> f16 conversions to the implementation and has no bf16 at all. Only f16
//! *memory* (buffers, shared arrays) uses WGSL's `f16`, converted on load (exact) and on
//! store (exact, the value being representable). So a kernel that only computes with
//! f16/bf16 values (e.g. rounds f32 inputs to bf16 precision) needs no `enable f16`.

use super::lower::{Lower, Val};
use crate::CodegenError;
use kernelc_ir::{Scalar, ScalarType, Type};
use naga::{BinaryOperator as Bo, Expression, Handle, MathFunction, ScalarKind, UnaryOperator};

type H = Handle<Expression>;

const SIGN: u32 = 0x8000_0000;
const MAGNITUDE: u32 = 0x7fff_ffff;
const F32_INFINITY: u32 = 0x7f80_0000;
/// The bits of 2^-14, f16's smallest normal number.
const F16_MIN_NORMAL: u32 = 0x3880_0000;
/// The bits of 65520, the smallest magnitude that rounds to infinity in f16.
const F16_OVERFLOW: u32 = 0x477f_f000;
/// 2^24 and 2^-24: f16 subnormals are the multiples of 2^-24.
const TWO_POW_24: f64 = 16_777_216.0;
const TWO_POW_MINUS_24: f64 = 1.0 / 16_777_216.0;
/// f32 exponent bias minus f16 exponent bias, in place.
const REBIAS: u32 = 112 << 23;

impl Lower<'_> {
    /// A `u32` constant in `lanes` lanes.
    fn u32s(&mut self, lanes: u8, v: u32) -> Result<H, CodegenError> {
        self.konst(Type::vector(ScalarType::U32, lanes), Scalar::U32(v))
    }

    fn f32s(&mut self, lanes: u8, v: f64) -> Result<H, CodegenError> {
        self.konst_of(Type::vector(ScalarType::F32, lanes), v)
    }

    /// `x op c` with a `u32` constant `c` in `lanes` lanes.
    fn with_u32(&mut self, op: Bo, x: H, lanes: u8, c: u32) -> Result<H, CodegenError> {
        let c = self.u32s(lanes, c)?;
        Ok(self.binary(op, x, c))
    }

    /// An f32 result rounded to the precision of `ty`'s float type (f16, bf16), as an
    /// f32; f32 results are returned as they are.
    pub(super) fn round_to(&mut self, x: H, ty: Type) -> Result<H, CodegenError> {
        match ty.scalar {
            ScalarType::F16 => self.round_to_f16(x, ty.lanes),
            ScalarType::Bf16 => self.round_to_bf16(x, ty.lanes),
            _ => Ok(x),
        }
    }

    /// The nearest f16 (ties to even) of f32 values, as f32: the 13 low significand
    /// bits rounded away in the normal range, a multiple of 2^-24 below it (exact in
    /// f32: `round(x * 2^24) * 2^-24`), infinity from 65520 up, NaN kept.
    fn round_to_f16(&mut self, x: H, lanes: u8) -> Result<H, CodegenError> {
        let bits = self.bitcast(x, ScalarKind::Uint);
        let sign = self.with_u32(Bo::And, bits, lanes, SIGN)?;
        let a = self.with_u32(Bo::And, bits, lanes, MAGNITUDE)?;

        let shifted = self.with_u32(Bo::ShiftRight, a, lanes, 13)?;
        let lsb = self.with_u32(Bo::And, shifted, lanes, 1)?;
        let biased = self.with_u32(Bo::Add, a, lanes, 0xfff)?;
        let biased = self.binary(Bo::Add, biased, lsb);
        let normal = self.with_u32(Bo::And, biased, lanes, !0x1fff)?;

        let ax = self.bitcast(a, ScalarKind::Float);
        let up = self.f32s(lanes, TWO_POW_24)?;
        let scaled = self.binary(Bo::Multiply, ax, up);
        let units = self.math(MathFunction::Round, &[scaled])?;
        let down = self.f32s(lanes, TWO_POW_MINUS_24)?;
        let sub = self.binary(Bo::Multiply, units, down);
        let sub = self.bitcast(sub, ScalarKind::Uint);

        let is_sub = self.with_u32(Bo::Less, a, lanes, F16_MIN_NORMAL)?;
        let mag = self.select(is_sub, sub, normal);
        let overflows = self.with_u32(Bo::GreaterEqual, a, lanes, F16_OVERFLOW)?;
        let inf = self.u32s(lanes, F32_INFINITY)?;
        let mag = self.select(overflows, inf, mag);
        let nan = self.with_u32(Bo::Greater, a, lanes, F32_INFINITY)?;
        let mag = self.select(nan, a, mag);
        let r = self.binary(Bo::InclusiveOr, mag, sign);
        Ok(self.bitcast(r, ScalarKind::Float))
    }

    /// The nearest bf16 (ties to even) of f32 values, as f32: the 16 low bits rounded
    /// away (a carry into the exponent is the correct rounding, up to infinity); NaN
    /// stays a (quiet) NaN.
    fn round_to_bf16(&mut self, x: H, lanes: u8) -> Result<H, CodegenError> {
        let bits = self.bitcast(x, ScalarKind::Uint);
        let shifted = self.with_u32(Bo::ShiftRight, bits, lanes, 16)?;
        let lsb = self.with_u32(Bo::And, shifted, lanes, 1)?;
        let biased = self.with_u32(Bo::Add, bits, lanes, 0x7fff)?;
        let biased = self.binary(Bo::Add, biased, lsb);
        let rounded = self.with_u32(Bo::And, biased, lanes, 0xffff_0000)?;
        let a = self.with_u32(Bo::And, bits, lanes, MAGNITUDE)?;
        let nan = self.with_u32(Bo::Greater, a, lanes, F32_INFINITY)?;
        let quiet = self.with_u32(Bo::InclusiveOr, bits, lanes, 0x0040_0000)?;
        let quiet = self.with_u32(Bo::And, quiet, lanes, 0xffff_0000)?;
        let r = self.select(nan, quiet, rounded);
        Ok(self.bitcast(r, ScalarKind::Float))
    }

    /// An i32/u32 value converted to f32 with rounding to odd (truncate, then set the
    /// last kept bit if anything nonzero was dropped): exact below 2^24, and with 24
    /// bits, enough for a following round to f16 or bf16 to be the one correct rounding
    /// of the integer (rounding twice to nearest would not be).
    pub(super) fn int_to_f32_odd(&mut self, x: Val) -> Result<H, CodegenError> {
        let lanes = x.ty.lanes;
        let signed = x.ty.scalar == ScalarType::I32;
        let (negative, mag) = if signed {
            let zero = self.konst_of(x.ty, 0.0)?;
            let negative = self.binary(Bo::Less, x.h, zero);
            let neg = self.unary(UnaryOperator::Negate, x.h);
            // |MIN| wraps to MIN, whose bits are 2^31: right as a u32.
            let abs = self.select(negative, neg, x.h);
            (Some(negative), self.bitcast(abs, ScalarKind::Uint))
        } else {
            (None, x.h)
        };
        let lz = self.math(MathFunction::CountLeadingZeros, &[mag])?;
        let eight = self.u32s(lanes, 8)?;
        let wide = self.binary(Bo::Less, lz, eight);
        let drop = self.binary(Bo::Subtract, eight, lz);
        let zero = self.u32s(lanes, 0)?;
        let k = self.select(wide, drop, zero);
        let one = self.u32s(lanes, 1)?;
        let unit = self.binary(Bo::ShiftLeft, one, k);
        let low_mask = self.binary(Bo::Subtract, unit, one);
        let dropped = self.binary(Bo::And, mag, low_mask);
        let keep_mask = self.unary(UnaryOperator::BitwiseNot, low_mask);
        let kept = self.binary(Bo::And, mag, keep_mask);
        let inexact = self.binary(Bo::NotEqual, dropped, zero);
        let sticky = self.select(inexact, unit, zero);
        let odd = self.binary(Bo::InclusiveOr, kept, sticky);
        let f = self.convert(odd, ScalarKind::Float, 4);
        Ok(match negative {
            Some(negative) => {
                let neg = self.unary(UnaryOperator::Negate, f);
                self.select(negative, neg, f)
            }
            None => f,
        })
    }

    /// f16 bits (the low 16 bits of `u32` lanes) decoded to f32, exactly.
    pub(super) fn f16_bits_to_f32(&mut self, bits: H, lanes: u8) -> Result<H, CodegenError> {
        let h = self.with_u32(Bo::And, bits, lanes, 0xffff)?;
        let sign_bit = self.with_u32(Bo::And, h, lanes, 0x8000)?;
        let sign = self.with_u32(Bo::ShiftLeft, sign_bit, lanes, 16)?;
        let e = self.with_u32(Bo::ShiftRight, h, lanes, 10)?;
        let e = self.with_u32(Bo::And, e, lanes, 0x1f)?;
        let m = self.with_u32(Bo::And, h, lanes, 0x3ff)?;
        let m_hi = self.with_u32(Bo::ShiftLeft, m, lanes, 13)?;
        let e_hi = self.with_u32(Bo::ShiftLeft, e, lanes, 23)?;
        let e_hi = self.with_u32(Bo::Add, e_hi, lanes, REBIAS)?;
        let normal = self.binary(Bo::InclusiveOr, e_hi, m_hi);
        let special = self.with_u32(Bo::InclusiveOr, m_hi, lanes, F32_INFINITY)?;
        let mf = self.convert(m, ScalarKind::Float, 4);
        let unit = self.f32s(lanes, TWO_POW_MINUS_24)?;
        let sub = self.binary(Bo::Multiply, mf, unit);
        let sub = self.bitcast(sub, ScalarKind::Uint);
        let is_sub = self.with_u32(Bo::Equal, e, lanes, 0)?;
        let is_special = self.with_u32(Bo::Equal, e, lanes, 0x1f)?;
        let mag = self.select(is_special, special, normal);
        let mag = self.select(is_sub, sub, mag);
        let r = self.binary(Bo::InclusiveOr, mag, sign);
        Ok(self.bitcast(r, ScalarKind::Float))
    }

    /// The f16 bits (in `u32` lanes) of f32 values that are f16 values.
    fn f32_to_f16_bits(&mut self, x: H, lanes: u8) -> Result<H, CodegenError> {
        let b = self.bitcast(x, ScalarKind::Uint);
        let sign = self.with_u32(Bo::ShiftRight, b, lanes, 16)?;
        let sign = self.with_u32(Bo::And, sign, lanes, 0x8000)?;
        let a = self.with_u32(Bo::And, b, lanes, MAGNITUDE)?;
        let rebased = self.with_u32(Bo::Subtract, a, lanes, REBIAS)?;
        let normal = self.with_u32(Bo::ShiftRight, rebased, lanes, 13)?;
        let nan = self.with_u32(Bo::Greater, a, lanes, F32_INFINITY)?;
        let quiet = self.u32s(lanes, 0x7e00)?;
        let inf = self.u32s(lanes, 0x7c00)?;
        let special = self.select(nan, quiet, inf);
        let ax = self.bitcast(a, ScalarKind::Float);
        let up = self.f32s(lanes, TWO_POW_24)?;
        let units = self.binary(Bo::Multiply, ax, up);
        let sub = self.convert(units, ScalarKind::Uint, 4);
        let is_sub = self.with_u32(Bo::Less, a, lanes, F16_MIN_NORMAL)?;
        let is_special = self.with_u32(Bo::GreaterEqual, a, lanes, F32_INFINITY)?;
        let mag = self.select(is_special, special, normal);
        let mag = self.select(is_sub, sub, mag);
        Ok(self.binary(Bo::InclusiveOr, mag, sign))
    }

    /// Reinterprets f16 as bf16 bits or back (both held as f32).
    pub(super) fn bitcast_half(&mut self, to: ScalarType, a: Val) -> Result<H, CodegenError> {
        let lanes = a.ty.lanes;
        match (a.ty.scalar, to) {
            (ScalarType::F16, ScalarType::Bf16) => {
                let bits = self.f32_to_f16_bits(a.h, lanes)?;
                let high = self.with_u32(Bo::ShiftLeft, bits, lanes, 16)?;
                Ok(self.bitcast(high, ScalarKind::Float))
            }
            (ScalarType::Bf16, ScalarType::F16) => {
                let bits = self.bitcast(a.h, ScalarKind::Uint);
                let low = self.with_u32(Bo::ShiftRight, bits, lanes, 16)?;
                self.f16_bits_to_f32(low, lanes)
            }
            (from, to) => Err(super::lower::internal(format!("bitcast {from} -> {to}"))),
        }
    }
}
