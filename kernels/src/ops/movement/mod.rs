//! The data-movement family: `permute`, `slice`, `concat`, `gather`, `scatter`,
//! `as_strided` (in its own file).
//!
//! * permute: `y[i_0, …, i_{r−1}] = x[k]` with `k[perm[j]] = i_j`
//!   (so `y.shape[j] = x.shape[perm[j]]`).
//! * slice: `y[o] = x[start + o ⊙ step]` per dimension.
//! * concat: `y` is the inputs laid end to end along `axis`:
//!   `y[…, off_t + j, …] = x_t[…, j, …]` with `off_t = Σ_{s<t} x_s.shape[axis]`.
//!
//! **Gather and scatter** along an axis (embedding forward and backward).
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

mod as_strided;
mod cases;
pub(crate) mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use as_strided::AsStridedSpec;
pub use spec::*;
