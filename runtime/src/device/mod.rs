//! Devices: where buffers live and kernels run. The CPU (Cranelift JIT) always;
//! wgpu (feature `wgpu`) and CUDA (feature `cuda`) when built in and present.
//!
//! [`Device`], [`Storage`] and [`Executable`] are enums with one variant per device
//! kind; each kind lives in its own module and the enums only dispatch. A storage or
//! executable is only ever used with the device that made it ([`Device::owns`] checks
//! tensors; executables never leave their runtime).

mod choice;
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "wgpu")]
mod wgpu;

use crate::cache::{CacheKey, DiskCache};
use crate::error::{Result, RuntimeError};
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::Kernel;
use kernelc_kernels::lower::TargetCaps;
use std::sync::atomic::{AtomicU64, Ordering};

pub use choice::{DeviceChoice, ShaderPath, WgpuOptions};
pub use cpu::{CpuDevice, CpuKernel, CpuStorage, CpuTier};
#[cfg(feature = "cuda")]
pub use cuda::{CudaDevice, CudaKernel, CudaPtxModule, CudaStorage};
#[cfg(feature = "wgpu")]
pub(crate) use wgpu::ShaderCode;
#[cfg(feature = "wgpu")]
pub use wgpu::{WgpuDevice, WgpuKernel, WgpuShaderModule, WgpuStorage};

/// Distinguishes device instances, so a tensor from another runtime is refused.
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_device_id() -> u64 {
    NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed)
}

/// A device a [`crate::Runtime`] runs on.
// One per runtime, never moved in a hot path: boxing the large variants buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Device {
    Cpu(CpuDevice),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuDevice),
    #[cfg(feature = "cuda")]
    Cuda(CudaDevice),
}

/// A buffer on a device.
pub enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

/// A compiled kernel for a device.
// Held behind an `Arc` by the kernel cache: the size of the enum is paid once.
#[allow(clippy::large_enum_variant)]
pub enum Executable {
    Cpu(CpuKernel),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuKernel),
    #[cfg(feature = "cuda")]
    Cuda(CudaKernel),
}

/// What one kernel parameter is bound to at launch.
#[derive(Clone, Copy)]
pub(crate) enum BindingRef<'a> {
    Buffer(Slice<'a>),
    /// Caller memory on the host, which only the CPU device's kernels address
    /// directly (`Runtime::run_host`); other devices refuse it.
    Host(HostRange<'a>),
    Scalar(kernelc_ir::Scalar),
}

impl<'a> BindingRef<'a> {
    /// `bytes` bytes of this buffer from byte `start` (a piece of a tensor too large
    /// for one kernel: `Binding::Part`); `None` for a scalar or a range outside it.
    pub fn part(&self, start: usize, bytes: usize) -> Option<BindingRef<'a>> {
        let end = start.checked_add(bytes)?;
        match *self {
            BindingRef::Buffer(s) if end <= s.bytes => Some(BindingRef::Buffer(Slice {
                storage: s.storage,
                offset: s.offset + start,
                bytes,
            })),
            BindingRef::Host(h) if end <= h.bytes => Some(BindingRef::Host(HostRange {
                // In bounds (checked above): a pointer into the same borrowed range.
                ptr: h.ptr.wrapping_add(start),
                bytes,
                writable: h.writable,
                borrow: std::marker::PhantomData,
            })),
            BindingRef::Buffer(_) | BindingRef::Host(_) | BindingRef::Scalar(_) => None,
        }
    }
}

