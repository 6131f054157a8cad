//! Kernels written with matrix fragments, loaded as raw kernels on every device:
//! tensor cores on CUDA (sm_80 and later; the warpgroup kinds on sm_90's `wgmma`,
//! elsewhere expanded), the expansion everywhere else (every wgpu
//! path; on the CPU the kernels without barriers, since the CPU runs a barrier only
//! in a one-invocation workgroup). Expanded, each element is the definition bit for
//! bit where the device's `fma` rounds once; on tensor cores (and llvmpipe, whose
//! `fma` rounds twice), within the bound of docs/semantics.md ("Matrix fragments").

mod common;

use kernelc_ir::interp::HostBuffer;
use kernelc_ir::testing::fragments::{every_kind, FragmentGemm};
use kernelc_ir::ScalarType;
use kernelc_runtime::{KernelArg, Runtime};

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("fragments", common::ALL_PATHS)
}

/// Whether the device can hold `ty` in memory.
fn holds(rt: &Runtime, ty: ScalarType) -> bool {
    let caps = rt.caps();
    match ty {
        ScalarType::F16 => caps.f16,
        ScalarType::Bf16 => caps.bf16,
        ScalarType::F64 => caps.f64,
        _ => true,
    }
}

/// C after the kernel on `rt`.
fn run(rt: &Runtime, g: &FragmentGemm) -> Result<Vec<f64>, String> {
    let kernel = rt.load_kernel(&g.kernel()).map_err(|e| e.to_string())?;
    let inputs = g.inputs();
    let mut views = Vec::new();
    for (buf, ty) in inputs.iter().zip([g.input, g.input, g.acc]) {
        let bytes = buf.to_bytes();
        let memory = rt.alloc_buffer(bytes.len()).map_err(|e| e.to_string())?;
        rt.write_buffer(&memory, 0, &bytes)
            .map_err(|e| e.to_string())?;
        let view = memory
            .view(0, ty, &[buf.len()])
            .map_err(|e| e.to_string())?;
        views.push((memory, view));
    }
    let args: Vec<KernelArg> = views.iter().map(|(_, v)| KernelArg::View(v)).collect();
    rt.launch(&kernel, [1, 1, 1], &args)
        .map_err(|e| e.to_string())?;
    let (memory, _) = &views[2];
    let bytes = rt
        .read_buffer(memory, 0, inputs[2].to_bytes().len())
        .map_err(|e| e.to_string())?;
    Ok(HostBuffer::from_bytes(g.acc, &bytes).to_f64())
}

#[test]
fn fragment_gemms_are_the_definition_on_every_device() {
    for rt in &runtimes() {
        let name = format!("{} ({})", rt.device_name(), rt.target_name());
        // Tensor cores sum in their own order; a device whose `fma` rounds twice
        // (llvmpipe) cannot compute the definition's chain exactly either.
        let expansion = rt.math_expansion();
        let one_invocation_barriers = rt.target_name().starts_with("cpu");
        for via_shared in [false, true] {
            if via_shared && one_invocation_barriers {
                continue;
            }
            for g in every_kind(Some(via_shared)) {
                // A warpgroup's kinds stage through shared memory (barriers) always;
                // expanded, the wide ones hold thousands of locals per lane: the
                // narrowest stands for them there.
                let warpgroup = g.shape.is_warpgroup();
                if warpgroup && (one_invocation_barriers || !via_shared) {
                    continue;
                }
                let native = expansion.runs_fragments_of(&g.kernel());
                if warpgroup && !native && g.shape.n > 64 {
                    continue;
                }
                let bounded = native || !expansion.fused_fma;
                if !holds(rt, g.input) || !holds(rt, g.acc) {
                    println!("NOT RUN: {name}: no {} or {} memory", g.input, g.acc);
                    continue;
                }
                let got = run(rt, &g).unwrap_or_else(|e| panic!("{name}: {e}"));
                let inputs = g.inputs();
                let want = g.reference(&inputs);
                let bound = |e: usize| bounded.then(|| g.accumulation_bound(&inputs, e));
                for (e, (x, y)) in got.iter().zip(&want).enumerate() {
                    match bound(e) {
                        None => assert_eq!(
                            x.to_bits(),
                            y.to_bits(),
                            "{name}: {:?} {}: element {e}: {x} vs {y}",
                            g.shape,
                            g.input
                        ),
                        Some(b) => assert!(
                            (x - y).abs() <= b,
                            "{name}: {:?} {}: element {e}: {x} vs {y} (bound {b})",
                            g.shape,
                            g.input
                        ),
                    }
                }
            }
        }
    }
}
