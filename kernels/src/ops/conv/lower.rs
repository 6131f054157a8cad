//! 2-D convolution (NCHW), im2col and col2im.
//!
//! # Convolution as GEMM
//!
//! All three passes run on the tiled GEMM engine of [`crate::lower::tile`], reading the
//! image through the patch gather of `geometry.rs`, which the engine calls through its
//! `OperandGather` hook (implicit im2col: the column matrix is never materialised when it
//! need not be):
//!
//! * **forward**: per image `n`, `out_n (K × OH·OW) = W (K × C·kh·kw) · cols_n`, the
//!   batch on the grid, `bias[k]` in the epilogue (a row bias).
//! * **backward_filter**: `dW (K × C·kh·kw) = Σ_n dY_n · cols_nᵀ`: the batch is part of
//!   the reduction (`p = n·OH·OW + pixel`), so one workgroup owns each output tile and
//!   nothing races; few tiles and a long reduction split it (split-K + a sum launch).
//! * **backward_data**, stride 1: `dX_n (C × H·W) = Σ_{k,ky,kx} W · dY_n` read
//!   through the transposed window (`dy[n, k, iy + ph − ky, ix + pw − kx]`), again
//!   implicit. Stride > 1 (where the transposed window would multiply mostly zeros):
//!   `cols_n = Wᵀ · dY_n` (a GEMM into a temporary column buffer, batched over images,
//!   chunked to bound its size), then col2im.
//!
//! 1×1 stride-1 unpadded convolutions read the image as a plain strided matrix
//! (vector loads, no index arithmetic).
//!
//! The patch gathers read a tap in the padding (or, for backward-data, outside the
//! output) as zero; such a tap is no term of the definition, and its `0·∞` would turn
//! a sum NaN. The engine recomputes a NaN result over the existing terms only (see
//! "Absent elements" in [`crate::lower::tile`]); the gathers say whether they have
//! absent elements (`has_absent`), so unpadded passes carry no such code.
//!
//! # im2col / col2im
//!
//! im2col is a coalesced 1-D map over the columns (each element a gather, zero in
//! the padding). col2im computes every image pixel as a *gather* over the window
//! taps that read it — `ky ≡ iy + ph (mod sh)` in `[max(iy + ph − (OH−1)·sh, …),
//! min(kh, iy + ph + 1))` — so each output element has exactly one writer and no
//! scatter-add races.

use super::geometry::{
    channels_last_patches, in_image, padded_coords, patch_row, patches, ConvGeometry, PatchRole,
};
use crate::error::SpecError;
use crate::lower::map::{arg, first_output, map_plan, Operand};
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::plan::{lower_forms, Form};
use crate::lower::schedule::plan_1d;
use crate::lower::tile::{
    add, and_opt, div, emit_gemm, rem, scale, to_u32, BiasAxis, Gather, GemmBias, GemmCore,
    GemmOperand, GemmOutput,
};
use crate::lower::{lower, Binding, Launch, LowerError, Plan, PlanBuilder, TargetCaps, Uniforms};
use crate::spec::{
    Col2imSpec, Conv2dSpec, ConvPass, Im2colSpec, Nchw, OpSpec, PermuteSpec, TensorSig, Window2d,
};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Scalar, ScalarType};

/// The prefix of the channels-last form's schedules.
const CHANNELS_LAST: &str = "channels-last: ";

/// Multiply-adds from which the heuristics take the channels-last form first (below,
/// its two copies' launches weigh more than what it saves; tuning times both).
const PREFER_CHANNELS_LAST_MULTIPLY_ADDS: u64 = 1 << 26;

/// Most elements of the column temporary of strided backward-data (128 MiB of f32):
/// larger batches are processed in chunks of images.
const COLS_TEMP_LIMIT: u64 = 1 << 25;

/// The geometry of im2col's and col2im's patches of `image` (one output channel).
fn patch_geometry(image: &Nchw, window: &Window2d) -> Result<ConvGeometry, LowerError> {
    geometry(image.channels, 1, image.height, image.width, window)
}

