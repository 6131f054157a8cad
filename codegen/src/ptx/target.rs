//! LLVM's side: the NVPTX target (initialised once per process), a target machine per
//! compilation, the optimisation pipeline, and the PTX text.

use super::{backend, internal, lower, unsupported, PtxOptLevel, PtxOptions};
use crate::CodegenError;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::OptimizationLevel;
use kernelc_ir::Kernel;
use std::ffi::CString;
use std::sync::Once;

/// The LLVM target triple of every module.
pub(super) const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// What [`compile`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Output {
    Ptx,
    LlvmIr,
}

/// The SM architectures LLVM 22's NVPTX backend knows that kernelc accepts, each with
/// the oldest PTX ISA (times ten) that supports it. LLVM aborts the process on an SM
/// with too old a PTX ISA, so both are checked here first.
const SM_MIN_PTX: [(u32, u32); 18] = [
    (60, 50),
    (61, 50),
    (62, 50),
    (70, 60),
    (72, 61),
    (75, 63),
    (80, 70),
    (86, 71),
    (87, 74),
    (88, 90),
    (89, 78),
    (90, 78),
    (100, 86),
    (101, 86),
    (103, 88),
    (110, 90),
    (120, 87),
    (121, 88),
];

/// The PTX ISA versions (times ten) LLVM 22 can emit, from 5.0 on.
const PTX_ISAS: [u32; 26] = [
    50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82, 83, 84, 85, 86, 87,
    88, 90,
];

/// Command-line options of LLVM set once, before any compilation.
///
/// `-nvptx-fma-level=0`: the NVPTX backend never contracts `a * b + c` into an fma
/// and emits float `+ - *` with explicit `.rn` rounding, which also keeps `ptxas` from
/// fusing them. (It already does so without fast-math flags; the option makes that
/// independent of LLVM's defaults.) An explicit IR `fma` is still `fma.rn`.
const LLVM_ARGS: [&str; 2] = ["kernelc", "-nvptx-fma-level=0"];

static INIT: Once = Once::new();

/// Registers the NVPTX target with LLVM and sets [`LLVM_ARGS`], once per process.
/// Every user of LLVM in kernelc (the CPU tier too) calls it before creating a target
/// machine: LLVM's options must not change while one compiles.
pub(crate) fn init() {
    INIT.call_once(|| {
        use inkwell::llvm_sys::support::LLVMParseCommandLineOptions;
        use inkwell::llvm_sys::target::{
            LLVMInitializeNVPTXAsmPrinter, LLVMInitializeNVPTXTarget,
            LLVMInitializeNVPTXTargetInfo, LLVMInitializeNVPTXTargetMC,
        };
        // The strings are literals without NUL bytes.
        let args: Vec<CString> = LLVM_ARGS
            .iter()
            .filter_map(|a| CString::new(*a).ok())
            .collect();
        let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let overview = c"kernelc";
        // SAFETY: the NVPTX initialisers only register the target in LLVM's registry;
        // `Once` runs them exactly once, before any other LLVM call of this module.
        // `LLVMParseCommandLineOptions` reads `argv.len()` valid NUL-terminated
        // strings (kept alive by `args` for the call) and sets LLVM's global options;
        // it runs before any target machine exists, so no compilation reads the
        // options while they change. The option is known to this LLVM (it is the
        // NVPTX backend's own, linked in with the target), so parsing cannot fail.
        unsafe {
            LLVMInitializeNVPTXTargetInfo();
            LLVMInitializeNVPTXTarget();
            LLVMInitializeNVPTXTargetMC();
            LLVMInitializeNVPTXAsmPrinter();
            LLVMParseCommandLineOptions(argv.len() as i32, argv.as_ptr(), overview.as_ptr());
        }
    });
}

/// Checks the SM and PTX ISA of `options` (LLVM would abort on a bad pair).
fn check_options(options: &PtxOptions) -> Result<(), CodegenError> {
    let Some(&(_, min_ptx)) = SM_MIN_PTX.iter().find(|(sm, _)| *sm == options.sm) else {
        let known: Vec<String> = SM_MIN_PTX.iter().map(|(sm, _)| sm.to_string()).collect();
        return Err(unsupported(format!(
            "SM architecture sm_{} (known: sm_{})",
            options.sm,
            known.join(", sm_")
        )));
    };
    if !PTX_ISAS.contains(&options.ptx_isa) {
        return Err(unsupported(format!(
            "PTX ISA {}.{}",
            options.ptx_isa / 10,
            options.ptx_isa % 10
        )));
    }
    if options.ptx_isa < min_ptx {
        return Err(unsupported(format!(
            "PTX ISA {}.{} for sm_{} (it needs at least {}.{})",
            options.ptx_isa / 10,
            options.ptx_isa % 10,
            options.sm,
            min_ptx / 10,
            min_ptx % 10
        )));
    }
    Ok(())
}

