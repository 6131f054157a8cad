//! The meaning of every IR operator on values.
//!
//! The interpreter and constant folding both call these functions, so a folded
//! constant is bit-for-bit what the interpreter would have computed. Arithmetic is done
//! in the operands' own type: f32 math in f32 (math functions are evaluated in f64 and
//! rounded once, a tighter reference than any target), f16/bf16 by widening to f32 and
//! rounding each result back (exact for + - * / sqrt, since f32 has more than twice
//! their precision).

use crate::kernel::{BinaryOp, CmpOp, MathFn, UnaryOp};
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use half::{bf16, f16};
use thiserror::Error;

/// A scalar or a vector of 2 or 4 lanes of one scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    lanes: u8,
    data: [Scalar; 4],
}

impl Value {
    pub fn scalar(s: Scalar) -> Value {
        Value {
            lanes: 1,
            data: [s; 4],
        }
    }

    /// A vector from 1, 2 or 4 scalars of one type (not checked here: the validator
    /// guarantees it for IR values).
    pub fn from_lanes(lanes: &[Scalar]) -> Value {
        let mut data = [lanes[0]; 4];
        data[..lanes.len()].copy_from_slice(lanes);
        Value {
            lanes: lanes.len() as u8,
            data,
        }
    }

    pub fn lanes(&self) -> &[Scalar] {
        &self.data[..self.lanes as usize]
    }

    pub fn lane_count(&self) -> u8 {
        self.lanes
    }

    pub fn ty(&self) -> Type {
        Type::vector(self.data[0].ty(), self.lanes)
    }

    /// The scalar, if this is one.
    pub fn as_scalar(&self) -> Option<Scalar> {
        (self.lanes == 1).then_some(self.data[0])
    }

    #[inline]
    fn map(
        self,
        mut f: impl FnMut(Scalar) -> Result<Scalar, EvalError>,
    ) -> Result<Value, EvalError> {
        let mut out = self;
        for lane in 0..self.lanes as usize {
            out.data[lane] = f(self.data[lane])?;
        }
        Ok(out)
    }

    #[inline]
    fn zip(
        self,
        other: Value,
        mut f: impl FnMut(Scalar, Scalar) -> Result<Scalar, EvalError>,
    ) -> Result<Value, EvalError> {
        if self.lanes != other.lanes {
            return Err(EvalError::TypeMismatch);
        }
        let mut out = self;
        for lane in 0..self.lanes as usize {
            out.data[lane] = f(self.data[lane], other.data[lane])?;
        }
        Ok(out)
    }
}

/// Why an operation has no defined result.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum EvalError {
    #[error("integer division by zero")]
    DivisionByZero,
    #[error("shift by {amount} of a {bits}-bit integer")]
    ShiftOverflow { amount: u32, bits: u32 },
    #[error("operand types do not fit the operator (the kernel was not validated)")]
    TypeMismatch,
}

/// Applies a float function in the operand's precision.
#[inline]
fn float_op1(
    s: Scalar,
    f32_op: impl Fn(f32) -> f32,
    f64_op: impl Fn(f64) -> f64,
) -> Result<Scalar, EvalError> {
    Ok(match s {
        Scalar::F16(b) => Scalar::f16(f16::from_f32(f32_op(f16::from_bits(b).to_f32()))),
        Scalar::Bf16(b) => Scalar::bf16(bf16::from_f32(f32_op(bf16::from_bits(b).to_f32()))),
        Scalar::F32(b) => Scalar::f32(f32_op(f32::from_bits(b))),
        Scalar::F64(b) => Scalar::f64(f64_op(f64::from_bits(b))),
        _ => return Err(EvalError::TypeMismatch),
    })
}

