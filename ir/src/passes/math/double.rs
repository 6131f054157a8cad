//! The f64 implementations of the math expansion (see the parent module's documentation
//! for the accuracy table and [`MathExpansion::f64`](super::MathExpansion::f64)).
//!
//! The designs are the double-precision versions of the f32 ones: Cody–Waite range
//! reductions whose first step is exact, polynomials fitted in the Chebyshev sense (in
//! 60-digit arithmetic, coefficients rounded to f64) and evaluated by Horner's scheme, and
//! double-double arithmetic (a value `h + l` with `|l| ≲ ulp(h)`) wherever one rounding
//! would cost more than a fraction of an ulp: the reduced argument of `exp`, `log` of the
//! mantissa, `y · log x` in `pow`, `x²` in `erf`, and `x − k·π/2`. The error-free
//! products use `fma` (exact on every target); `+ − ×` must never be contracted.
//!
//! Like the f32 algorithms, these are written once against the width-generic operations
//! trait of module `width` (`Ops<W64>`, plus `fma` from [`Ops64`]), and use its
//! width-generic helpers (constant operands, TwoSum, `2^k` scaling, the `log` reduction)
//! and the algorithm shapes of module `shared` (`tanh`, `pow`'s outline, the `sin`/`cos`
//! reduction and quadrant), for which [`Arith`] is implemented here with `fma`: the pass
//! instantiates them with IR expressions (`Emitter`), the tests with native f64
//! arithmetic, which computes bit for bit what the interpreter computes on the emitted IR.

use super::shared::{self, abs_square, odd_join, Algorithms, Arith, Trig};
use super::width::{
    addc, clamp, fast_two_sum, log_reduce, log_specials, ltc, min_c, mulc, round_nearest, scale,
    two_sum, Ops, W64,
};

/// The f64 operations: those of [`Ops`] for [`W64`], and `fma`.
pub(super) trait Ops64: Ops<W64> {
    /// `a · b + c` rounded once.
    fn fma(&mut self, a: &Self::F, b: &Self::F, c: &Self::F) -> Self::F;
}

/// f64 arithmetic fuses: Horner steps, `x + x·t` and the exact product's error are each
/// one fma.
impl<O: Ops64> Arith<W64> for O {
    fn poly(&mut self, x: &O::F, c: &[f64]) -> O::F {
        let mut acc = self.cf(c.first().copied().unwrap_or(0.0));
        for &ci in c.iter().skip(1) {
            let k = self.cf(ci);
            acc = self.fma(&acc, x, &k);
        }
        acc
    }

    fn add_x_times(&mut self, x: &O::F, t: &O::F) -> O::F {
        self.fma(x, t, x)
    }

    fn two_prod(&mut self, a: &O::F, b: &O::F) -> (O::F, O::F) {
        let p = self.mul(a, b);
        let p = self.bind(p);
        let np = self.neg(&p);
        let e = self.fma(a, b, &np);
        let e = self.bind(e);
        (p, e)
    }
}

/// `a · b + c` without an fused multiply-add, for targets whose `fma` rounds twice
/// (llvmpipe's does): `s + (t + e)`, where `p + e = a · b` exactly by Dekker's product
/// (halves of 26 bits, so every partial product is exact, barring underflow) and
/// `s + t = p + c` by TwoSum.
/// Where the target may contract or reassociate, `fl(a·b)` is read through an opaque
/// value ([`Ops::opaque`]), as TwoSum reads its sum.
/// What the algorithms ask of `fma` is then exact: `fma(a, b, −fl(a·b))` gives `e`,
/// `fma(−g, r, 1)` the residual, and a Horner step is within an ulp. Where the sum is
/// not finite (`a · b` or `p + c` overflowing, a NaN or ∞ operand), `a · b + c` as is.
pub(super) fn emulated_fma<O: Ops<W64>>(o: &mut O, a: &O::F, b: &O::F, c: &O::F) -> O::F {
    let p = o.mul(a, b);
    let p = o.bind(p);
    // Read through an opaque value where the driver may contract: `hh − a·b` fused
    // would subtract the exact product, and the error term `e` would come out 0.
    let p = o.opaque(&p);
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
    let (s, t) = two_sum(o, &p, c);
    let low = o.add(&t, &e);
    let fused = o.add(&s, &low);
    let fused = o.bind(fused);
    let plain = o.add(&p, c);
    let magnitude = o.abs(&fused);
    let finite = ltc(o, &magnitude, f64::INFINITY);
    o.sel(&finite, &fused, &plain)
}

/// `a = hi + lo` exactly, each of at most 26 significant bits: `hi` is `a` rounded to
/// 26 bits on its bit pattern (half of the dropped unit added, the rest masked; no
/// multiplication that could overflow), `lo` the signed rest.
fn split<O: Ops<W64>>(o: &mut O, a: &O::F) -> (O::F, O::F) {
    let bits = o.bits_of(a);
    let half = o.ci(1i64 << 26);
    let rounded = o.iadd(&bits, &half);
    let mask = o.ci(!((1i64 << 27) - 1));
    let top = o.iand(&rounded, &mask);
    let hi = o.float_of_bits(&top);
    let hi = o.bind(hi);
    let lo = o.sub(a, &hi);
    let lo = o.bind(lo);
    (hi, lo)
}

