//! Pieces that start where a device cannot bind them. A piece of a split tensor
//! ([`split`](super::split)) may start at any element: a row of odd length cut where it
//! must be. A device binds a buffer range only from a multiple of
//! [`TargetCaps::binding_alignment`] bytes (WebGPU: up to 256), so such a piece is
//! bound from the multiple below and its kernel indexes it from `base` elements on: a
//! `u32` parameter added to every index of that buffer. Kernels are shared by every
//! piece with the same shape, whatever its offset.
//!
//! Invariant: a vector access of `lanes` elements lands on a multiple of `lanes`
//! elements of the whole tensor (its piece starts at one), or the plan is refused:
//! the pieces that do not start aligned are lowered with one-word vectors
//! ([`piece_caps`]).

use kernelc_ir::validate::type_of;
use kernelc_ir::{
    for_each_stmt_in, AsyncCopyOp, BinaryOp, Block, Expr, FragmentOp, Kernel, Memory, Param,
    ParamId, Scalar, ScalarType, Stmt,
};

use super::{Binding, Launch, LowerError, TargetCaps};
use crate::spec::OpSpec;

/// Bytes every vector access may rely on its piece's start being a multiple of.
const VECTOR_ALIGNMENT: u64 = 16;

/// The caps to lower `spec` with when its tensors start at `starts` (elements, per
/// input then output; `None` where bound whole): vectors no wider than a word when
/// any start is off [`VECTOR_ALIGNMENT`].
pub(crate) fn piece_caps(caps: &TargetCaps, spec: &OpSpec, starts: &[Option<u64>]) -> TargetCaps {
    let dtypes = spec
        .inputs()
        .into_iter()
        .chain(spec.outputs())
        .map(|sig| sig.dtype);
    // Some lowerings size vectors in lanes of the dtype (4 × f64 is 32 bytes): a start
    // must be a multiple of the lanes too.
    let lanes = u64::from(caps.vector_width.max(1));
    let aligned = dtypes.zip(starts).all(|(dtype, start)| {
        start
            .is_none_or(|s| s * dtype.size_bytes() as u64 % VECTOR_ALIGNMENT == 0 && s % lanes == 0)
    });
    let mut caps = caps.clone();
    if !aligned {
        caps.vector_width = 1;
    }
    caps
}

/// `plan` with every launch's parts bound where `caps` can bind them ([`rebase_parts`]).
pub(crate) fn rebase_plan(
    mut plan: super::Plan,
    caps: &TargetCaps,
) -> Result<super::Plan, LowerError> {
    for launch in &mut plan.launches {
        rebase_parts(launch, caps)?;
    }
    Ok(plan)
}

/// Binds every [`Binding::Part`] of `launch` from a multiple of the caps' binding
/// alignment, adding what lies before its start to the kernel's indices of it; checks
/// that every vector access of a part lands aligned.
pub(crate) fn rebase_parts(launch: &mut Launch, caps: &TargetCaps) -> Result<(), LowerError> {
    let align = u64::from(caps.binding_alignment.max(1));
    for p in 0..launch.bindings.len() {
        let Binding::Part { of, start } = launch.bindings[p] else {
            continue;
        };
        let Some(Param::Buffer { elem, .. }) = launch.kernel.params.get(p) else {
            return Err(LowerError::Internal("a part bound to a scalar parameter"));
        };
        let size = elem.size_bytes() as u64;
        let id = ParamId(p as u32);
        let widest = widest_access(&launch.kernel, id)?;
        if start % u64::from(widest) != 0 {
            return Err(LowerError::TooLarge {
                what: format!(
                    "{}: a piece starting at element {start}, not a multiple of its {widest}-element vectors",
                    launch.kernel.name
                ),
                value: start,
                limit: u64::from(widest),
            });
        }
        let base = start * size % align / size;
        if base == 0 {
            continue;
        }
        let base_param = ParamId(launch.kernel.params.len() as u32);
        let Some(Param::Buffer { name, len, .. }) = launch.kernel.params.get_mut(p) else {
            return Err(LowerError::Internal("a part bound to a scalar parameter"));
        };
        *len += base;
        let name = format!("{name}_base");
        launch.kernel.params.push(Param::Scalar {
            name,
            ty: ScalarType::U32,
        });
        let base32 =
            u32::try_from(base).map_err(|_| LowerError::Internal("a binding offset past u32"))?;
        launch.bindings.push(Binding::Scalar(Scalar::U32(base32)));
        launch.bindings[p] = Binding::Part {
            of,
            start: start - base,
        };
        offset_block(&mut launch.kernel.body, id, base_param);
    }
    Ok(())
}

