//! The SPIR-V target: Kernel IR -> a SPIR-V 1.3 module for Vulkan 1.1, built with
//! `rspirv`'s data-representation builder.
//!
//! [`emit`] returns the module's words; [`disassemble`] prints them as text.
//!
//! # The module
//!
//! * `Capability Shader`, plus only what the kernel's types need: `Int64` (also for
//!   an expanded f64 `%`), `Float64`,
//!   `StorageBuffer16BitAccess` (f16 buffers), `Float16` (f16 shared arrays). Vulkan
//!   devices support 64-bit and 16-bit types only optionally; the runtime checks the
//!   device's features against the module's capabilities.
//! * With [`SpirvOptions`] (where the device supports it): `SignedZeroInfNanPreserve`
//!   execution modes for f32 (and f64) arithmetic, with their capability and the
//!   `SPV_KHR_float_controls` extension, so the driver keeps NaN, ±∞ and −0.
//! * `GLSL450` memory model (logical addressing), `GLSL.std.450` imported.
//! * One entry point, `GLCompute`, named [`crate::abi::ENTRY_POINT`], whose interface lists only
//!   its `Input` variables (SPIR-V 1.3: storage buffers and workgroup variables are not
//!   interface variables before 1.4), and `OpExecutionMode LocalSize` = the kernel's
//!   workgroup size.
//! * Bindings are exactly those of [`crate::abi::ShaderLayout`] (descriptor set 0), which
//!   must be dense (`0..n`, no gaps): wgpu's Vulkan backend numbers descriptors densely
//!   and does not remap a passthrough module, so a gap makes every later resource
//!   read another descriptor (gfx-rs/wgpu#9326; `tests/spirv.rs` checks density).
//!   Each buffer parameter is a `StorageBuffer` `struct { T data[]; }` decorated `Block` (member
//!   offset 0, array stride = element size; `NonWritable` when read-only); bool
//!   elements are `u32` words. A buffer of f32/i32/u32 whose every access is an
//!   `L`-lane vector at an index proven a multiple of `L` (and whose length is one;
//!   [`kernelc_ir::analysis::uniform_vector_widths`]) is instead a `vecL<T> data[]`
//!   (stride `4 * L`), accessed with one vector `OpLoad`/`OpStore` at `index >> log2(L)`:
//!   the same bytes, one wide transaction instead of `L` scalar ones; the packed scalar words at `scalar_binding` (read-only
//!   `u32[]`); the status word at `status_binding` (`struct { u32 }`, only ever
//!   `OpAtomicOr`ed with device scope and relaxed semantics). Shared arrays are
//!   `Workgroup` fixed-size arrays. Builtins are `Input` `uvec3`s (`GlobalInvocationId`,
//!   `LocalInvocationId`, `WorkgroupId`, `NumWorkgroups`), declared only when used.
//!
//! # Semantics (docs/semantics.md)
//!
//! * Register representation: see `emitter`. f16 values live in f32 registers,
//!   always exactly on the f16 grid: every f16 arithmetic result is computed in f32 and
//!   rounded to nearest even by integer bit manipulation (`convert`), so the result
//!   does not depend on the device's rounding mode and the f32 <-> f16 conversions at
//!   loads and stores are exact. bf16 values likewise (f32 registers on the bf16
//!   grid); bf16 buffers and shared arrays are refused with
//!   [`CodegenError::Unsupported`].
//! * Every float `OpFAdd`/`OpFSub`/`OpFMul`/`OpFDiv`/`OpFNegate` is decorated
//!   `NoContraction`.
//! * Loads and stores are checked against the static length and, for vectors, the
//!   alignment, unless [`kernelc_ir::analysis::Ranges`] proves them safe. A failing
//!   load reads element 0 instead (branch-free: the index is selected) and yields zero;
//!   a failing store is skipped (a selection construct). The status bits of an
//!   invocation are accumulated in a function variable and published with one atomic
//!   OR before every `OpReturn`, only if nonzero.
//! * Integer `/` and `%`: the divisor is replaced by 1 where it is 0 (result 0,
//!   [`crate::abi::status::DIVISION_BY_ZERO`]) and, for signed types, where the operation is
//!   `MIN / -1` (SPIR-V leaves that overflow undefined; `MIN / 1 = MIN` and
//!   `MIN % 1 = 0` are the IR's results). Shifts by the width or more use the amount
//!   modulo the width and set [`crate::abi::status::SHIFT_OVERFLOW`].
//! * Float -> int casts are explicit: in-range values go through `OpConvertFTo*`
//!   (whose out-of-range results are undefined), the rest saturate, NaN -> 0.
//! * `min`/`max` on floats are IEEE minNum/maxNum built from a compare, `x != x` and
//!   selects (GLSL `FMin` is undefined for NaN). `round` is `RoundEven`; `abs` on
//!   signed integers wraps (`abs(MIN) = MIN`).
//! * Float `%` must arrive expanded into the IR's exact integer long division
//!   ([`required_expansion`]): Vulkan computes `OpFRem` only as precisely as
//!   `x - y * trunc(x / y)`. An unexpanded one is [`CodegenError::Unsupported`].
//! * Transcendental functions (`exp`, `log`, `sin`, ...) are refused with
//!   [`CodegenError::Unsupported`]: GLSL.std.450's versions are looser than the
//!   tolerance table (and 32-bit only); the runtime expands f32/f16 ones into IR first
//!   (`kernelc_ir::passes::for_target`), f64 ones have no accurate SPIR-V lowering.
//! * `Barrier` is `OpControlBarrier(Workgroup, Workgroup, AcquireRelease |
//!   WorkgroupMemory | UniformMemory)`: the IR's barrier also orders storage-buffer
//!   accesses of the invocations of one workgroup (the interpreter's race detector
//!   treats a barrier as separating all accesses, buffers included), which needs
//!   `UniformMemory` semantics.
//!
//! # Precision caveats of Vulkan itself
//!
//! Vulkan allows `OpFDiv` 2.5 ULP, `Sqrt`/`InverseSqrt` a few ULP, and `Fma` to be
//! computed unfused; int <-> float
//! and f64 -> f32 conversions use the device's rounding. The emitter cannot change
//! that; drivers based on LLVM (lavapipe) are exact for all of these.

