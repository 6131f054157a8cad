//! The algorithm shapes f32 and f64 share: the dispatch by function, `tanh`, `pow`'s
//! outline, and the `sin`/`cos` reduction and quadrant. Each is written once against
//! [`Arith`], which every width implements its own way (f32 with `+ − ×` only, f64 with
//! `fma`). Where the widths' algorithms differ (`exp`, `log`, `erf` and the `sin r`/`cos r`
//! evaluations, where f64 carries double-doubles and the reductions and fits differ),
//! they stay in `single` and `double`.

use super::width::{
    addc, eqc, fast_two_sum, iaddc, iandc, ltc, min_c, mulc, pow_specials, round_nearest, two_sum,
    Ops, Width,
};
use crate::kernel::MathFn;

/// The operations whose best form differs by width, for the algorithms both widths share.
pub(super) trait Arith<W: Width>: Ops<W> {
    /// Horner's scheme; coefficients from the highest degree down.
    fn poly(&mut self, x: &Self::F, c: &[W::Float]) -> Self::F;
    /// `x + x·t`.
    fn add_x_times(&mut self, x: &Self::F, t: &Self::F) -> Self::F;
    /// `p + e = a · b` exactly (barring overflow and underflow).
    fn two_prod(&mut self, a: &Self::F, b: &Self::F) -> (Self::F, Self::F);
}

/// One width's algorithms for the functions the pass expands, for every evaluator of its
/// operations; [`expand`] dispatches to them.
pub(super) trait Algorithms<W: Width>: Arith<W> {
    fn exp(o: &mut Self, x: &Self::F) -> Self::F;
    fn exp2(o: &mut Self, x: &Self::F) -> Self::F;
    fn log(o: &mut Self, x: &Self::F) -> Self::F;
    fn log2(o: &mut Self, x: &Self::F) -> Self::F;
    fn tanh(o: &mut Self, x: &Self::F) -> Self::F;
    fn erf(o: &mut Self, x: &Self::F) -> Self::F;
    /// `sin x` or `cos x`.
    fn sincos(o: &mut Self, x: &Self::F, which: Trig) -> Self::F;
    fn pow(o: &mut Self, x: &Self::F, y: &Self::F) -> Self::F;
}

/// The expansion of the call `func(args)` (arguments already bound) by the algorithms of
/// the width `W`, or `None` for a function the pass has no algorithm for.
pub(super) fn expand<W: Width, O: Algorithms<W>>(
    o: &mut O,
    func: MathFn,
    args: &[O::F],
) -> Option<O::F> {
    let x = args.first()?;
    Some(match func {
        MathFn::Exp => O::exp(o, x),
        MathFn::Exp2 => O::exp2(o, x),
        MathFn::Log => O::log(o, x),
        MathFn::Log2 => O::log2(o, x),
        MathFn::Tanh => O::tanh(o, x),
        MathFn::Erf => O::erf(o, x),
        MathFn::Sin => O::sincos(o, x, Trig::Sin),
        MathFn::Cos => O::sincos(o, x, Trig::Cos),
        MathFn::Pow => O::pow(o, x, args.get(1)?),
        _ => return None,
    })
}

/// `|x|` and `x²`, both bound: what the odd functions start from.
pub(super) fn abs_square<W: Width, O: Ops<W>>(o: &mut O, x: &O::F) -> (O::F, O::F) {
    let ax = o.abs(x);
    let ax = o.bind(ax);
    let z = o.mul(x, x);
    let z = o.bind(z);
    (ax, z)
}

/// An odd function from its two branches: `small` where `|x| < small_below`, else
/// `large` (computed for `|x|`) with the sign of `x`.
pub(super) fn odd_join<W: Width, O: Ops<W>>(
    o: &mut O,
    x: &O::F,
    ax: &O::F,
    small: &O::F,
    large: &O::F,
    small_below: W::Float,
) -> O::F {
    let neg = ltc(o, x, W::float(0.0));
    let nl = o.neg(large);
    let l = o.sel(&neg, &nl, large);
    let is_small = ltc(o, ax, small_below);
    o.sel(&is_small, small, &l)
}

/// `r`, but `x` itself where `x` is ±0, so that an odd function keeps the sign of zero.
pub(super) fn keep_signed_zero<W: Width, O: Ops<W>>(o: &mut O, x: &O::F, r: O::F) -> O::F {
    let r = o.bind(r);
    let z0 = eqc(o, x, W::float(0.0));
    o.sel(&z0, x, &r)
}

// ---- tanh ----