#[inline]
fn float_op2(
    a: Scalar,
    b: Scalar,
    f32_op: impl Fn(f32, f32) -> f32,
    f64_op: impl Fn(f64, f64) -> f64,
) -> Result<Scalar, EvalError> {
    let as_f32 = |s: Scalar| match s {
        Scalar::F16(b) => Some(f16::from_bits(b).to_f32()),
        Scalar::Bf16(b) => Some(bf16::from_bits(b).to_f32()),
        Scalar::F32(b) => Some(f32::from_bits(b)),
        _ => None,
    };
    Ok(match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => {
            Scalar::f64(f64_op(f64::from_bits(x), f64::from_bits(y)))
        }
        _ if a.ty() == b.ty() => {
            let (x, y) = as_f32(a).zip(as_f32(b)).ok_or(EvalError::TypeMismatch)?;
            round_to(a.ty(), f32_op(x, y))
        }
        _ => return Err(EvalError::TypeMismatch),
    })
}

/// Rounds an f32 result to a float type no wider than f32.
fn round_to(ty: ScalarType, v: f32) -> Scalar {
    match ty {
        ScalarType::F16 => Scalar::f16(f16::from_f32(v)),
        ScalarType::Bf16 => Scalar::bf16(bf16::from_f32(v)),
        _ => Scalar::f32(v),
    }
}

/// An f32 function evaluated in f64 and rounded once.
fn via_f64(f: fn(f64) -> f64) -> impl Fn(f32) -> f32 {
    move |x| f(x as f64) as f32
}

#[inline]
pub fn unary(op: UnaryOp, v: Value) -> Result<Value, EvalError> {
    v.map(|s| match (op, s) {
        (UnaryOp::Neg, Scalar::I32(x)) => Ok(Scalar::I32(x.wrapping_neg())),
        (UnaryOp::Neg, Scalar::I64(x)) => Ok(Scalar::I64(x.wrapping_neg())),
        (UnaryOp::Neg, _) => float_op1(s, |x| -x, |x| -x),
        (UnaryOp::Not, Scalar::Bool(b)) => Ok(Scalar::Bool(!b)),
        (UnaryOp::Not, Scalar::I32(x)) => Ok(Scalar::I32(!x)),
        (UnaryOp::Not, Scalar::U32(x)) => Ok(Scalar::U32(!x)),
        (UnaryOp::Not, Scalar::I64(x)) => Ok(Scalar::I64(!x)),
        _ => Err(EvalError::TypeMismatch),
    })
}

fn shift_amount(amount: Scalar, bits: u32) -> Result<u32, EvalError> {
    match amount {
        Scalar::U32(a) if a < bits => Ok(a),
        Scalar::U32(a) => Err(EvalError::ShiftOverflow { amount: a, bits }),
        _ => Err(EvalError::TypeMismatch),
    }
}

macro_rules! int_binary {
    ($op:expr, $x:expr, $y:expr, $ctor:path, $bits:expr) => {{
        let (x, y) = ($x, $y);
        match $op {
            BinaryOp::Add => Ok($ctor(x.wrapping_add(y))),
            BinaryOp::Sub => Ok($ctor(x.wrapping_sub(y))),
            BinaryOp::Mul => Ok($ctor(x.wrapping_mul(y))),
            BinaryOp::Div if y == 0 => Err(EvalError::DivisionByZero),
            BinaryOp::Div => Ok($ctor(x.wrapping_div(y))),
            BinaryOp::Rem if y == 0 => Err(EvalError::DivisionByZero),
            BinaryOp::Rem => Ok($ctor(x.wrapping_rem(y))),
            BinaryOp::And => Ok($ctor(x & y)),
            BinaryOp::Or => Ok($ctor(x | y)),
            BinaryOp::Xor => Ok($ctor(x ^ y)),
            BinaryOp::Shl | BinaryOp::Shr => Err(EvalError::TypeMismatch),
        }
    }};
}

macro_rules! int_shift {
    ($op:expr, $x:expr, $amount:expr, $ctor:path, $bits:expr) => {{
        let a = shift_amount($amount, $bits)?;
        match $op {
            BinaryOp::Shl => Ok($ctor($x << a)),
            _ => Ok($ctor($x >> a)),
        }
    }};
}

