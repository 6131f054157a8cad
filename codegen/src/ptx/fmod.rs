//! Float `%` (C `fmod`), exactly.
//!
//! NVPTX lowers LLVM's `frem` to `x - trunc(x / y) * y`, which is wrong whenever
//! `x / y` rounds (large quotients, most f64 operands). `fmod` is always exact (the
//! result is representable), so kernelc computes it as an integer long division of
//! the significands, like musl's `fmod`:
//!
//! 1. `y == 0`, `y` NaN, `x` infinite or NaN: NaN. `|x| < |y|`: `x`. `|x| == |y|`:
//!    zero with the sign of `x`.
//! 2. Otherwise both significands are normalised to `[2^M, 2^(M+1))` (subnormals
//!    shifted up, their exponents going below 1), and for each exponent step from
//!    `ex` down to `ey` the divisor is subtracted when it fits and the remainder is
//!    doubled; a last subtraction at `ey` leaves the remainder `< my`.
//! 3. The remainder is renormalised and packed (as a subnormal when its exponent is
//!    below 1; the shift loses no bits, as the result is representable), with the
//!    sign of `x`.
//!
//! The loop runs `ex - ey` times (at most 277 for f32, 2100 for f64): slow only for
//! operands of wildly different magnitudes. The functions are written as LLVM IR text
//! (one template for f32 and f64), parsed into the kernel's context and linked into
//! its module when the kernel uses float `%`. They were checked bit for bit against
//! glibc's `fmodf`/`fmod` on 20 million random f32 and 5 million random f64 pairs plus
//! all pairs of special values (zeros, infinities, NaN, subnormals, extremes), by
//! compiling this IR for the host with LLVM 22's `llc`, and on an H100 (64Ki random and
//! special pairs per width, through the whole emitter and the driver's JIT). kernelc
//! links only the NVPTX target, so the unit test here checks that the text parses,
//! links and verifies.

use super::{backend, internal};
use crate::CodegenError;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::values::FunctionValue;

/// A float width `fmod` exists for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Width {
    F32,
    F64,
}

impl Width {
    /// The symbol of the function (internal to each module).
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Width::F32 => "kernelc.fmod.f32",
            Width::F64 => "kernelc.fmod.f64",
        }
    }

    /// `(float type, int type, bits, mantissa bits)`.
    fn shape(self) -> (&'static str, &'static str, u32, u32) {
        match self {
            Width::F32 => ("float", "i32", 32, 23),
            Width::F64 => ("double", "i64", 64, 52),
        }
    }
}

