//! Convolution, im2col/col2im and pooling specs (NCHW).

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{check_dtype, mul, Alias, Family, TensorSig, FLOATS, INDEX};
use crate::error::SpecError;
use crate::shape::{check_dim, check_shape};

/// A 2-D sliding window: `[height, width]` pairs. Zero padding; no dilation.
/// Output size per dimension: `(in + 2·padding − kernel) / stride + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Window2d {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl Window2d {
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

    fn out_or_zero(&self, input: [usize; 2]) -> [usize; 2] {
        self.out_size(input).unwrap_or([0, 0])
    }

    fn validate(&self, input: [usize; 2], pooling: bool) -> Result<(), SpecError> {
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

impl Family for Conv2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("conv2d", self.dtype, FLOATS)?;
        check_shape("input", &self.input_shape())?;
        check_dim("conv2d out_channels", self.out_channels)?;
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
}

/// im2col: patches of `x [N,C,H,W]` as columns,
/// `cols[n, (c·kh + ky)·kw + kx, oy·OW + ox] = x[n, c, oy·sh − ph + ky, ox·sw − pw + kx]`
/// (0 outside the image; rumus' row order). Inputs: `x`. Outputs: `cols
/// [N, C·kh·kw, OH·OW]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Im2colSpec {
    pub dtype: ScalarType,
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
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

impl Family for Im2colSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_patches(
            "im2col",
            self.dtype,
            &[self.batch, self.channels, self.height, self.width],
            &self.window,
        )
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "x",
            self.dtype,
            vec![self.batch, self.channels, self.height, self.width],
        )]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let out = self.window.out_or_zero([self.height, self.width]);
        vec![TensorSig::new(
            "cols",
            self.dtype,
            cols_shape(self.batch, self.channels, &self.window, out),
        )]
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
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub window: Window2d,
    #[serde(default)]
    pub accumulate: bool,
}

impl Family for Col2imSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_patches(
            "col2im",
            self.dtype,
            &[self.batch, self.channels, self.height, self.width],
            &self.window,
        )
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let out = self.window.out_or_zero([self.height, self.width]);
        let image = vec![self.batch, self.channels, self.height, self.width];
        let mut v = vec![TensorSig::new(
            "cols",
            self.dtype,
            cols_shape(self.batch, self.channels, &self.window, out),
        )];
        if self.accumulate {
            v.push(TensorSig::new("prior", self.dtype, image));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "x",
            self.dtype,
            vec![self.batch, self.channels, self.height, self.width],
        )]
    }
    fn aliases(&self) -> Vec<Alias> {
        if self.accumulate {
            vec![Alias {
                input: 1,
                output: 0,
            }]
        } else {
            Vec::new()
        }
    }
}

/// Pooling function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    Max,
    Avg,
}

impl PoolKind {
    fn name(self) -> &'static str {
        match self {
            PoolKind::Max => "max",
            PoolKind::Avg => "avg",
        }
    }
}

/// Max or average pooling of `x [N,C,H,W]` over `window` (zero padding is never the
/// maximum; padding at most half the kernel):
///
/// ```text
/// max: y = max over the in-image window elements; first maximum wins (strict >)
/// avg: y = Σ window / count, count = kh·kw if count_include_pad else in-image elements
/// ```
///
/// With `indices` (max only), also writes the argmax as a flat index within the
/// channel plane, `iy·W + ix` (rumus). Inputs: `x`. Outputs: `y [N,C,OH,OW]`, then
/// `indices` (same shape, that dtype) if set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool2dSpec {
    pub kind: PoolKind,
    pub dtype: ScalarType,
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub window: Window2d,
    #[serde(default)]
    pub count_include_pad: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indices: Option<ScalarType>,
}

impl Pool2dSpec {
    pub fn out_size(&self) -> [usize; 2] {
        self.window.out_or_zero([self.height, self.width])
    }
}

impl Family for Pool2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("pool2d", self.dtype, FLOATS)?;
        check_shape("x", &[self.batch, self.channels, self.height, self.width])?;
        self.window.validate([self.height, self.width], true)?;
        if let Some(t) = self.indices {
            if self.kind != PoolKind::Max {
                return Err(SpecError::bad_attr(
                    "indices",
                    t,
                    "only max pooling writes indices",
                ));
            }
            check_dtype("pool2d indices", t, INDEX)?;
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "x",
            self.dtype,
            vec![self.batch, self.channels, self.height, self.width],
        )]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let [oh, ow] = self.out_size();
        let shape = vec![self.batch, self.channels, oh, ow];
        let mut v = vec![TensorSig::new("y", self.dtype, shape.clone())];
        if let Some(t) = self.indices {
            v.push(TensorSig::new("indices", t, shape));
        }
        v
    }
    fn detail(&self) -> Option<String> {
        Some(format!("pool2d_{}", self.kind.name()))
    }
}

