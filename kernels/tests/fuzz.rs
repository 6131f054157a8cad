//! The op fuzzer on the reference interpreter, with the plans lowered for CPU, GPU and
//! WebGPU-baseline caps (`kernels::fuzz::driver` says how to size, seed, replay and
//! survey a run). The devices' runs are the workspace's `tests/fuzz_ops.rs`.

use kernelc_kernels::conformance::Interpreter;
use kernelc_kernels::fuzz::driver::{fuzz, Target};
use kernelc_kernels::lower::TargetCaps;

fn interpreter(label: &str, caps: TargetCaps) -> Target {
    (Box::new(Interpreter::new(label, caps.clone())), caps)
}

#[test]
fn fuzz_interpreter() {
    fuzz(
        "fuzz_interpreter",
        vec![
            interpreter("interp/cpu-caps", TargetCaps::cpu()),
            interpreter("interp/gpu-caps", TargetCaps::cuda_sm90()),
            interpreter("interp/webgpu-baseline-caps", TargetCaps::gpu_baseline()),
        ],
    );
}

/// A target is held to a case only where its caps promise what the case may meet:
/// special values (from the inputs or from an infinite or huge attribute), subnormals
/// (from wide or special inputs, or a tiny attribute); pow everywhere.
#[test]
fn a_target_runs_the_cases_its_caps_promise() {
    use kernelc_kernels::fuzz::driver::runs_on;
    use kernelc_kernels::fuzz::FuzzCase;
    let case = |json: &str| -> FuzzCase { serde_json::from_str(json).expect("a fuzz case") };
    let plain = case(
        r#"{"spec":{"op":"softplus","dtype":"f32","shape":[4],"beta":1.0,"threshold":20.0,
            "backward":false},"seed":1,"mode":"ties"}"#,
    );
    let huge_beta = case(
        r#"{"spec":{"op":"softplus","dtype":"f16","shape":[4],"beta":1.7976931348623157e308,
            "threshold":3.0,"backward":false},"seed":1,"mode":"ties"}"#,
    );
    let tiny_eps = case(
        r#"{"spec":{"op":"layer_norm","dtype":"f32","shape":[1,1],"eps":1.401298464324817e-45,
            "rms":false,"weight":true,"bias":true,"residual":false,"save_stats":true},
            "seed":0,"mode":"ties"}"#,
    );
    let wide = case(
        r#"{"spec":{"op":"unary","func":"silu","dtype":"f32","shape":[8]},"seed":2,"mode":"wide"}"#,
    );
    let pow = case(
        r#"{"spec":{"op":"scalar","func":"pow","dtype":"f32","shape":[8],"scalar":2.5,
            "reversed":false},"seed":3,"mode":"domain"}"#,
    );
    assert!(!plain.may_meet_specials() && !plain.may_meet_subnormals());
    assert!(huge_beta.may_meet_specials() && !huge_beta.may_meet_subnormals());
    assert!(tiny_eps.may_meet_subnormals() && !tiny_eps.may_meet_specials());
    assert!(wide.may_meet_subnormals() && !wide.may_meet_specials());

    let ieee = TargetCaps::cpu();
    let loose = TargetCaps {
        ieee_specials: false,
        keeps_subnormals: false,
        may_contract: true,
        ..TargetCaps::cpu()
    };
    for c in [&plain, &huge_beta, &tiny_eps, &wide, &pow] {
        assert!(runs_on(&ieee, c), "{c:?}");
    }
    // A target that may reassociate is held to pow of every width (its expansion has
    // opaque error-free sums), not to special values or subnormals.
    let pow64 = case(
        r#"{"spec":{"op":"binary","func":"pow","dtype":"f64","lhs":[8],"rhs":[8]},
            "seed":3,"mode":"domain"}"#,
    );
    assert!(runs_on(&ieee, &pow64));
    assert!(runs_on(&loose, &plain) && runs_on(&loose, &pow) && runs_on(&loose, &pow64));
    for c in [&huge_beta, &tiny_eps, &wide] {
        assert!(!runs_on(&loose, c), "{c:?}");
    }
}

