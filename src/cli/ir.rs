//! `kernelc ir FILE.json`: validate and pretty-print a kernel stored as IR JSON.

use super::CliError;
use clap::Args;
use kernelc_ir::{hash, json, passes, print};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc ir kernel.json --hash      # validate, print as text and its stable hash\n  kernelc ir - --optimize --json < kernel.json"
)]
pub struct IrArgs {
    /// The kernel as IR JSON: a file holding it, `-` for standard input, or the JSON
    /// itself.
    file: String,
    /// Run the IR passes (unrolling, folding, simplification) before printing.
    #[arg(long)]
    optimize: bool,
    /// Print the stable content hash (the cache key component) after the text.
    #[arg(long)]
    hash: bool,
    /// Print the kernel as JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: IrArgs) -> Result<(), CliError> {
    let text = super::read_json_arg(&args.file)?;
    let mut kernel = json::from_json(&text)?;
    if args.optimize {
        kernel = passes::optimize(&kernel, &passes::PassOptions::default());
    }
    if args.json {
        println!("{}", json::to_json(&kernel));
    } else {
        print!("{}", print::print(&kernel));
    }
    if args.hash {
        println!("hash: {}", hash::stable_hash(&kernel));
    }
    Ok(())
}
