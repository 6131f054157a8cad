//! Statements and structured control flow.
//!
//! * `If`: `OpSelectionMerge` + `OpBranchConditional`; both arms branch to the merge
//!   block unless they returned. If both returned, the merge block is `OpUnreachable`
//!   and the rest of the enclosing IR block is not emitted.
//! * `For`: a header (`OpLoopMerge`, then a branch on the "keep going" flag), the body,
//!   a continue block that advances the counter, and the merge block. The counter runs
//!   as if in 64 bits, as in the interpreter: the loop goes on while
//!   `step < end - counter` (computed as u32, exact because `counter < end`), so a
//!   step past the type's maximum ends the loop instead of wrapping.
//! * `Return`: publishes the status, then `OpReturn`, valid anywhere inside selection
//!   and loop constructs.
//! * `Barrier`: see the module documentation of [`super`].

use super::emitter::{build_error, Emitter, Val, R};
use super::internal;
use kernelc_ir::{Expr, LocalId, Stmt, Type};
use rspirv::spirv::{LoopControl, MemorySemantics, Op, Scope, SelectionControl, Word};

/// Whether control continues after a statement or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// The invocation returned: the current block is terminated.
    Returned,
}

pub(crate) fn block(e: &mut Emitter, stmts: &[Stmt]) -> R<Flow> {
    for s in stmts {
        if stmt(e, s)? == Flow::Returned {
            return Ok(Flow::Returned);
        }
    }
    Ok(Flow::Continue)
}

fn stmt(e: &mut Emitter, s: &Stmt) -> R<Flow> {
    match s {
        Stmt::Let { local, value } | Stmt::Assign { local, value } => {
            let v = e.expr(value)?;
            write_local(e, *local, v)?;
        }
        Stmt::Store { mem, index, value } => {
            let i = e.expr(index)?;
            let v = e.expr(value)?;
            e.store_mem(*mem, i.id, index, v)?;
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
        } => return if_(e, cond, then_body, else_body),
        Stmt::For {
            var,
            start,
            end,
            step,
            body,
        } => return for_(e, *var, start, end, *step, body),
        Stmt::Return => {
            e.flush_status()?;
            e.b.ret().map_err(build_error)?;
            return Ok(Flow::Returned);
        }
        Stmt::Barrier => {
            let workgroup = e.const_u32(Scope::Workgroup as u32);
            let semantics = MemorySemantics::ACQUIRE_RELEASE
                | MemorySemantics::WORKGROUP_MEMORY
                | MemorySemantics::UNIFORM_MEMORY;
            let semantics = e.const_u32(semantics.bits());
            e.b.control_barrier(workgroup, workgroup, semantics)
                .map_err(build_error)?;
        }
        Stmt::Fragment(_) => return Err(crate::CodegenError::unexpanded_fragments(super::TARGET)),
        Stmt::AsyncCopy(_) => {
            return Err(crate::CodegenError::unexpanded_async_copies(super::TARGET))
        }
    }
    Ok(Flow::Continue)
}

fn local_var(e: &Emitter, id: LocalId) -> R<Word> {
    e.locals
        .get(id.0 as usize)
        .copied()
        .ok_or_else(|| internal(format!("unknown local #{}", id.0)))
}

fn write_local(e: &mut Emitter, id: LocalId, v: Val) -> R<()> {
    let var = local_var(e, id)?;
    e.store(var, v.id)
}

/// The value of a local.
pub(crate) fn read_local(e: &mut Emitter, id: LocalId) -> R<Val> {
    let var = local_var(e, id)?;
    let ty = e
        .kernel
        .local(id)
        .map(|d| d.ty)
        .ok_or_else(|| internal(format!("unknown local #{}", id.0)))?;
    let reg = e.reg_type(ty)?;
    Ok(Val {
        id: e.load(reg, var)?,
        ty,
    })
}

