//! No-panic entry points: arbitrary bytes into each of kernelc's front doors. Each
//! returns normally on every input (a typed error is an answer); a panic, an abort or a
//! hang is a bug. The `fuzz/` cargo-fuzz targets and the proptest budget of
//! `tests/no_panic.rs` call these same functions.

use crate::aot::{EmitOptions, Target};
use kernelc_ir::testing::{Case, GenConfig, Shape};
use kernelc_kernels::graph::Graph;
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::OpSpec;

/// The caps every spec and graph is lowered for: a CPU, WebGPU's baseline, CUDA.
fn all_caps() -> [TargetCaps; 3] {
    [
        TargetCaps::cpu(),
        TargetCaps::gpu_baseline(),
        TargetCaps::cuda_sm90(),
    ]
}

/// IR JSON: parsed, validated, and when valid optimised and emitted for every target.
pub fn ir_json(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(kernel) = kernelc_ir::from_json(text) else {
        return;
    };
    if kernelc_ir::validate(&kernel).is_ok() {
        let optimized =
            kernelc_ir::passes::optimize(&kernel, &kernelc_ir::passes::PassOptions::default());
        emit_everywhere(&optimized);
    }
}

/// An op spec in JSON: parsed, validated, and when valid lowered for every caps (the
/// lowering's launches are not run, so a huge valid shape costs nothing).
pub fn op_spec_json(bytes: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<OpSpec>(bytes) else {
        return;
    };
    if spec.validate().is_err() {
        return;
    }
    let _ = (spec.inputs(), spec.outputs(), spec.structural());
    for caps in all_caps() {
        let _ = lower(&spec, &caps);
    }
}

/// A graph in JSON: parsed, validated, and when valid fused for every caps.
pub fn graph_json(bytes: &[u8]) {
    let Ok(graph) = serde_json::from_slice::<Graph>(bytes) else {
        return;
    };
    if graph.validate().is_err() {
        return;
    }
    for caps in all_caps() {
        let _ = kernelc_kernels::graph::fuse(&graph, &caps);
    }
}

/// A random valid kernel built from `bytes` (the generator's choice stream, then its
/// argument words), emitted for every target. The generator promises validity, so an
/// invalid kernel is a bug too.
pub fn random_program(bytes: &[u8]) {
    let words: Vec<u32> = bytes
        .chunks(4)
        .map(|c| c.iter().rev().fold(0u32, |w, &b| (w << 8) | u32::from(b)))
        .collect();
    let (shape, words) = match words.split_first() {
        Some((first, rest)) => (SHAPES[*first as usize % SHAPES.len()], rest),
        None => (Shape::Statements, &words[..]),
    };
    let split = words.len() * 7 / 8;
    let case = Case::from_words(&GenConfig::full(), shape, &words[..split], &words[split..]);
    if let Err(e) = kernelc_ir::validate(&case.kernel) {
        panic!("the generator built an invalid kernel: {e}\n{case:?}");
    }
    emit_everywhere(&case.kernel);
}

const SHAPES: [Shape; 3] = [
    Shape::Statements,
    Shape::Expression,
    Shape::AccumulatingLoop,
];

/// `kernel` through each target's expansions and emitter compiled in; the artifacts
/// (or typed errors) per target.
pub fn emit_everywhere(kernel: &kernelc_ir::Kernel) -> Vec<(Target, Result<Vec<u8>, String>)> {
    Target::ALL
        .into_iter()
        .filter(|t| t.is_compiled_in())
        .map(|t| {
            let artifact = t
                .artifact(kernel, &EmitOptions::default())
                .map_err(|e| e.to_string());
            (t, artifact)
        })
        .collect()
}
