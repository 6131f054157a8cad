//! Specs of the pooling family.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, lower, reference};
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, Prefill, PrefillSource, TargetCaps};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, Alias, TensorSig, FLOATS, INDEX};
use crate::spec::{Nchw, Window2d};
use crate::tolerance::Tolerance;

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
    #[serde(flatten)]
    pub image: Nchw,
    pub window: Window2d,
    #[serde(default)]
    pub count_include_pad: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indices: Option<ScalarType>,
}

impl Pool2dSpec {
    pub fn out_size(&self) -> [usize; 2] {
        self.window
            .out_or_zero([self.image.height, self.image.width])
    }
}

impl Op for Pool2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("pool2d", self.dtype, FLOATS)?;
        check_shape("x", &self.image.shape())?;
        self.window
            .validate([self.image.height, self.image.width], true)?;
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
        vec![TensorSig::new("x", self.dtype, self.image.shape())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let [oh, ow] = self.out_size();
        let shape = vec![self.image.batch, self.image.channels, oh, ow];
        let mut v = vec![TensorSig::new("y", self.dtype, shape.clone())];
        if let Some(t) = self.indices {
            v.push(TensorSig::new("indices", t, shape));
        }
        v
    }
    fn detail(&self) -> Option<String> {
        Some(format!("pool2d_{}", self.kind.name()))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::pool2d(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::pool2d(self, caps)
    }

    /// Pieces of the batch.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let split = |image: Nchw| {
            crate::lower::split::split_rows_of(self, "pool2d", caps, image.batch, &[], |r| {
                Pool2dSpec {
                    image: image.with_batch(r),
                    ..self.clone()
                }
                .into()
            })
        };
        // Planes are pooled on their own: pieces of them where an item passes the
        // limit (indices count within a plane).
        Some(split(self.image).or_else(|_| split(self.image.planes())))
    }
    fn cases() -> Vec<Self> {
        cases::pool2d()
    }
    fn tolerance(&self) -> Tolerance {
        match self.kind {
            PoolKind::Max => Tolerance::EXACT,
            PoolKind::Avg => {
                // The window's taps and the division.
                Tolerance::accumulated(self.window.kernel[0] * self.window.kernel[1] + 1)
            }
        }
    }
    fn example() -> Self {
        Pool2dSpec {
            kind: PoolKind::Max,
            dtype: ScalarType::F32,
            image: Nchw::new([1, 2, 4, 4]),
            window: Window2d::square(2, 2, 0),
            count_include_pad: false,
            indices: Some(ScalarType::U32),
        }
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
    #[serde(flatten)]
    pub image: Nchw,
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

impl Op for Pool2dBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("pool2d_backward", self.dtype, FLOATS)?;
        check_shape("dx", &self.image.shape())?;
        check_shape(
            "dy",
            &[
                self.image.batch,
                self.image.channels,
                self.out_height,
                self.out_width,
            ],
        )?;
        if let Some(w) = &self.window {
            w.validate([self.image.height, self.image.width], true)?;
            let out = w.out_or_zero([self.image.height, self.image.width]);
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
        let out = vec![
            self.image.batch,
            self.image.channels,
            self.out_height,
            self.out_width,
        ];
        let mut v = vec![TensorSig::new("dy", self.dtype, out.clone())];
        if self.kind == PoolKind::Max {
            v.push(TensorSig::new(
                "indices",
                self.index_dtype.unwrap_or(ScalarType::U32),
                out,
            ));
        }
        if self.accumulate {
            v.push(TensorSig::new("prior", self.dtype, self.image.shape()));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("dx", self.dtype, self.image.shape())]
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(
            self.accumulate,
            if self.kind == PoolKind::Max { 2 } else { 1 },
        )
    }
    fn detail(&self) -> Option<String> {
        Some(format!("pool2d_backward_{}", self.kind.name()))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::pool2d_backward(self, i)
    }
    /// No output gradient: nothing is routed back, so `dx` is zeros (or the prior).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        if self.accumulate {
            let prior = if self.kind == PoolKind::Max { 2 } else { 1 };
            return Ok(Plan::prefilled(vec![Prefill {
                output: 0,
                source: PrefillSource::Input(prior),
            }]));
        }
        Ok(Plan::filled(0, Scalar::zero(self.dtype)))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::pool2d_backward(self, caps)
    }

    /// Pieces of the batch.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let split = |image: Nchw| {
            crate::lower::split::split_rows_of(
                self,
                "pool2d_backward",
                caps,
                image.batch,
                &[],
                |r| {
                    Pool2dBackwardSpec {
                        image: image.with_batch(r),
                        ..self.clone()
                    }
                    .into()
                },
            )
        };
        // Planes are pooled on their own: pieces of them where an item passes the
        // limit (indices count within a plane).
        Some(split(self.image).or_else(|_| split(self.image.planes())))
    }
    fn cases() -> Vec<Self> {
        cases::pool2d_backward()
    }
    fn tolerance(&self) -> Tolerance {
        // Terms per input pixel: the windows that cover it (at most the window's size
        // of them); without a window, any output may route to it. Plus the prior `dx`.
        let taps = self.window.map_or(self.out_height * self.out_width, |w| {
            w.kernel[0] * w.kernel[1]
        });
        Tolerance::accumulated(taps + 1)
    }
    fn special_input(&self, k: usize, seed: u64) -> Option<Vec<f64>> {
        cases::pool_indices(self, k, seed)
    }
    fn example() -> Self {
        Pool2dBackwardSpec {
            kind: PoolKind::Max,
            dtype: ScalarType::F32,
            image: Nchw::new([1, 2, 4, 4]),
            out_height: 2,
            out_width: 2,
            window: None,
            count_include_pad: false,
            index_dtype: Some(ScalarType::U32),
            accumulate: false,
        }
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

impl Op for AdaptivePool2dSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("adaptive_pool2d", self.dtype, FLOATS)?;
        check_shape("x", &self.shape(self.in_size))?;
        check_shape("y", &self.shape(self.out_size))?;
        if self.pass == PoolPass::Forward
            && self.in_size.contains(&0)
            && !self.out_size.contains(&0)
        {
            return Err(SpecError::bad_attr(
                "in_size",
                format!("{:?}", self.in_size),
                &format!(
                    "adaptive pooling of an empty image to {:?}: every window is empty",
                    self.out_size
                ),
            ));
        }
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
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::adaptive_pool2d(self, i)
    }
    /// Backward from no output pixels: nothing is routed back, `dx` is zeros (the
    /// forward from an empty image is refused by `validate`).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(Plan::filled(0, Scalar::zero(self.dtype)))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::adaptive_pool2d(self, caps)
    }

    /// Pieces of the batch.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let split = |(batch, channels): (usize, usize)| {
            crate::lower::split::split_rows_of(self, "adaptive_pool2d", caps, batch, &[], |r| {
                AdaptivePool2dSpec {
                    batch: r,
                    channels,
                    ..self.clone()
                }
                .into()
            })
        };
        // Planes are pooled on their own: pieces of them where an item passes the limit.
        let planes = (self.batch * self.channels, 1);
        Some(split((self.batch, self.channels)).or_else(|_| split(planes)))
    }
    fn cases() -> Vec<Self> {
        cases::adaptive_pool2d()
    }
    fn tolerance(&self) -> Tolerance {
        match self.kind {
            PoolKind::Max if self.pass == PoolPass::Forward => Tolerance::EXACT,
            _ => {
                // Terms per element: a forward window spans at most ⌈in/out⌉ + 1 inputs
                // per axis; a backward pixel lies in at most ⌈out/in⌉ + 1 windows per
                // axis (more than the forward count when upsampling).
                let per_axis = |d: usize| {
                    let (i, o) = (self.in_size[d].max(1), self.out_size[d].max(1));
                    match self.pass {
                        PoolPass::Forward => i.div_ceil(o) + 1,
                        PoolPass::Backward => o.div_ceil(i) + 1,
                    }
                };
                Tolerance::accumulated(per_axis(0) * per_axis(1) + 1)
            }
        }
    }
    fn example() -> Self {
        AdaptivePool2dSpec {
            kind: PoolKind::Avg,
            pass: PoolPass::Forward,
            dtype: ScalarType::F32,
            batch: 1,
            channels: 2,
            in_size: [5, 7],
            out_size: [2, 3],
        }
    }
}
