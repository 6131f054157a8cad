//! Specs of the convolution family.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, lower, reference};
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, mul, Alias, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// The sizes of an NCHW image. Ops embed it flattened: its fields are the op's own
/// JSON fields `batch`, `channels`, `height`, `width`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nchw {
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl Nchw {
    /// The image as `batch · channels` one-channel images: what an op computing each
    /// channel plane on its own splits into where one item passes one kernel's
    /// indices (the planes lie in the same order).
    pub fn planes(self) -> Nchw {
        Nchw {
            batch: self.batch * self.channels,
            channels: 1,
            ..self
        }
    }

    /// The same image sizes with `batch` items (a piece of a split op).
    pub fn with_batch(self, batch: usize) -> Nchw {
        Nchw { batch, ..self }
    }

    /// The image of sizes `[N, C, H, W]`.
    pub fn new([batch, channels, height, width]: [usize; 4]) -> Nchw {
        Nchw {
            batch,
            channels,
            height,
            width,
        }
    }

    /// `[N, C, H, W]`.
    pub fn shape(&self) -> Vec<usize> {
        vec![self.batch, self.channels, self.height, self.width]
    }

    /// `[H, W]`.
    pub fn plane(&self) -> [usize; 2] {
        [self.height, self.width]
    }
}

/// A 2-D sliding window: `[height, width]` pairs. Zero padding; no dilation.
/// Output size per dimension: `(in + 2·padding − kernel) / stride + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Window2d {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl Window2d {
    /// A window of `kernel` taps, `stride` and `padding` (`[height, width]` each).
    pub fn new(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Window2d {
        Window2d {
            kernel,
            stride,
            padding,
        }
    }

    /// The input coordinate read by output `o` at kernel tap `t` along dimension `d`
    /// (0 = height, 1 = width) of an input `size` long, or `None` in the padding.
    pub fn tap(&self, d: usize, o: usize, t: usize, size: usize) -> Option<usize> {
        let pos = (o * self.stride[d] + t) as i64 - self.padding[d] as i64;
        if pos >= 0 && (pos as usize) < size {
            Some(pos as usize)
        } else {
            None
        }
    }

    /// A square window with equal stride and padding in both dimensions (rumus style).
    pub fn square(kernel: usize, stride: usize, padding: usize) -> Window2d {
        Window2d {
            kernel: [kernel, kernel],
            stride: [stride, stride],
            padding: [padding, padding],
        }
    }

    /// Output `[height, width]` for an input `[height, width]`, or `None` when the
    /// window does not fit (zero kernel or stride, kernel larger than padded input).
    pub fn out_size(&self, input: [usize; 2]) -> Option<[usize; 2]> {
        let mut out = [0; 2];
        for d in 0..2 {
            let padded = input[d].checked_add(self.padding[d].checked_mul(2)?)?;
            if self.stride[d] == 0 || self.kernel[d] == 0 || padded < self.kernel[d] {
                return None;
            }
            out[d] = (padded - self.kernel[d]) / self.stride[d] + 1;
        }
        Some(out)
    }

    pub(crate) fn out_or_zero(&self, input: [usize; 2]) -> [usize; 2] {
        self.out_size(input).unwrap_or([0, 0])
    }

    pub(crate) fn validate(&self, input: [usize; 2], pooling: bool) -> Result<(), SpecError> {
        for d in 0..2 {
            let axis = ["height", "width"][d];
            if self.kernel[d] == 0 {
                return Err(SpecError::bad_attr(
                    &format!("kernel[{d}]"),
                    0,
                    "must be at least 1",
                ));
            }
            if self.stride[d] == 0 {
                return Err(SpecError::bad_attr(
                    &format!("stride[{d}]"),
                    0,
                    "must be at least 1",
                ));
            }
            if pooling && self.padding[d] > self.kernel[d] / 2 {
                return Err(SpecError::bad_attr(
                    &format!("padding[{d}]"),
                    self.padding[d],
                    &format!(
                        "pooling padding must be at most half the kernel ({})",
                        self.kernel[d] / 2
                    ),
                ));
            }
            let padded = input[d] as u128 + 2 * self.padding[d] as u128;
            if pooling && input[d] == 0 && padded >= self.kernel[d] as u128 {
                return Err(SpecError::bad_attr(
                    &format!("padding[{d}]"),
                    self.padding[d],
                    &format!("pools an empty image {axis}: every window sees only padding"),
                ));
            }
            if padded < self.kernel[d] as u128 {
                return Err(SpecError::bad_attr(
                    &format!("kernel[{d}]"),
                    self.kernel[d],
                    &format!(
                        "larger than the padded input {axis} {padded} (input {} + 2·{})",
                        input[d], self.padding[d]
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Which pass of a convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvPass {
    #[default]
    Forward,
    /// Gradient with respect to the input.
    BackwardData,
    /// Gradient with respect to the filter.
    BackwardFilter,
}

/// 2-D convolution (cross-correlation, no filter flip), NCHW input, KCHW filter:
///
/// ```text
/// out[n,k,oy,ox] = Σ_{c,ky,kx} x[n, c, oy·sh − ph + ky, ox·sw − pw + kx] · w[k,c,ky,kx] (+ bias[k])
/// ```
///
/// out-of-range input positions reading 0. `backward_data` computes `dx` (the adjoint
/// in `x`), `backward_filter` computes `dw` (the adjoint in `w`).
/// Inputs / outputs per pass:
/// forward: `input [N,C,H,W]`, `filter [K,C,kh,kw]`, `bias [K]` if set → `output [N,K,OH,OW]`;
/// backward_data: `grad_output`, `filter` → `grad_input`;
/// backward_filter: `input`, `grad_output` → `grad_filter`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conv2dSpec {
    pub dtype: ScalarType,
    #[serde(default)]
    pub pass: ConvPass,
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub height: usize,
    pub width: usize,
    pub window: Window2d,
    #[serde(default)]
    pub bias: bool,
}

impl Conv2dSpec {
    /// `[OH, OW]`.
    pub fn out_size(&self) -> [usize; 2] {
        self.window.out_or_zero([self.height, self.width])
    }
    fn input_shape(&self) -> Vec<usize> {
        vec![self.batch, self.in_channels, self.height, self.width]
    }
    fn output_shape(&self) -> Vec<usize> {
        let [oh, ow] = self.out_size();
        vec![self.batch, self.out_channels, oh, ow]
    }
    fn filter_shape(&self) -> Vec<usize> {
        vec![
            self.out_channels,
            self.in_channels,
            self.window.kernel[0],
            self.window.kernel[1],
        ]
    }
}

impl Op for Conv2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("conv2d", self.dtype, FLOATS)?;
        check_shape("input", &self.input_shape())?;

        self.window.validate([self.height, self.width], false)?;
        check_shape("filter", &self.filter_shape())?;
        check_shape("output", &self.output_shape())?;
        if self.bias && self.pass != ConvPass::Forward {
            return Err(SpecError::bad_attr(
                "bias",
                true,
                "only the forward pass takes a bias",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let t = self.dtype;
        match self.pass {
            ConvPass::Forward => {
                let mut v = vec![
                    TensorSig::new("input", t, self.input_shape()),
                    TensorSig::new("filter", t, self.filter_shape()),
                ];
                if self.bias {
                    v.push(TensorSig::new("bias", t, vec![self.out_channels]));
                }
                v
            }
            ConvPass::BackwardData => vec![
                TensorSig::new("grad_output", t, self.output_shape()),
                TensorSig::new("filter", t, self.filter_shape()),
            ],
            ConvPass::BackwardFilter => vec![
                TensorSig::new("input", t, self.input_shape()),
                TensorSig::new("grad_output", t, self.output_shape()),
            ],
        }
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let t = self.dtype;
        vec![match self.pass {
            ConvPass::Forward => TensorSig::new("output", t, self.output_shape()),
            ConvPass::BackwardData => TensorSig::new("grad_input", t, self.input_shape()),
            ConvPass::BackwardFilter => TensorSig::new("grad_filter", t, self.filter_shape()),
        }]
    }
    fn detail(&self) -> Option<String> {
        Some(
            match self.pass {
                ConvPass::Forward => "conv2d",
                ConvPass::BackwardData => "conv2d_backward_data",
                ConvPass::BackwardFilter => "conv2d_backward_filter",
            }
            .to_string(),
        )
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::conv2d(self, i)
    }
    /// Sums of nothing: a forward pass without input channels (or whose windows see
    /// only padding) is its bias, or zeros; a data gradient without output channels
    /// and a filter gradient without a batch are zeros.
    fn lower_empty(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        if self.pass == ConvPass::Forward && self.bias {
            return lower::bias_only(self, caps);
        }
        Ok(Plan::filled(0, Scalar::zero(self.dtype)))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::conv2d(self, caps)
    }

    /// Pieces of the batch, filter and bias whole (the filter gradient sums the
    /// pieces' partials); an item past the limit in blocks of output channels
    /// (forward, filter gradient) or input channels (data gradient).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let by_batch = crate::lower::split::split_rows_summing(
            self,
            "conv2d",
            caps,
            self.batch,
            &["filter", "bias"],
            &["grad_filter"],
            |_, r| {
                Conv2dSpec {
                    batch: r,
                    ..self.clone()
                }
                .into()
            },
        );
        // A narrow filter gradient sums the items in f32 (the batch's pieces would
        // round their partial sums to the dtype).
        let narrow = crate::lower::math::compute_type(self.dtype) != self.dtype;
        if self.pass == ConvPass::BackwardFilter && narrow {
            return Some(super::large::filter_grad_by_out_channels(self, caps));
        }
        Some(match by_batch {
            Err(LowerError::TooLarge { .. }) if self.pass == ConvPass::Forward => {
                super::large::by_out_channels(self, caps)
            }
            Err(LowerError::TooLarge { .. }) if self.pass == ConvPass::BackwardData => {
                super::large::by_in_channels(self, caps)
            }
            Err(LowerError::TooLarge { .. }) if self.pass == ConvPass::BackwardFilter => {
                super::large::filter_grad_by_out_channels(self, caps)
            }
            other => other,
        })
    }
    fn cases() -> Vec<Self> {
        cases::conv_cases()
    }
    fn tolerance(&self) -> Tolerance {
        let [kh, kw] = self.window.kernel;
        let len = match self.pass {
            ConvPass::Forward => self.in_channels * kh * kw + 1,
            ConvPass::BackwardData => self.out_channels * kh * kw,
            ConvPass::BackwardFilter => self.batch * self.height * self.width,
        };
        Tolerance::accumulated(len)
    }
    fn example() -> Self {
        Conv2dSpec {
            dtype: ScalarType::F32,
            pass: ConvPass::Forward,
            batch: 1,
            in_channels: 2,
            out_channels: 3,
            height: 5,
            width: 5,
            window: Window2d::square(3, 1, 1),
            bias: true,
        }
    }
}

/// im2col: patches of `x [N,C,H,W]` as columns,
/// `cols[n, (c·kh + ky)·kw + kx, oy·OW + ox] = x[n, c, oy·sh − ph + ky, ox·sw − pw + kx]`
/// (0 outside the image; rumus' row order). Inputs: `x`. Outputs: `cols
/// [N, C·kh·kw, OH·OW]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Im2colSpec {
    pub dtype: ScalarType,
    #[serde(flatten)]
    pub image: Nchw,
    pub window: Window2d,
}

fn cols_shape(batch: usize, channels: usize, window: &Window2d, out: [usize; 2]) -> Vec<usize> {
    vec![
        batch,
        mul(mul(channels, window.kernel[0]), window.kernel[1]),
        mul(out[0], out[1]),
    ]
}

fn validate_patches(
    op: &str,
    dtype: ScalarType,
    image: &[usize],
    window: &Window2d,
) -> Result<(), SpecError> {
    check_dtype(op, dtype, FLOATS)?;
    check_shape("x", image)?;
    window.validate([image[2], image[3]], false)?;
    let out = window.out_or_zero([image[2], image[3]]);
    check_shape("cols", &cols_shape(image[0], image[1], window, out))
}

impl Op for Im2colSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_patches("im2col", self.dtype, &self.image.shape(), &self.window)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.image.shape())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let out = self
            .window
            .out_or_zero([self.image.height, self.image.width]);
        vec![TensorSig::new(
            "cols",
            self.dtype,
            cols_shape(self.image.batch, self.image.channels, &self.window, out),
        )]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::im2col(self, i)
    }
    /// An empty image whose windows reach into the padding: every tap is padding,
    /// zeros.
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(Plan::filled(0, Scalar::zero(self.dtype)))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::im2col(self, caps)
    }

    /// Pieces of the batch.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let split = |image: Nchw| {
            crate::lower::split::split_rows_of(self, "im2col", caps, image.batch, &[], |r| {
                Im2colSpec {
                    image: image.with_batch(r),
                    ..self.clone()
                }
                .into()
            })
        };
        // Channels are independent: pieces of planes where an item passes the limit.
        Some(split(self.image).or_else(|_| split(self.image.planes())))
    }
    fn cases() -> Vec<Self> {
        cases::im2col_cases()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn example() -> Self {
        Im2colSpec {
            dtype: ScalarType::F32,
            image: Nchw::new([1, 2, 4, 4]),
            window: Window2d::square(3, 1, 1),
        }
    }
}

