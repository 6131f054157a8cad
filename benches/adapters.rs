//! The seed-trait adapters against each crate's own CPU backend, measured in the same
//! run on the same machine (`KERNELC_DEVICE` picks kernelc's device; the baselines run
//! on the host):
//!
//! * oxicuda: f64 GEMM 1024³ (column-major, `gemm`) and attention [1, 8, 512, 64]
//!   against oxicuda-backend 0.5.5's `CpuBackend`;
//! * rumus: one MLP training step (784 → 256 → 10, batch 64: forward, backward, SGD)
//!   against `rumus::backend::CpuBackend`;
//! * rustd: image filters on a 2048² RGB image against rustd's `CpuBackend` (blur,
//!   sobel and sharpen have no CPU baseline there: kernelc's time alone).
//!
//! `cargo bench --bench adapters --features oxicuda-0-5,rumus,rustd` (`-- quick` for
//! smaller sizes). kernelc's times include the trait's own copies (rumus: host slices
//! in and out on every call, as its trait demands), after one warm-up call compiled
//! the kernels.

use kernelc::runtime::adapters::oxicuda::oxicuda_backend_0_5 as ox;
use kernelc::runtime::adapters::oxicuda::OxicudaBackend;
use kernelc::runtime::adapters::rumus::rumus::backend::{
    Backend as RumusTrait, CpuBackend as RumusCpu,
};
use kernelc::runtime::adapters::rumus::RumusBackend;
use kernelc::runtime::adapters::rustd::rustd_core::Value;
use kernelc::runtime::adapters::rustd::rustd_runtime::backend::{
    Backend as RustdTrait, DType, TensorHandle,
};
use kernelc::runtime::adapters::rustd::rustd_runtime::backends::cpu::CpuBackend as RustdCpu;
use kernelc::runtime::adapters::rustd::RustdBackend;
use kernelc::runtime::{DeviceChoice, Runtime};
use ox::ComputeBackend;
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

fn row(name: &str, ours: Duration, baseline: Option<Duration>) {
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    match baseline {
        Some(b) => println!(
            "| {name} | {} | {} | {:.1}x |",
            ms(ours),
            ms(b),
            b.as_secs_f64() / ours.as_secs_f64()
        ),
        None => println!("| {name} | {} | no CPU baseline | - |", ms(ours)),
    }
}

fn wave(n: usize, k: f64) -> Vec<f64> {
    (0..n).map(|i| (i as f64 * k).sin() * 0.5).collect()
}

fn upload(b: &dyn ComputeBackend, bytes: &[u8]) -> u64 {
    let p = b.alloc(bytes.len()).expect("alloc");
    b.copy_htod(p, bytes).expect("copy");
    p
}

fn oxicuda(runtime: Runtime, quick: bool) {
    let ours = OxicudaBackend::with_runtime(runtime);
    let mut cpu = ox::CpuBackend::new();
    cpu.init().expect("init");
    let n = if quick { 256 } else { 1024 };
    let a: Vec<u8> = wave(n * n, 0.37)
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let gemm = |b: &dyn ComputeBackend, runs| {
        let (pa, pb, pc) = (upload(b, &a), upload(b, &a), upload(b, &vec![0; n * n * 8]));
        let nt = ox::BackendTranspose::NoTrans;
        time(runs, || {
            b.gemm(nt, nt, n, n, n, 1.0, pa, n, pb, n, 0.0, pc, n)
                .expect("gemm");
            b.synchronize().expect("sync");
        })
    };
    row(
        &format!("oxicuda gemm f64 {n}³"),
        gemm(&ours, 5),
        Some(gemm(&cpu, 1)),
    );
    let (heads, seq, d) = (8, if quick { 128 } else { 512 }, 64);
    let q: Vec<u8> = wave(heads * seq * d, 0.11)
        .iter()
        .flat_map(|v| (*v as f32).to_ne_bytes())
        .collect();
    let attention = |b: &dyn ComputeBackend, runs| {
        let (pq, pk, pv, po) = (upload(b, &q), upload(b, &q), upload(b, &q), upload(b, &q));
        time(runs, || {
            b.attention(pq, pk, pv, po, 1, heads, seq, seq, d, 0.125, true)
                .expect("attention");
            b.synchronize().expect("sync");
        })
    };
    row(
        &format!("oxicuda attention f32 [1, {heads}, {seq}, {d}] causal"),
        attention(&ours, 10),
        Some(attention(&cpu, 2)),
    );
}

