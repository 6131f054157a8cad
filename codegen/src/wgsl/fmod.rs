//! C `fmod` for f32, exact, as a helper function of the module.
//!
//! WGSL's float `%` is `x - y * trunc(x / y)`, which rounds; the IR's `%` is C `fmod`
//! (exact, with the sign of the dividend). The helper is musl's `fmodf` in integer
//! arithmetic: the significands are long-divided one bit per step of exponent
//! difference, which is exact, uses no float operation that could be rounded or
//! contracted, and needs at most 277 steps (subnormal to maximal exponent).
//!
//! ```text
//! fn kernelc_fmod(x: f32, y: f32) -> f32 {
//!     if y == 0 || isnan(y) || !isfinite(x) { return NaN; }
//!     if |x| <= |y| { return |x| == |y| ? ±0 (sign of x) : x; }
//!     normalise the significands mx, my (subnormals shifted up) with exponents ex, ey
//!     while ex > ey { if mx >= my { mx -= my; if mx == 0 { return ±0 } } mx <<= 1; ex -= 1 }
//!     if mx >= my { mx -= my; if mx == 0 { return ±0 } }
//!     renormalise mx, rebuild the float (subnormal if ex <= 0), with x's sign
//! }
//! ```

use super::func::FnBuilder;
use super::lower::{internal, Lower};
use super::types;
use crate::CodegenError;
use kernelc_ir::Scalar;
use naga::{
    BinaryOperator as Bo, Block, Expression, Function, FunctionArgument, FunctionResult, Handle,
    MathFunction, ScalarKind, Span, Statement, TypeInner,
};

type H = Handle<Expression>;

const SIGN: u32 = 0x8000_0000;
const SIGNIFICAND: u32 = 0x007f_ffff;
const IMPLICIT_ONE: u32 = 0x0080_0000;
const QUIET_NAN: u32 = 0x7fc0_0000;

