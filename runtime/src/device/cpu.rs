//! The host CPU: kernels JIT-compiled by Cranelift (or, on the LLVM tier, by LLVM),
//! run on host threads.

use super::BindingRef;
use super::{next_device_id, Faults, LaunchRef, Storage};
use crate::cache::{CacheKey, DiskCache};
use crate::error::{Result, RuntimeError};
use crate::pool::Pool;
pub use kernelc_codegen::cpu::CpuKernel;
use kernelc_codegen::cpu::{self, RawArg};
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{Kernel, Param};
use kernelc_kernels::lower::TargetCaps;
use std::cell::UnsafeCell;
use std::sync::Arc;

/// Host memory is handed out in 16-byte words: aligned for every element type and
/// for 128-bit vector loads.
type Word = u128;

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

/// Compiles `kernel` with LLVM through the disk cache (its object file, kind
/// [`LLVM_OBJECT`]), or with Cranelift when the LLVM tier does not take it (a
/// workgroup of several invocations). A cached object LLVM cannot load is compiled
/// again and replaced.
#[cfg(feature = "llvm")]
fn llvm_compile(
    kernel: &Kernel,
    key: &CacheKey,
    disk: &DiskCache,
) -> std::result::Result<(CpuKernel, bool), String> {
    if let Some(object) = disk.load(key, LLVM_OBJECT) {
        match cpu::llvm::load_object(kernel, &object) {
            Ok(exe) => return Ok((exe, true)),
            Err(e) => tracing::warn!(error = %e, "cached LLVM object unusable; recompiling"),
        }
    }
    let object = match cpu::llvm::compile_object(kernel) {
        Ok(object) => object,
        Err(kernelc_codegen::CodegenError::Unsupported { .. }) => {
            return cpu_compile(kernel, key, disk)
        }
        Err(e) => return Err(e.to_string()),
    };
    let exe = cpu::llvm::load_object(kernel, &object).map_err(|e| e.to_string())?;
    if let Err(e) = disk.store(key, LLVM_OBJECT, &object) {
        tracing::warn!(error = %e, "cannot write the kernel cache");
    }
    Ok((exe, false))
}

/// The disk cache's file kind of the LLVM tier's object files.
#[cfg(feature = "llvm")]
const LLVM_OBJECT: &str = "o";

#[cfg(not(feature = "llvm"))]
fn llvm_compile(
    _: &Kernel,
    _: &CacheKey,
    _: &DiskCache,
) -> std::result::Result<(CpuKernel, bool), String> {
    Err(
        "the LLVM CPU tier (KERNELC_CPU_TIER=llvm) needs kernelc built with the `llvm` feature"
            .into(),
    )
}

#[cfg(feature = "llvm")]
fn llvm_description() -> String {
    cpu::llvm::host_description()
}

#[cfg(not(feature = "llvm"))]
fn llvm_description() -> String {
    "llvm (not built)".into()
}

#[cfg(feature = "llvm")]
fn llvm_expansion() -> MathExpansion {
    cpu::llvm::required_expansion()
}

/// What the tier would need, were it built (its compiles fail without it).
#[cfg(not(feature = "llvm"))]
fn llvm_expansion() -> MathExpansion {
    MathExpansion::all_transcendental_with_f64().with_float_rem(true)
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

/// Which compiler makes the CPU device's kernels (`KERNELC_CPU_TIER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuTier {
    /// Cranelift: compiles in about a millisecond; 128-bit vectors (the default).
    #[default]
    Cranelift,
    /// LLVM (`kernelc_codegen::cpu::llvm`): the host's full vector width and LLVM's
    /// optimisations, about 10 ms a kernel. Every kernel it takes (those of one
    /// invocation per workgroup: every op's); others stay with Cranelift. Its object
    /// files go into the disk cache. Needs the `llvm` feature.
    Llvm,
}

impl CpuTier {
    /// The tier `KERNELC_CPU_TIER` names (`cranelift` or `llvm`; unset: Cranelift),
    /// or the error saying what it holds instead.
    pub fn from_env() -> std::result::Result<CpuTier, String> {
        let Some(value) = std::env::var_os("KERNELC_CPU_TIER") else {
            return Ok(CpuTier::default());
        };
        match value.to_str() {
            Some("cranelift") => Ok(CpuTier::Cranelift),
            Some("llvm") => Ok(CpuTier::Llvm),
            _ => Err(format!(
                "KERNELC_CPU_TIER={value:?}: expected `cranelift` or `llvm`"
            )),
        }
    }
}

/// The host CPU.
pub struct CpuDevice {
    id: u64,
    /// The compiler of its kernels, or why the environment configures none
    /// (`KERNELC_CPU_TIER` naming no tier, `KERNELC_THREADS` no count: reported by
    /// every compile).
    tier: std::result::Result<CpuTier, String>,
    /// The host ISA and its extensions, and the tier's compiler, as compiled code
    /// depends on them (asked once: building the description is not free).
    isa: String,
    pool: Arc<Pool<Vec<Word>>>,
    threads: usize,
    faults: Arc<Faults>,
}

