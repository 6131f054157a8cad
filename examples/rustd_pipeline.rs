//! kernelc where rustd's `Backend` goes: an image pipeline and a transformer block,
//! called the way rustd's executor calls its backend (handles, caller-allocated
//! outputs, `Value` parameters).
//!
//! `cargo run --example rustd_pipeline --features rustd`
//! (`KERNELC_DEVICE=cpu|wgpu|cuda` picks the device; the best one present by default).

use kernelc::runtime::adapters::rustd::rustd_core::{RustDError, Value};
use kernelc::runtime::adapters::rustd::rustd_runtime::backend::{Backend, DType, TensorHandle};
use kernelc::runtime::adapters::rustd::RustdBackend;
use kernelc::runtime::DeviceChoice;

fn tensor(
    b: &mut dyn Backend,
    shape: &[usize],
    values: &[f32],
) -> Result<TensorHandle, RustDError> {
    let h = b.alloc_tensor(shape, DType::F32)?;
    b.write_tensor(
        h,
        &values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>(),
    )?;
    Ok(h)
}

fn read(b: &dyn Backend, h: TensorHandle) -> Result<Vec<f32>, RustDError> {
    Ok(b.read_tensor(h)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn image_pipeline(b: &mut dyn Backend) -> Result<(), RustDError> {
    // A 256x256 RGB image: a bright disc on a gradient.
    let (h, w) = (256, 256);
    let pixels: Vec<f32> = (0..h * w * 3)
        .map(|i| {
            let (y, x, c) = ((i / 3) / w, (i / 3) % w, i % 3);
            let (dy, dx) = (y as f32 - 128.0, x as f32 - 128.0);
            if dy * dy + dx * dx < 60.0 * 60.0 {
                0.9
            } else {
                (x + c * 20) as f32 / 400.0
            }
        })
        .collect();
    let shape = [h, w, 3];
    let img = tensor(b, &shape, &pixels)?;
    let (a, c) = (
        b.alloc_tensor(&shape, DType::F32)?,
        b.alloc_tensor(&shape, DType::F32)?,
    );
    b.grayscale(img, a)?;
    b.gaussian_blur(a, c, &Value::Float(1.5))?;
    b.sobel_edges(c, a, &Value::Float(0.25))?;
    b.contrast(img, c, &Value::Float(1.2))?;
    b.sync()?;
    let edges = read(b, a)?.iter().step_by(3).filter(|&&v| v == 1.0).count();
    println!(
        "image pipeline: {edges} edge pixels on the disc's rim (of {})",
        h * w
    );
    for t in [img, a, c] {
        b.free_tensor(t)?;
    }
    Ok(())
}

fn transformer_block(b: &mut dyn Backend) -> Result<(), RustDError> {
    let (seq, d, ff) = (32, 64, 128);
    let wave =
        |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 0.1).collect() };
    let x = tensor(b, &[seq, d], &wave(seq * d, 0.37))?;
    let (gamma, beta) = (tensor(b, &[d], &[1.0; 64])?, tensor(b, &[d], &[0.0; 64])?);
    let (wq, wk, wv) = (
        tensor(b, &[d, d], &wave(d * d, 0.11))?,
        tensor(b, &[d, d], &wave(d * d, 0.13))?,
        tensor(b, &[d, d], &wave(d * d, 0.17))?,
    );
    let (w1, b1) = (
        tensor(b, &[d, ff], &wave(d * ff, 0.19))?,
        tensor(b, &[ff], &wave(ff, 0.5))?,
    );
    let (w2, b2) = (
        tensor(b, &[ff, d], &wave(ff * d, 0.23))?,
        tensor(b, &[d], &wave(d, 0.7))?,
    );
    let t = |b: &mut dyn Backend, shape: &[usize]| b.alloc_tensor(shape, DType::F32);
    let (n, q, k, v, att) = (
        t(b, &[seq, d])?,
        t(b, &[seq, d])?,
        t(b, &[seq, d])?,
        t(b, &[seq, d])?,
        t(b, &[seq, d])?,
    );
    // Causal mask: bool, true keeps a key.
    let mask = b.alloc_tensor(&[seq, seq], DType::Bool)?;
    b.write_tensor(
        mask,
        &(0..seq * seq)
            .map(|i| (i % seq <= i / seq) as u8)
            .collect::<Vec<_>>(),
    )?;

    b.layer_norm(x, gamma, beta, n, 1e-5)?;
    b.matmul(n, wq, q)?;
    b.matmul(n, wk, k)?;
    b.matmul(n, wv, v)?;
    b.attention(q, k, v, att, Some(mask), 1.0 / (d as f64).sqrt())?;
    b.pointwise_add(x, att, x)?; // residual, in place
    b.layer_norm(x, gamma, beta, n, 1e-5)?;
    let hidden = t(b, &[seq, ff])?;
    b.matmul_bias(n, w1, b1, hidden)?;
    b.gelu(hidden, hidden)?;
    b.matmul_bias(hidden, w2, b2, att)?;
    b.pointwise_add(x, att, x)?;
    let out = read(b, x)?;
    println!(
        "transformer block: [{seq}, {d}] -> mean |x| = {:.4}",
        out.iter().map(|v| v.abs()).sum::<f32>() / out.len() as f32
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut backend = RustdBackend::new(DeviceChoice::from_env()?)?;
    println!(
        "rustd Backend served by kernelc on {}",
        backend.runtime().device_name()
    );
    image_pipeline(&mut backend)?;
    transformer_block(&mut backend)?;
    Ok(())
}
