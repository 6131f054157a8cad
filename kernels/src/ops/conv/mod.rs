//! The convolution family on NCHW tensors: `conv2d` (forward, backward data, backward
//! filter), `im2col`, `col2im`.
//!
//! With window `(kh, kw)`, stride `(sh, sw)`, padding `(ph, pw)`, output position
//! `(oy, ox)` reads input `(iy, ix) = (oy·sh − ph + ky, ox·sw − pw + kx)`; positions
//! outside the image are zero (im2col) or skipped (convolution, pooling, col2im). A
//! convolution's sums have no term for a tap in the padding, so a ±∞ or NaN weight
//! (or `dy`) there does not meet a padded zero: `0·∞ = NaN` is not part of the sum.
//!
//! ```text
//! conv2d:          out[n,k,oy,ox] = Σ_{c,ky,kx} x[n,c,iy,ix]·w[k,c,ky,kx] + bias[k]
//! backward_data:   dx[n,c,iy,ix]  = Σ_{k,oy,ox,ky,kx: iy,ix as above} dy[n,k,oy,ox]·w[k,c,ky,kx]
//! backward_filter: dw[k,c,ky,kx]  = Σ_{n,oy,ox} dy[n,k,oy,ox]·x[n,c,iy,ix]
//! im2col:          cols[n, (c·kh + ky)·kw + kx, oy·OW + ox] = x[n,c,iy,ix]
//! col2im:          x[n,c,iy,ix] (+)= Σ cols[…] over every (ky,kx,oy,ox) that reads (iy,ix)
//! max pool:        y = max_{window ∩ image} x (first maximum wins), index = iy·W + ix
//! avg pool:        y = Σ_{window ∩ image} x / (count_include_pad ? kh·kw : |window ∩ image|)
//! adaptive:        rows [⌊o·H_in/H_out⌋, ⌈(o+1)·H_in/H_out⌉), columns likewise; avg or max
//! ```
//!
//! Pooling backward: max routes `dy` to the recorded index; average spreads `dy/count`
//! over the window. Both add up overlaps.

mod cases;
mod geometry;
mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;