/// The f64 algorithms.
impl<O: Ops64> Algorithms<W64> for O {
    fn exp(o: &mut O, x: &O::F) -> O::F {
        exp_dd(o, x, None)
    }

    /// `2^x = 2^k · e^((x − k)·ln 2)`, the product as a double-double.
    fn exp2(o: &mut O, x: &O::F) -> O::F {
        // 2^1024 overflows, 2^-1076 rounds to 0: clamping keeps k in range of `scale`.
        let xc = clamp(o, x, -1080.0, 1025.0);
        let (kf, ki) = round_nearest(o, &xc);
        let r = o.sub(&xc, &kf);
        let r = o.bind(r);
        let zero = o.cf(0.0);
        let (rh, rl) = dd_mul_const(o, (&r, &zero), LN2_DD);
        exp_reduced(o, &rh, &rl, &ki)
    }

    fn log(o: &mut O, x: &O::F) -> O::F {
        let (h, l) = log_dd(o, x);
        let r = o.add(&h, &l);
        let r = o.bind(r);
        log_specials(o, x, &r)
    }

    /// `log2 x = k + log(m)·log₂e`, the product as a double-double and `k` added exactly
    /// (so powers of two give exact integers).
    fn log2(o: &mut O, x: &O::F) -> O::F {
        let (k, f) = log_reduce(o, x);
        let (h, l) = log1p_dd(o, &f);
        let (ph, pl) = dd_mul_const(o, (&h, &l), LOG2E_DD);
        // |k| ≥ 1 > |ph| (|log2 m| ≤ 0.5), or k = 0
        let (a, ae) = fast_two_sum(o, &k, &ph);
        let low = o.add(&ae, &pl);
        let r = o.add(&a, &low);
        let r = o.bind(r);
        log_specials(o, x, &r)
    }

    fn tanh(o: &mut O, x: &O::F) -> O::F {
        // tanh(22) rounds to 1 (2e^-44 < 2^-54)
        shared::tanh(o, x, &TANH_P, 22.0, |o, x2| exp_dd(o, &x2, None))
    }

    fn erf(o: &mut O, x: &O::F) -> O::F {
        let (ax, z) = abs_square(o, x);
        // |x| < 1
        let e = o.poly(&z, &ERF_E);
        let small = o.add_x_times(x, &e);
        let small = o.bind(small);
        // otherwise ±(1 - e^(-x²) · R(x)), x² as a double-double
        let xc = min_c(o, &ax, ERF_ONE);
        let xc = o.bind(xc);
        let (sh, sl) = o.two_prod(&xc, &xc);
        let nsh = o.neg(&sh);
        let nsl = o.neg(&sl);
        let g = exp_dd(o, &nsh, Some(&nsl));
        let g = o.bind(g);
        let near = ltc(o, &xc, 2.5);
        let near = o.bindb(near);
        let c_near = o.cf(1.75);
        let c_far = o.cf(4.25);
        let centre = o.sel(&near, &c_near, &c_far);
        let u = o.sub(&xc, &centre);
        let u = o.bind(u);
        let r = poly_either(o, &u, &near, &ERFC_NEAR, &ERFC_FAR);
        let one = o.cf(1.0);
        let ng = o.neg(&g);
        let l = o.fma(&ng, &r, &one);
        let l = o.bind(l);
        odd_join(o, x, &ax, &small, &l, 1.0)
    }

    fn sincos(o: &mut O, x: &O::F, which: Trig) -> O::F {
        let ax = o.abs(x);
        let ax = o.bind(ax);
        let reducible = ltc(o, &ax, TRIG_REDUCIBLE);
        let zero = o.cf(0.0);
        let xr = o.sel(&reducible, x, &zero);
        let xr = o.bind(xr);
        // r = x − k·π/2 (exact products for |k| < 2²⁰): the first subtraction exact, the
        // next two TwoSums.
        let (ki, rh, rl) = shared::reduce_pio2(o, &xr, &PIO2[..1], &PIO2[1..3], PIO2[3]);
        let (zh, zl) = o.two_prod(&rh, &rh);
        let s = sin_reduced(o, &rh, &rl, &zh);
        let s = o.bind(s);
        let c = cos_reduced(o, &rh, &rl, &zh, &zl);
        let c = o.bind(c);
        let res = shared::trig_quadrant(o, x, ki, &s, &c, which);
        // ±∞ and NaN give NaN.
        let res = o.bind(res);
        let finite = ltc(o, &ax, f64::INFINITY);
        let nan = o.cf(f64::NAN);
        o.sel(&finite, &res, &nan)
    }

