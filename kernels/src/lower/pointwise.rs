//! Same-shape pointwise kernels with several inputs and outputs (dropout with its
//! mask, Adam's three updated tensors, per-element image maps).
//!
//! [`super::elementwise`]'s `map_plan` covers one output with broadcasting; here every
//! operand has the output's flat layout, there may be several outputs, and the body sees
//! the flat index of its item (a random counter, a channel number). Items are
//! `lanes`-wide vectors when the caller allows it: wide loads and stores on every
//! operand, and neighbouring invocations on neighbouring vectors (coalesced).

use super::math::{compute_type, Num};
use super::schedule::plan_1d;
use super::{Binding, Launch, LowerError, Plan, ScalarParam, TargetCaps};
use crate::spec::TensorSig;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// One operand of a pointwise kernel: its buffer and where it binds.
pub(crate) struct Port {
    pub sig: TensorSig,
    pub binding: Binding,
}

impl Port {
    pub fn input(sig: TensorSig, i: usize) -> Port {
        Port {
            sig,
            binding: Binding::Input(i),
        }
    }
    pub fn output(sig: TensorSig, i: usize) -> Port {
        Port {
            sig,
            binding: Binding::Output(i),
        }
    }
}

/// The vector width for `numel` contiguous elements: the caps' width when it divides
/// `numel`, else 1.
pub(crate) fn contiguous_lanes(caps: &TargetCaps, numel: usize) -> u8 {
    let w = caps.vector_width.max(1);
    if numel % w as usize == 0 {
        w
    } else {
        1
    }
}

/// A pointwise launch: `numel` elements in items of `lanes`, computed in `ty`.
pub(crate) struct Pointwise<'a> {
    pub name: &'a str,
    pub numel: usize,
    pub lanes: u8,
    pub ty: ScalarType,
    pub inputs: &'a [Port],
    pub outputs: &'a [Port],
    /// Scalar parameters (per-call values), declared after the buffers.
    pub params: &'a [ScalarParam],
}

/// One launch computing `outputs[k][i] = body(i, inputs[..][i], params)[k]` for every
/// flat index `i` (in steps of `lanes`). `body` gets the index of the item's first
/// element, the inputs loaded and widened to their compute types and the scalar
/// parameters, and returns the outputs
/// in `op.ty` (narrowed to each output's dtype here). Output buffers are named
/// `<name>_out`, so an output may share its name with the input it updates in place.
pub(crate) fn pointwise(
    op: Pointwise<'_>,
    caps: &TargetCaps,
    body: impl FnOnce(&mut Body, &E, Vec<E>, &[E]) -> Vec<E>,
) -> Result<Plan, LowerError> {
    let Pointwise {
        name,
        numel,
        lanes,
        ty: num_ty,
        inputs,
        outputs,
        params,
    } = op;
    let grid = plan_1d((numel / lanes as usize) as u64, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let in_mems: Vec<Mem> = inputs
        .iter()
        .map(|p| k.buffer(p.sig.name.clone(), p.sig.dtype, numel as u64, Access::Read))
        .collect();
    let out_mems: Vec<Mem> = outputs
        .iter()
        .map(|p| {
            k.buffer(
                format!("{}_out", p.sig.name),
                p.sig.dtype,
                numel as u64,
                Access::Write,
            )
        })
        .collect();
    let scalars: Vec<E> = params.iter().map(|p| p.declare(&mut k)).collect();
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            let values = inputs
                .iter()
                .zip(&in_mems)
                .map(|(p, &mem)| {
                    Num {
                        ty: compute_type(p.sig.dtype),
                        lanes,
                    }
                    .load(mem, p.sig.dtype, index.clone())
                })
                .collect();
            let results = body(f, &index, values, &scalars);
            let num = Num { ty: num_ty, lanes };
            for ((p, &mem), value) in outputs.iter().zip(&out_mems).zip(results) {
                f.store(mem, index.clone(), num.narrow(value, p.sig.dtype));
            }
        });
    })?;
    let bindings = inputs
        .iter()
        .chain(outputs)
        .map(|p| p.binding.clone())
        .chain(params.iter().map(|p| p.binding.clone()))
        .collect();
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}
