//! kernelc as bytesandbrains' `bb::Backend` (bb-runtime 0.3.8's
//! `contracts::backend::Backend`): [`KernelcBb`].
//!
//! Its own crate, off kernelc's default build: bb is AGPL-3.0-or-later (and so is
//! this crate), and its protos need `protoc` at build time.
//!
//! - A tensor is a [`BbTensor`]: a dense [`View`] on the backend's device, any dtype
//!   ONNX and kernelc share (f32, f64, f16, bf16, i8–i64, u8–u32, bool as one byte).
//!   Reshape, squeeze, unsqueeze and identity share the view (tensors are values:
//!   nothing writes them after they are made).
//! - Each of the 30 primitives is one catalogue op (ONNX semantics: NumPy
//!   broadcasting, negative axes, `keepdims`, reshape's `0`/`-1`, slice clamping and
//!   negative steps, comparisons giving bool, `Cast` by ONNX type code); the launches
//!   are queued and a read waits for them.
//! - `execute` compiles the whole graph (`import`, `execute`): the ONNX graph
//!   becomes a kernelc graph of catalogue ops (the 30 primitives and the extensions
//!   a model needs, with ONNX's semantics and opset-13 inputs; shape arithmetic
//!   folded on the host; reshapes free), fused (`kernelc_kernels::graph::fuse`:
//!   permutes read in place as GEMM operands, GEMM bias, residual, activation and
//!   scale epilogues, layer-norm residual prologues, attention patterns as one
//!   attention kernel on GPUs, elementwise chains into one kernel, elementwise
//!   prologues into reductions and softmaxes, epilogues onto reductions) and compiled once
//!   per graph and input signatures; later calls run the kept plan.
//! - `dispatch` is the contract's `Now(execute(..))`, and `execute` itself returns
//!   once the plan's launches are queued: on a GPU the outputs are device tensors
//!   the device is still writing, and reading one waits. `Later` is not used on purpose:
//!   `CompletionHandle::complete` bincode-serializes the outputs into the engine's
//!   ingress queue (`R: Serialize`), which for a device tensor means downloading
//!   every output to host bytes for the engine to decode again, a copy per call that
//!   `Now` with queued work does not pay.
//! - Errors are [`BbError`]: the runtime's, the walker's, or a typed refusal naming
//!   the primitive and what was wrong; nothing panics on a caller's input.

mod execute;
mod import;
mod import_ops;
pub mod models;
mod onnx;
mod primitives;

pub use bb_ir;
pub use bb_runtime;

use bb_ir::types::{Storage, TypeNode, TYPE_TENSOR};
use bb_runtime::contracts::backend_default_walk::BackendWalkError;
use kernelc_ir::ScalarType;
use kernelc_kernels::OpSpec;
use kernelc_runtime::{DeviceChoice, Runtime, RuntimeError, View};
use std::sync::Arc;

/// Why a primitive failed.
#[derive(Debug, thiserror::Error)]
pub enum BbError {
    #[error("kernelc: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("graph: {0}")]
    Walk(#[from] BackendWalkError),
    /// The caller passed something the primitive cannot take.
    #[error("{op}: {why}")]
    Invalid { op: &'static str, why: String },
    /// Valid ONNX kernelc does not serve (a data type it lacks, external data).
    #[error("{op} is not supported here: {why}")]
    Unsupported { op: &'static str, why: String },
    /// A node of a graph given to `execute`: its index, name and op type, and why.
    #[error("node {index} (`{name}`, {op_type}): {why}")]
    Node {
        index: usize,
        name: String,
        op_type: String,
        why: String,
    },
    /// A graph given to `execute` whose inputs or outputs do not fit it.
    #[error("graph: {why}")]
    Graph { why: String },
}

impl BbError {
    pub(crate) fn invalid(op: &'static str, why: String) -> BbError {
        BbError::Invalid { op, why }
    }

    pub(crate) fn unsupported(op: &'static str, why: String) -> BbError {
        BbError::Unsupported { op, why }
    }
}

/// A tensor of [`KernelcBb`]: a dense view on its device.
#[derive(Clone)]
pub struct BbTensor {
    rt: Arc<Runtime>,
    view: View,
}

impl std::fmt::Debug for BbTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BbTensor({:?} {} on {})",
            self.view.shape(),
            self.view.dtype(),
            self.rt.device_name()
        )
    }
}

/// Any dtype: the element type is a run-time property of the view.
impl Storage for BbTensor {
    const TYPE: &'static TypeNode = &TYPE_TENSOR;
}

impl BbTensor {
    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn shape(&self) -> &[usize] {
        self.view.shape()
    }

    pub fn dtype(&self) -> ScalarType {
        self.view.dtype()
    }

    /// The elements as f64 (exact but for i64 past 2^53); waits for the work writing
    /// them.
    pub fn to_f64(&self) -> Result<Vec<f64>, BbError> {
        Ok(self.rt.read_view_f64(&self.view)?)
    }

