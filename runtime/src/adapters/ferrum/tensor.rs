//! ferrum's `TensorLike` ([`FerrumTensor`]) and `TensorFactory` ([`FerrumFactory`]).

use super::{data_type, error, scalar_type, Context};
use crate::element::f64_to_bytes;
use crate::error::RuntimeError;
use crate::memory::View;
use ferrum_interfaces::tensor::{TensorFactory, TensorLike, TensorRef};
use ferrum_types::{DataType, Device, FerrumError, Result};
use kernelc_ir::ScalarType;
use kernelc_kernels::shape::numel;
use kernelc_kernels::{CastSpec, FillSpec, FillValue, ReduceFn, ReduceSpec, SliceSpec};
use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A ferrum tensor: a dense view of a buffer of its context's device. Values, not
/// places: ops return new tensors, `reshape` shares the buffer (nothing writes it).
pub struct FerrumTensor {
    ctx: Arc<Context>,
    view: View,
    /// ferrum's dtype of the view's (every kernelc dtype a tensor is made with has one).
    dtype: DataType,
}

impl std::fmt::Debug for FerrumTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FerrumTensor({:?} {} on {:?})",
            self.view.shape(),
            self.dtype,
            self.ctx
        )
    }
}

impl FerrumTensor {
    pub(super) fn new(ctx: Arc<Context>, view: View) -> FerrumTensor {
        // The adapter only makes views of ferrum's dtypes; FP32 stands in otherwise.
        let dtype = data_type(view.dtype()).unwrap_or(DataType::FP32);
        FerrumTensor { ctx, view, dtype }
    }

    pub fn view_ref(&self) -> &View {
        &self.view
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The values, widened to f64 (waits for the work writing them).
    fn values(&self) -> Result<Vec<f64>> {
        let result = self.ctx.rt.read_view_f64(&self.view);
        self.ctx.settle(result)
    }

    /// This tensor on `ctx` (a copy through the host when the devices differ).
    fn moved_to(&self, ctx: &Arc<Context>) -> Result<TensorRef> {
        if Arc::ptr_eq(ctx, &self.ctx) {
            return Ok(ctx.tensor(self.view.clone()));
        }
        let bytes =
            self.ctx
                .rt
                .read_buffer(self.view.buffer(), self.view.offset(), self.view.byte_len());
        let bytes = self.ctx.settle(bytes)?;
        let copy = ctx
            .alloc(self.view.dtype(), self.view.shape())
            .and_then(|v| {
                ctx.rt.write_buffer(v.buffer(), v.offset(), &bytes)?;
                Ok(v)
            });
        Ok(ctx.tensor(ctx.settle(copy)?))
    }
}

/// The end-exclusive box `start..end` of `shape` as a slice's starts and sizes.
pub(super) fn window(
    shape: &[usize],
    start: &[usize],
    end: &[usize],
) -> Result<(Vec<usize>, Vec<usize>)> {
    if start.len() != shape.len() || end.len() != shape.len() {
        return Err(FerrumError::invalid_parameter(format!(
            "view: start {start:?} and end {end:?} must have one entry per dim of {shape:?}"
        )));
    }
    let mut sizes = Vec::with_capacity(shape.len());
    for d in 0..shape.len() {
        if start[d] > end[d] || end[d] > shape[d] {
            return Err(FerrumError::invalid_parameter(format!(
                "view: dim {d} range {}..{} is not inside 0..{}",
                start[d], end[d], shape[d]
            )));
        }
        sizes.push(end[d] - start[d]);
    }
    Ok((start.to_vec(), sizes))
}

impl TensorLike for FerrumTensor {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn shape(&self) -> &[usize] {
        self.view.shape()
    }

    fn dtype(&self) -> DataType {
        self.dtype
    }

    fn device(&self) -> Device {
        self.ctx.device.clone()
    }

    fn is_contiguous(&self) -> bool {
        true
    }

    /// The box `start..end` (end-exclusive per dim), copied into a dense tensor.
    fn view(&self, start: &[usize], end: &[usize]) -> Result<TensorRef> {
        let (starts, sizes) = window(self.view.shape(), start, end)?;
        let spec = SliceSpec {
            dtype: self.view.dtype(),
            shape: self.view.shape().to_vec(),
            steps: vec![1; starts.len()],
            starts,
            sizes,
        };
        self.ctx.run1(spec, &[&self.view])
    }

