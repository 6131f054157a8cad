//! Cross-target conformance: every op of the catalogue, at several shapes and dtypes,
//! on every executor available here, against the f64 reference under the tolerance
//! table (`kernelc::kernels::tolerance`, stated in docs/semantics.md).
//!
//! Executors: the reference interpreter running plans lowered for CPU-like caps (one
//! invocation per workgroup), GPU-like caps and WebGPU-baseline caps; the CPU device
//! (Cranelift JIT); the wgpu device through each shader path (WGSL text, naga IR,
//! SPIR-V via naga, SPIR-V passthrough); and the CUDA device (PTX).
//!
//! A device that is not present is reported as NOT RUN on stderr, never as passed.
//! With `CI` set, a missing wgpu adapter fails the run (CI has Mesa lavapipe); with
//! `KERNELC_REQUIRE_CUDA` set, so does a missing CUDA device (the GPU machine).

use kernelc::kernels::conformance::{cases, check, conform, Executor, Failure, Interpreter};
use kernelc::kernels::lower::TargetCaps;
use kernelc::kernels::spec::{OpKind, OpSpec};

const SEED: u64 = 0x5eed;

/// Runs every case on `exec`; panics with the full list of failures.
fn run(exec: &dyn Executor, caps: &TargetCaps, specs: &[OpSpec]) {
    conform(exec, caps, specs, SEED).assert_ok(&exec.name());
}

/// The split cases ([`cases::split`]) on a runtime whose kernels index at most
/// [`cases::SPLIT_LIMIT`] elements: every case runs in pieces.
fn run_split(mut rt: kernelc::runtime::Runtime) {
    rt.set_max_kernel_elements(cases::SPLIT_LIMIT);
    let caps = rt.caps().clone();
    conform(&rt, &caps, &cases::split(), SEED).assert_ok(&format!("{} (split)", rt.name()));
}

/// Every case of the table; `KERNELC_KINDS=gemm,softmax` narrows the run.
fn lowered_cases() -> Vec<OpSpec> {
    let only = std::env::var("KERNELC_KINDS").ok();
    let wanted = |k: OpKind| {
        only.as_deref()
            .is_none_or(|list| list.split(',').any(|n| n.trim() == k.name()))
    };
    cases::all()
        .into_iter()
        .filter(|s| wanted(s.kind()))
        .collect()
}

#[test]
fn interpreter_with_cpu_caps() {
    let caps = TargetCaps::cpu();
    run(
        &Interpreter::new("interp/cpu-caps", caps.clone()),
        &caps,
        &lowered_cases(),
    );
}

/// The CPU device: the kernels JIT-compiled by Cranelift, through the runtime.
#[test]
fn cpu_device() {
    use kernelc::runtime::{cache::DiskCache, Device, Runtime};
    let mut rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    rt.set_poison_outputs(true);
    let caps = rt.caps().clone();
    run(&rt, &caps, &lowered_cases());
    run_split(rt);
}

/// The GEMM and convolution cases of the table, whose plans offer schedules.
fn tunable_cases() -> Vec<OpSpec> {
    lowered_cases()
        .into_iter()
        .filter(|s| matches!(s.kind(), OpKind::Gemm | OpKind::Conv2d))
        .collect()
}

/// Every schedule each of `specs` offers on `rt`'s device (what autotuning may
/// choose), forced in turn; each must be a plan of its own (a schedule not taken
/// would leave the heuristics' plan and test nothing new).
fn run_every_schedule(mut rt: kernelc::runtime::Runtime, specs: &[OpSpec]) {
    let mut forced = 0;
    for spec in specs {
        let Some(tunable) = rt.plan(spec).expect("lowers").tunable.clone() else {
            continue;
        };
        let mut plans = Vec::new();
        for name in &tunable.choices {
            rt.set_schedule(Some(name.clone()));
            let plan = rt.plan(spec).expect("lowers");
            assert!(
                !plans.contains(&plan.launches),
                "{}: schedule `{name}` lowers as another one does",
                spec.name()
            );
            plans.push(plan.launches.clone());
            let caps = rt.caps().clone();
            conform(&rt, &caps, std::slice::from_ref(spec), SEED)
                .assert_ok(&format!("{} with schedule `{name}`", rt.name()));
            forced += 1;
        }
        rt.set_schedule(None);
    }
    assert!(
        forced > specs.len(),
        "{forced} schedules over {} specs",
        specs.len()
    );
}

#[test]
fn cpu_device_every_schedule() {
    use kernelc::runtime::{cache::DiskCache, Device, Runtime};
    let mut rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    rt.set_poison_outputs(true);
    run_every_schedule(rt, &tunable_cases());
}

