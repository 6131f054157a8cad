//! kernelc where ferrum's `ComputeBackend` goes: one decoder block of a small
//! Llama-style model written against `&dyn ComputeBackend`, as ferrum's model code
//! calls it (RMS norm, q/k/v projections, rotary embedding, GQA attention, the output
//! projection with the residual fused into the next norm, a SiLU-gated MLP), then the
//! next token from the logits.
//!
//! `cargo run --example ferrum_decoder_block --features ferrum`
//! (`FERRUM_DEVICE=cuda` runs it on CUDA GPU 0; the CPU by default).

use kernelc::runtime::adapters::ferrum::ferrum_interfaces::kernel_ops::{
    AttentionParams, SamplingParams,
};
use kernelc::runtime::adapters::ferrum::ferrum_interfaces::tensor::TensorRef;
use kernelc::runtime::adapters::ferrum::ferrum_interfaces::ComputeBackend;
use kernelc::runtime::adapters::ferrum::ferrum_types::{DataType, Device, Result};
use kernelc::runtime::adapters::ferrum::FerrumBackend;

const SEQ: usize = 6;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 16;
const HIDDEN: usize = HEADS * HEAD_DIM;
const FFN: usize = 128;
const VOCAB: usize = 100;

/// A deterministic weight of `shape`, small values.
fn weight(
    b: &dyn ComputeBackend,
    device: &Device,
    shape: &[usize],
    salt: u32,
) -> Result<TensorRef> {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761).wrapping_add(salt * 40503)) % 1000) as f32 / 1000.0 - 0.5
        })
        .map(|v| v * 0.2)
        .collect();
    b.tensor_factory()
        .from_slice(&data, shape, DataType::FP32, device.clone())
}

fn block(b: &dyn ComputeBackend, device: &Device) -> Result<u32> {
    let kops = b.kernel_ops().expect("kernelc serves KernelOps");
    let (norm, linear) = (kops.norm_ops().unwrap(), kops.linear_ops().unwrap());
    let x = weight(b, device, &[SEQ, HIDDEN], 1)?.reshape(&[1, SEQ, HIDDEN])?;
    let ones = b.tensor_factory().ones(&[HIDDEN], DataType::FP32, device)?;

    // Attention.
    let h = norm.rms_norm(&x, &ones, 1e-6)?;
    let q = linear.linear(&h, &weight(b, device, &[HIDDEN, HIDDEN], 2)?)?;
    let k = linear.linear(&h, &weight(b, device, &[KV_HEADS * HEAD_DIM, HIDDEN], 3)?)?;
    let v = linear.linear(&h, &weight(b, device, &[KV_HEADS * HEAD_DIM, HIDDEN], 4)?)?;
    let (q, k, v) = (
        q.reshape(&[1, SEQ, HEADS, HEAD_DIM])?,
        k.reshape(&[1, SEQ, KV_HEADS, HEAD_DIM])?,
        v.reshape(&[1, SEQ, KV_HEADS, HEAD_DIM])?,
    );
    let (cos, sin) = rope_tables(b, device, 32)?;
    let positions: Vec<usize> = (0..SEQ).collect();
    let rope = kops.position_ops().unwrap();
    let (q, k) = (
        rope.rotary_embedding(&q, &cos, &sin, &positions)?,
        rope.rotary_embedding(&k, &cos, &sin, &positions)?,
    );
    let params = AttentionParams {
        num_heads: HEADS,
        num_kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        softmax_scale: 1.0 / (HEAD_DIM as f32).sqrt(),
        causal: true,
    };
    let o = kops
        .attention_ops()
        .unwrap()
        .attention(&q, &k, &v, &params)?;
    let o = linear.linear(
        &o.reshape(&[1, SEQ, HIDDEN])?,
        &weight(b, device, &[HIDDEN, HIDDEN], 5)?,
    )?;

    // MLP, its norm taking the residual in the same kernel.
    let (h, x) = norm.rms_norm_residual(&o, &x, &ones, 1e-6)?;
    let gate = linear.linear(&h, &weight(b, device, &[FFN, HIDDEN], 6)?)?;
    let up = linear.linear(&h, &weight(b, device, &[FFN, HIDDEN], 7)?)?;
    let act = kops.activation_ops().unwrap().silu_mul(&gate, &up)?;
    let down = linear.linear(&act, &weight(b, device, &[HIDDEN, FFN], 8)?)?;
    let x = b.tensor_ops().add(&x, &down)?;

    // The next token.
    let logits = linear.linear(&x, &weight(b, device, &[VOCAB, HIDDEN], 9)?)?;
    let sampling = SamplingParams {
        temperature: 0.7,
        top_k: 20,
        top_p: 0.9,
        repetition_penalty: 1.1,
        repetition_token_ids: vec![3, 14, 15],
        repetition_token_freqs: vec![1, 1, 1],
        rng_seed: 42,
    };
    let greedy = logits.argmax_last_dim_u32()?;
    let sampled = kops
        .sampling_ops()
        .unwrap()
        .sample_token(&logits, &sampling)?;
    println!("greedy next token {greedy}, sampled {sampled}");
    Ok(sampled)
}

/// NeoX cos/sin tables `[positions, HEAD_DIM / 2]` (θ = 10000).
fn rope_tables(
    b: &dyn ComputeBackend,
    device: &Device,
    positions: usize,
) -> Result<(TensorRef, TensorRef)> {
    let half = HEAD_DIM / 2;
    let angle = |p: usize, i: usize| p as f32 / 10000f32.powf(2.0 * i as f32 / HEAD_DIM as f32);
    let table = |f: fn(f32) -> f32| -> Vec<f32> {
        (0..positions)
            .flat_map(|p| (0..half).map(move |i| f(angle(p, i))))
            .collect()
    };
    let f = b.tensor_factory();
    Ok((
        f.from_slice(
            &table(f32::cos),
            &[positions, half],
            DataType::FP32,
            device.clone(),
        )?,
        f.from_slice(
            &table(f32::sin),
            &[positions, half],
            DataType::FP32,
            device.clone(),
        )?,
    ))
}

fn main() -> Result<()> {
    let device = match std::env::var("FERRUM_DEVICE").as_deref() {
        Ok("cuda") => Device::CUDA(0),
        _ => Device::CPU,
    };
    let mut backend = FerrumBackend::new(&device)?;
    pollster::block_on(backend.initialize(&device))?;
    println!(
        "ferrum ComputeBackend `{}` on {}",
        backend.name(),
        backend.context().runtime().device_name()
    );
    block(&backend, &device)?;
    let status = backend.status();
    println!(
        "{} operations, last error: {:?}",
        status.operations_completed, status.last_error
    );
    Ok(())
}
