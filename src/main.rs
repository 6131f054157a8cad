//! The `kernelc` command-line tool.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    args.install_tracing();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernelc: error: {e}");
            // Exit codes: 0 ok, 1 a failure, 2 a usage error (as clap's own).
            if e.is::<cli::UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
