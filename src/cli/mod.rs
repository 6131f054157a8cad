//! Subcommands, one module each.

mod ir;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "kernelc",
    version,
    about = "A kernel-generating compiler: one tensor IR, four targets."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Read a kernel from IR JSON, validate it, and print it as text.
    Ir(ir::IrArgs),
}

/// Any error a subcommand reports; printed once by `main`.
pub type CliError = Box<dyn std::error::Error>;

pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Ir(args) => ir::run(args),
    }
}
