//! Image filters on `[H, W, C]` images (row-major HWC; colour channels are the first
//! `min(C, 3)`, a fourth alpha channel is copied).
//!
//! **Maps** (threshold, brightness, contrast, invert) are one pointwise launch over the
//! flat elements, on `vector_width`-lane vectors; with 4 channels a vector is one pixel
//! and a constant lane mask keeps alpha. **Grayscale** works per pixel (its luma is
//! computed once and stored to R, G and B; a 4-channel pixel is one vector load and
//! store).
//!
//! **Stencils** (sharpen, sobel, gaussian blur) stage a tile plus its halo in shared
//! memory, so each input element is read from global memory about once per workgroup
//! instead of once per tap:
//!
//! * A workgroup owns a `ty × tx` tile of output pixels (8 × 32 on a GPU, 16 × 64 on a
//!   CPU, clamped to the image, halved while the shared arrays exceed the caps). Its
//!   invocations first copy the `(ty + 2r) × (tx + 2r)` region around it into shared
//!   memory with clamp-to-edge coordinates (consecutive invocations on consecutive
//!   elements of an image row: coalesced), so the taps need no bounds logic at all.
//! * After a barrier, invocations walk the tile's output ELEMENTS (pixel-major, channel
//!   fastest), so global stores are coalesced too.
//! * sharpen stages every channel and applies the 5-point kernel; sobel stages the luma
//!   (computed once per staged pixel, not once per tap), writes the thresholded edge
//!   of each tile pixel to a second shared array, and after another barrier spreads it
//!   over the colour channels; gaussian blur stages every channel, runs the horizontal
//!   pass of the separable kernel over all staged rows into a second shared array and,
//!   after a barrier, the vertical pass into the output: `2(2r+1)` FMAs per element
//!   instead of `(2r+1)²`.
//! * A wide blur (the staged region more than 4× the tile) would spend more on the
//!   halo than on the tile, so it runs as two launches instead: a horizontal pass into
//!   a temporary of the compute type, then a vertical pass, each a direct gather whose
//!   every tap is one contiguous row segment per warp (coalesced, the `(2r+1)`-fold
//!   reuse served by the cache).
//!
//! Weights are host constants (the reference's normalised Gaussian taps); f16/bf16 are
//! widened on load, computed in f32 and rounded once on store. Comparisons with a
//! threshold use the host-rounded threshold that makes the f32 comparison exact.

use super::reference::{gaussian_weights, LUMA};
use crate::lower::math::{compute_type, Num};
use crate::lower::pointwise::{contiguous_lanes, pointwise};
use crate::lower::schedule::{fold_grid, linear_workgroup, plan_1d};
use crate::lower::{Binding, Launch, LowerError, Plan, TargetCaps, TempBuffer, Uniforms};
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

pub(super) fn image_filter(spec: &ImageFilterSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let img = Img::new(spec);
    match spec.filter {
        ImageFilter::Threshold { .. } => map_filter(spec, &img, caps, PixelMap::Threshold),
        ImageFilter::Brightness { .. } => map_filter(spec, &img, caps, PixelMap::Brightness),
        ImageFilter::Contrast { .. } => map_filter(spec, &img, caps, PixelMap::Contrast),
        ImageFilter::Invert => map_filter(spec, &img, caps, PixelMap::Invert),
        ImageFilter::Grayscale => grayscale(spec, &img, caps),
        ImageFilter::Sharpen => sharpen(spec, &img, caps),
        ImageFilter::Sobel { .. } => sobel(spec, &img, caps),
        ImageFilter::GaussianBlur { sigma, radius } => {
            gaussian(spec, &img, caps, &gaussian_weights(sigma, radius))
        }
    }
}

/// The image geometry and numeric types.
struct Img {
    h: u32,
    w: u32,
    c: u32,
    dtype: ScalarType,
    /// The compute type (f32 for f16/bf16).
    ty: ScalarType,
    numel: u32,
}

impl Img {
    fn new(s: &ImageFilterSpec) -> Img {
        // A valid spec has fewer than 2^31 elements.
        Img {
            h: s.height as u32,
            w: s.width as u32,
            c: s.channels as u32,
            dtype: s.dtype,
            ty: compute_type(s.dtype),
            numel: (s.height * s.width * s.channels) as u32,
        }
    }

    fn num(&self) -> Num {
        Num::scalar(self.ty)
    }

    /// The 4th channel is alpha (copied, never filtered).
    fn has_alpha(&self) -> bool {
        self.c == 4
    }
}

