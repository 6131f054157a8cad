//! Full unrolling of small loops with constant trip counts.
//!
//! A `for var in start..end by step` whose `start` and `end` are literals runs its body
//! once for each counter value `start, start + step, ...` below `end`. When there are at
//! most `max_trips` of them and `trips * block_size(body) <= max_nodes`, the loop is
//! replaced by `trips` copies of the body, each preceded by `let var = <value>`.
//!
//! Why this preserves meaning: the bounds are literals, so evaluating them has no effect
//! and cannot fail; the copies run the same statements in the same order with the counter
//! holding the same values. Locals are kernel-wide declarations and a `let` may run more
//! than once (as it does in a loop), so repeating the body's `let`s and the counter's is
//! valid; a `return` inside a copy ends the invocation just as it ended the loop. The
//! counter values are computed exactly in i64, as the interpreter does: a counter that
//! would step past the type's maximum is past `end` too, so the loop ends there (it never
//! wraps). Inner loops are unrolled first, so the size limit sees the already unrolled
//! body.
//!
//! The result validates: every copy starts with the counter assigned, locals the body
//! assigns become definitely assigned afterwards (more than before), and barrier
//! uniformity is unchanged (literal bounds are uniform; a divergent `return` in one copy
//! reaches the barriers of the next, exactly as the validator assumes of two iterations).

use super::with_body;
use crate::kernel::*;
use crate::scalar::Scalar;

/// Runs the pass over a whole kernel.
pub fn unroll_kernel(kernel: &Kernel, max_trips: u32, max_nodes: usize) -> Kernel {
    let u = Unroller {
        max_trips,
        max_nodes,
    };
    with_body(kernel, u.block(&kernel.body))
}

struct Unroller {
    max_trips: u32,
    max_nodes: usize,
}

impl Unroller {
    fn block(&self, block: &[Stmt]) -> Block {
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
                    let body = self.block(body);
                    let values = match (start.as_lit(), end.as_lit()) {
                        (Some(s), Some(e)) => counter_values(s, e, *step, self.max_trips),
                        _ => None,
                    };
                    match values {
                        Some(values)
                            if values.len().saturating_mul(block_size(&body)) <= self.max_nodes =>
                        {
                            for v in values {
                                out.push(Stmt::Let {
                                    local: *var,
                                    value: Expr::Lit(v),
                                });
                                out.extend(body.iter().cloned());
                            }
                        }
                        _ => out.push(Stmt::For {
                            var: *var,
                            start: start.clone(),
                            end: end.clone(),
                            step: *step,
                            body,
                        }),
                    }
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => out.push(Stmt::If {
                    cond: cond.clone(),
                    then_body: self.block(then_body),
                    else_body: self.block(else_body),
                }),
                _ => out.push(s.clone()),
            }
        }
        out
    }
}

/// The counter values of `for start..end by step` (i32 or u32 literals), if there are
/// at most `max_trips` of them. Computed in i64 (no wrapping), as the interpreter does.
pub fn counter_values(
    start: Scalar,
    end: Scalar,
    step: u32,
    max_trips: u32,
) -> Option<Vec<Scalar>> {
    let (lo, hi): (i64, i64) = match (start, end) {
        (Scalar::I32(s), Scalar::I32(e)) => (s as i64, e as i64),
        (Scalar::U32(s), Scalar::U32(e)) => (s as i64, e as i64),
        _ => return None,
    };
    if step == 0 {
        return None;
    }
    let mut values = Vec::new();
    let mut v = lo;
    while v < hi {
        if values.len() >= max_trips as usize {
            return None;
        }
        values.push(Scalar::int_wrapping(start.ty(), v)?);
        v += step as i64;
    }
    Some(values)
}
