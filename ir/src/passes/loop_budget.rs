//! Keeping a kernel within a device's loop-iteration budget.
//!
//! Some drivers stop loops that run "too long": Mesa's llvmpipe (lavapipe) gives each
//! invocation one counter of 65,535 loop iterations, decremented at the end of every
//! iteration of every loop, and when it reaches zero every loop exits early, silently.
//! The budget is per invocation, not per loop, so splitting a loop does not help;
//! fewer iterations do. [`fit_loop_budget`] bounds the iterations an invocation can
//! run and, where that bound is over the budget, partially unrolls loops (a loop
//! unrolled by `u` ends an iteration once per `u` trips) until it fits. A kernel that
//! cannot be brought under the budget is an error naming its bound, never a kernel
//! that would give wrong results.
//!
//! # The bound
//!
//! A loop `for v in s..e by step` runs at most `ceil(span / step)` trips, where `span`
//! bounds `e − s`. Without more, that is `max e − min s` from [`Ranges`] (within the
//! device's grid limit, which bounds workgroup and global ids; an unknown `e` is the
//! type's maximum, an unknown `u32` start 0, an unknown `i32` start `i32::MIN`).
//! Schedules write bounds like `s = base + local_id`, `e = select(base < n, base +
//! min(n − base, 256), 0)`, where each side alone spans the whole tensor but the
//! difference is at most 256: so `e` is looked through (`select` arms separately,
//! immutable locals defined once by a `let` without loads replaced by their
//! definition) and terms both sides add are cancelled, which is exact while neither
//! sum can wrap (their ranges are known) and every local read is defined once (so
//! both sides see the same values). The loop runs once per trip of each loop around
//! it, and both arms of an `if` count: lanes that diverge run both in turn, and on
//! llvmpipe they share the counter.
//!
//! # Unrolling by `u`, and why it preserves meaning
//!
//! ```text
//! let s' = s; let e' = e;                    // evaluated once, in the same order
//! for v0 in s'..e' by step·u {
//!     let v = v0;               body
//!     if (e' − v0) > 1·step   { let v = v0 + 1·step; body }
//!     ...
//!     if (e' − v0) > (u−1)·step { let v = v0 + (u−1)·step; body }
//! }
//! ```
//!
//! The original runs `body` for `v = s, s + step, ...` while `v < e`; the unrolled loop
//! runs it for the same values in the same order: inside the loop `v0 < e'`, so
//! `e' − v0` is a positive count that fits the counter's width as an unsigned value
//! (for `i32` the subtraction wraps and is read as `u32`: the exact difference), and
//! copy `k` runs exactly when `v0 + k·step < e'`, where the sum cannot wrap. Only
//! loops without a barrier are unrolled (the copies' guards need not be uniform), and
//! only while `step·u` and `(u−1)·step` fit the counter's type. Locals are kernel-wide
//! and a `let` may run more than once, so repeating the body's `let`s is valid.

use super::with_body;
use crate::analysis::{Interval, Ranges};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// The most a loop is unrolled by.
pub const MAX_UNROLL: u32 = 64;

/// A kernel that may run more loop iterations in one invocation than the budget, even
/// with every loop unrolled as far as allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}` may run up to {worst_case} loop iterations in one invocation \
     ({after_unrolling} after unrolling); this device runs at most {budget} faithfully"
)]
pub struct LoopBudgetError {
    pub kernel: String,
    /// The bound before unrolling.
    pub worst_case: u64,
    /// The bound with every loop unrolled as far as the pass would.
    pub after_unrolling: u64,
    pub budget: u64,
}

/// A device's loop-iteration budget, as [`fit_loop_budget`] needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopBudget {
    /// Most loop iterations one invocation runs faithfully.
    pub iterations: u64,
    /// Most workgroups per grid axis the device launches (bounds the ids).
    pub max_workgroups: [u32; 3],
    /// Most IR nodes an unrolled loop body may have (see [`block_size`]).
    pub max_unrolled_nodes: usize,
}

