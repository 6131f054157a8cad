//! Spec of the GEMM family.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{cases, lower, reference};
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::Uniform;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::ops::Activation;
use crate::shape::{check_count, check_shape, numel};
use crate::spec::{check_dtype, check_finite, Alias, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

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

/// What a GEMM rounds every element of A and B to before multiplying (f32 GEMMs only;
/// the products are then exact in f32 and accumulate in f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputRounding {
    /// IEEE binary16, nearest even (oxicuda `gemm_mixed_precision`).
    F16,
    /// bfloat16, nearest even.
    Bf16,
    /// **TF32 mode**: NVIDIA's TensorFloat-32, f32's sign and 8-bit exponent with 10
    /// explicit significand bits (f32's low 13 bits zero), nearest even; f32's range,
    /// subnormals, infinities and NaN kept. What `torch.backends.cuda.matmul.allow_tf32`
    /// opts into; on tensor cores the multiply runs on their TF32 path. Never chosen
    /// silently: a GEMM is exact f32 unless its spec names this.
    Tf32,
}

impl InputRounding {
    pub fn name(self) -> &'static str {
        match self {
            InputRounding::F16 => "f16",
            InputRounding::Bf16 => "bf16",
            InputRounding::Tf32 => "tf32",
        }
    }

    /// The storage type it rounds to, where there is one (TF32 is no storage type: its
    /// values are f32s).
    pub fn storage(self) -> Option<ScalarType> {
        match self {
            InputRounding::F16 => Some(ScalarType::F16),
            InputRounding::Bf16 => Some(ScalarType::Bf16),
            InputRounding::Tf32 => None,
        }
    }

    /// `v` (an f32 value) rounded: the reference's rounding.
    pub fn round(self, v: f64) -> f64 {
        match self.storage() {
            Some(t) => crate::reference::round_to(t, v),
            None => f64::from(kernelc_ir::fragment::round_to_tf32(v as f32)),
        }
    }
}

impl std::fmt::Display for InputRounding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `C_b = act(alpha · op(A_b) · op(B_b) + beta · C_b (+ bias))` for every batch index
/// `b` (`act` the identity unless `activation` is set).
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
/// * `input_rounding`: with `dtype = f32`, round every element of A and B to f16,
///   bf16 or TF32 ([`InputRounding`], nearest even) before multiplying, accumulating
///   in f32 (oxicuda `gemm_mixed_precision`; `tf32` is TF32 mode, on tensor cores
///   where the device has them).
/// * `activation`: an activation applied to each element of the epilogue's value in
///   the compute type before it is stored (cuBLASLt's `GELU` / `RELU` epilogues, a
///   fused `Linear` + activation); leaky ReLU's slope is part of the kernel.
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
    #[serde(with = "crate::spec::exact_f64")]
    pub alpha: f64,
    #[serde(with = "crate::spec::exact_f64")]
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
    pub input_rounding: Option<InputRounding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
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

    /// Elements from the first to one past the last element of one matrix (0 for an
    /// empty matrix).
    pub fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            return 0;
        }
        match self.layout {
            Layout::RowMajor => (self.rows.saturating_sub(1))
                .saturating_mul(self.ld)
                .saturating_add(self.cols),
            Layout::ColMajor => (self.cols.saturating_sub(1))
                .saturating_mul(self.ld)
                .saturating_add(self.rows),
        }
    }

    /// Elements of the whole batched buffer: `Σ (b_d − 1)·stride_d + span` (0 when a
    /// batch dimension or the matrix is empty).
    pub fn extent(&self, batch: &[usize]) -> usize {
        if self.span() == 0 || batch.contains(&0) {
            return 0;
        }
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
            activation: None,
        }
    }

    /// NumPy's `matmul` of operands shaped `a` and `b` (ONNX `MatMul`, torch's
    /// `matmul`): a 1-D `a` is a row and a 1-D `b` a column, their dim dropped from the
    /// result; batch dims broadcast, a missing dim or one of 1 repeating its matrix
    /// (stride 0). Returns the spec, whose operands and C are flat (`[extent]`: the
    /// dense tensors' elements as they lie), and the result's shape.
    pub fn matmul(
        dtype: ScalarType,
        a: &[usize],
        b: &[usize],
    ) -> Result<(GemmSpec, Vec<usize>), SpecError> {
        if a.is_empty() || b.is_empty() {
            return Err(SpecError::bad_attr(
                "matmul",
                format!("{a:?} · {b:?}"),
                "a 0-dim operand has no matrix (multiply elementwise instead)",
            ));
        }
        let a2 = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2 = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        let (ra, rb) = (a2.len(), b2.len());
        let (m, k, kb, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 2], b2[rb - 1]);
        if k != kb {
            return Err(SpecError::mismatch(
                &format!("matmul {a:?} · {b:?}: inner dims"),
                vec![k],
                vec![kb],
            ));
        }
        let (batch_a, batch_b) = (&a2[..ra - 2], &b2[..rb - 2]);
        let batch = crate::shape::broadcast_shapes(batch_a, batch_b)?;
        // Per batch dim of the result, an operand's stride (0 where it repeats).
        let strides = |own: &[usize], matrix: usize| -> Vec<usize> {
            let packed = crate::shape::row_major_strides(own);
            let skip = batch.len() - own.len();
            (0..batch.len())
                .map(|d| match d.checked_sub(skip) {
                    Some(j) if own[j] != 1 => packed[j] * matrix,
                    _ => 0,
                })
                .collect()
        };
        let spec = GemmSpec {
            stride_a: Some(strides(batch_a, m * k)),
            stride_b: Some(strides(batch_b, k * n)),
            stride_c: Some(
                crate::shape::row_major_strides(&batch)
                    .iter()
                    .map(|s| s * m * n)
                    .collect(),
            ),
            batch: batch.clone(),
            ..GemmSpec::new(dtype, m, n, k)
        };
        let mut shape = batch;
        if a.len() > 1 {
            shape.push(m);
        }
        if b.len() > 1 {
            shape.push(n);
        }
        Ok((spec, shape))
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
        if outer == 0 || p.min_ld() == 0 || self.batch.contains(&0) {
            // An empty operand: no element, whatever its leading dimension.
            return Ok(());
        }
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

