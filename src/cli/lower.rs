//! `kernelc lower SPEC`: lower an op spec (inline JSON, a file, or `-` for standard
//! input) and print its launches (grid, bindings, kernel IR).
//!
//! * `--caps cpu|gpu|webgpu` prints the kernels as lowering makes them.
//! * `--target cpu|ptx|wgsl|spirv` prints each kernel as that target's device compiles
//!   it: lowered for the target's caps and put through its passes and math expansion
//!   (`kernelc_ir::passes::for_target`); `--emit` adds the code the emitter makes
//!   (Cranelift IR, PTX, WGSL, SPIR-V disassembly). The GPU targets use representative
//!   caps (sm_90 for PTX, WebGPU's defaults for WGSL and SPIR-V).
//! * `--device cpu|cuda[:N]|wgpu[:path]` does the same with a device present here: its
//!   own caps and expansion.

use super::CliError;
use clap::{Args, ValueEnum};
use kernelc_ir::passes::{self, MathExpansion};
use kernelc_ir::{print, Kernel};
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::{Device, DeviceChoice};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Caps {
    /// One invocation per workgroup (the CPU target).
    Cpu,
    /// A CUDA sm_90 device (256 invocations, 48 KiB shared memory, f16/f64).
    Gpu,
    /// WebGPU's default limits (256 invocations, 16 KiB shared memory, no f16/f64).
    Webgpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Target {
    /// Native code through Cranelift.
    Cpu,
    /// Native code through LLVM (the CPU's LLVM tier; `--emit` prints its optimised
    /// LLVM IR).
    CpuLlvm,
    /// CUDA PTX through LLVM (sm_90 caps).
    Ptx,
    /// WGSL through naga (WebGPU's default caps).
    Wgsl,
    /// SPIR-V through rspirv (WebGPU's default caps).
    Spirv,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc lower --caps gpu '{\"op\":\"softmax\",\"dtype\":\"f32\",\"shape\":[4,8],\"axis\":1}'\n  kernelc lower --target wgsl --emit spec.json"
)]
pub struct LowerArgs {
    /// The op as OpSpec JSON, inline (e.g. '{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1,"log":false}'),
    /// a file holding it, or `-` for standard input.
    spec: String,
    /// The target caps to lower for (the kernels as lowering makes them).
    #[arg(long, value_enum, default_value = "cpu", conflicts_with_all = ["target", "device"])]
    caps: Caps,
    /// Print the kernels as this target's device compiles them.
    #[arg(long, value_enum, conflicts_with = "device")]
    target: Option<Target>,
    /// Print the kernels as this device (present here) compiles them.
    #[arg(long)]
    device: Option<String>,
    /// With --target or --device: also print the code the target's emitter makes.
    #[arg(long)]
    emit: bool,
    /// With --caps: run the IR passes on each kernel before printing.
    #[arg(long, conflicts_with_all = ["target", "device"])]
    optimize: bool,
}

/// How kernels are prepared for printing.
enum Prepare {
    /// As lowered, optionally optimised.
    Lowered { optimize: bool },
    /// As a target compiles them, with its emitter for `--emit`.
    ForTarget {
        expansion: MathExpansion,
        emitter: Option<Emitter>,
    },
}

/// A target's code as text.
type Emitter = Box<dyn Fn(&Kernel) -> Result<String, CliError>>;

pub fn run(args: LowerArgs) -> Result<(), CliError> {
    let text = super::read_json_arg(&args.spec)?;
    let spec: OpSpec = serde_json::from_str(&text).map_err(|e| format!("invalid op spec: {e}"))?;
    if args.emit && args.target.is_none() && args.device.is_none() {
        return Err("--emit needs --target or --device".into());
    }
    let (caps, prepare) = if let Some(target) = args.target {
        let (caps, expansion) = target_setup(target)?;
        let emitter = args.emit.then(|| emitter(target)).transpose()?;
        (caps, Prepare::ForTarget { expansion, emitter })
    } else if let Some(choice) = &args.device {
        let device = Device::open(choice.parse::<DeviceChoice>()?)?;
        let emitter = if args.emit {
            Some(emitter(target_of(device.target_name())?)?)
        } else {
            None
        };
        let prepare = Prepare::ForTarget {
            expansion: device.math_expansion(),
            emitter,
        };
        (device.caps(), prepare)
    } else {
        let caps = match args.caps {
            Caps::Cpu => TargetCaps::cpu(),
            Caps::Gpu => TargetCaps::cuda_sm90(),
            Caps::Webgpu => TargetCaps::gpu_baseline(),
        };
        (
            caps,
            Prepare::Lowered {
                optimize: args.optimize,
            },
        )
    };
    // Lowering sees only the structural spec, as the runtime's does: per-call values
    // are the `Uniform` bindings.
    let plan = lower(&spec.structural(), &caps)?;
    for (i, launch) in plan.launches.iter().enumerate() {
        println!(
            "// launch {i}: grid {:?}, bindings {:?}",
            launch.grid, launch.bindings
        );
        let kernel = match &prepare {
            Prepare::Lowered { optimize: true } => {
                passes::optimize(&launch.kernel, &passes::PassOptions::default())
            }
            Prepare::Lowered { optimize: false } => launch.kernel.clone(),
            Prepare::ForTarget { expansion, .. } => passes::for_target(&launch.kernel, expansion),
        };
        print!("{}", print::print(&kernel));
        if let Prepare::ForTarget {
            emitter: Some(emit),
            ..
        } = &prepare
        {
            println!("// launch {i}: emitted code");
            println!("{}", emit(&kernel)?);
        }
    }
    for (i, t) in plan.temps.iter().enumerate() {
        println!("// temp {i}: {} x {}", t.len, t.dtype);
    }
    for (i, u) in spec.uniforms().iter().enumerate() {
        println!("// uniform {i}: {} = {:?}", u.name, u.value);
    }
    Ok(())
}

