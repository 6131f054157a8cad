//! Reductions over a set of axes.
//!
//! For each output position, `R` is the set of input elements that differ from it only
//! along the reduced axes (in row-major order over those axes), `n = |R|`:
//!
//! * sum `Σ_R x`, mean `Σ_R x / n`;
//! * max / min: IEEE maxNum / minNum folded over `R` (NaN ignored unless all are NaN);
//! * argmax / argmin: the position in `R` (row-major over the reduced axes) of the
//!   first maximum / minimum, ignoring NaN (0 if all are NaN).
//!
//! On `i32`/`u32`, sums wrap. With `accumulate`, `y = prior + result`.

mod cases;
mod fused;
mod large;
mod lower;
pub(crate) mod reference;
mod spec;

pub use fused::*;
pub use spec::*;
