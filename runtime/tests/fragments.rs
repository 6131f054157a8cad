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

/// A softmax between two multiplies kept in fragments (`map`, `reduce_rows`,
/// `convert`), on warps and on a warpgroup (whose `P` is held in registers): in
/// registers on tensor cores, expanded elsewhere (through shared memory and barriers,
/// so not on the CPU's one-invocation workgroups). Each element within a few ulps of
/// the interpreter's: the sums' order is the target's.
#[test]
fn row_statements_between_multiplies_match_the_interpreter() {
    use kernelc_ir::testing::fragments::{
        attention_step, attention_step_inputs, warpgroup_attention_step,
        warpgroup_attention_step_inputs,
    };
    for rt in &runtimes() {
        let name = format!("{} ({})", rt.device_name(), rt.target_name());
        let Some(input) = [ScalarType::Bf16, ScalarType::F16]
            .into_iter()
            .find(|&t| holds(rt, t))
        else {
            println!("NOT RUN: {name}: no f16 or bf16 memory");
            continue;
        };
        if rt.target_name().starts_with("cpu") {
            println!("NOT RUN: {name}: barriers in a workgroup of 64");
            continue;
        }
        let steps = [
            (
                "warps",
                attention_step(input),
                attention_step_inputs(input, 3),
            ),
            (
                "warpgroup",
                warpgroup_attention_step(input),
                warpgroup_attention_step_inputs(input, 3),
            ),
        ];
        for (what, kernel, inputs) in steps {
            let name = format!("{name}, {what}");
            // Expanded, the warpgroup step is the IR tests' (the interpreter, bit for
            // bit): lavapipe takes minutes over its 64 × 128 scores.
            if what == "warpgroup" && !rt.caps().warpgroup_fragments {
                println!("NOT RUN: {name}: expanded (no warpgroup fragments)");
                continue;
            }
            let mut args: Vec<kernelc_ir::Arg> = inputs
                .iter()
                .cloned()
                .map(kernelc_ir::Arg::Buffer)
                .collect();
            kernelc_ir::interp::run(&kernel, [1, 1, 1], &mut args).unwrap();
            let want = match &args[2] {
                kernelc_ir::Arg::Buffer(b) => b.to_f64(),
                kernelc_ir::Arg::Scalar(_) => unreachable!("the third argument is a buffer"),
            };
            let loaded = rt
                .load_kernel(&kernel)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut views = Vec::new();
            for buf in &inputs {
                let bytes = buf.to_bytes();
                let memory = rt.alloc_buffer(bytes.len()).unwrap();
                rt.write_buffer(&memory, 0, &bytes).unwrap();
                let view = memory.view(0, buf.elem, &[buf.len()]).unwrap();
                views.push((memory, view));
            }
            let args: Vec<KernelArg> = views.iter().map(|(_, v)| KernelArg::View(v)).collect();
            rt.launch(&loaded, [1, 1, 1], &args)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let bytes = rt.read_buffer(&views[2].0, 0, want.len() * 4).unwrap();
            let got = HostBuffer::from_bytes(ScalarType::F32, &bytes).to_f64();
            assert_eq!(got.len(), want.len(), "{name}");
            for (e, (x, y)) in got.iter().zip(&want).enumerate() {
                // P is rounded to bf16 after f32 sums in another order: an element of P
                // may round the other way (2⁻⁸ relative), weighted by |v| ≤ 2.
                assert!(
                    (x - y).abs() <= 2e-2 * y.abs().max(0.25),
                    "{name}: element {e}: {x} vs {y}"
                );
            }
        }
    }
}
