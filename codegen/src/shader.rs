//! What the shader emitters (WGSL, SPIR-V) decide alike about a kernel before either
//! builds code: the walk over its expressions, and which memory holds which element
//! type.

use kernelc_ir::{Expr, Kernel, Param, ScalarType, Stmt};

/// Calls `f` on every expression of `block`, nested blocks and sub-expressions
/// included, in pre-order (statements in order, an expression before its operands).
pub(crate) fn for_each_expr(block: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
        f(e);
        for c in e.children() {
            walk(c, f);
        }
    }
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => walk(value, f),
            Stmt::Store { index, value, .. } => {
                walk(index, f);
                walk(value, f);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                walk(cond, f);
                for_each_expr(then_body, f);
                for_each_expr(else_body, f);
            }
            Stmt::For {
                start, end, body, ..
            } => {
                walk(start, f);
                walk(end, f);
                for_each_expr(body, f);
            }
            Stmt::Return | Stmt::Barrier => {}
        }
    }
}

/// The first memory (buffer parameters, then shared arrays) whose elements are of
/// type `elem`, named as an error names it (``parameter `x` `` or
/// ``shared array `s` ``); `None` if the kernel has no such memory. Shader targets
/// store f16 and bf16 differently from how they compute with them, so the element
/// types of memory, not of values, decide what a module needs or cannot have.
pub(crate) fn first_memory_of(kernel: &Kernel, elem: ScalarType) -> Option<String> {
    let buffer = kernel.params.iter().find_map(|p| match p {
        Param::Buffer { name, elem: e, .. } if *e == elem => Some(format!("parameter `{name}`")),
        _ => None,
    });
    buffer.or_else(|| {
        kernel
            .shared
            .iter()
            .find(|s| s.elem == elem)
            .map(|s| format!("shared array `{}`", s.name))
    })
}
