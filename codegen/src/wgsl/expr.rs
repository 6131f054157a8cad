//! IR expressions -> naga expressions (and the statements some of them need: status
//! updates).

use super::lower::{internal, Lower, Val};
use super::types;
use crate::CodegenError;
use kernelc_ir::eval::Value;
use kernelc_ir::{BinaryOp, CmpOp, Expr, MathFn, Scalar, ScalarType, Type, UnaryOp};
use naga::{BinaryOperator as Bo, Expression, Handle, MathFunction, ScalarKind, UnaryOperator};

type H = Handle<Expression>;

/// The value of an expression of literals, computed with the IR's meaning (integers
/// wrap); `None` for one that reads anything else, or faults (a shift by the width
/// or more, an integer division by zero). Math functions are left to the target.
fn constant(e: &Expr) -> Option<Value> {
    use kernelc_ir::eval;
    match e {
        Expr::Lit(s) => Some(Value::scalar(*s)),
        Expr::Splat { lanes, arg } => constant(arg).map(|v| eval::splat(*lanes, v)),
        Expr::Unary { op, arg } => eval::unary(*op, constant(arg)?).ok(),
        Expr::Binary { op, lhs, rhs } => eval::binary(*op, constant(lhs)?, constant(rhs)?).ok(),
        Expr::Cmp { op, lhs, rhs } => eval::cmp(*op, constant(lhs)?, constant(rhs)?).ok(),
        Expr::Select {
            cond,
            on_true,
            on_false,
        } => eval::select(constant(cond)?, constant(on_true)?, constant(on_false)?).ok(),
        Expr::Cast { to, arg } => Some(eval::cast(*to, constant(arg)?)),
        Expr::Bitcast { to, arg } => eval::bitcast(*to, constant(arg)?).ok(),
        Expr::Extract { arg, lane } => eval::extract(constant(arg)?, *lane).ok(),
        Expr::Vector(items) => {
            let lanes = items
                .iter()
                .map(|i| constant(i).and_then(|v| v.lanes().first().copied()))
                .collect::<Option<Vec<Scalar>>>()?;
            Some(Value::from_lanes(&lanes))
        }
        Expr::Local(_)
        | Expr::Param(_)
        | Expr::Builtin { .. }
        | Expr::Load { .. }
        | Expr::Math { .. } => None,
    }
}

/// Whether `e` is made of literals only: an expression WGSL evaluates when the shader
/// is created (and refuses if it overflows or faults).
fn literal_tree(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::Splat { arg, .. }
        | Expr::Unary { arg, .. }
        | Expr::Cast { arg, .. }
        | Expr::Bitcast { arg, .. }
        | Expr::Extract { arg, .. } => literal_tree(arg),
        Expr::Binary { lhs, rhs, .. } | Expr::Cmp { lhs, rhs, .. } => {
            literal_tree(lhs) && literal_tree(rhs)
        }
        Expr::Select {
            cond,
            on_true,
            on_false,
        } => literal_tree(cond) && literal_tree(on_true) && literal_tree(on_false),
        Expr::Vector(items) => items.iter().all(literal_tree),
        Expr::Math { args, .. } => args.iter().all(literal_tree),
        Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } | Expr::Load { .. } => false,
    }
}

