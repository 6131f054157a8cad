//! Meaning-preserving IR passes.
//!
//! * [`fold`](mod@fold): constant folding and constant propagation of locals, including
//!   `if`/`select` on a literal condition.
//! * [`simplify`](mod@simplify): algebraic simplification of integer (index) arithmetic
//!   and boolean logic; floats are never touched.
//! * [`unroll`](mod@unroll): full unrolling of small loops with literal bounds.
//! * [`loop_budget`](mod@loop_budget): partial unrolling that keeps every invocation
//!   within a device's loop-iteration budget ([`fit_loop_budget`]); not part of
//!   [`optimize`]: a device that has such a budget chooses it.
//! * [`math`](mod@math): expansion of transcendental math calls into IR implementing
//!   them ([`expand_math`]), for targets whose native math is too loose or too slow.
//!   Not part of [`optimize`]: a target chooses it.
//!
//! * [`fragments`](mod@fragments): matrix fragments as plain per-invocation code
//!   ([`expand_fragments`]), for targets without matrix units. Not part of
//!   [`optimize`]: a target chooses it.
//! * [`async_copies`](mod@async_copies): asynchronous copies as plain loads and
//!   stores ([`expand_async_copies`]), for targets without them. Not part of
//!   [`optimize`]: a target chooses it.
//!
//! [`optimize`] chains them: unroll, then fold and simplify to a fixpoint, repeated while
//! unrolling still finds loops whose bounds folding has just made literal.
//!
//! Every pass maps a valid kernel to a valid kernel (definite assignment, constant
//! bounds and barrier uniformity included) with exactly the same observable behaviour
//! under the reference interpreter: the same stores, bit for bit, and the same run-time
//! error when the original has one. Two rules make that hold throughout:
//!
//! * an expression is only dropped when it [cannot fail](may_fail) at run time (a load
//!   may be out of bounds, an integer division may divide by zero, a shift may be too
//!   wide), so no run-time error disappears;
//! * an index is never rewritten into a literal that the validator would reject (a
//!   constant out of bounds in code that never runs is legal as an expression, not as a
//!   literal); such an index keeps its original form.

pub mod async_copies;
pub mod fold;
pub mod fragments;
pub mod loop_budget;
pub mod math;
pub mod simplify;
pub mod unroll;

pub use async_copies::expand_async_copies;
pub use fragments::expand_fragments;
pub use loop_budget::{fit_loop_budget, worst_case_loop_iterations, LoopBudget, LoopBudgetError};
pub use math::{expand_math, MathExpansion};

use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// Knobs of [`optimize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassOptions {
    /// Loops with at most this many iterations are unrolled.
    pub unroll_max_trips: u32,
    /// ... if `trips * block_size(body)` stays within this many nodes.
    pub unroll_max_nodes: usize,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            unroll_max_trips: 8,
            unroll_max_nodes: 512,
        }
    }
}

/// Rounds of fold + simplify before giving up on reaching a fixpoint (each round is a
/// full walk; real kernels settle in two or three).
const MAX_FOLD_ROUNDS: usize = 64;
/// Rounds of unroll + (fold + simplify): a loop whose bounds become literal only once an
/// enclosing loop is unrolled needs one more round.
const MAX_UNROLL_ROUNDS: usize = 8;

/// Constant folding and propagation (see [`mod@fold`]).
pub fn fold(kernel: &Kernel) -> Kernel {
    fold::fold_kernel(kernel)
}

/// Algebraic simplification of integer and boolean expressions (see [`mod@simplify`]).
pub fn simplify(kernel: &Kernel) -> Kernel {
    simplify::simplify_kernel(kernel)
}

/// Full unrolling of loops with literal bounds and at most `max_trips` iterations whose
/// unrolled size stays within `max_nodes` (see [`mod@unroll`]).
pub fn unroll(kernel: &Kernel, max_trips: u32, max_nodes: usize) -> Kernel {
    unroll::unroll_kernel(kernel, max_trips, max_nodes)
}

/// Fold and simplify until nothing changes (or a generous round limit is reached).
pub fn fold_simplify(kernel: &Kernel) -> Kernel {
    let mut k = kernel.clone();
    for _ in 0..MAX_FOLD_ROUNDS {
        let next = simplify(&fold(&k));
        if next == k {
            break;
        }
        k = next;
    }
    k
}

