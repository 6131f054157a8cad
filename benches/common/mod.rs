//! What the benchmarks share.

/// `n` f32 values in `[−0.5, 0.5)`, the same for the same `seed` on every run.
pub fn random(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = kernelc::kernels::rng::pcg_hash(i ^ seed.wrapping_mul(0x9E37_79B9));
            (h >> 8) as f32 / 16_777_216.0 - 0.5
        })
        .collect()
}
