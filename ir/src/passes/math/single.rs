//! The f32 implementations of the math expansion (see the parent module's documentation
//! for the designs and the accuracy table).

use super::width::{
    addc, eqc, fast_two_sum, gtc, iaddc, iandc, log_reduce, log_specials, ltc, max_c, min_c, mulc,
    pow_specials, round_nearest, scale, two_sum, Ops, W32,
};
use crate::kernel::MathFn;

// ---- f32 ----

/// The expansion of the f32 call `func(args)` (arguments already bound), or `None` for a
/// function without an f32 implementation.
pub(super) fn expand_f32<O: Ops<W32>>(o: &mut O, func: MathFn, args: &[O::F]) -> Option<O::F> {
    let x = args.first()?;
    Some(match func {
        MathFn::Exp => exp(o, x),
        MathFn::Exp2 => exp2(o, x),
        MathFn::Log => log(o, x),
        MathFn::Log2 => log2(o, x),
        MathFn::Tanh => tanh(o, x),
        MathFn::Erf => erf(o, x),
        MathFn::Sin => sin(o, x),
        MathFn::Cos => cos(o, x),
        MathFn::Pow => pow(o, x, args.get(1)?),
        _ => return None,
    })
}

/// Horner's scheme; coefficients from the highest degree down (no fma: f32 `+ − *`
/// only).
fn poly<O: Ops<W32>>(o: &mut O, x: &O::F, c: &[f32]) -> O::F {
    let mut acc = o.cf(c.first().copied().unwrap_or(0.0));
    for &ci in c.iter().skip(1) {
        let m = o.mul(&acc, x);
        let k = o.cf(ci);
        acc = o.add(&m, &k);
    }
    acc
}

/// `a = hi + lo` with `hi` the top 12 significand bits (by masking) and `lo` the rest,
/// both exact; any finite `a` (no overflow, unlike Veltkamp's split).
fn split<O: Ops<W32>>(o: &mut O, a: &O::F) -> (O::F, O::F) {
    let b = o.bits_of(a);
    let m = iandc(o, &b, 0xFFFF_F000_u32 as i32);
    let hi = o.float_of_bits(&m);
    let hi = o.bind(hi);
    let lo = o.sub(a, &hi);
    let lo = o.bind(lo);
    (hi, lo)
}

/// Dekker's product: `p + e = a · b` exactly (barring overflow and underflow).
fn two_prod<O: Ops<W32>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let p = o.mul(a, b);
    let p = o.bind(p);
    let (ah, al) = split(o, a);
    let (bh, bl) = split(o, b);
    let hh = o.mul(&ah, &bh);
    let t = o.sub(&hh, &p);
    let hl = o.mul(&ah, &bl);
    let t = o.add(&t, &hl);
    let lh = o.mul(&al, &bh);
    let t = o.add(&t, &lh);
    let ll = o.mul(&al, &bl);
    let e = o.add(&t, &ll);
    let e = o.bind(e);
    (p, e)
}

// ---- exp, exp2 ----

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts: the first has 15 significant bits, so `k · LN2_HI` is exact for
/// `|k| ≤ 256`.
const LN2_HI: f32 = 0.69314575;
const LN2_LO: f32 = 1.4286068e-6;
/// `e^r ≈ 1 + r + r² · EXP_P(r)` on `|r| ≤ 0.3467`.
const EXP_P: [f32; 5] = [0.0013926204, 0.008363195, 0.041666556, 0.16666576, 0.5];
/// `2^r ≈ 1 + r · EXP2_P(r)` on `|r| ≤ 0.5`.
const EXP2_P: [f32; 7] = [
    1.5297324e-5,
    0.00015461445,
    0.0013333502,
    0.009618057,
    0.05550411,
    0.2402265,
    std::f32::consts::LN_2,
];

/// `e^x` for `x` in `[-104, 89]` (or NaN).
fn exp_core<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let v = mulc(o, x, LOG2E);
    let (kf, ki) = round_nearest(o, &v);
    // x - k·LN2_HI is exact (Sterbenz), then one rounding.
    let h = mulc(o, &kf, LN2_HI);
    let r = o.sub(x, &h);
    let l = mulc(o, &kf, LN2_LO);
    let r = o.sub(&r, &l);
    let r = o.bind(r);
    let z = o.mul(&r, &r);
    let p = poly(o, &r, &EXP_P);
    let q = o.mul(&z, &p);
    let q = o.add(&q, &r);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
}

