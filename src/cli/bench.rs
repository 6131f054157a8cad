//! `kernelc bench`: times ops on a device, for tables that compare against a baseline
//! measured in the same run (e.g. `bench/gpu/torch_bench.py` on the same GPU).
//!
//! The cases come from a JSON file: a list of `{"name", "spec", "bytes"?, "flops"?}`,
//! where `spec` is an op spec as `kernelc lower` reads it, `bytes` the memory traffic
//! and `flops` the floating-point work of one run (to print GB/s or TFLOP/s). `bytes`
//! defaults to the op's compulsory traffic: each input read once, each output written
//! once. Each case's time is the median wall time of `--runs` calls of `Runtime::run`
//! after one warm-up call, each call including its own completion
//! (`Runtime::synchronize`).
//!
//! Before the cases, streaming (copy, add) and f32 FMA probes measure the device's roofline
//! (`roofline.rs`); each case's rate is then reported as a share of the roof at its
//! arithmetic intensity, and `--plot out.svg` draws the cases on that roofline.
//!
//! `--chain N` times the per-op cost of a dependent chain instead: `x ← op(x, …)` N
//! times with no synchronisation between, then one `synchronize`; the time is the
//! chain's median wall time over `--runs` chains divided by N (launch overhead, what
//! eager frameworks pay per op). A case is chainable when its first input has its
//! output's dtype and shape.

use super::roofline::{self, Point, Roofline, Share};
use super::{read_input, CliError};
use clap::Args;
use kernelc::kernels::conformance::{catalogue_kernels, inputs};
use kernelc::kernels::spec::OpSpec;
use kernelc::runtime::{
    cache::DiskCache, Device, DeviceChoice, Runtime, RuntimeOptions, Tensor, TuneRecord, TuneSource,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc bench --device cpu --specs bench/gpu/specs-small.json\n  kernelc bench --device cuda --specs bench/gpu/specs.json --json out.json --plot roofline.svg\n  kernelc bench --device cuda --compile"
)]
pub struct BenchArgs {
    /// cpu, cuda[:N], wgpu[:wgsl|naga|spirv|spirv-naga] or best.
    #[arg(long, default_value = "best")]
    device: String,
    /// The cases: a JSON list of {"name", "spec", "bytes"?, "flops"?}.
    #[arg(long)]
    specs: Option<PathBuf>,
    /// Timed calls per case (after one warm-up call).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Also time the cold compile of every kernel of the op catalogue.
    #[arg(long)]
    compile: bool,
    /// Time a dependent chain of this many calls per run (per-op cost) instead of
    /// single synchronised calls.
    #[arg(long)]
    chain: Option<usize>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the cases on the measured roofline as an SVG file here (cases that give
    /// FLOPs; bytes default to the compulsory traffic).
    #[arg(long, conflicts_with = "no_roofline")]
    plot: Option<PathBuf>,
    /// Skip the memory and FMA probes (no roofline shares).
    #[arg(long)]
    no_roofline: bool,
    /// Tune each case's schedules first (or take the choice stored in the disk
    /// cache, `KERNELC_CACHE_DIR`) and show every candidate's time; without it the
    /// cases run with no disk cache, tuning on first use as `KERNELC_AUTOTUNE` says.
    #[arg(long)]
    tune: bool,
    /// MiB of each of the memory probes' buffers (larger than the device's caches).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    probe_mib: u64,
}

#[derive(Deserialize, Debug)]
struct Case {
    name: String,
    spec: OpSpec,
    #[serde(default)]
    bytes: Option<f64>,
    #[serde(default)]
    flops: Option<f64>,
}

#[derive(Serialize, Debug)]
struct Timing {
    name: String,
    seconds: f64,
    bytes: Option<f64>,
    flops: Option<f64>,
    gb_per_s: Option<f64>,
    tflop_per_s: Option<f64>,
    /// The case against the measured roofline (absent with `--no-roofline`).
    roofline: Option<Share>,
    /// The schedules timed for the case (with `--tune`, where it has a choice).
    #[serde(skip_serializing_if = "Option::is_none")]
    tuning: Option<Tuning>,
}

#[derive(Serialize, Debug)]
struct Tuning {
    /// `timed` (now), `memory` or `disk` (an earlier process's choice).
    source: &'static str,
    #[serde(flatten)]
    record: TuneRecord,
}

#[derive(Serialize, Debug, Default)]
struct Results {
    device: String,
    target: String,
    /// The probes' roofs (absent with `--no-roofline` or without cases).
    roofline: Option<Roofline>,
    cases: Vec<Timing>,
    /// Cold compile per catalogue kernel, in seconds (sorted).
    compile_seconds: Vec<f64>,
    failures: Vec<String>,
}

pub fn run(args: BenchArgs) -> Result<(), CliError> {
    let choice: DeviceChoice = args.device.parse()?;
    let disk = if args.tune {
        DiskCache::from_env()?
    } else {
        DiskCache::off()
    };
    let rt = Runtime::with_options(Device::open(choice)?, disk, RuntimeOptions::from_env()?);
    let mut results = Results {
        device: rt.device_name(),
        target: rt.target_name().to_string(),
        ..Results::default()
    };
    println!("device: {} [{}]", results.device, results.target);
    if args.compile {
        results.compile_seconds = cold_compiles(&rt)?;
        print_compile_summary(&results.compile_seconds);
    }
    if let Some(path) = &args.specs {
        let cases: Vec<Case> = serde_json::from_str(&read_input(path)?)
            .map_err(|e| format!("{}: not a list of bench cases: {e}", path.display()))?;
        if !args.no_roofline {
            let roof = roofline::measure(&rt, args.probe_mib << 20, args.runs)?;
            println!(
                "roofline: memory {:.1} GB/s (copy {:.1}, add {:.1}, catalogue add {:.1}), f32 FMA {:.1} GFLOP/s (ridge {:.2} FLOP/byte)",
                roof.memory_gb_per_s,
                roof.copy_gb_per_s,
                roof.add_gb_per_s,
                roof.catalogue_add_gb_per_s,
                roof.fma_gflop_per_s,
                roof.ridge()
            );
            results.roofline = Some(roof);
        }
        println!("| case | time | rate | of roofline |\n| --- | --- | --- | --- |");
        for case in &cases {
            let tuning = if args.tune {
                match tune_case(&rt, case) {
                    Ok(t) => t,
                    Err(e) => {
                        println!("| {} | tuning failed: {e} | |", case.name);
                        results.failures.push(format!("{}: tuning: {e}", case.name));
                        continue;
                    }
                }
            } else {
                None
            };
            let timed = match args.chain {
                Some(n) => time_chain(&rt, case, args.runs.max(1), n.max(1)),
                None => time_case(&rt, case, args.runs.max(1)),
            };
            match timed {
                Ok(mut t) => {
                    t.roofline = results
                        .roofline
                        .and_then(|r| r.share(t.bytes, t.flops, t.seconds));
                    println!(
                        "| {} | {} | {} | {} |",
                        t.name,
                        show_time(t.seconds),
                        show_rate(&t),
                        show_share(t.roofline.as_ref())
                    );
                    t.tuning = tuning;
                    results.cases.push(t);
                }
                Err(e) => {
                    println!("| {} | failed: {e} | |", case.name);
                    results.failures.push(format!("{}: {e}", case.name));
                }
            }
        }
    }
    if let (Some(path), Some(roof)) = (&args.plot, &results.roofline) {
        let points: Vec<Point<'_>> = results
            .cases
            .iter()
            .filter_map(|t| {
                Some(Point {
                    name: &t.name,
                    intensity: t.roofline?.intensity?,
                    gflop_per_s: t.flops? / t.seconds / 1e9,
                })
            })
            .collect();
        let title = format!("kernelc on {} [{}]", results.device, results.target);
        roofline::plot(path, &title, roof, &points)?;
        println!("plot: {} ({} cases drawn)", path.display(), points.len());
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if results.failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} cases failed", results.failures.len()).into())
    }
}

