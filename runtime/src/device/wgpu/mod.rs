//! wgpu devices: Vulkan, Metal, DX12 (Mesa lavapipe with no GPU). Kernels reach wgpu
//! as WGSL text, as a naga module, or as kernelc's own SPIR-V (read by naga, or handed
//! to the Vulkan driver as is), per [`ShaderPath`].
//!
//! Every kernel gets an explicit bind-group layout from
//! [`kernelc_codegen::abi::ShaderLayout`]: buffers at their parameter index, the packed
//! scalar words, and one status word per launch that the kernel ORs run-time errors
//! into (read back once per op, after all its launches).
//!
//! wgpu reports most errors through error scopes rather than return values; every
//! call that can fail on user-controlled sizes or on emitted code runs inside a scope,
//! and a device-wide handler logs (instead of panicking on) anything that escapes.

mod float_controls;
mod module;
mod probe;

pub(crate) use module::ShaderCode;
pub use module::WgpuShaderModule;

use super::{next_device_id, Executable, Faults, LaunchRef, Storage};
use super::{BindingRef, ShaderPath, WgpuOptions};
use crate::cache::{CacheKey, DiskCache};
use crate::error::{Result, RuntimeError};
use crate::lock;
use crate::pool::Pool;
use kernelc_codegen::abi::{self, ParamSlot, ShaderLayout};
use kernelc_codegen::spirv::SpirvOptions;
use kernelc_codegen::{spirv, wgsl};
use kernelc_ir::args::{check_args, ArgShape};
use kernelc_ir::passes::MathExpansion;
use kernelc_ir::{Access, Kernel, Param, Scalar};
use kernelc_kernels::lower::TargetCaps;
use std::borrow::Cow;
use std::sync::{mpsc, Arc, Mutex};
use wgpu::util::DeviceExt;

/// Buffers are allocated in multiples of this many bytes (so the pool reuses them
/// across nearby sizes; also a multiple of wgpu's 4-byte copy alignment).
const ALLOCATION_GRANULE: u64 = 256;

/// Most freed buffer memory a wgpu device keeps for reuse (wgpu does not report the
/// adapter's memory size; the pool is cleared and the allocation retried whenever an
/// allocation fails).
const WGPU_POOL_CAP: usize = 4 << 30;

/// Status slots in the device's ring: launches queued between two checks (a full
/// ring is checked, which waits for the GPU, before more launches are queued).
const STATUS_SLOTS: usize = 1024;

/// The device's status words: one slot per launch submitted since the last check,
/// spaced by the binding-offset alignment, and the buffer they are read back through.
struct StatusRing {
    status: wgpu::Buffer,
    staging: wgpu::Buffer,
    stride: u64,
    /// The kernel of each used slot, in order.
    kernels: Vec<String>,
    /// Commands finished but not yet submitted: submitting in batches costs less
    /// per op. Everything that must come after them (host writes, copies, fills,
    /// reads, checks) submits them first (`Gpu::flush`).
    unsubmitted: Vec<wgpu::CommandBuffer>,
    /// The encoder ops are recorded into, one batch of up to [`SUBMIT_BATCH`] ops
    /// (one command buffer for all of them: creating and finishing an encoder per op
    /// cost more than the op), and the slot of its first launch.
    batch: Option<(wgpu::CommandEncoder, usize)>,
    /// Ops recorded into `batch`.
    batched_ops: usize,
}

/// Ops encoded before a batch is submitted.
const SUBMIT_BATCH: usize = 32;

/// The wgpu device and its queue, shared by the device and its buffers, with the
/// status words of launches submitted but not yet checked (launches are
/// asynchronous).
struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    name: String,
    ring: Mutex<StatusRing>,
    /// A failure found while checking outside a synchronising call (a full ring).
    faults: Faults,
}

impl Gpu {
    /// Waits for everything submitted, reads and clears the used status slots, and
    /// reports the first failed launch (or a failure kept earlier).
    fn check(&self) -> Result<()> {
        let mut ring = lock(&self.ring);
        let failure = self.check_ring(&mut ring);
        drop(ring);
        self.faults.take()?;
        failure
    }

    /// Submits the encoded ops, so that work queued after this runs after them.
    fn flush(&self) {
        let mut ring = lock(&self.ring);
        self.flush_ring(&mut ring);
    }

    fn flush_ring(&self, ring: &mut StatusRing) {
        self.close_batch(ring);
        if !ring.unsubmitted.is_empty() {
            self.queue.submit(ring.unsubmitted.drain(..));
        }
    }

    /// Finishes the batch encoder into a command buffer to submit. A batch wgpu
    /// rejects (which kernelc's own checks before recording should make impossible)
    /// is not submitted: the failure is kept for the next synchronising call, naming
    /// its kernels.
    fn close_batch(&self, ring: &mut StatusRing) {
        let Some((encoder, first)) = ring.batch.take() else {
            return;
        };
        ring.batched_ops = 0;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let commands = encoder.finish();
        match pollster::block_on(scope.pop()) {
            None => ring.unsubmitted.push(commands),
            Some(error) => self.faults.record(RuntimeError::Launch {
                device: self.name.clone(),
                kernel: ring.kernels.get(first..).unwrap_or_default().join(", "),
                message: format!("wgpu rejected the launches: {error}"),
                status: 0,
            }),
        }
    }

