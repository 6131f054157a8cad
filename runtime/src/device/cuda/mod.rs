//! CUDA devices through the driver API (cudarc; `libcuda` is loaded at run time, so a
//! build with this feature runs, and reports [`RuntimeError::NoDevice`], on machines
//! without a driver).
//!
//! Kernels are PTX from `kernelc_codegen::ptx`, loaded by the driver's JIT. The PTX
//! kernel ABI (see that module): the entry function is [`abi::ENTRY_POINT`]; one 8-byte
//! kernel parameter per IR parameter in declaration order (a buffer is its device
//! pointer, a scalar is [`abi::encode_scalar_bits`] of its value); then one trailing
//! pointer to a `u32` status word the kernel atomically ORs [`abi::status`] bits into.
//! Block dimensions are the kernel's workgroup size, the grid is the launch's grid, and
//! no dynamic shared memory is used.
//!
//! All work goes to one stream per device, so stream order alone orders uploads,
//! launches and downloads. [`CudaDevice::execute`] returns once an op is queued: a
//! buffer an op borrowed may go back to the pool while its kernels run, and is reused
//! only by work queued on the same stream after them; a block actually freed
//! (`DeviceBlock::drop`) waits for the context first.

use super::BindingRef;
use super::{next_device_id, Executable, Faults, LaunchRef, Storage};
use crate::cache::{CacheKey, DiskCache};
use crate::error::{Result, RuntimeError};
use crate::pool::Pool;
use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};
use kernelc_codegen::abi::{self, status};
use kernelc_codegen::ptx::{self, PtxOptions};
use kernelc_ir::args::{check_args, ArgShape};
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{Kernel, Param};
use kernelc_kernels::lower::TargetCaps;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod module;
mod pinned;

pub use module::CudaPtxModule;

/// Device allocations are made (and pooled) in multiples of this many bytes: the
/// driver aligns allocations to at least 256 bytes anyway, and coarser sizes let the
/// pool reuse more.
const ALLOC_GRANULE: usize = 256;

/// Statically declared shared memory per block (larger needs the opt-in dynamic
/// shared memory kernelc does not use).
const STATIC_SHARED_MEMORY_LIMIT: u32 = 48 * 1024;

/// Most blocks along one grid axis that lowering may plan for: lowering applies one
/// limit to all three axes, and CUDA's y and z limits are 65,535.
const LOWERING_GRID_LIMIT: u32 = 65_535;

/// Disk cache file kind of a kernel's PTX.
const PTX_KIND: &str = "ptx";

/// The status word of one op: a `u32`, padded to one allocation granule.
const STATUS_BYTES: usize = 4;

/// What the hardware allows a launch (checked before every launch, so a bad plan is a
/// typed error rather than a driver error).
#[derive(Clone, Copy, Debug)]
struct LaunchLimits {
    max_threads_per_block: u32,
    max_block: [u32; 3],
    max_grid: [u32; 3],
}

/// A CUDA device: one context (the device's primary context) and one stream.
pub struct CudaDevice {
    id: u64,
    name: Arc<str>,
    /// `sm_90 ptx90 O2 driver13000`: everything compiled PTX depends on besides the IR
    /// (the driver's JIT turns the PTX into machine code at load time, but a PTX
    /// another driver wrote may use an ISA this one lacks).
    target_options: String,
    ptx_options: PtxOptions,
    caps: TargetCaps,
    limits: LaunchLimits,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pool: Arc<Pool<DeviceBlock>>,
    /// The status words of ops not yet checked (launches are asynchronous).
    status: Arc<StatusRing>,
    /// The pinned buffer host transfers go through.
    stage: Arc<pinned::Stage>,
}

