//! CPU benchmarks of the runtime, each as a ratio against a baseline measured in the
//! same run on the same machine.
//!
//! `cargo bench --bench cpu` (add `-- quick` for smaller sizes; `KERNELC_CPU_TIER=llvm`
//! runs the ops on the LLVM tier). Prints one table:
//!
//! * cold JIT compile per kernel, Cranelift and LLVM tiers (median over every kernel
//!   of the conformance table);
//! * warm dispatch overhead of a tiny op (median of many `Runtime::run` calls);
//! * elementwise add on 64M f32 vs a `memcpy` of the same bytes on every core;
//! * SGEMM 1024³ and 2048³ vs the `matrixmultiply` crate (ndarray's GEMM) on every core,
//!   and as a fraction of the 128-bit FMA ceiling (cores × 2 FMA units × 4 lanes × 2
//!   flops × clock, with the clock read from /proc/cpuinfo);
//! * softmax and layer-norm 4096×4096 vs a straightforward single-threaded Rust loop.

mod common;

use common::random;
use kernelc::codegen::cpu;
use kernelc::ir::{passes, passes::MathExpansion, Kernel};
use kernelc::kernels::conformance::cases;
use kernelc::kernels::lower::{lower, TargetCaps};
use kernelc::runtime::{cache::DiskCache, Device, Runtime};
use std::time::{Duration, Instant};

/// Median wall time of `runs` calls after one warm-up call.
fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn runtime() -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::off())
}

fn row(name: &str, ours: String, baseline: String, ratio: String, bar: &str) {
    println!("| {name} | {ours} | {baseline} | {ratio} | {bar} |");
}

/// Median and p90 cold compile of every kernel of the conformance table by one tier
/// (`compile`), after the math expansion that tier's device runs.
fn cold_compile(
    tier: &str,
    expansion: &MathExpansion,
    bar: &str,
    compile: impl Fn(&Kernel) -> bool,
) {
    let caps = TargetCaps::cpu();
    let mut times = Vec::new();
    for spec in cases::all() {
        let Ok(plan) = lower(&spec, &caps) else {
            continue;
        };
        for launch in plan.launches {
            let kernel = passes::for_target(&launch.kernel, expansion);
            let t = Instant::now();
            if compile(&kernel) {
                times.push(t.elapsed());
            }
        }
    }
    if times.is_empty() {
        row(
            &format!("cold JIT compile ({tier})"),
            "NOT RUN".into(),
            "-".into(),
            "-".into(),
            bar,
        );
        return;
    }
    times.sort();
    let median = times[times.len() / 2];
    let p90 = times[times.len() * 9 / 10];
    row(
        &format!("cold JIT compile ({tier}), {} kernels", times.len()),
        format!(
            "median {:.2} ms, p90 {:.2} ms",
            median.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3
        ),
        "-".into(),
        "-".into(),
        bar,
    );
}

fn dispatch() {
    let rt = runtime();
    let a = rt.tensor(&[16], &random(16, 1)).expect("upload");
    let b = rt.tensor(&[16], &random(16, 2)).expect("upload");
    let d = time(20_000, || {
        rt.add(&a, &b).expect("add");
    });
    row(
        "warm dispatch, add of 16 f32",
        format!("{:.2} us", d.as_secs_f64() * 1e6),
        "-".into(),
        "-".into(),
        "<= 5 us",
    );
}

/// `memcpy` of `src` into `dst` split over every core.
fn parallel_copy(src: &[f32], dst: &mut [f32]) {
    let chunk = src.len().div_ceil(threads());
    std::thread::scope(|s| {
        for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            s.spawn(move || d.copy_from_slice(c));
        }
    });
}

fn elementwise(n: usize) {
    let rt = runtime();
    let a = rt.tensor(&[n], &random(n, 3)).expect("upload");
    let b = rt.tensor(&[n], &random(n, 4)).expect("upload");
    let ours = time(5, || {
        rt.add(&a, &b).expect("add");
    });
    let src = random(n, 5);
    let mut dst = vec![0.0f32; n];
    let copy = time(5, || parallel_copy(&src, &mut dst));
    // add moves 3 streams of n floats (2 reads, 1 write); a copy moves 2.
    let gbs = |streams: f64, d: Duration| streams * n as f64 * 4.0 / d.as_secs_f64() / 1e9;
    let (ours_bw, copy_bw) = (gbs(3.0, ours), gbs(2.0, copy));
    row(
        &format!("add {}M f32 (bandwidth)", n >> 20),
        format!("{ours_bw:.1} GB/s ({:.1} ms)", ours.as_secs_f64() * 1e3),
        format!("memcpy {copy_bw:.1} GB/s"),
        format!("{:.0}%", 100.0 * ours_bw / copy_bw),
        ">= 70%",
    );
}

