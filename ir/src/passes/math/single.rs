//! The f32 implementations of the math expansion (see the parent module's documentation
//! for the designs and the accuracy table), written against `Ops<W32>` with the helpers
//! of module `width` and the algorithm shapes of module `shared`, for which [`Arith`] is
//! implemented here with `+ − ×` only (f32 code never uses `fma`).

use super::shared::{self, abs_square, keep_signed_zero, odd_join, Algorithms, Arith, Trig};
use super::width::{
    addc, clamp, fast_two_sum, gtc, iandc, log_reduce, log_specials, ltc, min_c, mulc,
    round_nearest, scale, two_sum, Ops, W32,
};

/// f32 arithmetic has no fma: `+ − ×` only, Dekker's product for exact ones.
impl<O: Ops<W32>> Arith<W32> for O {
    fn poly(&mut self, x: &O::F, c: &[f32]) -> O::F {
        let mut acc = self.cf(c.first().copied().unwrap_or(0.0));
        for &ci in c.iter().skip(1) {
            let m = self.mul(&acc, x);
            let k = self.cf(ci);
            acc = self.add(&m, &k);
        }
        acc
    }

    fn add_x_times(&mut self, x: &O::F, t: &O::F) -> O::F {
        let xt = self.mul(x, t);
        self.add(x, &xt)
    }

    /// `a·b` as a double word `p + e`, from the four partial products of 12-bit halves
    /// (each exact in f32) summed with TwoSums. Every product in it is exact, so a
    /// driver that contracts a product into the addition after it (WGSL and naga's
    /// SPIR-V cannot forbid that) computes the same values. Dekker's form, `e = ((ah·bh
    /// − p) + …)` with `p = a·b` rounded, breaks there: contracting `ah·bh − a·b` uses
    /// the unrounded `a·b` and loses `e` (f32 `pow` was 45 ULP off on those paths).
    fn two_prod(&mut self, a: &O::F, b: &O::F) -> (O::F, O::F) {
        let (ah, al) = split(self, a);
        let (bh, bl) = split(self, b);
        let hh = self.mul(&ah, &bh);
        let hh = self.bind(hh);
        let hl = self.mul(&ah, &bl);
        let hl = self.bind(hl);
        let lh = self.mul(&al, &bh);
        let lh = self.bind(lh);
        let ll = self.mul(&al, &bl);
        let (s1, e1) = two_sum(self, &hh, &hl);
        let (p, e2) = two_sum(self, &s1, &lh);
        let e = self.add(&e1, &e2);
        let e = self.add(&e, &ll);
        // An infinite or NaN operand or product is the plain product with no error
        // term (the halves of ±∞ are ∞ and NaN). The plain product is only selected,
        // never added, so contracting it changes nothing.
        let plain = self.mul(a, b);
        let plain = self.bind(plain);
        let magnitude = self.abs(&plain);
        let finite = ltc(self, &magnitude, f32::INFINITY);
        let finite = self.bindb(finite);
        let zero = self.cf(0.0);
        let p = self.sel(&finite, &p, &plain);
        let p = self.bind(p);
        let e = self.sel(&finite, &e, &zero);
        let e = self.bind(e);
        (p, e)
    }
}

/// The f32 algorithms.
impl<O: Ops<W32>> Algorithms<W32> for O {
    /// `e^x`: `x > 89` gives +∞ (e^89 overflows), `x < -104` gives 0 (e^-104 < 2^-150).
    fn exp(o: &mut O, x: &O::F) -> O::F {
        let xc = clamp(o, x, -104.0, 89.0);
        exp_core(o, &xc)
    }

    fn exp2(o: &mut O, x: &O::F) -> O::F {
        exp2_hl(o, x, None)
    }

