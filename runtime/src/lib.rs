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
//! Invariants: tensors are immutable once created (every op allocates fresh outputs),
//! so a launch never writes memory anyone else can observe; every input is checked
//! against the op's spec (count, dtype, shape, device) before anything runs.

pub mod cache;
mod conformance;
mod device;
mod element;
mod error;
mod ops;
mod options;
mod pool;
mod runtime;
mod tensor;

pub use device::{Device, DeviceChoice, ShaderPath, WgpuOptions};
pub use element::Element;
pub use error::{Result, RuntimeError};
pub use options::RuntimeOptions;
pub use runtime::{PlanKey, Runtime, Stats};
pub use tensor::Tensor;