/// `clamp(v, 0, 1)`, keeping NaN as NaN like the reference's `f64::clamp`.
fn clamp01(n: &Num, f: &mut Body, v: E) -> E {
    let v = crate::lower::math::bind(f, "v", v);
    v.clone()
        .lt(n.lit(0.0))
        .select(n.lit(0.0), v.clone().gt(n.lit(1.0)).select(n.lit(1.0), v))
}

// ---------------------------------------------------------------------------------------
// maps
// ---------------------------------------------------------------------------------------

/// The filters that map each colour value on its own (their value or factor is the
/// filter's uniform).
#[derive(Clone, Copy)]
enum PixelMap {
    Threshold,
    Brightness,
    Contrast,
    Invert,
}

fn map_filter(
    spec: &ImageFilterSpec,
    img: &Img,
    caps: &TargetCaps,
    filter: PixelMap,
) -> Result<Plan, LowerError> {
    let op = OpSpec::ImageFilter(spec.clone());
    // With alpha, a 4-lane vector is exactly one pixel; otherwise every element is a
    // colour value and any vector width that divides the image works.
    let lanes = if img.has_alpha() {
        if caps.vector_width >= 4 {
            4
        } else {
            1
        }
    } else {
        contiguous_lanes(caps, img.numel as usize)
    };
    let (ty, has_alpha) = (img.ty, img.has_alpha());
    let params = Uniforms::new(&op.uniforms()).params()?;
    let items = (img.numel as usize, lanes, ty);
    pointwise(&op, caps, items, &params, |f, index, values, p| {
        let n = Num { ty, lanes };
        let x = values.into_iter().next().unwrap_or_else(|| n.lit(0.0));
        let x = crate::lower::math::bind(f, "x", x);
        let y = match filter {
            PixelMap::Threshold => n.indicator(x.clone().ge(n.splat(p[0].clone()))),
            PixelMap::Brightness => clamp01(&n, f, x.clone() * n.splat(p[0].clone())),
            PixelMap::Contrast => clamp01(
                &n,
                f,
                (x.clone() - n.lit(0.5)) * n.splat(p[0].clone()) + n.lit(0.5),
            ),
            PixelMap::Invert => n.lit(1.0) - x.clone(),
        };
        let y = if !has_alpha {
            y
        } else if lanes == 4 {
            let colour = vector([true, true, true, false].map(E::from));
            colour.select(y, x)
        } else {
            (index.clone() % 4u32).ne(3u32).select(y, x)
        };
        vec![y]
    })
}

/// `0.299 R + 0.587 G + 0.114 B`, summed in the reference's order.
fn luma(n: &Num, r: E, g: E, b: E) -> E {
    n.lit(LUMA[0]) * r + n.lit(LUMA[1]) * g + n.lit(LUMA[2]) * b
}

fn grayscale(spec: &ImageFilterSpec, img: &Img, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::ImageFilter(spec.clone());
    let pixels = (img.h * img.w) as u64;
    let pixel_vectors = img.has_alpha() && caps.vector_width >= 4;
    let grid = plan_1d(pixels, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let om = k.buffer("out", img.dtype, img.numel as u64, Access::Write);
    let n = img.num();
    let c = img.c;
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, pixel| {
            let base = f.let_("base", pixel * c);
            if pixel_vectors {
                let px = f.let_(
                    "px",
                    Num {
                        ty: img.ty,
                        lanes: 4,
                    }
                    .load(im, img.dtype, base.clone()),
                );
                let l = f.let_(
                    "luma",
                    luma(
                        &n,
                        px.clone().lane(0),
                        px.clone().lane(1),
                        px.clone().lane(2),
                    ),
                );
                let out = vector([l.clone(), l.clone(), l, px.lane(3)]);
                let out = Num {
                    ty: img.ty,
                    lanes: 4,
                }
                .narrow(out, img.dtype);
                f.store(om, base, out);
            } else {
                let ch = |i: u32| im.at(plus(&base, i));
                let l = luma(
                    &n,
                    n.widen(ch(0), img.dtype),
                    n.widen(ch(1), img.dtype),
                    n.widen(ch(2), img.dtype),
                );
                let l = f.let_("luma", n.narrow(l, img.dtype));
                for i in 0..3u32 {
                    f.store(om, plus(&base, i), l.clone());
                }
                if img.has_alpha() {
                    f.store(om, base.clone() + 3u32, ch(3));
                }
            }
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    }))
}