/// `kernel`, with loops unrolled as needed so that no invocation can run more than
/// `budget.iterations` loop iterations, or the error saying it cannot be done. A
/// kernel already within the budget is returned unchanged.
pub fn fit_loop_budget(kernel: &Kernel, budget: &LoopBudget) -> Result<Kernel, LoopBudgetError> {
    let max_nodes = budget.max_unrolled_nodes;
    let mut loops = survey_kernel(kernel, budget.max_workgroups);
    let budget = budget.iterations;
    let worst_case = cost(&loops);
    if worst_case <= budget {
        return Ok(kernel.clone());
    }
    while cost(&loops) > budget {
        let best = loops
            .iter_mut()
            .filter(|l| l.can_double(max_nodes))
            .max_by_key(|l| l.gain());
        match best {
            Some(l) if l.gain() > 0 => l.unroll *= 2,
            _ => {
                return Err(LoopBudgetError {
                    kernel: kernel.name.clone(),
                    worst_case,
                    after_unrolling: cost(&loops),
                    budget,
                })
            }
        }
    }
    let mut rewriter = Rewriter {
        kernel: kernel.clone(),
        factors: loops.iter().map(|l| l.unroll).collect(),
        next: 0,
    };
    let body = rewriter.block(&kernel.body);
    Ok(with_body(&rewriter.kernel, body))
}

/// The most loop iterations one invocation of `kernel` can run, by the bound above,
/// when launched with at most `max_workgroups` workgroups per axis.
pub fn worst_case_loop_iterations(kernel: &Kernel, max_workgroups: [u32; 3]) -> u64 {
    cost(&survey_kernel(kernel, max_workgroups))
}

fn survey_kernel(kernel: &Kernel, max_workgroups: [u32; 3]) -> Vec<LoopInfo> {
    let bounds = Bounds::new(kernel, max_workgroups);
    let mut loops = Vec::new();
    survey(kernel, &bounds, &kernel.body, 1, &mut loops);
    loops
}

/// One loop of the kernel, in pre-order.
struct LoopInfo {
    /// Most trips per execution of the loop.
    trips: u64,
    /// Most executions of the loop (the product of the enclosing loops' trips).
    executions: u64,
    body_size: usize,
    /// Whether `step · 2u` still fits the counter (checked when doubling).
    step: u32,
    counter: ScalarType,
    has_barrier: bool,
    unroll: u32,
}

impl LoopInfo {
    /// Iterations the loop ends in all, unrolled by `u`.
    fn iterations(&self, u: u32) -> u64 {
        self.executions
            .saturating_mul(self.trips.div_ceil(u64::from(u)))
    }

    fn gain(&self) -> u64 {
        self.iterations(self.unroll) - self.iterations(self.unroll * 2)
    }

    fn can_double(&self, max_nodes: usize) -> bool {
        let u = self.unroll * 2;
        let limit = match self.counter {
            ScalarType::I32 => i32::MAX as u64,
            _ => u32::MAX as u64,
        };
        !self.has_barrier
            && u <= MAX_UNROLL
            && self.body_size.saturating_mul(u as usize) <= max_nodes
            && u64::from(self.step) * u64::from(u) <= limit
    }
}

fn cost(loops: &[LoopInfo]) -> u64 {
    loops
        .iter()
        .fold(0u64, |sum, l| sum.saturating_add(l.iterations(l.unroll)))
}

fn survey<'k>(
    k: &Kernel,
    bounds: &Bounds<'k>,
    block: &'k [Stmt],
    executions: u64,
    out: &mut Vec<LoopInfo>,
) {
    for s in block {
        match s {
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let counter = k.local(*var).map_or(ScalarType::U32, |d| d.ty.scalar);
                let trips = bounds.trips(counter, start, end, *step);
                out.push(LoopInfo {
                    trips,
                    executions,
                    body_size: block_size(body),
                    step: *step,
                    counter,
                    has_barrier: contains_barrier(body),
                    unroll: 1,
                });
                survey(k, bounds, body, executions.saturating_mul(trips), out);
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                survey(k, bounds, then_body, executions, out);
                survey(k, bounds, else_body, executions, out);
            }
            Stmt::Let { .. }
            | Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_)
            | Stmt::AsyncCopy(_) => {}
        }
    }
}

/// What the trip bounds are computed from.
struct Bounds<'k> {
    ranges: Ranges,
    /// Per local: its definition, for an immutable local defined once, by a `let`
    /// without loads.
    definitions: Vec<Option<&'k Expr>>,
    /// Per local: whether it is defined exactly once (one `let`, or one loop).
    defined_once: Vec<bool>,
}

/// How deep definitions are looked through.
const MAX_EXPANSION_DEPTH: u32 = 4;

