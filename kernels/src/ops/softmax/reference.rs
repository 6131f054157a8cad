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

fn for_each_slice(shape: &[usize], axis: usize, mut f: impl FnMut(&dyn Fn(usize) -> usize, usize)) {
    let (outer, n, inner) = axis_split(shape, axis);
    for o in 0..outer {
        for k in 0..inner {
            let at = move |j: usize| (o * n + j) * inner + k;
            f(&at, n);
        }
    }
}

pub(super) fn softmax(s: &SoftmaxSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let mut y = vec![0.0; x.len()];
    for_each_slice(&s.shape, s.axis, |at, n| {
        let slice: Vec<f64> = (0..n).map(|j| x[at(j)]).collect();
        for (j, v) in softmax_slice(&slice, s.log).into_iter().enumerate() {
            y[at(j)] = v;
        }
    });
    vec![y]
}

pub(super) fn softmax_backward(s: &SoftmaxBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (y, dy) = (i[0], i[1]);
    let mut dx = vec![0.0; y.len()];
    for_each_slice(&s.shape, s.axis, |at, n| {
        if s.log {
            let total: f64 = (0..n).map(|j| dy[at(j)]).sum();
            for j in 0..n {
                dx[at(j)] = dy[at(j)] - y[at(j)].exp() * total;
            }
        } else {
            let dot: f64 = (0..n).map(|j| dy[at(j)] * y[at(j)]).sum();
            for j in 0..n {
                dx[at(j)] = y[at(j)] * (dy[at(j)] - dot);
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
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // As in `softmax_slice`: the shifted value minus `ln Σ`, so a loss near 0
        // next to a large maximum keeps its digits.
        let ln_sum = row.iter().map(|&v| (v - m).exp()).sum::<f64>().ln();
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
    let mut out = vec![loss];
    if s.grad {
        out.push(grad);
    }
    if s.probs {
        out.push(probs);
    }
    out
}
