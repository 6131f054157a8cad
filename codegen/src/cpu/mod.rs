//! The CPU target: Kernel IR -> Cranelift IR -> machine code for the host.
//!
//! [`compile`] JIT-compiles a kernel into a [`CpuKernel`], whose
//! [`launch`](CpuKernel::launch) runs a grid of workgroups on all cores;
//! [`emit_object`] writes the same function into a relocatable object file.
//!
//! # The ABI of a compiled kernel
//!
//! One call runs **one workgroup**:
//!
//! ```text
//! extern "C" fn kernel(
//!     buffers: *const *mut u8,      // [params.len()]: base of buffer param i (unused for scalars)
//!     scalars: *const u64,          // [params.len()]: value of scalar param i (unused for buffers)
//!     workgroup_id: *const u32,     // [3]: this workgroup's id (x, y, z)
//!     num_workgroups: *const u32,   // [3]: the grid (x, y, z)
//!     shared: *mut u8,              // scratch for the shared arrays, 16-byte aligned
//! ) -> u32                          // status: 0, or an OR of the `status` bits
//! ```
//!
//! * Slot `i` of `buffers` and `scalars` belongs to parameter `i`; only the slot of
//!   the parameter's kind is read. Buffer `i` must hold `len * size_bytes(elem)`
//!   bytes, little-endian elements, aligned to the element size; bool elements are
//!   `u32` words (nonzero is true; `true` is stored as 1); f16/bf16 are their 16 bits.
//! * A scalar is encoded in its `u64` slot by [`encode_scalar`]: the value's bits in
//!   the low bits (bool as 0/1, i32/u32/f32 as 32 bits, f16/bf16 as 16 bits).
//! * `shared` must point to [`CpuKernel::shared_bytes`] writable bytes (the shared
//!   arrays at 16-byte-aligned offsets, in declaration order), private to the calling
//!   thread while the call runs. Their contents at entry do not matter (reading shared
//!   memory before writing it is an error in the IR).
//! * If the workgroup has several invocations, the function runs them one after the
//!   other (z, then y, then x outermost to innermost). That is only faithful without
//!   barriers, so a kernel with a barrier and more than one invocation per workgroup is
//!   rejected with [`CodegenError::Unsupported`]. Kernels lowered for CPU caps have
//!   one invocation per workgroup, where a barrier is a no-op.
//! * The function never traps and never touches memory outside the buffers and the
//!   shared scratch it was given (given that they are as large as the kernel
//!   declares). Every load and store is checked against the static length (one
//!   compare and branch), except where the value-range analysis
//!   ([`kernelc_ir::analysis`]) proves the check cannot fail (the index's range ends
//!   at least `lanes` before the length; its alignment is a multiple of the lanes);
//!   a failing access is skipped (a load yields zero) and sets
//!   [`status::OUT_OF_BOUNDS`] or [`status::UNALIGNED`]. Integer division or
//!   remainder by zero yields 0 and sets [`status::DIVISION_BY_ZERO`] (`MIN / -1`
//!   wraps as in the IR); a shift by the bit width or more uses the amount modulo the
//!   width and sets [`status::SHIFT_OVERFLOW`]. Execution continues after such an
//!   error; the status reports it, and [`CpuKernel::launch`] turns it into a typed
//!   [`LaunchError`]. After an error, buffer contents are unspecified (but only the
//!   kernel's own buffers were written).
//!
//! In an object file the function is exported under the kernel's name (characters
//! other than ASCII letters, digits and `_` become `_`; a leading digit gets a `_`
//! prefix), with the C calling convention of the host (System V on x86-64 Linux). It
//! imports the helper symbols listed in [`helpers::HELPERS`] that it uses (all
//! `extern "C"` with float arguments and results by value), and may import the C math
//! library functions Cranelift itself calls when the ISA lacks an instruction
//! (`fmaf`/`fma`, `floorf`, `ceilf`, `nearbyintf`, ... only on hosts without FMA or
//! SSE4.1). The object targets the host ISA with all its extensions.
//!
//! # What is native and what is a call
//!
//! Native: integer and float arithmetic, comparisons, select, casts (except to
//! f16/bf16 from f64 or integers), bitcasts, vector construction, `sqrt`, `floor`,
//! `ceil`, `round` (half to even), `abs`, `min`/`max` (IEEE minNum/maxNum built from
//! compares and selects, as the interpreter: a NaN operand yields the other), `fma`,
//! `rsqrt` (`1 / sqrt` in f64 for f32, as the interpreter), and the f16/bf16 <-> f32
//! conversions (bit manipulation; f16/bf16 arithmetic is done in f32 and rounded back
//! after every operation). Vectors of 4 x f32/i32/u32 and 2 or 4 x f64/i64 use 128-bit
//! SIMD for arithmetic, comparisons, selects and the rounding functions; other vectors
//! are lane-wise.
//!
//! Calls ([`helpers`]): `exp`, `exp2`, `log`, `log2`, `tanh`, `erf`, `sin`, `cos`,
//! `pow` (f32: evaluated in f64, rounded once, exactly as the interpreter; vectors call
//! per lane), float `%` (C `fmod`), and the conversions f64 -> f16/bf16.
//!
//! # Soundness of parallel launches
//!
//! [`CpuKernel::launch`] runs workgroups on several threads that write the same
//! buffers through raw pointers. The IR forbids two invocations from writing one
//! element (or one writing what another reads) in a launch, so threads touch disjoint
//! bytes: that kernel contract, which the interpreter checks, is what makes the
//! parallel launch sound. Buffers are passed as raw pointers derived from the
//! caller's exclusive `&mut [u8]`s, never as overlapping `&mut`
//! ([`CpuKernel::launch_raw`] takes raw pointers and leaves that exclusivity to its
//! caller). A racy kernel produces unspecified values in the racing elements, nothing
//! else.