impl CudaDevice {
    /// Opens device `ordinal`. Without a CUDA driver, or without that device, this is
    /// [`RuntimeError::NoDevice`], never a panic.
    pub(crate) fn open(ordinal: usize) -> Result<CudaDevice> {
        // cudarc panics inside its lazy `dlopen` when libcuda is missing, so ask first.
        // SAFETY: `is_culib_present` only tries to open the candidate library names
        // and drops the handles; loading libcuda runs no code with preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(RuntimeError::NoDevice(
                "CUDA: no CUDA driver (libcuda) found".into(),
            ));
        }
        let no_device = |what: &str, e: DriverError| {
            RuntimeError::NoDevice(format!("CUDA device {ordinal}: {what}: {}", describe(&e)))
        };
        let count = CudaContext::device_count().map_err(|e| no_device("cannot list devices", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(RuntimeError::NoDevice(format!(
                "CUDA device {ordinal}: the driver reports {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| no_device("cannot create a context", e))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| no_device("cannot create a stream", e))?;
        let props = DeviceProperties::query(&ctx).map_err(|e| no_device("cannot query", e))?;
        let ptx_options = PtxOptions {
            sm: props.sm,
            ptx_isa: props.ptx_isa(),
            ..PtxOptions::default()
        };
        let ring = DeviceBlock::alloc(&ctx, STATUS_RING_WORDS * STATUS_BYTES)
            .map_err(|e| no_device("cannot allocate the status words", e))?;
        let status = Arc::new(StatusRing::new(ring, stream.clone(), name_of(&props)));
        status
            .clear_all()
            .map_err(|e| no_device("cannot clear the status words", e))?;
        let device = CudaDevice {
            status,
            stage: Arc::new(pinned::Stage::new(ctx.clone())),
            id: next_device_id(),
            name: name_of(&props).into(),
            target_options: format!(
                "sm_{} ptx{} {:?} driver{}",
                ptx_options.sm, ptx_options.ptx_isa, ptx_options.opt_level, props.driver_version
            ),
            ptx_options,
            caps: props.caps(),
            pool: Arc::new(Pool::with_cap(pool_cap(&ctx))),
            limits: props.limits,
            ctx,
            stream,
        };
        tracing::debug!(device = %device.name, options = %device.target_options, "CUDA device open");
        Ok(device)
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn name(&self) -> String {
        self.name.to_string()
    }

    pub(crate) fn target_name(&self) -> &'static str {
        "ptx"
    }

    pub(crate) fn target_options(&self) -> &str {
        &self.target_options
    }

    /// NVPTX has no accurate `expf` & co. and no f64 `exp` & co. at all without
    /// NVIDIA's libdevice (which kernelc does not ship), and its `frem` rounds: every
    /// transcendental, f64 included, and float `%` go through kernelc's IR math.
    pub(crate) fn math_expansion(&self) -> MathExpansion {
        kernelc_codegen::ptx::expansion_for_sm(self.ptx_options.sm)
    }

    pub(crate) fn caps(&self) -> TargetCaps {
        self.caps.clone()
    }

    /// Kernels take device pointers: any offset that suits the element type does.
    pub(crate) fn binding_alignment(&self) -> usize {
        1
    }

    pub(crate) fn exclusive_writable_bindings(&self) -> bool {
        false
    }

    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        self.pool.stats()
    }

    /// Makes this device's context current on the calling thread (the driver API
    /// works on the thread's current context; the runtime is called from many threads).
    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.driver_failure("cannot bind the context", e))
    }

    /// A driver failure outside a launch: the device is unusable.
    fn driver_failure(&self, what: &str, e: DriverError) -> RuntimeError {
        RuntimeError::NoDevice(format!("{}: {what}: {}", self.name, describe(&e)))
    }

    // ---- memory -------------------------------------------------------------------

    /// A storage of `bytes` bytes (a pooled block, else a fresh one: only then is the
    /// driver called, and `DeviceBlock::alloc` binds the context for it).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaStorage> {
        let granted = bytes
            .checked_next_multiple_of(ALLOC_GRANULE)
            .ok_or(RuntimeError::OutOfMemory {
                device: self.name(),
                bytes: bytes as u64,
            })?
            .max(ALLOC_GRANULE);
        let block = self
            .pool
            .take(granted, || DeviceBlock::alloc(&self.ctx, granted));
        let block = block.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                RuntimeError::OutOfMemory {
                    device: self.name(),
                    bytes: bytes as u64,
                }
            } else {
                self.driver_failure(&format!("cannot allocate {bytes} bytes"), e)
            }
        })?;
        Ok(CudaStorage {
            ptr: block.ptr,
            block: Some(block),
            bytes,
            granted,
            stream: self.stream.clone(),
            pool: self.pool.clone(),
            status: self.status.clone(),
            stage: self.stage.clone(),
            device_id: self.id,
            device_name: self.name.clone(),
        })
    }

    // ---- compilation --------------------------------------------------------------

    /// The kernel's PTX from the disk cache when present and accepted by the driver,
    /// else emitted now (and stored). Returns whether the disk artifact was used.
    pub(crate) fn compile(
        &self,
        kernel: &Kernel,
        key: &CacheKey,
        disk: &DiskCache,
    ) -> std::result::Result<(CudaKernel, bool), String> {
        self.caps.check_workgroup(kernel)?;
        if let Some(bytes) = disk.load(key, PTX_KIND) {
            let started = Instant::now();
            let loaded = String::from_utf8(bytes)
                .map_err(|_| "the cached PTX is not UTF-8".to_string())
                .and_then(|ptx| self.load(kernel, &ptx));
            match loaded {
                Ok(exe) => {
                    tracing::debug!(
                        kernel = %kernel.name,
                        load_micros = started.elapsed().as_micros() as u64,
                        "CUDA kernel loaded from the disk cache"
                    );
                    return Ok((exe, true));
                }
                // Never trusted: a PTX this driver rejects is rebuilt and replaced.
                Err(why) => {
                    tracing::warn!(kernel = %kernel.name, %why, "cached PTX rejected; recompiling")
                }
            }
        }
        let started = Instant::now();
        let ptx = ptx::emit(kernel, &self.ptx_options).map_err(|e| e.to_string())?;
        let emitted = started.elapsed();
        let exe = self.load(kernel, &ptx)?;
        tracing::debug!(
            kernel = %kernel.name,
            emit_micros = emitted.as_micros() as u64,
            load_micros = (started.elapsed() - emitted).as_micros() as u64,
            "CUDA kernel compiled"
        );
        // Stored only once the driver accepted it.
        if let Err(e) = disk.store(key, PTX_KIND, ptx.as_bytes()) {
            tracing::warn!(error = %e, "cannot write the kernel cache");
        }
        Ok((exe, false))
    }

    /// Loads `ptx` (compiled from `kernel`) into this device's context.
    fn load(&self, kernel: &Kernel, ptx: &str) -> std::result::Result<CudaKernel, String> {
        let module = LoadedModule::load(&self.ctx, ptx)?;
        let function = module.function(abi::ENTRY_POINT)?;
        let dynamic_shared = ptx::dynamic_shared_bytes(kernel);
        if dynamic_shared > 0 {
            if dynamic_shared > self.caps.opt_in_shared_memory_bytes {
                return Err(format!(
                    "the kernel needs {dynamic_shared} bytes of shared memory; this device \
                     gives a block at most {}",
                    self.caps.opt_in_shared_memory_bytes
                ));
            }
            use sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            // SAFETY: `function` was just taken from `module`, which is loaded, and
            // `module.function` made the context current.
            unsafe {
                result::function::set_function_attribute(
                    function,
                    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_shared as i32,
                )
            }
            .map_err(|e| {
                format!(
                    "cannot opt into {dynamic_shared} bytes of shared memory: {}",
                    describe(&e)
                )
            })?;
        }
        Ok(CudaKernel {
            function,
            _module: module,
            name: kernel.name.clone(),
            params: kernel.params.clone(),
            workgroup_size: kernel.workgroup_size,
            dynamic_shared,
        })
    }

    // ---- execution ----------------------------------------------------------------

    /// Runs the launches of one op in stream order with one status word, then
    /// synchronises once and turns a nonzero status into a typed error.
    /// Enqueues every launch of an op on the stream and returns at once. The op gets
    /// one status word of the device's ring; a nonzero word is reported, naming the
    /// op's kernels, by the next synchronising call ([`CudaDevice::synchronize`], or
    /// a read). A launch the driver refuses is an error now.
    pub(crate) fn execute(&self, launches: &[LaunchRef<'_>]) -> Result<()> {
        if launches.is_empty() {
            return Ok(());
        }
        let prepared = launches
            .iter()
            .map(|l| self.prepare(l))
            .collect::<Result<Vec<_>>>()?;
        // Once for the whole op: every driver call below runs on this thread.
        self.bind()?;
        // The ring stays locked until the op's launches are queued, so a check on
        // another thread never reads (and clears) a word before its kernels are queued.
        let mut ops = self.status.lock();
        let status_ptr = self.status.slot(&mut ops, &kernel_names(launches));
        for (launch, (kernel, words)) in launches.iter().zip(prepared) {
            if let Err(e) = self.launch(kernel, launch.grid, words, status_ptr) {
                // Launches before it may still use buffers this op borrows only until
                // it returns: wait for them before reporting.
                let _ = self.stream.synchronize();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Waits for every queued launch and reports the first op whose status word is
    /// nonzero since the last check.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.status.check()
    }

    /// The kernel of `launch` and its parameter words (without the status pointer),
    /// after checking the arguments against the kernel's parameters.
    fn prepare<'k>(&self, launch: &LaunchRef<'k>) -> Result<(&'k CudaKernel, Vec<u64>)> {
        let kernel = match launch.exe {
            Executable::Cuda(k) => k,
            #[allow(unreachable_patterns)]
            _ => return Err(super::foreign(&self.name, "kernel")),
        };
        let mut shapes = Vec::with_capacity(launch.args.len());
        let mut words = Vec::with_capacity(launch.args.len() + 1);
        for arg in &launch.args {
            match arg {
                BindingRef::Buffer(slice) => {
                    let s = self.own_storage(slice.storage)?;
                    if slice.offset.saturating_add(slice.bytes) > s.bytes {
                        return Err(self.launch_error(kernel, "a buffer range past its end".into()));
                    }
                    shapes.push(ArgShape::Buffer {
                        elem: None,
                        len: slice.bytes as u64,
                    });
                    words.push(s.ptr + slice.offset as u64);
                }
                BindingRef::Host(_) => return Err(super::foreign(&self.name, "host memory")),
                BindingRef::Scalar(v) => {
                    shapes.push(ArgShape::Scalar(v.ty()));
                    words.push(abi::encode_scalar_bits(*v));
                }
            }
        }
        check_args(&kernel.name, &kernel.params, &shapes, "bytes", |e| {
            e.size_bytes() as u64
        })
        .map_err(|e| self.launch_error(kernel, e.to_string()))?;
        Ok((kernel, words))
    }

    /// `storage` as a buffer of this device.
    fn own_storage<'s>(&self, storage: &'s Storage) -> Result<&'s CudaStorage> {
        match storage {
            Storage::Cuda(s) if s.device_id == self.id => Ok(s),
            #[allow(unreachable_patterns)]
            _ => Err(super::foreign(&self.name, "buffer")),
        }
    }

    /// Enqueues one launch of `kernel` on the stream (the context is current:
    /// `execute` binds it once per op).
    fn launch(
        &self,
        kernel: &CudaKernel,
        grid: [u32; 3],
        mut words: Vec<u64>,
        status_ptr: sys::CUdeviceptr,
    ) -> Result<()> {
        self.check_dims(kernel, grid)?;
        if grid.contains(&0) {
            return Ok(()); // an empty grid runs nothing (as on the CPU)
        }
        words.push(status_ptr);
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| (w as *mut u64).cast::<c_void>())
            .collect();
        let [bx, by, bz] = kernel.workgroup_size;
        // SAFETY: ABI match: the PTX entry of a kernelc kernel takes exactly one
        // 8-byte parameter per IR parameter plus the trailing status pointer
        // (`kernelc_codegen::ptx`); `prepare` checked one argument per IR parameter,
        // buffer for buffer and scalar for scalar, so `params` holds `params.len() + 1`
        // pointers, each to a live `u64` of `words` (the driver copies the values
        // before `cuLaunchKernel` returns). Memory: each buffer word points into a live
        // allocation of this context, with at least the parameter's static length
        // before its end (`prepare` checks the range and `check_args` the length, and
        // `check_args` the pointer's alignment), and the kernel bounds-checks every
        // access it cannot prove in range against those lengths; the status pointer is
        // a live word of the status ring. A buffer the op borrowed may go back to the
        // pool once `execute` returns, but is reused only by work queued after this on
        // the same stream, and freed only after the context synchronises
        // (`DeviceBlock::drop`).
        // `function` belongs to a module that `kernel` keeps loaded, and the block and
        // grid were checked against the device limits above.
        let launched = unsafe {
            result::launch_kernel(
                kernel.function,
                (grid[0], grid[1], grid[2]),
                (bx, by, bz),
                kernel.dynamic_shared,
                self.stream.cu_stream(),
                &mut params,
            )
        };
        launched.map_err(|e| self.launch_error(kernel, describe(&e)))
    }

    /// `grid` against the device's per-axis grid limits (the workgroup was checked
    /// against the caps when the kernel was compiled).
    fn check_dims(&self, kernel: &CudaKernel, grid: [u32; 3]) -> Result<()> {
        let max_grid = self.limits.max_grid;
        if grid.iter().zip(max_grid).any(|(&g, max)| g > max) {
            return Err(self.launch_error(
                kernel,
                format!("grid {grid:?} exceeds this device's grid limits {max_grid:?}"),
            ));
        }
        Ok(())
    }

    fn launch_error(&self, kernel: &CudaKernel, message: String) -> RuntimeError {
        RuntimeError::Launch {
            device: self.name(),
            kernel: kernel.name.clone(),
            message,
            status: 0,
        }
    }
}