// ---------------------------------------------------------------------------------------
// stencils: tile + halo in shared memory
// ---------------------------------------------------------------------------------------

/// The staged-tile geometry of one stencil launch.
#[derive(Clone, Copy, Debug)]
struct Tile {
    /// Output pixels per workgroup: rows, columns.
    ty: u32,
    tx: u32,
    /// Halo on each side.
    r: u32,
    tiles_x: u32,
    /// Invocations per workgroup.
    inv: u32,
    grid: [u32; 3],
}

impl Tile {
    /// Staged region: rows and columns.
    fn rh(&self) -> u32 {
        self.ty + 2 * self.r
    }
    fn rw(&self) -> u32 {
        self.tx + 2 * self.r
    }

    /// The largest tile (starting at 8 × 32 on a GPU, 16 × 64 on a CPU, clamped to the
    /// image) whose shared arrays, `bytes(tile)`, fit the caps; `None` if none does.
    fn choose(
        caps: &TargetCaps,
        img: &Img,
        r: u32,
        bytes: impl Fn(&Tile) -> u64,
    ) -> Result<Option<Tile>, LowerError> {
        let (mut ty, mut tx) = if caps.is_serial() { (16, 64) } else { (8, 32) };
        ty = ty.min(img.h);
        tx = tx.min(img.w);
        loop {
            let tiles = img.h.div_ceil(ty) * img.w.div_ceil(tx);
            let tile = Tile {
                ty,
                tx,
                r,
                tiles_x: img.w.div_ceil(tx),
                inv: caps.invocations_1d(),
                grid: fold_grid(tiles, caps)?,
            };
            if bytes(&tile) <= caps.shared_memory_bytes as u64 {
                return Ok(Some(tile));
            }
            if ty > 1 {
                ty = ty.div_ceil(2);
            } else if tx > 1 {
                tx = tx.div_ceil(2);
            } else {
                return Ok(None);
            }
        }
    }

    /// The local invocation id (a literal 0 on a one-invocation CPU workgroup).
    fn lid(&self) -> E {
        if self.inv == 1 {
            E::from(0u32)
        } else {
            local_id(0)
        }
    }

    /// The tile's first output row and column. Workgroups of a folded grid past the
    /// last tile get an origin below the image and store nothing.
    fn origin(&self, f: &mut Body) -> (E, E) {
        let wg = f.let_("wg", linear_workgroup(self.grid));
        if self.tiles_x == 1 {
            return (f.let_("y0", wg * self.ty), E::from(0u32));
        }
        let y0 = f.let_("y0", (wg.clone() / self.tiles_x) * self.ty);
        let x0 = f.let_("x0", (wg % self.tiles_x) * self.tx);
        (y0, x0)
    }

    /// `for t in lid..count step inv`: this invocation's share of `count` slots.
    fn each(&self, f: &mut Body, name: &str, count: u32, body: impl FnOnce(&mut Body, E)) {
        f.for_(name, self.lid(), count, self.inv, body);
    }

    /// Splits slot `t` of a `rows × cols × planes` array into (row, col, plane).
    fn split(f: &mut Body, t: E, cols: u32, planes: u32) -> (E, E, E) {
        let (pix, plane) = if planes == 1 {
            (t, E::from(0u32))
        } else {
            let pix = f.let_("pix", t.clone() / planes);
            (pix, f.let_("ch", t % planes))
        };
        let row = f.let_("row", pix.clone() / cols);
        let col = f.let_("col", pix % cols);
        (row, col, plane)
    }

    /// Copies the region around the tile, with clamp-to-edge coordinates, into
    /// `shared` (`rh × rw × planes`, plane fastest): `value(gy, gx, plane)`.
    fn stage(
        &self,
        f: &mut Body,
        img: &Img,
        origin: &(E, E),
        planes: u32,
        shared: Mem,
        value: impl FnOnce(&mut Body, E, E, E) -> E,
    ) {
        let (rw, r) = (self.rw(), self.r);
        self.each(f, "s", self.rh() * rw * planes, |f, s| {
            let (py, px, plane) = Tile::split(f, s.clone(), rw, planes);
            let gy = f.let_("gy", clamp_coord(origin.0.clone() + py, r, img.h));
            let gx = f.let_("gx", clamp_coord(origin.1.clone() + px, r, img.w));
            let v = value(f, gy, gx, plane);
            f.store(shared, s, v);
        });
    }