fn geometry(
    channels: usize,
    out_channels: usize,
    height: usize,
    width: usize,
    window: &Window2d,
) -> Result<ConvGeometry, LowerError> {
    // `validate` already refused windows that do not fit; this is the typed fallback.
    let [oh, ow] = window.out_size([height, width]).ok_or_else(|| {
        LowerError::Spec(SpecError::bad_attr(
            "window",
            format!("{window:?}"),
            "does not fit the padded input",
        ))
    })?;
    let pair = |what: &str, v: [usize; 2]| -> Result<[u32; 2], LowerError> {
        Ok([to_u32(what, v[0])?, to_u32(what, v[1])?])
    };
    Ok(ConvGeometry {
        channels: to_u32("channels", channels)?,
        out_channels: to_u32("out_channels", out_channels)?,
        height: to_u32("height", height)?,
        width: to_u32("width", width)?,
        out_height: to_u32("output height", oh)?,
        out_width: to_u32("output width", ow)?,
        kernel: pair("kernel", window.kernel)?,
        stride: pair("stride", window.stride)?,
        padding: pair("padding", window.padding)?,
    })
}

/// A 1×1, stride-1, unpadded window: the image is a plain `C × H·W` matrix.
fn pointwise(g: &ConvGeometry) -> bool {
    g.kernel == [1, 1] && g.stride == [1, 1] && g.padding == [0, 0]
}

fn operand(
    name: &str,
    binding: Binding,
    dtype: ScalarType,
    len: u64,
    batch_strides: Vec<u32>,
    gather: Gather,
) -> GemmOperand {
    GemmOperand {
        name: name.to_string(),
        binding,
        dtype,
        len,
        base: 0,
        batch_strides,
        gather,
    }
}

fn output(name: &str, dtype: ScalarType, len: u64, ld: u32, batch_strides: Vec<u32>) -> GemmOutput {
    GemmOutput {
        name: name.to_string(),
        binding: Binding::Output(0),
        dtype,
        len,
        base: 0,
        ld,
        batch_strides,
    }
}

#[allow(clippy::too_many_arguments)]
fn core(
    name: String,
    m: u32,
    n: u32,
    k: u32,
    batch: Vec<u32>,
    a: GemmOperand,
    b: GemmOperand,
    c: GemmOutput,
    bias: Option<GemmBias>,
) -> GemmCore {
    let c_dtype = c.dtype;
    GemmCore {
        name,
        m,
        n,
        k,
        batch,
        a,
        b,
        c,
        alpha: Binding::Scalar(Scalar::from_f64(compute_type(c_dtype), 1.0)),
        prior: None,
        bias,
        input_rounding: None,
        tf32_operands: false,
        packed_from: None,
        fill_gaps: false,
        activation: None,
    }
}

pub(super) fn conv2d(spec: &Conv2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let g = geometry(
        spec.in_channels,
        spec.out_channels,
        spec.height,
        spec.width,
        &spec.window,
    )?;
    let batch = to_u32("batch", spec.batch)?;
    let name = OpSpec::Conv2d(spec.clone()).name();
    let mut plan = PlanBuilder::default();
    match spec.pass {
        ConvPass::Forward => return forward_plan(spec, &g, batch, name, caps),
        ConvPass::BackwardFilter => {
            emit_gemm(&backward_filter(spec, &g, batch, name), caps, &mut plan)?;
        }
        ConvPass::BackwardData if g.stride == [1, 1] => {
            emit_gemm(
                &backward_data_implicit(spec, &g, batch, name),
                caps,
                &mut plan,
            )?;
        }
        ConvPass::BackwardData => {
            backward_data_cols(spec, &g, batch, name, caps, &mut plan, COLS_TEMP_LIMIT)?
        }
    }
    Ok(plan.finish())
}

/// The forward pass's plan: on the image as given, or (where [`channels_last_offered`])
/// on channels-last copies, both forms' schedules offered.
fn forward_plan(
    spec: &Conv2dSpec,
    g: &ConvGeometry,
    batch: u32,
    name: String,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let given = forward(spec, g, batch, name.clone(), None);
    let as_given = |caps: &TargetCaps, plan: &mut PlanBuilder| emit_gemm(&given, caps, plan);
    if !channels_last_offered(spec, g, caps) {
        let mut plan = PlanBuilder::default();
        as_given(caps, &mut plan)?;
        return Ok(plan.finish());
    }
    let channels_last = |caps: &TargetCaps, plan: &mut PlanBuilder| {
        forward_channels_last(spec, g, batch, name.clone(), caps, plan)
    };
    let forms = [
        Form {
            prefix: CHANNELS_LAST,
            lower: &channels_last,
        },
        Form {
            prefix: "",
            lower: &as_given,
        },
    ];
    if given.multiply_adds() >= PREFER_CHANNELS_LAST_MULTIPLY_ADDS {
        lower_forms(caps, &forms)
    } else {
        let [first, second] = forms;
        lower_forms(caps, &[second, first])
    }
}

