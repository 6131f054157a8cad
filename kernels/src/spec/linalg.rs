//! GEMM, attention and rotary-embedding specs.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{check_dtype, check_finite, Alias, Family, TensorSig, FLOATS, INDEX};
use crate::error::SpecError;
use crate::shape::{broadcast_shapes, check_count, check_dim, check_shape, numel};

/// Storage order of a GEMM's matrices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Element `(r, c)` at `r·ld + c` (default `ld` = columns).
    #[default]
    RowMajor,
    /// Element `(r, c)` at `r + c·ld` (default `ld` = rows): BLAS / oxicuda.
    ColMajor,
}

/// `C_b = alpha · op(A_b) · op(B_b) + beta · C_b (+ bias)` for every batch index `b`.
///
/// * `op(X)` is `X` or `Xᵀ` (`trans_a`, `trans_b`; conjugate-transpose is transpose on
///   real data). `op(A)` is `m×k`, `op(B)` is `k×n`, `C` is `m×n`; so A is stored as
///   `m×k` (`k×m` when transposed) and B as `k×n` (`n×k` when transposed).
/// * `layout` and the leading dimensions `lda`/`ldb`/`ldc` (default: packed) place
///   the elements of one matrix; `batch` is the batch shape (`[]` for one GEMM) and
///   `stride_a`/`stride_b`/`stride_c` give, per batch dimension, the element distance
///   between consecutive matrices (default: packed, row-major over the batch dims).
///   A stride of 0 broadcasts that operand (NumPy batched `matmul`). The batches of C
///   must not overlap: sorted by stride, each stride must cover the span of the
///   batches below it.
/// * `beta = 0` means C is not read (BLAS convention: NaN in C does not propagate);
///   otherwise the prior C is an input and is updated in place (rumus `matmul`/`bmm`
///   accumulate with `beta = 1`).
/// * `bias`: a vector of length `n` added to every row: `C[i,j] += bias[j]`
///   (rustd `matmul_bias`), in logical `(i, j)` terms whatever the layout.
/// * `input_rounding`: with `dtype = f32`, round every element of A and B to f16 or
///   bf16 (nearest even) before multiplying, accumulating in f32 (oxicuda
///   `gemm_mixed_precision`).
///
/// f16/bf16 storage accumulates in f32. Inputs: `a`, `b`, then `bias` if set, then `c`
/// if `beta != 0`. Outputs: `c`. Buffer shapes: `[batch.., rows, cols]` of the stored
/// matrix (`[batch.., cols, rows]` for column-major) when packed, else the flat
/// `[extent]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmSpec {
    pub dtype: ScalarType,
    #[serde(default)]
    pub layout: Layout,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    #[serde(default)]
    pub trans_a: bool,
    #[serde(default)]
    pub trans_b: bool,
    #[serde(default)]
    pub batch: Vec<usize>,
    pub alpha: f64,
    pub beta: f64,
    #[serde(default)]
    pub bias: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lda: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldb: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldc: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_a: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_b: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_c: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_rounding: Option<ScalarType>,
}

/// One operand's placement: stored rows × cols, leading dimension, batch strides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixPlacement {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub layout: Layout,
    pub batch_strides: Vec<usize>,
}

impl MatrixPlacement {
    /// Flat offset of element `(r, c)` within one matrix.
    pub fn index(&self, r: usize, c: usize) -> usize {
        match self.layout {
            Layout::RowMajor => r * self.ld + c,
            Layout::ColMajor => r + c * self.ld,
        }
    }

    /// Elements from the first to one past the last element of one matrix.
    pub fn span(&self) -> usize {
        match self.layout {
            Layout::RowMajor => (self.rows.saturating_sub(1))
                .saturating_mul(self.ld)
                .saturating_add(self.cols),
            Layout::ColMajor => (self.cols.saturating_sub(1))
                .saturating_mul(self.ld)
                .saturating_add(self.rows),
        }
    }

    /// Elements of the whole batched buffer: `Σ (b_d − 1)·stride_d + span`.
    pub fn extent(&self, batch: &[usize]) -> usize {
        batch
            .iter()
            .zip(&self.batch_strides)
            .fold(self.span(), |acc, (&b, &s)| {
                acc.saturating_add(b.saturating_sub(1).saturating_mul(s))
            })
    }

    fn min_ld(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        }
    }
}

impl GemmSpec {
    /// A plain row-major `C = A·B` of `m×k` by `k×n` (alpha 1, beta 0, no batch).
    pub fn new(dtype: ScalarType, m: usize, n: usize, k: usize) -> GemmSpec {
        GemmSpec {
            dtype,
            layout: Layout::RowMajor,
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            batch: Vec::new(),
            alpha: 1.0,
            beta: 0.0,
            bias: false,
            lda: None,
            ldb: None,
            ldc: None,
            stride_a: None,
            stride_b: None,
            stride_c: None,
            input_rounding: None,
        }
    }

    /// Number of GEMMs (product of `batch`).
    pub fn batch_count(&self) -> usize {
        numel(&self.batch)
    }

