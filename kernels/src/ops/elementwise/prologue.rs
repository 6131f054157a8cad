//! Elementwise prologues: a [`FusedSpec`] computing the input `x` of a row op (a
//! reduction, softmax) from tensors of `x`'s shape inside the row op's own kernel, as
//! a graph compiler fuses `Σ x·x` or `softmax(x·s + b)`: `x` is never stored. The
//! prologue's value is rounded to the dtype, as the stored `x` would be, so the fused
//! op equals the pair it replaces under the row op's tolerance widened by the
//! prologue's own error ([`prologue_error`]).

use kernelc_ir::builder::{vector, Body, Mem, E};
use kernelc_ir::ScalarType;

use super::FusedSpec;
use crate::error::SpecError;
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::reduction::Buf;
use crate::lower::split::{assemble, Piece, PieceUniforms, Place};
use crate::lower::{
    LowerError, Plan, ScalarParam, TargetCaps, TempBuffer, Uniform, Uniforms, Whole,
};
use crate::op::Op;
use crate::shape::{broadcast_strides, row_major_strides};
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
        _ if lanes == 1 => one.load(mem, dtype, operand_offset(x, &strides, off.clone())),
        Some(1) if along_last => n.load(mem, dtype, operand_offset(x, &strides, off.clone())),
        Some(0) if along_last => n.splat(one.load(mem, dtype, operand_offset(x, &strides, off.clone()))),
        _ => vector((0..lanes as u32).map(|l| {
            one.load(mem, dtype, operand_offset(x, &strides, off.clone() + l))
        })),
    }
}

/// The element offset in an operand with per-axis `strides` over `x` (0 where it
/// is broadcast) of `x`'s element `index`.
fn operand_offset(x: &[usize], strides: &[usize], index: E) -> E {
    let x_strides = row_major_strides(x);
    let mut terms: Vec<E> = Vec::new();
    for (d, (&extent, &stride)) in x.iter().zip(strides).enumerate() {
        if stride == 0 || extent == 1 {
            continue;
        }
        let mut coord = index.clone();
        if x_strides[d] != 1 {
            coord = coord / x_strides[d] as u32;
        }
        if d != 0 {
            coord = coord % extent as u32;
        }
        terms.push(if stride == 1 { coord } else { coord * stride as u32 });
    }
    terms
        .into_iter()
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| E::from(0u32))
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
    let x = TempBuffer {
        dtype: prologue.dtype,
        len: crate::shape::numel(&prologue.out_shape()) as u64,
    };
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
