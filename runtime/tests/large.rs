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