impl Lower<'_> {
    /// `e` as a naga expression. An operation on literals is computed here, with the
    /// IR's meaning: WGSL evaluates such an expression when the shader is created and
    /// refuses one that overflows (`2147483647i + 1i`, `65535u << 27u`), where the IR
    /// wraps. One that faults is computed at run time instead (its status bit raised
    /// there, as for any operands).
    pub(super) fn expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        if !matches!(e, Expr::Lit(_)) {
            if let Some(v) = constant(e) {
                return self.constant_value(v);
            }
        }
        match e {
            Expr::Lit(s) => Ok(Val {
                h: self.lit(*s)?,
                ty: Type::scalar(s.ty()),
            }),
            Expr::Local(id) => {
                let (pointer, ty) = self.local_ptr(*id)?;
                let h = self.e(Expression::Load { pointer });
                Ok(Val { h, ty })
            }
            Expr::Param(p) => self.scalar_param(*p),
            Expr::Builtin { builtin, axis } => self.builtin(*builtin, *axis),
            Expr::Load { mem, index, lanes } => {
                let i = self.expr(index)?;
                self.load(*mem, i, index, *lanes)
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                Ok(Val {
                    h: self.unary_op(*op, a),
                    ty: a.ty,
                })
            }
            Expr::Binary { op, lhs, rhs } => {
                let mut a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                if literal_tree(lhs) && literal_tree(rhs) {
                    // Faults (not computed above): keep WGSL from evaluating it.
                    a = self.opaque(a)?;
                }
                Ok(Val {
                    h: self.binary_op(*op, a, b)?,
                    ty: a.ty,
                })
            }
            Expr::Cmp { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                Ok(Val {
                    h: self.compare(*op, a, b),
                    ty: a.ty.with_scalar(ScalarType::Bool),
                })
            }
            Expr::Math { func, args } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.expr(a)?);
                }
                if let (true, Some(first)) = (args.iter().all(literal_tree), vals.first_mut()) {
                    // WGSL evaluates a call on constants when the shader is created and
                    // refuses one outside the function's domain (`sqrt(-1.0)`); the IR
                    // means the run-time value (NaN): keep it from evaluating.
                    *first = self.opaque(*first)?;
                }
                let ty = vals
                    .first()
                    .map(|v| v.ty)
                    .ok_or_else(|| internal(format!("`{}` without arguments", func.name())))?;
                Ok(Val {
                    h: self.math_fn(*func, &vals)?,
                    ty,
                })
            }
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => {
                let c = self.expr(cond)?;
                let t = self.expr(on_true)?;
                let f = self.expr(on_false)?;
                Ok(Val {
                    h: self.select(c.h, t.h, f.h),
                    ty: t.ty,
                })
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                Ok(Val {
                    h: self.cast(*to, a)?,
                    ty: a.ty.with_scalar(*to),
                })
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                Ok(Val {
                    h: self.bitcast_value(*to, a)?,
                    ty: a.ty.with_scalar(*to),
                })
            }
            Expr::Vector(items) => {
                let mut components = Vec::with_capacity(items.len());
                let mut scalar = ScalarType::Bool;
                for item in items {
                    let v = self.expr(item)?;
                    scalar = v.ty.scalar;
                    components.push(v.h);
                }
                let ty = Type::vector(scalar, items.len() as u8);
                let naga_ty = types::value_type(&mut self.module.types, ty)?;
                let h = self.e(Expression::Compose {
                    ty: naga_ty,
                    components,
                });
                Ok(Val { h, ty })
            }
            Expr::Splat { lanes, arg } => {
                let a = self.expr(arg)?;
                Ok(Val {
                    h: self.splat(a.h, *lanes)?,
                    ty: Type::vector(a.ty.scalar, *lanes),
                })
            }
            Expr::Extract { arg, lane } => {
                let a = self.expr(arg)?;
                let h = self.e(Expression::AccessIndex {
                    base: a.h,
                    index: *lane as u32,
                });
                Ok(Val {
                    h,
                    ty: Type::scalar(a.ty.scalar),
                })
            }
        }
    }

    fn unary_op(&mut self, op: UnaryOp, a: Val) -> H {
        let naga_op = match op {
            // Exact for floats (the result is representable); wrapping for integers.
            UnaryOp::Neg => UnaryOperator::Negate,
            UnaryOp::Not if a.ty.scalar == ScalarType::Bool => UnaryOperator::LogicalNot,
            UnaryOp::Not => UnaryOperator::BitwiseNot,
        };
        self.unary(naga_op, a.h)
    }

    /// `v` as literals (a vector composed of them).
    fn constant_value(&mut self, v: Value) -> Result<Val, CodegenError> {
        let ty = v.ty();
        let first = v.lanes()[0];
        if v.lanes().iter().all(|s| s.to_bits() == first.to_bits()) {
            let lit = self.lit(first)?;
            let h = if ty.lanes == 1 {
                lit
            } else {
                self.splat(lit, ty.lanes)?
            };
            return Ok(Val { h, ty });
        }
        let mut lanes = Vec::with_capacity(v.lane_count() as usize);
        for &s in v.lanes() {
            lanes.push(self.lit(s)?);
        }
        let h = {
            let vec_ty = types::value_type(&mut self.module.types, ty)?;
            self.e(Expression::Compose {
                ty: vec_ty,
                components: lanes,
            })
        };
        Ok(Val { h, ty })
    }

    /// `v` through a function variable: the same value, which WGSL no longer treats
    /// as a constant expression (drivers still fold it, with run-time semantics).
    fn opaque(&mut self, v: Val) -> Result<Val, CodegenError> {
        let ty = types::value_type(&mut self.module.types, v.ty)?;
        let pointer = self.f.local("opaque", ty);
        self.f.stmt(naga::Statement::Store {
            pointer,
            value: v.h,
        });
        let h = self.e(Expression::Load { pointer });
        Ok(Val { h, ty: v.ty })
    }

    fn binary_op(&mut self, op: BinaryOp, a: Val, b: Val) -> Result<H, CodegenError> {
        let s = a.ty.scalar;
        if s.is_float() {
            return self.float_binary(op, a, b);
        }
        if s == ScalarType::Bool {
            let naga_op = match op {
                // Both sides are already evaluated: no short circuit to lose.
                BinaryOp::And => Bo::And,
                BinaryOp::Or => Bo::InclusiveOr,
                BinaryOp::Xor => Bo::NotEqual,
                other => return Err(internal(format!("`{}` on bool", other.symbol()))),
            };
            return Ok(self.binary(naga_op, a.h, b.h));
        }
        let naga_op = match op {
            BinaryOp::Add => Bo::Add,
            BinaryOp::Sub => Bo::Subtract,
            BinaryOp::Mul => Bo::Multiply,
            BinaryOp::And => Bo::And,
            BinaryOp::Or => Bo::InclusiveOr,
            BinaryOp::Xor => Bo::ExclusiveOr,
            BinaryOp::Div | BinaryOp::Rem => return self.int_div_rem(op == BinaryOp::Div, a, b),
            BinaryOp::Shl | BinaryOp::Shr => return self.shift(op == BinaryOp::Shl, a, b),
        };
        Ok(self.binary(naga_op, a.h, b.h))
    }

    fn float_binary(&mut self, op: BinaryOp, a: Val, b: Val) -> Result<H, CodegenError> {
        let naga_op = match op {
            BinaryOp::Add => Bo::Add,
            BinaryOp::Sub => Bo::Subtract,
            BinaryOp::Mul => Bo::Multiply,
            BinaryOp::Div => Bo::Divide,
            BinaryOp::Rem => return Err(CodegenError::unexpanded_float_rem(super::TARGET)),
            other => return Err(internal(format!("`{}` on floats", other.symbol()))),
        };
        self.float_op(a.ty, &[a, b], |l, w| Ok(l.binary(naga_op, w[0], w[1])))
    }

    fn compare(&mut self, op: CmpOp, a: Val, b: Val) -> H {
        let naga_op = match op {
            CmpOp::Eq => Bo::Equal,
            // naga writes float `!=` as SPIR-V's ordered not-equal (false for NaN); the
            // IR's `!=` is true with a NaN operand, which `!(a == b)` is everywhere.
            CmpOp::Ne if a.ty.scalar.is_float() => {
                let eq = self.binary(Bo::Equal, a.h, b.h);
                return self.unary(UnaryOperator::LogicalNot, eq);
            }
            CmpOp::Ne => Bo::NotEqual,
            CmpOp::Lt => Bo::Less,
            CmpOp::Le => Bo::LessEqual,
            CmpOp::Gt => Bo::Greater,
            CmpOp::Ge => Bo::GreaterEqual,
        };
        // Exact in every type (f16/bf16 values are held as exact f32s).
        self.binary(naga_op, a.h, b.h)
    }

    fn math_fn(&mut self, func: MathFn, args: &[Val]) -> Result<H, CodegenError> {
        let x = *args
            .first()
            .ok_or_else(|| internal(format!("`{}` without arguments", func.name())))?;
        let arg = |i: usize| {
            args.get(i)
                .copied()
                .ok_or_else(|| internal(format!("`{}` lacks argument {i}", func.name())))
        };
        let s = x.ty.scalar;
        if !s.is_float() {
            return match func {
                MathFn::Abs if s == ScalarType::U32 => Ok(x.h),
                MathFn::Abs => self.int_abs(x),
                MathFn::Min => self.math(MathFunction::Min, &[x.h, arg(1)?.h]),
                MathFn::Max => self.math(MathFunction::Max, &[x.h, arg(1)?.h]),
                other => Err(internal(format!("`{}` on integers", other.name()))),
            };
        }
        let native = |fun: MathFunction| {
            move |l: &mut Self, w: &[H]| -> Result<H, CodegenError> { l.math(fun, w) }
        };
        match func {
            MathFn::Min | MathFn::Max => self.float_min_max(func == MathFn::Min, x, arg(1)?),
            // Exact, and representable in the operand type: no rounding.
            MathFn::Abs => self.math(MathFunction::Abs, &[x.h]),
            MathFn::Floor => self.math(MathFunction::Floor, &[x.h]),
            MathFn::Ceil => self.math(MathFunction::Ceil, &[x.h]),
            // WGSL's `round` rounds half to even.
            MathFn::Round => self.math(MathFunction::Round, &[x.h]),
            MathFn::Sqrt => self.float_op(x.ty, &[x], native(MathFunction::Sqrt)),
            MathFn::Rsqrt => self.float_op(x.ty, &[x], native(MathFunction::InverseSqrt)),
            MathFn::Fma => {
                let (b, c) = (arg(1)?, arg(2)?);
                self.float_op(x.ty, &[x, b, c], native(MathFunction::Fma))
            }
            other => Err(super::unsupported(format!(
                "the math function `{}` on {}",
                other.name(),
                x.ty
            ))),
        }
    }

    /// Value conversion with the IR's rounding and saturation (see `Expr::Cast`).
    fn cast(&mut self, to: ScalarType, a: Val) -> Result<H, CodegenError> {
        let from = a.ty.scalar;
        let to_ty = a.ty.with_scalar(to);
        if from == to {
            return Ok(a.h);
        }
        if to == ScalarType::Bool {
            let zero = self.konst_of(a.ty, 0.0)?;
            if from.is_float() {
                // `!(x == 0)`: true for NaN (see `compare`).
                let eq = self.binary(Bo::Equal, a.h, zero);
                return Ok(self.unary(UnaryOperator::LogicalNot, eq));
            }
            return Ok(self.binary(Bo::NotEqual, a.h, zero));
        }
        if from == ScalarType::Bool {
            let one = self.konst_of(to_ty, 1.0)?;
            let zero = self.konst_of(to_ty, 0.0)?;
            return Ok(self.select(a.h, one, zero));
        }
        match (from.is_float(), to) {
            // i32 <-> u32: the same bits.
            (false, ScalarType::I32) => Ok(self.bitcast(a.h, ScalarKind::Sint)),
            (false, ScalarType::U32) => Ok(self.bitcast(a.h, ScalarKind::Uint)),
            (true, ScalarType::I32 | ScalarType::U32) => self.float_to_int(a, to),
            // i32/u32 -> f32: WGSL's conversion (round to nearest even).
            (false, ScalarType::F32) => Ok(self.convert(a.h, ScalarKind::Float, 4)),
            // i32/u32 -> f16/bf16: rounded to odd in f32, then to the narrow type: one
            // correct rounding.
            (false, _) => {
                let odd = self.int_to_f32_odd(a)?;
                self.round_to(odd, to_ty)
            }
            // Float -> float: every source value is exact in f32; round once to `to`.
            (true, _) => self.round_to(a.h, to_ty),
        }
    }

    /// Reinterprets bits between types of one width: i32, u32, f32 with WGSL's
    /// `bitcast`; f16 <-> bf16 through their bits (both are held as f32).
    fn bitcast_value(&mut self, to: ScalarType, a: Val) -> Result<H, CodegenError> {
        if a.ty.scalar == to {
            return Ok(a.h);
        }
        let kind = match to {
            ScalarType::I32 => ScalarKind::Sint,
            ScalarType::U32 => ScalarKind::Uint,
            ScalarType::F32 => ScalarKind::Float,
            ScalarType::F16 | ScalarType::Bf16 => return self.bitcast_half(to, a),
            other => return Err(super::types::unsupported_type(other)),
        };
        Ok(self.bitcast(a.h, kind))
    }
}
