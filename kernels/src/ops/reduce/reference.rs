//! f64 reference of the reduction family (formulas in [`super`]).

use super::spec::{ReduceFn, ReduceSpec};
use crate::ops::elementwise::reference::{max_num, min_num};
use crate::reference::wrap;
use crate::shape::{for_each_index, numel, offset, row_major_strides};

/// Offsets into `x` of the reduced sub-block (row-major over the reduced axes), and of
/// each kept position, in output order.
pub(crate) fn reduction_plan(shape: &[usize], axes: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let strides = row_major_strides(shape);
    let (mut kept_dims, mut kept_strides, mut red_dims, mut red_strides) =
        (vec![], vec![], vec![], vec![]);
    for d in 0..shape.len() {
        if axes.contains(&d) {
            red_dims.push(shape[d]);
            red_strides.push(strides[d]);
        } else {
            kept_dims.push(shape[d]);
            kept_strides.push(strides[d]);
        }
    }
    let mut reduced = Vec::with_capacity(numel(&red_dims));
    for_each_index(&red_dims, |i| reduced.push(offset(i, &red_strides)));
    let mut kept = Vec::with_capacity(numel(&kept_dims));
    for_each_index(&kept_dims, |i| kept.push(offset(i, &kept_strides)));
    (reduced, kept)
}

/// Reduces one set of values.
pub fn reduce_values(func: ReduceFn, values: &[f64]) -> f64 {
    match func {
        ReduceFn::Sum => values.iter().sum(),
        ReduceFn::Mean => values.iter().sum::<f64>() / values.len() as f64,
        ReduceFn::Max => values.iter().copied().fold(f64::NAN, max_num),
        ReduceFn::Min => values.iter().copied().fold(f64::NAN, min_num),
        ReduceFn::MaxNan | ReduceFn::MinNan if values.iter().any(|v| v.is_nan()) => f64::NAN,
        ReduceFn::MaxNan => values.iter().copied().fold(f64::NAN, max_num),
        ReduceFn::MinNan => values.iter().copied().fold(f64::NAN, min_num),
        ReduceFn::ArgMax | ReduceFn::ArgMin => {
            let mut best: Option<(usize, f64)> = None;
            for (p, &v) in values.iter().enumerate() {
                if v.is_nan() {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((_, b)) => {
                        if func == ReduceFn::ArgMax {
                            v > b
                        } else {
                            v < b
                        }
                    }
                };
                if better {
                    best = Some((p, v));
                }
            }
            best.map_or(0.0, |(p, _)| p as f64)
        }
    }
}

pub(super) fn reduce(s: &ReduceSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let (reduced, kept) = reduction_plan(&s.shape, &s.axes);
    if reduced.is_empty() {
        // Over nothing: the identity (ONNX), plus the prior where it accumulates.
        let identity = s.func.identity(s.dtype).map_or(f64::NAN, |v| v.to_f64());
        let y = match (s.accumulate, i.get(1)) {
            (true, Some(prior)) => prior.iter().map(|&p| wrap(s.dtype, p + identity)).collect(),
            _ => vec![identity; kept.len()],
        };
        return vec![y];
    }
    let mut vals = vec![0.0; reduced.len()];
    let mut y: Vec<f64> = kept
        .iter()
        .map(|&base| {
            for (v, &r) in vals.iter_mut().zip(&reduced) {
                *v = x[base + r];
            }
            let r = reduce_values(s.func, &vals);
            if s.func == ReduceFn::Sum {
                wrap(s.dtype, r)
            } else {
                r
            }
        })
        .collect();
    if s.accumulate {
        for (v, &p) in y.iter_mut().zip(i[1]) {
            *v = wrap(s.dtype, *v + p);
        }
    }
    vec![y]
}
