//! Convolution's geometry, and the gather through which the GEMM engine reads an image
//! as a matrix (implicit im2col: the column matrix is never materialised).

use crate::lower::math::bind;
use crate::lower::tile::{add, and_opt, div, rem, scale, Axis, Gather, OperandGather};
use kernelc_ir::builder::*;
use std::sync::Arc;

/// Geometry of a 2-D convolution (NCHW), as the patch gathers need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ConvGeometry {
    /// Input channels `C`.
    pub channels: u32,
    /// Output channels `K`.
    pub out_channels: u32,
    pub height: u32,
    pub width: u32,
    pub out_height: u32,
    pub out_width: u32,
    pub kernel: [u32; 2],
    pub stride: [u32; 2],
    pub padding: [u32; 2],
}

impl ConvGeometry {
    /// Window taps `kh·kw`.
    pub fn taps(&self) -> u32 {
        self.kernel[0] * self.kernel[1]
    }
    /// Pixels of one input plane `H·W`.
    pub fn image(&self) -> u32 {
        self.height * self.width
    }
    /// Pixels of one output plane `OH·OW`.
    pub fn out_pixels(&self) -> u32 {
        self.out_height * self.out_width
    }
    /// Patch rows `C·kh·kw`.
    pub fn patch_rows(&self) -> u32 {
        self.channels * self.taps()
    }
}

/// Which image element an implicit-GEMM operand element `(r, p)` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PatchRole {
    /// `x` in the forward pass: `r` = output pixel `oy·OW + ox`, `p` = patch row
    /// `(c·kh + ky)·kw + kx`.
    PixelByTap,
    /// `x` in backward-filter: `r` = patch row, `p = n·OH·OW + pixel` (the reduction
    /// runs over the batch and the output pixels).
    TapByBatchPixel,
    /// `dy` in stride-1 backward-data: `r` = input pixel `iy·W + ix`, `p =
    /// (k·kh + ky)·kw + kx`; reads `dy[n, k, iy + ph − ky, ix + pw − kx]`.
    InputPixelByOutTap,
}

/// The image read as an implicit-GEMM operand: element `(r, p)` is the image element
/// `role` names; zero in the padding.
#[derive(Debug)]
struct Patches {
    geometry: ConvGeometry,
    role: PatchRole,
}

impl OperandGather for Patches {
    fn contiguous(&self) -> Axis {
        match self.role {
            PatchRole::PixelByTap | PatchRole::InputPixelByOutTap => Axis::Outer,
            PatchRole::TapByBatchPixel => Axis::Reduction,
        }
    }

    fn address(&self, f: &mut Body, r: &E, p: &E) -> (E, Option<E>) {
        patch_address(f, &self.geometry, self.role, r, p)
    }

    fn has_absent(&self) -> bool {
        let g = &self.geometry;
        match self.role {
            // Windows of valid output pixels leave the image only through the padding.
            PatchRole::PixelByTap | PatchRole::TapByBatchPixel => g.padding != [0, 0],
            // The transposed window leaves the output unless it is a single tap.
            PatchRole::InputPixelByOutTap => g.kernel != [1, 1] || g.padding != [0, 0],
        }
    }

    fn run(&self) -> u32 {
        // Neighbouring pixels are neighbours only within an output row, and a tap's
        // shift leaves them at any alignment.
        1
    }
}

/// The forward pass's image read from its channels-last copy `[N][H][W][C]`: element
/// `(r, p)` with `r` the output pixel `oy·OW + ox` and `p` the patch row `(ky·kw +
/// kx)·C + c` (the channels innermost, so a tap's `C` channels are one run of
/// neighbours: 16-byte copies where `C` allows); zero in the padding.
#[derive(Debug)]
struct ChannelsLastPatches {
    geometry: ConvGeometry,
}

impl OperandGather for ChannelsLastPatches {
    fn contiguous(&self) -> Axis {
        Axis::Reduction
    }

    fn address(&self, f: &mut Body, r: &E, p: &E) -> (E, Option<E>) {
        let g = &self.geometry;
        let [ph, pw] = g.padding;
        let tap = bind(f, "tap", div(p.clone(), g.channels));
        let c = rem(p.clone(), g.channels);
        let (ky, kx) = window_tap(f, g, tap);
        let (yy, xx) = padded_coords(f, g, r, ky, kx);
        let valid = and_opt(in_image(&yy, ph, g.height), in_image(&xx, pw, g.width));
        let pixel = add(scale(yy, g.width), xx);
        let mut offset = add(scale(pixel, g.channels), c);
        let shift = (ph * g.width + pw) * g.channels;
        if shift != 0 {
            offset = offset - shift;
        }
        (offset, valid)
    }

