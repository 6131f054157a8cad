//! Spec of the image-filter family.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{cases, condition, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::Uniform;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, check_finite, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// Which filter. The formulas are in [`crate::ops::image`].
/// "Colour channels" are the first `min(C, 3)`; a fourth (alpha) channel is copied.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFilter {
    /// Separable Gaussian, taps `t ∈ [−radius, radius]`, weights `e^{−t²/2σ²}`
    /// normalised to sum 1, clamp-to-edge, per colour channel.
    GaussianBlur {
        #[serde(with = "crate::spec::exact_f64")]
        sigma: f64,
        radius: usize,
    },
    /// Sobel gradient magnitude of the luma, `1` where `> threshold` else `0`, written
    /// to every colour channel; clamp-to-edge.
    Sobel {
        #[serde(with = "crate::spec::exact_f64")]
        threshold: f64,
    },
    /// Luma `0.299 R + 0.587 G + 0.114 B` written to R, G and B (needs 3 or 4 channels).
    Grayscale,
    /// `x ≥ value ? 1 : 0`.
    Threshold {
        #[serde(with = "crate::spec::exact_f64")]
        value: f64,
    },
    /// `clamp(x · factor, 0, 1)` (multiplicative, as rustd).
    Brightness {
        #[serde(with = "crate::spec::exact_f64")]
        factor: f64,
    },
    /// `clamp((x − 0.5) · factor + 0.5, 0, 1)`.
    Contrast {
        #[serde(with = "crate::spec::exact_f64")]
        factor: f64,
    },
    /// `1 − x`.
    Invert,
    /// 3×3 kernel `[0 −1 0; −1 5 −1; 0 −1 0]`, clamp-to-edge, result clamped to `[0, 1]`.
    Sharpen,
}

impl ImageFilter {
    pub fn name(&self) -> &'static str {
        match self {
            ImageFilter::GaussianBlur { .. } => "gaussian_blur",
            ImageFilter::Sobel { .. } => "sobel",
            ImageFilter::Grayscale => "grayscale",
            ImageFilter::Threshold { .. } => "threshold",
            ImageFilter::Brightness { .. } => "brightness",
            ImageFilter::Contrast { .. } => "contrast",
            ImageFilter::Invert => "invert",
            ImageFilter::Sharpen => "sharpen",
        }
    }
}

/// An image filter on `image [height, width, channels]` (row-major HWC, channels 1, 3
/// or 4). Inputs: `image`. Outputs: `out` (same shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageFilterSpec {
    pub filter: ImageFilter,
    pub dtype: ScalarType,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl ImageFilterSpec {
    fn shape(&self) -> Vec<usize> {
        vec![self.height, self.width, self.channels]
    }
}

