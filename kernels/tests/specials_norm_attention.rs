//! Special values (NaN, ±∞, subnormals) and scores beyond the compute type's range in
//! the attention and normalisation families: what the references define (docs/ops.md,
//! "Special values in attention and normalisation") and the kernels, lowered for CPU,
//! GPU and WebGPU-baseline caps, agreeing with them. The cases come from the op
//! fuzzer's `Specials` and `Wide` surveys; each test names the rule it holds.

use kernelc_kernels::conformance::{case_data_from_values, check_data, Executor, Interpreter};
use kernelc_kernels::fuzz::driver::{check_case, Target};
use kernelc_kernels::fuzz::FuzzCase;
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::{reference, OpSpec};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
/// The smallest f32 subnormal.
const TINY: f64 = 1.401298464324817e-45;

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
}

fn interpreters() -> Vec<Interpreter> {
    vec![
        Interpreter::new("interp/cpu-caps", TargetCaps::cpu()),
        Interpreter::new("interp/gpu-caps", TargetCaps::cuda_sm90()),
        Interpreter::new("interp/webgpu-baseline-caps", TargetCaps::gpu_baseline()),
    ]
}

/// The reference's outputs for `inputs`, after checking that the plans for every caps
/// agree with them on the interpreter.
#[track_caller]
fn checked(spec: &OpSpec, inputs: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let data = case_data_from_values(spec, inputs);
    for exec in interpreters() {
        if let Err(e) = check_data(&exec, spec, &data) {
            panic!("{}: {}: {e}", spec.name(), exec.label);
        }
    }
    let refs: Vec<&[f64]> = data.values.iter().map(|v| v.as_slice()).collect();
    reference(spec, &refs).expect("reference")
}

/// Whether `got` is `want` (NaN matching NaN; the sign of a zero is not compared).
fn same(got: f64, want: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want
}

#[track_caller]
fn assert_values(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same(g, w), "{what}[{i}]: got {g}, want {w} (all: {got:?})");
    }
}

#[track_caller]
fn assert_finite(what: &str, got: &[f64]) {
    assert!(got.iter().all(|v| v.is_finite()), "{what}: {got:?}");
}

/// Attention, f32, one head, `seq_q` queries, `seq_k` keys, head_dim 2, scale ½.
fn attention(seq_q: usize, seq_k: usize, causal: bool, mask: bool) -> OpSpec {
    spec(&format!(
        r#"{{"op":"attention","dtype":"f32","layout":"bhsd","batch":1,"heads":1,"kv_heads":1,
            "seq_q":{seq_q},"seq_k":{seq_k},"head_dim":2,"scale":0.5,"causal":{causal}
            {}}}"#,
        if mask {
            format!(r#","mask":[{seq_q},{seq_k}]"#)
        } else {
            String::new()
        }
    ))
}

/// A NaN score makes its query's row NaN (softmax of a row holding NaN), also when
/// every score of the row is NaN; a row whose scores are all −∞ (fully masked) is the
/// op's documented 0. The kernels used to turn every NaN row into 0 (`l > 0` was false
/// for a NaN sum), and the reference the all-NaN row.
#[test]
fn attention_nan_scores_make_the_row_nan_and_a_fully_masked_row_zero() {
    let spec = attention(3, 3, false, true);
    let q = vec![1.0, 0.5, NAN, NAN, -1.0, 0.25];
    let k = vec![0.5, 1.0, 0.25, -0.5, 1.0, 1.0];
    let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    // Row 0 has one NaN score (its mask) among finite ones; row 1's are all NaN (its
    // query); row 2 is fully masked.
    let ninf = f64::NEG_INFINITY;
    let mask = vec![0.0, NAN, 0.0, 0.0, 0.0, 0.0, ninf, ninf, ninf];
    let o = checked(&spec, vec![q, k, v, mask]).remove(0);
    assert_values("o", &o, &[NAN, NAN, NAN, NAN, 0.0, 0.0]);
}

