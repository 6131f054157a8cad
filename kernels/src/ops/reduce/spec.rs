//! Spec of the reduction family.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, large, lower, reference};
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, Prefill, PrefillSource, TargetCaps};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, Alias, TensorSig, FLOATS, INDEX, NUMERIC};
use crate::tolerance::Tolerance;

/// A reduction function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceFn {
    /// `Σ x`
    Sum,
    /// `Σ x / n` (floats only)
    Mean,
    /// maximum (NaN ignored unless every element is NaN)
    Max,
    /// minimum (NaN ignored unless every element is NaN)
    Min,
    /// maximum, NaN if any element is NaN (NumPy's `max`, torch's `amax`, ONNX's
    /// `ReduceMax`)
    MaxNan,
    /// minimum, NaN if any element is NaN (NumPy's `min`, torch's `amin`, ONNX's
    /// `ReduceMin`)
    MinNan,
    /// position of the first maximum, counted row-major over the reduced axes
    /// (`"arg_max"`; `"argmax"` is accepted too)
    #[serde(alias = "argmax")]
    ArgMax,
    /// position of the first minimum, counted row-major over the reduced axes
    /// (`"arg_min"`; `"argmin"` is accepted too)
    #[serde(alias = "argmin")]
    ArgMin,
}

impl ReduceFn {
    pub fn name(&self) -> &'static str {
        match self {
            ReduceFn::Sum => "sum",
            ReduceFn::Mean => "mean",
            ReduceFn::Max => "max",
            ReduceFn::Min => "min",
            ReduceFn::MaxNan => "max_nan",
            ReduceFn::MinNan => "min_nan",
            ReduceFn::ArgMax => "argmax",
            ReduceFn::ArgMin => "argmin",
        }
    }

    pub fn is_arg(&self) -> bool {
        matches!(self, ReduceFn::ArgMax | ReduceFn::ArgMin)
    }

    /// The result over no elements (ONNX's rule: the reduction's identity): 0 for a
    /// sum, NaN for a mean (0/0), −∞ (or the least integer) for a max, +∞ (or the
    /// greatest integer) for a min; `None` for arg reductions, which have no answer.
    pub fn identity(&self, dtype: ScalarType) -> Option<Scalar> {
        let extreme = |least: bool| match Scalar::zero(dtype) {
            Scalar::F16(_) | Scalar::Bf16(_) | Scalar::F32(_) | Scalar::F64(_) => Scalar::from_f64(
                dtype,
                if least {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                },
            ),
            _ => {
                let (lo, hi) = int_range(dtype);
                Scalar::int_wrapping(dtype, if least { lo } else { hi })
                    .unwrap_or(Scalar::zero(dtype))
            }
        };
        match self {
            ReduceFn::Sum => Some(Scalar::zero(dtype)),
            ReduceFn::Mean => Some(Scalar::from_f64(dtype, f64::NAN)),
            ReduceFn::Max | ReduceFn::MaxNan => Some(extreme(true)),
            ReduceFn::Min | ReduceFn::MinNan => Some(extreme(false)),
            ReduceFn::ArgMax | ReduceFn::ArgMin => None,
        }
    }
}

/// The least and greatest value of an integer type (bool: 0 and 1; floats: 0, 0).
fn int_range(dtype: ScalarType) -> (i64, i64) {
    match dtype {
        ScalarType::I32 => (i32::MIN.into(), i32::MAX.into()),
        ScalarType::U32 => (0, u32::MAX.into()),
        ScalarType::I64 => (i64::MIN, i64::MAX),
        ScalarType::U8 => (0, u8::MAX.into()),
        ScalarType::I8 => (i8::MIN.into(), i8::MAX.into()),
        ScalarType::U16 => (0, u16::MAX.into()),
        ScalarType::I16 => (i16::MIN.into(), i16::MAX.into()),
        ScalarType::Bool => (0, 1),
        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => (0, 0),
    }
}

/// Reduce `x` over `axes` (sorted, distinct, non-empty). The output drops the reduced
/// axes, or keeps them with size 1 when `keepdim`; reducing every axis without `keepdim`
/// gives shape `[]` (one element). Arg reductions write indices of `index_dtype` and
/// need it set; other reductions need it unset. With `accumulate` (not for arg
/// reductions) the result is added to the prior output (rumus `sum_rows`).
/// Inputs: `x`, then `prior` if `accumulate`. Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReduceSpec {
    pub func: ReduceFn,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub axes: Vec<usize>,
    #[serde(default)]
    pub keepdim: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_dtype: Option<ScalarType>,
    #[serde(default)]
    pub accumulate: bool,
}

impl ReduceSpec {
    pub fn out_shape(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (d, &n) in self.shape.iter().enumerate() {
            if self.axes.contains(&d) {
                if self.keepdim {
                    out.push(1);
                }
            } else {
                out.push(n);
            }
        }
        out
    }