impl<'k> Bounds<'k> {
    fn new(kernel: &'k Kernel, max_workgroups: [u32; 3]) -> Bounds<'k> {
        let n = kernel.locals.len();
        let mut lets: Vec<Vec<&Expr>> = vec![Vec::new(); n];
        let mut other_defs = vec![0u32; n];
        count_definitions(&kernel.body, &mut lets, &mut other_defs);
        let definitions = (0..n)
            .map(|i| match lets[i].as_slice() {
                [e] if other_defs[i] == 0 && !kernel.locals[i].mutable && !has_load(e) => Some(*e),
                _ => None,
            })
            .collect();
        let defined_once = (0..n)
            .map(|i| lets[i].len() as u32 + other_defs[i] == 1)
            .collect();
        Bounds {
            ranges: Ranges::within_grid(kernel, max_workgroups),
            definitions,
            defined_once,
        }
    }

    /// Most trips of `for _ in start..end by step`.
    fn trips(&self, counter: ScalarType, start: &'k Expr, end: &'k Expr, step: u32) -> u64 {
        if step == 0 {
            return 0;
        }
        let (lowest, highest) = match counter {
            ScalarType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            _ => (0, i64::from(u32::MAX)),
        };
        // Ranges describe non-negative values only, so a known range is the true one.
        let min_start = self.ranges.range(start).map_or(lowest, |r| r.lo as i64);
        let max_end = self.ranges.range(end).map_or(highest, |r| r.hi as i64);
        let coarse = (max_end - min_start).max(0) as u64;
        let span = self
            .span(counter, start, end, MAX_EXPANSION_DEPTH, &[])
            .map_or(coarse, |s| s.min(coarse));
        span.div_ceil(u64::from(step))
    }

    /// A bound on `end − start` (0 when `end <= start`), by cancelling common terms.
    /// `facts` are ranges known where `end` is evaluated (from the `select`s it is in).
    fn span(
        &self,
        counter: ScalarType,
        start: &'k Expr,
        end: &'k Expr,
        depth: u32,
        facts: &[Fact<'k>],
    ) -> Option<u64> {
        match self.look_through(end, depth) {
            (
                Expr::Select {
                    cond,
                    on_true,
                    on_false,
                },
                Some(depth),
            ) => {
                let mut known = facts.to_vec();
                known.extend(self.fact_of(cond));
                let t = self.span(counter, start, on_true, depth, &known)?;
                let f = self.span(counter, start, on_false, depth, facts)?;
                Some(t.max(f))
            }
            (end, _) => {
                let whole_end = self.range_with(end, facts)?;
                let Some(whole_start) = self.range_with(start, facts) else {
                    // An unknown u32 start is at least 0.
                    return (counter == ScalarType::U32).then_some(whole_end.hi);
                };
                let mut ends = Vec::new();
                let mut starts = Vec::new();
                self.terms(end, MAX_EXPANSION_DEPTH, facts, &mut ends)?;
                self.terms(start, MAX_EXPANSION_DEPTH, facts, &mut starts)?;
                ends.retain(|e| match starts.iter().position(|s| s == e) {
                    Some(i) => {
                        starts.swap_remove(i);
                        false
                    }
                    None => true,
                });
                let mut hi = 0u64;
                for e in &ends {
                    hi = hi.checked_add(self.range_with(e, facts)?.hi)?;
                }
                let lo = starts
                    .iter()
                    .map(|s| self.range_with(s, facts).map_or(0, |r| r.lo))
                    .fold(0u64, u64::saturating_add);
                let coarse = whole_end.hi.saturating_sub(whole_start.lo);
                Some(hi.saturating_sub(lo).min(coarse))
            }
        }
    }

    /// What a `select` condition says about its true arm: `x < c` (or `c > x`) puts the
    /// `u32` value `x` in `0..c`.
    fn fact_of(&self, cond: &'k Expr) -> Option<Fact<'k>> {
        let Expr::Cmp { op, lhs, rhs } = cond else {
            return None;
        };
        let (x, op, c) = match (lhs.as_lit(), rhs.as_lit()) {
            (None, Some(Scalar::U32(c))) => (&**lhs, *op, c),
            (Some(Scalar::U32(c)), None) => match op {
                CmpOp::Gt => (&**rhs, CmpOp::Lt, c),
                CmpOp::Ge => (&**rhs, CmpOp::Le, c),
                CmpOp::Eq | CmpOp::Ne | CmpOp::Lt | CmpOp::Le => return None,
            },
            _ => return None,
        };
        let hi = match op {
            CmpOp::Lt => u64::from(c).checked_sub(1)?,
            CmpOp::Le => u64::from(c),
            CmpOp::Eq | CmpOp::Ne | CmpOp::Gt | CmpOp::Ge => return None,
        };
        if !self.reads_only_stable_locals(x) {
            return None;
        }
        Some((x, Interval::new(0, hi, 1)?))
    }

    /// The range of `e` given `facts`: a fact's expression has the fact's range, a sum
    /// the sum of its operands' (when it cannot wrap), anything else what [`Ranges`]
    /// knows.
    fn range_with(&self, e: &Expr, facts: &[Fact<'k>]) -> Option<Interval> {
        if let Some((_, r)) = facts.iter().find(|(x, _)| *x == e) {
            return Some(*r);
        }
        match e {
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } if !facts.is_empty() => match self.ranges.range(e) {
                Some(r) => Some(r),
                None => {
                    let (a, b) = (self.range_with(lhs, facts)?, self.range_with(rhs, facts)?);
                    // At most i32::MAX, so that the sum wraps in neither integer type.
                    let hi = a.hi.checked_add(b.hi).filter(|&h| h <= i32::MAX as u64)?;
                    Interval::new(a.lo + b.lo, hi, 1)
                }
            },
            _ => self.ranges.range(e),
        }
    }

    /// `e`, or the definition of the local it is (repeatedly), with the depth left
    /// (`None` when `e` was not looked through at all and `depth` is spent).
    fn look_through(&self, e: &'k Expr, depth: u32) -> (&'k Expr, Option<u32>) {
        match e {
            Expr::Local(id) if depth > 0 => {
                match self.definitions.get(id.0 as usize).copied().flatten() {
                    Some(def) => self.look_through(def, depth - 1),
                    None => (e, Some(depth)),
                }
            }
            _ => (e, Some(depth)),
        }
    }

    /// The summands of `e` (a sum that does not wrap), definitions looked through
    /// except for expressions `facts` describe; `None` when `e` reads a local defined
    /// more than once (its value at the loop need not be the one the other side saw).
    fn terms(
        &self,
        e: &'k Expr,
        depth: u32,
        facts: &[Fact<'k>],
        out: &mut Vec<&'k Expr>,
    ) -> Option<()> {
        if facts.iter().any(|(x, _)| *x == e) {
            out.push(e);
            return Some(());
        }
        match e {
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } if self.cannot_wrap(lhs, rhs, facts) => {
                self.terms(lhs, depth, facts, out)?;
                self.terms(rhs, depth, facts, out)
            }
            Expr::Local(id) => match self.definitions.get(id.0 as usize).copied().flatten() {
                Some(def) if depth > 0 && self.is_stable(*id) => {
                    self.terms(def, depth - 1, facts, out)
                }
                _ if self.is_stable(*id) => {
                    out.push(e);
                    Some(())
                }
                _ => None,
            },
            _ if self.reads_only_stable_locals(e) => {
                out.push(e);
                Some(())
            }
            _ => None,
        }
    }

    /// Whether `lhs + rhs` is the true sum for every value the operands may take (a sum
    /// that always wraps has a known range too, but is not the sum of its terms).
    fn cannot_wrap(&self, lhs: &Expr, rhs: &Expr, facts: &[Fact<'k>]) -> bool {
        match (self.range_with(lhs, facts), self.range_with(rhs, facts)) {
            (Some(a), Some(b)) => a.hi + b.hi <= i32::MAX as u64,
            _ => false,
        }
    }

    fn is_stable(&self, id: LocalId) -> bool {
        self.defined_once
            .get(id.0 as usize)
            .copied()
            .unwrap_or(false)
    }

    fn reads_only_stable_locals(&self, e: &Expr) -> bool {
        let mut read = Vec::new();
        locals_in(e, &mut read);
        read.iter().all(|id| self.is_stable(*id))
    }
}

/// An expression and a range its value lies in.
type Fact<'k> = (&'k Expr, Interval);

fn count_definitions<'k>(block: &'k [Stmt], lets: &mut [Vec<&'k Expr>], other: &mut [u32]) {
    let bump = |id: LocalId, other: &mut [u32]| {
        if let Some(c) = other.get_mut(id.0 as usize) {
            *c += 1;
        }
    };
    for s in block {
        match s {
            Stmt::Let { local, value } => match lets.get_mut(local.0 as usize) {
                Some(defs) => defs.push(value),
                None => bump(*local, other),
            },
            Stmt::Assign { local, .. } => bump(*local, other),
            Stmt::For { var, body, .. } => {
                bump(*var, other);
                count_definitions(body, lets, other);
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                count_definitions(then_body, lets, other);
                count_definitions(else_body, lets, other);
            }
            Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_)
            | Stmt::AsyncCopy(_) => {}
        }
    }
}

fn has_load(e: &Expr) -> bool {
    matches!(e, Expr::Load { .. }) || e.children().iter().any(|c| has_load(c))
}

fn locals_in(e: &Expr, out: &mut Vec<LocalId>) {
    if let Expr::Local(id) = e {
        out.push(*id);
    }
    for c in e.children() {
        locals_in(c, out);
    }
}

/// Whether a statement that must run in uniform control flow (a barrier or a
/// fragment statement) is in `block`.
fn contains_barrier(block: &[Stmt]) -> bool {
    block.iter().any(|s| match s {
        Stmt::Barrier | Stmt::Fragment(_) => true,
        Stmt::For { body, .. } => contains_barrier(body),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => contains_barrier(then_body) || contains_barrier(else_body),
        Stmt::Let { .. }
        | Stmt::Assign { .. }
        | Stmt::Store { .. }
        | Stmt::Return
        | Stmt::AsyncCopy(_) => false,
    })
}

/// Rewrites the loops in the survey's pre-order, each by its chosen factor.
struct Rewriter {
    /// The kernel being extended with the unrolled loops' new locals.
    kernel: Kernel,
    factors: Vec<u32>,
    next: usize,
}

impl Rewriter {
    fn block(&mut self, block: &[Stmt]) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for s in block {
            match s {
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                } => {
                    let factor = self.factors.get(self.next).copied().unwrap_or(1);
                    self.next += 1;
                    let body = self.block(body);
                    if factor > 1 {
                        self.unrolled(*var, start, end, *step, &body, factor, &mut out);
                    } else {
                        out.push(Stmt::For {
                            var: *var,
                            start: start.clone(),
                            end: end.clone(),
                            step: *step,
                            body,
                        });
                    }
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let then_body = self.block(then_body);
                    out.push(Stmt::If {
                        cond: cond.clone(),
                        then_body,
                        else_body: self.block(else_body),
                    })
                }
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::Return
                | Stmt::Barrier
                | Stmt::Fragment(_)
                | Stmt::AsyncCopy(_) => out.push(s.clone()),
            }
        }
        out
    }