    fn check_ring(&self, ring: &mut StatusRing) -> Result<()> {
        self.flush_ring(ring);
        let error = |kernel: String, message: String| RuntimeError::Launch {
            device: self.name.clone(),
            kernel,
            message,
            status: 0,
        };
        if ring.kernels.is_empty() {
            return self
                .device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(|e| error(String::new(), format!("waiting for the GPU failed: {e}")));
        }
        let bytes = ring.kernels.len() as u64 * ring.stride;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("kernelc status"),
            });
        encoder.copy_buffer_to_buffer(&ring.status, 0, &ring.staging, 0, bytes);
        encoder.clear_buffer(&ring.status, 0, Some(bytes));
        self.queue.submit([encoder.finish()]);
        let kernels = std::mem::take(&mut ring.kernels);
        let mut words = vec![0u8; bytes as usize];
        map_read_into(self, &ring.staging, bytes, 0, &mut words)
            .map_err(|m| error(kernels.join(", "), m))?;
        let failed = kernels.into_iter().enumerate().find_map(|(i, kernel)| {
            let at = i * ring.stride as usize;
            let bits = u32::from_le_bytes(words.get(at..at + 4)?.try_into().ok()?);
            (bits != 0).then_some((kernel, bits))
        });
        match failed {
            Some((kernel, bits)) => Err(RuntimeError::Launch {
                device: self.name.clone(),
                kernel,
                message: abi::status::describe(bits),
                status: bits,
            }),
            None => Ok(()),
        }
    }
}

/// A zeroed status ring of `STATUS_SLOTS` slots `stride` bytes apart.
fn new_ring(device: &wgpu::Device, stride: u64) -> Result<StatusRing> {
    let size = STATUS_SLOTS as u64 * stride;
    let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let buffer = |label, usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let status = buffer(
        "kernelc status",
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
    );
    let staging = buffer(
        "kernelc status readback",
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(RuntimeError::NoDevice(format!(
            "cannot allocate the status words: {e}"
        )));
    }
    // wgpu zero-initialises new buffers.
    Ok(StatusRing {
        status,
        staging,
        stride,
        kernels: Vec::new(),
        unsubmitted: Vec::new(),
        batch: None,
        batched_ops: 0,
    })
}

/// A wgpu adapter opened for compute.
pub struct WgpuDevice {
    id: u64,
    gpu: Arc<Gpu>,
    path: ShaderPath,
    name: String,
    /// Adapter, driver and path: what emitted code and its compilation depend on.
    options_key: String,
    caps: TargetCaps,
    /// What kernelc's SPIR-V declares on the passthrough path (float controls the
    /// device honours); nothing on the paths through naga, which would drop it.
    spirv_options: SpirvOptions,
    /// Whether the driver's f64 `fma` rounds once (probed at open).
    fused_fma: bool,
    limits: wgpu::Limits,
    pool: Arc<Pool<wgpu::Buffer>>,
    /// Alignment of a storage-buffer binding offset (the status slots are spaced by
    /// it).
    status_stride: u64,
}

/// A compute pipeline with its layout.
pub struct WgpuKernel {
    name: String,
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    layout: ShaderLayout,
    /// The IR parameters, which every launch's arguments are checked against: the
    /// shader runs without wgpu's bounds checks and trusts each buffer to be as long as
    /// its parameter says.
    params: Vec<Param>,
    /// Recent bind groups by their buffer ranges (the status word is bound at a
    /// dynamic offset, so a group serves every op on the same buffers): creating one
    /// per op costs about as much as a small kernel. Holds the buffers alive while
    /// cached.
    bind_groups: Mutex<lru::LruCache<BindKey, wgpu::BindGroup>>,
}

/// A copy of an argument's range, made in the dispatch's encoder just before it.
struct Snapshot {
    source: wgpu::Buffer,
    offset: u64,
    size: u64,
    copy: wgpu::Buffer,
}

/// The buffer ranges a bind group binds, in binding order.
type BindKey = Vec<(wgpu::Buffer, u64, Option<wgpu::BufferSize>)>;

/// Bind groups kept per kernel.
const BIND_GROUPS_PER_KERNEL: std::num::NonZeroUsize = match std::num::NonZeroUsize::new(16) {
    Some(n) => n,
    None => std::num::NonZeroUsize::MIN,
};

/// A storage buffer; returned to the device's pool on drop.
pub struct WgpuStorage {
    buffer: Option<wgpu::Buffer>,
    /// Bytes the tensor uses (the buffer may be larger).
    bytes: usize,
    gpu: Arc<Gpu>,
    pool: Arc<Pool<wgpu::Buffer>>,
    device_id: u64,
    device_name: String,
}

