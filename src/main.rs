//! The `kernelc` command-line tool.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernelc: error: {e}");
            ExitCode::FAILURE
        }
    }
}
