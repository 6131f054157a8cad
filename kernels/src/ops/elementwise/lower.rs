//! Lowering of the elementwise family: every op is one broadcasting map kernel
//! ([`crate::lower::map`]) whose body is the op's formula in the compute type.

use super::spec::*;
use crate::lower::map::{arg, first_output, inputs_of, map_op, map_plan};
use crate::lower::math::{bind, compute_type, for_storage, Num};
use crate::lower::rng::{rng_normal, rng_uniform};
use crate::lower::schedule::plan_1d;
use crate::lower::{Binding, Launch, LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::Access;

pub(super) fn unary(spec: &UnarySpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Unary(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v, p| unary_value(b, n, spec.func, arg(v, 0, n), p),
    )
}

pub(super) fn activation_backward(
    spec: &ActivationBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::ActivationBackward(spec.clone());
    map_op(op, caps, compute_type(spec.dtype), |b, n, v, p| {
        activation_backward_value(b, n, spec.func, arg(v, 0, n), arg(v, 1, n), p)
    })
}

/// `f(a, b)` in the compute type.
pub(super) fn binary_value(b: &mut Body, n: &Num, func: BinaryFn, x: E, y: E) -> E {
    let is_int = n.ty.is_int();
    match func {
        BinaryFn::Add => x + y,
        BinaryFn::Sub => x - y,
        BinaryFn::Mul => x * y,
        // Integer division and remainder by zero give 0 (no target traps on it then).
        BinaryFn::Div | BinaryFn::Mod | BinaryFn::FloorMod if is_int => {
            let y = bind(b, "divisor", y);
            let zero = y.clone().eq(n.lit(0.0));
            let safe = bind(b, "safe", zero.clone().select(n.lit(1.0), y));
            let q = match func {
                BinaryFn::Div => x / safe,
                BinaryFn::FloorMod => floor_mod(b, n, x % safe.clone(), safe),
                _ => x % safe,
            };
            zero.select(n.lit(0.0), q)
        }
        BinaryFn::Div => x / y,
        BinaryFn::Mod => x % y,
        BinaryFn::FloorMod => {
            let y = bind(b, "divisor", y);
            floor_mod(b, n, x % y.clone(), y)
        }
        BinaryFn::Pow => x.pow(y),
        BinaryFn::Max => x.max(y),
        BinaryFn::Min => x.min(y),
        BinaryFn::MaxNan | BinaryFn::MinNan if !is_int => {
            let (x, y) = (bind(b, "a", x), bind(b, "b", y));
            let best = match func {
                BinaryFn::MaxNan => x.clone().max(y.clone()),
                _ => x.clone().min(y.clone()),
            };
            // A NaN operand is the result (`v ≠ v` only for NaN).
            let nan_x = x.clone().ne(x.clone());
            let nan_y = y.clone().ne(y.clone());
            nan_x.select(x, nan_y.select(y, best))
        }
        BinaryFn::MaxNan => x.max(y),
        BinaryFn::MinNan => x.min(y),
        BinaryFn::Eq => n.indicator(x.eq(y)),
        BinaryFn::Ne => n.indicator(x.ne(y)),
        BinaryFn::Lt => n.indicator(x.lt(y)),
        BinaryFn::Le => n.indicator(x.le(y)),
        BinaryFn::Gt => n.indicator(x.gt(y)),
        BinaryFn::Ge => n.indicator(x.ge(y)),
        BinaryFn::SiluMul => {
            let x = bind(b, "gate", x);
            x.clone() * n.sigmoid(x) * y
        }
    }
}

/// The remainder `r` (truncated, the dividend's sign) moved to the divisor `d`'s sign:
/// `r + d` where `r ≠ 0` and the signs differ (a NaN `r` stays NaN).
fn floor_mod(b: &mut Body, n: &Num, r: E, d: E) -> E {
    let r = bind(b, "rem", r);
    let zero = n.lit(0.0);
    let differ = r.clone().lt(zero.clone()).ne(d.clone().lt(zero.clone()));
    let moves = r.clone().ne(zero) & differ;
    moves.select(r.clone() + d, r)
}

pub(super) fn binary(spec: &BinarySpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Binary(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v, _| binary_value(b, n, spec.func, arg(v, 0, n), arg(v, 1, n)),
    )
}

pub(super) fn scalar(spec: &ScalarSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    map_op(
        OpSpec::Scalar(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |b, n, v, p| {
            let (x, s) = (arg(v, 0, n), n.splat(arg(p, 0, n)));
            if spec.reversed {
                binary_value(b, n, spec.func, s, x)
            } else {
                binary_value(b, n, spec.func, x, s)
            }
        },
    )
}

pub(super) fn where_(spec: &WhereSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let cond_ty = compute_type(spec.cond_dtype);
    map_op(
        OpSpec::Where(spec.clone()),
        caps,
        compute_type(spec.dtype),
        |_, n, v, _| {
            let zero = Num {
                ty: cond_ty,
                lanes: n.lanes,
            }
            .lit(0.0);
            arg(v, 0, n).ne(zero).select(arg(v, 1, n), arg(v, 2, n))
        },
    )
}

pub(super) fn cast(spec: &CastSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Cast(spec.clone());
    let out = first_output(op.outputs())?;
    // Convert straight from the stored type: no detour through f32 for f16 -> f64 etc.
    let mut operands = inputs_of(op.inputs());
    for o in &mut operands {
        o.sig.dtype = spec.from;
    }
    let none = Uniforms::new(&[]);
    map_plan(
        &op.name(),
        caps,
        &out,
        &operands,
        spec.to.value_type(),
        (&none, &[]),
        |_, n, v, _| {
            let x = arg(&v, 0, n);
            for_storage(x, compute_type(spec.from), spec.to)
        },
    )
}

/// Fills: a constant, or counter-based uniform / normal numbers (see [`crate::rng`]),
/// every attribute a uniform parameter.
pub(super) fn fill(spec: &FillSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Fill(spec.clone());
    let out = first_output(op.outputs())?;
    let num_ty = compute_type(spec.dtype);
    let numel = out.numel() as u64;
    let grid = plan_1d(numel, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let out_mem = k.buffer(out.name.clone(), out.dtype, numel, Access::Write);
    let uniforms = op.uniforms();
    let names: Vec<&str> = uniforms.iter().map(|u| u.name.as_str()).collect();
    let (p, param_bindings) = Uniforms::new(&uniforms).declare_all(&mut k, &names)?;
    let n = Num::scalar(num_ty);
    let kernel = k.build(|b| {
        grid.for_each_item(b, |b, i| {
            let p = |k: usize| arg(&p, k, &n);
            // The stream index, wrapping at 2^32 as the reference's does.
            let at = match spec.offset as u32 {
                0 => i.clone(),
                offset => i.clone() + offset,
            };
            let value = match spec.value {
                FillValue::Constant { .. } => p(0),
                FillValue::Uniform { .. } => {
                    let u = rng_uniform(b, FillSpec::RNG, p(2), at).cast(num_ty);
                    p(0) + u * p(1)
                }
                FillValue::Normal { .. } => {
                    let z = rng_normal(b, &n, FillSpec::RNG, p(2), at);
                    p(0) + z * p(1)
                }
            };
            b.store(out_mem, i, n.narrow(value, out.dtype));
        });
    })?;
    let mut bindings = vec![Binding::Output(0)];
    bindings.extend(param_bindings);
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}

/// The tanh-GELU inner argument `√(2/π)(x + 0.044715x³)`.
fn gelu_tanh_arg(n: &Num, x: &E) -> E {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    n.lit(k) * (x + n.lit(0.044715) * x * x * x)
}

/// `act(x)` for an op that applies an activation to a value it computed (GEMM's
/// epilogue): leaky ReLU's slope is a constant of the kernel there.
pub(crate) fn activation_value(f: &mut Body, n: &Num, act: Activation, x: E) -> E {
    let slope = match act {
        Activation::LeakyRelu { slope } => vec![lit(n.ty, slope)],
        Activation::Relu
        | Activation::Sigmoid
        | Activation::Tanh
        | Activation::GeluErf
        | Activation::GeluTanh
        | Activation::Silu => Vec::new(),
    };
    unary_value(f, n, act.forward(), x, &slope)
}

/// `f(x)` for a unary function, with the function's uniform parameter (leaky ReLU's
/// slope) in `params`. Subexpressions used twice are bound to locals.
pub(super) fn unary_value(f: &mut Body, n: &Num, func: UnaryFn, x: E, params: &[E]) -> E {
    let x = bind(f, "x", x);
    match func {
        UnaryFn::Neg => -x,
        UnaryFn::Abs => x.abs(),
        UnaryFn::Sqrt => x.sqrt(),
        UnaryFn::Rsqrt => x.rsqrt(),
        UnaryFn::Exp => x.exp(),
        UnaryFn::Log => x.log(),
        UnaryFn::Sin => x.sin(),
        UnaryFn::Cos => x.cos(),
        UnaryFn::Tan => x.clone().sin() / x.cos(),
        UnaryFn::Floor => x.floor(),
        UnaryFn::Ceil => x.ceil(),
        UnaryFn::Round => x.round(),
        // NaN stays NaN: only a number greater than zero passes through.
        UnaryFn::Relu => x.clone().lt(n.lit(0.0)).select(n.lit(0.0), x),
        UnaryFn::LeakyRelu { .. } => {
            let slope = n.splat(arg(params, 0, n));
            x.clone().gt(n.lit(0.0)).select(x.clone(), slope * x)
        }
        UnaryFn::Sigmoid => n.sigmoid(x),
        UnaryFn::Tanh => x.tanh(),
        UnaryFn::GeluErf => x.clone() * n.normal_cdf(x),
        UnaryFn::GeluTanh => {
            let t = f.let_("t", gelu_tanh_arg(n, &x).tanh());
            n.lit(0.5) * x * (n.lit(1.0) + t)
        }
        UnaryFn::Silu => x.clone() * n.sigmoid(x),
    }
}

/// `dx = f'(·) dy` for an activation, from its saved tensor (`x` or `y`), with the
/// activation's uniform parameter in `params`.
fn activation_backward_value(
    f: &mut Body,
    n: &Num,
    func: Activation,
    saved: E,
    dy: E,
    params: &[E],
) -> E {
    let saved = bind(f, "saved", saved);
    let one = || n.lit(1.0);
    let grad = match func {
        Activation::Relu => n.indicator(saved.gt(n.lit(0.0))),
        Activation::LeakyRelu { .. } => {
            let slope = n.splat(arg(params, 0, n));
            saved.gt(n.lit(0.0)).select(one(), slope)
        }
        // Saved output y: σ' = y(1 - y), tanh' = 1 - y².
        Activation::Sigmoid => saved.clone() * (one() - saved),
        // (1 − y)(1 + y): 1 − y is exact for y near ±1, where 1 − y² loses its digits.
        Activation::Tanh => (one() - saved.clone()) * (one() + saved),
        Activation::GeluErf => {
            let pdf = (n.lit(-0.5) * &saved * &saved).exp()
                * n.lit(1.0 / (2.0 * std::f64::consts::PI).sqrt());
            n.normal_cdf(saved.clone()) + saved * pdf
        }
        Activation::GeluTanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let t = f.let_("t", gelu_tanh_arg(n, &saved).tanh());
            let du = n.lit(k) * (one() + n.lit(3.0 * 0.044715) * &saved * &saved);
            n.lit(0.5) * (one() + &t) + n.lit(0.5) * saved * (one() - &t * &t) * du
        }
        Activation::Silu => {
            let s = f.let_("s", n.sigmoid(saved.clone()));
            s.clone() * (one() + saved * (one() - s))
        }
    };
    grad * dy
}
