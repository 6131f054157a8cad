//! Gather and scatter along an axis: embedding forward and backward.
//!
//! With `data` of shape `D = [outer.., n, inner..]` split at `axis` (`n = D[axis]`) and
//! `indices` of `J` elements, positions `(o, j, k)` range over `outer × J × inner`:
//!
//! * gather: `out[o, j, k] = data[o, r(j), k]`, or 0 when `r(j)` is out of range.
//! * scatter: `out` starts as zeros or `prior`; then for `j = 0, 1, …` in order,
//!   `out[o, r(j), k] = out[o, r(j), k] + updates[o, j, k]` (`sum`) or
//!   `out[o, r(j), k] = updates[o, j, k]` (`last`), skipping out-of-range `r(j)`.
//!
//! `r(j) = indices[j]`, plus `n` if negative (counted from the end). Embedding forward
//! is gather on `axis = 0` of a `[vocab, dim]` table, `out[j, :] = weight[id_j, :]`;
//! embedding backward is scatter-sum, `dweight[id, :] = Σ_{j: id_j = id} dy[j, :]`.

use super::resolve_index;
use crate::shape::numel;
use crate::spec::{GatherSpec, ScatterCombine, ScatterInit, ScatterSpec};

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

pub(crate) fn gather(s: &GatherSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (data, idx) = (i[0], i[1]);
    let g = split(&s.data, &s.indices, s.axis);
    let mut out = Vec::with_capacity(g.outer * g.count * g.inner);
    for o in 0..g.outer {
        for &v in idx.iter().take(g.count) {
            match resolve_index(v, g.n, true) {
                Some(r) => {
                    let base = (o * g.n + r) * g.inner;
                    out.extend_from_slice(&data[base..base + g.inner]);
                }
                None => out.extend(std::iter::repeat_n(0.0, g.inner)),
            }
        }
    }
    vec![out]
}

pub(crate) fn scatter(s: &ScatterSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (updates, idx) = (i[0], i[1]);
    let g = split(&s.data, &s.indices, s.axis);
    let mut out = match s.init {
        ScatterInit::Zero => vec![0.0; numel(&s.data)],
        ScatterInit::Prior => i[2].to_vec(),
    };
    for o in 0..g.outer {
        for (j, &v) in idx.iter().enumerate().take(g.count) {
            let Some(r) = resolve_index(v, g.n, true) else {
                continue;
            };
            let src = (o * g.count + j) * g.inner;
            let dst = (o * g.n + r) * g.inner;
            for k in 0..g.inner {
                match s.combine {
                    ScatterCombine::Sum => out[dst + k] += updates[src + k],
                    ScatterCombine::Last => out[dst + k] = updates[src + k],
                }
            }
        }
    }
    vec![out]
}