/// `tanh x`: `x + x·z·P(z)` (`z = x²`, `p` the coefficients of `P`) for `|x| < 0.625`,
/// else `±(1 − 2/(e^(2|x|) + 1))`, whose cancellation `1 − q` then loses less than a
/// bit. `|x|` is clamped at `one_from`, where the result rounds to 1; `exp` computes
/// `e^v` for `v ∈ [0, 2·one_from]`.
pub(super) fn tanh<W: Width, O: Arith<W>>(
    o: &mut O,
    x: &O::F,
    p: &[W::Float],
    one_from: W::Float,
    exp: impl FnOnce(&mut O, O::F) -> O::F,
) -> O::F {
    let (ax, z) = abs_square(o, x);
    let p = o.poly(&z, p);
    let t = o.mul(&z, &p);
    let small = o.add_x_times(x, &t);
    let small = o.bind(small);
    // otherwise ±(1 - 2 / (e^(2|x|) + 1))
    let xc = min_c(o, &ax, one_from);
    let x2 = mulc(o, &xc, W::float(2.0));
    let e = exp(o, x2);
    let d = addc(o, &e, W::float(1.0));
    let two = o.cf(W::float(2.0));
    let q = o.div(&two, &d);
    let one = o.cf(W::float(1.0));
    let l = o.sub(&one, &q);
    let l = o.bind(l);
    let r = odd_join(o, x, &ax, &small, &l, W::float(0.625));
    // tanh(-0) = -0
    keep_signed_zero(o, x, r)
}

// ---- pow ----

/// `pow(x, y) = b^(y·log_b|x|)`, the logarithm and the product as double-words, then the
/// C99/IEEE special cases, selected over the general result. The base `b` is the
/// width's: `log` gives `log_b a` of a positive finite `a` as a double-word, `exp`
/// computes `b^(h + l)` (and drops `l` where `h` is far out of range, where it may be
/// NaN).
pub(super) fn pow<W: Width, O: Arith<W>>(
    o: &mut O,
    x: &O::F,
    y: &O::F,
    log: impl FnOnce(&mut O, &O::F) -> (O::F, O::F),
    exp: impl FnOnce(&mut O, &O::F, O::F) -> O::F,
) -> O::F {
    let a = o.abs(x);
    let a = o.bind(a);
    let (lh, ll) = log(o, &a);
    let (th, te) = o.two_prod(y, &lh);
    let yl = o.mul(y, &ll);
    let tl = o.add(&te, &yl);
    let r = exp(o, &th, tl);
    let r = o.bind(r);
    pow_specials(o, x, y, &a, &r)
}

// ---- sin, cos ----

/// Which of `sin` and `cos` a trigonometric expansion computes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Trig {
    Sin,
    Cos,
}

/// `k = round(x·2/π)` and `x − k·π/2` as a double-word `rh + rl`, with π/2 given as
/// constants `k` times each of which is exact in the accurate range: the `exact` ones are
/// subtracted exactly (the first by Sterbenz, the others by the constants' granularity),
/// the `summed` ones by TwoSums whose errors are collected, the `last` added to those.
pub(super) fn reduce_pio2<W: Width, O: Ops<W>>(
    o: &mut O,
    x: &O::F,
    exact: &[W::Float],
    summed: &[W::Float],
    last: W::Float,
) -> (O::I, O::F, O::F) {
    let v = mulc(o, x, W::FRAC_2_PI);
    let (kf, ki) = round_nearest(o, &v);
    let mut a = x.clone();
    for &c in exact {
        let p = mulc(o, &kf, c);
        a = o.sub(&a, &p);
        a = o.bind(a);
    }
    let mut err: Option<O::F> = None;
    for &c in summed {
        let p = mulc(o, &kf, -c);
        let (s, e) = two_sum(o, &a, &p);
        a = s;
        err = Some(match err {
            None => e,
            Some(e0) => {
                let t = o.add(&e0, &e);
                o.bind(t)
            }
        });
    }
    let pl = mulc(o, &kf, last);
    let e = match err {
        Some(e) => o.sub(&e, &pl),
        None => o.neg(&pl),
    };
    let (rh, rl) = fast_two_sum(o, &a, &e);
    (ki, rh, rl)
}

/// `sin x` or `cos x` from `s = sin r` and `c = cos r` of the reduced argument
/// `r = x − k·π/2`: the quadrant `k mod 4` chooses and negates (`sin` keeps the sign of
/// a zero `x`).
pub(super) fn trig_quadrant<W: Width, O: Ops<W>>(
    o: &mut O,
    x: &O::F,
    k: O::I,
    s: &O::F,
    c: &O::F,
    which: Trig,
) -> O::F {
    // sin x = (sin r, cos r, -sin r, -cos r) for k mod 4 = 0..3; cos x = sin(x + π/2)
    let q = match which {
        Trig::Sin => k,
        Trig::Cos => iaddc(o, &k, W::int(1)),
    };
    let q = o.bindi(q);
    let zi = o.ci(W::int(0));
    let b1 = iandc(o, &q, W::int(1));
    let use_sin = o.ieq(&b1, &zi);
    let res = o.sel(&use_sin, s, c);
    let res = o.bind(res);
    let b2 = iandc(o, &q, W::int(2));
    let keep = o.ieq(&b2, &zi);
    let nres = o.neg(&res);
    let res = o.sel(&keep, &res, &nres);
    match which {
        // sin(±0) = ±0
        Trig::Sin => keep_signed_zero(o, x, res),
        Trig::Cos => res,
    }
}