/// The scale multiplies each dot product, not the queries: a subnormal query element
/// times a −∞ key element is −∞ (that key's probability is 0), where a query scaled
/// first underflowed to 0 and made `0·(−∞) = NaN` of the whole row.
#[test]
fn attention_subnormal_query_meets_an_infinite_key() {
    let spec = attention(2, 3, false, false);
    let q = vec![TINY, 1.0, 1.0, 1.0];
    let k = vec![f64::NEG_INFINITY, 0.5, 0.25, 0.5, 1.0, 1.0];
    let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let o = checked(&spec, vec![q, k, v]).remove(0);
    assert_finite("o", &o);
}

/// A key hidden by causality takes no part in its query's output, also when its value
/// is NaN or ∞ (the kernels multiplied its probability 0 into it: `0·∞ = NaN`).
#[test]
fn attention_causally_hidden_values_do_not_leak() {
    // seq_q = seq_k = 5: query i sees keys 0..=i. The values of keys 1.. are special.
    let spec = attention(5, 5, true, false);
    let q: Vec<f64> = (0..10).map(|i| 0.1 * i as f64 - 0.3).collect();
    let k: Vec<f64> = (0..10).map(|i| 0.2 - 0.05 * i as f64).collect();
    let v = vec![1.0, -2.0, NAN, INF, -INF, NAN, INF, 0.5, 0.25, 0.75];
    let o = checked(&spec, vec![q, k, v]).remove(0);
    assert_values("o row 0", &o[..2], &[1.0, -2.0]);
    assert!(
        o[2..].iter().all(|x| !x.is_finite()),
        "later rows see them: {o:?}"
    );
}

/// The same rule on the tensor cores (bf16 and f16, head dims of a multiple of 8: the
/// warpgroup kernel on sm_90 caps, the warp kernel on sm_80's): values NaN, +∞ and
/// −∞ in blocks every row sees, some rows see in part (both key blocks here) and a
/// key past every row's reach but the last's; each row's output is NaN or ±∞ exactly
/// where it sees one, else finite.
#[test]
fn attention_causally_hidden_values_do_not_leak_on_tensor_cores() {
    let sm80 = TargetCaps {
        warpgroup_fragments: false,
        ..TargetCaps::cuda_sm90()
    };
    for dtype in ["bf16", "f16"] {
        hidden_values_do_not_leak(dtype, 8, &[("interp/sm80-caps", sm80.clone())]);
    }
}

/// The same rule in the register-blocked f32 kernel of the CUDA caps (its 4×4 blocks
/// of rows and keys, a block some rows see in part taken key by key).
#[test]
fn attention_causally_hidden_values_do_not_leak_in_blocked_f32() {
    hidden_values_do_not_leak("f32", 16, &[]);
}

/// The values of [`attention_causally_hidden_values_do_not_leak_on_tensor_cores`] at
/// `dtype` and head dim `d`, on the sm_90 and CPU caps and `more`.
fn hidden_values_do_not_leak(dtype: &str, d: usize, more: &[(&str, TargetCaps)]) {
    let seq = 100usize;
    let specials = [
        (3, 0, NAN),
        (20, 5, INF),
        (70, 3, -INF),
        (99, 7, NAN),
        (64, 1, INF),
    ];
    let spec = spec(&format!(
        r#"{{"op":"attention","dtype":"{dtype}","layout":"bhsd","batch":1,"heads":1,
            "kv_heads":1,"seq_q":{seq},"seq_k":{seq},"head_dim":{d},"scale":0.35,
            "causal":true}}"#
    ));
    let q: Vec<f64> = (0..seq * d)
        .map(|i| ((i * 7 % 13) as f64 - 6.0) / 8.0)
        .collect();
    let k: Vec<f64> = (0..seq * d)
        .map(|i| ((i * 5 % 11) as f64 - 5.0) / 8.0)
        .collect();
    let mut v: Vec<f64> = (0..seq * d)
        .map(|i| ((i * 3 % 7) as f64 - 3.0) / 4.0)
        .collect();
    for (key, col, x) in specials {
        v[key * d + col] = x;
    }
    let data = case_data_from_values(&spec, vec![q, k, v]);
    let execs = [
        ("interp/sm90-caps", TargetCaps::cuda_sm90()),
        ("interp/cpu-caps", TargetCaps::cpu()),
    ];
    for (label, caps) in execs.iter().chain(more).cloned() {
        let exec = Interpreter::new(label, caps);
        check_data(&exec, &spec, &data).unwrap_or_else(|e| panic!("{dtype}: {label}: {e}"));
    }
    let refs: Vec<&[f64]> = data.values.iter().map(|v| v.as_slice()).collect();
    let o = reference(&spec, &refs).expect("reference").remove(0);
    for row in 0..seq {
        for col in 0..d {
            let seen = specials.iter().any(|&(key, c, _)| c == col && key <= row);
            let x = o[row * d + col];
            assert_eq!(!x.is_finite(), seen, "{dtype}: row {row} column {col}: {x}");
        }
    }
}

