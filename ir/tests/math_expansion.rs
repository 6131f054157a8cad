//! The math-expansion pass (`kernelc_ir::passes::math`): accuracy of the expanded
//! functions against the interpreter's reference (f64 evaluated, rounded once), special
//! values, vectors, f16, and the pass's structural properties (idempotent, leaves f64
//! and unselected functions alone, output validates).
//!
//! Every accuracy test runs the same kernel twice on the interpreter: as written (the
//! reference) and expanded, and compares element by element in ULPs of the reference.

use half::f16;
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer};
use kernelc_ir::passes::{expand_math, MathExpansion};
use kernelc_ir::ScalarType::{self, F16, F32, F64};
use kernelc_ir::{validate, Access, Block, Expr, Kernel, MathFn, Stmt};
use std::f32::consts::FRAC_PI_2;

mod common;
use common::Rng;

const ALL: [MathFn; 9] = MathExpansion::SUPPORTED;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

const WG: u32 = 256;

/// `n` rounded up to a whole number of workgroups.
fn padded(n: usize) -> usize {
    n.div_ceil(WG as usize) * WG as usize
}

/// `out[i] = f(a[i], b[i])` over `n` elements of `ty` (`b` unused by unary `f`), each
/// invocation handling `lanes` consecutive elements.
fn map_kernel(ty: ScalarType, n: usize, lanes: u8, f: impl Fn(E, E) -> E) -> Kernel {
    let mut k = KernelBuilder::new("map", [WG, 1, 1]);
    let a = k.buffer("a", ty, n as u64, Access::Read);
    let b = k.buffer("b", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, n as u64, Access::Write);
    k.build(|body| {
        let i = body.let_("i", global_id(0) * lanes as u32);
        body.if_(i.clone().lt(n as u32), |body| {
            let x = body.let_("x", a.load(i.clone(), lanes));
            let y = body.let_("y", b.load(i.clone(), lanes));
            body.store(out, i.clone(), f(x, y));
        });
    })
    .expect("test kernel must validate")
}

fn run_map(
    kernel: &Kernel,
    ty: ScalarType,
    a: &HostBuffer,
    b: &HostBuffer,
    lanes: u8,
) -> HostBuffer {
    let n = a.len();
    let groups = n.div_ceil(WG as usize * lanes as usize) as u32;
    let mut args = vec![
        Arg::Buffer(a.clone()),
        Arg::Buffer(b.clone()),
        Arg::Buffer(HostBuffer::zeros(ty, n)),
    ];
    run(kernel, [groups, 1, 1], &mut args).expect("kernel must run");
    args.pop()
        .and_then(Arg::into_buffer)
        .expect("output buffer")
}

fn expand_all(kernel: &Kernel) -> Kernel {
    let out = expand_math(kernel, &MathExpansion::all_transcendental());
    if let Err(e) = validate(&out) {
        panic!("expanded kernel does not validate: {e}\n{out}");
    }
    out
}

/// The ULP (of f32) at `w`: subnormals have 2^-149.
fn ulp_of(w: f32) -> f64 {
    let a = w.abs();
    if a < f32::MIN_POSITIVE {
        return 2f64.powi(-149);
    }
    let e = ((a.to_bits() >> 23) as i32) - 127;
    2f64.powi(e - 23)
}

/// `|got - want|` in ULPs of `want`; NaN must meet NaN and an infinity the same one.
fn ulps(got: f32, want: f32) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if want.is_infinite() || got.is_infinite() || got.is_nan() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    ((got as f64) - (want as f64)).abs() / ulp_of(want)
}

/// The worst error: (ulps, x, y, got, want).
#[derive(Clone, Copy, Debug)]
struct Worst {
    ulps: f64,
    x: f32,
    y: f32,
    got: f32,
    want: f32,
    count: usize,
}

/// Runs `func` over the inputs as written and expanded (scalar f32) and returns the
/// worst error among the elements `keep(x, y, want)` selects, after checking that
/// NaN, infinities and the sign of zero agree everywhere.
fn measure(func: MathFn, xs: &[f32], ys: &[f32], keep: impl Fn(f32, f32, f32) -> bool) -> Worst {
    assert_eq!(xs.len(), ys.len());
    let n = padded(xs.len());
    let mut xv = xs.to_vec();
    let mut yv = ys.to_vec();
    xv.resize(n, 1.0);
    yv.resize(n, 1.0);
    let kernel = map_kernel(F32, n, 1, |x, y| apply(func, x, y));
    let expanded = expand_all(&kernel);
    assert_no_call(&expanded.body, func);
    let (a, b) = (HostBuffer::from_f32(&xv), HostBuffer::from_f32(&yv));
    let want = run_map(&kernel, F32, &a, &b, 1).to_f32();
    let got = run_map(&expanded, F32, &a, &b, 1).to_f32();
    let mut worst = Worst {
        ulps: 0.0,
        x: 0.0,
        y: 0.0,
        got: 0.0,
        want: 0.0,
        count: 0,
    };
    for i in 0..xs.len() {
        let (g, w) = (got[i], want[i]);
        let special = w.is_nan() || w.is_infinite() || w == 0.0;
        if special {
            let same = (g.is_nan() && w.is_nan())
                || (g == w && g.is_sign_negative() == w.is_sign_negative());
            assert!(
                same,
                "{}({:e}, {:e}): got {g:e}, want {w:e}",
                func.name(),
                xs[i],
                ys[i]
            );
        }
        if !keep(xs[i], ys[i], w) {
            continue;
        }
        worst.count += 1;
        let e = ulps(g, w);
        if e > worst.ulps || e.is_nan() {
            worst = Worst {
                ulps: e,
                x: xs[i],
                y: ys[i],
                got: g,
                want: w,
                count: worst.count,
            };
        }
    }
    eprintln!(
        "{:5}: {} points, max {:.2} ulp at x = {:e} y = {:e} (got {:e}, want {:e})",
        func.name(),
        worst.count,
        worst.ulps,
        worst.x,
        worst.y,
        worst.got,
        worst.want
    );
    worst
}

