//! [`Runtime`]: runs ops on a device, JIT-compiling each kernel for the exact shapes it
//! is called with and caching the result.
//!
//! `run(spec, inputs)`: checks the inputs against the spec → lowers the spec for the
//! device's caps (plans are cached per spec) → compiles each launch's kernel through the
//! two-level cache → allocates fresh outputs → launches in order.

use crate::cache::{CacheKey, DiskCache, Lru, MemoryCache};
use crate::device::{BindingRef, Device, DeviceChoice, Executable, LaunchRef, Storage};
use crate::element::{device_bytes, f64_to_bytes, Element};
use crate::error::{Result, RuntimeError};
use crate::memory::FULL_ALIGNMENT;
use crate::options::RuntimeOptions;
use crate::registry::Registry;
use crate::tensor::Tensor;
use crate::tune::{Autotune, TuneRecord, Tuned};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::{passes, Param, ScalarType};
use kernelc_kernels::lower::{lower, Binding, Plan, Prefill, PrefillSource, TargetCaps};
use kernelc_kernels::spec::{OpSpec, TensorSig};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Counters of what the runtime did, for tests and tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Kernels compiled (cache misses at both levels).
    pub compiles: u64,
    /// Kernels found in the in-memory cache (including callers that waited for another
    /// thread's compile of the same key).
    pub memory_hits: u64,
    /// Kernels rebuilt from an artifact found on disk.
    pub disk_hits: u64,
    /// Launches issued.
    pub launches: u64,
    /// Buffers served from the device's pool (reused allocations).
    pub pool_reuses: u64,
    /// Buffers freshly allocated because the pool had no block of that size.
    pub pool_allocations: u64,
    /// Plans dropped from the in-memory plan cache to keep it at its bound.
    pub plan_evictions: u64,
    /// Kernels dropped from the in-memory kernel cache to keep it at its bound.
    pub kernel_evictions: u64,
    /// Files deleted from the disk cache to keep it at its bound.
    pub disk_evictions: u64,
    /// Plans held in memory now.
    pub plans_in_memory: u64,
    /// Compiled kernels held in memory now.
    pub kernels_in_memory: u64,
    /// Shape classes whose schedules were timed ([`crate::tune`]; a choice found in
    /// memory or on disk times nothing).
    pub tunings: u64,
    /// Wall time those tunings took, all together (µs).
    pub tuning_micros: u64,
}

#[derive(Default)]
struct Counters {
    compiles: AtomicU64,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    launches: AtomicU64,
    tunings: AtomicU64,
    tuning_micros: AtomicU64,
    /// The rate, in seconds per IR node (an `f64`'s bits), at which this runtime's
    /// last tuning compiled schedules: what a tuning whose heuristics' kernels were
    /// all in memory expects of its alternatives.
    node_cost: AtomicU64,
}

/// Largest single buffer a runtime allocates (requests past it are typed errors).
const DEFAULT_MAX_BUFFER_BYTES: u64 = 1 << 40;

/// Runs ops on one device.
pub struct Runtime {
    pub(crate) device: Device,
    caps: TargetCaps,
    /// Lowered plans with their compiled kernels, by structural spec
    /// ([`PlanKey`]): a repeated op, whatever its per-call values, skips lowering,
    /// hashing and the kernel cache entirely.
    prepared: Lru<PlanKey, Arc<Prepared>>,
    executables: MemoryCache<Executable, String>,
    disk: DiskCache,
    counters: Counters,
    max_buffer_bytes: u64,
    poison_outputs: bool,
    autotune: Autotune,
    tuning_budget: std::time::Duration,
    /// Tuned schedules by shape class ([`crate::tune`]).
    pub(crate) tunings: Mutex<HashMap<String, Arc<TuneRecord>>>,
    /// Held by every call that touches a [`crate::Buffer`]'s bytes (see
    /// [`crate::memory`]): one such call at a time.
    memory: Mutex<()>,
    registry: Mutex<Registry>,
}

