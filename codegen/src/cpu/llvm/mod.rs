//! The CPU target's second tier: the same kernel IR through LLVM (the lowering the
//! PTX target uses, in its CPU form) to machine code for the host CPU with all its
//! extensions (AVX-512 where present), `default<O3>` with LLVM's vectorisers, loaded
//! by ORC (`jit.rs`). The function has [`crate::cpu`]'s ABI, so a [`CpuKernel`] from
//! either tier launches the same way.
//!
//! What it takes: kernels of one invocation per workgroup (what the CPU caps lower
//! every op to; others stay with Cranelift: [`CodegenError::Unsupported`]) whose
//! transcendental functions and float `%` are expanded into IR
//! ([`required_expansion`], as for PTX: the same expansions the interpreter runs,
//! so both tiers agree with it bit for bit). Semantics are the PTX target's
//! (`crate::ptx`): checked accesses, status bits, saturating casts, IEEE
//! minNum/maxNum, no contraction of `a * b + c` (LLVM contracts only what it is
//! told to), f16/bf16 computed in f32 and rounded after every operation.
//!
//! Behind the `ptx` feature, which brings LLVM; a build without it has the Cranelift
//! tier alone.

mod jit;

pub(crate) use jit::Loaded;

use super::launch::CpuKernel;
use crate::ptx::lower::{build_module, check_cpu_supported, Flavor};
use crate::CodegenError;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::Kernel;
use std::sync::OnceLock;

/// The name of this tier in errors.
pub const TARGET: &str = "cpu-llvm";

pub(crate) fn backend(what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: what.to_string(),
    }
}

/// What kernels must have expanded into IR before this tier takes them: every
/// transcendental (f32 and f64) and float `%`, as for PTX, f32 `exp2` too (PTX's
/// `ex2.approx` is a GPU instruction), and matrix fragments and asynchronous copies
/// (GPU statements: the CPU runs their expansions).
pub fn required_expansion() -> MathExpansion {
    crate::ptx::required_expansion()
        .with_native_exp2_f32(false)
        .with_native_fragments(false)
        .with_native_warpgroup_fragments(false)
        .with_native_f64_m16_fragments(false)
        .with_native_async_copies(false)
}

/// The host CPU LLVM compiles for: its name and feature string (e.g. `znver4`,
/// `+avx512f,+fma,...`) and LLVM's version. Machine code from [`compile`] depends on
/// exactly this, so it belongs in cache keys of compiled artifacts.
pub fn host_description() -> String {
    match host() {
        Ok(h) => format!("llvm-22 {} {} {}", h.triple, h.cpu, h.features),
        Err(e) => format!("llvm-22 (no host target: {e})"),
    }
}

/// The host as LLVM targets it, asked once per process (with LLVM's native target
/// initialised): its triple, CPU name and the features the tier compiles with.
struct Host {
    triple: String,
    cpu: String,
    features: String,
}

fn host() -> Result<&'static Host, CodegenError> {
    static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
    HOST.get_or_init(|| {
        crate::ptx::target::init();
        Target::initialize_native(&InitializationConfig::default())?;
        let features = TargetMachine::get_host_cpu_features().to_string();
        Ok(Host {
            triple: TargetMachine::get_default_triple()
                .as_str()
                .to_string_lossy()
                .into_owned(),
            cpu: TargetMachine::get_host_cpu_name().to_string(),
            features: without_flushing_bf16(&features),
        })
    })
    .as_ref()
    .map_err(backend)
}

