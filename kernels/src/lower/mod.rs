//! Lowering: an [`OpSpec`] and a [`TargetCaps`] become a [`Plan`] of IR kernels.
//!
//! Each op's lowering lives with its family (`ops/<family>/lower.rs`); this module is
//! the machinery they share, which names no op: the plan and the caps, schedules,
//! the broadcasting map and pointwise kernels, the reduction engine, the tiled matrix
//! engine, index resolution and the counter RNG in IR. Tile sizes, workgroup shapes
//! and vector widths are parameters taken from the caps, never copies of the
//! definition: the CPU (one invocation per workgroup) and a GPU (hundreds) run the
//! same kernels. A dtype the caps lack is a typed error, never emitted.

mod caps;
pub(crate) mod index;
mod interp;
pub(crate) mod map;
pub(crate) mod math;
pub(crate) mod plan;
pub(crate) mod pointwise;
pub(crate) mod rebase;
pub(crate) mod reduction;
pub(crate) mod rng;
pub mod schedule;
pub mod split;
pub(crate) mod tile;

pub use caps::TargetCaps;
pub use interp::{poison, run_plan, PlanRunError};
pub(crate) use plan::declare_tensor;
pub(crate) use plan::PlanBuilder;
pub use plan::{
    Binding, Launch, Plan, Prefill, PrefillSource, ScalarParam, TempBuffer, Tunable, Uniform,
    Uniforms, Whole,
};

use crate::error::SpecError;
use crate::spec::OpSpec;
use kernelc_ir::{ScalarType, ValidationError};
use thiserror::Error;

/// Why an op could not be lowered for a target.
#[derive(Debug, Error)]
pub enum LowerError {
    #[error("invalid op spec: {0}")]
    Spec(#[from] SpecError),
    #[error("{op} needs {dtype}, which the target does not support")]
    UnsupportedDtype { op: String, dtype: ScalarType },
    #[error("{what} is {value}, over the limit of {limit}")]
    TooLarge {
        what: String,
        value: u64,
        limit: u64,
    },
    #[error("the target allows {available} bytes of shared memory; {op} needs at least {needed}")]
    SharedMemory {
        op: String,
        needed: u64,
        available: u64,
    },
    /// A state a validated spec cannot reach: a bug in kernelc, reported, not hidden.
    #[error("internal error while lowering: {0}")]
    Internal(&'static str),
    /// A lowering produced an invalid kernel: a bug in kernelc, reported, not hidden.
    #[error("internal error: lowering produced an invalid kernel: {0}")]
    InvalidKernel(#[from] ValidationError),
}

/// Lowers `spec` for a target with `caps`.
pub fn lower(spec: &OpSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    spec.validate()?;
    for sig in spec.inputs().iter().chain(spec.outputs().iter()) {
        if !caps.supports(sig.dtype) {
            return Err(LowerError::UnsupportedDtype {
                op: spec.name(),
                dtype: sig.dtype,
            });
        }
    }
    // Zero-sized tensors: nothing to compute when every output is empty; an op's own
    // empty-input plan when only inputs are (no kernel ever sees a buffer of length 0).
    if spec.outputs().iter().all(|o| o.numel() == 0) {
        return Ok(Plan::default());
    }
    if spec.inputs().iter().any(|i| i.numel() == 0) {
        return spec.lower_empty_unchecked(caps);
    }
    // Past 32-bit indices: pieces that fit, where the op splits.
    let limit = caps.kernel_limit();
    let sigs = spec.inputs().into_iter().chain(spec.outputs());
    if let Some(large) = sigs.into_iter().find(|s| s.numel() as u64 > limit) {
        return spec
            .lower_large_unchecked(caps)
            .map(|plan| rebase::rebase_plan(plan?, caps))
            .unwrap_or_else(|| {
                Err(LowerError::TooLarge {
                    what: format!(
                        "{}: elements of `{}` (one kernel indexes 32 bits; this op is not split into pieces)",
                        spec.name(),
                        large.name
                    ),
                    value: large.numel() as u64,
                    limit,
                })
            });
    }
    spec.lower_unchecked(caps)
}
