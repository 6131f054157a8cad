//! # kernelc-runtime
//!
//! Runs the op catalogue on a device, JIT-compiling each kernel for the exact shapes it
//! is called with:
//!
//! ```no_run
//! use kernelc_runtime::Runtime;
//! let rt = Runtime::cpu();
//! let a = rt.tensor(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let b = rt.tensor(&[3, 2], &[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?;
//! let c = rt.matmul(&a, &b)?;
//! assert_eq!(c.to_vec::<f32>()?, vec![4.0, 5.0, 10.0, 11.0]);
//! # Ok::<(), kernelc_runtime::RuntimeError>(())
//! ```
//!
//! * [`Runtime`]: a device, the lowering cache (per spec), the kernel cache (memory and
//!   disk, see [`cache`]), and [`Runtime::run`] plus convenience ops.
//! * [`Tensor`]: shape, dtype, device buffer; buffers come from a pool that reuses
//!   allocations.
//!
//! * [`Buffer`] and [`View`]: mutable device memory for frameworks that own their
//!   buffers: partial reads, writes, fills and copies at any offset,
//!   [`Runtime::run_into`] writes an op's results into caller-given views, and the
//!   pointer registry ([`Runtime::malloc`], [`Runtime::resolve`]) serves APIs that
//!   speak in `u64` device addresses:
//!
//! ```
//! use kernelc_runtime::{Runtime, ScalarType};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = Runtime::cpu();
//! let buf = rt.alloc_buffer(1024)?;
//! let (x, y) = (buf.view(0, ScalarType::F32, &[4])?, buf.view(64, ScalarType::F32, &[4])?);
//! rt.write_view(&x, &[1.0f32, 2.0, 3.0, 4.0])?;
//! let neg = serde_json::from_str(r#"{"op":"unary","func":"neg","dtype":"f32","shape":[4]}"#)?;
//! rt.run_into(&neg, &[&x], &[&y])?;
//! assert_eq!(rt.read_view::<f32>(&y)?, vec![-1.0, -2.0, -3.0, -4.0]);
//! # Ok(()) }
//! ```
//!
//! Ops are asynchronous: they return once queued. A kernel's run-time error (an
//! out-of-bounds index, a division by zero) is reported, naming the op, by the next
//! synchronising call: [`Runtime::synchronize`] or any read of a tensor, buffer or view.
//!
//! Invariants: tensors are immutable once created (`run` allocates fresh outputs), so
//! a launch never writes memory anyone else can observe; views are written only by
//! `run_into` and the buffer calls, one at a time under the runtime's memory lock, with
//! aliasing checked first; every operand is checked against the op's spec (count,
//! dtype, shape, device) before anything runs.

pub mod adapters;
pub mod cache;
mod conformance;
mod device;
mod element;
mod error;
mod graph;
mod host;
mod memory;
mod module;
mod ops;
mod options;
mod pool;
mod raw;
mod registry;
mod runtime;
mod tensor;
pub mod tune;

/// `m` locked, poisoning ignored: a lock is poisoned only when another thread panicked
/// while holding it, and every state kept under one here is changed by single calls,
/// so it is consistent.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub use device::{CpuTier, Device, DeviceChoice, ShaderPath, WgpuOptions};
pub use element::{AnyBitsElement, Element};
pub use error::{Result, RuntimeError};
pub use graph::CompiledGraph;
pub use host::{HostSlice, HostSliceMut};
pub use kernelc_ir::ScalarType;
pub use memory::{Buffer, View};
pub use module::{PtxArg, PtxModule, PtxParam, ShaderBinding, ShaderModule, ShaderSource};
pub use options::RuntimeOptions;
pub use raw::{KernelArg, LoadedKernel};
pub use runtime::{PlanKey, Runtime, Stats};
pub use tensor::Tensor;
pub use tune::{Autotune, TuneRecord, TuneReport, TuneSource};