/// A score is formed in the compute type: beyond its range it is ±∞ in the reference
/// too (the f64 reference used to keep `scale·q·k = ±2·10⁴²` finite and take a
/// softmax no f32 implementation can). A +∞ score makes the row NaN (`e^{∞−∞}`); a
/// row of −∞ scores is the masked row's 0.
#[test]
fn attention_scores_past_the_compute_range_are_infinite() {
    let spec = spec(
        r#"{"op":"attention","dtype":"f32","layout":"bhsd","batch":1,"heads":1,"kv_heads":1,
            "seq_q":2,"seq_k":2,"head_dim":2,"scale":1e30}"#,
    );
    let q = vec![1e6, 1e6, -1e6, -1e6];
    let k = vec![1e6, 1e6, 2e6, 2e6];
    let v = vec![1.0, 2.0, 3.0, 4.0];
    let o = checked(&spec, vec![q, k, v]).remove(0);
    assert_values("o", &o, &[NAN, NAN, 0.0, 0.0]);
}

/// RMS norm of a row holding ±∞: `mean x² = ∞`, `r = 0`, so `y = x·0`: 0 for the
/// finite values, NaN at the infinity (IEEE, and PyTorch's `rms_norm`). The reference's
/// compensated sum used to return NaN for any infinite term (its carry is `∞ − ∞`).
#[test]
fn rms_norm_of_a_row_with_an_infinity() {
    let spec = spec(
        r#"{"op":"layer_norm","dtype":"f32","shape":[2,4],"eps":0.00001,"rms":true,
            "weight":false,"bias":false,"residual":false,"save_stats":true}"#,
    );
    let x = vec![0.5, -1.0, 2.0, 1.5, 0.5, f64::NEG_INFINITY, 2.0, -0.25];
    let out = checked(&spec, vec![x]);
    assert_finite("y row 0", &out[0][..4]);
    assert_values("y row 1", &out[0][4..], &[0.0, NAN, 0.0, 0.0]);
    assert_values("stats row 1", &out[1][2..], &[0.0, 0.0]);
}

/// Layer norm of a row holding ±∞ or NaN: its statistics are undefined, so μ, `1/σ`
/// and every `y` of the row are NaN. The kernels' Welford mean was ±∞ or NaN
/// depending on where the value fell in the fold (an infinity last gave μ = ∞), the
/// reference's NaN (its compensated sum).
#[test]
fn layer_norm_statistics_of_a_non_finite_row_are_nan() {
    let spec = spec(
        r#"{"op":"layer_norm","dtype":"f32","shape":[4,5],"eps":0.00001,"rms":false,
            "weight":true,"bias":true,"residual":false,"save_stats":true}"#,
    );
    let x = vec![
        0.5, -1.0, 2.0, 1.5, 0.75, // finite
        0.5, -1.0, 2.0, 1.5, INF, // +∞ last
        -INF, 1.0, 2.0, 1.5, 0.75, // −∞ first
        0.5, NAN, 2.0, 1.5, 0.75, // NaN
    ];
    let w = vec![1.0, 0.5, -1.0, 2.0, 0.25];
    let b = vec![0.0, 0.125, 1.0, -1.0, 0.5];
    let out = checked(&spec, vec![x, w, b]);
    let (y, stats) = (&out[0], &out[1]);
    assert_finite("y row 0", &y[..5]);
    assert_finite("stats row 0", &stats[..2]);
    assert!(y[5..].iter().all(|v| v.is_nan()), "y: {y:?}");
    assert!(stats[2..].iter().all(|v| v.is_nan()), "stats: {stats:?}");
}