fn apply(func: MathFn, x: E, y: E) -> E {
    E(Expr::Math {
        func,
        args: if func == MathFn::Pow {
            vec![x.0, y.0]
        } else {
            vec![x.0]
        },
    })
}

fn any(_: f32, _: f32, _: f32) -> bool {
    true
}

fn assert_no_call(block: &Block, func: MathFn) {
    fn expr_has(e: &Expr, func: MathFn) -> bool {
        matches!(e, Expr::Math { func: f, .. } if *f == func)
            || e.children().iter().any(|c| expr_has(c, func))
    }
    for s in block {
        let found = match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr_has(value, func),
            Stmt::Store { index, value, .. } => expr_has(index, func) || expr_has(value, func),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                assert_no_call(then_body, func);
                assert_no_call(else_body, func);
                expr_has(cond, func)
            }
            Stmt::For {
                start, end, body, ..
            } => {
                assert_no_call(body, func);
                expr_has(start, func) || expr_has(end, func)
            }
            Stmt::Fragment(op) => op.exprs().iter().any(|(_, e)| expr_has(e, func)),
            Stmt::AsyncCopy(op) => op.exprs().iter().any(|(_, e)| expr_has(e, func)),
            Stmt::Return | Stmt::Barrier => false,
        };
        assert!(!found, "`{}` call left in {s:?}", func.name());
    }
}

/// Special inputs every unary function is checked on.
fn specials() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1.0,
        -1.0,
        0.5,
        2.0,
        1e-30,
        -1e-30,
        1e30,
        -1e30,
    ];
    // subnormals
    for bits in [1u32, 2, 3, 0x100, 0x1234, 0x7f_ffff, 0x40_0000] {
        v.push(f32::from_bits(bits));
        v.push(-f32::from_bits(bits));
    }
    v
}

/// `n` points evenly over `[lo, hi]`.
fn sweep(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (lo as f64 + (hi as f64 - lo as f64) * i as f64 / (n - 1) as f64) as f32)
        .collect()
}

/// `x` and its `k` neighbours on each side (by bit pattern, same sign).
fn around(x: f32, k: u32) -> Vec<f32> {
    let b = x.abs().to_bits();
    let s = if x < 0.0 { -1.0 } else { 1.0 };
    (b.saturating_sub(k)..=b.saturating_add(k))
        .map(|b| s * f32::from_bits(b))
        .collect()
}

fn with_y(xs: Vec<f32>) -> (Vec<f32>, Vec<f32>) {
    let ys = vec![0.0; xs.len()];
    (xs, ys)
}

// ---------------------------------------------------------------------------------------
// Accuracy, function by function
// ---------------------------------------------------------------------------------------

#[test]
fn exp_within_2_ulp() {
    let mut rng = Rng(1);
    let mut xs = specials();
    xs.extend(sweep(-105.0, 90.0, 150_000));
    xs.extend(
        (0..30_000)
            .map(|_| rng.log_uniform(-40.0, 1.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }),
    );
    // around k·ln2 and the overflow/underflow thresholds
    for k in (-150..=128).step_by(7) {
        xs.extend(around(k as f32 * std::f32::consts::LN_2, 8));
    }
    for t in [
        88.72283, 88.722_84, -87.33654, -87.3366, -103.27893, -103.972, -103.9721, -104.0, -104.1,
    ] {
        xs.extend(around(t, 16));
    }
    let (xs, ys) = with_y(xs);
    let w = measure(MathFn::Exp, &xs, &ys, any);
    assert!(w.ulps <= 2.0, "{w:?}");
}

#[test]
fn exp2_within_2_ulp() {
    let mut rng = Rng(2);
    let mut xs = specials();
    xs.extend(sweep(-153.0, 130.0, 150_000));
    xs.extend(
        (0..30_000)
            .map(|_| rng.log_uniform(-40.0, 1.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }),
    );
    for k in -152..=129 {
        xs.extend(around(k as f32, 3));
        xs.extend(around(k as f32 + 0.5, 3));
    }
    let (xs, ys) = with_y(xs);
    let w = measure(MathFn::Exp2, &xs, &ys, any);
    assert!(w.ulps <= 2.0, "{w:?}");
    // exact powers of two, subnormal ones included
    let ks: Vec<f32> = (-149..=127).map(|k| k as f32).collect();
    let (ks, ys) = with_y(ks);
    let w = measure(MathFn::Exp2, &ks, &ys, any);
    assert_eq!(w.ulps, 0.0, "{w:?}");
}

/// Positive floats of every binade (random bit patterns), values near 1, subnormals.
fn log_inputs(seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut xs = specials();
    xs.extend((0..120_000).map(|_| f32::from_bits((rng.next() % 0x7f80_0000) as u32)));
    xs.extend(sweep(0.5, 2.0, 40_000));
    xs.extend((0..20_000).map(|_| {
        1.0 + rng.log_uniform(-24.0, -2.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }
    }));
    xs.extend((0..10_000).map(|_| f32::from_bits((rng.next() % 0x80_0000) as u32)));
    xs.extend([
        -1.0,
        -2.5,
        -1e-40,
        -1e30,
        std::f32::consts::FRAC_1_SQRT_2,
        std::f32::consts::SQRT_2,
    ]);
    xs.extend(around(std::f32::consts::FRAC_1_SQRT_2, 4));
    xs.extend(around(std::f32::consts::SQRT_2, 4));
    xs
}

