//! f64 references of the data-movement family (formulas in [`super`]).

use super::spec::{
    ConcatSpec, GatherSpec, PermuteSpec, ScatterCombine, ScatterInit, ScatterSpec, SliceSpec,
};
use crate::reference::{resolve_index, wrap};
use crate::shape::{for_each_index, numel, offset, row_major_strides};

pub(super) fn permute(s: &PermuteSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let in_strides = row_major_strides(&s.shape);
    // The stride in x of each output dimension j is the stride of input dim perm[j].
    let strides: Vec<usize> = s.perm.iter().map(|&p| in_strides[p]).collect();
    let out_shape = s.out_shape();
    let mut y = Vec::with_capacity(numel(&out_shape));
    for_each_index(&out_shape, |idx| y.push(x[offset(idx, &strides)]));
    vec![y]
}

pub(super) fn slice(s: &SliceSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let strides = row_major_strides(&s.shape);
    let mut y = Vec::with_capacity(numel(&s.sizes));
    for_each_index(&s.sizes, |idx| {
        let mut off = 0i64;
        for d in 0..idx.len() {
            let pos = s.starts[d] as i64 + idx[d] as i64 * s.steps[d];
            off += pos * strides[d] as i64;
        }
        y.push(x[off as usize]);
    });
    vec![y]
}

pub(super) fn concat(s: &ConcatSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let out_shape = s.out_shape();
    let outer = numel(&out_shape[..s.axis]);
    let inner = numel(&out_shape[s.axis + 1..]);
    let mut y = Vec::with_capacity(numel(&out_shape));
    for o in 0..outer {
        for (t, shape) in s.shapes.iter().enumerate() {
            let chunk = shape[s.axis] * inner;
            y.extend_from_slice(&i[t][o * chunk..(o + 1) * chunk]);
        }
    }
    vec![y]
}

struct Split {
    outer: usize,
    n: usize,
    inner: usize,
    count: usize,
}

fn split(data: &[usize], indices: &[usize], axis: usize) -> Split {
    Split {
        outer: numel(&data[..axis]),
        n: data[axis],
        inner: numel(&data[axis + 1..]),
        count: numel(indices),
    }
}

pub(super) fn gather(s: &GatherSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (data, idx) = (i[0], i[1]);
    let g = split(&s.data, &s.indices, s.axis);
    let (first, len) = s.rows_window();
    let mut out = Vec::with_capacity(g.outer * g.count * g.inner);
    for o in 0..g.outer {
        for (j, &v) in idx.iter().enumerate().take(g.count) {
            // Resolved against the whole axis; a row of another piece keeps the prior.
            match resolve_index(v, len, true).map(|r| r.checked_sub(first).filter(|&r| r < g.n)) {
                Some(Some(r)) => {
                    let base = (o * g.n + r) * g.inner;
                    out.extend_from_slice(&data[base..base + g.inner]);
                }
                Some(None) => {
                    let at = (o * g.count + j) * g.inner;
                    out.extend_from_slice(&i[2][at..at + g.inner]);
                }
                None => out.extend(std::iter::repeat_n(0.0, g.inner)),
            }
        }
    }
    vec![out]
}

pub(super) fn scatter(s: &ScatterSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (updates, idx) = (i[0], i[1]);
    let g = split(&s.data, &s.indices, s.axis);
    let mut out = match s.init {
        ScatterInit::Zero => vec![0.0; numel(&s.data)],
        ScatterInit::Prior => i[2].to_vec(),
    };
    let (first, len) = s.rows_window();
    for o in 0..g.outer {
        for (j, &v) in idx.iter().enumerate().take(g.count) {
            // Resolved against the whole axis; only this window's rows are written.
            let Some(r) = resolve_index(v, len, true)
                .and_then(|r| r.checked_sub(first))
                .filter(|&r| r < g.n)
            else {
                continue;
            };
            let src = (o * g.count + j) * g.inner;
            let dst = (o * g.n + r) * g.inner;
            for k in 0..g.inner {
                match s.combine {
                    // Integer sums wrap after every addition, as the kernel's do.
                    ScatterCombine::Sum => {
                        out[dst + k] = wrap(s.dtype, out[dst + k] + updates[src + k])
                    }
                    ScatterCombine::Last => out[dst + k] = updates[src + k],
                }
            }
        }
    }
    vec![out]
}
