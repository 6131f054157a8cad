//! Expansion of asynchronous copies ([`crate::async_copy`]) into plain loads and
//! stores, for targets without them: each `Start` copies at once (`len` elements, up
//! to four per vector load and store), or stores zeros where its condition is false;
//! `Commit` and `Wait` vanish. A kernel that keeps the copy rules stores exactly what
//! it stores with copies in flight: completing a copy at once is a schedule the
//! rules allow. (One that breaks them, which the interpreter reports on the original,
//! may run without an error after the expansion, as a data race may on a device.)

use super::with_body;
use crate::async_copy::AsyncCopyOp;
use crate::kernel::*;
use crate::scalar::Scalar;

/// Elements one expanded load or store moves at most (the IR's widest vector).
const MAX_LANES: u8 = 4;

/// The kernel with its asynchronous copies replaced by loads and stores; a kernel
/// without them is returned unchanged.
pub fn expand_async_copies(kernel: &Kernel) -> Kernel {
    if !kernel.uses_async_copies() {
        return kernel.clone();
    }
    with_body(kernel, block(kernel, &kernel.body))
}

fn block(k: &Kernel, block: &[Stmt]) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for s in block {
        match s {
            Stmt::AsyncCopy(op) => copy(k, op, &mut out),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::If {
                cond: cond.clone(),
                then_body: self::block(k, then_body),
                else_body: self::block(k, else_body),
            }),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => out.push(Stmt::For {
                var: *var,
                start: start.clone(),
                end: end.clone(),
                step: *step,
                body: self::block(k, body),
            }),
            Stmt::Let { .. }
            | Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_) => out.push(s.clone()),
        }
    }
    out
}

fn copy(k: &Kernel, op: &AsyncCopyOp, out: &mut Block) {
    let AsyncCopyOp::Start {
        dst,
        dst_index,
        src,
        src_index,
        len,
        valid,
    } = op
    else {
        return;
    };
    let Some(elem) = k.shared_decl(*dst).map(|d| d.elem) else {
        return;
    };
    let chunks = (0..*len)
        .step_by(MAX_LANES as usize)
        .map(|at| (at, (*len - at).min(MAX_LANES)));
    let at = |index: &Expr, offset: u8| match offset {
        0 => index.clone(),
        _ => Expr::Binary {
            op: BinaryOp::Add,
            lhs: Box::new(index.clone()),
            rhs: Box::new(Expr::Lit(Scalar::U32(offset as u32))),
        },
    };
    let store = |value: Expr, offset: u8| Stmt::Store {
        mem: Memory::Shared(*dst),
        index: at(dst_index, offset),
        value,
    };
    let copied: Block = chunks
        .clone()
        .map(|(offset, lanes)| {
            let value = Expr::Load {
                mem: Memory::Buffer(*src),
                index: Box::new(at(src_index, offset)),
                lanes,
            };
            store(value, offset)
        })
        .collect();
    if let Some(Scalar::Bool(true)) = valid.as_lit() {
        out.extend(copied);
        return;
    }
    let zero = Expr::Lit(Scalar::zero(elem.value_type()));
    let zeros: Block = chunks
        .map(|(offset, lanes)| {
            let value = match lanes {
                1 => zero.clone(),
                _ => Expr::Vector(vec![zero.clone(); lanes as usize]),
            };
            store(value, offset)
        })
        .collect();
    out.push(Stmt::If {
        cond: valid.clone(),
        then_body: copied,
        else_body: zeros,
    });
}
