//! # kernelc-codegen
//!
//! The emitters: one module per target, each turning a validated
//! [`kernelc_ir::Kernel`] into an artifact for that target. An emitter knows targets,
//! not ops; it is total over valid IR or returns [`CodegenError::Unsupported`] naming
//! the construct it cannot compile, and it never panics.
//!
//! * [`cpu`]: Cranelift. JIT-compiled machine code run on host threads
//!   ([`cpu::CpuKernel`]), or a relocatable object file ([`cpu::emit_object`]).
//!
//! The WGSL, SPIR-V and PTX emitters (issues #4-#6) are not built yet; they will share
//! [`CodegenError`].

pub mod cpu;
pub mod error;

pub use error::CodegenError;
