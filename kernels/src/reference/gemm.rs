//! General matrix multiply.
//!
//! For every batch index `b` (row-major over `batch`) and `0 ≤ i < m`, `0 ≤ j < n`:
//!
//! ```text
//! C_b[i,j] = alpha · Σ_{p<k} op(A_b)[i,p] · op(B_b)[p,j]  +  beta · C_b[i,j]  (+ bias[j])
//! op(A)[i,p] = trans_a ? A[p,i] : A[i,p]      op(B)[p,j] = trans_b ? B[j,p] : B[p,j]
//! ```
//!
//! Element `(r, c)` of a stored matrix with leading dimension `ld` is at `r·ld + c`
//! (row-major) or `r + c·ld` (column-major), plus the batch offset
//! `Σ_d b_d · stride_d`. With `beta = 0`, C is not read. With `input_rounding`, every
//! element of A and B is first rounded to f16/bf16 (nearest even). Elements of C's
//! buffer that belong to no matrix (gaps from `ldc` or strides) keep the prior C when
//! `beta ≠ 0` and are 0 otherwise (a kernel leaves them untouched).

use super::elementwise::cast;
use crate::shape::{for_each_index, offset};
use crate::spec::GemmSpec;

pub(crate) fn gemm(s: &GemmSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
    let round = |v: f64| match s.input_rounding {
        Some(t) => cast(v, t),
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
                let mut v = s.alpha * acc;
                if s.beta != 0.0 {
                    v += s.beta * c[at];
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
