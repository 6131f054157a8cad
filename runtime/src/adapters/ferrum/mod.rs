//! ferrum-interfaces 0.7.0's `backend::ComputeBackend` on kernelc: [`FerrumBackend`].
//!
//! ferrum's trait hands out sub-objects by reference (`&dyn TensorOps`, `&dyn
//! TensorFactory`, `&dyn DeviceMemoryManager`, `&dyn KernelExecutor`, `&dyn KernelOps`
//! and the six kernel sub-traits), and its tensors are `Arc<dyn TensorLike>`. So:
//! - One [`Context`] per device (a runtime and the ferrum `Device` it answers to) is
//!   shared by every backend and tensor on that device: a tensor moved there with
//!   `to_device` is one the backend there computes with.
//! - A tensor is a [`FerrumTensor`]: a dense [`View`] of a buffer of the context's
//!   device. Ops downcast their arguments (`as_any`); another implementation's tensor,
//!   or one of another device, is an `InvalidParameter` error naming it.
//! - Every op is a catalogue op run into freshly allocated outputs
//!   ([`Runtime::run_into`]); launches are queued (the trait's `synchronize` waits),
//!   reads (`to_vec_f32`, sampling) wait for what they read.
//! - Errors are `FerrumError`s of the class the runtime's error has
//!   ([`super::ErrorClass`]); the last one is kept for [`ComputeBackend::status`].
//!
//! Semantics are ferrum-runtime 0.7.0's candle backend's (the only implementation of
//! the trait): `gelu` is the tanh form; layer and RMS norms run over the last dim
//! with the biased variance; attention is `[batch, seq, heads, head_dim]` with GQA,
//! scores multiplied by `softmax_scale`, the causal mask bottom-right aligned;
//! `linear` is `input · weightᵀ`; `rotary_embedding` rotates NeoX halves with cos/sin
//! tables of `[max_seq_len, head_dim / 2]`; elementwise ops broadcast like NumPy.
//! `position_ids` may hold one position per step (`seq_len` of them), one per batch
//! item and step, or one start position (the reference's decode case: positions
//! `p, p + 1, ...`).

mod executor;
mod memory;
mod ops;
mod sampling;
mod tensor;

pub use ::ferrum_interfaces;
pub use ::ferrum_types;
pub use executor::FerrumExecutor;
pub use memory::FerrumMemory;
pub use ops::{FerrumKernelOps, FerrumTensorOps};
pub use tensor::{FerrumFactory, FerrumTensor, RANDOM_SEED};

use super::ErrorClass;
use crate::device::DeviceChoice;
use crate::error::RuntimeError;
use crate::lock;
use crate::memory::View;
use crate::runtime::Runtime;
use async_trait::async_trait;
use ferrum_interfaces::backend::{BackendCapabilities, BackendStatus, KernelExecutor};
use ferrum_interfaces::kernel_ops::KernelOps;
use ferrum_interfaces::tensor::{TensorFactory, TensorOps, TensorRef};
use ferrum_interfaces::{ComputeBackend, DeviceMemoryManager};
use ferrum_types::{DataType, Device, FerrumError, Result};
use kernelc_ir::ScalarType;
use kernelc_kernels::OpSpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A runtime and the ferrum device it answers to, shared by the backends and tensors
/// on it.
pub struct Context {
    rt: Runtime,
    device: Device,
    operations: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// The next stream (`step`) of the random factories: every call draws new values
    /// from the same compiled kernel.
    draws: AtomicU64,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({} on {})", self.device, self.rt.device_name())
    }
}

impl Context {
    fn new(rt: Runtime, device: Device) -> Arc<Context> {
        Arc::new(Context {
            rt,
            device,
            operations: AtomicU64::new(0),
            last_error: Mutex::new(None),
            draws: AtomicU64::new(0),
        })
    }

