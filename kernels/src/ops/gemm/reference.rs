//! f64 reference of GEMM (the definition is in [`super`]).

use super::spec::GemmSpec;
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
                let mut v = alpha * acc;
                if s.beta != 0.0 {
                    v += beta * c[at];
                }
                if let Some(bias) = bias {
                    v += bias[col];
                }
                c[at] = v;
            }
        }
    });
    vec![c]
}