impl Op for ImageFilterSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("image_filter", self.dtype, FLOATS)?;
        check_shape("image", &self.shape())?;
        if !matches!(self.channels, 1 | 3 | 4) {
            return Err(SpecError::bad_attr(
                "channels",
                self.channels,
                "must be 1, 3 or 4",
            ));
        }
        match self.filter {
            ImageFilter::GaussianBlur { sigma, radius } => {
                if !(sigma.is_finite() && sigma > 0.0) {
                    return Err(SpecError::bad_attr(
                        "sigma",
                        sigma,
                        "must be finite and > 0",
                    ));
                }
                if radius > 64 {
                    return Err(SpecError::bad_attr("radius", radius, "must be at most 64"));
                }
            }
            ImageFilter::Grayscale => {
                if self.channels < 3 {
                    return Err(SpecError::bad_attr(
                        "channels",
                        self.channels,
                        "grayscale needs RGB (3 or 4 channels)",
                    ));
                }
            }
            ImageFilter::Sobel { threshold } => check_finite("threshold", threshold)?,
            ImageFilter::Threshold { value } => check_finite("value", value)?,
            ImageFilter::Brightness { factor } | ImageFilter::Contrast { factor } => {
                check_finite("factor", factor)?
            }
            ImageFilter::Invert | ImageFilter::Sharpen => {}
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("image", self.dtype, self.shape())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.dtype, self.shape())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("image_filter_{}", self.filter.name()))
    }
    /// Threshold's value and sobel's threshold as the compute-type constants that make
    /// the comparison exact; brightness and contrast's factor. A blur's `sigma` and
    /// `radius` shape its stencil and weights and stay in the cache key.
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        match self.filter {
            ImageFilter::Threshold { value } => {
                vec![Uniform::new("threshold", ty, ge_threshold(ty, value))]
            }
            ImageFilter::Sobel { threshold } => {
                vec![Uniform::new("threshold", ty, gt_threshold(ty, threshold))]
            }
            ImageFilter::Brightness { factor } | ImageFilter::Contrast { factor } => {
                vec![Uniform::new("factor", ty, factor)]
            }
            ImageFilter::GaussianBlur { .. }
            | ImageFilter::Grayscale
            | ImageFilter::Invert
            | ImageFilter::Sharpen => Vec::new(),
        }
    }
    fn structural(&self) -> Self {
        let filter = match self.filter {
            ImageFilter::Threshold { .. } => ImageFilter::Threshold { value: 0.0 },
            ImageFilter::Sobel { .. } => ImageFilter::Sobel { threshold: 0.0 },
            ImageFilter::Brightness { .. } => ImageFilter::Brightness { factor: 0.0 },
            ImageFilter::Contrast { .. } => ImageFilter::Contrast { factor: 0.0 },
            other @ (ImageFilter::GaussianBlur { .. }
            | ImageFilter::Grayscale
            | ImageFilter::Invert
            | ImageFilter::Sharpen) => other,
        };
        ImageFilterSpec {
            filter,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::image_filter(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::image_filter(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::image_filter(self, caps)
    }

    /// Pointwise filters: pieces of rows. Neighbourhood filters: windows of rows
    /// with their halo (module `large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        match self.filter {
            ImageFilter::GaussianBlur { radius, .. } => {
                Some(super::large::neighbourhood(self, caps, radius))
            }
            ImageFilter::Sobel { .. } | ImageFilter::Sharpen => {
                Some(super::large::neighbourhood(self, caps, 1))
            }
            ImageFilter::Grayscale
            | ImageFilter::Threshold { .. }
            | ImageFilter::Brightness { .. }
            | ImageFilter::Contrast { .. }
            | ImageFilter::Invert => {
                // Pieces of rows; of pixels (as one-pixel-wide rows) where one row
                // passes the limit: each pixel is filtered on its own.
                let split = |height: usize, width: usize| {
                    crate::lower::split::split_rows_of(
                        self,
                        "image_filter",
                        caps,
                        height,
                        &[],
                        |r| {
                            ImageFilterSpec {
                                height: r,
                                width,
                                ..self.clone()
                            }
                            .into()
                        },
                    )
                };
                Some(split(self.height, self.width).or_else(|_| split(self.height * self.width, 1)))
            }
        }
    }
    fn cases() -> Vec<Self> {
        cases::image()
    }
    fn tolerance(&self) -> Tolerance {
        match self.filter {
            ImageFilter::Threshold { .. } | ImageFilter::Invert => Tolerance::EXACT,
            // Exact, but where the magnitude is within its rounding of the threshold
            // (module `condition`): a flip is then right.
            ImageFilter::Sobel { .. } => Tolerance::conditioned(1.0),
            // The sums of magnitudes of the weighted taps (module `condition`).
            ImageFilter::GaussianBlur { .. }
            | ImageFilter::Sharpen
            | ImageFilter::Grayscale
            | ImageFilter::Brightness { .. }
            | ImageFilter::Contrast { .. } => Tolerance::conditioned(1.0),
        }
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() {
            Domain::Real(0.0, 1.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        ImageFilterSpec {
            filter: ImageFilter::Sobel { threshold: 0.5 },
            dtype: ScalarType::F32,
            height: 6,
            width: 5,
            channels: 3,
        }
    }
}

/// The least f32 `c` with `c ≥ v`, so that `x ≥ v ⇔ x ≥ c` for every f32 `x`
/// (f16/bf16 values widen to f32 exactly). f64 compares exactly.
fn ge_threshold(ty: ScalarType, v: f64) -> f64 {
    if ty == ScalarType::F64 {
        return v;
    }
    let c = v as f32;
    if (c as f64) < v {
        next_f32(c, true) as f64
    } else {
        c as f64
    }
}

/// The greatest f32 `c` with `c ≤ v`, so that `x > v ⇔ x > c` for every f32 `x`.
fn gt_threshold(ty: ScalarType, v: f64) -> f64 {
    if ty == ScalarType::F64 {
        return v;
    }
    let c = v as f32;
    if (c as f64) > v {
        next_f32(c, false) as f64
    } else {
        c as f64
    }
}

/// The neighbouring f32 above (`up`) or below a non-NaN `c`.
fn next_f32(c: f32, up: bool) -> f32 {
    if c == 0.0 {
        let tiny = f32::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    if c.is_infinite() && (c > 0.0) == up {
        return c;
    }
    // Away from zero is +1 on the bits; toward zero is -1.
    let away = (c > 0.0) == up;
    let bits = c.to_bits();
    f32::from_bits(if away { bits + 1 } else { bits - 1 })
}
