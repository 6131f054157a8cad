//! f64 references of the softmax family (formulas in [`super`]).

use super::spec::{CrossEntropySpec, SoftmaxBackwardSpec, SoftmaxSpec};
use crate::reference::resolve_index;
use crate::shape::numel;

/// `(outer, n, inner)` for a slice along `axis`: element `j` of slice `(o, k)` is at
/// `(o·n + j)·inner + k`.
pub(crate) fn axis_split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        numel(&shape[..axis]),
        shape[axis],
        numel(&shape[axis + 1..]),
    )
}

/// Softmax (or log-softmax) of one slice.
pub fn softmax_slice(x: &[f64], log: bool) -> Vec<f64> {
    // A row of −∞ only (fully masked) is the op's 0 (log: −∞); a NaN among them
    // makes the row NaN, as any NaN does (`f64::max` skips it: `m` is −∞ for a row
    // of NaN and −∞ too).
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if x.iter().all(|&v| v == f64::NEG_INFINITY) {
        let fill = if log { f64::NEG_INFINITY } else { 0.0 };
        return vec![fill; x.len()];
    }
    let sum: f64 = x.iter().map(|&v| (v - m).exp()).sum();
    if log {
        // `(x − m) − ln Σ`, not `x − (m + ln Σ)`: at the maximum the result is
        // `−ln Σ`, which `m + ln Σ` would round away next to a large `m`.
        let ln_sum = sum.ln();
        x.iter().map(|&v| (v - m) - ln_sum).collect()
    } else {
        x.iter().map(|&v| (v - m).exp() / sum).collect()
    }
}

/// Calls `f` with every slice along `axis` (its element positions).
pub(super) fn slices(shape: &[usize], axis: usize, mut f: impl FnMut(&[usize])) {
    let (outer, n, inner) = axis_split(shape, axis);
    for o in 0..outer {
        for k in 0..inner {
            let at: Vec<usize> = (0..n).map(|j| (o * n + j) * inner + k).collect();
            f(&at);
        }
    }
}

/// The maximum of a slice (NaN skipped) and `ln Σ e^{x − m}`.
pub(super) fn max_and_log_sum(x: &[f64]) -> (f64, f64) {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m, x.iter().map(|&v| (v - m).exp()).sum::<f64>().ln())
}

pub(super) fn softmax(s: &SoftmaxSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let mut y = vec![0.0; x.len()];
    slices(&s.shape, s.axis, |at| {
        let slice: Vec<f64> = at.iter().map(|&k| x[k]).collect();
        for (&k, v) in at.iter().zip(softmax_slice(&slice, s.log)) {
            y[k] = v;
        }
    });
    vec![y]
}

pub(super) fn softmax_backward(s: &SoftmaxBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (y, dy) = (i[0], i[1]);
    let mut dx = vec![0.0; y.len()];
    slices(&s.shape, s.axis, |at| {
        if s.log {
            let total: f64 = at.iter().map(|&k| dy[k]).sum();
            for &k in at {
                dx[k] = dy[k] - y[k].exp() * total;
            }
        } else {
            let dot: f64 = at.iter().map(|&k| dy[k] * y[k]).sum();
            for &k in at {
                dx[k] = y[k] * (dy[k] - dot);
            }
        }
    });
    vec![dx]
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
        // As in `softmax_slice`: the shifted value minus `ln Σ`, so a loss near 0
        // next to a large maximum keeps its digits.
        let (m, ln_sum) = max_and_log_sum(row);
        let t = resolve_index(targets[b], c, false);
        loss[b] = match t {
            Some(t) => (ln_sum - (row[t] - m)) * scale,
            None => f64::NAN,
        };
        for j in 0..c {
            let p = ((row[j] - m) - ln_sum).exp();
            probs[b * c + j] = p;
            let hot = if t == Some(j) { 1.0 } else { 0.0 };
            grad[b * c + j] = (p - hot) * scale;
        }
    }
    [Some(loss), s.grad.then_some(grad), s.probs.then_some(probs)]
        .into_iter()
        .flatten()
        .collect()
}