impl Lower<'_> {
    /// `fmod(x, y)` of two f32 scalars: a call of the helper (built on first use).
    pub(super) fn call_fmod(&mut self, x: H, y: H) -> Result<H, CodegenError> {
        let function = match self.fmod {
            Some(f) => f,
            None => {
                let f = self.build_fmod()?;
                self.fmod = Some(f);
                f
            }
        };
        let result = self.f.result_expr(Expression::CallResult(function));
        self.f.stmt(Statement::Call {
            function,
            arguments: vec![x, y],
            result: Some(result),
        });
        Ok(result)
    }

    /// Builds the helper in a fresh function builder (the entry point's is set aside
    /// meanwhile) and adds it to the module.
    fn build_fmod(&mut self) -> Result<Handle<Function>, CodegenError> {
        let outer = std::mem::replace(&mut self.f, FnBuilder::new("kernelc_fmod"));
        let built = self.fmod_body();
        let helper = std::mem::replace(&mut self.f, outer);
        built?;
        let function = helper
            .finish()
            .ok_or_else(|| internal("unbalanced blocks in the fmod helper"))?;
        Ok(self.module.functions.append(function, Span::UNDEFINED))
    }

    fn ret(&mut self, value: H) {
        self.f.stmt(Statement::Return { value: Some(value) });
    }

    /// `if cond { return value; }`.
    fn return_if(&mut self, cond: H, value: H) -> Result<(), CodegenError> {
        self.if_then(cond, |l| {
            l.ret(value);
            Ok(())
        })
    }

    fn load_var(&mut self, pointer: H) -> H {
        self.e(Expression::Load { pointer })
    }

    fn store_to(&mut self, pointer: H, value: H) {
        self.f.stmt(Statement::Store { pointer, value });
    }

    fn lit_i32(&mut self, v: i32) -> H {
        self.f.expr(Expression::Literal(naga::Literal::I32(v)))
    }

    fn fmod_body(&mut self) -> Result<(), CodegenError> {
        let f32_ty = types::intern(&mut self.module.types, TypeInner::Scalar(naga::Scalar::F32));
        let u32_ty = types::intern(&mut self.module.types, TypeInner::Scalar(naga::Scalar::U32));
        let i32_ty = types::intern(&mut self.module.types, TypeInner::Scalar(naga::Scalar::I32));
        {
            let (args, result) = self.f.signature_mut();
            for name in ["x", "y"] {
                args.push(FunctionArgument {
                    name: Some(name.to_string()),
                    ty: f32_ty,
                    binding: None,
                });
            }
            *result = Some(FunctionResult {
                ty: f32_ty,
                binding: None,
            });
        }
        let x = self.f.expr(Expression::FunctionArgument(0));
        let y = self.f.expr(Expression::FunctionArgument(1));
        let mx = self.f.local("mx", u32_ty);
        let my = self.f.local("my", u32_ty);
        let ex = self.f.local("ex", i32_ty);
        let ey = self.f.local("ey", i32_ty);

        let ux = self.bitcast(x, ScalarKind::Uint);
        let uy = self.bitcast(y, ScalarKind::Uint);
        let sign_mask = self.lit_u32(SIGN);
        let sx = self.binary(Bo::And, ux, sign_mask);
        let signed_zero = self.bitcast(sx, ScalarKind::Float);
        let one = self.lit_u32(1);
        let ux2 = self.binary(Bo::ShiftLeft, ux, one);
        let uy2 = self.binary(Bo::ShiftLeft, uy, one);
        let exp_x = self.biased_exponent(ux);
        let exp_y = self.biased_exponent(uy);

        // y == 0, y NaN, x infinite or NaN: NaN.
        let zero_u = self.lit_u32(0);
        let y_zero = self.binary(Bo::Equal, uy2, zero_u);
        let nan_limit = self.lit_u32(0xff00_0000);
        let y_nan = self.binary(Bo::Greater, uy2, nan_limit);
        let max_exp = self.lit_u32(0xff);
        let x_special = self.binary(Bo::Equal, exp_x, max_exp);
        let bad = self.binary(Bo::LogicalOr, y_zero, y_nan);
        let bad = self.binary(Bo::LogicalOr, bad, x_special);
        let nan = self.lit(Scalar::F32(QUIET_NAN))?;
        self.return_if(bad, nan)?;

        // |x| <= |y|: x itself, or a zero with x's sign when they are equal.
        let not_above = self.binary(Bo::LessEqual, ux2, uy2);
        self.if_then(not_above, |l| {
            let equal = l.binary(Bo::Equal, ux2, uy2);
            l.return_if(equal, signed_zero)?;
            l.ret(x);
            Ok(())
        })?;

        self.normalise(ux, exp_x, mx, ex)?;
        self.normalise(uy, exp_y, my, ey)?;

        // Long division, one bit per step of exponent difference.
        self.f.open();
        let e_x = self.load_var(ex);
        let e_y = self.load_var(ey);
        let finished = self.binary(Bo::LessEqual, e_x, e_y);
        self.if_then(finished, |l| {
            l.f.stmt(Statement::Break);
            Ok(())
        })?;
        self.subtract_step(mx, my, signed_zero)?;
        let m = self.load_var(mx);
        let one = self.lit_u32(1);
        let doubled = self.binary(Bo::ShiftLeft, m, one);
        self.store_to(mx, doubled);
        let one_i = self.lit_i32(1);
        let lower = self.binary(Bo::Subtract, e_x, one_i);
        self.store_to(ex, lower);
        let body = self.close()?;
        self.f.stmt(Statement::Loop {
            body,
            continuing: Block::new(),
            break_if: None,
        });
        self.subtract_step(mx, my, signed_zero)?;

        // Renormalise (mx is nonzero and below 2^24) and rebuild the float.
        let m = self.load_var(mx);
        let shift = self.leading_shift(m)?;
        let m = self.binary(Bo::ShiftLeft, m, shift);
        let e = self.load_var(ex);
        let shift_i = self.bitcast(shift, ScalarKind::Sint);
        let e = self.binary(Bo::Subtract, e, shift_i);
        let implicit = self.lit_u32(IMPLICIT_ONE);
        let without_one = self.binary(Bo::Subtract, m, implicit);
        let e_u = self.bitcast(e, ScalarKind::Uint);
        let c23 = self.lit_u32(23);
        let exp_bits = self.binary(Bo::ShiftLeft, e_u, c23);
        let normal = self.binary(Bo::InclusiveOr, without_one, exp_bits);
        let one_i = self.lit_i32(1);
        let down = self.binary(Bo::Subtract, one_i, e);
        let down = self.bitcast(down, ScalarKind::Uint);
        let c31 = self.lit_u32(31);
        let down = self.math(MathFunction::Min, &[down, c31])?;
        let subnormal = self.binary(Bo::ShiftRight, m, down);
        let zero_i = self.lit_i32(0);
        let is_normal = self.binary(Bo::Greater, e, zero_i);
        let bits = self.select(is_normal, normal, subnormal);
        let bits = self.binary(Bo::InclusiveOr, bits, sx);
        let r = self.bitcast(bits, ScalarKind::Float);
        self.ret(r);
        Ok(())
    }

    /// `(u >> 23) & 0xff`.
    fn biased_exponent(&mut self, u: H) -> H {
        let c23 = self.lit_u32(23);
        let shifted = self.binary(Bo::ShiftRight, u, c23);
        let mask = self.lit_u32(0xff);
        self.binary(Bo::And, shifted, mask)
    }

    /// `clz(m) - 8`: the left shift that brings the leading one of a nonzero `m` below
    /// 2^24 to bit 23.
    fn leading_shift(&mut self, m: H) -> Result<H, CodegenError> {
        let clz = self.math(MathFunction::CountLeadingZeros, &[m])?;
        let eight = self.lit_u32(8);
        Ok(self.binary(Bo::Subtract, clz, eight))
    }

    /// Stores the significand of `u` with its implicit one (a subnormal's shifted up)
    /// into `m_ptr` and its exponent (adjusted for the shift) into `e_ptr`.
    fn normalise(&mut self, u: H, exp: H, m_ptr: H, e_ptr: H) -> Result<(), CodegenError> {
        let mask = self.lit_u32(SIGNIFICAND);
        let m = self.binary(Bo::And, u, mask);
        let zero = self.lit_u32(0);
        let subnormal = self.binary(Bo::Equal, exp, zero);
        self.f.open();
        let shift = self.leading_shift(m)?;
        let shifted = self.binary(Bo::ShiftLeft, m, shift);
        self.store_to(m_ptr, shifted);
        let one = self.lit_i32(1);
        let shift_i = self.bitcast(shift, ScalarKind::Sint);
        let e = self.binary(Bo::Subtract, one, shift_i);
        self.store_to(e_ptr, e);
        let accept = self.close()?;
        self.f.open();
        let implicit = self.lit_u32(IMPLICIT_ONE);
        let with_one = self.binary(Bo::InclusiveOr, m, implicit);
        self.store_to(m_ptr, with_one);
        let e = self.bitcast(exp, ScalarKind::Sint);
        self.store_to(e_ptr, e);
        let reject = self.close()?;
        self.f.stmt(Statement::If {
            condition: subnormal,
            accept,
            reject,
        });
        Ok(())
    }

    /// `if mx >= my { mx -= my; if mx == 0 { return zero } }` (on the bits of the
    /// difference, as musl: its top bit is clear when it did not wrap).
    fn subtract_step(&mut self, mx: H, my: H, zero: H) -> Result<(), CodegenError> {
        let a = self.load_var(mx);
        let b = self.load_var(my);
        let diff = self.binary(Bo::Subtract, a, b);
        let c31 = self.lit_u32(31);
        let top = self.binary(Bo::ShiftRight, diff, c31);
        let zero_u = self.lit_u32(0);
        let fits = self.binary(Bo::Equal, top, zero_u);
        self.if_then(fits, |l| {
            let zero_u = l.lit_u32(0);
            let exact = l.binary(Bo::Equal, diff, zero_u);
            l.return_if(exact, zero)?;
            l.store_to(mx, diff);
            Ok(())
        })
    }
}
