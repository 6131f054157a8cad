//! Layer and RMS norm over rows that alone pass one kernel's indices
//! (`lower::split`): each row computed by catalogue ops that split on their own, in
//! the compute type (f32 for f16/bf16, through casts), with the statistics the
//! one-kernel norm keeps (relative to the row's first value `x₀`, so they stay
//! accurate when `|μ| ≫ σ`):
//!
//! ```text
//! layer:  d = x − x₀,  m = mean d,  v = mean (d − m)²,  r = rsqrt(v + eps)
//!         y = (d − m)·r·w + b,       stats = (x₀ + m, r)
//! rms:    v = mean x²,  r = rsqrt(v + eps),  y = x·r·w,  stats = (0, r)
//! ```
//!
//! With a residual, `sum = x + residual` is written first (rounded to the dtype) and
//! normalised. `eps` stays the op's per-call value (the step adding it shares it).

use kernelc_ir::ScalarType;

use super::{LayerNormBackwardSpec, LayerNormSpec};
use crate::lower::math::compute_type;
use crate::lower::split::{
    assemble, cast_step, over_first_axis, step, vector_op, Piece, PieceUniforms, Place,
};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{
    BinaryFn, FillSpec, FillValue, FusedNode, FusedSpec, ReduceFn, ScalarSpec, UnaryFn,
};
use crate::spec::OpSpec;

/// Temporaries of one row's steps, in the compute type.
const D: Whole = Whole::Temp(0); // x − x₀ (layer) or x (rms, narrow dtype)
const SCRATCH: Whole = Whole::Temp(1); // x (layer, narrow), then (d − m)² or x², then y
const MEAN: Whole = Whole::Temp(2); // m
const VAR: Whole = Whole::Temp(3); // v, then v + eps
const RSTD: Whole = Whole::Temp(4); // r
const SHIFTED: Whole = Whole::Temp(5); // x₀ + m

