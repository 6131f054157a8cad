//! Per-lane operators on CLIF scalars, with the IR's exact semantics.
//!
//! * Integer arithmetic wraps. Division and remainder by zero raise
//!   [`status::DIVISION_BY_ZERO`](crate::cpu::status::DIVISION_BY_ZERO) and yield 0;
//!   the divisor is replaced before the machine instruction, so nothing traps
//!   (`MIN / -1` is computed as `-MIN`, which wraps to `MIN`, and `MIN % -1` as 0).
//! * A shift by the bit width or more raises
//!   [`status::SHIFT_OVERFLOW`](crate::cpu::status::SHIFT_OVERFLOW); the amount is
//!   masked to the width.
//! * f16/bf16 compute in f32 and round back after each operation (see `half`).
//! * Float `min`/`max` are built from compares and selects (Cranelift's `fmin`
//!   propagates NaN; the IR wants minNum/maxNum).

use super::Lower;
use crate::cpu::helpers::{HelperId, UnaryFn};
use crate::cpu::repr::scalar_clif;
use crate::cpu::status;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_module::Module;
use kernelc_ir::{BinaryOp, CmpOp, MathFn, ScalarType, UnaryOp};

use super::expr::{float_cc, int_cc};

impl<M: Module> Lower<'_, '_, M> {
    /// A float in the type arithmetic is done in: f16/bf16 widen to f32.
    pub(crate) fn widen_float(&mut self, s: ScalarType, v: Value) -> Value {
        match s {
            ScalarType::F16 => self.f16_to_f32(v),
            ScalarType::Bf16 => self.bf16_to_f32(v),
            _ => v,
        }
    }

    /// A compute-type result rounded back to `s` (f32 -> f16/bf16).
    pub(crate) fn narrow_float(&mut self, s: ScalarType, v: Value) -> Value {
        match s {
            ScalarType::F16 => self.f32_to_f16(v),
            ScalarType::Bf16 => self.f32_to_bf16(v),
            _ => v,
        }
    }

    /// `f` on the compute-type values of float lanes, rounded back to `s`.
    fn float_op(
        &mut self,
        s: ScalarType,
        args: &[Value],
        f: impl FnOnce(&mut Self, &[Value]) -> Result<Value, CodegenError>,
    ) -> Result<Value, CodegenError> {
        let wide: Vec<Value> = args.iter().map(|&a| self.widen_float(s, a)).collect();
        let r = f(self, &wide)?;
        Ok(self.narrow_float(s, r))
    }

    pub(crate) fn scalar_unary(
        &mut self,
        op: UnaryOp,
        s: ScalarType,
        x: Value,
    ) -> Result<Value, CodegenError> {
        Ok(match op {
            UnaryOp::Not if s == ScalarType::Bool => self.b.ins().bxor_imm_u(x, 1),
            UnaryOp::Not => self.b.ins().bnot(x),
            UnaryOp::Neg if s.is_float() => {
                return self.float_op(s, &[x], |l, v| Ok(l.b.ins().fneg(v[0])))
            }
            UnaryOp::Neg => self.b.ins().ineg(x),
        })
    }

    pub(crate) fn scalar_binary(
        &mut self,
        op: BinaryOp,
        s: ScalarType,
        x: Value,
        y: Value,
    ) -> Result<Value, CodegenError> {
        if s.is_float() {
            return self.float_op(s, &[x, y], |l, v| l.float_binary(op, v[0], v[1]));
        }
        let ins = self.b.ins();
        Ok(match op {
            BinaryOp::Add => ins.iadd(x, y),
            BinaryOp::Sub => ins.isub(x, y),
            BinaryOp::Mul => ins.imul(x, y),
            BinaryOp::And => ins.band(x, y),
            BinaryOp::Or => ins.bor(x, y),
            BinaryOp::Xor => ins.bxor(x, y),
            BinaryOp::Div | BinaryOp::Rem => self.int_div_rem(op == BinaryOp::Div, s, x, y),
            BinaryOp::Shl | BinaryOp::Shr => self.shift(op == BinaryOp::Shl, s, x, y),
        })
    }

