//! The broadcasting map kernel: each output element is a function of the broadcast
//! input elements at the same coordinates (unary, binary, `where`, casts and every op
//! that is "one value per output element from the inputs at its coordinates").
//!
//! Dimensions along which every operand is contiguous (or broadcast) are merged
//! first, so index arithmetic is as short as the broadcasting allows; when no operand
//! broadcasts, items are vectors of `caps.vector_width` lanes (wide loads and stores).

use super::math::{compute_type, Num};
use super::schedule::plan_1d;
use super::{declare_tensor, Binding, Launch, LowerError, Plan, TargetCaps, Uniforms};
use crate::shape::{broadcast_strides, row_major_strides};
use crate::spec::{OpSpec, TensorSig};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// One input of a map kernel: its signature and where it binds.
pub(crate) struct Operand {
    pub sig: TensorSig,
    pub binding: Binding,
}

/// Output dims after merging, with each operand's element stride per dim (0 where it
/// broadcasts).
struct Layout {
    dims: Vec<usize>,
    strides: Vec<Vec<usize>>,
}

/// Merges neighbouring dims that every operand walks contiguously (or broadcasts).
fn collapse(out_shape: &[usize], inputs: &[&[usize]]) -> Layout {
    let per_input: Vec<Vec<usize>> = inputs
        .iter()
        .map(|shape| broadcast_strides(shape, out_shape))
        .collect();
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<Vec<usize>> = vec![Vec::new(); inputs.len()];
    for (d, &extent) in out_shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let mergeable = !dims.is_empty()
            && per_input.iter().zip(&strides).all(|(s, merged)| {
                let prev = merged[merged.len() - 1];
                prev == s[d] * extent
            });
        if mergeable {
            let last = dims.len() - 1;
            dims[last] *= extent;
            for (s, merged) in per_input.iter().zip(strides.iter_mut()) {
                let m = merged.len() - 1;
                merged[m] = s[d];
            }
        } else {
            dims.push(extent);
            for (s, merged) in per_input.iter().zip(strides.iter_mut()) {
                merged.push(s[d]);
            }
        }
    }
    Layout { dims, strides }
}

impl Layout {
    /// Whether every operand is laid out exactly like the output.
    fn all_contiguous(&self) -> bool {
        self.dims.len() <= 1 && self.strides.iter().all(|s| s.iter().all(|&x| x == 1))
    }

    /// The element offset of operand `k` for output element `index`.
    fn offset(&self, k: usize, index: &E) -> E {
        broadcast_offset(&self.dims, &self.strides[k], index)
    }
}

/// The element offset, in an operand with per-dimension element `strides` (0 where it
/// is broadcast), of element `index` of a row-major tensor of `dims`.
pub(crate) fn broadcast_offset(dims: &[usize], strides: &[usize], index: &E) -> E {
    let out_strides = row_major_strides(dims);
    let mut terms: Vec<E> = Vec::new();
    for (d, (&extent, &stride)) in dims.iter().zip(strides).enumerate() {
        if stride == 0 || extent == 1 {
            continue;
        }
        let mut coord = index.clone();
        if out_strides[d] != 1 {
            coord = coord / out_strides[d] as u32;
        }
        if d != 0 {
            coord = coord % extent as u32;
        }
        terms.push(if stride == 1 {
            coord
        } else {
            coord * stride as u32
        });
    }
    terms
        .into_iter()
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| E::from(0u32))
}

/// Builds the one-launch plan of a map kernel: `out[i] = f(inputs at i, params)`,
/// where `params` are the uniforms named `names` (declared after the buffers).
pub(crate) fn map_plan(
    name: &str,
    caps: &TargetCaps,
    out: &TensorSig,
    operands: &[Operand],
    num_ty: ScalarType,
    (uniforms, names): (&Uniforms, &[&str]),
    f: impl FnOnce(&mut Body, &Num, Vec<E>, &[E]) -> E,
) -> Result<Plan, LowerError> {
    let shapes: Vec<&[usize]> = operands.iter().map(|o| o.sig.shape.as_slice()).collect();
    let layout = collapse(&out.shape, &shapes);
    let numel = out.numel() as u64;
    let width = caps.vector_width as u64;
    let lanes = if width > 1 && layout.all_contiguous() && numel % width == 0 {
        width as u8
    } else {
        1
    };
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let num = Num { ty: num_ty, lanes };

    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let mems: Vec<Mem> = operands
        .iter()
        .map(|o| declare_tensor(&mut k, &o.sig, Access::Read))
        .collect();
    let out_mem = declare_tensor(&mut k, out, Access::Write);
    let (params, param_bindings) = uniforms.declare_all(&mut k, names)?;
    let kernel = k.build(|b| {
        grid.for_each_vector(b, lanes, "index", |b, index| {
            let values = operands
                .iter()
                .zip(&mems)
                .enumerate()
                .map(|(k, (o, &mem))| {
                    let offset = if lanes == 1 {
                        layout.offset(k, &index)
                    } else {
                        index.clone()
                    };
                    Num {
                        ty: compute_type(o.sig.dtype),
                        lanes,
                    }
                    .load(mem, o.sig.dtype, offset)
                })
                .collect();
            let value = f(b, &num, values, &params);
            let stored = Num { ty: num_ty, lanes }.narrow(value, out.dtype);
            b.store(out_mem, index, stored);
        });
    })?;
    let mut bindings: Vec<Binding> = operands.iter().map(|o| o.binding.clone()).collect();
    bindings.push(Binding::Output(0));
    bindings.extend(param_bindings);
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}

pub(crate) fn inputs_of(spec_inputs: Vec<TensorSig>) -> Vec<Operand> {
    spec_inputs
        .into_iter()
        .enumerate()
        .map(|(i, sig)| Operand {
            sig,
            binding: Binding::Input(i),
        })
        .collect()
}

pub(crate) fn first_output(outputs: Vec<TensorSig>) -> Result<TensorSig, LowerError> {
    outputs
        .into_iter()
        .next()
        .ok_or(LowerError::Internal("op without outputs"))
}

/// The one-launch map plan of `op` over its inputs (in `inputs()` order) to its first
/// output, computing in `num_ty`, with every uniform of `op` as a parameter (the
/// closure gets them in [`OpSpec::uniforms`] order).
pub(crate) fn map_op(
    op: OpSpec,
    caps: &TargetCaps,
    num_ty: ScalarType,
    f: impl FnOnce(&mut Body, &Num, &[E], &[E]) -> E,
) -> Result<Plan, LowerError> {
    let out = first_output(op.outputs())?;
    let uniforms = op.uniforms();
    let names: Vec<&str> = uniforms.iter().map(|u| u.name.as_str()).collect();
    map_plan(
        &op.name(),
        caps,
        &out,
        &inputs_of(op.inputs()),
        num_ty,
        (&Uniforms::new(&uniforms), &names),
        |b, n, v, p| f(b, n, &v, p),
    )
}

/// Operand `i` of a map kernel (the spec's signature guarantees it exists).
pub(crate) fn arg(values: &[E], i: usize, n: &Num) -> E {
    values.get(i).cloned().unwrap_or_else(|| n.lit(0.0))
}
