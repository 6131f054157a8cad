//! Elementwise prologues and epilogues of row ops.
//!
//! A prologue is a [`FusedSpec`] computing the input `x` of a row op (a reduction,
//! softmax) from tensors broadcast to `x`'s shape inside the row op's own kernel, as
//! a graph compiler fuses `Σ x·x` or `softmax(x·s + b)`: `x` is never stored. An
//! epilogue is one applied to a reduction's result (its input 0) and tensors
//! broadcast to the result's shape before the result is stored, as in
//! `√(mean x² + ε)`. Each value is rounded to the dtype where storing it would round
//! it, so the fused op equals the nodes it replaces under the row op's tolerance
//! widened by the prologue's and epilogue's own errors ([`prologue_error`],
//! [`epilogue_condition`]).

use crate::reference::round_to;
use kernelc_ir::builder::{vector, Body, Mem, E};
use kernelc_ir::ScalarType;

use super::FusedSpec;
use crate::error::SpecError;
use crate::lower::map::broadcast_offset;
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::reduction::Buf;
use crate::lower::split::{assemble, Piece, PieceUniforms, Place};
use crate::lower::{
    LowerError, Plan, ScalarParam, TargetCaps, TempBuffer, Uniform, Uniforms, Whole,
};
use crate::op::Op;
use crate::shape::broadcast_strides;
use crate::spec::{OpSpec, TensorSig};
use crate::tolerance::unit_roundoff;

/// How a row op reads its input `x`: from input 0, or through a prologue over inputs
/// `0..count()`.
#[derive(Clone, Copy)]
pub(crate) struct XSource<'a> {
    dtype: ScalarType,
    prologue: Option<&'a FusedSpec>,
}

impl<'a> XSource<'a> {
    /// `x` is input 0, of `dtype`.
    pub fn plain(dtype: ScalarType) -> XSource<'a> {
        XSource {
            dtype,
            prologue: None,
        }
    }

    /// `x` is `prologue`'s value over the op's first inputs.
    pub fn fused(prologue: &'a FusedSpec) -> XSource<'a> {
        XSource {
            dtype: prologue.dtype,
            prologue: Some(prologue),
        }
    }

    /// The op's inputs `x` is computed from (the first ones).
    pub fn count(&self) -> usize {
        self.prologue.map_or(1, |p| p.inputs.len())
    }

    /// Those inputs as buffers, read-only.
    pub fn bufs(&self, ins: &[TensorSig]) -> Vec<Buf> {
        (0..self.count()).map(|i| Buf::input(ins, i)).collect()
    }

    /// The per-call values the loads read: the prologue's, which come first among the
    /// op's `uniforms`.
    pub fn params(&self, uniforms: &[Uniform]) -> Result<Vec<ScalarParam>, LowerError> {
        let Some(prologue) = self.prologue else {
            return Ok(Vec::new());
        };
        let own = prologue.uniforms().len();
        let mut params = Uniforms::new(uniforms).params()?;
        if params.len() < own {
            return Err(LowerError::Internal(
                "a fused op lists fewer per-call values than its prologue",
            ));
        }
        params.truncate(own);
        Ok(params)
    }

    /// `x` at element offset `off` (`n`'s lanes, in its compute type), from `mems`
    /// (the [`XSource::bufs`]) and `params` (the declared [`XSource::params`]).
    pub fn load(&self, f: &mut Body, n: &Num, mems: &[Mem], params: &[E], off: E) -> E {
        match self.prologue {
            None => n.load(mems[0], self.dtype, off),
            Some(prologue) => {
                let off = bind(f, "off", off);
                let x = prologue.out_shape();
                let inputs = mems[..prologue.inputs.len()]
                    .iter()
                    .zip(&prologue.inputs)
                    .map(|(&m, shape)| load_operand(n, m, prologue.dtype, shape, &x, &off))
                    .collect();
                prologue.value(f, n, inputs, params, true)
            }
        }
    }
}

/// Operand `mem` (of `shape`, broadcast to `x`'s shape) at `x`'s element offset
/// `off`, as `n`'s lanes. A row op's lanes are `x`'s elements `off, off + 1, …`,
/// aligned and inside one run of its contiguous axes: an operand of `x`'s shape is
/// one vector load; one walking (or broadcast along) `x`'s last axis, whose extent
/// the lanes divide, one vector load (or one splat); any other a load per lane.
fn load_operand(n: &Num, mem: Mem, dtype: ScalarType, shape: &[usize], x: &[usize], off: &E) -> E {
    if shape == x {
        return n.load(mem, dtype, off.clone());
    }
    let strides = broadcast_strides(shape, x);
    let lanes = n.lanes as usize;
    let one = Num { lanes: 1, ..*n };
    let along_last = x.last().is_some_and(|&e| e % lanes == 0);
    match strides.last() {
        _ if lanes == 1 => one.load(mem, dtype, broadcast_offset(x, &strides, off)),
        Some(1) if along_last => n.load(mem, dtype, broadcast_offset(x, &strides, off)),
        Some(0) if along_last => n.splat(one.load(mem, dtype, broadcast_offset(x, &strides, off))),
        _ => vector((0..lanes as u32).map(|l| {
            one.load(
                mem,
                dtype,
                broadcast_offset(x, &strides, &(off.clone() + l)),
            )
        })),
    }
}