    /// A binary operator on f32 or f64 values.
    fn float_binary(&mut self, op: BinaryOp, x: Value, y: Value) -> Result<Value, CodegenError> {
        let ins = self.b.ins();
        Ok(match op {
            BinaryOp::Add => ins.fadd(x, y),
            BinaryOp::Sub => ins.fsub(x, y),
            BinaryOp::Mul => ins.fmul(x, y),
            BinaryOp::Div => ins.fdiv(x, y),
            BinaryOp::Rem => {
                let id = if self.b.func.dfg.value_type(x) == types::F64 {
                    HelperId::Fmod64
                } else {
                    HelperId::Fmod32
                };
                return self.call_helper(id, &[x, y]);
            }
            other => {
                return Err(super::internal(format!(
                    "float operands for `{}`",
                    other.symbol()
                )))
            }
        })
    }

    /// Integer `/` or `%` that never traps (see the module documentation).
    fn int_div_rem(&mut self, div: bool, s: ScalarType, x: Value, y: Value) -> Value {
        let ty = scalar_clif(s);
        let zero = self.iconst(ty, 0);
        let one = self.iconst(ty, 1);
        let is_zero = self.b.ins().icmp(IntCC::Equal, y, zero);
        self.raise_if(is_zero, status::DIVISION_BY_ZERO);
        if !s.is_signed_int() {
            let safe = self.b.ins().select(is_zero, one, y);
            return if div {
                let q = self.b.ins().udiv(x, safe);
                self.b.ins().select(is_zero, zero, q)
            } else {
                // x % 1 == 0 when y was 0.
                self.b.ins().urem(x, safe)
            };
        }
        let minus_one = self.iconst(ty, u64::MAX);
        let is_m1 = self.b.ins().icmp(IntCC::Equal, y, minus_one);
        let bad = self.b.ins().bor(is_zero, is_m1);
        let safe = self.b.ins().select(bad, one, y);
        if div {
            let q = self.b.ins().sdiv(x, safe);
            let neg = self.b.ins().ineg(x);
            let q = self.b.ins().select(is_m1, neg, q);
            self.b.ins().select(is_zero, zero, q)
        } else {
            let r = self.b.ins().srem(x, safe);
            self.b.ins().select(is_m1, zero, r)
        }
    }