impl CpuDevice {
    pub(crate) fn new() -> CpuDevice {
        CpuDevice::with_tier(CpuTier::from_env())
    }

    pub(crate) fn with_tier(tier: std::result::Result<CpuTier, String>) -> CpuDevice {
        // A `KERNELC_THREADS` that names no count is reported as the tier's error is,
        // whichever way the tier was chosen.
        let tier = tier.and_then(|t| cpu::threads_from_env().map(|_| t));
        let isa = match tier {
            Ok(CpuTier::Llvm) => {
                format!("{} | {}", cpu::host_isa_description(), llvm_description())
            }
            Ok(CpuTier::Cranelift) | Err(_) => cpu::host_isa_description(),
        };
        CpuDevice {
            id: next_device_id(),
            tier,
            isa,
            pool: Arc::new(Pool::default()),
            threads: cpu::launch_threads(),
            faults: Arc::new(Faults::default()),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn name(&self) -> String {
        let tier = match self.tier {
            Ok(CpuTier::Llvm) => ", llvm",
            Ok(CpuTier::Cranelift) | Err(_) => "",
        };
        let plural = if self.threads == 1 { "" } else { "s" };
        format!(
            "cpu ({}, {} thread{plural}{tier})",
            std::env::consts::ARCH,
            self.threads
        )
    }

    pub(crate) fn target_name(&self) -> &'static str {
        "cpu"
    }

    pub(crate) fn target_options(&self) -> &str {
        &self.isa
    }

    /// Every f32 transcendental through kernelc's IR math: that replaces a scalar f64
    /// library call per lane with straight-line SIMD code. The LLVM tier also takes
    /// f64's and float `%` as IR (it calls no library), and so do the kernels it
    /// leaves to Cranelift, so that both tiers run the same expansions.
    pub(crate) fn math_expansion(&self) -> MathExpansion {
        match self.tier {
            Ok(CpuTier::Llvm) => llvm_expansion(),
            Ok(CpuTier::Cranelift) | Err(_) => MathExpansion::all_transcendental(),
        }
    }

    /// The tier compiling this device's kernels.
    pub fn tier(&self) -> std::result::Result<CpuTier, String> {
        self.tier.clone()
    }

    pub(crate) fn caps(&self) -> TargetCaps {
        TargetCaps::cpu()
    }

    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        self.pool.stats()
    }

    /// Kernels take plain pointers: any offset that suits the element type does.
    pub(crate) fn binding_alignment(&self) -> usize {
        1
    }

    pub(crate) fn exclusive_writable_bindings(&self) -> bool {
        false
    }

    pub(crate) fn compile(
        &self,
        kernel: &Kernel,
        key: &CacheKey,
        disk: &DiskCache,
    ) -> std::result::Result<(CpuKernel, bool), String> {
        match &self.tier {
            Ok(CpuTier::Cranelift) => cpu_compile(kernel, key, disk),
            Ok(CpuTier::Llvm) => llvm_compile(kernel, key, disk),
            Err(why) => Err(why.clone()),
        }
    }

