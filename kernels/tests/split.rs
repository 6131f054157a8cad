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
                r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[2000],"axes":[0],"index_dtype":"i32"}"#,
                "split axis",
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