    /// `<<` or `>>` (arithmetic for signed, logical for unsigned) by a u32 amount.
    fn shift(&mut self, left: bool, s: ScalarType, x: Value, amount: Value) -> Value {
        let bits = scalar_clif(s).bits() as u64;
        let limit = self.iconst(types::I32, bits);
        let over = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, amount, limit);
        self.raise_if(over, status::SHIFT_OVERFLOW);
        let masked = self.b.ins().band_imm_u(amount, (bits - 1) as i64);
        if left {
            self.b.ins().ishl(x, masked)
        } else if s.is_signed_int() {
            self.b.ins().sshr(x, masked)
        } else {
            self.b.ins().ushr(x, masked)
        }
    }

    /// A comparison of two lanes; a bool (`i8` 0/1).
    pub(crate) fn scalar_compare(&mut self, op: CmpOp, s: ScalarType, x: Value, y: Value) -> Value {
        if s.is_float() {
            let x = self.widen_float(s, x);
            let y = self.widen_float(s, y);
            self.b.ins().fcmp(float_cc(op), x, y)
        } else {
            self.b.ins().icmp(int_cc(op, s), x, y)
        }
    }

    /// IEEE minNum/maxNum as the interpreter (Rust's `f32::min`) computes it: a NaN
    /// operand yields the other; equal operands (e.g. -0 and +0) yield the first.
    fn float_minmax(&mut self, is_min: bool, x: Value, y: Value) -> Value {
        let cc = if is_min {
            FloatCC::LessThan
        } else {
            FloatCC::GreaterThan
        };
        let better = self.b.ins().fcmp(cc, y, x);
        let t = self.b.ins().select(better, y, x);
        let x_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.b.ins().select(x_nan, y, t)
    }

    /// A math function on one lane of each argument.
    pub(crate) fn scalar_math(
        &mut self,
        func: MathFn,
        s: ScalarType,
        args: &[Value],
    ) -> Result<Value, CodegenError> {
        let arg = |i: usize| {
            args.get(i)
                .copied()
                .ok_or_else(|| super::internal(format!("`{}` lacks argument {i}", func.name())))
        };
        let x = arg(0)?;
        if !s.is_float() {
            return self.int_math(func, s, x, args);
        }
        if func == MathFn::Fma && matches!(s, ScalarType::F16 | ScalarType::Bf16) {
            return self.narrow_fma(s, args);
        }
        self.float_op(s, args, |l, v| l.float_math(func, v))
    }

    fn int_math(
        &mut self,
        func: MathFn,
        s: ScalarType,
        x: Value,
        args: &[Value],
    ) -> Result<Value, CodegenError> {
        let y = args.get(1).copied();
        let unsigned = s == ScalarType::U32;
        Ok(match (func, y) {
            (MathFn::Abs, _) if unsigned => x,
            (MathFn::Abs, _) => self.b.ins().iabs(x),
            (MathFn::Min, Some(y)) if unsigned => self.b.ins().umin(x, y),
            (MathFn::Max, Some(y)) if unsigned => self.b.ins().umax(x, y),
            (MathFn::Min, Some(y)) => self.b.ins().smin(x, y),
            (MathFn::Max, Some(y)) => self.b.ins().smax(x, y),
            _ => return Err(super::internal(format!("`{}` on integers", func.name()))),
        })
    }

    /// A math function on f32 or f64 values.
    fn float_math(&mut self, func: MathFn, v: &[Value]) -> Result<Value, CodegenError> {
        let x = v[0];
        let is64 = self.b.func.dfg.value_type(x) == types::F64;
        let unary = |f| {
            if is64 {
                HelperId::Unary64(f)
            } else {
                HelperId::Unary32(f)
            }
        };
        let second = || {
            v.get(1)
                .copied()
                .ok_or_else(|| super::internal(format!("`{}` lacks an argument", func.name())))
        };
        Ok(match func {
            MathFn::Exp => return self.call_helper(unary(UnaryFn::Exp), &[x]),
            MathFn::Exp2 => return self.call_helper(unary(UnaryFn::Exp2), &[x]),
            MathFn::Log => return self.call_helper(unary(UnaryFn::Log), &[x]),
            MathFn::Log2 => return self.call_helper(unary(UnaryFn::Log2), &[x]),
            MathFn::Tanh => return self.call_helper(unary(UnaryFn::Tanh), &[x]),
            MathFn::Erf => return self.call_helper(unary(UnaryFn::Erf), &[x]),
            MathFn::Sin => return self.call_helper(unary(UnaryFn::Sin), &[x]),
            MathFn::Cos => return self.call_helper(unary(UnaryFn::Cos), &[x]),
            MathFn::Pow => {
                let id = if is64 {
                    HelperId::Pow64
                } else {
                    HelperId::Pow32
                };
                let y = second()?;
                return self.call_helper(id, &[x, y]);
            }
            MathFn::Sqrt => self.b.ins().sqrt(x),
            MathFn::Rsqrt => self.rsqrt(x, is64),
            MathFn::Floor => self.b.ins().floor(x),
            MathFn::Ceil => self.b.ins().ceil(x),
            MathFn::Round => self.b.ins().nearest(x),
            MathFn::Abs => self.b.ins().fabs(x),
            MathFn::Min => self.float_minmax(true, x, second()?),
            MathFn::Max => self.float_minmax(false, x, second()?),
            MathFn::Fma => {
                let z = v
                    .get(2)
                    .copied()
                    .ok_or_else(|| super::internal("`fma` lacks an argument"))?;
                self.b.ins().fma(x, second()?, z)
            }
        })
    }

    /// `1 / sqrt(x)`, for f32 evaluated in f64 and rounded once (as the interpreter).
    fn rsqrt(&mut self, x: Value, is64: bool) -> Value {
        let wide = if is64 {
            x
        } else {
            self.b.ins().fpromote(types::F64, x)
        };
        let one = self.b.ins().f64const(1.0);
        let root = self.b.ins().sqrt(wide);
        let r = self.b.ins().fdiv(one, root);
        if is64 {
            r
        } else {
            self.b.ins().fdemote(types::F32, r)
        }
    }

    /// `fma` for f16/bf16, as the interpreter: exact product and sum in f64 (rounded
    /// once to f64), then rounded to the narrow type.
    fn narrow_fma(&mut self, s: ScalarType, args: &[Value]) -> Result<Value, CodegenError> {
        if args.len() != 3 {
            return Err(super::internal("`fma` without three arguments"));
        }
        let mut wide = [args[0]; 3];
        for (w, &a) in wide.iter_mut().zip(args) {
            let f = self.widen_float(s, a);
            *w = self.b.ins().fpromote(types::F64, f);
        }
        let r = self.b.ins().fma(wide[0], wide[1], wide[2]);
        self.f64_to_narrow(s, r)
    }
}
