//! ferrum's `DeviceMemoryManager` ([`FerrumMemory`]): byte allocations through the
//! runtime's pointer registry, a handle being the allocation's address (on CUDA, its
//! device pointer).

use super::{error, Context};
use crate::lock;
use async_trait::async_trait;
use ferrum_interfaces::memory::{
    DefragmentationStats, MemoryHandleInfo, MemoryInfo, MemoryPoolConfig, MemoryPressure,
    MemoryTransfer, MemoryType,
};
use ferrum_interfaces::{DeviceMemoryManager, MemoryHandle, StreamHandle};
use ferrum_types::{Device, FerrumError, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Registry addresses (and CUDA device pointers) are aligned at least this far.
const NATURAL_ALIGNMENT: usize = 256;

/// One allocation: the registry address it starts at (the handle may lie further in,
/// for a larger alignment) and what the caller asked for.
struct Allocation {
    start: u64,
    size: usize,
    alignment: usize,
    at: Instant,
}

type PressureCallback = Box<dyn Fn(MemoryPressure) + Send + Sync>;

#[derive(Default)]
struct State {
    allocations: HashMap<u64, Allocation>,
    used: u64,
    /// `configure_pool`'s bound on the bytes allocated at once (`None`: unbounded).
    max: Option<u64>,
    /// `configure_pool`'s alignment for `allocate`.
    alignment: Option<usize>,
    callback: Option<PressureCallback>,
    pressure: Option<MemoryPressure>,
}

/// ferrum's `DeviceMemoryManager`.
pub struct FerrumMemory {
    ctx: Arc<Context>,
    state: Mutex<State>,
}

impl FerrumMemory {
    pub(super) fn new(ctx: Arc<Context>) -> FerrumMemory {
        FerrumMemory {
            ctx,
            state: Mutex::new(State::default()),
        }
    }

    /// Bytes allocated through this manager and not yet deallocated.
    pub fn used_bytes(&self) -> u64 {
        lock(&self.state).used
    }

    fn check_device(&self, device: &Device, what: &str) -> Result<()> {
        if *device != self.ctx.device {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: this memory manager serves {}, not {device}",
                self.ctx.device
            )));
        }
        Ok(())
    }

    fn info(&self, state: &State) -> MemoryInfo {
        let total = state.max.unwrap_or(0);
        MemoryInfo {
            total_bytes: total,
            used_bytes: state.used,
            free_bytes: total.saturating_sub(state.used),
            reserved_bytes: 0,
            active_allocations: state.allocations.len(),
            fragmentation_ratio: 0.0,
            bandwidth_gbps: None,
        }
    }

    /// Calls the pressure callback when the level changed (with a bounded pool only:
    /// without a total there is no level).
    fn report_pressure(&self, state: &mut State) {
        if state.max.is_none() {
            return;
        }
        let level = self.info(state).pressure_level();
        if state.pressure != Some(level) {
            state.pressure = Some(level);
            if let Some(callback) = &state.callback {
                callback(level);
            }
        }
    }

    fn allocate_with(&self, size: usize, alignment: usize) -> Result<MemoryHandle> {
        if !alignment.is_power_of_two() {
            return Err(FerrumError::invalid_parameter(format!(
                "allocate_aligned: alignment {alignment} is not a power of two"
            )));
        }
        let mut state = lock(&self.state);
        if let Some(max) = state.max {
            if state.used.saturating_add(size as u64) > max {
                return Err(FerrumError::resource_exhausted(format!(
                    "allocate: {size} bytes past the pool's {max} ({} in use)",
                    state.used
                )));
            }
        }
        // A larger alignment: room for it, the handle inside.
        let padding = alignment.saturating_sub(NATURAL_ALIGNMENT);
        let bytes = size.checked_add(padding).ok_or_else(|| {
            FerrumError::invalid_parameter(format!("allocate: {size} bytes overflow"))
        })?;
        let start = self.ctx.settle(self.ctx.rt.malloc(bytes))?;
        let handle = start.next_multiple_of(alignment as u64);
        state.allocations.insert(
            handle,
            Allocation {
                start,
                size,
                alignment,
                at: Instant::now(),
            },
        );
        state.used += size as u64;
        self.report_pressure(&mut state);
        Ok(MemoryHandle(handle))
    }

    /// The address of `bytes` bytes from `offset` of `handle`'s allocation, checked
    /// to lie inside what was allocated.
    fn address(
        &self,
        handle: MemoryHandle,
        offset: usize,
        bytes: usize,
        what: &str,
    ) -> Result<u64> {
        let state = lock(&self.state);
        let a = state.allocations.get(&handle.0).ok_or_else(|| {
            FerrumError::invalid_parameter(format!(
                "{what}: {:#x} is not a live allocation of this memory manager",
                handle.0
            ))
        })?;
        match offset.checked_add(bytes) {
            Some(end) if end <= a.size => Ok(handle.0 + offset as u64),
            _ => Err(FerrumError::invalid_parameter(format!(
                "{what}: {bytes} bytes from offset {offset} pass the {} bytes of {:#x}",
                a.size, handle.0
            ))),
        }
    }

    fn copy_bytes(&self, t: &MemoryTransfer) -> Result<()> {
        let src = self.address(t.src, t.src_offset, t.size, "copy (source)")?;
        let dst = self.address(t.dst, t.dst_offset, t.size, "copy (destination)")?;
        let rt = &self.ctx.rt;
        let result = (|| {
            let (from, at) = rt.resolve(src, t.size)?;
            let (to, to_at) = rt.resolve(dst, t.size)?;
            rt.copy_buffer(&from, at, &to, to_at, t.size)
        })();
        self.ctx.settle(result)
    }
}

