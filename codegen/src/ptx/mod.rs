//! The PTX target: Kernel IR -> LLVM IR (through `inkwell`) -> PTX text from LLVM's
//! NVPTX backend.
//!
//! [`emit`] compiles one kernel into one PTX module holding one kernel function named
//! [`ENTRY_POINT`](crate::abi::ENTRY_POINT); [`emit_llvm_ir`] returns the LLVM IR that
//! goes into the NVPTX backend (after LLVM's optimisation pipeline), for reading and
//! debugging. Each call builds its own LLVM context, so both may be called from
//! several threads at once. The NVPTX target is initialised once per process.
//!
//! # The ABI of a compiled kernel (what the CUDA runtime binds)
//!
//! ```text
//! .visible .entry main(
//!     .param .u64 .ptr .global .align 1 main_param_0,  // a buffer parameter
//!     .param .u64 main_param_1,   // a scalar parameter
//!     ...                         // one 8-byte parameter per IR parameter, in order
//!     .param .u64 main_param_N    // status: pointer to one u32 in global memory
//! )
//! .reqntid X, Y, Z                // the kernel's workgroup size
//! ```
//!
//! * One kernel parameter per IR parameter, in declaration order, **every one 8 bytes**
//!   (pass each argument as a pointer to an 8-byte value in `cuLaunchKernel`'s
//!   `kernelParams`):
//!   * a buffer parameter is a `u64` device pointer (`ptr addrspace(1)`) to its first
//!     element: `len * size_bytes(elem)` bytes, little-endian elements, bool elements
//!     as `u32` words (nonzero is true; `true` is stored as 1), f16/bf16 as their 16
//!     bits. The pointer must be aligned to at least 16 bytes for the kernel's vector
//!     accesses to be valid (device allocations are 256-byte aligned);
//!   * a scalar parameter is a `u64` holding
//!     [`encode_scalar_bits`](crate::abi::encode_scalar_bits)`(value)` (the value's
//!     bits zero-extended; the kernel truncates and reinterprets).
//! * Then one trailing parameter: `status`, a `u64` device pointer to one `u32` the
//!   runtime zeroes before the launch. The kernel only ever updates it with an atomic
//!   OR (`atom.global.or.b32`, relaxed) of the [`status`](crate::abi::status) bits of
//!   the run-time errors it met: each thread accumulates its bits in a register and ORs
//!   them in once, at its end, only if they are nonzero (a kernel whose accesses are all
//!   proven in bounds has no atomic at all). The runtime reads it after synchronising.
//! * Block size = the kernel's `workgroup_size` (the PTX carries `.reqntid` with it, so
//!   the driver rejects a launch with any other block); grid = the plan's grid; no
//!   dynamic shared memory (shared arrays are static `.shared` variables, 16-byte
//!   aligned).
//!
//! # Semantics
//!
//! Everything in docs/semantics.md, as the CPU target does it:
//!
//! * Every load and store is checked against the buffer's or shared array's static
//!   length unless [`kernelc_ir::analysis::Ranges`] proves it in bounds (and, for
//!   vector accesses, aligned); a failing access is skipped (a load yields zero) and
//!   raises `OUT_OF_BOUNDS` or `UNALIGNED`. Vector accesses are single wide memory
//!   operations (`ld.global.v4.b32` for 4 x f32), aligned to `lanes * size`.
//! * Integer division or remainder by zero yields 0 and raises `DIVISION_BY_ZERO`;
//!   `MIN / -1` wraps to `MIN` (`MIN % -1` is 0) without a status; a shift by the bit
//!   width or more uses the amount modulo the width and raises `SHIFT_OVERFLOW`.
//! * Float `+ - *` are emitted as `add.rn`/`sub.rn`/`mul.rn` (explicit rounding forbids
//!   `ptxas` from contracting them into an fma; LLVM's own contraction is switched off
//!   with `-nvptx-fma-level=0`); only an IR `fma` becomes `fma.rn`. Division and
//!   square root are the correctly rounded `div.rn`/`sqrt.rn`. No flush to zero.
//! * f16/bf16 are computed in f32 and rounded back after each operation.
//! * float -> int casts saturate, NaN -> 0 (`llvm.fptosi.sat`/`fptoui.sat`); float
//!   `min`/`max` are IEEE minNum/maxNum (`llvm.minnum`/`maxnum` -> `min.f32`);
//!   `round` is half to even (`cvt.rni`); `rsqrt` is `1 / sqrt` in f64 for f32 (as the
//!   interpreter).
//! * Float `%` must arrive expanded into the IR's exact integer long division
//!   ([`required_expansion`]; `kernelc_ir::passes::math`): NVPTX's own `frem` is
//!   `x - trunc(x / y) * y`, which is not exact. An unexpanded one is
//!   [`CodegenError::Unsupported`].
//! * Transcendental functions (`exp`, `log`, `sin`, `pow`, ...) have no exact or
//!   accurate native form without libdevice: a kernel that still holds one (an f64
//!   one, or an f32 one that did not go through `kernelc_ir::passes::for_target` with
//!   the math expansion) is rejected with [`CodegenError::Unsupported`]. The emitted
//!   PTX never calls an external function.
//!
//! Verified on an H100 (driver 580, PTX JIT-compiled by the driver) during development:
//! float `%` (f32 and f64, then through an LLVM IR helper; the IR expansion that replaced
//! it runs on CUDA in `runtime/tests/cuda.rs`), integer division guards and their
//! status, saturating casts to i32/u32/i64 and rounding to f16/bf16, `a * b + c`
//! without contraction, minNum/maxNum with quiet and signalling NaNs, `rsqrt`/`sqrt`/division, shift
//! overflow and out-of-bounds status: bit for bit against the IR's definitions on 64Ki
//! random and special inputs each. The tests in `codegen/tests/ptx.rs` check the PTX
//! text and assemble every catalogue kernel with `ptxas`; they do not run kernels.

