//! Softmax and log-softmax along an axis, and their backward.
//!
//! For each slice `x_0 … x_{n−1}` along the axis, with `m = max_j x_j`:
//!
//! ```text
//! softmax:      y_i = e^{x_i − m} / Σ_j e^{x_j − m}
//! log-softmax:  y_i = x_i − m − ln Σ_j e^{x_j − m}
//! backward:     dx_i = y_i (dy_i − Σ_j dy_j y_j)        (softmax, from y)
//!               dx_i = dy_i − e^{y_i} Σ_j dy_j          (log-softmax, from y)
//! ```
//!
//! A slice whose maximum is `−∞` (fully masked) gives zeros (log-softmax: `−∞`).

use crate::shape::numel;
use crate::spec::{SoftmaxBackwardSpec, SoftmaxSpec};

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
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        let fill = if log { f64::NEG_INFINITY } else { 0.0 };
        return vec![fill; x.len()];
    }
    let sum: f64 = x.iter().map(|&v| (v - m).exp()).sum();
    if log {
        let lse = m + sum.ln();
        x.iter().map(|&v| v - lse).collect()
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

pub(crate) fn softmax(s: &SoftmaxSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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

pub(crate) fn softmax_backward(s: &SoftmaxBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