    /// The elements as their device bytes (little-endian; bool one byte).
    pub fn to_bytes(&self) -> Result<Vec<u8>, BbError> {
        Ok(self
            .rt
            .read_buffer(self.view.buffer(), self.view.offset(), self.view.byte_len())?)
    }
}

/// kernelc as a `bb::Backend`.
pub struct KernelcBb {
    rt: Arc<Runtime>,
    plans: execute::Plans,
    /// Whether `execute` fuses (the default) or runs one kernel per node.
    fuse: bool,
}

impl KernelcBb {
    /// The backend on `choice` (`DeviceChoice::from_env()` reads `KERNELC_DEVICE`).
    pub fn new(choice: DeviceChoice) -> Result<KernelcBb, BbError> {
        Ok(KernelcBb::with_runtime(Runtime::new(choice)?))
    }

    pub fn with_runtime(rt: Runtime) -> KernelcBb {
        KernelcBb {
            rt: Arc::new(rt),
            plans: Default::default(),
            fuse: true,
        }
    }

    /// This backend with `execute` fusing its graphs (the default) or running them
    /// one kernel per node: the baseline fusion is measured against.
    pub fn with_fusion(self, fuse: bool) -> KernelcBb {
        KernelcBb { fuse, ..self }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// A tensor of `dtype` and `shape` holding `values` (converted as `cast` converts).
    pub fn tensor(
        &self,
        dtype: ScalarType,
        shape: &[usize],
        values: &[f64],
    ) -> Result<BbTensor, BbError> {
        let view = self.alloc(dtype, shape)?;
        self.rt.write_view_f64(&view, values)?;
        Ok(self.wrap_unchecked(view))
    }

    /// A tensor of `dtype` and `shape` from its device bytes.
    pub fn tensor_from_bytes(
        &self,
        dtype: ScalarType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<BbTensor, BbError> {
        let view = self.alloc(dtype, shape)?;
        if bytes.len() != view.byte_len() {
            return Err(BbError::invalid(
                "tensor_from_bytes",
                format!(
                    "{} bytes for {shape:?} of {dtype} ({} bytes)",
                    bytes.len(),
                    view.byte_len()
                ),
            ));
        }
        self.rt.write_buffer(view.buffer(), view.offset(), bytes)?;
        Ok(self.wrap_unchecked(view))
    }

    /// A dense view of this backend's device as a tensor, without a copy.
    pub fn wrap(&self, view: View) -> Result<BbTensor, BbError> {
        if !view.is_dense() {
            return Err(BbError::invalid(
                "wrap",
                "a strided view (bb tensors are dense)".into(),
            ));
        }
        // A zero-element check that the buffer is this device's.
        self.rt.read_buffer(view.buffer(), view.offset(), 0)?;
        Ok(self.wrap_unchecked(view))
    }

    fn wrap_unchecked(&self, view: View) -> BbTensor {
        BbTensor {
            rt: self.rt.clone(),
            view,
        }
    }

    fn alloc(&self, dtype: ScalarType, shape: &[usize]) -> Result<View, BbError> {
        let bytes = shape
            .iter()
            .try_fold(dtype.size_bytes() as usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| {
                BbError::invalid("alloc", format!("a tensor of shape {shape:?} overflows"))
            })?;
        let buffer = self.rt.alloc_buffer(bytes)?;
        Ok(View::new(&buffer, 0, dtype, shape)?)
    }

    /// `t`'s view, if `t` is this backend's.
    fn ours<'t>(&self, t: &'t BbTensor, op: &'static str) -> Result<&'t View, BbError> {
        if !Arc::ptr_eq(&t.rt, &self.rt) {
            return Err(BbError::invalid(
                op,
                format!("a tensor of another backend ({})", t.rt.device_name()),
            ));
        }
        Ok(&t.view)
    }

    /// `t` with `shape` (as many elements), sharing its memory.
    fn reshaped(
        &self,
        t: &BbTensor,
        op: &'static str,
        shape: &[usize],
    ) -> Result<BbTensor, BbError> {
        let v = self.ours(t, op)?;
        Ok(self.wrap_unchecked(v.reshaped(shape)?))
    }

    /// Runs `spec` on `inputs` into new outputs.
    fn run(&self, spec: impl Into<OpSpec>, inputs: &[&View]) -> Result<Vec<BbTensor>, BbError> {
        let spec = spec.into();
        spec.validate().map_err(RuntimeError::from)?;
        let outputs = spec
            .outputs()
            .iter()
            .map(|sig| self.alloc(sig.dtype, &sig.shape))
            .collect::<Result<Vec<_>, _>>()?;
        self.rt
            .run_into(&spec, inputs, &outputs.iter().collect::<Vec<_>>())?;
        Ok(outputs
            .into_iter()
            .map(|v| self.wrap_unchecked(v))
            .collect())
    }

    fn run1(&self, spec: impl Into<OpSpec>, inputs: &[&View]) -> Result<BbTensor, BbError> {
        self.run(spec, inputs)?
            .pop()
            .ok_or_else(|| BbError::invalid("run", "an op without an output".into()))
    }
}