/// Whether the forward pass is offered on channels-last copies of its image and filter
/// on `caps`: 16-bit elements where the multiplies run on matrix fragments staged by
/// asynchronous copies, and a tap's channels fill whole 16-byte copies. Read from
/// NCHW, the image's neighbours along the reduction are a tap apart and its pixels
/// neighbours only at a tap's shift (2-byte pieces, which the warpgroup tiles cannot
/// stage); channels-last, a tap's `C` channels are neighbours, one copy per 8.
fn channels_last_offered(spec: &Conv2dSpec, g: &ConvGeometry, caps: &TargetCaps) -> bool {
    let sixteen_bit = matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16);
    let per_copy = 16 / spec.dtype.size_bytes();
    caps.matrix_fragments
        && caps.async_copies
        && sixteen_bit
        && !pointwise(g)
        && g.channels % per_copy == 0
}

/// The channels-last form: the image copied to `[N][H][W][C]` and the filter to
/// `[K][kh][kw][C]` (two permutes into temporaries), then `out_n = W' · cols'_n` with
/// the reduction ordered `(ky, kx, c)` (the patches of `ChannelsLastPatches`).
fn forward_channels_last(
    spec: &Conv2dSpec,
    g: &ConvGeometry,
    batch: u32,
    name: String,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    let t = spec.dtype;
    let (c, hw, taps, k) = (
        g.channels as usize,
        g.image() as usize,
        g.taps() as usize,
        g.out_channels as usize,
    );
    let mut copy = |input: usize, shape: [usize; 3]| -> Result<Binding, LowerError> {
        let permute = OpSpec::Permute(PermuteSpec {
            dtype: t,
            shape: shape.to_vec(),
            perm: vec![0, 2, 1],
        });
        let temp = plan.temp(t, shape.iter().product::<usize>() as u64);
        plan.append(
            lower(&permute, caps)?,
            &[Binding::Input(input)],
            std::slice::from_ref(&temp),
        )?;
        Ok(temp)
    };
    let image = copy(0, [spec.batch, c, hw])?;
    let filter = copy(1, [k, c, taps])?;
    let core = forward(spec, g, batch, name, Some([image, filter]));
    emit_gemm(&core, caps, plan)
}

/// `out_n = W · cols_n (+ bias)`, batched over images; from the op's image and filter,
/// or from their channels-last copies (`[image, filter]`, see
/// [`forward_channels_last`]).
fn forward(
    spec: &Conv2dSpec,
    g: &ConvGeometry,
    batch: u32,
    name: String,
    channels_last: Option<[Binding; 2]>,
) -> GemmCore {
    let t = spec.dtype;
    let (hw, ohw, crs) = (g.image(), g.out_pixels(), g.patch_rows());
    let k = g.out_channels;
    let (image_at, filter_at, image_gather) = match channels_last {
        Some([image, filter]) => (image, filter, channels_last_patches(*g)),
        None if pointwise(g) => (
            Binding::Input(0),
            Binding::Input(1),
            Gather::Strided {
                outer: 1,
                reduction: hw,
            },
        ),
        None => (
            Binding::Input(0),
            Binding::Input(1),
            patches(*g, PatchRole::PixelByTap),
        ),
    };
    let filter = operand(
        "filter",
        filter_at,
        t,
        k as u64 * crs as u64,
        vec![0],
        Gather::Strided {
            outer: crs,
            reduction: 1,
        },
    );
    let image = operand(
        "input",
        image_at,
        t,
        batch as u64 * g.channels as u64 * hw as u64,
        vec![g.channels * hw],
        image_gather,
    );
    let out = output(
        "output",
        t,
        batch as u64 * k as u64 * ohw as u64,
        ohw,
        vec![k * ohw],
    );
    let bias = spec.bias.then_some(GemmBias {
        binding: Binding::Input(2),
        dtype: t,
        along: BiasAxis::Rows,
    });
    core(name, k, ohw, crs, vec![batch], filter, image, out, bias)
}

