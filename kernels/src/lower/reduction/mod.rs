//! The shared machinery of every reduction-shaped op (reductions, softmax,
//! cross-entropy, layer and batch norm, and their backward passes).
//!
//! **View.** A reduction is a set of *slices* (one per output position), each a
//! sequence of `len` elements, laid over a row-major tensor by index arithmetic
//! ([`View`]): the kept axes give the slice's base offset, the reduced axes (any set of
//! them, in row-major order) the offset of element `j`. Neighbouring axes of the same
//! kind are merged first, so the common cases (last axis, middle axis) cost one
//! multiply.
//!
//! **Schedule.** [`Schedule`](schedule::Schedule) cuts the slices into *groups* of `g`
//! invocations (a power of two) that cooperate on one slice: each invocation folds
//! every `g`-th element into private accumulators, then the group combines them with a
//! shared-memory tree ([`Tree`]). Which invocations sit next to each other follows the
//! memory layout:
//!
//! * *rows* (the innermost reduced axis is contiguous): the `g` invocations of a group
//!   are neighbours and walk the slice together, so each step of the loop is one
//!   coalesced read of `g` consecutive elements; short slices pack several groups into
//!   a workgroup;
//! * *columns* (the innermost kept axis is contiguous): neighbouring invocations own
//!   neighbouring slices, so each step reads `p` consecutive elements, one per slice;
//!   what is left of the workgroup splits `len`.
//!
//! On a CPU (one invocation per workgroup) `g = 1`: no shared memory, no barrier, and
//! one workgroup loops over enough slices to amortise its scheduling.
//!
//! **Vectors.** Steps load the caps' vector width (2 or 4 lanes, at most 16 bytes) of
//! contiguous elements where the contiguous axis is a multiple of it. In rows, the
//! lanes are neighbouring elements of one slice, each with its own state, combined
//! before the tree. In columns, they are one element of each of 4 (2) adjacent
//! slices: a group then owns that many slices and every state is one lane per slice,
//! through the tree and into the second pass. On a CPU this is the SIMD width; on a
//! GPU, 128-bit loads.
//!
//! **Split.** When the slices are too few to fill the device and long enough to share
//! ([`split_parts`](schedule::split_parts)), [`fold_plan`] cuts each slice into parts: a
//! first launch folds each part into a partial state in temporaries, a second combines
//! the partials of each slice (a short column reduction) and finishes. Sum of a whole
//! tensor, batch-norm statistics over few channels and the parameter gradients of layer
//! norm take this path.
//!
//! **Monoids.** What is folded is a [`Monoid`]: a tuple of typed values with an
//! associative combine (sums, extrema, `(value, index)` for arg-reductions, `(max, sum)`
//! for online softmax, `(count, mean, M2)` for Welford). The tree, the split and the
//! per-element loop are written once against it.

mod fold;
mod group;
mod launch;
mod monoid;
mod schedule;
mod tree;
mod view;

pub use fold::{fold_plan, Fold, FoldFns, Item};
pub use group::{Group, Slices, Step};
pub use launch::{declare, row_kernel, Buf};
pub use monoid::{lowest_finite, ArgExtremum, Extremum, LogSumExp, Monoid, Sum, Welford};
pub use tree::Tree;
pub use view::View;
