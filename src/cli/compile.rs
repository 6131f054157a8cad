//! `kernelc compile kernel.json --target … --grid X,Y,Z --out DIR`: a user-written IR
//! kernel through the same emitters as the catalogue's, into `DIR` with a manifest
//! entry (docs/manifest.md: its read-only buffers are the inputs, the others the
//! outputs, its scalars the per-call values). An invalid kernel is reported with the
//! path to the node that is wrong.

use clap::Args;
use kernelc::aot::emit_kernel;
use kernelc_ir::json;

use super::emit::Destination;
use super::{CliError, UsageError};

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  kernelc compile saxpy.json --target wgsl,ptx --grid 4,1,1 --out kernels/\n  (saxpy.json: a kernel as IR JSON, as `kernelc ir --json` prints one)"
)]
pub struct CompileArgs {
    /// The kernel as IR JSON: a file holding it, `-` for standard input, or the JSON.
    kernel: String,
    /// Workgroups along x, y, z that a launch runs.
    #[arg(long, value_delimiter = ',', default_value = "1,1,1")]
    grid: Vec<u32>,
    #[command(flatten)]
    to: Destination,
}

pub fn run(args: CompileArgs) -> Result<(), CliError> {
    let grid: [u32; 3] = args
        .grid
        .as_slice()
        .try_into()
        .map_err(|_| UsageError("--grid takes three numbers: X,Y,Z".into()))?;
    let text = super::read_json_arg(&args.kernel)?;
    let kernel = json::from_json(&text)?;
    args.to
        .emit_each(&kernel.name, |name, target, options, out| {
            emit_kernel(&kernel, name, grid, target, options, out)
        })
}
