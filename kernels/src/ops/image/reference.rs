//! f64 reference of the image filters (formulas in [`super`]).

use super::spec::{ImageFilter, ImageFilterSpec};
use crate::reference::attribute;

/// Rec. 601 luma weights.
pub const LUMA: [f64; 3] = [0.299, 0.587, 0.114];

/// The normalised 1-D Gaussian taps for offsets `−radius..=radius`.
pub fn gaussian_weights(sigma: f64, radius: usize) -> Vec<f64> {
    let r = radius as i64;
    let raw: Vec<f64> = (-r..=r)
        .map(|t| (-((t * t) as f64) / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = raw.iter().sum();
    raw.into_iter().map(|w| w / sum).collect()
}

struct Img<'a> {
    data: &'a [f64],
    h: usize,
    w: usize,
    c: usize,
}

impl Img<'_> {
    /// Pixel channel `ch` at `(y, x)` with clamp-to-edge coordinates.
    fn px(&self, y: i64, x: i64, ch: usize) -> f64 {
        let yy = y.clamp(0, self.h as i64 - 1) as usize;
        let xx = x.clamp(0, self.w as i64 - 1) as usize;
        self.data[(yy * self.w + xx) * self.c + ch]
    }

    fn luma(&self, y: i64, x: i64) -> f64 {
        if self.c == 1 {
            self.px(y, x, 0)
        } else {
            (0..3).map(|ch| LUMA[ch] * self.px(y, x, ch)).sum()
        }
    }
}

pub(super) fn image_filter(s: &ImageFilterSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let img = Img {
        data: i[0],
        h: s.height,
        w: s.width,
        c: s.channels,
    };
    let colour = s.channels.min(3);
    let mut out = i[0].to_vec();
    let weights = match s.filter {
        ImageFilter::GaussianBlur { sigma, radius } => gaussian_weights(sigma, radius),
        ImageFilter::Grayscale
        | ImageFilter::Threshold { .. }
        | ImageFilter::Brightness { .. }
        | ImageFilter::Contrast { .. }
        | ImageFilter::Invert
        | ImageFilter::Sharpen
        | ImageFilter::Sobel { .. } => Vec::new(),
    };
    for y in 0..s.height {
        for x in 0..s.width {
            let (yi, xi) = (y as i64, x as i64);
            let base = (y * s.width + x) * s.channels;
            let edge = if let ImageFilter::Sobel { threshold } = s.filter {
                let l = |dy: i64, dx: i64| img.luma(yi + dy, xi + dx);
                let gx =
                    -l(-1, -1) + l(-1, 1) - 2.0 * l(0, -1) + 2.0 * l(0, 1) - l(1, -1) + l(1, 1);
                let gy =
                    -l(-1, -1) - 2.0 * l(-1, 0) - l(-1, 1) + l(1, -1) + 2.0 * l(1, 0) + l(1, 1);
                if (gx * gx + gy * gy).sqrt() > threshold {
                    1.0
                } else {
                    0.0
                }
            } else {
                0.0
            };
            let luma = if colour == 3 { img.luma(yi, xi) } else { 0.0 };
            for ch in 0..colour {
                let v = img.px(yi, xi, ch);
                out[base + ch] = match s.filter {
                    ImageFilter::GaussianBlur { radius, .. } => {
                        let r = radius as i64;
                        let mut acc = 0.0;
                        for (a, wy) in weights.iter().enumerate() {
                            for (b, wx) in weights.iter().enumerate() {
                                acc += wy * wx * img.px(yi + a as i64 - r, xi + b as i64 - r, ch);
                            }
                        }
                        acc
                    }
                    ImageFilter::Sobel { .. } => edge,
                    ImageFilter::Grayscale => luma,
                    ImageFilter::Threshold { value } => {
                        if v >= value {
                            1.0
                        } else {
                            0.0
                        }
                    }
                    ImageFilter::Brightness { factor } => {
                        (v * attribute(s.dtype, factor)).clamp(0.0, 1.0)
                    }
                    ImageFilter::Contrast { factor } => {
                        ((v - 0.5) * attribute(s.dtype, factor) + 0.5).clamp(0.0, 1.0)
                    }
                    ImageFilter::Invert => 1.0 - v,
                    ImageFilter::Sharpen => (5.0 * v
                        - img.px(yi - 1, xi, ch)
                        - img.px(yi + 1, xi, ch)
                        - img.px(yi, xi - 1, ch)
                        - img.px(yi, xi + 1, ch))
                    .clamp(0.0, 1.0),
                };
            }
        }
    }
    vec![out]
}