    /// For each output element of the tile this invocation owns and that lies in the
    /// image: `body(f, oy, ox, ch, out_index)`.
    fn each_output(
        &self,
        f: &mut Body,
        img: &Img,
        origin: &(E, E),
        body: impl FnOnce(&mut Body, E, E, E, E),
    ) {
        let (tx, c) = (self.tx, img.c);
        self.each(f, "t", self.ty * tx * c, |f, t| {
            let (oy, ox, ch) = Tile::split(f, t, tx, c);
            let y = f.let_("y", origin.0.clone() + oy.clone());
            let x = f.let_("x", origin.1.clone() + ox.clone());
            f.if_(y.clone().lt(img.h) & x.clone().lt(img.w), |f| {
                let out = f.let_("out_at", (y * img.w + x) * c + ch.clone());
                body(f, oy, ox, ch, out);
            });
        });
    }
}

/// `base + offset`, without a `+ 0`.
fn plus(base: &E, offset: u32) -> E {
    if offset == 0 {
        base.clone()
    } else {
        base.clone() + offset
    }
}

/// `v - r` clamped to `0..extent`, for `v ≥ 0` (no negative intermediate).
fn clamp_coord(v: E, r: u32, extent: u32) -> E {
    if r == 0 {
        v.min(extent - 1)
    } else {
        v.max(r).min(extent - 1 + r) - r
    }
}

/// Bytes of `elems` shared elements of the compute type.
fn shared_bytes(img: &Img, elems: u32) -> u64 {
    elems as u64 * img.ty.size_bytes() as u64
}

/// No tile fits: even a 1×1 tile needs `needed` bytes of shared memory.
fn no_tile(op: &OpSpec, needed: u64, caps: &TargetCaps) -> LowerError {
    LowerError::SharedMemory {
        op: op.name(),
        needed,
        available: caps.shared_memory_bytes as u64,
    }
}

/// The one launch of a staged stencil.
fn stencil_launch(kernel: kernelc_ir::Kernel, tile: &Tile) -> Plan {
    Plan::single(Launch {
        kernel,
        grid: tile.grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    })
}

fn sharpen(spec: &ImageFilterSpec, img: &Img, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::ImageFilter(spec.clone());
    let c = img.c;
    let tile = Tile::choose(caps, img, 1, |t| shared_bytes(img, t.rh() * t.rw() * c))?
        .ok_or_else(|| no_tile(&op, shared_bytes(img, 9 * c), caps))?;
    let n = img.num();
    let mut k = KernelBuilder::new(op.name(), [tile.inv, 1, 1]);
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let om = k.buffer("out", img.dtype, img.numel as u64, Access::Write);
    let src = k.shared("src", img.ty, tile.rh() * tile.rw() * c);
    let kernel = k.build(|f| {
        let origin = tile.origin(f);
        tile.stage(f, img, &origin, c, src, |_, gy, gx, ch| {
            n.widen(im.at((gy * img.w + gx) * c + ch), img.dtype)
        });
        f.barrier();
        let row = tile.rw() * c;
        tile.each_output(f, img, &origin, |f, oy, ox, ch, out| {
            let centre = f.let_(
                "centre",
                ((oy + 1u32) * tile.rw() + ox + 1u32) * c + ch.clone(),
            );
            let at = |i: E| src.at(i);
            let v = f.let_("v", at(centre.clone()));
            let sharp = n.lit(5.0) * v.clone()
                - at(centre.clone() - row)
                - at(centre.clone() + row)
                - at(centre.clone() - c)
                - at(centre + c);
            let mut y = clamp01(&n, f, sharp);
            if img.has_alpha() {
                y = ch.ne(3u32).select(y, v);
            }
            f.store(om, out, n.narrow(y, img.dtype));
        });
    })?;
    Ok(stencil_launch(kernel, &tile))
}

