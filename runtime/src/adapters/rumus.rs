//! rumus's `backend::Backend` on kernelc: [`RumusBackend`].
//!
//! rumus's trait is 38 associated functions on host `f32` slices, with no `self` and
//! no error type. So:
//! - The device lives in a static, one per [`DeviceSlot`]: [`RumusBackend`] (slot
//!   [`GlobalDevice`]) opens `KERNELC_DEVICE` (else the best device present) on first
//!   use, or the device [`RumusBackend::configure`] names first. A program that wants
//!   two devices declares a second slot (three lines) and uses `RumusBackend<ItsSlot>`.
//! - On the CPU device the kernels read and write the caller's slices in place
//!   ([`Runtime::run_host`]); elsewhere each call uploads its inputs and downloads its
//!   outputs.
//! - A call kernelc refuses (slices of the wrong length, sizes that do not fit) writes
//!   nothing and cannot return its error: the error is kept for
//!   [`RumusBackend::take_error`] (per thread) and logged with `tracing::error!`.
//!   rumus's own `CpuBackend` panics or truncates there instead.
//!
//! Semantics are `rumus::backend::CpuBackend`'s (its "correctness baseline"):
//! `matmul`, `bmm`, `sum_rows`, `col2im`, `sum_channel_bias_grad`, `max_pool2d_backward`
//! and `embedding_backward` add into `dst`; `gelu` is the tanh form; the backward of
//! `sigmoid`/`tanh` takes the saved output, of `gelu`/`leaky_relu`/`relu` the saved
//! input; `dropout` draws rumus's own PCG bits (`rng = rumus`), so masks match it bit
//! for bit; batch norm uses the biased variance for the running statistics too;
//! `cross_entropy_forward` divides loss and gradient by the batch.

use crate::device::DeviceChoice;
use crate::error::{Result, RuntimeError};
use crate::host::{HostSlice, HostSliceMut};
use crate::runtime::Runtime;
use kernelc_ir::ScalarType::F32;
use kernelc_kernels::ops::conv::{Nchw, Window2d};
use kernelc_kernels::ops::gemm::Layout;
use kernelc_kernels::ops::pool::{PoolKind, PoolPass};
use kernelc_kernels::rng::RngScheme;
use kernelc_kernels::{
    Activation, ActivationBackwardSpec, AdaptivePool2dSpec, BatchNormBackwardSpec, BatchNormSpec,
    BinaryFn, BinarySpec, Col2imSpec, CrossEntropySpec, DropoutSpec, FillSpec, FillValue,
    GatherSpec, GemmSpec, Im2colSpec, LayerNormBackwardSpec, LayerNormSpec, OpSpec,
    Pool2dBackwardSpec, Pool2dSpec, ReduceFn, ReduceSpec, ScalarSpec, ScatterCombine, ScatterInit,
    ScatterSpec, SoftmaxBackwardSpec, SoftmaxSpec, UnaryFn, UnarySpec,
};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::OnceLock;

pub use ::rumus;

/// Where a [`RumusBackend`] keeps its runtime: a static cell.
///
/// ```
/// # use kernelc_runtime::adapters::rumus::DeviceSlot;
/// # use kernelc_runtime::Runtime;
/// # use std::sync::OnceLock;
/// struct SecondGpu;
/// impl DeviceSlot for SecondGpu {
///     fn cell() -> &'static OnceLock<Runtime> {
///         static CELL: OnceLock<Runtime> = OnceLock::new();
///         &CELL
///     }
/// }
/// ```
pub trait DeviceSlot: 'static {
    fn cell() -> &'static OnceLock<Runtime>;
}

/// The process-wide slot of [`RumusBackend`].
pub struct GlobalDevice;

impl DeviceSlot for GlobalDevice {
    fn cell() -> &'static OnceLock<Runtime> {
        static CELL: OnceLock<Runtime> = OnceLock::new();
        &CELL
    }
}

/// kernelc as a rumus `Backend` (static dispatch: `RumusBackend::add(..)`).
pub struct RumusBackend<S: DeviceSlot = GlobalDevice>(PhantomData<S>);

thread_local! {
    static LAST_ERROR: RefCell<Option<RuntimeError>> = const { RefCell::new(None) };
}

impl<S: DeviceSlot> RumusBackend<S> {
    /// Opens `choice` for this slot. Fails if the slot already holds a device (the
    /// first call, or first use, decides).
    pub fn configure(choice: DeviceChoice) -> Result<()> {
        Self::configure_with(Runtime::new(choice)?)
    }

