//! Softmax over slices past one kernel's indices (`lower::split`). Rows before the
//! axis are independent: pieces of them where one row fits. A row that alone passes
//! the limit (`[n, inner]` elements from the axis on) is computed by catalogue ops
//! that each split on their own, in the compute type (f32 for f16/bf16, through a
//! cast of the row and back):
//!
//! ```text
//! m  = max over the axis of x             (NaN skipped, as the kernel's)
//! m' = max(m, lowest finite)             (a slice of −∞ only: x − m' = −∞, not NaN)
//! s  = Σ over the axis of e^{x − m'}      (e written into y, then overwritten)
//! y  = e^{x − m'} / max(s, 1)             (s ≥ 1 unless the slice is all −∞: then 0)
//! log: y = (x − m') − ln max(s, 1)        (then −∞)
//! ```
//!
//! equal to the one-kernel softmax under its tolerance (the same roundings, another
//! summation order). The backward of such a row likewise:
//!
//! ```text
//! softmax:      p = Σ over the axis of dy·y,   dx = y·(dy − p)
//! log-softmax:  t = Σ over the axis of dy,     dx = dy − e^y·t
//! ```

use kernelc_ir::ScalarType;

use super::{SoftmaxBackwardSpec, SoftmaxSpec};
use crate::lower::math::compute_type;
use crate::lower::split::{
    assemble, cast_step, over_first_axis, split_rows_of, step, Piece, Place,
};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, ReduceFn, UnaryFn};
use crate::shape::numel;
use crate::spec::OpSpec;

/// A shape cut at its axis: `outer` rows of `n × inner` (`row`) elements, and the
/// compute type (`narrow`: not the op's dtype).
struct Slices {
    outer: usize,
    n: usize,
    inner: usize,
    row: usize,
    ct: ScalarType,
    narrow: bool,
}

/// How an op over slices splits: pieces of rows, or each row by catalogue ops.
enum Rows {
    Split(Result<Plan, LowerError>),
    Long(Slices),
}

/// The plan in pieces of rows (`piece(shape)`: the op over a piece's shape, its axis
/// 1) where one row fits; else the row geometry, for catalogue ops over each row.
fn by_rows(
    op: &impl crate::op::Op,
    what: &str,
    caps: &TargetCaps,
    shape: &[usize],
    axis: usize,
    piece: impl Fn(Vec<usize>) -> OpSpec,
) -> Rows {
    let outer = numel(&shape[..axis]);
    let (n, inner) = (shape[axis], numel(&shape[axis + 1..]));
    let row = n * inner;
    if row as u64 <= caps.kernel_limit() {
        return Rows::Split(split_rows_of(op, what, caps, outer, &[], |r| {
            piece([&[r][..], &shape[axis..]].concat())
        }));
    }
    let dtype = op.inputs()[0].dtype;
    let ct = compute_type(dtype);
    Rows::Long(Slices {
        outer,
        n,
        inner,
        row,
        ct,
        narrow: ct != dtype,
    })
}

