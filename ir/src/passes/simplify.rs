//! Algebraic simplification of integer index arithmetic and boolean logic.
//!
//! Integer arithmetic in the IR wraps (two's complement, modulo 2^32 or 2^64), so the
//! integers of one type form a commutative ring and these identities hold exactly, for
//! every value including overflowing ones:
//!
//! * identities: `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1`, `x << 0`,
//!   `x >> 0`, `x | 0`, `x ^ 0`, `x & all-ones` (and their mirrored forms) become `x`;
//! * annihilators: `x * 0`, `x & 0`, `x % 1`, `x | all-ones` become the constant, but only
//!   when `x` [cannot fail](super::may_fail) — dropping a load or a division would drop
//!   its run-time error;
//! * canonical order: a literal on the left of a commutative operator (`+ * & | ^`) moves
//!   to the right (a literal cannot fail, so evaluation order is unobservable);
//! * `x - c` becomes `x + (-c)` (wrapping negation, exact modulo 2^n, also for u32);
//! * constants reassociate: `(x + c1) + c2 -> x + (c1 + c2)`, likewise for `* & | ^`, and
//!   `(x + c1) * c2 -> x * c2 + c1 * c2` (distributivity holds modulo 2^n);
//! * `!!x -> x` (bitwise or logical not is an involution) and `-(-x) -> x` for integers
//!   (wrapping negation is an involution); a cast of an integer or bool to its own type
//!   is dropped.
//!
//! Boolean logic (both sides of `&` and `|` are always evaluated): `true & x`,
//! `false | x`, `false ^ x` and mirrors become `x`; `x & false -> false` and
//! `x | true -> true` when `x` cannot fail.
//!
//! Floating-point expressions are never rewritten: `x + 0.0` is not `x` for `x = -0.0`,
//! `x * 0.0` is not `0.0` for infinities or NaN, and reassociation changes rounding.
//! New constants are computed with [`crate::eval`], exactly as at run time. Like
//! folding, the pass never turns an index into a literal the validator would reject.

use super::{expr_type, index_ok, map_children, may_fail, with_body};
use crate::eval::{self, Value};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// Runs the pass over a whole kernel.
pub fn simplify_kernel(kernel: &Kernel) -> Kernel {
    with_body(kernel, block(kernel, &kernel.body))
}

fn block(k: &Kernel, b: &[Stmt]) -> Block {
    b.iter().map(|s| stmt(k, s)).collect()
}

fn stmt(k: &Kernel, s: &Stmt) -> Stmt {
    match s {
        Stmt::Let { local, value } => Stmt::Let {
            local: *local,
            value: simplify_expr(k, value),
        },
        Stmt::Assign { local, value } => Stmt::Assign {
            local: *local,
            value: simplify_expr(k, value),
        },
        Stmt::Store { mem, index, value } => {
            let value = simplify_expr(k, value);
            let lanes = expr_type(k, &value).map_or(1, |t| t.lanes);
            Stmt::Store {
                mem: *mem,
                index: simplify_index(k, *mem, index, lanes),
                value,
            }
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
        } => Stmt::If {
            cond: simplify_expr(k, cond),
            then_body: block(k, then_body),
            else_body: block(k, else_body),
        },
        Stmt::For {
            var,
            start,
            end,
            step,
            body,
        } => Stmt::For {
            var: *var,
            start: simplify_expr(k, start),
            end: simplify_expr(k, end),
            step: *step,
            body: block(k, body),
        },
        Stmt::Fragment(op) => {
            let mut op = op.clone();
            for e in op.exprs_mut() {
                *e = simplify_expr(k, e);
            }
            if let Some(body) = op.body_mut() {
                *body = block(k, body);
            }
            Stmt::Fragment(op)
        }
        Stmt::AsyncCopy(op) => Stmt::AsyncCopy(match op {
            crate::AsyncCopyOp::Start(c) => crate::AsyncCopyOp::Start(c.rewritten(
                |mem, index, len| simplify_index(k, mem, index, len),
                |valid| simplify_expr(k, valid),
            )),
            crate::AsyncCopyOp::Commit | crate::AsyncCopyOp::Wait { .. } => op.clone(),
        }),
        Stmt::Return | Stmt::Barrier => s.clone(),
    }
}

/// Simplifies an index; a literal the validator would reject keeps the original form.
fn simplify_index(k: &Kernel, mem: Memory, index: &Expr, lanes: u8) -> Expr {
    let s = simplify_expr(k, index);
    if index_ok(k, mem, &s, lanes) {
        s
    } else {
        index.clone()
    }
}

/// Simplifies an expression bottom-up (one sweep; [`super::fold_simplify`] iterates).
pub fn simplify_expr(k: &Kernel, e: &Expr) -> Expr {
    match e {
        Expr::Load { mem, index, lanes } => Expr::Load {
            mem: *mem,
            index: Box::new(simplify_index(k, *mem, index, *lanes)),
            lanes: *lanes,
        },
        _ => rewrite(k, map_children(e, |c| simplify_expr(k, c))),
    }
}

fn bin(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
}

/// `a op b` as `eval` computes it (never fails for the wrapping operators used here).
fn combine(op: BinaryOp, a: Scalar, b: Scalar) -> Option<Scalar> {
    eval::binary(op, Value::scalar(a), Value::scalar(b))
        .ok()?
        .as_scalar()
}

fn is_int(k: &Kernel, e: &Expr) -> bool {
    expr_type(k, e).is_some_and(|t| t.scalar.is_int())
}