#[test]
fn log_within_2_ulp() {
    let (xs, ys) = with_y(log_inputs(3));
    let w = measure(MathFn::Log, &xs, &ys, any);
    assert!(w.ulps <= 2.0, "{w:?}");
}

#[test]
fn log2_within_2_ulp() {
    let (xs, ys) = with_y(log_inputs(4));
    let w = measure(MathFn::Log2, &xs, &ys, any);
    assert!(w.ulps <= 2.0, "{w:?}");
    // log2 of a power of two is exact
    let ps: Vec<f32> = (-149..=127).map(|k| (k as f32).exp2()).collect();
    let (ps, ys) = with_y(ps);
    let w = measure(MathFn::Log2, &ps, &ys, any);
    assert_eq!(w.ulps, 0.0, "{w:?}");
}

/// Inputs for sin and cos: a dense sweep of [-1e4, 1e4], the f32 values nearest to
/// multiples of π/2 and their neighbours (where the reduction cancels most), small
/// values, and the range up to 1e5.
fn trig_inputs(seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut xs = specials();
    xs.extend(sweep(-1e4, 1e4, 200_000));
    xs.extend(sweep(-10.0, 10.0, 20_000));
    xs.extend(
        (0..20_000)
            .map(|_| rng.log_uniform(-30.0, 0.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }),
    );
    for k in (1..6367).step_by(3) {
        let m = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
        let s = if k % 2 == 0 { 1.0 } else { -1.0 };
        xs.extend(around(s * m, 3));
    }
    // the f32 closest to a multiple of π/2 below 2e5 (|x - 161·π/2| ≈ 2^-27.8)
    xs.extend(around(f32::from_bits(0x437c_e5f1), 16));
    xs.extend(around(FRAC_PI_2, 4));
    xs.extend(around(std::f32::consts::FRAC_PI_4, 4));
    xs.extend((0..20_000).map(|_| rng.uniform(-1.02e5, 1.02e5)));
    xs
}

#[test]
fn sin_cos_within_2_ulp_up_to_1e4() {
    for (func, seed) in [(MathFn::Sin, 5), (MathFn::Cos, 6)] {
        let (xs, ys) = with_y(trig_inputs(seed));
        let w = measure(func, &xs, &ys, |x, _, _| x.abs() <= 1e4);
        assert!(w.ulps <= 2.0, "{w:?}");
        // documented: accurate up to |x| < 65536·π/2
        let w = measure(func, &xs, &ys, |x, _, _| x.abs() <= 1.02e5);
        assert!(w.ulps <= 2.0, "{w:?}");
    }
}

