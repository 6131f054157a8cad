//! Layer norm / RMS norm and batch norm, forward and backward.
//!
//! Layer norm over each row of `N` (last-axis) elements:
//!
//! ```text
//! μ = Σx/N, σ² = Σ(x − μ)²/N, r = 1/√(σ² + eps), x̂ = (x − μ)·r     (RMS: μ = 0, r = 1/√(Σx²/N + eps))
//! y = x̂·w + b                                                        (x: x + residual, rounded to the dtype)
//! backward, g = dy·w:  dx = r·(g − mean(g) − x̂·mean(g·x̂))          (RMS: dx = r·g − x·r³·mean(g·x))
//!                      dw = Σ_rows dy·x̂,  db = Σ_rows dy
//! ```
//!
//! Batch norm per channel `c` over its `M = N·Π spatial` elements:
//!
//! ```text
//! training:  μ_c, σ²_c (biased), r_c = 1/√(σ²_c + eps), y = (x − μ_c)·r_c·w_c + b_c
//!            running ← (1 − momentum)·running + momentum·stat
//! inference: y = (x − rm_c)/√(rv_c + eps)·w_c + b_c
//! backward:  x̂ = (x − μ_c)·r_c, db_c = Σdy, dw_c = Σdy·x̂, dx = ((dy − db_c/M − x̂·dw_c/M)·r_c)·w_c
//! ```
//!
//! Special values (docs/ops.md, "Special values in attention and normalisation"): a row
//! (channel) holding NaN or ±∞ has NaN statistics, so μ, `r` and every `y` of it are NaN
//! (RMS norm is its formula in IEEE arithmetic: `r = 0` for an infinite `Σx²`); the
//! layer-norm backward forms `g = dy·w` in the compute type; the batch-norm backward
//! multiplies by `w_c` last.
//!
//! The references take μ and σ² relative to the first value of the row (channel),
//! with compensated sums, as the kernels fold `x − x₀`: a mean far above the spread
//! costs neither of them accuracy.

mod cases;
mod condition;
mod large;
mod long_rows;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;

/// `(N, C, S)` of an `[N, C, ...]` shape: batch, channels, spatial elements per
/// channel per sample.
fn ncs(shape: &[usize]) -> (usize, usize, usize) {
    (shape[0], shape[1], crate::shape::numel(&shape[2..]))
}
