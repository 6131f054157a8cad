//! User PTX modules (written outside kernelc) on a CUDA device: the native-module
//! half of the runtime's raw kernels (`crate::module`). The module is JIT-compiled by
//! the driver like kernelc's own PTX; a launch passes each argument at its declared
//! size (a pointer as its 8-byte device address, a scalar as its own bytes), with the
//! grid, block and dynamic shared memory the caller gives, on the device's stream in
//! order with every op. Nothing checks what the code does with the pointers: the
//! runtime's launch is `unsafe` for that reason.

use super::{describe, result, CudaDevice, LoadedModule};
use crate::error::{Result, RuntimeError};
use cudarc::driver::{sys, CudaStream};
use std::ffi::c_void;
use std::sync::Arc;

/// A user entry point loaded on a CUDA device.
pub struct CudaPtxModule {
    function: sys::CUfunction,
    module: Option<LoadedModule>,
    stream: Arc<CudaStream>,
    name: String,
}

// SAFETY: `function` is a driver handle into `module`, which lives as long as this
// value; driver handles may be used from any thread with the context current, and a
// launch only reads the handle.
unsafe impl Send for CudaPtxModule {}
// SAFETY: as `Send`: nothing is mutated through a shared `CudaPtxModule`.
unsafe impl Sync for CudaPtxModule {}

impl Drop for CudaPtxModule {
    fn drop(&mut self) {
        // Launches are asynchronous: the module must outlive the ones queued.
        if let Err(e) = self.stream.synchronize() {
            tracing::warn!(error = %describe(&e), "cannot wait for a PTX module's launches; leaking it");
            std::mem::forget(self.module.take());
        }
    }
}

impl CudaDevice {
    /// JIT-compiles `ptx` and finds entry `entry`; a rejection carries the JIT's log.
    pub(crate) fn load_ptx(&self, ptx: &str, entry: &str) -> Result<CudaPtxModule> {
        let failed = |message: String| RuntimeError::Compile {
            device: self.name(),
            kernel: entry.to_string(),
            message,
        };
        let module = LoadedModule::load(&self.ctx, ptx).map_err(failed)?;
        let function = module.function(entry).map_err(failed)?;
        Ok(CudaPtxModule {
            function,
            module: Some(module),
            stream: self.stream.clone(),
            name: entry.to_string(),
        })
    }

    /// The device address of `bytes` bytes from `offset` of `storage` (checked to lie
    /// inside it).
    pub(crate) fn address_of(&self, slice: super::super::Slice<'_>) -> Result<sys::CUdeviceptr> {
        let s = self.own_storage(slice.storage)?;
        if slice.offset.saturating_add(slice.bytes) > s.bytes {
            return Err(RuntimeError::Internal("a buffer range past its end".into()));
        }
        Ok(s.ptr + slice.offset as u64)
    }

    /// Queues `module` on `grid` blocks of `block` threads with `shared_bytes` of
    /// dynamic shared memory and `words` as its parameters: each a device address or
    /// a scalar's bits, zero-extended (the driver reads as many bytes of each as the
    /// entry declares, little-endian from its start).
    ///
    /// # Safety
    /// `words` must match the entry's parameter list in count and order, and
    /// the code must access only memory of this context that stays live until it
    /// finishes (the runtime hands it views of live buffers).
    pub(crate) unsafe fn launch_ptx(
        &self,
        module: &CudaPtxModule,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        words: &[u64],
    ) -> Result<()> {
        let failed = |message: String| RuntimeError::Launch {
            device: self.name(),
            kernel: module.name.clone(),
            message,
            status: 0,
        };
        let l = self.limits;
        if block.contains(&0)
            || block.iter().zip(l.max_block).any(|(&b, m)| b > m)
            || block.iter().map(|&b| b as u64).product::<u64>() > u64::from(l.max_threads_per_block)
        {
            return Err(failed(format!(
                "block {block:?} exceeds this device's {:?} ({} threads in all)",
                l.max_block, l.max_threads_per_block
            )));
        }
        if grid.iter().zip(l.max_grid).any(|(&g, m)| g > m) {
            return Err(failed(format!(
                "grid {grid:?} exceeds this device's grid limits {:?}",
                l.max_grid
            )));
        }
        if grid.contains(&0) {
            return Ok(());
        }
        let mut values = words.to_vec();
        let mut params: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| (v as *mut u64).cast::<c_void>())
            .collect();
        self.bind()?;
        // SAFETY: the caller's contract covers the parameter list and what the code
        // touches; `params` holds one pointer per parameter, each to a live `u64` of
        // `values` (the driver copies them before returning); the module is loaded and
        // kept by `module`; block, grid and the context are checked or current above.
        let launched = unsafe {
            result::launch_kernel(
                module.function,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        };
        launched.map_err(|e| failed(describe(&e)))
    }
}
