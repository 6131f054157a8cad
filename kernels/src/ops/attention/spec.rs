//! Specs of the attention family: scaled dot-product attention and rotary embeddings.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, condition, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::Uniform;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::shape::{broadcast_shapes, check_dim, check_shape};
use crate::spec::{check_dtype, check_finite, TensorSig, FLOATS, INDEX};
use crate::tolerance::Tolerance;

/// Memory layout of attention's q, k, v and o.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionLayout {
    /// `[batch, heads, seq, head_dim]` (oxicuda).
    #[default]
    Bhsd,
    /// `[batch, seq, heads, head_dim]` (ferrum).
    Bshd,
}

/// Scaled dot-product attention per batch `b` and head `h`:
///
/// ```text
/// s_ij = scale · Σ_d q_id k_jd  (+ mask_ij)       j visible to i
/// o_i  = Σ_j softmax_j(s_i·) v_j
/// ```
///
/// The scale is multiplied (pass `1/√head_dim` for the usual attention). `kv_heads`
/// divides `heads`; query head `h` reads key/value head `h / (heads / kv_heads)`
/// (grouped-query attention; `kv_heads = heads` is plain multi-head). With `causal`,
/// key `j` is visible to query `i` iff `j ≤ i + seq_k − seq_q` (bottom-right aligned,
/// the default: the queries are the last `seq_q` positions, as with a KV cache; as
/// oxicuda, ferrum and flash-attention do), or with `causal_align: top_left` iff
/// `j ≤ i` (the queries are the first positions: torch's `is_causal`, ONNX's
/// `Attention` without a cache). `mask` (shape broadcastable to
/// `[batch, heads, seq_q, seq_k]`) is added to the scores; `−∞` hides a key. A query
/// that sees no key (or only `−∞` scores) outputs zeros. Special values follow IEEE
/// softmax (a NaN or `+∞` score makes the row NaN); keys hidden by causality never
/// reach the output, even where their values are NaN or ∞; scores are formed in the
/// compute type (docs/ops.md, "Special values in attention and normalisation").
/// With `lse`, a second output holds each query's log-sum-exp of its visible scores,
/// `lse_i = ln Σ_j e^{s_ij}` in the compute type (`−∞` for a query that sees no key;
/// what FlashAttention returns for the backward pass and for combining attention
/// over blocks of keys, as kernelc does past one kernel's indices).
/// Inputs: `q`, `k`, `v`, then `mask` if set. Outputs: `o` (shape of `q`), then
/// `lse` if set (the shape of `q` without `head_dim`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionSpec {
    pub dtype: ScalarType,
    #[serde(default)]
    pub layout: AttentionLayout,
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub seq_q: usize,
    pub seq_k: usize,
    pub head_dim: usize,
    #[serde(with = "crate::spec::exact_f64")]
    pub scale: f64,
    #[serde(default)]
    pub causal: bool,
    /// Where the causal diagonal sits when `seq_q ≠ seq_k` (see above).
    #[serde(default, skip_serializing_if = "CausalAlign::is_bottom_right")]
    pub causal_align: CausalAlign,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<Vec<usize>>,
    /// Also output each query's log-sum-exp (see above).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lse: bool,
}

/// Which corner of the `seq_q × seq_k` score matrix the causal diagonal starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CausalAlign {
    /// Query `i` sees keys `j ≤ i + seq_k − seq_q`.
    #[default]
    BottomRight,
    /// Query `i` sees keys `j ≤ i`.
    TopLeft,
    /// Query `i` sees keys `j ≤ i + keys − seq_q`: the diagonal drawn for `keys` keys
    /// (`seq_k` is bottom-right). A block of a longer query sequence keeps that
    /// sequence's diagonal this way (a piece of a split attention).
    Keys(usize),
}

impl CausalAlign {
    pub fn is_bottom_right(&self) -> bool {
        *self == CausalAlign::BottomRight
    }
}

impl AttentionSpec {
    /// The key count the causal diagonal is drawn for: key `j` is visible to query
    /// `i` iff `j + seq_q ≤ i + causal_keys` (`seq_k` bottom-right, `seq_q` top-left).
    pub fn causal_keys(&self) -> usize {
        match self.causal_align {
            CausalAlign::BottomRight => self.seq_k,
            CausalAlign::TopLeft => self.seq_q,
            CausalAlign::Keys(keys) => keys,
        }
    }

    /// Shape of a `[batch, heads, seq, head_dim]` tensor in this layout.
    pub fn tensor_shape(&self, heads: usize, seq: usize) -> Vec<usize> {
        match self.layout {
            AttentionLayout::Bhsd => vec![self.batch, heads, seq, self.head_dim],
            AttentionLayout::Bshd => vec![self.batch, seq, heads, self.head_dim],
        }
    }