/// Checks that `prologue` computes an `x` of `dtype` and `shape`: a valid fused op of
/// that dtype whose inputs broadcast to that shape.
pub(crate) fn check_prologue(
    prologue: &FusedSpec,
    dtype: ScalarType,
    shape: &[usize],
) -> Result<(), SpecError> {
    prologue.validate()?;
    if prologue.dtype != dtype {
        return Err(SpecError::bad_attr(
            "prologue.dtype",
            prologue.dtype,
            &format!("must be the dtype of the op it feeds ({dtype})"),
        ));
    }
    let out = prologue.out_shape();
    if out != shape {
        return Err(SpecError::bad_attr(
            "prologue.inputs",
            format!("{:?}", prologue.inputs),
            &format!("must broadcast to the op's x, {shape:?}, not {out:?}"),
        ));
    }
    Ok(())
}

/// The error of a prologue's value relative to its magnitude, in units of the
/// compute type's roundoff: its nodes' own ULPs, and for a dtype narrower than its
/// compute type the one ULP of the dtype by which the final rounding may go the other
/// way. 0 for integers (exact, wrapping as the kernel does).
pub(crate) fn prologue_error(prologue: &FusedSpec) -> f64 {
    let compute = unit_roundoff(compute_type(prologue.dtype));
    if compute == 0.0 {
        return 0.0;
    }
    let stored = unit_roundoff(prologue.dtype);
    let flip = if stored > compute {
        2.0 * stored / compute
    } else {
        0.0
    };
    prologue.ulps() + flip
}

/// The plan of a fused op whose tensors pass one kernel's indices: `prologue`'s
/// value into a temporary (the whole op's per-call values are the prologue's), then
/// `then`, the row op alone, from that temporary into the op's outputs (its inputs
/// after the temporary are the fused op's inputs after the prologue's). Both are
/// split as their own ops are; one extra pass over `x` at this size.
pub(crate) fn materialized(
    caps: &TargetCaps,
    prologue: &FusedSpec,
    then: OpSpec,
) -> Result<Plan, LowerError> {
    let k = prologue.inputs.len();
    let x = temp_of(prologue);
    let first = Piece {
        spec: OpSpec::Fused(prologue.clone()),
        inputs: (0..k).map(|i| Place::whole(Whole::Input(i))).collect(),
        outputs: vec![Place::whole(Whole::Temp(0))],
        uniforms: PieceUniforms::Shared,
    };
    let mut inputs = vec![Place::whole(Whole::Temp(0))];
    inputs.extend((1..then.inputs().len()).map(|i| Place::whole(Whole::Input(k + i - 1))));
    let outputs = (0..then.outputs().len())
        .map(|i| Place::whole(Whole::Output(i)))
        .collect();
    let second = Piece {
        spec: then,
        inputs,
        outputs,
        uniforms: PieceUniforms::Own,
    };
    assemble(caps, vec![x], vec![first, second])
}

/// An epilogue as one lowering sees it: its spec, the op input its operand 1 is (its
/// operand 0 is the row op's result), and the op uniform its first per-call value is.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a> {
    pub spec: &'a FusedSpec,
    pub first_input: usize,
    pub first_uniform: usize,
}

impl<'a> Epilogue<'a> {
    /// `spec` applied to the result of an op that reads `prologue`'s value: its
    /// operands follow the prologue's inputs, its per-call values the prologue's.
    pub fn after(prologue: &FusedSpec, spec: &'a FusedSpec) -> Epilogue<'a> {
        Epilogue {
            spec,
            first_input: prologue.inputs.len(),
            first_uniform: prologue.uniforms().len(),
        }
    }

    /// Its arguments in a reference: the op's `result`, then its operands among the
    /// op's `inputs`.
    fn args<'i>(&self, inputs: &[&'i [f64]], result: &'i [f64]) -> Vec<&'i [f64]> {
        let mut args = vec![result];
        args.extend(inputs.iter().skip(self.first_input));
        args
    }

    /// The row op's `result` as the epilogue reads it: rounded to the dtype, as
    /// storing it between the nodes would.
    fn stored(&self, result: &[f64]) -> Vec<f64> {
        result
            .iter()
            .map(|&v| round_to(self.spec.dtype, v))
            .collect()
    }

