//! # kernelc
//!
//! A kernel-generating compiler: ops are written once against one tensor IR
//! ([`ir`]), and emitted for SPIR-V, WGSL, CUDA PTX and native CPU code.
//!
//! This facade re-exports the workspace crates. See `docs/ARCHITECTURE.md`.

pub mod aot;
#[cfg(feature = "fuzz")]
pub mod fuzz;

pub use kernelc_codegen as codegen;
pub use kernelc_ir as ir;
pub use kernelc_kernels as kernels;
pub use kernelc_runtime as runtime;