    /// `pow(x, y) = e^(y·log|x|)` with the logarithm and the product as double-doubles, then
    /// the C99/IEEE special cases (as `f64::powf`), selected over the general result.
    fn pow(o: &mut O, x: &O::F, y: &O::F) -> O::F {
        shared::pow(o, x, y, log_dd, |o, th, tl| {
            let tl = o.bind(tl);
            exp_dd(o, th, Some(&tl))
        })
    }
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Horner's scheme on one of two coefficient sets of equal length, chosen per lane by
/// `first` (a select per coefficient is cheaper than evaluating both polynomials).
fn poly_either<O: Ops64>(o: &mut O, x: &O::F, first: &O::B, a: &[f64], b: &[f64]) -> O::F {
    let mut acc: Option<O::F> = None;
    for (&ca, &cb) in a.iter().zip(b) {
        let (ka, kb) = (o.cf(ca), o.cf(cb));
        let k = o.sel(first, &ka, &kb);
        acc = Some(match acc {
            None => k,
            Some(acc) => o.fma(&acc, x, &k),
        });
    }
    acc.unwrap_or_else(|| o.cf(0.0))
}

/// The double-double product `(ah + al) · (bh + bl)`, dropping `al · bl`.
fn dd_mul<O: Ops64>(o: &mut O, a: (&O::F, &O::F), b: (&O::F, &O::F)) -> (O::F, O::F) {
    let (p, e) = o.two_prod(a.0, b.0);
    let c1 = o.mul(a.0, b.1);
    let c2 = o.mul(a.1, b.0);
    let c = o.add(&c1, &c2);
    let l = o.add(&e, &c);
    let l = o.bind(l);
    (p, l)
}

/// The double-double product `(ah + al) · c` for a constant `c = ch + cl`.
fn dd_mul_const<O: Ops64>(o: &mut O, a: (&O::F, &O::F), c: (f64, f64)) -> (O::F, O::F) {
    let ch = o.cf(c.0);
    let cl = o.cf(c.1);
    dd_mul(o, a, (&ch, &cl))
}

// ---------------------------------------------------------------------------------------
// exp, exp2
// ---------------------------------------------------------------------------------------

/// ln 2 in two parts: the first has 42 significant bits, so `k · LN2_HI` is exact for
/// `|k| < 2¹¹`; the second makes the sum accurate to ~2⁻⁹⁶.
const LN2_HI: f64 = 0.693_147_180_559_890_3;
const LN2_LO: f64 = 5.497_923_018_708_371e-14;
/// ln 2 as a double-double (the closest f64 and the rest).
const LN2_DD: (f64, f64) = (std::f64::consts::LN_2, 2.319_046_813_846_299_6e-17);
/// log₂ e as a double-double.
const LOG2E_DD: (f64, f64) = (std::f64::consts::LOG2_E, 2.035_527_374_093_103_3e-17);
/// `e^r ≈ 1 + r + r² · EXP_Q(r)` on `|r| ≤ 0.3466` (fit error 2⁻⁵⁹·³).
const EXP_Q: [f64; 11] = [
    2.091_468_516_141_806_7e-9,
    2.510_521_447_475_141_3e-8,
    2.755_727_364_745_108_7e-7,
    2.755_725_540_628_504_4e-6,
    2.480_158_732_554_432e-5,
    0.000_198_412_698_748_158_34,
    0.001_388_888_888_888_375,
    0.008_333_333_333_326_136,
    0.041_666_666_666_666_67,
    0.166_666_666_666_666_7,
    0.5,
];
/// Beyond these, `e^x` is `+∞` (ln of the largest f64 is 709.78) or `0` (e^-746 is
/// below half the smallest subnormal); clamping there keeps `k` in range of [`scale`].
const EXP_MAX: f64 = 709.79;
const EXP_MIN: f64 = -746.0;

/// `2^k · e^(rh + rl)` for a reduced argument `|rh| ≤ 0.3466 + ε`, `|rl| ≲ ulp(rh)`:
/// `e^(rh+rl) ≈ 1 + rh + (rl·(1 + rh) + rh²·Q(rh))`, the `1 + rh` kept exact.
fn exp_reduced<O: Ops64>(o: &mut O, rh: &O::F, rl: &O::F, k: &O::I) -> O::F {
    let z = o.mul(rh, rh);
    let q = o.poly(rh, &EXP_Q);
    let t = o.mul(&z, &q);
    let c = o.fma(rh, rl, rl);
    let t = o.add(&t, &c);
    let one = o.cf(1.0);
    let (s, e) = fast_two_sum(o, &one, rh);
    let t = o.add(&e, &t);
    let p = o.add(&s, &t);
    let p = o.bind(p);
    scale(o, &p, k)
}

/// `e^(h + l)` for a double-double argument (`l` absent: 0). `h` is clamped to
/// `[EXP_MIN, EXP_MAX]`, and `l` dropped where `h` is far outside (where `l` may be NaN
/// from an infinite `h`; the result is 0 or +∞ there anyway).
fn exp_dd<O: Ops64>(o: &mut O, h: &O::F, l: Option<&O::F>) -> O::F {
    let hc = clamp(o, h, EXP_MIN, EXP_MAX);
    let v = mulc(o, &hc, std::f64::consts::LOG2_E);
    let (kf, ki) = round_nearest(o, &v);
    // h - k·LN2_HI is exact: the product is, and the difference is a multiple of
    // ulp(h) below 0.35 (or Sterbenz applies).
    let kh = mulc(o, &kf, LN2_HI);
    let a = o.sub(&hc, &kh);
    let a = o.bind(a);
    let kl = mulc(o, &kf, LN2_LO);
    let low = match l {
        Some(l) => {
            let ah = o.abs(h);
            let near = ltc(o, &ah, 1000.0);
            let zero = o.cf(0.0);
            let l = o.sel(&near, l, &zero);
            o.sub(&l, &kl)
        }
        None => o.neg(&kl),
    };
    let low = o.bind(low);
    let (rh, rl) = two_sum(o, &a, &low);
    exp_reduced(o, &rh, &rl, &ki)
}

// ---------------------------------------------------------------------------------------
// log, log2
// ---------------------------------------------------------------------------------------

/// 2/3 as a double-double.
const TWO_THIRDS_DD: (f64, f64) = (0.666_666_666_666_666_6, 3.700_743_415_417_188e-17);
/// `2·atanh(s) = 2s + (2/3)s³ + s⁵ · ATANH_T(s²)` on `|s| ≤ 0.1716` (`ATANH_T(w) =
/// Σ 2wⁿ/(2n + 5)`; fit error 2⁻⁶⁶).
const ATANH_T: [f64; 9] = [
    0.107_624_155_979_720_05,
    0.104_563_282_429_454_38,
    0.117_668_130_775_911_33,
    0.133_332_965_354_372_4,
    0.153_846_157_611_573_89,
    0.181_818_181_796_570_14,
    0.222_222_222_222_284_3,
    0.285_714_285_714_285_64,
    0.4,
];

/// `log(1 + f)` for `1 + f ∈ [√½, √2)` as a double-double, accurate to ~2⁻⁶⁸ relative:
/// `2·atanh(s)` with `s = f / (2 + f)` as a double-double and the `(2/3)s³` term too.
fn log1p_dd<O: Ops64>(o: &mut O, f: &O::F) -> (O::F, O::F) {
    // 2 + f = dh + dl exactly (dh - 2 is exact by Sterbenz).
    let dh = addc(o, f, 2.0);
    let dh = o.bind(dh);
    // Opaque where the driver may reassociate: `(f + 2) − 2` would fold to `f`.
    let dho = o.opaque(&dh);
    let d2 = addc(o, &dho, -2.0);
    let dl = o.sub(f, &d2);
    let dl = o.bind(dl);
    // s = sh + sl from the division's exact residual f - sh·dh.
    let sh = o.div(f, &dh);
    let sh = o.bind(sh);
    let nsh = o.neg(&sh);
    let res = o.fma(&nsh, &dh, f);
    let sdl = o.mul(&sh, &dl);
    let res = o.sub(&res, &sdl);
    let sl = o.div(&res, &dh);
    let sl = o.bind(sl);
    // s² and s³ as double-doubles, (2/3)s³, and the rest s⁵·T(s²) rounded once.
    let (wh, wl) = dd_mul(o, (&sh, &sl), (&sh, &sl));
    let (ch, cl) = dd_mul(o, (&sh, &sl), (&wh, &wl));
    let (th, tl) = dd_mul_const(o, (&ch, &cl), TWO_THIRDS_DD);
    let t = o.poly(&wh, &ATANH_T);
    let c5 = o.mul(&ch, &wh);
    let rest = o.mul(&c5, &t);
    let rest = o.bind(rest);
    // 2sh + ((2/3)s³ + rest) + (2sl + tl + rounding errors), largest first.
    let (u, ue) = fast_two_sum(o, &th, &rest);
    let sh2 = mulc(o, &sh, 2.0);
    let (h, he) = fast_two_sum(o, &sh2, &u);
    let sl2 = mulc(o, &sl, 2.0);
    let small = o.add(&sl2, &tl);
    let small = o.add(&small, &ue);
    let l = o.add(&he, &small);
    let l = o.bind(l);
    (h, l)
}

/// `log x` for positive finite `x` as a double-double (unnormalised: `|l|` may reach a
/// few ulp of `h`), accurate to ~2⁻⁶⁷ relative.
fn log_dd<O: Ops64>(o: &mut O, x: &O::F) -> (O::F, O::F) {
    let (k, f) = log_reduce(o, x);
    let (h, l) = log1p_dd(o, &f);
    // k·LN2_HI is exact; |k·ln 2| ≥ 0.69 > |h| unless k = 0, so Fast2Sum applies.
    let kh = mulc(o, &k, LN2_HI);
    let (a, ae) = fast_two_sum(o, &kh, &h);
    let kl = mulc(o, &k, LN2_LO);
    let low = o.add(&l, &kl);
    let low = o.add(&ae, &low);
    let low = o.bind(low);
    (a, low)
}

// ---------------------------------------------------------------------------------------
// sin, cos
// ---------------------------------------------------------------------------------------

/// π/2 as three constants of at most 33 significant bits (so `k · PIO2[i]` is exact for
/// `|k| < 2²⁰`) and a full fourth; the sum is within 2⁻¹⁵⁹ of π/2.
const PIO2: [f64; 4] = [
    1.570_796_326_734_125_6,
    6.077_100_506_303_966e-11,
    2.022_266_248_711_166_5e-21,
    8.478_427_660_368_9e-32,
];
/// Arguments at least this large are not reduced (`k` would not fit the rounding trick's
/// range): they are treated as 0. Below, beyond `|k| = 2²⁰` the products `k·PIO2[i]`
/// round and the absolute error grows like `|x|·2⁻⁵⁴` (under a quarter at 2⁵¹), within
/// the tolerance table's `8·u·|x|` allowance, which from 2⁵¹ on admits any value in
/// `[−1, 1]`.
const TRIG_REDUCIBLE: f64 = 2_251_799_813_685_248.0; // 2^51
/// `sin r ≈ r + r³ · SIN_S(r²)` on `|r| ≤ 0.8` (fit error 2⁻⁶⁵·⁹).
const SIN_S: [f64; 7] = [
    -7.584_436_884_170_301e-13,
    1.605_849_255_672_989_2e-10,
    -2.505_210_598_135_075_2e-8,
    2.755_731_921_860_257_5e-6,
    -0.000_198_412_698_412_641,
    0.008_333_333_333_333_331,
    -0.166_666_666_666_666_66,
];
/// `cos r ≈ 1 − r²/2 + r⁴ · COS_C(r²)` on `|r| ≤ 0.8` (fit error 2⁻⁵⁹·¹).
const COS_C: [f64; 6] = [
    -1.137_933_858_529_813_6e-11,
    2.087_609_969_231_492_6e-9,
    -2.755_731_704_403_567e-7,
    2.480_158_729_831_839_5e-5,
    -0.001_388_888_888_888_709_6,
    0.041_666_666_666_666_664,
];

/// `sin(rh + rl) ≈ rh + (rl + rh³·S(rh²))` (`z = rh²`).
fn sin_reduced<O: Ops64>(o: &mut O, rh: &O::F, rl: &O::F, z: &O::F) -> O::F {
    let sp = o.poly(z, &SIN_S);
    let t = o.mul(z, &sp);
    let t = o.fma(rh, &t, rl);
    o.add(rh, &t)
}

/// `cos(rh + rl) ≈ (1 − zh/2) + (z²·C(z) − zl/2 − rh·rl)` with `rh² = zh + zl` exactly
/// and `1 − zh/2` kept as a double-double.
fn cos_reduced<O: Ops64>(o: &mut O, rh: &O::F, rl: &O::F, zh: &O::F, zl: &O::F) -> O::F {
    let hz = mulc(o, zh, 0.5);
    let hz = o.bind(hz);
    let one = o.cf(1.0);
    let nhz = o.neg(&hz);
    let (c1, e1) = fast_two_sum(o, &one, &nhz);
    let cp = o.poly(zh, &COS_C);
    let zz = o.mul(zh, zh);
    let t = o.mul(&zz, &cp);
    let hl = mulc(o, zl, 0.5);
    let t = o.sub(&t, &hl);
    let rr = o.mul(rh, rl);
    let t = o.sub(&t, &rr);
    let t = o.add(&e1, &t);
    o.add(&c1, &t)
}

// ---------------------------------------------------------------------------------------
// tanh
// ---------------------------------------------------------------------------------------

/// `tanh x ≈ x + x³ · TANH_P(x²)` on `|x| ≤ 0.625` (fit error 2⁻⁵⁷·⁸).
const TANH_P: [f64; 12] = [
    6.485_163_482_793_113e-6,
    -3.120_110_142_579_74e-5,
    9.257_116_129_556_769e-5,
    -0.000_237_590_649_605_556_2,
    0.000_589_660_657_775_704_3,
    -0.001_455_775_412_047_805_5,
    0.003_592_121_751_154_962_2,
    -0.008_863_235_103_240_878,
    0.021_869_488_519_008_305,
    -0.053_968_253_967_896_99,
    0.133_333_333_333_330_42,
    -0.333_333_333_333_333_3,
];

// ---------------------------------------------------------------------------------------
// erf
// ---------------------------------------------------------------------------------------

/// `erf x ≈ x + x · ERF_E(x²)` on `|x| ≤ 1` (`ERF_E(0) = 2/√π − 1`; fit error 2⁻⁵⁶·⁹).
const ERF_E: [f64; 12] = [
    -7.795_898_827_002_142e-10,
    1.372_006_454_677_768_6e-8,
    -1.620_848_380_187_170_5e-7,
    1.644_742_470_331_736_2e-6,
    -1.492_473_690_741_966e-5,
    0.000_120_552_949_048_397_07,
    -0.000_854_832_597_538_969_2,
    0.005_223_977_607_116_422_5,
    -0.026_866_170_643_237_77,
    0.112_837_916_709_450_06,
    -0.376_126_389_031_835_43,
    0.128_379_167_095_512_56,
];
/// `erfc x · e^(x²) ≈ ERFC_NEAR(x − 1.75)` on `1 ≤ x ≤ 2.5` (fit error 2⁻⁶²·⁸).
const ERFC_NEAR: [f64; 20] = [
    -7.284_226_875_618_169e-11,
    3.024_522_338_163_812_7e-10,
    -1.027_948_707_091_912_1e-9,
    4.078_439_777_723_807e-9,
    -1.609_217_678_531_122_4e-8,
    6.125_858_418_423_319e-8,
    -2.277_591_171_385_855_4e-7,
    8.271_168_226_436_86e-7,
    -2.927_938_946_074_689e-6,
    1.008_668_711_863_498_5e-5,
    -3.375_535_512_350_179e-5,
    0.000_109_505_287_898_778_97,
    -0.000_343_533_353_481_902_85,
    0.001_039_204_522_494_317_5,
    -0.003_020_974_651_424_632,
    0.008_404_319_207_326_675,
    -0.022_259_995_241_388_338,
    0.055_763_630_087_087_304,
    -0.130_976_345_514_485_2,
    0.284_972_234_737_436_4,
];
/// `erfc x · e^(x²) ≈ ERFC_FAR(x − 4.25)` on `2.5 ≤ x ≤ 6` (fit error 2⁻⁵²·⁶, ample
/// where `e^(−x²) ≤ 2⁻⁹`).
const ERFC_FAR: [f64; 20] = [
    -4.468_448_672_963_503e-15,
    2.670_890_640_370_474e-14,
    -8.951_517_882_296_557e-14,
    5.147_060_299_059_555e-13,
    -3.367_987_548_113_354_4e-12,
    1.904_382_052_080_062_4e-11,
    -1.047_303_875_114_282_9e-10,
    5.764_865_097_795_361e-10,
    -3.133_906_547_477_162e-9,
    1.678_160_115_881_657_3e-8,
    -8.855_425_944_253_482e-8,
    4.602_596_045_787_792_7e-7,
    -2.354_600_684_586_301_6e-6,
    1.184_809_394_373_369_5e-5,
    -5.859_550_020_157_721e-5,
    0.000_284_575_156_768_283_87,
    -0.001_355_933_167_105_193_8,
    0.006_331_866_273_879_434,
    -0.028_944_331_414_615_315,
    0.129_345_274_785_987_8,
];
/// `erf(6)` rounds to 1 (`erfc 6 ≈ 2.2e-17 < 2^-54`).
const ERF_ONE: f64 = 6.0;

#[cfg(test)]
mod tests {
    //! `Native` runs the algorithms in f64 arithmetic, bit for bit what the interpreter
    //! computes on the emitted IR (`native_matches_ir` checks that), so the random sweeps
    //! measure the pass's output quickly. Wider sweeps are `#[ignore]`d: run them with
    //! `cargo test -p kernelc-ir --release --lib passes::math::double -- --ignored --nocapture`.