pub(super) fn layer_norm_long_rows(
    spec: &LayerNormSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let (rows, cols) = spec.rows_cols();
    let ct = compute_type(spec.dtype);
    let narrow = ct != spec.dtype;
    let temp = |len: usize| TempBuffer {
        dtype: ct,
        len: len as u64,
    };
    let mut temps = vec![temp(cols), temp(cols), temp(1), temp(1), temp(1), temp(1)];
    // Inputs and outputs by position, as `inputs()` / `outputs()` list them.
    let mut next_input = 1;
    let mut input = |on: bool| {
        on.then(|| {
            next_input += 1;
            Whole::Input(next_input - 1)
        })
    };
    let residual = input(spec.residual);
    let weight = input(spec.weight);
    let bias = input(spec.bias);
    let sum_out = spec.residual.then_some(Whole::Output(1));
    let stats_out = spec
        .save_stats
        .then_some(Whole::Output(1 + usize::from(spec.residual)));
    let mut pieces = Vec::new();
    // A narrow dtype's weight and bias in the compute type, once for every row.
    let mut param = |p: Option<Whole>, pieces: &mut Vec<Piece>| {
        p.map(|w| {
            in_compute_type(w, (spec.dtype, ct), cols, pieces, || {
                temps.push(temp(cols));
                Whole::Temp(temps.len() - 1)
            })
        })
    };
    let weight = param(weight, &mut pieces);
    let bias = param(bias, &mut pieces);
    let row = |w: Whole, r: usize| Place::at(w, (r * cols) as u64);
    for r in 0..rows {
        // The row normalised, in the op's dtype: x, or the rounded sum.
        let mut x = row(Whole::Input(0), r);
        if let (Some(res), Some(sum)) = (residual, sum_out) {
            pieces.push(shared(
                vector_op(BinaryFn::Add, spec.dtype, cols),
                vec![x, row(res, r)],
                row(sum, r),
            ));
            x = row(sum, r);
        }
        // The row in the compute type: x itself, or cast into D (rms) or SCRATCH.
        let x_ct = match (narrow, spec.rms) {
            (false, _) => x,
            (true, true) => {
                pieces.push(cast_step(spec.dtype, ct, cols, x, Place::whole(D)));
                Place::whole(D)
            }
            (true, false) => {
                pieces.push(cast_step(spec.dtype, ct, cols, x, Place::whole(SCRATCH)));
                Place::whole(SCRATCH)
            }
        };
        // What is centred and scaled: x (rms) or d = x − x₀ (x₀ a one-element view of
        // the row's start), with m its mean and x₀ + m the row's mean.
        let centred = if spec.rms {
            x_ct
        } else {
            let x0 = Place::at(x_ct.of, x_ct.start.unwrap_or(0));
            pieces.push(step(
                fused(
                    ct,
                    &[vec![cols], vec![1]],
                    FusedNode::of_two_inputs(BinaryFn::Sub),
                ),
                vec![x_ct, x0],
                Place::whole(D),
            ));
            pieces.push(step(
                over_first_axis(ReduceFn::Mean, ct, vec![cols]),
                vec![Place::whole(D)],
                Place::whole(MEAN),
            ));
            pieces.push(step(
                vector_op(BinaryFn::Add, ct, 1),
                vec![x0, Place::whole(MEAN)],
                Place::whole(SHIFTED),
            ));
            Place::whole(D)
        };
        // v = mean of squares (of d − m, or of x).
        let (nodes, inputs, shapes) = if spec.rms {
            (square_nodes(None), vec![centred], vec![vec![cols]])
        } else {
            (
                square_nodes(Some(1)),
                vec![centred, Place::whole(MEAN)],
                vec![vec![cols], vec![1]],
            )
        };
        pieces.push(step(
            fused(ct, &shapes, nodes),
            inputs,
            Place::whole(SCRATCH),
        ));
        pieces.push(step(
            over_first_axis(ReduceFn::Mean, ct, vec![cols]),
            vec![Place::whole(SCRATCH)],
            Place::whole(VAR),
        ));
        pieces.push(shared(
            OpSpec::Scalar(ScalarSpec {
                func: BinaryFn::Add,
                dtype: ct,
                shape: vec![1],
                scalar: spec.eps,
                reversed: false,
                out_dtype: None,
            }),
            vec![Place::whole(VAR)],
            Place::whole(RSTD),
        ));
        pieces.push(step(
            unary(UnaryFn::Rsqrt, ct, 1),
            vec![Place::whole(RSTD)],
            Place::whole(VAR),
        ));
        let rstd = Place::whole(VAR);
        // y = (d − m)·r·w + b, or x·r·w.
        let (mut nodes, mut inputs, mut shapes) = if spec.rms {
            (vec![FusedNode::Input(0)], vec![centred], vec![vec![cols]])
        } else {
            (
                FusedNode::of_two_inputs(BinaryFn::Sub),
                vec![centred, Place::whole(MEAN)],
                vec![vec![cols], vec![1]],
            )
        };
        let factors = [
            (BinaryFn::Mul, Some(rstd), 1),
            (BinaryFn::Mul, weight, cols),
            (BinaryFn::Add, bias, cols),
        ];
        for (func, operand, len) in factors {
            let Some(operand) = operand else { continue };
            let last = nodes.len() - 1;
            nodes.push(FusedNode::Input(inputs.len()));
            nodes.push(FusedNode::Binary {
                func,
                a: last,
                b: last + 1,
            });
            inputs.push(operand);
            shapes.push(vec![len]);
        }
        let y = row(Whole::Output(0), r);
        let y_ct = if narrow { Place::whole(SCRATCH) } else { y };
        pieces.push(step(fused(ct, &shapes, nodes), inputs, y_ct));
        if narrow {
            pieces.push(cast_step(ct, spec.dtype, cols, y_ct, y));
        }
        if let Some(stats) = stats_out {
            let mean_at = Place::at(stats, 2 * r as u64);
            let rstd_at = Place::at(stats, 2 * r as u64 + 1);
            let mean = if spec.rms {
                OpSpec::Fill(FillSpec {
                    dtype: spec.dtype,
                    shape: vec![1],
                    value: FillValue::Constant { value: 0.0 },
                    offset: 0,
                })
            } else {
                cast_spec(ct, spec.dtype, 1)
            };
            let from = if spec.rms {
                vec![]
            } else {
                vec![Place::whole(SHIFTED)]
            };
            pieces.push(step(mean, from, mean_at));
            pieces.push(cast_step(ct, spec.dtype, 1, rstd, rstd_at));
        }
    }
    assemble(caps, temps, pieces)
}