fn codegen_level(level: PtxOptLevel) -> OptimizationLevel {
    match level {
        PtxOptLevel::O0 => OptimizationLevel::None,
        PtxOptLevel::O1 => OptimizationLevel::Less,
        PtxOptLevel::O2 => OptimizationLevel::Default,
        PtxOptLevel::O3 => OptimizationLevel::Aggressive,
    }
}

/// A target machine for `sm_{sm}` with `+ptx{ptx_isa}` (without the feature LLVM
/// picks an old default ISA, 7.8 for sm_90).
/// With `arch_specific`, the `sm_{sm}a` target (Hopper's `wgmma`, which only sm_90
/// itself runs).
fn target_machine(
    options: &PtxOptions,
    arch_specific: bool,
) -> Result<TargetMachine, CodegenError> {
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| backend(e.to_string()))?;
    let suffix = if arch_specific { "a" } else { "" };
    target
        .create_target_machine(
            &triple,
            &format!("sm_{}{suffix}", options.sm),
            &format!("+ptx{}", options.ptx_isa),
            codegen_level(options.opt_level),
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| backend("LLVM could not create an NVPTX target machine"))
}

/// LLVM's IR pipeline for `level` (none at O0).
fn optimise(
    module: &Module<'_>,
    tm: &TargetMachine,
    level: PtxOptLevel,
) -> Result<(), CodegenError> {
    let passes = match level {
        PtxOptLevel::O0 => return Ok(()),
        PtxOptLevel::O1 => "default<O1>",
        PtxOptLevel::O2 => "default<O2>",
        PtxOptLevel::O3 => "default<O3>",
    };
    module
        .run_passes(passes, tm, PassBuilderOptions::create())
        .map_err(|e| backend(format!("LLVM pipeline `{passes}`: {e}")))
}

/// Validates `kernel`, builds its LLVM module, optimises it and returns `output`.
pub(super) fn compile(
    kernel: &Kernel,
    options: &PtxOptions,
    output: Output,
) -> Result<String, CodegenError> {
    kernelc_ir::validate(kernel)?;
    check_options(options)?;
    lower::check_supported(kernel)?;
    if kernel.uses_fragments() && options.sm < super::FRAGMENTS_MIN_SM {
        return Err(CodegenError::unexpanded_fragments(super::TARGET));
    }
    if kernel.uses_async_copies() && options.sm < super::ASYNC_COPY_MIN_SM {
        return Err(CodegenError::unexpanded_async_copies(super::TARGET));
    }
    let f64_m16 = kernel.fragments.iter().any(|f| f.is_f64_m16());
    if f64_m16 && options.sm < super::F64_M16_FRAGMENTS_MIN_SM {
        return Err(CodegenError::Unsupported {
            target: super::TARGET,
            construct: format!(
                "f64 fragments of m16n8k16 on sm_{}: DMMA has that shape from sm_{} on; \
                 expand them (kernelc_ir::passes::expand_fragments) or use m8n8k4",
                options.sm,
                super::F64_M16_FRAGMENTS_MIN_SM
            ),
        });
    }
    let warpgroups = lower::uses_warpgroups(kernel);
    if warpgroups && options.sm != super::WARPGROUP_SM {
        return Err(CodegenError::Unsupported {
            target: super::TARGET,
            construct: format!(
                "warpgroup fragments (the m64 shapes) on sm_{}: only sm_{}a has `wgmma`; \
                 expand them (kernelc_ir::passes::expand_fragments) or use the m16/m8 shapes",
                options.sm,
                super::WARPGROUP_SM
            ),
        });
    }
    init();
    let tm = target_machine(options, warpgroups)?;
    let context = Context::create();
    let entry = crate::abi::ENTRY_POINT;
    let module = lower::build_module(&context, kernel, &tm, lower::Flavor::Ptx, entry)?;
    module
        .verify()
        .map_err(|e| internal(format!("LLVM rejected the generated IR: {e}")))?;
    optimise(&module, &tm, options.opt_level)?;
    match output {
        Output::LlvmIr => Ok(module.print_to_string().to_string()),
        Output::Ptx => {
            let buffer = tm
                .write_to_memory_buffer(&module, FileType::Assembly)
                .map_err(|e| backend(format!("NVPTX code generation: {e}")))?;
            String::from_utf8(buffer.as_slice().to_vec())
                .map_err(|e| backend(format!("NVPTX produced non-UTF-8 text: {e}")))
        }
    }
}