/// The whole pipeline: unroll, then fold + simplify to a fixpoint; repeated while it
/// still changes the kernel (bounded).
pub fn optimize(kernel: &Kernel, opts: &PassOptions) -> Kernel {
    let mut k = kernel.clone();
    for _ in 0..MAX_UNROLL_ROUNDS {
        let unrolled = unroll(&k, opts.unroll_max_trips, opts.unroll_max_nodes);
        let next = fold_simplify(&unrolled);
        if next == k {
            break;
        }
        k = next;
    }
    k
}

/// The kernel as a target compiles it: its matrix fragments expanded unless the
/// target runs them ([`expand_fragments`], `MathExpansion::runs_fragments_of`), its
/// asynchronous copies likewise ([`expand_async_copies`],
/// `MathExpansion::native_async_copies`), then
/// [`optimize`], then kernelc's own math
/// ([`expand_math`]) for the functions `expansion` names (those whose native
/// versions miss the tolerance table or are slow on the target) and for float `%` if
/// it says so, then [`optimize`]
/// again to fold the expansion's constants. Every step preserves meaning. The runtime
/// and the emitters' tests both use this, so a test compiles what a device runs.
pub fn for_target(kernel: &Kernel, expansion: &MathExpansion) -> Kernel {
    let options = PassOptions::default();
    let copies_stay = expansion.native_async_copies || !kernel.uses_async_copies();
    let copied = if copies_stay {
        std::borrow::Cow::Borrowed(kernel)
    } else {
        std::borrow::Cow::Owned(expand_async_copies(kernel))
    };
    let optimized = if expansion.runs_fragments_of(&copied) || !copied.uses_fragments() {
        optimize(&copied, &options)
    } else {
        optimize(&expand_fragments(&copied), &options)
    };
    if expansion.expands_nothing() {
        return optimized;
    }
    optimize(&expand_math(&optimized, expansion), &options)
}

/// The type of an expression of a valid kernel (`None` only for invalid IR).
///
/// Cheaper than [`crate::validate::type_of`]: it trusts the kernel and follows one path.
pub(crate) fn expr_type(k: &Kernel, e: &Expr) -> Option<Type> {
    Some(match e {
        Expr::Lit(s) => Type::scalar(s.ty()),
        Expr::Local(id) => k.local(*id)?.ty,
        Expr::Param(p) => match k.param(*p)? {
            Param::Scalar { ty, .. } => Type::scalar(*ty),
            Param::Buffer { .. } => return None,
        },
        Expr::Builtin { .. } => Type::U32,
        Expr::Load { mem, lanes, .. } => Type::vector(k.memory(*mem)?.0.value_type(), *lanes),
        Expr::Unary { arg, .. } => expr_type(k, arg)?,
        Expr::Binary { lhs, .. } => expr_type(k, lhs)?,
        Expr::Cmp { lhs, .. } => expr_type(k, lhs)?.with_scalar(ScalarType::Bool),
        Expr::Math { args, .. } => expr_type(k, args.first()?)?,
        Expr::Select { on_true, .. } => expr_type(k, on_true)?,
        Expr::Cast { to, arg } | Expr::Bitcast { to, arg } => expr_type(k, arg)?.with_scalar(*to),
        Expr::Vector(items) => {
            Type::vector(expr_type(k, items.first()?)?.scalar, items.len() as u8)
        }
        Expr::Splat { lanes, arg } => Type::vector(expr_type(k, arg)?.scalar, *lanes),
        Expr::Extract { arg, .. } => Type::scalar(expr_type(k, arg)?.scalar),
    })
}

/// Whether evaluating `e` may end in a run-time error: a load (out of bounds), an
/// integer division or remainder whose divisor is not a nonzero literal, or a shift
/// whose amount is not a literal below the bit width. Everything else in the IR is
/// total on valid operands. Conservative: `false` means it certainly cannot fail, so
/// the expression may be dropped without losing an error.
pub fn may_fail(k: &Kernel, e: &Expr) -> bool {
    let here = match e {
        Expr::Load { .. } => true,
        Expr::Binary {
            op: BinaryOp::Div | BinaryOp::Rem,
            lhs,
            rhs,
        } => match expr_type(k, lhs) {
            Some(t) if t.scalar.is_float() => false,
            _ => !matches!(rhs.as_lit(), Some(c) if c.ty().is_int() && !c.is_zero()),
        },
        Expr::Binary {
            op: BinaryOp::Shl | BinaryOp::Shr,
            lhs,
            rhs,
        } => {
            let bits = expr_type(k, lhs).map_or(0, |t| t.scalar.bits());
            !matches!(rhs.as_lit(), Some(Scalar::U32(a)) if a < bits)
        }
        _ => false,
    };
    here || e.children().iter().any(|c| may_fail(k, c))
}