fn if_(e: &mut Emitter, cond: &Expr, then_body: &[Stmt], else_body: &[Stmt]) -> R<Flow> {
    let c = e.expr(cond)?;
    let then_l = e.b.id();
    let merge = e.b.id();
    let else_l = if else_body.is_empty() {
        merge
    } else {
        e.b.id()
    };
    e.b.selection_merge(merge, SelectionControl::NONE)
        .map_err(build_error)?;
    e.b.branch_conditional(c.id, then_l, else_l, [])
        .map_err(build_error)?;
    let mut merge_reached = else_body.is_empty();
    e.b.begin_block(Some(then_l)).map_err(build_error)?;
    if block(e, then_body)? == Flow::Continue {
        e.b.branch(merge).map_err(build_error)?;
        merge_reached = true;
    }
    if !else_body.is_empty() {
        e.b.begin_block(Some(else_l)).map_err(build_error)?;
        if block(e, else_body)? == Flow::Continue {
            e.b.branch(merge).map_err(build_error)?;
            merge_reached = true;
        }
    }
    e.b.begin_block(Some(merge)).map_err(build_error)?;
    if merge_reached {
        Ok(Flow::Continue)
    } else {
        e.b.unreachable().map_err(build_error)?;
        Ok(Flow::Returned)
    }
}

fn for_(
    e: &mut Emitter,
    var: LocalId,
    start: &Expr,
    end: &Expr,
    step: u32,
    body: &[Stmt],
) -> R<Flow> {
    let ty = e
        .kernel
        .local(var)
        .map(|d| d.ty)
        .ok_or_else(|| internal(format!("unknown loop counter #{}", var.0)))?;
    if !(ty == Type::I32 || ty == Type::U32) {
        return Err(internal(format!("loop counter of type {ty}")));
    }
    let signed = ty == Type::I32;
    let reg = e.reg_type(ty)?;
    let bool_ty = e.bool_ty();
    let u = e.u32_ty();
    let s = e.expr(start)?;
    let end_v = e.expr(end)?;
    // The counter and the "keep going" flag live in variables: no phis to thread
    // through the body's blocks.
    let counter = e.function_var(reg)?;
    let active = e.function_var(bool_ty)?;
    e.store(counter, s.id)?;
    let less = if signed { Op::SLessThan } else { Op::ULessThan };
    let first = e.ins(less, bool_ty, &[s.id, end_v.id])?;
    e.store(active, first)?;

    let header = e.b.id();
    let body_l = e.b.id();
    let cont = e.b.id();
    let merge = e.b.id();
    e.b.branch(header).map_err(build_error)?;
    e.b.begin_block(Some(header)).map_err(build_error)?;
    let go = e.load(bool_ty, active)?;
    e.b.loop_merge(merge, cont, LoopControl::NONE, [])
        .map_err(build_error)?;
    e.b.branch_conditional(go, body_l, merge, [])
        .map_err(build_error)?;

    e.b.begin_block(Some(body_l)).map_err(build_error)?;
    let current = e.load(reg, counter)?;
    write_local(e, var, Val { id: current, ty })?;
    if block(e, body)? == Flow::Continue {
        e.b.branch(cont).map_err(build_error)?;
    }

    e.b.begin_block(Some(cont)).map_err(build_error)?;
    let current = e.load(reg, counter)?;
    let as_u32 = |e: &mut Emitter, v: Word| -> R<Word> {
        if signed {
            e.ins(Op::Bitcast, u, &[v])
        } else {
            Ok(v)
        }
    };
    let cur_u = as_u32(e, current)?;
    let end_u = as_u32(e, end_v.id)?;
    let left = e.ins(Op::ISub, u, &[end_u, cur_u])?;
    let step_c = e.const_u32(step);
    let more = e.ins(Op::ULessThan, bool_ty, &[step_c, left])?;
    e.store(active, more)?;
    let next_u = e.ins(Op::IAdd, u, &[cur_u, step_c])?;
    let next = if signed {
        e.ins(Op::Bitcast, reg, &[next_u])?
    } else {
        next_u
    };
    e.store(counter, next)?;
    e.b.branch(header).map_err(build_error)?;

    e.b.begin_block(Some(merge)).map_err(build_error)?;
    Ok(Flow::Continue)
}