/// The case's tuned schedule (timed now or stored), printed candidate by candidate;
/// `None` where its op has no choice.
fn tune_case(rt: &Runtime, case: &Case) -> Result<Option<Tuning>, CliError> {
    let Some(report) = rt.tune(&case.spec)? else {
        return Ok(None);
    };
    let record = &report.record;
    let source = match report.source {
        TuneSource::Timed => "timed",
        TuneSource::Memory => "memory",
        TuneSource::Disk => "disk",
    };
    let cost = match report.source {
        TuneSource::Timed => format!(
            "tuned now in {}",
            show_time(record.tuning_micros as f64 / 1e6)
        ),
        TuneSource::Memory | TuneSource::Disk => {
            format!("stored choice ({source}), 0 s of tuning now")
        }
    };
    println!("tuning {}: {} — {cost}", case.name, record.class);
    for c in &record.candidates {
        let mark = if c.name == record.chosen { "*" } else { " " };
        let time = match (c.micros, &c.note) {
            (Some(us), _) => show_time(us / 1e6),
            (None, Some(note)) => note.clone(),
            (None, None) => "not timed".into(),
        };
        println!("  {mark} {:<48} {time}", c.name);
    }
    Ok(Some(Tuning {
        source,
        record: (**record).clone(),
    }))
}

/// Uploads seeded inputs, runs once to compile and warm up, then times `runs` calls.
fn time_case(rt: &Runtime, case: &Case, runs: usize) -> Result<Timing, CliError> {
    let tensors = upload_inputs(rt, case)?;
    let refs: Vec<&Tensor> = tensors.iter().collect();
    rt.run(&case.spec, &refs)?;
    rt.synchronize()?;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let outputs = rt.run(&case.spec, &refs)?;
        rt.synchronize()?;
        samples.push(started.elapsed());
        drop(outputs);
    }
    Ok(timing(case, median(&mut samples).as_secs_f64()))
}

