//! Expansion of asynchronous copies ([`crate::async_copy`]) into plain loads and
//! stores, for targets without them: each `Start` copies at once (`len` elements, up
//! to four per vector load and store), or stores zeros where its condition is false;
//! `Commit` and `Wait` vanish. A kernel that keeps the copy rules stores exactly what
//! it stores with copies in flight: completing a copy at once is a schedule the
//! rules allow. (One that breaks them, which the interpreter reports on the original,
//! may run without an error after the expansion, as a data race may on a device.)

use super::{rewrite_leaves, with_body};
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
    let body = rewrite_leaves(&kernel.body, &mut |s, out| match s {
        Stmt::AsyncCopy(op) => copy(kernel, op, out),
        other => out.push(other.clone()),
    });
    with_body(kernel, body)
}

fn copy(k: &Kernel, op: &AsyncCopyOp, out: &mut Block) {
    let AsyncCopyOp::Start(c) = op else {
        return;
    };
    let (len, dst_index, src_index) = (c.len, &c.dst_index, &c.src_index);
    let Some(elem) = k.shared_decl(c.dst).map(|d| d.elem) else {
        return;
    };
    let chunks = (0..len)
        .step_by(MAX_LANES as usize)
        .map(|at| (at, (len - at).min(MAX_LANES)));
    let at = |index: &Expr, offset: u8| match offset {
        0 => index.clone(),
        _ => Expr::Binary {
            op: BinaryOp::Add,
            lhs: Box::new(index.clone()),
            rhs: Box::new(Expr::Lit(Scalar::U32(offset as u32))),
        },
    };
    let store = |value: Expr, offset: u8| Stmt::Store {
        mem: Memory::Shared(c.dst),
        index: at(dst_index, offset),
        value,
    };
    let copied: Block = chunks
        .clone()
        .map(|(offset, lanes)| {
            let value = Expr::Load {
                mem: Memory::Buffer(c.src),
                index: Box::new(at(src_index, offset)),
                lanes,
            };
            store(value, offset)
        })
        .collect();
    if let Some(Scalar::Bool(true)) = c.valid.as_lit() {
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
        cond: c.valid.clone(),
        then_body: copied,
        else_body: zeros,
    });
}
