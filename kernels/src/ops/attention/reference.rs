//! f64 references of the attention family (formulas in [`super`]).

use super::spec::{AttentionLayout, AttentionSpec, RopeSpec};
use crate::lower::math::compute_type;
use crate::reference::{attribute, resolve_index, round_to};
use crate::shape::{broadcast_strides, offset};

/// Flat index of `[b, h, s, d]` in a tensor with `heads` heads and `seq` positions.
pub(super) fn at(
    layout: AttentionLayout,
    heads: usize,
    seq: usize,
    dim: usize,
    bhsd: [usize; 4],
) -> usize {
    let [b, h, s, d] = bhsd;
    match layout {
        AttentionLayout::Bhsd => ((b * heads + h) * seq + s) * dim + d,
        AttentionLayout::Bshd => ((b * seq + s) * heads + h) * dim + d,
    }
}

pub(super) fn attention(s: &AttentionSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (q, k, v) = (i[0], i[1], i[2]);
    let mask = s
        .mask
        .as_ref()
        .map(|shape| (i[3], broadcast_strides(shape, &s.score_shape())));
    let scale = attribute(s.dtype, s.scale);
    let ct = compute_type(s.dtype);
    let group = s.heads / s.kv_heads;
    let d = s.head_dim;
    let mut o = vec![0.0; s.batch * s.heads * s.seq_q * d];
    let mut lse = vec![f64::NEG_INFINITY; s.batch * s.heads * s.seq_q];
    let mut scores = vec![0.0; s.seq_k];
    for b in 0..s.batch {
        for h in 0..s.heads {
            let g = h / group;
            for qi in 0..s.seq_q {
                // Keys visible to this query.
                let visible = if s.causal {
                    // j ≤ qi + seq_k − seq_q, i.e. j < qi + seq_k − seq_q + 1.
                    (qi + s.causal_keys() + 1)
                        .saturating_sub(s.seq_q)
                        .min(s.seq_k)
                } else {
                    s.seq_k
                };
                // The largest score, NaN ignored, and whether every visible score is −∞
                // (true with no visible key).
                let mut max = f64::NEG_INFINITY;
                let mut hidden = true;
                for (j, score) in scores.iter_mut().enumerate().take(visible) {
                    let mut dot = 0.0;
                    for dd in 0..d {
                        dot += q[at(s.layout, s.heads, s.seq_q, d, [b, h, qi, dd])]
                            * k[at(s.layout, s.kv_heads, s.seq_k, d, [b, g, j, dd])];
                    }
                    let mut sc = scale * dot;
                    if let Some((m, strides)) = &mask {
                        sc += m[offset(&[b, h, qi, j], strides)];
                    }
                    // The score is formed in the compute type: beyond its range it is
                    // ±∞, as in every implementation that computes in that type.
                    let sc = round_to(ct, sc);
                    *score = sc;
                    max = max.max(sc);
                    hidden &= sc == f64::NEG_INFINITY;
                }
                if hidden {
                    continue; // o stays zero, lse −∞
                }
                // Otherwise a NaN score, or a +∞ one (e^{∞−∞}), makes the row NaN, as
                // softmax does; `max` is −∞ here only if every other score is NaN.
                let mut denom = 0.0;
                for score in scores.iter_mut().take(visible) {
                    *score = (*score - max).exp();
                    denom += *score;
                }
                lse[at(s.layout, s.heads, s.seq_q, 1, [b, h, qi, 0])] = max + denom.ln();
                for dd in 0..d {
                    let mut acc = 0.0;
                    for (j, &p) in scores.iter().enumerate().take(visible) {
                        acc += p * v[at(s.layout, s.kv_heads, s.seq_k, d, [b, g, j, dd])];
                    }
                    o[at(s.layout, s.heads, s.seq_q, d, [b, h, qi, dd])] = acc / denom;
                }
            }
        }
    }
    if s.lse {
        vec![o, lse]
    } else {
        vec![o]
    }
}

pub(super) fn rope(s: &RopeSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let mut y = i[0].to_vec();
    for_each_pair(s, i, |[lo, hi], [x1, x2], [c, sn]| {
        y[lo] = x1 * c - x2 * sn;
        y[hi] = x1 * sn + x2 * c;
    });
    vec![y]
}

/// Every rotated pair of `x` (inputs `i`): its elements, their values and the
/// position's `[cos, sin]` (0, 0 out of range). Dims past `rotary_dim` are in none.
pub(super) fn for_each_pair(
    s: &RopeSpec,
    i: &[&[f64]],
    mut f: impl FnMut([usize; 2], [f64; 2], [f64; 2]),
) {
    let (x, cos, sin, pos) = (i[0], i[1], i[2], i[3]);
    let half = s.rotary() / 2;
    for b in 0..s.batch {
        for t in 0..s.seq {
            let p = resolve_index(pos[s.position_index(b, t)], s.max_positions, false);
            for h in 0..s.heads {
                let base = ((b * s.seq + t) * s.heads + h) * s.head_dim;
                for k in 0..half {
                    let cs = p.map_or([0.0, 0.0], |p| [cos[p * half + k], sin[p * half + k]]);
                    let (lo, hi) = s.pair(k);
                    let (lo, hi) = (base + lo, base + hi);
                    f([lo, hi], [x[lo], x[hi]], cs);
                }
            }
        }
    }
}
