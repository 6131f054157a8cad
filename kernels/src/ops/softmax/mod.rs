//! Softmax and log-softmax along an axis, and their backward.
//!
//! For each slice `x_0 … x_{n−1}` along the axis, with `m = max_j x_j`:
//!
//! ```text
//! softmax:      y_i = e^{x_i − m} / Σ_j e^{x_j − m}
//! log-softmax:  y_i = x_i − m − ln Σ_j e^{x_j − m}
//! backward:     dx_i = y_i (dy_i − Σ_j dy_j y_j)        (softmax, from y)
//!               dx_i = dy_i − e^{y_i} Σ_j dy_j          (log-softmax, from y)
//! ```
//!
//! A slice whose maximum is `−∞` (fully masked) gives zeros (log-softmax: `−∞`).
//!
//! Cross-entropy loss with its gradient, via log-sum-exp.
//!
//! For row `b` with logits `x` and target class `t`, `s = 1/batch` if
//! `divide_by_batch` else 1:
//!
//! ```text
//! lse   = m + ln Σ_j e^{x_j − m},   m = max_j x_j
//! loss  = (lse − x_t) · s            (= −ln softmax(x)_t · s)
//! probs = e^{x − lse}
//! grad  = (probs − onehot(t)) · s
//! ```
//!
//! A target outside `0..classes` gives `loss = NaN` and `grad = probs · s`.

mod cases;
mod condition;
mod fused;
mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use fused::*;
pub use spec::*;