/// A piece sharing the whole op's per-call values (a residual sum; the step adding
/// `eps`, whose `scalar` is the op's `eps`).
fn shared(spec: OpSpec, inputs: Vec<Place>, output: Place) -> Piece {
    Piece {
        spec,
        inputs,
        outputs: vec![output],
        uniforms: PieceUniforms::Shared,
    }
}

fn cast_spec(from: ScalarType, to: ScalarType, n: usize) -> OpSpec {
    OpSpec::Cast(crate::ops::CastSpec {
        from,
        to,
        shape: vec![n],
    })
}

fn unary(func: UnaryFn, dtype: ScalarType, n: usize) -> OpSpec {
    OpSpec::Unary(crate::ops::UnarySpec {
        func,
        dtype,
        shape: vec![n],
    })
}

fn fused(dtype: ScalarType, inputs: &[Vec<usize>], nodes: Vec<FusedNode>) -> OpSpec {
    OpSpec::Fused(FusedSpec {
        dtype,
        inputs: inputs.to_vec(),
        nodes,
    })
}

/// `(x − m)²` with `m` input `mean`, or `x²`.
fn square_nodes(mean: Option<usize>) -> Vec<FusedNode> {
    let mut nodes = vec![FusedNode::Input(0)];
    if let Some(m) = mean {
        nodes.extend([
            FusedNode::Input(m),
            FusedNode::Binary {
                func: BinaryFn::Sub,
                a: 0,
                b: 1,
            },
        ]);
    }
    let last = nodes.len() - 1;
    nodes.push(FusedNode::Binary {
        func: BinaryFn::Mul,
        a: last,
        b: last,
    });
    nodes
}