/// The CPU device on its LLVM tier (`KERNELC_CPU_TIER=llvm`): the same table through
/// LLVM's code for the host's full vector width (f64 transcendentals and float `%`
/// expanded into IR, as the tier requires).
#[test]
fn cpu_device_llvm_tier() {
    use kernelc::runtime::{cache::DiskCache, CpuTier, Device, Runtime};
    let mut rt = Runtime::with_device(Device::cpu_with_tier(CpuTier::Llvm), DiskCache::off());
    rt.set_poison_outputs(true);
    let caps = rt.caps().clone();
    run(&rt, &caps, &lowered_cases());
    run_split(rt);
}

/// A runtime on `choice`, or `None` (after saying so) when the device is absent and
/// `required` is false.
fn device_runtime(
    choice: kernelc::runtime::DeviceChoice,
    required: bool,
) -> Option<kernelc::runtime::Runtime> {
    use kernelc::runtime::{cache::DiskCache, Device, Runtime};
    match Device::open(choice) {
        Ok(device) => {
            let mut rt = Runtime::with_device(device, DiskCache::off());
            rt.set_poison_outputs(true);
            Some(rt)
        }
        Err(e) if !required => {
            eprintln!("NOT RUN: conformance on {choice:?}: {e}");
            None
        }
        Err(e) => panic!("{choice:?} is required here but unavailable: {e}"),
    }
}