/// `e^x`: `x > 89` gives +∞ (e^89 overflows), `x < -104` gives 0 (e^-104 < 2^-150).
fn exp<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let xc = min_c(o, x, 89.0);
    let xc = max_c(o, &xc, -104.0);
    let xc = o.bind(xc);
    exp_core(o, &xc)
}

/// `2^(h + l)` for a small correction `l` (|l| well below 1); `h` is clamped to
/// `[-152, 129]`, beyond which the result is 0 or +∞ anyway.
fn exp2_hl<O: Ops<W32>>(o: &mut O, h: &O::F, l: Option<&O::F>) -> O::F {
    let hc = min_c(o, h, 129.0);
    let hc = max_c(o, &hc, -152.0);
    let hc = o.bind(hc);
    let (kf, ki) = round_nearest(o, &hc);
    let mut r = o.sub(&hc, &kf);
    if let Some(l) = l {
        r = o.add(&r, l);
    }
    let r = o.bind(r);
    let p = poly(o, &r, &EXP2_P);
    let q = o.mul(&r, &p);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
}

fn exp2<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    exp2_hl(o, x, None)
}

// ---- log, log2 ----

/// `log(1 + f) ≈ f - f²/2 + f³ · LOG_P(f)` on `f ∈ [√½ - 1, √2 - 1]`.
const LOG_P: [f32; 9] = [
    0.06969754,
    -0.11479188,
    0.11685796,
    -0.124257766,
    0.14249033,
    -0.16667798,
    0.20000717,
    -0.24999997,
    0.3333333,
];

/// The pieces of `log x = k·ln 2 + f - z/2 + c`.
struct LogParts<O: Ops<W32>> {
    k: O::F,
    f: O::F,
    /// `f · f`
    z: O::F,
    /// `f³ · LOG_P(f)`
    c: O::F,
}

fn log_parts<O: Ops<W32>>(o: &mut O, x: &O::F) -> LogParts<O> {
    let (k, f) = log_reduce(o, x);
    let z = o.mul(&f, &f);
    let z = o.bind(z);
    let p = poly(o, &f, &LOG_P);
    let fz = o.mul(&f, &z);
    let c = o.mul(&fz, &p);
    let c = o.bind(c);
    LogParts { k, f, z, c }
}

fn log<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let p = log_parts(o, x);
    // ln 2 = 0.693359375 - 2.12194440e-4; the first part has 9 bits, so k times it is exact.
    let y = mulc(o, &p.k, -2.121_944_4e-4);
    let y = o.add(&p.c, &y);
    let hz = mulc(o, &p.z, 0.5);
    let y = o.sub(&y, &hz);
    let r = o.add(&p.f, &y);
    let kh = mulc(o, &p.k, 0.693_359_4); // 0.693359375 exactly
    let r = o.add(&r, &kh);
    let r = o.bind(r);
    log_specials(o, x, &r)
}

/// `log2(e) - 1`.
const LOG2E_M1: f32 = 0.44269505;

fn log2<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let p = log_parts(o, x);
    let hz = mulc(o, &p.z, 0.5);
    let y = o.sub(&p.c, &hz);
    let y = o.bind(y);
    // (f + y) · log2 e with f added last but k: f·(log2e - 1) + f keeps f exact.
    let a = mulc(o, &y, LOG2E_M1);
    let b = mulc(o, &p.f, LOG2E_M1);
    let r = o.add(&a, &b);
    let r = o.add(&r, &y);
    let r = o.add(&r, &p.f);
    let r = o.add(&r, &p.k);
    let r = o.bind(r);
    log_specials(o, x, &r)
}

// ---- pow ----

/// log2(e) as a double-f32.
const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
const LOG2E_LO: f32 = 1.925963e-8;
/// `2 atanh(s) ≈ 2s + s³ · ATANH_C(s²)` on `|s| ≤ 0.1716`.
const ATANH_C: [f32; 4] = [0.23331614, 0.2855078, 0.40000123, 0.6666667];

