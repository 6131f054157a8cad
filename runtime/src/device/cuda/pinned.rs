//! A page-locked (pinned) host buffer that every transfer between the host and a
//! CUDA device goes through: the caller's bytes are copied into it once and the DMA
//! engine moves them from there (from pageable memory the driver would stage them
//! through its own pinned buffer, a second host copy, and copy more slowly). Transfers
//! larger than the buffer go in chunks. Allocated on first use; if the driver refuses
//! pinned memory, transfers fall back to pageable copies.

use super::describe;
use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Bytes of the staging buffer (and of a transfer's chunks).
const STAGE_BYTES: usize = 8 << 20;

/// One pinned host allocation.
struct Pinned {
    ptr: *mut u8,
    ctx: Arc<CudaContext>,
}

// SAFETY: the pointer is a page-locked host allocation owned by this value; it is only
// touched under the `Stage` mutex.
unsafe impl Send for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: `ptr` came from `malloc_host` and is freed once, here; no copy uses
        // it (every transfer synchronises before releasing the stage).
        if let Err(e) = unsafe { result::free_host(self.ptr.cast::<c_void>()) } {
            tracing::warn!(error = %describe(&e), "cannot free pinned host memory");
        }
    }
}

/// The device's staging buffer, shared by its storages.
pub(crate) struct Stage {
    ctx: Arc<CudaContext>,
    /// `None` until first used; `Some(None)` when pinned memory was refused.
    pinned: Mutex<Option<Option<Pinned>>>,
}

impl Stage {
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Stage {
        Stage {
            ctx,
            pinned: Mutex::new(None),
        }
    }

    /// Copies `data` to device address `dst` on `stream` and waits for it. The
    /// context must be current; `dst..dst + data.len()` inside a live allocation.
    pub(crate) fn upload(
        &self,
        dst: sys::CUdeviceptr,
        data: &[u8],
        stream: &CudaStream,
    ) -> Result<(), DriverError> {
        let mut guard = crate::lock(&self.pinned);
        let Some(pinned) = self.pinned_buffer(&mut guard) else {
            // SAFETY: as the caller's contract; `data` stays borrowed until the stream
            // is synchronised below.
            unsafe { result::memcpy_htod_async(dst, data, stream.cu_stream()) }?;
            return stream.synchronize();
        };
        for (i, chunk) in data.chunks(STAGE_BYTES).enumerate() {
            // SAFETY: `pinned.ptr` holds `STAGE_BYTES` bytes, at least `chunk.len()`;
            // the previous chunk's copy finished (synchronised) before this overwrites
            // the buffer, and the mutex keeps other transfers out.
            let staged = unsafe { std::slice::from_raw_parts_mut(pinned.ptr, chunk.len()) };
            staged.copy_from_slice(chunk);
            let at = dst + (i * STAGE_BYTES) as u64;
            // SAFETY: `at` starts a range of `chunk.len()` bytes inside the caller's
            // allocation; `staged` is pinned memory, untouched until the sync below.
            unsafe { result::memcpy_htod_async(at, &*staged, stream.cu_stream()) }?;
            stream.synchronize()?;
        }
        Ok(())
    }

    /// Fills `out` from device address `src` on `stream`, after every earlier piece of
    /// work on it. The context must be current; the range inside a live allocation.
    pub(crate) fn download(
        &self,
        src: sys::CUdeviceptr,
        out: &mut [u8],
        stream: &CudaStream,
    ) -> Result<(), DriverError> {
        let mut guard = crate::lock(&self.pinned);
        let Some(pinned) = self.pinned_buffer(&mut guard) else {
            // SAFETY: as the caller's contract; `out` is untouched until the sync.
            unsafe { result::memcpy_dtoh_async(out, src, stream.cu_stream()) }?;
            return stream.synchronize();
        };
        for (i, chunk) in out.chunks_mut(STAGE_BYTES).enumerate() {
            // SAFETY: as in `upload`: the buffer is large enough and ours alone.
            let staged = unsafe { std::slice::from_raw_parts_mut(pinned.ptr, chunk.len()) };
            let at = src + (i * STAGE_BYTES) as u64;
            // SAFETY: `at` starts `chunk.len()` readable bytes of the allocation; the
            // copy into pinned memory completes at the sync, before `staged` is read.
            unsafe { result::memcpy_dtoh_async(&mut *staged, at, stream.cu_stream()) }?;
            stream.synchronize()?;
            chunk.copy_from_slice(staged);
        }
        Ok(())
    }

    /// The pinned buffer, allocated on first use (`None` if the driver refused it).
    fn pinned_buffer<'g>(&self, guard: &'g mut Option<Option<Pinned>>) -> Option<&'g Pinned> {
        guard
            .get_or_insert_with(|| {
                // SAFETY: a plain host allocation of `STAGE_BYTES`; the context is
                // current (callers bind it).
                match unsafe { result::malloc_host(STAGE_BYTES, 0) } {
                    Ok(ptr) => Some(Pinned {
                        ptr: ptr.cast::<u8>(),
                        ctx: self.ctx.clone(),
                    }),
                    Err(e) => {
                        tracing::warn!(error = %describe(&e), "no pinned host memory; transfers use pageable copies");
                        None
                    }
                }
            })
            .as_ref()
    }
}