/// Batch norm (training) of a channel holding ±∞: the saved μ and `1/σ`, the running
/// statistics' update and every `y` of the channel are NaN; other channels are
/// untouched.
#[test]
fn batch_norm_statistics_of_a_non_finite_channel_are_nan() {
    let spec = spec(
        r#"{"op":"batch_norm","dtype":"f32","shape":[2,2,3],"eps":0.00001,"momentum":0.1,
            "training":true}"#,
    );
    // Channel 0: 0.5, 1, 2 | 1.5, 0.25, −∞ (last); channel 1 finite.
    let x = vec![
        0.5,
        1.0,
        2.0,
        -0.5,
        0.75,
        1.25,
        1.5,
        0.25,
        f64::NEG_INFINITY,
        0.125,
        -1.0,
        2.5,
    ];
    let ones = vec![1.0, 1.0];
    let zeros = vec![0.0, 0.0];
    let out = checked(&spec, vec![x, ones.clone(), zeros.clone(), zeros, ones]);
    let (y, save, rm, rv) = (&out[0], &out[1], &out[2], &out[3]);
    for i in [0, 1, 2, 6, 7, 8] {
        assert!(y[i].is_nan(), "y[{i}]: {y:?}");
    }
    assert!(save[0].is_nan() && save[1].is_nan(), "save: {save:?}");
    assert!(rm[0].is_nan() && rv[0].is_nan(), "running: {rm:?} {rv:?}");
    assert_finite("channel 1", &[save[2], save[3], rm[1], rv[1], y[3], y[11]]);
}

/// Batch-norm backward multiplies by the weight last: a subnormal weight times an
/// infinite bracket is ±∞. The kernel formed `w·r/M` first, which underflows to 0
/// in f32 and made `0·∞ = NaN`.
#[test]
fn batch_norm_backward_subnormal_weight_meets_an_infinite_gradient() {
    let spec =
        spec(r#"{"op":"batch_norm_backward","dtype":"f32","shape":[2,1,4],"param_grads":true}"#);
    let dy = vec![0.5, -0.25, INF, 1.0, -1.0, 0.75, 0.125, -0.5];
    let x = vec![-1.0, 0.5, 1.5, -0.75, 0.25, -1.25, 1.0, 0.0];
    let save = vec![0.03125, 1.05];
    let out = checked(&spec, vec![dy, x, vec![TINY], save]);
    // Σdy = ∞ makes the bracket dy − Σdy/M − x̂·Σdy·x̂/M infinite or NaN everywhere;
    // times r and the tiny weight it stays so.
    let dx = &out[0];
    assert!(dx.iter().all(|v| !v.is_finite()), "dx: {dx:?}");
    assert!(dx.iter().any(|v| v.is_infinite()), "dx: {dx:?}");
}

/// Layer-norm backward forms `g = dy·w` in the compute type, in the reference as in
/// the kernels (and PyTorch): a subnormal weight times a small gradient is 0 there, and
/// `0·x̂` with an infinite `x̂` is NaN, which makes the row NaN. The f64 reference kept
/// `g` tiny but nonzero and wanted ±∞.
#[test]
fn layer_norm_backward_forms_g_in_the_compute_type() {
    let spec = spec(
        r#"{"op":"layer_norm_backward","dtype":"f32","shape":[2,4],"rms":false,"weight":true,
            "bias":true,"param_grads":true}"#,
    );
    // dy·w = 0.25·2⁻¹⁴⁹ rounds to 0 in f32 where x̂ = ∞.
    let dy = vec![0.5, -0.25, 0.75, 1.0, 0.25, 0.75, 0.125, -0.5];
    let x = vec![-1.0, 0.5, 1.5, -0.75, INF, -1.25, 1.0, 0.0];
    let w = vec![TINY, 1.0, 0.5, -1.0];
    let stats = vec![0.0625, 0.9, -0.125, 1.1];
    let out = checked(&spec, vec![dy, x, w, stats]);
    let dx = &out[0];
    assert_finite("dx row 0", &dx[..4]);
    assert!(dx[4..].iter().all(|v| v.is_nan()), "dx row 1: {dx:?}");
}

