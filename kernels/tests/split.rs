//! Tensors past one kernel's indices ([`cases::split`]) on the reference interpreter:
//! every case lowers into pieces under [`cases::SPLIT_LIMIT`] and equals the f64
//! reference; what does not split is refused with a typed error that says what.
//! (The devices run the same cases in the workspace's `tests/conformance.rs`.)

use kernelc_kernels::conformance::{cases, conform, Executor, Interpreter};
use kernelc_kernels::lower::{lower, LowerError, TargetCaps};
use kernelc_kernels::spec::OpSpec;

const SEED: u64 = 0x5eed;

fn run(exec: &dyn Executor, caps: &TargetCaps, specs: &[OpSpec]) {
    conform(exec, caps, specs, SEED).assert_ok(&exec.name());
}

/// Tensors past one kernel's indices, split into pieces, on the interpreter with
/// CPU-like, GPU-like and WebGPU-baseline caps; each case really is split (more
/// launches than the unsplit plan), and ops that do not split are refused naming the
/// tensor.
#[test]
fn split_cases_conform_on_the_interpreter() {
    for base in [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ] {
        let caps = TargetCaps {
            max_kernel_elements: cases::SPLIT_LIMIT,
            ..base.clone()
        };
        run(
            &Interpreter::new("interp/split", caps.clone()),
            &caps,
            &cases::split(),
        );
        for spec in cases::split() {
            match (lower(&spec, &caps), lower(&spec, &base)) {
                (Ok(split), Ok(whole)) => assert!(
                    split.launches.len() > whole.launches.len(),
                    "{}: not split",
                    spec.name()
                ),
                (Err(LowerError::UnsupportedDtype { .. }), _) => {}
                (a, b) => panic!("{}: {a:?} / {b:?}", spec.name()),
            }
        }
        // An op that does not split names its tensor; one whose single row is past
        // the limit says so.
        let refused = [
            (
                r#"{"op":"cross_entropy","dtype":"f32","index_dtype":"i32","batch":2,"classes":1100}"#,
                "one row",
            ),
            (
                r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":1,"heads":2,"kv_heads":1,"seq_q":4,"seq_k":300,"head_dim":4,"scale":0.35,"mask":[2,1,300]}"#,
                "a mask per head and key",
            ),
        ];
        for (json, names) in refused {
            let spec: OpSpec = serde_json::from_str(json).expect("a valid spec");
            match lower(&spec, &caps) {
                Err(LowerError::TooLarge { what, .. }) => assert!(what.contains(names), "{what}"),
                other => panic!("{json} past the limit: {other:?}"),
            }
        }
    }
}

/// An argmax over a split axis keeps the unsplit semantics at the pieces' seams: the
/// first of equal maxima (in an earlier piece), NaN ignored even where a whole piece
/// is NaN, and position 0 when every value is NaN.
#[test]
fn argmax_over_a_split_axis_keeps_first_and_ignores_nan() {
    use kernelc_ir::interp::HostBuffer;
    use kernelc_ir::{Scalar, ScalarType};
    let caps = TargetCaps {
        max_kernel_elements: cases::SPLIT_LIMIT,
        ..TargetCaps::cpu()
    };
    let n = 3000;
    let spec: OpSpec = serde_json::from_str(
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[3000],"axes":[0],"index_dtype":"i32"}"#,
    )
    .expect("a valid spec");
    let exec = Interpreter::new("interp/split", caps.clone());
    let argmax = |x: &[f32]| -> f64 {
        let input = HostBuffer::new(ScalarType::F32, x.iter().map(|&v| Scalar::f32(v)).collect());
        exec.run(&spec, &[input]).expect("runs")[0].to_f64()[0]
    };
    assert!(lower(&spec, &caps).expect("splits").launches.len() > 3);
    // The first piece all NaN, equal maxima in the second and third pieces.
    let mut x = vec![0.5f32; n];
    x[..1024].fill(f32::NAN);
    x[1500] = 7.0;
    x[2500] = 7.0;
    assert_eq!(argmax(&x), 1500.0);
    // Equal maxima in the first and last pieces: the first.
    let mut y = vec![-1.0f32; n];
    y[3] = 2.0;
    y[2999] = 2.0;
    assert_eq!(argmax(&y), 3.0);
    // Every value NaN: position 0.
    assert_eq!(argmax(&vec![f32::NAN; n]), 0.0);
}

