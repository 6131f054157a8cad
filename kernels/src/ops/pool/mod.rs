//! The pooling family on NCHW tensors: `pool2d` (max, average), `pool2d_backward`,
//! `adaptive_pool2d` (forward, and backward for average).
//!
//! With window `(kh, kw)`, stride `(sh, sw)`, padding `(ph, pw)`, output position
//! `(oy, ox)` reads input `(iy, ix) = (oy·sh − ph + ky, ox·sw − pw + kx)`; positions
//! outside the image are skipped.
//!
//! ```text
//! max pool:        y = max_{window ∩ image} x (first maximum wins), index = iy·W + ix
//! avg pool:        y = Σ_{window ∩ image} x / (count_include_pad ? kh·kw : |window ∩ image|)
//! adaptive:        rows [⌊o·H_in/H_out⌋, ⌈(o+1)·H_in/H_out⌉), columns likewise; avg or max
//! ```
//!
//! Pooling backward: max routes `dy` to the recorded index; average spreads `dy/count`
//! over the window. Both add up overlaps.

mod cases;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;