/// Peak f32 FLOP/s with 128-bit FMA: cores x 2 FMA ports x 4 lanes x 2 flops x clock.
fn fma_ceiling() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz: f64 = info
        .lines()
        .find(|l| l.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()?;
    Some(threads() as f64 * 2.0 * 4.0 * 2.0 * mhz * 1e6)
}

fn sgemm(n: usize) {
    let rt = runtime();
    let a_host = random(n * n, 6);
    let b_host = random(n * n, 7);
    let a = rt.tensor(&[n, n], &a_host).expect("upload");
    let b = rt.tensor(&[n, n], &b_host).expect("upload");
    let ours = time(3, || {
        rt.matmul(&a, &b).expect("matmul");
    });
    let mut c = vec![0.0f32; n * n];
    let theirs = time(3, || {
        // SAFETY: a_host, b_host and c are n*n row-major matrices with the strides given.
        unsafe {
            matrixmultiply::sgemm(
                n,
                n,
                n,
                1.0,
                a_host.as_ptr(),
                n as isize,
                1,
                b_host.as_ptr(),
                n as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    });
    let flops = 2.0 * (n as f64).powi(3);
    let gf = |d: Duration| flops / d.as_secs_f64() / 1e9;
    let ceiling = fma_ceiling().map_or("?".into(), |c| {
        format!("{:.0}% of FMA peak", 100.0 * gf(ours) * 1e9 / c)
    });
    row(
        &format!("SGEMM {n}^3"),
        format!("{:.1} GFLOP/s ({ceiling})", gf(ours)),
        format!("matrixmultiply {:.1} GFLOP/s", gf(theirs)),
        format!("{:.0}%", 100.0 * gf(ours) / gf(theirs)),
        ">= 40%",
    );
}

fn softmax_rust(x: &[f32], cols: usize, out: &mut [f32]) {
    for (row, o) in x.chunks(cols).zip(out.chunks_mut(cols)) {
        let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let mut s = 0.0;
        for (v, o) in row.iter().zip(o.iter_mut()) {
            *o = (v - m).exp();
            s += *o;
        }
        for o in o.iter_mut() {
            *o /= s;
        }
    }
}

fn layer_norm_rust(x: &[f32], cols: usize, w: &[f32], b: &[f32], out: &mut [f32]) {
    for (row, o) in x.chunks(cols).zip(out.chunks_mut(cols)) {
        let mean = row.iter().sum::<f32>() / cols as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / cols as f32;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for i in 0..cols {
            o[i] = (row[i] - mean) * rstd * w[i] + b[i];
        }
    }
}

fn normalisations(n: usize) {
    let rt = runtime();
    let host = random(n * n, 8);
    let x = rt.tensor(&[n, n], &host).expect("upload");
    let w_host = random(n, 9);
    let b_host = random(n, 10);
    let w = rt.tensor(&[n], &w_host).expect("upload");
    let b = rt.tensor(&[n], &b_host).expect("upload");
    let mut out = vec![0.0f32; n * n];

    let ours = time(5, || {
        rt.softmax(&x, -1).expect("softmax");
    });
    let theirs = time(5, || softmax_rust(&host, n, &mut out));
    row(
        &format!("softmax {n}x{n}"),
        format!("{:.1} ms", ours.as_secs_f64() * 1e3),
        format!("plain Rust (1 thread) {:.1} ms", theirs.as_secs_f64() * 1e3),
        format!("{:.2}x faster", theirs.as_secs_f64() / ours.as_secs_f64()),
        "-",
    );
    let ours = time(5, || {
        rt.layer_norm(&x, &w, &b, 1e-5).expect("layer_norm");
    });
    let theirs = time(5, || layer_norm_rust(&host, n, &w_host, &b_host, &mut out));
    row(
        &format!("layer_norm {n}x{n}"),
        format!("{:.1} ms", ours.as_secs_f64() * 1e3),
        format!("plain Rust (1 thread) {:.1} ms", theirs.as_secs_f64() * 1e3),
        format!("{:.2}x faster", theirs.as_secs_f64() / ours.as_secs_f64()),
        "-",
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    println!(
        "kernelc CPU benchmarks: {} threads, {}, {}",
        threads(),
        std::env::consts::ARCH,
        runtime().device_name(),
    );
    println!("| benchmark | kernelc | baseline (same run) | ratio | bar |");
    println!("| --- | --- | --- | --- | --- |");
    let cranelift = MathExpansion::all_transcendental();
    cold_compile("Cranelift", &cranelift, "median <= 5 ms", |k| {
        cpu::compile(k).is_ok()
    });
    let llvm = cpu::llvm::required_expansion();
    cold_compile("LLVM", &llvm, "median <= 50 ms", |k| {
        cpu::llvm::compile(k).is_ok()
    });
    dispatch();
    elementwise(if quick { 1 << 22 } else { 64 << 20 });
    for n in if quick { vec![256] } else { vec![1024, 2048] } {
        sgemm(n);
    }
    normalisations(if quick { 512 } else { 4096 });
}