/// The host's features without the bf16 conversions that flush subnormals
/// (`vcvtneps2bf16` of AVX512-BF16 and AVX-NE-CONVERT): LLVM would use them for every
/// f32 → bf16 rounding, also where it widens a bf16 value it only moves.
fn without_flushing_bf16(features: &str) -> String {
    const FLUSHING: [&str; 2] = ["avx512bf16", "avxneconvert"];
    features
        .split(',')
        .map(|f| match f.strip_prefix('+') {
            Some(name) if FLUSHING.contains(&name) => format!("-{name}"),
            _ => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A target machine for the host with every extension it has.
fn host_machine() -> Result<TargetMachine, CodegenError> {
    let host = host()?;
    let triple = TargetTriple::create(&host.triple);
    let target = Target::from_triple(&triple).map_err(|e| backend(e.to_string()))?;
    target
        .create_target_machine(
            &triple,
            &host.cpu,
            &host.features,
            OptimizationLevel::Aggressive,
            // Position-independent: the JIT places code anywhere, far from libc.
            RelocMode::PIC,
            CodeModel::Small,
        )
        .ok_or_else(|| backend("LLVM could not create a target machine for the host"))
}

/// Errors of the shared lowering named for this tier.
fn as_tier(e: CodegenError) -> CodegenError {
    match e {
        CodegenError::Backend { message, .. } => CodegenError::Backend {
            target: TARGET,
            message,
        },
        CodegenError::Unsupported { construct, .. } => CodegenError::Unsupported {
            target: TARGET,
            construct,
        },
        other => other,
    }
}

/// The symbol of `kernel`'s function, from its content: equal kernels (on one host,
/// the only one a process compiles for) share one, and one loaded copy.
fn entry_symbol(kernel: &Kernel) -> String {
    let hash = kernelc_ir::hash::stable_hash(kernel).to_hex();
    format!("kernelc_{}", &hash[..32])
}

/// What the host must have: on x86-64, F16C, whose conversions the f16 arithmetic
/// uses (without it LLVM would call compiler-rt, which a JIT-loaded kernel cannot
/// count on).
fn check_host() -> Result<(), CodegenError> {
    let features = &host()?.features;
    if cfg!(target_arch = "x86_64") && !features.split(',').any(|f| f == "+f16c") {
        return Err(CodegenError::Unsupported {
            target: TARGET,
            construct: "a host CPU without F16C".into(),
        });
    }
    Ok(())
}

/// Validates `kernel` and checks what this tier cannot run.
fn check(kernel: &Kernel) -> Result<(), CodegenError> {
    kernelc_ir::validate(kernel)?;
    check_host()?;
    check_cpu_supported(kernel).map_err(as_tier)
}

/// `kernel` checked, lowered as the function `entry` for `tm` (the host), verified
/// and optimised (`default<O3>`).
fn optimised<'ctx>(
    context: &'ctx Context,
    kernel: &Kernel,
    tm: &TargetMachine,
    entry: &str,
) -> Result<Module<'ctx>, CodegenError> {
    check(kernel)?;
    let module = build_module(context, kernel, tm, Flavor::Cpu, entry).map_err(as_tier)?;
    module.verify().map_err(|e| {
        backend(format!(
            "internal error: LLVM rejected the generated IR: {e}"
        ))
    })?;
    module
        .run_passes("default<O3>", tm, PassBuilderOptions::create())
        .map_err(|e| backend(format!("LLVM pipeline: {e}")))?;
    Ok(module)
}

/// `kernel` as a relocatable object for the host, exporting `entry`.
fn object(kernel: &Kernel, entry: &str) -> Result<Vec<u8>, CodegenError> {
    let tm = host_machine()?;
    let context = Context::create();
    let module = optimised(&context, kernel, &tm, entry)?;
    let buffer = tm
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| backend(format!("code generation: {e}")))?;
    Ok(buffer.as_slice().to_vec())
}

/// The optimised LLVM IR of `kernel`'s CPU function, as text (for reading).
pub fn emit_llvm_ir(kernel: &Kernel) -> Result<String, CodegenError> {
    let tm = host_machine()?;
    let context = Context::create();
    let module = optimised(&context, kernel, &tm, "kernel")?;
    Ok(module.print_to_string().to_string())
}

/// JIT-compiles `kernel` for the host through LLVM.
pub fn compile(kernel: &Kernel) -> Result<CpuKernel, CodegenError> {
    let entry = entry_symbol(kernel);
    load(kernel, &object(kernel, &entry)?, &entry)
}

/// `kernel` compiled for this host: the relocatable object [`load_object`] takes (what
/// a disk cache keeps, under a key holding [`host_description`]).
pub fn compile_object(kernel: &Kernel) -> Result<Vec<u8>, CodegenError> {
    object(kernel, &entry_symbol(kernel))
}

/// Loads `object`, made by [`compile_object`] for `kernel` on this host (e.g. read
/// back from a disk cache). An object that does not export `kernel`'s function, or
/// that LLVM cannot link, is an error (compile it again); if `kernel`'s function is
/// loaded already, that copy is shared.
pub fn load_object(kernel: &Kernel, object: &[u8]) -> Result<CpuKernel, CodegenError> {
    check(kernel)?;
    load(kernel, object, &entry_symbol(kernel))
}

/// Loads `object` of the checked `kernel`, exporting `entry`.
fn load(kernel: &Kernel, object: &[u8], entry: &str) -> Result<CpuKernel, CodegenError> {
    let (loaded, addr) = jit::load(object, entry)?;
    // SAFETY: `addr` is the entry of the function `build_module` declared with the
    // type of `KernelFn` (five pointers in, an i32 out, the C calling convention of
    // the host), linked and made executable by the JIT; it stays valid as long as
    // `loaded`, which the kernel owns and frees only on drop.
    let func = unsafe { std::mem::transmute::<usize, super::KernelFn>(addr) };
    let (_, shared) = crate::abi::cpu_shared_layout(kernel);
    Ok(CpuKernel::from_llvm(loaded, func, kernel, shared as usize))
}