#[async_trait]
impl DeviceMemoryManager for FerrumMemory {
    /// Zeroed bytes, aligned to 256 (or `configure_pool`'s alignment).
    async fn allocate(&self, size: usize, device: &Device) -> Result<MemoryHandle> {
        self.check_device(device, "allocate")?;
        let alignment = lock(&self.state).alignment.unwrap_or(NATURAL_ALIGNMENT);
        self.allocate_with(size, alignment)
    }

    async fn allocate_aligned(
        &self,
        size: usize,
        alignment: usize,
        device: &Device,
    ) -> Result<MemoryHandle> {
        self.check_device(device, "allocate_aligned")?;
        self.allocate_with(size, alignment.max(1))
    }

    /// Frees the allocation (once no tensor or view of it is left); an unknown or
    /// already freed handle is an error and frees nothing.
    async fn deallocate(&self, handle: MemoryHandle) -> Result<()> {
        let mut state = lock(&self.state);
        let a = state.allocations.remove(&handle.0).ok_or_else(|| {
            FerrumError::invalid_parameter(format!(
                "deallocate: {:#x} is not a live allocation (never allocated here, or freed)",
                handle.0
            ))
        })?;
        state.used -= a.size as u64;
        self.report_pressure(&mut state);
        drop(state);
        self.ctx.settle(self.ctx.rt.free(a.start))
    }

    async fn copy(
        &self,
        src: MemoryHandle,
        dst: MemoryHandle,
        size: usize,
        src_offset: usize,
        dst_offset: usize,
    ) -> Result<()> {
        self.copy_bytes(&MemoryTransfer {
            src,
            dst,
            size,
            src_offset,
            dst_offset,
        })
    }

    /// Queued in order with every op of the device (one queue: `stream` is not
    /// needed to order it).
    async fn copy_async(
        &self,
        transfer: MemoryTransfer,
        _stream: Option<StreamHandle>,
    ) -> Result<()> {
        self.copy_bytes(&transfer)
    }

    /// This manager's allocations; `total_bytes` is the configured pool bound (0:
    /// none configured, the device's own total is not known here).
    async fn memory_info(&self, device: &Device) -> Result<MemoryInfo> {
        self.check_device(device, "memory_info")?;
        Ok(self.info(&lock(&self.state)))
    }

    fn handle_info(&self, handle: MemoryHandle) -> Option<MemoryHandleInfo> {
        let state = lock(&self.state);
        let a = state.allocations.get(&handle.0)?;
        Some(MemoryHandleInfo {
            handle,
            size: a.size,
            device: self.ctx.device.clone(),
            alignment: a.alignment,
            allocated_at: a.at,
            is_mapped: false,
            memory_type: MemoryType::General,
        })
    }

    /// Bounds the bytes allocated at once (`max_size`) and sets `allocate`'s
    /// alignment; the device's own pool grows as needed, so the rest is advice.
    async fn configure_pool(&self, device: &Device, config: MemoryPoolConfig) -> Result<()> {
        self.check_device(device, "configure_pool")?;
        if !config.alignment.is_power_of_two() {
            return Err(FerrumError::invalid_parameter(format!(
                "configure_pool: alignment {} is not a power of two",
                config.alignment
            )));
        }
        let mut state = lock(&self.state);
        state.max = config.max_size;
        state.alignment = Some(config.alignment.max(NATURAL_ALIGNMENT));
        state.pressure = None;
        self.report_pressure(&mut state);
        Ok(())
    }

    /// Every allocation is its own buffer: nothing to move.
    async fn defragment(&self, device: &Device) -> Result<DefragmentationStats> {
        self.check_device(device, "defragment")?;
        Ok(DefragmentationStats {
            memory_freed: 0,
            blocks_moved: 0,
            time_taken_ms: 0,
            fragmentation_before: 0.0,
            fragmentation_after: 0.0,
        })
    }

    /// Called when the pressure level of a bounded pool changes.
    fn set_pressure_callback(&self, callback: Box<dyn Fn(MemoryPressure) + Send + Sync>) {
        let mut state = lock(&self.state);
        state.callback = Some(callback);
        state.pressure = None;
        self.report_pressure(&mut state);
    }
}

impl Drop for FerrumMemory {
    /// Allocations still live go back to the registry (their memory frees with the
    /// last view of it).
    fn drop(&mut self) {
        let state = lock(&self.state);
        for a in state.allocations.values() {
            if let Err(e) = self.ctx.rt.free(a.start) {
                tracing::warn!(
                    "ferrum memory manager: freeing {:#x}: {}",
                    a.start,
                    error(e)
                );
            }
        }
    }
}
