//! `as_strided`: a strided view of a flat buffer made dense, and its inverse.
//!
//! * gather: `y[i] = x[offset + Σ_d i_d·strides_d]` for `i` over `shape` (PyTorch's
//!   `x.as_strided(shape, strides, offset).contiguous()`, NumPy's `as_strided` copied);
//! * scatter: `out = prior`, then `out[offset + Σ_d i_d·strides_d] = values[i]`: a
//!   dense tensor written into the strided positions of a buffer, every other element
//!   kept (`out` updates `prior` in place). The positions must be distinct: the
//!   strides are checked to never map two indices to one element.
//!
//! Strides are in elements and non-negative. This is how the runtime serves views
//! with strides: an op reads a strided input through a gather into a dense
//! temporary, and writes a strided output through a scatter from one.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::large::{dense, plan_moves, Move, Side};
use super::lower::{strided_copy, strided_scatter, Strided};
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, Prefill, PrefillSource, TargetCaps, Whole};
use crate::op::Op;
use crate::shape::{check_count, check_shape, for_each_index, numel, offset};
use crate::spec::{Alias, TensorSig};
use crate::tolerance::Tolerance;

/// See the module doc. Inputs: `x` (`len` elements) to gather; `values` (`shape`) and
/// `prior` (`len`) to scatter. Outputs: `y` (`shape`), or `out` (`len`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AsStridedSpec {
    pub dtype: ScalarType,
    /// Elements of the flat buffer.
    pub len: usize,
    pub shape: Vec<usize>,
    /// In elements, one per dimension of `shape`.
    pub strides: Vec<usize>,
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub scatter: bool,
}

impl AsStridedSpec {
    /// The flat element of position `i`.
    fn position(&self, i: &[usize]) -> usize {
        self.offset + offset(i, &self.strides)
    }

    /// Whether no two positions are the same element: with the dims of extent > 1 in
    /// order of stride, each stride passes the farthest element the smaller ones reach
    /// (sufficient; what views of dense tensors, transposed or sliced, satisfy).
    fn positions_are_distinct(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (s, n))
            .collect();
        dims.sort_unstable();
        let mut reach: u128 = 0;
        for (s, n) in dims {
            if (s as u128) <= reach {
                return false;
            }
            reach += (n as u128 - 1) * s as u128;
        }
        true
    }
}

