//! `kernelc fuzz`: the op fuzzer and (with `--programs`) the program fuzzer on the
//! devices named, with a progress bar, then a table per op × target and per program
//! configuration × target, and JSON out. A failing op case is saved as JSON for
//! `--replay`; a failing program is shrunk and printed with its seed.

use super::{CliError, UsageError};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kernelc::fuzz::ops::{OpCases, OpRow, OpTally, Target};
use kernelc::fuzz::programs::{fuzz_program, programs_for, ProgramCount};
use kernelc::kernels::fuzz::FuzzCase;
use kernelc::kernels::spec::OpKind;
use kernelc::runtime::{cache::DiskCache, Device, DeviceChoice, Runtime};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc fuzz --targets cpu,wgpu --cases 2000 --seed 7\n  kernelc fuzz --ops softmax,gemm --targets cuda --time 5m --programs --json fuzz.json\n  kernelc fuzz --targets cpu --replay /tmp/kernelc-fuzz-failures/softmax-cpu-1f2e3d4c.json"
)]
pub struct FuzzArgs {
    /// Op kinds, comma-separated (default: every kind of the catalogue).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Devices, comma-separated: cpu, wgpu[:wgsl|naga|spirv|spirv-naga], cuda[:N].
    #[arg(long, value_delimiter = ',', default_value = "cpu")]
    targets: Vec<String>,
    /// Op cases (each run on every target that can hold it to the table); with
    /// --programs also the random programs per target and configuration. Default 500.
    #[arg(long, conflicts_with = "time")]
    cases: Option<u64>,
    /// Fuzz for this long instead (90s, 5m, 1h), shared by the op and program fuzzers.
    #[arg(long, value_parser = humantime::parse_duration)]
    time: Option<Duration>,
    /// The seed (printed; a fresh one when not given). The same seed and targets draw
    /// the same cases.
    #[arg(long)]
    seed: Option<u64>,
    /// Also run the program fuzzer: random IR kernels against the reference
    /// interpreter, bit for bit.
    #[arg(long)]
    programs: bool,
    /// Run one saved op case (a failure's JSON file) on the targets instead.
    #[arg(long, conflicts_with_all = ["cases", "time", "programs"])]
    replay: Option<PathBuf>,
    /// Feed --cases inputs (default 100000) to one no-panic entry point instead:
    /// ir_json, op_spec_json, graph_json or random_program (no device needed).
    #[arg(long, value_name = "ENTRY", conflicts_with_all = ["time", "programs", "replay"])]
    no_panic: Option<String>,
    /// Threads for --no-panic (default: all).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where failing op cases are saved (default: kernelc-fuzz-failures in the
    /// temporary directory).
    #[arg(long)]
    failures: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Cases when neither `--cases` nor `--time` is given.
const DEFAULT_CASES: u64 = 500;
/// Programs per round under a time budget.
const PROGRAM_ROUND: u32 = 25;

#[derive(Serialize, Debug)]
struct Report {
    seed: u64,
    op_cases: u64,
    ops: Vec<OpRow>,
    programs: Vec<TargetPrograms>,
    /// Saved failing op cases.
    saved: Vec<PathBuf>,
}

#[derive(Serialize, Debug)]
struct TargetPrograms {
    target: String,
    #[serde(flatten)]
    count: ProgramCount,
}

pub fn run(args: FuzzArgs) -> Result<(), CliError> {
    if let Some(name) = &args.no_panic {
        return no_panic(name, &args);
    }
    let kinds = parse_kinds(&args.ops)?;
    let runtimes = open_targets(&args.targets)?;
    let targets: Vec<Target<'_>> = args
        .targets
        .iter()
        .zip(&runtimes)
        .map(|(name, runtime)| Target {
            name: name.clone(),
            runtime,
        })
        .collect();
    if let Some(path) = &args.replay {
        return replay(&targets, path);
    }
    let seed = args.seed.unwrap_or_else(kernelc::fuzz::fresh_seed);
    println!("kernelc fuzz --seed {seed}");
    for t in &targets {
        println!("target {}: {}", t.name, t.runtime.device_name());
    }
    // A time budget is shared: half to the ops, half to the programs.
    let phases = if args.programs { 2 } else { 1 };
    let per_phase = args.time.map(|t| t / phases);
    let cases = args.cases.unwrap_or(DEFAULT_CASES);

    let tally = fuzz_ops(&targets, kinds, seed, cases, per_phase);
    let mut report = Report {
        seed,
        op_cases: tally.cases,
        ops: tally.rows(),
        programs: Vec::new(),
        saved: Vec::new(),
    };
    print_op_table(&report.ops);
    let dir = args
        .failures
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("kernelc-fuzz-failures"));
    for row in &report.ops {
        if let Some(failure) = &row.first_failure {
            let path = save_case(&dir, row, &failure.case)?;
            println!(
                "FAILED {} on {}: {}\n  replay: kernelc fuzz --targets {} --replay {}",
                row.op,
                row.target,
                failure.message,
                row.target,
                path.display()
            );
            report.saved.push(path);
        }
    }
    if args.programs {
        report.programs = fuzz_programs(&targets, seed, cases, per_phase);
        print_program_table(&report.programs);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let failed = tally.failures()
        + report
            .programs
            .iter()
            .filter(|p| p.count.failure.is_some())
            .count() as u64;
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} failures (seed {seed})").into())
    }
}