    /// The shared context of `device`, opened on first use: the CPU device for
    /// `Device::CPU`, CUDA GPU `i` for `Device::CUDA(i)`.
    pub fn of(device: &Device) -> Result<Arc<Context>> {
        static CONTEXTS: OnceLock<Mutex<HashMap<Device, Arc<Context>>>> = OnceLock::new();
        let mut contexts = lock(CONTEXTS.get_or_init(Default::default));
        if let Some(ctx) = contexts.get(device) {
            return Ok(ctx.clone());
        }
        let choice = match device {
            Device::CPU => DeviceChoice::Cpu,
            Device::CUDA(ordinal) => DeviceChoice::Cuda { ordinal: *ordinal },
            // ROCm (and Metal, which exists on Apple targets only).
            #[allow(unreachable_patterns)]
            other => {
                return Err(FerrumError::unsupported(format!(
                    "kernelc serves ferrum's CPU and CUDA devices, not {other}"
                )))
            }
        };
        let rt = Runtime::new(choice).map_err(error)?;
        let ctx = Context::new(rt, device.clone());
        contexts.insert(device.clone(), ctx.clone());
        Ok(ctx)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The stream (`step` of [`RANDOM_SEED`]) the next random factory call draws.
    pub fn next_draw(&self) -> u64 {
        self.draws.load(Ordering::Relaxed)
    }

    /// `result` as ferrum's result, counting the operation and keeping its error.
    fn settle<T>(&self, result: std::result::Result<T, RuntimeError>) -> Result<T> {
        self.operations.fetch_add(1, Ordering::Relaxed);
        result.map_err(|e| {
            *lock(&self.last_error) = Some(e.to_string());
            error(e)
        })
    }

    /// A zeroed dense view of `shape` elements of `dtype` in a new buffer.
    fn alloc(&self, dtype: ScalarType, shape: &[usize]) -> std::result::Result<View, RuntimeError> {
        let bytes = kernelc_kernels::shape::numel(shape)
            .checked_mul(dtype.size_bytes() as usize)
            .ok_or_else(|| {
                RuntimeError::BadArgument(format!("a tensor of shape {shape:?} overflows"))
            })?;
        let buffer = self.rt.alloc_buffer(bytes)?;
        View::new(&buffer, 0, dtype, shape)
    }

    /// Runs `spec` on `inputs` (views shaped as its inputs) into new outputs.
    fn run(self: &Arc<Self>, spec: impl Into<OpSpec>, inputs: &[&View]) -> Result<Vec<TensorRef>> {
        let spec = spec.into();
        let result = (|| {
            spec.validate()?;
            let outputs = spec
                .outputs()
                .iter()
                .map(|sig| self.alloc(sig.dtype, &sig.shape))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            self.rt
                .run_into(&spec, inputs, &outputs.iter().collect::<Vec<_>>())?;
            Ok(outputs)
        })();
        let outputs = self.settle(result)?;
        Ok(outputs.into_iter().map(|v| self.tensor(v)).collect())
    }

    /// [`Context::run`] of an op with one output.
    fn run1(self: &Arc<Self>, spec: impl Into<OpSpec>, inputs: &[&View]) -> Result<TensorRef> {
        self.run(spec, inputs)?
            .pop()
            .ok_or_else(|| FerrumError::internal("an op without an output"))
    }

    fn tensor(self: &Arc<Self>, view: View) -> TensorRef {
        Arc::new(FerrumTensor::new(self.clone(), view))
    }

    /// `tensor` as one of this context's.
    fn ours<'t>(&self, tensor: &'t TensorRef, what: &str) -> Result<&'t FerrumTensor> {
        let ours = tensor
            .as_any()
            .downcast_ref::<FerrumTensor>()
            .ok_or_else(|| {
                FerrumError::invalid_parameter(format!(
                    "{what}: a tensor of another backend ({:?}); kernelc computes with its own tensors",
                    tensor.device()
                ))
            })?;
        if !std::ptr::eq(ours.context(), self) {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: a tensor of {} on {}, not of this backend's {} on {} (move it with to_device)",
                ours.context().device,
                ours.context().rt.device_name(),
                self.device,
                self.rt.device_name()
            )));
        }
        Ok(ours)
    }
}

/// A runtime error as ferrum's, by its class.
pub(crate) fn error(e: RuntimeError) -> FerrumError {
    let message = format!("kernelc: {e}");
    match ErrorClass::of(&e) {
        ErrorClass::InvalidArgument => FerrumError::invalid_parameter(message),
        ErrorClass::Unsupported => FerrumError::unsupported(message),
        ErrorClass::OutOfMemory => FerrumError::resource_exhausted(message),
        ErrorClass::Device => FerrumError::backend(message),
    }
}