    /// Whether the reduced axes hold no element (the result is the identity).
    pub fn reduces_nothing(&self) -> bool {
        self.axes.iter().any(|&a| self.shape.get(a) == Some(&0))
    }

    pub fn out_dtype(&self) -> ScalarType {
        if self.func.is_arg() {
            self.index_dtype.unwrap_or(ScalarType::U32)
        } else {
            self.dtype
        }
    }
}

impl Op for ReduceSpec {
    fn validate(&self) -> Result<(), SpecError> {
        let op = format!("reduce {}", self.func.name());
        let allowed = if self.func == ReduceFn::Mean {
            FLOATS
        } else {
            NUMERIC
        };
        check_dtype(&op, self.dtype, allowed)?;
        check_shape("x", &self.shape)?;
        let rank = self.shape.len();
        if self.axes.is_empty() {
            return Err(SpecError::bad_attr(
                "axes",
                "[]",
                "must name at least one axis (list every axis to reduce all)",
            ));
        }
        for (i, &a) in self.axes.iter().enumerate() {
            if a >= rank {
                return Err(SpecError::BadAxis {
                    axis: a as i64,
                    rank,
                });
            }
            if i > 0 && self.axes[i - 1] >= a {
                return Err(SpecError::bad_attr(
                    "axes",
                    format!("{:?}", self.axes),
                    "must be sorted and distinct",
                ));
            }
        }
        match (self.func.is_arg(), self.index_dtype) {
            (true, Some(t)) => check_dtype(&format!("{op} output"), t, INDEX)?,
            (true, None) => {
                return Err(SpecError::bad_attr(
                    "index_dtype",
                    "none",
                    "arg reductions need an index dtype",
                ))
            }
            (false, Some(t)) => {
                return Err(SpecError::bad_attr(
                    "index_dtype",
                    t,
                    "only arg reductions write indices",
                ))
            }
            (false, None) => {}
        }
        if self.func.is_arg() && self.accumulate {
            return Err(SpecError::bad_attr(
                "accumulate",
                true,
                "arg reductions cannot accumulate",
            ));
        }
        if self.reduces_nothing() {
            if self.func.is_arg() {
                return Err(SpecError::bad_attr(
                    "axes",
                    format!("{:?}", self.axes),
                    &format!(
                        "{} of an empty axis has no answer (shape {:?})",
                        self.func.name(),
                        self.shape
                    ),
                ));
            }
            let extremum = matches!(
                self.func,
                ReduceFn::Max | ReduceFn::Min | ReduceFn::MaxNan | ReduceFn::MinNan
            );
            if self.accumulate && extremum {
                return Err(SpecError::bad_attr(
                    "accumulate",
                    true,
                    &format!(
                        "{} over an empty axis is ∓∞: there is nothing to add to the prior",
                        self.func.name()
                    ),
                ));
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let mut v = vec![TensorSig::new("x", self.dtype, self.shape.clone())];
        if self.accumulate {
            v.push(TensorSig::new("prior", self.dtype, self.out_shape()));
        }
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.out_dtype(), self.out_shape())]
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(self.accumulate, 1)
    }
    fn detail(&self) -> Option<String> {
        Some(format!("reduce_{}", self.func.name()))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::reduce(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::reduce(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(large::reduce_large(self, caps))
    }
    /// Over an empty axis: the identity (an accumulated sum keeps its prior; a mean
    /// is NaN whatever the prior).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        let identity = self
            .func
            .identity(self.dtype)
            .ok_or(LowerError::Internal("arg reduction over an empty axis"))?;
        if self.accumulate && self.func == ReduceFn::Sum {
            return Ok(Plan::prefilled(vec![Prefill {
                output: 0,
                source: PrefillSource::Input(1),
            }]));
        }
        Ok(Plan::filled(0, identity))
    }
    fn cases() -> Vec<Self> {
        cases::reduce()
    }
    fn tolerance(&self) -> Tolerance {
        match self.func {
            ReduceFn::Sum | ReduceFn::Mean => {
                let len: usize = self
                    .axes
                    .iter()
                    .filter_map(|&a| self.shape.get(a))
                    .product();
                // The terms, and the mean's division.
                Tolerance::accumulated(len + 1)
            }
            ReduceFn::Max
            | ReduceFn::Min
            | ReduceFn::MaxNan
            | ReduceFn::MinNan
            | ReduceFn::ArgMax
            | ReduceFn::ArgMin => Tolerance::EXACT,
        }
    }
    fn example() -> Self {
        ReduceSpec {
            func: ReduceFn::Sum,
            dtype: ScalarType::F32,
            shape: vec![2, 3, 4],
            axes: vec![1],
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        }
    }
}
