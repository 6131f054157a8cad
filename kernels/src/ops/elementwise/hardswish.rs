//! `hardswish` (MobileNetV3) and its backward, as PyTorch defines them:
//!
//! ```text
//! forward:   y  = x · min(max(x + 3, 0), 6) / 6
//! backward:  dx = x < −3 ? 0 : x ≤ 3 ? dy · (x/3 + ½) : dy
//! ```
//!
//! `max`/`min` ignore a NaN operand (IEEE maxNum), so NaN comes out through the
//! product with `x`; `−∞` gives `−∞ · 0 = NaN`, as PyTorch's does.
//!
//! Everything of the op is in this file: spec, validation, f64 reference, lowering,
//! tolerance and conformance cases.

use kernelc_ir::ScalarType::{self, *};
use serde::{Deserialize, Serialize};

use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::map::{arg, map_op};
use crate::lower::math::{bind, compute_type};
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, OpSpec, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// Hardswish (or its backward with `backward`) of `x`, elementwise. Inputs: `x`, then
/// `dy` for the backward. Outputs: `y`, or `dx` for the backward.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HardswishSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    /// The backward: `dx` from `x` and `dy`.
    #[serde(default)]
    pub backward: bool,
}

impl Op for HardswishSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("hardswish", self.dtype, FLOATS)?;
        check_shape("x", &self.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let x = TensorSig::new("x", self.dtype, self.shape.clone());
        if self.backward {
            vec![x, TensorSig::new("dy", self.dtype, self.shape.clone())]
        } else {
            vec![x]
        }
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let name = if self.backward { "dx" } else { "y" };
        vec![TensorSig::new(name, self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.backward {
                "hardswish_backward"
            } else {
                "hardswish"
            }
            .to_string(),
        )
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let out = if self.backward {
            i[0].iter()
                .zip(i[1])
                .map(|(&x, &dy)| {
                    if x < -3.0 {
                        0.0
                    } else if x <= 3.0 {
                        // x/3 + ½, written so that f64 keeps its digits near −1.5 too.
                        dy * ((2.0 * x + 3.0) / 6.0)
                    } else {
                        dy
                    }
                })
                .collect()
        } else {
            // max/min, not clamp: they ignore a NaN (maxNum, as the kernels' `max`),
            // where `clamp` would keep it; the product with x carries NaN either way.
            #[allow(clippy::manual_clamp)]
            let gate = |x: f64| (x + 3.0).max(0.0).min(6.0);
            i[0].iter().map(|&x| x * gate(x) / 6.0).collect()
        };
        vec![out]
    }
    /// Pieces of elements (every tensor has the one shape).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let shapes = vec![self.shape.as_slice(); self.inputs().len()];
        Some(crate::lower::split::split_map(
            "hardswish",
            caps,
            &self.shape,
            &shapes,
            1,
            |_, out| {
                OpSpec::from(HardswishSpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let backward = self.backward;
        map_op(
            OpSpec::Hardswish(self.clone()),
            caps,
            compute_type(self.dtype),
            |f, n, v, _| {
                let x = bind(f, "x", arg(v, 0, n));
                if backward {
                    let dy = bind(f, "dy", arg(v, 1, n));
                    // (2x + 3)/6: the sum is exact, so the slope keeps its digits near
                    // its zero at x = −1.5, where x/3 + ½ cancels.
                    let slope = (x.clone() * n.lit(2.0) + n.lit(3.0)) / n.lit(6.0);
                    let ramp = dy.clone() * slope;
                    let upper = x.clone().le(n.lit(3.0)).select(ramp, dy);
                    x.lt(n.lit(-3.0)).select(n.lit(0.0), upper)
                } else {
                    let gate = (x.clone() + n.lit(3.0)).max(n.lit(0.0)).min(n.lit(6.0));
                    x * gate / n.lit(6.0)
                }
            },
        )
    }
    /// Forward: ULPs of the result. Backward: ULPs of the slope's terms,
    /// `|dy|·(|x|/3 + ½)`: PyTorch's `dy·(x/3 + ½)` cancels near `x = −1.5`, and so may
    /// a driver that rewrites kernelc's `(2x + 3)/6` (NVIDIA's Vulkan through naga
    /// does).
    fn tolerance(&self) -> Tolerance {
        if self.backward {
            Tolerance::conditioned(4.0)
        } else {
            Tolerance::result(4.0)
        }
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let dx = self.reference(i).remove(0);
        let terms = |x: f64, dy: f64| dy.abs() * (x.abs() / 3.0 + 0.5);
        vec![i[0]
            .iter()
            .zip(i.get(1).copied().unwrap_or(&[]))
            .zip(&dx)
            .map(|((&x, &dy), &d)| terms(x, dy) + d.abs())
            .collect()]
    }
    /// Every piece: below −3, the ramp, above 3.
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.name == "x" {
            Domain::Real(-5.0, 5.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn cases() -> Vec<Self> {
        let shapes = [vec![1], vec![7, 13], vec![1000], vec![3, 85], vec![0, 4]];
        shapes
            .into_iter()
            .enumerate()
            .flat_map(|(i, shape)| {
                [false, true].map(|backward| HardswishSpec {
                    dtype: [F32, F64, F16, Bf16][(i + backward as usize) % 4],
                    shape: shape.clone(),
                    backward,
                })
            })
            .collect()
    }
    fn example() -> Self {
        HardswishSpec {
            dtype: F32,
            shape: vec![4, 8],
            backward: false,
        }
    }
}