/// A norm over a row past the limit keeps `eps` a per-call value: the plan lowered for
/// one `eps` computes with the `eps` it is launched with (the step adding it shares
/// the op's value).
#[test]
fn a_long_row_norm_takes_eps_at_launch() {
    use kernelc_ir::interp::HostBuffer;
    use kernelc_ir::{Scalar, ScalarType};
    use kernelc_kernels::lower::run_plan;
    let caps = TargetCaps {
        max_kernel_elements: cases::SPLIT_LIMIT,
        ..TargetCaps::cpu()
    };
    let spec_with = |eps: f64| -> OpSpec {
        serde_json::from_str(&format!(
            r#"{{"op":"layer_norm","dtype":"f32","shape":[1,2000],"eps":{eps},"save_stats":true}}"#
        ))
        .expect("a valid spec")
    };
    let plan = lower(&spec_with(1e-5), &caps).expect("splits");
    let x: Vec<f64> = (0..2000).map(|i| ((i * 7919) % 13) as f64 * 0.01).collect();
    let input = HostBuffer::new(
        ScalarType::F32,
        x.iter().map(|&v| Scalar::f32(v as f32)).collect(),
    );
    let launched = spec_with(0.5);
    let mut outputs: Vec<HostBuffer> = launched
        .outputs()
        .iter()
        .map(|o| HostBuffer::filled(o.dtype, o.numel(), Scalar::f32(0.0)))
        .collect();
    run_plan(&plan, &launched.uniforms(), &[input], &mut outputs).expect("runs");
    let want = kernelc_kernels::reference::reference(&launched, &[&x]).expect("reference");
    let rstd = outputs[1].to_f64()[1];
    assert!(
        (rstd - want[1][1]).abs() < 1e-5 * want[1][1].abs(),
        "{rstd} vs {}",
        want[1][1]
    );
    let y = outputs[0].to_f64();
    for (a, b) in y.iter().zip(&want[0]) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

/// Softmax over a row past the limit keeps the one-kernel op's special values: a NaN
/// or a +∞ in a row makes it NaN, a row of −∞ gives zeros (log-softmax: −∞).
#[test]
fn a_long_row_softmax_keeps_special_values() {
    use kernelc_ir::interp::HostBuffer;
    use kernelc_ir::{Scalar, ScalarType};
    let caps = TargetCaps {
        max_kernel_elements: cases::SPLIT_LIMIT,
        ..TargetCaps::cpu()
    };
    let n = 1100;
    let mut x = vec![0.25f64; 4 * n];
    x[7] = f64::NAN; // row 0
    x[n + 1000] = f64::INFINITY; // row 1
    x[2 * n..3 * n].fill(f64::NEG_INFINITY); // row 2; row 3 finite
    for log in [false, true] {
        let spec: OpSpec = serde_json::from_str(&format!(
            r#"{{"op":"softmax","dtype":"f32","shape":[4,{n}],"axis":1,"log":{log}}}"#
        ))
        .expect("a valid spec");
        let exec = Interpreter::new("interp/split", caps.clone());
        let input = HostBuffer::new(
            ScalarType::F32,
            x.iter().map(|&v| Scalar::f32(v as f32)).collect(),
        );
        let got = exec.run(&spec, &[input]).expect("runs")[0].to_f64();
        let want =
            kernelc_kernels::reference::reference(&spec, &[&x]).expect("reference")[0].clone();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let same =
                (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() < 1e-6 * w.abs().max(1e-3);
            assert!(same, "log {log}, element {i} (row {}): {g} vs {w}", i / n);
        }
        assert!(
            got[0].is_nan() && got[n].is_nan(),
            "NaN and +∞ rows are NaN"
        );
        assert_eq!(got[2 * n], if log { f64::NEG_INFINITY } else { 0.0 });
    }
}