pub(super) fn softmax_large(spec: &SoftmaxSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let rows = by_rows(spec, "softmax", caps, &spec.shape, spec.axis, |shape| {
        SoftmaxSpec {
            shape,
            axis: 1,
            ..spec.clone()
        }
        .into()
    });
    let Slices {
        outer,
        n,
        inner,
        row,
        ct,
        narrow,
    } = match rows {
        Rows::Split(plan) => return plan,
        Rows::Long(slices) => slices,
    };
    // Temporaries: the maximum and the sum per slice, and for a narrow dtype the row
    // in the compute type and its result.
    let m = Whole::Temp(0);
    let s = Whole::Temp(1);
    let temp = |len: usize| TempBuffer {
        dtype: ct,
        len: len as u64,
    };
    let mut temps = vec![temp(inner), temp(inner)];
    if narrow {
        temps.extend([temp(row), temp(row)]);
    }
    let slices = [n, inner];
    let mut pieces = Vec::new();
    for r in 0..outer {
        let base = (r * row) as u64;
        let (x, y) = if narrow {
            pieces.push(cast_step(
                spec.dtype,
                ct,
                row,
                Place::at(Whole::Input(0), base),
                Place::whole(Whole::Temp(2)),
            ));
            (Place::whole(Whole::Temp(2)), Place::whole(Whole::Temp(3)))
        } else {
            (
                Place::at(Whole::Input(0), base),
                Place::at(Whole::Output(0), base),
            )
        };
        pieces.push(step(
            over_first_axis(ReduceFn::Max, ct, slices.to_vec()),
            vec![x],
            Place::whole(m),
        ));
        pieces.push(step(
            fused(ct, slices, 2, shifted_exp(ct)),
            vec![x, Place::whole(m)],
            y,
        ));
        pieces.push(step(
            over_first_axis(ReduceFn::Sum, ct, slices.to_vec()),
            vec![y],
            Place::whole(s),
        ));
        let result = if spec.log {
            log_result(ct)
        } else {
            ratio_result(ct)
        };
        pieces.push(step(
            fused(ct, slices, 3, result),
            vec![x, Place::whole(m), Place::whole(s)],
            y,
        ));
        if narrow {
            pieces.push(cast_step(
                ct,
                spec.dtype,
                row,
                y,
                Place::at(Whole::Output(0), base),
            ));
        }
    }
    assemble(caps, temps, pieces)
}

/// `nodes` over the slices `[n, inner]` (input 0) and `extra` per-slice values of
/// `[inner]` (inputs 1…).
fn fused(
    dtype: ScalarType,
    [n, inner]: [usize; 2],
    inputs: usize,
    nodes: Vec<FusedNode>,
) -> OpSpec {
    let mut shapes = vec![vec![n, inner]];
    shapes.extend(std::iter::repeat_n(vec![inner], inputs - 1));
    OpSpec::Fused(FusedSpec {
        dtype,
        inputs: shapes,
        nodes,
    })
}

/// Nodes 0–3: `x`, `m`, `m' = max(m, lowest)`, `x − m'` (inputs `x`, `m`), with
/// `lowest` the least finite value of `dtype`.
fn shifted(dtype: ScalarType) -> Vec<FusedNode> {
    let lowest = match dtype {
        ScalarType::F64 => f64::MIN,
        _ => f64::from(f32::MIN),
    };
    vec![
        FusedNode::Input(0),
        FusedNode::Input(1),
        FusedNode::Scalar {
            func: BinaryFn::Max,
            x: 1,
            scalar: lowest,
            reversed: false,
        },
        FusedNode::Binary {
            func: BinaryFn::Sub,
            a: 0,
            b: 2,
        },
    ]
}

/// `e^{x − m'}`.
fn shifted_exp(dtype: ScalarType) -> Vec<FusedNode> {
    let mut nodes = shifted(dtype);
    nodes.push(FusedNode::Unary {
        func: UnaryFn::Exp,
        x: 3,
    });
    nodes
}

/// Nodes 4–5 after [`shifted`]: `s` (input 2) and `max(s, 1)`.
fn with_sum(mut nodes: Vec<FusedNode>) -> Vec<FusedNode> {
    nodes.extend([
        FusedNode::Input(2),
        // NaN-propagating: a NaN sum (a NaN or +∞ in the slice) makes the slice NaN.
        FusedNode::Scalar {
            func: BinaryFn::MaxNan,
            x: 4,
            scalar: 1.0,
            reversed: false,
        },
    ]);
    nodes
}

/// `e^{x − m'} / max(s, 1)`.
fn ratio_result(dtype: ScalarType) -> Vec<FusedNode> {
    let mut nodes = with_sum(shifted(dtype));
    nodes.extend([
        FusedNode::Unary {
            func: UnaryFn::Exp,
            x: 3,
        },
        FusedNode::Binary {
            func: BinaryFn::Div,
            a: 6,
            b: 5,
        },
    ]);
    nodes
}