/// `bytes` bytes of borrowed host memory from `ptr`; a kernel writes it only when
/// `writable` (it was borrowed mutably).
#[derive(Clone, Copy)]
pub(crate) struct HostRange<'a> {
    ptr: *mut u8,
    bytes: usize,
    writable: bool,
    borrow: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> HostRange<'a> {
    pub fn read_only(data: &'a [u8]) -> HostRange<'a> {
        HostRange {
            // Never written through: the CPU device binds it only to read-only
            // parameters (`CpuDevice::launch` checks).
            ptr: data.as_ptr().cast_mut(),
            bytes: data.len(),
            writable: false,
            borrow: std::marker::PhantomData,
        }
    }

    pub fn writable(data: &'a mut [u8]) -> HostRange<'a> {
        HostRange {
            ptr: data.as_mut_ptr(),
            bytes: data.len(),
            writable: true,
            borrow: std::marker::PhantomData,
        }
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }
}

/// `bytes` bytes of a storage from byte `offset`: what a buffer parameter sees (its
/// element 0 at `offset`). Always inside the storage (views are checked when made;
/// the devices check again before binding).
#[derive(Clone, Copy)]
pub(crate) struct Slice<'a> {
    pub storage: &'a Storage,
    pub offset: usize,
    pub bytes: usize,
}

impl<'a> Slice<'a> {
    /// The whole of `storage`.
    pub fn whole(storage: &'a Storage) -> Slice<'a> {
        Slice {
            storage,
            offset: 0,
            bytes: storage.len(),
        }
    }
}

/// The first run-time failure (a kernel's nonzero status) not yet reported, for a
/// device that learns of failures when launches finish: like GPU launches, it is
/// reported by the next synchronising call (a read, `Runtime::synchronize`), naming
/// the op. Shared by the device and its storages.
#[derive(Default)]
pub(crate) struct Faults(std::sync::Mutex<Option<RuntimeError>>);

impl Faults {
    /// Keeps `error` unless an earlier one waits to be reported.
    pub fn record(&self, error: RuntimeError) {
        let mut first = crate::lock(&self.0);
        if first.is_none() {
            *first = Some(error);
        }
    }

    /// The waiting failure, if any (reported once).
    pub fn take(&self) -> Result<()> {
        match crate::lock(&self.0).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// One kernel launch of an op: what to run, on which grid, with which arguments
/// (one per kernel parameter).
pub(crate) struct LaunchRef<'a> {
    pub exe: &'a Executable,
    pub grid: [u32; 3],
    pub args: Vec<BindingRef<'a>>,
}

/// Calls `$body` with `$d` bound to the inner device of whichever variant `$self` is.
macro_rules! each_device {
    ($self:expr, $d:ident => $body:expr) => {
        match $self {
            Device::Cpu($d) => $body,
            #[cfg(feature = "wgpu")]
            Device::Wgpu($d) => $body,
            #[cfg(feature = "cuda")]
            Device::Cuda($d) => $body,
        }
    };
}

/// As [`each_device!`], for [`Storage`].
macro_rules! each_storage {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            Storage::Cpu($s) => $body,
            #[cfg(feature = "wgpu")]
            Storage::Wgpu($s) => $body,
            #[cfg(feature = "cuda")]
            Storage::Cuda($s) => $body,
        }
    };
}

impl Device {
    /// The device `choice` names. `BestAvailable` tries CUDA, then a wgpu GPU (not a
    /// software rasteriser), then the CPU, which is always there.
    pub fn open(choice: DeviceChoice) -> Result<Device> {
        match choice {
            DeviceChoice::Cpu => Ok(Device::cpu()),
            DeviceChoice::Cuda { ordinal } => Device::open_cuda(ordinal),
            DeviceChoice::Wgpu(options) => Device::open_wgpu(options),
            DeviceChoice::BestAvailable => Ok(Device::best_available()),
        }
    }

    pub fn cpu() -> Device {
        Device::Cpu(CpuDevice::new())
    }

    /// The host CPU with its kernels compiled by `tier` (whatever
    /// `KERNELC_CPU_TIER` says).
    pub fn cpu_with_tier(tier: CpuTier) -> Device {
        Device::Cpu(CpuDevice::with_tier(Ok(tier)))
    }

    fn best_available() -> Device {
        if let Ok(d) = Device::open_cuda(0) {
            return d;
        }
        #[cfg(feature = "wgpu")]
        if let Ok(d) = WgpuDevice::open_hardware() {
            return Device::Wgpu(d);
        }
        Device::cpu()
    }

