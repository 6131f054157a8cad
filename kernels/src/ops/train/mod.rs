//! The training family: `dropout` and `adam` (Adam / AdamW).
//!
//! Dropout with a deterministic counter-based mask.
//!
//! Element `i` (flat index) is kept iff `(bits(i) >> 8) ≥ ⌈p·2²⁴⌉`, with `bits` the
//! stream of [`crate::rng`] for the spec's `rng`, `seed` and `step` (so
//! `P(keep) = 1 − p` up to 2⁻²⁴):
//!
//! ```text
//! mask_i = keep_i ? 1/(1 − p) : 0,    y_i = x_i · mask_i
//! ```
//!
//! `y` is a product, as PyTorch's `x * mask * scale` (and `x * 0` for `p = 1`): a
//! dropped NaN or ±∞ is NaN, a dropped `−x` is `−0`.
//!
//! One Adam / AdamW step, elementwise, with `t = step`:
//!
//! ```text
//! g  = grad + (decoupled ? 0 : weight_decay · param)
//! m' = β1·m + (1 − β1)·g
//! v' = β2·v + (1 − β2)·g²
//! m̂  = m' / (1 − β1ᵗ),   v̂ = v' / (1 − β2ᵗ)
//! param' = param − lr · (m̂ / (√v̂ + eps) + (decoupled ? weight_decay · param : 0))
//! ```
//!
//! With `weight_decay = 0` neither decay term exists (not `0 · param`, which is NaN
//! for an infinite param), as in PyTorch.

mod cases;
mod condition;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;