impl Op for AsStridedSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("x", &[self.len])?;
        check_shape("y", &self.shape)?;
        if self.strides.len() != self.shape.len() {
            return Err(SpecError::mismatch(
                "as_strided strides vs shape rank",
                vec![self.shape.len()],
                vec![self.strides.len()],
            ));
        }
        if numel(&self.shape) == 0 {
            return Ok(());
        }
        let last = self
            .shape
            .iter()
            .zip(&self.strides)
            .fold(self.offset as u128, |acc, (&n, &s)| {
                acc + (n as u128 - 1) * s as u128
            });
        check_count("as_strided positions", last)?;
        if last >= self.len as u128 {
            return Err(SpecError::bad_attr(
                "strides",
                format!("{:?} from offset {}", self.strides, self.offset),
                &format!(
                    "reach element {last}, past the buffer's {} elements",
                    self.len
                ),
            ));
        }
        if self.scatter && !self.positions_are_distinct() {
            return Err(SpecError::bad_attr(
                "strides",
                format!("{:?}", self.strides),
                "map two positions to one element: a scatter would write it twice",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        if self.scatter {
            vec![
                TensorSig::new("values", self.dtype, self.shape.clone()),
                TensorSig::new("prior", self.dtype, vec![self.len]),
            ]
        } else {
            vec![TensorSig::new("x", self.dtype, vec![self.len])]
        }
    }
    fn outputs(&self) -> Vec<TensorSig> {
        if self.scatter {
            vec![TensorSig::new("out", self.dtype, vec![self.len])]
        } else {
            vec![TensorSig::new("y", self.dtype, self.shape.clone())]
        }
    }
    fn aliases(&self) -> Vec<Alias> {
        Alias::prior_when(self.scatter, 1)
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.scatter {
                "as_strided_scatter"
            } else {
                "as_strided"
            }
            .to_string(),
        )
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        if !self.scatter {
            let mut y = Vec::with_capacity(numel(&self.shape));
            for_each_index(&self.shape, |idx| y.push(i[0][self.position(idx)]));
            return vec![y];
        }
        let mut out = i[1].to_vec();
        let mut k = 0;
        for_each_index(&self.shape, |idx| {
            out[self.position(idx)] = i[0][k];
            k += 1;
        });
        vec![out]
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let (inputs, outputs) = (self.inputs(), self.outputs());
        let strided = Strided {
            base: self.offset,
            dims: self.shape.clone(),
            coefs: self.strides.iter().map(|&s| s as i64).collect(),
        };
        let name = crate::OpSpec::AsStrided(self.clone()).name();
        if !self.scatter {
            return strided_copy(&name, caps, &inputs[0], &outputs[0], &strided);
        }
        // Every element keeps the prior, then the positions take the values.
        let mut plan = strided_scatter(&name, caps, &inputs[0], &outputs[0], &strided)?;
        plan.prefills.push(Prefill {
            output: 0,
            source: PrefillSource::Input(1),
        });
        Ok(plan)
    }
    /// Blocks of the strided map (module `large`); a scatter first copies the prior.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let strided = Side {
            of: if self.scatter {
                Whole::Output(0)
            } else {
                Whole::Input(0)
            },
            base: self.offset as u64,
            coefs: self.strides.iter().map(|&s| s as i64).collect(),
        };
        let dims = self.shape.clone();
        let (name, moves) = if self.scatter {
            let values = dense(Whole::Input(0), 0, &dims);
            (
                "as_strided_scatter",
                [Move {
                    dims,
                    from: values,
                    to: strided,
                }],
            )
        } else {
            let y = dense(Whole::Output(0), 0, &dims);
            (
                "as_strided",
                [Move {
                    dims,
                    from: strided,
                    to: y,
                }],
            )
        };
        let mut plan = match plan_moves(name, caps, self.dtype, &moves) {
            Ok(plan) => plan,
            Err(e) => return Some(Err(e)),
        };
        if self.scatter {
            plan.prefills.push(Prefill {
                output: 0,
                source: PrefillSource::Input(1),
            });
        }
        Some(Ok(plan))
    }
    /// Nothing to scatter: the prior. (Nothing to gather leaves `y` empty.)
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(Plan::prefilled(vec![Prefill {
            output: 0,
            source: PrefillSource::Input(1),
        }]))
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn cases() -> Vec<Self> {
        let case =
            |dtype, len, shape: &[usize], strides: &[usize], offset, scatter| AsStridedSpec {
                dtype,
                len,
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                offset,
                scatter,
            };
        use ScalarType::*;
        vec![
            // A transposed view, a column-major matrix with a leading dimension, a
            // broadcast (stride 0), a sliced view with steps; and their scatters.
            case(F32, 35, &[7, 5], &[1, 7], 0, false),
            case(F64, 60, &[4, 6], &[1, 10], 3, false),
            case(F16, 9, &[4, 3], &[0, 3], 0, false),
            case(I64, 100, &[3, 4, 2], &[30, 6, 2], 5, false),
            case(U8, 64, &[8, 8], &[1, 8], 0, false),
            case(F32, 35, &[7, 5], &[1, 7], 0, true),
            case(F32, 60, &[4, 6], &[1, 10], 3, true),
            case(Bool, 100, &[3, 4, 2], &[30, 6, 2], 5, true),
            case(F32, 8, &[0, 3], &[3, 1], 0, true),
            case(F32, 1, &[1], &[1], 0, false),
        ]
    }
    fn example() -> Self {
        AsStridedSpec {
            dtype: ScalarType::F32,
            len: 6,
            shape: vec![3, 2],
            strides: vec![1, 3],
            offset: 0,
            scatter: false,
        }
    }
}