/// The kernels of an op, for an error that cannot tell which of them failed (they
/// share one status word and one synchronisation).
fn kernel_names(launches: &[LaunchRef<'_>]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for l in launches {
        if let Executable::Cuda(k) = l.exe {
            if !names.contains(&k.name.as_str()) {
                names.push(&k.name);
            }
        }
    }
    names.join(", ")
}

/// The device's name as errors and `Device::name` give it.
fn name_of(props: &DeviceProperties) -> String {
    format!("{} (CUDA sm_{})", props.name, props.sm)
}

/// `CUDA_ERROR_X (what it means)`.
fn describe(e: &DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(name), Ok(text)) => format!("{name} ({text})"),
        (Ok(name), Err(_)) => name,
        _ => format!("CUDA error {}", e.0 as u32),
    }
}

// ---- device properties ----------------------------------------------------------------

/// What `open` reads from the driver.
/// Most freed device memory the pool keeps: half the device's memory (the pool is
/// cleared and the allocation retried whenever an allocation fails). Like torch's
/// caching allocator: a fresh cuMemAlloc + cuMemFree per op costs more than a
/// memory-bound kernel.
fn pool_cap(ctx: &Arc<CudaContext>) -> usize {
    ctx.total_mem()
        .map_or(crate::pool::DEFAULT_MAX_KEPT_BYTES, |total| total / 2)
}

