//! rustd_runtime's `backend::Backend` on kernelc: [`RustdBackend`].
//!
//! Handles name device buffers of one shape and dtype; an op's `out` handle is written
//! in place (it may be one of the op's inputs: see `adapters::run_staged`). Tensor methods run
//! catalogue ops on the backend's device; the `scalar_*` methods are host arithmetic on
//! `rustd_core::Value`s, as the trait defines them. `dispatch_compute` runs the
//! caller's SPIR-V on wgpu devices and returns the trait's own error elsewhere.
//!
//! Where rustd's `CpuBackend` is partial, the adapter does what the trait's doc says
//! (each choice is in the README's support table):
//! - `attention` adds the mask to the scores (an f32 mask: `-inf` hides a key; a bool
//!   mask: `true` keeps a key, as PyTorch's `scaled_dot_product_attention`), and takes
//!   `seq_kv != seq_q`; the scale is multiplied, as `CpuBackend` does.
//! - `reduce_sum` sums over `dim` (negative counts from the end; `out` of the input's
//!   shape without that axis, or with it kept as 1), and over everything for `None`.
//! - `softmax` takes any `dim`, not only the last.
//! - `gaussian_blur` honours `sigma` (taps `[-⌈3σ⌉, ⌈3σ⌉]`), where rustd's Vulkan shader
//!   uses fixed weights for σ = 2; `sobel_edges` and `sharpen` follow rustd's GLSL.
//! - `scalar_*` never panic: an integer overflow and a NaN or infinite result are
//!   errors (`ValidationFail`, `FloatSpecial`, as `Value::float` defines floats).

use super::{run_staged, ErrorClass};
use crate::device::DeviceChoice;
use crate::error::RuntimeError;
use crate::memory::{Buffer, View};
use crate::module::{ShaderBinding, ShaderModule, ShaderSource};
use crate::runtime::Runtime;
use kernelc_ir::ScalarType;
use kernelc_kernels::ops::gemm::Layout;
use kernelc_kernels::shape::normalize_axis;
use kernelc_kernels::{
    AdamSpec, AttentionLayout, AttentionSpec, BinaryFn, BinarySpec, CrossEntropySpec, GatherSpec,
    GemmSpec, ImageFilter, ImageFilterSpec, LayerNormSpec, OpSpec, ReduceFn, ReduceSpec,
    SoftmaxSpec, UnaryFn, UnarySpec, WhereSpec,
};
use rustd_core::{RustDError, Value};
use rustd_runtime::backend::{Backend, DType, TensorHandle, TensorMeta};
use std::collections::HashMap;
use std::fmt;

pub use rustd_core;
pub use rustd_runtime;

type Result<T> = std::result::Result<T, RustDError>;

/// One tensor: a device buffer holding `shape` elements of `dtype`.
struct Slot {
    buffer: Buffer,
    shape: Vec<usize>,
    dtype: DType,
}

/// kernelc as a rustd `Backend`.
pub struct RustdBackend {
    runtime: Runtime,
    tensors: HashMap<u64, Slot>,
    next_handle: u64,
    /// Caller SPIR-V loaded for `dispatch_compute`, by (hash, bindings, push bytes).
    shaders: HashMap<([u8; 32], usize, usize), ShaderModule>,
    /// The scores of a bool attention mask, once uploaded (`mask_scores`).
    mask_scores: Option<[View; 2]>,
}

impl fmt::Debug for RustdBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RustdBackend")
            .field("device", &self.runtime.device_name())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

fn scalar_type(dtype: DType) -> ScalarType {
    match dtype {
        DType::F32 => ScalarType::F32,
        DType::F64 => ScalarType::F64,
        DType::I32 => ScalarType::I32,
        DType::I64 => ScalarType::I64,
        DType::Bool => ScalarType::Bool,
    }
}

/// The trait's error for a runtime failure: caller mistakes are `ValidationFail`,
/// everything the device cannot do `BackendError`.
fn error(e: RuntimeError) -> RustDError {
    match ErrorClass::of(&e) {
        ErrorClass::InvalidArgument => RustDError::ValidationFail {
            message: e.to_string(),
        },
        ErrorClass::Unsupported | ErrorClass::OutOfMemory | ErrorClass::Device => {
            RustDError::BackendError {
                message: e.to_string(),
            }
        }
    }
}