/// col2im, the adjoint of im2col: every column entry is added back to the image
/// position it was read from (overlaps add up; padding entries are dropped). With
/// `accumulate` the image starts from the prior `x` (rumus adds into `dst`).
/// Inputs: `cols [N, C·kh·kw, OH·OW]`, then `prior [N,C,H,W]` if `accumulate`.
/// Outputs: `x [N,C,H,W]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Col2imSpec {
    pub dtype: ScalarType,
    #[serde(flatten)]
    pub image: Nchw,
    pub window: Window2d,
    #[serde(default)]
    pub accumulate: bool,
}

impl Op for Col2imSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_patches("col2im", self.dtype, &self.image.shape(), &self.window)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let out = self
            .window
            .out_or_zero([self.image.height, self.image.width]);
        let image = self.image.shape();
        let mut v = vec![TensorSig::new(
            "cols",
            self.dtype,
            cols_shape(self.image.batch, self.image.channels, &self.window, out),
        )];
        if self.accumulate {
            v.push(TensorSig::new("prior", self.dtype, image));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.image.shape())]
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(self.accumulate, 1)
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::col2im(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::col2im(self, caps)
    }

    /// Pieces of the batch.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let split = |image: Nchw| {
            crate::lower::split::split_rows_of(self, "col2im", caps, image.batch, &[], |r| {
                Col2imSpec {
                    image: image.with_batch(r),
                    ..self.clone()
                }
                .into()
            })
        };
        // Channels are independent: pieces of planes where an item passes the limit.
        Some(split(self.image).or_else(|_| split(self.image.planes())))
    }
    fn cases() -> Vec<Self> {
        cases::col2im_cases()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::accumulated(self.window.kernel[0] * self.window.kernel[1] + 1)
    }
    fn example() -> Self {
        Col2imSpec {
            dtype: ScalarType::F32,
            image: Nchw::new([1, 2, 4, 4]),
            window: Window2d::square(3, 1, 1),
            accumulate: false,
        }
    }
}
