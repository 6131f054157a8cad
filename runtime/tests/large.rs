//! Tensors past one kernel's 32-bit indices on the GPU machine: `add` and a full
//! `reduce sum` over 3·2^30 f32 elements (12 GiB a tensor), softmax and layer norm
//! over one row of that many, a GEMM weight, an attention head's queries and another
//! head's keys past 2^31 elements, split into pieces at lowering, against exact or closed-form host
//! references. Needs a CUDA device with ~40 GiB free;
//! elsewhere it prints a NOT RUN line (CI has neither the device nor the memory).

#![cfg(feature = "cuda")]

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, DeviceChoice, Runtime, RuntimeError, Tensor};

const N: usize = 3 << 30;

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
}

/// The CUDA device's runtime, or `None` (a NOT RUN line for `what`) without one.
fn cuda(what: &str) -> Option<Runtime> {
    match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(device) => Some(Runtime::with_device(device, DiskCache::off())),
        Err(e) => {
            println!("NOT RUN: no CUDA device ({what}): {e}");
            None
        }
    }
}

/// An upload's tensor, or `None` (a NOT RUN line for `what`) where the device lacks
/// the memory; any other error fails the test.
fn fits(upload: Result<Tensor, RuntimeError>, what: &str) -> Option<Tensor> {
    match upload {
        Ok(t) => Some(t),
        Err(RuntimeError::OutOfMemory { .. }) => {
            println!("NOT RUN: the device lacks memory for {what}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Values whose sums (below 2^24) are exact in f32 and which differ along the whole tensor, so a
/// piece bound at the wrong start gives wrong elements.
fn x_at(i: usize) -> f32 {
    (i % 65_521) as f32
}

fn y_at(i: usize) -> f32 {
    ((i / 65_521) % 128) as f32 * 65_536.0
}

#[test]
fn add_and_reduce_sum_past_32_bit_indices_equal_the_reference() {
    let Some(rt) = cuda("3·2^30-element add and sum") else {
        return;
    };
    let x: Vec<f32> = (0..N).map(x_at).collect();
    let Some(xt) = fits(rt.tensor(&[N], &x), "3·2^30-element tensors") else {
        return;
    };
    drop(x);
    let sum = rt
        .run(
            &spec(&format!(
                r#"{{"op":"reduce","func":"sum","dtype":"f32","shape":[{N}],"axes":[0]}}"#
            )),
            &[&xt],
        )
        .expect("reduce sum")
        .remove(0)
        .to_vec::<f32>()
        .expect("download")[0];
    let exact: f64 = (0..N).map(|i| x_at(i) as f64).sum();
    let relative = ((sum as f64 - exact) / exact).abs();
    println!("reduce sum of {N} f32: {sum} vs exact {exact} (relative error {relative:.2e})");
    assert!(relative < 1e-5, "sum {sum}, exact {exact}");

    let y: Vec<f32> = (0..N).map(y_at).collect();
    let yt = rt.tensor(&[N], &y).expect("upload y");
    drop(y);
    let out = rt.add(&xt, &yt).expect("add");
    drop((xt, yt));
    assert_eq!(out.dtype(), ScalarType::F32);
    let got = out.to_vec::<f32>().expect("download");
    let wrong = (0..N).filter(|&i| got[i] != x_at(i) + y_at(i)).count();
    let first = (0..N).find(|&i| got[i] != x_at(i) + y_at(i));
    assert_eq!(wrong, 0, "{wrong} wrong elements, the first at {first:?}");
    println!("add of {N} f32: every element exact");
}

/// A GEMM whose weight passes 32-bit indices: `x · Wᵀ` with `W` of `[n, k]` (a language
/// model's head), split along n, and `x · B` with `B` of `[k, n]`, split along k with
/// the blocks after the first adding into C. Values chosen so the reference is cheap
/// and exact: `B[p, j] = g(p) · f(j)`, so `C[i, j] = f(j) · Σ_p x[i, p] · g(p)`, every
/// sum an integer below 2^24; `f` and `g` vary, so a block bound at a wrong offset
/// along n or k gives wrong elements.
#[test]
fn gemm_with_a_weight_past_32_bit_indices_equals_the_reference() {
    const M: usize = 8;
    const K: usize = 4096;
    const N: usize = 524_800; // N · K = 2_149_580_800 > 2^31 − 1
    let Some(rt) = cuda("GEMM with a weight past 2^31 elements") else {
        return;
    };
    let x_at = |i: usize, p: usize| ((i * 31 + p) % 3) as f32;
    let g = |p: usize| (p % 7 + 1) as f32;
    let f = |j: usize| (j % 5 + 1) as f32;
    let x: Vec<f32> = (0..M * K).map(|e| x_at(e / K, e % K)).collect();
    let xt = rt.tensor(&[M, K], &x).expect("upload x");
    let row_sums: Vec<f64> = (0..M)
        .map(|i| (0..K).map(|p| x_at(i, p) as f64 * g(p) as f64).sum())
        .collect();
    for transposed in [true, false] {
        let w: Vec<f32> = if transposed {
            (0..N * K).map(|e| g(e % K) * f(e / K)).collect()
        } else {
            (0..K * N).map(|e| g(e / N) * f(e % N)).collect()
        };
        let shape = if transposed { [N, K] } else { [K, N] };
        let what = format!("a weight of {} elements", N * K);
        let Some(wt) = fits(rt.tensor(&shape, &w), &what) else {
            return;
        };
        drop(w);
        let gemm = spec(&format!(
            r#"{{"op":"gemm","dtype":"f32","m":{M},"n":{N},"k":{K},"trans_b":{transposed},"alpha":1.0,"beta":0.0}}"#
        ));
        let c = rt
            .run(&gemm, &[&xt, &wt])
            .expect("gemm")
            .remove(0)
            .to_vec::<f32>()
            .expect("download");
        let wrong = (0..M * N)
            .filter(|&e| c[e] as f64 != f(e % N) as f64 * row_sums[e / N])
            .count();
        assert_eq!(wrong, 0, "trans_b {transposed}: {wrong} wrong elements");
        println!(
            "gemm {M}×{N}×{K} with a weight of {} f32 (trans_b {transposed}): every element exact",
            N * K
        );
    }
}

/// Softmax and layer norm over one row of 3·2^30 f32: catalogue ops over the row,
/// each in pieces. `x = i mod 7`, so the references are closed forms over the seven
/// values' counts.
#[test]
fn softmax_and_layer_norm_over_a_row_past_32_bit_indices() {
    let Some(rt) = cuda("softmax and layer norm over a 3·2^30 row") else {
        return;
    };
    let value = |i: usize| (i % 7) as f32;
    let x: Vec<f32> = (0..N).map(value).collect();
    let Some(xt) = fits(rt.tensor(&[1, N], &x), "a 3·2^30-element row") else {
        return;
    };
    drop(x);
    let counts: Vec<f64> = (0..7).map(|v| ((N - v).div_ceil(7)) as f64).collect();
    let softmax = spec(&format!(
        r#"{{"op":"softmax","dtype":"f32","shape":[1,{N}],"axis":1}}"#
    ));
    let y = rt.run(&softmax, &[&xt]).expect("softmax").remove(0);
    let got = y.to_vec::<f32>().expect("download");
    drop(y);
    let sum: f64 = (0..7).map(|v| counts[v] * (v as f64 - 6.0).exp()).sum();
    let want: Vec<f64> = (0..7).map(|v| (v as f64 - 6.0).exp() / sum).collect();
    let worst = (0..N)
        .map(|i| ((got[i] as f64 - want[i % 7]) / want[i % 7]).abs())
        .fold(0.0, f64::max);
    println!("softmax over one row of {N} f32: worst relative error {worst:.2e}");
    assert!(worst < 1e-4, "{worst}");
    drop(got);
    let norm = spec(&format!(
        r#"{{"op":"layer_norm","dtype":"f32","shape":[1,{N}],"eps":0.00001,"save_stats":true}}"#
    ));
    let mut out = rt.run(&norm, &[&xt]).expect("layer norm");
    let stats = out.remove(1).to_vec::<f32>().expect("stats");
    let got = out.remove(0).to_vec::<f32>().expect("download");
    let n = N as f64;
    let mean: f64 = (0..7).map(|v| counts[v] * v as f64).sum::<f64>() / n;
    let var: f64 = (0..7)
        .map(|v| counts[v] * (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    let rstd = 1.0 / (var + 1e-5).sqrt();
    let worst = (0..N)
        .map(|i| (got[i] as f64 - (value(i) as f64 - mean) * rstd).abs())
        .fold(0.0, f64::max);
    println!(
        "layer norm over one row of {N} f32: worst error {worst:.2e}; mean {} (exact {mean}), rstd {} (exact {rstd})",
        stats[0], stats[1]
    );
    assert!(worst < 1e-4, "{worst}");
    assert!((stats[0] as f64 - mean).abs() < 1e-5 && (stats[1] as f64 - rstd).abs() < 1e-5 * rstd);
}

/// Attention whose head passes 32-bit indices: pieces of heads and blocks of queries. Every key is the same, so each visible key
/// weighs the same: a query's output is the mean of the values it sees (bottom-right
/// causal with fewer keys than queries: none for the first ones, a prefix for the
/// last 64), which the blocks must keep at their seams.
#[test]
fn attention_with_an_item_past_32_bit_indices_equals_the_reference() {
    // One head's queries, (2^24 + 31) · 128 elements, pass the limit: blocks of
    // 2^24 − 1 queries, the seam 32 queries before the end, among the 64 that see keys.
    const HEADS: usize = 2;
    const SEQ_Q: usize = (1 << 24) + 31;
    const SEQ_K: usize = 64;
    const D: usize = 128;
    let Some(rt) = cuda("attention with a head past 2^31 elements") else {
        return;
    };
    let total = HEADS * SEQ_Q * D;
    let q: Vec<f32> = (0..total).map(|e| ((e % 13) as f32) * 0.01).collect();
    let Some(qt) = fits(
        rt.tensor(&[1, HEADS, SEQ_Q, D], &q),
        "queries of a head past 2^31 elements",
    ) else {
        return;
    };
    drop(q);
    let k = vec![0.5f32; HEADS * SEQ_K * D];
    let v_at = |h: usize, j: usize, d: usize| ((h * 3 + j * 5 + d) % 11) as f32;
    let v: Vec<f32> = (0..HEADS * SEQ_K * D)
        .map(|e| v_at(e / (SEQ_K * D), (e / D) % SEQ_K, e % D))
        .collect();
    let kt = rt.tensor(&[1, HEADS, SEQ_K, D], &k).expect("k");
    let vt = rt.tensor(&[1, HEADS, SEQ_K, D], &v).expect("v");
    let attention = spec(&format!(
        r#"{{"op":"attention","dtype":"f32","batch":1,"heads":{HEADS},"kv_heads":{HEADS},"seq_q":{SEQ_Q},"seq_k":{SEQ_K},"head_dim":{D},"scale":0.088,"causal":true}}"#
    ));
    let o = rt
        .run(&attention, &[&qt, &kt, &vt])
        .expect("attention")
        .remove(0)
        .to_vec::<f32>()
        .expect("download");
    // Prefix means of v per head and dimension: query i sees keys j ≤ i + SEQ_K − SEQ_Q.
    let mut worst = 0.0f64;
    for h in 0..HEADS {
        for i in 0..SEQ_Q {
            let seen = (i + SEQ_K + 1).saturating_sub(SEQ_Q).min(SEQ_K);
            for d in 0..D {
                let want = if seen == 0 {
                    0.0
                } else {
                    (0..seen).map(|j| v_at(h, j, d) as f64).sum::<f64>() / seen as f64
                };
                let got = o[(h * SEQ_Q + i) * D + d] as f64;
                worst = worst.max((got - want).abs());
            }
        }
    }
    println!("attention with {total}-element queries: worst error {worst:.2e}");
    assert!(worst < 1e-4, "{worst}");
}

/// One head's keys, (2^25 + 100) · 64 elements, pass the limit: two blocks of keys
/// (2^25 − 1 and 101), combined by their log-sum-exp. Every key is the same, so a
/// query's output is the mean of the values it sees (causal: all but the last
/// `SEQ_Q − 1 − i`) and its log-sum-exp is its one score plus the log of how many it
/// sees. The last 128 values are large, so a block lost at the seam shows (about 8%
/// of each mean); f32 sums over 2^25 keys are good to about 1e-4.
#[test]
fn attention_with_keys_past_32_bit_indices_equals_the_reference() {
    const SEQ_Q: usize = 8;
    const SEQ_K: usize = (1 << 25) + 100;
    const D: usize = 64;
    const SCALE: f64 = 0.125;
    let Some(rt) = cuda("attention with keys past 2^31 elements") else {
        return;
    };
    let v_at = |j: usize, d: usize| {
        if j >= SEQ_K - 128 {
            100_000.0 + d as f32
        } else {
            ((j * 5 + d) % 11) as f32
        }
    };
    let k = vec![0.5f32; SEQ_K * D];
    let Some(kt) = fits(
        rt.tensor(&[1, 1, SEQ_K, D], &k),
        "keys of a head past 2^31 elements",
    ) else {
        return;
    };
    drop(k);
    let v: Vec<f32> = (0..SEQ_K * D).map(|e| v_at(e / D, e % D)).collect();
    let Some(vt) = fits(
        rt.tensor(&[1, 1, SEQ_K, D], &v),
        "values of a head past 2^31 elements",
    ) else {
        return;
    };
    drop(v);
    let q: Vec<f32> = (0..SEQ_Q * D).map(|e| ((e % 7) as f32) * 0.01).collect();
    let qt = rt.tensor(&[1, 1, SEQ_Q, D], &q).expect("q");
    let attention = spec(&format!(
        r#"{{"op":"attention","dtype":"f32","batch":1,"heads":1,"kv_heads":1,"seq_q":{SEQ_Q},"seq_k":{SEQ_K},"head_dim":{D},"scale":{SCALE},"causal":true,"lse":true}}"#
    ));
    let mut out = rt.run(&attention, &[&qt, &kt, &vt]).expect("attention");
    let lse = out.remove(1).to_vec::<f32>().expect("download lse");
    let o = out.remove(0).to_vec::<f32>().expect("download o");
    // Sums of v over every key per dimension; query i leaves out the last
    // SEQ_Q − 1 − i keys.
    let total: Vec<f64> = (0..D)
        .map(|d| (0..SEQ_K).map(|j| v_at(j, d) as f64).sum())
        .collect();
    let (mut worst_o, mut worst_lse) = (0.0f64, 0.0f64);
    for i in 0..SEQ_Q {
        let seen = SEQ_K - (SEQ_Q - 1 - i);
        for d in 0..D {
            let hidden: f64 = (seen..SEQ_K).map(|j| v_at(j, d) as f64).sum();
            let want = (total[d] - hidden) / seen as f64;
            let got = o[i * D + d] as f64;
            worst_o = worst_o.max((got - want).abs() / want.abs().max(1.0));
        }
        let score: f64 = (0..D).map(|d| q[i * D + d] as f64 * 0.5).sum::<f64>() * SCALE;
        let want = score + (seen as f64).ln();
        worst_lse = worst_lse.max((lse[i] as f64 - want).abs() / want.abs());
    }
    println!("attention over {SEQ_K} keys of {D}: worst relative error o {worst_o:.2e}, lse {worst_lse:.2e}");
    assert!(worst_o < 1e-3, "{worst_o}");
    assert!(worst_lse < 1e-5, "{worst_lse}");
}
