//! Devices: where buffers live and kernels run. Today the CPU (Cranelift JIT); wgpu and
//! CUDA join as variants of the same enums.

use crate::cache::{CacheKey, DiskCache};
use crate::error::{Result, RuntimeError};
use crate::pool::{Pool, Word};
use crate::runtime::{BindingRef, DeviceChoice};
use kernelc_codegen::cpu::{self, CpuKernel, RawArg};
use kernelc_ir::Kernel;
use kernelc_kernels::lower::TargetCaps;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Distinguishes device instances, so a tensor from another runtime is refused.
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A device a [`crate::Runtime`] runs on.
pub enum Device {
    Cpu(CpuDevice),
}

/// A buffer on a device.
pub enum Storage {
    Cpu(CpuStorage),
}

/// A compiled kernel for a device.
pub enum Executable {
    Cpu(CpuKernel),
}

impl Device {
    /// The device `choice` names; the CPU is always there.
    pub fn open(choice: DeviceChoice) -> Result<Device> {
        match choice {
            DeviceChoice::Cpu | DeviceChoice::BestAvailable => Ok(Device::cpu()),
        }
    }

    pub fn cpu() -> Device {
        Device::Cpu(CpuDevice::new())
    }

    pub fn name(&self) -> String {
        match self {
            Device::Cpu(d) => d.name(),
        }
    }

    /// The target name in cache keys.
    pub fn target_name(&self) -> &'static str {
        match self {
            Device::Cpu(_) => "cpu",
        }
    }

    /// Target options in cache keys (the host ISA, for the CPU).
    pub fn target_options(&self) -> &str {
        match self {
            Device::Cpu(d) => &d.isa,
        }
    }

    /// Math functions compiled through kernelc's IR implementations (f32; 1 ulp)
    /// rather than the target's own. On the CPU that replaces a scalar f64 library
    /// call per lane with straight-line SIMD code.
    pub fn math_expansion(&self) -> kernelc_ir::passes::MathExpansion {
        match self {
            Device::Cpu(_) => kernelc_ir::passes::MathExpansion::all_transcendental(),
        }
    }

    pub fn caps(&self) -> TargetCaps {
        match self {
            Device::Cpu(_) => TargetCaps::cpu(),
        }
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<Storage> {
        match self {
            Device::Cpu(d) => d.alloc(bytes).map(Storage::Cpu),
        }
    }

    /// The buffer pool's (reuses, fresh allocations) so far.
    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        match self {
            Device::Cpu(d) => d.pool.stats(),
        }
    }

    pub(crate) fn owns(&self, storage: &Storage) -> bool {
        match (self, storage) {
            (Device::Cpu(d), Storage::Cpu(s)) => s.device_id == d.id,
        }
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
            Device::Cpu(_) => {
                let (exe, from_disk) = cpu_compile(kernel, key, disk)?;
                Ok((Executable::Cpu(exe), from_disk))
            }
        }
    }

    pub(crate) fn launch(
        &self,
        exe: &Executable,
        grid: [u32; 3],
        args: &[BindingRef<'_>],
    ) -> Result<()> {
        match (self, exe) {
            (Device::Cpu(d), Executable::Cpu(k)) => d.launch(k, grid, args),
        }
    }
}

/// Compiles `kernel` for the CPU through the disk cache. Compiling validated IR with
/// Cranelift is the whole cost on the CPU, so the disk level holds Cranelift's own
/// compiled-function cache entries (see `kernelc_codegen::cpu::compile_cached`), one
/// file per function: `<key>.clif-<16 hex digits of the function key>`.
///
/// The kernel counts as rebuilt from disk only when every function Cranelift asked
/// the store for came from it and was used: a function whose artifact was missing,
/// damaged, or loaded but rejected by Cranelift (which then recompiles it and stores
/// the result) makes the whole kernel a compile.
fn cpu_compile(
    kernel: &Kernel,
    key: &CacheKey,
    disk: &DiskCache,
) -> std::result::Result<(CpuKernel, bool), String> {
    let mut store = DiskStore {
        disk,
        key,
        functions: Vec::new(),
    };
    let exe = cpu::compile_cached(kernel, &mut store).map_err(|e| e.to_string())?;
    Ok((exe, store.all_from_disk()))
}

/// Cranelift's compiled-code cache, kept in the disk cache under the kernel's key.
struct DiskStore<'a> {
    disk: &'a DiskCache,
    key: &'a CacheKey,
    /// Each function key asked for, and whether its code came from disk (a load that
    /// returned bytes and was not followed by a store of the same key).
    functions: Vec<(Vec<u8>, bool)>,
}

impl DiskStore<'_> {
    fn mark(&mut self, function_key: &[u8], from_disk: bool) {
        match self.functions.iter_mut().find(|(k, _)| k == function_key) {
            Some(entry) => entry.1 = from_disk,
            None => self.functions.push((function_key.to_vec(), from_disk)),
        }
    }

    fn all_from_disk(&self) -> bool {
        !self.functions.is_empty() && self.functions.iter().all(|(_, hit)| *hit)
    }
}