/// `(x − m') − ln max(s, 1)`.
fn log_result(dtype: ScalarType) -> Vec<FusedNode> {
    let mut nodes = with_sum(shifted(dtype));
    nodes.extend([
        FusedNode::Unary {
            func: UnaryFn::Log,
            x: 5,
        },
        FusedNode::Binary {
            func: BinaryFn::Sub,
            a: 3,
            b: 6,
        },
    ]);
    nodes
}

pub(super) fn softmax_backward_large(
    spec: &SoftmaxBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let rows = by_rows(
        spec,
        "softmax_backward",
        caps,
        &spec.shape,
        spec.axis,
        |shape| {
            SoftmaxBackwardSpec {
                shape,
                axis: 1,
                ..spec.clone()
            }
            .into()
        },
    );
    let Slices {
        outer,
        n,
        inner,
        row,
        ct,
        narrow,
    } = match rows {
        Rows::Split(plan) => return plan,
        Rows::Long(slices) => slices,
    };
    // Temporaries: the sum per slice, the products `dy·y` (softmax), and for a narrow
    // dtype y, dy and dx in the compute type.
    let sum = Whole::Temp(0);
    let products = Whole::Temp(1);
    let temp = |len: usize| TempBuffer {
        dtype: ct,
        len: len as u64,
    };
    let mut temps = vec![temp(inner), temp(row)];
    if narrow {
        temps.extend([temp(row), temp(row), temp(row)]);
    }
    let slices = [n, inner];
    let mut pieces: Vec<Piece> = Vec::new();
    for r in 0..outer {
        let base = (r * row) as u64;
        let (y, dy, dx) = if narrow {
            for (i, t) in [(0, 2), (1, 3)] {
                pieces.push(cast_step(
                    spec.dtype,
                    ct,
                    row,
                    Place::at(Whole::Input(i), base),
                    Place::whole(Whole::Temp(t)),
                ));
            }
            let t = |i| Place::whole(Whole::Temp(i));
            (t(2), t(3), t(4))
        } else {
            (
                Place::at(Whole::Input(0), base),
                Place::at(Whole::Input(1), base),
                Place::at(Whole::Output(0), base),
            )
        };
        let summed = if spec.log {
            dy
        } else {
            pieces.push(step(
                OpSpec::Fused(FusedSpec {
                    dtype: ct,
                    inputs: vec![vec![row]; 2],
                    nodes: FusedNode::of_two_inputs(BinaryFn::Mul),
                }),
                vec![dy, y],
                Place::whole(products),
            ));
            Place::whole(products)
        };
        pieces.push(step(
            over_first_axis(ReduceFn::Sum, ct, slices.to_vec()),
            vec![summed],
            Place::whole(sum),
        ));
        let nodes = if spec.log {
            // dy − e^y·t
            vec![
                FusedNode::Input(0),
                FusedNode::Input(1),
                FusedNode::Input(2),
                FusedNode::Unary {
                    func: UnaryFn::Exp,
                    x: 0,
                },
                FusedNode::Binary {
                    func: BinaryFn::Mul,
                    a: 3,
                    b: 2,
                },
                FusedNode::Binary {
                    func: BinaryFn::Sub,
                    a: 1,
                    b: 4,
                },
            ]
        } else {
            // y·(dy − p)
            vec![
                FusedNode::Input(0),
                FusedNode::Input(1),
                FusedNode::Input(2),
                FusedNode::Binary {
                    func: BinaryFn::Sub,
                    a: 1,
                    b: 2,
                },
                FusedNode::Binary {
                    func: BinaryFn::Mul,
                    a: 0,
                    b: 3,
                },
            ]
        };
        // Inputs y [n, inner], dy [n, inner], the sum [inner].
        pieces.push(step(
            OpSpec::Fused(FusedSpec {
                dtype: ct,
                inputs: vec![vec![n, inner], vec![n, inner], vec![inner]],
                nodes,
            }),
            vec![y, dy, Place::whole(sum)],
            dx,
        ));
        if narrow {
            pieces.push(cast_step(
                ct,
                spec.dtype,
                row,
                dx,
                Place::at(Whole::Output(0), base),
            ));
        }
    }
    assemble(caps, temps, pieces)
}