struct DeviceProperties {
    name: String,
    sm: u32,
    driver_version: i32,
    warp_size: u32,
    shared_memory_per_block: u32,
    /// What a block may have by opting in (dynamic shared memory).
    opt_in_shared_memory_per_block: u32,
    limits: LaunchLimits,
}

impl DeviceProperties {
    fn query(ctx: &Arc<CudaContext>) -> std::result::Result<DeviceProperties, DriverError> {
        use sys::CUdevice_attribute::*;
        let attr = |a| ctx.attribute(a).map(|v| v.max(0) as u32);
        let (major, minor) = ctx.compute_capability()?;
        let mut driver_version = 0;
        // SAFETY: `cuDriverGetVersion` writes one int through the pointer it is given,
        // which points to a live local.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }.result()?;
        Ok(DeviceProperties {
            name: ctx.name()?,
            sm: (major.max(0) * 10 + minor.max(0)) as u32,
            driver_version,
            warp_size: attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            shared_memory_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            opt_in_shared_memory_per_block: attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            limits: LaunchLimits {
                max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                max_block: [
                    attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                    attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                    attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
                ],
                max_grid: [
                    attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                    attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                    attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
                ],
            },
        })
    }

    /// The newest PTX ISA this driver's JIT accepts, capped at the emitter's default.
    fn ptx_isa(&self) -> u32 {
        PtxOptions::default()
            .ptx_isa
            .min(ptx_isa_for_driver(self.driver_version))
    }

    fn caps(&self) -> TargetCaps {
        let l = &self.limits;
        TargetCaps {
            max_invocations_per_workgroup: l.max_threads_per_block,
            max_workgroup_size: l.max_block,
            max_workgroups_per_dimension: l
                .max_grid
                .iter()
                .copied()
                .min()
                .unwrap_or(0)
                .min(LOWERING_GRID_LIMIT),
            shared_memory_bytes: self.shared_memory_per_block.min(STATIC_SHARED_MEMORY_LIMIT),
            subgroup_size: Some(self.warp_size),
            f16: true,
            bf16: true,
            f64: true,
            i64: true,
            matrix_fragments: self.sm >= kernelc_codegen::ptx::FRAGMENTS_MIN_SM,
            warpgroup_fragments: self.sm == kernelc_codegen::ptx::WARPGROUP_SM,
            async_copies: self.sm >= kernelc_codegen::ptx::ASYNC_COPY_MIN_SM,
            f64_m16_fragments: self.sm >= kernelc_codegen::ptx::F64_M16_FRAGMENTS_MIN_SM,
            opt_in_shared_memory_bytes: self.opt_in_shared_memory_per_block,
            ..TargetCaps::cuda_sm90()
        }
    }
}