impl cpu::CodeStore for DiskStore<'_> {
    fn load(&mut self, function_key: &[u8]) -> Option<Vec<u8>> {
        let bytes = self.disk.load(self.key, &entry_kind(function_key));
        self.mark(function_key, bytes.is_some());
        bytes
    }

    fn store(&mut self, function_key: &[u8], code: Vec<u8>) {
        // Cranelift stores only what it compiled: a loaded value it could not use
        // (e.g. from another Cranelift version) is not a disk hit.
        self.mark(function_key, false);
        if let Err(e) = self.disk.store(self.key, &entry_kind(function_key), &code) {
            tracing::warn!(error = %e, "cannot write the kernel cache");
        }
    }
}

/// A file kind per Cranelift function key (short, filesystem-safe).
fn entry_kind(function_key: &[u8]) -> String {
    let h = blake3::hash(function_key);
    format!("clif-{}", &h.to_hex()[..16])
}

/// The host CPU.
pub struct CpuDevice {
    id: u64,
    /// The host ISA and its extensions, as compiled code depends on them (asked once:
    /// building the ISA description is not free).
    isa: String,
    pool: Arc<Pool>,
    threads: usize,
}

impl CpuDevice {
    fn new() -> CpuDevice {
        CpuDevice {
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            isa: cpu::host_isa_description(),
            pool: Arc::new(Pool::default()),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    fn name(&self) -> String {
        format!("cpu ({}, {} threads)", std::env::consts::ARCH, self.threads)
    }

    fn alloc(&self, bytes: usize) -> Result<CpuStorage> {
        let words = self.pool.take(bytes).ok_or(RuntimeError::OutOfMemory {
            device: self.name(),
            bytes: bytes as u64,
        })?;
        Ok(CpuStorage {
            words: UnsafeCell::new(words),
            bytes,
            pool: self.pool.clone(),
            device_id: self.id,
        })
    }

    fn launch(&self, kernel: &CpuKernel, grid: [u32; 3], args: &[BindingRef<'_>]) -> Result<()> {
        let raw: Vec<RawArg> = args
            .iter()
            .map(|a| match a {
                BindingRef::Buffer(storage) => match storage.as_ref() {
                    Storage::Cpu(s) => RawArg::Buffer {
                        ptr: s.ptr(),
                        bytes: s.bytes,
                    },
                },
                BindingRef::Scalar(v) => RawArg::Scalar(*v),
            })
            .collect();
        // SAFETY: every buffer pointer comes from a live `CpuStorage` borrowed for this
        // call, valid for `bytes` bytes and 16-byte aligned. Kernels write only their
        // outputs and temporaries, which `Runtime::run` allocated fresh for this op, so
        // no other reference observes those writes; inputs are only read, and the IR
        // forbids two invocations writing one element, so the threads never race.
        unsafe { kernel.launch_raw(grid, &raw) }.map_err(|e| RuntimeError::Launch {
            device: self.name(),
            kernel: kernel.name().to_string(),
            message: e.to_string(),
        })
    }
}

/// Host memory of a CPU tensor (16-byte aligned), returned to the pool on drop.
pub struct CpuStorage {
    words: UnsafeCell<Vec<Word>>,
    bytes: usize,
    pool: Arc<Pool>,
    device_id: u64,
}

// SAFETY: the buffer is written only (a) through `write_bytes`/`fill_zero` while the
// tensor that owns it is being created, before it is shared, and (b) by kernel launches
// on freshly allocated outputs (see `CpuDevice::launch`). All other access reads.
unsafe impl Sync for CpuStorage {}

impl CpuStorage {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: only the pointer is taken; see the `Sync` impl for who writes.
        unsafe { (*self.words.get()).as_mut_ptr().cast::<u8>() }
    }

    fn bytes_ref(&self) -> &[u8] {
        // SAFETY: the allocation holds at least `bytes` bytes (`Pool::take`); reads
        // happen when no launch writes this buffer (see the `Sync` impl).
        unsafe { std::slice::from_raw_parts(self.ptr(), self.bytes) }
    }
}

impl Drop for CpuStorage {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(self.words.get_mut()));
    }
}

impl Storage {
    pub(crate) fn device_name(&self) -> String {
        match self {
            Storage::Cpu(_) => "cpu".to_string(),
        }
    }

    /// The buffer's bytes, downloaded.
    pub(crate) fn read_bytes(&self) -> Result<Vec<u8>> {
        match self {
            Storage::Cpu(s) => Ok(s.bytes_ref().to_vec()),
        }
    }

    /// Overwrites the buffer (only while its tensor is being created).
    pub(crate) fn write_bytes(&self, data: &[u8]) -> Result<()> {
        match self {
            Storage::Cpu(s) => {
                let n = data.len().min(s.bytes);
                // SAFETY: called only on a storage no one else holds yet (fresh
                // allocation inside `Runtime::tensor*`); `n` is within the allocation.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), s.ptr(), n) };
                Ok(())
            }
        }
    }

    pub(crate) fn fill_zero(&self) {
        self.fill(0);
    }

    /// Sets every byte (only while its tensor is being created).
    pub(crate) fn fill(&self, byte: u8) {
        match self {
            Storage::Cpu(s) => {
                // SAFETY: as `write_bytes`: a fresh allocation of at least `bytes` bytes.
                unsafe { std::ptr::write_bytes(s.ptr(), byte, s.bytes) };
            }
        }
    }
}
