//! Constant folding and constant propagation.
//!
//! **Folding.** A `Unary`, `Binary`, `Cmp`, `Math`, `Cast`, `Bitcast` or `Select` whose
//! operands are all literals becomes the literal that [`crate::eval`] computes for it —
//! the very functions the interpreter calls, so the folded value is bit-identical to the
//! one the unfolded node would have produced at run time. When `eval` reports an error
//! (integer division by zero, a shift by the bit width or more) the node stays, so the
//! run-time error stays too. Vector values cannot be literals: `Vector` and `Splat` stay,
//! but `Extract` of a `Vector` or `Splat` picks the lane (when the dropped lanes cannot
//! fail). A `Select` on a literal scalar condition becomes the chosen arm when the other
//! arm cannot fail (see [`super::may_fail`]): both arms are evaluated at run time, so a
//! failing arm must stay. An `If` on a literal condition is replaced by the statements
//! of the taken block, spliced in place: locals are kernel-wide declarations, so moving
//! a `Let` out of a block changes no scoping, and it only makes more locals definitely
//! assigned afterwards.
//!
//! **Propagation.** Walking each block in order, the pass remembers the locals whose
//! latest write (`Let` or `Assign`) stored a literal and replaces later reads of them by
//! that literal. Any other write forgets the local. An `If` analyses each branch from the
//! current facts and keeps afterwards only the facts both branches agree on (a local
//! written differently, or not known, in either is forgotten). A `For` forgets its
//! counter and every local its body may write before the body is analysed (the body runs
//! any number of times, so only facts no iteration can change hold inside it) and keeps
//! the same reduced facts after the loop. A literal is therefore only substituted where
//! every path to the read last wrote that literal.
//!
//! The result validates whenever the input did: types are unchanged, fewer locals are
//! read, control flow only gets more uniform, and an index that would fold to a literal
//! the validator rejects (out of bounds or unaligned, in code that never runs) keeps its
//! original form.

use super::{expr_type, index_ok, map_children, may_fail, with_body};
use crate::async_copy::AsyncCopyOp;
use crate::eval::{self, Value};
use crate::fragment::{FragmentMap, FragmentOp};
use crate::kernel::*;
use crate::scalar::Scalar;
use std::collections::HashMap;

/// Locals whose current value is a known literal.
type Env = HashMap<LocalId, Scalar>;

/// Runs the pass over a whole kernel.
pub fn fold_kernel(kernel: &Kernel) -> Kernel {
    let folder = Folder { k: kernel };
    let mut env = Env::new();
    let body = folder.block(&kernel.body, &mut env);
    with_body(kernel, body)
}

/// Folds one expression on its own (no local is known).
pub fn fold_expr(kernel: &Kernel, e: &Expr) -> Expr {
    Folder { k: kernel }.expr(e, &Env::new())
}

struct Folder<'k> {
    k: &'k Kernel,
}

