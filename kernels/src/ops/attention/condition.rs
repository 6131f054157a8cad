//! What the attention family's conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`.
//!
//! Attention: a score `sⱼ = scale·q·kⱼ (+ mask)` is a dot product good to
//! `σⱼ = (d + 2)·|scale|·Σ|q·kⱼ| + |maskⱼ|`; softmax turns score errors and the shift by
//! the maximum into relative errors of the weights `pⱼ`, and the output
//! `oₑ = Σ pⱼ·vⱼₑ` is a sum of `n` terms: `Σⱼ pⱼ·|vⱼₑ|·(2σⱼ + |sⱼ − m| + 3n + 10)`.
//! A query that sees no key gives exactly 0. At f16 and bf16 the weights may also be
//! rounded to the storage type before they multiply `v` (the matrix units multiply
//! 16-bit operands, as every flash-attention kernel does): each term adds
//! `|vⱼₑ|·(u_s·pⱼ + ulp_s(0)/2)` (the storage type's unit roundoff, and half its
//! smallest subnormal where `pⱼ` underflows it), in units of the compute type's `u`.
//!
//! Its log-sum-exp `m + ln Σ e^{sⱼ − m}` moves by the weighted score errors, the
//! rounding of the `n`-term sum (relative, so absolute after the log) and the final
//! additions: `Σ pⱼ·(σⱼ + |sⱼ − m|) + 2n + 4 + |lse|`.
//!
//! RoPE `y = x₁·cos − x₂·sin` (and its pair) is a two-term sum:
//! `2(|x₁·cos| + |x₂·sin|) + |y|`.

use super::reference::at;
use super::spec::{AttentionSpec, RopeSpec};
use crate::lower::math::compute_type;
use crate::reference::attribute;
use crate::shape::{broadcast_strides, offset};
use crate::tolerance::{ulp, unit_roundoff};

pub(super) fn attention(s: &AttentionSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (q, k, v) = (i[0], i[1], i[2]);
    let mask = s
        .mask
        .as_ref()
        .map(|shape| (i[3], broadcast_strides(shape, &s.score_shape())));
    let scale = attribute(s.dtype, s.scale);
    let group = s.heads / s.kv_heads;
    let d = s.head_dim;
    // The rounding of a weight to the storage type, relative and absolute, in units of
    // the compute type's roundoff (0 where the weights stay in the compute type).
    let ct = compute_type(s.dtype);
    let (weight_rel, weight_abs) = if ct == s.dtype {
        (0.0, 0.0)
    } else {
        let u = unit_roundoff(ct);
        (unit_roundoff(s.dtype) / u, ulp(s.dtype, 0.0) / 2.0 / u)
    };
    let mut out = vec![0.0; s.batch * s.heads * s.seq_q * d];
    let mut lse = vec![0.0; s.batch * s.heads * s.seq_q];
    for b in 0..s.batch {
        for h in 0..s.heads {
            let g = h / group;
            for qi in 0..s.seq_q {
                let visible = if s.causal {
                    (qi + s.causal_keys() + 1)
                        .saturating_sub(s.seq_q)
                        .min(s.seq_k)
                } else {
                    s.seq_k
                };
                let mut scores = Vec::with_capacity(visible);
                for j in 0..visible {
                    let (mut dot, mut magnitude) = (0.0, 0.0);
                    for e in 0..d {
                        let p = q[at(s.layout, s.heads, s.seq_q, d, [b, h, qi, e])]
                            * k[at(s.layout, s.kv_heads, s.seq_k, d, [b, g, j, e])];
                        dot += p;
                        magnitude += p.abs();
                    }
                    let m = mask
                        .as_ref()
                        .map_or(0.0, |(m, st)| m[offset(&[b, h, qi, j], st)]);
                    let error = (d as f64 + 2.0) * scale.abs() * magnitude + m.abs();
                    scores.push((scale * dot + m, error));
                }
                let max = scores.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
                if scores.is_empty() || max == f64::NEG_INFINITY {
                    continue;
                }
                let denom: f64 = scores.iter().map(|(s, _)| (s - max).exp()).sum();
                let n = visible as f64;
                let weighted: f64 = scores
                    .iter()
                    .filter(|(score, _)| *score != f64::NEG_INFINITY)
                    .map(|(score, error)| {
                        (score - max).exp() / denom * (error + (score - max).abs())
                    })
                    .sum();
                lse[at(s.layout, s.heads, s.seq_q, 1, [b, h, qi, 0])] =
                    weighted + 2.0 * n + 4.0 + (max + denom.ln()).abs();
                for e in 0..d {
                    let mut condition = 0.0;
                    for (j, (score, error)) in scores.iter().enumerate() {
                        // A key masked out with −∞ adds nothing, exactly.
                        if *score == f64::NEG_INFINITY {
                            continue;
                        }
                        let p = (score - max).exp() / denom;
                        let vj = v[at(s.layout, s.kv_heads, s.seq_k, d, [b, g, j, e])];
                        condition +=
                            p * vj.abs() * (2.0 * error + (score - max).abs() + 3.0 * n + 10.0)
                                + vj.abs() * (weight_rel * p + weight_abs);
                    }
                    out[at(s.layout, s.heads, s.seq_q, d, [b, h, qi, e])] = condition;
                }
            }
        }
    }
    if s.lse {
        vec![out, lse]
    } else {
        vec![out]
    }
}

pub(super) fn rope(s: &RopeSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    // Dims that pass through are copied exactly: their own magnitude.
    let mut out: Vec<f64> = i[0].iter().map(|v| v.abs()).collect();
    super::reference::for_each_pair(s, i, |[lo, hi], [x1, x2], [c, sn]| {
        out[lo] = 2.0 * ((x1 * c).abs() + (x2 * sn).abs()) + (x1 * c - x2 * sn).abs();
        out[hi] = 2.0 * ((x1 * sn).abs() + (x2 * c).abs()) + (x1 * sn + x2 * c).abs();
    });
    vec![out]
}
