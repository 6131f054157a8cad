//! Ops on host slices (`Runtime::run_host`) on every device present: the same bits as
//! the tensor API, no device buffer at all on the CPU (the kernels use the slices),
//! any element-aligned slice, and typed refusals that leave the outputs unchanged.

mod common;

use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, HostSlice, HostSliceMut, Runtime, RuntimeError};

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("host slices", &["wgpu:wgsl", "wgpu:spirv", "cuda"])
}

fn ok(data: &[f32]) -> HostSlice<'_> {
    HostSlice::new(data, &[4]).unwrap()
}

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
}

/// Values of no pattern a kernel could get right by accident.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 250.0 - 4.0)
        .collect()
}

#[test]
fn host_slices_give_the_tensor_apis_bits() {
    let cases = [
        (
            r#"{"op":"binary","func":"add","dtype":"f32","lhs":[6,7],"rhs":[6,7]}"#,
            vec![vec![6, 7], vec![6, 7]],
        ),
        (
            r#"{"op":"softmax","dtype":"f32","shape":[5,33],"axis":1,"log":false}"#,
            vec![vec![5, 33]],
        ),
        (
            r#"{"op":"gemm","dtype":"f32","m":9,"n":10,"k":11,"alpha":1.0,"beta":0.0,"bias":false}"#,
            vec![vec![9, 11], vec![11, 10]],
        ),
    ];
    for rt in &runtimes() {
        let name = format!("{} ({})", rt.device_name(), rt.target_name());
        for (json, shapes) in &cases {
            let op = spec(json);
            let out_shape = op.outputs()[0].shape.clone();
            let out_len: usize = out_shape.iter().product();
            // Inputs one element into a larger allocation: 4-byte aligned only.
            let data: Vec<Vec<f32>> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| values(s.iter().product::<usize>() + 1, i as u32))
                .collect();
            let tensors: Vec<_> = data
                .iter()
                .zip(shapes)
                .map(|(d, s)| rt.tensor(s, &d[1..]).unwrap())
                .collect();
            let want = rt.run(&op, &tensors.iter().collect::<Vec<_>>()).unwrap()[0]
                .to_vec::<f32>()
                .unwrap();
            let ins: Vec<HostSlice<'_>> = data
                .iter()
                .zip(shapes)
                .map(|(d, s)| HostSlice::new(&d[1..], s).unwrap())
                .collect();
            let mut out = vec![f32::NAN; out_len + 1];
            rt.run_host(
                &op,
                &ins,
                &mut [HostSliceMut::new(&mut out[1..], &out_shape).unwrap()],
            )
            .unwrap_or_else(|e| panic!("{name}: {json}: {e}"));
            let same = out[1..]
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{name}: {json}: {:?} vs {:?}", &out[1..4], &want[..3]);
            assert!(out[0].is_nan(), "{name}: wrote before the output slice");
        }
    }
}

#[test]
fn on_the_cpu_kernels_use_the_slices_themselves() {
    let rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    let op = spec(r#"{"op":"binary","func":"mul","dtype":"f32","lhs":[1000],"rhs":[1000]}"#);
    let (a, b) = (values(1000, 1), values(1000, 2));
    let mut out = vec![0.0f32; 1000];
    let run = |out: &mut [f32]| {
        let ins = [
            HostSlice::new(&a, &[1000]).unwrap(),
            HostSlice::new(&b, &[1000]).unwrap(),
        ];
        rt.run_host(&op, &ins, &mut [HostSliceMut::new(out, &[1000]).unwrap()])
            .unwrap();
    };
    run(&mut out); // compiles
    let before = rt.stats();
    run(&mut out);
    let after = rt.stats();
    assert_eq!(
        (after.pool_allocations, after.pool_reuses),
        (before.pool_allocations, before.pool_reuses),
        "no device buffer was taken: the kernel read and wrote the slices"
    );
    assert_eq!(after.launches, before.launches + 1);
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    assert_eq!(out, want);
}

#[test]
fn bad_host_operands_are_typed_errors_that_write_nothing() {
    let op = spec(r#"{"op":"binary","func":"add","dtype":"f32","lhs":[4],"rhs":[4]}"#);
    assert!(matches!(
        HostSlice::new(&[1.0f32; 3], &[4]),
        Err(RuntimeError::DataLength { .. })
    ));
    for rt in &runtimes() {
        let (x, y) = ([1.0f32; 4], [2.0f32; 4]);
        let wide = [1.0f64; 4];
        let mut out = [7.0f32; 4];
        let mut out5 = [7.0f32; 5];
        let cases: Vec<(&str, Vec<HostSlice<'_>>)> = vec![
            ("count", vec![ok(&x)]),
            ("dtype", vec![ok(&x), HostSlice::new(&wide, &[4]).unwrap()]),
        ];
        for (what, ins) in cases {
            let e = rt.run_host(&op, &ins, &mut [HostSliceMut::new(&mut out, &[4]).unwrap()]);
            assert!(
                matches!(
                    e,
                    Err(RuntimeError::InputCount { .. } | RuntimeError::InputDtype { .. })
                ),
                "{what}: {e:?}"
            );
        }
        let e = rt.run_host(
            &op,
            &[ok(&x), ok(&y)],
            &mut [HostSliceMut::new(&mut out5, &[5]).unwrap()],
        );
        assert!(matches!(e, Err(RuntimeError::OutputShape { .. })), "{e:?}");
        let e = rt.run_host(&op, &[ok(&x), ok(&y)], &mut []);
        assert!(matches!(e, Err(RuntimeError::OutputCount { .. })), "{e:?}");
        assert_eq!(out, [7.0; 4]);
        assert_eq!(out5, [7.0; 5]);
    }
}