impl Runtime {
    /// A runtime on the chosen device, with its caches configured from the
    /// environment: the disk cache by `KERNELC_CACHE_DIR`, `KERNELC_CACHE=off` and
    /// `KERNELC_CACHE_MAX_BYTES` ([`DiskCache::from_env`]), the memory caches by
    /// `KERNELC_PLAN_CACHE` and `KERNELC_KERNEL_CACHE`, autotuning by
    /// `KERNELC_AUTOTUNE` ([`RuntimeOptions::from_env`]).
    /// A malformed variable is a [`RuntimeError::BadArgument`] naming it.
    pub fn new(choice: DeviceChoice) -> Result<Runtime> {
        let disk = DiskCache::from_env().map_err(RuntimeError::BadArgument)?;
        let options = RuntimeOptions::from_env()?;
        Ok(Runtime::with_options(Device::open(choice)?, disk, options))
    }

    /// A CPU runtime configured from the environment as [`Runtime::new`] does; a
    /// malformed variable is logged (`tracing`) and its default used, since this
    /// constructor cannot fail.
    pub fn cpu() -> Runtime {
        let disk = DiskCache::from_env().unwrap_or_else(|e| {
            tracing::warn!("{e}; using the default disk cache");
            DiskCache::from_env_dir_only()
        });
        let options = RuntimeOptions::from_env().unwrap_or_else(|e| {
            tracing::warn!("{e}; using the default cache bounds");
            RuntimeOptions::default()
        });
        Runtime::with_options(Device::cpu(), disk, options)
    }

    /// A runtime on `device` with an explicit disk cache and the default options
    /// ([`RuntimeOptions::default`]: the environment is not read; autotuning on).
    pub fn with_device(device: Device, disk: DiskCache) -> Runtime {
        Runtime::with_options(device, disk, RuntimeOptions::default())
    }

    /// A runtime on `device` with an explicit disk cache and memory-cache bounds.
    pub fn with_options(device: Device, disk: DiskCache, options: RuntimeOptions) -> Runtime {
        let caps = device.caps();
        Runtime {
            device,
            caps,
            prepared: Lru::new(options.plan_cache_entries),
            executables: MemoryCache::new(options.kernel_cache_entries),
            disk,
            counters: Counters::default(),
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
            poison_outputs: false,
            autotune: options.autotune,
            tuning_budget: options.tuning_budget,
            tunings: Mutex::default(),
            memory: Mutex::new(()),
            registry: Mutex::new(Registry::default()),
        }
    }

    /// The device's name (`"cpu (x86_64, 2 threads)"`).
    pub fn device_name(&self) -> String {
        self.device.name()
    }