/// Whether `index` may stand as the index of a `lanes`-wide access to `mem` as far as
/// the validator's constant checks go: a non-literal always may; a literal must be in
/// bounds and aligned.
pub(crate) fn index_ok(k: &Kernel, mem: Memory, index: &Expr, lanes: u8) -> bool {
    let Some(Scalar::U32(i)) = index.as_lit() else {
        return true;
    };
    let Some((_, len)) = k.memory(mem) else {
        return true;
    };
    let lanes = lanes.max(1);
    (lanes == 1 || i % lanes as u32 == 0) && i as u64 + lanes as u64 <= len
}

/// A copy of `e` with each direct child replaced by `f(child)` (children in evaluation
/// order), built without cloning the subtrees first.
pub(crate) fn map_children(e: &Expr, mut f: impl FnMut(&Expr) -> Expr) -> Expr {
    let mut b = |x: &Expr| Box::new(f(x));
    match e {
        Expr::Lit(_) | Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } => e.clone(),
        Expr::Load { mem, index, lanes } => Expr::Load {
            mem: *mem,
            index: b(index),
            lanes: *lanes,
        },
        Expr::Unary { op, arg } => Expr::Unary {
            op: *op,
            arg: b(arg),
        },
        Expr::Binary { op, lhs, rhs } => {
            let lhs = b(lhs);
            Expr::Binary {
                op: *op,
                lhs,
                rhs: b(rhs),
            }
        }
        Expr::Cmp { op, lhs, rhs } => {
            let lhs = b(lhs);
            Expr::Cmp {
                op: *op,
                lhs,
                rhs: b(rhs),
            }
        }
        Expr::Math { func, args } => Expr::Math {
            func: *func,
            args: args.iter().map(|a| *b(a)).collect(),
        },
        Expr::Select {
            cond,
            on_true,
            on_false,
        } => {
            let cond = b(cond);
            let on_true = b(on_true);
            Expr::Select {
                cond,
                on_true,
                on_false: b(on_false),
            }
        }
        Expr::Cast { to, arg } => Expr::Cast {
            to: *to,
            arg: b(arg),
        },
        Expr::Bitcast { to, arg } => Expr::Bitcast {
            to: *to,
            arg: b(arg),
        },
        Expr::Vector(items) => Expr::Vector(items.iter().map(|a| *b(a)).collect()),
        Expr::Splat { lanes, arg } => Expr::Splat {
            lanes: *lanes,
            arg: b(arg),
        },
        Expr::Extract { arg, lane } => Expr::Extract {
            arg: b(arg),
            lane: *lane,
        },
    }
}

/// A kernel with `k`'s declarations and a new body.
/// `block` rebuilt with every statement but `If` and `For` (whose blocks are
/// rebuilt the same way) replaced by the statements `leaf` pushes for it: the walk
/// of the passes that rewrite one kind of statement.
pub(crate) fn rewrite_leaves(block: &[Stmt], leaf: &mut impl FnMut(&Stmt, &mut Block)) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for s in block {
        match s {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let then_body = rewrite_leaves(then_body, leaf);
                let else_body = rewrite_leaves(else_body, leaf);
                out.push(Stmt::If {
                    cond: cond.clone(),
                    then_body,
                    else_body,
                });
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let body = rewrite_leaves(body, leaf);
                out.push(Stmt::For {
                    var: *var,
                    start: start.clone(),
                    end: end.clone(),
                    step: *step,
                    body,
                });
            }
            Stmt::Let { .. }
            | Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_)
            | Stmt::AsyncCopy(_) => leaf(s, &mut out),
        }
    }
    out
}

pub(crate) fn with_body(k: &Kernel, body: Block) -> Kernel {
    Kernel {
        name: k.name.clone(),
        workgroup_size: k.workgroup_size,
        params: k.params.clone(),
        shared: k.shared.clone(),
        locals: k.locals.clone(),
        fragments: k.fragments.clone(),
        body,
    }
}