/// Failing cases of the fuzzer's survey (seed 3), replayed.
#[test]
fn survey_cases_replay() {
    let cases = [
        // attention Specials: o = 0 where the reference is NaN.
        r#"{"spec":{"op":"attention","dtype":"f32","layout":"bshd","batch":1,"heads":2,"kv_heads":2,"seq_q":33,"seq_k":100,"head_dim":64,"scale":0.125,"causal":true,"mask":[1,2,33,100]},"seed":2938076242,"mode":"specials"}"#,
        r#"{"spec":{"op":"attention","dtype":"f16","layout":"bhsd","batch":1,"heads":2,"kv_heads":1,"seq_q":33,"seq_k":33,"head_dim":64,"scale":0.125,"causal":false,"mask":[2,1,33]},"seed":2994617497,"mode":"specials"}"#,
        // attention Specials: a subnormal query against a −∞ key.
        r#"{"spec":{"op":"attention","dtype":"f32","layout":"bshd","batch":1,"heads":2,"kv_heads":1,"seq_q":70,"seq_k":5,"head_dim":13,"scale":0.2773500981126146,"causal":false,"mask":[5]},"seed":3028970294,"mode":"specials"}"#,
        // attention Specials: causally hidden values.
        r#"{"spec":{"op":"attention","dtype":"f32","layout":"bhsd","batch":2,"heads":2,"kv_heads":1,"seq_q":3,"seq_k":4,"head_dim":8,"scale":0.35355339059327373,"causal":true,"mask":[3,4]},"seed":3566641484,"mode":"specials"}"#,
        r#"{"spec":{"op":"attention","dtype":"f64","layout":"bshd","batch":2,"heads":2,"kv_heads":2,"seq_q":33,"seq_k":7,"head_dim":8,"scale":0.35355339059327373,"causal":true,"mask":[2,1,1,7]},"seed":524283803,"mode":"specials"}"#,
        // attention Wide: scale 10³⁰, scores past f32's range.
        r#"{"spec":{"op":"attention","dtype":"f32","layout":"bshd","batch":1,"heads":2,"kv_heads":1,"seq_q":70,"seq_k":5,"head_dim":13,"scale":1e+30,"causal":false,"mask":[5]},"seed":2728525302,"mode":"wide"}"#,
        // rms_norm Specials: finite where the reference was NaN.
        r#"{"spec":{"op":"layer_norm","dtype":"f32","shape":[5,7],"eps":0.00001,"rms":true,"weight":false,"bias":false,"residual":false,"save_stats":false},"seed":711011738,"mode":"specials"}"#,
        r#"{"spec":{"op":"layer_norm","dtype":"bf16","shape":[2,3,13],"eps":0.00001,"rms":true,"weight":false,"bias":true,"residual":true,"save_stats":false},"seed":1704407095,"mode":"specials"}"#,
        // batch_norm_train Specials: save = ±∞ where the reference was NaN.
        r#"{"spec":{"op":"batch_norm","dtype":"bf16","shape":[3,64,3],"eps":0.00001,"momentum":0.1,"training":true},"seed":3137503837,"mode":"specials"}"#,
        r#"{"spec":{"op":"batch_norm","dtype":"f32","shape":[16,63],"eps":1.7976931348623157e+308,"momentum":1e-30,"training":true},"seed":2880533835,"mode":"specials"}"#,
        // batch_norm_backward Specials: NaN where the reference was −∞.
        r#"{"spec":{"op":"batch_norm_backward","dtype":"f32","shape":[2,8,4,4],"param_grads":true},"seed":1837925929,"mode":"specials"}"#,
        // layer_norm_backward Specials: NaN where the reference was −∞.
        r#"{"spec":{"op":"layer_norm_backward","dtype":"f32","shape":[600,40],"rms":false,"weight":true,"bias":true,"param_grads":true},"seed":3885597866,"mode":"specials"}"#,
    ];
    let targets: Vec<Target> = interpreters()
        .into_iter()
        .map(|i| {
            let caps = i.caps.clone();
            (Box::new(i) as Box<dyn Executor>, caps)
        })
        .collect();
    for json in cases {
        let case: FuzzCase = serde_json::from_str(json).expect("a fuzz case");
        match check_case(&targets, &case) {
            Ok(ran) => assert!(ran > 0, "{json}: no executor ran it"),
            Err(e) => panic!("{json}: {e}"),
        }
    }
}