/// `--no-panic ENTRY`: many inputs into one entry point, a panic reported with its
/// input.
fn no_panic(name: &str, args: &FuzzArgs) -> Result<(), CliError> {
    use kernelc::fuzz::no_panic::{run, Entry};
    let entry = Entry::from_name(name).ok_or_else(|| {
        let all: Vec<&str> = Entry::ALL.iter().map(|e| e.name()).collect();
        UsageError(format!(
            "unknown entry point `{name}` (entry points: {})",
            all.join(", ")
        ))
    })?;
    let seed = args.seed.unwrap_or_else(kernelc::fuzz::fresh_seed);
    let inputs = args.cases.unwrap_or(100_000);
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    println!("kernelc fuzz --no-panic {name} --seed {seed}: {inputs} inputs on {jobs} threads");
    let bar = progress(name, inputs, None);
    let started = Instant::now();
    let report = run(entry, inputs, seed, jobs, |done| bar.set_position(done));
    bar.finish_and_clear();
    println!(
        "{name}: {} inputs in {:.1} s, {} panics",
        report.inputs,
        started.elapsed().as_secs_f64(),
        report.panic_count
    );
    for p in &report.panics {
        println!(
            "PANIC at input {}: {}
  input (hex): {}",
            p.index, p.message, p.input_hex
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    match report.panic_count {
        0 => Ok(()),
        n => Err(format!("{n} panics (seed {seed})").into()),
    }
}

fn parse_kinds(names: &[String]) -> Result<Vec<OpKind>, CliError> {
    names
        .iter()
        .map(|n| {
            OpKind::from_name(n).ok_or_else(|| {
                let all: Vec<&str> = OpKind::ALL.iter().map(|k| k.name()).collect();
                UsageError(format!("unknown op `{n}` (ops: {})", all.join(", "))).into()
            })
        })
        .collect()
}

fn open_targets(names: &[String]) -> Result<Vec<Runtime>, CliError> {
    names
        .iter()
        .map(|name| {
            let choice: DeviceChoice = name
                .parse()
                .map_err(|e| UsageError(format!("--targets {name}: {e}")))?;
            let device = Device::open(choice).map_err(|e| format!("target {name}: {e}"))?;
            let mut rt = Runtime::with_device(device, DiskCache::off());
            // Outputs start as NaN/poison, so a kernel that skips an element shows.
            rt.set_poison_outputs(true);
            Ok(rt)
        })
        .collect()
}

/// A bar of `cases` steps, or of the budget's seconds when timed.
fn progress(what: &str, cases: u64, budget: Option<Duration>) -> ProgressBar {
    let bar = match budget {
        Some(t) => ProgressBar::new(t.as_secs().max(1)),
        None => ProgressBar::new(cases),
    };
    let unit = if budget.is_some() { "s" } else { "cases" };
    let template = format!("{what} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

fn fuzz_ops(
    targets: &[Target<'_>],
    kinds: Vec<OpKind>,
    seed: u64,
    cases: u64,
    budget: Option<Duration>,
) -> OpTally {
    let mut draw = OpCases::new(seed, kinds);
    let mut tally = OpTally::default();
    let bar = progress("ops", cases, budget);
    let started = Instant::now();
    loop {
        let done = match budget {
            Some(t) => started.elapsed() >= t,
            None => tally.cases >= cases,
        };
        if done {
            break;
        }
        tally.run(targets, &draw.next_case());
        match budget {
            Some(_) => bar.set_position(started.elapsed().as_secs()),
            None => bar.inc(1),
        }
        bar.set_message(format!("{} failures", tally.failures()));
    }
    bar.finish_and_clear();
    tally
}

fn fuzz_programs(
    targets: &[Target<'_>],
    seed: u64,
    cases: u64,
    budget: Option<Duration>,
) -> Vec<TargetPrograms> {
    let mut out = Vec::new();
    // The budget is shared by every target and configuration.
    let configs: Vec<_> = targets
        .iter()
        .flat_map(|t| programs_for(t.runtime).into_iter().map(move |p| (t, p)))
        .collect();
    let slice = budget.map(|b| b / configs.len().max(1) as u32);
    let per_config = u32::try_from(cases).unwrap_or(u32::MAX);
    for (target, program) in configs {
        let what = format!(
            "programs {} {} {:?}",
            target.name, program.name, program.shape
        );
        let bar = progress(&what, cases, slice);
        let started = Instant::now();
        let mut total = ProgramCount::default();
        let mut round = 0u64;
        loop {
            let n = if slice.is_some() {
                PROGRAM_ROUND
            } else {
                per_config
            };
            let count = fuzz_program(
                target.runtime,
                &program,
                n,
                seed.wrapping_add(round),
                || match slice {
                    Some(_) => bar.set_position(started.elapsed().as_secs()),
                    None => bar.inc(1),
                },
            );
            round += 1;
            total.program = count.program;
            total.shape = count.shape;
            total.cases += count.cases;
            total.refused += count.refused;
            total.failure = count.failure;
            let out_of_time = slice.is_none_or(|t| started.elapsed() >= t);
            if total.failure.is_some() || out_of_time {
                break;
            }
        }
        bar.finish_and_clear();
        out.push(TargetPrograms {
            target: target.name.clone(),
            count: total,
        });
    }
    out
}

fn replay(targets: &[Target<'_>], path: &Path) -> Result<(), CliError> {
    let text = super::read_input(path)?;
    let case: FuzzCase = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a saved fuzz case: {e}", path.display()))?;
    let mut tally = OpTally::default();
    tally.run(targets, &case);
    let rows = tally.rows();
    if rows.is_empty() {
        return Err(format!(
            "{}: no target given can run this case (its dtypes or special values)",
            path.display()
        )
        .into());
    }
    print_op_table(&rows);
    for row in &rows {
        if let Some(f) = &row.first_failure {
            println!("FAILED {} on {}: {}", row.op, row.target, f.message);
        }
    }
    match tally.failures() {
        0 => Ok(()),
        n => Err(format!("the case fails on {n} targets").into()),
    }
}

/// Saves a failing case as `DIR/<op>-<target>-<hash>.json`.
fn save_case(dir: &Path, row: &OpRow, case: &FuzzCase) -> Result<PathBuf, CliError> {
    let json = serde_json::to_string_pretty(case)?;
    let hash = blake3::hash(json.as_bytes()).to_hex();
    let target = row.target.replace(':', "-");
    let path = dir.join(format!("{}-{target}-{}.json", row.op, &hash[..8]));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn print_op_table(rows: &[OpRow]) {
    println!("| op | target | cases | worst error (of bound) | failures |");
    println!("| --- | --- | --- | --- | --- |");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.3} | {} |",
            r.op, r.target, r.cases, r.worst, r.failures
        );
    }
}

fn print_program_table(rows: &[TargetPrograms]) {
    println!("| target | programs | shape | cases | refused | result |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let c = &r.count;
        let result = if c.failure.is_some() { "FAILED" } else { "ok" };
        println!(
            "| {} | {} | {} | {} | {} | {result} |",
            r.target, c.program, c.shape, c.cases, c.refused
        );
    }
    for r in rows {
        if let Some(f) = &r.count.failure {
            println!("FAILED programs on {}:\n{f}", r.target);
        }
    }
}