/// `log2(a)` for positive finite `a` as a double-f32 `(hi, lo)`, accurate to about
/// 2⁻⁴⁰ relative.
fn log2_dd<O: Ops<W32>>(o: &mut O, a: &O::F) -> (O::F, O::F) {
    let (k, f) = log_reduce(o, a);
    // s = f / (2 + f) as sh + sl: 2 + f = dh + dl exactly, then the residual
    // f - sh·(dh + dl) (exact through Dekker) divided by dh.
    let dh = addc(o, &f, 2.0);
    let dh = o.bind(dh);
    let two = o.cf(2.0);
    let d2 = o.sub(&dh, &two);
    let dl = o.sub(&f, &d2);
    let dl = o.bind(dl);
    let sh = o.div(&f, &dh);
    let sh = o.bind(sh);
    let (p1, p1e) = two_prod(o, &sh, &dh);
    let res = o.sub(&f, &p1);
    let res = o.sub(&res, &p1e);
    let sdl = o.mul(&sh, &dl);
    let res = o.sub(&res, &sdl);
    let sl = o.div(&res, &dh);
    let sl = o.bind(sl);
    // log(1 + f) = 2 atanh(s) = 2sh + 2sl + s³ · C(s²), the small term from s rounded
    // again (sh itself when the division is correctly rounded; a looser division's
    // error is recovered here too)
    let s1 = o.add(&sh, &sl);
    let s1 = o.bind(s1);
    let w = o.mul(&s1, &s1);
    let w = o.bind(w);
    let cp = poly(o, &w, &ATANH_C);
    let c = o.mul(&s1, &w);
    let c = o.mul(&c, &cp);
    let sh2 = mulc(o, &sh, 2.0);
    let sl2 = mulc(o, &sl, 2.0);
    let t = o.add(&sl2, &c);
    let (vh, vl) = fast_two_sum(o, &sh2, &t);
    // times log2 e, as double-f32
    let lg = o.cf(LOG2E_HI);
    let (ph, pl) = two_prod(o, &vh, &lg);
    let a1 = mulc(o, &vh, LOG2E_LO);
    let a2 = mulc(o, &vl, LOG2E_HI);
    let a12 = o.add(&a1, &a2);
    let pl = o.add(&pl, &a12);
    // plus k (|k| ≥ 1 > |ph|, or k = 0)
    let (wh, we) = fast_two_sum(o, &k, &ph);
    let wl = o.add(&we, &pl);
    let wl = o.bind(wl);
    (wh, wl)
}

fn pow<O: Ops<W32>>(o: &mut O, x: &O::F, y: &O::F) -> O::F {
    let a = o.abs(x);
    let a = o.bind(a);
    // The general case: 2^(y · log2 a) with the exponent as a double-f32.
    let (wh, wl) = log2_dd(o, &a);
    let (th, te) = two_prod(o, y, &wh);
    let ywl = o.mul(y, &wl);
    let tl = o.add(&te, &ywl);
    // A huge or infinite exponent saturates; its low part may then be NaN: drop it.
    let ath = o.abs(&th);
    let ok = ltc(o, &ath, 256.0);
    let zero = o.cf(0.0);
    let tl = o.sel(&ok, &tl, &zero);
    let tl = o.bind(tl);
    let r = exp2_hl(o, &th, Some(&tl));
    let r = o.bind(r);
    pow_specials(o, x, y, &a, &r)
}

// ---- sin, cos ----

const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
/// π/2 as five constants of at most 8 significant bits (so `k · PIO2[i]` is exact for
/// `|k| < 2¹⁶`) and a 24-bit sixth; the sum is within 2⁻⁷³ of π/2.
const PIO2: [f32; 6] = [
    1.5703125,
    0.00048446655,
    -6.4074993e-7,
    9.895302e-10,
    2.5579538e-12,
    5.390303e-15,
];
/// `sin r ≈ r + r³ · SIN_P(r²)` on `|r| ≤ 0.7916`.
const SIN_P: [f32; 4] = [2.7245078e-6, -0.00019840049, 0.008333332, -0.16666667];
/// `cos r ≈ 1 - r²/2 + r⁴ · COS_P(r²)` on `|r| ≤ 0.7916`.
const COS_P: [f32; 4] = [-2.7296915e-7, 2.4800569e-5, -0.0013888888, 0.041666668];