/// `dW = Σ_n dY_n · cols_nᵀ`: the batch and the output pixels form the reduction.
fn backward_filter(spec: &Conv2dSpec, g: &ConvGeometry, batch: u32, name: String) -> GemmCore {
    let t = spec.dtype;
    let (hw, ohw, crs) = (g.image(), g.out_pixels(), g.patch_rows());
    let k = g.out_channels;
    let chw = g.channels * hw;
    let grad = operand(
        "grad_output",
        Binding::Input(1),
        t,
        batch as u64 * k as u64 * ohw as u64,
        Vec::new(),
        if batch == 1 {
            Gather::Strided {
                outer: ohw,
                reduction: 1,
            }
        } else {
            Gather::Split {
                outer: ohw,
                inner: ohw,
                block: k * ohw,
            }
        },
    );
    let image_gather = match (pointwise(g), batch) {
        (true, 1) => Gather::Strided {
            outer: hw,
            reduction: 1,
        },
        (true, _) => Gather::Split {
            outer: hw,
            inner: hw,
            block: chw,
        },
        (false, _) => patches(*g, PatchRole::TapByBatchPixel),
    };
    let image = operand(
        "input",
        Binding::Input(0),
        t,
        batch as u64 * chw as u64,
        Vec::new(),
        image_gather,
    );
    let out = output("grad_filter", t, k as u64 * crs as u64, crs, Vec::new());
    core(
        name,
        k,
        crs,
        batch * ohw,
        Vec::new(),
        grad,
        image,
        out,
        None,
    )
}

/// Stride 1: `dX_n = Σ_{k,ky,kx} W[k, c, ky, kx] · dY_n[k, iy + ph − ky, ix + pw − kx]`.
fn backward_data_implicit(
    spec: &Conv2dSpec,
    g: &ConvGeometry,
    batch: u32,
    name: String,
) -> GemmCore {
    let t = spec.dtype;
    let (hw, ohw, taps) = (g.image(), g.out_pixels(), g.taps());
    let (c, k) = (g.channels, g.out_channels);
    let filter = operand(
        "filter",
        Binding::Input(1),
        t,
        k as u64 * c as u64 * taps as u64,
        vec![0],
        if taps == 1 {
            Gather::Strided {
                outer: 1,
                reduction: c,
            }
        } else {
            Gather::Split {
                outer: taps,
                inner: taps,
                block: c * taps,
            }
        },
    );
    let grad = operand(
        "grad_output",
        Binding::Input(0),
        t,
        batch as u64 * k as u64 * ohw as u64,
        vec![k * ohw],
        if pointwise(g) {
            Gather::Strided {
                outer: 1,
                reduction: ohw,
            }
        } else {
            patches(*g, PatchRole::InputPixelByOutTap)
        },
    );
    let out = output(
        "grad_input",
        t,
        batch as u64 * c as u64 * hw as u64,
        hw,
        vec![c * hw],
    );
    core(name, c, hw, k * taps, vec![batch], filter, grad, out, None)
}