    fn has_absent(&self) -> bool {
        self.geometry.padding != [0, 0]
    }

    fn run(&self) -> u32 {
        self.geometry.channels
    }
}

/// The forward pass's image as its channels-last copy is read (see
/// [`ChannelsLastPatches`]).
pub(super) fn channels_last_patches(geometry: ConvGeometry) -> Gather {
    Gather::Custom(Arc::new(ChannelsLastPatches { geometry }))
}

/// The gather of an image of `geometry` read as `role`.
pub(super) fn patches(geometry: ConvGeometry, role: PatchRole) -> Gather {
    Gather::Custom(Arc::new(Patches { geometry, role }))
}

/// `(c, ky, kx)` of patch row `row`.
pub(super) fn patch_row(f: &mut Body, g: &ConvGeometry, row: &E) -> (E, E, E) {
    let c = bind(f, "c", div(row.clone(), g.taps()));
    let tap = bind(f, "tap", rem(row.clone(), g.taps()));
    let (ky, kx) = window_tap(f, g, tap);
    (c, ky, kx)
}

/// `(ky, kx)` of window tap `tap = ky·kw + kx`.
fn window_tap(f: &mut Body, g: &ConvGeometry, tap: E) -> (E, E) {
    let ky = bind(f, "ky", div(tap.clone(), g.kernel[1]));
    let kx = bind(f, "kx", rem(tap, g.kernel[1]));
    (ky, kx)
}

/// The padded input coordinates `(oy·sh + ky, ox·sw + kx)` of output pixel `pixel`.
pub(super) fn padded_coords(f: &mut Body, g: &ConvGeometry, pixel: &E, ky: E, kx: E) -> (E, E) {
    let oy = div(pixel.clone(), g.out_width);
    let ox = rem(pixel.clone(), g.out_width);
    let yy = bind(f, "yy", add(scale(oy, g.stride[0]), ky));
    let xx = bind(f, "xx", add(scale(ox, g.stride[1]), kx));
    (yy, xx)
}

/// Whether padded coordinate `v` is inside `[pad, pad + size)`; `None` when always.
pub(super) fn in_image(v: &E, pad: u32, size: u32) -> Option<E> {
    if pad == 0 {
        // Without padding every window of a valid output pixel lies inside.
        None
    } else {
        Some(v.clone().ge(pad) & v.clone().lt(size + pad))
    }
}

/// The offset of the image element that `(r, p)` is as `role` reads it, and whether it
/// lies inside the image (`None`: always).
fn patch_address(f: &mut Body, g: &ConvGeometry, role: PatchRole, r: &E, p: &E) -> (E, Option<E>) {
    let [ph, pw] = g.padding;
    match role {
        PatchRole::PixelByTap | PatchRole::TapByBatchPixel => {
            let (row, pixel, image) = if role == PatchRole::PixelByTap {
                (p.clone(), r.clone(), None)
            } else {
                let n = div(p.clone(), g.out_pixels());
                let pixel = bind(f, "pix", rem(p.clone(), g.out_pixels()));
                (r.clone(), pixel, Some(n))
            };
            let (c, ky, kx) = patch_row(f, g, &row);
            let (yy, xx) = padded_coords(f, g, &pixel, ky, kx);
            let valid = and_opt(in_image(&yy, ph, g.height), in_image(&xx, pw, g.width));
            let mut offset = add(add(scale(c, g.image()), scale(yy, g.width)), xx);
            if let Some(n) = image {
                offset = add(scale(n, g.channels * g.image()), offset);
            }
            let shift = ph * g.width + pw;
            if shift != 0 {
                offset = offset - shift;
            }
            (offset, valid)
        }
        PatchRole::InputPixelByOutTap => {
            // Stride 1: output (oy, ox) = (iy + ph − ky, ix + pw − kx).
            let k = bind(f, "k", div(p.clone(), g.taps()));
            let tap = bind(f, "tap", rem(p.clone(), g.taps()));
            let (ky, kx) = window_tap(f, g, tap);
            let yy = bind(f, "yy", add(div(r.clone(), g.width), E::from(ph)));
            let xx = bind(f, "xx", add(rem(r.clone(), g.width), E::from(pw)));
            let valid = yy.clone().ge(ky.clone())
                & yy.clone().lt(ky.clone() + g.out_height)
                & xx.clone().ge(kx.clone())
                & xx.clone().lt(kx.clone() + g.out_width);
            // yy·OW + xx ≥ ky·OW + kx whenever the element is valid.
            let offset = add(
                scale(k, g.out_pixels()),
                add(scale(yy, g.out_width), xx) - add(scale(ky, g.out_width), kx),
            );
            (offset, Some(valid))
        }
    }
}
