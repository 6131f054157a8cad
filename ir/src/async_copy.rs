//! Asynchronous copies from a buffer into shared memory: the IR's form of `cp.async`
//! (NVIDIA sm_80 and later), which moves a tile of an operand into shared memory
//! without passing it through registers, so that a kernel can keep several tiles in
//! flight while it computes on an earlier one (a multi-stage pipeline).
//!
//! Three statements ([`AsyncCopyOp`]), each executed by one invocation on its own
//! (they need no uniform control flow):
//! * `Start` begins copying `len` consecutive elements of a read-only buffer into a
//!   shared array, or zeros where its `valid` condition is false (then nothing is
//!   read, and the source index may be anything);
//! * `Commit` closes the invocation's group of copies started since its last
//!   `Commit` (a group may be empty);
//! * `Wait` blocks until at most `pending` of the invocation's committed groups are
//!   unfinished: the copies of every older group are then complete, in the
//!   invocation's own view. Copies not yet committed are not waited for.
//!
//! **Rules** (the validator checks the static ones, the interpreter the others):
//! * the source is a read-only buffer and the destination a shared array of the same
//!   element type; a copy moves 4, 8 or 16 bytes (`len` elements), and both indices
//!   are multiples of `len` (so every target's copy is naturally aligned);
//! * from its `Start` until the `Wait` that completes it, no invocation touches a
//!   copy's destination elements: they hold no defined value in that time;
//! * a completed copy's elements are the copying invocation's writes: the others see
//!   them after the next barrier, as any store;
//! * every copy is complete before its invocation's workgroup ends.
//!
//! Targets without asynchronous copies run the expansion
//! ([`expand_async_copies`](crate::passes::expand_async_copies)): each `Start` a load
//! and a store (or a store of zeros), `Commit` and `Wait` nothing. Every kernel that
//! keeps the rules means the same either way: completing a copy at once is one of the
//! schedules the rules allow.

use crate::kernel::{Expr, ParamId, SharedId};
use serde::{Deserialize, Serialize};

/// Bytes one copy may move.
pub const COPY_BYTES: [u32; 3] = [4, 8, 16];

/// One asynchronous-copy statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AsyncCopyOp {
    /// Starts copying `src[src_index .. src_index + len]` to
    /// `dst[dst_index .. dst_index + len]`; zeros instead where `valid` (a bool) is
    /// false.
    Start {
        dst: SharedId,
        dst_index: Expr,
        src: ParamId,
        src_index: Expr,
        len: u8,
        valid: Expr,
    },
    /// Closes the invocation's open group of copies.
    Commit,
    /// Waits until at most `pending` of the invocation's committed groups are
    /// unfinished.
    Wait { pending: u32 },
}

impl AsyncCopyOp {
    /// The expressions, in evaluation order, with their path segment names.
    pub fn exprs(&self) -> Vec<(&'static str, &Expr)> {
        match self {
            AsyncCopyOp::Start {
                dst_index,
                src_index,
                valid,
                ..
            } => vec![
                ("dst_index", dst_index),
                ("src_index", src_index),
                ("valid", valid),
            ],
            AsyncCopyOp::Commit | AsyncCopyOp::Wait { .. } => vec![],
        }
    }

    /// The expressions, mutably, in evaluation order.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            AsyncCopyOp::Start {
                dst_index,
                src_index,
                valid,
                ..
            } => vec![dst_index, src_index, valid],
            AsyncCopyOp::Commit | AsyncCopyOp::Wait { .. } => vec![],
        }
    }

    /// The path segment of the statement (as in the validator).
    pub fn name(&self) -> &'static str {
        match self {
            AsyncCopyOp::Start { .. } => "copy_start",
            AsyncCopyOp::Commit => "copy_commit",
            AsyncCopyOp::Wait { .. } => "copy_wait",
        }
    }
}
