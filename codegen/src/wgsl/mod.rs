//! The WGSL target: Kernel IR -> `naga::Module` -> naga validation -> WGSL text.
//!
//! [`emit`] builds the module directly through naga's arena API (no WGSL is parsed),
//! validates it with `naga::valid::Validator` (capabilities from what the kernel
//! uses: [`capabilities`]), and writes it with `naga::back::wgsl`. The runtime can
//! hand wgpu either the module (`ShaderSource::Naga`) or the text
//! (`ShaderSource::Wgsl`); both mean the same program.
//!
//! # Interface
//!
//! One compute entry point named [`crate::abi::ENTRY_POINT`] with the kernel's
//! workgroup size, bound exactly as [`crate::abi::ShaderLayout`] says (bind group 0):
//!
//! * the `j`-th buffer parameter: binding `j` (bindings are dense, see
//!   [`crate::abi`]), `var<storage, read>` (access `read`) or
//!   `var<storage, read_write>` (`write`, `read_write`) of `array<T>`; bool elements
//!   are `u32` words (nonzero is true, `true` is stored as 1);
//! * the scalar parameters: one `var<storage, read> array<u32>` at
//!   `scalar_binding` (present only with scalars), each decoded from its words
//!   (f16 from the low 16 bits);
//! * the status word: `var<storage, read_write> array<atomic<u32>, 1>` at
//!   `status_binding`, only ever `atomicOr`ed;
//! * shared arrays: `var<workgroup>` fixed-size arrays (bool as `u32`);
//! * builtins: `global_invocation_id`, `local_invocation_id`, `workgroup_id`,
//!   `num_workgroups` arguments (`vec3<u32>`), one component per IR axis.
//!
//! # Semantics (docs/semantics.md), and how each is made explicit
//!
//! WGSL leaves several of the IR's rules to the implementation, so the emitter spells
//! them out rather than trusting the target:
//!
//! * Loads and stores are checked against the static length (and `index % lanes`
//!   for vectors) unless [`kernelc_ir::analysis::Ranges`] proves them safe; a failing
//!   load reads element 0 instead (never out of bounds) and yields zero, a failing
//!   store is skipped, and [`abi::status::OUT_OF_BOUNDS`](crate::abi::status) or
//!   `UNALIGNED` is `atomicOr`ed into the status word. Vector accesses are composed
//!   of scalar accesses of the `array<T>`.
//! * Integer `/` and `%`: the divisor is replaced by 1 when it is 0 (result 0,
//!   `DIVISION_BY_ZERO`) or, signed, -1 (`MIN / -1` = `-MIN` wrapping to `MIN`,
//!   `x % -1` = 0), so the target's division never sees a case it leaves undefined.
//! * Shifts: the amount is masked to the width; an amount of the width or more sets
//!   `SHIFT_OVERFLOW`.
//! * Float -> int casts clamp to the range representable on both sides, pick the
//!   maximum above it, and map NaN to 0 (NaN tested on the bits, so no fast-math
//!   assumption can remove it). Float `min`/`max` are IEEE minNum/maxNum from a compare,
//!   a select and the same NaN test. Float `!=` is `!(a == b)` (naga's SPIR-V writer
//!   uses an ordered not-equal, false for NaN). `round` is WGSL's `round` (half to
//!   even); `i32` `abs` is a select (`abs(MIN)` wraps to `MIN`).
//! * Float `%` must arrive expanded into the IR's exact integer long division
//!   ([`required_expansion`]), because WGSL's `%` is `x - y * trunc(x / y)`, which is
//!   not exact; an unexpanded one is [`CodegenError::Unsupported`].
//! * f16 and bf16 values are held as f32 and rounded after every operation, as the
//!   interpreter does, by kernelc's own round-to-nearest-even on the bits (f16
//!   subnormals and overflow to infinity included), not by WGSL's conversion, whose
//!   rounding is the implementation's choice. Integer -> f16/bf16 casts convert with
//!   rounding to odd first, so the result is rounded once. Only f16 *memory* uses
//!   WGSL's `f16` (exact conversions on load and store), so only kernels with f16
//!   buffers or shared arrays need `enable f16` ([`capabilities`]).
//! * Non-finite float literals, which WGSL cannot spell, are bitcasts of their bits.
//! * `Barrier` is `workgroupBarrier()`, preceded by `storageBarrier()` when the
//!   kernel can write a storage buffer: the IR lets invocations of one workgroup
//!   exchange data through global memory across a barrier, which WGSL orders only
//!   with a storage barrier.
//!
//! What WGSL cannot promise, and the emitter cannot force: that `a * b + c` is not
//! contracted into an fma by the driver (WGSL has no `NoContraction`); that f32
//! division and `sqrt` are correctly rounded (Vulkan allows 2.5 ULP and
//! `1/inversesqrt`), that `fma` rounds once, that i32/u32 -> f32 conversion rounds to
//! nearest even (Vulkan requires it), and that subnormals are not flushed (Vulkan lets
//! an implementation flush f32 and f16 subnormals unless the device preserves them).
//!
//! Not supported (`CodegenError::Unsupported`): i64, f64, bf16 buffers and shared
//! arrays (bf16 values are fine), and the
//! transcendental math functions (exp, exp2, log, log2, tanh, erf, sin, cos, pow),
//! which must be expanded into IR arithmetic before emission
//! (`kernelc_ir::passes::for_target` with [`required_expansion`]):
//! WGSL's built-ins are not accurate enough for kernelc's tolerances.

