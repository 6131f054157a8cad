//! ferrum's `TensorOps` ([`FerrumTensorOps`]) and `KernelOps` with its six
//! sub-traits ([`FerrumKernelOps`]): each method one catalogue op (sampling aside,
//! which draws one token on the host from the logits it reads).

use super::tensor::{argmax, FerrumTensor};
use super::{error, Context};
use crate::memory::View;
use ferrum_interfaces::kernel_ops::{
    ActivationOps, AttentionOps, AttentionParams, KernelOps, LinearOps, NormOps, PositionOps,
    SamplingOps, SamplingParams,
};
use ferrum_interfaces::tensor::{TensorOps, TensorRef};
use ferrum_types::{FerrumError, Result};
use kernelc_ir::ScalarType;
use kernelc_kernels::shape::numel;
use kernelc_kernels::{
    AttentionLayout, AttentionSpec, BinaryFn, BinarySpec, CausalAlign, ConcatSpec, GemmSpec,
    LayerNormSpec, PermuteSpec, RopeSpec, SoftmaxSpec, UnaryFn, UnarySpec,
};
use std::sync::Arc;

/// `dim` counted from the end when negative, checked against `rank`.
fn axis(dim: i64, rank: usize, what: &str) -> Result<usize> {
    let d = if dim < 0 { dim + rank as i64 } else { dim };
    if d < 0 || d >= rank as i64 {
        return Err(FerrumError::invalid_parameter(format!(
            "{what}: dim {dim} of a {rank}-dim tensor"
        )));
    }
    Ok(d as usize)
}

/// The common dtype of `tensors`, or an error naming both.
fn same_dtype(what: &str, tensors: &[&FerrumTensor]) -> Result<ScalarType> {
    let first = tensors
        .first()
        .map(|t| t.view_ref().dtype())
        .ok_or_else(|| FerrumError::invalid_parameter(format!("{what}: no tensors")))?;
    for t in tensors {
        if t.view_ref().dtype() != first {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: dtypes {first} and {} differ (convert with to_dtype)",
                t.view_ref().dtype()
            )));
        }
    }
    Ok(first)
}

/// ferrum's `TensorOps`.
pub struct FerrumTensorOps {
    ctx: Arc<Context>,
}

impl FerrumTensorOps {
    pub(super) fn new(ctx: Arc<Context>) -> FerrumTensorOps {
        FerrumTensorOps { ctx }
    }

    fn binary(&self, func: BinaryFn, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        let what = func.name();
        let (a, b) = (self.ctx.ours(a, what)?, self.ctx.ours(b, what)?);
        let spec = BinarySpec {
            func,
            dtype: same_dtype(what, &[a, b])?,
            lhs: a.view_ref().shape().to_vec(),
            rhs: b.view_ref().shape().to_vec(),
            out_dtype: None,
        };
        self.ctx.run1(spec, &[a.view_ref(), b.view_ref()])
    }

    fn unary(&self, func: UnaryFn, x: &TensorRef) -> Result<TensorRef> {
        let x = self.ctx.ours(x, func.name())?;
        let spec = UnarySpec {
            func,
            dtype: x.view_ref().dtype(),
            shape: x.view_ref().shape().to_vec(),
        };
        self.ctx.run1(spec, &[x.view_ref()])
    }

    fn permuted(&self, x: &TensorRef, perm: Vec<usize>, what: &str) -> Result<TensorRef> {
        let x = self.ctx.ours(x, what)?;
        let spec = PermuteSpec {
            dtype: x.view_ref().dtype(),
            shape: x.view_ref().shape().to_vec(),
            perm,
        };
        self.ctx.run1(spec, &[x.view_ref()])
    }
}

