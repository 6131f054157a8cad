//! Counting the loop iterations each invocation of a kernel runs, on the interpreter,
//! to hold [`worst_case_loop_iterations`](crate::passes::worst_case_loop_iterations)
//! to what really happens.

use crate::interp::{run, Arg, HostBuffer};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use crate::validate::validate;

/// The most loop iterations (trips of any loop, counted together) one invocation runs
/// when `kernel` runs on `grid` with `args`. A run that stops at an error counts the
/// iterations until then.
pub fn most_loop_iterations(kernel: &Kernel, grid: [u32; 3], args: &[Arg]) -> Result<u64, String> {
    let counted = with_loop_counter(kernel, grid)?;
    let mut args = args.to_vec();
    args.push(Arg::Buffer(HostBuffer::filled(
        ScalarType::U32,
        invocations(kernel, grid) as usize,
        Scalar::U32(0),
    )));
    // An error ends the run early; the counts so far are iterations that ran.
    let _ = run(&counted, grid, &mut args);
    match args.last() {
        Some(Arg::Buffer(b)) => Ok(most(b)),
        _ => Err("the counts buffer went missing".into()),
    }
}

/// The largest count in a buffer [`with_loop_counter`]'s kernel wrote.
pub fn most(counts: &HostBuffer) -> u64 {
    counts
        .data
        .iter()
        .map(|v| v.to_f64() as u64)
        .max()
        .unwrap_or(0)
}

/// Invocations in a dispatch of `grid` workgroups of `kernel`.
pub fn invocations(kernel: &Kernel, grid: [u32; 3]) -> u64 {
    grid.iter().map(|&g| u64::from(g)).product::<u64>() * kernel.invocations_per_workgroup()
}

/// A copy of `kernel` with one more parameter, last: a `u32` buffer of one element per
/// invocation of a `grid` dispatch (zeroed by the caller), where each invocation keeps
/// the count of loop trips it has run (stored after each, so a `return` loses none).
pub fn with_loop_counter(kernel: &Kernel, grid: [u32; 3]) -> Result<Kernel, String> {
    let mut counted = kernel.clone();
    let counts = Memory::Buffer(ParamId(counted.params.len() as u32));
    counted.params.push(Param::Buffer {
        name: "loop_counts".into(),
        elem: ScalarType::U32,
        len: invocations(kernel, grid),
        access: Access::Write,
    });
    let count = LocalId(counted.locals.len() as u32);
    counted.locals.push(LocalDecl {
        name: "loop_count".into(),
        ty: Type::U32,
        mutable: true,
    });
    let counter = Counter {
        count,
        counts,
        invocation: invocation_index(kernel, grid),
    };
    let mut body = vec![
        Stmt::Let {
            local: count,
            value: Expr::Lit(Scalar::U32(0)),
        },
        counter.record(),
    ];
    body.extend(counter.block(&kernel.body));
    counted.body = body;
    validate(&counted).map_err(|e| format!("the counting copy does not validate: {e}"))?;
    Ok(counted)
}

/// The invocation's index in the whole dispatch, x fastest.
fn invocation_index(kernel: &Kernel, grid: [u32; 3]) -> Expr {
    let id = |axis: u8| Expr::Builtin {
        builtin: Builtin::GlobalId,
        axis,
    };
    let binary = |op, lhs, rhs| Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    };
    let lit = |v: u32| Expr::Lit(Scalar::U32(v));
    let width = grid[0] * kernel.workgroup_size[0];
    let height = grid[1] * kernel.workgroup_size[1];
    let row = binary(
        BinaryOp::Add,
        binary(BinaryOp::Mul, id(2), lit(height)),
        id(1),
    );
    binary(BinaryOp::Add, binary(BinaryOp::Mul, row, lit(width)), id(0))
}

struct Counter {
    count: LocalId,
    counts: Memory,
    invocation: Expr,
}

impl Counter {
    fn record(&self) -> Stmt {
        Stmt::Store {
            mem: self.counts,
            index: self.invocation.clone(),
            value: Expr::Local(self.count),
        }
    }

    fn block(&self, block: &[Stmt]) -> Block {
        block
            .iter()
            .map(|s| match s {
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                } => {
                    let mut counted = vec![
                        Stmt::Assign {
                            local: self.count,
                            value: Expr::Binary {
                                op: BinaryOp::Add,
                                lhs: Box::new(Expr::Local(self.count)),
                                rhs: Box::new(Expr::Lit(Scalar::U32(1))),
                            },
                        },
                        self.record(),
                    ];
                    counted.extend(self.block(body));
                    Stmt::For {
                        var: *var,
                        start: start.clone(),
                        end: end.clone(),
                        step: *step,
                        body: counted,
                    }
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => Stmt::If {
                    cond: cond.clone(),
                    then_body: self.block(then_body),
                    else_body: self.block(else_body),
                },
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::Return
                | Stmt::Barrier
                | Stmt::Fragment(_)
                | Stmt::AsyncCopy(_) => s.clone(),
            })
            .collect()
    }
}