    /// Puts `runtime` in this slot (see [`configure`](Self::configure)).
    pub fn configure_with(runtime: Runtime) -> Result<()> {
        S::cell().set(runtime).map_err(|refused| {
            let current = S::cell().get().map(|rt| rt.device_name());
            RuntimeError::BadArgument(format!(
                "the rumus backend is configured already (on {}); {} was not taken",
                current.unwrap_or_default(),
                refused.device_name()
            ))
        })
    }

    /// The slot's runtime, opening `KERNELC_DEVICE` (else the best device) on first use.
    pub fn runtime() -> Result<&'static Runtime> {
        if let Some(rt) = S::cell().get() {
            return Ok(rt);
        }
        let opened = Runtime::new(DeviceChoice::from_env()?)?;
        // A racing thread may have set it first: either runtime serves.
        let _ = S::cell().set(opened);
        S::cell()
            .get()
            .ok_or_else(|| RuntimeError::Internal("the rumus device cell is empty".into()))
    }

    /// The error of the last call this thread made that kernelc refused (and clears
    /// it): rumus's functions cannot return one.
    pub fn take_error() -> Option<RuntimeError> {
        LAST_ERROR.with(|e| e.borrow_mut().take())
    }

    /// Keeps `result`'s error for [`take_error`](Self::take_error).
    fn settle(function: &str, result: Result<()>) {
        if let Err(e) = result {
            tracing::error!("kernelc rumus backend: {function}: {e}");
            LAST_ERROR.with(|slot| *slot.borrow_mut() = Some(e));
        }
    }

    /// Runs `spec` on host slices (in the spec's input and output order).
    fn run(spec: impl Into<OpSpec>, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<()> {
        let spec = spec.into();
        spec.validate()?;
        let rt = Self::runtime()?;
        let (in_sigs, out_sigs) = (spec.inputs(), spec.outputs());
        if in_sigs.len() != inputs.len() || out_sigs.len() != outputs.len() {
            return Err(RuntimeError::Internal(format!(
                "rumus adapter passes {} inputs and {} outputs to {}",
                inputs.len(),
                outputs.len(),
                spec.name()
            )));
        }
        let ins = in_sigs
            .iter()
            .zip(inputs)
            .map(|(sig, data)| HostSlice::new(data, &sig.shape))
            .collect::<Result<Vec<_>>>()?;
        let mut outs = out_sigs
            .iter()
            .zip(outputs.iter_mut())
            .map(|(sig, data)| HostSliceMut::new(data, &sig.shape))
            .collect::<Result<Vec<_>>>()?;
        rt.run_host(&spec, &ins, &mut outs)
    }

    /// Runs `spec` whose last input is the prior value of its one output `dst` (an op
    /// that adds into `dst`).
    fn run_into_prior(spec: impl Into<OpSpec>, inputs: &[&[f32]], dst: &mut [f32]) -> Result<()> {
        let prior = dst.to_vec();
        let mut all = inputs.to_vec();
        all.push(&prior);
        Self::run(spec, &all, &mut [dst])
    }

    fn filled(len: usize, value: f32) -> Vec<f32> {
        let mut v = vec![0.0; len];
        let spec = FillSpec {
            dtype: F32,
            shape: vec![len],
            value: FillValue::Constant {
                value: value.into(),
            },
            offset: 0,
        };
        match Self::run(spec, &[], &mut [&mut v]) {
            Ok(()) => v,
            Err(e) => {
                // The value is known on the host: a device that failed still gets it right.
                Self::settle("full", Err(e));
                vec![value; len]
            }
        }
    }

    fn binary(func: BinaryFn, lhs: &[f32], rhs: &[f32], dst: &mut [f32]) -> Result<()> {
        let spec = BinarySpec {
            func,
            dtype: F32,
            lhs: vec![lhs.len()],
            rhs: vec![rhs.len()],
            out_dtype: None,
        };
        Self::run(spec, &[lhs, rhs], &mut [dst])
    }

    fn unary(func: UnaryFn, src: &[f32], dst: &mut [f32]) -> Result<()> {
        let spec = UnarySpec {
            func,
            dtype: F32,
            shape: vec![src.len()],
        };
        Self::run(spec, &[src], &mut [dst])
    }

    fn backward(func: Activation, saved: &[f32], out_grad: &[f32], dst: &mut [f32]) -> Result<()> {
        let spec = ActivationBackwardSpec {
            func,
            dtype: F32,
            shape: vec![saved.len()],
        };
        Self::run(spec, &[saved, out_grad], &mut [dst])
    }

    /// `dst += a·b` over `batch` row-major `m×k · k×n` products (`batch` empty: one).
    fn matmul_into(
        a: &[f32],
        b: &[f32],
        dst: &mut [f32],
        batch: Vec<usize>,
        [m, k, n]: [usize; 3],
    ) -> Result<()> {
        let spec = GemmSpec {
            layout: Layout::RowMajor,
            batch,
            beta: 1.0,
            ..GemmSpec::new(F32, m, n, k)
        };
        Self::run_into_prior(spec, &[a, b], dst)
    }

    /// `dst += Σ src` over `axis` of `[rows, cols]`.
    fn sum_into(src: &[f32], dst: &mut [f32], shape: [usize; 2], axis: usize) -> Result<()> {
        let spec = ReduceSpec {
            func: ReduceFn::Sum,
            dtype: F32,
            shape: shape.to_vec(),
            axes: vec![axis],
            keepdim: false,
            index_dtype: None,
            accumulate: true,
        };
        Self::run_into_prior(spec, &[src], dst)
    }

    /// One image `[C, H, W]` and a square window (rumus's im2col, col2im, pooling),
    /// checked against the output size the caller computed.
    fn window(
        [c, h, w]: [usize; 3],
        [k, stride, pad]: [usize; 3],
        [out_h, out_w]: [usize; 2],
    ) -> Result<(Nchw, Window2d)> {
        let window = Window2d::square(k, stride, pad);
        let expected = window.out_size([h, w]);
        if expected != Some([out_h, out_w]) {
            return Err(RuntimeError::BadArgument(format!(
                "a {k}x{k} window at stride {stride}, padding {pad} over {h}x{w} gives \
                 {expected:?}, not [{out_h}, {out_w}]"
            )));
        }
        Ok((Nchw::new([1, c, h, w]), window))
    }
}