fn sincos<O: Ops<W32>>(o: &mut O, x: &O::F, cos: bool) -> O::F {
    let v = mulc(o, x, TWO_OVER_PI);
    let (kf, ki) = round_nearest(o, &v);
    // r = x - k·π/2: the first two subtractions are exact (Sterbenz and the constants'
    // granularity), the next three are TwoSums whose errors are collected in e.
    let mut a = x.clone();
    for &c in &PIO2[..2] {
        let p = mulc(o, &kf, c);
        a = o.sub(&a, &p);
        a = o.bind(a);
    }
    let mut e: Option<O::F> = None;
    for &c in &PIO2[2..5] {
        let p = mulc(o, &kf, -c);
        let (s, err) = two_sum(o, &a, &p);
        a = s;
        e = Some(match e {
            None => err,
            Some(e0) => {
                let t = o.add(&e0, &err);
                o.bind(t)
            }
        });
    }
    let p6 = mulc(o, &kf, PIO2[5]);
    let e = match e {
        Some(e) => o.sub(&e, &p6),
        None => o.neg(&p6),
    };
    let (rh, rl) = fast_two_sum(o, &a, &e);
    // Far beyond the accurate range r is meaningless: keep it bounded (NaN stays NaN).
    let arh = o.abs(&rh);
    let big = gtc(o, &arh, 1.5);
    let big = o.bindb(big);
    let zero = o.cf(0.0);
    let rh = o.sel(&big, &zero, &rh);
    let rh = o.bind(rh);
    let rl = o.sel(&big, &zero, &rl);
    let rl = o.bind(rl);
    let z = o.mul(&rh, &rh);
    let z = o.bind(z);
    // sin(rh + rl) ≈ rh + (rh · z · S(z) + rl)
    let sp = poly(o, &z, &SIN_P);
    let t = o.mul(&z, &sp);
    let t = o.mul(&rh, &t);
    let t = o.add(&t, &rl);
    let s = o.add(&rh, &t);
    let s = o.bind(s);
    // cos(rh + rl) ≈ 1 + ((z² · C(z) - rh · rl) - z/2)
    let cp = poly(o, &z, &COS_P);
    let zz = o.mul(&z, &z);
    let t = o.mul(&zz, &cp);
    let rr = o.mul(&rh, &rl);
    let t = o.sub(&t, &rr);
    let w = mulc(o, &z, 0.5);
    let t = o.sub(&t, &w);
    let c = addc(o, &t, 1.0);
    let c = o.bind(c);
    // quadrant: sin x = (sin r, cos r, -sin r, -cos r) for k mod 4 = 0..3; cos x = sin(x + π/2)
    let q = if cos { iaddc(o, &ki, 1) } else { ki };
    let q = o.bindi(q);
    let zi = o.ci(0);
    let b1 = iandc(o, &q, 1);
    let use_sin = o.ieq(&b1, &zi);
    let res = o.sel(&use_sin, &s, &c);
    let res = o.bind(res);
    let b2 = iandc(o, &q, 2);
    let keep = o.ieq(&b2, &zi);
    let nres = o.neg(&res);
    let res = o.sel(&keep, &res, &nres);
    if cos {
        res
    } else {
        // sin(-0) = -0
        let res = o.bind(res);
        let z0 = eqc(o, x, 0.0);
        o.sel(&z0, x, &res)
    }
}

fn sin<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    sincos(o, x, false)
}

fn cos<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    sincos(o, x, true)
}

// ---- tanh ----

/// `tanh x ≈ x + x³ · TANH_P(x²)` on `|x| ≤ 0.625`.
const TANH_P: [f32; 6] = [
    0.0022927448,
    -0.008343945,
    0.021768918,
    -0.053959258,
    0.13333304,
    -0.33333334,
];