    #[allow(unused_variables)]
    fn open_cuda(ordinal: usize) -> Result<Device> {
        #[cfg(feature = "cuda")]
        return CudaDevice::open(ordinal).map(Device::Cuda);
        #[cfg(not(feature = "cuda"))]
        Err(RuntimeError::NoDevice(
            "CUDA: kernelc was built without its `cuda` feature".into(),
        ))
    }

    #[allow(unused_variables)]
    fn open_wgpu(options: WgpuOptions) -> Result<Device> {
        #[cfg(feature = "wgpu")]
        return WgpuDevice::open(options).map(Device::Wgpu);
        #[cfg(not(feature = "wgpu"))]
        Err(RuntimeError::NoDevice(
            "wgpu: kernelc was built without its `wgpu` feature".into(),
        ))
    }

    /// A human-readable name (`"cpu (x86_64, 2 threads)"`, `"NVIDIA H200 (Vulkan)"`).
    pub fn name(&self) -> String {
        each_device!(self, d => d.name())
    }

    /// The target name in cache keys (`cpu`, `wgsl`, `spirv`, `naga`, `ptx`).
    pub fn target_name(&self) -> &'static str {
        each_device!(self, d => d.target_name())
    }

    /// Target options in cache keys: whatever else compiled code depends on (the host
    /// ISA; the adapter and driver; the SM and PTX ISA).
    pub fn target_options(&self) -> &str {
        each_device!(self, d => d.target_options())
    }

    /// Math functions compiled through kernelc's IR implementations rather than the
    /// target's own (see `kernelc_ir::passes::math`).
    pub fn math_expansion(&self) -> MathExpansion {
        each_device!(self, d => d.math_expansion())
    }

    pub fn caps(&self) -> TargetCaps {
        each_device!(self, d => d.caps())
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<Storage> {
        match self {
            Device::Cpu(d) => d.alloc(bytes).map(Storage::Cpu),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(d) => d.alloc(bytes).map(Storage::Wgpu),
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => d.alloc(bytes).map(Storage::Cuda),
        }
    }

    /// The byte alignment of a buffer parameter's offset on this device: a view at
    /// another offset is staged through a copy (wgpu binds storage ranges only at
    /// multiples of the adapter's `min_storage_buffer_offset_alignment`).
    pub(crate) fn binding_alignment(&self) -> usize {
        each_device!(self, d => d.binding_alignment())
    }

    /// Whether one launch may not bind a buffer both read-only and writable (wgpu's
    /// usage rules): an input sharing a buffer with an output is then staged.
    pub(crate) fn exclusive_writable_bindings(&self) -> bool {
        each_device!(self, d => d.exclusive_writable_bindings())
    }

    /// The buffer pool's (reuses, fresh allocations) so far.
    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        each_device!(self, d => d.pool_stats())
    }

    pub(crate) fn id(&self) -> u64 {
        each_device!(self, d => d.id())
    }

    /// Whether kernels run on the host (and may address host memory directly).
    pub(crate) fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu(_))
    }

    pub(crate) fn owns(&self, storage: &Storage) -> bool {
        storage.device_id() == each_device!(self, d => d.id())
    }

    /// Compiles `kernel`, or rebuilds it from its disk artifact. Returns whether the
    /// disk artifact was used.
    pub(crate) fn compile(
        &self,
        kernel: &Kernel,
        key: &CacheKey,
        disk: &DiskCache,
    ) -> std::result::Result<(Executable, bool), String> {
        match self {
            Device::Cpu(d) => d
                .compile(kernel, key, disk)
                .map(|(e, hit)| (Executable::Cpu(e), hit)),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(d) => d
                .compile(kernel, key, disk)
                .map(|(e, hit)| (Executable::Wgpu(e), hit)),
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => d
                .compile(kernel, key, disk)
                .map(|(e, hit)| (Executable::Cuda(e), hit)),
        }
    }

    /// Queues the launches of one op in order, each seeing the writes of the ones
    /// before. An argument the device refuses is an error now; a kernel's run-time
    /// failure (its status word) is reported by the next synchronising call.
    pub(crate) fn execute(&self, launches: &[LaunchRef<'_>]) -> Result<()> {
        each_device!(self, d => d.execute(launches))
    }

    /// Waits for every queued launch and reports the first failed op since the last
    /// report.
    pub(crate) fn synchronize(&self) -> Result<()> {
        each_device!(self, d => d.synchronize())
    }
}