    /// The tier compiling a CPU device's kernels (`None` on other devices, or when
    /// `KERNELC_CPU_TIER` names none).
    pub fn cpu_tier(&self) -> Option<crate::device::CpuTier> {
        match &self.device {
            crate::device::Device::Cpu(d) => d.tier().ok(),
            // Every other device has no tier (without GPU features there is none).
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The math functions this device compiles through kernelc's own IR
    /// implementations (see `kernelc_ir::passes::math`).
    pub fn math_expansion(&self) -> passes::MathExpansion {
        self.device.math_expansion()
    }

    /// The target kernels are compiled for (`cpu`, `wgsl`, `naga`, `spirv`,
    /// `spirv-naga`, `ptx`).
    pub fn target_name(&self) -> &'static str {
        self.device.target_name()
    }

    pub fn caps(&self) -> &TargetCaps {
        &self.caps
    }

    pub fn disk_cache(&self) -> &DiskCache {
        &self.disk
    }

    /// Deletes every file of the disk cache; returns how many were deleted. Kernels
    /// already in memory stay usable.
    pub fn clear_disk_cache(&self) -> Result<usize> {
        self.disk
            .clear()
            .map_err(|e| RuntimeError::BadArgument(format!("cannot clear the disk cache: {e}")))
    }

    /// Drops every plan and kernel held in memory (the next call of each op lowers
    /// and compiles again, or rebuilds from the disk cache).
    pub fn clear_memory_caches(&self) {
        self.prepared.clear();
        self.executables.clear();
    }

    /// Waits for every op queued on the device and reports the first one that failed
    /// since the last report (a kernel's run-time error: an out-of-bounds index, a
    /// division by zero), naming its kernel. Ops return once queued; reading a
    /// tensor, buffer or view synchronises too.
    pub fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let (pool_reuses, pool_allocations) = self.device.pool_stats();
        Stats {
            compiles: c.compiles.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            launches: c.launches.load(Ordering::Relaxed),
            pool_reuses,
            pool_allocations,
            plan_evictions: self.prepared.evictions(),
            kernel_evictions: self.executables.evictions(),
            disk_evictions: self.disk.evictions(),
            plans_in_memory: self.prepared.len() as u64,
            kernels_in_memory: self.executables.len() as u64,
            tunings: c.tunings.load(Ordering::Relaxed),
            tuning_micros: c.tuning_micros.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_tuning(&self, micros: u64) {
        self.counters.tunings.fetch_add(1, Ordering::Relaxed);
        self.counters
            .tuning_micros
            .fetch_add(micros, Ordering::Relaxed);
    }

    /// The rate (seconds per IR node) at which this runtime's last tuning compiled
    /// schedules (zero before any).
    pub(crate) fn remembered_node_cost(&self) -> f64 {
        f64::from_bits(self.counters.node_cost.load(Ordering::Relaxed))
    }

    /// Records that a tuning compiled schedules at `seconds_per_node`.
    pub(crate) fn remember_node_cost(&self, seconds_per_node: f64) {
        if seconds_per_node.is_finite() && seconds_per_node > 0.0 {
            self.counters
                .node_cost
                .store(seconds_per_node.to_bits(), Ordering::Relaxed);
        }
    }

    /// Kernels compiled or loaded from the disk cache so far (memory hits not).
    pub(crate) fn kernels_compiled_or_loaded(&self) -> u64 {
        self.counters.compiles.load(Ordering::Relaxed)
            + self.counters.disk_hits.load(Ordering::Relaxed)
    }

    /// Whether new shape classes are tuned ([`crate::tune`]).
    pub fn autotune(&self) -> Autotune {
        self.autotune
    }

    /// Turns autotuning on or off (`KERNELC_AUTOTUNE` sets the default). Plans
    /// already prepared keep their schedule.
    pub fn set_autotune(&mut self, autotune: Autotune) {
        self.autotune = autotune;
    }

    /// Wall time one shape class's tuning may take ([`crate::tune`]).
    pub fn tuning_budget(&self) -> std::time::Duration {
        self.tuning_budget
    }

    /// Sets the tuning budget (`KERNELC_TUNING_BUDGET` sets the default, in
    /// milliseconds); classes tuned already keep their choice.
    pub fn set_tuning_budget(&mut self, budget: std::time::Duration) {
        self.tuning_budget = budget;
    }

    /// Lowers every op with the schedule `name` wherever lowering offers it (one of
    /// a plan's `tunable.choices`), in place of the heuristics' or a tuned choice;
    /// `None` returns the choice to them. For experiments and tests that run each
    /// schedule; clears the memory caches, whose plans were lowered otherwise.
    pub fn set_schedule(&mut self, name: Option<String>) {
        self.caps.schedule = name;
        self.clear_memory_caches();
    }

    /// Drops `spec`'s prepared plans (both alignments), so that its next call lowers
    /// again (after tuning changed its schedule).
    pub(crate) fn forget_plan(&self, spec: &OpSpec) -> Result<()> {
        for alignment in [FULL_ALIGNMENT, 1] {
            self.prepared
                .remove_if(&PlanKey::aligned(spec, alignment)?, |_| true);
        }
        Ok(())
    }

    /// Fills every output with 0xFF bytes (NaN for floats) before the kernels run, so
    /// that an element no kernel writes is visible (the conformance harness uses it).
    pub fn set_poison_outputs(&mut self, on: bool) {
        self.poison_outputs = on;
    }

    /// Caps the size of any one buffer (the default is 1 TiB).
    pub fn set_max_buffer_bytes(&mut self, bytes: u64) {
        self.max_buffer_bytes = bytes;
    }

    /// The most elements one kernel indexes (default and greatest
    /// [`TargetCaps::MAX_KERNEL_ELEMENTS`], least
    /// [`PIECE_ALIGNMENT`](kernelc_kernels::lower::split::PIECE_ALIGNMENT)): larger
    /// tensors are split into pieces at lowering, or refused by ops that do not split.
    /// Lower it to run the pieces with small tensors (tests do). Clears the plan
    /// cache, whose plans were lowered for the old limit.
    pub fn set_max_kernel_elements(&mut self, elements: u64) {
        use kernelc_kernels::lower::split::PIECE_ALIGNMENT;
        self.caps.max_kernel_elements =
            elements.clamp(PIECE_ALIGNMENT, TargetCaps::MAX_KERNEL_ELEMENTS);
        self.clear_memory_caches();
    }

    /// The memory lock (see the `memory` field); a panic while it was held leaves no
    /// state behind it to repair, so a poisoned lock is taken as it is.
    pub(crate) fn lock_memory(&self) -> MutexGuard<'_, ()> {
        crate::lock(&self.memory)
    }

    /// The pointer registry (see [`crate::registry`]); poisoning as for the memory
    /// lock.
    pub(crate) fn lock_registry(&self) -> MutexGuard<'_, Registry> {
        crate::lock(&self.registry)
    }