fn tanh<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let ax = o.abs(x);
    let ax = o.bind(ax);
    // |x| < 0.625
    let z = o.mul(x, x);
    let z = o.bind(z);
    let p = poly(o, &z, &TANH_P);
    let t = o.mul(&z, &p);
    let t = o.mul(x, &t);
    let small = o.add(x, &t);
    let small = o.bind(small);
    // otherwise 1 - 2 / (e^(2|x|) + 1); tanh(10) rounds to 1
    let xc = min_c(o, &ax, 10.0);
    let x2 = mulc(o, &xc, 2.0);
    let x2 = o.bind(x2);
    let e = exp_core(o, &x2);
    let d = addc(o, &e, 1.0);
    let two = o.cf(2.0);
    let q = o.div(&two, &d);
    let one = o.cf(1.0);
    let l = o.sub(&one, &q);
    let l = o.bind(l);
    let neg = ltc(o, x, 0.0);
    let nl = o.neg(&l);
    let l = o.sel(&neg, &nl, &l);
    let is_small = ltc(o, &ax, 0.625);
    let r = o.sel(&is_small, &small, &l);
    let r = o.bind(r);
    // tanh(-0) = -0
    let z0 = eqc(o, x, 0.0);
    o.sel(&z0, x, &r)
}

// ---- erf ----

/// `2/√π - 1`.
const TWO_OVER_SQRT_PI_M1: f32 = 0.12837917;
/// `erf x ≈ x + x · ((2/√π - 1) + z · ERF_Q(z))`, `z = x²`, on `|x| ≤ 1`.
const ERF_Q: [f32; 6] = [
    8.379755e-5,
    -0.00081619865,
    0.005204579,
    -0.0268617,
    0.11283754,
    -0.37612638,
];
/// `erfc x · e^(x²) ≈ ERFC_R(x - 2.5)` on `1 ≤ x ≤ 4`.
const ERFC_R: [f32; 13] = [
    1.0301513e-7,
    -4.2647343e-7,
    9.763902e-7,
    -3.7472737e-6,
    1.6114107e-5,
    -5.9523158e-5,
    0.00021091796,
    -0.00073315296,
    0.0024670658,
    -0.0080016935,
    0.024937995,
    -0.07434734,
    0.21080637,
];

fn erf<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let ax = o.abs(x);
    let ax = o.bind(ax);
    // |x| < 1
    let z = o.mul(x, x);
    let z = o.bind(z);
    let q = poly(o, &z, &ERF_Q);
    let t = o.mul(&z, &q);
    let t = addc(o, &t, TWO_OVER_SQRT_PI_M1);
    let t = o.mul(x, &t);
    let small = o.add(x, &t);
    let small = o.bind(small);
    // otherwise 1 - e^(-x²) · R(x - 2.5); erf(4) rounds to 1
    let xc = min_c(o, &ax, 4.0);
    let xc = o.bind(xc);
    let x2 = o.mul(&xc, &xc);
    let nx2 = o.neg(&x2);
    let nx2 = o.bind(nx2);
    let e = exp_core(o, &nx2);
    let e = o.bind(e);
    let u = addc(o, &xc, -2.5);
    let u = o.bind(u);
    let r = poly(o, &u, &ERFC_R);
    let er = o.mul(&e, &r);
    let one = o.cf(1.0);
    let l = o.sub(&one, &er);
    let l = o.bind(l);
    let neg = ltc(o, x, 0.0);
    let nl = o.neg(&l);
    let l = o.sel(&neg, &nl, &l);
    let is_small = ltc(o, &ax, 1.0);
    let r = o.sel(&is_small, &small, &l);
    let r = o.bind(r);
    // erf(-0) = -0
    let z0 = eqc(o, x, 0.0);
    o.sel(&z0, x, &r)
}

#[cfg(test)]
mod tests {
    //! The algorithms run natively (`native::Native`, here in f32 arithmetic) compute bit
    //! for bit what the interpreter computes on the emitted IR; `native_matches_ir` checks
    //! that, so the exhaustive native sweeps (`#[ignore]`d: run them with
    //! `cargo test -p kernelc-ir --release --lib passes::math::single -- --ignored --nocapture`)
    //! measure the pass's output.

    use super::*;
    use crate::passes::math::native::{assert_native_matches_ir, Native};
    use crate::passes::math::MathExpansion;

    fn native(func: MathFn, x: f32, y: f32) -> f32 {
        expand_f32(&mut Native, func, &[x, y]).unwrap_or(f32::NAN)
    }