#[inline]
fn binary_scalar(op: BinaryOp, a: Scalar, b: Scalar) -> Result<Scalar, EvalError> {
    use Scalar as S;
    if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        return match a {
            S::I32(x) => int_shift!(op, x, b, S::I32, 32),
            S::U32(x) => int_shift!(op, x, b, S::U32, 32),
            S::I64(x) => int_shift!(op, x, b, S::I64, 64),
            _ => Err(EvalError::TypeMismatch),
        };
    }
    match (a, b) {
        (S::I32(x), S::I32(y)) => int_binary!(op, x, y, S::I32, 32),
        (S::U32(x), S::U32(y)) => int_binary!(op, x, y, S::U32, 32),
        (S::I64(x), S::I64(y)) => int_binary!(op, x, y, S::I64, 64),
        (S::Bool(x), S::Bool(y)) => match op {
            BinaryOp::And => Ok(S::Bool(x & y)),
            BinaryOp::Or => Ok(S::Bool(x | y)),
            BinaryOp::Xor => Ok(S::Bool(x ^ y)),
            _ => Err(EvalError::TypeMismatch),
        },
        _ => match op {
            BinaryOp::Add => float_op2(a, b, |x, y| x + y, |x, y| x + y),
            BinaryOp::Sub => float_op2(a, b, |x, y| x - y, |x, y| x - y),
            BinaryOp::Mul => float_op2(a, b, |x, y| x * y, |x, y| x * y),
            BinaryOp::Div => float_op2(a, b, |x, y| x / y, |x, y| x / y),
            // f16/bf16 remainders are exact in f32 (fmod is exact), then exactly representable.
            BinaryOp::Rem => float_op2(a, b, |x, y| x % y, |x, y| x % y),
            _ => Err(EvalError::TypeMismatch),
        },
    }
}

#[inline]
pub fn binary(op: BinaryOp, a: Value, b: Value) -> Result<Value, EvalError> {
    a.zip(b, |x, y| binary_scalar(op, x, y))
}

#[inline]
fn cmp_scalar(op: CmpOp, a: Scalar, b: Scalar) -> Result<Scalar, EvalError> {
    use std::cmp::Ordering;
    if a.ty() != b.ty() {
        return Err(EvalError::TypeMismatch);
    }
    // Integers compare exactly; floats through f64 (exact for every float type),
    // where any comparison with NaN is false except `!=`.
    let ord: Option<Ordering> = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.to_f64().partial_cmp(&b.to_f64()),
    };
    let r = match op {
        CmpOp::Eq => ord == Some(Ordering::Equal),
        CmpOp::Ne => ord != Some(Ordering::Equal),
        CmpOp::Lt => ord == Some(Ordering::Less),
        CmpOp::Le => matches!(ord, Some(Ordering::Less | Ordering::Equal)),
        CmpOp::Gt => ord == Some(Ordering::Greater),
        CmpOp::Ge => matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
    };
    Ok(Scalar::Bool(r))
}

#[inline]
pub fn cmp(op: CmpOp, a: Value, b: Value) -> Result<Value, EvalError> {
    a.zip(b, |x, y| cmp_scalar(op, x, y))
}

fn rsqrt64(x: f64) -> f64 {
    1.0 / x.sqrt()
}

