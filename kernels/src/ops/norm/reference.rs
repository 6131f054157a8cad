//! f64 references of the normalisation family (formulas in [`super`]).

use super::ncs;
use super::spec::{BatchNormBackwardSpec, BatchNormSpec, LayerNormBackwardSpec, LayerNormSpec};
use crate::lower::math::compute_type;
use crate::reference::{attribute, compensated_sum, round_to};

/// The statistics of one row or channel, kept relative to its first value `shift`, so
/// that they stay accurate when `|μ| ≫ σ`: `x − shift` is exact while the values lie
/// within a factor of two of each other (Sterbenz) and small otherwise, both passes sum
/// with compensation, and `x − μ` is formed as `(x − shift) − mean` without ever
/// rounding `μ` itself. (A plain two-pass mean and variance in f64 loses the spread of
/// `10¹⁵ + j/8`, and would be less accurate than the f32 kernels, which fold
/// `x − x₀` too.)
struct Moments {
    shift: f64,
    /// The mean of `x − shift`.
    mean: f64,
    /// The biased variance.
    var: f64,
}

impl Moments {
    /// The moments of `xs`; NaN (mean and variance) when a value is NaN or ±∞: the
    /// statistics of a row (channel) holding a non-finite value are undefined, so its
    /// μ, σ², `1/σ` and every `y` are NaN (docs/ops.md, "Normalisation and non-finite
    /// values").
    fn of(xs: &[f64]) -> Moments {
        let shift = xs.first().copied().unwrap_or(0.0);
        let n = xs.len() as f64;
        let mean = compensated_sum(xs.iter().map(|x| x - shift)) / n;
        if !mean.is_finite() {
            return Moments {
                shift,
                mean: f64::NAN,
                var: f64::NAN,
            };
        }
        let var = compensated_sum(xs.iter().map(|x| {
            let d = (x - shift) - mean;
            d * d
        })) / n;
        Moments { shift, mean, var }
    }

    /// `μ`, rounded once (for outputs).
    fn mu(&self) -> f64 {
        self.shift + self.mean
    }

    /// `x − μ`.
    fn centred(&self, x: f64) -> f64 {
        (x - self.shift) - self.mean
    }
}

