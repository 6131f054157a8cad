//! Tensors past one kernel's 32-bit indices on the GPU machine: `add` and a full
//! `reduce sum` over 3·2^30 f32 elements (12 GiB a tensor), split into pieces at
//! lowering, against exact host references. Needs a CUDA device with ~40 GiB free;
//! elsewhere it prints a NOT RUN line (CI has neither the device nor the memory).

#![cfg(feature = "cuda")]

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, DeviceChoice, Runtime, RuntimeError};

const N: usize = 3 << 30;

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
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
    let device = match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(d) => d,
        Err(e) => {
            println!("NOT RUN: no CUDA device (3·2^30-element add and sum): {e}");
            return;
        }
    };
    let rt = Runtime::with_device(device, DiskCache::off());
    let x: Vec<f32> = (0..N).map(x_at).collect();
    let xt = match rt.tensor(&[N], &x) {
        Ok(t) => t,
        Err(RuntimeError::OutOfMemory { .. }) => {
            println!("NOT RUN: the device lacks memory for 3·2^30-element tensors");
            return;
        }
        Err(e) => panic!("{e}"),
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
    let device = match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(d) => d,
        Err(e) => {
            println!("NOT RUN: no CUDA device (GEMM with a weight past 2^31 elements): {e}");
            return;
        }
    };
    let rt = Runtime::with_device(device, DiskCache::off());
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
        let wt = match rt.tensor(&shape, &w) {
            Ok(t) => t,
            Err(RuntimeError::OutOfMemory { .. }) => {
                println!(
                    "NOT RUN: the device lacks memory for a weight of {} elements",
                    N * K
                );
                return;
            }
            Err(e) => panic!("{e}"),
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