/// The PTX ISA version (major * 10 + minor) introduced with a CUDA driver version
/// (`major * 1000 + minor * 10`), per the PTX ISA release notes.
fn ptx_isa_for_driver(driver_version: i32) -> u32 {
    const TABLE: [(i32, u32); 12] = [
        (13_000, 90),
        (12_090, 88),
        (12_080, 87),
        (12_070, 86),
        (12_050, 85),
        (12_040, 84),
        (12_030, 83),
        (12_020, 82),
        (12_010, 81),
        (12_000, 80),
        (11_080, 78),
        (11_070, 77),
    ];
    TABLE
        .iter()
        .find(|(driver, _)| driver_version >= *driver)
        .map_or(70, |&(_, isa)| isa)
}

// ---- device memory ---------------------------------------------------------------------

/// One device allocation, freed on drop.
struct DeviceBlock {
    ptr: sys::CUdeviceptr,
    ctx: Arc<CudaContext>,
}

impl DeviceBlock {
    fn alloc(
        ctx: &Arc<CudaContext>,
        bytes: usize,
    ) -> std::result::Result<DeviceBlock, DriverError> {
        ctx.bind_to_thread()?;
        // SAFETY: the context is current on this thread; `cuMemAlloc` has no other
        // precondition, and the pointer is owned (freed once) by the returned block.
        let ptr = unsafe { result::malloc_sync(bytes) }?;
        Ok(DeviceBlock {
            ptr,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind_to_thread() {
            tracing::warn!(error = %describe(&e), "cannot bind the CUDA context to free memory; leaking it");
            return;
        }
        // Queued kernels may still use the block (ops do not wait for their launches):
        // wait for the context's work before freeing. Blocks are freed only when the
        // pool is full or cleared, so this is rare.
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %describe(&e), "cannot wait for the CUDA context to free memory; leaking it");
            return;
        }
        // SAFETY: `ptr` came from `cuMemAlloc` in this context and is freed only here;
        // every kernel queued before this point has finished (synchronised above), and
        // no later work can use the block (its storage is gone).
        if let Err(e) = unsafe { result::free_sync(self.ptr) } {
            tracing::warn!(error = %describe(&e), "cannot free CUDA memory");
        }
    }
}

/// Device memory of a CUDA tensor, returned to its device's pool on drop.
pub struct CudaStorage {
    pub(super) ptr: sys::CUdeviceptr,
    /// Always `Some` until `drop` hands it back to the pool.
    block: Option<DeviceBlock>,
    /// The tensor's bytes (what kernels and downloads see).
    bytes: usize,
    /// The block's size (at least `bytes`; the pool's key).
    granted: usize,
    stream: Arc<CudaStream>,
    pool: Arc<Pool<DeviceBlock>>,
    status: Arc<StatusRing>,
    stage: Arc<pinned::Stage>,
    device_id: u64,
    device_name: Arc<str>,
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give(self.granted, block);
        }
    }
}

impl CudaStorage {
    pub(crate) fn device_id(&self) -> u64 {
        self.device_id
    }

    pub(crate) fn device_name(&self) -> String {
        self.device_name.to_string()
    }

    fn failure(&self, what: &str, e: DriverError) -> RuntimeError {
        RuntimeError::NoDevice(format!("{}: {what}: {}", self.device_name, describe(&e)))
    }

    fn bind(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| self.failure("cannot bind the context", e))
    }

    fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| self.failure("stream synchronisation failed", e))
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes
    }

    // The range methods get ranges inside the storage (`Storage` checks first); each
    // is queued on the device's one stream behind every earlier launch and waited for.

    pub(crate) fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        if out.is_empty() {
            return Ok(out);
        }
        self.bind()?;
        self.download(offset, &mut out)
            .map_err(|e| self.failure("download failed", e))?;
        self.status.check()?;
        Ok(out)
    }

    pub(crate) fn read_range_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.bind()?;
        self.download(offset, out)
            .map_err(|e| self.failure("download failed", e))?;
        self.status.check()
    }

    /// Fills `out` from byte `offset` once all earlier work on the stream is done: one
    /// copy queued on the stream, then one synchronisation. The context must be
    /// current, and `offset + out.len()` within the storage.
    fn download(&self, offset: usize, out: &mut [u8]) -> std::result::Result<(), DriverError> {
        // `ptr + offset` starts a range of `out.len()` bytes inside a live allocation
        // (the caller's contract), through the pinned stage.
        self.stage
            .download(self.ptr + offset as u64, out, &self.stream)
    }

    pub(crate) fn write_range(&self, offset: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // The destination range lies inside a live allocation (`Storage` checks); the
        // copy is queued behind every earlier launch on the device's one stream, so no
        // kernel reads the range meanwhile, and waited for.
        self.stage
            .upload(self.ptr + offset as u64, data, &self.stream)
            .map_err(|e| self.failure("upload failed", e))
    }

    pub(crate) fn fill_range(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.bind()?;
        self.fill_async(offset, len, byte)?;
        // Waited for so that dropping the storage right away frees nothing in use.
        self.synchronize()
    }

    /// Enqueues setting `len` bytes from `offset`; later stream work sees it. The
    /// context must be current.
    fn fill_async(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range lies inside a live allocation (`Storage` checks, or the
        // whole status word); it is queued on the one stream, behind every launch that
        // could read it.
        unsafe {
            result::memset_d8_async(self.ptr + offset as u64, byte, len, self.stream.cu_stream())
        }
        .map_err(|e| self.failure("memset failed", e))
    }

    pub(crate) fn copy_range(
        src: &CudaStorage,
        src_offset: usize,
        dst: &CudaStorage,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (from, to) = (src.ptr + src_offset as u64, dst.ptr + dst_offset as u64);
        if from < to + len as u64 && to < from + len as u64 {
            // cuMemcpy leaves overlapping ranges undefined: through the host. Not a
            // synchronising call: another op's failure stays for the next one.
            let mut bytes = vec![0u8; len];
            src.bind()?;
            src.download(src_offset, &mut bytes)
                .map_err(|e| src.failure("download failed", e))?;
            return dst.write_range(dst_offset, &bytes);
        }
        dst.bind()?;
        // SAFETY: both ranges lie inside live allocations of this context (`Storage`
        // checks) and do not overlap (tested above); the copy is queued on the one
        // stream and waited for.
        unsafe { result::memcpy_dtod_async(to, from, len, dst.stream.cu_stream()) }
            .map_err(|e| dst.failure("device copy failed", e))?;
        dst.synchronize()
    }
}