    /// Its f64 reference on the row op's `result` (stored first) and its operands
    /// among the op's `inputs`.
    pub fn reference(&self, inputs: &[&[f64]], result: &[f64]) -> Vec<f64> {
        let stored = self.stored(result);
        self.spec
            .reference(&self.args(inputs, &stored))
            .swap_remove(0)
    }

    /// Per element, what its value may be off by when the row op's `result` is off by
    /// `error` ([`epilogue_condition`] on the stored result).
    pub fn condition(&self, inputs: &[&[f64]], result: &[f64], error: &[f64]) -> Vec<f64> {
        let stored = self.stored(result);
        epilogue_condition(self.spec, &self.args(inputs, &stored), error)
    }

    /// Its operands after the first, as read-only buffers.
    pub fn bufs(&self, ins: &[TensorSig]) -> Vec<Buf> {
        (1..self.spec.inputs.len())
            .map(|j| Buf::input(ins, self.first_input + j - 1))
            .collect()
    }

    /// Its per-call values among the op's `uniforms`.
    pub fn params(&self, uniforms: &[Uniform]) -> Result<Vec<ScalarParam>, LowerError> {
        let own = self.spec.uniforms().len();
        let all = Uniforms::new(uniforms).params()?;
        all.get(self.first_uniform..self.first_uniform + own)
            .map(<[ScalarParam]>::to_vec)
            .ok_or(LowerError::Internal(
                "a fused op lists fewer per-call values than its epilogue",
            ))
    }

    /// The epilogue's value at result element `q` from the result `value` (`n`, one
    /// lane, in the compute type; rounded here to the dtype first, as storing it
    /// would), the operands' buffers `mems` and the declared `params`.
    pub fn apply(&self, f: &mut Body, n: &Num, value: E, mems: &[Mem], params: &[E], q: &E) -> E {
        let spec = self.spec;
        let out = spec.out_shape();
        let mut inputs = vec![n.round_trip(value, spec.dtype)];
        for (&m, shape) in mems.iter().zip(&spec.inputs[1..]) {
            inputs.push(load_operand(n, m, spec.dtype, shape, &out, q));
        }
        spec.value(f, n, inputs, params, false)
    }
}

/// The inputs of a row op with `prologue` and `epilogue`: the prologue's (`x0`,
/// ...), then the epilogue's after its first ([`epilogue_inputs`]).
pub(crate) fn row_op_inputs(prologue: &FusedSpec, epilogue: Option<&FusedSpec>) -> Vec<TensorSig> {
    let mut inputs = prologue.inputs();
    inputs.extend(epilogue.map(epilogue_inputs).unwrap_or_default());
    inputs
}

/// An epilogue's inputs after its first (the result), as the op that runs it lists
/// them: `e1`, ...
pub(crate) fn epilogue_inputs(epilogue: &FusedSpec) -> Vec<TensorSig> {
    let renamed = |mut sig: TensorSig| {
        sig.name = sig.name.replacen('x', "e", 1);
        sig
    };
    epilogue.inputs().into_iter().skip(1).map(renamed).collect()
}

/// The per-call values of a row op with `prologue` and `epilogue`: the prologue's,
/// then the epilogue's ([`epilogue_uniforms`]).
pub(crate) fn row_op_uniforms(prologue: &FusedSpec, epilogue: Option<&FusedSpec>) -> Vec<Uniform> {
    let mut uniforms = prologue.uniforms();
    uniforms.extend(epilogue.map(epilogue_uniforms).unwrap_or_default());
    uniforms
}

/// An epilogue's per-call values as the op that runs it lists them: `epilogue_…`.
pub(crate) fn epilogue_uniforms(epilogue: &FusedSpec) -> Vec<Uniform> {
    let renamed = |mut u: Uniform| {
        u.name = format!("epilogue_{}", u.name);
        u
    };
    epilogue.uniforms().into_iter().map(renamed).collect()
}

/// Checks that `epilogue` maps a result of `dtype` and `shape` (its input 0) to a
/// value of that shape.
pub(crate) fn check_epilogue(
    epilogue: &FusedSpec,
    dtype: ScalarType,
    shape: &[usize],
) -> Result<(), SpecError> {
    epilogue.validate()?;
    let out = epilogue.out_shape();
    let first = epilogue.inputs.first().map(Vec::as_slice);
    if epilogue.dtype != dtype || first != Some(shape) || out != shape {
        return Err(SpecError::bad_attr(
            "epilogue",
            format!("{} {:?} → {out:?}", epilogue.dtype, epilogue.inputs),
            &format!("must take the result ({dtype} {shape:?}) as input 0 and give that shape"),
        ));
    }
    Ok(())
}

