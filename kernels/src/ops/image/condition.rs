//! What the image filters' conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`: the
//! sum of the magnitudes of the weighted taps, times the roundings on the way (taps
//! plus two). Sharpen's and contrast's weights are negative, so the reference on
//! absolute values (which accumulation bounds use) would not give that sum. Sobel's
//! output is a threshold test, 0 or 1, held exactly except where the gradient's
//! magnitude lies within its rounding error of the threshold ([`UNDECIDED`]); channels
//! past the colour ones are copied (exact).

use super::reference::{gaussian_weights, LUMA};
use super::spec::{ImageFilter, ImageFilterSpec};
use crate::lower::math::compute_type;
use crate::reference::attribute;
use crate::tolerance::{underflow, unit_roundoff, UNDECIDED};

/// Sobel's taps `(dy, dx, weight)` for the horizontal and the vertical gradient.
const SOBEL_X: [(i64, i64, f64); 6] = [
    (-1, -1, -1.0),
    (-1, 1, 1.0),
    (0, -1, -2.0),
    (0, 1, 2.0),
    (1, -1, -1.0),
    (1, 1, 1.0),
];
const SOBEL_Y: [(i64, i64, f64); 6] = [
    (-1, -1, -1.0),
    (-1, 0, -2.0),
    (-1, 1, -1.0),
    (1, -1, 1.0),
    (1, 0, 2.0),
    (1, 1, 1.0),
];

/// The condition of Sobel's edge test at a pixel: 0 (held exactly) unless the
/// magnitude `√(gx² + gy²)` of the luma's gradient is within its rounding error of the
/// threshold. `luma(dy, dx)` gives the luma and its sum of magnitudes around the pixel.
/// The error: each gradient is six weighted lumas (each three products and two sums),
/// `≤ 10u·Σ|wᵢ·Lᵢ|`; squares, sum and square root add `≤ 4u·|∇L|`.
fn sobel_edge(s: &ImageFilterSpec, threshold: f64, luma: impl Fn(i64, i64) -> (f64, f64)) -> f64 {
    let ct = compute_type(s.dtype);
    let gradient = |taps: &[(i64, i64, f64)]| {
        taps.iter().fold((0.0, 0.0), |(g, m), &(dy, dx, w)| {
            let (l, lm) = luma(dy, dx);
            (g + w * l, m + w.abs() * lm)
        })
    };
    let ((gx, mx), (gy, my)) = (gradient(&SOBEL_X), gradient(&SOBEL_Y));
    let magnitude = (gx * gx + gy * gy).sqrt();
    let u = unit_roundoff(ct);
    let error = u * (16.0 * (mx + my) + 4.0 * magnitude) + 16.0 * underflow(s.dtype);
    if (magnitude - threshold).abs() <= error {
        UNDECIDED
    } else {
        0.0
    }
}

pub(super) fn image_filter(s: &ImageFilterSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let (h, w, c) = (s.height as i64, s.width as i64, s.channels);
    // Clamp-to-edge reads, and their magnitudes.
    let signed = |y: i64, xx: i64, ch: usize| {
        let (yy, xc) = (y.clamp(0, h - 1) as usize, xx.clamp(0, w - 1) as usize);
        x[(yy * s.width + xc) * c + ch]
    };
    let px = |y: i64, xx: i64, ch: usize| signed(y, xx, ch).abs();
    let colour = c.min(3);
    let mut out = vec![0.0; x.len()];
    for y in 0..h {
        for xx in 0..w {
            let base = (y as usize * s.width + xx as usize) * c;
            // The luma (and its sum of magnitudes) at an offset from this pixel.
            let luma = |dy: i64, dx: i64| {
                let (yy, xc) = (y + dy, xx + dx);
                if c == 1 {
                    (signed(yy, xc, 0), px(yy, xc, 0))
                } else {
                    (0..3).fold((0.0, 0.0), |(l, m), k| {
                        (l + LUMA[k] * signed(yy, xc, k), m + LUMA[k] * px(yy, xc, k))
                    })
                }
            };
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
                        let around = px(y - 1, xx, ch)
                            + px(y + 1, xx, ch)
                            + px(y, xx - 1, ch)
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
                    ImageFilter::Sobel { threshold } => sobel_edge(s, threshold, luma),
                    ImageFilter::Threshold { .. } | ImageFilter::Invert => 0.0,
                };
            }
        }
    }
    vec![out]
}
