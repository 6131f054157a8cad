//! Elementwise ops: unary math and activations (and their backward), binary ops and
//! `where` with NumPy broadcasting, tensor-scalar ops, casts and fills.
//!
//! All of them are one "map" kernel: each output element is a function of the
//! broadcast input elements at the same coordinates. Dimensions along which every
//! operand is contiguous (or broadcast) are merged first, so index arithmetic is as
//! short as the broadcasting allows; when no operand broadcasts, items are vectors of
//! `caps.vector_width` lanes (wide loads and stores).

use super::math::{compute_type, Num};
use super::schedule::plan_1d;
use super::{Binding, Launch, LowerError, Plan, TargetCaps};
use crate::rng::{dropout_threshold, stream_key, RngScheme};
use crate::shape::{broadcast_strides, row_major_strides};
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// One input of a map kernel: its signature and where it binds.
struct Operand {
    sig: TensorSig,
    binding: Binding,
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
        let out_strides = row_major_strides(&self.dims);
        let mut offset: Option<E> = None;
        for (d, (&extent, &stride)) in self.dims.iter().zip(&self.strides[k]).enumerate() {
            if stride == 0 {
                continue;
            }
            let mut coord = index.clone();
            if out_strides[d] != 1 {
                coord = coord / out_strides[d] as u32;
            }
            if d != 0 {
                coord = coord % extent as u32;
            }
            let term = if stride == 1 {
                coord
            } else {
                coord * stride as u32
            };
            offset = Some(match offset {
                None => term,
                Some(o) => o + term,
            });
        }
        offset.unwrap_or_else(|| E::from(0u32))
    }
}

/// Builds the one-launch plan of a map kernel: `out[i] = f(inputs at i)`.
fn map_plan(
    name: &str,
    caps: &TargetCaps,
    out: &TensorSig,
    operands: &[Operand],
    num_ty: ScalarType,
    f: impl FnOnce(&mut Body, &Num, Vec<E>) -> E,
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
        .map(|o| {
            k.buffer(
                o.sig.name.clone(),
                o.sig.dtype,
                o.sig.numel() as u64,
                Access::Read,
            )
        })
        .collect();
    let out_mem = k.buffer(out.name.clone(), out.dtype, numel, Access::Write);
    let kernel = k.build(|b| {
        grid.for_each_item(b, |b, item| {
            let index = if lanes == 1 {
                item
            } else {
                b.let_("index", item * lanes as u32)
            };
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
            let value = f(b, &num, values);
            let stored = Num { ty: num_ty, lanes }.narrow(value, out.dtype);
            b.store(out_mem, index, stored);
        });
    })?;
    let mut bindings: Vec<Binding> = operands.iter().map(|o| o.binding.clone()).collect();
    bindings.push(Binding::Output(0));
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}

fn inputs_of(spec_inputs: Vec<TensorSig>) -> Vec<Operand> {
    spec_inputs
        .into_iter()
        .enumerate()
        .map(|(i, sig)| Operand {
            sig,
            binding: Binding::Input(i),
        })
        .collect()
}

fn first_output(outputs: Vec<TensorSig>) -> Result<TensorSig, LowerError> {
    outputs
        .into_iter()
        .next()
        .ok_or(LowerError::Internal("op without outputs"))
}

/// The one-launch map plan of `op` over its inputs (in `inputs()` order) to its first
/// output, computing in `num_ty`.
fn map_op(
    op: OpSpec,
    caps: &TargetCaps,
    num_ty: ScalarType,
    f: impl FnOnce(&mut Body, &Num, &[E]) -> E,
) -> Result<Plan, LowerError> {
    let out = first_output(op.outputs())?;
    map_plan(
        &op.name(),
        caps,
        &out,
        &inputs_of(op.inputs()),
        num_ty,
        |b, n, v| f(b, n, &v),
    )
}

/// Operand `i` of a map kernel (the spec's signature guarantees it exists).
fn arg(values: &[E], i: usize, n: &Num) -> E {
    values.get(i).cloned().unwrap_or_else(|| n.lit(0.0))
}

pub fn unary(spec: &UnarySpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Unary(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v| n.unary(b, spec.func, arg(v, 0, n)),
    )
}

pub fn activation_backward(
    spec: &ActivationBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::ActivationBackward(spec.clone());
    map_op(op, caps, compute_type(spec.dtype), |b, n, v| {
        n.activation_backward(b, spec.func, arg(v, 0, n), arg(v, 1, n))
    })
}

/// `f(a, b)` in the compute type.
fn binary_value(b: &mut Body, n: &Num, func: BinaryFn, x: E, y: E) -> E {
    let is_int = n.ty.is_int();
    match func {
        BinaryFn::Add => x + y,
        BinaryFn::Sub => x - y,
        BinaryFn::Mul => x * y,
        // Integer division and remainder by zero give 0 (no target traps on it then).
        BinaryFn::Div | BinaryFn::Mod if is_int => {
            let y = super::math::bind(b, "divisor", y);
            let zero = y.clone().eq(n.lit(0.0));
            let safe = zero.clone().select(n.lit(1.0), y);
            let q = if func == BinaryFn::Div {
                x / safe
            } else {
                x % safe
            };
            zero.select(n.lit(0.0), q)
        }
        BinaryFn::Div => x / y,
        BinaryFn::Mod => x % y,
        BinaryFn::Pow => x.pow(y),
        BinaryFn::Max => x.max(y),
        BinaryFn::Min => x.min(y),
        BinaryFn::Eq => n.indicator(x.eq(y)),
        BinaryFn::Ne => n.indicator(x.ne(y)),
        BinaryFn::Lt => n.indicator(x.lt(y)),
        BinaryFn::Le => n.indicator(x.le(y)),
        BinaryFn::Gt => n.indicator(x.gt(y)),
        BinaryFn::Ge => n.indicator(x.ge(y)),
        BinaryFn::SiluMul => {
            let x = super::math::bind(b, "gate", x);
            x.clone() * n.sigmoid(x) * y
        }
    }
}