/// Found by `fuzz_cpu` (seed 1795849314096929647, inputs with special values): a fused
/// softmax's bound was `0·∞ = NaN` on a slice holding a masked (−∞) logit, so every
/// element of it failed its allowance. Masked logits move nothing and an exact prologue
/// adds nothing now; every live element's bound stays finite, and the cases conform on
/// the interpreter.
#[test]
fn masked_logits_keep_the_fused_softmax_bound_finite() {
    use kernelc_kernels::conformance::{case_data_from_values, check_data};
    use kernelc_kernels::op::Op;
    use kernelc_kernels::spec::OpSpec;
    let exact = r#"{"op":"fused_softmax","prologue":{"dtype":"f32","inputs":[[5,8],[5,8]],"nodes":[{"input":0},{"input":1}]},"softmax":{"dtype":"f32","shape":[5,8],"axis":1,"log":false}}"#;
    let scaled = r#"{"op":"fused_softmax","prologue":{"dtype":"f32","inputs":[[5,8],[5,8]],"nodes":[{"input":0},{"input":1},{"unary":{"func":"tanh","x":1}}]},"softmax":{"dtype":"f32","shape":[5,8],"axis":1,"log":true}}"#;
    for json in [exact, scaled] {
        let spec: OpSpec = serde_json::from_str(json).expect("spec");
        let OpSpec::FusedSoftmax(fused) = &spec else {
            unreachable!()
        };
        let x0 = vec![0.5; 40];
        let mut x1: Vec<f64> = (0..40).map(|i| (i % 7) as f64 / 4.0).collect();
        x1[9] = f64::NEG_INFINITY;
        x1[12] = f64::NEG_INFINITY;
        let bounds = fused.condition(&[&x0, &x1]);
        // A masked element is exactly 0 (its own bound, the softmax's, does not matter).
        let live = bounds[0].iter().zip(&x1).filter(|(_, x)| x.is_finite());
        assert!(
            live.clone().all(|(b, _)| b.is_finite()),
            "{json}: {bounds:?}"
        );
        let exec = Interpreter::new("interp/cpu-caps", TargetCaps::cpu());
        let data = case_data_from_values(&spec, vec![x0, x1]);
        check_data(&exec, &spec, &data).expect("the fused softmax conforms");
    }
}

/// Found by `fuzz_wgpu_spirv` (seed 1795905752359922160, wide inputs) on every target:
/// SiLU's backward at `s = −94.2` (where `σ(s)` is an f32 subnormal, good to its
/// spacing only) with `dy = 1.7·10⁶` gave a `dx` of `−1.96·10⁻³³` off by half a
/// subnormal spacing times `dy·(1 + |s|)`, past a bound that had no term for it. The
/// condition has one now; the cases conform on the interpreter, and the bound still
/// rejects an error of a hundred spacings.
#[test]
fn an_underflowing_sigmoid_in_silu_backward_stays_in_its_bound() {
    use kernelc_ir::interp::HostBuffer;
    use kernelc_kernels::conformance::{case_data_from_values, check_data, Executor};
    use kernelc_kernels::spec::OpSpec;
    let spec: OpSpec = serde_json::from_str(
        r#"{"op":"activation_backward","func":"silu","dtype":"f32","shape":[4]}"#,
    )
    .expect("spec");
    let saved = vec![-94.21621704101563, -100.0, -90.0, 3.0];
    let dy = vec![1739988.0, 1.0e7, -3.0e6, 0.5];
    let exec = Interpreter::new("interp/cpu-caps", TargetCaps::cpu());
    let data = case_data_from_values(&spec, vec![saved, dy]);
    check_data(&exec, &spec, &data).expect("SiLU backward conforms where σ underflows");
    // The bound is not loose enough to pass a wrong answer: a hundred subnormal
    // spacings of σ times dy·(1 + |s|) off fails.
    struct Off(Interpreter);
    impl Executor for Off {
        fn name(&self) -> String {
            "interpreter, element 0 moved".into()
        }
        fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
            let mut out = self.0.run(spec, inputs)?;
            let mut v = out[0].to_f64();
            v[0] += 100.0 * 2f64.powi(-149) * 1739988.0 * 95.2;
            let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            out[0] = HostBuffer::from_f32(&v);
            Ok(out)
        }
    }
    let off = Off(Interpreter::new("interp/cpu-caps", TargetCaps::cpu()));
    assert!(check_data(&off, &spec, &data).is_err());
}