fn math_scalar(func: MathFn, args: &[Scalar]) -> Result<Scalar, EvalError> {
    use Scalar as S;
    let x = *args.first().ok_or(EvalError::TypeMismatch)?;
    let arg = |i: usize| args.get(i).copied().ok_or(EvalError::TypeMismatch);
    match func {
        MathFn::Abs => match x {
            S::I32(v) => Ok(S::I32(v.wrapping_abs())),
            S::U32(v) => Ok(S::U32(v)),
            S::I64(v) => Ok(S::I64(v.wrapping_abs())),
            _ => float_op1(x, f32::abs, f64::abs),
        },
        MathFn::Min | MathFn::Max => {
            let y = arg(1)?;
            let is_min = func == MathFn::Min;
            match (x, y) {
                (S::I32(a), S::I32(b)) => Ok(S::I32(if is_min { a.min(b) } else { a.max(b) })),
                (S::U32(a), S::U32(b)) => Ok(S::U32(if is_min { a.min(b) } else { a.max(b) })),
                (S::I64(a), S::I64(b)) => Ok(S::I64(if is_min { a.min(b) } else { a.max(b) })),
                _ if is_min => float_op2(x, y, f32::min, f64::min),
                _ => float_op2(x, y, f32::max, f64::max),
            }
        }
        MathFn::Pow => float_op2(
            x,
            arg(1)?,
            |a, b| (a as f64).powf(b as f64) as f32,
            f64::powf,
        ),
        MathFn::Fma => {
            let (b, c) = (arg(1)?, arg(2)?);
            if x.ty() != b.ty() || x.ty() != c.ty() {
                return Err(EvalError::TypeMismatch);
            }
            match (x, b, c) {
                (S::F64(a), S::F64(b), S::F64(c)) => Ok(S::f64(
                    f64::from_bits(a).mul_add(f64::from_bits(b), f64::from_bits(c)),
                )),
                (S::F32(a), S::F32(b), S::F32(c)) => Ok(S::f32(
                    f32::from_bits(a).mul_add(f32::from_bits(b), f32::from_bits(c)),
                )),
                // f16/bf16: the product is exact in f64 and the sum is rounded once to
                // f64 before the final rounding; close enough for a storage type.
                _ => Ok(Scalar::from_f64(
                    x.ty(),
                    x.to_f64().mul_add(b.to_f64(), c.to_f64()),
                )),
            }
        }
        MathFn::Exp => float_op1(x, via_f64(f64::exp), f64::exp),
        MathFn::Exp2 => float_op1(x, via_f64(f64::exp2), f64::exp2),
        MathFn::Log => float_op1(x, via_f64(f64::ln), f64::ln),
        MathFn::Log2 => float_op1(x, via_f64(f64::log2), f64::log2),
        MathFn::Sqrt => float_op1(x, f32::sqrt, f64::sqrt),
        MathFn::Rsqrt => float_op1(x, via_f64(rsqrt64), rsqrt64),
        MathFn::Tanh => float_op1(x, via_f64(f64::tanh), f64::tanh),
        MathFn::Erf => float_op1(x, via_f64(libm::erf), libm::erf),
        MathFn::Sin => float_op1(x, via_f64(f64::sin), f64::sin),
        MathFn::Cos => float_op1(x, via_f64(f64::cos), f64::cos),
        MathFn::Floor => float_op1(x, f32::floor, f64::floor),
        MathFn::Ceil => float_op1(x, f32::ceil, f64::ceil),
        MathFn::Round => float_op1(x, f32::round_ties_even, f64::round_ties_even),
    }
}

#[inline]
pub fn math(func: MathFn, args: &[Value]) -> Result<Value, EvalError> {
    let first = args.first().ok_or(EvalError::TypeMismatch)?;
    if args.len() != func.arity() || args.iter().any(|a| a.ty() != first.ty()) {
        return Err(EvalError::TypeMismatch);
    }
    let mut out = *first;
    let mut lane_args = [first.data[0]; 3];
    for lane in 0..first.lanes as usize {
        for (i, a) in args.iter().enumerate() {
            lane_args[i] = a.data[lane];
        }
        out.data[lane] = math_scalar(func, &lane_args[..args.len()])?;
    }
    Ok(out)
}

