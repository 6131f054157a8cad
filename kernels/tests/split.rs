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
                r#"{"op":"gemm","dtype":"f32","m":4,"n":8,"k":1536,"alpha":1.0,"beta":0.0}"#,
                "the fewest its pieces can take",
            ),
            (
                r#"{"op":"softmax","dtype":"f32","shape":[4,1025],"axis":1,"log":false}"#,
                "row",
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