// ---- status words ----------------------------------------------------------------------

/// Status words per ring: ops queued between two checks (a full ring is checked, which
/// waits for the stream, before the next op takes a word).
const STATUS_RING_WORDS: usize = 4096;

/// The device's ring of status words, one per op queued since the last check, and
/// the kernels of each. Checking waits for the stream, reads the used words in one
/// copy, clears them and reports the first nonzero word's op.
pub(crate) struct StatusRing {
    block: DeviceBlock,
    stream: Arc<CudaStream>,
    device_name: String,
    /// The kernels of the op holding each used word, in order.
    ops: Mutex<Vec<String>>,
    /// A failure found when a full ring was checked, kept for the next synchronising
    /// call.
    faults: Faults,
}

impl StatusRing {
    fn new(block: DeviceBlock, stream: Arc<CudaStream>, device_name: String) -> StatusRing {
        StatusRing {
            block,
            stream,
            device_name,
            ops: Mutex::new(Vec::new()),
            faults: Faults::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        crate::lock(&self.ops)
    }

    /// Zeroes every word and waits (at open).
    fn clear_all(&self) -> std::result::Result<(), DriverError> {
        let bytes = STATUS_RING_WORDS * STATUS_BYTES;
        // SAFETY: the ring's block holds `bytes` bytes and no kernel uses it yet.
        unsafe { result::memset_d8_async(self.block.ptr, 0, bytes, self.stream.cu_stream()) }?;
        self.stream.synchronize()
    }

    /// A zeroed word for an op of `kernels`, in the locked ring `ops`. A full ring is
    /// checked first (waiting for the stream); a failure found then is kept for the
    /// next synchronising call. The context must be current.
    fn slot(&self, ops: &mut Vec<String>, kernels: &str) -> sys::CUdeviceptr {
        if ops.len() >= STATUS_RING_WORDS {
            if let Err(e) = self.check_locked(ops) {
                self.faults.record(e);
            }
        }
        let index = ops.len();
        ops.push(kernels.to_string());
        self.block.ptr + (index * STATUS_BYTES) as u64
    }

    /// Waits for the stream, reads and clears the used words, and reports the first
    /// failed op (a failure kept earlier first). The context must be current.
    fn check(&self) -> Result<()> {
        let mut ops = self.lock();
        let result = self.check_locked(&mut ops);
        drop(ops);
        self.faults.take()?;
        result
    }

    fn check_locked(&self, ops: &mut Vec<String>) -> Result<()> {
        let failure = |what: &str, e: DriverError| {
            RuntimeError::NoDevice(format!("{}: {what}: {}", self.device_name, describe(&e)))
        };
        if ops.is_empty() {
            return self
                .stream
                .synchronize()
                .map_err(|e| failure("stream synchronisation failed", e));
        }
        let mut words = vec![0u8; ops.len() * STATUS_BYTES];
        // SAFETY: the ring's block holds `STATUS_RING_WORDS >= ops.len()` words; `words`
        // is not touched until the stream is synchronised below. The memset after it
        // is queued behind the copy, and later launches behind the memset.
        unsafe {
            result::memcpy_dtoh_async(&mut words, self.block.ptr, self.stream.cu_stream())
                .map_err(|e| failure("status download failed", e))?;
            result::memset_d8_async(self.block.ptr, 0, words.len(), self.stream.cu_stream())
                .map_err(|e| failure("status clear failed", e))?;
        }
        self.stream
            .synchronize()
            .map_err(|e| failure("stream synchronisation failed", e))?;
        let failed = words
            .chunks_exact(STATUS_BYTES)
            .zip(ops.iter())
            .find_map(|(w, op)| {
                let bits = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                (bits != 0).then(|| (op.clone(), bits))
            });
        ops.clear();
        match failed {
            Some((kernel, bits)) => Err(RuntimeError::Launch {
                device: self.device_name.clone(),
                kernel,
                message: status::describe(bits),
                status: bits,
            }),
            None => Ok(()),
        }
    }
}

// ---- modules and kernels ---------------------------------------------------------------

/// A loaded PTX module, unloaded on drop.
struct LoadedModule {
    module: sys::CUmodule,
    ctx: Arc<CudaContext>,
}

// SAFETY: a `CUmodule` is a driver handle, usable from any thread on which its context
// is current (every use binds it first); the driver API is thread-safe.
unsafe impl Send for LoadedModule {}
// SAFETY: as `Send`; the handle is never mutated after loading.
unsafe impl Sync for LoadedModule {}

/// Bytes of the JIT error log kept for a rejected module.
const JIT_LOG_BYTES: usize = 16 * 1024;

impl LoadedModule {
    /// JIT-compiles `ptx` for the context's device; a rejection carries the JIT's log.
    fn load(ctx: &Arc<CudaContext>, ptx: &str) -> std::result::Result<LoadedModule, String> {
        let image = CString::new(ptx).map_err(|_| "the PTX contains a NUL byte".to_string())?;
        ctx.bind_to_thread()
            .map_err(|e| format!("cannot bind the CUDA context: {}", describe(&e)))?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The size option's value is the integer itself, passed in the pointer slot.
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is a NUL-terminated PTX text; `options` and `values` have the
        // same length (2), the log buffer is `JIT_LOG_BYTES` long as declared and
        // outlives the call, and `module` is a live out-parameter. The context is
        // current on this thread.
        let loaded = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if let Err(e) = loaded.result() {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..end]);
            return Err(format!(
                "the CUDA driver rejected the PTX: {}{}{}",
                describe(&e),
                if log.trim().is_empty() { "" } else { ": " },
                log.trim()
            ));
        }
        Ok(LoadedModule {
            module,
            ctx: ctx.clone(),
        })
    }

    fn function(&self, name: &str) -> std::result::Result<sys::CUfunction, String> {
        let c_name = CString::new(name).map_err(|_| format!("bad entry point name {name:?}"))?;
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("cannot bind the CUDA context: {}", describe(&e)))?;
        // SAFETY: `module` is loaded (unloaded only on drop) and the context is current.
        unsafe { result::module::get_function(self.module, c_name) }
            .map_err(|e| format!("the PTX has no entry `{name}`: {}", describe(&e)))
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind_to_thread() {
            tracing::warn!(error = %describe(&e), "cannot bind the CUDA context to unload a module");
            return;
        }
        // SAFETY: the module was loaded by `load` and is unloaded only here; no launch
        // of it is in flight (ops synchronise before their executables can be dropped).
        if let Err(e) = unsafe { result::module::unload(self.module) } {
            tracing::warn!(error = %describe(&e), "cannot unload a CUDA module");
        }
    }
}