/// The LLVM IR text of `fmod` for `width` (an external definition; [`link`] makes it
/// internal once it is in the kernel's module).
pub(super) fn ir_text(width: Width) -> String {
    let (f, i, w, m) = width.shape();
    let name = width.symbol();
    let sign: u64 = 1 << (w - 1);
    let abs = sign - 1;
    let inf: u64 = ((1u64 << (w - 1 - m)) - 1) << m;
    let mmask: u64 = (1u64 << m) - 1;
    let implicit: u64 = 1 << m;
    let lz = w - 1 - m;
    let top = w - 1;
    // Literals are printed as signed decimals, which LLVM reads for any width.
    let s = |v: u64| -> String {
        if w == 32 {
            (v as u32 as i32).to_string()
        } else {
            (v as i64).to_string()
        }
    };
    let (sign, abs, inf, mmask, implicit) = (s(sign), s(abs), s(inf), s(mmask), s(implicit));
    format!(
        r#"
define {f} @"{name}"({f} %x, {f} %y) {{
entry:
  %ux = bitcast {f} %x to {i}
  %uy = bitcast {f} %y to {i}
  %sx = and {i} %ux, {sign}
  %ax = and {i} %ux, {abs}
  %ay = and {i} %uy, {abs}
  %y_zero = icmp eq {i} %ay, 0
  %y_nan = icmp ugt {i} %ay, {inf}
  %x_inf_nan = icmp uge {i} %ax, {inf}
  %bad0 = or i1 %y_zero, %y_nan
  %bad = or i1 %bad0, %x_inf_nan
  br i1 %bad, label %nan, label %finite
nan:
  %p = fmul {f} %x, %y
  %q = fdiv {f} %p, %p
  ret {f} %q
finite:
  %zero = bitcast {i} %sx to {f}
  %x_le_y = icmp ule {i} %ax, %ay
  br i1 %x_le_y, label %x_small, label %divide
x_small:
  %same = icmp eq {i} %ax, %ay
  %r_small = select i1 %same, {f} %zero, {f} %x
  ret {f} %r_small
divide:
  %ex_field = lshr {i} %ax, {m}
  %mx_frac = and {i} %ax, {mmask}
  %x_sub = icmp eq {i} %ex_field, 0
  %mx_impl = or {i} %mx_frac, {implicit}
  %mx_raw = select i1 %x_sub, {i} %mx_frac, {i} %mx_impl
  %ex_raw = select i1 %x_sub, {i} 1, {i} %ex_field
  %lz_x = call {i} @llvm.ctlz.{i}({i} %mx_raw, i1 true)
  %sh_x = sub {i} %lz_x, {lz}
  %mx = shl {i} %mx_raw, %sh_x
  %ex = sub {i} %ex_raw, %sh_x
  %ey_field = lshr {i} %ay, {m}
  %my_frac = and {i} %ay, {mmask}
  %y_sub = icmp eq {i} %ey_field, 0
  %my_impl = or {i} %my_frac, {implicit}
  %my_raw = select i1 %y_sub, {i} %my_frac, {i} %my_impl
  %ey_raw = select i1 %y_sub, {i} 1, {i} %ey_field
  %lz_y = call {i} @llvm.ctlz.{i}({i} %my_raw, i1 true)
  %sh_y = sub {i} %lz_y, {lz}
  %my = shl {i} %my_raw, %sh_y
  %ey = sub {i} %ey_raw, %sh_y
  br label %head
head:
  %m = phi {i} [ %mx, %divide ], [ %m_next, %body ]
  %e = phi {i} [ %ex, %divide ], [ %e_next, %body ]
  %ge = icmp uge {i} %m, %my
  %diff = sub {i} %m, %my
  %m_red = select i1 %ge, {i} %diff, {i} %m
  %more = icmp sgt {i} %e, %ey
  br i1 %more, label %body, label %done
body:
  %m_next = shl {i} %m_red, 1
  %e_next = sub {i} %e, 1
  br label %head
done:
  %r_zero = icmp eq {i} %m_red, 0
  br i1 %r_zero, label %ret_zero, label %pack
ret_zero:
  ret {f} %zero
pack:
  %lz_r = call {i} @llvm.ctlz.{i}({i} %m_red, i1 true)
  %sh_r = sub {i} %lz_r, {lz}
  %mr = shl {i} %m_red, %sh_r
  %er = sub {i} %ey, %sh_r
  %normal = icmp sgt {i} %er, 0
  %frac = and {i} %mr, {mmask}
  %e_bits = shl {i} %er, {m}
  %n_bits = or {i} %frac, %e_bits
  %dsh = sub {i} 1, %er
  %dsh_c = call {i} @llvm.umin.{i}({i} %dsh, {i} {top})
  %s_bits = lshr {i} %mr, %dsh_c
  %bits = select i1 %normal, {i} %n_bits, {i} %s_bits
  %signed = or {i} %bits, %sx
  %r = bitcast {i} %signed to {f}
  ret {f} %r
}}

declare {i} @llvm.ctlz.{i}({i}, i1)
declare {i} @llvm.umin.{i}({i}, {i})
"#
    )
}

/// Parses the `fmod` of `width` into `context`, links it into `module` (which may
/// already declare it) and makes it internal to the module.
pub(super) fn link<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    width: Width,
) -> Result<FunctionValue<'ctx>, CodegenError> {
    let text = ir_text(width);
    let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), width.symbol());
    let source = context
        .create_module_from_ir(buffer)
        .map_err(|e| internal(format!("parsing {}: {e}", width.symbol())))?;
    // The same triple and layout as the kernel's module, so linking does not warn.
    source.set_triple(&module.get_triple());
    source.set_data_layout(&module.get_data_layout());
    module
        .link_in_module(source)
        .map_err(|e| backend(format!("linking {}: {e}", width.symbol())))?;
    let func = module
        .get_function(width.symbol())
        .ok_or_else(|| internal(format!("{} missing after linking", width.symbol())))?;
    func.set_linkage(Linkage::Internal);
    Ok(func)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both templates are valid LLVM IR and link into a module that declares them.
    #[test]
    fn fmod_text_parses_verifies_and_links() {
        for width in [Width::F32, Width::F64] {
            let context = Context::create();
            let module = context.create_module("host");
            let (float, _, _, _) = width.shape();
            let t = if float == "float" {
                context.f32_type()
            } else {
                context.f64_type()
            };
            module.add_function(
                width.symbol(),
                t.fn_type(&[t.into(), t.into()], false),
                None,
            );
            let func = link(&context, &module, width).expect("links");
            assert_eq!(func.get_linkage(), Linkage::Internal);
            assert!(func.count_basic_blocks() > 1, "{width:?} has no body");
            module.verify().expect("verifies");
            let text = module.print_to_string().to_string();
            assert!(!text.contains("frem"), "{text}");
        }
    }
}
