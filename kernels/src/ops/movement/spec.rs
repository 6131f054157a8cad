//! Specs of the data-movement family.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::large::{dense, plan_moves, Move, Side};
use super::{cases, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, Prefill, PrefillSource, TargetCaps, Whole};
use crate::op::Op;
use crate::shape::{check_shape, numel, row_major_strides, with_rows};
use crate::spec::{check_dtype, Alias, TensorSig, INDEX, NUMERIC};
use crate::tolerance::Tolerance;

/// `y = transpose(x, perm)`: `y.shape[j] = x.shape[perm[j]]`, and
/// `y[i_0..i_{r-1}] = x[k]` with `k[perm[j]] = i_j` (NumPy `transpose`). Inputs: `x`.
/// Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermuteSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub perm: Vec<usize>,
}

impl PermuteSpec {
    pub fn out_shape(&self) -> Vec<usize> {
        self.perm
            .iter()
            .map(|&p| self.shape.get(p).copied().unwrap_or(0))
            .collect()
    }
}

impl Op for PermuteSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("x", &self.shape)?;
        let rank = self.shape.len();
        let mut seen = vec![false; rank];
        let bad = || {
            SpecError::bad_attr(
                "perm",
                format!("{:?}", self.perm),
                &format!("must be a permutation of 0..{rank}"),
            )
        };
        if self.perm.len() != rank {
            return Err(bad());
        }
        for &p in &self.perm {
            if p >= rank || seen[p] {
                return Err(bad());
            }
            seen[p] = true;
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.out_shape())]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::permute(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::permute(self, caps)
    }

    /// With the first dimension in place: pieces of its rows; else blocks (module
    /// `large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        if self.perm.first() != Some(&0) {
            let strides = row_major_strides(&self.shape);
            let from = Side {
                of: Whole::Input(0),
                base: 0,
                coefs: self.perm.iter().map(|&p| strides[p] as i64).collect(),
            };
            let out = self.out_shape();
            let to = dense(Whole::Output(0), 0, &out);
            let moves = [Move {
                dims: out,
                from,
                to,
            }];
            return Some(plan_moves("permute", caps, self.dtype, &moves));
        }
        Some(crate::lower::split::split_rows_of(
            self,
            "permute",
            caps,
            self.shape[0],
            &[],
            |r| {
                let shape = with_rows(&self.shape, r);
                PermuteSpec {
                    shape,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::permute()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn example() -> Self {
        PermuteSpec {
            dtype: ScalarType::F32,
            shape: vec![2, 3, 4],
            perm: vec![2, 0, 1],
        }
    }
}

/// Strided slice: `y[o] = x[starts + o ⊙ steps]` per dimension, `y.shape = sizes`.
/// Steps may be negative (reading backwards); every read must be in bounds. Inputs:
/// `x`. Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub starts: Vec<usize>,
    pub sizes: Vec<usize>,
    pub steps: Vec<i64>,
}

impl Op for SliceSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("x", &self.shape)?;
        let rank = self.shape.len();
        for (name, len) in [
            ("starts", self.starts.len()),
            ("sizes", self.sizes.len()),
            ("steps", self.steps.len()),
        ] {
            if len != rank {
                return Err(SpecError::mismatch(
                    &format!("slice `{name}` length vs rank of x"),
                    vec![rank],
                    vec![len],
                ));
            }
        }
        check_shape("y", &self.sizes)?;
        for d in 0..rank {
            let (start, size, step, dim) = (
                self.starts[d] as i128,
                self.sizes[d] as i128,
                self.steps[d] as i128,
                self.shape[d] as i128,
            );
            if step == 0 {
                return Err(SpecError::bad_attr(
                    &format!("steps[{d}]"),
                    0,
                    "must be non-zero",
                ));
            }
            if size == 0 {
                // An empty slice reads nothing, wherever it starts.
                continue;
            }
            let last = start + (size - 1) * step;
            if start >= dim || last < 0 || last >= dim {
                return Err(SpecError::bad_attr(
                    &format!("starts[{d}]/sizes[{d}]/steps[{d}]"),
                    format!("{start}/{size}/{step}"),
                    &format!("reads index {last} outside 0..{dim}"),
                ));
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.sizes.clone())]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::slice(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::slice(self, caps)
    }

    /// With the first dimension taken whole, forwards: pieces of its rows; else, or
    /// where one row passes the limit, blocks (module `large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let whole_rows = self.starts.first() == Some(&0)
            && self.steps.first() == Some(&1)
            && self.sizes.first() == self.shape.first();
        let row_fits = numel(&self.shape[1..]) as u64 <= caps.kernel_limit();
        if !whole_rows || !row_fits {
            let strides = row_major_strides(&self.shape);
            let base = self
                .starts
                .iter()
                .zip(&strides)
                .map(|(&s, &t)| (s * t) as u64)
                .sum();
            let from = Side {
                of: Whole::Input(0),
                base,
                coefs: self
                    .steps
                    .iter()
                    .zip(&strides)
                    .map(|(&p, &t)| p * t as i64)
                    .collect(),
            };
            let to = dense(Whole::Output(0), 0, &self.sizes);
            let moves = [Move {
                dims: self.sizes.clone(),
                from,
                to,
            }];
            return Some(plan_moves("slice", caps, self.dtype, &moves));
        }
        Some(crate::lower::split::split_rows_of(
            self,
            "slice",
            caps,
            self.shape[0],
            &[],
            |r| {
                let (shape, sizes) = (with_rows(&self.shape, r), with_rows(&self.sizes, r));
                SliceSpec {
                    shape,
                    sizes,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::slice()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn example() -> Self {
        SliceSpec {
            dtype: ScalarType::F32,
            shape: vec![4, 6],
            starts: vec![1, 5],
            sizes: vec![2, 3],
            steps: vec![1, -2],
        }
    }
}

/// Concatenation along `axis`. Inputs: `x0`, `x1`, ... (`shapes`, equal except along
/// `axis`). Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConcatSpec {
    pub dtype: ScalarType,
    pub shapes: Vec<Vec<usize>>,
    pub axis: usize,
}

impl ConcatSpec {
    pub fn out_shape(&self) -> Vec<usize> {
        let Some(first) = self.shapes.first() else {
            return Vec::new();
        };
        let mut out = first.clone();
        if let Some(d) = out.get_mut(self.axis) {
            *d = self
                .shapes
                .iter()
                .map(|s| s.get(self.axis).copied().unwrap_or(0))
                .fold(0usize, |a, b| a.saturating_add(b));
        }
        out
    }
}

impl Op for ConcatSpec {
    fn validate(&self) -> Result<(), SpecError> {
        let Some(first) = self.shapes.first() else {
            return Err(SpecError::zero("concat input list"));
        };
        if self.axis >= first.len() {
            return Err(SpecError::BadAxis {
                axis: self.axis as i64,
                rank: first.len(),
            });
        }
        for (i, s) in self.shapes.iter().enumerate() {
            check_shape(&format!("x{i}"), s)?;
            let mut expected = first.clone();
            if s.len() == expected.len() {
                expected[self.axis] = s[self.axis];
            }
            if *s != expected {
                return Err(SpecError::mismatch(
                    &format!("concat input x{i} (all dims but the axis must match x0)"),
                    expected,
                    s.clone(),
                ));
            }
        }
        check_shape("y", &self.out_shape())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        self.shapes
            .iter()
            .enumerate()
            .map(|(i, s)| TensorSig::new(&format!("x{i}"), self.dtype, s.clone()))
            .collect()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.out_shape())]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::concat(self, i)
    }
    /// Empty pieces add nothing: the concat of the others (a copy of one).
    fn lower_empty(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let kept: Vec<usize> = (0..self.shapes.len())
            .filter(|&i| numel(&self.shapes[i]) > 0)
            .collect();
        if let [only] = kept[..] {
            return Ok(Plan::prefilled(vec![Prefill {
                output: 0,
                source: PrefillSource::Input(only),
            }]));
        }
        let pieces = ConcatSpec {
            shapes: kept.iter().map(|&i| self.shapes[i].clone()).collect(),
            ..self.clone()
        };
        Ok(pieces.lower(caps)?.with_inputs(&kept))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::concat(self, caps)
    }

    /// Along a later axis: pieces of the rows every part shares; along the first, or
    /// where one row passes the limit, each input a block copy into its place (module
    /// `large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let rows = *self.shapes.first()?.first()?;
        let out = self.out_shape();
        let row_fits = numel(&out[1..]) as u64 <= caps.kernel_limit();
        if self.axis == 0 || !row_fits {
            // Each input a block copy into its place along the axis.
            let strides = row_major_strides(&out);
            let mut at = 0u64;
            let mut moves = Vec::new();
            for (i, shape) in self.shapes.iter().enumerate() {
                let from = dense(Whole::Input(i), 0, shape);
                let to = Side {
                    of: Whole::Output(0),
                    base: at * strides[self.axis] as u64,
                    coefs: strides.iter().map(|&t| t as i64).collect(),
                };
                at += shape[self.axis] as u64;
                if numel(shape) > 0 {
                    moves.push(Move {
                        dims: shape.clone(),
                        from,
                        to,
                    });
                }
            }
            return Some(plan_moves("concat", caps, self.dtype, &moves));
        }
        Some(crate::lower::split::split_rows_of(
            self,
            "concat",
            caps,
            rows,
            &[],
            |r| {
                let shapes = self
                    .shapes
                    .iter()
                    .map(|s| [&[r][..], &s[1..]].concat())
                    .collect();
                ConcatSpec {
                    shapes,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::concat()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn example() -> Self {
        ConcatSpec {
            dtype: ScalarType::F32,
            shapes: vec![vec![2, 3], vec![2, 1]],
            axis: 1,
        }
    }
}

/// Gather along `axis` (ONNX `Gather`): with `data` of shape `D` and `indices` of shape
/// `I`, `out` has shape `D[..axis] ++ I ++ D[axis+1..]` and
/// `out[o, j, i] = data[o, idx(j), i]`. A negative index counts from the end
/// (`idx + D[axis]`); an index still out of range reads 0. Embedding forward is
/// `axis = 0` on a `[vocab, dim]` table. Inputs: `data`, `indices`, then `prior` with
/// `rows_of`. Outputs: `out`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GatherSpec {
    pub dtype: ScalarType,
    pub index_dtype: ScalarType,
    pub data: Vec<usize>,
    pub indices: Vec<usize>,
    pub axis: usize,
    /// `Some([first, len])` (axis 0 only): `data` is rows `first .. first + data[0]`
    /// of a table of `len` rows. Indices are resolved against all `len` (negative ones
    /// from its end); an index in these rows reads row `index − first`, one out of the
    /// whole table reads 0, and any other keeps the input `prior` (shape `out`,
    /// updated in place): a piece of a gather from a split table. Default `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_of: Option<[usize; 2]>,
}

impl GatherSpec {
    /// A gather along axis 0 from a table past the limit: pieces of its rows, each
    /// gathering the indices landing in them over what the pieces before wrote (the
    /// first over the prior, or over an output every element of which some piece
    /// writes).
    fn split_table(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        use crate::lower::split::{
            assemble, pieces_of, rows_per_piece, Piece, PieceUniforms, Place,
        };
        let (first, len) = self.rows_window();
        let inner = numel(&self.data[1..]) as u64;
        let per_piece = rows_per_piece("gather", caps.kernel_limit(), inner, &[inner])?;
        let pieces = pieces_of(self.data[0], per_piece)
            .map(|(start, rows)| {
                let prior = match (start, self.rows_of) {
                    (0, Some(_)) => Whole::Input(2),
                    _ => Whole::Output(0),
                };
                Piece {
                    spec: GatherSpec {
                        data: with_rows(&self.data, rows),
                        rows_of: Some([first + start, len]),
                        ..self.clone()
                    }
                    .into(),
                    inputs: vec![
                        Place::at(Whole::Input(0), start as u64 * inner),
                        Place::whole(Whole::Input(1)),
                        Place::whole(prior),
                    ],
                    outputs: vec![Place::whole(Whole::Output(0))],
                    uniforms: PieceUniforms::Shared,
                }
            })
            .collect();
        assemble(caps, Vec::new(), pieces)
    }

    /// The rows of the whole axis 0 `data` holds: `(first, whole length)` (the whole
    /// gathered axis, without `rows_of`).
    pub fn rows_window(&self) -> (usize, usize) {
        match self.rows_of {
            Some([first, len]) => (first, len),
            None => (0, self.data.get(self.axis).copied().unwrap_or(0)),
        }
    }
}

/// A `rows_of` window must lie in axis 0 of its whole tensor and hold a row.
fn check_rows_of(
    rows_of: Option<[usize; 2]>,
    axis: usize,
    data: &[usize],
) -> Result<(), SpecError> {
    let Some([first, len]) = rows_of else {
        return Ok(());
    };
    let rows = data.first().copied().unwrap_or(0);
    if axis != 0 || rows == 0 || first.checked_add(rows).is_none_or(|end| end > len) {
        return Err(SpecError::bad_attr(
            "rows_of",
            format!("{:?}", [first, len]),
            &format!("rows {first}.. of {rows} must lie in an axis 0 of {len} (axis 0 only, at least one row)"),
        ));
    }
    Ok(())
}

pub(crate) fn gather_shape(data: &[usize], indices: &[usize], axis: usize) -> Vec<usize> {
    if axis >= data.len() {
        return Vec::new();
    }
    let mut out = data[..axis].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[axis + 1..]);
    out
}

fn validate_gather_like(
    op: &str,
    index_dtype: ScalarType,
    data: &[usize],
    indices: &[usize],
    axis: usize,
) -> Result<(), SpecError> {
    check_dtype(&format!("{op} indices"), index_dtype, INDEX)?;
    check_shape("data", data)?;
    if data.is_empty() || axis >= data.len() {
        return Err(SpecError::BadAxis {
            axis: axis as i64,
            rank: data.len(),
        });
    }
    check_shape("indices", indices)?;
    check_shape("gathered", &gather_shape(data, indices, axis))
}

impl Op for GatherSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_gather_like(
            "gather",
            self.index_dtype,
            &self.data,
            &self.indices,
            self.axis,
        )?;
        check_rows_of(self.rows_of, self.axis, &self.data)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let mut v = vec![
            TensorSig::new("data", self.dtype, self.data.clone()),
            TensorSig::new("indices", self.index_dtype, self.indices.clone()),
        ];
        if self.rows_of.is_some() {
            let out = gather_shape(&self.data, &self.indices, self.axis);
            v.push(TensorSig::new("prior", self.dtype, out));
        }
        v
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(self.rows_of.is_some(), 2)
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new(
            "out",
            self.dtype,
            gather_shape(&self.data, &self.indices, self.axis),
        )]
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::gather(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::gather(self, caps)
    }

    /// Along axis 0, a table past the limit in pieces of its rows, each gathering
    /// the indices landing in them (`rows_of`), else pieces of the indices' first
    /// dimension with the table whole; along a later axis, pieces of the data's first
    /// dimension with the indices whole.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        if self.axis == 0 && numel(&self.data) as u64 > caps.kernel_limit() {
            return Some(self.split_table(caps));
        }
        if self.axis == 0 {
            let rows = *self.indices.first()?;
            return Some(crate::lower::split::split_rows_of(
                self,
                "gather",
                caps,
                rows,
                &["data"],
                |r| {
                    let indices = with_rows(&self.indices, r);
                    GatherSpec {
                        indices,
                        ..self.clone()
                    }
                    .into()
                },
            ));
        }
        let by_rows = crate::lower::split::split_rows_of(
            self,
            "gather",
            caps,
            self.data[0],
            &["indices"],
            |r| {
                let data = with_rows(&self.data, r);
                GatherSpec {
                    data,
                    ..self.clone()
                }
                .into()
            },
        );
        // One row past the limit: a piece per row, the gather over its dimensions
        // (itself split).
        Some(by_rows.or_else(|_| {
            let row = GatherSpec {
                data: self.data[1..].to_vec(),
                axis: self.axis - 1,
                ..self.clone()
            };
            super::large::per_row(self, caps, self.data[0], &["indices"], row.into())
        }))
    }
    /// Indices into an empty axis are all out of range: zeros.
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(Plan::filled(0, kernelc_ir::Scalar::zero(self.dtype)))
    }
    fn cases() -> Vec<Self> {
        cases::gather()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        match input.name.as_str() {
            "indices" => Domain::lookup_indices(input.dtype, self.rows_window().1, true),
            _ => Domain::of_dtype(input.dtype),
        }
    }
    fn example() -> Self {
        GatherSpec {
            dtype: ScalarType::F32,
            index_dtype: ScalarType::U32,
            data: vec![10, 4],
            indices: vec![3],
            axis: 0,
            rows_of: None,
        }
    }
}