pub fn binary(spec: &BinarySpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Binary(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v| binary_value(b, n, spec.func, arg(v, 0, n), arg(v, 1, n)),
    )
}

pub fn scalar(spec: &ScalarSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Scalar(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v| {
            let (x, s) = (arg(v, 0, n), n.lit(spec.scalar));
            if spec.reversed {
                binary_value(b, n, spec.func, s, x)
            } else {
                binary_value(b, n, spec.func, x, s)
            }
        },
    )
}

pub fn where_(spec: &WhereSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let cond_ty = compute_type(spec.cond_dtype);
    map_op(
        OpSpec::Where(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |_, n, v| {
            let zero = Num {
                ty: cond_ty,
                lanes: n.lanes,
            }
            .lit(0.0);
            arg(v, 0, n).ne(zero).select(arg(v, 1, n), arg(v, 2, n))
        },
    )
}

pub fn cast(spec: &CastSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Cast(spec.clone());
    let out = first_output(op.outputs())?;
    // Convert straight from the stored type: no detour through f32 for f16 -> f64 etc.
    let mut operands = inputs_of(op.inputs());
    for o in &mut operands {
        o.sig.dtype = spec.from;
    }
    map_plan(&op.name(), caps, &out, &operands, spec.to, |_, n, v| {
        let x = arg(&v, 0, n);
        let from = compute_type(spec.from);
        if from == spec.to {
            x
        } else {
            x.cast(spec.to)
        }
    })
}

/// Fills: a constant, or counter-based uniform / normal numbers (see [`crate::rng`]).
pub fn fill(spec: &FillSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Fill(spec.clone());
    let out = first_output(op.outputs())?;
    let num_ty = compute_type(spec.dtype);
    let numel = out.numel() as u64;
    let grid = plan_1d(numel, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let out_mem = k.buffer(out.name.clone(), out.dtype, numel, Access::Write);
    let kernel = k.build(|b| {
        grid.for_each_item(b, |b, i| {
            let n = Num::scalar(num_ty);
            let value = match spec.value {
                FillValue::Constant { value } => n.lit(value),
                FillValue::Uniform {
                    low,
                    high,
                    seed,
                    step,
                } => {
                    let u = rng_uniform(b, FillSpec::RNG, seed, step, i.clone()).cast(num_ty);
                    n.lit(low) + u * n.lit(high - low)
                }
                FillValue::Normal {
                    mean,
                    std,
                    seed,
                    step,
                } => {
                    let z = rng_normal(b, &n, FillSpec::RNG, seed, step, i.clone());
                    n.lit(mean) + z * n.lit(std)
                }
            };
            b.store(out_mem, i, n.narrow(value, out.dtype));
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Output(0)],
    }))
}

/// `pcg_hash(x)` in IR, exactly [`crate::rng::pcg_hash`].
pub(crate) fn pcg_hash(b: &mut Body, x: E) -> E {
    let s = b.let_("s", x * 747_796_405u32 + 2_891_336_453u32);
    let shift = (s.clone() >> 28u32) + 4u32;
    let w = b.let_("w", ((s.clone() >> shift) ^ s) * 277_803_737u32);
    (w.clone() >> 22u32) ^ w
}

/// The 32 random bits of counter `i` (see [`crate::rng::bits`]).
pub(crate) fn rng_bits(b: &mut Body, scheme: RngScheme, seed: u64, step: u64, i: E) -> E {
    match scheme {
        RngScheme::Counter => {
            let h = pcg_hash(b, i);
            pcg_hash(b, h ^ stream_key(seed, step))
        }
        RngScheme::Rumus => pcg_hash(b, i ^ (step as u32)),
    }
}

/// A uniform f32 in `[0, 1)` from 24 random bits.
fn rng_uniform(b: &mut Body, scheme: RngScheme, seed: u64, step: u64, i: E) -> E {
    let bits = rng_bits(b, scheme, seed, step, i);
    (bits >> 8u32).cast(ScalarType::F32) * (1.0f32 / 16_777_216.0)
}

/// A standard normal number in `n`'s type by Box-Muller on counters `2i` and `2i + 1`.
fn rng_normal(b: &mut Body, n: &Num, scheme: RngScheme, seed: u64, step: u64, i: E) -> E {
    let i2 = b.let_("i2", i * 2u32);
    let b1 = rng_bits(b, scheme, seed, step, i2.clone());
    let u1 = b.let_(
        "u1",
        ((b1 >> 8u32) + 1u32).cast(n.ty) * n.lit(1.0 / 16_777_216.0),
    );
    let u2 = rng_uniform(b, scheme, seed, step, i2 + 1u32).cast(n.ty);
    (n.lit(-2.0) * u1.log()).sqrt() * (u2 * n.lit(std::f64::consts::TAU)).cos()
}

/// Whether dropout keeps counter `i`: `(bits >> 8) >= ceil(p * 2^24)`.
pub(crate) fn rng_keep(b: &mut Body, scheme: RngScheme, seed: u64, step: u64, p: f64, i: E) -> E {
    let bits = rng_bits(b, scheme, seed, step, i);
    (bits >> 8u32).ge(dropout_threshold(p))
}