/// A layer or RMS norm over the last dim of `x` (residual added first when given):
/// `y`, then the sum `x + residual` when there is one.
fn norm(
    ctx: &Arc<Context>,
    x: &TensorRef,
    residual: Option<&TensorRef>,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
    eps: f32,
    rms: bool,
) -> Result<Vec<TensorRef>> {
    let what = if rms { "rms_norm" } else { "layer_norm" };
    let x = ctx.ours(x, what)?;
    let shape = x.view_ref().shape().to_vec();
    let cols = shape.last().copied().unwrap_or(1);
    let mut inputs = vec![x.view_ref().clone()];
    let mut operands = vec![x];
    if let Some(r) = residual {
        let r = ctx.ours(r, what)?;
        inputs.push(r.view_ref().clone());
        operands.push(r);
    }
    // Weight and bias: `cols` elements, whatever their shape.
    for (name, t) in [("weight", Some(weight)), ("bias", bias)] {
        if let Some(t) = t {
            let t = ctx.ours(t, what)?;
            if t.view_ref().numel() != cols {
                return Err(FerrumError::invalid_parameter(format!(
                    "{what}: {name} of shape {:?} for rows of {cols}",
                    t.view_ref().shape()
                )));
            }
            inputs.push(t.view_ref().reshaped(&[cols]).map_err(error)?);
            operands.push(t);
        }
    }
    let spec = LayerNormSpec {
        dtype: same_dtype(what, &operands)?,
        shape,
        eps: eps as f64,
        rms,
        weight: true,
        bias: bias.is_some(),
        residual: residual.is_some(),
        save_stats: false,
        epilogue: None,
    };
    ctx.run(spec, &inputs.iter().collect::<Vec<_>>())
}

/// `input · weightᵀ` over the last dim of `input` (`weight` is `[out, in]`).
fn linear(ctx: &Arc<Context>, input: &TensorRef, weight: &TensorRef) -> Result<TensorRef> {
    let (x, w) = (ctx.ours(input, "linear")?, ctx.ours(weight, "linear")?);
    let dtype = same_dtype("linear", &[x, w])?;
    let shape = x.view_ref().shape();
    let (k, ws) = (shape.last().copied().unwrap_or(1), w.view_ref().shape());
    if ws.len() != 2 || ws[1] != k {
        return Err(FerrumError::invalid_parameter(format!(
            "linear: weight {ws:?} is not [out, {k}] for input {shape:?}"
        )));
    }
    let (m, n) = (x.view_ref().numel() / k.max(1), ws[0]);
    let spec = GemmSpec {
        trans_b: true,
        ..GemmSpec::new(dtype, m, n, k)
    };
    let a = x.view_ref().reshaped(&[m, k]).map_err(error)?;
    let out = ctx.run1(spec, &[&a, w.view_ref()])?;
    let mut out_shape = shape[..shape.len().saturating_sub(1)].to_vec();
    out_shape.push(n);
    out.reshape(&out_shape)
}

/// NumPy's `matmul` ([`GemmSpec::matmul`]).
fn matmul(ctx: &Arc<Context>, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
    let (x, y) = (ctx.ours(a, "matmul")?, ctx.ours(b, "matmul")?);
    let dtype = same_dtype("matmul", &[x, y])?;
    let (spec, shape) = GemmSpec::matmul(dtype, x.view_ref().shape(), y.view_ref().shape())
        .map_err(|e| FerrumError::invalid_parameter(format!("matmul: {e}")))?;
    let flat = |v: &View| v.reshaped(&[v.numel()]).map_err(error);
    let (flat_a, flat_b) = (flat(x.view_ref())?, flat(y.view_ref())?);
    ctx.run1(spec, &[&flat_a, &flat_b])?.reshape(&shape)
}

impl TensorOps for FerrumTensorOps {
    fn matmul(&self, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        matmul(&self.ctx, a, b)
    }

    fn add(&self, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        self.binary(BinaryFn::Add, a, b)
    }

    fn sub(&self, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        self.binary(BinaryFn::Sub, a, b)
    }

    fn mul(&self, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        self.binary(BinaryFn::Mul, a, b)
    }

    fn div(&self, a: &TensorRef, b: &TensorRef) -> Result<TensorRef> {
        self.binary(BinaryFn::Div, a, b)
    }

    fn softmax(&self, tensor: &TensorRef, dim: i32) -> Result<TensorRef> {
        let x = self.ctx.ours(tensor, "softmax")?;
        let shape = x.view_ref().shape().to_vec();
        let spec = SoftmaxSpec {
            dtype: x.view_ref().dtype(),
            axis: axis(dim as i64, shape.len(), "softmax")?,
            shape,
            log: false,
        };
        self.ctx.run1(spec, &[x.view_ref()])
    }