pub(crate) mod lower;
pub(crate) mod target;

use crate::CodegenError;
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::Kernel;

/// The name of this target in errors.
pub const TARGET: &str = "ptx";

/// How hard LLVM optimises (its IR pipeline and its code generator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PtxOptLevel {
    /// No IR passes; straightforward code (for debugging the emitter).
    O0,
    /// `default<O1>`.
    O1,
    /// `default<O2>` (the default).
    #[default]
    O2,
    /// `default<O3>`.
    O3,
}

/// What the PTX is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtxOptions {
    /// The SM architecture: the PTX `.target sm_{sm}` (default 90).
    pub sm: u32,
    /// The PTX ISA version times ten: `.version {ptx_isa / 10}.{ptx_isa % 10}`
    /// (default 90, i.e. PTX 9.0, which CUDA 13 understands).
    pub ptx_isa: u32,
    pub opt_level: PtxOptLevel,
}

impl Default for PtxOptions {
    fn default() -> Self {
        PtxOptions {
            sm: 90,
            ptx_isa: 90,
            opt_level: PtxOptLevel::O2,
        }
    }
}

/// What kernels must have expanded into IR (`kernelc_ir::passes::for_target`) before
/// this emitter takes them: every transcendental, f64 too (NVPTX has no accurate ones
/// without libdevice), and float `%` (NVPTX's `frem` rounds), except f32 `exp2`,
/// which is `ex2.approx.f32` (CUDA's own `exp2f`, within 2 ULP, subnormals kept: one
/// special-function instruction where the expansion takes some 30). Matrix fragments stay
/// (`mma.sync` and `wgmma`, for the default sm_90), and so do asynchronous copies
/// (`cp.async`); [`expansion_for_sm`] turns them off for an SM that lacks them.
pub fn required_expansion() -> MathExpansion {
    MathExpansion::all_transcendental_with_f64()
        .with_float_rem(true)
        .with_native_exp2_f32(true)
        .with_native_fragments(true)
        .with_native_warpgroup_fragments(true)
        .with_native_f64_m16_fragments(true)
        .with_native_async_copies(true)
}

/// [`required_expansion`] for kernels emitted for `sm`: fragments expanded before
/// [`FRAGMENTS_MIN_SM`], warpgroup fragments on any SM but [`WARPGROUP_SM`], f64
/// fragments of m16n8k16 before [`F64_M16_FRAGMENTS_MIN_SM`], asynchronous copies
/// before [`ASYNC_COPY_MIN_SM`].
pub fn expansion_for_sm(sm: u32) -> MathExpansion {
    required_expansion()
        .with_native_fragments(sm >= FRAGMENTS_MIN_SM)
        .with_native_warpgroup_fragments(sm == WARPGROUP_SM)
        .with_native_f64_m16_fragments(sm >= F64_M16_FRAGMENTS_MIN_SM)
        .with_native_async_copies(sm >= ASYNC_COPY_MIN_SM)
}

/// The oldest SM with `cp.async` (asynchronous copies into shared memory).
pub const ASYNC_COPY_MIN_SM: u32 = 80;

/// The oldest SM whose `mma.sync` takes the multiplies of
/// [`kernelc_ir::fragment::MMA_KINDS`] but the warpgroup shapes and f64 m16n8k16
/// (see [`WARPGROUP_SM`], [`F64_M16_FRAGMENTS_MIN_SM`]): older ones need fragments
/// expanded (`MathExpansion::native_fragments` off).
pub const FRAGMENTS_MIN_SM: u32 = 80;

/// The oldest SM whose `mma.sync` takes f64 fragments of m16n8k16 (Hopper's DMMA
/// shape, at twice m8n8k4's rate there).
pub const F64_M16_FRAGMENTS_MIN_SM: u32 = 90;

pub use lower::dynamic_shared_bytes;

/// The one SM whose PTX takes warpgroup fragments (the `m64` shapes of
/// [`kernelc_ir::fragment::MMA_KINDS`]): `wgmma` exists on sm_90a only, so a kernel
/// with them is emitted for `.target sm_90a` and runs on compute capability 9.0.
pub const WARPGROUP_SM: u32 = 90;

/// Compiles `kernel` to PTX text (see the module documentation for the ABI).
pub fn emit(kernel: &Kernel, options: &PtxOptions) -> Result<String, CodegenError> {
    target::compile(kernel, options, target::Output::Ptx)
}

/// The LLVM IR of `kernel` as it enters the NVPTX code generator (after the
/// optimisation pipeline of `options.opt_level`), as text.
pub fn emit_llvm_ir(kernel: &Kernel, options: &PtxOptions) -> Result<String, CodegenError> {
    target::compile(kernel, options, target::Output::LlvmIr)
}

/// An internal inconsistency (the IR was validated, so this is a kernelc bug).
pub(crate) fn internal(what: impl Into<String>) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: format!("internal error: {}", what.into()),
    }
}

/// An error reported by LLVM.
pub(crate) fn backend(what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: what.to_string(),
    }
}

pub(crate) fn unsupported(construct: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        target: TARGET,
        construct: construct.into(),
    }
}
