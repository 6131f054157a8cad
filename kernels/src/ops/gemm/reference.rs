//! f64 reference of GEMM (the definition is in [`super`]).

use super::spec::GemmSpec;
use crate::lower::math::compute_type;
use crate::op::Op;
use crate::ops::elementwise::{activation_terms, apply_activation};
use crate::reference::{attribute, round_to};
use crate::shape::{for_each_index, offset};
use crate::tolerance::{gamma, unit_roundoff};

pub(super) fn gemm(s: &GemmSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (a, b) = (i[0], i[1]);
    let bias = if s.bias { Some(i[2]) } else { None };
    let prior_c = if s.beta != 0.0 {
        Some(i[if s.bias { 3 } else { 2 }])
    } else {
        None
    };
    let (pa, pb, pc) = (s.a(), s.b(), s.c());
    let mut c = match prior_c {
        Some(p) => p.to_vec(),
        None => vec![0.0; pc.extent(&s.batch)],
    };
    let (alpha, beta) = (attribute(s.dtype, s.alpha), attribute(s.dtype, s.beta));
    // The epilogue's intermediates are values of the compute type, as the kernel (and
    // cuBLAS behind PyTorch's addmm) holds them: past its range they are ±∞, so
    // `alpha·Σ` overflowing meets a `−∞` from `beta·C` or the bias as NaN.
    let inter = |v: f64| round_to(compute_type(s.dtype), v);
    let round = |v: f64| match s.input_rounding {
        Some(t) => t.round(v),
        None => v,
    };
    for_each_index(&s.batch, |bi| {
        let (oa, ob, oc) = (
            offset(bi, &pa.batch_strides),
            offset(bi, &pb.batch_strides),
            offset(bi, &pc.batch_strides),
        );
        for row in 0..s.m {
            for col in 0..s.n {
                let mut acc = 0.0;
                for p in 0..s.k {
                    let av = if s.trans_a {
                        a[oa + pa.index(p, row)]
                    } else {
                        a[oa + pa.index(row, p)]
                    };
                    let bv = if s.trans_b {
                        b[ob + pb.index(col, p)]
                    } else {
                        b[ob + pb.index(p, col)]
                    };
                    acc += round(av) * round(bv);
                }
                let at = oc + pc.index(row, col);
                let mut v = alpha * inter(acc);
                if s.beta != 0.0 {
                    v = inter(v) + inter(beta * c[at]);
                }
                if let Some(bias) = bias {
                    v = inter(v) + bias[col];
                }
                if let Some(act) = s.activation {
                    v = apply_activation(act, s.dtype, inter(v));
                }
                c[at] = v;
            }
        }
    });
    vec![c]
}

/// What a GEMM with an activation is held to, per element of C in units of `u`
/// (`Tolerance::conditioned(1)`): the bound without it, `γ_{k+4} · Σ|terms|`, carried
/// through the activation (times its largest slope), plus the activation's own ULPs
/// of its terms at the epilogue's value. (Elements of C's buffer outside every
/// matrix keep their value exactly; any bound holds them.)
pub(super) fn condition(s: &GemmSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let plain = GemmSpec {
        activation: None,
        ..s.clone()
    };
    let values = gemm(&plain, i).remove(0);
    let Some(act) = s.activation else {
        return vec![values.iter().map(|v| v.abs()).collect()];
    };
    let magnitudes: Vec<Vec<f64>> = i
        .iter()
        .map(|x| x.iter().map(|v| v.abs()).collect())
        .collect();
    let magnitudes: Vec<&[f64]> = magnitudes.iter().map(Vec::as_slice).collect();
    let terms = gemm(&plain.absolute(), &magnitudes).remove(0);
    let ct = compute_type(s.dtype);
    let u = unit_roundoff(ct);
    let carried = gamma(s.k + 4, u) / u * act.max_slope();
    vec![values
        .iter()
        .zip(&terms)
        .map(|(&v, &t)| carried * t + activation_terms(act, s.dtype, round_to(ct, v)))
        .collect()]
}