    /// A single allocation of `bytes` bytes against the runtime's limit.
    pub(crate) fn check_buffer_size(&self, bytes: usize) -> Result<()> {
        if bytes as u64 <= self.max_buffer_bytes && bytes <= isize::MAX as usize {
            Ok(())
        } else {
            Err(RuntimeError::BufferTooLarge {
                bytes: bytes as u64,
                limit: self.max_buffer_bytes,
            })
        }
    }

    fn byte_len(&self, shape: &[usize], dtype: ScalarType) -> Result<usize> {
        let elements = shape
            .iter()
            .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
        let bytes = elements.and_then(|n| n.checked_mul(dtype.size_bytes() as u128));
        match bytes {
            Some(b) if b <= self.max_buffer_bytes as u128 && b <= isize::MAX as u128 => {
                Ok(b as usize)
            }
            _ => Err(RuntimeError::TooLarge {
                shape: shape.to_vec(),
                dtype,
                bytes: bytes.unwrap_or(u128::MAX),
                limit: self.max_buffer_bytes,
            }),
        }
    }

    fn alloc(&self, shape: &[usize], dtype: ScalarType) -> Result<Tensor> {
        let bytes = self.byte_len(shape, dtype)?;
        Ok(Tensor {
            shape: shape.to_vec(),
            dtype,
            storage: Arc::new(self.device.alloc(bytes)?),
        })
    }

    /// Uploads `data` as a tensor of `shape`.
    pub fn tensor<T: Element>(&self, shape: &[usize], data: &[T]) -> Result<Tensor> {
        let tensor = self.check_data_len(shape, T::DTYPE, data.len())?;
        tensor.storage.write_bytes(&device_bytes(data))?;
        Ok(tensor)
    }

    /// Uploads raw little-endian device bytes (bool as u32 words) as a tensor.
    pub fn tensor_from_bytes(
        &self,
        shape: &[usize],
        dtype: ScalarType,
        bytes: &[u8],
    ) -> Result<Tensor> {
        let tensor =
            self.check_data_len(shape, dtype, bytes.len() / dtype.size_bytes() as usize)?;
        if bytes.len() % dtype.size_bytes() as usize != 0 {
            return Err(RuntimeError::BadArgument(format!(
                "{} bytes is not a whole number of {dtype} elements",
                bytes.len()
            )));
        }
        tensor.storage.write_bytes(bytes)?;
        Ok(tensor)
    }

    /// Uploads f64 values converted to `dtype` (rounded to nearest, integers saturating).
    pub fn tensor_from_f64(
        &self,
        shape: &[usize],
        dtype: ScalarType,
        data: &[f64],
    ) -> Result<Tensor> {
        let tensor = self.check_data_len(shape, dtype, data.len())?;
        tensor.storage.write_bytes(&f64_to_bytes(dtype, data))?;
        Ok(tensor)
    }

    fn check_data_len(&self, shape: &[usize], dtype: ScalarType, found: usize) -> Result<Tensor> {
        let tensor = self.alloc(shape, dtype)?;
        if tensor.numel() != found {
            return Err(RuntimeError::DataLength {
                shape: shape.to_vec(),
                expected: tensor.numel(),
                found,
            });
        }
        Ok(tensor)
    }

    /// A tensor of zeros.
    pub fn zeros(&self, shape: &[usize], dtype: ScalarType) -> Result<Tensor> {
        let tensor = self.alloc(shape, dtype)?;
        tensor.storage.fill_zero()?;
        Ok(tensor)
    }

