//! The widths the algorithms are written for, the operations they are written against,
//! and the helpers both widths share.
//!
//! The algorithms are written once against [`Ops`] (f32: `Ops<W32>`; f64: `Ops<W64>` and
//! `double::Ops64`): the pass instantiates them with IR expressions (`Emitter`), the unit
//! tests with native arithmetic, which is bit for bit what the interpreter computes on the
//! emitted IR (`+ - * /` correctly rounded, casts saturating, integer arithmetic wrapping).

use crate::scalar::Scalar;
use crate::types::ScalarType;

/// A float width the algorithms are written for: its constants' Rust types, its IR
/// scalar types and its exponent-field layout.
pub(super) trait Width {
    /// The Rust type of a float constant (`f32`, `f64`).
    type Float: Copy + std::ops::Neg<Output = Self::Float>;
    /// The Rust type of an integer of the float's width (`i32`, `i64`).
    type Int: Copy + std::ops::Sub<Output = Self::Int>;
    const FLOAT: ScalarType;
    const INT: ScalarType;
    /// The exponent bias (127, 1023).
    const EXP_BIAS: i32;
    /// The number of explicit significand bits (23, 52): the exponent field's shift.
    const MANT_BITS: u32;
    /// `2^MANT_BITS`, which scales a subnormal to a normal number.
    const TWO_POW_MANT: Self::Float;
    /// The bits of 1.
    const ONE_BITS: Self::Int;
    /// The bits of √½ (rounded).
    const SQRT_HALF_BITS: Self::Int;
    /// The significand field.
    const MANT_MASK: Self::Int;
    const MIN_POSITIVE: Self::Float;
    /// The smallest magnitude from which every float is an integer (2^24, 2^53).
    const INTEGRAL_FROM: Self::Float;
    const INFINITY: Self::Float;
    const NEG_INFINITY: Self::Float;
    const NAN: Self::Float;
    /// 2/π.
    const FRAC_2_PI: Self::Float;
    fn float_lit(v: Self::Float) -> Scalar;
    fn int_lit(v: Self::Int) -> Scalar;
    /// An `i32` as an integer of this width.
    fn int(v: i32) -> Self::Int;
    /// An `f32` as a float of this width (exact).
    fn float(v: f32) -> Self::Float;
}

/// f32 (with i32 integers).
pub(super) struct W32;

/// f64 (with i64 integers).
pub(super) struct W64;

impl Width for W32 {
    type Float = f32;
    type Int = i32;
    const FLOAT: ScalarType = ScalarType::F32;
    const INT: ScalarType = ScalarType::I32;
    const EXP_BIAS: i32 = 127;
    const MANT_BITS: u32 = 23;
    const TWO_POW_MANT: f32 = 8_388_608.0;
    const ONE_BITS: i32 = 0x3f80_0000;
    const SQRT_HALF_BITS: i32 = 0x3f35_04f3;
    const MANT_MASK: i32 = 0x007f_ffff;
    const MIN_POSITIVE: f32 = f32::MIN_POSITIVE;
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const NAN: f32 = f32::NAN;
    const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
    const INTEGRAL_FROM: f32 = 16_777_216.0;
    fn float_lit(v: f32) -> Scalar {
        Scalar::f32(v)
    }
    fn int_lit(v: i32) -> Scalar {
        Scalar::I32(v)
    }
    fn int(v: i32) -> i32 {
        v
    }
    fn float(v: f32) -> f32 {
        v
    }
}

impl Width for W64 {
    type Float = f64;
    type Int = i64;
    const FLOAT: ScalarType = ScalarType::F64;
    const INT: ScalarType = ScalarType::I64;
    const EXP_BIAS: i32 = 1023;
    const MANT_BITS: u32 = 52;
    const TWO_POW_MANT: f64 = 4_503_599_627_370_496.0;
    const ONE_BITS: i64 = 0x3ff0_0000_0000_0000;
    const SQRT_HALF_BITS: i64 = 0x3fe6_a09e_667f_3bcd;
    const MANT_MASK: i64 = 0x000f_ffff_ffff_ffff;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const NAN: f64 = f64::NAN;
    const FRAC_2_PI: f64 = std::f64::consts::FRAC_2_PI;
    const INTEGRAL_FROM: f64 = 9_007_199_254_740_992.0;
    fn float_lit(v: f64) -> Scalar {
        Scalar::f64(v)
    }
    fn int_lit(v: i64) -> Scalar {
        Scalar::I64(v)
    }
    fn int(v: i32) -> i64 {
        v.into()
    }
    fn float(v: f32) -> f64 {
        v.into()
    }
}