/// Rewrites the root of `e`, whose children are already simplified.
fn rewrite(k: &Kernel, e: Expr) -> Expr {
    match e {
        Expr::Binary { op, lhs, rhs } => match expr_type(k, &lhs) {
            Some(t) if t.is_scalar() && t.scalar.is_int() => {
                int_binary(k, op, *lhs, *rhs, t.scalar)
            }
            Some(t) if t == Type::BOOL => bool_binary(k, op, *lhs, *rhs),
            _ => Expr::Binary { op, lhs, rhs },
        },
        Expr::Unary { op, arg } => match *arg {
            Expr::Unary {
                op: inner_op,
                arg: inner,
            } if inner_op == op && (op == UnaryOp::Not || is_int(k, &inner)) => *inner,
            arg => Expr::Unary {
                op,
                arg: Box::new(arg),
            },
        },
        Expr::Cast { to, arg } => {
            let same = expr_type(k, &arg)
                .is_some_and(|t| t.scalar == to && (to.is_int() || to == ScalarType::Bool));
            if same {
                *arg
            } else {
                Expr::Cast { to, arg }
            }
        }
        e => e,
    }
}

/// `Some((x, c))` when `e` is `x op c` with a literal `c`; otherwise gives `e` back.
fn split_lit(e: Expr, op: BinaryOp) -> Result<(Expr, Scalar), Expr> {
    match e {
        Expr::Binary { op: o, lhs, rhs } if o == op && rhs.as_lit().is_some() => match rhs.as_lit()
        {
            Some(c) => Ok((*lhs, c)),
            None => Err(Expr::Binary { op: o, lhs, rhs }),
        },
        e => Err(e),
    }
}

fn int_binary(k: &Kernel, op: BinaryOp, l: Expr, r: Expr, ty: ScalarType) -> Expr {
    use BinaryOp as B;
    let (lc, rc) = (l.as_lit(), r.as_lit());
    let zero = Scalar::zero(ty);
    let one = Scalar::one(ty);
    let ones = Scalar::int_wrapping(ty, -1).unwrap_or(zero);
    let commutative = matches!(op, B::Add | B::Mul | B::And | B::Or | B::Xor);

    // Identities.
    let right_identity = match op {
        B::Add | B::Sub | B::Or | B::Xor => Some(zero),
        B::Mul | B::Div => Some(one),
        B::And => Some(ones),
        B::Shl | B::Shr => Some(Scalar::U32(0)),
        B::Rem => None,
    };
    if right_identity.is_some() && rc == right_identity {
        return l;
    }
    if commutative && lc.is_some() && lc == right_identity {
        return r;
    }

    // Annihilators (the dropped side must not be able to fail).
    let absorbing = match op {
        B::Mul | B::And => Some(zero),
        B::Or => Some(ones),
        _ => None,
    };
    if absorbing.is_some() {
        if rc == absorbing && !may_fail(k, &l) {
            return r;
        }
        if lc == absorbing && !may_fail(k, &r) {
            return l;
        }
    }
    if op == B::Rem && rc == Some(one) && !may_fail(k, &l) {
        return Expr::Lit(zero);
    }

    // Canonical order: literal on the right.
    if commutative && lc.is_some() && rc.is_none() {
        return int_binary(k, op, r, l, ty);
    }

    let Some(c2) = rc else {
        return bin(op, l, r);
    };

    // x - c -> x + (-c)
    if op == B::Sub {
        return match combine(B::Sub, zero, c2) {
            Some(neg) => int_binary(k, B::Add, l, Expr::Lit(neg), ty),
            None => bin(op, l, r),
        };
    }

    // (x op c1) op c2 -> x op (c1 op c2)
    let l = if commutative {
        match split_lit(l, op) {
            Ok((x, c1)) => {
                return match combine(op, c1, c2) {
                    Some(c) => int_binary(k, op, x, Expr::Lit(c), ty),
                    None => bin(op, bin(op, x, Expr::Lit(c1)), r),
                };
            }
            Err(l) => l,
        }
    } else {
        l
    };

    // (x + c1) * c2 -> x * c2 + c1 * c2
    if op == B::Mul {
        match split_lit(l, B::Add) {
            Ok((x, c1)) => {
                return match combine(B::Mul, c1, c2) {
                    Some(c) => {
                        let scaled = int_binary(k, B::Mul, x, Expr::Lit(c2), ty);
                        int_binary(k, B::Add, scaled, Expr::Lit(c), ty)
                    }
                    None => bin(op, bin(B::Add, x, Expr::Lit(c1)), r),
                };
            }
            Err(l) => return bin(op, l, r),
        }
    }
    bin(op, l, r)
}

fn bool_binary(k: &Kernel, op: BinaryOp, l: Expr, r: Expr) -> Expr {
    use BinaryOp as B;
    let (lc, rc) = (l.as_lit(), r.as_lit());
    let (t, f) = (Some(Scalar::Bool(true)), Some(Scalar::Bool(false)));
    let (identity, absorbing) = match op {
        B::And => (t, f),
        B::Or => (f, t),
        B::Xor => (f, None),
        _ => return bin(op, l, r),
    };
    if rc == identity {
        return l;
    }
    if lc == identity {
        return r;
    }
    if absorbing.is_some() {
        if rc == absorbing && !may_fail(k, &l) {
            return r;
        }
        if lc == absorbing && !may_fail(k, &r) {
            return l;
        }
    }
    bin(op, l, r)
}