    fn placement(
        &self,
        rows: usize,
        cols: usize,
        ld: Option<usize>,
        strides: &Option<Vec<usize>>,
    ) -> MatrixPlacement {
        let mut p = MatrixPlacement {
            rows,
            cols,
            ld: 0,
            layout: self.layout,
            batch_strides: Vec::new(),
        };
        p.ld = ld.unwrap_or(p.min_ld());
        p.batch_strides = match strides {
            Some(s) => s.clone(),
            None => {
                let size = match self.layout {
                    Layout::RowMajor => rows.saturating_mul(p.ld),
                    Layout::ColMajor => cols.saturating_mul(p.ld),
                };
                let mut s = crate::shape::row_major_strides(&self.batch);
                for x in &mut s {
                    *x = x.saturating_mul(size);
                }
                s
            }
        };
        p
    }

    /// Placement of A (stored `m×k`, or `k×m` when `trans_a`).
    pub fn a(&self) -> MatrixPlacement {
        let (r, c) = if self.trans_a {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        };
        self.placement(r, c, self.lda, &self.stride_a)
    }

    /// Placement of B (stored `k×n`, or `n×k` when `trans_b`).
    pub fn b(&self) -> MatrixPlacement {
        let (r, c) = if self.trans_b {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        };
        self.placement(r, c, self.ldb, &self.stride_b)
    }

    /// Placement of C (`m×n`).
    pub fn c(&self) -> MatrixPlacement {
        self.placement(self.m, self.n, self.ldc, &self.stride_c)
    }

    /// Whether every operand is packed (no explicit leading dimension or stride).
    pub fn is_packed(&self) -> bool {
        self.lda.is_none()
            && self.ldb.is_none()
            && self.ldc.is_none()
            && self.stride_a.is_none()
            && self.stride_b.is_none()
            && self.stride_c.is_none()
    }

    fn buffer_shape(&self, p: &MatrixPlacement) -> Vec<usize> {
        if self.is_packed() {
            let mut s = self.batch.clone();
            match self.layout {
                Layout::RowMajor => s.extend([p.rows, p.cols]),
                Layout::ColMajor => s.extend([p.cols, p.rows]),
            }
            s
        } else {
            vec![p.extent(&self.batch)]
        }
    }

    fn check_placement(
        &self,
        name: &str,
        p: &MatrixPlacement,
        ld: Option<usize>,
        strides: &Option<Vec<usize>>,
    ) -> Result<(), SpecError> {
        if let Some(ld) = ld {
            if ld < p.min_ld() {
                return Err(SpecError::bad_attr(
                    &format!("ld{name}"),
                    ld,
                    &format!(
                        "must be at least {} (the {} of the stored {}×{} matrix {name})",
                        p.min_ld(),
                        if self.layout == Layout::RowMajor {
                            "columns"
                        } else {
                            "rows"
                        },
                        p.rows,
                        p.cols
                    ),
                ));
            }
        }
        if let Some(s) = strides {
            if s.len() != self.batch.len() {
                return Err(SpecError::mismatch(
                    &format!("stride_{name} length vs batch rank"),
                    vec![self.batch.len()],
                    vec![s.len()],
                ));
            }
        }
        let outer = match self.layout {
            Layout::RowMajor => p.rows,
            Layout::ColMajor => p.cols,
        } as u128;
        let span = (outer - 1)
            .saturating_mul(p.ld as u128)
            .saturating_add(p.min_ld() as u128);
        let extent = self
            .batch
            .iter()
            .zip(&p.batch_strides)
            .fold(span, |acc, (&b, &s)| {
                acc.saturating_add((b as u128 - 1).saturating_mul(s as u128))
            });
        check_count(name, extent)
    }
}