impl WgpuDevice {
    /// Opens the best adapter that `options` allows: a discrete GPU before an
    /// integrated one before anything else, software adapters (lavapipe) only if
    /// allowed. `KERNELC_WGPU_ADAPTER=<text>` picks the first adapter whose name
    /// contains the text; `WGPU_BACKEND` restricts the backends as in wgpu.
    pub fn open(options: WgpuOptions) -> Result<WgpuDevice> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY),
            flags: wgpu::InstanceFlags::empty().with_env(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = pick_adapter(&instance, options)?;
        open_adapter(adapter, options.shader)
    }

    /// A hardware adapter, for `DeviceChoice::BestAvailable`.
    pub fn open_hardware() -> Result<WgpuDevice> {
        WgpuDevice::open(WgpuOptions {
            shader: ShaderPath::default(),
            allow_software: false,
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn name(&self) -> String {
        self.name.clone()
    }

    pub(crate) fn target_name(&self) -> &'static str {
        self.path.name()
    }

    pub(crate) fn target_options(&self) -> &str {
        &self.options_key
    }

    /// What the path's emitter needs expanded: every transcendental (Vulkan's and
    /// WGSL's own `exp`, `log`, `sin`, ... are allowed errors far above the tolerance
    /// table, e.g. `exp` 3 + 2|x| ULP; f64 ones where the SPIR-V paths have f64) and
    /// float `%` (theirs rounds).
    pub(crate) fn math_expansion(&self) -> MathExpansion {
        if self.path.is_spirv() {
            kernelc_codegen::spirv::required_expansion(self.caps.f64)
                .with_fused_fma(self.fused_fma)
                .with_opaque_sums(self.caps.may_contract)
        } else {
            kernelc_codegen::wgsl::required_expansion()
        }
    }

    pub(crate) fn caps(&self) -> TargetCaps {
        self.caps.clone()
    }

    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        self.pool.stats()
    }

    /// Storage ranges bind at multiples of the adapter's offset alignment (the status
    /// words are laid out by the same stride).
    pub(crate) fn binding_alignment(&self) -> usize {
        self.status_stride as usize
    }

    /// WebGPU's usage rules: a buffer bound writable in a dispatch may not also be
    /// bound read-only there.
    pub(crate) fn exclusive_writable_bindings(&self) -> bool {
        true
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<WgpuStorage> {
        let size = (bytes as u64)
            .max(1)
            .div_ceil(ALLOCATION_GRANULE)
            .saturating_mul(ALLOCATION_GRANULE);
        let too_large = || RuntimeError::OutOfMemory {
            device: self.name(),
            bytes: bytes as u64,
        };
        if size > self.limits.max_buffer_size || size > self.limits.max_storage_buffer_binding_size
        {
            return Err(too_large());
        }
        let buffer = self
            .pool
            .take(size as usize, || self.create_buffer(size).ok_or(()))
            .map_err(|()| too_large())?;
        Ok(WgpuStorage {
            buffer: Some(buffer),
            bytes,
            gpu: self.gpu.clone(),
            pool: self.pool.clone(),
            device_id: self.id,
            device_name: self.name(),
        })
    }

    /// A storage buffer of `size` bytes, or `None` if wgpu refuses (out of memory).
    fn create_buffer(&self, size: u64) -> Option<wgpu::Buffer> {
        let scope = self
            .gpu
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self
            .gpu
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kernelc tensor"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let invalid = pollster::block_on(validation.pop());
        let oom = pollster::block_on(scope.pop());
        match (invalid, oom) {
            (None, None) => Some(buffer),
            (a, b) => {
                tracing::warn!(error = ?a.or(b), size, "wgpu buffer allocation failed");
                None
            }
        }
    }

    /// Emits `kernel` along this device's shader path and builds its pipeline. The
    /// disk cache holds the emitted artifact (WGSL text or SPIR-V words); the naga-IR
    /// path has no artifact and always emits (emission is the cheap part).
    pub(crate) fn compile(
        &self,
        kernel: &Kernel,
        key: &CacheKey,
        disk: &DiskCache,
    ) -> std::result::Result<(WgpuKernel, bool), String> {
        let layout = ShaderLayout::of(kernel);
        self.check_binding_count(&layout)?;
        self.caps.check_workgroup(kernel)?;
        if let Some(artifact) = self.load_artifact(key, disk) {
            match self.build(kernel, &layout, artifact) {
                Ok(exe) => return Ok((exe, true)),
                Err(e) => tracing::warn!(error = %e, "cached shader rejected; recompiling"),
            }
        }
        let artifact = self.emit(&self.fit_loops(kernel)?)?;
        if let Some((kind, bytes)) = artifact.to_disk() {
            if let Err(e) = disk.store(key, kind, &bytes) {
                tracing::warn!(error = %e, "cannot write the kernel cache");
            }
        }
        Ok((self.build(kernel, &layout, artifact)?, false))
    }

    /// `kernel` within the device's loop budget, if it has one (the parameters, which
    /// the artifact is built against, are unchanged). The cache key need not say so:
    /// the budget follows from the driver, which the key names.
    fn fit_loops(&self, kernel: &Kernel) -> std::result::Result<Kernel, String> {
        let Some(iterations) = self.caps.max_loop_iterations else {
            return Ok(kernel.clone());
        };
        let budget = kernelc_ir::passes::LoopBudget {
            iterations,
            max_workgroups: [self.caps.max_workgroups_per_dimension; 3],
            max_unrolled_nodes: MAX_UNROLLED_NODES,
        };
        kernelc_ir::passes::fit_loop_budget(kernel, &budget)
            .map_err(|e| format!("{e} (the driver cuts longer loops short)"))
    }

    fn check_binding_count(&self, layout: &ShaderLayout) -> std::result::Result<(), String> {
        let buffers = layout.binding_count();
        let limit = self.limits.max_storage_buffers_per_shader_stage;
        if buffers > limit {
            return Err(format!(
                "the kernel binds {buffers} storage buffers; this adapter allows {limit}"
            ));
        }
        Ok(())
    }

    fn load_artifact(&self, key: &CacheKey, disk: &DiskCache) -> Option<Artifact> {
        match self.path {
            ShaderPath::Wgsl => disk
                .load(key, "wgsl")
                .and_then(|b| String::from_utf8(b).ok())
                .map(Artifact::Wgsl),
            ShaderPath::SpirvViaNaga | ShaderPath::SpirvPassthrough => disk
                .load(key, "spv")
                .and_then(|b| words_from_bytes(&b))
                .map(Artifact::Spirv),
            ShaderPath::NagaIr => None,
        }
    }

    fn emit(&self, kernel: &Kernel) -> std::result::Result<Artifact, String> {
        let artifact = match self.path {
            ShaderPath::Wgsl => Artifact::Wgsl(wgsl::wgsl_text(kernel).map_err(|e| e.to_string())?),
            ShaderPath::NagaIr => Artifact::Naga(Box::new(
                wgsl::emit_module(kernel).map_err(|e| e.to_string())?.0,
            )),
            ShaderPath::SpirvViaNaga | ShaderPath::SpirvPassthrough => Artifact::Spirv(
                spirv::emit_with(kernel, &self.spirv_options).map_err(|e| e.to_string())?,
            ),
        };
        Ok(artifact)
    }

    /// The shader module and pipeline, with wgpu's validation errors as `Err`.
    fn build(
        &self,
        kernel: &Kernel,
        layout: &ShaderLayout,
        artifact: Artifact,
    ) -> std::result::Result<WgpuKernel, String> {
        let device = &self.gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.shader_module(kernel, artifact);
        let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(&kernel.name),
            entries: &layout_entries(kernel, layout),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&kernel.name),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&kernel.name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(abi::ENTRY_POINT),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                // Kernels never read shared memory before writing it (the IR forbids
                // it), so zeroing it would be wasted work.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(format!(
                "wgpu rejected the {} shader: {error}",
                self.path.name()
            ));
        }
        Ok(WgpuKernel {
            bind_groups: Mutex::new(lru::LruCache::new(BIND_GROUPS_PER_KERNEL)),
            name: kernel.name.clone(),
            pipeline,
            bind_group_layout,
            layout: layout.clone(),
            params: kernel.params.clone(),
        })
    }

    fn shader_module(&self, kernel: &Kernel, artifact: Artifact) -> wgpu::ShaderModule {
        let device = &self.gpu.device;
        let label = Some(kernel.name.as_str());
        let source = match artifact {
            Artifact::Wgsl(text) => wgpu::ShaderSource::Wgsl(Cow::Owned(text)),
            Artifact::Naga(module) => wgpu::ShaderSource::Naga(Cow::Owned(*module)),
            Artifact::Spirv(words) if self.path == ShaderPath::SpirvPassthrough => {
                let [x, y, z] = kernel.workgroup_size;
                let desc = wgpu::ShaderModuleDescriptorPassthrough {
                    label,
                    entry_points: Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                        name: Cow::Borrowed(abi::ENTRY_POINT),
                        workgroup_size: (x, y, z),
                    }]),
                    spirv: Some(Cow::Owned(words)),
                    ..Default::default()
                };
                // SAFETY: the words come from kernelc's SPIR-V emitter for a validated
                // kernel (every catalogue kernel passes `spirv-val --target-env
                // vulkan1.1` in the emitter's tests). Its interface is exactly the
                // explicit pipeline layout built from the same `ShaderLayout`, its
                // entry point is `abi::ENTRY_POINT` with the kernel's workgroup size,
                // and every memory access it makes is bounds-checked or proven in
                // bounds, so skipping wgpu's own validation cannot let it touch memory
                // outside its bindings.
                return unsafe { device.create_shader_module_passthrough(desc) };
            }
            Artifact::Spirv(words) => wgpu::ShaderSource::SpirV(Cow::Owned(words)),
        };
        // SAFETY: the shader is kernelc's own output for a validated kernel. Every
        // memory access it makes is bounds- and alignment-checked by the emitter or
        // proven in bounds by `kernelc_ir::analysis` (see `kernelc_codegen::abi`), so
        // wgpu's second layer of bounds checks is redundant; and every loop is a
        // counted IR `For` whose bounds are evaluated once, so it terminates without
        // wgpu's loop bounding.
        unsafe {
            device.create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor { label, source },
                wgpu::ShaderRuntimeChecks::unchecked(),
            )
        }
    }

    /// Records every launch of an op into the batch encoder (one compute pass each,
    /// each with its status slot) and returns; the batch is submitted when full or
    /// when anything must follow it, and status words are read at the next check.
    pub(crate) fn execute(&self, launches: &[LaunchRef<'_>]) -> Result<()> {
        let kernels = launches
            .iter()
            .map(|l| match l.exe {
                Executable::Wgpu(k) => Ok(k),
                #[allow(unreachable_patterns)]
                _ => Err(super::foreign(&self.name, "kernel")),
            })
            .collect::<Result<Vec<_>>>()?;
        for (launch, kernel) in launches.iter().zip(&kernels) {
            self.check_args(kernel, launch)?;
            self.check_grid(kernel, launch.grid)?;
        }
        if launches.len() > STATUS_SLOTS {
            return Err(self.launch_error(
                &kernels,
                0,
                format!("more than {STATUS_SLOTS} launches in one op"),
            ));
        }
        // The ring stays locked until the op is submitted, so a check on another
        // thread never reads (and clears) slots whose launches are not queued yet.
        let mut ring = lock(&self.gpu.ring);
        if ring.kernels.len() + launches.len() > STATUS_SLOTS {
            // Full: check now (waiting for the queued launches) and keep a failure
            // for the next synchronising call.
            if let Err(e) = self.gpu.check_ring(&mut ring) {
                self.gpu.faults.record(e);
            }
        }
        let first = ring.kernels.len();
        let snapshots = launches
            .iter()
            .zip(&kernels)
            .map(|(launch, kernel)| self.snapshots(kernel, launch))
            .collect::<Result<Vec<_>>>()?;
        let bind_groups = launches
            .iter()
            .zip(&kernels)
            .zip(&snapshots)
            .map(|((launch, kernel), snaps)| {
                let scalars = self.scalar_buffer(kernel, &launch.args);
                self.bind_group(kernel, launch, scalars.as_ref(), &ring.status, snaps)
            })
            .collect::<Result<Vec<_>>>()?;
        let offsets = (first..first + launches.len())
            .map(|slot| u32::try_from(slot as u64 * self.status_stride))
            .collect::<std::result::Result<Vec<u32>, _>>()
            .map_err(|_| RuntimeError::Internal("status offset past u32".into()))?;
        let device = &self.gpu.device;
        let (encoder, _) = ring.batch.get_or_insert_with(|| {
            let encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("kernelc ops"),
            });
            (encoder, first)
        });
        for (((launch, kernel), (group, offset)), snaps) in launches
            .iter()
            .zip(&kernels)
            .zip(bind_groups.iter().zip(offsets))
            .zip(&snapshots)
        {
            for snap in snaps.iter().flatten() {
                encoder.copy_buffer_to_buffer(&snap.source, snap.offset, &snap.copy, 0, snap.size);
            }
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&kernel.name),
                timestamp_writes: None,
            });
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, group, &[offset]);
            let [x, y, z] = launch.grid;
            pass.dispatch_workgroups(x, y, z);
        }
        ring.kernels.extend(kernels.iter().map(|k| k.name.clone()));
        ring.batched_ops += 1;
        if ring.batched_ops >= SUBMIT_BATCH {
            self.gpu.flush_ring(&mut ring);
        }
        Ok(())
    }

    /// Waits for every submitted op and reports the first failed launch since the
    /// last report.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.gpu.check()
    }

    fn launch_error(&self, kernels: &[&WgpuKernel], index: usize, message: String) -> RuntimeError {
        RuntimeError::Launch {
            device: self.name(),
            kernel: kernels
                .get(index)
                .map_or_else(String::new, |k| k.name.clone()),
            message,
            status: 0,
        }
    }

    /// One argument per parameter, buffer for buffer (of this device, exactly as long
    /// as the parameter) and scalar for scalar of its type. The shader is built
    /// without wgpu's run-time checks (see `shader_module`), so a short buffer would
    /// let an access the emitter proved in bounds read or write past it.
    fn check_args(&self, kernel: &WgpuKernel, launch: &LaunchRef<'_>) -> Result<()> {
        let shapes = launch
            .args
            .iter()
            .map(|arg| match arg {
                BindingRef::Buffer(slice) => {
                    self.own_storage(slice.storage)?;
                    Ok(ArgShape::Buffer {
                        elem: None,
                        len: slice.bytes as u64,
                    })
                }
                BindingRef::Host(_) => Err(super::foreign(&self.name, "host memory")),
                BindingRef::Scalar(v) => Ok(ArgShape::Scalar(v.ty())),
            })
            .collect::<Result<Vec<_>>>()?;
        check_args(&kernel.name, &kernel.params, &shapes, "bytes", |e| {
            u64::from(e.size_bytes())
        })
        .map_err(|e| RuntimeError::Launch {
            device: self.name(),
            kernel: kernel.name.clone(),
            message: e.to_string(),
            status: 0,
        })
    }

    /// `storage` as a buffer of this device (not another wgpu device's).
    fn own_storage<'s>(&self, storage: &'s Storage) -> Result<&'s WgpuStorage> {
        match storage {
            Storage::Wgpu(s) if s.device_id == self.id => Ok(s),
            _ => Err(super::foreign(&self.name, "buffer")),
        }
    }

    fn check_grid(&self, kernel: &WgpuKernel, grid: [u32; 3]) -> Result<()> {
        self.caps
            .check_grid(grid)
            .map_err(|message| RuntimeError::Launch {
                device: self.name(),
                kernel: kernel.name.clone(),
                message,
                status: 0,
            })
    }

    fn scalar_buffer(&self, kernel: &WgpuKernel, args: &[BindingRef<'_>]) -> Option<wgpu::Buffer> {
        kernel.layout.scalar_binding?;
        let values: Vec<Option<Scalar>> = args
            .iter()
            .map(|a| match a {
                BindingRef::Scalar(s) => Some(*s),
                BindingRef::Buffer(_) | BindingRef::Host(_) => None,
            })
            .collect();
        let words = kernel.layout.encode_scalars(&values);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        Some(
            self.gpu
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("kernelc scalars"),
                    contents: &bytes,
                    usage: wgpu::BufferUsages::STORAGE,
                }),
        )
    }

    /// Per argument of `launch`: a copy to read it from, when the kernel reads it
    /// from a buffer it also writes (a piece of a split op updating its output in
    /// place: later blocks of a GEMM along k, a split table's gather). WebGPU forbids
    /// a buffer bound both read-only and writable in one dispatch; the copy, made just
    /// before it, holds what the kernel would have read, since each element is read
    /// before anything writes it.
    fn snapshots(
        &self,
        kernel: &WgpuKernel,
        launch: &LaunchRef<'_>,
    ) -> Result<Vec<Option<Snapshot>>> {
        let writes = |arg: &BindingRef<'_>, param: &Param| match (arg, param) {
            (BindingRef::Buffer(slice), Param::Buffer { access, .. })
                if *access != Access::Read =>
            {
                Some(slice.storage as *const Storage)
            }
            _ => None,
        };
        let written: Vec<*const Storage> = launch
            .args
            .iter()
            .zip(&kernel.params)
            .filter_map(|(arg, param)| writes(arg, param))
            .collect();
        launch
            .args
            .iter()
            .zip(&kernel.params)
            .map(|(arg, param)| match (arg, param) {
                (
                    BindingRef::Buffer(slice),
                    Param::Buffer {
                        access: Access::Read,
                        ..
                    },
                ) if written.contains(&(slice.storage as *const Storage)) => {
                    let source = self.own_storage(slice.storage)?.buffer()?.clone();
                    let size = (slice.bytes as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
                    let copy =
                        self.create_buffer(size)
                            .ok_or_else(|| RuntimeError::OutOfMemory {
                                device: self.name(),
                                bytes: size,
                            })?;
                    Ok(Some(Snapshot {
                        source,
                        offset: slice.offset as u64,
                        size,
                        copy,
                    }))
                }
                _ => Ok(None),
            })
            .collect()
    }

    /// The bind group of `launch`'s arguments (the status word at offset 0: the
    /// launch's slot is its dynamic offset), from the kernel's cache when it has no
    /// scalar block (a scalar buffer is made per launch) and reads no snapshot.
    fn bind_group(
        &self,
        kernel: &WgpuKernel,
        launch: &LaunchRef<'_>,
        scalars: Option<&wgpu::Buffer>,
        status: &wgpu::Buffer,
        snapshots: &[Option<Snapshot>],
    ) -> Result<wgpu::BindGroup> {
        let mut key: BindKey = Vec::with_capacity(launch.args.len());
        let mut bindings = Vec::with_capacity(launch.args.len());
        for ((slot, arg), snap) in kernel.layout.params.iter().zip(&launch.args).zip(snapshots) {
            if let (ParamSlot::Buffer { binding }, Some(snap)) = (slot, snap) {
                key.push((snap.copy.clone(), 0, wgpu::BufferSize::new(snap.size)));
                bindings.push(*binding);
                continue;
            }
            if let (ParamSlot::Buffer { binding }, BindingRef::Buffer(slice)) = (slot, arg) {
                let buffer = self.own_storage(slice.storage)?.buffer()?;
                if slice.offset % self.binding_alignment() != 0 {
                    return Err(RuntimeError::Internal(format!(
                        "{}: a storage range at offset {} is not bindable (alignment {})",
                        kernel.name,
                        slice.offset,
                        self.binding_alignment()
                    )));
                }
                // WebGPU binds whole words and no empty range: the size is rounded up
                // to a word (inside the allocation, which is granule-sized; the kernel
                // never reaches past its parameter's length), and a zero-byte slice
                // binds the buffer's first word, which its empty parameter never reads.
                let words = (slice.bytes as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
                let (offset, size) = match wgpu::BufferSize::new(words) {
                    Some(size) if slice.offset as u64 + words <= buffer.size() => {
                        (slice.offset as u64, Some(size))
                    }
                    Some(_) => (slice.offset as u64, None),
                    None => (0, wgpu::BufferSize::new(4)),
                };
                key.push((buffer.clone(), offset, size));
                bindings.push(*binding);
            }
        }
        let cacheable = scalars.is_none() && snapshots.iter().all(Option::is_none);
        if cacheable {
            if let Some(group) = lock(&kernel.bind_groups).get(&key) {
                return Ok(group.clone());
            }
        }
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = key
            .iter()
            .zip(&bindings)
            .map(|((buffer, offset, size), &binding)| wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: *offset,
                    size: *size,
                }),
            })
            .collect();
        if let (Some(binding), Some(buffer)) = (kernel.layout.scalar_binding, scalars) {
            entries.push(wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            });
        }
        entries.push(wgpu::BindGroupEntry {
            binding: kernel.layout.status_binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: status,
                offset: 0,
                size: wgpu::BufferSize::new(4),
            }),
        });
        let group = self
            .gpu
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&kernel.name),
                layout: &kernel.bind_group_layout,
                entries: &entries,
            });
        if cacheable {
            lock(&kernel.bind_groups).put(key, group.clone());
        }
        Ok(group)
    }
}