fn sobel(spec: &ImageFilterSpec, img: &Img, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::ImageFilter(spec.clone());
    let c = img.c;
    let tile = Tile::choose(caps, img, 1, |t| {
        shared_bytes(img, t.rh() * t.rw() + t.ty * t.tx)
    })?
    .ok_or_else(|| no_tile(&op, shared_bytes(img, 9 + 1), caps))?;
    let n = img.num();
    let mut k = KernelBuilder::new(op.name(), [tile.inv, 1, 1]);
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let om = k.buffer("out", img.dtype, img.numel as u64, Access::Write);
    let params = Uniforms::new(&op.uniforms()).params()?;
    let thr = params[0].declare(&mut k);
    let lum = k.shared("luma", img.ty, tile.rh() * tile.rw());
    let edge = k.shared("edge", img.ty, tile.ty * tile.tx);
    let kernel = k.build(|f| {
        let origin = tile.origin(f);
        tile.stage(f, img, &origin, 1, lum, |f, gy, gx, _| {
            let base = f.let_("px", (gy * img.w + gx) * c);
            let ch = |i: u32| n.widen(im.at(plus(&base, i)), img.dtype);
            if c == 1 {
                ch(0)
            } else {
                luma(&n, ch(0), ch(1), ch(2))
            }
        });
        f.barrier();
        let rw = tile.rw();
        tile.each(f, "e", tile.ty * tile.tx, |f, t| {
            let (oy, ox, _) = Tile::split(f, t.clone(), tile.tx, 1);
            // Top-left of the 3×3 neighbourhood in the staged region.
            let tl = f.let_("tl", oy * rw + ox);
            let l = |dy: u32, dx: u32| lum.at(plus(&tl, dy * rw + dx));
            let two = || n.lit(2.0);
            let gx = f.let_(
                "gx",
                -l(0, 0) + l(0, 2) - two() * l(1, 0) + two() * l(1, 2) - l(2, 0) + l(2, 2),
            );
            let gy = f.let_(
                "gy",
                -l(0, 0) - two() * l(0, 1) - l(0, 2) + l(2, 0) + two() * l(2, 1) + l(2, 2),
            );
            let mag = (gx.clone() * gx + gy.clone() * gy).sqrt();
            f.store(edge, t, n.indicator(mag.gt(thr.clone())));
        });
        f.barrier();
        tile.each_output(f, img, &origin, |f, oy, ox, ch, out| {
            let e = edge.at(oy * tile.tx + ox);
            let y = if img.has_alpha() {
                ch.ne(3u32)
                    .select(e, n.widen(im.at(out.clone()), img.dtype))
            } else {
                e
            };
            f.store(om, out, n.narrow(y, img.dtype));
        });
    })?;
    let mut plan = stencil_launch(kernel, &tile);
    for launch in &mut plan.launches {
        launch
            .bindings
            .extend(params.iter().map(|p| p.binding.clone()));
    }
    Ok(plan)
}

/// `Σ_d w_d · tap(d)` as a chain of FMAs.
fn weighted_sum(n: &Num, weights: &[f64], tap: impl Fn(u32) -> E) -> E {
    let mut acc = n.lit(weights[0]) * tap(0);
    for (d, &w) in weights.iter().enumerate().skip(1) {
        acc = n.lit(w).fma(tap(d as u32), acc);
    }
    acc
}

/// The staged region may be at most this many times the tile before the blur runs as
/// two direct passes instead.
const MAX_HALO_OVERHEAD: u32 = 4;

fn gaussian(
    spec: &ImageFilterSpec,
    img: &Img,
    caps: &TargetCaps,
    weights: &[f64],
) -> Result<Plan, LowerError> {
    let op = OpSpec::ImageFilter(spec.clone());
    let c = img.c;
    let r = (weights.len() / 2) as u32;
    let tile = Tile::choose(caps, img, r, |t| {
        shared_bytes(img, (t.rh() * t.rw() + t.rh() * t.tx) * c)
    })?;
    match tile {
        Some(t) if t.rh() * t.rw() <= MAX_HALO_OVERHEAD * t.ty * t.tx => {
            gaussian_fused(&op, img, &t, weights)
        }
        _ => gaussian_two_pass(&op, img, caps, weights),
    }
}

