//! kernelc where an oxicuda-backend `ComputeBackend` goes: a causal attention layer and
//! the f64 GEMMs around it, called the way an oxicuda user calls them (device pointers
//! from `alloc`, byte copies, column-major f64 BLAS).
//!
//! `cargo run --example oxicuda_attention_gemm --features oxicuda`
//! (`KERNELC_DEVICE=cpu|wgpu|cuda` picks the device; the best one present by default).

use kernelc::runtime::adapters::oxicuda::oxicuda_backend::{
    BackendError, BackendTranspose, ComputeBackend,
};
use kernelc::runtime::adapters::oxicuda::OxicudaBackend;

fn upload<T: Copy>(
    b: &dyn ComputeBackend,
    v: &[T],
    to_bytes: fn(T) -> Vec<u8>,
) -> Result<u64, BackendError> {
    let bytes: Vec<u8> = v.iter().flat_map(|&x| to_bytes(x)).collect();
    let p = b.alloc(bytes.len())?;
    b.copy_htod(p, &bytes)?;
    Ok(p)
}

fn main() -> Result<(), BackendError> {
    let mut backend = OxicudaBackend::new();
    backend.init()?;
    let b: &dyn ComputeBackend = &backend;
    println!("oxicuda ComputeBackend served by kernelc on `{}`", b.name());

    // Attention: [batch, heads, seq, head_dim] f32, scores multiplied by `scale`.
    let (batch, heads, seq, d) = (2, 4, 64, 32);
    let n = batch * heads * seq * d;
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let f32_bytes = |x: f32| x.to_ne_bytes().to_vec();
    let q = upload(b, &data, f32_bytes)?;
    let k = upload(
        b,
        &data.iter().rev().copied().collect::<Vec<_>>(),
        f32_bytes,
    )?;
    let v = upload(b, &data, f32_bytes)?;
    let o = b.alloc(n * 4)?;
    b.attention(
        q,
        k,
        v,
        o,
        batch,
        heads,
        seq,
        seq,
        d,
        1.0 / (d as f64).sqrt(),
        true,
    )?;

    // Row 0 of a causal head sees only key 0: its output is v[0].
    let mut first = vec![0u8; d * 4];
    b.copy_dtoh(&mut first, o)?;
    let row0: Vec<f32> = first
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(row0, data[..d], "causal row 0 attends to key 0 only");

    // f64 GEMMs, column-major: C = A·Bᵀ, then the same for 8 batches in one call.
    let (m, nn, kk) = (256, 192, 128);
    let f64_bytes = |x: f64| x.to_ne_bytes().to_vec();
    let a_host: Vec<f64> = (0..m * kk).map(|i| (i % 13) as f64 * 0.25 - 1.5).collect();
    let b_host: Vec<f64> = (0..nn * kk).map(|i| (i % 7) as f64 * 0.5 - 1.0).collect();
    let a = upload(b, &a_host, f64_bytes)?;
    let bm = upload(b, &b_host, f64_bytes)?;
    let c = b.alloc(m * nn * 8)?;
    let (nt, t) = (BackendTranspose::NoTrans, BackendTranspose::Trans);
    b.gemm(nt, t, m, nn, kk, 1.0, a, m, bm, nn, 0.0, c, m)?;
    let mut c00 = [0u8; 8];
    b.copy_dtoh(&mut c00, c)?;
    let want: f64 = (0..kk).map(|p| a_host[p * m] * b_host[p * nn]).sum();
    assert_eq!(f64::from_ne_bytes(c00), want);

    let batches = 8;
    let a8 = upload(b, &a_host.repeat(batches), f64_bytes)?;
    let c8 = b.alloc(batches * m * nn * 8)?;
    // Strides count f64 elements; B is shared by every batch (stride 0).
    b.batched_gemm(
        nt,
        t,
        m,
        nn,
        kk,
        1.0,
        a8,
        m,
        m * kk,
        bm,
        nn,
        0,
        0.0,
        c8,
        m,
        m * nn,
        batches,
    )?;
    b.synchronize()?;
    let mut last = [0u8; 8];
    b.copy_dtoh(&mut last, c8 + ((batches - 1) * m * nn * 8) as u64)?;
    assert_eq!(f64::from_ne_bytes(last), want, "batch 7 equals batch 0");

    for p in [q, k, v, o, a, bm, c, a8, c8] {
        b.free(p)?;
    }
    println!("attention {batch}x{heads}x{seq}x{d} (causal) and f64 GEMMs {m}x{nn}x{kk} (x{batches}) checked");
    Ok(())
}