/// One step of a 784 → 256 → 10 MLP: forward, cross-entropy, backward, SGD.
fn mlp_step<B: RumusTrait>(
    x: &[f32],
    t: &[f32],
    w1: &mut Vec<f32>,
    w2: &mut Vec<f32>,
    batch: usize,
) {
    let (i, h, c) = (784, 256, 10);
    let tr = |m: &[f32], r: usize, k: usize| -> Vec<f32> {
        (0..k)
            .flat_map(|j| (0..r).map(move |a| m[a * k + j]))
            .collect()
    };
    let mut pre = B::zeros(batch * h);
    B::matmul(x, w1, &mut pre, batch, i, h);
    let mut act = B::zeros(batch * h);
    B::relu(&pre, &mut act);
    let mut logits = B::zeros(batch * c);
    B::matmul(&act, w2, &mut logits, batch, h, c);
    let (mut grad, mut loss) = (B::zeros(batch * c), B::zeros(batch));
    B::cross_entropy_forward(&logits, t, &mut grad, &mut loss, batch, c);
    let mut dw2 = B::zeros(h * c);
    B::matmul(&tr(&act, batch, h), &grad, &mut dw2, h, batch, c);
    let mut dact = B::zeros(batch * h);
    B::matmul(&grad, &tr(w2, h, c), &mut dact, batch, c, h);
    let mut dpre = B::zeros(batch * h);
    B::relu_backward(&pre, &dact, &mut dpre);
    let mut dw1 = B::zeros(i * h);
    B::matmul(&tr(x, batch, i), &dpre, &mut dw1, i, batch, h);
    for (w, g) in [(w1, dw1), (w2, dw2)] {
        let (mut s, mut next) = (B::zeros(g.len()), B::zeros(g.len()));
        B::scale(&g, &mut s, 0.01);
        B::sub(w, &s, &mut next);
        *w = next;
    }
}

fn rumus(runtime: Runtime, quick: bool) {
    RumusBackend::<kernelc::runtime::adapters::rumus::GlobalDevice>::configure_with(runtime)
        .expect("configure");
    let batch = if quick { 16 } else { 64 };
    let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
    let x = f(wave(batch * 784, 0.01));
    let t: Vec<f32> = (0..batch).map(|b| (b % 10) as f32).collect();
    let (w1, w2) = (f(wave(784 * 256, 0.003)), f(wave(256 * 10, 0.07)));
    let step = |runs, kernelc: bool| {
        let (mut a, mut b) = (w1.clone(), w2.clone());
        time(runs, || {
            if kernelc {
                mlp_step::<RumusBackend>(&x, &t, &mut a, &mut b, batch)
            } else {
                mlp_step::<RumusCpu>(&x, &t, &mut a, &mut b, batch)
            }
        })
    };
    row(
        &format!("rumus MLP step 784-256-10, batch {batch}"),
        step(10, true),
        Some(step(5, false)),
    );
}

fn rustd(runtime: Runtime, quick: bool) {
    let mut ours = RustdBackend::with_runtime(runtime);
    let mut cpu = RustdCpu::new(&Default::default()).expect("rustd cpu");
    let side = if quick { 512 } else { 2048 };
    let shape = [side, side, 3];
    let pixels: Vec<u8> = (0..side * side * 3)
        .flat_map(|i| (((i * 7919) % 1000) as f32 / 1000.0).to_le_bytes())
        .collect();
    let image = |b: &mut dyn RustdTrait| -> (TensorHandle, TensorHandle) {
        let x = b.alloc_tensor(&shape, DType::F32).expect("alloc");
        b.write_tensor(x, &pixels).expect("write");
        (x, b.alloc_tensor(&shape, DType::F32).expect("alloc"))
    };
    type Filter = fn(&mut dyn RustdTrait, TensorHandle, TensorHandle);
    let filters: [(&str, Filter, bool); 8] = [
        (
            "grayscale",
            |b, x, y| b.grayscale(x, y).expect("grayscale"),
            true,
        ),
        (
            "threshold",
            |b, x, y| b.threshold(x, y, &Value::Float(0.5)).expect("threshold"),
            true,
        ),
        (
            "brightness",
            |b, x, y| b.brightness(x, y, &Value::Float(1.2)).expect("brightness"),
            true,
        ),
        (
            "contrast",
            |b, x, y| b.contrast(x, y, &Value::Float(1.2)).expect("contrast"),
            true,
        ),
        (
            "invert_colors",
            |b, x, y| b.invert_colors(x, y).expect("invert"),
            true,
        ),
        (
            "gaussian_blur σ=2",
            |b, x, y| b.gaussian_blur(x, y, &Value::Float(2.0)).expect("blur"),
            false,
        ),
        (
            "sobel_edges",
            |b, x, y| b.sobel_edges(x, y, &Value::Float(0.3)).expect("sobel"),
            false,
        ),
        (
            "sharpen",
            |b, x, y| b.sharpen(x, y).expect("sharpen"),
            false,
        ),
    ];
    let (ox, oy) = image(&mut ours);
    let (cx, cy) = image(&mut cpu);
    for (name, filter, has_baseline) in filters {
        let k = time(10, || {
            filter(&mut ours, ox, oy);
            ours.sync().expect("sync");
        });
        let c = has_baseline.then(|| time(3, || filter(&mut cpu, cx, cy)));
        row(&format!("rustd {name} {side}²x3"), k, c);
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let open =
        || Runtime::new(DeviceChoice::from_env().expect("KERNELC_DEVICE")).expect("a device");
    let device = open().device_name();
    println!("kernelc on {device}; baselines: each crate's CPU backend on this host\n");
    println!("| case | kernelc | crate's CpuBackend | speed-up |");
    println!("| --- | --- | --- | --- |");
    oxicuda(open(), quick);
    rumus(open(), quick);
    rustd(open(), quick);
}
