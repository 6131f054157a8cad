//! Subcommands, one module each.

mod bench;
mod build;
#[cfg(feature = "wgpu")]
mod check;
mod compile;
mod emit;
#[cfg(feature = "fuzz")]
mod fuzz;
mod info;
mod ir;
mod lower;
mod npy;
mod ops;
mod roofline;
mod run;
#[cfg(feature = "fuzz")]
mod sweep;

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
    /// Show the runtime's events on standard error: `-v` compiles and disk-cache
    /// hits, `-vv` also memory-cache hits and launches (`RUST_LOG` overrides).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

impl Cli {
    /// Installs the `tracing` subscriber the verbosity asks for: `RUST_LOG` when set,
    /// else warnings, `-v` kernelc's debug events, `-vv` its trace events.
    pub fn install_tracing(&self) {
        use tracing_subscriber::EnvFilter;
        let filter = match (std::env::var("RUST_LOG"), self.verbose) {
            (Ok(spec), _) if !spec.is_empty() => EnvFilter::new(spec),
            (_, 0) => EnvFilter::new("warn"),
            (_, 1) => EnvFilter::new("warn,kernelc=debug,kernelc_runtime=debug"),
            (_, _) => EnvFilter::new("warn,kernelc=trace,kernelc_runtime=trace"),
        };
        // A second install (tests calling twice) keeps the first: nothing to report.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .without_time()
            .try_init();
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Read a kernel from IR JSON, validate it, and print it as text.
    Ir(ir::IrArgs),
    /// Lower an op spec (JSON) for a target's caps and print its kernels.
    Lower(lower::LowerArgs),
    /// Time ops (and optionally every catalogue kernel's cold compile) on a device.
    Bench(bench::BenchArgs),
    /// The op catalogue: each op's parameters, dtypes, tensors and per-call values.
    Ops(ops::OpsArgs),
    /// The devices present and their caps, and the disk cache.
    Info(info::InfoArgs),
    /// The disk cache: list, clear or count its artifacts.
    Cache(info::CacheArgs),
    /// Write an op's kernels as WGSL, SPIR-V, PTX or object files with a manifest.
    Emit(emit::EmitArgs),
    /// Run an op on a device with NumPy .npy inputs and outputs (or random inputs).
    Run(run::RunArgs),
    /// Emit many kernels listed in a TOML file, incrementally (for build.rs).
    Build(build::BuildArgs),
    /// Emit a kernel written in IR JSON through the same emitters, with a manifest entry.
    Compile(compile::CompileArgs),
    /// Validate emitted files: a manifest and its files, or one WGSL, SPIR-V, PTX or object file.
    #[cfg(feature = "wgpu")]
    Check(check::CheckArgs),
    /// Fuzz op semantics on devices against the f64 reference (and, with --programs,
    /// random IR kernels against the interpreter).
    #[cfg(feature = "fuzz")]
    Fuzz(fuzz::FuzzArgs),
    /// Run each f32 unary function on every f32 input (or a sample) against the f64
    /// reference: the measured worst error beside its bound.
    #[cfg(feature = "fuzz")]
    Sweep(sweep::SweepArgs),
}

/// Any error a subcommand reports; printed once by `main`.
pub type CliError = Box<dyn std::error::Error>;

/// A command line that asks for something that does not exist (an unknown op name,
/// ...): `main` exits with 2, as for arguments clap rejects, instead of 1.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Ir(args) => ir::run(args),
        Command::Lower(args) => lower::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Ops(args) => ops::run(args),
        Command::Info(args) => info::info(args),
        Command::Cache(args) => info::cache(args),
        Command::Emit(args) => emit::run(args),
        Command::Run(args) => run::run(args),
        Command::Build(args) => build::run(args),
        Command::Compile(args) => compile::run(args),
        #[cfg(feature = "wgpu")]
        Command::Check(args) => check::run(args),
        #[cfg(feature = "fuzz")]
        Command::Fuzz(args) => fuzz::run(args),
        #[cfg(feature = "fuzz")]
        Command::Sweep(args) => sweep::run(args),
    }
}

/// A JSON argument: the JSON itself when it starts with `{` or `[` (after white
/// space), standard input for `-`, otherwise the path of a file holding it.
pub fn read_json_arg(arg: &str) -> Result<String, CliError> {
    if arg.trim_start().starts_with(['{', '[']) {
        Ok(arg.to_string())
    } else {
        read_input(std::path::Path::new(arg))
    }
}

/// The contents of `path`, or of standard input for `-`.
pub fn read_input(path: &std::path::Path) -> Result<String, CliError> {
    if path.as_os_str() == "-" {
        Ok(std::io::read_to_string(std::io::stdin())?)
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()).into())
    }
}
