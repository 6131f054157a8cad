//! What the softmax family's conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`: the
//! operands after the shift by the slice's maximum, never the logits' magnitude.
//!
//! With `m` the slice's maximum, `s = Σ e^{x − m}` over `n` terms and `4` covering the
//! few roundings of `exp`, `ln` and a division:
//! * softmax `yᵢ = e^{xᵢ − m}/s`: `|yᵢ|·(|xᵢ − m| + n + 4)` (the shift rounds at
//!   `|xᵢ − m|`, which `exp` turns into a relative error; the sum is good to `γₙ`);
//! * log-softmax `yᵢ = (xᵢ − m) − ln s`: `|xᵢ − m| + |ln s| + n + 4`;
//! * backward, `dxᵢ = yᵢ(dyᵢ − Σ dy·y)`: `|yᵢ|(|dyᵢ| + |d| + (n + 2)·Σ|dy·y|) + |dxᵢ|`;
//!   log-softmax backward, `dxᵢ = dyᵢ − e^{yᵢ}·Σ dy`:
//!   `|dyᵢ| + e^{yᵢ}((n + 2)·Σ|dy| + 4|Σ dy|) + |dxᵢ|`;
//! * cross-entropy: the loss `(m − x_t) + ln s` as log-softmax, the probabilities as
//!   softmax, the gradient `p − onehot` as the probability plus its own rounding; each
//!   times the batch scale.
//!
//! A fully masked slice (`m = −∞`) has exact outputs: 0.

use super::reference::{max_and_log_sum, slices, softmax_slice};
use super::spec::{CrossEntropySpec, SoftmaxBackwardSpec, SoftmaxSpec};
use crate::reference::resolve_index;

/// Roundings of `exp`, `ln` and a division, beyond the shift and the sum.
const FEW: f64 = 4.0;

/// `(m, ln s)` of one slice, or `None` when it is fully masked.
fn shift_and_log_sum(x: &[f64]) -> Option<(f64, f64)> {
    let (m, log_sum) = max_and_log_sum(x);
    (m != f64::NEG_INFINITY).then_some((m, log_sum))
}

pub(super) fn softmax(s: &SoftmaxSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let mut out = vec![0.0; x.len()];
    slices(&s.shape, s.axis, |at| {
        let row: Vec<f64> = at.iter().map(|&k| x[k]).collect();
        let Some((m, log_sum)) = shift_and_log_sum(&row) else {
            return;
        };
        let n = row.len() as f64;
        let y = softmax_slice(&row, s.log);
        for (j, &k) in at.iter().enumerate() {
            let shifted = (row[j] - m).abs();
            out[k] = if s.log {
                shifted + log_sum.abs() + n + FEW
            } else {
                y[j].abs() * (shifted + n + FEW)
            };
        }
    });
    vec![out]
}

pub(super) fn softmax_backward(s: &SoftmaxBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (y, dy) = (i[0], i[1]);
    let mut out = vec![0.0; y.len()];
    slices(&s.shape, s.axis, |at| {
        let n = at.len() as f64;
        if s.log {
            let total: f64 = at.iter().map(|&k| dy[k]).sum();
            let magnitude: f64 = at.iter().map(|&k| dy[k].abs()).sum();
            for &k in at {
                let dx = dy[k] - y[k].exp() * total;
                out[k] = dy[k].abs()
                    + y[k].exp() * ((n + 2.0) * magnitude + FEW * total.abs())
                    + dx.abs();
            }
        } else {
            let dot: f64 = at.iter().map(|&k| dy[k] * y[k]).sum();
            let magnitude: f64 = at.iter().map(|&k| (dy[k] * y[k]).abs()).sum();
            for &k in at {
                let dx = y[k] * (dy[k] - dot);
                out[k] = y[k].abs() * (dy[k].abs() + dot.abs() + (n + 2.0) * magnitude) + dx.abs();
            }
        }
    });
    vec![out]
}

pub(super) fn cross_entropy(s: &CrossEntropySpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (logits, targets) = (i[0], i[1]);
    let c = s.classes;
    let scale = if s.divide_by_batch {
        1.0 / s.batch as f64
    } else {
        1.0
    };
    let mut loss = vec![0.0; s.batch];
    let mut grad = vec![0.0; s.batch * c];
    let mut probs = vec![0.0; s.batch * c];
    for b in 0..s.batch {
        let row = &logits[b * c..(b + 1) * c];
        let Some((m, log_sum)) = shift_and_log_sum(row) else {
            continue;
        };
        let n = c as f64;
        let target = resolve_index(targets[b], c, false);
        if let Some(t) = target {
            let l = (m - row[t]) + log_sum;
            loss[b] = ((m - row[t]).abs() + log_sum.abs() + n + FEW) * scale + (l * scale).abs();
        }
        for j in 0..c {
            let p = (row[j] - m - log_sum).exp();
            let condition = p * ((row[j] - m).abs() + log_sum.abs() + n + FEW);
            probs[b * c + j] = condition;
            let hot = if target == Some(j) { 1.0 } else { 0.0 };
            grad[b * c + j] = (condition + (p - hot).abs()) * scale;
        }
    }
    [Some(loss), s.grad.then_some(grad), s.probs.then_some(probs)]
        .into_iter()
        .flatten()
        .collect()
}