/// The case's inputs (seeded), validated and uploaded.
fn upload_inputs(rt: &Runtime, case: &Case) -> Result<Vec<Tensor>, CliError> {
    case.spec.validate()?;
    let data = inputs::generate(&case.spec, 0xbe4c);
    let tensors = case
        .spec
        .inputs()
        .iter()
        .zip(&data)
        .map(|(sig, values)| rt.tensor_from_f64(&sig.shape, sig.dtype, values))
        .collect::<Result<Vec<Tensor>, _>>()?;
    Ok(tensors)
}

fn timing(case: &Case, seconds: f64) -> Timing {
    let bytes = case.bytes.or_else(|| compulsory_bytes(&case.spec));
    Timing {
        name: case.name.clone(),
        seconds,
        bytes,
        flops: case.flops,
        gb_per_s: bytes.map(|b| b / seconds / 1e9),
        tflop_per_s: case.flops.map(|f| f / seconds / 1e12),
        roofline: None,
        tuning: None,
    }
}

/// Each input read once and each output written once, in bytes.
fn compulsory_bytes(spec: &OpSpec) -> Option<f64> {
    let signatures = spec.inputs().into_iter().chain(spec.outputs());
    let bytes: f64 = signatures
        .map(|sig| {
            let elements: f64 = sig.shape.iter().map(|&d| d as f64).product();
            elements * f64::from(sig.dtype.size_bytes())
        })
        .sum();
    (bytes > 0.0).then_some(bytes)
}

/// The per-op time of `length` dependent calls with one synchronisation at the end
/// (median over `runs` chains, after one warm-up chain).
fn time_chain(rt: &Runtime, case: &Case, runs: usize, length: usize) -> Result<Timing, CliError> {
    let (ins, outs) = (case.spec.inputs(), case.spec.outputs());
    let chainable = matches!((ins.first(), outs.first()), (Some(i), Some(o)) if i.dtype == o.dtype && i.shape == o.shape);
    if !chainable {
        return Err(format!(
            "{}: the first input is not shaped like the output",
            case.name
        )
        .into());
    }
    let tensors = upload_inputs(rt, case)?;
    let chain = || -> Result<Duration, CliError> {
        let started = Instant::now();
        let mut x = tensors[0].clone();
        for _ in 0..length {
            // A two- or three-element Vec per op: tens of ns against µs per op.
            let mut args: Vec<&Tensor> = vec![&x];
            args.extend(&tensors[1..]);
            let next = rt.run(&case.spec, &args)?.swap_remove(0);
            x = next;
        }
        rt.synchronize()?;
        Ok(started.elapsed())
    };
    chain()?;
    let mut samples = (0..runs).map(|_| chain()).collect::<Result<Vec<_>, _>>()?;
    Ok(timing(
        case,
        median(&mut samples).as_secs_f64() / length as f64,
    ))
}

/// The cold compile time of every distinct catalogue kernel on this device (emit,
/// plus whatever the device does to load it), after one warm-up compile that pays
/// for driver start-up.
fn cold_compiles(rt: &Runtime) -> Result<Vec<f64>, CliError> {
    let kernels = catalogue_kernels(rt.caps(), &rt.math_expansion())?;
    let mut times = Vec::with_capacity(kernels.len());
    for (i, k) in kernels.iter().enumerate() {
        let started = Instant::now();
        rt.executable(&k.kernel)
            .map_err(|e| format!("{}: {e}", k.label))?;
        if i > 0 {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

fn print_compile_summary(times: &[f64]) {
    if times.is_empty() {
        return;
    }
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "cold compile over {} kernels: median {}, p90 {}, max {}",
        times.len(),
        show_time(at(0.5)),
        show_time(at(0.9)),
        show_time(at(1.0))
    );
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn show_time(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else {
        format!("{:.3} ms", seconds * 1e3)
    }
}

fn show_share(share: Option<&Share>) -> String {
    match share {
        Some(s) => {
            let digits = if s.share < 0.1 { 1 } else { 0 };
            let bound = format!("{:?}", s.bound).to_lowercase();
            format!("{:.*}% ({bound}-bound)", digits, 100.0 * s.share)
        }
        None => String::new(),
    }
}

fn show_rate(t: &Timing) -> String {
    match (t.gb_per_s, t.tflop_per_s) {
        (_, Some(tf)) if tf >= 1.0 => format!("{tf:.2} TFLOP/s"),
        (_, Some(tf)) => format!("{:.2} GFLOP/s", tf * 1e3),
        (Some(gb), None) => format!("{gb:.1} GB/s"),
        (None, None) => String::new(),
    }
}