/// The adapter `options` asks for.
fn pick_adapter(instance: &wgpu::Instance, options: WgpuOptions) -> Result<wgpu::Adapter> {
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let wanted = std::env::var("KERNELC_WGPU_ADAPTER").ok();
    let mut candidates: Vec<wgpu::Adapter> = adapters
        .into_iter()
        .filter(|a| {
            let info = a.get_info();
            let software = info.device_type == wgpu::DeviceType::Cpu;
            let named = wanted.as_deref().is_none_or(|w| info.name.contains(w));
            named && (options.allow_software || !software)
        })
        .collect();
    candidates.sort_by_key(|a| adapter_rank(a.get_info().device_type));
    candidates.into_iter().next().ok_or_else(|| {
        RuntimeError::NoDevice(match wanted {
            Some(w) => format!("wgpu: no adapter named like `{w}` (KERNELC_WGPU_ADAPTER)"),
            None if options.allow_software => "wgpu: no adapter (install a Vulkan driver, or Mesa's lavapipe: mesa-vulkan-drivers)".into(),
            None => "wgpu: no hardware adapter".into(),
        })
    })
}

/// Lower is better: discrete, integrated, virtual, other, software.
fn adapter_rank(kind: wgpu::DeviceType) -> u8 {
    match kind {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// A device on `adapter` with every limit it offers and the features kernelc uses.
fn open_adapter(adapter: wgpu::Adapter, path: ShaderPath) -> Result<WgpuDevice> {
    let info = adapter.get_info();
    let offered = adapter.features();
    let mut features = wgpu::Features::empty();
    if offered.contains(wgpu::Features::SHADER_F16) {
        features |= wgpu::Features::SHADER_F16;
    }
    // Immediate data (SPIR-V push constants) for user shader modules.
    if offered.contains(wgpu::Features::IMMEDIATES) {
        features |= wgpu::Features::IMMEDIATES;
    }
    // f64 and i64 only through kernelc's SPIR-V (WGSL has neither). f64 needs i64 too:
    // kernelc's f64 math works on the bits as i64.
    let wide = wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64;
    if path.is_spirv() {
        if offered.contains(wgpu::Features::SHADER_INT64) {
            features |= wgpu::Features::SHADER_INT64;
        }
        if offered.contains(wide) {
            features |= wide;
        }
    }
    if path == ShaderPath::SpirvPassthrough {
        if !offered.contains(wgpu::Features::PASSTHROUGH_SHADERS) {
            return Err(RuntimeError::NoDevice(format!(
                "wgpu: {} ({:?}) cannot take SPIR-V passthrough shaders",
                info.name, info.backend
            )));
        }
        features |= wgpu::Features::PASSTHROUGH_SHADERS;
    }
    let spirv_options = match path {
        ShaderPath::SpirvPassthrough => float_controls::spirv_options(&adapter),
        ShaderPath::Wgsl | ShaderPath::NagaIr | ShaderPath::SpirvViaNaga => SpirvOptions::default(),
    };
    let limits = adapter.limits();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("kernelc"),
        required_features: features,
        required_limits: limits.clone(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .map_err(|e| RuntimeError::NoDevice(format!("wgpu: cannot open {}: {e}", info.name)))?;
    // Errors outside an error scope would otherwise panic inside wgpu.
    device.on_uncaptured_error(Arc::new(|error: wgpu::Error| {
        tracing::error!(%error, "uncaptured wgpu error");
    }));
    let name = format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
    let options_key = format!(
        "{} | {:?} | {} {} | {:04x}:{:04x} | {:?} | {:?}",
        path.name(),
        info.backend,
        info.driver,
        info.driver_info,
        info.vendor,
        info.device,
        features,
        spirv_options
    );
    let caps = caps_from(&limits, features, &info, path, &spirv_options);
    let status_stride = u64::from(limits.min_storage_buffer_offset_alignment).max(4);
    let mut opened = WgpuDevice {
        id: next_device_id(),
        gpu: Arc::new(Gpu {
            ring: Mutex::new(new_ring(&device, status_stride)?),
            device,
            queue,
            name: name.clone(),
            faults: Faults::default(),
        }),
        path,
        name,
        options_key,
        caps,
        spirv_options,
        status_stride,
        limits,
        // Keep freed buffers for reuse: a fresh buffer costs an allocation and wgpu's
        // zero-initialisation on first use, more than a memory-bound kernel.
        pool: Arc::new(Pool::with_cap(WGPU_POOL_CAP)),
        fused_fma: true,
    };
    opened.fused_fma = opened.probe_fused_fma();
    Ok(opened)
}

/// What lowering may use on this adapter: f16, f64 and i64 where the device was
/// opened with them (see `open_adapter`); bf16 memory never (neither WGSL nor kernelc's
/// SPIR-V stores it). And what arithmetic keeps on `path` with the float controls its
/// modules declare (`options`).
fn caps_from(
    limits: &wgpu::Limits,
    features: wgpu::Features,
    info: &wgpu::AdapterInfo,
    path: ShaderPath,
    options: &SpirvOptions,
) -> TargetCaps {
    let invocations = limits.max_compute_invocations_per_workgroup;
    let f64 = features.contains(wgpu::Features::SHADER_F64);
    let o = options;
    let llvmpipe = is_llvmpipe(info);
    // Subnormals survive where the module declares `DenormPreserve` for every width
    // (kernelc's SPIR-V on a device that reports it), and on llvmpipe, which does not
    // flush unless asked (the op fuzzer's wide cases hold it to that on CI).
    let declares_denormals = o.preserve_f32_denormals && (!f64 || o.preserve_f64_denormals);
    let declares_specials = o.preserve_f32_specials && (!f64 || o.preserve_f64_specials);
    TargetCaps {
        max_invocations_per_workgroup: invocations,
        max_workgroup_size: [
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_size_y,
            limits.max_compute_workgroup_size_z,
        ],
        max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
        shared_memory_bytes: limits.max_compute_workgroup_storage_size,
        preferred_invocations: invocations.min(256),
        subgroup_size: None,
        f16: features.contains(wgpu::Features::SHADER_F16),
        bf16: false,
        f64,
        i64: features.contains(wgpu::Features::SHADER_INT64),
        vector_width: 4,
        max_loop_iterations: llvmpipe.then_some(LLVMPIPE_LOOP_ITERATIONS),
        // llvmpipe's gallivm folds `x·0` with a literal zero (`x·select(c, s, 0)`, as
        // dropout forms) whatever the module declares: finite values only there.
        ieee_specials: declares_specials && declares_denormals && !llvmpipe,
        // Only kernelc's own SPIR-V marks every float operation `NoContraction`.
        may_contract: path != ShaderPath::SpirvPassthrough,
        keeps_subnormals: (path == ShaderPath::SpirvPassthrough && declares_denormals) || llvmpipe,
        max_kernel_elements: TargetCaps::MAX_KERNEL_ELEMENTS,
        binding_alignment: limits.min_storage_buffer_offset_alignment.max(4),
        // No cooperative matrices through wgpu: fragments are expanded.
        matrix_fragments: false,
        warpgroup_fragments: false,
        async_copies: false,
        opt_in_shared_memory_bytes: limits.max_compute_workgroup_storage_size,
        f64_m16_fragments: false,
        schedule: None,
    }
}

/// Whether the adapter is Mesa's llvmpipe (lavapipe on Vulkan).
fn is_llvmpipe(info: &wgpu::AdapterInfo) -> bool {
    let llvmpipe = |s: &str| s.to_ascii_lowercase().contains("llvmpipe");
    llvmpipe(&info.name) || llvmpipe(&info.driver)
}

/// Mesa's llvmpipe (lavapipe) gives each invocation 65,535 loop iterations, counted
/// over all its loops, and then exits every loop early without a word
/// (`LP_MAX_TGSI_LOOP_ITERATIONS`): kernels are fitted under that.
const LLVMPIPE_LOOP_ITERATIONS: u64 = 65_535;

/// The largest loop body the loop budget unrolls to (IR nodes): past it, shader
/// compilation grows slower than the loop it saves.
const MAX_UNROLLED_NODES: usize = 4096;

/// The bind-group layout entries of a kernel, matching what its shader declares.
fn layout_entries(kernel: &Kernel, layout: &ShaderLayout) -> Vec<wgpu::BindGroupLayoutEntry> {
    let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    // The status word moves with each launch's slot: a dynamic offset, so that bind
    // groups can be reused.
    let status = wgpu::BindGroupLayoutEntry {
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only: false },
            has_dynamic_offset: true,
            min_binding_size: wgpu::BufferSize::new(4),
        },
        ..storage(layout.status_binding, false)
    };
    let mut entries: Vec<_> = kernel
        .params
        .iter()
        .zip(&layout.params)
        .filter_map(|(param, slot)| match (param, slot) {
            (Param::Buffer { access, .. }, ParamSlot::Buffer { binding }) => {
                Some(storage(*binding, *access == Access::Read))
            }
            _ => None,
        })
        .collect();
    if let Some(binding) = layout.scalar_binding {
        entries.push(storage(binding, true));
    }
    entries.push(status);
    entries
}

/// What a kernel is handed to wgpu as.
enum Artifact {
    Wgsl(String),
    Naga(Box<wgpu::naga::Module>),
    Spirv(Vec<u32>),
}

impl Artifact {
    /// The disk-cache entry kind and bytes (the naga module is not stored).
    fn to_disk(&self) -> Option<(&'static str, Vec<u8>)> {
        match self {
            Artifact::Wgsl(text) => Some(("wgsl", text.as_bytes().to_vec())),
            Artifact::Spirv(words) => {
                Some(("spv", words.iter().flat_map(|w| w.to_le_bytes()).collect()))
            }
            Artifact::Naga(_) => None,
        }
    }
}

/// The first word of every SPIR-V module.
const SPIRV_MAGIC: u32 = 0x0723_0203;

/// The words of a stored SPIR-V module, or `None` if the bytes cannot be one (not
/// whole words, or no SPIR-V magic number: the passthrough path hands the words to the
/// driver unvalidated, so anything else in a cache file must not get that far).
fn words_from_bytes(bytes: &[u8]) -> Option<Vec<u32>> {
    if bytes.len() % 4 != 0 || bytes.is_empty() {
        return None;
    }
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (words.first() == Some(&SPIRV_MAGIC)).then_some(words)
}

/// Copies `size` bytes of `buffer` from `offset` to the host (waits for the GPU);
/// both are multiples of 4 and the range lies inside the buffer.
fn read_back(
    gpu: &Gpu,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> std::result::Result<Vec<u8>, String> {
    let mut out = vec![0u8; size as usize];
    read_back_into(gpu, buffer, offset, size, 0, &mut out)?;
    Ok(out)
}

/// As [`read_back`], writing bytes `from..from + out.len()` of the copied range into
/// `out` straight from the mapped staging buffer.
fn read_back_into(
    gpu: &Gpu,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
    from: usize,
    out: &mut [u8],
) -> std::result::Result<(), String> {
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("kernelc readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    gpu.queue.submit([encoder.finish()]);
    map_read_into(gpu, &staging, size, from, out)
}

/// Maps the first `size` bytes of `staging` once the GPU has finished what was
/// submitted (waits) and copies bytes `from..from + out.len()` of them into `out`.
fn map_read_into(
    gpu: &Gpu,
    staging: &wgpu::Buffer,
    size: u64,
    from: usize,
    out: &mut [u8],
) -> std::result::Result<(), String> {
    let (sender, receiver) = mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, ..size, move |result| {
        // The receiver lives until `recv` below returns; a failed send only means
        // it is gone, and then nobody needs the result.
        let _ = sender.send(result);
    });
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| format!("waiting for the GPU failed: {e}"))?;
    receiver
        .recv()
        .map_err(|_| "the GPU never answered the readback".to_string())?
        .map_err(|e| format!("cannot map the readback buffer: {e}"))?;
    {
        let mapped = staging
            .get_mapped_range(..size)
            .map_err(|e| format!("cannot read the readback buffer: {e}"))?;
        let bytes = mapped
            .get(from..from + out.len())
            .ok_or_else(|| "a readback past its staging range".to_string())?;
        out.copy_from_slice(bytes);
    }
    staging.unmap();
    Ok(())
}

impl WgpuStorage {
    fn buffer(&self) -> Result<&wgpu::Buffer> {
        self.buffer.as_ref().ok_or_else(|| {
            RuntimeError::BadArgument("a wgpu tensor used after its buffer was released".into())
        })
    }

    pub(crate) fn device_id(&self) -> u64 {
        self.device_id
    }

    pub(crate) fn device_name(&self) -> String {
        self.device_name.clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes
    }

    fn failure(&self, message: String) -> RuntimeError {
        RuntimeError::Launch {
            device: self.device_name.clone(),
            kernel: String::new(),
            message,
            status: 0,
        }
    }

    // The range methods get ranges inside the storage (`Storage` checks first). Copies
    // and writes on the GPU move whole 4-byte words (`COPY_BUFFER_ALIGNMENT`); a range
    // with other edges is widened to words, and a write patches the widened words
    // read back first, so bytes outside the range keep their values.

    pub(crate) fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.read_range_into(offset, &mut out)?;
        Ok(out)
    }

    pub(crate) fn read_range_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.read_unchecked(offset, out)?;
        // A read is a synchronising call: report a failed op not yet reported.
        self.gpu.check()
    }

    /// The bytes from `offset` into `out`, without reporting other ops' failures (for
    /// the runtime's own copies, which are no synchronising calls).
    fn read_unchecked(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.gpu.flush();
        let (start, end) = word_bounds(offset, out.len());
        let from = offset - start as usize;
        read_back_into(&self.gpu, self.buffer()?, start, end - start, from, out)
            .map_err(|m| self.failure(m))
    }

    pub(crate) fn write_range(&self, offset: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        // Queued writes run before the next submission's commands: submit the
        // encoded ops first, which may still read the old bytes.
        self.gpu.flush();
        let (start, end) = word_bounds(offset, data.len());
        let words = if start == offset as u64 && end == (offset + data.len()) as u64 {
            data.to_vec()
        } else {
            let mut words = read_back(&self.gpu, self.buffer()?, start, end - start)
                .map_err(|m| self.failure(m))?;
            let from = offset - start as usize;
            words[from..from + data.len()].copy_from_slice(data);
            words
        };
        self.gpu.queue.write_buffer(self.buffer()?, start, &words);
        Ok(())
    }

    pub(crate) fn fill_range(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        let aligned = offset % 4 == 0 && len % 4 == 0;
        self.gpu.flush();
        if byte == 0 && aligned && len > 0 {
            let mut encoder = self
                .gpu
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            encoder.clear_buffer(self.buffer()?, offset as u64, Some(len as u64));
            self.gpu.queue.submit([encoder.finish()]);
            return Ok(());
        }
        self.write_range(offset, &vec![byte; len])
    }

    pub(crate) fn copy_range(
        src: &WgpuStorage,
        src_offset: usize,
        dst: &WgpuStorage,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        dst.gpu.flush();
        let (a, b) = (src.buffer()?, dst.buffer()?);
        let overlapping = a == b && src_offset < dst_offset + len && dst_offset < src_offset + len;
        let aligned = src_offset % 4 == 0 && dst_offset % 4 == 0 && len % 4 == 0;
        if overlapping || !aligned {
            // WebGPU copies neither within overlapping ranges nor at unaligned edges:
            // through the host (read whole, then write: `memmove`'s result).
            let mut bytes = vec![0u8; len];
            src.read_unchecked(src_offset, &mut bytes)?;
            return dst.write_range(dst_offset, &bytes);
        }
        let mut encoder = dst
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        encoder.copy_buffer_to_buffer(a, src_offset as u64, b, dst_offset as u64, len as u64);
        dst.gpu.queue.submit([encoder.finish()]);
        Ok(())
    }
}

/// The 4-byte words `[start, end)` covering `len > 0` bytes from `offset`.
fn word_bounds(offset: usize, len: usize) -> (u64, u64) {
    let start = (offset as u64) & !(wgpu::COPY_BUFFER_ALIGNMENT - 1);
    let end = ((offset + len) as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    (start, end)
}

impl Drop for WgpuStorage {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.give(buffer.size() as usize, buffer);
        }
    }
}

#[cfg(test)]
mod tests;