/// The backward of a layer (RMS) norm over rows past the limit, from the saved
/// statistics `(μ, r)`, by catalogue ops over each row (`g = dy·w`, `x̂ = (x − μ)·r`):
///
/// ```text
/// layer: dx = r·(g − mean g − x̂·mean(g·x̂))
/// rms:   dx = r·g − x·r³·mean(g·x)
/// dweight = Σ_rows dy·x̂,  dbias = Σ_rows dy     (accumulated in the compute type)
/// ```
pub(super) fn layer_norm_backward_long_rows(
    spec: &LayerNormBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let (rows, cols) = spec.rows_cols();
    let ct = compute_type(spec.dtype);
    let narrow = ct != spec.dtype;
    let mut temps = Vec::new();
    let mut temp = |len: usize| {
        temps.push(TempBuffer {
            dtype: ct,
            len: len as u64,
        });
        Whole::Temp(temps.len() - 1)
    };
    let (g_t, xhat_t, prod_t, stats_t) = (temp(cols), temp(cols), temp(cols), temp(2));
    let (mean_g, mean_gx) = (temp(1), temp(1));
    let narrow_rows = narrow.then(|| (temp(cols), temp(cols), temp(cols)));
    let weight_in = spec.weight.then_some(Whole::Input(2));
    let stats_in = Whole::Input(2 + usize::from(spec.weight));
    let dweight_out = (spec.param_grads && spec.weight).then_some(Whole::Output(1));
    let dbias_out =
        (spec.param_grads && spec.bias).then_some(Whole::Output(1 + usize::from(spec.weight)));
    let dw_acc = dweight_out.map(|_| temp(cols));
    let db_acc = dbias_out.map(|_| temp(cols));
    let mut pieces = Vec::new();
    // The weight in the compute type, once.
    let weight =
        weight_in.map(|w| in_compute_type(w, (spec.dtype, ct), cols, &mut pieces, || temp(cols)));
    let whole = Place::whole;
    let row = |w: Whole, r: usize| Place::at(w, (r * cols) as u64);
    for r in 0..rows {
        let (dy, x, dx, mu, rstd) = match narrow_rows {
            Some((dy_t, x_t, dx_t)) => {
                pieces.push(cast_step(
                    spec.dtype,
                    ct,
                    cols,
                    row(Whole::Input(0), r),
                    whole(dy_t),
                ));
                pieces.push(cast_step(
                    spec.dtype,
                    ct,
                    cols,
                    row(Whole::Input(1), r),
                    whole(x_t),
                ));
                let st = Place::at(stats_in, 2 * r as u64);
                pieces.push(cast_step(spec.dtype, ct, 2, st, whole(stats_t)));
                (
                    whole(dy_t),
                    whole(x_t),
                    whole(dx_t),
                    Place::at(stats_t, 0),
                    Place::at(stats_t, 1),
                )
            }
            None => (
                row(Whole::Input(0), r),
                row(Whole::Input(1), r),
                row(Whole::Output(0), r),
                Place::at(stats_in, 2 * r as u64),
                Place::at(stats_in, 2 * r as u64 + 1),
            ),
        };
        let cols1 = [vec![cols], vec![1]];
        // g = dy·w.
        let g = match weight {
            Some(w) => {
                pieces.push(step(
                    fused(
                        ct,
                        &[vec![cols], vec![cols]],
                        FusedNode::of_two_inputs(BinaryFn::Mul),
                    ),
                    vec![dy, w],
                    whole(g_t),
                ));
                whole(g_t)
            }
            None => dy,
        };
        // x̂ = (x − μ)·r (rms: x·r).
        let xhat_nodes = if spec.rms {
            FusedNode::of_two_inputs(BinaryFn::Mul)
        } else {
            let mut nodes = FusedNode::of_two_inputs(BinaryFn::Sub);
            nodes.extend([
                FusedNode::Input(2),
                FusedNode::Binary {
                    func: BinaryFn::Mul,
                    a: 2,
                    b: 3,
                },
            ]);
            nodes
        };
        let (xhat_inputs, xhat_shapes) = if spec.rms {
            (vec![x, rstd], cols1.to_vec())
        } else {
            (vec![x, mu, rstd], vec![vec![cols], vec![1], vec![1]])
        };
        pieces.push(step(
            fused(ct, &xhat_shapes, xhat_nodes),
            xhat_inputs,
            whole(xhat_t),
        ));
        // mean(g·x̂) (rms: mean(g·x)) and, for a layer norm, mean(g).
        let other = if spec.rms { x } else { whole(xhat_t) };
        pieces.push(step(
            fused(
                ct,
                &[vec![cols], vec![cols]],
                FusedNode::of_two_inputs(BinaryFn::Mul),
            ),
            vec![g, other],
            whole(prod_t),
        ));
        pieces.push(step(
            over_first_axis(ReduceFn::Mean, ct, vec![cols]),
            vec![whole(prod_t)],
            whole(mean_gx),
        ));
        let (nodes, inputs, shapes) = if spec.rms {
            // r·g − x·r³·mean(g·x): inputs g, x, mean, r.
            (
                vec![
                    FusedNode::Input(0),
                    FusedNode::Input(1),
                    FusedNode::Input(2),
                    FusedNode::Input(3),
                    mul(3, 0),
                    mul(3, 3),
                    mul(5, 3),
                    mul(1, 6),
                    mul(7, 2),
                    FusedNode::Binary {
                        func: BinaryFn::Sub,
                        a: 4,
                        b: 8,
                    },
                ],
                vec![g, x, whole(mean_gx), rstd],
                vec![vec![cols], vec![cols], vec![1], vec![1]],
            )
        } else {
            pieces.push(step(
                over_first_axis(ReduceFn::Mean, ct, vec![cols]),
                vec![g],
                whole(mean_g),
            ));
            // r·(g − mean g − x̂·mean(g·x̂)): inputs g, x̂, mean g, mean(g·x̂), r.
            (
                vec![
                    FusedNode::Input(0),
                    FusedNode::Input(1),
                    FusedNode::Input(2),
                    FusedNode::Input(3),
                    FusedNode::Input(4),
                    FusedNode::Binary {
                        func: BinaryFn::Sub,
                        a: 0,
                        b: 2,
                    },
                    mul(1, 3),
                    FusedNode::Binary {
                        func: BinaryFn::Sub,
                        a: 5,
                        b: 6,
                    },
                    mul(4, 7),
                ],
                vec![g, whole(xhat_t), whole(mean_g), whole(mean_gx), rstd],
                vec![vec![cols], vec![cols], vec![1], vec![1], vec![1]],
            )
        };
        pieces.push(step(fused(ct, &shapes, nodes), inputs, dx));
        if narrow {
            pieces.push(cast_step(
                ct,
                spec.dtype,
                cols,
                dx,
                row(Whole::Output(0), r),
            ));
        }
        // Σ_rows dy·x̂ and Σ_rows dy, in the compute type.
        if let Some(acc) = dw_acc {
            let (nodes, inputs, shapes) = if r == 0 {
                (
                    FusedNode::of_two_inputs(BinaryFn::Mul),
                    vec![dy, whole(xhat_t)],
                    vec![vec![cols]; 2],
                )
            } else {
                let mut nodes = FusedNode::of_two_inputs(BinaryFn::Mul);
                nodes.extend([
                    FusedNode::Input(2),
                    FusedNode::Binary {
                        func: BinaryFn::Add,
                        a: 3,
                        b: 2,
                    },
                ]);
                (
                    nodes,
                    vec![dy, whole(xhat_t), whole(acc)],
                    vec![vec![cols]; 3],
                )
            };
            pieces.push(step(fused(ct, &shapes, nodes), inputs, whole(acc)));
        }
        if let Some(acc) = db_acc {
            if r == 0 {
                pieces.push(crate::lower::split::copy_step(ct, cols, dy, whole(acc)));
            } else {
                pieces.push(step(
                    vector_op(BinaryFn::Add, ct, cols),
                    vec![whole(acc), dy],
                    whole(acc),
                ));
            }
        }
    }
    for (acc, out) in [(dw_acc, dweight_out), (db_acc, dbias_out)] {
        if let (Some(acc), Some(out)) = (acc, out) {
            pieces.push(cast_step(ct, spec.dtype, cols, whole(acc), whole(out)));
        }
    }
    assemble(caps, temps, pieces)
}

/// A parameter of `cols` elements as the fused steps read it: itself, or for a
/// narrow dtype cast once into a temporary (`into` makes it).
fn in_compute_type(
    param: Whole,
    (dtype, ct): (ScalarType, ScalarType),
    cols: usize,
    pieces: &mut Vec<Piece>,
    into: impl FnOnce() -> Whole,
) -> Place {
    if ct == dtype {
        return Place::whole(param);
    }
    let t = into();
    pieces.push(cast_step(
        dtype,
        ct,
        cols,
        Place::whole(param),
        Place::whole(t),
    ));
    Place::whole(t)
}

fn mul(a: usize, b: usize) -> FusedNode {
    FusedNode::Binary {
        func: BinaryFn::Mul,
        a,
        b,
    }
}