/// Backward of [`Pool2dSpec`]:
///
/// ```text
/// max: dx[n, c, indices[n,c,o]] += dy[n,c,o]   (indices from the forward; window not needed)
/// avg: dx[p] += dy[n,c,o] / count(o) for every in-image p of window o
/// ```
///
/// Max with a `window` routes each index only into its own output's window (where the
/// forward can have written it) and skips others; that lets every input pixel gather
/// its gradient in one race-free pass. Without a window any in-plane index is routed.
///
/// `dx` starts from zeros, or from the prior `dx` with `accumulate` (rumus
/// `max_pool2d_backward` adds into `dst`). Max needs `index_dtype`; avg needs
/// `window` (whose output size must be `out_height × out_width`). Inputs: `dy
/// [N,C,OH,OW]`, then `indices` (max), then `prior [N,C,H,W]` if `accumulate`.
/// Outputs: `dx [N,C,H,W]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool2dBackwardSpec {
    pub kind: PoolKind,
    pub dtype: ScalarType,
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub out_height: usize,
    pub out_width: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window2d>,
    #[serde(default)]
    pub count_include_pad: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_dtype: Option<ScalarType>,
    #[serde(default)]
    pub accumulate: bool,
}

impl Family for Pool2dBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("pool2d_backward", self.dtype, FLOATS)?;
        check_shape("dx", &[self.batch, self.channels, self.height, self.width])?;
        check_shape(
            "dy",
            &[self.batch, self.channels, self.out_height, self.out_width],
        )?;
        if let Some(w) = &self.window {
            w.validate([self.height, self.width], true)?;
            let out = w.out_or_zero([self.height, self.width]);
            if out != [self.out_height, self.out_width] {
                return Err(SpecError::mismatch(
                    "pool2d_backward out_height/out_width vs the window's output size",
                    out.to_vec(),
                    vec![self.out_height, self.out_width],
                ));
            }
        }
        match self.kind {
            PoolKind::Max => match self.index_dtype {
                Some(t) => check_dtype("pool2d_backward indices", t, INDEX),
                None => Err(SpecError::bad_attr(
                    "index_dtype",
                    "none",
                    "max pooling backward reads the forward's indices",
                )),
            },
            PoolKind::Avg => {
                if self.window.is_none() {
                    return Err(SpecError::bad_attr(
                        "window",
                        "none",
                        "average pooling backward needs the window",
                    ));
                }
                if let Some(t) = self.index_dtype {
                    return Err(SpecError::bad_attr(
                        "index_dtype",
                        t,
                        "average pooling has no indices",
                    ));
                }
                Ok(())
            }
        }
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let out = vec![self.batch, self.channels, self.out_height, self.out_width];
        let mut v = vec![TensorSig::new("dy", self.dtype, out.clone())];
        if self.kind == PoolKind::Max {
            v.push(TensorSig::new(
                "indices",
                self.index_dtype.unwrap_or(ScalarType::U32),
                out,
            ));
        }
        if self.accumulate {
            v.push(TensorSig::new(
                "prior",
                self.dtype,
                vec![self.batch, self.channels, self.height, self.width],
            ));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "dx",
            self.dtype,
            vec![self.batch, self.channels, self.height, self.width],
        )]
    }
    fn aliases(&self) -> Vec<Alias> {
        if self.accumulate {
            vec![Alias {
                input: if self.kind == PoolKind::Max { 2 } else { 1 },
                output: 0,
            }]
        } else {
            Vec::new()
        }
    }
    fn detail(&self) -> Option<String> {
        Some(format!("pool2d_backward_{}", self.kind.name()))
    }
}

/// Forward or backward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolPass {
    #[default]
    Forward,
    Backward,
}

/// Adaptive pooling of `x [N,C,H_in,W_in]` to `[N,C,H_out,W_out]`: output `(oy, ox)`
/// pools rows `[⌊oy·H_in/H_out⌋, ⌈(oy+1)·H_in/H_out⌉)` and likewise columns (rumus,
/// PyTorch). Backward (average only): `dx[p] = Σ_{windows o ∋ p} dy[o] / |window o|`.
/// Inputs: `x` (forward) or `dy` (backward). Outputs: `y` or `dx`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdaptivePool2dSpec {
    pub kind: PoolKind,
    #[serde(default)]
    pub pass: PoolPass,
    pub dtype: ScalarType,
    pub batch: usize,
    pub channels: usize,
    pub in_size: [usize; 2],
    pub out_size: [usize; 2],
}

impl AdaptivePool2dSpec {
    fn shape(&self, hw: [usize; 2]) -> Vec<usize> {
        vec![self.batch, self.channels, hw[0], hw[1]]
    }
}

impl Family for AdaptivePool2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("adaptive_pool2d", self.dtype, FLOATS)?;
        check_shape("x", &self.shape(self.in_size))?;
        check_shape("y", &self.shape(self.out_size))?;
        if self.pass == PoolPass::Backward && self.kind == PoolKind::Max {
            return Err(SpecError::bad_attr(
                "kind",
                "max",
                "adaptive pooling backward is defined for avg only",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![match self.pass {
            PoolPass::Forward => TensorSig::new("x", self.dtype, self.shape(self.in_size)),
            PoolPass::Backward => TensorSig::new("dy", self.dtype, self.shape(self.out_size)),
        }]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![match self.pass {
            PoolPass::Forward => TensorSig::new("y", self.dtype, self.shape(self.out_size)),
            PoolPass::Backward => TensorSig::new("dx", self.dtype, self.shape(self.in_size)),
        }]
    }
    fn detail(&self) -> Option<String> {
        Some(match self.pass {
            PoolPass::Forward => format!("adaptive_pool2d_{}", self.kind.name()),
            PoolPass::Backward => format!("adaptive_pool2d_backward_{}", self.kind.name()),
        })
    }
}
