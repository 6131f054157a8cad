//! Image filters on `[H, W, C]` images (values nominally in `[0, 1]`).
//!
//! The colour channels are the first `min(C, 3)`; a fourth (alpha) channel is copied
//! unchanged. `P(y, x)` below reads with clamp-to-edge coordinates. Luma is
//! `L = 0.299 R + 0.587 G + 0.114 B` (Rec. 601; the single channel when `C = 1`).
//!
//! ```text
//! gaussian_blur: out = Σ_{|dy|,|dx| ≤ r} w_dy w_dx P(y+dy, x+dx),  w_t = e^{−t²/2σ²} / Σ_u e^{−u²/2σ²}
//! sobel:         gx = Σ Kx·L, gy = Σ Ky·L,  Kx = [−1 0 1; −2 0 2; −1 0 1], Ky = Kxᵀ
//!                out = √(gx² + gy²) > threshold ? 1 : 0   (every colour channel)
//! grayscale:     R, G, B ← L
//! threshold:     out = x ≥ value ? 1 : 0
//! brightness:    out = clamp(x · factor, 0, 1)
//! contrast:      out = clamp((x − 0.5) · factor + 0.5, 0, 1)
//! invert:        out = 1 − x
//! sharpen:       out = clamp(5 P(y,x) − P(y−1,x) − P(y+1,x) − P(y,x−1) − P(y,x+1), 0, 1)
//! ```

mod cases;
mod condition;
mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;