/// A kernel loaded on a CUDA device.
pub struct CudaKernel {
    function: sys::CUfunction,
    /// Keeps `function` valid.
    _module: LoadedModule,
    name: String,
    params: Vec<Param>,
    workgroup_size: [u32; 3],
    /// Dynamic shared memory each launch passes (`ptx::dynamic_shared_bytes`).
    dynamic_shared: u32,
}

// SAFETY: `function` is a driver handle into `_module`, which lives as long as this
// kernel; driver handles may be used from any thread with the context current, and
// launching only reads the handle.
unsafe impl Send for CudaKernel {}
// SAFETY: as `Send`: nothing is mutated through a shared `CudaKernel`.
unsafe impl Sync for CudaKernel {}

impl CudaKernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Threads per block, per axis (the IR kernel's workgroup size).
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.workgroup_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Slice;
    use kernelc_ir::builder::{global_id, KernelBuilder};
    use kernelc_ir::{Access, Scalar, ScalarType};

    /// The device, or `None` (with a NOT RUN line) on a machine without one.
    fn device(test: &str) -> Option<CudaDevice> {
        match CudaDevice::open(0) {
            Ok(d) => Some(d),
            Err(e) => {
                println!("NOT RUN: no CUDA device ({test}): {e}");
                None
            }
        }
    }

    /// `out[i] = a[i] / d` for `i` in 0..64 (one block of 64), with `out` holding only
    /// `out_len` elements: a zero `d` or a short `out` trips a status bit.
    fn divide_kernel(out_len: u64) -> Kernel {
        let mut k = KernelBuilder::new("divide", [64, 1, 1]);
        let a = k.buffer("a", ScalarType::I32, 64, Access::Read);
        let out = k.buffer("out", ScalarType::I32, out_len, Access::Write);
        let d = k.scalar("d", ScalarType::I32);
        k.build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), a.at(i) / d);
        })
        .expect("valid kernel")
    }

    /// Runs [`divide_kernel`] once on `grid` and returns the result and `out`.
    fn run_divide(
        dev: &CudaDevice,
        out_len: u64,
        d: i32,
        grid: [u32; 3],
    ) -> (Result<()>, Vec<i32>) {
        let kernel = passes_for(dev, &divide_kernel(out_len));
        let key = CacheKey::new(kernelc_ir::stable_hash(&kernel).as_bytes(), "ptx", "test");
        let (exe, from_disk) = dev
            .compile(&kernel, &key, &DiskCache::off())
            .expect("compiles");
        assert!(!from_disk);
        let exe = Executable::Cuda(exe);
        let a: Vec<u8> = (0..64i32).flat_map(|v| (v * 6).to_le_bytes()).collect();
        let a_buf = Arc::new(Storage::Cuda(dev.alloc(a.len()).unwrap()));
        a_buf.write_bytes(&a).unwrap();
        let out_buf = Arc::new(Storage::Cuda(dev.alloc(out_len as usize * 4).unwrap()));
        out_buf.fill(0).unwrap();
        let launch = LaunchRef {
            exe: &exe,
            grid,
            args: vec![
                BindingRef::Buffer(Slice::whole(&a_buf)),
                BindingRef::Buffer(Slice::whole(&out_buf)),
                BindingRef::Scalar(Scalar::I32(d)),
            ],
        };
        // Launches are asynchronous: a kernel's status is reported by the next
        // synchronising call.
        let result = dev.execute(&[launch]).and_then(|()| dev.synchronize());
        let out = out_buf
            .read_bytes()
            .unwrap()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        (result, out)
    }

    fn passes_for(dev: &CudaDevice, kernel: &Kernel) -> Kernel {
        kernelc_ir::passes::for_target(kernel, &dev.math_expansion())
    }

    fn launch_message(result: Result<()>) -> String {
        match result {
            Err(RuntimeError::Launch { message, .. }) => message,
            other => panic!("expected a launch error, got {other:?}"),
        }
    }

    #[test]
    fn scalars_and_buffers_reach_the_kernel() {
        let Some(dev) = device("scalars_and_buffers_reach_the_kernel") else {
            return;
        };
        let (result, out) = run_divide(&dev, 64, 3, [1, 1, 1]);
        result.unwrap();
        assert_eq!(out, (0..64).map(|v| v * 2).collect::<Vec<_>>());
    }

    #[test]
    fn division_by_zero_is_a_typed_launch_error() {
        let Some(dev) = device("division_by_zero_is_a_typed_launch_error") else {
            return;
        };
        let (result, out) = run_divide(&dev, 64, 0, [1, 1, 1]);
        assert_eq!(
            launch_message(result),
            status::describe(status::DIVISION_BY_ZERO)
        );
        assert!(out.iter().all(|&v| v == 0), "division by zero yields 0");
        // The device keeps working.
        run_divide(&dev, 64, 1, [1, 1, 1]).0.unwrap();
    }

    #[test]
    fn an_out_of_bounds_store_is_a_typed_launch_error() {
        let Some(dev) = device("an_out_of_bounds_store_is_a_typed_launch_error") else {
            return;
        };
        let (result, out) = run_divide(&dev, 32, 3, [1, 1, 1]);
        assert_eq!(
            launch_message(result),
            status::describe(status::OUT_OF_BOUNDS)
        );
        assert_eq!(
            out,
            (0..32).map(|v| v * 2).collect::<Vec<_>>(),
            "in-bounds stores happen"
        );
    }

    #[test]
    fn a_grid_past_the_device_limits_is_refused_before_launch() {
        let Some(dev) = device("a_grid_past_the_device_limits_is_refused_before_launch") else {
            return;
        };
        let too_tall = dev.limits.max_grid[1].saturating_add(1);
        let (result, _) = run_divide(&dev, 64, 3, [1, too_tall, 1]);
        assert!(launch_message(result).contains("grid"));
        // An empty grid runs nothing and succeeds.
        let (result, out) = run_divide(&dev, 64, 0, [0, 1, 1]);
        result.unwrap();
        assert!(out.iter().all(|&v| v == 0));
    }

    #[test]
    fn an_argument_mismatch_is_refused_before_launch() {
        let Some(dev) = device("an_argument_mismatch_is_refused_before_launch") else {
            return;
        };
        let kernel = passes_for(&dev, &divide_kernel(64));
        let key = CacheKey::new(kernelc_ir::stable_hash(&kernel).as_bytes(), "ptx", "test");
        let exe = Executable::Cuda(dev.compile(&kernel, &key, &DiskCache::off()).unwrap().0);
        let short = Arc::new(Storage::Cuda(dev.alloc(16).unwrap()));
        let launch = LaunchRef {
            exe: &exe,
            grid: [1, 1, 1],
            args: vec![
                BindingRef::Buffer(Slice::whole(&short)),
                BindingRef::Buffer(Slice::whole(&short)),
                BindingRef::Scalar(Scalar::I32(1)),
            ],
        };
        assert!(launch_message(dev.execute(&[launch])).contains("must have 256 bytes"));
    }

    #[test]
    fn ptx_isa_follows_the_driver() {
        assert_eq!(ptx_isa_for_driver(13_000), 90);
        assert_eq!(ptx_isa_for_driver(13_010), 90);
        assert_eq!(ptx_isa_for_driver(12_060), 85);
        assert_eq!(ptx_isa_for_driver(12_080), 87);
        assert_eq!(ptx_isa_for_driver(12_000), 80);
        assert_eq!(ptx_isa_for_driver(11_000), 70);
    }

    #[test]
    fn caps_cap_the_grid_and_static_shared_memory() {
        let props = DeviceProperties {
            name: "test".into(),
            sm: 90,
            driver_version: 13_000,
            warp_size: 32,
            shared_memory_per_block: 227 * 1024,
            opt_in_shared_memory_per_block: 227 * 1024,
            limits: LaunchLimits {
                max_threads_per_block: 1024,
                max_block: [1024, 1024, 64],
                max_grid: [i32::MAX as u32, 65_535, 65_535],
            },
        };
        let caps = props.caps();
        assert_eq!(caps.max_workgroups_per_dimension, 65_535);
        assert_eq!(caps.shared_memory_bytes, 48 * 1024);
        assert_eq!(caps.subgroup_size, Some(32));
        assert_eq!(caps.max_workgroup_size, [1024, 1024, 64]);
        assert!(caps.f16 && caps.bf16 && caps.f64 && caps.i64);
    }
}