/// `rumus::backend::Backend` for one slot; every function's errors go to `settle`.
impl<S: DeviceSlot> ::rumus::backend::Backend for RumusBackend<S> {
    fn zeros(len: usize) -> Vec<f32> {
        Self::filled(len, 0.0)
    }

    fn full(len: usize, value: f32) -> Vec<f32> {
        Self::filled(len, value)
    }

    fn add(lhs: &[f32], rhs: &[f32], dst: &mut [f32]) {
        Self::settle("add", Self::binary(BinaryFn::Add, lhs, rhs, dst));
    }

    fn sub(lhs: &[f32], rhs: &[f32], dst: &mut [f32]) {
        Self::settle("sub", Self::binary(BinaryFn::Sub, lhs, rhs, dst));
    }

    fn mul(lhs: &[f32], rhs: &[f32], dst: &mut [f32]) {
        Self::settle("mul", Self::binary(BinaryFn::Mul, lhs, rhs, dst));
    }

    fn scale(src: &[f32], dst: &mut [f32], scalar: f32) {
        let spec = ScalarSpec {
            func: BinaryFn::Mul,
            dtype: F32,
            shape: vec![src.len()],
            scalar: scalar.into(),
            reversed: true,
            out_dtype: None,
        };
        Self::settle("scale", Self::run(spec, &[src], &mut [dst]));
    }

    fn relu(src: &[f32], dst: &mut [f32]) {
        Self::settle("relu", Self::unary(UnaryFn::Relu, src, dst));
    }

    fn relu_backward(input: &[f32], out_grad: &[f32], dst: &mut [f32]) {
        let r = Self::backward(Activation::Relu, input, out_grad, dst);
        Self::settle("relu_backward", r);
    }

    fn matmul(a: &[f32], b: &[f32], dst: &mut [f32], m: usize, k: usize, n: usize) {
        Self::settle("matmul", Self::matmul_into(a, b, dst, vec![], [m, k, n]));
    }

    fn add_bias(matrix: &[f32], bias: &[f32], dst: &mut [f32], m: usize, n: usize) {
        let spec = BinarySpec {
            func: BinaryFn::Add,
            dtype: F32,
            lhs: vec![m, n],
            rhs: vec![n],
            out_dtype: None,
        };
        Self::settle("add_bias", Self::run(spec, &[matrix, bias], &mut [dst]));
    }