/// The caps and math expansion a target's device compiles with (representative caps
/// for the GPU targets, whose real devices report their own), or an error when this
/// build lacks the target.
fn target_setup(target: Target) -> Result<(TargetCaps, MathExpansion), CliError> {
    match target {
        Target::Cpu => {
            let cpu = Device::cpu();
            Ok((cpu.caps(), cpu.math_expansion()))
        }
        #[cfg(feature = "cuda")]
        Target::CpuLlvm => {
            let cpu = Device::cpu_with_tier(kernelc::runtime::CpuTier::Llvm);
            Ok((cpu.caps(), cpu.math_expansion()))
        }
        #[cfg(feature = "cuda")]
        Target::Ptx => Ok((
            TargetCaps::cuda_sm90(),
            kernelc_codegen::ptx::required_expansion(),
        )),
        #[cfg(feature = "wgpu")]
        Target::Wgsl => Ok((
            TargetCaps::gpu_baseline(),
            kernelc_codegen::wgsl::required_expansion(),
        )),
        #[cfg(feature = "wgpu")]
        Target::Spirv => Ok((
            TargetCaps::gpu_baseline(),
            kernelc_codegen::spirv::required_expansion(false),
        )),
        #[allow(unreachable_patterns)]
        other => Err(missing(other)),
    }
}

/// The error for a target this build was made without.
fn missing(target: Target) -> CliError {
    let feature = match target {
        Target::Ptx | Target::CpuLlvm => "cuda",
        Target::Cpu | Target::Wgsl | Target::Spirv => "wgpu",
    };
    format!("this kernelc was built without the {target:?} target (feature `{feature}`)").into()
}

/// The target a device's `target_name` compiles for.
fn target_of(name: &str) -> Result<Target, CliError> {
    match name {
        "cpu" => Ok(Target::Cpu),
        "ptx" => Ok(Target::Ptx),
        "wgsl" | "naga" => Ok(Target::Wgsl),
        "spirv" | "spirv-naga" => Ok(Target::Spirv),
        other => Err(format!("no emitter to print for target `{other}`").into()),
    }
}

/// The emitter of `target`, or an error when this build lacks it.
fn emitter(target: Target) -> Result<Emitter, CliError> {
    match target {
        Target::Cpu => Ok(Box::new(|k: &Kernel| {
            kernelc_codegen::cpu::emit_clif(k).map_err(|e| e.to_string().into())
        })),
        #[cfg(feature = "cuda")]
        Target::CpuLlvm => Ok(Box::new(|k: &Kernel| {
            kernelc_codegen::cpu::llvm::emit_llvm_ir(k).map_err(|e| e.to_string().into())
        })),
        #[cfg(feature = "cuda")]
        Target::Ptx => Ok(Box::new(|k: &Kernel| {
            use kernelc_codegen::ptx::{emit, PtxOptions};
            emit(k, &PtxOptions::default()).map_err(|e| e.to_string().into())
        })),
        #[cfg(feature = "wgpu")]
        Target::Wgsl => Ok(Box::new(|k: &Kernel| {
            kernelc_codegen::wgsl::wgsl_text(k).map_err(|e| e.to_string().into())
        })),
        #[cfg(feature = "wgpu")]
        Target::Spirv => Ok(Box::new(|k: &Kernel| {
            use kernelc_codegen::spirv::{disassemble, emit};
            emit(k)
                .map(|w| disassemble(&w))
                .map_err(|e| e.to_string().into())
        })),
        #[allow(unreachable_patterns)]
        other => Err(missing(other)),
    }
}