/// How [`ScatterSpec`] combines several updates of one destination element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScatterCombine {
    /// Add them all (embedding backward; deterministic order: increasing `j`).
    Sum,
    /// The update with the largest `j` wins (oxicuda `scatter`).
    Last,
}

/// What [`ScatterSpec`]'s output holds before the updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScatterInit {
    /// Zeros.
    Zero,
    /// The input `prior` (updated in place; unreferenced rows are preserved).
    Prior,
}

/// Scatter along `axis`, the adjoint of [`GatherSpec`]: for every position of
/// `updates` (shape `D[..axis] ++ I ++ D[axis+1..]`),
/// `out[o, idx(j), i] ⊕= updates[o, j, i]`, with `⊕` per `combine` and `out` starting
/// per `init`. Indices as in gather; out-of-range indices are skipped. Embedding
/// backward is `axis = 0, combine = sum` (rumus: `init = prior`). Inputs: `updates`,
/// `indices`, then `prior` if `init = prior`. Outputs: `out` (shape `data`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScatterSpec {
    pub dtype: ScalarType,
    pub index_dtype: ScalarType,
    pub data: Vec<usize>,
    pub indices: Vec<usize>,
    pub axis: usize,
    pub combine: ScatterCombine,
    pub init: ScatterInit,
    /// `Some([first, len])` (axis 0 only): `out` is rows `first .. first + data[0]` of
    /// a tensor of `len` rows. Indices are resolved against all `len` (negative ones
    /// from its end), and only those landing in these rows are scattered, to row
    /// `index − first`: a piece of a split scatter. Default `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_of: Option<[usize; 2]>,
}