/// Strided backward-data: per chunk of images, `cols = Wᵀ · dY` into a temporary of
/// at most `temp_limit` elements (at least one image), then col2im into `dX`.
fn backward_data_cols(
    spec: &Conv2dSpec,
    g: &ConvGeometry,
    batch: u32,
    name: String,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
    temp_limit: u64,
) -> Result<(), LowerError> {
    let t = spec.dtype;
    let compute = compute_type(t);
    let (hw, ohw, crs) = (g.image(), g.out_pixels(), g.patch_rows());
    let (c, k) = (g.channels, g.out_channels);
    let per_image = crs as u64 * ohw as u64;
    if per_image > i32::MAX as u64 {
        return Err(LowerError::TooLarge {
            what: format!("{name} column buffer of one image"),
            value: per_image,
            limit: i32::MAX as u64,
        });
    }
    let chunk = (temp_limit / per_image).clamp(1, batch as u64) as u32;
    let temp_len = chunk as u64 * per_image;
    let cols = plan.temp(compute, temp_len);
    let mut n0 = 0;
    while n0 < batch {
        let images = chunk.min(batch - n0);
        let filter = operand(
            "filter",
            Binding::Input(1),
            t,
            k as u64 * crs as u64,
            vec![0],
            Gather::Strided {
                outer: 1,
                reduction: crs,
            },
        );
        let mut grad = operand(
            "grad_output",
            Binding::Input(0),
            t,
            batch as u64 * k as u64 * ohw as u64,
            vec![k * ohw],
            Gather::Strided {
                outer: 1,
                reduction: ohw,
            },
        );
        grad.base = n0 * k * ohw;
        let out = GemmOutput {
            name: "cols".into(),
            binding: cols.clone(),
            dtype: compute,
            len: temp_len,
            base: 0,
            ld: ohw,
            batch_strides: vec![crs * ohw],
        };
        let gemm = core(
            format!("{name}_cols"),
            crs,
            ohw,
            k,
            vec![images],
            filter,
            grad,
            out,
            None,
        );
        emit_gemm(&gemm, caps, plan)?;
        let fold = Col2im {
            name: format!("{name}_col2im"),
            images,
            g: *g,
            cols: (cols.clone(), compute, temp_len, 0),
            prior: None,
            out: (
                Binding::Output(0),
                t,
                batch as u64 * c as u64 * hw as u64,
                n0 * c * hw,
            ),
        };
        plan.launches.push(fold.launch(caps)?);
        n0 += images;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// im2col / col2im
// ---------------------------------------------------------------------------------------

pub(super) fn im2col(spec: &Im2colSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let g = patch_geometry(&spec.image, &spec.window)?;
    let op = OpSpec::Im2col(spec.clone());
    let batch = to_u32("batch", spec.image.batch)?;
    let (hw, ohw, crs) = (g.image(), g.out_pixels(), g.patch_rows());
    let items = batch as u64 * crs as u64 * ohw as u64;
    let grid = plan_1d(items, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let x_len = batch as u64 * g.channels as u64 * hw as u64;
    let x = k.buffer("x", spec.dtype, x_len, Access::Read);
    let cols = k.buffer("cols", spec.dtype, items, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, e| {
            let pixel = bind(f, "pixel", rem(e.clone(), ohw));
            let rows = bind(f, "rows", div(e.clone(), ohw));
            let row = bind(f, "row", rem(rows.clone(), crs));
            let n = div(rows, crs);
            let (c, ky, kx) = patch_row(f, &g, &row);
            let (yy, xx) = padded_coords(f, &g, &pixel, ky, kx);
            let [ph, pw] = g.padding;
            let valid = and_opt(in_image(&yy, ph, g.height), in_image(&xx, pw, g.width));
            let mut index = add(
                add(scale(n, g.channels * hw), scale(c, hw)),
                add(scale(yy, g.width), xx),
            );
            let shift = ph * g.width + pw;
            if shift != 0 {
                // yy·W + xx ≥ ph·W + pw inside the image; only used there.
                index = index - shift;
            }
            match valid {
                None => f.store(cols, e, x.at(index)),
                Some(valid) => f.if_else(
                    valid,
                    |f| f.store(cols, e.clone(), x.at(index)),
                    |f| f.store(cols, e.clone(), lit(spec.dtype, 0.0)),
                ),
            }
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    }))
}

pub(super) fn col2im(spec: &Col2imSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let g = patch_geometry(&spec.image, &spec.window)?;
    let batch = to_u32("batch", spec.image.batch)?;
    let cols_len = batch as u64 * g.patch_rows() as u64 * g.out_pixels() as u64;
    let x_len = batch as u64 * g.channels as u64 * g.image() as u64;
    let fold = Col2im {
        name: OpSpec::Col2im(spec.clone()).name(),
        images: batch,
        g,
        cols: (Binding::Input(0), spec.dtype, cols_len, 0),
        prior: spec.accumulate.then_some(Binding::Input(1)),
        out: (Binding::Output(0), spec.dtype, x_len, 0),
    };
    Ok(Plan::single(fold.launch(caps)?))
}

/// One col2im launch over `images` images: `(binding, dtype, buffer length, element
/// offset of the first image)` of the columns and of the image output.
struct Col2im {
    name: String,
    images: u32,
    g: ConvGeometry,
    cols: (Binding, ScalarType, u64, u32),
    /// The prior image (same placement as `out`), added when accumulating.
    prior: Option<Binding>,
    out: (Binding, ScalarType, u64, u32),
}

impl Col2im {
    fn launch(&self, caps: &TargetCaps) -> Result<Launch, LowerError> {
        let g = &self.g;
        let (hw, ohw, taps) = (g.image(), g.out_pixels(), g.taps());
        let items = self.images as u64 * g.channels as u64 * hw as u64;
        let grid = plan_1d(items, caps, 1)?;
        let mut k = KernelBuilder::new(self.name.clone(), grid.workgroup_size());
        let (cols_binding, cols_dtype, cols_len, cols_base) = self.cols.clone();
        let (out_binding, out_dtype, out_len, out_base) = self.out.clone();
        let mut bindings = vec![cols_binding];
        let cols = k.buffer("cols", cols_dtype, cols_len, Access::Read);
        let prior = self.prior.as_ref().map(|b| {
            bindings.push(b.clone());
            k.buffer("prior", out_dtype, out_len, Access::Read)
        });
        bindings.push(out_binding);
        let out = k.buffer("x", out_dtype, out_len, Access::Write);
        let num = Num::scalar(compute_type(out_dtype));
        let kernel = k.build(|f| {
            grid.for_each_item(f, |f, e| {
                let ix = bind(f, "ix", rem(e.clone(), g.width));
                let rows = bind(f, "rows", div(e.clone(), g.width));
                let iy = bind(f, "iy", rem(rows.clone(), g.height));
                // plane = n·C + c; its columns start at plane·kh·kw·OH·OW.
                let plane = div(rows, g.height);
                let plane_cols = bind(
                    f,
                    "plane_cols",
                    add(E::from(cols_base), scale(plane, taps * ohw)),
                );
                let yy = bind(f, "yy", add(iy, E::from(g.padding[0])));
                let xx = bind(f, "xx", add(ix, E::from(g.padding[1])));
                let (y_lo, y_hi) = tap_range(f, "y", &yy, g.kernel[0], g.stride[0], g.out_height);
                let (x_lo, x_hi) = tap_range(f, "x", &xx, g.kernel[1], g.stride[1], g.out_width);
                let sum = f.var("sum", num.lit(0.0));
                f.for_("ky", y_lo, y_hi, g.stride[0], |f, ky| {
                    let oy = div(yy.clone() - ky.clone(), g.stride[0]);
                    let row_at = bind(
                        f,
                        "row_at",
                        add(
                            plane_cols.clone(),
                            add(scale(ky, g.kernel[1] * ohw), scale(oy, g.out_width)),
                        ),
                    );
                    f.for_("kx", x_lo.clone(), x_hi.clone(), g.stride[1], |f, kx| {
                        let ox = div(xx.clone() - kx.clone(), g.stride[1]);
                        let at = add(row_at.clone(), add(scale(kx, ohw), ox));
                        let v = num.load(cols, cols_dtype, at);
                        f.assign(sum, sum.get() + v);
                    });
                });
                let index = add(E::from(out_base), e);
                let index = bind(f, "x_at", index);
                let mut value = sum.get();
                if let Some(prior) = prior {
                    value = num.load(prior, out_dtype, index.clone()) + value;
                }
                f.store(out, index, num.narrow(value, out_dtype));
            });
        })?;
        Ok(Launch {
            kernel,
            grid: grid.grid,
            bindings,
        })
    }
}

/// The window taps `[lo, hi)` (step `stride`) whose output position reads padded
/// coordinate `v`: `t ≡ v (mod stride)`, `t ≤ v` and `(v − t) / stride < out`.
fn tap_range(f: &mut Body, axis: &str, v: &E, kernel: u32, stride: u32, out: u32) -> (E, E) {
    let last = (out - 1) * stride;
    // max(v, last) − last ≡ v (mod stride) when v ≥ last, and 0 below it; neither
    // operand wraps.
    let beyond = v.clone().max(E::from(last)) - last;
    let lo = if stride == 1 {
        beyond
    } else {
        beyond.max(rem(v.clone(), stride))
    };
    let lo = f.let_(&format!("{axis}_lo"), lo);
    let hi = f.let_(
        &format!("{axis}_hi"),
        (v.clone() + 1u32).min(E::from(kernel)),
    );
    (lo, hi)
}

/// A forward convolution that sums nothing (no input channels, or windows that see
/// only padding): the bias of each output channel, broadcast over batch and pixels.
pub(super) fn bias_only(spec: &Conv2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Conv2d(spec.clone());
    let out = first_output(op.outputs())?;
    // The bias as `[K, 1, 1]`: NumPy broadcasting against `[N, K, OH, OW]`.
    let bias = Operand {
        sig: TensorSig::new("bias", spec.dtype, vec![spec.out_channels, 1, 1]),
        binding: Binding::Input(2),
    };
    let none = Uniforms::new(&[]);
    map_plan(
        &format!("{}_bias", op.name()),
        caps,
        &out,
        &[bias],
        compute_type(spec.dtype),
        (&none, &[]),
        |_, n, v, _| arg(&v, 0, n),
    )
}

#[cfg(test)]
mod tests {
    //! Strided backward-data in chunks of images (the column buffer reused per chunk),
    //! which the table's small batches never need; and the recomputation of NaN sums
    //! over padding on the tile shapes the table's small shapes never select.

    use super::*;
    use crate::conformance::{case_data_from_values, check, check_data, CaseData, Executor};
    use crate::lower::tile::{emit_gemm_with, vector_lanes, Tile};

    use kernelc_ir::interp::HostBuffer;

    struct Chunked {
        caps: TargetCaps,
    }

    impl Executor for Chunked {
        fn name(&self) -> String {
            "one image per chunk".into()
        }
        fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
            let OpSpec::Conv2d(s) = spec else {
                return Err("not a conv".into());
            };
            let g = geometry(s.in_channels, s.out_channels, s.height, s.width, &s.window)
                .map_err(|e| e.to_string())?;
            let mut plan = PlanBuilder::default();
            let per_image = g.patch_rows() as u64 * g.out_pixels() as u64;
            backward_data_cols(
                s,
                &g,
                s.batch as u32,
                spec.name(),
                &self.caps,
                &mut plan,
                per_image,
            )
            .map_err(|e| e.to_string())?;
            let plan = plan.finish();
            if plan.launches.len() != 2 * s.batch {
                return Err(format!(
                    "{} launches for {} images",
                    plan.launches.len(),
                    s.batch
                ));
            }
            crate::conformance::interpret(&plan, spec, inputs)
        }
    }

    #[test]
    fn chunked_backward_data_is_correct() {
        let spec = OpSpec::Conv2d(Conv2dSpec {
            dtype: ScalarType::F32,
            pass: ConvPass::BackwardData,
            batch: 3,
            in_channels: 2,
            out_channels: 3,
            height: 7,
            width: 6,
            window: Window2d {
                kernel: [3, 2],
                stride: [2, 1],
                padding: [1, 0],
            },
            bias: false,
        });
        for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
            let exec = Chunked { caps };
            if let Err(f) = check(&exec, &spec, 3) {
                panic!("{f}");
            }
        }
    }

    /// The implicit passes on a forced tile: `(ty, tx, tm, tn, bk)`, `bm = steps·ty·tm`.
    struct ForcedTile {
        shape: (u32, u32, u32, u32, u32),
        steps: u32,
    }

    impl Executor for ForcedTile {
        fn name(&self) -> String {
            format!("forced tile {:?} × {}", self.shape, self.steps)
        }
        fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
            let OpSpec::Conv2d(s) = spec else {
                return Err("not a conv".into());
            };
            let g = geometry(s.in_channels, s.out_channels, s.height, s.width, &s.window)
                .map_err(|e| e.to_string())?;
            let (batch, name) = (s.batch as u32, spec.name());
            let core = match s.pass {
                ConvPass::Forward => forward(s, &g, batch, name, None),
                ConvPass::BackwardFilter => backward_filter(s, &g, batch, name),
                ConvPass::BackwardData => backward_data_implicit(s, &g, batch, name),
            };
            let caps = TargetCaps::cuda_sm90();
            let lanes = vector_lanes(core.compute(), &caps);
            let tile = Tile::forced(self.shape, self.steps, lanes);
            let mut plan = PlanBuilder::default();
            emit_gemm_with(&core, &caps, tile, &mut plan).map_err(|e| e.to_string())?;
            crate::conformance::interpret(&plan.finish(), spec, inputs)
        }
    }

    /// A padded convolution of `pass` whose second operand (the filter, or dy for
    /// backward-filter) has a few infinities and a NaN, which the padding's zeros
    /// would meet in a tiled sum; the other values finite. (Every pass's reduction a
    /// multiple of 4 — 9·C, 36, 112 — which the warpgroups' packed form needs.)
    fn nan_case(dtype: ScalarType, pass: ConvPass, in_channels: usize) -> (OpSpec, CaseData) {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let spec = OpSpec::Conv2d(Conv2dSpec {
            dtype,
            pass,
            batch: 2,
            in_channels,
            out_channels: 4,
            height: 8,
            width: 7,
            window: Window2d {
                kernel: [3, 3],
                stride: [1, 1],
                padding: [1, 1],
            },
            bias: false,
        });
        let values: Vec<Vec<f64>> = spec
            .inputs()
            .iter()
            .enumerate()
            .map(|(k, sig)| {
                (0..sig.numel())
                    .map(|i| match (k, i % 23) {
                        (1, 0) => inf,
                        (1, 11) => -inf,
                        (1, 17) if i % 2 == 0 => nan,
                        _ => ((i * 7 + k) % 13) as f64 / 4.0 - 1.5,
                    })
                    .collect()
            })
            .collect();
        let data = case_data_from_values(&spec, values);
        (spec, data)
    }

    /// The packed form on warpgroups (`tile/pack.rs`): the padding's zeros in the
    /// packed image meet the filter's infinities, and the NaN sums are recomputed
    /// over the op's own operands, in every pass.
    #[test]
    fn packed_convolutions_recompute_nan_sums_over_their_own_operands() {
        for pass in [
            ConvPass::Forward,
            ConvPass::BackwardData,
            ConvPass::BackwardFilter,
        ] {
            let (spec, data) = nan_case(ScalarType::Bf16, pass, 4);
            schedules_named_conform(&spec, &data, "packed: ");
        }
    }

    /// The channels-last form: the padding, read as zeros by the copies, meets the
    /// filter's infinities; the NaN sums are recomputed over the existing terms.
    #[test]
    fn channels_last_convolutions_recompute_nan_sums_over_padding() {
        let (spec, data) = nan_case(ScalarType::Bf16, ConvPass::Forward, 8);
        schedules_named_conform(&spec, &data, CHANNELS_LAST);
    }

    /// Every schedule `spec` offers on the sm_90 caps whose name starts with `prefix`
    /// (at least one) runs `data` within the table's tolerance in the interpreter.
    fn schedules_named_conform(spec: &OpSpec, data: &CaseData, prefix: &str) {
        use crate::conformance::Interpreter;
        use crate::lower::lower;
        let sm90 = TargetCaps::cuda_sm90();
        let choices = lower(spec, &sm90).unwrap().tunable.unwrap().choices;
        let named: Vec<&String> = choices.iter().filter(|c| c.starts_with(prefix)).collect();
        assert!(!named.is_empty(), "{prefix}: {choices:?}");
        for name in named {
            let caps = TargetCaps {
                schedule: Some(name.clone()),
                ..sm90.clone()
            };
            let exec = Interpreter::new(name, caps);
            if let Err(f) = check_data(&exec, spec, data) {
                panic!("{name}: {spec:?}: {f}");
            }
        }
    }

    #[test]
    fn nan_sums_over_padding_are_recomputed_on_every_tile_shape() {
        // 8 × 8 micro-tiles of 4-lane rows (128 × 128 tiles), and 2 × 2 micro-tiles per
        // invocation (accumulators in shared memory).
        let execs = [
            ForcedTile {
                shape: (16, 16, 8, 8, 8),
                steps: 1,
            },
            ForcedTile {
                shape: (4, 4, 4, 4, 4),
                steps: 2,
            },
        ];
        for pass in [
            ConvPass::Forward,
            ConvPass::BackwardData,
            ConvPass::BackwardFilter,
        ] {
            let (spec, data) = nan_case(ScalarType::F32, pass, 4);
            for exec in &execs {
                if let Err(f) = check_data(exec, &spec, &data) {
                    panic!("{pass:?} on {}: {f}", exec.name());
                }
            }
        }
    }
}