    fn layer_norm(
        &self,
        input: &TensorRef,
        weight: &TensorRef,
        bias: Option<&TensorRef>,
        eps: f32,
    ) -> Result<TensorRef> {
        first(norm(&self.ctx, input, None, weight, bias, eps, false)?)
    }

    fn rms_norm(&self, input: &TensorRef, weight: &TensorRef, eps: f32) -> Result<TensorRef> {
        first(norm(&self.ctx, input, None, weight, None, eps, true)?)
    }

    fn relu(&self, tensor: &TensorRef) -> Result<TensorRef> {
        self.unary(UnaryFn::Relu, tensor)
    }

    /// The tanh form, as candle's (ferrum's reference) `gelu`.
    fn gelu(&self, tensor: &TensorRef) -> Result<TensorRef> {
        self.unary(UnaryFn::GeluTanh, tensor)
    }

    fn silu(&self, tensor: &TensorRef) -> Result<TensorRef> {
        self.unary(UnaryFn::Silu, tensor)
    }

    fn concat(&self, tensors: &[&TensorRef], dim: usize) -> Result<TensorRef> {
        let parts = tensors
            .iter()
            .map(|t| self.ctx.ours(t, "concat"))
            .collect::<Result<Vec<_>>>()?;
        let spec = ConcatSpec {
            dtype: same_dtype("concat", &parts)?,
            shapes: parts
                .iter()
                .map(|p| p.view_ref().shape().to_vec())
                .collect(),
            axis: dim,
        };
        let views: Vec<&View> = parts.iter().map(|p| p.view_ref()).collect();
        self.ctx.run1(spec, &views)
    }

    /// Consecutive parts of `sizes` along `dim` (which they must add up to).
    fn split(&self, tensor: &TensorRef, sizes: &[usize], dim: usize) -> Result<Vec<TensorRef>> {
        let x = self.ctx.ours(tensor, "split")?;
        let shape = x.view_ref().shape();
        let total = shape.get(dim).copied().ok_or_else(|| {
            FerrumError::invalid_parameter(format!("split: dim {dim} of {shape:?}"))
        })?;
        if sizes.iter().sum::<usize>() != total {
            return Err(FerrumError::invalid_parameter(format!(
                "split: sizes {sizes:?} do not add up to dim {dim} of {shape:?}"
            )));
        }
        let mut start = 0;
        let mut parts = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let mut begin = vec![0; shape.len()];
            let mut end = shape.to_vec();
            (begin[dim], end[dim]) = (start, start + size);
            parts.push(tensor.view(&begin, &end)?);
            start += size;
        }
        Ok(parts)
    }

    fn transpose(&self, tensor: &TensorRef, dim0: usize, dim1: usize) -> Result<TensorRef> {
        let rank = tensor.shape().len();
        if dim0 >= rank || dim1 >= rank {
            return Err(FerrumError::invalid_parameter(format!(
                "transpose: dims {dim0} and {dim1} of a {rank}-dim tensor"
            )));
        }
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(dim0, dim1);
        self.permuted(tensor, perm, "transpose")
    }

    fn permute(&self, tensor: &TensorRef, dims: &[usize]) -> Result<TensorRef> {
        self.permuted(tensor, dims.to_vec(), "permute")
    }
}

fn first(mut outputs: Vec<TensorRef>) -> Result<TensorRef> {
    if outputs.is_empty() {
        return Err(FerrumError::internal("an op without an output"));
    }
    Ok(outputs.swap_remove(0))
}

/// ferrum's `KernelOps`: every sub-trait it offers, on the same device.
pub struct FerrumKernelOps {
    ctx: Arc<Context>,
}

impl FerrumKernelOps {
    pub(super) fn new(ctx: Arc<Context>) -> FerrumKernelOps {
        FerrumKernelOps { ctx }
    }
}