    fn sum_rows(src: &[f32], dst: &mut [f32], m: usize, n: usize) {
        Self::settle("sum_rows", Self::sum_into(src, dst, [m, n], 0));
    }

    fn im2col(
        src: &[f32],
        dst: &mut [f32],
        c_in: usize,
        h: usize,
        w: usize,
        k: usize,
        stride: usize,
        pad: usize,
        out_h: usize,
        out_w: usize,
    ) {
        let r = Self::window([c_in, h, w], [k, stride, pad], [out_h, out_w]).and_then(
            |(image, window)| {
                Self::run(
                    Im2colSpec {
                        dtype: F32,
                        image,
                        window,
                    },
                    &[src],
                    &mut [dst],
                )
            },
        );
        Self::settle("im2col", r);
    }

    fn col2im(
        src: &[f32],
        dst: &mut [f32],
        c_in: usize,
        h: usize,
        w: usize,
        k: usize,
        stride: usize,
        pad: usize,
        out_h: usize,
        out_w: usize,
    ) {
        let r = Self::window([c_in, h, w], [k, stride, pad], [out_h, out_w]).and_then(
            |(image, window)| {
                let spec = Col2imSpec {
                    dtype: F32,
                    image,
                    window,
                    accumulate: true,
                };
                Self::run_into_prior(spec, &[src], dst)
            },
        );
        Self::settle("col2im", r);
    }

    fn add_channel_bias(
        src: &[f32],
        bias: &[f32],
        dst: &mut [f32],
        channels: usize,
        spatial: usize,
    ) {
        let spec = BinarySpec {
            func: BinaryFn::Add,
            dtype: F32,
            lhs: vec![channels, spatial],
            rhs: vec![channels, 1],
            out_dtype: None,
        };
        Self::settle(
            "add_channel_bias",
            Self::run(spec, &[src, bias], &mut [dst]),
        );
    }

    fn sum_channel_bias_grad(src: &[f32], dst: &mut [f32], channels: usize, spatial: usize) {
        Self::settle(
            "sum_channel_bias_grad",
            Self::sum_into(src, dst, [channels, spatial], 1),
        );
    }

    fn max_pool2d(
        src: &[f32],
        dst: &mut [f32],
        indices: &mut [f32],
        channels: usize,
        h: usize,
        w: usize,
        k: usize,
        stride: usize,
        out_h: usize,
        out_w: usize,
    ) {
        let r = Self::window([channels, h, w], [k, stride, 0], [out_h, out_w]).and_then(
            |(image, window)| {
                let spec = Pool2dSpec {
                    kind: PoolKind::Max,
                    dtype: F32,
                    image,
                    window,
                    count_include_pad: false,
                    indices: Some(F32),
                };
                Self::run(spec, &[src], &mut [dst, indices])
            },
        );
        Self::settle("max_pool2d", r);
    }

    fn max_pool2d_backward(
        out_grad: &[f32],
        indices: &[f32],
        dst: &mut [f32],
        channels: usize,
        h: usize,
        w: usize,
        out_h: usize,
        out_w: usize,
    ) {
        let spec = Pool2dBackwardSpec {
            kind: PoolKind::Max,
            dtype: F32,
            image: Nchw::new([1, channels, h, w]),
            out_height: out_h,
            out_width: out_w,
            window: None,
            count_include_pad: false,
            index_dtype: Some(F32),
            accumulate: true,
        };
        let r = Self::run_into_prior(spec, &[out_grad, indices], dst);
        Self::settle("max_pool2d_backward", r);
    }

    fn dropout(src: &[f32], dst: &mut [f32], mask: &mut [f32], numel: usize, p: f32, step: u64) {
        let spec = DropoutSpec {
            dtype: F32,
            shape: vec![numel],
            p: p.into(),
            seed: 0,
            step,
            mask: true,
            rng: RngScheme::Rumus,
            offset: 0,
        };
        Self::settle("dropout", Self::run(spec, &[src], &mut [dst, mask]));
    }

    fn sigmoid(src: &[f32], dst: &mut [f32]) {
        Self::settle("sigmoid", Self::unary(UnaryFn::Sigmoid, src, dst));
    }

    fn sigmoid_backward(saved_out: &[f32], out_grad: &[f32], dst: &mut [f32]) {
        let r = Self::backward(Activation::Sigmoid, saved_out, out_grad, dst);
        Self::settle("sigmoid_backward", r);
    }