    fn local(&mut self, name: String, ty: Type) -> LocalId {
        self.kernel.locals.push(LocalDecl {
            name,
            ty,
            mutable: false,
        });
        LocalId(self.kernel.locals.len() as u32 - 1)
    }

    /// The loop unrolled by `factor`, as the module comment shows.
    #[allow(clippy::too_many_arguments)]
    fn unrolled(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: u32,
        body: &[Stmt],
        factor: u32,
        out: &mut Block,
    ) {
        let ty = self.kernel.local(var).map_or(Type::U32, |d| d.ty);
        let name = self
            .kernel
            .local(var)
            .map_or_else(|| "v".to_string(), |d| d.name.clone());
        let first = self.local(format!("{name}_start"), ty);
        let last = self.local(format!("{name}_end"), ty);
        let base = self.local(format!("{name}_unrolled"), ty);
        let literal = |v: u32| match ty.scalar {
            ScalarType::I32 => Scalar::I32(v as i32),
            _ => Scalar::U32(v),
        };
        out.push(Stmt::Let {
            local: first,
            value: start.clone(),
        });
        out.push(Stmt::Let {
            local: last,
            value: end.clone(),
        });
        let mut unrolled = vec![Stmt::Let {
            local: var,
            value: Expr::Local(base),
        }];
        unrolled.extend(body.iter().cloned());
        for k in 1..factor {
            let offset = k * step;
            let left = Expr::Binary {
                op: BinaryOp::Sub,
                lhs: Box::new(Expr::Local(last)),
                rhs: Box::new(Expr::Local(base)),
            };
            let left = match ty.scalar {
                ScalarType::I32 => Expr::Bitcast {
                    to: ScalarType::U32,
                    arg: Box::new(left),
                },
                _ => left,
            };
            let mut copy = vec![Stmt::Let {
                local: var,
                value: Expr::Binary {
                    op: BinaryOp::Add,
                    lhs: Box::new(Expr::Local(base)),
                    rhs: Box::new(Expr::Lit(literal(offset))),
                },
            }];
            copy.extend(body.iter().cloned());
            unrolled.push(Stmt::If {
                cond: Expr::Cmp {
                    op: CmpOp::Gt,
                    lhs: Box::new(left),
                    rhs: Box::new(Expr::Lit(Scalar::U32(offset))),
                },
                then_body: copy,
                else_body: Vec::new(),
            });
        }
        out.push(Stmt::For {
            var: base,
            start: Expr::Local(first),
            end: Expr::Local(last),
            step: step * factor,
            body: unrolled,
        });
    }
}