    /// Runs one op: checks `inputs` against the spec, JIT-compiles (or reuses) its
    /// kernels for these shapes, and returns fresh output tensors in `spec.outputs()`
    /// order.
    pub fn run(&self, spec: &OpSpec, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        // Per-call values can make a spec invalid without changing its key: every call
        // is validated.
        spec.validate()?;
        let prepared = self.prepared(spec, FULL_ALIGNMENT, || {
            self.check_inputs(&spec.name(), &spec.inputs(), inputs)
        })?;
        self.check_inputs(&prepared.name, &prepared.inputs, inputs)?;
        let outputs = prepared
            .outputs
            .iter()
            .map(|s| self.alloc(&s.shape, s.dtype))
            .collect::<Result<Vec<_>>>()?;
        if self.poison_outputs {
            for t in &outputs {
                t.storage.fill(0xFF)?;
            }
        }
        let input_args: Vec<_> = inputs.iter().map(|t| t.binding()).collect();
        let output_args: Vec<_> = outputs.iter().map(|t| t.binding()).collect();
        self.launch_prepared(spec, &prepared, &input_args, &output_args)?;
        Ok(outputs)
    }

    /// The prepared plan of `spec` for views of `alignment` (a power of two up to
    /// [`FULL_ALIGNMENT`]), from the plan cache or lowered and compiled now; `on_miss`
    /// runs first on a miss (checks that should fail before any lowering).
    pub(crate) fn prepared(
        &self,
        spec: &OpSpec,
        alignment: usize,
        on_miss: impl FnOnce() -> Result<()>,
    ) -> Result<Arc<Prepared>> {
        let key = PlanKey::aligned(spec, alignment)?;
        if let Some(prepared) = self.cached(&key) {
            return Ok(prepared);
        }
        on_miss()?;
        self.prepare_new(key, spec, &self.caps_for(alignment))
    }

    /// The caps plans are lowered with for views of `alignment` bytes: below
    /// [`FULL_ALIGNMENT`], vectors no wider than one 4-byte word (`vector_width` 1),
    /// since some lowerings size vectors in elements of the op's dtype (2 × f64 would
    /// need 16) and emitters declare the vector's own alignment.
    fn caps_for(&self, alignment: usize) -> TargetCaps {
        let mut caps = self.caps.clone();
        if alignment < FULL_ALIGNMENT {
            caps.vector_width = 1;
        }
        caps
    }

