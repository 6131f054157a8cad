//! The seed backend traits served on top of the runtime, one module per trait, each
//! behind its own cargo feature (see `kernels::seeds` for which op serves each
//! method, and the README's support table for what each adapter proves).
//!
//! Invariants every adapter keeps:
//! - Every method that is device math runs a catalogue op through
//!   [`Runtime::run_into`](crate::Runtime::run_into) or
//!   [`Runtime::run_host`](crate::Runtime::run_host) on the adapter's device; host code
//!   only where the trait itself is host-side (metadata, allocation, host scalars).
//! - Every failure is the trait's own error type, built from a [`RuntimeError`] by
//!   [`ErrorClass::of`]; no adapter panics on anything its caller passes.
//! - Checks run before anything is written: a refused call leaves every output as it
//!   was.

use crate::error::RuntimeError;
#[cfg(any(feature = "oxicuda", feature = "oxicuda-0-5", feature = "rustd"))]
use crate::{memory::View, runtime::Runtime};
use kernelc_kernels::lower::LowerError;
#[cfg(any(feature = "oxicuda", feature = "oxicuda-0-5", feature = "rustd"))]
use kernelc_kernels::OpSpec;

#[cfg(feature = "ferrum")]
pub mod ferrum;
#[cfg(any(feature = "oxicuda", feature = "oxicuda-0-5"))]
pub mod oxicuda;
#[cfg(feature = "rumus")]
pub mod rumus;
#[cfg(feature = "rustd")]
pub mod rustd;

/// How a trait with a coarse error enum should report a [`RuntimeError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The caller passed something wrong: shape, size, address, dtype, overlap.
    InvalidArgument,
    /// The device cannot run this (a dtype or size the target lacks).
    Unsupported,
    /// The device ran out of memory.
    OutOfMemory,
    /// The device or a compiled kernel failed.
    Device,
}

impl ErrorClass {
    /// The class of `error`.
    pub fn of(error: &RuntimeError) -> ErrorClass {
        match error {
            RuntimeError::Spec(_)
            | RuntimeError::Graph(_)
            | RuntimeError::InputCount { .. }
            | RuntimeError::InputShape { .. }
            | RuntimeError::InputDtype { .. }
            | RuntimeError::OutputCount { .. }
            | RuntimeError::OutputShape { .. }
            | RuntimeError::OutputDtype { .. }
            | RuntimeError::Overlap { .. }
            | RuntimeError::OutOfRange { .. }
            | RuntimeError::Misaligned { .. }
            | RuntimeError::InvalidKernel(_)
            | RuntimeError::BadAddress { .. }
            | RuntimeError::WrongDevice { .. }
            | RuntimeError::DataLength { .. }
            | RuntimeError::Dtype { .. }
            | RuntimeError::BadArgument(_) => ErrorClass::InvalidArgument,
            RuntimeError::Lower { source, .. } => match source.as_ref() {
                LowerError::Spec(_) => ErrorClass::InvalidArgument,
                LowerError::UnsupportedDtype { .. }
                | LowerError::TooLarge { .. }
                | LowerError::SharedMemory { .. } => ErrorClass::Unsupported,
                LowerError::Internal(_) | LowerError::InvalidKernel(_) => ErrorClass::Device,
            },
            RuntimeError::TooLarge { .. }
            | RuntimeError::BufferTooLarge { .. }
            | RuntimeError::Unsupported { .. } => ErrorClass::Unsupported,
            RuntimeError::OutOfMemory { .. } => ErrorClass::OutOfMemory,
            RuntimeError::Compile { .. }
            | RuntimeError::Launch { .. }
            | RuntimeError::NoDevice(_)
            | RuntimeError::Internal(_) => ErrorClass::Device,
        }
    }
}

/// Runs `spec` as if every input were read before any output is written, which is what
/// the seed traits' callers assume (`out` may be `a`): an output that overlaps an input
/// it does not update in place is computed into a temporary and copied over after.
/// Overlaps [`Runtime::run_into`] allows (an exact in-place pair) cost nothing.
#[cfg(any(feature = "oxicuda", feature = "oxicuda-0-5", feature = "rustd"))]
pub(crate) fn run_staged(
    rt: &Runtime,
    spec: &OpSpec,
    mut inputs: Vec<View>,
    outputs: Vec<View>,
) -> Result<(), RuntimeError> {
    let aliases = spec.aliases();
    let mut targets = Vec::with_capacity(outputs.len());
    let mut computed = outputs.clone();
    for (o, out) in outputs.into_iter().enumerate() {
        let prior = aliases.iter().find(|a| a.output == o).map(|a| a.input);
        let clash = inputs
            .iter()
            .enumerate()
            .any(|(i, v)| Some(i) != prior && v.overlaps(&out));
        if !clash {
            targets.push(None);
            continue;
        }
        let temp = rt.alloc_buffer(out.byte_len())?;
        let staged = View::new(&temp, 0, out.dtype(), out.shape())?;
        if let Some(p) = prior {
            let from = &inputs[p];
            rt.copy_buffer(from.buffer(), from.offset(), &temp, 0, out.byte_len())?;
            inputs[p] = staged.clone();
        }
        computed[o] = staged;
        targets.push(Some(out));
    }
    rt.run_into(
        spec,
        &inputs.iter().collect::<Vec<_>>(),
        &computed.iter().collect::<Vec<_>>(),
    )?;
    for (target, staged) in targets.iter().zip(&computed) {
        if let Some(target) = target {
            let len = target.byte_len();
            rt.copy_buffer(staged.buffer(), 0, target.buffer(), target.offset(), len)?;
        }
    }
    Ok(())
}
