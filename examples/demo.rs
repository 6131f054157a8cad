//! The main job: JIT-compile a few ops for the best available device, run them on
//! random data, check every result against the f64 reference under kernelc's
//! tolerance table, and print timings.
//!
//! `cargo run --example demo` (or `./x demo`).

use kernelc::ir::ScalarType::F32;
use kernelc::kernels::conformance::{case_data, check, Executor};
use kernelc::kernels::spec::*;
use kernelc::runtime::{DeviceChoice, Runtime, Tensor};
use std::time::{Duration, Instant};

fn ops() -> Vec<(&'static str, OpSpec)> {
    vec![
        (
            "matmul 256x256x256",
            OpSpec::Gemm(GemmSpec::new(F32, 256, 256, 256)),
        ),
        (
            "softmax 512x1000",
            OpSpec::Softmax(SoftmaxSpec {
                dtype: F32,
                shape: vec![512, 1000],
                axis: 1,
                log: false,
            }),
        ),
        (
            "layer_norm 512x768",
            OpSpec::LayerNorm(LayerNormSpec {
                dtype: F32,
                shape: vec![512, 768],
                eps: 1e-5,
                rms: false,
                weight: true,
                bias: true,
                residual: false,
                save_stats: false,
                epilogue: None,
            }),
        ),
        (
            "gelu 1M",
            OpSpec::Unary(UnarySpec {
                func: UnaryFn::GeluErf,
                dtype: F32,
                shape: vec![1 << 20],
            }),
        ),
        (
            "attention 2x4x128x64 causal",
            OpSpec::Attention(AttentionSpec {
                dtype: F32,
                layout: AttentionLayout::Bhsd,
                batch: 2,
                heads: 4,
                kv_heads: 4,
                seq_q: 128,
                seq_k: 128,
                head_dim: 64,
                scale: 0.125,
                causal: true,
                mask: None,
                causal_align: Default::default(),
                lse: false,
            }),
        ),
    ]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // KERNELC_DEVICE=cpu|cuda|wgpu[:path] picks a device; the default is the best one.
    let rt = Runtime::new(DeviceChoice::from_env()?)?;
    println!("device: {}", rt.device_name());
    println!(
        "{:<30} {:>12} {:>12} {:>10}  check",
        "op", "first call", "warm median", "outputs"
    );
    let mut failed = 0;
    for (label, spec) in ops() {
        let data = case_data(&spec, 7);
        let inputs: Vec<Tensor> = spec
            .inputs()
            .iter()
            .zip(&data.buffers)
            .map(|(sig, b)| rt.tensor_from_host(&sig.shape, b))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let started = Instant::now();
        let outputs = rt.run(&spec, &refs)?;
        let first = started.elapsed();
        let warm: Vec<Duration> = (0..10)
            .map(|_| {
                let t = Instant::now();
                let r = rt.run(&spec, &refs);
                (t.elapsed(), r.is_ok())
            })
            .filter(|(_, ok)| *ok)
            .map(|(d, _)| d)
            .collect();
        let shapes: Vec<String> = outputs.iter().map(|t| format!("{:?}", t.shape())).collect();
        // The same check the conformance suite makes: the f64 reference, the tolerance table.
        let verdict = match check(&rt as &dyn Executor, &spec, 7) {
            Ok(()) => "ok".to_string(),
            Err(e) => {
                failed += 1;
                format!("FAILED: {e}")
            }
        };
        println!(
            "{label:<30} {:>10.2}ms {:>10.3}ms {:>10}  {verdict}",
            first.as_secs_f64() * 1e3,
            median(warm).as_secs_f64() * 1e3,
            shapes.join(" ")
        );
    }
    let stats = rt.stats();
    println!(
        "kernels compiled: {}, from the disk cache: {}, launches: {}",
        stats.compiles, stats.disk_hits, stats.launches
    );
    if failed > 0 {
        return Err(format!("{failed} ops did not match the reference").into());
    }
    Ok(())
}