/// kernelc's storage type of a ferrum dtype (FP8 and the 4-bit types have none).
pub(crate) fn scalar_type(dtype: DataType) -> Result<ScalarType> {
    Ok(match dtype {
        DataType::FP32 => ScalarType::F32,
        DataType::FP16 => ScalarType::F16,
        DataType::BF16 => ScalarType::Bf16,
        DataType::INT32 => ScalarType::I32,
        DataType::INT16 => ScalarType::I16,
        DataType::INT8 => ScalarType::I8,
        DataType::UINT32 => ScalarType::U32,
        DataType::UINT16 => ScalarType::U16,
        DataType::UINT8 => ScalarType::U8,
        DataType::BOOL => ScalarType::Bool,
        DataType::FP8 | DataType::INT4 | DataType::UINT4 => {
            return Err(FerrumError::unsupported(format!(
                "kernelc has no {dtype} tensors (FP8 and packed 4-bit types are quantisation formats)"
            )))
        }
    })
}

/// ferrum's dtype of a kernelc storage type (f64 and i64 have none).
pub(crate) fn data_type(dtype: ScalarType) -> Option<DataType> {
    Some(match dtype {
        ScalarType::F32 => DataType::FP32,
        ScalarType::F16 => DataType::FP16,
        ScalarType::Bf16 => DataType::BF16,
        ScalarType::I32 => DataType::INT32,
        ScalarType::I16 => DataType::INT16,
        ScalarType::I8 => DataType::INT8,
        ScalarType::U32 => DataType::UINT32,
        ScalarType::U16 => DataType::UINT16,
        ScalarType::U8 => DataType::UINT8,
        ScalarType::Bool => DataType::BOOL,
        ScalarType::F64 | ScalarType::I64 => return None,
    })
}

/// The dtypes a ferrum tensor here may have.
const DTYPES: [DataType; 10] = [
    DataType::FP32,
    DataType::FP16,
    DataType::BF16,
    DataType::INT32,
    DataType::INT16,
    DataType::INT8,
    DataType::UINT32,
    DataType::UINT16,
    DataType::UINT8,
    DataType::BOOL,
];

/// kernelc as a ferrum `ComputeBackend`.
pub struct FerrumBackend {
    ctx: Arc<Context>,
    initialized: bool,
    tensor_ops: FerrumTensorOps,
    factory: FerrumFactory,
    memory: FerrumMemory,
    executor: FerrumExecutor,
    kernel_ops: FerrumKernelOps,
}

impl FerrumBackend {
    /// The backend of `device` (its shared [`Context`], opened on first use).
    pub fn new(device: &Device) -> Result<FerrumBackend> {
        Ok(FerrumBackend::on(Context::of(device)?))
    }

    /// A backend on `runtime` (any kernelc device: a wgpu adapter too), answering to
    /// ferrum as `device`. Its tensors are its own: another backend's, even of the
    /// same `device`, move over with `to_device` only through the shared contexts.
    pub fn with_runtime(runtime: Runtime, device: Device) -> FerrumBackend {
        FerrumBackend::on(Context::new(runtime, device))
    }

    fn on(ctx: Arc<Context>) -> FerrumBackend {
        FerrumBackend {
            tensor_ops: FerrumTensorOps::new(ctx.clone()),
            factory: FerrumFactory::new(ctx.clone()),
            memory: FerrumMemory::new(ctx.clone()),
            executor: FerrumExecutor::new(ctx.clone()),
            kernel_ops: FerrumKernelOps::new(ctx.clone()),
            ctx,
            initialized: false,
        }
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// `view` (dense, on this backend's device, of a dtype ferrum has) as a ferrum
    /// tensor, without a copy: kernelc memory handed to ferrum code. The tensor
    /// shares the view's memory, which ferrum's ops never write.
    pub fn wrap(&self, view: View) -> Result<TensorRef> {
        let checked = self.ctx.rt.check_owned(view.buffer()).and_then(|()| {
            match (view.is_dense(), data_type(view.dtype())) {
                (true, Some(_)) => Ok(()),
                (false, _) => Err(RuntimeError::BadArgument(
                    "a strided view as a ferrum tensor (ferrum's are dense)".into(),
                )),
                (true, None) => Err(RuntimeError::BadArgument(format!(
                    "a {} view as a ferrum tensor (ferrum has no f64 or i64)",
                    view.dtype()
                ))),
            }
        });
        self.ctx.settle(checked)?;
        Ok(self.ctx.tensor(view))
    }
}

#[async_trait]
impl ComputeBackend for FerrumBackend {
    fn name(&self) -> &str {
        "kernelc"
    }