impl Storage {
    fn device_id(&self) -> u64 {
        each_storage!(self, s => s.device_id())
    }

    /// The allocation's device address, where the device has one that code outside
    /// kernelc can use (CUDA's device pointer).
    pub(crate) fn device_address(&self) -> Option<u64> {
        match self {
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Some(s.ptr),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The bytes a user may address (the allocation may be larger).
    pub(crate) fn len(&self) -> usize {
        each_storage!(self, s => s.len())
    }

    /// `len` bytes from byte `offset`, downloaded once every earlier launch is done.
    /// The range must lie inside the storage (callers check with [`Slice::new`]).
    pub(crate) fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.check_range(offset, len)?;
        each_storage!(self, s => s.read_range(offset, len))
    }

    /// Fills `out` with the bytes from `offset`, once every earlier launch is done
    /// (one copy into `out`).
    pub(crate) fn read_range_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range(offset, out.len())?;
        each_storage!(self, s => s.read_range_into(offset, out))
    }

    /// Overwrites the bytes from `offset` with `data`, after every earlier launch.
    pub(crate) fn write_range(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len())?;
        each_storage!(self, s => s.write_range(offset, data))
    }

    /// Sets `len` bytes from `offset` to `byte`.
    pub(crate) fn fill_range(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check_range(offset, len)?;
        each_storage!(self, s => s.fill_range(offset, len, byte))
    }

    /// Copies `len` bytes from `src` at `src_offset` to `dst` at `dst_offset` (both of
    /// one device; the ranges may overlap, with `memmove`'s result).
    pub(crate) fn copy_range(
        src: &Storage,
        src_offset: usize,
        dst: &Storage,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        src.check_range(src_offset, len)?;
        dst.check_range(dst_offset, len)?;
        match (src, dst) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                CpuStorage::copy_range(a, src_offset, b, dst_offset, len)
            }
            #[cfg(feature = "wgpu")]
            (Storage::Wgpu(a), Storage::Wgpu(b)) => {
                WgpuStorage::copy_range(a, src_offset, b, dst_offset, len)
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(a), Storage::Cuda(b)) => {
                CudaStorage::copy_range(a, src_offset, b, dst_offset, len)
            }
            #[allow(unreachable_patterns)]
            _ => Err(foreign(&dst.device_name(), "buffer")),
        }
    }

    /// A range past the storage's end is a bug of the caller inside the runtime (the
    /// public API checks views and copies first): reported, never performed.
    fn check_range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(RuntimeError::Internal(format!(
                "byte range {offset}+{len} past a {}-byte buffer",
                self.len()
            ))),
        }
    }

    pub(crate) fn device_name(&self) -> String {
        each_storage!(self, s => s.device_name())
    }

    /// The buffer's bytes, downloaded.
    pub(crate) fn read_bytes(&self) -> Result<Vec<u8>> {
        self.read_range(0, self.len())
    }

    /// Overwrites the start of the buffer (only while its tensor is being created).
    pub(crate) fn write_bytes(&self, data: &[u8]) -> Result<()> {
        self.write_range(0, &data[..data.len().min(self.len())])
    }

    pub(crate) fn fill_zero(&self) -> Result<()> {
        self.fill(0)
    }

    /// Sets every byte (only while its tensor is being created).
    pub(crate) fn fill(&self, byte: u8) -> Result<()> {
        self.fill_range(0, self.len(), byte)
    }
}

/// The error for an executable or storage handed to a device of another kind (a bug
/// in the runtime: they never leave the runtime that made them).
pub(crate) fn foreign(device: &str, what: &str) -> RuntimeError {
    RuntimeError::WrongDevice {
        tensor_device: format!("another device's {what}"),
        runtime_device: device.to_string(),
    }
}