    fn reshape(&self, shape: &[usize]) -> Result<TensorRef> {
        Ok(self.ctx.tensor(self.view.reshaped(shape).map_err(error)?))
    }

    fn to_cpu(&self) -> Result<TensorRef> {
        self.to_device(&Device::CPU)
    }

    /// Itself on its own device; else a copy in `device`'s shared context.
    fn to_device(&self, device: &Device) -> Result<TensorRef> {
        if *device == self.ctx.device {
            return Ok(self.ctx.tensor(self.view.clone()));
        }
        self.moved_to(&Context::of(device)?)
    }

    fn to_dtype(&self, dtype: DataType) -> Result<TensorRef> {
        let spec = CastSpec {
            from: self.view.dtype(),
            to: scalar_type(dtype)?,
            shape: self.view.shape().to_vec(),
        };
        self.ctx.run1(spec, &[&self.view])
    }

    /// Every element, row-major (whatever the shape: candle's helper returns one row).
    fn to_vec_f32(&self) -> Result<Vec<f32>> {
        Ok(self.values()?.into_iter().map(|v| v as f32).collect())
    }

    /// Every element of an integer or bool tensor; a value outside `u32` is an error.
    fn to_vec_u32(&self) -> Result<Vec<u32>> {
        if self.view.dtype().is_float() {
            return Err(FerrumError::invalid_parameter(format!(
                "to_vec_u32 of a {} tensor (convert it with to_dtype first)",
                self.dtype
            )));
        }
        self.values()?
            .into_iter()
            .map(|v| {
                if (0.0..=u32::MAX as f64).contains(&v) {
                    Ok(v as u32)
                } else {
                    Err(FerrumError::invalid_parameter(format!(
                        "to_vec_u32: {v} is not a u32"
                    )))
                }
            })
            .collect()
    }

    /// The position of the first maximum along the last dim of the last row (the
    /// next token's logits of `[.., seq, vocab]`); NaN is ignored.
    fn argmax_last_dim_u32(&self) -> Result<u32> {
        let last = self.view.shape().last().copied().unwrap_or(1);
        if self.view.numel() == 0 {
            return Err(FerrumError::invalid_parameter(
                "argmax_last_dim_u32 of an empty tensor",
            ));
        }
        let row = (self.view.numel() - last) * self.view.dtype().size_bytes() as usize;
        let view = View::new(
            self.view.buffer(),
            self.view.offset() + row,
            self.view.dtype(),
            &[last],
        );
        let view = self.ctx.settle(view)?;
        argmax(&self.ctx, &view)
    }
}

/// The position of the first maximum of `view`'s elements, flattened.
pub(super) fn argmax(ctx: &Arc<Context>, view: &View) -> Result<u32> {
    let flat = ctx.settle(view.reshaped(&[view.numel()]))?;
    let spec = ReduceSpec {
        func: ReduceFn::ArgMax,
        dtype: view.dtype(),
        shape: vec![view.numel()],
        axes: vec![0],
        keepdim: false,
        index_dtype: Some(ScalarType::U32),
        accumulate: false,
    };
    let out = ctx.run1(spec, &[&flat])?;
    let values = out.to_vec_u32()?;
    values
        .first()
        .copied()
        .ok_or_else(|| FerrumError::internal("argmax without a result"))
}

/// ferrum's `TensorFactory`.
pub struct FerrumFactory {
    ctx: Arc<Context>,
}

impl FerrumFactory {
    pub(super) fn new(ctx: Arc<Context>) -> FerrumFactory {
        FerrumFactory { ctx }
    }

    /// The context of `device`: this factory's, or the shared one.
    fn on(&self, device: &Device) -> Result<Arc<Context>> {
        if *device == self.ctx.device {
            Ok(self.ctx.clone())
        } else {
            Context::of(device)
        }
    }

    fn fill(
        &self,
        shape: &[usize],
        dtype: DataType,
        device: &Device,
        value: FillValue,
    ) -> Result<TensorRef> {
        let ctx = self.on(device)?;
        let spec = FillSpec {
            dtype: scalar_type(dtype)?,
            shape: shape.to_vec(),
            value,
            offset: 0,
        };
        ctx.run1(spec, &[])
    }