/// Per result element, in units of the compute type's roundoff, what `epilogue`'s
/// value may be off by when the result `y` it reads (`inputs[0]`, with the other
/// operands after it) is off by `error` (the same units): the error carried through
/// the epilogue's slope (a central difference of its f64 reference), the result's
/// rounding to the dtype, and the epilogue's own error.
fn epilogue_condition(epilogue: &FusedSpec, inputs: &[&[f64]], error: &[f64]) -> Vec<f64> {
    let exact = FusedSpec {
        dtype: ScalarType::F64,
        ..epilogue.clone()
    };
    let y = inputs[0];
    let at = |shift: f64| {
        let moved: Vec<f64> = y.iter().map(|v| v + shift * v.abs().max(1.0)).collect();
        let mut args: Vec<&[f64]> = vec![&moved];
        args.extend(&inputs[1..]);
        exact.reference(&args).swap_remove(0)
    };
    const H: f64 = 1e-7;
    let (up, down) = (at(H), at(-H));
    let value = epilogue.reference(inputs).swap_remove(0);
    let compute = unit_roundoff(compute_type(epilogue.dtype));
    let flip = if compute == 0.0 {
        0.0
    } else {
        2.0 * unit_roundoff(epilogue.dtype) / compute
    };
    let own = prologue_error(epilogue);
    (0..value.len())
        .map(|k| {
            let step = 2.0 * H * y[k].abs().max(1.0);
            let slope = ((up[k] - down[k]) / step).abs();
            let carried = slope * (error[k] + flip * y[k].abs());
            let total = carried + own * value[k].abs();
            if total.is_nan() {
                f64::INFINITY
            } else {
                total
            }
        })
        .collect()
}

/// [`materialized`] with an epilogue: the row op's result into a second temporary,
/// then the epilogue from it (and its operands, the fused op's inputs from
/// `epilogue.first_input`) into the op's output, with its per-call values.
pub(crate) fn materialized_with_epilogue(
    caps: &TargetCaps,
    prologue: &FusedSpec,
    then: OpSpec,
    epilogue: Epilogue,
) -> Result<Plan, LowerError> {
    let temps = vec![temp_of(prologue), temp_of(epilogue.spec)];
    let whole = |w| Place::whole(w);
    let pieces = vec![
        Piece {
            spec: OpSpec::Fused(prologue.clone()),
            inputs: (0..prologue.inputs.len())
                .map(|i| whole(Whole::Input(i)))
                .collect(),
            outputs: vec![whole(Whole::Temp(0))],
            uniforms: PieceUniforms::Shared,
        },
        Piece {
            spec: then,
            inputs: vec![whole(Whole::Temp(0))],
            outputs: vec![whole(Whole::Temp(1))],
            uniforms: PieceUniforms::Own,
        },
        epilogue_piece(epilogue, Whole::Temp(1)),
    ];
    assemble(caps, temps, pieces)
}

/// The plan of an op that is `row` (reading the op's inputs before the epilogue's,
/// with the op's first per-call values) with `epilogue` on its output 0, whose
/// tensors pass one kernel's indices: `row` with that output in a temporary (its
/// other outputs the op's), then the epilogue from it. Both are split as their own
/// ops are; one extra pass over the output at this size.
pub(crate) fn epilogue_after(
    caps: &TargetCaps,
    row: OpSpec,
    epilogue: Epilogue,
) -> Result<Plan, LowerError> {
    let whole = |w| Place::whole(w);
    let outputs = std::iter::once(whole(Whole::Temp(0)))
        .chain((1..row.outputs().len()).map(|o| whole(Whole::Output(o))))
        .collect();
    let first = Piece {
        spec: row,
        inputs: (0..epilogue.first_input)
            .map(|i| whole(Whole::Input(i)))
            .collect(),
        outputs,
        uniforms: PieceUniforms::Shared,
    };
    let temps = vec![temp_of(epilogue.spec)];
    assemble(
        caps,
        temps,
        vec![first, epilogue_piece(epilogue, Whole::Temp(0))],
    )
}

/// A temporary holding `spec`'s value.
fn temp_of(spec: &FusedSpec) -> TempBuffer {
    TempBuffer {
        dtype: spec.dtype,
        len: crate::shape::numel(&spec.out_shape()) as u64,
    }
}

/// The piece applying `epilogue` to the result in `result` (its operands the op's
/// inputs from `epilogue.first_input`, its per-call values the op's from
/// `epilogue.first_uniform`), writing the op's output 0.
fn epilogue_piece(epilogue: Epilogue, result: Whole) -> Piece {
    let operands = (1..epilogue.spec.inputs.len())
        .map(|j| Place::whole(Whole::Input(epilogue.first_input + j - 1)));
    Piece {
        spec: OpSpec::Fused(epilogue.spec.clone()),
        inputs: std::iter::once(Place::whole(result))
            .chain(operands)
            .collect(),
        outputs: vec![Place::whole(Whole::Output(0))],
        uniforms: PieceUniforms::From(epilogue.first_uniform),
    }
}