mod bytes;
pub mod helpers;
mod isa;
mod launch;
#[cfg(feature = "ptx")]
pub mod llvm;
mod lower;
mod repr;

pub use bytes::AlignedBytes;
pub use launch::{
    launch_threads, threads_from_env, CpuArg, CpuKernel, Element, LaunchError, RawArg,
};

use crate::CodegenError;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use kernelc_ir::{validate, Kernel, Stmt};

/// The name of this target in errors.
pub const TARGET: &str = "cpu";

/// The bits of the status word a compiled kernel returns (shared by every target).
pub use crate::abi::status;

/// The C type of a compiled kernel (see the module documentation).
pub type KernelFn = unsafe extern "C" fn(
    buffers: *const *mut u8,
    scalars: *const u64,
    workgroup_id: *const u32,
    num_workgroups: *const u32,
    shared: *mut u8,
) -> u32;

/// A scalar argument as the compiled kernel reads it from its `u64` slot.
pub use crate::abi::encode_scalar_bits as encode_scalar;

/// The symbol a kernel is exported under: its name with every character other than
/// ASCII letters, digits and `_` replaced by `_`, and `_` prepended to a leading digit
/// (or to an empty name).
pub fn symbol_name(kernel: &Kernel) -> String {
    let mut s: String = kernel
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// Largest shared scratch a kernel may declare (bytes).
const MAX_SHARED_BYTES: u64 = 1 << 30;

/// Validates the kernel and checks what this target cannot run.
fn check_supported(kernel: &Kernel) -> Result<(), CodegenError> {
    validate(kernel)?;
    if kernel.uses_fragments() {
        return Err(CodegenError::unexpanded_fragments(TARGET));
    }
    let n = kernel.invocations_per_workgroup();
    if n > 1 && kernel.any_stmt(&|s| matches!(s, Stmt::Barrier)) {
        return Err(CodegenError::Unsupported {
            target: TARGET,
            construct: format!(
                "a barrier in a workgroup of {n} invocations (CPU kernels with barriers \
                 must have one invocation per workgroup)"
            ),
        });
    }
    let (_, shared) = crate::abi::cpu_shared_layout(kernel);
    if shared > MAX_SHARED_BYTES {
        return Err(CodegenError::Unsupported {
            target: TARGET,
            construct: format!("{shared} bytes of shared memory (at most {MAX_SHARED_BYTES})"),
        });
    }
    let symbol = symbol_name(kernel);
    if helpers::HELPERS.iter().any(|h| h.name == symbol) {
        return Err(CodegenError::Unsupported {
            target: TARGET,
            construct: format!("a kernel named `{symbol}` (the name of a helper symbol)"),
        });
    }
    Ok(())
}

fn backend(what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: what.to_string(),
    }
}

/// The host ISA the CPU target compiles for, with the extensions it uses (e.g.
/// `x86_64 has_sse41 has_avx has_fma ...`), and the Cranelift version: machine code
/// from [`compile`] or [`emit_object`] depends on exactly this, so it belongs in cache
/// keys of compiled artifacts.
pub fn host_isa_description() -> String {
    let mut out = format!("{} cranelift-0.135.8", std::env::consts::ARCH);
    if let Ok((isa, _)) = isa::host_isa(false) {
        for flag in isa.isa_flags() {
            if flag.as_bool() == Some(true) {
                out.push(' ');
                out.push_str(flag.name);
            }
        }
    }
    out
}