fn wgpu_path(shader: kernelc::runtime::ShaderPath) {
    use kernelc::runtime::{DeviceChoice, WgpuOptions};
    let choice = DeviceChoice::Wgpu(WgpuOptions {
        shader,
        allow_software: true,
    });
    let required = std::env::var_os("CI").is_some();
    if let Some(rt) = device_runtime(choice, required) {
        let caps = rt.caps().clone();
        run(&rt, &caps, &lowered_cases());
        run_split(rt);
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_wgsl() {
    wgpu_path(kernelc::runtime::ShaderPath::Wgsl);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_naga_ir() {
    wgpu_path(kernelc::runtime::ShaderPath::NagaIr);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_spirv_via_naga() {
    wgpu_path(kernelc::runtime::ShaderPath::SpirvViaNaga);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_spirv_passthrough() {
    wgpu_path(kernelc::runtime::ShaderPath::SpirvPassthrough);
}

/// The CUDA device: PTX from LLVM, run through the driver API.
#[cfg(feature = "cuda")]
#[test]
fn cuda_device() {
    let required = std::env::var_os("KERNELC_REQUIRE_CUDA").is_some();
    if let Some(rt) = device_runtime(
        kernelc::runtime::DeviceChoice::Cuda { ordinal: 0 },
        required,
    ) {
        let caps = rt.caps().clone();
        run(&rt, &caps, &lowered_cases());
        run_split(rt);
    }
}

/// GEMMs and a convolution large enough for the device's large tensor-core tiles
/// (about a device's worth of workgroups; the table's shapes pick the small tiles):
/// ragged edges, every transposition, an epilogue with bias, alpha and beta.
fn large_tile_cases() -> Vec<OpSpec> {
    use kernelc::ir::ScalarType::{Bf16, F16};
    use kernelc::kernels::spec::GemmSpec;
    let mut specs = Vec::new();
    for (i, dtype) in [Bf16, F16].into_iter().enumerate() {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut g = GemmSpec::new(dtype, 2200 + 8 * i, 1300, 200);
            (g.trans_a, g.trans_b) = (trans_a, trans_b);
            specs.push(OpSpec::Gemm(g));
        }
        let mut g = GemmSpec::new(dtype, 2560, 1408, 96);
        (g.alpha, g.beta, g.bias) = (0.5, 2.0, true);
        specs.push(OpSpec::Gemm(g));
    }
    specs
}

/// The large tiles on the CUDA device (the warpgroup `wgmma` tile on sm_90).
#[cfg(feature = "cuda")]
#[test]
fn cuda_device_large_tiles() {
    let required = std::env::var_os("KERNELC_REQUIRE_CUDA").is_some();
    if let Some(rt) = device_runtime(
        kernelc::runtime::DeviceChoice::Cuda { ordinal: 0 },
        required,
    ) {
        let caps = rt.caps().clone();
        run(&rt, &caps, &large_tile_cases());
    }
}

/// Every schedule of the table's GEMMs and convolutions, and of the large-tile
/// cases, on the CUDA device.
#[cfg(feature = "cuda")]
#[test]
fn cuda_device_every_schedule() {
    let required = std::env::var_os("KERNELC_REQUIRE_CUDA").is_some();
    if let Some(rt) = device_runtime(
        kernelc::runtime::DeviceChoice::Cuda { ordinal: 0 },
        required,
    ) {
        // One case of each op and input type (each schedule is a cold compile of
        // a few hundred milliseconds), and the large tiles' first and last.
        let mut seen = std::collections::HashSet::new();
        let mut specs: Vec<OpSpec> = tunable_cases()
            .into_iter()
            .filter(|s| seen.insert((s.kind(), s.inputs()[0].dtype)))
            .collect();
        let large = large_tile_cases();
        specs.extend([large[0].clone(), large[large.len() - 1].clone()]);
        run_every_schedule(rt, &specs);
    }
}

/// WebGPU's default limits: 16 KiB of shared memory, no f16/f64 (those cases are
/// refused with a typed error and counted as skipped).
#[test]
fn interpreter_with_webgpu_baseline_caps() {
    let caps = TargetCaps::gpu_baseline();
    run(
        &Interpreter::new("interp/webgpu-baseline-caps", caps.clone()),
        &caps,
        &lowered_cases(),
    );
}

#[test]
fn interpreter_with_gpu_caps() {
    let caps = TargetCaps::cuda_sm90();
    run(
        &Interpreter::new("interp/gpu-caps", caps.clone()),
        &caps,
        &lowered_cases(),
    );
}

/// Every kind has at least three cases in the table.
#[test]
fn every_kind_has_three_cases() {
    for kind in OpKind::ALL {
        let n = cases::for_kind(*kind).len();
        assert!(n >= 3, "{} has {n} cases", kind.name());
    }
}

/// Every kind lowers for a CPU-like, a GPU-like and a WebGPU-baseline target (or is
/// refused with a typed error naming a dtype the target lacks). A plan has launches,
/// unless the op has a zero-sized tensor: then it launches nothing, and writes every
/// non-empty output by a prefill (a fill or a copy) or a launch.
#[test]
fn every_kind_lowers_for_every_caps() {
    use kernelc::kernels::lower::{lower, LowerError};
    for caps in [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ] {
        for kind in OpKind::ALL {
            for spec in cases::for_kind(*kind) {
                let sigs = spec.inputs().into_iter().chain(spec.outputs());
                let empty = sigs.clone().any(|s| s.numel() == 0);
                match lower(&spec, &caps) {
                    Ok(plan) if !empty => assert!(
                        !plan.launches.is_empty(),
                        "{} lowers to no launch",
                        spec.name()
                    ),
                    Ok(plan) => {
                        let written = |o: usize| {
                            plan.prefills.iter().any(|p| p.output == o)
                                || plan.launches.iter().any(|l| {
                                    l.bindings
                                        .contains(&kernelc::kernels::lower::Binding::Output(o))
                                })
                        };
                        for (o, out) in spec.outputs().iter().enumerate() {
                            assert!(
                                out.numel() == 0 || written(o),
                                "{}: non-empty output {} is never written",
                                spec.name(),
                                out.name
                            );
                        }
                        let no_empty_binding = plan.launches.iter().all(|l| {
                            l.bindings.iter().all(|b| match b {
                                kernelc::kernels::lower::Binding::Input(i) => {
                                    spec.inputs()[*i].numel() > 0
                                }
                                kernelc::kernels::lower::Binding::Output(i) => {
                                    spec.outputs()[*i].numel() > 0
                                }
                                _ => true,
                            })
                        });
                        assert!(no_empty_binding, "{} binds an empty tensor", spec.name());
                    }
                    Err(LowerError::UnsupportedDtype { .. }) => {}
                    Err(e) => panic!("{} does not lower: {e}", spec.name()),
                }
            }
        }
    }
}

/// A failing case reports a mismatch, not a pass: the harness can fail.
#[test]
fn harness_catches_a_wrong_result() {
    struct Wrong;
    impl Executor for Wrong {
        fn name(&self) -> String {
            "wrong".into()
        }
        fn run(
            &self,
            spec: &OpSpec,
            inputs: &[kernelc::ir::HostBuffer],
        ) -> Result<Vec<kernelc::ir::HostBuffer>, String> {
            let mut out = Interpreter::new("inner", TargetCaps::cpu()).run(spec, inputs)?;
            let first = &mut out[0].data[0];
            *first = kernelc::ir::Scalar::from_f64(first.ty(), first.to_f64() + 0.5);
            Ok(out)
        }
    }
    let spec = cases::for_kind(OpKind::Binary).remove(2);
    assert!(matches!(
        check(&Wrong, &spec, SEED),
        Err(Failure::Mismatch(_))
    ));
}
