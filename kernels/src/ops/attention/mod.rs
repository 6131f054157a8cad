//! Scaled dot-product attention and rotary position embedding.
//!
//! Attention, per batch `b`, query head `h` (key/value head `g = h / (heads/kv_heads)`)
//! and query `i`:
//!
//! ```text
//! s_j = scale · Σ_d q[b,h,i,d] · k[b,g,j,d] + mask[b,h,i,j]     for visible j
//! visible j: all j < seq_k, or with causal j ≤ i + seq_k − seq_q
//! p_j = e^{s_j − max s} / Σ_{visible} e^{s − max s}
//! o[b,h,i,:] = Σ_j p_j · v[b,g,j,:]
//! ```
//!
//! A query with no visible key, or whose scores are all `−∞`, outputs zeros. Otherwise a
//! NaN or `+∞` score makes the row NaN (IEEE softmax); a key hidden by causality takes
//! no part at all (its value never multiplies in, so a NaN or ∞ there cannot leak);
//! `s_j` is formed in the compute type (±∞ beyond its range, in the reference too).
//!
//! Rope (NeoX half-split), with `p = positions[s]`, `H = head_dim/2`, `i < H`:
//! `y_i = x_i cos[p,i] − x_{i+H} sin[p,i]`, `y_{i+H} = x_i sin[p,i] + x_{i+H} cos[p,i]`;
//! an out-of-range position reads `cos = sin = 0`.

mod blocked;
mod cases;
mod condition;
mod fragments;
mod hidden_values;
mod key_blocks;
mod large;
mod lower;
mod online;
pub(crate) mod reference;
mod spec;
mod staging;
mod warpgroup;

pub use spec::*;
