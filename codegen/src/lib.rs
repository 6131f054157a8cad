//! # kernelc-codegen
//!
//! The emitters: one module per target, each turning a validated
//! [`kernelc_ir::Kernel`] into an artifact for that target. An emitter knows targets,
//! not ops; it is total over valid IR or returns [`CodegenError::Unsupported`] naming
//! the construct it cannot compile, and it never panics.
//!
//! * [`abi`]: what every target agrees on (status bits, entry point, shader bindings).
//! * [`cpu`]: Cranelift. JIT-compiled machine code run on host threads
//!   ([`cpu::CpuKernel`]), or a relocatable object file ([`cpu::emit_object`]).
//! * `wgsl` (feature `wgsl`): a `naga::Module` validated by naga, written as WGSL text.
//! * `spirv` (feature `spirv`): SPIR-V words built with `rspirv`, for Vulkan 1.1.
//! * `ptx` (feature `ptx`): LLVM IR through `inkwell`, PTX text from LLVM's NVPTX
//!   backend (needs LLVM 22 at build time; linked statically).

pub mod abi;
pub mod cpu;
pub mod error;
#[cfg(feature = "ptx")]
pub mod ptx;
#[cfg(any(feature = "wgsl", feature = "spirv"))]
mod shader;
#[cfg(feature = "spirv")]
pub mod spirv;
#[cfg(feature = "wgsl")]
pub mod wgsl;

pub use error::CodegenError;
