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

use crate::kernel::{Expr, Memory, ParamId, SharedId};
use serde::{Deserialize, Serialize};

/// Bytes one copy may move.
pub const COPY_BYTES: [u32; 3] = [4, 8, 16];

/// One asynchronous-copy statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AsyncCopyOp {
    /// Starts one copy.
    Start(CopyStart),
    /// Closes the invocation's open group of copies.
    Commit,
    /// Waits until at most `pending` of the invocation's committed groups are
    /// unfinished.
    Wait { pending: u32 },
}

/// Copying `src[src_index .. src_index + len]` to `dst[dst_index .. dst_index + len]`;
/// zeros instead where `valid` (a bool) is false.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyStart {
    pub dst: SharedId,
    pub dst_index: Expr,
    pub src: ParamId,
    pub src_index: Expr,
    pub len: u8,
    pub valid: Expr,
}

impl CopyStart {
    /// The destination and the source as memories.
    pub fn memories(&self) -> (Memory, Memory) {
        (Memory::Shared(self.dst), Memory::Buffer(self.src))
    }

    /// The same copy with its indices rewritten by `index(memory, index, len)` and
    /// its condition by `value` (as passes rewrite every access and expression).
    pub fn rewritten(
        &self,
        mut index: impl FnMut(Memory, &Expr, u8) -> Expr,
        value: impl FnOnce(&Expr) -> Expr,
    ) -> CopyStart {
        let (dst, src) = self.memories();
        CopyStart {
            dst_index: index(dst, &self.dst_index, self.len),
            src_index: index(src, &self.src_index, self.len),
            valid: value(&self.valid),
            ..self.clone()
        }
    }
}

impl AsyncCopyOp {
    /// The expressions, in evaluation order, with their path segment names.
    pub fn exprs(&self) -> Vec<(&'static str, &Expr)> {
        match self {
            AsyncCopyOp::Start(c) => vec![
                ("dst_index", &c.dst_index),
                ("src_index", &c.src_index),
                ("valid", &c.valid),
            ],
            AsyncCopyOp::Commit | AsyncCopyOp::Wait { .. } => vec![],
        }
    }

    /// The expressions, mutably, in evaluation order.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            AsyncCopyOp::Start(c) => vec![&mut c.dst_index, &mut c.src_index, &mut c.valid],
            AsyncCopyOp::Commit | AsyncCopyOp::Wait { .. } => vec![],
        }
    }

    /// The path segment of the statement (as in the validator).
    pub fn name(&self) -> &'static str {
        match self {
            AsyncCopyOp::Start(_) => "copy_start",
            AsyncCopyOp::Commit => "copy_commit",
            AsyncCopyOp::Wait { .. } => "copy_wait",
        }
    }
}
