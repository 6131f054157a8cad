//! `kernelc lower SPEC --caps cpu|gpu|webgpu`: lower an op spec (inline JSON, a file,
//! or `-` for standard input) and print its launches (grid, bindings, kernel IR).

use super::CliError;
use clap::{Args, ValueEnum};
use kernelc_ir::{passes, print};
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::OpSpec;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Caps {
    /// One invocation per workgroup (the CPU target).
    Cpu,
    /// A CUDA sm_90 device (256 invocations, 48 KiB shared memory, f16/f64).
    Gpu,
    /// WebGPU's default limits (256 invocations, 16 KiB shared memory, no f16/f64).
    Webgpu,
}

#[derive(Args, Debug)]
pub struct LowerArgs {
    /// The op as OpSpec JSON, inline (e.g. '{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1,"log":false}'),
    /// a file holding it, or `-` for standard input.
    spec: String,
    /// The target caps to lower for.
    #[arg(long, value_enum, default_value = "cpu")]
    caps: Caps,
    /// Run the IR passes on each kernel before printing.
    #[arg(long)]
    optimize: bool,
}

pub fn run(args: LowerArgs) -> Result<(), CliError> {
    let text = super::read_json_arg(&args.spec)?;
    let spec: OpSpec = serde_json::from_str(&text).map_err(|e| format!("invalid op spec: {e}"))?;
    let caps = match args.caps {
        Caps::Cpu => TargetCaps::cpu(),
        Caps::Gpu => TargetCaps::cuda_sm90(),
        Caps::Webgpu => TargetCaps::gpu_baseline(),
    };
    let plan = lower(&spec, &caps)?;
    for (i, launch) in plan.launches.iter().enumerate() {
        let kernel = if args.optimize {
            passes::optimize(&launch.kernel, &passes::PassOptions::default())
        } else {
            launch.kernel.clone()
        };
        println!(
            "// launch {i}: grid {:?}, bindings {:?}",
            launch.grid, launch.bindings
        );
        print!("{}", print::print(&kernel));
    }
    for (i, t) in plan.temps.iter().enumerate() {
        println!("// temp {i}: {} x {}", t.len, t.dtype);
    }
    Ok(())
}
