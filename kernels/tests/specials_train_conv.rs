//! Special values (NaN, ±∞, ±0, subnormals) through the training, convolution,
//! elementwise and GEMM families: each test is a rule that the op fuzzer's `Specials`
//! mode once found broken. Each checks the reference against the rule itself, then
//! the kernels against the reference on the interpreter with CPU, GPU and
//! WebGPU-baseline caps (those whose dtypes the case needs).

use kernelc_kernels::conformance::{case_data_from_values, check_data, Interpreter};
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::*;

const INF: f64 = f64::INFINITY;
const NAN: f64 = f64::NAN;
/// The smallest positive f32 subnormal.
const TINY_F32: f64 = 1.401298464324817e-45;

fn spec(json: &str) -> OpSpec {
    let spec: OpSpec = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
    spec.validate().unwrap_or_else(|e| panic!("{json}: {e}"));
    spec
}

/// The reference's outputs on `values` (one list per input), after checking every
/// interpreter executor against them.
fn run(spec: &OpSpec, values: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let data = case_data_from_values(spec, values);
    let executors = [
        ("interp/cpu-caps", TargetCaps::cpu()),
        ("interp/gpu-caps", TargetCaps::cuda_sm90()),
        ("interp/webgpu-baseline-caps", TargetCaps::gpu_baseline()),
    ];
    for (label, caps) in executors {
        let sigs = spec.inputs().into_iter().chain(spec.outputs());
        if !sigs.into_iter().all(|s| caps.supports(s.dtype)) {
            continue;
        }
        let exec = Interpreter::new(label, caps);
        if let Err(f) = check_data(&exec, spec, &data) {
            panic!("{} on {label}: {f}", spec.name());
        }
    }
    let refs: Vec<&[f64]> = data.values.iter().map(|v| v.as_slice()).collect();
    reference(spec, &refs).unwrap_or_else(|e| panic!("{}: {e}", spec.name()))
}

/// `n` values cycling through `pattern`.
fn cycle(pattern: &[f64], n: usize) -> Vec<f64> {
    pattern.iter().copied().cycle().take(n).collect()
}

/// `n` finite values in `[-1, 1]`, none zero (a fixed, dependency-free pattern).
fn finite(n: usize, salt: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v = ((i * 37 + salt * 11) % 17) as f64 / 8.0 - 1.0;
            if v == 0.0 {
                0.25
            } else {
                v
            }
        })
        .collect()
}

/// Same value, NaN included (±0 equal).
fn same(a: f64, b: f64) -> bool {
    a == b || a.is_nan() && b.is_nan()
}

// ---------------------------------------------------------------- dropout

/// Dropout multiplies `x` by its mask (`keep ? 1/(1−p) : 0`), as PyTorch's
/// `x * mask * scale` and `p = 1`'s `x * 0` do: a dropped NaN or ±∞ is NaN.
#[test]
fn dropout_multiplies_dropped_nan_and_inf_by_zero() {
    let x = cycle(&[NAN, INF, -INF, -0.0, 1.5, -2.0, TINY_F32], 64);
    // Random keep bits, everything kept (p = 0), everything dropped (p → 1).
    for p in [0.5, 0.0, 1.0 - f64::EPSILON / 2.0] {
        let s = spec(&format!(
            r#"{{"op":"dropout","dtype":"f32","shape":[64],"p":{p:?},"seed":7,"step":3,"mask":true,"rng":"counter"}}"#
        ));
        let out = run(&s, vec![x.clone()]);
        let (y, mask) = (&out[0], &out[1]);
        for i in 0..x.len() {
            assert!(same(y[i], x[i] * mask[i]), "p {p}: y[{i}] = {}", y[i]);
            if mask[i] == 0.0 && !x[i].is_finite() {
                assert!(y[i].is_nan(), "p {p}: a dropped {} is NaN", x[i]);
            }
        }
    }
}

// ---------------------------------------------------------------- adam

/// With `weight_decay = 0` there is no decay term (PyTorch's Adam adds `wd·param` only
/// when `wd ≠ 0`; AdamW multiplies `param` by `1 − lr·0 = 1`), so an infinite param
/// stays infinite rather than becoming `0·∞ = NaN`.
#[test]
fn adam_without_weight_decay_has_no_decay_term() {
    let param = cycle(&[INF, -INF, 0.5, -0.25], 16);
    let grad = finite(16, 1);
    let m = finite(16, 2);
    let v: Vec<f64> = finite(16, 3).iter().map(|x| x.abs()).collect();
    for decoupled in [false, true] {
        let s = spec(&format!(
            r#"{{"op":"adam","dtype":"f32","len":16,"lr":0.001,"beta1":0.9,"beta2":0.999,"eps":1e-8,"weight_decay":0.0,"decoupled":{decoupled},"step":1}}"#
        ));
        let out = run(&s, vec![param.clone(), grad.clone(), m.clone(), v.clone()]);
        for i in 0..16 {
            if param[i].is_infinite() {
                assert_eq!(out[0][i], param[i], "decoupled {decoupled}: param[{i}]");
            } else {
                assert!(out[0][i].is_finite(), "decoupled {decoupled}: param[{i}]");
            }
        }
    }
}