fn gaussian_fused(
    op: &OpSpec,
    img: &Img,
    tile: &Tile,
    weights: &[f64],
) -> Result<Plan, LowerError> {
    let c = img.c;
    let n = img.num();
    let (rh, rw, tx, r) = (tile.rh(), tile.rw(), tile.tx, tile.r);
    let mut k = KernelBuilder::new(op.name(), [tile.inv, 1, 1]);
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let om = k.buffer("out", img.dtype, img.numel as u64, Access::Write);
    let src = k.shared("src", img.ty, rh * rw * c);
    let rows = k.shared("rows", img.ty, rh * tx * c);
    let kernel = k.build(|f| {
        let origin = tile.origin(f);
        tile.stage(f, img, &origin, c, src, |_, gy, gx, ch| {
            n.widen(im.at((gy * img.w + gx) * c + ch), img.dtype)
        });
        f.barrier();
        // Horizontal pass over every staged row: rows[ry, ox] = Σ w · src[ry, ox + d].
        tile.each(f, "h", rh * tx * c, |f, t| {
            let (ry, ox, ch) = Tile::split(f, t.clone(), tx, c);
            let first = f.let_("first", (ry * rw + ox) * c + ch);
            let v = weighted_sum(&n, weights, |d| src.at(plus(&first, d * c)));
            f.store(rows, t, v);
        });
        f.barrier();
        // Vertical pass into the output: out[oy, ox] = Σ w · rows[oy + d, ox].
        tile.each_output(f, img, &origin, |f, oy, ox, ch, out| {
            let first = f.let_("first", (oy.clone() * tx + ox.clone()) * c + ch.clone());
            let mut y = weighted_sum(&n, weights, |d| rows.at(plus(&first, d * tx * c)));
            if img.has_alpha() {
                let alpha = src.at(((oy + r) * rw + ox + r) * c + ch.clone());
                y = ch.ne(3u32).select(y, alpha);
            }
            f.store(om, out, n.narrow(y, img.dtype));
        });
    })?;
    Ok(stencil_launch(kernel, tile))
}

/// Two direct passes through a temporary of the compute type (wide radii).
fn gaussian_two_pass(
    op: &OpSpec,
    img: &Img,
    caps: &TargetCaps,
    weights: &[f64],
) -> Result<Plan, LowerError> {
    let (c, w, h) = (img.c, img.w, img.h);
    let r = (weights.len() / 2) as u32;
    let n = img.num();
    let grid = plan_1d(img.numel as u64, caps, 1)?;
    let name = op.name();

    // Horizontal: tmp[y, x] = Σ w_d · image[y, clamp(x + d − r)].
    let mut k = KernelBuilder::new(format!("{name}_rows"), grid.workgroup_size());
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let tm = k.buffer("rows", img.ty, img.numel as u64, Access::Write);
    let rows = k.build(|f| {
        grid.for_each_item(f, |f, i| {
            let (pix, ch) = split_pixel(f, i.clone(), c);
            let x = f.let_("x", pix.clone() % w);
            let row_start = f.let_("row_start", pix - x.clone());
            let v = weighted_sum(&n, weights, |d| {
                let xx = clamp_coord(x.clone() + d, r, w);
                n.widen(im.at((row_start.clone() + xx) * c + ch.clone()), img.dtype)
            });
            f.store(tm, i, v);
        });
    })?;

    // Vertical: out[y, x] = Σ w_d · tmp[clamp(y + d − r), x]; alpha from the image.
    let mut k = KernelBuilder::new(format!("{name}_cols"), grid.workgroup_size());
    let im = k.buffer("image", img.dtype, img.numel as u64, Access::Read);
    let tm = k.buffer("rows", img.ty, img.numel as u64, Access::Read);
    let om = k.buffer("out", img.dtype, img.numel as u64, Access::Write);
    let cols = k.build(|f| {
        grid.for_each_item(f, |f, i| {
            let (pix, ch) = split_pixel(f, i.clone(), c);
            let y = f.let_("y", pix.clone() / w);
            let col = f.let_("col", (pix - y.clone() * w) * c + ch.clone());
            let mut v = weighted_sum(&n, weights, |d| {
                let yy = clamp_coord(y.clone() + d, r, h);
                tm.at(yy * (w * c) + col.clone())
            });
            if img.has_alpha() {
                v = ch.ne(3u32).select(v, n.widen(im.at(i.clone()), img.dtype));
            }
            f.store(om, i, n.narrow(v, img.dtype));
        });
    })?;
    Ok(Plan {
        launches: vec![
            Launch {
                kernel: rows,
                grid: grid.grid,
                bindings: vec![Binding::Input(0), Binding::Temp(0)],
            },
            Launch {
                kernel: cols,
                grid: grid.grid,
                bindings: vec![Binding::Input(0), Binding::Temp(0), Binding::Output(0)],
            },
        ],
        temps: vec![TempBuffer {
            dtype: img.ty,
            len: img.numel as u64,
        }],
        ..Plan::default()
    })
}

/// Flat element `i` as (pixel, channel).
fn split_pixel(f: &mut Body, i: E, c: u32) -> (E, E) {
    if c == 1 {
        (i, E::from(0u32))
    } else {
        let pix = f.let_("pix", i.clone() / c);
        (pix, f.let_("ch", i % c))
    }
}
