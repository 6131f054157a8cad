//! The program fuzzer (`kernelc::fuzz::programs`) on every executor here, at a CI
//! budget: random valid IR kernels on the CPU device (floats, bit for bit), on each
//! wgpu shader path (lavapipe on CI: integer programs, required with `CI`), on CUDA
//! where present (required with `KERNELC_REQUIRE_CUDA`); and every random program
//! through every emitter, its artifacts validated (naga for WGSL, naga and
//! `spirv-val` for SPIR-V, `ptxas` for PTX: required with `CI`).
//!
//! `KERNELC_PROGRAM_CASES` sets the cases per configuration, `KERNELC_FUZZ_SEED` the
//! seed (printed by every run, so a failure reproduces). A missing device is reported
//! as NOT RUN, never as passed.

use kernelc::fuzz::programs::{fuzz_program, programs_for};
use kernelc::runtime::{cache::DiskCache, Device, DeviceChoice, Runtime};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn seed() -> u64 {
    env_u64("KERNELC_FUZZ_SEED").unwrap_or_else(kernelc::fuzz::fresh_seed)
}

/// Fuzzes every configuration the device is held to with `cases` cases each.
fn fuzz_on(test: &str, choice: DeviceChoice, required: bool, cases: u32) {
    let rt = match Device::open(choice) {
        Ok(device) => Runtime::with_device(device, DiskCache::off()),
        Err(e) if !required => {
            println!("NOT RUN: {test}: {choice:?}: {e}");
            return;
        }
        Err(e) => panic!("{test}: {choice:?} is required here but unavailable: {e}"),
    };
    fuzz_runtime(test, &rt, cases);
}

/// Fuzzes every configuration `rt`'s device is held to with `cases` cases each.
fn fuzz_runtime(test: &str, rt: &Runtime, cases: u32) {
    let cases = env_u64("KERNELC_PROGRAM_CASES").map_or(cases, |n| n as u32);
    let seed = seed();
    for program in programs_for(rt) {
        let count = fuzz_program(rt, &program, cases, seed, || {});
        println!(
            "{test} [{}]: {} {:?}: {} cases agree, {} refused by the loop budget (KERNELC_FUZZ_SEED={seed})",
            rt.device_name(),
            count.program,
            program.shape,
            count.cases,
            count.refused
        );
        if let Some(failure) = count.failure {
            panic!(
                "{test} (KERNELC_FUZZ_SEED={seed}) {} {:?}: {failure}",
                count.program, program.shape
            );
        }
        assert!(
            count.refused * 2 <= u64::from(cases),
            "most cases were refused: {} of {cases}",
            count.refused
        );
    }
}

#[test]
fn programs_cpu() {
    fuzz_on("programs_cpu", DeviceChoice::Cpu, true, 1000);
}

/// The CPU device's LLVM tier: every program of one invocation per workgroup, so that
/// LLVM compiles each.
#[test]
fn programs_cpu_llvm_tier() {
    let rt = Runtime::with_device(
        Device::cpu_with_tier(kernelc::runtime::CpuTier::Llvm),
        DiskCache::off(),
    );
    fuzz_runtime("programs_cpu_llvm_tier", &rt, 300);
}

#[cfg(feature = "wgpu")]
fn wgpu(test: &str, path: kernelc::runtime::ShaderPath) {
    use kernelc::runtime::WgpuOptions;
    let choice = DeviceChoice::Wgpu(WgpuOptions {
        shader: path,
        allow_software: true,
    });
    fuzz_on(test, choice, std::env::var_os("CI").is_some(), 40);
}

#[cfg(feature = "wgpu")]
#[test]
fn programs_wgpu_wgsl() {
    wgpu("programs_wgpu_wgsl", kernelc::runtime::ShaderPath::Wgsl);
}

#[cfg(feature = "wgpu")]
#[test]
fn programs_wgpu_naga() {
    wgpu("programs_wgpu_naga", kernelc::runtime::ShaderPath::NagaIr);
}