    /// The interpreter's reference: f64 evaluation rounded once.
    fn reference(func: MathFn, x: f32, y: f32) -> f32 {
        let (x, y) = (x as f64, y as f64);
        (match func {
            MathFn::Exp => x.exp(),
            MathFn::Exp2 => x.exp2(),
            MathFn::Log => x.ln(),
            MathFn::Log2 => x.log2(),
            MathFn::Tanh => x.tanh(),
            MathFn::Erf => libm::erf(x),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Pow => x.powf(y),
            _ => f64::NAN,
        }) as f32
    }

    /// Error in ULPs of `want` (subnormal ULP below the normal range); NaN and
    /// infinities must match exactly.
    fn ulps(got: f32, want: f32) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if want.is_infinite() || got.is_infinite() || got.is_nan() {
            return if got == want { 0.0 } else { f64::INFINITY };
        }
        let e = ((want.abs().to_bits() >> 23) as i32).max(1) - 127;
        ((got as f64) - (want as f64)).abs() / 2f64.powi(e - 23)
    }

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 32) as u32
        }
    }

    #[test]
    fn native_matches_ir() {
        let n = 4096usize;
        let mut rng = Lcg(7);
        for func in MathExpansion::SUPPORTED {
            let xs: Vec<f32> = (0..n)
                .map(|i| match i % 3 {
                    0 => f32::from_bits(rng.next()),
                    1 => (rng.next() as f32 / u32::MAX as f32 - 0.5) * 40.0,
                    _ => (rng.next() as f32 / u32::MAX as f32) * 4.0,
                })
                .collect();
            let ys: Vec<f32> = (0..n)
                .map(|_| (rng.next() as f32 / u32::MAX as f32 - 0.5) * 60.0)
                .collect();
            assert_native_matches_ir::<W32>(func, &xs, &ys, |x, y| native(func, x, y));
        }
    }

    /// Max error of `func` over every f32 whose bits lie in `[lo, hi]`, both signs.
    fn sweep(func: MathFn, lo: f32, hi: f32) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for bits in lo.to_bits()..=hi.to_bits() {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                let e = ulps(native(func, x, 0.0), reference(func, x, 0.0));
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        }
        eprintln!(
            "{}: every |x| in [{lo:e}, {hi:e}]: max {} ulp at {:e}",
            func.name(),
            worst.0,
            worst.1
        );
        worst
    }

    #[test]
    #[ignore = "exhaustive: ~2^32 inputs per function (tens of minutes in release mode)"]
    fn exhaustive_unary() {
        let all = (0.0, f32::INFINITY);
        for (func, (lo, hi)) in [
            (MathFn::Exp, (0.0, 110.0)),
            (MathFn::Exp2, (0.0, 160.0)),
            (MathFn::Log, all),
            (MathFn::Log2, all),
            (MathFn::Tanh, all),
            (MathFn::Erf, all),
            (MathFn::Sin, (0.0, 102_900.0)),
            (MathFn::Cos, (0.0, 102_900.0)),
        ] {
            let (e, x) = sweep(func, lo, hi);
            assert!(e <= 1.0, "{}: {e} ulp at {x:e}", func.name());
        }
    }

    #[test]
    #[ignore = "slow (tens of millions of random pairs)"]
    fn random_pow() {
        let mut rng = Lcg(11);
        let mut unit = move || rng.next() as f64 / u32::MAX as f64;
        let mut worst = (0.0, 0.0, 0.0);
        for i in 0..20_000_000u32 {
            let (x, y) = if i % 2 == 0 {
                // the brief's range: x in (0, 1e6], y in [-30, 30]
                (
                    (unit() * 168.9 - 149.0).exp2() as f32,
                    (unit() * 60.0 - 30.0) as f32,
                )
            } else {
                // any base, |y·log2 x| up to 128 (|y| up to ~250 near x = 1.4)
                let x = f32::from_bits((unit() * 2_139_095_039.0) as u32);
                let t = unit() * 278.0 - 150.0;
                (x, (t / (x as f64).log2()) as f32)
            };
            let want = reference(MathFn::Pow, x, y);
            if !(want.is_finite() && want.abs() >= f32::MIN_POSITIVE) {
                continue;
            }
            let e = ulps(native(MathFn::Pow, x, y), want);
            if e > worst.0 {
                worst = (e, x, y);
            }
        }
        eprintln!("pow: max {} ulp at ({:e}, {:e})", worst.0, worst.1, worst.2);
        assert!(worst.0 <= 8.0);
    }
}