mod arith;
mod convert;
mod emitter;
mod expr;
mod globals;
mod memory;
mod stmt;

use crate::CodegenError;
use emitter::Emitter;
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{validate, Kernel, Param, ScalarType};
use rspirv::binary::{Assemble, Disassemble};

/// The name of this target in errors.
pub const TARGET: &str = "spirv";

/// What kernels must have expanded into IR (`kernelc_ir::passes::for_target`) before
/// this emitter takes them: every transcendental (GLSL.std.450's are not accurate
/// enough, and it has none for f64: f64 ones too where the device has f64) and float
/// `%` (`OpFRem` rounds).
pub fn required_expansion(f64: bool) -> MathExpansion {
    MathExpansion::all_transcendental()
        .with_f64(f64)
        .with_float_rem(true)
}

/// What the module may declare beyond Vulkan 1.1's baseline, as the device allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SpirvOptions {
    /// Declare `SignedZeroInfNanPreserve` (`SPV_KHR_float_controls`) for f32
    /// arithmetic: the driver may then not assume away NaN, ±∞ or the sign of zero
    /// (fold `x · 0` to 0, `x − x` to 0, ...). Set where the device reports
    /// `shaderSignedZeroInfNanPreserveFloat32`.
    pub preserve_f32_specials: bool,
    /// The same for f64 arithmetic (`shaderSignedZeroInfNanPreserveFloat64`); declared
    /// only in modules that compute in f64.
    pub preserve_f64_specials: bool,
    /// Declare `DenormPreserve` for f32 arithmetic: the driver may then not flush
    /// subnormal operands or results to zero. Set where the device reports
    /// `shaderDenormPreserveFloat32`. Declared only together with every other float
    /// width the module computes in (a device's denormal modes need not be
    /// independent per width).
    pub preserve_f32_denormals: bool,
    /// The same for f64 (`shaderDenormPreserveFloat64`).
    pub preserve_f64_denormals: bool,
}

/// Compiles `kernel` into a SPIR-V 1.3 module for Vulkan 1.1 (the module's words).
pub fn emit(kernel: &Kernel) -> Result<Vec<u32>, CodegenError> {
    emit_with(kernel, &SpirvOptions::default())
}

/// [`emit`], declaring what `options` allow.
pub fn emit_with(kernel: &Kernel, options: &SpirvOptions) -> Result<Vec<u32>, CodegenError> {
    validate(kernel)?;
    check_supported(kernel)?;
    let mut e = Emitter::new(kernel);
    globals::declare_module(&mut e, options)?;
    Ok(e.b.module().assemble())
}

/// The module as SPIR-V assembly text (rspirv's disassembler), for reading and
/// snapshots. Words that do not parse give a one-line comment saying why.
pub fn disassemble(words: &[u32]) -> String {
    match rspirv::dr::load_words(words) {
        Ok(module) => module.disassemble(),
        Err(e) => format!("; not a SPIR-V module: {e}"),
    }
}

/// Refuses what this target cannot express, before any code is built.
fn check_supported(kernel: &Kernel) -> Result<(), CodegenError> {
    if kernel.uses_fragments() {
        return Err(CodegenError::unexpanded_fragments(TARGET));
    }
    if crate::shader::first_memory_of(kernel, ScalarType::Bf16).is_some() {
        return Err(emitter::bf16_unsupported());
    }
    for p in &kernel.params {
        if let Param::Buffer { name, len, .. } = p {
            if *len > i32::MAX as u64 {
                return Err(unsupported(format!(
                    "buffer `{name}` of {len} elements (SPIR-V access-chain indices are \
                     signed 32-bit: at most {} elements)",
                    i32::MAX
                )));
            }
        }
    }
    Ok(())
}

fn unsupported(construct: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        target: TARGET,
        construct: construct.into(),
    }
}

/// An internal inconsistency (the IR was validated, so this is a kernelc bug).
fn internal(what: impl Into<String>) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: format!("internal error: {}", what.into()),
    }
}

#[cfg(test)]
mod tests;