impl ScatterSpec {
    /// The rows of the whole axis 0 this spec writes: `(first, whole length)` (the
    /// whole scattered axis, without `rows_of`: indices resolve against it).
    pub fn rows_window(&self) -> (usize, usize) {
        match self.rows_of {
            Some([first, len]) => (first, len),
            None => (0, self.data.get(self.axis).copied().unwrap_or(0)),
        }
    }
}

impl Op for ScatterSpec {
    fn validate(&self) -> Result<(), SpecError> {
        if self.combine == ScatterCombine::Sum {
            check_dtype("scatter sum", self.dtype, NUMERIC)?;
        }
        validate_gather_like(
            "scatter",
            self.index_dtype,
            &self.data,
            &self.indices,
            self.axis,
        )?;
        check_rows_of(self.rows_of, self.axis, &self.data)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let mut v = vec![
            TensorSig::new(
                "updates",
                self.dtype,
                gather_shape(&self.data, &self.indices, self.axis),
            ),
            TensorSig::new("indices", self.index_dtype, self.indices.clone()),
        ];
        if self.init == ScatterInit::Prior {
            v.push(TensorSig::new("prior", self.dtype, self.data.clone()));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.dtype, self.data.clone())]
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(self.init == ScatterInit::Prior, 2)
    }
    fn detail(&self) -> Option<String> {
        Some(
            match self.combine {
                ScatterCombine::Sum => "scatter_sum",
                ScatterCombine::Last => "scatter_last",
            }
            .to_string(),
        )
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::scatter(self, i)
    }
    /// No rows scattered: the initial value (zeros, or the prior).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(match self.init {
            ScatterInit::Zero => Plan::filled(0, kernelc_ir::Scalar::zero(self.dtype)),
            ScatterInit::Prior => Plan::prefilled(vec![Prefill {
                output: 0,
                source: PrefillSource::Input(2),
            }]),
        })
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::scatter(self, caps)
    }

    /// Pieces of the data's rows, indices whole. Along axis 0 every piece reads all
    /// the updates and scatters those landing in its rows (`rows_of`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let updates = crate::shape::numel(&self.inputs()[0].shape) as u64;
        if self.axis == 0 && updates > caps.kernel_limit() {
            return Some(super::large::scatter_in_update_blocks(self, caps));
        }
        if self.axis == 0 {
            let (first, len) = self.rows_window();
            return Some(crate::lower::split::split_rows_at(
                self,
                "scatter",
                caps,
                self.data[0],
                &["indices", "updates"],
                |start, r| {
                    let data = with_rows(&self.data, r);
                    ScatterSpec {
                        data,
                        rows_of: Some([first + start, len]),
                        ..self.clone()
                    }
                    .into()
                },
            ));
        }
        let by_rows = crate::lower::split::split_rows_of(
            self,
            "scatter",
            caps,
            self.data[0],
            &["indices"],
            |r| {
                let data = with_rows(&self.data, r);
                ScatterSpec {
                    data,
                    ..self.clone()
                }
                .into()
            },
        );
        // One row past the limit: a piece per row, the scatter over its dimensions
        // (itself split).
        Some(by_rows.or_else(|_| {
            let row = ScatterSpec {
                data: self.data[1..].to_vec(),
                axis: self.axis - 1,
                ..self.clone()
            };
            super::large::per_row(self, caps, self.data[0], &["indices"], row.into())
        }))
    }
    fn cases() -> Vec<Self> {
        cases::scatter()
    }
    fn tolerance(&self) -> Tolerance {
        match self.combine {
            ScatterCombine::Last => Tolerance::EXACT,
            // Every update may land on one element, after its initial value.
            ScatterCombine::Sum => {
                Tolerance::accumulated(self.indices.iter().product::<usize>() + 1)
            }
        }
    }
    /// Integer sums draw from the whole range of their type, so that they overflow
    /// and the table sees them wrap.
    fn domain(&self, input: &TensorSig) -> Domain {
        let axis_len = match self.rows_of {
            Some([_, len]) => Some(len),
            None => self.data.get(self.axis).copied(),
        };
        match axis_len {
            Some(n) if input.name == "indices" => Domain::lookup_indices(input.dtype, n, true),
            _ if self.combine == ScatterCombine::Sum => Domain::whole_int_range(input.dtype),
            _ => Domain::of_dtype(input.dtype),
        }
    }
    fn example() -> Self {
        ScatterSpec {
            dtype: ScalarType::F32,
            index_dtype: ScalarType::U32,
            data: vec![10, 4],
            indices: vec![3],
            axis: 0,
            combine: ScatterCombine::Sum,
            init: ScatterInit::Zero,
            rows_of: None,
        }
    }
}
