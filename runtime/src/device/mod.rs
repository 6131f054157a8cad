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
use std::sync::Arc;

pub use choice::{DeviceChoice, ShaderPath, WgpuOptions};
pub use cpu::{CpuDevice, CpuKernel, CpuStorage};
#[cfg(feature = "cuda")]
pub use cuda::{CudaDevice, CudaKernel, CudaStorage};
#[cfg(feature = "wgpu")]
pub use wgpu::{WgpuDevice, WgpuKernel, WgpuStorage};

/// Distinguishes device instances, so a tensor from another runtime is refused.
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_device_id() -> u64 {
    NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed)
}

/// A device a [`crate::Runtime`] runs on.
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
pub enum Executable {
    Cpu(CpuKernel),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuKernel),
    #[cfg(feature = "cuda")]
    Cuda(CudaKernel),
}

/// What one kernel parameter is bound to at launch.
pub(crate) enum BindingRef<'a> {
    Buffer(&'a Arc<Storage>),
    Scalar(kernelc_ir::Scalar),
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

    /// The buffer pool's (reuses, fresh allocations) so far.
    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        each_device!(self, d => d.pool_stats())
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

    /// Runs the launches of one op in order, each seeing the writes of the ones
    /// before, and returns once they are done (or the first error).
    pub(crate) fn execute(&self, launches: &[LaunchRef<'_>]) -> Result<()> {
        each_device!(self, d => d.execute(launches))
    }
}

impl Storage {
    fn device_id(&self) -> u64 {
        each_storage!(self, s => s.device_id())
    }

    pub(crate) fn device_name(&self) -> String {
        each_storage!(self, s => s.device_name())
    }

    /// The buffer's bytes, downloaded.
    pub(crate) fn read_bytes(&self) -> Result<Vec<u8>> {
        each_storage!(self, s => s.read_bytes())
    }

    /// Overwrites the start of the buffer (only while its tensor is being created).
    pub(crate) fn write_bytes(&self, data: &[u8]) -> Result<()> {
        each_storage!(self, s => s.write_bytes(data))
    }

    pub(crate) fn fill_zero(&self) -> Result<()> {
        self.fill(0)
    }

    /// Sets every byte (only while its tensor is being created).
    pub(crate) fn fill(&self, byte: u8) -> Result<()> {
        each_storage!(self, s => s.fill(byte))
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