fn invalid(message: String) -> RustDError {
    RustDError::ValidationFail { message }
}

/// A `Value` used as a number (image filter parameters).
fn number(v: &Value) -> Result<f64> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Integer(i) => Ok(*i as f64),
        other => Err(RustDError::TypeError {
            expected: "number".into(),
            got: other.type_name().into(),
        }),
    }
}

impl RustdBackend {
    /// A backend on `choice` (`DeviceChoice::BestAvailable`: CUDA, a wgpu GPU, else
    /// the CPU).
    pub fn new(choice: DeviceChoice) -> std::result::Result<RustdBackend, RuntimeError> {
        Ok(RustdBackend::with_runtime(Runtime::new(choice)?))
    }

    /// A backend on an existing runtime.
    pub fn with_runtime(runtime: Runtime) -> RustdBackend {
        RustdBackend {
            runtime,
            tensors: HashMap::new(),
            next_handle: 1,
            shaders: HashMap::new(),
            mask_scores: None,
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    fn slot(&self, handle: TensorHandle) -> Result<&Slot> {
        self.tensors
            .get(&handle.0)
            .ok_or_else(|| RustDError::HandleNotFound {
                handle: format!("tensor {}", handle.0),
            })
    }

    /// The tensor behind `handle` as a view, of dtype `want` (any dtype: `None`).
    fn view(&self, handle: TensorHandle, want: Option<DType>) -> Result<View> {
        let slot = self.slot(handle)?;
        if let Some(want) = want.filter(|&w| w != slot.dtype) {
            return Err(RustDError::TypeError {
                expected: format!("{want:?} tensor (handle {})", handle.0),
                got: format!("{:?}", slot.dtype),
            });
        }
        View::new(&slot.buffer, 0, scalar_type(slot.dtype), &slot.shape).map_err(error)
    }

    fn f32(&self, handle: TensorHandle) -> Result<View> {
        self.view(handle, Some(DType::F32))
    }

    /// The same elements under another shape (a contiguous reshape).
    fn reshaped(view: &View, shape: &[usize]) -> Result<View> {
        view.reshaped(shape).map_err(error)
    }

    fn run(&self, spec: impl Into<OpSpec>, inputs: Vec<View>, outputs: Vec<View>) -> Result<()> {
        run_staged(&self.runtime, &spec.into(), inputs, outputs).map_err(error)
    }

    fn same_shape(what: &str, views: &[&View]) -> Result<()> {
        match views.split_first() {
            Some((first, rest)) if rest.iter().any(|v| v.shape() != first.shape()) => {
                let shapes: Vec<_> = views.iter().map(|v| v.shape().to_vec()).collect();
                Err(invalid(format!("{what}: shapes differ: {shapes:?}")))
            }
            _ => Ok(()),
        }
    }

    fn unary(&mut self, func: UnaryFn, input: TensorHandle, out: TensorHandle) -> Result<()> {
        let (x, y) = (self.f32(input)?, self.f32(out)?);
        Self::same_shape(func.name(), &[&x, &y])?;
        let spec = UnarySpec {
            func,
            dtype: ScalarType::F32,
            shape: x.shape().to_vec(),
        };
        self.run(spec, vec![x], vec![y])
    }

    fn gemm(
        &mut self,
        a: TensorHandle,
        b: TensorHandle,
        bias: Option<TensorHandle>,
        out: TensorHandle,
    ) -> Result<()> {
        let (a, b, c) = (self.f32(a)?, self.f32(b)?, self.f32(out)?);
        let (&[m, k], &[k2, n]) = (a.shape(), b.shape()) else {
            return Err(invalid(format!(
                "matmul requires 2-D tensors, got {:?} @ {:?}",
                a.shape(),
                b.shape()
            )));
        };
        if k != k2 || c.shape() != [m, n] {
            return Err(invalid(format!(
                "matmul: ({m}, {k}) @ ({k2}, {n}) into {:?}",
                c.shape()
            )));
        }
        let spec = GemmSpec {
            layout: Layout::RowMajor,
            bias: bias.is_some(),
            ..GemmSpec::new(ScalarType::F32, m, n, k)
        };
        let mut inputs = vec![a, b];
        if let Some(bias) = bias {
            let bias = self.f32(bias)?;
            if bias.numel() != n {
                return Err(invalid(format!(
                    "matmul_bias: bias {:?} for {n} columns",
                    bias.shape()
                )));
            }
            inputs.push(Self::reshaped(&bias, &[n])?);
        }
        self.run(spec, inputs, vec![c])
    }

    /// An additive f32 mask `[.., seq_q, seq_k]` from the trait's mask tensor: f32 as
    /// given, bool through `where(mask, 0, -inf)`.
    fn additive_mask(&mut self, mask: TensorHandle, scores: [usize; 2]) -> Result<View> {
        let m = self.view(mask, None)?;
        if m.shape().len() > 2 || !broadcasts(m.shape(), &scores) {
            return Err(invalid(format!(
                "attention: mask {:?} does not broadcast to the scores {scores:?}",
                m.shape()
            )));
        }
        match m.dtype() {
            ScalarType::F32 => Ok(m),
            ScalarType::Bool => {
                let [keep, hide] = self.mask_scores().map_err(error)?;
                let rt = &self.runtime;
                let out_buffer = rt.alloc_buffer(m.numel() * 4).map_err(error)?;
                let out = View::new(&out_buffer, 0, ScalarType::F32, m.shape()).map_err(error)?;
                let spec = WhereSpec {
                    dtype: ScalarType::F32,
                    cond_dtype: ScalarType::Bool,
                    cond: m.shape().to_vec(),
                    a: vec![1],
                    b: vec![1],
                };
                self.run(spec, vec![m, keep, hide], vec![out.clone()])?;
                Ok(out)
            }
            other => Err(RustDError::TypeError {
                expected: "f32 or bool attention mask".into(),
                got: other.name().into(),
            }),
        }
    }

    /// The scores a bool mask turns into (0 kept, `-inf` hidden), uploaded once.
    fn mask_scores(&mut self) -> std::result::Result<[View; 2], RuntimeError> {
        if let Some(views) = &self.mask_scores {
            return Ok(views.clone());
        }
        let buffer = self.runtime.alloc_buffer(8)?;
        let bytes = [0.0f32.to_le_bytes(), f32::NEG_INFINITY.to_le_bytes()].concat();
        self.runtime.write_buffer(&buffer, 0, &bytes)?;
        let views = [
            View::new(&buffer, 0, ScalarType::F32, &[1])?,
            View::new(&buffer, 4, ScalarType::F32, &[1])?,
        ];
        self.mask_scores = Some(views.clone());
        Ok(views)
    }

    fn image(&mut self, filter: ImageFilter, input: TensorHandle, out: TensorHandle) -> Result<()> {
        let (x, y) = (self.f32(input)?, self.f32(out)?);
        Self::same_shape(filter.name(), &[&x, &y])?;
        let &[height, width, channels] = x.shape() else {
            return Err(RustDError::TypeError {
                expected: "[H, W, C] image".into(),
                got: format!("{:?}", x.shape()),
            });
        };
        let spec = ImageFilterSpec {
            filter,
            dtype: ScalarType::F32,
            height,
            width,
            channels,
        };
        self.run(spec, vec![x], vec![y])
    }

    /// `Value` arithmetic that cannot panic: integer overflow is an error.
    fn integer_op(
        a: &Value,
        b: &Value,
        op: fn(i64, i64) -> Option<i64>,
        fallback: fn(&Value, &Value) -> Result<Value>,
    ) -> Result<Value> {
        match (a, b) {
            (Value::Integer(x), Value::Integer(y)) => op(*x, *y)
                .map(Value::Integer)
                .ok_or_else(|| invalid(format!("integer overflow: {x} and {y}"))),
            _ => fallback(a, b),
        }
    }

    /// A float function of a number, returned as a checked `Value::float`.
    fn math(a: &Value, f: fn(f64) -> f64) -> Result<Value> {
        Value::float(f(number(a)?))
    }

    /// floor / ceil / round: an Integer (rustd's definition), refused outside i64.
    fn to_integer(a: &Value, f: fn(f64) -> f64) -> Result<Value> {
        match a {
            Value::Integer(i) => Ok(Value::Integer(*i)),
            _ => {
                let r = f(number(a)?);
                if r.is_finite()
                    && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r)
                {
                    Ok(Value::Integer(r as i64))
                } else {
                    Err(invalid(format!("{r} is not an i64")))
                }
            }
        }
    }

    fn compare(a: &Value, b: &Value, f: fn(&Value, &Value) -> Result<bool>) -> Result<Value> {
        f(a, b).map(Value::Boolean)
    }
}

/// Whether `shape` broadcasts (NumPy, right-aligned) to `to`.
fn broadcasts(shape: &[usize], to: &[usize]) -> bool {
    shape.len() <= to.len()
        && shape
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&s, &t)| s == t || s == 1)
}

