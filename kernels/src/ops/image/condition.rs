//! What the image filters' conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`: the
//! sum of the magnitudes of the weighted taps, times the roundings on the way (taps
//! plus two). Sharpen's and contrast's weights are negative, so the reference on
//! absolute values (which accumulation bounds use) would not give that sum. Sobel's
//! output is a threshold test, 0 or 1 (held exactly); channels past the colour ones
//! are copied (exact).

use super::reference::{gaussian_weights, LUMA};
use super::spec::{ImageFilter, ImageFilterSpec};
use crate::reference::attribute;

pub(super) fn image_filter(s: &ImageFilterSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let (h, w, c) = (s.height as i64, s.width as i64, s.channels);
    let px = |y: i64, xx: i64, ch: usize| {
        let (yy, xc) = (y.clamp(0, h - 1) as usize, xx.clamp(0, w - 1) as usize);
        x[(yy * s.width + xc) * c + ch].abs()
    };
    let colour = c.min(3);
    let mut out = vec![0.0; x.len()];
    for y in 0..h {
        for xx in 0..w {
            let base = (y as usize * s.width + xx as usize) * c;
            for ch in 0..colour {
                out[base + ch] = match s.filter {
                    ImageFilter::GaussianBlur { sigma, radius } => {
                        let taps = gaussian_weights(sigma, radius);
                        let r = radius as i64;
                        let mut sum = 0.0;
                        for (a, wy) in taps.iter().enumerate() {
                            for (b, wx) in taps.iter().enumerate() {
                                sum += wy * wx * px(y + a as i64 - r, xx + b as i64 - r, ch);
                            }
                        }
                        sum * (taps.len() * taps.len() + 2) as f64
                    }
                    ImageFilter::Sharpen => {
                        let around = px(y - 1, xx, ch) + px(y + 1, xx, ch) + px(y, xx - 1, ch)
                            + px(y, xx + 1, ch);
                        (5.0 * px(y, xx, ch) + around) * 7.0
                    }
                    ImageFilter::Grayscale if colour == 3 => {
                        (0..3).map(|k| LUMA[k] * px(y, xx, k)).sum::<f64>() * 5.0
                    }
                    ImageFilter::Grayscale => px(y, xx, ch),
                    ImageFilter::Brightness { factor } => {
                        2.0 * px(y, xx, ch) * attribute(s.dtype, factor).abs()
                    }
                    ImageFilter::Contrast { factor } => {
                        let f = attribute(s.dtype, factor).abs();
                        3.0 * ((px(y, xx, ch) + 0.5) * f + 0.5)
                    }
                    ImageFilter::Sobel { .. } | ImageFilter::Threshold { .. } | ImageFilter::Invert => 0.0,
                };
            }
        }
    }
    vec![out]
}
