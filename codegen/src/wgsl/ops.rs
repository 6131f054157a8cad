//! Building blocks over naga expressions, and the operators whose IR semantics WGSL
//! does not guarantee (integer division, shifts, float -> int casts, minNum/maxNum,
//! f16 rounding, the status word), spelled out explicitly.

use super::lower::{internal, Lower, Val};
use super::types;
use crate::abi::status;
use crate::CodegenError;
use kernelc_ir::{Scalar, ScalarType, Type};
use naga::{
    AtomicFunction, BinaryOperator as Bo, Expression, Handle, Literal, MathFunction,
    RelationalFunction, ScalarKind, Statement, UnaryOperator,
};

type H = Handle<Expression>;

/// Bits of an f32 other than the sign.
const F32_MAGNITUDE: u32 = 0x7fff_ffff;
/// The bits of +infinity; a magnitude above it is a NaN.
const F32_INFINITY: u32 = 0x7f80_0000;

impl Lower<'_> {
    // -- plain expressions --------------------------------------------------------------

    pub(super) fn e(&mut self, e: Expression) -> H {
        self.f.expr(e)
    }

    pub(super) fn binary(&mut self, op: Bo, left: H, right: H) -> H {
        self.e(Expression::Binary { op, left, right })
    }

    pub(super) fn unary(&mut self, op: UnaryOperator, expr: H) -> H {
        self.e(Expression::Unary { op, expr })
    }

    /// `cond ? accept : reject` (WGSL `select(reject, accept, cond)`).
    pub(super) fn select(&mut self, condition: H, accept: H, reject: H) -> H {
        self.e(Expression::Select {
            condition,
            accept,
            reject,
        })
    }

    pub(super) fn math(&mut self, fun: MathFunction, args: &[H]) -> Result<H, CodegenError> {
        let (&arg, rest) = args
            .split_first()
            .ok_or_else(|| internal(format!("{fun:?} without arguments")))?;
        Ok(self.e(Expression::Math {
            fun,
            arg,
            arg1: rest.first().copied(),
            arg2: rest.get(1).copied(),
            arg3: rest.get(2).copied(),
        }))
    }

    /// Value conversion to `kind` of `width` bytes (shape kept).
    pub(super) fn convert(&mut self, expr: H, kind: ScalarKind, width: u8) -> H {
        self.e(Expression::As {
            expr,
            kind,
            convert: Some(width),
        })
    }

    /// Reinterprets the bits as `kind` of the same width (shape kept).
    pub(super) fn bitcast(&mut self, expr: H, kind: ScalarKind) -> H {
        self.e(Expression::As {
            expr,
            kind,
            convert: None,
        })
    }

    /// `any(cond)` for a bool vector; `cond` itself for a scalar.
    pub(super) fn any(&mut self, cond: H, lanes: u8) -> H {
        if lanes == 1 {
            cond
        } else {
            self.e(Expression::Relational {
                fun: RelationalFunction::Any,
                argument: cond,
            })
        }
    }

    // -- constants ------------------------------------------------------------------------

    pub(super) fn lit_u32(&mut self, v: u32) -> H {
        self.f.expr(Expression::Literal(Literal::U32(v)))
    }

    /// A scalar constant (f16 and bf16 as the f32 of equal value). WGSL cannot spell
    /// non-finite floats, so those are bitcasts of their f32 bits.
    pub(super) fn lit(&mut self, s: Scalar) -> Result<H, CodegenError> {
        let literal = match s {
            Scalar::Bool(b) => Literal::Bool(b),
            Scalar::I32(v) => Literal::I32(v),
            Scalar::U32(v) => Literal::U32(v),
            Scalar::F32(_) | Scalar::F16(_) | Scalar::Bf16(_) => {
                let v = s.to_f64() as f32;
                if !v.is_finite() {
                    let b = self.lit_u32(v.to_bits());
                    return Ok(self.bitcast(b, ScalarKind::Float));
                }
                Literal::F32(v)
            }
            other => return Err(types::unsupported_type(other.ty())),
        };
        Ok(self.f.expr(Expression::Literal(literal)))
    }

    /// A constant of type `ty`: `s` (of `ty`'s scalar type) in every lane.
    pub(super) fn konst(&mut self, ty: Type, s: Scalar) -> Result<H, CodegenError> {
        let h = self.lit(s)?;
        self.splat(h, ty.lanes)
    }

    /// `value` in `lanes` lanes (itself for one lane).
    pub(super) fn splat(&mut self, value: H, lanes: u8) -> Result<H, CodegenError> {
        Ok(match types::vector_size(lanes)? {
            None => value,
            Some(size) => self.e(Expression::Splat { size, value }),
        })
    }

    /// The constant `v` (an f64 exactly representable in `ty`) in `ty`'s shape.
    pub(super) fn konst_of(&mut self, ty: Type, v: f64) -> Result<H, CodegenError> {
        self.konst(ty, Scalar::from_f64(ty.scalar, v))
    }

    // -- the status word ------------------------------------------------------------------

    /// `atomicOr(&status[0], bits)`.
    pub(super) fn raise(&mut self, bits: H) {
        self.f.stmt(Statement::Atomic {
            pointer: self.status_ptr,
            fun: AtomicFunction::InclusiveOr,
            value: bits,
            result: None,
        });
    }

    /// `if cond { atomicOr(&status[0], bits) }` (`cond` a scalar bool).
    pub(super) fn raise_if(&mut self, cond: H, bits: H) -> Result<(), CodegenError> {
        self.if_then(cond, |l| {
            l.raise(bits);
            Ok(())
        })
    }

    // -- floats ---------------------------------------------------------------------------

    /// Whether each lane of an f32 value is NaN, tested on the bits (immune to any
    /// assumption that NaNs do not occur).
    pub(super) fn is_nan_f32(&mut self, x: H, lanes: u8) -> Result<H, CodegenError> {
        let u = Type::vector(ScalarType::U32, lanes);
        let bits = self.bitcast(x, ScalarKind::Uint);
        let mask = self.konst(u, Scalar::U32(F32_MAGNITUDE))?;
        let magnitude = self.binary(Bo::And, bits, mask);
        let inf = self.konst(u, Scalar::U32(F32_INFINITY))?;
        Ok(self.binary(Bo::Greater, magnitude, inf))
    }

    /// `f` applied to float arguments of type `ty` (all held as f32), its result
    /// rounded to `ty` (f16/bf16 compute in f32 and round after every operation).
    pub(super) fn float_op(
        &mut self,
        ty: Type,
        args: &[Val],
        f: impl FnOnce(&mut Self, &[H]) -> Result<H, CodegenError>,
    ) -> Result<H, CodegenError> {
        let held: Vec<H> = args.iter().map(|a| a.h).collect();
        let r = f(self, &held)?;
        self.round_to(r, ty)
    }

    /// IEEE minNum (`is_min`) or maxNum of two float values of type `ty`, as the
    /// interpreter (Rust's `f32::min`): a NaN operand yields the other one; equal
    /// operands (e.g. -0 and +0) yield the first. The result is an operand: no
    /// rounding.
    pub(super) fn float_min_max(
        &mut self,
        is_min: bool,
        x: Val,
        y: Val,
    ) -> Result<H, CodegenError> {
        let op = if is_min { Bo::Less } else { Bo::Greater };
        let better = self.binary(op, y.h, x.h);
        let picked = self.select(better, y.h, x.h);
        let x_nan = self.is_nan_f32(x.h, x.ty.lanes)?;
        Ok(self.select(x_nan, y.h, picked))
    }

    /// A float -> i32/u32 cast that truncates, saturates and maps NaN to 0.
    ///
    /// The value is clamped to the largest range of floats whose truncation fits
    /// (for i32 `[-2^31, 2^31 - 128]`, the largest f32 below 2^31; for u32
    /// `[0, 2^32 - 256]`), converted, and then the maximum is chosen for inputs at or
    /// above 2^31 (2^32) and 0 for NaN.
    pub(super) fn float_to_int(&mut self, v: Val, to: ScalarType) -> Result<H, CodegenError> {
        let lanes = v.ty.lanes;
        let f = Type::vector(ScalarType::F32, lanes);
        let t = Type::vector(to, lanes);
        let x = v.h;
        let (lo, hi, limit, max, kind) = match to {
            ScalarType::I32 => (
                -2147483648.0,
                2147483520.0,
                2147483648.0,
                Scalar::I32(i32::MAX),
                ScalarKind::Sint,
            ),
            ScalarType::U32 => (
                0.0,
                4294967040.0,
                4294967296.0,
                Scalar::U32(u32::MAX),
                ScalarKind::Uint,
            ),
            other => return Err(internal(format!("float_to_int to {other}"))),
        };
        let lo = self.konst_of(f, lo)?;
        let hi = self.konst_of(f, hi)?;
        let nan = self.is_nan_f32(x, lanes)?;
        // NaN is replaced before the clamp, whose result on NaN is undefined.
        let zero_f = self.konst_of(f, 0.0)?;
        let x_num = self.select(nan, zero_f, x);
        let clamped = self.math(MathFunction::Clamp, &[x_num, lo, hi])?;
        let truncated = self.convert(clamped, kind, 4);
        let limit = self.konst_of(f, limit)?;
        let above = self.binary(Bo::GreaterEqual, x_num, limit);
        let max = self.konst(t, max)?;
        Ok(self.select(above, max, truncated))
    }

    // -- integers -------------------------------------------------------------------------

    /// Integer `/` or `%` that never divides by 0 or computes `MIN / -1` (see the module
    /// documentation of `wgsl`): division by zero yields 0 and raises
    /// `DIVISION_BY_ZERO`.
    pub(super) fn int_div_rem(&mut self, div: bool, x: Val, y: Val) -> Result<H, CodegenError> {
        let ty = x.ty;
        let lanes = ty.lanes;
        let zero = self.konst_of(ty, 0.0)?;
        let one = self.konst_of(ty, 1.0)?;
        let is_zero = self.binary(Bo::Equal, y.h, zero);
        let any_zero = self.any(is_zero, lanes);
        let bit = self.lit_u32(status::DIVISION_BY_ZERO);
        self.raise_if(any_zero, bit)?;
        let op = if div { Bo::Divide } else { Bo::Modulo };
        if !ty.scalar.is_signed_int() {
            let safe = self.select(is_zero, one, y.h);
            let r = self.binary(op, x.h, safe);
            // x % 1 is already 0; x / 1 is not.
            return Ok(if div {
                self.select(is_zero, zero, r)
            } else {
                r
            });
        }
        let minus_one = self.konst_of(ty, -1.0)?;
        let is_m1 = self.binary(Bo::Equal, y.h, minus_one);
        let bad = self.binary(Bo::InclusiveOr, is_zero, is_m1);
        let safe = self.select(bad, one, y.h);
        let r = self.binary(op, x.h, safe);
        if div {
            // x / -1 = -x, wrapping (`-MIN` is `MIN`).
            let neg = self.unary(UnaryOperator::Negate, x.h);
            let r = self.select(is_m1, neg, r);
            Ok(self.select(is_zero, zero, r))
        } else {
            Ok(self.select(is_m1, zero, r))
        }
    }

    /// `<<` or `>>` (arithmetic for i32, logical for u32) by a u32 amount: the amount is
    /// masked to the width, and an amount of the width or more raises
    /// `SHIFT_OVERFLOW`.
    pub(super) fn shift(&mut self, left: bool, x: Val, amount: Val) -> Result<H, CodegenError> {
        let lanes = x.ty.lanes;
        let u = Type::vector(ScalarType::U32, lanes);
        let width = self.konst(u, Scalar::U32(32))?;
        let over = self.binary(Bo::GreaterEqual, amount.h, width);
        let any_over = self.any(over, lanes);
        let bit = self.lit_u32(status::SHIFT_OVERFLOW);
        self.raise_if(any_over, bit)?;
        let mask = self.konst(u, Scalar::U32(31))?;
        let masked = self.binary(Bo::And, amount.h, mask);
        let op = if left { Bo::ShiftLeft } else { Bo::ShiftRight };
        Ok(self.binary(op, x.h, masked))
    }

    /// `abs` of an i32 value with the IR's wrapping (`abs(MIN)` = `MIN`), without
    /// relying on the target's `abs` at `MIN`.
    pub(super) fn int_abs(&mut self, x: Val) -> Result<H, CodegenError> {
        let zero = self.konst_of(x.ty, 0.0)?;
        let negative = self.binary(Bo::Less, x.h, zero);
        let neg = self.unary(UnaryOperator::Negate, x.h);
        Ok(self.select(negative, neg, x.h))
    }
}
