//! What this target cannot compile, found before any code is built so that the error
//! names the construct and where it is.

use super::types::unsupported_type;
use super::unsupported;
use crate::CodegenError;
use kernelc_ir::{Expr, Kernel, MathFn, Param, ScalarType, Stmt};

/// Whether this target can hold values of the scalar type (f16 and bf16 values are
/// held as f32).
fn has(ty: ScalarType) -> bool {
    !matches!(ty, ScalarType::I64 | ScalarType::F64)
}

/// Whether this target can store the scalar type in a buffer or shared array (f16
/// as WGSL's `f16`; bf16 has no 16-bit storage type).
fn storable(ty: ScalarType) -> bool {
    has(ty) && ty != ScalarType::Bf16
}

fn bf16_memory(place: impl std::fmt::Display) -> CodegenError {
    unsupported(format!(
        "bf16 memory in {place} (WGSL has no 16-bit type to store bfloat16 in)"
    ))
}

/// `Unsupported` naming `ty` and where it occurs.
fn type_at(ty: ScalarType, place: impl std::fmt::Display) -> CodegenError {
    match unsupported_type(ty) {
        CodegenError::Unsupported { construct, .. } => {
            unsupported(format!("{construct} in {place}"))
        }
        other => other,
    }
}

/// The math functions WGSL has no accurate enough built-in for; kernels reach the
/// emitter with them expanded into IR arithmetic (`kernelc_ir::passes::for_target`).
pub(super) fn is_transcendental(func: MathFn) -> bool {
    matches!(
        func,
        MathFn::Exp
            | MathFn::Exp2
            | MathFn::Log
            | MathFn::Log2
            | MathFn::Tanh
            | MathFn::Erf
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Pow
    )
}

/// Checks every declaration and expression of a (validated) kernel for constructs
/// WGSL lacks: 64-bit and bfloat16 types, and transcendental functions that were not
/// expanded.
pub(super) fn check(kernel: &Kernel) -> Result<(), CodegenError> {
    for p in &kernel.params {
        let (ty, memory) = match p {
            Param::Buffer { elem, .. } => (*elem, true),
            Param::Scalar { ty, .. } => (*ty, false),
        };
        let place = format!("parameter `{}`", p.name());
        if !has(ty) {
            return Err(type_at(ty, place));
        }
        if memory && !storable(ty) {
            return Err(bf16_memory(place));
        }
    }
    for s in &kernel.shared {
        let place = format!("shared array `{}`", s.name);
        if !has(s.elem) {
            return Err(type_at(s.elem, place));
        }
        if !storable(s.elem) {
            return Err(bf16_memory(place));
        }
    }
    for l in &kernel.locals {
        if !has(l.ty.scalar) {
            return Err(type_at(l.ty.scalar, format_args!("local `{}`", l.name)));
        }
    }
    check_block(&kernel.body)
}

fn check_block(block: &[Stmt]) -> Result<(), CodegenError> {
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => check_expr(value)?,
            Stmt::Store { index, value, .. } => {
                check_expr(index)?;
                check_expr(value)?;
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                check_expr(cond)?;
                check_block(then_body)?;
                check_block(else_body)?;
            }
            Stmt::For {
                start, end, body, ..
            } => {
                check_expr(start)?;
                check_expr(end)?;
                check_block(body)?;
            }
            Stmt::Return | Stmt::Barrier => {}
        }
    }
    Ok(())
}

fn check_expr(e: &Expr) -> Result<(), CodegenError> {
    match e {
        Expr::Lit(s) if !has(s.ty()) => return Err(type_at(s.ty(), "a literal")),
        Expr::Cast { to, .. } if !has(*to) => return Err(type_at(*to, "a cast")),
        Expr::Bitcast { to, .. } if !has(*to) => return Err(type_at(*to, "a bitcast")),
        Expr::Math { func, .. } if is_transcendental(*func) => {
            return Err(unsupported(format!(
                "the math function `{}` (WGSL's built-in is not accurate enough; expand it \
                 into IR arithmetic first with kernelc_ir::passes::for_target and \
                 MathExpansion::all_transcendental)",
                func.name()
            )))
        }
        _ => {}
    }
    for c in e.children() {
        check_expr(c)?;
    }
    Ok(())
}

/// Whether the kernel has f16 memory (a buffer or a shared array), the only thing
/// held in WGSL's `f16` (f16 values are held as f32).
pub(super) fn uses_f16(kernel: &Kernel) -> bool {
    let f16 = ScalarType::F16;
    kernel.params.iter().any(|p| match p {
        Param::Buffer { elem, .. } => *elem == f16,
        Param::Scalar { .. } => false,
    }) || kernel.shared.iter().any(|s| s.elem == f16)
}
