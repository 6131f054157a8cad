//! Snapshots of the code each emitter produces for a small fixed set of kernels: WGSL
//! text, SPIR-V disassembly, PTX and Cranelift IR. A change of codegen shows up here as
//! a diff to review; a refactor that should not change codegen proves it did not.
//!
//! On a change: `cargo insta review` (or `INSTA_UPDATE=always cargo test -p
//! kernelc-codegen --test snapshots` and read the `.snap` diff) and commit the
//! snapshots with the change that made them.
//!
//! Each kernel is lowered from an op spec for the caps its target runs with and put
//! through that target's passes and math expansion, as the runtime does.

use kernelc_ir::passes::{for_target, MathExpansion};
use kernelc_ir::Kernel;
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::OpSpec;

/// The fixed set: a vectorised elementwise op, a transcendental (kernelc's own `exp`
/// expansion), a row reduction with shared memory and barriers, and a float `%`.
const SPECS: [(&str, &str); 4] = [
    (
        "add",
        r#"{"op":"binary","func":"add","dtype":"f32","lhs":[1000],"rhs":[1000]}"#,
    ),
    (
        "exp",
        r#"{"op":"unary","func":"exp","dtype":"f32","shape":[1000]}"#,
    ),
    (
        "softmax",
        r#"{"op":"softmax","dtype":"f32","shape":[8,300],"axis":1,"log":false}"#,
    ),
    (
        "fmod",
        r#"{"op":"binary","func":"mod","dtype":"f32","lhs":[64],"rhs":[64]}"#,
    ),
];

/// The first launch's kernel of each spec, ready for a target with `caps` and
/// `expansion`.
fn kernels(caps: &TargetCaps, expansion: &MathExpansion) -> Vec<(&'static str, Kernel)> {
    SPECS
        .iter()
        .map(|(name, json)| {
            let spec: OpSpec = serde_json::from_str(json).expect("snapshot spec parses");
            let plan = lower(&spec, caps).expect("snapshot spec lowers");
            (*name, for_target(&plan.launches[0].kernel, expansion))
        })
        .collect()
}

#[cfg(feature = "wgsl")]
#[test]
fn wgsl() {
    use kernelc_codegen::wgsl::{required_expansion, wgsl_text};
    for (name, kernel) in kernels(&TargetCaps::gpu_baseline(), &required_expansion()) {
        let text = wgsl_text(&kernel).expect("WGSL emits");
        insta::assert_snapshot!(format!("wgsl_{name}"), text);
    }
}

#[cfg(feature = "spirv")]
#[test]
fn spirv() {
    use kernelc_codegen::spirv::{disassemble, emit, required_expansion};
    for (name, kernel) in kernels(&TargetCaps::gpu_baseline(), &required_expansion(false)) {
        let words = emit(&kernel).expect("SPIR-V emits");
        insta::assert_snapshot!(format!("spirv_{name}"), disassemble(&words));
    }
}

#[cfg(feature = "ptx")]
#[test]
fn ptx() {
    use kernelc_codegen::ptx::{emit, required_expansion, PtxOptions};
    if let Some(other) = other_llvm() {
        println!(
            "NOT RUN: the PTX snapshots are of LLVM {PTX_SNAPSHOT_LLVM}; this build links \
             LLVM {other} (re-record them with it: ptxas still checks every kernel in \
             tests/ptx.rs)"
        );
        return;
    }
    for (name, kernel) in kernels(&TargetCaps::cuda_sm90(), &required_expansion()) {
        let text = emit(&kernel, &PtxOptions::default()).expect("PTX emits");
        insta::assert_snapshot!(format!("ptx_{name}"), text);
    }
}

/// The LLVM release the PTX snapshots were recorded with: another release may
/// schedule or number registers differently without any change of kernelc's.
#[cfg(feature = "ptx")]
const PTX_SNAPSHOT_LLVM: &str = "22.1.8";

/// The linked LLVM's version when it is known and not [`PTX_SNAPSHOT_LLVM`]: from
/// `llvm-config` under `LLVM_SYS_221_PREFIX` (where the build found LLVM).
#[cfg(feature = "ptx")]
fn other_llvm() -> Option<String> {
    let prefix = std::env::var_os("LLVM_SYS_221_PREFIX")?;
    let config = std::path::Path::new(&prefix).join("bin/llvm-config");
    let out = std::process::Command::new(config)
        .arg("--version")
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && version != PTX_SNAPSHOT_LLVM).then_some(version)
}

/// Cranelift IR depends on the host's SIMD and FMA support; the snapshots are of an
/// x86-64 host with SSE4.1 and FMA (the CI machine and any x86-64 of the last decade).
#[cfg(target_arch = "x86_64")]
#[test]
fn clif() {
    if !(std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("fma"))
    {
        eprintln!("NOT RUN: the CLIF snapshots are of a host with SSE4.1 and FMA");
        return;
    }
    for (name, kernel) in kernels(&TargetCaps::cpu(), &MathExpansion::all_transcendental()) {
        let text = kernelc_codegen::cpu::emit_clif(&kernel).expect("CLIF emits");
        insta::assert_snapshot!(format!("clif_{name}"), text);
    }
}