impl KernelOps for FerrumKernelOps {
    fn norm_ops(&self) -> Option<&dyn NormOps> {
        Some(self)
    }
    fn position_ops(&self) -> Option<&dyn PositionOps> {
        Some(self)
    }
    fn attention_ops(&self) -> Option<&dyn AttentionOps> {
        Some(self)
    }
    fn activation_ops(&self) -> Option<&dyn ActivationOps> {
        Some(self)
    }
    fn linear_ops(&self) -> Option<&dyn LinearOps> {
        Some(self)
    }
    fn sampling_ops(&self) -> Option<&dyn SamplingOps> {
        Some(self)
    }
    fn backend_name(&self) -> &str {
        "kernelc"
    }
}

impl NormOps for FerrumKernelOps {
    fn rms_norm(&self, input: &TensorRef, weight: &TensorRef, eps: f32) -> Result<TensorRef> {
        first(norm(&self.ctx, input, None, weight, None, eps, true)?)
    }

    /// `(rms_norm(input + residual), input + residual)`, in one kernel.
    fn rms_norm_residual(
        &self,
        input: &TensorRef,
        residual: &TensorRef,
        weight: &TensorRef,
        eps: f32,
    ) -> Result<(TensorRef, TensorRef)> {
        let mut out = norm(&self.ctx, input, Some(residual), weight, None, eps, true)?;
        match (out.pop(), out.pop()) {
            (Some(sum), Some(y)) => Ok((y, sum)),
            _ => Err(FerrumError::internal(
                "rms_norm_residual without its two outputs",
            )),
        }
    }
}

impl PositionOps for FerrumKernelOps {
    /// NeoX halves rotated by the `[max_seq_len, rotary / 2]` tables (`rotary`, the
    /// rotated dims, may be fewer than `head_dim`); positions per step, per batch
    /// item and step, or from one start position.
    fn rotary_embedding(
        &self,
        x: &TensorRef,
        cos_cache: &TensorRef,
        sin_cache: &TensorRef,
        position_ids: &[usize],
    ) -> Result<TensorRef> {
        let what = "rotary_embedding";
        let (xt, cos, sin) = (
            self.ctx.ours(x, what)?,
            self.ctx.ours(cos_cache, what)?,
            self.ctx.ours(sin_cache, what)?,
        );
        let &[batch, seq, heads, head_dim] = xt.view_ref().shape() else {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: x of shape {:?}, not [batch, seq, heads, head_dim]",
                xt.view_ref().shape()
            )));
        };
        let &[max_positions, half] = cos.view_ref().shape() else {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: cos table of shape {:?}, not [max_seq_len, head_dim / 2]",
                cos.view_ref().shape()
            )));
        };
        let positions: Vec<u32> = match position_ids.len() {
            n if n == seq => position_ids.iter().map(|&p| p as u64).map(u32_position).collect::<Result<_>>()?,
            n if n == batch * seq => position_ids.iter().map(|&p| p as u64).map(u32_position).collect::<Result<_>>()?,
            1 => (0..seq as u64).map(|t| u32_position(position_ids[0] as u64 + t)).collect::<Result<_>>()?,
            n => {
                return Err(FerrumError::invalid_parameter(format!(
                    "{what}: {n} position ids for batch {batch} and seq {seq} (give seq, batch·seq or one start)"
                )))
            }
        };
        let batch_positions = position_ids.len() == batch * seq && position_ids.len() != seq;
        let spec = RopeSpec {
            dtype: same_dtype(what, &[xt, cos, sin])?,
            index_dtype: ScalarType::U32,
            batch,
            seq,
            heads,
            head_dim,
            max_positions,
            interleaved: false,
            rotary_dim: (2 * half != head_dim).then_some(2 * half),
            batch_positions,
        };
        let shape = if batch_positions {
            vec![batch, seq]
        } else {
            vec![seq]
        };
        let ids = self.ctx.alloc(ScalarType::U32, &shape).and_then(|v| {
            self.ctx.rt.write_view(&v, &positions)?;
            Ok(v)
        });
        let ids = self.ctx.settle(ids)?;
        self.ctx
            .run1(spec, &[xt.view_ref(), cos.view_ref(), sin.view_ref(), &ids])
    }
}