#[test]
fn sin_cos_stay_bounded_far_out() {
    let mut rng = Rng(7);
    let mut xs: Vec<f32> = (0..20_000)
        .map(|_| rng.log_uniform(17.0, 128.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    xs.extend([f32::MAX, f32::MIN, 1e30, 3e38, 6.6e6, 1e7, 1.6777216e7]);
    let n = padded(xs.len());
    xs.resize(n, 0.0);
    for func in [MathFn::Sin, MathFn::Cos] {
        let kernel = map_kernel(F32, n, 1, |x, y| apply(func, x, y));
        let a = HostBuffer::from_f32(&xs);
        let got = run_map(&expand_all(&kernel), F32, &a, &a, 1).to_f32();
        let want = run_map(&kernel, F32, &a, &a, 1).to_f32();
        for i in 0..n {
            assert!(
                got[i].abs() <= 1.0,
                "{}({:e}) = {:e}",
                func.name(),
                xs[i],
                got[i]
            );
            // within the tolerance table's allowance, 8·u·(|want| + |x|), up to 2^22·π/2
            if xs[i].abs() < 6.5e6 {
                let allowed = 8.0 * 2f64.powi(-24) * (want[i].abs() as f64 + xs[i].abs() as f64);
                assert!(
                    ((got[i] - want[i]).abs() as f64) <= allowed,
                    "{}({:e}) = {:e}, want {:e}",
                    func.name(),
                    xs[i],
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn tanh_within_4_ulp() {
    let mut rng = Rng(8);
    let mut xs = specials();
    xs.extend(sweep(-12.0, 12.0, 150_000));
    xs.extend(sweep(-1.0, 1.0, 40_000));
    xs.extend(
        (0..30_000)
            .map(|_| rng.log_uniform(-40.0, 0.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }),
    );
    for t in [0.625f32, -0.625, 9.0, 9.01, 10.0, -10.0] {
        xs.extend(around(t, 16));
    }
    let (xs, ys) = with_y(xs);
    let w = measure(MathFn::Tanh, &xs, &ys, any);
    assert!(w.ulps <= 4.0, "{w:?}");
}

#[test]
fn erf_within_4_ulp() {
    let mut rng = Rng(9);
    let mut xs = specials();
    xs.extend(sweep(-5.0, 5.0, 150_000));
    xs.extend(
        (0..30_000)
            .map(|_| rng.log_uniform(-40.0, 0.0) * if rng.next() % 2 == 0 { 1.0 } else { -1.0 }),
    );
    for t in [1.0f32, -1.0, 3.9, 3.92, 4.0, -4.0] {
        xs.extend(around(t, 16));
    }
    let (xs, ys) = with_y(xs);
    let w = measure(MathFn::Erf, &xs, &ys, any);
    assert!(w.ulps <= 4.0, "{w:?}");
}

fn normal(w: f32) -> bool {
    w.is_finite() && w.abs() >= f32::MIN_POSITIVE
}

#[test]
fn pow_within_8_ulp() {
    let mut rng = Rng(10);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for i in 0..200_000 {
        let x = match i % 4 {
            0 => rng.log_uniform(-149.0, 19.93),
            1 => rng.uniform(0.0, 1e6),
            2 => rng.uniform(0.5, 2.0),
            _ => 1.0 + rng.uniform(-0.01, 0.01),
        };
        let y = if i % 5 == 0 {
            ((rng.next() % 61) as i32 - 30) as f32
        } else {
            rng.uniform(-30.0, 30.0)
        };
        xs.push(x.clamp(f32::from_bits(1), 1e6));
        ys.push(y);
    }
    let w = measure(MathFn::Pow, &xs, &ys, |x, y, w| {
        x > 0.0 && x <= 1e6 && y.abs() <= 30.0 && normal(w)
    });
    assert!(w.ulps <= 8.0, "{w:?}");
}

#[test]
fn pow_negative_bases_and_special_values() {
    let mut rng = Rng(11);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    // negative bases with integer (and a few non-integer) exponents
    for i in 0..40_000 {
        xs.push(-rng.log_uniform(-20.0, 7.0));
        ys.push(if i % 10 == 0 {
            rng.uniform(-10.0, 10.0)
        } else {
            ((rng.next() % 41) as i32 - 20) as f32
        });
    }
    // every pair of special values
    let sv = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        2.5,
        -2.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        1e20,
        16_777_216.0,
        16_777_215.0,
        -16_777_215.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        5e9,
        0.1,
        -1e-40,
    ];
    for &x in &sv {
        for &y in &sv {
            xs.push(x);
            ys.push(y);
        }
    }
    let w = measure(MathFn::Pow, &xs, &ys, |_, _, w| normal(w));
    assert!(w.ulps <= 8.0, "{w:?}");
}

// ---------------------------------------------------------------------------------------
// Vectors, f16
// ---------------------------------------------------------------------------------------

#[test]
fn vector_f32x4_matches_scalar_lane_by_lane() {
    let mut rng = Rng(12);
    let n = 4 * WG as usize * 4;
    let mut xs: Vec<f32> = (0..n).map(|_| rng.uniform(-20.0, 20.0)).collect();
    let ys: Vec<f32> = (0..n).map(|_| rng.uniform(-5.0, 5.0)).collect();
    let sp = specials();
    xs[..sp.len()].copy_from_slice(&sp);
    let (a, b) = (HostBuffer::from_f32(&xs), HostBuffer::from_f32(&ys));
    for func in ALL {
        // pow wants positive bases for a meaningful comparison
        let a = if func == MathFn::Pow {
            HostBuffer::from_f32(&xs.iter().map(|x| x.abs()).collect::<Vec<_>>())
        } else {
            a.clone()
        };
        let scalar = map_kernel(F32, n, 1, |x, y| apply(func, x, y));
        let vector = map_kernel(F32, n, 4, |x, y| apply(func, x, y));
        let want = run_map(&scalar, F32, &a, &b, 1).to_f32();
        let scalar_got = run_map(&expand_all(&scalar), F32, &a, &b, 1).to_f32();
        let vector_got = run_map(&expand_all(&vector), F32, &a, &b, 4).to_f32();
        for i in 0..n {
            assert_eq!(
                vector_got[i].to_bits(),
                scalar_got[i].to_bits(),
                "{} lane {}: vector {:e}, scalar {:e}",
                func.name(),
                i % 4,
                vector_got[i],
                scalar_got[i]
            );
            // (the special values include far-out trig arguments; they only need to agree)
            if i >= sp.len() {
                assert!(
                    ulps(vector_got[i], want[i]) <= 2.0,
                    "{} at {i}",
                    func.name()
                );
            }
        }
    }
}

#[test]
fn f16_math_expands_through_f32() {
    let mut rng = Rng(13);
    let n = 4 * WG as usize;
    let mut xs: Vec<f16> = (0..n)
        .map(|_| f16::from_f32(rng.uniform(-8.0, 8.0)))
        .collect();
    for (i, v) in [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        65504.0,
        6e-8,
    ]
    .into_iter()
    .enumerate()
    {
        xs[i] = f16::from_f32(v);
    }
    let ys: Vec<f16> = (0..n)
        .map(|_| f16::from_f32(rng.uniform(-3.0, 3.0)))
        .collect();
    let b = HostBuffer::from_f16(&ys);
    for func in ALL {
        let a = if func == MathFn::Pow {
            HostBuffer::from_f16(
                &xs.iter()
                    .map(|x| f16::from_f32(x.to_f32().abs()))
                    .collect::<Vec<_>>(),
            )
        } else {
            HostBuffer::from_f16(&xs)
        };
        let kernel = map_kernel(F16, n, 1, |x, y| apply(func, x, y));
        let expanded = expand_all(&kernel);
        assert_no_call(&expanded.body, func);
        let want = run_map(&kernel, F16, &a, &b, 1)
            .to_f16()
            .expect("f16 output");
        let got = run_map(&expanded, F16, &a, &b, 1)
            .to_f16()
            .expect("f16 output");
        for i in 0..n {
            let (g, w) = (got[i].to_f32(), want[i].to_f32());
            let ok = if w.is_nan() {
                g.is_nan()
            } else if w.is_infinite() {
                g == w
            } else {
                // one f16 ulp: the f32 result is within an f32 ulp or two, then rounded
                let ulp = (w.abs().max(6.103_515_6e-5) * 2f32.powi(-10)) as f64;
                ((g - w).abs() as f64) <= ulp
            };
            assert!(
                ok,
                "{}({}) = {g}, want {w}",
                func.name(),
                a.data[i].to_f64()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Structure
// ---------------------------------------------------------------------------------------

/// Every math call of a kernel, in order.
fn calls(block: &Block) -> Vec<(MathFn, Expr)> {
    fn walk(e: &Expr, out: &mut Vec<(MathFn, Expr)>) {
        if let Expr::Math { func, .. } = e {
            out.push((*func, e.clone()));
        }
        for c in e.children() {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => walk(value, &mut out),
            Stmt::Store { index, value, .. } => {
                walk(index, &mut out);
                walk(value, &mut out);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                walk(cond, &mut out);
                out.extend(calls(then_body));
                out.extend(calls(else_body));
            }
            Stmt::For {
                start, end, body, ..
            } => {
                walk(start, &mut out);
                walk(end, &mut out);
                out.extend(calls(body));
            }
            Stmt::Fragment(op) => op.exprs().into_iter().for_each(|(_, e)| walk(e, &mut out)),
            Stmt::AsyncCopy(op) => op.exprs().into_iter().for_each(|(_, e)| walk(e, &mut out)),
            Stmt::Return | Stmt::Barrier => {}
        }
    }
    out
}

/// A kernel mixing f32, f64 and unselected math, with calls nested in each other and
/// placed in a loop bound, a loop body, an `if` condition and branch and a select.
fn mixed_kernel() -> Kernel {
    let n = 512u32;
    let mut k = KernelBuilder::new("mixed", [64, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let d = k.buffer("d", F64, n as u64, Access::Read);
    let out = k.buffer("out", F32, n as u64, Access::ReadWrite);
    let dout = k.buffer("dout", F64, n as u64, Access::Write);
    k.build(|b| {
        let i = b.let_("i", global_id(0));
        b.if_(i.clone().lt(n), |b| {
            let x = b.let_("x", a.at(i.clone()));
            let acc = b.var("acc", x.clone().sin().exp());
            // trip count from a math call: 0..=3 iterations
            let trips = (x.clone().abs().min(3.0f32).exp2() - 1.0f32).cast(ScalarType::U32);
            b.for_("j", 0u32, trips, 1, |b, j| {
                let t = acc.get() * 0.5f32 + j.cast(F32);
                b.assign(acc, t.clone().tanh() + t.cos().pow(2.0f32));
            });
            b.if_else(
                x.clone().log2().lt(1.0f32),
                |b| b.assign(acc, acc.get() + x.clone().abs().log()),
                |b| b.assign(acc, acc.get() - x.clone().erf()),
            );
            let s = x
                .clone()
                .gt(0.0f32)
                .select(x.clone().sqrt(), x.clone().exp());
            b.store(out, i.clone(), acc.get() + s);
            b.store(
                dout,
                i.clone(),
                d.at(i.clone()).exp() + d.at(i.clone()).sin(),
            );
        });
    })
    .expect("mixed kernel must validate")
}

fn run_mixed(kernel: &Kernel) -> (Vec<f32>, Vec<f64>) {
    let n = 512;
    let mut rng = Rng(14);
    let xs: Vec<f32> = (0..n).map(|_| rng.uniform(-4.0, 4.0)).collect();
    let ds: Vec<f64> = (0..n).map(|_| rng.unit() * 8.0 - 4.0).collect();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&xs)),
        Arg::Buffer(HostBuffer::from_f64(&ds)),
        Arg::Buffer(HostBuffer::zeros(F32, n)),
        Arg::Buffer(HostBuffer::zeros(F64, n)),
    ];
    run(kernel, [8, 1, 1], &mut args).expect("mixed kernel must run");
    let d = args
        .pop()
        .and_then(Arg::into_buffer)
        .expect("dout")
        .to_f64();
    let o = args.pop().and_then(Arg::into_buffer).expect("out").to_f32();
    (o, d)
}

#[test]
fn expansion_preserves_results_in_every_statement_kind() {
    let kernel = mixed_kernel();
    let expanded = expand_all(&kernel);
    let (want, want_d) = run_mixed(&kernel);
    let (got, got_d) = run_mixed(&expanded);
    for i in 0..want.len() {
        let tol = 64.0 * f32::EPSILON * (1.0 + want[i].abs());
        assert!(
            (got[i] - want[i]).abs() <= tol,
            "out[{i}]: {} vs {}",
            got[i],
            want[i]
        );
    }
    // f64 math is untouched, so bit for bit the same
    assert_eq!(got_d, want_d);
}

#[test]
fn f64_and_unselected_calls_are_left_alone() {
    let kernel = mixed_kernel();
    let expanded = expand_all(&kernel);
    let left: Vec<_> = calls(&expanded.body).into_iter().map(|(f, _)| f).collect();
    // f64 exp and sin, f32 sqrt, and the abs/min the kernel (and the expansion) use
    for (f, _) in calls(&kernel.body) {
        if !MathExpansion::SUPPORTED.contains(&f) {
            assert!(left.contains(&f), "{} was removed", f.name());
        }
    }
    let transcendental: Vec<_> = left.iter().filter(|f| ALL.contains(f)).collect();
    assert_eq!(
        transcendental,
        [&MathFn::Exp, &MathFn::Sin],
        "only the f64 calls stay"
    );

    // selecting some functions expands only those
    let only_sin = expand_math(&kernel, &MathExpansion::only(&[MathFn::Sin, MathFn::Sqrt]));
    validate(&only_sin).expect("partial expansion validates");
    let left: Vec<_> = calls(&only_sin.body).into_iter().map(|(f, _)| f).collect();
    let count = |v: &[MathFn], f: MathFn| v.iter().filter(|&&g| g == f).count();
    let before: Vec<_> = calls(&kernel.body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(count(&left, MathFn::Sin), 1, "only the f64 sin stays");
    assert_eq!(
        count(&left, MathFn::Sqrt),
        count(&before, MathFn::Sqrt),
        "sqrt is never expanded"
    );
    for f in [
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Tanh,
        MathFn::Cos,
        MathFn::Pow,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Erf,
    ] {
        assert_eq!(count(&left, f), count(&before, f), "{} must stay", f.name());
    }

    // expanding nothing is the identity
    assert_eq!(expand_math(&kernel, &MathExpansion::none()), kernel);
}

#[test]
fn expansion_is_idempotent_and_keeps_declarations() {
    let kernel = mixed_kernel();
    let once = expand_all(&kernel);
    let twice = expand_math(&once, &MathExpansion::all_transcendental());
    assert_eq!(once, twice);
    assert_eq!(once.params, kernel.params);
    assert_eq!(once.shared, kernel.shared);
    assert_eq!(once.locals[..kernel.locals.len()], kernel.locals[..]);
    let mut names: Vec<_> = once.locals.iter().map(|l| l.name.clone()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), once.locals.len(), "local names are unique");
    assert!(once.locals[kernel.locals.len()..]
        .iter()
        .all(|l| !l.mutable));
}

#[test]
fn expansions_are_compact() {
    // Each function's expansion is a bounded straight line: no duplicated subtrees.
    for func in ALL {
        let kernel = map_kernel(F32, WG as usize, 1, |x, y| apply(func, x, y));
        let expanded = expand_all(&kernel);
        let added = expanded.locals.len() - kernel.locals.len();
        let size = kernelc_ir::block_size(&expanded.body) - kernelc_ir::block_size(&kernel.body);
        eprintln!("{:5}: {added} locals, {size} nodes", func.name());
        assert!(size < 1200, "{} expands to {size} nodes", func.name());
    }
}

#[test]
fn a_repeated_call_in_one_statement_is_expanded_once() {
    // sigmoid's shape: `exp(-|x|)` in both arms of a select. The second call reuses the
    // first one's values; a call with other arguments, or one in the next statement,
    // is expanded on its own. Results equal the unexpanded kernel's.
    let e = |x: E| apply(MathFn::Exp, -x.clone().abs(), x);
    let once = map_kernel(F32, 4 * WG as usize, 4, |x, _| e(x.clone()));
    let twice = map_kernel(F32, 4 * WG as usize, 4, |x, _| {
        x.clone()
            .ge(lit(F32, 0.0).splat(4))
            .select(e(x.clone()), e(x.clone()) * e(x))
    });
    let other = map_kernel(F32, 4 * WG as usize, 4, |x, y| e(x) + e(y));
    let locals = |k: &Kernel| expand_all(k).locals.len() - k.locals.len();
    assert_eq!(locals(&twice), locals(&once), "the same call, three times");
    assert_eq!(locals(&other), 2 * locals(&once), "two different calls");
    let n = WG as usize * 4;
    let mut rng = Rng(5);
    let a = HostBuffer::from_f32(&(0..n).map(|_| rng.uniform(-90.0, 90.0)).collect::<Vec<_>>());
    let b = HostBuffer::from_f32(&(0..n).map(|_| rng.uniform(-90.0, 90.0)).collect::<Vec<_>>());
    for kernel in [&twice, &other] {
        let want = run_map(kernel, F32, &a, &b, 4);
        let got = run_map(&expand_all(kernel), F32, &a, &b, 4);
        for (g, w) in got.to_f32().iter().zip(want.to_f32()) {
            assert!(ulps(*g, w) <= 4.0, "{g} vs {w}");
        }
    }
}

#[test]
fn uniform_values_stay_uniform_for_barriers() {
    // A loop bound computed by math on a uniform parameter, with a barrier in the body:
    // the expansion's locals derive from the parameter only, so the loop stays uniform.
    let mut k = KernelBuilder::new("uniform", [32, 1, 1]);
    let s = k.scalar("s", F32);
    let out = k.buffer("out", F32, 32, Access::ReadWrite);
    let tile = k.shared("tile", F32, 32);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            let trips = b.let_("trips", s.clone().exp2().cast(ScalarType::U32));
            b.for_("j", 0u32, trips, 1, |b, j| {
                b.store(tile, i.clone(), j.cast(F32).sin());
                b.barrier();
                b.store(
                    out,
                    i.clone(),
                    out.at(i.clone()) + tile.at(31u32 - i.clone()),
                );
                b.barrier();
            });
        })
        .expect("valid");
    let expanded = expand_all(&kernel);
    let run_it = |k: &Kernel| {
        let mut args = vec![
            Arg::Scalar(kernelc_ir::Scalar::f32(2.0)),
            Arg::Buffer(HostBuffer::zeros(F32, 32)),
        ];
        run(k, [1, 1, 1], &mut args).expect("runs");
        args.pop().and_then(Arg::into_buffer).expect("out").to_f32()
    };
    let (want, got) = (run_it(&kernel), run_it(&expanded));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 4.0 * f32::EPSILON, "{g} vs {w}");
    }
}

// ---------------------------------------------------------------------------------------
// f64 (MathExpansion::f64)
// ---------------------------------------------------------------------------------------

fn expand_all_f64(kernel: &Kernel) -> Kernel {
    let out = expand_math(kernel, &MathExpansion::all_transcendental_with_f64());
    if let Err(e) = validate(&out) {
        panic!("expanded kernel does not validate: {e}\n{out}");
    }
    out
}

/// The ULP of f64 `w`'s binade (subnormals: 2^-1074).
fn ulp_of_f64(w: f64) -> f64 {
    let biased = (w.abs().to_bits() >> 52).max(1);
    if biased > 52 {
        f64::from_bits((biased - 52) << 52)
    } else {
        f64::from_bits(1 << (biased - 1))
    }
}

/// `|got - want|` in f64 ULPs of `want`; NaN, infinities and signed zeros must match.
fn ulps_f64(got: f64, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if want.is_infinite() || got.is_infinite() || got.is_nan() || want == 0.0 {
        let same = got == want && got.is_sign_negative() == want.is_sign_negative();
        return if same { 0.0 } else { f64::INFINITY };
    }
    (got - want).abs() / ulp_of_f64(want)
}

/// Special f64 inputs, the thresholds of exp/exp2 and the ends of the pieces.
fn specials_f64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
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
        1e-300,
        -1e300,
        709.782712893384,
        709.7827128933841,
        -745.1332191019411,
        -745.1332191019412,
        1024.0,
        -1074.0,
        -1075.0,
        0.625,
        1.0 - f64::EPSILON / 2.0,
        2.5,
        6.0,
        22.0,
        1e5,
    ];
    for bits in [1u64, 0x1234_5678, 0x000f_ffff_ffff_ffff] {
        v.push(f64::from_bits(bits));
        v.push(-f64::from_bits(bits));
    }
    v
}

/// Runs `func` over f64 inputs as written (the reference) and expanded with `lanes`
/// lanes; checks special values exactly and returns the worst ULP error and its input.
fn measure_f64(func: MathFn, xs: &[f64], ys: &[f64], lanes: u8) -> (f64, f64, f64) {
    let n = padded(xs.len().div_ceil(lanes as usize) * lanes as usize);
    let mut xv = xs.to_vec();
    let mut yv = ys.to_vec();
    xv.resize(n, 1.0);
    yv.resize(n, 1.0);
    let reference = map_kernel(F64, n, 1, |x, y| apply(func, x, y));
    let kernel = map_kernel(F64, n, lanes, |x, y| apply(func, x, y));
    let expanded = expand_all_f64(&kernel);
    assert_no_call(&expanded.body, func);
    let (a, b) = (HostBuffer::from_f64(&xv), HostBuffer::from_f64(&yv));
    let want = run_map(&reference, F64, &a, &b, 1).to_f64();
    let got = run_map(&expanded, F64, &a, &b, lanes).to_f64();
    let mut worst = (0.0, 0.0, 0.0);
    for i in 0..xs.len() {
        let far_trig =
            matches!(func, MathFn::Sin | MathFn::Cos) && xs[i].is_finite() && xs[i].abs() > 1.7e6;
        if far_trig {
            // beyond the accurate range (see `f64_sin_cos_stay_bounded_far_out`)
            assert!(
                got[i].abs() <= 1.0,
                "f64 {}({:e}) = {:e}",
                func.name(),
                xs[i],
                got[i]
            );
            continue;
        }
        let e = ulps_f64(got[i], want[i]);
        assert!(
            e.is_finite(),
            "{}({:e}, {:e}): got {:e}, want {:e}",
            func.name(),
            xs[i],
            ys[i],
            got[i],
            want[i]
        );
        if e > worst.0 {
            worst = (e, xs[i], ys[i]);
        }
    }
    eprintln!(
        "f64 {:5} x{lanes}: {} points, max {:.1} ulp at x = {:e} y = {:e}",
        func.name(),
        xs.len(),
        worst.0,
        worst.1,
        worst.2
    );
    worst
}

/// Random f64 inputs for `func` (`(x, y)`), over the ranges its algorithm distinguishes.
fn inputs_f64(func: MathFn, rng: &mut Rng, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut xs = specials_f64();
    let mut ys = vec![0.0; xs.len()];
    let sign = |rng: &mut Rng| if rng.next() % 2 == 0 { 1.0 } else { -1.0 };
    for i in 0..n {
        let small = (rng.unit() * 50.0 - 45.0).exp2() * sign(rng);
        let (x, y) = match func {
            MathFn::Exp if i % 2 == 0 => (rng.unit() * 1456.0 - 746.0, 0.0),
            MathFn::Exp2 if i % 2 == 0 => (rng.unit() * 2105.0 - 1080.0, 0.0),
            MathFn::Log | MathFn::Log2 if i % 2 == 0 => (f64::from_bits(rng.next() >> 1), 0.0),
            MathFn::Log | MathFn::Log2 => (rng.unit() * 1.5 + 0.5, 0.0),
            MathFn::Tanh => (rng.unit() * 24.0 * sign(rng), 0.0),
            MathFn::Erf => (rng.unit() * 7.0 * sign(rng), 0.0),
            MathFn::Sin | MathFn::Cos if i % 2 == 0 => ((rng.unit() * 50.0 - 30.0).exp2(), 0.0),
            MathFn::Sin | MathFn::Cos => (rng.unit() * 2e5 - 1e5, 0.0),
            MathFn::Pow if i % 4 == 3 => {
                // negative bases with integer exponents
                (
                    -(rng.unit() * 20.0 - 10.0).exp2(),
                    (rng.unit() * 80.0 - 40.0).round(),
                )
            }
            MathFn::Pow => {
                // any base, results spanning the whole range (subnormal to near overflow)
                let x = f64::from_bits(rng.next() % 0x7ff0_0000_0000_0000);
                let t = rng.unit() * 1454.0 - 745.0;
                (x, t / x.ln())
            }
            _ => (small, 0.0),
        };
        xs.push(x);
        ys.push(y);
    }
    if func == MathFn::Pow {
        // special bases against special exponents
        let sp = specials_f64();
        for &x in &sp {
            for &y in &sp {
                xs.push(x);
                ys.push(y);
            }
        }
    }
    (xs, ys)
}

#[test]
fn f64_math_within_2_ulp_of_std() {
    let mut rng = Rng(21);
    for func in ALL {
        let (xs, ys) = inputs_f64(func, &mut rng, 20_000);
        let (e, x, y) = measure_f64(func, &xs, &ys, 1);
        assert!(e <= 2.0, "f64 {}: {e} ulp at ({x:e}, {y:e})", func.name());
    }
}

#[test]
fn f64_vectors_match_scalar_lane_by_lane() {
    let mut rng = Rng(22);
    for func in ALL {
        let (xs, ys) = inputs_f64(func, &mut rng, 500);
        let n = padded(xs.len());
        let mut xv = xs.clone();
        let mut yv = ys.clone();
        xv.resize(n, 1.0);
        yv.resize(n, 1.0);
        let (a, b) = (HostBuffer::from_f64(&xv), HostBuffer::from_f64(&yv));
        let scalar = expand_all_f64(&map_kernel(F64, n, 1, |x, y| apply(func, x, y)));
        let want = run_map(&scalar, F64, &a, &b, 1).to_f64();
        for lanes in [2, 4] {
            let vector = expand_all_f64(&map_kernel(F64, n, lanes, |x, y| apply(func, x, y)));
            let got = run_map(&vector, F64, &a, &b, lanes).to_f64();
            for i in 0..n {
                assert!(
                    got[i].to_bits() == want[i].to_bits() || (got[i].is_nan() && want[i].is_nan()),
                    "f64 {} x{lanes} at ({:e}, {:e}): vector {:e}, scalar {:e}",
                    func.name(),
                    xv[i],
                    yv[i],
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn f64_sin_cos_stay_bounded_far_out() {
    let mut rng = Rng(23);
    let xs: Vec<f64> = (0..2000)
        .map(|_| (rng.unit() * 1000.0).exp2() * if rng.next() % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let n = padded(xs.len());
    let mut xv = xs.clone();
    xv.resize(n, 1.0);
    let a = HostBuffer::from_f64(&xv);
    for func in [MathFn::Sin, MathFn::Cos] {
        let k = expand_all_f64(&map_kernel(F64, n, 1, |x, y| apply(func, x, y)));
        let got = run_map(&k, F64, &a, &a, 1).to_f64();
        for (x, g) in xv.iter().zip(&got) {
            assert!(g.abs() <= 1.0, "f64 {}({x:e}) = {g:e}", func.name());
            // the table's allowance: 8 ulp of the argument's magnitude
            let want = if func == MathFn::Sin {
                x.sin()
            } else {
                x.cos()
            };
            assert!(
                (g - want).abs() <= 8.0 * f64::EPSILON / 2.0 * (x.abs() + 1.0),
                "f64 {}({x:e}) = {g:e}, want {want:e}",
                func.name()
            );
        }
    }
}

#[test]
fn f64_expansion_is_idempotent_and_keeps_results() {
    let kernel = mixed_kernel();
    let once = expand_all_f64(&kernel);
    let left: Vec<_> = calls(&once.body).into_iter().map(|(f, _)| f).collect();
    assert!(
        left.iter().all(|f| !ALL.contains(f)),
        "no transcendental call stays: {left:?}"
    );
    let twice = expand_math(&once, &MathExpansion::all_transcendental_with_f64());
    assert_eq!(once, twice);
    assert_eq!(once.params, kernel.params);
    assert_eq!(once.locals[..kernel.locals.len()], kernel.locals[..]);
    let (want, want_d) = run_mixed(&kernel);
    let (got, got_d) = run_mixed(&once);
    for i in 0..want.len() {
        let tol = 64.0 * f32::EPSILON * (1.0 + want[i].abs());
        assert!((got[i] - want[i]).abs() <= tol, "out[{i}]");
        let e = ulps_f64(got_d[i], want_d[i]);
        // exp + sin of the same argument: a few ulp of the larger term
        let tol_d = 4.0 * f64::EPSILON * (want_d[i].abs() + 1.0);
        assert!(
            e <= 4.0 || (got_d[i] - want_d[i]).abs() <= tol_d,
            "dout[{i}]: {} vs {}",
            got_d[i],
            want_d[i]
        );
    }
}

#[test]
fn f64_expansion_can_be_chosen_per_function() {
    let kernel = mixed_kernel();
    let only_sin = expand_math(&kernel, &MathExpansion::only(&[MathFn::Sin]).with_f64(true));
    validate(&only_sin).expect("partial expansion validates");
    let left: Vec<_> = calls(&only_sin.body).into_iter().map(|(f, _)| f).collect();
    assert!(
        !left.contains(&MathFn::Sin),
        "both sin calls (f32, f64) expanded"
    );
    assert!(left.contains(&MathFn::Exp), "exp (f32 and f64) stays");
    assert!(
        !MathExpansion::all_transcendental().f64,
        "the default leaves f64 alone"
    );
    assert_eq!(
        MathExpansion::default(),
        MathExpansion::all_transcendental()
    );
}

#[test]
fn f64_expansions_are_compact() {
    for func in ALL {
        let kernel = map_kernel(F64, WG as usize, 1, |x, y| apply(func, x, y));
        let expanded = expand_all_f64(&kernel);
        let added = expanded.locals.len() - kernel.locals.len();
        let size = kernelc_ir::block_size(&expanded.body) - kernelc_ir::block_size(&kernel.body);
        eprintln!("f64 {:5}: {added} locals, {size} nodes", func.name());
        assert!(size < 2000, "f64 {} expands to {size} nodes", func.name());
    }
}
