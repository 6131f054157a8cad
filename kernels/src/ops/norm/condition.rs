//! What the normalisation family's conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`.
//!
//! A row (or channel) of `n` values with mean `μ` and `r = 1/√(var + eps)`: the mean is
//! a sum good to `γₙ` of the sum of magnitudes of the shifted values plus one rounding
//! of `μ` itself; the variance a sum of `n` positive terms; `r` a square root and a
//! division of it. So `yᵢ = (xᵢ − μ)·r·wᵢ + bᵢ` is held to
//! `|wᵢ|·r·(|μ| + (n + 2)·mean|x − μ| + (n + 8)·|xᵢ − μ|) + |bᵢ| + |yᵢ|`: the operands
//! after the shift, and one ULP of the mean; the raw magnitude of `x` enters only
//! through `|μ|`. RMS norm (`yᵢ = xᵢ·r·wᵢ`): `|wᵢ|·r·|xᵢ|·(n + 8) + |yᵢ|`. The saved
//! statistics: `|μ| + (n + 2)·mean|x − μ|` for `μ`, `r·(n + 8)` for `r`. The backward
//! passes, `dx = r·(g − mean g − x̂·mean(g·x̂))` with `g = dy·w`: `r·(2|gᵢ| + (n + 2)·
//! mean|g| + |x̂ᵢ|·((n + 4)·mean|g·x̂| + 2|mean(g·x̂)|)) + 2|dxᵢ|`, and sums over rows as
//! accumulations.

use super::ncs;
use super::spec::{BatchNormBackwardSpec, BatchNormSpec, LayerNormBackwardSpec, LayerNormSpec};
use crate::reference::{attribute, round_to};

/// Roundings beyond the sums: the square root, divisions, the final products.
const FEW: f64 = 8.0;

/// `(μ, r, mean|x − μ|)` of one row or channel.
fn moments(xs: &[f64], eps: f64) -> (f64, f64, f64) {
    let n = xs.len().max(1) as f64;
    let mu = xs.iter().sum::<f64>() / n;
    let spread = xs.iter().map(|x| (x - mu).abs()).sum::<f64>() / n;
    (mu, 1.0 / (variance(xs) + eps).sqrt(), spread)
}

/// The biased variance of a row or channel.
fn variance(xs: &[f64]) -> f64 {
    let n = xs.len().max(1) as f64;
    let mu = xs.iter().sum::<f64>() / n;
    xs.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / n
}

/// The condition of a normalised value `(x − μ)·r·w + b` (`rms`: `x·r·w`).
fn normalised(x: f64, w: f64, b: f64, (mu, r, spread): (f64, f64, f64), n: f64, rms: bool) -> f64 {
    let y = if rms { x * r * w } else { (x - mu) * r * w + b };
    let core = if rms {
        x.abs() * (n + FEW)
    } else {
        mu.abs() + (n + 2.0) * spread + (n + FEW) * (x - mu).abs()
    };
    w.abs() * r * core + b.abs() + y.abs()
}

/// The condition of the saved mean and `r` of a row.
fn statistics((mu, r, spread): (f64, f64, f64), n: f64) -> [f64; 2] {
    [mu.abs() + (n + 2.0) * spread, r * (n + FEW)]
}

pub(super) fn layer_norm(s: &LayerNormSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (rows, cols) = s.rows_cols();
    let mut next = 1;
    let mut take = |on: bool| {
        on.then(|| {
            next += 1;
            i[next - 1]
        })
    };
    let residual = take(s.residual);
    let weight = take(s.weight);
    let bias = take(s.bias);
    let x: Vec<f64> = match residual {
        Some(r) => i[0]
            .iter()
            .zip(r)
            .map(|(a, b)| round_to(s.dtype, a + b))
            .collect(),
        None => i[0].to_vec(),
    };
    let eps = attribute(s.dtype, s.eps);
    let n = cols as f64;
    let mut y = vec![0.0; x.len()];
    let mut stats = vec![0.0; rows * 2];
    for row in 0..rows {
        let xs = &x[row * cols..(row + 1) * cols];
        let m = if s.rms {
            let ms = xs.iter().map(|v| v * v).sum::<f64>() / n;
            (0.0, 1.0 / (ms + eps).sqrt(), 0.0)
        } else {
            moments(xs, eps)
        };
        stats[2 * row..2 * row + 2].copy_from_slice(&statistics(m, n));
        for j in 0..cols {
            let w = weight.map_or(1.0, |w| w[j]);
            let b = bias.map_or(0.0, |b| b[j]);
            y[row * cols + j] = normalised(xs[j], w, b, m, n, s.rms);
        }
    }
    let mut out = vec![y];
    if let Some(r) = residual {
        out.push(i[0].iter().zip(r).map(|(a, b)| a.abs() + b.abs()).collect());
    }
    if s.save_stats {
        out.push(stats);
    }
    out
}