/// JIT-compiles `kernel` for the host.
pub fn compile(kernel: &Kernel) -> Result<CpuKernel, CodegenError> {
    jit(kernel, None)
}

fn jit(kernel: &Kernel, store: Option<&mut dyn CodeStore>) -> Result<CpuKernel, CodegenError> {
    check_supported(kernel)?;
    let (isa, features) = isa::host_isa(false)?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for h in &helpers::HELPERS {
        builder.symbol(h.name, h.ptr);
    }
    let mut module = JITModule::new(builder);
    let sig = lower::kernel_signature(&module);
    let id = module
        .declare_function(&symbol_name(kernel), Linkage::Export, &sig)
        .map_err(backend)?;
    lower::define_kernel_cached(&mut module, kernel, features, id, false, store)?;
    module.finalize_definitions().map_err(backend)?;
    let code = module.get_finalized_function(id);
    // SAFETY: `code` is the entry of the function just defined with the signature of
    // `KernelFn` (`kernel_signature`: five pointers in, an i32 out, the host's default
    // C calling convention), finalized as executable; it stays valid as long as
    // `module`, which `CpuKernel` owns and frees only on drop.
    let func = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    Ok(CpuKernel::new(module, func, kernel))
}

/// Where compiled machine code is kept between processes (the runtime's disk cache).
/// Keys are Cranelift's: a hash of the function and the ISA; values are its serialized
/// compiled code. `load` must return exactly what `store` was given for that key, or
/// nothing (a damaged value is detected by Cranelift and recompiled).
pub trait CodeStore {
    fn load(&mut self, key: &[u8]) -> Option<Vec<u8>>;
    fn store(&mut self, key: &[u8], code: Vec<u8>);
}

/// [`compile`], reusing machine code from `store` when it has it.
pub fn compile_cached(
    kernel: &Kernel,
    store: &mut dyn CodeStore,
) -> Result<CpuKernel, CodegenError> {
    jit(kernel, Some(store))
}

/// Compiles `kernel` into a relocatable object file for the host (ELF on Linux,
/// Mach-O on macOS, COFF on Windows) that exports the kernel's function under
/// [`symbol_name`] (see the module documentation for the ABI and the imports).
pub fn emit_object(kernel: &Kernel) -> Result<Vec<u8>, CodegenError> {
    let (module, _) = object_module(kernel, false, None)?;
    module.finish().emit().map_err(backend)
}

/// [`emit_object`] for the target `triple` (`x86_64-unknown-linux-gnu`, ...) with that
/// architecture's baseline extensions, for ahead-of-time builds; the host's, with all
/// its extensions, when `None`. A triple whose architecture this build of Cranelift
/// lacks is an error naming it.
pub fn emit_object_for(kernel: &Kernel, triple: Option<&str>) -> Result<Vec<u8>, CodegenError> {
    let (module, _) = object_module(kernel, false, triple)?;
    module.finish().emit().map_err(backend)
}

/// The bytes of shared scratch a call of the kernel's function needs (the `shared`
/// argument of the ABI above): its shared arrays at 16-byte-aligned offsets.
pub fn shared_bytes(kernel: &Kernel) -> u64 {
    crate::abi::cpu_shared_layout(kernel).1
}

/// The Cranelift IR of the kernel's function, as text (before Cranelift's
/// optimisations), for reading and for snapshot tests.
pub fn emit_clif(kernel: &Kernel) -> Result<String, CodegenError> {
    let (_, text) = object_module(kernel, true, None)?;
    text.ok_or_else(|| backend("no CLIF text was produced"))
}

fn object_module(
    kernel: &Kernel,
    want_text: bool,
    triple: Option<&str>,
) -> Result<(ObjectModule, Option<String>), CodegenError> {
    check_supported(kernel)?;
    let (isa, features) = match triple {
        Some(triple) => isa::isa_for(triple)?,
        None => isa::host_isa(true)?,
    };
    let symbol = symbol_name(kernel);
    let builder =
        ObjectBuilder::new(isa, symbol.clone(), default_libcall_names()).map_err(backend)?;
    let mut module = ObjectModule::new(builder);
    let sig = lower::kernel_signature(&module);
    let id = module
        .declare_function(&symbol, Linkage::Export, &sig)
        .map_err(backend)?;
    let text = lower::define_kernel(&mut module, kernel, features, id, want_text)?;
    Ok((module, text))
}