    /// The next random stream: every call draws new values, from one compiled kernel.
    fn next_step(&self) -> u64 {
        self.ctx.draws.fetch_add(1, Ordering::Relaxed)
    }
}

/// The seed of the random factories (their `step` counts the calls on a context).
pub const RANDOM_SEED: u64 = 0x006b_6572_6e65_6c63;

impl TensorFactory for FerrumFactory {
    /// Zeroed: kernelc never hands out memory with another tensor's values in it.
    fn empty(&self, shape: &[usize], dtype: DataType, device: Device) -> Result<TensorRef> {
        let ctx = self.on(&device)?;
        let view = ctx.alloc(scalar_type(dtype)?, shape);
        Ok(ctx.tensor(ctx.settle(view)?))
    }

    fn zeros_like(&self, tensor: &TensorRef) -> Result<TensorRef> {
        self.zeros(tensor.shape(), tensor.dtype(), &tensor.device())
    }

    /// `data` converted to `dtype` on the host (as `cast` converts), then uploaded.
    fn from_slice(
        &self,
        data: &[f32],
        shape: &[usize],
        dtype: DataType,
        device: Device,
    ) -> Result<TensorRef> {
        let ctx = self.on(&device)?;
        let ty = scalar_type(dtype)?;
        if data.len() != numel(shape) {
            return Err(error(RuntimeError::DataLength {
                shape: shape.to_vec(),
                expected: numel(shape),
                found: data.len(),
            }));
        }
        let values: Vec<f64> = data.iter().map(|&v| v as f64).collect();
        let bytes = f64_to_bytes(ty, &values);
        let view = ctx.alloc(ty, shape).and_then(|v| {
            ctx.rt.write_buffer(v.buffer(), v.offset(), &bytes)?;
            Ok(v)
        });
        Ok(ctx.tensor(ctx.settle(view)?))
    }

    fn to_device(&self, tensor: &TensorRef, device: Device) -> Result<TensorRef> {
        tensor.to_device(&device)
    }

    fn narrow(
        &self,
        tensor: &TensorRef,
        dim: usize,
        start: usize,
        length: usize,
    ) -> Result<TensorRef> {
        let shape = tensor.shape();
        if dim >= shape.len() {
            return Err(FerrumError::invalid_parameter(format!(
                "narrow: dim {dim} of a {}-dim tensor",
                shape.len()
            )));
        }
        let mut begin = vec![0; shape.len()];
        let mut end = shape.to_vec();
        begin[dim] = start;
        end[dim] = start.checked_add(length).ok_or_else(|| {
            FerrumError::invalid_parameter(format!("narrow: {start} + {length} overflows"))
        })?;
        tensor.view(&begin, &end)
    }

    fn reshape(&self, tensor: &TensorRef, shape: &[usize]) -> Result<TensorRef> {
        tensor.reshape(shape)
    }

    fn zeros(&self, shape: &[usize], dtype: DataType, device: &Device) -> Result<TensorRef> {
        self.fill(shape, dtype, device, FillValue::Constant { value: 0.0 })
    }

    fn ones(&self, shape: &[usize], dtype: DataType, device: &Device) -> Result<TensorRef> {
        self.fill(shape, dtype, device, FillValue::Constant { value: 1.0 })
    }

    fn uniform(
        &self,
        shape: &[usize],
        low: f32,
        high: f32,
        dtype: DataType,
        device: &Device,
    ) -> Result<TensorRef> {
        let value = FillValue::Uniform {
            low: low as f64,
            high: high as f64,
            seed: RANDOM_SEED,
            step: self.next_step(),
        };
        self.fill(shape, dtype, device, value)
    }

    fn normal(
        &self,
        shape: &[usize],
        mean: f32,
        std: f32,
        dtype: DataType,
        device: &Device,
    ) -> Result<TensorRef> {
        let value = FillValue::Normal {
            mean: mean as f64,
            std: std as f64,
            seed: RANDOM_SEED,
            step: self.next_step(),
        };
        self.fill(shape, dtype, device, value)
    }

    /// One of kernelc's tensors moved to `device`; another implementation's read
    /// through its `to_vec_f32` (which must return every element) and uploaded.
    fn from_tensor(&self, tensor: &TensorRef, device: &Device) -> Result<TensorRef> {
        if tensor.as_any().is::<FerrumTensor>() {
            return tensor.to_device(device);
        }
        let values = tensor.to_vec_f32()?;
        if values.len() != numel(tensor.shape()) {
            return Err(FerrumError::invalid_parameter(format!(
                "from_tensor: the foreign tensor's to_vec_f32 gave {} of its {} elements",
                values.len(),
                numel(tensor.shape())
            )));
        }
        self.from_slice(&values, tensor.shape(), tensor.dtype(), device.clone())
    }
}