impl Folder<'_> {
    fn block(&self, block: &[Stmt], env: &mut Env) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for s in block {
            self.stmt(s, env, &mut out);
        }
        out
    }

    fn stmt(&self, s: &Stmt, env: &mut Env, out: &mut Block) {
        match s {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let value = self.expr(value, env);
                match value.as_lit() {
                    Some(c) => env.insert(*local, c),
                    None => env.remove(local),
                };
                out.push(match s {
                    Stmt::Let { .. } => Stmt::Let {
                        local: *local,
                        value,
                    },
                    _ => Stmt::Assign {
                        local: *local,
                        value,
                    },
                });
            }
            Stmt::Store { mem, index, value } => {
                let value = self.expr(value, env);
                let lanes = expr_type(self.k, &value).map_or(1, |t| t.lanes);
                let index = self.index(*mem, index, lanes, env);
                out.push(Stmt::Store {
                    mem: *mem,
                    index,
                    value,
                });
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.expr(cond, env);
                if let Some(Scalar::Bool(taken)) = cond.as_lit() {
                    // Splice the taken block; it runs exactly where the `if` stood.
                    let block = if taken { then_body } else { else_body };
                    for s in block {
                        self.stmt(s, env, out);
                    }
                    return;
                }
                let mut then_env = env.clone();
                let then_body = self.block(then_body, &mut then_env);
                let mut else_env = env.clone();
                let else_body = self.block(else_body, &mut else_env);
                then_env.retain(|l, c| else_env.get(l) == Some(c));
                *env = then_env;
                out.push(Stmt::If {
                    cond,
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
                // The bounds are evaluated once, before the first iteration.
                let start = self.expr(start, env);
                let end = self.expr(end, env);
                let mut written = Vec::new();
                s.written_locals(&mut written);
                for l in &written {
                    env.remove(l);
                }
                let mut body_env = env.clone();
                let body = self.block(body, &mut body_env);
                out.push(Stmt::For {
                    var: *var,
                    start,
                    end,
                    step: *step,
                    body,
                });
            }
            Stmt::Fragment(FragmentOp::Map(m)) => {
                let mut written = Vec::new();
                s.written_locals(&mut written);
                let mut body_env = env.clone();
                for l in &written {
                    body_env.remove(l);
                }
                let body = self.block(&m.body, &mut body_env);
                let value = self.expr(&m.value, &body_env);
                for l in &written {
                    env.remove(l);
                }
                out.push(Stmt::Fragment(FragmentOp::Map(FragmentMap {
                    body,
                    value,
                    ..m.clone()
                })));
            }
            Stmt::Fragment(op) => {
                let mut op = op.clone();
                for e in op.exprs_mut() {
                    *e = self.expr(e, env);
                }
                out.push(Stmt::Fragment(op));
            }
            Stmt::AsyncCopy(op) => {
                let op = match op {
                    AsyncCopyOp::Start(c) => AsyncCopyOp::Start(c.rewritten(
                        |mem, index, len| self.index(mem, index, len, env),
                        |valid| self.expr(valid, env),
                    )),
                    AsyncCopyOp::Commit | AsyncCopyOp::Wait { .. } => op.clone(),
                };
                out.push(Stmt::AsyncCopy(op));
            }
            Stmt::Return | Stmt::Barrier => out.push(s.clone()),
        }
    }

    /// Folds an index; a literal the validator would reject keeps the original form.
    fn index(&self, mem: Memory, index: &Expr, lanes: u8, env: &Env) -> Expr {
        let folded = self.expr(index, env);
        if index_ok(self.k, mem, &folded, lanes) {
            folded
        } else {
            index.clone()
        }
    }

    fn expr(&self, e: &Expr, env: &Env) -> Expr {
        match e {
            Expr::Local(l) => env.get(l).map_or_else(|| e.clone(), |c| Expr::Lit(*c)),
            Expr::Load { mem, index, lanes } => Expr::Load {
                mem: *mem,
                index: Box::new(self.index(*mem, index, *lanes, env)),
                lanes: *lanes,
            },
            _ => fold_node(self.k, map_children(e, |c| self.expr(c, env))),
        }
    }
}

fn lit_value(e: &Expr) -> Option<Value> {
    e.as_lit().map(Value::scalar)
}

fn to_lit(v: Result<Value, eval::EvalError>) -> Option<Expr> {
    v.ok()?.as_scalar().map(Expr::Lit)
}

/// Folds the root of `e`, whose children are already folded. Returns `e` unchanged when
/// nothing applies.
pub(crate) fn fold_node(k: &Kernel, e: Expr) -> Expr {
    let folded = match &e {
        Expr::Unary { op, arg } => lit_value(arg).and_then(|a| to_lit(eval::unary(*op, a))),
        Expr::Binary { op, lhs, rhs } => lit_value(lhs)
            .zip(lit_value(rhs))
            .and_then(|(a, b)| to_lit(eval::binary(*op, a, b))),
        Expr::Cmp { op, lhs, rhs } => lit_value(lhs)
            .zip(lit_value(rhs))
            .and_then(|(a, b)| to_lit(eval::cmp(*op, a, b))),
        Expr::Math { func, args } => args
            .iter()
            .map(lit_value)
            .collect::<Option<Vec<_>>>()
            .and_then(|vals| to_lit(eval::math(*func, &vals))),
        Expr::Cast { to, arg } => lit_value(arg).and_then(|a| to_lit(Ok(eval::cast(*to, a)))),
        Expr::Bitcast { to, arg } => lit_value(arg).and_then(|a| to_lit(eval::bitcast(*to, a))),
        Expr::Select {
            cond,
            on_true,
            on_false,
        } => match (cond.as_lit(), lit_value(on_true), lit_value(on_false)) {
            (Some(c), Some(t), Some(f)) => to_lit(eval::select(Value::scalar(c), t, f)),
            (Some(Scalar::Bool(true)), _, _) if !may_fail(k, on_false) => Some((**on_true).clone()),
            (Some(Scalar::Bool(false)), _, _) if !may_fail(k, on_true) => {
                Some((**on_false).clone())
            }
            _ => None,
        },
        Expr::Extract { arg, lane } => match &**arg {
            Expr::Splat { arg: item, .. } => Some((**item).clone()),
            Expr::Vector(items) => {
                let lane = *lane as usize;
                let others_safe = items
                    .iter()
                    .enumerate()
                    .all(|(i, item)| i == lane || !may_fail(k, item));
                if others_safe {
                    items.get(lane).cloned()
                } else {
                    None
                }
            }
            _ => None,
        },
        _ => None,
    };
    folded.unwrap_or(e)
}