    use super::*;
    use crate::kernel::MathFn;
    use crate::passes::math::native::{assert_native_matches_ir, reference, Native};
    use crate::passes::MathExpansion;

    thread_local! {
        /// Whether this thread's `Native` computes `fma` as [`emulated_fma`] (a target
        /// whose fma rounds twice) instead of fused.
        static UNFUSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    impl Ops64 for Native {
        fn fma(&mut self, a: &f64, b: &f64, c: &f64) -> f64 {
            if UNFUSED.with(|u| u.get()) {
                emulated_fma(self, a, b, c)
            } else {
                a.mul_add(*b, *c)
            }
        }
    }

    fn native(func: MathFn, x: f64, y: f64) -> f64 {
        shared::expand::<W64, _>(&mut Native, func, &[x, y]).unwrap_or(f64::NAN)
    }

    /// Error in ULPs of `want` (subnormal ULP below the normal range); NaN, infinities
    /// and the sign of zero must match exactly.
    fn ulps(got: f64, want: f64) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if want.is_infinite() || got.is_infinite() || got.is_nan() || want == 0.0 {
            let same = got == want && got.is_sign_negative() == want.is_sign_negative();
            return if same { 0.0 } else { f64::INFINITY };
        }
        (got - want).abs() / ulp_of(want)
    }

