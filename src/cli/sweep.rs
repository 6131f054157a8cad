//! `kernelc sweep`: each f32 unary function of the catalogue on every f32 input (or
//! every `--stride`-th), on a device, against the f64 reference: the measured worst
//! error next to the bound the tolerance table holds it to (docs/semantics.md).

use super::{CliError, UsageError};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kernelc::fuzz::sweep::{sweep, SweepRange, SweepRow, SWEPT};
use kernelc::kernels::ops::elementwise::UnaryFn;
use kernelc::runtime::{cache::DiskCache, Device, DeviceChoice, Runtime};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc sweep --device cuda --json sweep.json          # all 2^32 inputs of each function\n  kernelc sweep --device cpu --stride 65537 --funcs exp,tanh   # a sampled sweep"
)]
pub struct SweepArgs {
    /// cpu, cuda[:N], wgpu[:wgsl|naga|spirv|spirv-naga] or best.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Functions, comma-separated (default: every f32 unary function with an error
    /// bound: sqrt, rsqrt, exp, log, sin, cos, tan, sigmoid, tanh, gelu_erf, gelu_tanh,
    /// silu).
    #[arg(long, value_delimiter = ',')]
    funcs: Vec<String>,
    /// Take every n-th bit pattern (1: all 2^32; an odd stride reaches every
    /// exponent).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    stride: u64,
    /// Host threads for the reference (default: all).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct Report {
    device: String,
    stride: u64,
    rows: Vec<SweepRow>,
}

pub fn run(args: SweepArgs) -> Result<(), CliError> {
    let funcs = parse_funcs(&args.funcs)?;
    let choice: DeviceChoice = args.device.parse()?;
    let rt = Runtime::with_device(Device::open(choice)?, DiskCache::off());
    let threads = args
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    let range = SweepRange {
        count: (1u64 << 32).div_ceil(args.stride),
        stride: args.stride,
        ..SweepRange::exhaustive(threads)
    };
    let flushes = !rt.caps().keeps_subnormals;
    println!(
        "device: {} [{}], {} inputs per function (stride {}){}",
        rt.device_name(),
        rt.target_name(),
        range.count,
        args.stride,
        if flushes {
            "; it may flush subnormals (keeps_subnormals false): a result within the bound once they read as zero counts as flushed"
        } else {
            ""
        }
    );
    println!("| function | inputs | bound (ULP) | worst (of bound) | at | max ULP | at | past the bound | NaN/∞ mismatches | unspecified | flushed |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut rows = Vec::new();
    for func in funcs {
        let bar = ProgressBar::new(range.count);
        if let Ok(style) = ProgressStyle::with_template(&format!(
            "{} [{{bar:30}}] {{percent}}% {{eta}}",
            func.name()
        )) {
            bar.set_style(style);
        }
        let r = sweep(&rt, func, range, |done| bar.set_position(done))
            .map_err(|e| format!("{}: {e}", func.name()))?;
        bar.finish_and_clear();
        // Each row as it is done: a long sweep cut short keeps what it measured.
        println!(
            "| {} | {} | {} | {:.3} | {:#010x} ({:e}) | {:.3} | {:#010x} ({:e}) | {} | {} | {} | {} |",
            r.func,
            r.inputs,
            r.bound_ulps,
            r.worst,
            r.worst_input,
            f32::from_bits(r.worst_input),
            r.max_ulp,
            r.max_ulp_input,
            f32::from_bits(r.max_ulp_input),
            r.failures,
            r.nonfinite_mismatches,
            r.unspecified,
            r.flushed
        );
        rows.push(r);
    }
    let failures: u64 = rows.iter().map(|r| r.failures).sum();
    if let Some(path) = &args.json {
        let report = Report {
            device: rt.device_name(),
            stride: args.stride,
            rows,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    match failures {
        0 => Ok(()),
        n => Err(format!("{n} inputs past their bound").into()),
    }
}

fn parse_funcs(names: &[String]) -> Result<Vec<UnaryFn>, CliError> {
    if names.is_empty() {
        return Ok(SWEPT.to_vec());
    }
    names
        .iter()
        .map(|n| {
            SWEPT
                .iter()
                .copied()
                .find(|f| f.name() == n)
                .ok_or_else(|| {
                    let all: Vec<&str> = SWEPT.iter().map(|f| f.name()).collect();
                    UsageError(format!(
                        "unknown function `{n}` (functions: {})",
                        all.join(", ")
                    ))
                    .into()
                })
        })
        .collect()
}