    /// Runs `prepared`'s launches with `spec`'s per-call values on the bound inputs
    /// and outputs (in the spec's order), with fresh temporaries.
    pub(crate) fn launch_prepared(
        &self,
        spec: &OpSpec,
        prepared: &Prepared,
        inputs: &[BindingRef<'_>],
        outputs: &[BindingRef<'_>],
    ) -> Result<()> {
        let uniforms = spec.uniforms();
        if uniforms.len() != prepared.uniform_types.len()
            || uniforms
                .iter()
                .zip(&prepared.uniform_types)
                .any(|(u, &ty)| u.value.ty() != ty)
        {
            return Err(RuntimeError::Internal(format!(
                "{}: per-call values {uniforms:?} do not fit the plan's {:?}",
                spec.name(),
                prepared.uniform_types
            )));
        }
        let plan = &prepared.plan;
        tracing::trace!(op = %spec.name(), launches = plan.launches.len(), "launch");
        for fill in &plan.prefills {
            self.prefill(spec, fill, inputs, outputs)?;
        }
        let temps = plan
            .temps
            .iter()
            .map(|t| self.alloc(&[t.len as usize], t.dtype))
            .collect::<Result<Vec<_>>>()?;
        let mut launches = Vec::with_capacity(plan.launches.len());
        for (launch, exe) in plan.launches.iter().zip(&prepared.executables) {
            let whole = |b: &Binding| match b {
                Binding::Input(i) => inputs.get(*i).copied(),
                Binding::Output(i) => outputs.get(*i).copied(),
                Binding::Temp(i) => temps.get(*i).map(|t| t.binding()),
                Binding::Scalar(s) => Some(BindingRef::Scalar(*s)),
                Binding::Uniform(i) => uniforms.get(*i).map(|u| BindingRef::Scalar(u.value)),
                Binding::Part { .. } => None,
            };
            let args: Vec<BindingRef<'_>> = launch
                .bindings
                .iter()
                .zip(&launch.kernel.params)
                .map(|(b, param)| match (b, param) {
                    (Binding::Part { of, start }, Param::Buffer { elem, len, .. }) => {
                        let size = elem.size_bytes() as u64;
                        let start = usize::try_from(start.checked_mul(size)?).ok()?;
                        let bytes = usize::try_from(len.checked_mul(size)?).ok()?;
                        whole(&of.binding())?.part(start, bytes)
                    }
                    (Binding::Part { .. }, Param::Scalar { .. }) => None,
                    (b, _) => whole(b),
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RuntimeError::Launch {
                    device: self.device_name(),
                    kernel: launch.kernel.name.clone(),
                    message: "the plan binds a buffer the op does not have".into(),
                    status: 0,
                })?;
            launches.push(LaunchRef {
                exe,
                grid: launch.grid,
                args,
            });
        }
        self.device.execute(&launches)?;
        self.count_launches(launches.len());
        Ok(())
    }

    /// Writes one of a plan's prefills into its output, in stream order with the
    /// launches (a device write or copy; no kernel).
    fn prefill(
        &self,
        spec: &OpSpec,
        fill: &Prefill,
        inputs: &[BindingRef<'_>],
        outputs: &[BindingRef<'_>],
    ) -> Result<()> {
        let bad = |what: &str| RuntimeError::Internal(format!("{}: a prefill {what}", spec.name()));
        let sig = spec
            .outputs()
            .into_iter()
            .nth(fill.output)
            .ok_or_else(|| bad("names no output"))?;
        let out = outputs
            .get(fill.output)
            .ok_or_else(|| bad("names no output"))?;
        let bytes = match &fill.source {
            PrefillSource::Value(v) => HostBuffer::new(sig.dtype, vec![*v; sig.numel()]).to_bytes(),
            PrefillSource::Input(i) => match (inputs.get(*i), out) {
                (Some(BindingRef::Buffer(src)), BindingRef::Buffer(dst))
                    if src.bytes == dst.bytes =>
                {
                    return Storage::copy_range(
                        src.storage,
                        src.offset,
                        dst.storage,
                        dst.offset,
                        dst.bytes,
                    );
                }
                (Some(BindingRef::Buffer(src)), _) => {
                    src.storage.read_range(src.offset, src.bytes)?
                }
                (Some(BindingRef::Host(src)), _) => {
                    // SAFETY: a host range points at `bytes` initialised bytes borrowed
                    // for the call (`HostRange::read_only`/`writable`), not written while
                    // this shared view of them lives.
                    unsafe { std::slice::from_raw_parts(src.ptr(), src.bytes()) }.to_vec()
                }
                (Some(BindingRef::Scalar(_)) | None, _) => {
                    return Err(bad("copies a missing input"))
                }
            },
        };
        match out {
            BindingRef::Buffer(dst) if dst.bytes == bytes.len() => {
                dst.storage.write_range(dst.offset, &bytes)
            }
            BindingRef::Host(dst) if dst.is_writable() && dst.bytes() == bytes.len() => {
                // SAFETY: a writable host range is the caller's `&mut [u8]` of `bytes`
                // bytes borrowed for the call; nothing else reads or writes it meanwhile
                // (the CPU device runs launches after this, on the same thread's call).
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.ptr(), bytes.len()) };
                Ok(())
            }
            BindingRef::Buffer(_) | BindingRef::Host(_) | BindingRef::Scalar(_) => {
                Err(bad("does not fit its output"))
            }
        }
    }

    pub(crate) fn count_launches(&self, n: usize) {
        self.counters
            .launches
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The device instance's id (tells this runtime's objects from another's).
    pub(crate) fn device_id(&self) -> u64 {
        self.device.id()
    }

    fn check_inputs(&self, op: &str, sigs: &[TensorSig], inputs: &[&Tensor]) -> Result<()> {
        for tensor in inputs {
            if !self.device.owns(&tensor.storage) {
                return Err(RuntimeError::WrongDevice {
                    tensor_device: tensor.device_name(),
                    runtime_device: self.device_name(),
                });
            }
        }
        let described: Vec<_> = inputs.iter().map(|t| (t.dtype, t.shape())).collect();
        check_operands(op, Role::Input, sigs, &described)
    }

    /// The lowered plan of `spec` for this device, with the tuned schedule of its
    /// shape class where one is stored (compiles and times nothing). Its
    /// [`Binding::Uniform`] parameters take `spec.uniforms()` at launch.
    pub fn plan(&self, spec: &OpSpec) -> Result<Arc<Plan>> {
        let key = PlanKey::of(spec)?;
        if let Some(p) = self.prepared.get(&key) {
            return Ok(p.plan.clone());
        }
        let plan = self.lower(&spec.structural(), &self.caps)?;
        Ok(match self.tuned_plan(spec, &self.caps, plan, false)? {
            Tuned::Plan(plan) => plan,
            Tuned::Prepared(prepared) => prepared.plan,
        })
    }

    pub(crate) fn lower(&self, spec: &OpSpec, caps: &TargetCaps) -> Result<Arc<Plan>> {
        Ok(Arc::new(lower(spec, caps).map_err(|source| {
            RuntimeError::Lower {
                device: format!("{} [{}]", self.device_name(), self.target_name()),
                source: Box::new(source),
            }
        })?))
    }

    /// The prepared plan of a spec key, counting its kernels as memory hits.
    fn cached(&self, key: &PlanKey) -> Option<Arc<Prepared>> {
        let prepared = self.prepared.get(key)?;
        self.counters
            .memory_hits
            .fetch_add(prepared.executables.len() as u64, Ordering::Relaxed);
        Some(prepared)
    }

    /// Lowers and compiles `spec` (a validated spec, not yet prepared) for `caps`.
    fn prepare_new(&self, key: PlanKey, spec: &OpSpec, caps: &TargetCaps) -> Result<Arc<Prepared>> {
        // Lowering sees only the structural spec, so the plan serves every per-call
        // value (kernelc-kernels checks that lowering never reads them).
        let structural = spec.structural();
        let plan = self.lower(&structural, caps)?;
        let prepared = match self.tuned_plan(spec, caps, plan.clone(), true)? {
            Tuned::Prepared(prepared) => prepared,
            Tuned::Plan(tuned) => match self.prepare_plan(tuned.clone(), &structural) {
                Ok(prepared) => prepared,
                // A stored schedule that does not compile here leaves the heuristics'.
                Err(e) if !Arc::ptr_eq(&tuned, &plan) => {
                    tracing::warn!(error = %e, "the tuned schedule does not compile; the heuristics' serves");
                    self.prepare_plan(plan, &structural)?
                }
                Err(e) => return Err(e),
            },
        };
        let prepared = Arc::new(prepared);
        self.prepared.insert(key, prepared.clone());
        Ok(prepared)
    }

    /// `plan` (lowered from the structural spec `structural`) with its kernels
    /// compiled.
    pub(crate) fn prepare_plan(&self, plan: Arc<Plan>, structural: &OpSpec) -> Result<Prepared> {
        // The IR passes (unrolling, folding, index simplification) run once per kernel,
        // before hashing and compiling; they preserve meaning exactly.
        let executables = plan
            .launches
            .iter()
            .map(|l| self.executable(&self.target_ir(&l.kernel)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Prepared {
            plan,
            executables,
            name: structural.name(),
            inputs: structural.inputs(),
            outputs: structural.outputs(),
            uniform_types: structural.uniforms().iter().map(|u| u.value.ty()).collect(),
        })
    }

    /// The kernel as this device compiles it (see [`passes::for_target`]).
    pub(crate) fn target_ir(&self, kernel: &kernelc_ir::Kernel) -> kernelc_ir::Kernel {
        passes::for_target(kernel, &self.device.math_expansion())
    }

    /// The compiled kernel, from memory, from disk, or compiled now (once per key even
    /// under concurrent requests).
    pub fn executable(&self, kernel: &kernelc_ir::Kernel) -> Result<Arc<Executable>> {
        let key = CacheKey::new(
            kernelc_ir::stable_hash(kernel).as_bytes(),
            self.device.target_name(),
            self.device.target_options(),
        );
        if let Some(exe) = self.executables.get(&key) {
            tracing::trace!(kernel = %kernel.name, "kernel from memory");
            self.counters.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(exe);
        }
        // Several threads may miss above at once; exactly one runs the closure, the
        // others wait for its result and count as memory hits.
        let mut compiled_here = false;
        let result = self
            .executables
            .get_or_compile(key, || {
                compiled_here = true;
                let started = Instant::now();
                if crate::cache::dump_dir().is_some() {
                    let text = kernelc_ir::print::print(kernel);
                    // The kernel's name as a file name: its exported symbol.
                    let name = kernelc_codegen::cpu::symbol_name(kernel);
                    let suffix = format!("{name}.ir");
                    crate::cache::dump_file(&key, &suffix, text.as_bytes());
                }
                let (exe, from_disk) = self.device.compile(kernel, &key, &self.disk)?;
                let counter = if from_disk {
                    &self.counters.disk_hits
                } else {
                    &self.counters.compiles
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    kernel = %kernel.name,
                    from_disk,
                    micros = started.elapsed().as_micros() as u64,
                    "kernel ready"
                );
                Ok(exe)
            })
            .map_err(|message| RuntimeError::Compile {
                device: self.device_name(),
                kernel: kernel.name.clone(),
                message,
            });
        if result.is_ok() && !compiled_here {
            self.counters.memory_hits.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// Which side of an op operands are on (for the error that names them).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Input,
    Output,
}

/// Operands given as (dtype, shape) against the spec's signatures of one role: count,
/// dtype, shape. The one check behind `run`, `run_into` and `run_host`.
pub(crate) fn check_operands(
    op: &str,
    role: Role,
    sigs: &[TensorSig],
    operands: &[(ScalarType, &[usize])],
) -> Result<()> {
    let input = role == Role::Input;
    if sigs.len() != operands.len() {
        let (expected, found, op) = (sigs.len(), operands.len(), op.to_string());
        return Err(if input {
            RuntimeError::InputCount {
                op,
                expected,
                found,
            }
        } else {
            RuntimeError::OutputCount {
                op,
                expected,
                found,
            }
        });
    }
    for (sig, &(dtype, shape)) in sigs.iter().zip(operands) {
        let (op, name) = (op.to_string(), sig.name.clone());
        if dtype != sig.dtype {
            let (expected, found) = (sig.dtype, dtype);
            return Err(if input {
                RuntimeError::InputDtype {
                    op,
                    input: name,
                    expected,
                    found,
                }
            } else {
                RuntimeError::OutputDtype {
                    op,
                    output: name,
                    expected,
                    found,
                }
            });
        }
        if !fits_shape(shape, &sig.shape) {
            let (expected, found) = (sig.shape.clone(), shape.to_vec());
            return Err(if input {
                RuntimeError::InputShape {
                    op,
                    input: name,
                    expected,
                    found,
                }
            } else {
                RuntimeError::OutputShape {
                    op,
                    output: name,
                    expected,
                    found,
                }
            });
        }
    }
    Ok(())
}

/// Whether an operand of shape `found` serves a parameter of shape `expected`: equal,
/// or equal up to 1s (a [n] tensor for a [1, n] input: same elements, same row-major
/// order).
pub(crate) fn fits_shape(found: &[usize], expected: &[usize]) -> bool {
    let numel = |s: &[usize]| s.iter().product::<usize>();
    found == expected || (numel(found) == numel(expected) && same_elements(found, expected))
}

fn same_elements(found: &[usize], expected: &[usize]) -> bool {
    let strip = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    strip(found) == strip(expected)
}

/// A lowered plan with one compiled kernel per launch.
pub(crate) struct Prepared {
    pub(crate) plan: Arc<Plan>,
    executables: Vec<Arc<Executable>>,
    name: String,
    inputs: Vec<TensorSig>,
    outputs: Vec<TensorSig>,
    /// The types of the spec's per-call values, in binding order.
    uniform_types: Vec<ScalarType>,
}

/// The plan cache's key: blake3 of the structural spec ([`OpSpec::structural`]) in
/// CBOR, which writes every float exactly (JSON would write ±∞ as `null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlanKey([u8; 32]);

impl PlanKey {
    /// The key of `spec` (its per-call values left out).
    pub fn of(spec: &OpSpec) -> Result<PlanKey> {
        PlanKey::aligned(spec, FULL_ALIGNMENT)
    }

    /// The key of `spec`'s plan for views whose offsets are multiples of `alignment`
    /// bytes: one plan for whole-vector alignment, one (narrow vectors) for less.
    pub(crate) fn aligned(spec: &OpSpec, alignment: usize) -> Result<PlanKey> {
        let mut bytes = b"kernelc plan key v1\0".to_vec();
        if alignment < FULL_ALIGNMENT {
            bytes.extend_from_slice(b"views below vector alignment\0");
        }
        ciborium::into_writer(&spec.structural(), &mut bytes)
            .map_err(|e| RuntimeError::BadArgument(format!("unencodable spec: {e}")))?;
        Ok(PlanKey(*blake3::hash(&bytes).as_bytes()))
    }
}
