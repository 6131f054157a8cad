//! Data movement: `permute`, `slice`, `concat`.
//!
//! * permute: `y[i_0, …, i_{r−1}] = x[k]` with `k[perm[j]] = i_j`
//!   (so `y.shape[j] = x.shape[perm[j]]`).
//! * slice: `y[o] = x[start + o ⊙ step]` per dimension.
//! * concat: `y` is the inputs laid end to end along `axis`:
//!   `y[…, off_t + j, …] = x_t[…, j, …]` with `off_t = Σ_{s<t} x_s.shape[axis]`.

use crate::shape::{for_each_index, numel, offset, row_major_strides};
use crate::spec::{ConcatSpec, PermuteSpec, SliceSpec};

pub(crate) fn permute(s: &PermuteSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let in_strides = row_major_strides(&s.shape);
    // The stride in x of each output dimension j is the stride of input dim perm[j].
    let strides: Vec<usize> = s.perm.iter().map(|&p| in_strides[p]).collect();
    let out_shape = s.out_shape();
    let mut y = Vec::with_capacity(numel(&out_shape));
    for_each_index(&out_shape, |idx| y.push(x[offset(idx, &strides)]));
    vec![y]
}

pub(crate) fn slice(s: &SliceSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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

pub(crate) fn concat(s: &ConcatSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