pub(super) fn layer_norm(s: &LayerNormSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (rows, cols) = s.rows_cols();
    let mut next = 1;
    let mut take = |on: bool| {
        if on {
            next += 1;
            Some(i[next - 1])
        } else {
            None
        }
    };
    let residual = take(s.residual);
    let weight = take(s.weight);
    let bias = take(s.bias);
    // `sum` is an output of the dtype and y normalises it: the sum rounded to the dtype.
    let x: Vec<f64> = match residual {
        Some(r) => i[0]
            .iter()
            .zip(r)
            .map(|(a, b)| round_to(s.dtype, a + b))
            .collect(),
        None => i[0].to_vec(),
    };
    let n = cols as f64;
    let eps = attribute(s.dtype, s.eps);
    let mut y = vec![0.0; x.len()];
    let mut stats = vec![0.0; rows * 2];
    for row in 0..rows {
        let xs = &x[row * cols..(row + 1) * cols];
        let (moments, r) = if s.rms {
            let ms = compensated_sum(xs.iter().map(|v| v * v)) / n;
            (None, 1.0 / (ms + eps).sqrt())
        } else {
            let m = Moments::of(xs);
            let r = 1.0 / (m.var + eps).sqrt();
            (Some(m), r)
        };
        stats[2 * row] = moments.as_ref().map_or(0.0, Moments::mu);
        stats[2 * row + 1] = r;
        if cols == 0 {
            // The statistics of nothing: 0/0.
            stats[2 * row] = f64::NAN;
            stats[2 * row + 1] = f64::NAN;
        }
        for j in 0..cols {
            let centred = moments.as_ref().map_or(xs[j], |m| m.centred(xs[j]));
            let mut v = centred * r;
            if let Some(w) = weight {
                v *= w[j];
            }
            if let Some(b) = bias {
                v += b[j];
            }
            y[row * cols + j] = v;
        }
    }
    [
        Some(y),
        s.residual.then_some(x),
        s.save_stats.then_some(stats),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(super) fn layer_norm_backward(s: &LayerNormBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (rows, cols) = s.rows_cols();
    let (dy, x) = (i[0], i[1]);
    let weight = if s.weight { Some(i[2]) } else { None };
    let stats = i[if s.weight { 3 } else { 2 }];
    let n = cols as f64;
    let ct = compute_type(s.dtype);
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; cols];
    let mut db = vec![0.0; cols];
    let mut g = vec![0.0; cols];
    let mut xhat = vec![0.0; cols];
    for row in 0..rows {
        let base = row * cols;
        let (mean, r) = (stats[2 * row], stats[2 * row + 1]);
        for j in 0..cols {
            xhat[j] = (x[base + j] - mean) * r;
            // g = dy·w is formed in the compute type, as the kernels (and PyTorch) form
            // it: a subnormal weight times a small gradient underflows to 0 there, and
            // meets an infinite x̂ as 0·∞ = NaN (docs/ops.md, layer_norm_backward).
            g[j] = weight.map_or(dy[base + j], |w| round_to(ct, dy[base + j] * w[j]));
            dw[j] += dy[base + j] * xhat[j];
            db[j] += dy[base + j];
        }
        if s.rms {
            let gx = (0..cols).map(|j| g[j] * x[base + j]).sum::<f64>() / n;
            for j in 0..cols {
                dx[base + j] = r * g[j] - x[base + j] * r * r * r * gx;
            }
        } else {
            let mg = g.iter().sum::<f64>() / n;
            let mgx = (0..cols).map(|j| g[j] * xhat[j]).sum::<f64>() / n;
            for j in 0..cols {
                dx[base + j] = r * (g[j] - mg - xhat[j] * mgx);
            }
        }
    }
    let mut out = vec![dx];
    if s.param_grads && s.weight {
        out.push(dw);
    }
    if s.param_grads && s.bias {
        out.push(db);
    }
    out
}

pub(super) fn batch_norm(s: &BatchNormSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (x, w, b, rm, rv) = (i[0], i[1], i[2], i[3], i[4]);
    let (n, c, sp) = ncs(&s.shape);
    let (eps, momentum) = (attribute(s.dtype, s.eps), attribute(s.dtype, s.momentum));
    let at = |ni: usize, ci: usize, si: usize| (ni * c + ci) * sp + si;
    let mut y = vec![0.0; x.len()];
    let mut save = vec![0.0; 2 * c];
    let mut new_rm = rm.to_vec();
    let mut new_rv = rv.to_vec();
    for ci in 0..c {
        let channel: Vec<usize> = (0..n)
            .flat_map(|ni| (0..sp).map(move |si| at(ni, ci, si)))
            .collect();
        let moments = if s.training {
            let values: Vec<f64> = channel.iter().map(|&k| x[k]).collect();
            let stats = Moments::of(&values);
            let (mean, var) = (stats.mu(), stats.var);
            new_rm[ci] = (1.0 - momentum) * rm[ci] + momentum * mean;
            new_rv[ci] = (1.0 - momentum) * rv[ci] + momentum * var;
            save[2 * ci] = mean;
            stats
        } else {
            // Inference: the running statistics, as moments about the running mean.
            Moments {
                shift: rm[ci],
                mean: 0.0,
                var: rv[ci],
            }
        };
        let r = 1.0 / (moments.var + eps).sqrt();
        if s.training {
            save[2 * ci + 1] = r;
        }
        for &k in &channel {
            y[k] = moments.centred(x[k]) * r * w[ci] + b[ci];
        }
    }
    if s.training {
        vec![y, save, new_rm, new_rv]
    } else {
        vec![y]
    }
}

pub(super) fn batch_norm_backward(s: &BatchNormBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (dy, x, w) = (i[0], i[1], i[2]);
    let save = i[i.len() - 1];
    let (n, c, sp) = ncs(&s.shape);
    let m = s.given_grads.unwrap_or(n * sp) as f64;
    let at = |ni: usize, ci: usize, si: usize| (ni * c + ci) * sp + si;
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; c];
    let mut db = vec![0.0; c];
    for ci in 0..c {
        let (mean, r) = (save[2 * ci], save[2 * ci + 1]);
        for ni in 0..n {
            for si in 0..sp {
                let k = at(ni, ci, si);
                db[ci] += dy[k];
                dw[ci] += dy[k] * ((x[k] - mean) * r);
            }
        }
        if s.given_grads.is_some() {
            (dw[ci], db[ci]) = (i[3][ci], i[4][ci]);
        }
        // The weight multiplies last: a subnormal weight times an infinite bracket is
        // ±∞, not `0·∞` (docs/ops.md, batch_norm_backward).
        let (mean_dy, mean_dyx) = (db[ci] / m, dw[ci] / m);
        for ni in 0..n {
            for si in 0..sp {
                let k = at(ni, ci, si);
                let xhat = (x[k] - mean) * r;
                dx[k] = (dy[k] - mean_dy - xhat * mean_dyx) * r * w[ci];
            }
        }
    }
    if s.param_grads {
        vec![dx, dw, db]
    } else {
        vec![dx]
    }
}