impl Family for GemmSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("gemm", self.dtype, FLOATS)?;
        check_dim("gemm m", self.m)?;
        check_dim("gemm n", self.n)?;
        check_dim("gemm k", self.k)?;
        check_shape("gemm batch", &self.batch)?;
        check_finite("alpha", self.alpha)?;
        check_finite("beta", self.beta)?;
        if let Some(t) = self.input_rounding {
            check_dtype(
                "gemm input_rounding",
                t,
                &[ScalarType::F16, ScalarType::Bf16],
            )?;
            if self.dtype != ScalarType::F32 {
                return Err(SpecError::bad_attr(
                    "input_rounding",
                    t,
                    "only applies to f32 storage",
                ));
            }
        }
        let (a, b, c) = (self.a(), self.b(), self.c());
        self.check_placement("a", &a, self.lda, &self.stride_a)?;
        self.check_placement("b", &b, self.ldb, &self.stride_b)?;
        self.check_placement("c", &c, self.ldc, &self.stride_c)?;
        // C batches must nest without overlap.
        let mut dims: Vec<(usize, usize)> = self
            .batch
            .iter()
            .zip(&c.batch_strides)
            .filter(|(&b, _)| b > 1)
            .map(|(&b, &s)| (s, b))
            .collect();
        dims.sort();
        let mut covered = c.span();
        for (stride, count) in dims {
            if stride < covered {
                return Err(SpecError::bad_attr(
                    "stride_c",
                    format!("{:?}", c.batch_strides),
                    &format!(
                        "batches of C overlap: stride {stride} is below the span {covered} of the batches it steps over"
                    ),
                ));
            }
            covered = stride.saturating_mul(count - 1).saturating_add(covered);
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let mut v = vec![
            TensorSig::new("a", self.dtype, self.buffer_shape(&self.a())),
            TensorSig::new("b", self.dtype, self.buffer_shape(&self.b())),
        ];
        if self.bias {
            v.push(TensorSig::new("bias", self.dtype, vec![self.n]));
        }
        if self.beta != 0.0 {
            v.push(TensorSig::new(
                "c",
                self.dtype,
                self.buffer_shape(&self.c()),
            ));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "c",
            self.dtype,
            self.buffer_shape(&self.c()),
        )]
    }
    fn aliases(&self) -> Vec<Alias> {
        if self.beta != 0.0 {
            vec![Alias {
                input: if self.bias { 3 } else { 2 },
                output: 0,
            }]
        } else {
            Vec::new()
        }
    }
    fn runtime_attributes(&self) -> &'static [&'static str] {
        &["alpha", "beta"]
    }
}

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
/// as oxicuda and ferrum do). `mask` (shape broadcastable to
/// `[batch, heads, seq_q, seq_k]`) is added to the scores; `−∞` hides a key. A query
/// that sees no key (or only `−∞` scores) outputs zeros. Inputs: `q`, `k`, `v`, then
/// `mask` if set. Outputs: `o` (shape of `q`).
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
    pub scale: f64,
    #[serde(default)]
    pub causal: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<Vec<usize>>,
}

impl AttentionSpec {
    /// Shape of a `[batch, heads, seq, head_dim]` tensor in this layout.
    pub fn tensor_shape(&self, heads: usize, seq: usize) -> Vec<usize> {
        match self.layout {
            AttentionLayout::Bhsd => vec![self.batch, heads, seq, self.head_dim],
            AttentionLayout::Bshd => vec![self.batch, seq, heads, self.head_dim],
        }
    }

    /// The full score shape `[batch, heads, seq_q, seq_k]` a mask broadcasts to.
    pub fn score_shape(&self) -> Vec<usize> {
        vec![self.batch, self.heads, self.seq_q, self.seq_k]
    }
}

impl Family for AttentionSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("attention", self.dtype, FLOATS)?;
        check_dim("attention batch", self.batch)?;
        check_dim("attention heads", self.heads)?;
        check_dim("attention kv_heads", self.kv_heads)?;
        check_dim("attention seq_q", self.seq_q)?;
        check_dim("attention seq_k", self.seq_k)?;
        check_dim("attention head_dim", self.head_dim)?;
        if self.heads % self.kv_heads != 0 {
            return Err(SpecError::bad_attr(
                "kv_heads",
                self.kv_heads,
                &format!("must divide heads ({})", self.heads),
            ));
        }
        check_finite("scale", self.scale)?;
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
        vec![TensorSig::new(
            "o",
            self.dtype,
            self.tensor_shape(self.heads, self.seq_q),
        )]
    }
}

/// Rotary position embedding, NeoX half-split form, on `x: [batch, seq, heads,
/// head_dim]`. With `p = positions[s]`, `H = head_dim / 2` and `i < H`:
///
/// ```text
/// y_i     = x_i · cos[p, i] − x_{i+H} · sin[p, i]
/// y_{i+H} = x_i · sin[p, i] + x_{i+H} · cos[p, i]
/// ```
///
/// A position outside `0..max_positions` reads cos = sin = 0. Inputs: `x`, `cos`,
/// `sin` (`[max_positions, head_dim/2]`), `positions` (`[seq]`). Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeSpec {
    pub dtype: ScalarType,
    pub index_dtype: ScalarType,
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub max_positions: usize,
}

impl RopeSpec {
    fn x_shape(&self) -> Vec<usize> {
        vec![self.batch, self.seq, self.heads, self.head_dim]
    }
}

impl Family for RopeSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("rope", self.dtype, FLOATS)?;
        check_dtype("rope positions", self.index_dtype, INDEX)?;
        check_shape("x", &self.x_shape())?;
        check_dim("rope max_positions", self.max_positions)?;
        if self.head_dim % 2 != 0 {
            return Err(SpecError::bad_attr(
                "head_dim",
                self.head_dim,
                "must be even (half-split rotation)",
            ));
        }
        check_shape("cos", &[self.max_positions, self.head_dim / 2])
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let table = vec![self.max_positions, self.head_dim / 2];
        vec![
            TensorSig::new("x", self.dtype, self.x_shape()),
            TensorSig::new("cos", self.dtype, table.clone()),
            TensorSig::new("sin", self.dtype, table),
            TensorSig::new("positions", self.index_dtype, vec![self.seq]),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.x_shape())]
    }
}
