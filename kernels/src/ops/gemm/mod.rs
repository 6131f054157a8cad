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
//! `Σ_d b_d · stride_d`. With `beta = 0`, C is not read. The epilogue is arithmetic
//! in the compute type (f32 for f16/bf16): `Σ`, `alpha·Σ`, `beta·C` and their sum
//! before a bias are values of it, in the reference as in the kernel, so an `alpha·Σ`
//! past its range is ±∞ and meets an opposite infinity from `beta·C` or the bias as
//! NaN (as cuBLAS behind PyTorch's `addmm`). With `input_rounding`, every
//! element of A and B is first rounded to f16, bf16 or TF32 (nearest even; TF32 is
//! kernelc's TF32 mode, docs/semantics.md). Elements of C's
//! buffer that belong to no matrix (gaps from `ldc` or strides) keep the prior C when
//! `beta ≠ 0` and are 0 otherwise (a kernel leaves them untouched).

mod cases;
mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use spec::*;
