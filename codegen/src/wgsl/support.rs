//! What this target cannot compile, found before any code is built so that the error
//! names the construct and where it is.

use super::types::unsupported_type;
use super::unsupported;
use crate::shader::{first_memory_of, for_each_expr};
use crate::CodegenError;
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{Expr, Kernel, Param, ScalarType};

/// Whether this target can hold values of the scalar type (f16 and bf16 values are
/// held as f32; bf16 has no 16-bit storage type, see [`check`]).
fn has(ty: ScalarType) -> bool {
    !matches!(ty, ScalarType::I64 | ScalarType::F64)
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

/// Checks every declaration and expression of a (validated) kernel for constructs
/// WGSL lacks: 64-bit types, bfloat16 memory, and transcendental functions that were
/// not expanded.
pub(super) fn check(kernel: &Kernel) -> Result<(), CodegenError> {
    for p in &kernel.params {
        let ty = match p {
            Param::Buffer { elem, .. } => *elem,
            Param::Scalar { ty, .. } => *ty,
        };
        if !has(ty) {
            return Err(type_at(ty, format_args!("parameter `{}`", p.name())));
        }
    }
    for s in &kernel.shared {
        if !has(s.elem) {
            return Err(type_at(s.elem, format_args!("shared array `{}`", s.name)));
        }
    }
    if let Some(place) = first_memory_of(kernel, ScalarType::Bf16) {
        return Err(unsupported(format!(
            "bf16 memory in {place} (WGSL has no 16-bit type to store bfloat16 in)"
        )));
    }
    for l in &kernel.locals {
        if !has(l.ty.scalar) {
            return Err(type_at(l.ty.scalar, format_args!("local `{}`", l.name)));
        }
    }
    let mut first = Ok(());
    for_each_expr(&kernel.body, &mut |e| {
        if first.is_ok() {
            first = check_expr(e);
        }
    });
    first
}

/// One expression node (its operands are visited on their own).
fn check_expr(e: &Expr) -> Result<(), CodegenError> {
    match e {
        Expr::Lit(s) if !has(s.ty()) => Err(type_at(s.ty(), "a literal")),
        Expr::Cast { to, .. } if !has(*to) => Err(type_at(*to, "a cast")),
        Expr::Bitcast { to, .. } if !has(*to) => Err(type_at(*to, "a bitcast")),
        // WGSL's built-ins for these are not accurate enough; the expansion pass has
        // an IR implementation of each.
        Expr::Math { func, .. } if MathExpansion::SUPPORTED.contains(func) => {
            Err(unsupported(format!(
                "the math function `{}` (WGSL's built-in is not accurate enough; expand it \
                 into IR arithmetic first with kernelc_ir::passes::for_target and \
                 kernelc_codegen::wgsl::required_expansion())",
                func.name()
            )))
        }
        _ => Ok(()),
    }
}

/// Whether the kernel has f16 memory (a buffer or a shared array), the only thing
/// held in WGSL's `f16` (f16 values are held as f32).
pub(super) fn uses_f16(kernel: &Kernel) -> bool {
    first_memory_of(kernel, ScalarType::F16).is_some()
}