impl Op for GemmSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("gemm", self.dtype, FLOATS)?;
        // m, n, k and batch dimensions may be 0 (empty tensors; k = 0 is the epilogue).
        check_shape("gemm batch", &self.batch)?;
        check_finite("alpha", self.alpha)?;
        check_finite("beta", self.beta)?;
        if let Some(act) = self.activation {
            act.forward().check_params()?;
        }
        if let Some(t) = self.input_rounding {
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
        // No two elements of C at one address: every dimension of C (its batch dims,
        // rows and columns), sorted by stride, steps over the whole span of those
        // below it. Batches may nest (each matrix a block) or interleave (a permuted
        // result: heads between the rows of each matrix). An empty C has no elements.
        if c.rows == 0 || c.cols == 0 || self.batch.contains(&0) {
            return Ok(());
        }
        let (row_stride, col_stride) = match self.layout {
            Layout::RowMajor => (c.ld, 1),
            Layout::ColMajor => (1, c.ld),
        };
        let mut dims: Vec<(usize, usize)> = self
            .batch
            .iter()
            .zip(&c.batch_strides)
            .map(|(&b, &s)| (s, b))
            .chain([(row_stride, c.rows), (col_stride, c.cols)])
            .filter(|&(_, count)| count > 1)
            .collect();
        dims.sort();
        let mut covered = 1usize;
        for (stride, count) in dims {
            if stride < covered {
                return Err(SpecError::bad_attr(
                    "stride_c",
                    format!("{:?}", c.batch_strides),
                    &format!(
                        "elements of C overlap: stride {stride} is below the span {covered} of the dimensions it steps over"
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
        Alias::prior_when(self.beta != 0.0, if self.bias { 3 } else { 2 })
    }
    /// `alpha` and `beta` in the compute type.
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        vec![
            Uniform::new("alpha", ty, self.alpha),
            Uniform::new("beta", ty, self.beta),
        ]
    }
    /// `alpha` at 1; `beta` keeps its class: 0 (C is not read) or 1.
    fn structural(&self) -> Self {
        GemmSpec {
            alpha: 1.0,
            beta: if self.beta == 0.0 { 0.0 } else { 1.0 },
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::gemm(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::condition(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::gemm(self, caps)
    }

    /// Pieces along the first batch dimension, or blocks of one matrix along m, n
    /// and k (`large.rs`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(super::large::gemm(self, caps))
    }
    /// `k = 0`: the epilogue alone (`β·C + bias`; `α·0`, NaN for an infinite `α`, as
    /// `addmm` gives).
    fn lower_empty(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::gemm_without_k(self, caps)
    }
    fn cases() -> Vec<Self> {
        cases::gemm_cases()
    }
    fn tolerance(&self) -> Tolerance {
        match self.activation {
            // k products and sums, alpha, beta·C and its addition, the bias.
            None => Tolerance::accumulated(self.k + 4),
            // That bound carried through the activation, plus the activation's own
            // (`reference::condition`), in units of `u`.
            Some(_) => Tolerance::conditioned(1.0),
        }
    }
    fn absolute(&self) -> Self {
        let mut s = self.clone();
        s.alpha = s.alpha.abs();
        s.beta = s.beta.abs();
        s.activation = None;
        s
    }
    fn example() -> Self {
        GemmSpec::new(ScalarType::F32, 4, 5, 3)
    }
}