/// The most lanes any load or store of buffer `id` moves (1 when it has none).
fn widest_access(kernel: &Kernel, id: ParamId) -> Result<u8, LowerError> {
    let mut widest = 1u8;
    let mut error = None;
    let visit_expr = |e: &Expr, widest: &mut u8| {
        walk_expr(e, &mut |e| {
            if let Expr::Load { mem, lanes, .. } = e {
                if *mem == Memory::Buffer(id) {
                    *widest = (*widest).max(*lanes);
                }
            }
        })
    };
    for_each_stmt_in(&kernel.body, &mut |s| match s {
        Stmt::Store { mem, index, value } => {
            visit_expr(index, &mut widest);
            visit_expr(value, &mut widest);
            if *mem == Memory::Buffer(id) {
                match type_of(kernel, value) {
                    Ok(ty) => widest = widest.max(ty.lanes),
                    Err(e) => error = Some(e),
                }
            }
        }
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } => visit_expr(value, &mut widest),
        Stmt::If { cond, .. } => visit_expr(cond, &mut widest),
        Stmt::For { start, end, .. } => {
            visit_expr(start, &mut widest);
            visit_expr(end, &mut widest);
        }
        // Element by element: one lane.
        Stmt::Fragment(op) => op
            .exprs()
            .into_iter()
            .for_each(|(_, e)| visit_expr(e, &mut widest)),
        Stmt::AsyncCopy(op) => {
            op.exprs()
                .into_iter()
                .for_each(|(_, e)| visit_expr(e, &mut widest));
            if let AsyncCopyOp::Start(c) = op {
                if c.src == id {
                    widest = widest.max(c.len);
                }
            }
        }
        Stmt::Return | Stmt::Barrier => {}
    });
    match error {
        Some(e) => Err(LowerError::InvalidKernel(e)),
        None => Ok(widest),
    }
}

fn walk_expr(e: &Expr, f: &mut impl FnMut(&Expr)) {
    f(e);
    for c in e.children() {
        walk_expr(c, f);
    }
}

/// Adds parameter `base` to every index of buffer `id` in `block`.
fn offset_block(block: &mut Block, id: ParamId, base: ParamId) {
    for s in block {
        match s {
            Stmt::Store { mem, index, value } => {
                offset_expr(index, id, base);
                offset_expr(value, id, base);
                if *mem == Memory::Buffer(id) {
                    shift(index, base);
                }
            }
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => offset_expr(value, id, base),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                offset_expr(cond, id, base);
                offset_block(then_body, id, base);
                offset_block(else_body, id, base);
            }
            Stmt::For {
                start, end, body, ..
            } => {
                offset_expr(start, id, base);
                offset_expr(end, id, base);
                offset_block(body, id, base);
            }
            Stmt::Fragment(op) => {
                let addresses_id = op.memory() == Some(Memory::Buffer(id));
                for e in op.exprs_mut() {
                    offset_expr(e, id, base);
                }
                if let FragmentOp::Load { index, .. } | FragmentOp::Store { index, .. } = op {
                    if addresses_id {
                        shift(index, base);
                    }
                }
                if let Some(body) = op.body_mut() {
                    offset_block(body, id, base);
                }
            }
            Stmt::AsyncCopy(op) => {
                for e in op.exprs_mut() {
                    offset_expr(e, id, base);
                }
                if let AsyncCopyOp::Start(c) = op {
                    if c.src == id {
                        shift(&mut c.src_index, base);
                    }
                }
            }
            Stmt::Return | Stmt::Barrier => {}
        }
    }
}

fn offset_expr(e: &mut Expr, id: ParamId, base: ParamId) {
    for c in e.children_mut() {
        offset_expr(c, id, base);
    }
    if let Expr::Load { mem, index, .. } = e {
        if *mem == Memory::Buffer(id) {
            shift(index, base);
        }
    }
}

/// `index` becomes `index + base`.
fn shift(index: &mut Expr, base: ParamId) {
    let old = std::mem::replace(index, Expr::Lit(Scalar::U32(0)));
    *index = Expr::Binary {
        op: BinaryOp::Add,
        lhs: Box::new(old),
        rhs: Box::new(Expr::Param(base)),
    };
}