/// The condition of `r·(g − mg − x̂·mgx)` for one row (`xhat`, `g` of the row).
fn centred_gradient(xhat: &[f64], g: &[f64], r: f64, out: &mut [f64]) {
    let n = g.len().max(1) as f64;
    let mean_g = g.iter().map(|v| v.abs()).sum::<f64>() / n;
    let mgx = g.iter().zip(xhat).map(|(a, b)| a * b).sum::<f64>() / n;
    let mean_gx = g.iter().zip(xhat).map(|(a, b)| (a * b).abs()).sum::<f64>() / n;
    let mg = g.iter().sum::<f64>() / n;
    for (j, o) in out.iter_mut().enumerate() {
        let dx = r * (g[j] - mg - xhat[j] * mgx);
        *o = r
            * (2.0 * g[j].abs()
                + (n + 2.0) * mean_g
                + xhat[j].abs() * ((n + 4.0) * mean_gx + 2.0 * mgx.abs()))
            + 2.0 * dx.abs();
    }
}

pub(super) fn layer_norm_backward(s: &LayerNormBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (rows, cols) = s.rows_cols();
    let (dy, x) = (i[0], i[1]);
    let weight = s.weight.then(|| i[2]);
    let stats = i[if s.weight { 3 } else { 2 }];
    let n = cols as f64;
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; cols];
    let mut db = vec![0.0; cols];
    for row in 0..rows {
        let base = row * cols;
        let (mean, r) = (stats[2 * row], stats[2 * row + 1]);
        let g: Vec<f64> = (0..cols)
            .map(|j| dy[base + j] * weight.map_or(1.0, |w| w[j]))
            .collect();
        let xhat: Vec<f64> = (0..cols).map(|j| (x[base + j] - mean) * r).collect();
        for j in 0..cols {
            dw[j] += (dy[base + j] * xhat[j]).abs() * (rows as f64 + 4.0);
            db[j] += dy[base + j].abs() * (rows as f64 + 1.0);
        }
        if s.rms {
            let gx = (0..cols).map(|j| g[j] * x[base + j]).sum::<f64>() / n;
            let mean_gx = (0..cols).map(|j| (g[j] * x[base + j]).abs()).sum::<f64>() / n;
            for j in 0..cols {
                let d = r * g[j] - x[base + j] * r * r * r * gx;
                dx[base + j] = 2.0 * r * g[j].abs()
                    + x[base + j].abs() * r * r * r * (n + FEW) * mean_gx
                    + 2.0 * d.abs();
            }
        } else {
            centred_gradient(&xhat, &g, r, &mut dx[base..base + cols]);
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

/// The positions of channel `ci`'s elements.
fn channel(shape: &[usize], ci: usize) -> Vec<usize> {
    let (n, c, sp) = ncs(shape);
    (0..n)
        .flat_map(|ni| (0..sp).map(move |si| (ni * c + ci) * sp + si))
        .collect()
}

pub(super) fn batch_norm(s: &BatchNormSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (x, w, b, rm, rv) = (i[0], i[1], i[2], i[3], i[4]);
    let (_, c, _) = ncs(&s.shape);
    let (eps, momentum) = (attribute(s.dtype, s.eps), attribute(s.dtype, s.momentum));
    let mut y = vec![0.0; x.len()];
    let mut save = vec![0.0; 2 * c];
    let mut new_rm = vec![0.0; c];
    let mut new_rv = vec![0.0; c];
    for ci in 0..c {
        let at = channel(&s.shape, ci);
        let values: Vec<f64> = at.iter().map(|&k| x[k]).collect();
        let n = values.len() as f64;
        let m = if s.training {
            moments(&values, eps)
        } else {
            // Given statistics: no sums, so no spread of the channel in the bound.
            (rm[ci], 1.0 / (rv[ci] + eps).sqrt(), 0.0)
        };
        // Inference normalises with given statistics: no sums, only `x − μ`.
        let n_sums = if s.training { n } else { 0.0 };
        for &k in &at {
            y[k] = normalised(x[k], w[ci], b[ci], m, n_sums, false);
        }
        if s.training {
            let [cm, cr] = statistics(m, n);
            save[2 * ci] = cm;
            save[2 * ci + 1] = cr;
            // From the values, not from `r`: an `eps` past the compute type's range
            // makes `r` 0, and `1/r² − eps` NaN.
            let var = variance(&values);
            let keep = (1.0 - momentum).abs();
            new_rm[ci] =
                keep * rm[ci].abs() + momentum.abs() * cm + 2.0 * rm[ci].abs().max(m.0.abs());
            new_rv[ci] = keep * rv[ci].abs()
                + momentum.abs() * var.abs() * (n + FEW)
                + 2.0 * rv[ci].abs().max(var.abs());
        }
    }
    if s.training {
        vec![y, save, new_rm, new_rv]
    } else {
        vec![y]
    }
}

pub(super) fn batch_norm_backward(s: &BatchNormBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    if let Some(m) = s.given_grads {
        return vec![given_grads_dx(s, i, m as f64)];
    }
    let (dy, x, w, save) = (i[0], i[1], i[2], i[3]);
    let (_, c, _) = ncs(&s.shape);
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; c];
    let mut db = vec![0.0; c];
    for ci in 0..c {
        let at = channel(&s.shape, ci);
        let (mean, r) = (save[2 * ci], save[2 * ci + 1]);
        let g: Vec<f64> = at.iter().map(|&k| dy[k] * w[ci]).collect();
        let xhat: Vec<f64> = at.iter().map(|&k| (x[k] - mean) * r).collect();
        let mut out = vec![0.0; at.len()];
        centred_gradient(&xhat, &g, r, &mut out);
        for (&k, o) in at.iter().zip(out) {
            dx[k] = o;
        }
        let m = at.len() as f64;
        dw[ci] = at
            .iter()
            .zip(&xhat)
            .map(|(&k, xh)| (dy[k] * xh).abs())
            .sum::<f64>()
            * (m + 4.0);
        db[ci] = at.iter().map(|&k| dy[k].abs()).sum::<f64>() * (m + 1.0);
    }
    if s.param_grads {
        vec![dx, dw, db]
    } else {
        vec![dx]
    }
}

/// `dx` from given parameter gradients of a batch of `m`: the magnitudes of its terms,
/// `(|dy| + |dbias|/m + |x̂|·|dweight|/m)·r·|w|`, three times: each term meets a
/// rounding in forming it (`x − μ`, `·r`, `/m`, the product), in the sum and in the
/// two last products.
fn given_grads_dx(s: &BatchNormBackwardSpec, i: &[&[f64]], m: f64) -> Vec<f64> {
    let (dy, x, w, dw, db, save) = (i[0], i[1], i[2], i[3], i[4], i[5]);
    let (_, c, _) = ncs(&s.shape);
    let mut dx = vec![0.0; x.len()];
    for ci in 0..c {
        let (mean, r) = (save[2 * ci], save[2 * ci + 1]);
        for k in channel(&s.shape, ci) {
            let xhat = (x[k] - mean) * r;
            let terms = dy[k].abs() + db[ci].abs() / m + xhat.abs() * dw[ci].abs() / m;
            dx[k] = 3.0 * terms * r.abs() * w[ci].abs();
        }
    }
    dx
}