mod expr;
mod func;
mod half;
mod lower;
mod memory;
mod ops;
mod support;
mod types;

use crate::CodegenError;
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{validate, Kernel};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};

/// The name of this target in errors.
pub const TARGET: &str = "wgsl";

/// A compiled kernel: the validated naga module (for `wgpu::ShaderSource::Naga`), its
/// validation info, and the same module as WGSL text (for `ShaderSource::Wgsl`).
#[derive(Debug, Clone)]
pub struct WgslShader {
    pub module: naga::Module,
    pub info: ModuleInfo,
    pub text: String,
}

pub(crate) fn unsupported(construct: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        target: TARGET,
        construct: construct.into(),
    }
}

pub(crate) fn backend(message: impl Into<String>) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: message.into(),
    }
}

/// The naga validator capabilities `kernel` needs: `SHADER_FLOAT16` if it has an f16
/// buffer or shared array (the runtime then needs wgpu's `SHADER_F16` feature),
/// nothing else (no subgroup operations, no 64-bit types).
pub fn capabilities(kernel: &Kernel) -> Capabilities {
    if support::uses_f16(kernel) {
        Capabilities::SHADER_FLOAT16
    } else {
        Capabilities::empty()
    }
}

/// Builds and validates the naga module of `kernel`.
pub fn emit_module(kernel: &Kernel) -> Result<(naga::Module, ModuleInfo), CodegenError> {
    validate(kernel)?;
    if kernel.uses_fragments() {
        return Err(CodegenError::unexpanded_fragments(TARGET));
    }
    support::check(kernel)?;
    let module = lower::build(kernel)?;
    let info = validate_module(&module, capabilities(kernel))?;
    Ok((module, info))
}

/// Validates a module with naga's validator, every check on.
fn validate_module(module: &naga::Module, caps: Capabilities) -> Result<ModuleInfo, CodegenError> {
    Validator::new(ValidationFlags::all(), caps)
        .validate(module)
        .map_err(|e| backend(format!("naga rejected the module: {}", error_chain(&e))))
}

/// An error and its sources, one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// What kernels must have expanded into IR (`kernelc_ir::passes::for_target`) before
/// this emitter takes them: every transcendental (WGSL's built-ins are not accurate
/// enough) and float `%` (WGSL's rounds). WGSL has no f64.
pub fn required_expansion() -> MathExpansion {
    // WGSL cannot mark an operation exact, so the driver may reassociate: the
    // error-free sums of the f32 math go through opaque values.
    MathExpansion::all_transcendental()
        .with_float_rem(true)
        .with_opaque_sums(true)
}

/// Builds, validates and writes `kernel` as WGSL.
pub fn emit(kernel: &Kernel) -> Result<WgslShader, CodegenError> {
    let (module, info) = emit_module(kernel)?;
    let text =
        naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
            .map_err(|e| backend(format!("naga could not write WGSL: {}", error_chain(&e))))?;
    Ok(WgslShader { module, info, text })
}

/// The WGSL text of `kernel` (see [`emit`]).
pub fn wgsl_text(kernel: &Kernel) -> Result<String, CodegenError> {
    emit(kernel).map(|s| s.text)
}