fn u32_position(p: u64) -> Result<u32> {
    u32::try_from(p).map_err(|_| FerrumError::invalid_parameter(format!("position {p} past u32")))
}

impl AttentionOps for FerrumKernelOps {
    /// `[batch, seq, heads, head_dim]` q, k, v (k, v with `num_kv_heads` heads),
    /// scores `q·kᵀ · softmax_scale`, causal bottom-right aligned.
    fn attention(
        &self,
        q: &TensorRef,
        k: &TensorRef,
        v: &TensorRef,
        params: &AttentionParams,
    ) -> Result<TensorRef> {
        let what = "attention";
        let (qt, kt, vt) = (
            self.ctx.ours(q, what)?,
            self.ctx.ours(k, what)?,
            self.ctx.ours(v, what)?,
        );
        let (qs, ks) = (qt.view_ref().shape(), kt.view_ref().shape());
        let (&[batch, seq_q, heads, head_dim], &[_, seq_k, _, _]) = (qs, ks) else {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: q {qs:?} and k {ks:?} must be [batch, seq, heads, head_dim]"
            )));
        };
        if heads != params.num_heads || head_dim != params.head_dim {
            return Err(FerrumError::invalid_parameter(format!(
                "{what}: q {qs:?} has not {} heads of {} (the params')",
                params.num_heads, params.head_dim
            )));
        }
        let spec = AttentionSpec {
            dtype: same_dtype(what, &[qt, kt, vt])?,
            layout: AttentionLayout::Bshd,
            batch,
            heads,
            kv_heads: params.num_kv_heads,
            seq_q,
            seq_k,
            head_dim,
            scale: params.softmax_scale as f64,
            causal: params.causal,
            causal_align: CausalAlign::BottomRight,
            lse: false,
            mask: None,
        };
        self.ctx
            .run1(spec, &[qt.view_ref(), kt.view_ref(), vt.view_ref()])
    }
}

impl ActivationOps for FerrumKernelOps {
    fn silu_mul(&self, gate: &TensorRef, up: &TensorRef) -> Result<TensorRef> {
        FerrumTensorOps::new(self.ctx.clone()).binary(BinaryFn::SiluMul, gate, up)
    }

    fn gelu(&self, input: &TensorRef) -> Result<TensorRef> {
        FerrumTensorOps::new(self.ctx.clone()).unary(UnaryFn::GeluTanh, input)
    }
}

impl LinearOps for FerrumKernelOps {
    fn linear(&self, input: &TensorRef, weight: &TensorRef) -> Result<TensorRef> {
        linear(&self.ctx, input, weight)
    }
}

impl SamplingOps for FerrumKernelOps {
    /// One token from the last row of `logits`: the repetition penalty (a positive
    /// logit divided by it, a negative one multiplied), then greedy when
    /// `temperature ≤ 0` or `top_k = 1`, else the top-k / top-p nucleus of
    /// `softmax(logits / temperature)` sampled with a draw from `rng_seed`. On the
    /// host: the catalogue has no sort.
    fn sample_token(&self, logits: &TensorRef, params: &SamplingParams) -> Result<u32> {
        let row = last_row(logits)?;
        super::sampling::sample(row, params)
    }

    /// The first maximum over every element (NaN ignored).
    fn argmax(&self, logits: &TensorRef) -> Result<u32> {
        let x = self.ctx.ours(logits, "argmax")?;
        if x.view_ref().numel() == 0 {
            return Err(FerrumError::invalid_parameter("argmax of empty logits"));
        }
        argmax(&self.ctx, x.view_ref())
    }
}

/// The last row (last dim) of `logits` as f32 values.
fn last_row(logits: &TensorRef) -> Result<Vec<f32>> {
    let values = logits.to_vec_f32()?;
    let last = logits.shape().last().copied().unwrap_or(values.len());
    if values.len() != numel(logits.shape()) || last == 0 {
        return Err(FerrumError::invalid_parameter(format!(
            "sample_token: logits of shape {:?} hold no row",
            logits.shape()
        )));
    }
    Ok(values[values.len() - last..].to_vec())
}