/// Value conversion (see `Expr::Cast`).
pub fn cast_scalar(to: ScalarType, s: Scalar) -> Scalar {
    use Scalar as S;
    match (s, to) {
        (_, _) if s.ty() == to => s,
        (_, ScalarType::Bool) => S::Bool(match s.as_i64() {
            Some(v) => v != 0,
            None => s.to_f64() != 0.0,
        }),
        // Exact integer routes (f64 would lose i64 precision).
        (S::I64(v), ScalarType::I32) => S::I32(v as i32),
        (S::I64(v), ScalarType::U32) => S::U32(v as u32),
        (S::I64(v), ScalarType::F32) => S::f32(v as f32),
        (S::I32(v), ScalarType::U32) => S::U32(v as u32),
        (S::U32(v), ScalarType::I32) => S::I32(v as i32),
        (S::F32(b), ScalarType::I64) => S::I64(f32::from_bits(b) as i64),
        (S::F32(b), ScalarType::Bf16) => S::bf16(bf16::from_f32(f32::from_bits(b))),
        (S::F32(b), ScalarType::F16) => S::f16(f16::from_f32(f32::from_bits(b))),
        // Not an IR cast (no value has a narrow type): the value a store of an
        // integer leaves in a narrow element, for host-side helpers.
        (_, to) if to.is_storage_only() => match s.as_i64() {
            Some(v) => Scalar::int_wrapping(to, v).unwrap_or(s),
            None => Scalar::from_f64(to, s.to_f64()),
        },
        // Every other source is exact in f64, and from_f64 rounds once.
        _ => Scalar::from_f64(to, s.to_f64()),
    }
}

#[inline]
pub fn cast(to: ScalarType, v: Value) -> Value {
    let mut out = v;
    for lane in 0..v.lanes as usize {
        out.data[lane] = cast_scalar(to, v.data[lane]);
    }
    out
}

/// Reinterprets bits; `None` when the widths differ or bool is involved.
pub fn bitcast_scalar(to: ScalarType, s: Scalar) -> Option<Scalar> {
    use Scalar as S;
    let bits: u64 = match s {
        S::Bool(_) => return None,
        S::I32(v) => v as u32 as u64,
        S::U32(v) => v as u64,
        S::I64(v) => v as u64,
        S::F16(b) | S::Bf16(b) => b as u64,
        S::F32(b) => b as u64,
        S::F64(b) => b,
    };
    if to == ScalarType::Bool || to.is_storage_only() || to.size_bytes() != s.ty().size_bytes() {
        return None;
    }
    Some(match to {
        ScalarType::I32 => S::I32(bits as u32 as i32),
        ScalarType::U32 => S::U32(bits as u32),
        ScalarType::I64 => S::I64(bits as i64),
        ScalarType::F16 => S::F16(bits as u16),
        ScalarType::Bf16 => S::Bf16(bits as u16),
        ScalarType::F32 => S::F32(bits as u32),
        ScalarType::F64 => S::F64(bits),
        ScalarType::Bool | ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
            return None
        }
    })
}

pub fn bitcast(to: ScalarType, v: Value) -> Result<Value, EvalError> {
    v.map(|s| bitcast_scalar(to, s).ok_or(EvalError::TypeMismatch))
}

/// `cond ? a : b`, lane-wise when `cond` is a vector.
#[inline]
pub fn select(cond: Value, a: Value, b: Value) -> Result<Value, EvalError> {
    if a.ty() != b.ty() {
        return Err(EvalError::TypeMismatch);
    }
    let mut out = a;
    for lane in 0..a.lanes as usize {
        let c = if cond.lanes == 1 {
            cond.data[0]
        } else {
            cond.data[lane]
        };
        let c = c.as_bool().ok_or(EvalError::TypeMismatch)?;
        out.data[lane] = if c { a.data[lane] } else { b.data[lane] };
    }
    Ok(out)
}

pub fn splat(lanes: u8, v: Value) -> Value {
    Value {
        lanes,
        data: [v.data[0]; 4],
    }
}

pub fn extract(v: Value, lane: u8) -> Result<Value, EvalError> {
    if lane >= v.lanes {
        return Err(EvalError::TypeMismatch);
    }
    Ok(Value::scalar(v.data[lane as usize]))
}