    fn tanh_act(src: &[f32], dst: &mut [f32]) {
        Self::settle("tanh_act", Self::unary(UnaryFn::Tanh, src, dst));
    }

    fn tanh_backward(saved_out: &[f32], out_grad: &[f32], dst: &mut [f32]) {
        let r = Self::backward(Activation::Tanh, saved_out, out_grad, dst);
        Self::settle("tanh_backward", r);
    }

    fn gelu(src: &[f32], dst: &mut [f32]) {
        Self::settle("gelu", Self::unary(UnaryFn::GeluTanh, src, dst));
    }

    fn gelu_backward(saved_input: &[f32], out_grad: &[f32], dst: &mut [f32]) {
        let r = Self::backward(Activation::GeluTanh, saved_input, out_grad, dst);
        Self::settle("gelu_backward", r);
    }

    fn leaky_relu(src: &[f32], dst: &mut [f32], alpha: f32) {
        let func = UnaryFn::LeakyRelu {
            slope: alpha.into(),
        };
        Self::settle("leaky_relu", Self::unary(func, src, dst));
    }

    fn leaky_relu_backward(saved_input: &[f32], out_grad: &[f32], dst: &mut [f32], alpha: f32) {
        let func = Activation::LeakyRelu {
            slope: alpha.into(),
        };
        let r = Self::backward(func, saved_input, out_grad, dst);
        Self::settle("leaky_relu_backward", r);
    }

    fn batch_norm_forward(
        input: &[f32],
        weight: &[f32],
        bias: &[f32],
        running_mean: &mut [f32],
        running_var: &mut [f32],
        output: &mut [f32],
        save: &mut [f32],
        batch: usize,
        channels: usize,
        height: usize,
        width: usize,
        epsilon: f32,
        momentum: f32,
        is_training: bool,
    ) {
        let spec = BatchNormSpec {
            dtype: F32,
            shape: vec![batch, channels, height, width],
            eps: epsilon.into(),
            momentum: momentum.into(),
            training: is_training,
        };
        let (mean, var) = (running_mean.to_vec(), running_var.to_vec());
        let inputs = [input, weight, bias, &mean, &var];
        let r = if is_training {
            Self::run(
                spec,
                &inputs,
                &mut [output, save, running_mean, running_var],
            )
        } else {
            Self::run(spec, &inputs, &mut [output])
        };
        Self::settle("batch_norm_forward", r);
    }

    fn batch_norm_backward(
        grad_out: &[f32],
        input: &[f32],
        weight: &[f32],
        save: &[f32],
        grad_input: &mut [f32],
        batch: usize,
        channels: usize,
        height: usize,
        width: usize,
    ) {
        let spec = BatchNormBackwardSpec {
            dtype: F32,
            shape: vec![batch, channels, height, width],
            param_grads: false,
            given_grads: None,
        };
        let r = Self::run(spec, &[grad_out, input, weight, save], &mut [grad_input]);
        Self::settle("batch_norm_backward", r);
    }

    fn adaptive_avg_pool2d(
        input: &[f32],
        output: &mut [f32],
        batch: usize,
        channels: usize,
        h_in: usize,
        w_in: usize,
        h_out: usize,
        w_out: usize,
    ) {
        let spec = AdaptivePool2dSpec {
            kind: PoolKind::Avg,
            pass: PoolPass::Forward,
            dtype: F32,
            batch,
            channels,
            in_size: [h_in, w_in],
            out_size: [h_out, w_out],
        };
        Self::settle(
            "adaptive_avg_pool2d",
            Self::run(spec, &[input], &mut [output]),
        );
    }

    fn adaptive_avg_pool2d_backward(
        grad_out: &[f32],
        grad_in: &mut [f32],
        batch: usize,
        channels: usize,
        h_in: usize,
        w_in: usize,
        h_out: usize,
        w_out: usize,
    ) {
        let spec = AdaptivePool2dSpec {
            kind: PoolKind::Avg,
            pass: PoolPass::Backward,
            dtype: F32,
            batch,
            channels,
            in_size: [h_in, w_in],
            out_size: [h_out, w_out],
        };
        let r = Self::run(spec, &[grad_out], &mut [grad_in]);
        Self::settle("adaptive_avg_pool2d_backward", r);
    }

    fn bmm(a: &[f32], b: &[f32], dst: &mut [f32], batch: usize, m: usize, k: usize, n: usize) {
        Self::settle("bmm", Self::matmul_into(a, b, dst, vec![batch], [m, k, n]));
    }

