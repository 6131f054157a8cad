//! The catalogue's deterministic counter-based random numbers (dropout masks and random
//! fills).
//!
//! Everything a kernel evaluates per element is 32-bit unsigned integer arithmetic with
//! wrapping `*`, `+`, `^` and shifts by an amount below 32, so that the same function
//! written in the IR gives bit-identical masks on every target (no 64-bit integers, no
//! high-half multiplies).
//!
//! # The hash
//!
//! [`pcg_hash`] is the PCG-RXS-M-XS output permutation of one LCG step (the hash that
//! rumus' CPU backend uses for dropout), a bijection on `u32`:
//!
//! ```text
//! s = x * 747796405 + 2891336453
//! w = ((s >> ((s >> 28) + 4)) ^ s) * 277803737
//! pcg_hash(x) = (w >> 22) ^ w
//! ```
//!
//! # Streams
//!
//! A stream is fixed by a `seed` and a `step` (both `u64`). They are folded into one
//! 32-bit key on the host, once per launch ([`stream_key`]); a kernel receives the key
//! as a uniform parameter (so changing the seed or step compiles nothing) and
//! computes, for counter `i` (the flat element index):
//!
//! ```text
//! bits(i) = pcg_hash(pcg_hash(i) ^ key)                       (RngScheme::Counter)
//! ```
//!
//! Hashing the counter before mixing in the key makes masks of different steps look
//! independent element by element. For rumus compatibility there is also
//!
//! ```text
//! bits(i) = pcg_hash(i ^ (step as u32))                        (RngScheme::Rumus)
//! ```
//!
//! exactly rumus' `dropout` (its `seed` is `step as u32`); the seed is ignored. Its
//! masks of steps `s` and `s ^ 1` are the same mask with neighbouring elements swapped,
//! which is why it is not the default.
//!
//! # From bits to numbers
//!
//! * uniform in `[0, 1)`: `u(i) = (bits(i) >> 8) * 2^-24` (24 bits, exact in f32).
//! * dropout with probability `p` drops element `i` iff `(bits(i) >> 8) < T` with the
//!   integer threshold `T = ceil(p * 2^24)` ([`dropout_threshold`]); this is exactly
//!   `u(i) < p` evaluated in f32 for an f32 `p`, without any float in the kernel.
//! * normal: Box–Muller on counters `2i` and `2i + 1`:
//!   `z = sqrt(-2 ln u1) * cos(2π u2)` with `u1 = ((bits(2i) >> 8) + 1) * 2^-24` in
//!   `(0, 1]` and `u2 = u(2i + 1)`.

use serde::{Deserialize, Serialize};

/// Which per-element bit stream a random op uses (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RngScheme {
    /// `pcg_hash(pcg_hash(i) ^ stream_key(seed, step))`: the default.
    #[default]
    Counter,
    /// `pcg_hash(i ^ (step as u32))`: rumus' dropout bit for bit; `seed` is ignored.
    Rumus,
}

/// The PCG-RXS-M-XS hash of one 32-bit word (wrapping u32 arithmetic only).
pub const fn pcg_hash(x: u32) -> u32 {
    let s = x.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let w = ((s >> ((s >> 28).wrapping_add(4))) ^ s).wrapping_mul(277_803_737);
    (w >> 22) ^ w
}

/// Folds a 64-bit seed and a 64-bit step into the 32-bit stream key (host side, once
/// per launch): `pcg(pcg(pcg(pcg(seed_lo) ^ seed_hi) ^ step_lo) ^ step_hi)`.
pub const fn stream_key(seed: u64, step: u64) -> u32 {
    let mut h = pcg_hash(seed as u32);
    h = pcg_hash(h ^ (seed >> 32) as u32);
    h = pcg_hash(h ^ step as u32);
    pcg_hash(h ^ (step >> 32) as u32)
}

/// The one 32-bit word a kernel receives for a stream (a uniform parameter):
/// [`stream_key`] for [`RngScheme::Counter`], `step as u32` for [`RngScheme::Rumus`].
pub const fn stream(scheme: RngScheme, seed: u64, step: u64) -> u32 {
    match scheme {
        RngScheme::Counter => stream_key(seed, step),
        RngScheme::Rumus => step as u32,
    }
}

/// The 32 random bits for counter `i` of the stream with word `stream`.
pub const fn bits_of_stream(scheme: RngScheme, stream: u32, i: u32) -> u32 {
    match scheme {
        RngScheme::Counter => pcg_hash(pcg_hash(i) ^ stream),
        RngScheme::Rumus => pcg_hash(i ^ stream),
    }
}

/// The 32 random bits for counter `i` of a stream.
pub const fn bits(scheme: RngScheme, seed: u64, step: u64, i: u32) -> u32 {
    bits_of_stream(scheme, stream(scheme, seed, step), i)
}

/// A uniform number in `[0, 1)` with 24 random bits: `(bits >> 8) * 2^-24`.
pub fn uniform(bits: u32) -> f64 {
    (bits >> 8) as f64 / 16_777_216.0
}

/// The integer dropout threshold `T = ceil(p * 2^24)`; element dropped iff `(bits >> 8) < T`.
/// `p` is clamped to `[0, 1]`.
pub fn dropout_threshold(p: f64) -> u32 {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
    (p * 16_777_216.0).ceil() as u32
}

/// Whether element `i` is kept by dropout with probability `p`.
pub fn dropout_keep(scheme: RngScheme, seed: u64, step: u64, p: f64, i: u32) -> bool {
    (bits(scheme, seed, step, i) >> 8) >= dropout_threshold(p)
}

/// A standard normal sample for element `i` (Box–Muller on counters `2i`, `2i + 1`).
pub fn normal(scheme: RngScheme, seed: u64, step: u64, i: u32) -> f64 {
    let b1 = bits(scheme, seed, step, i.wrapping_mul(2));
    let b2 = bits(scheme, seed, step, i.wrapping_mul(2).wrapping_add(1));
    let u1 = ((b1 >> 8) as f64 + 1.0) / 16_777_216.0;
    let u2 = uniform(b2);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rumus' reference, transcribed from its documented definition.
    fn rumus_pcg(x: u32) -> u32 {
        let mut s = x.wrapping_mul(747796405).wrapping_add(2891336453);
        s = ((s >> ((s >> 28) + 4)) ^ s).wrapping_mul(277803737);
        (s >> 22) ^ s
    }

    #[test]
    fn pcg_matches_rumus_definition() {
        for x in [0u32, 1, 2, 12345, u32::MAX, 0x8000_0000] {
            assert_eq!(pcg_hash(x), rumus_pcg(x));
        }
    }

    #[test]
    fn rumus_scheme_is_rumus_dropout() {
        // rumus: seed = step as u32; h = pcg_hash(seed ^ i); u = (h >> 8) as f32 / 2^24; drop if u < p.
        let (p, step) = (0.3f32, 7u64);
        for i in 0..1000u32 {
            let h = rumus_pcg(step as u32 ^ i);
            let u = (h >> 8) as f32 / 16_777_216.0;
            let rumus_keep = u >= p;
            assert_eq!(
                dropout_keep(RngScheme::Rumus, 99, step, p as f64, i),
                rumus_keep
            );
        }
    }

    #[test]
    fn threshold_edges() {
        assert_eq!(dropout_threshold(0.0), 0);
        assert_eq!(dropout_threshold(0.5), 1 << 23);
        assert_eq!(dropout_threshold(1.0), 1 << 24);
    }
}