/// The operations the algorithms use, on float (`F`), integer (`I`, of the float's width)
/// and bool (`B`) values of one lane count, for the width `W`. Integer arithmetic wraps;
/// `ftoi` truncates and saturates (NaN → 0).
pub(super) trait Ops<W: Width> {
    type F: Clone;
    type I: Clone;
    type B: Clone;
    fn cf(&mut self, v: W::Float) -> Self::F;
    fn ci(&mut self, v: W::Int) -> Self::I;
    fn add(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn sub(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn mul(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn div(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn neg(&mut self, a: &Self::F) -> Self::F;
    fn abs(&mut self, a: &Self::F) -> Self::F;
    /// To the nearest integer, ties to even (every target has it natively).
    fn round(&mut self, a: &Self::F) -> Self::F;
    fn lt(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn gt(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn ge(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn feq(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn fne(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn and(&mut self, a: &Self::B, b: &Self::B) -> Self::B;
    fn or(&mut self, a: &Self::B, b: &Self::B) -> Self::B;
    fn not(&mut self, a: &Self::B) -> Self::B;
    fn sel(&mut self, c: &Self::B, t: &Self::F, f: &Self::F) -> Self::F;
    fn iadd(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn isub(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn iand(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn shl(&mut self, a: &Self::I, n: u32) -> Self::I;
    /// Arithmetic shift right.
    fn shr(&mut self, a: &Self::I, n: u32) -> Self::I;
    fn ieq(&mut self, a: &Self::I, b: &Self::I) -> Self::B;
    fn ilt(&mut self, a: &Self::I, b: &Self::I) -> Self::B;
    fn isel(&mut self, c: &Self::B, t: &Self::I, f: &Self::I) -> Self::I;
    /// The bits of a float as an integer of its width.
    fn bits_of(&mut self, a: &Self::F) -> Self::I;
    fn float_of_bits(&mut self, a: &Self::I) -> Self::F;
    fn ftoi(&mut self, a: &Self::F) -> Self::I;
    fn itof(&mut self, a: &Self::I) -> Self::F;
    /// Names a value that is used more than once (IR: a `Let`).
    fn bind(&mut self, a: Self::F) -> Self::F;
    /// `a`, as a value the target's compiler cannot see through, where it might
    /// otherwise apply inexact algebra (`MathExpansion::opaque_sums`); `a` itself for
    /// evaluators that compute exactly what they are told.
    fn opaque(&mut self, a: &Self::F) -> Self::F {
        a.clone()
    }
    fn bindi(&mut self, a: Self::I) -> Self::I;
    fn bindb(&mut self, a: Self::B) -> Self::B;
}

// ---- helpers (both widths) ----

pub(super) fn addc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::F {
    let k = o.cf(c);
    o.add(a, &k)
}

pub(super) fn mulc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::F {
    let k = o.cf(c);
    o.mul(a, &k)
}

pub(super) fn ltc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.lt(a, &k)
}

pub(super) fn gtc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.gt(a, &k)
}

pub(super) fn eqc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.feq(a, &k)
}

/// `c ? t : f` with a constant `t`.
fn selc<W: Width, O: Ops<W>>(o: &mut O, c: &O::B, t: W::Float, f: &O::F) -> O::F {
    let k = o.cf(t);
    o.sel(c, &k, f)
}

/// `min(a, hi)` that keeps a NaN `a`.
pub(super) fn min_c<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, hi: W::Float) -> O::F {
    let c = gtc(o, a, hi);
    selc(o, &c, hi, a)
}

/// `max(a, lo)` that keeps a NaN `a`.
fn max_c<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, lo: W::Float) -> O::F {
    let c = ltc(o, a, lo);
    selc(o, &c, lo, a)
}

/// `a` clamped to `[lo, hi]` (a NaN `a` stays NaN), bound.
pub(super) fn clamp<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, lo: W::Float, hi: W::Float) -> O::F {
    let c = min_c(o, a, hi);
    let c = max_c(o, &c, lo);
    o.bind(c)
}

pub(super) fn iaddc<W: Width, O: Ops<W>>(o: &mut O, a: &O::I, c: W::Int) -> O::I {
    let k = o.ci(c);
    o.iadd(a, &k)
}

pub(super) fn iandc<W: Width, O: Ops<W>>(o: &mut O, a: &O::I, c: W::Int) -> O::I {
    let k = o.ci(c);
    o.iand(a, &k)
}

/// `v` rounded to the nearest integer (ties to even), as a float and as an integer;
/// valid for `|v| < 2³¹` (f32) or `2⁶³` (f64). A native `round`, not the
/// `(v + 1.5·2²³) − 1.5·2²³` trick (`1.5·2⁵²` for f64): shader compilers that may
/// reassociate float arithmetic (WGSL cannot forbid it; Mesa folds `(a + c) − c` to `a`)
/// would turn that trick into the identity.
pub(super) fn round_nearest<W: Width, O: Ops<W>>(o: &mut O, v: &O::F) -> (O::F, O::I) {
    let kf = o.round(v);
    let kf = o.bind(kf);
    let ki = o.ftoi(&kf);
    let ki = o.bindi(ki);
    (kf, ki)
}

/// `2^k` for an integer `k` in the normal exponent range (`[-126, 127]` for f32,
/// `[-1022, 1023]` for f64), built in the exponent field.
fn pow2i<W: Width, O: Ops<W>>(o: &mut O, k: &O::I) -> O::F {
    let e = iaddc(o, k, W::int(W::EXP_BIAS));
    let s = o.shl(&e, W::MANT_BITS);
    o.float_of_bits(&s)
}

/// `p · 2^k` for `p` near 1 and `k` in twice the normal exponent range (`[-252, 254]`
/// for f32, `[-2044, 2046]` for f64), in two steps of which only the second rounds (so a
/// subnormal result is rounded once, and overflow gives +∞).
pub(super) fn scale<W: Width, O: Ops<W>>(o: &mut O, p: &O::F, k: &O::I) -> O::F {
    let k1 = o.shr(k, 1);
    let k1 = o.bindi(k1);
    let k2 = o.isub(k, &k1);
    let s1 = pow2i(o, &k1);
    let s2 = pow2i(o, &k2);
    let t = o.mul(p, &s1);
    o.mul(&t, &s2)
}

/// Knuth's TwoSum: `s + e = a + b` exactly, `s = fl(a + b)`. The error terms read `s`
/// through [`Ops::opaque`], so a compiler that may reassociate cannot fold `s − a` to
/// `b` (which would make `e` 0).
pub(super) fn two_sum<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let s = o.add(a, b);
    let s = o.bind(s);
    let so = o.opaque(&s);
    let bb = o.sub(&so, a);
    let bb = o.bind(bb);
    let sa = o.sub(&so, &bb);
    let ea = o.sub(a, &sa);
    let eb = o.sub(b, &bb);
    let e = o.add(&ea, &eb);
    let e = o.bind(e);
    (s, e)
}

/// Fast2Sum: `s + e = a + b` exactly when `|a| ≥ |b|` (or `a = 0`, or the sum is
/// exact); `s` read through [`Ops::opaque`] as in [`two_sum`].
pub(super) fn fast_two_sum<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let s = o.add(a, b);
    let s = o.bind(s);
    let so = o.opaque(&s);
    let d = o.sub(&so, a);
    let e = o.sub(b, &d);
    let e = o.bind(e);
    (s, e)
}

/// `x = 2^k · m` with `m ∈ [√½, √2)`, for positive finite `x` (subnormals are scaled by
/// `2^MANT_BITS` first). Returns `k` (as a float) and `f = m − 1` (exact).
pub(super) fn log_reduce<W: Width, O: Ops<W>>(o: &mut O, x: &O::F) -> (O::F, O::F) {
    let sub = ltc(o, x, W::MIN_POSITIVE);
    let sub = o.bindb(sub);
    let xs = mulc(o, x, W::TWO_POW_MANT);
    let xs = o.sel(&sub, &xs, x);
    // Offsetting the bits by 1 - √½ moves the mantissa range [√½, √2) onto one exponent.
    let ix = o.bits_of(&xs);
    let ix = iaddc(o, &ix, W::ONE_BITS - W::SQRT_HALF_BITS);
    let ix = o.bindi(ix);
    let e = o.shr(&ix, W::MANT_BITS);
    let sub_adj = o.ci(W::int(-W::EXP_BIAS - W::MANT_BITS as i32));
    let adj = o.ci(W::int(-W::EXP_BIAS));
    let adj = o.isel(&sub, &sub_adj, &adj);
    let k = o.iadd(&e, &adj);
    let k = o.itof(&k);
    let k = o.bind(k);
    let mb = iandc(o, &ix, W::MANT_MASK);
    let mb = iaddc(o, &mb, W::SQRT_HALF_BITS);
    let m = o.float_of_bits(&mb);
    let f = addc(o, &m, W::float(-1.0));
    let f = o.bind(f);
    (k, f)
}

/// `log` special cases: +∞ → +∞, ±0 → −∞, negative or NaN → NaN.
pub(super) fn log_specials<W: Width, O: Ops<W>>(o: &mut O, x: &O::F, r: &O::F) -> O::F {
    let is_inf = eqc(o, x, W::INFINITY);
    let r = selc(o, &is_inf, W::INFINITY, r);
    let is_zero = eqc(o, x, W::float(0.0));
    let r = selc(o, &is_zero, W::NEG_INFINITY, &r);
    let zero = o.cf(W::float(0.0));
    let ok = o.ge(x, &zero);
    let bad = o.not(&ok);
    selc(o, &bad, W::NAN, &r)
}

// ---- pow special cases (both widths) ----

/// Properties of `y` that `pow` needs: whether it is an integer, an odd integer.
fn integer_parity<W: Width, O: Ops<W>>(o: &mut O, y: &O::F) -> (O::B, O::B) {
    let ay = o.abs(y);
    let yi = o.ftoi(y);
    let yi = o.bindi(yi);
    let yr = o.itof(&yi);
    let exact = o.feq(&yr, y);
    let big = o.cf(W::INTEGRAL_FROM);
    let y_big = o.ge(&ay, &big);
    let y_big = o.bindb(y_big);
    let y_int = o.or(&exact, &y_big);
    let y_int = o.bindb(y_int);
    let odd_bit = iandc(o, &yi, W::int(1));
    let one = o.ci(W::int(1));
    let odd = o.ieq(&odd_bit, &one);
    let small = o.not(&y_big);
    let odd = o.and(&odd, &small);
    let odd = o.and(&odd, &y_int);
    let odd = o.bindb(odd);
    (y_int, odd)
}

/// The special cases of `pow` (`a = |x|`, `r` the general result), as IEEE and
/// `powf`/`pow` define them, for either width.
pub(super) fn pow_specials<W: Width, O: Ops<W>>(
    o: &mut O,
    x: &O::F,
    y: &O::F,
    a: &O::F,
    r: &O::F,
) -> O::F {
    let (y_int, y_odd) = integer_parity(o, y);
    let y_neg = ltc(o, y, W::float(0.0));
    let y_neg = o.bindb(y_neg);
    let inf = o.cf(W::INFINITY);
    let zero = o.cf(W::float(0.0));
    // |x| = 0: +∞ for y < 0, else 0.
    let a_zero = eqc(o, a, W::float(0.0));
    let zr = o.sel(&y_neg, &inf, &zero);
    let r = o.sel(&a_zero, &zr, r);
    // |x| = ∞: 0 for y < 0, else +∞.
    let a_inf = eqc(o, a, W::INFINITY);
    let ir = o.sel(&y_neg, &zero, &inf);
    let r = o.sel(&a_inf, &ir, &r);
    let r = o.bind(r);
    // Negative x (by the sign bit, so -0 counts) with an odd integer y: negate.
    let xb = o.bits_of(x);
    let zi = o.ci(W::int(0));
    let x_neg = o.ilt(&xb, &zi);
    let x_neg = o.bindb(x_neg);
    let flip = o.and(&x_neg, &y_odd);
    let nr = o.neg(&r);
    let r = o.sel(&flip, &nr, &r);
    // Negative finite nonzero x with a non-integer y: NaN.
    let fin = ltc(o, a, W::INFINITY);
    let nz = gtc(o, a, W::float(0.0));
    let fin = o.and(&fin, &nz);
    let bad = o.and(&x_neg, &fin);
    let not_int = o.not(&y_int);
    let bad = o.and(&bad, &not_int);
    let r = selc(o, &bad, W::NAN, &r);
    // pow(-1, ±∞) = 1.
    let ay = o.abs(y);
    let y_inf = eqc(o, &ay, W::INFINITY);
    let a_one = eqc(o, a, W::float(1.0));
    let c = o.and(&y_inf, &a_one);
    let r = selc(o, &c, W::float(1.0), &r);
    // NaN in, NaN out ...
    let xn = o.fne(x, x);
    let yn = o.fne(y, y);
    let n = o.or(&xn, &yn);
    let r = selc(o, &n, W::NAN, &r);
    // ... except pow(x, ±0) = pow(1, y) = 1.
    let y0 = eqc(o, y, W::float(0.0));
    let x1 = eqc(o, x, W::float(1.0));
    let c = o.or(&y0, &x1);
    selc(o, &c, W::float(1.0), &r)
}
