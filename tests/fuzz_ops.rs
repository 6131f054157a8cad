//! The op fuzzer on the devices: random valid specs of every op kind
//! (`kernelc::kernels::fuzz`: the catalogue's own cases changed through their JSON),
//! with inputs drawn as the conformance table draws them, over wide ranges, as ties and
//! with special values, run on each device against the f64 reference under the
//! tolerance table. A failure shrinks (proptest) to a minimal spec and is saved as
//! replayable JSON. The interpreter's run is `kernels/tests/fuzz.rs`; the environment
//! variables (cases, seed, replay, survey) are those of `kernels::fuzz::driver`.
//!
//! Devices: the CPU device; each wgpu shader path (required with `CI`); CUDA (required
//! with `KERNELC_REQUIRE_CUDA`). A missing device is reported as NOT RUN, never as
//! passed. Every test prints how many cases each op kind got.

use kernelc::kernels::fuzz::driver::{fuzz, Target};

/// The runtime on `choice`, or nothing (after saying NOT RUN) when it is absent and
/// not `required`.
fn device(choice: kernelc::runtime::DeviceChoice, required: bool) -> Vec<Target> {
    use kernelc::runtime::{cache::DiskCache, Device, Runtime};
    match Device::open(choice) {
        Ok(device) => {
            let mut rt = Runtime::with_device(device, DiskCache::off());
            rt.set_poison_outputs(true);
            let caps = rt.caps().clone();
            vec![(Box::new(rt), caps)]
        }
        Err(e) if !required => {
            println!("NOT RUN: fuzzing on {choice:?}: {e}");
            Vec::new()
        }
        Err(e) => panic!("{choice:?} is required here but unavailable: {e}"),
    }
}

#[test]
fn fuzz_cpu() {
    fuzz(
        "fuzz_cpu",
        device(kernelc::runtime::DeviceChoice::Cpu, true),
    );
}

#[cfg(feature = "wgpu")]
fn wgpu(path: kernelc::runtime::ShaderPath) -> Vec<Target> {
    use kernelc::runtime::{DeviceChoice, WgpuOptions};
    let choice = DeviceChoice::Wgpu(WgpuOptions {
        shader: path,
        allow_software: true,
    });
    device(choice, std::env::var_os("CI").is_some())
}

#[cfg(feature = "wgpu")]
#[test]
fn fuzz_wgpu_wgsl() {
    fuzz("fuzz_wgpu_wgsl", wgpu(kernelc::runtime::ShaderPath::Wgsl));
}

#[cfg(feature = "wgpu")]
#[test]
fn fuzz_wgpu_naga() {
    fuzz("fuzz_wgpu_naga", wgpu(kernelc::runtime::ShaderPath::NagaIr));
}

#[cfg(feature = "wgpu")]
#[test]
fn fuzz_wgpu_spirv_naga() {
    fuzz(
        "fuzz_wgpu_spirv_naga",
        wgpu(kernelc::runtime::ShaderPath::SpirvViaNaga),
    );
}

#[cfg(feature = "wgpu")]
#[test]
fn fuzz_wgpu_spirv() {
    fuzz(
        "fuzz_wgpu_spirv",
        wgpu(kernelc::runtime::ShaderPath::SpirvPassthrough),
    );
}

#[cfg(feature = "cuda")]
#[test]
fn fuzz_cuda() {
    let required = std::env::var_os("KERNELC_REQUIRE_CUDA").is_some();
    fuzz(
        "fuzz_cuda",
        device(
            kernelc::runtime::DeviceChoice::Cuda { ordinal: 0 },
            required,
        ),
    );
}

/// A fuzz finding kept (seed 1795924493932662866): f32 `pow` of 1.066 to the 797th
/// through naga on llvmpipe, 36 ULP off while `2 + f − 2` in `log2` folded to `f`.
#[cfg(feature = "wgpu")]
#[test]
fn a_large_power_through_naga_stays_in_its_bound() {
    use kernelc::kernels::fuzz::driver::check_case;
    let case = serde_json::from_str(
        r#"{"spec":{"op":"binary","func":"pow","dtype":"f32","lhs":[1000],"rhs":[1000]},
            "seed":920763575,"mode":"wide"}"#,
    )
    .expect("case");
    for path in [
        kernelc::runtime::ShaderPath::Wgsl,
        kernelc::runtime::ShaderPath::NagaIr,
        kernelc::runtime::ShaderPath::SpirvViaNaga,
    ] {
        let targets = wgpu(path);
        if let Err(e) = check_case(&targets, &case) {
            panic!("{path:?}: {e}");
        }
    }
}
