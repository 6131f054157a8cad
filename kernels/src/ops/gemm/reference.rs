//! f64 reference of GEMM (the definition is in [`super`]).

use super::spec::GemmSpec;
use crate::lower::math::compute_type;
use crate::reference::{attribute, round_to};
use crate::shape::{for_each_index, offset};

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
        Some(t) => round_to(t, v),
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
                c[at] = v;
            }
        }
    });
    vec![c]
}