#[cfg(feature = "wgpu")]
#[test]
fn programs_wgpu_spirv() {
    wgpu(
        "programs_wgpu_spirv",
        kernelc::runtime::ShaderPath::SpirvPassthrough,
    );
}

#[cfg(feature = "wgpu")]
#[test]
fn programs_wgpu_spirv_naga() {
    wgpu(
        "programs_wgpu_spirv_naga",
        kernelc::runtime::ShaderPath::SpirvViaNaga,
    );
}

#[cfg(feature = "cuda")]
#[test]
fn programs_cuda() {
    let required = std::env::var_os("KERNELC_REQUIRE_CUDA").is_some();
    fuzz_on(
        "programs_cuda",
        DeviceChoice::Cuda { ordinal: 0 },
        required,
        300,
    );
}

/// What each emitter is given: everything the IR has for PTX; no barriers in
/// workgroups of several invocations for the CPU (it runs them one after another);
/// WebGPU's baseline types (32-bit, bool, narrow integers in memory) for the shaders.
#[cfg(feature = "wgpu")]
fn emitter_config(target: kernelc::aot::Target) -> kernelc::ir::testing::GenConfig {
    use kernelc::aot::Target;
    use kernelc::ir::testing::GenConfig;
    use kernelc::ir::ScalarType;
    match target {
        Target::Ptx => GenConfig::full(),
        Target::Cpu => GenConfig {
            barriers: false,
            ..GenConfig::full()
        },
        Target::Wgsl | Target::Spirv => {
            let types = vec![
                ScalarType::F32,
                ScalarType::U32,
                ScalarType::I32,
                ScalarType::Bool,
            ];
            let mut memory = types.clone();
            memory.extend(ScalarType::NARROW);
            GenConfig {
                types,
                memory_types: memory,
                ..GenConfig::full()
            }
        }
    }
}

/// Random programs through every emitter: each emits (a valid program of what the
/// target has is never refused), and each artifact is valid by the target's own
/// tools.
#[cfg(feature = "wgpu")]
#[test]
fn random_programs_emit_valid_artifacts_for_every_target() {
    use kernelc::aot::check::{check_path, Verdict};
    use kernelc::aot::{EmitOptions, Target};
    use kernelc::ir::testing::{Case, Shape};

    let seed = seed();
    let cases = env_u64("KERNELC_PROGRAM_CASES").unwrap_or(40);
    let dir = tempfile::tempdir().expect("temp dir");
    let require_ptxas = std::env::var_os("CI").is_some();
    let mut counts = std::collections::BTreeMap::<(&str, &str), u32>::new();
    for i in 0..cases {
        let words = kernelc::fuzz::no_panic::words(seed ^ i, 600);
        let shape = [
            Shape::Statements,
            Shape::Expression,
            Shape::AccumulatingLoop,
        ][i as usize % 3];
        for target in Target::ALL {
            let config = emitter_config(target);
            let case = Case::from_words(&config, shape, &words[..512], &words[512..]);
            let bytes = target
                .artifact(&case.kernel, &EmitOptions::default())
                .unwrap_or_else(|e| {
                    panic!(
                        "seed {seed} case {i}: {} refused a valid program: {e}\n{case:?}",
                        target.name()
                    )
                });
            let path = dir.path().join(format!("p{i}.{}", target.extension()));
            std::fs::write(&path, &bytes).expect("artifact written");
            for f in check_path(&path).expect("checked") {
                let verdict = match &f.verdict {
                    Verdict::Valid(_) => "valid",
                    Verdict::Skipped(why) if target == Target::Ptx && require_ptxas => {
                        panic!("ptxas is required on CI: {why}")
                    }
                    Verdict::Skipped(_) => "skipped",
                    Verdict::Invalid(why) => panic!(
                        "seed {seed} case {i}: {} is invalid: {why}\n{case:?}",
                        target.name()
                    ),
                };
                *counts.entry((target.name(), verdict)).or_default() += 1;
            }
        }
    }
    println!("random programs through every emitter (KERNELC_FUZZ_SEED={seed}): {counts:?}");
}
