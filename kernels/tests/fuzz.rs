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
