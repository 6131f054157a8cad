//! softplus and hardswish (the ops added as one file each) at the special values the
//! conformance table's random inputs never reach: NaN, ±∞, ±0, both sides of the
//! thresholds, very negative inputs whose softplus is tiny but not zero.

use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::spec::{HardswishSpec, OpSpec, SoftplusSpec};
use kernelc_kernels::tolerance::{compare, tolerance};
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, DeviceChoice, Runtime};

const X: [f64; 16] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    -100.0,
    -40.0,
    -20.0,
    -3.0,
    -2.999,
    3.0,
    3.001,
    19.99,
    20.01,
    100.0,
    1e-30,
];

fn check(rt: &Runtime, spec: OpSpec) {
    let n = X.len();
    let x = rt.tensor_from_f64(&[n], ScalarType::F32, &X).unwrap();
    let dy = rt
        .tensor_from_f64(&[n], ScalarType::F32, &[1.5; 16])
        .unwrap();
    let inputs: Vec<_> = if spec.inputs().len() == 2 {
        vec![&x, &dy]
    } else {
        vec![&x]
    };
    let got = rt.run(&spec, &inputs).unwrap()[0].to_f64().unwrap();
    let host: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64().unwrap()).collect();
    let refs: Vec<&[f64]> = host.iter().map(|v| v.as_slice()).collect();
    let want: Vec<f64> = kernelc_kernels::reference(&spec, &refs).unwrap()[0]
        .iter()
        .map(|&w| Scalar::from_f64(ScalarType::F32, w).to_f64())
        .collect();
    let finite_max = X
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    if let Err(m) = compare(
        "out",
        &tolerance(&spec),
        ScalarType::F32,
        &got,
        &want,
        None,
        finite_max,
    ) {
        panic!(
            "{} on {}: {m}\ngot  {got:?}\nwant {want:?}",
            spec.name(),
            rt.device_name()
        );
    }
    // A tiny softplus keeps its value: relative accuracy, not just absolute.
    if let OpSpec::Softplus(s) = &spec {
        if !s.backward {
            let (g, w) = (got[6], want[6]);
            assert!((g / w - 1.0).abs() < 1e-5, "softplus(-40) = {g}, want {w}");
        }
    }
}

#[test]
fn softplus_and_hardswish_at_special_values() {
    let mut runtimes = vec![Runtime::with_device(Device::cpu(), DiskCache::off())];
    match Device::open("wgpu".parse::<DeviceChoice>().unwrap()) {
        Ok(d) => runtimes.push(Runtime::with_device(d, DiskCache::off())),
        Err(e) => eprintln!("NOT RUN: special values on wgpu: {e}"),
    }
    for rt in &runtimes {
        for backward in [false, true] {
            check(
                rt,
                OpSpec::Softplus(SoftplusSpec {
                    dtype: ScalarType::F32,
                    shape: vec![X.len()],
                    beta: 1.0,
                    threshold: 20.0,
                    backward,
                }),
            );
            check(
                rt,
                OpSpec::Hardswish(HardswishSpec {
                    dtype: ScalarType::F32,
                    shape: vec![X.len()],
                    backward,
                }),
            );
        }
    }
}