    /// Runs the launches now, in order. A kernel's run-time failure stops the op and
    /// is kept for the next synchronising call, as on the GPU devices, so that code
    /// written against one device behaves alike on all.
    pub(crate) fn execute(&self, launches: &[LaunchRef<'_>]) -> Result<()> {
        for launch in launches {
            match launch.exe {
                super::Executable::Cpu(k) => match self.launch(k, launch.grid, &launch.args) {
                    Ok(()) => {}
                    Err(Failure::Status(e)) => {
                        self.faults.record(e);
                        return Ok(());
                    }
                    Err(Failure::Refused(e)) => return Err(e),
                },
                #[allow(unreachable_patterns)]
                _ => return Err(super::foreign(&self.name(), "kernel")),
            }
        }
        Ok(())
    }

    /// Launches run synchronously; reports the failure kept since the last report.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.faults.take()
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<CpuStorage> {
        let words = bytes.div_ceil(16).max(1);
        let block = self.pool.take(words * 16, || {
            let mut block = Vec::new();
            block.try_reserve_exact(words)?;
            block.resize(words, 0);
            Ok(block)
        });
        let words =
            block.map_err(
                |_: std::collections::TryReserveError| RuntimeError::OutOfMemory {
                    device: self.name(),
                    bytes: bytes as u64,
                },
            )?;
        Ok(CpuStorage {
            words: UnsafeCell::new(words),
            bytes,
            pool: self.pool.clone(),
            faults: self.faults.clone(),
            device_id: self.id,
        })
    }

    fn launch(
        &self,
        kernel: &CpuKernel,
        grid: [u32; 3],
        args: &[BindingRef<'_>],
    ) -> std::result::Result<(), Failure> {
        let refused = |message: String| RuntimeError::Launch {
            device: self.name(),
            kernel: kernel.name().to_string(),
            message,
            status: 0,
        };
        if args.len() != kernel.params().len() {
            return Err(Failure::Refused(refused(format!(
                "{} arguments for {} parameters",
                args.len(),
                kernel.params().len()
            ))));
        }
        let raw: Vec<RawArg> = args
            .iter()
            .zip(kernel.params())
            .map(|(a, param)| match a {
                BindingRef::Buffer(slice) => match slice.storage {
                    Storage::Cpu(s) if slice.offset.saturating_add(slice.bytes) <= s.bytes => {
                        Ok(RawArg::Buffer {
                            // SAFETY: the slice lies inside the allocation (checked in
                            // the guard), so the offset pointer stays in bounds.
                            ptr: unsafe { s.ptr().add(slice.offset) },
                            bytes: slice.bytes,
                        })
                    }
                    #[allow(unreachable_patterns)]
                    _ => Err(super::foreign(&self.name(), "buffer")),
                },
                BindingRef::Host(host) => {
                    let writes =
                        matches!(param, Param::Buffer { access, .. } if access.can_write());
                    if writes && !host.is_writable() {
                        return Err(refused(format!(
                            "`{}` is written, but its host memory was lent read-only",
                            param.name()
                        )));
                    }
                    Ok(RawArg::Buffer {
                        ptr: host.ptr(),
                        bytes: host.bytes(),
                    })
                }
                BindingRef::Scalar(v) => Ok(RawArg::Scalar(*v)),
            })
            .collect::<Result<_>>()
            .map_err(Failure::Refused)?;
        // SAFETY: every buffer pointer points into a live `CpuStorage` borrowed for
        // this call, valid for the slice's `bytes` bytes (checked above), or into host
        // memory borrowed for this call (`HostRange`'s lifetime), written only when it
        // was lent mutably (checked above; Rust's borrows keep it from aliasing any
        // other argument); `check_args`
        // in `launch_raw` checks each pointer's alignment for its parameter. Kernels
        // write only their outputs and temporaries: `Runtime::run` allocates those
        // fresh, and `Runtime::run_into` holds the runtime's memory lock, refuses an
        // output overlapping any other bound range, and stages an input that a spec
        // updates in place through a copy, so no bound range is written while another
        // parameter reads it. The IR forbids two invocations writing one element, so
        // the threads never race.
        unsafe { kernel.launch_raw(grid, &raw) }.map_err(|e| match e.status() {
            0 => Failure::Refused(refused(e.to_string())),
            bits => Failure::Status(RuntimeError::Launch {
                device: self.name(),
                kernel: kernel.name().to_string(),
                message: e.to_string(),
                status: bits,
            }),
        })
    }
}

/// How a launch failed: refused before it ran, or a run-time status.
enum Failure {
    Refused(RuntimeError),
    Status(RuntimeError),
}

/// Host memory of a CPU tensor (16-byte aligned), returned to the pool on drop.
pub struct CpuStorage {
    words: UnsafeCell<Vec<Word>>,
    bytes: usize,
    pool: Arc<Pool<Vec<Word>>>,
    faults: Arc<Faults>,
    device_id: u64,
}

// SAFETY: a tensor's buffer is written only (a) through `write_range`/`fill_range`
// while the tensor is being created, before it is shared, and (b) by kernel launches on
// freshly allocated outputs (see `CpuDevice::launch`). A `Buffer`'s storage (the
// mutable memory API) is read and written only under its runtime's memory lock, one
// call at a time. All other access reads.
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
        let block = std::mem::take(self.words.get_mut());
        self.pool.give(block.len() * 16, block);
    }
}

impl CpuStorage {
    pub(crate) fn device_id(&self) -> u64 {
        self.device_id
    }

    pub(crate) fn device_name(&self) -> String {
        "cpu".to_string()
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes
    }

    // The range methods get ranges inside the storage (`Storage` checks first).

    // Reads are synchronising calls: a failed op not yet reported is reported here.

    pub(crate) fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.faults.take()?;
        Ok(self.bytes_ref()[offset..offset + len].to_vec())
    }

    pub(crate) fn read_range_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.faults.take()?;
        out.copy_from_slice(&self.bytes_ref()[offset..offset + out.len()]);
        Ok(())
    }

    pub(crate) fn write_range(&self, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: the range is inside the allocation (`Storage::write_range` checks);
        // no launch or reader runs on this storage meanwhile (see the `Sync` impl).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr().add(offset), data.len()) };
        Ok(())
    }

    pub(crate) fn fill_range(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        // SAFETY: as `write_range`.
        unsafe { std::ptr::write_bytes(self.ptr().add(offset), byte, len) };
        Ok(())
    }

    pub(crate) fn copy_range(
        src: &CpuStorage,
        src_offset: usize,
        dst: &CpuStorage,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        // SAFETY: both ranges are inside their allocations (`Storage::copy_range`
        // checks); `copy` allows them to overlap (one storage); nothing else touches
        // either storage meanwhile (see the `Sync` impl).
        unsafe { std::ptr::copy(src.ptr().add(src_offset), dst.ptr().add(dst_offset), len) };
        Ok(())
    }
}
