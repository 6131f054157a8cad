//! The walk: finds the calls to expand in a kernel, binds their arguments and hands them
//! to the algorithms of their width.

use super::emit::Emitter;
use super::shared;
use super::width::{Ops, W32, W64};
use super::MathExpansion;
use crate::kernel::*;
use crate::passes::{expr_type, map_children};
use crate::types::{ScalarType, Type};
use std::collections::HashSet;

pub(super) struct Expander<'a> {
    /// The output kernel's declarations (locals grow as the pass binds values).
    pub(super) kernel: Kernel,
    pub(super) opts: &'a MathExpansion,
    /// Every declared name, so new locals get fresh ones.
    pub(super) names: HashSet<String>,
    pub(super) counter: u32,
    /// The calls expanded for the statement being rewritten, with their results: a
    /// second identical call in the same statement (sigmoid's `exp(-|x|)` appears in
    /// both arms of its select) reuses the first one's values instead of emitting the
    /// algorithm again. Sound because a statement's expressions are pure and every
    /// `Let` of its expansions runs before it, with no assignment between.
    pub(super) expanded: Vec<(Expr, Expr)>,
}

impl Expander<'_> {
    pub(super) fn block(&mut self, block: &[Stmt]) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for s in block {
            self.stmt(s, &mut out);
        }
        out
    }

    /// Rewrites `s` into `out`, preceded by the `Let`s its expansions need.
    fn stmt(&mut self, s: &Stmt, out: &mut Block) {
        // Nested blocks are rewritten after the statement's own expressions, each
        // statement of theirs starting afresh.
        self.expanded.clear();
        let rewritten = match s {
            Stmt::Let { local, value } => Stmt::Let {
                local: *local,
                value: self.expr(value, out),
            },
            Stmt::Assign { local, value } => Stmt::Assign {
                local: *local,
                value: self.expr(value, out),
            },
            Stmt::Store { mem, index, value } => {
                let index = self.expr(index, out);
                Stmt::Store {
                    mem: *mem,
                    index,
                    value: self.expr(value, out),
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => Stmt::If {
                cond: self.expr(cond, out),
                then_body: self.block(then_body),
                else_body: self.block(else_body),
            },
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let start = self.expr(start, out);
                let end = self.expr(end, out);
                Stmt::For {
                    var: *var,
                    start,
                    end,
                    step: *step,
                    body: self.block(body),
                }
            }
            Stmt::Fragment(crate::FragmentOp::Map(m)) => {
                // The value reads the map's bound locals: what it expands to stays in
                // the map's own body.
                let mut body = self.block(&m.body);
                let value = self.expr(&m.value, &mut body);
                Stmt::Fragment(crate::FragmentOp::Map(crate::FragmentMap {
                    body,
                    value,
                    ..m.clone()
                }))
            }
            Stmt::Fragment(op) => {
                let mut op = op.clone();
                for e in op.exprs_mut() {
                    *e = self.expr(e, out);
                }
                Stmt::Fragment(op)
            }
            Stmt::AsyncCopy(op) => {
                let mut op = op.clone();
                for e in op.exprs_mut() {
                    *e = self.expr(e, out);
                }
                Stmt::AsyncCopy(op)
            }
            Stmt::Return | Stmt::Barrier => s.clone(),
        };
        out.push(rewritten);
    }

    /// Rewrites `e` bottom-up; the `Let`s of its expansions go to `out`.
    fn expr(&mut self, e: &Expr, out: &mut Block) -> Expr {
        let rebuilt = map_children(e, |c| self.expr(c, out));
        let candidate = match &rebuilt {
            Expr::Math { func, .. } => self.opts.expands(*func),
            Expr::Binary {
                op: BinaryOp::Rem, ..
            } => self.opts.float_rem,
            _ => false,
        };
        if !candidate {
            return rebuilt;
        }
        if let Some((_, result)) = self.expanded.iter().find(|(call, _)| *call == rebuilt) {
            return result.clone();
        }
        let expanded = match &rebuilt {
            Expr::Math { func, args } => self.expand_call(*func, args, out),
            Expr::Binary { lhs, rhs, .. } => self.expand_float_rem(lhs, rhs, out),
            _ => None,
        };
        match expanded {
            Some(result) => {
                self.expanded.push((rebuilt, result.clone()));
                result
            }
            None => rebuilt,
        }
    }

    /// The expansion of `func(args)`, or `None` to keep the call (f64 when not selected,
    /// or an argument that does not type, which a valid kernel never has).
    fn expand_call(&mut self, func: MathFn, args: &[Expr], out: &mut Block) -> Option<Expr> {
        let ty = expr_type(&self.kernel, args.first()?)?;
        if args.len() != func.arity() {
            return None;
        }
        if !self.opts.expands_call(func, ty.scalar) {
            return None;
        }
        let back_to = match ty.scalar {
            ScalarType::F32 => None,
            ScalarType::F16 | ScalarType::Bf16 => Some(ty.scalar),
            ScalarType::F64 => return self.expand_f64_call(func, args, ty, out),
            _ => return None,
        };
        let mut em = Emitter {
            x: self,
            out,
            lanes: ty.lanes,
            prefix: func.name(),
        };
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            let a = match back_to {
                Some(_) => Expr::Cast {
                    to: ScalarType::F32,
                    arg: Box::new(a.clone()),
                },
                None => a.clone(),
            };
            vals.push(Ops::<W32>::bind(&mut em, a));
        }
        let result = shared::expand::<W32, _>(&mut em, func, &vals)?;
        Some(match back_to {
            Some(to) => Expr::Cast {
                to,
                arg: Box::new(result),
            },
            None => result,
        })
    }

    /// The expansion of the f64 call `func(args)` (arguments of type `ty`).
    fn expand_f64_call(
        &mut self,
        func: MathFn,
        args: &[Expr],
        ty: Type,
        out: &mut Block,
    ) -> Option<Expr> {
        let mut em = Emitter {
            x: self,
            out,
            lanes: ty.lanes,
            prefix: func.name(),
        };
        let vals: Vec<Expr> = args
            .iter()
            .map(|a| Ops::<W64>::bind(&mut em, a.clone()))
            .collect();
        shared::expand::<W64, _>(&mut em, func, &vals)
    }

    /// Declares a new immutable local of type `ty` named after `prefix`.
    pub(super) fn new_local(&mut self, prefix: &str, ty: Type) -> LocalId {
        self.declare(prefix, ty, false)
    }

    /// Declares a new mutable local of type `ty` named after `prefix`.
    pub(super) fn new_var(&mut self, prefix: &str, ty: Type) -> LocalId {
        self.declare(prefix, ty, true)
    }

    fn declare(&mut self, prefix: &str, ty: Type, mutable: bool) -> LocalId {
        let name = loop {
            self.counter += 1;
            let candidate = format!("{prefix}_t{}", self.counter);
            if self.names.insert(candidate.clone()) {
                break candidate;
            }
        };
        let id = LocalId(self.kernel.locals.len() as u32);
        self.kernel.locals.push(LocalDecl { name, ty, mutable });
        id
    }
}