    /// Shape of the `lse` output: `q`'s without `head_dim`.
    pub fn lse_shape(&self) -> Vec<usize> {
        let mut shape = self.tensor_shape(self.heads, self.seq_q);
        shape.pop();
        shape
    }

    /// The full score shape `[batch, heads, seq_q, seq_k]` a mask broadcasts to.
    pub fn score_shape(&self) -> Vec<usize> {
        vec![self.batch, self.heads, self.seq_q, self.seq_k]
    }
}

impl Op for AttentionSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("attention", self.dtype, FLOATS)?;
        // Head counts shape the grouping (kv_heads divides heads); batch, sequence
        // lengths and head_dim may be 0 (empty tensors).
        check_dim("attention heads", self.heads)?;
        check_dim("attention kv_heads", self.kv_heads)?;
        if self.heads % self.kv_heads != 0 {
            return Err(SpecError::bad_attr(
                "kv_heads",
                self.kv_heads,
                &format!("must divide heads ({})", self.heads),
            ));
        }
        check_finite("scale", self.scale)?;
        if self.lse && self.head_dim == 0 {
            // q and o are empty but the log-sum-exp of zero scores is not: an op that
            // launches nothing over empty inputs has no way to form it.
            return Err(SpecError::bad_attr(
                "head_dim",
                0,
                "must be non-zero when the log-sum-exp (lse) is an output",
            ));
        }
        check_shape("q", &self.tensor_shape(self.heads, self.seq_q))?;
        check_shape("k", &self.tensor_shape(self.kv_heads, self.seq_k))?;
        check_shape("scores", &self.score_shape())?;
        if let Some(mask) = &self.mask {
            check_shape("mask", mask)?;
            let full = self.score_shape();
            let b = broadcast_shapes(mask, &full)?;
            if b != full {
                return Err(SpecError::NotBroadcastable {
                    lhs: mask.clone(),
                    rhs: full,
                });
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let mut v = vec![
            TensorSig::new("q", self.dtype, self.tensor_shape(self.heads, self.seq_q)),
            TensorSig::new(
                "k",
                self.dtype,
                self.tensor_shape(self.kv_heads, self.seq_k),
            ),
            TensorSig::new(
                "v",
                self.dtype,
                self.tensor_shape(self.kv_heads, self.seq_k),
            ),
        ];
        if let Some(mask) = &self.mask {
            v.push(TensorSig::new("mask", self.dtype, mask.clone()));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let mut v = vec![TensorSig::new(
            "o",
            self.dtype,
            self.tensor_shape(self.heads, self.seq_q),
        )];
        if self.lse {
            v.push(TensorSig::new(
                "lse",
                compute_type(self.dtype),
                self.lse_shape(),
            ));
        }
        v
    }
    /// The scale, in the compute type.
    fn uniforms(&self) -> Vec<Uniform> {
        vec![Uniform::new("scale", compute_type(self.dtype), self.scale)]
    }
    fn structural(&self) -> Self {
        AttentionSpec {
            scale: 1.0,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::attention(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::attention(self, i)
    }
    /// No keys: each output row is a weighted sum of nothing, zeros (PyTorch's
    /// softmax over an empty axis, then the product with an empty `V`); its
    /// log-sum-exp is that of no score, `−∞`.
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        let mut plan = Plan::filled(0, Scalar::zero(self.dtype));
        if self.lse {
            let lse = Plan::filled(
                1,
                Scalar::from_f64(compute_type(self.dtype), f64::NEG_INFINITY),
            );
            plan.prefills.extend(lse.prefills);
        }
        Ok(plan)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::attention(self, caps)
    }

    /// Pieces of the batch; a mask without a batch dimension is read whole.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let item = self.heads.max(self.kv_heads) * self.seq_q.max(self.seq_k) * self.head_dim;
        if item as u64 > caps.kernel_limit() {
            return Some(super::large::attention_by_head(self, caps));
        }
        let batched_mask = self
            .mask
            .as_ref()
            .is_some_and(|m| m.len() == 4 && m[0] == self.batch && self.batch > 1);
        let whole: &[&str] = if batched_mask { &[] } else { &["mask"] };
        Some(crate::lower::split::split_rows_of(
            self,
            "attention",
            caps,
            self.batch,
            whole,
            |r| {
                let mask = self.mask.as_ref().map(|m| {
                    let mut m = m.clone();
                    if batched_mask {
                        m[0] = r;
                    }
                    m
                });
                AttentionSpec {
                    batch: r,
                    mask,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::attention()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() && input.name == "mask" {
            Domain::Real(-2.0, 0.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        AttentionSpec {
            dtype: ScalarType::F32,
            layout: AttentionLayout::Bhsd,
            batch: 2,
            heads: 2,
            kv_heads: 1,
            seq_q: 3,
            seq_k: 4,
            head_dim: 8,
            scale: 1.0 / 8f64.sqrt(),
            causal: true,
            mask: Some(vec![3, 4]),
            causal_align: Default::default(),
            lse: false,
        }
    }
}

/// Rotary position embedding on `x: [batch, seq, heads, head_dim]`. Its first `R =
/// rotary_dim` dims (all by default) rotate in `R/2` pairs; the rest pass through.
/// With `p` the position of the row's step (`positions[s]`, or `positions[b, s]` with
/// `batch_positions`, as ONNX's `RotaryEmbedding` and Hugging Face's `position_ids`
/// give), pair `k < R/2` is `(k, k + R/2)` (NeoX half-split, the default) or `(2k,
/// 2k + 1)` with `interleaved` (GPT-J):
///
/// ```text
/// y_lo = x_lo · cos[p, k] − x_hi · sin[p, k]
/// y_hi = x_lo · sin[p, k] + x_hi · cos[p, k]
/// ```
///
/// A position outside `0..max_positions` reads cos = sin = 0. Inputs: `x`, `cos`,
/// `sin` (`[max_positions, R/2]`), `positions` (`[seq]`, or `[batch, seq]`).
/// Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeSpec {
    pub dtype: ScalarType,
    pub index_dtype: ScalarType,
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub max_positions: usize,
    /// GPT-J's adjacent pairs `(2k, 2k + 1)` instead of NeoX's halves.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleaved: bool,
    /// Dims that rotate (even, at most `head_dim`); `None`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_dim: Option<usize>,
    /// Positions per batch item and step (`[batch, seq]`) instead of per step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch_positions: bool,
}

impl RopeSpec {
    fn x_shape(&self) -> Vec<usize> {
        vec![self.batch, self.seq, self.heads, self.head_dim]
    }

    /// The dims that rotate.
    pub fn rotary(&self) -> usize {
        self.rotary_dim.unwrap_or(self.head_dim)
    }

    /// The row offsets `(lo, hi)` of rotated pair `k`.
    pub fn pair(&self, k: usize) -> (usize, usize) {
        if self.interleaved {
            (2 * k, 2 * k + 1)
        } else {
            (k, k + self.rotary() / 2)
        }
    }

    /// The element of `positions` for batch item `b`, step `t`.
    pub fn position_index(&self, b: usize, t: usize) -> usize {
        if self.batch_positions {
            b * self.seq + t
        } else {
            t
        }
    }

    fn positions_shape(&self) -> Vec<usize> {
        if self.batch_positions {
            vec![self.batch, self.seq]
        } else {
            vec![self.seq]
        }
    }
}

impl Op for RopeSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("rope", self.dtype, FLOATS)?;
        check_dtype("rope positions", self.index_dtype, INDEX)?;
        check_shape("x", &self.x_shape())?;
        check_dim("rope max_positions", self.max_positions)?;
        let rotary = self.rotary();
        if rotary % 2 != 0 || rotary > self.head_dim || (rotary == 0 && self.head_dim > 0) {
            let (name, value) = match self.rotary_dim {
                Some(r) => ("rotary_dim", r),
                None => ("head_dim", self.head_dim),
            };
            return Err(SpecError::bad_attr(
                name,
                value,
                "the rotated dims must be even (pairs), non-zero and at most head_dim",
            ));
        }
        check_shape("cos", &[self.max_positions, rotary / 2])
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let table = vec![self.max_positions, self.rotary() / 2];
        vec![
            TensorSig::new("x", self.dtype, self.x_shape()),
            TensorSig::new("cos", self.dtype, table.clone()),
            TensorSig::new("sin", self.dtype, table),
            TensorSig::new("positions", self.index_dtype, self.positions_shape()),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.x_shape())]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::rope(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::rope(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::rope(self, caps)
    }

    /// Pieces of the batch; tables and (per-step) positions whole.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let whole: &[&str] = if self.batch_positions {
            &["cos", "sin"]
        } else {
            &["cos", "sin", "positions"]
        };
        let by_batch =
            crate::lower::split::split_rows_of(self, "rope", caps, self.batch, whole, |r| {
                RopeSpec {
                    batch: r,
                    ..self.clone()
                }
                .into()
            });
        // One batch item past the limit: blocks of its positions.
        Some(by_batch.or_else(|_| super::large::rope_by_positions(self, caps)))
    }
    fn cases() -> Vec<Self> {
        cases::rope()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    /// Positions reach past both ends (negative ones are out of range for rope).
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.name == "positions" {
            Domain::lookup_indices(input.dtype, self.max_positions, false)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        RopeSpec {
            dtype: ScalarType::F32,
            index_dtype: ScalarType::U32,
            batch: 1,
            seq: 2,
            heads: 2,
            head_dim: 8,
            max_positions: 16,
            interleaved: false,
            rotary_dim: None,
            batch_positions: false,
        }
    }
}