    fn capabilities(&self) -> BackendCapabilities {
        let caps = self.ctx.rt.caps();
        let mut extra = HashMap::new();
        extra.insert(
            "kernelc_device".to_string(),
            serde_json::Value::String(self.ctx.rt.device_name()),
        );
        let dtypes: Vec<DataType> = DTYPES
            .into_iter()
            .filter(|&d| scalar_type(d).is_ok_and(|t| caps.supports(t)))
            .collect();
        BackendCapabilities {
            supports_fp16: dtypes.contains(&DataType::FP16),
            supports_bf16: dtypes.contains(&DataType::BF16),
            supports_int8: dtypes.contains(&DataType::INT8),
            supported_dtypes: dtypes,
            supported_devices: vec![self.ctx.device.clone()],
            max_tensor_dims: usize::MAX,
            supports_flash_attention: true,
            supports_paged_attention: false,
            supports_tensor_parallelism: false,
            supports_pipeline_parallelism: false,
            max_batch_size: usize::MAX,
            max_sequence_length: usize::MAX,
            memory_alignment: 256,
            supports_custom_kernels: true,
            supports_cuda_graphs: false,
            extra_capabilities: extra,
        }
    }

    fn tensor_ops(&self) -> &dyn TensorOps {
        &self.tensor_ops
    }

    fn tensor_factory(&self) -> &dyn TensorFactory {
        &self.factory
    }

    fn memory_manager(&self) -> &dyn DeviceMemoryManager {
        &self.memory
    }

    fn kernel_executor(&self) -> Option<&dyn KernelExecutor> {
        Some(&self.executor)
    }

    fn kernel_ops(&self) -> Option<&dyn KernelOps> {
        Some(&self.kernel_ops)
    }

    /// Binds the backend to `device`: its own (nothing to open), or another, whose
    /// shared context it then uses.
    async fn initialize(&mut self, device: &Device) -> Result<()> {
        if *device != self.ctx.device {
            *self = FerrumBackend::on(Context::of(device)?);
        }
        self.initialized = true;
        Ok(())
    }

    fn supports_device(&self, device: &Device) -> bool {
        *device == self.ctx.device
            || matches!(device, Device::CPU)
            || (cfg!(feature = "cuda") && matches!(device, Device::CUDA(_)))
    }

    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    async fn synchronize(&self, device: &Device) -> Result<()> {
        if *device != self.ctx.device {
            return Err(FerrumError::invalid_parameter(format!(
                "synchronize: this backend runs on {}, not {device}",
                self.ctx.device
            )));
        }
        let result = self.ctx.rt.synchronize();
        self.ctx.settle(result)
    }

    fn status(&self) -> BackendStatus {
        let mut memory_usage = HashMap::new();
        memory_usage.insert(self.ctx.device.clone(), self.memory.used_bytes());
        let mut specific = HashMap::new();
        let stats = self.ctx.rt.stats();
        specific.insert("launches".to_string(), stats.launches.into());
        specific.insert("compiles".to_string(), stats.compiles.into());
        BackendStatus {
            is_initialized: self.initialized,
            is_ready: true,
            active_devices: vec![self.ctx.device.clone()],
            memory_usage,
            operations_completed: self.ctx.operations.load(Ordering::Relaxed),
            last_error: lock(&self.ctx.last_error).clone(),
            backend_specific: specific,
        }
    }

    /// Waits for the queued work; the memory manager's allocations stay valid
    /// until deallocated (or the backend dropped).
    async fn shutdown(&mut self) -> Result<()> {
        let result = self.ctx.rt.synchronize();
        self.initialized = false;
        self.ctx.settle(result)
    }
}
