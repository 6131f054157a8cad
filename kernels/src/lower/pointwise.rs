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
use super::{declare_tensor, Binding, Launch, LowerError, Plan, ScalarParam, TargetCaps};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

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

/// One launch of `op` computing `outputs[k][i] = body(i, inputs[..][i], params)[k]` for
/// every flat index `i` below `numel` (in steps of `lanes`): every input and output of
/// the op is an operand of `numel` elements, in order. `body` gets the index of the
/// item's first element, the inputs loaded and widened to their compute types and the
/// scalar parameters `params` (declared after the buffers), and returns the outputs in
/// `ty` (narrowed to each output's dtype here). Output buffers are named `<name>_out`,
/// so an output may share its name with the input it updates in place.
pub(crate) fn pointwise(
    op: &OpSpec,
    caps: &TargetCaps,
    (numel, lanes, num_ty): (usize, u8, ScalarType),
    params: &[ScalarParam],
    body: impl FnOnce(&mut Body, &E, Vec<E>, &[E]) -> Vec<E>,
) -> Result<Plan, LowerError> {
    let (inputs, outputs) = (op.inputs(), op.outputs());
    let grid = plan_1d((numel / lanes as usize) as u64, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let in_mems: Vec<Mem> = inputs
        .iter()
        .map(|sig| declare_tensor(&mut k, sig, Access::Read))
        .collect();
    let out_mems: Vec<Mem> = outputs
        .iter()
        .map(|sig| {
            k.buffer(
                format!("{}_out", sig.name),
                sig.dtype,
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
                .map(|(sig, &mem)| {
                    Num {
                        ty: compute_type(sig.dtype),
                        lanes,
                    }
                    .load(mem, sig.dtype, index.clone())
                })
                .collect();
            let results = body(f, &index, values, &scalars);
            let num = Num { ty: num_ty, lanes };
            for ((sig, &mem), value) in outputs.iter().zip(&out_mems).zip(results) {
                f.store(mem, index.clone(), num.narrow(value, sig.dtype));
            }
        });
    })?;
    let bindings = (0..inputs.len())
        .map(Binding::Input)
        .chain((0..outputs.len()).map(Binding::Output))
        .chain(params.iter().map(|p| p.binding.clone()))
        .collect();
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}
