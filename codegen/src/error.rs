//! The error every emitter returns.

use kernelc_ir::ValidationError;
use thiserror::Error;

/// Why a kernel could not be compiled for a target.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CodegenError {
    /// The kernel failed validation (emitters only take valid kernels).
    #[error(transparent)]
    Invalid(#[from] ValidationError),

    /// The kernel is valid IR, but uses something this target cannot express.
    #[error("target `{target}` does not support {construct}")]
    Unsupported {
        target: &'static str,
        /// What was not supported, in words (e.g. "a barrier in a workgroup of 64
        /// invocations").
        construct: String,
    },

    /// The code generator of the target (Cranelift, naga, LLVM, ...) failed. This is a
    /// bug in kernelc or in that generator, never in the kernel.
    #[error("target `{target}`: code generation failed: {message}")]
    Backend {
        target: &'static str,
        message: String,
    },
}

impl CodegenError {
    /// A matrix fragment reached an emitter that has no matrix units (or, for PTX, an
    /// SM before 8.0). The runtime expands fragments into plain code for such targets
    /// (`MathExpansion::native_fragments` off).
    pub fn unexpanded_fragments(target: &'static str) -> Self {
        CodegenError::Unsupported {
            target,
            construct: format!(
                "matrix fragments here (expand them first with kernelc_ir::passes::for_target \
                 and an expansion without native_fragments, or \
                 kernelc_ir::passes::expand_fragments); the {target} target has no matrix units"
            ),
        }
    }

    /// An asynchronous copy reached an emitter without them (or, for PTX, an SM
    /// before 8.0). The runtime expands them into loads and stores for such targets
    /// (`MathExpansion::native_async_copies` off).
    pub fn unexpanded_async_copies(target: &'static str) -> Self {
        CodegenError::Unsupported {
            target,
            construct: format!(
                "asynchronous copies here (expand them first with kernelc_ir::passes::for_target \
                 and an expansion without native_async_copies, or \
                 kernelc_ir::passes::expand_async_copies); the {target} target has none"
            ),
        }
    }

    /// A float `%` reached a GPU emitter. Their targets' own float remainders round
    /// (`x − y·trunc(x/y)`), so kernelc expands float `%` into exact integer arithmetic
    /// in the IR instead (`MathExpansion::float_rem`), as the runtime's devices do.
    #[cfg(any(feature = "wgsl", feature = "spirv", feature = "ptx"))]
    pub(crate) fn unexpanded_float_rem(target: &'static str) -> Self {
        CodegenError::Unsupported {
            target,
            construct: format!(
                "an unexpanded float `%` (this target's own remainder is not exact; expand \
                 it first with kernelc_ir::passes::for_target and \
                 kernelc_codegen::{target}::required_expansion(), which sets \
                 MathExpansion::with_float_rem)"
            ),
        }
    }
}