    fn log(o: &mut O, x: &O::F) -> O::F {
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

    fn log2(o: &mut O, x: &O::F) -> O::F {
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

    fn tanh(o: &mut O, x: &O::F) -> O::F {
        // tanh(10) rounds to 1
        shared::tanh(o, x, &TANH_P, 10.0, |o, x2| {
            let x2 = o.bind(x2);
            exp_core(o, &x2)
        })
    }

    fn erf(o: &mut O, x: &O::F) -> O::F {
        let (ax, z) = abs_square(o, x);
        // |x| < 1
        let q = o.poly(&z, &ERF_Q);
        let t = o.mul(&z, &q);
        let t = addc(o, &t, TWO_OVER_SQRT_PI_M1);
        let small = o.add_x_times(x, &t);
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
        let r = o.poly(&u, &ERFC_R);
        let er = o.mul(&e, &r);
        let one = o.cf(1.0);
        let l = o.sub(&one, &er);
        let l = o.bind(l);
        let r = odd_join(o, x, &ax, &small, &l, 1.0);
        // erf(-0) = -0
        keep_signed_zero(o, x, r)
    }

    fn sincos(o: &mut O, x: &O::F, which: Trig) -> O::F {
        // r = x - k·π/2: the first two subtractions are exact, the next three TwoSums.
        let (ki, rh, rl) = shared::reduce_pio2(o, x, &PIO2[..2], &PIO2[2..5], PIO2[5]);
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
        let sp = o.poly(&z, &SIN_P);
        let t = o.mul(&z, &sp);
        let t = o.mul(&rh, &t);
        let t = o.add(&t, &rl);
        let s = o.add(&rh, &t);
        let s = o.bind(s);
        // cos(rh + rl) ≈ 1 + ((z² · C(z) - rh · rl) - z/2)
        let cp = o.poly(&z, &COS_P);
        let zz = o.mul(&z, &z);
        let t = o.mul(&zz, &cp);
        let rr = o.mul(&rh, &rl);
        let t = o.sub(&t, &rr);
        let w = mulc(o, &z, 0.5);
        let t = o.sub(&t, &w);
        let c = addc(o, &t, 1.0);
        let c = o.bind(c);
        shared::trig_quadrant(o, x, ki, &s, &c, which)
    }

    /// `pow(x, y) = 2^(y · log2|x|)` with the exponent as a double-f32.
    fn pow(o: &mut O, x: &O::F, y: &O::F) -> O::F {
        shared::pow(o, x, y, log2_dd, |o, th, tl| {
            // A huge or infinite exponent saturates; its low part may then be NaN: drop it.
            let ath = o.abs(th);
            let ok = ltc(o, &ath, 256.0);
            let zero = o.cf(0.0);
            let tl = o.sel(&ok, &tl, &zero);
            let tl = o.bind(tl);
            exp2_hl(o, th, Some(&tl))
        })
    }
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
    let p = o.poly(&r, &EXP_P);
    let q = o.mul(&z, &p);
    let q = o.add(&q, &r);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
}

/// `2^(h + l)` for a small correction `l` (|l| well below 1); `h` is clamped to
/// `[-152, 129]`, beyond which the result is 0 or +∞ anyway.
fn exp2_hl<O: Ops<W32>>(o: &mut O, h: &O::F, l: Option<&O::F>) -> O::F {
    let hc = clamp(o, h, -152.0, 129.0);
    let (kf, ki) = round_nearest(o, &hc);
    let mut r = o.sub(&hc, &kf);
    if let Some(l) = l {
        r = o.add(&r, l);
    }
    let r = o.bind(r);
    let p = o.poly(&r, &EXP2_P);
    let q = o.mul(&r, &p);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
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
    let p = o.poly(&f, &LOG_P);
    let fz = o.mul(&f, &z);
    let c = o.mul(&fz, &p);
    let c = o.bind(c);
    LogParts { k, f, z, c }
}

/// `log2(e) - 1`.
const LOG2E_M1: f32 = 0.44269505;

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
    // Opaque where the driver may reassociate: `(f + 2) − 2` would fold to `f`, and
    // `dl` to 0 (f32 `pow` off by 36 ULP through naga on llvmpipe, where
    // `y·log2 x` is 51).
    let dho = o.opaque(&dh);
    let two = o.cf(2.0);
    let d2 = o.sub(&dho, &two);
    let dl = o.sub(&f, &d2);
    let dl = o.bind(dl);
    let sh = o.div(&f, &dh);
    let sh = o.bind(sh);
    let (p1, p1e) = o.two_prod(&sh, &dh);
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
    let cp = o.poly(&w, &ATANH_C);
    let c = o.mul(&s1, &w);
    let c = o.mul(&c, &cp);
    let sh2 = mulc(o, &sh, 2.0);
    let sl2 = mulc(o, &sl, 2.0);
    let t = o.add(&sl2, &c);
    let (vh, vl) = fast_two_sum(o, &sh2, &t);
    // times log2 e, as double-f32
    let lg = o.cf(LOG2E_HI);
    let (ph, pl) = o.two_prod(&vh, &lg);
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

// ---- sin, cos ----

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

#[cfg(test)]
mod tests {
    //! The algorithms run natively (`native::Native`, here in f32 arithmetic) compute bit
    //! for bit what the interpreter computes on the emitted IR; `native_matches_ir` checks
    //! that, so the exhaustive native sweeps (`#[ignore]`d: run them with
    //! `cargo test -p kernelc-ir --release --lib passes::math::single -- --ignored --nocapture`)
    //! measure the pass's output.

    use super::*;
    use crate::kernel::Expr;
    use crate::kernel::MathFn;
    use crate::passes::math::native::{self, assert_native_matches_ir, Native};
    use crate::passes::math::{expand_math, MathExpansion};
    use crate::types::ScalarType;

    fn native(func: MathFn, x: f32, y: f32) -> f32 {
        shared::expand::<W32, _>(&mut Native, func, &[x, y]).unwrap_or(f32::NAN)
    }

    /// The interpreter's reference: f64 evaluation rounded once.
    fn reference(func: MathFn, x: f32, y: f32) -> f32 {
        native::reference(func, x.into(), y.into()) as f32
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
        native_matches_ir_for(&MathExpansion::all_transcendental_with_f64());
    }

    /// Opaque error-free sums (for targets that may reassociate) compute the same bits:
    /// the barrier is the identity at run time.
    #[test]
    fn native_matches_ir_with_opaque_sums() {
        let expansion = MathExpansion::all_transcendental_with_f64().with_opaque_sums(true);
        native_matches_ir_for(&expansion);
        let mut k = crate::builder::KernelBuilder::new("pow", [1, 1, 1]);
        let out = k.buffer("out", ScalarType::F32, 1, crate::kernel::Access::Write);
        let x = k.scalar("x", ScalarType::F32);
        let kernel = k
            .build(|f| {
                let e = Expr::Math {
                    func: MathFn::Pow,
                    args: vec![x.0.clone(), x.0.clone()],
                };
                f.store(out, 0u32, crate::builder::E(e));
            })
            .expect("valid");
        let with = crate::print::print(&expand_math(&kernel, &expansion));
        let without = crate::print::print(&expand_math(
            &kernel,
            &expansion.clone().with_opaque_sums(false),
        ));
        assert!(with.contains("num_workgroups"), "no barrier was emitted");
        assert!(
            !without.contains("num_workgroups"),
            "a barrier without opaque_sums"
        );
    }

    fn native_matches_ir_for(expansion: &MathExpansion) {
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
            assert_native_matches_ir::<W32>(expansion, func, &xs, &ys, |x, y| native(func, x, y));
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