/// A step that overflows the compute type before `lr` scales it (a first moment over
/// a subnormal `eps` and a zero second moment) makes the kernel's `lr·step` NaN at
/// `lr = −0`, as
/// PyTorch's f32 arithmetic does, where the exact value is `−0·q = 0`: the tolerance
/// leaves such elements unspecified (found by the op fuzzer, bf16, `ties` inputs).
#[test]
fn adam_step_overflowing_before_lr_is_unspecified() {
    let param = finite(8, 4);
    let grad = vec![0.0; 8];
    let m = finite(8, 5);
    let v = vec![0.0; 8];
    let s = spec(&format!(
        r#"{{"op":"adam","dtype":"f32","len":8,"lr":-0.0,"beta1":0.9,"beta2":0.999,"eps":{TINY_F32:e},"weight_decay":0.0,"decoupled":true,"step":1}}"#
    ));
    // `run` checks the kernels against the reference under the tolerance.
    let out = run(&s, vec![param.clone(), grad, m, v]);
    assert_eq!(
        out[0], param,
        "the exact update is −0·q: the parameters stay"
    );
}

// ---------------------------------------------------------------- silu_mul

/// `silu_mul(a, b) = silu(a)·b` with `silu(a)` a value of the compute type (as
/// PyTorch's `silu(a) * b` computes it): a gate so small that `silu(a)` underflows to
/// ±0 gives `±0·∞ = NaN` against an infinite `b`, in the reference as in the kernel.
#[test]
fn silu_mul_rounds_silu_to_the_compute_type() {
    for (dtype, tiny) in [("f32", TINY_F32), ("f64", f64::from_bits(1))] {
        let a = cycle(&[tiny, -tiny, tiny, 1.0], 16);
        let b = cycle(&[-INF, INF, 3.0, -INF], 16);
        let s = spec(&format!(
            r#"{{"op":"binary","func":"silu_mul","dtype":"{dtype}","lhs":[16],"rhs":[16]}}"#
        ));
        let out = run(&s, vec![a.clone(), b.clone()]);
        for i in 0..16 {
            if a[i].abs() == tiny && b[i].is_infinite() {
                assert!(out[0][i].is_nan(), "{dtype}: silu_mul({}, {})", a[i], b[i]);
            }
        }
    }
    // f16 computes in f32, where silu of the smallest f16 subnormal does not underflow.
    let tiny = 5.960464477539063e-8;
    let s = spec(r#"{"op":"binary","func":"silu_mul","dtype":"f16","lhs":[4],"rhs":[4]}"#);
    let out = run(
        &s,
        vec![vec![tiny, -tiny, tiny, 1.0], vec![-INF, INF, 3.0, -INF]],
    );
    assert_eq!(out[0][..2], [-INF, -INF]);
}

// ---------------------------------------------------------------- gemm

/// A 2 × 2 GEMM with `k = 2` of all-one A and B (`Σ = 2`), with `alpha`, `beta` and
/// optionally a bias.
fn gemm(dtype: &str, alpha: f64, beta: f64, bias: bool) -> OpSpec {
    spec(&format!(
        r#"{{"op":"gemm","dtype":"{dtype}","layout":"row_major","m":2,"n":2,"k":2,"trans_a":false,"trans_b":false,"batch":[],"alpha":{alpha:?},"beta":{beta:?},"bias":{bias},"lda":2,"ldb":2,"ldc":2}}"#
    ))
}

/// GEMM's epilogue `alpha·Σ + beta·C (+ bias)` is arithmetic in the compute type, as in
/// cuBLAS and PyTorch's `addmm`: `alpha·Σ` past f32's range is +∞ there, so adding a
/// `−∞` (from `C` or the bias) or another overflowed `−∞` gives NaN.
#[test]
fn gemm_epilogue_overflows_in_the_compute_type() {
    let max = f32::MAX as f64;
    let ones = vec![1.0; 4];
    // alpha·Σ = +∞ meets beta·C = −∞.
    let s = gemm("f32", max, 1.0, false);
    let c = run(
        &s,
        vec![ones.clone(), ones.clone(), vec![-INF, 1.0, -1.0, 0.0]],
    );
    assert!(c[0][0].is_nan(), "+∞ + −∞: {}", c[0][0]);
    assert_eq!(c[0][1], INF);
    // alpha·Σ = +∞ meets beta·C = −∞ from an overflow (exactly: 3.4e38, finite).
    let s = gemm("f32", max, max, false);
    let c = run(
        &s,
        vec![ones.clone(), ones.clone(), vec![-2.0, -3.0, 0.0, 1.0]],
    );
    assert!(c[0][0].is_nan() && c[0][1].is_nan(), "{:?}", c[0]);
    assert_eq!(c[0][2..], [INF, INF]);
    // alpha·Σ = +∞ meets a −∞ bias.
    let s = gemm("f32", max, 0.0, true);
    let c = run(&s, vec![ones.clone(), ones.clone(), vec![-INF, 2.0]]);
    assert!(c[0][0].is_nan(), "{:?}", c[0]);
    assert_eq!(c[0][1], INF);
    // In f64 the same alpha·Σ is finite: −∞ wins.
    let s = gemm("f64", max, 1.0, false);
    let c = run(&s, vec![ones.clone(), ones, vec![-INF, 1.0, -1.0, 0.0]]);
    assert_eq!(c[0][0], -INF);
}

// ---------------------------------------------------------------- conv2d

fn conv(dtype: &str, pass: &str, dims: [usize; 5], window: &str) -> OpSpec {
    let [n, c, k, h, w] = dims;
    spec(&format!(
        r#"{{"op":"conv2d","dtype":"{dtype}","pass":"{pass}","batch":{n},"in_channels":{c},"out_channels":{k},"height":{h},"width":{w},"window":{window},"bias":false}}"#
    ))
}

const PAD1: &str = r#"{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}"#;

/// Forward: an output pixel whose window tap lies in the padding has no term for that
/// tap, so an infinite or NaN weight there does not reach it (no `0·∞` from the
/// padding).
#[test]
fn conv2d_forward_padding_adds_no_terms() {
    for (dtype, dims) in [("f32", [1, 2, 3, 5, 5]), ("bf16", [2, 3, 5, 9, 7])] {
        let s = conv(dtype, "forward", dims, PAD1);
        let [n, c, k, h, w] = dims;
        let x = finite(n * c * h * w, 1);
        let mut wt = finite(k * c * 9, 2);
        // Output channel 0: tap (0, 0) of channel 0 infinite, tap (2, 2) of the last
        // channel NaN; output channel 1: tap (0, 2) −∞.
        wt[0] = INF;
        wt[(c - 1) * 9 + 8] = NAN;
        wt[c * 9 + 2] = -INF;
        let out = run(&s, vec![x, wt]);
        let y = |kk: usize, oy: usize, ox: usize| out[0][(kk * h + oy) * w + ox];
        // (0, 0) reads tap (0, 0) at (−1, −1) and tap (2, 2) inside: NaN.
        assert!(y(0, 0, 0).is_nan());
        // The last row and column read tap (2, 2) in the padding, tap (0, 0) inside.
        assert!(y(0, h - 1, w - 1).is_infinite(), "{}", y(0, h - 1, w - 1));
        // The first row reads tap (0, 2) in the padding: finite.
        assert!(y(1, 0, 1).is_finite(), "{}", y(1, 0, 1));
    }
}

/// Backward data (stride 1, read through the transposed window): a `dx` pixel gets no
/// term from a weight tap whose output position lies outside the output.
#[test]
fn conv2d_backward_data_padding_adds_no_terms() {
    let strided = r#"{"kernel":[3,3],"stride":[2,2],"padding":[1,1]}"#;
    for (dtype, window) in [("f32", PAD1), ("bf16", PAD1), ("f32", strided)] {
        let dims = [1, 2, 3, 7, 6];
        let s = conv(dtype, "backward_data", dims, window);
        let [_, c, k, h, w] = dims;
        let dy_len = s.inputs()[0].numel();
        let dy = finite(dy_len, 3);
        let mut wt = finite(k * c * 9, 4);
        wt[0] = INF; // w[0, 0, 0, 0]
        let out = run(&s, vec![dy, wt]);
        // dx[0, 0, H−1, W−1] would read tap (0, 0) from output (H, W): outside.
        assert!(out[0][h * w - 1].is_finite(), "{dtype} {window}");
    }
}

/// Backward filter: `dw` at a tap gets no term from an output pixel whose window has
/// that tap in the padding; on GPU caps the long reduction is split (split-K), so the
/// sum launch must keep to the definition too.
#[test]
fn conv2d_backward_filter_padding_adds_no_terms() {
    for dims in [[1, 2, 3, 5, 6], [2, 2, 4, 16, 16]] {
        let s = conv("f32", "backward_filter", dims, PAD1);
        let [n, c, k, h, w] = dims;
        let x = finite(n * c * h * w, 5);
        let mut dy = finite(n * k * h * w, 6);
        dy[0] = -INF; // dy[0, 0, 0, 0]: its taps (0, *) and (*, 0) are in the padding
        let out = run(&s, vec![x, dy]);
        // dw[0, 0, 0, 0] reads x at (−1, −1) for dy[0, 0, 0, 0]: no term.
        assert!(out[0][0].is_finite(), "{dims:?}: {}", out[0][0]);
        // dw[0, 0, 2, 2] reads x[0, 0, 1, 1] for it: −∞·x.
        assert!(out[0][8].is_infinite(), "{dims:?}: {}", out[0][8]);
    }
}