    /// The ULP of `w`'s binade: `2^(E − 1075)` for the biased exponent `E` (at least 1).
    fn ulp_of(w: f64) -> f64 {
        let biased = (w.abs().to_bits() >> 52).max(1);
        if biased > 52 {
            f64::from_bits((biased - 52) << 52)
        } else {
            f64::from_bits(1 << (biased - 1))
        }
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.unit()
        }
        /// `±2^e` with `e` uniform in `[lo, hi)`, the sign random when `signed`.
        fn log_uniform(&mut self, lo: f64, hi: f64, signed: bool) -> f64 {
            let m = self.uniform(lo, hi).exp2();
            if signed && self.next() & 1 == 1 {
                -m
            } else {
                m
            }
        }
    }

    /// Special and boundary inputs every function is checked on.
    fn specials() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            1.0,
            -1.0,
            0.5,
            2.0,
            -2.0,
            3.0,
            -3.0,
            1e-300,
            -1e-300,
            1e300,
            -1e300,
            709.782712893384,
            709.7827128933841,
            709.79,
            -708.3964185322641,
            -745.1332191019411,
            -745.1332191019412,
            -746.0,
            1023.9999999999999,
            1024.0,
            -1074.0,
            -1074.5,
            -1075.0,
            -1075.0000000000002,
            0.625,
            0.6249999999999999,
            22.0,
            6.0,
            2.5,
            1e5,
            1.6e6,
            1e15,
            1e300,
        ];
        for bits in [
            1u64,
            2,
            3,
            0x100,
            0x1234_5678,
            0x000f_ffff_ffff_ffff,
            0x0008_0000_0000_0000,
        ] {
            v.push(f64::from_bits(bits));
            v.push(-f64::from_bits(bits));
        }
        v
    }

    #[test]
    fn native_matches_ir() {
        native_matches_ir_for(&MathExpansion::all_transcendental_with_f64());
    }

    /// With `fma` emulated, as for a target whose fma rounds twice.
    #[test]
    fn native_matches_ir_with_emulated_fma() {
        UNFUSED.with(|u| u.set(true));
        native_matches_ir_for(&MathExpansion::all_transcendental_with_f64().with_fused_fma(false));
    }

    /// Emulated `fma` with opaque values (a target that may also reassociate) computes
    /// the same bits.
    #[test]
    fn native_matches_ir_with_emulated_fma_and_opaque_sums() {
        UNFUSED.with(|u| u.set(true));
        native_matches_ir_for(
            &MathExpansion::all_transcendental_with_f64()
                .with_fused_fma(false)
                .with_opaque_sums(true),
        );
    }

    /// Opaque values with a fused `fma` compute the same bits too.
    #[test]
    fn native_matches_ir_with_opaque_sums() {
        native_matches_ir_for(&MathExpansion::all_transcendental_with_f64().with_opaque_sums(true));
    }

    fn native_matches_ir_for(expansion: &MathExpansion) {
        let n = 2048usize;
        let mut rng = Rng(7);
        for func in MathExpansion::SUPPORTED {
            let mut xs: Vec<f64> = (0..n)
                .map(|i| match i % 3 {
                    0 => f64::from_bits(rng.next()),
                    1 => rng.uniform(-40.0, 40.0),
                    _ => rng.uniform(0.0, 4.0),
                })
                .collect();
            let sp = specials();
            xs[..sp.len()].copy_from_slice(&sp);
            let ys: Vec<f64> = (0..n).map(|_| rng.uniform(-60.0, 60.0)).collect();
            assert_native_matches_ir::<W64>(expansion, func, &xs, &ys, |x, y| native(func, x, y));
        }
    }

    /// Max error of `func` over `n` inputs drawn by `draw` (`(x, y)`), with the input
    /// where it occurs; every non-finite or zero reference must be met exactly.
    fn measure(
        func: MathFn,
        what: &str,
        n: usize,
        mut draw: impl FnMut() -> (f64, f64),
    ) -> (f64, f64, f64) {
        let mut worst = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let (x, y) = draw();
            let e = ulps(native(func, x, y), reference(func, x, y));
            assert!(
                e.is_finite(),
                "{}({x:e}, {y:e}) = {:e}, want {:e}",
                func.name(),
                native(func, x, y),
                reference(func, x, y)
            );
            if e > worst.0 {
                worst = (e, x, y);
            }
        }
        eprintln!(
            "{:5} {what:40}: max {:.3} ulp at x = {:e}, y = {:e} ({n} points)",
            func.name(),
            worst.0,
            worst.1,
            worst.2
        );
        worst
    }

    #[test]
    fn special_values_match_std() {
        let sp = specials();
        for func in MathExpansion::SUPPORTED {
            let ys: &[f64] = if func == MathFn::Pow { &sp } else { &[0.0] };
            for &x in &sp {
                for &y in ys {
                    let (got, want) = (native(func, x, y), reference(func, x, y));
                    let exact = want.is_nan() || want.is_infinite() || want == 0.0;
                    let ok = if exact {
                        ulps(got, want) == 0.0
                    } else {
                        // far-out trig arguments only need to stay in [-1, 1]
                        let far = matches!(func, MathFn::Sin | MathFn::Cos) && x.abs() > 2e6;
                        ulps(got, want) <= 2.0 || (far && got.abs() <= 1.0)
                    };
                    assert!(ok, "{}({x:e}, {y:e}) = {got:e}, want {want:e}", func.name());
                }
            }
        }
    }

    /// Draws one input `(x, y)`.
    type Draw = Box<dyn FnMut(&mut Rng) -> (f64, f64)>;
    /// One accuracy range: its description, the bound, and how to draw inputs.
    type Range = (&'static str, f64, Draw);

    fn ranges(func: MathFn) -> Vec<Range> {
        fn unary(f: impl FnMut(&mut Rng) -> f64 + 'static) -> Draw {
            let mut f = f;
            Box::new(move |r| (f(r), 0.0))
        }
        match func {
            MathFn::Exp => vec![
                ("x in [-746, 710]", 1.0, unary(|r| r.uniform(-746.0, 710.0))),
                (
                    "|x| in [2^-60, 4]",
                    1.0,
                    unary(|r| r.log_uniform(-60.0, 2.0, true)),
                ),
            ],
            MathFn::Exp2 => vec![
                (
                    "x in [-1080, 1025]",
                    1.0,
                    unary(|r| r.uniform(-1080.0, 1025.0)),
                ),
                (
                    "|x| in [2^-60, 4]",
                    1.0,
                    unary(|r| r.log_uniform(-60.0, 2.0, true)),
                ),
            ],
            MathFn::Log | MathFn::Log2 => vec![
                (
                    "x > 0 (random bits)",
                    1.0,
                    unary(|r| f64::from_bits(r.next() >> 1)),
                ),
                ("x in [0.5, 2]", 1.0, unary(|r| r.uniform(0.5, 2.0))),
                (
                    "x in 1 ± 2^-20",
                    1.0,
                    unary(|r| 1.0 + r.uniform(-1.0, 1.0) * 2f64.powi(-20)),
                ),
            ],
            MathFn::Tanh => vec![
                (
                    "|x| in [2^-40, 0.625]",
                    2.0,
                    unary(|r| r.log_uniform(-40.0, -0.678, true)),
                ),
                (
                    "|x| in [0.625, 23]",
                    2.0,
                    unary(|r| r.uniform(0.625, 23.0) * if r.next() & 1 == 0 { 1.0 } else { -1.0 }),
                ),
            ],
            MathFn::Erf => vec![
                (
                    "|x| in [2^-40, 1]",
                    2.0,
                    unary(|r| r.log_uniform(-40.0, 0.0, true)),
                ),
                ("x in [-6.5, 6.5]", 2.0, unary(|r| r.uniform(-6.5, 6.5))),
            ],
            MathFn::Sin | MathFn::Cos => vec![
                ("x in [-10, 10]", 2.0, unary(|r| r.uniform(-10.0, 10.0))),
                (
                    "|x| in [2^-30, 1e5] (log-uniform)",
                    2.0,
                    unary(|r| r.log_uniform(-30.0, 16.6, true)),
                ),
                ("|x| in [1e5, 1.6e6]", 2.0, unary(|r| r.uniform(1e5, 1.6e6))),
            ],
            MathFn::Pow => vec![
                (
                    "x in (0, 1e6], y in [-30, 30]",
                    2.0,
                    Box::new(|r: &mut Rng| {
                        (r.log_uniform(-1070.0, 19.93, false), r.uniform(-30.0, 30.0))
                    }),
                ),
                (
                    "any x > 0, y log x in [-745, 709.7]",
                    2.0,
                    Box::new(|r: &mut Rng| {
                        let x = f64::from_bits(r.next() % 0x7ff0_0000_0000_0000);
                        let t = r.uniform(-745.0, 709.7);
                        (x, t / x.ln())
                    }),
                ),
                (
                    "x near 1, |y log x| <= 708",
                    2.0,
                    Box::new(|r: &mut Rng| {
                        let x = 1.0 + r.uniform(-0.3, 0.4) * 2f64.powi(-((r.next() % 40) as i32));
                        let t = r.uniform(-708.0, 708.0);
                        (x, t / x.ln())
                    }),
                ),
                (
                    "x < 0, integer y in [-60, 60]",
                    2.0,
                    Box::new(|r: &mut Rng| {
                        (
                            -r.log_uniform(-10.0, 10.0, false),
                            (r.uniform(-60.0, 60.0)).round(),
                        )
                    }),
                ),
            ],
            _ => Vec::new(),
        }
    }

    fn accuracy(n: usize) {
        let mut rng = Rng(0x5eed);
        let mut failures = Vec::new();
        for func in MathExpansion::SUPPORTED {
            for (what, bound, mut draw) in ranges(func) {
                let (e, x, y) = measure(func, what, n, || draw(&mut rng));
                if e > bound {
                    failures.push(format!("{} {what}: {e} ulp at ({x:e}, {y:e})", func.name()));
                }
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn accuracy_random_samples() {
        accuracy(100_000);
    }

    /// The same bounds with `fma` emulated (a target whose fma rounds twice).
    #[test]
    fn accuracy_random_samples_with_emulated_fma() {
        UNFUSED.with(|u| u.set(true));
        accuracy(100_000);
    }

    /// Where the algorithms need it exact, the emulation is: the error of a product,
    /// and a residual `1 − g·r` near zero; elsewhere within an ulp of the fused result;
    /// specials as `a · b + c`.
    #[test]
    fn emulated_fma_is_exact_where_the_algorithms_need_it() {
        let mut rng = Rng(0xf3a);
        for _ in 0..200_000 {
            let a = rng.log_uniform(-300.0, 300.0, true);
            let b = rng.log_uniform(-300.0, 300.0, true);
            let p = a * b;
            let e = emulated_fma(&mut Native, &a, &b, &-p);
            assert_eq!(
                e.to_bits(),
                a.mul_add(b, -p).to_bits(),
                "error of {a:e} · {b:e}"
            );
            let g = rng.uniform(0.5, 2.0);
            let r = 1.0 / g;
            let residual = emulated_fma(&mut Native, &-g, &r, &1.0);
            assert_eq!(residual, (-g).mul_add(r, 1.0), "1 − {g:e} · {r:e}");
            let c = rng.log_uniform(-300.0, 300.0, true);
            let (got, want) = (emulated_fma(&mut Native, &a, &b, &c), a.mul_add(b, c));
            assert!(
                ulps(got, want) <= 1.0,
                "fma({a:e}, {b:e}, {c:e}): {got:e}, want {want:e}"
            );
        }
        for (a, b, c) in [
            (f64::INFINITY, 2.0, 1.0),
            (f64::INFINITY, 0.0, 1.0),
            (f64::NAN, 1.0, 1.0),
            (1e300, 1e300, 1.0),
            (1e300, 1e300, f64::NEG_INFINITY),
            (2.0, 3.0, f64::INFINITY),
            (f64::MAX, 1.0, f64::MAX),
        ] {
            let got = emulated_fma(&mut Native, &a, &b, &c);
            assert!(
                ulps(got, a * b + c) == 0.0,
                "fma({a:e}, {b:e}, {c:e}) = {got:e}"
            );
        }
    }

    #[test]
    #[ignore = "slow: 20 million points per range (about a minute in release mode)"]
    fn accuracy_wide_sweep() {
        accuracy(20_000_000);
    }
}