impl Backend for RustdBackend {
    fn name(&self) -> &'static str {
        "kernelc"
    }

    fn is_available(&self) -> bool {
        true
    }

    fn alloc_tensor(&mut self, shape: &[usize], dtype: DType) -> Result<TensorHandle> {
        let elements = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
        let bytes = elements
            .checked_mul(dtype.size_bytes())
            .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
        let buffer = self.runtime.alloc_buffer(bytes).map_err(error)?;
        let handle = self.next_handle;
        self.next_handle += 1;
        self.tensors.insert(
            handle,
            Slot {
                buffer,
                shape: shape.to_vec(),
                dtype,
            },
        );
        Ok(TensorHandle(handle))
    }

    fn free_tensor(&mut self, handle: TensorHandle) -> Result<()> {
        // As rustd's CpuBackend: freeing an unknown handle is not an error.
        self.tensors.remove(&handle.0);
        Ok(())
    }

    fn tensor_meta(&self, handle: TensorHandle) -> Result<TensorMeta> {
        let slot = self.slot(handle)?;
        Ok(TensorMeta {
            shape: slot.shape.clone(),
            dtype: slot.dtype,
            size_bytes: slot.buffer.len(),
        })
    }

    fn write_tensor(&mut self, handle: TensorHandle, data: &[u8]) -> Result<()> {
        let slot = self.slot(handle)?;
        if data.len() != slot.buffer.len() {
            return Err(invalid(format!(
                "write_tensor: {} bytes for a {:?} {:?} tensor of {} bytes",
                data.len(),
                slot.dtype,
                slot.shape,
                slot.buffer.len()
            )));
        }
        if slot.dtype == DType::Bool {
            // Any nonzero byte is true (rustd); kernels read 0 or 1.
            let normalised: Vec<u8> = data.iter().map(|&b| (b != 0) as u8).collect();
            return self
                .runtime
                .write_buffer(&slot.buffer, 0, &normalised)
                .map_err(error);
        }
        self.runtime
            .write_buffer(&slot.buffer, 0, data)
            .map_err(error)
    }

    fn read_tensor(&self, handle: TensorHandle) -> Result<Vec<u8>> {
        let slot = self.slot(handle)?;
        self.runtime
            .read_buffer(&slot.buffer, 0, slot.buffer.len())
            .map_err(error)
    }

    fn scalar_add(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::integer_op(a, b, i64::checked_add, Value::add)
    }

    fn scalar_sub(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::integer_op(a, b, i64::checked_sub, Value::sub)
    }

    fn scalar_mul(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::integer_op(a, b, i64::checked_mul, Value::mul)
    }

    fn scalar_div(&mut self, a: &Value, b: &Value) -> Result<Value> {
        a.div(b)
    }

    fn scalar_mod(&mut self, a: &Value, b: &Value) -> Result<Value> {
        match (a, b) {
            // i64::MIN % -1 overflows; y == 0 is Value::rem's error.
            (Value::Integer(x), Value::Integer(y)) if *y != 0 => x
                .checked_rem(*y)
                .map(Value::Integer)
                .ok_or_else(|| invalid(format!("integer overflow: {x} % {y}"))),
            _ => a.rem(b),
        }
    }

    fn scalar_sqrt(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::sqrt)
    }

    fn scalar_pow(&mut self, base: &Value, exp: &Value) -> Result<Value> {
        match (base, exp) {
            (Value::Integer(b), Value::Integer(e)) if *e >= 0 => u32::try_from(*e)
                .ok()
                .and_then(|e| b.checked_pow(e))
                .map(Value::Integer)
                .ok_or_else(|| invalid(format!("integer overflow: {b} ^ {e}"))),
            (Value::Float(_) | Value::Integer(_), Value::Float(_) | Value::Integer(_)) => {
                Value::float(number(base)?.powf(number(exp)?))
            }
            _ => Err(RustDError::TypeError {
                expected: "number".into(),
                got: format!("{} ^ {}", base.type_name(), exp.type_name()),
            }),
        }
    }

    fn scalar_sin(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::sin)
    }

    fn scalar_cos(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::cos)
    }

    fn scalar_tan(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::tan)
    }

    fn scalar_log(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::ln)
    }

    fn scalar_exp(&mut self, a: &Value) -> Result<Value> {
        Self::math(a, f64::exp)
    }

    fn scalar_floor(&mut self, a: &Value) -> Result<Value> {
        Self::to_integer(a, f64::floor)
    }

    fn scalar_ceil(&mut self, a: &Value) -> Result<Value> {
        Self::to_integer(a, f64::ceil)
    }

    fn scalar_round(&mut self, a: &Value) -> Result<Value> {
        Self::to_integer(a, f64::round)
    }

    fn scalar_abs(&mut self, a: &Value) -> Result<Value> {
        match a {
            Value::Integer(i) => i
                .checked_abs()
                .map(Value::Integer)
                .ok_or_else(|| invalid(format!("integer overflow: |{i}|"))),
            _ => Self::math(a, f64::abs),
        }
    }

    fn scalar_eq(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Ok(Value::Boolean(a == b))
    }

    fn scalar_ne(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Ok(Value::Boolean(a != b))
    }

    fn scalar_lt(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::compare(a, b, Value::lt)
    }

    fn scalar_le(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::compare(a, b, Value::le)
    }

    fn scalar_gt(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::compare(a, b, |a, b| Value::le(a, b).map(|le| !le))
    }

    fn scalar_ge(&mut self, a: &Value, b: &Value) -> Result<Value> {
        Self::compare(a, b, |a, b| Value::lt(a, b).map(|lt| !lt))
    }

    fn pointwise_add(&mut self, a: TensorHandle, b: TensorHandle, out: TensorHandle) -> Result<()> {
        let (a, b, c) = (self.f32(a)?, self.f32(b)?, self.f32(out)?);
        Self::same_shape("pointwise_add", &[&a, &b, &c])?;
        let shape = a.shape().to_vec();
        let spec = BinarySpec {
            func: BinaryFn::Add,
            dtype: ScalarType::F32,
            lhs: shape.clone(),
            rhs: shape,
            out_dtype: None,
        };
        self.run(spec, vec![a, b], vec![c])
    }

    fn matmul(&mut self, a: TensorHandle, b: TensorHandle, out: TensorHandle) -> Result<()> {
        self.gemm(a, b, None, out)
    }

    fn matmul_bias(
        &mut self,
        a: TensorHandle,
        b: TensorHandle,
        bias: TensorHandle,
        out: TensorHandle,
    ) -> Result<()> {
        self.gemm(a, b, Some(bias), out)
    }

    fn layer_norm(
        &mut self,
        input: TensorHandle,
        gamma: TensorHandle,
        beta: TensorHandle,
        out: TensorHandle,
        eps: f64,
    ) -> Result<()> {
        let (x, y) = (self.f32(input)?, self.f32(out)?);
        Self::same_shape("layer_norm", &[&x, &y])?;
        let Some((&cols, lead)) = x.shape().split_last() else {
            return Err(invalid("layer_norm of a 0-D tensor".into()));
        };
        let rows: usize = lead.iter().product();
        let (g, b) = (self.f32(gamma)?, self.f32(beta)?);
        if g.numel() != cols || b.numel() != cols {
            return Err(invalid(format!(
                "layer_norm: gamma {:?} and beta {:?} for a last dim of {cols}",
                g.shape(),
                b.shape()
            )));
        }
        let spec = LayerNormSpec {
            dtype: ScalarType::F32,
            shape: vec![rows, cols],
            eps,
            rms: false,
            weight: true,
            bias: true,
            residual: false,
            save_stats: false,
            epilogue: None,
        };
        let flat = [rows, cols];
        let inputs = vec![
            Self::reshaped(&x, &flat)?,
            Self::reshaped(&g, &[cols])?,
            Self::reshaped(&b, &[cols])?,
        ];
        self.run(spec, inputs, vec![Self::reshaped(&y, &flat)?])
    }

    fn softmax(&mut self, input: TensorHandle, out: TensorHandle, dim: i32) -> Result<()> {
        let (x, y) = (self.f32(input)?, self.f32(out)?);
        Self::same_shape("softmax", &[&x, &y])?;
        let axis =
            normalize_axis(dim as i64, x.shape().len()).map_err(|e| invalid(e.to_string()))?;
        let spec = SoftmaxSpec {
            dtype: ScalarType::F32,
            shape: x.shape().to_vec(),
            axis,
            log: false,
        };
        self.run(spec, vec![x], vec![y])
    }

    fn gelu(&mut self, input: TensorHandle, out: TensorHandle) -> Result<()> {
        self.unary(UnaryFn::GeluTanh, input, out)
    }

    fn relu(&mut self, input: TensorHandle, out: TensorHandle) -> Result<()> {
        self.unary(UnaryFn::Relu, input, out)
    }

    fn attention(
        &mut self,
        q: TensorHandle,
        k: TensorHandle,
        v: TensorHandle,
        out: TensorHandle,
        mask: Option<TensorHandle>,
        scale: f64,
    ) -> Result<()> {
        let (q, k, v, o) = (self.f32(q)?, self.f32(k)?, self.f32(v)?, self.f32(out)?);
        let (&[seq_q, d], &[seq_k, dk]) = (q.shape(), k.shape()) else {
            return Err(invalid(format!(
                "attention takes 2-D [seq, head_dim] q, k, v; got {:?}, {:?}",
                q.shape(),
                k.shape()
            )));
        };
        if dk != d || v.shape() != [seq_k, d] || o.shape() != [seq_q, d] {
            return Err(invalid(format!(
                "attention: q {:?}, k {:?}, v {:?}, out {:?}",
                q.shape(),
                k.shape(),
                v.shape(),
                o.shape()
            )));
        }
        let mask = mask
            .map(|m| self.additive_mask(m, [seq_q, seq_k]))
            .transpose()?;
        let spec = AttentionSpec {
            dtype: ScalarType::F32,
            layout: AttentionLayout::Bhsd,
            batch: 1,
            heads: 1,
            kv_heads: 1,
            seq_q,
            seq_k,
            head_dim: d,
            scale,
            causal: false,
            mask: mask.as_ref().map(|m| m.shape().to_vec()),
            causal_align: Default::default(),
            lse: false,
        };
        let four = |view: &View, seq| Self::reshaped(view, &[1, 1, seq, d]);
        let mut inputs = vec![four(&q, seq_q)?, four(&k, seq_k)?, four(&v, seq_k)?];
        inputs.extend(mask);
        self.run(spec, inputs, vec![four(&o, seq_q)?])
    }

    fn cross_entropy(
        &mut self,
        logits: TensorHandle,
        targets: TensorHandle,
        loss_out: TensorHandle,
        probs_out: TensorHandle,
    ) -> Result<()> {
        let (z, p, loss) = (self.f32(logits)?, self.f32(probs_out)?, self.f32(loss_out)?);
        let t = self.view(targets, None)?;
        Self::same_shape("cross_entropy", &[&z, &p])?;
        let Some((&classes, lead)) = z.shape().split_last() else {
            return Err(invalid("cross_entropy of 0-D logits".into()));
        };
        let rows: usize = lead.iter().product();
        if !matches!(t.dtype(), ScalarType::I64 | ScalarType::I32) {
            return Err(RustDError::TypeError {
                expected: "I64 or I32 targets".into(),
                got: t.dtype().name().into(),
            });
        }
        if t.numel() != rows || loss.numel() != rows {
            return Err(invalid(format!(
                "cross_entropy: {rows} rows of logits, targets {:?}, loss {:?}",
                t.shape(),
                loss.shape()
            )));
        }
        let spec = CrossEntropySpec {
            dtype: ScalarType::F32,
            index_dtype: t.dtype(),
            batch: rows,
            classes,
            divide_by_batch: false,
            grad: false,
            probs: true,
        };
        let flat = [rows, classes];
        let inputs = vec![Self::reshaped(&z, &flat)?, Self::reshaped(&t, &[rows])?];
        let outputs = vec![Self::reshaped(&loss, &[rows])?, Self::reshaped(&p, &flat)?];
        self.run(spec, inputs, outputs)
    }

    fn reduce_sum(
        &mut self,
        input: TensorHandle,
        out: TensorHandle,
        dim: Option<i32>,
    ) -> Result<()> {
        let (x, y) = (self.f32(input)?, self.f32(out)?);
        let rank = x.shape().len();
        let axes = match dim {
            None => (0..rank).collect(),
            Some(d) => vec![normalize_axis(d as i64, rank).map_err(|e| invalid(e.to_string()))?],
        };
        let kept: Vec<usize> = (0..rank)
            .filter(|a| !axes.contains(a))
            .map(|a| x.shape()[a])
            .collect();
        let kept_as_one: Vec<usize> = (0..rank)
            .map(|a| if axes.contains(&a) { 1 } else { x.shape()[a] })
            .collect();
        let whole = dim.is_none() && y.numel() == 1;
        if y.shape() != kept && y.shape() != kept_as_one && !whole {
            return Err(invalid(format!(
                "reduce_sum of {:?} over {dim:?} into {:?}: want {kept:?} or {kept_as_one:?}",
                x.shape(),
                y.shape()
            )));
        }
        let spec = ReduceSpec {
            func: ReduceFn::Sum,
            dtype: ScalarType::F32,
            shape: x.shape().to_vec(),
            axes,
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        };
        let y = Self::reshaped(&y, &kept)?;
        self.run(spec, vec![x], vec![y])
    }

    fn embedding(
        &mut self,
        indices: TensorHandle,
        weight: TensorHandle,
        out: TensorHandle,
    ) -> Result<()> {
        let (i, w, y) = (self.view(indices, None)?, self.f32(weight)?, self.f32(out)?);
        if !matches!(i.dtype(), ScalarType::I64 | ScalarType::I32) {
            return Err(RustDError::TypeError {
                expected: "I64 or I32 indices".into(),
                got: i.dtype().name().into(),
            });
        }
        let &[vocab, d] = w.shape() else {
            return Err(invalid(format!(
                "embedding: weight {:?} is not [vocab, dim]",
                w.shape()
            )));
        };
        let mut expected = i.shape().to_vec();
        expected.push(d);
        if y.numel() != expected.iter().product::<usize>() {
            return Err(invalid(format!(
                "embedding: out {:?}, want {expected:?}",
                y.shape()
            )));
        }
        let spec = GatherSpec {
            dtype: ScalarType::F32,
            index_dtype: i.dtype(),
            data: vec![vocab, d],
            indices: i.shape().to_vec(),
            axis: 0,
            rows_of: None,
        };
        let y = Self::reshaped(&y, &expected)?;
        self.run(spec, vec![w, i], vec![y])
    }

    fn adam_update(
        &mut self,
        param: TensorHandle,
        grad: TensorHandle,
        m: TensorHandle,
        v: TensorHandle,
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        step: u64,
    ) -> Result<()> {
        let views = [param, grad, m, v].map(|h| self.f32(h));
        let [p, g, m, v] = views;
        let (p, g, m, v) = (p?, g?, m?, v?);
        if [&g, &m, &v].iter().any(|x| x.numel() != p.numel()) {
            return Err(invalid(format!(
                "adam_update: param {:?}, grad {:?}, m {:?}, v {:?}",
                p.shape(),
                g.shape(),
                m.shape(),
                v.shape()
            )));
        }
        let len = p.numel();
        let spec = AdamSpec {
            dtype: ScalarType::F32,
            len,
            lr,
            beta1,
            beta2,
            eps,
            weight_decay: 0.0,
            decoupled: false,
            step,
        };
        let flat = |x: &View| Self::reshaped(x, &[len]);
        let (p, g, m, v) = (flat(&p)?, flat(&g)?, flat(&m)?, flat(&v)?);
        self.run(
            spec,
            vec![p.clone(), g, m.clone(), v.clone()],
            vec![p, m, v],
        )
    }

    fn gaussian_blur(
        &mut self,
        input: TensorHandle,
        out: TensorHandle,
        sigma: &Value,
    ) -> Result<()> {
        let sigma = number(sigma)?;
        if !(sigma.is_finite() && sigma > 0.0 && sigma <= 1.0e4) {
            return Err(invalid(format!(
                "gaussian_blur: sigma {sigma} must be in (0, 1e4]"
            )));
        }
        let radius = (3.0 * sigma).ceil() as usize;
        self.image(ImageFilter::GaussianBlur { sigma, radius }, input, out)
    }

    fn sobel_edges(
        &mut self,
        input: TensorHandle,
        out: TensorHandle,
        threshold: &Value,
    ) -> Result<()> {
        let threshold = number(threshold)?;
        self.image(ImageFilter::Sobel { threshold }, input, out)
    }

    fn grayscale(&mut self, input: TensorHandle, out: TensorHandle) -> Result<()> {
        self.image(ImageFilter::Grayscale, input, out)
    }

    fn threshold(&mut self, input: TensorHandle, out: TensorHandle, value: &Value) -> Result<()> {
        let value = number(value)?;
        self.image(ImageFilter::Threshold { value }, input, out)
    }

    fn brightness(&mut self, input: TensorHandle, out: TensorHandle, factor: &Value) -> Result<()> {
        let factor = number(factor)?;
        self.image(ImageFilter::Brightness { factor }, input, out)
    }

    fn contrast(&mut self, input: TensorHandle, out: TensorHandle, factor: &Value) -> Result<()> {
        let factor = number(factor)?;
        self.image(ImageFilter::Contrast { factor }, input, out)
    }

    fn invert_colors(&mut self, input: TensorHandle, out: TensorHandle) -> Result<()> {
        self.image(ImageFilter::Invert, input, out)
    }

    fn sharpen(&mut self, input: TensorHandle, out: TensorHandle) -> Result<()> {
        self.image(ImageFilter::Sharpen, input, out)
    }

    /// The caller's SPIR-V (entry point `main`, storage buffers at bindings `0..n` of
    /// set 0, all read-write, push constants as immediate data) on a wgpu device; the
    /// trait's "not supported" elsewhere. A module is loaded once per distinct binary.
    fn dispatch_compute(
        &mut self,
        shader_bytes: &[u8],
        bindings: &[TensorHandle],
        push_constants: &[u8],
        workgroup_count: [u32; 3],
    ) -> Result<()> {
        let views = bindings
            .iter()
            .map(|&h| self.view(h, None))
            .collect::<Result<Vec<_>>>()?;
        let push = u32::try_from(push_constants.len())
            .map_err(|_| invalid(format!("{} push-constant bytes", push_constants.len())))?;
        let key = (
            *blake3::hash(shader_bytes).as_bytes(),
            views.len(),
            push_constants.len(),
        );
        let module = match self.shaders.get(&key) {
            Some(m) => m.clone(),
            None => {
                let access = vec![ShaderBinding::ReadWrite; views.len()];
                let loaded = self.runtime.load_shader(
                    ShaderSource::SpirV(shader_bytes),
                    "main",
                    &access,
                    push,
                );
                let m = match loaded {
                    Err(RuntimeError::Unsupported { device, .. }) => {
                        return Err(RustDError::BackendError {
                            message: format!(
                                "Generic compute dispatch not supported by this backend \
                                 (SPIR-V runs on wgpu devices; this one is {device})"
                            ),
                        })
                    }
                    other => other.map_err(error)?,
                };
                self.shaders.insert(key, m.clone());
                m
            }
        };
        let refs: Vec<&View> = views.iter().collect();
        self.runtime
            .dispatch_shader(&module, &refs, push_constants, workgroup_count)
            .map_err(error)
    }

    fn sync(&mut self) -> Result<()> {
        self.runtime.synchronize().map_err(error)
    }
}
