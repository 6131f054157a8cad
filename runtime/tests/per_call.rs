//! Per-call values compile nothing: a training loop that changes Adam's learning rate
//! and step, dropout's seed and step, or a scalar operand on every call compiles one
//! kernel set, counted through `Runtime::stats`, and every call's result equals the
//! f64 reference under the tolerance table.
//!
//! Runs on the CPU device, and on wgpu (every shader path's compile counting is the
//! same code; WGSL is the one run here) where an adapter exists: lavapipe in CI.

mod common;

use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::rng::RngScheme;
use kernelc_kernels::spec::*;
use kernelc_kernels::tolerance::{compare, tolerance};
use kernelc_runtime::{Runtime, Stats, Tensor};

const CALLS: usize = 1000;

/// The CPU, wgpu (required where `CI` is set: lavapipe) and CUDA (required with
/// `KERNELC_REQUIRE_CUDA`: the GPU machine).
fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("per-call values", &["wgpu", "cuda"])
}

/// The device values of `t`, rounded as stored.
fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64().expect("reads back")
}

/// Checks every output of `spec` (run on `inputs`) against the reference.
fn check(rt: &Runtime, spec: &OpSpec, inputs: &[&Tensor], outputs: &[Tensor], call: usize) {
    let host: Vec<Vec<f64>> = inputs.iter().map(|t| values(t)).collect();
    let refs: Vec<&[f64]> = host.iter().map(|v| v.as_slice()).collect();
    let want = kernelc_kernels::reference(spec, &refs).expect("reference");
    let tol = tolerance(spec);
    let scales = kernelc_kernels::conformance::error_scales(spec, &host).expect("scales");
    for (k, ((sig, got), want)) in spec.outputs().iter().zip(outputs).zip(&want).enumerate() {
        let rounded: Vec<f64> = want
            .iter()
            .map(|&w| Scalar::from_f64(sig.dtype, w).to_f64())
            .collect();
        if let Err(m) = compare(
            &sig.name,
            &tol,
            sig.dtype,
            &values(got),
            &rounded,
            scales.as_ref().map(|s| s[k].as_slice()),
        ) {
            panic!("{} call {call} of {}: {m}", rt.device_name(), spec.name());
        }
    }
}

/// Compiles so far (memory and disk misses: the disk cache is off here).
fn compiled(stats: Stats) -> u64 {
    stats.compiles + stats.disk_hits
}

#[test]
fn adam_with_a_new_lr_and_step_every_call_compiles_once() {
    for rt in runtimes() {
        let len = 37;
        let start: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut param = rt.tensor(&[len], &start).unwrap();
        let mut m = rt.zeros(&[len], ScalarType::F32).unwrap();
        let mut v = rt.zeros(&[len], ScalarType::F32).unwrap();
        let before = compiled(rt.stats());
        for step in 1..=CALLS as u64 {
            let grad: Vec<f32> = (0..len)
                .map(|i| ((i as u64 * 7 + step) as f32 * 0.11).cos())
                .collect();
            let grad = rt.tensor(&[len], &grad).unwrap();
            let spec = OpSpec::Adam(AdamSpec {
                dtype: ScalarType::F32,
                len,
                // A schedule: a new learning rate every step.
                lr: 1e-3 * (1.0 + (step as f64 * 0.01).cos()),
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                decoupled: true,
                step,
            });
            let inputs = [&param, &grad, &m, &v];
            let out = rt.run(&spec, &inputs).unwrap();
            check(&rt, &spec, &inputs, &out, step as usize);
            let mut out = out.into_iter();
            (param, m, v) = (
                out.next().unwrap(),
                out.next().unwrap(),
                out.next().unwrap(),
            );
        }
        let kernels = rt
            .plan(&OpSpec::Adam(AdamSpec {
                dtype: ScalarType::F32,
                len,
                lr: 0.1,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                decoupled: true,
                step: 1,
            }))
            .unwrap()
            .launches
            .len() as u64;
        assert_eq!(
            compiled(rt.stats()) - before,
            kernels,
            "{}: {CALLS} Adam steps compiled more than one kernel set",
            rt.device_name()
        );
    }
}

#[test]
fn dropout_with_a_new_seed_and_step_every_call_compiles_once() {
    for rt in runtimes() {
        let n = 300;
        let x: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 0.01).collect();
        let x = rt.tensor(&[n], &x).unwrap();
        let before = compiled(rt.stats());
        let mut masks = std::collections::HashSet::new();
        for call in 0..CALLS as u64 {
            let spec = OpSpec::Dropout(DropoutSpec {
                dtype: ScalarType::F32,
                shape: vec![n],
                p: 0.3,
                seed: 0x5eed ^ (call * 0x9e37_79b9),
                step: call,
                mask: true,
                rng: RngScheme::Counter,
                offset: 0,
            });
            let out = rt.run(&spec, &[&x]).unwrap();
            check(&rt, &spec, &[&x], &out, call as usize);
            masks.insert(
                out[1]
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(compiled(rt.stats()) - before, 1, "{}", rt.device_name());
        // The seeds really reach the kernel: the masks differ from call to call.
        assert!(masks.len() > CALLS - 5, "{} distinct masks", masks.len());
    }
}

#[test]
fn a_new_scalar_operand_every_call_compiles_once() {
    for rt in runtimes() {
        let n = 65;
        let x: Vec<f32> = (0..n).map(|i| i as f32 - 20.5).collect();
        let x = rt.tensor(&[n], &x).unwrap();
        let before = compiled(rt.stats());
        for call in 0..CALLS {
            // Every kind of value, infinities and zeros of both signs among them.
            let scalar = match call % 7 {
                0 => f64::INFINITY,
                1 => f64::NEG_INFINITY,
                2 => -0.0,
                3 => 0.0,
                _ => (call as f64 * 0.731).sin() * 10f64.powi((call % 20) as i32 - 10),
            };
            for func in [BinaryFn::Mul, BinaryFn::Add] {
                let spec = OpSpec::Scalar(ScalarSpec {
                    func,
                    dtype: ScalarType::F32,
                    shape: vec![n],
                    scalar,
                    reversed: false,
                    out_dtype: None,
                });
                let out = rt.run(&spec, &[&x]).unwrap();
                check(&rt, &spec, &[&x], &out, call);
            }
        }
        // One kernel per function, whatever the operand.
        assert_eq!(compiled(rt.stats()) - before, 2, "{}", rt.device_name());
    }
}

/// A fill constant of −∞ after +∞ on one runtime gives −∞ (the plan cache key was the
/// spec's JSON, which writes both infinities as `null`).
#[test]
fn fill_constants_of_both_infinities_are_told_apart() {
    for rt in runtimes() {
        for value in [f64::INFINITY, f64::NEG_INFINITY, 1.5, -0.0] {
            let spec = OpSpec::Fill(FillSpec {
                dtype: ScalarType::F32,
                shape: vec![3],
                value: FillValue::Constant { value },
                offset: 0,
            });
            let out = rt.run(&spec, &[]).unwrap();
            let got = out[0].to_vec::<f32>().unwrap();
            assert!(
                got.iter().all(|g| g.to_bits() == (value as f32).to_bits()),
                "{}: fill {value} gave {got:?}",
                rt.device_name()
            );
        }
    }
}