    fn softmax_forward(input: &[f32], output: &mut [f32], num_rows: usize, row_size: usize) {
        let spec = SoftmaxSpec {
            dtype: F32,
            shape: vec![num_rows, row_size],
            axis: 1,
            log: false,
        };
        Self::settle("softmax_forward", Self::run(spec, &[input], &mut [output]));
    }

    fn softmax_backward(
        saved_out: &[f32],
        grad_out: &[f32],
        grad_in: &mut [f32],
        num_rows: usize,
        row_size: usize,
    ) {
        let spec = SoftmaxBackwardSpec {
            dtype: F32,
            shape: vec![num_rows, row_size],
            axis: 1,
            log: false,
        };
        let r = Self::run(spec, &[saved_out, grad_out], &mut [grad_in]);
        Self::settle("softmax_backward", r);
    }

    fn layer_norm_forward(
        input: &[f32],
        weight: &[f32],
        bias: &[f32],
        output: &mut [f32],
        save_mean_invstd: &mut [f32],
        num_instances: usize,
        norm_size: usize,
        epsilon: f32,
    ) {
        let spec = LayerNormSpec {
            dtype: F32,
            shape: vec![num_instances, norm_size],
            eps: epsilon.into(),
            rms: false,
            weight: true,
            bias: true,
            residual: false,
            save_stats: true,
            epilogue: None,
        };
        let r = Self::run(
            spec,
            &[input, weight, bias],
            &mut [output, save_mean_invstd],
        );
        Self::settle("layer_norm_forward", r);
    }

    fn layer_norm_backward(
        grad_out: &[f32],
        input: &[f32],
        weight: &[f32],
        save_mean_invstd: &[f32],
        grad_input: &mut [f32],
        num_instances: usize,
        norm_size: usize,
    ) {
        let spec = LayerNormBackwardSpec {
            dtype: F32,
            shape: vec![num_instances, norm_size],
            rms: false,
            weight: true,
            bias: false,
            param_grads: false,
        };
        let r = Self::run(
            spec,
            &[grad_out, input, weight, save_mean_invstd],
            &mut [grad_input],
        );
        Self::settle("layer_norm_backward", r);
    }

    fn embedding_forward(
        indices: &[f32],
        weight: &[f32],
        output: &mut [f32],
        total_lookups: usize,
        embed_dim: usize,
    ) {
        let r = vocabulary(weight.len(), embed_dim).and_then(|vocab| {
            let spec = GatherSpec {
                dtype: F32,
                index_dtype: F32,
                data: vec![vocab, embed_dim],
                indices: vec![total_lookups],
                axis: 0,
                rows_of: None,
            };
            Self::run(spec, &[weight, indices], &mut [output])
        });
        Self::settle("embedding_forward", r);
    }

    fn embedding_backward(
        grad_out: &[f32],
        indices: &[f32],
        grad_weight: &mut [f32],
        total_lookups: usize,
        embed_dim: usize,
    ) {
        let r = vocabulary(grad_weight.len(), embed_dim).and_then(|vocab| {
            let spec = ScatterSpec {
                dtype: F32,
                index_dtype: F32,
                data: vec![vocab, embed_dim],
                indices: vec![total_lookups],
                axis: 0,
                combine: ScatterCombine::Sum,
                init: ScatterInit::Prior,
                rows_of: None,
            };
            Self::run_into_prior(spec, &[grad_out, indices], grad_weight)
        });
        Self::settle("embedding_backward", r);
    }

    fn cross_entropy_forward(
        logits: &[f32],
        targets: &[f32],
        grad: &mut [f32],
        loss_per_b: &mut [f32],
        batch: usize,
        num_classes: usize,
    ) {
        let spec = CrossEntropySpec {
            dtype: F32,
            index_dtype: F32,
            batch,
            classes: num_classes,
            divide_by_batch: true,
            grad: true,
            probs: false,
        };
        let r = Self::run(spec, &[logits, targets], &mut [loss_per_b, grad]);
        Self::settle("cross_entropy_forward", r);
    }
}

/// Rows of an embedding table of `len` values, `dim` wide.
fn vocabulary(len: usize, dim: usize) -> Result<usize> {
    if dim == 0 || len % dim != 0 {
        return Err(RuntimeError::BadArgument(format!(
            "an embedding table of {len} values is not a whole number of rows of {dim}"
        )));
    }
    Ok(len / dim)
}
