//! Unary, binary and comparison operators and math functions, lane-wise on scalars
//! and vectors. f16 results are rounded back to the f16 grid after each operation.

use super::emitter::{Emitter, Glsl, Val, R};
use super::{internal, unsupported};
use crate::abi::status;
use crate::CodegenError;
use kernelc_ir::{BinaryOp, CmpOp, MathFn, Scalar, ScalarType, Type, UnaryOp};
use rspirv::spirv::{Op, Word};

impl Emitter<'_> {
    /// An f32 result of an f16 (bf16) operation, rounded to f16 (bf16); other results
    /// unchanged.
    fn finish_float(&mut self, ty: Type, id: Word) -> R<Word> {
        match ty.scalar {
            ScalarType::F16 => self.round_to_f16(id, ty.lanes),
            ScalarType::Bf16 => self.round_to_bf16(id, ty.lanes),
            _ => Ok(id),
        }
    }

    fn bool_like(&mut self, ty: Type) -> R<Word> {
        self.reg_type(ty.with_scalar(ScalarType::Bool))
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, a: Val) -> R<Val> {
        let reg = self.reg_type(a.ty)?;
        let s = a.ty.scalar;
        let id = match (op, s) {
            // Negation is exact: an f16 value stays on the grid.
            (UnaryOp::Neg, _) if s.is_float() => self.float_op(Op::FNegate, reg, &[a.id])?,
            (UnaryOp::Neg, _) if s.is_int() => self.ins(Op::SNegate, reg, &[a.id])?,
            (UnaryOp::Not, ScalarType::Bool) => self.ins(Op::LogicalNot, reg, &[a.id])?,
            (UnaryOp::Not, _) if s.is_int() => self.ins(Op::Not, reg, &[a.id])?,
            _ => return Err(internal(format!("{op:?} on {}", a.ty))),
        };
        Ok(Val { id, ty: a.ty })
    }

    pub(crate) fn binary(&mut self, op: BinaryOp, a: Val, b: Val) -> R<Val> {
        let s = a.ty.scalar;
        let id = if s == ScalarType::Bool {
            self.bool_binary(op, a, b)?
        } else if s.is_float() {
            self.float_binary(op, a, b)?
        } else {
            self.int_binary(op, a, b)?
        };
        Ok(Val { id, ty: a.ty })
    }

    fn bool_binary(&mut self, op: BinaryOp, a: Val, b: Val) -> R<Word> {
        let reg = self.reg_type(a.ty)?;
        let spv = match op {
            BinaryOp::And => return self.and(reg, a.id, b.id),
            BinaryOp::Or => return self.or(reg, a.id, b.id),
            BinaryOp::Xor => Op::LogicalNotEqual,
            _ => return Err(internal(format!("{op:?} on bool"))),
        };
        self.ins(spv, reg, &[a.id, b.id])
    }

    fn float_binary(&mut self, op: BinaryOp, a: Val, b: Val) -> R<Word> {
        let reg = self.reg_type(a.ty)?;
        let spv = match op {
            BinaryOp::Add => Op::FAdd,
            BinaryOp::Sub => Op::FSub,
            BinaryOp::Mul => Op::FMul,
            BinaryOp::Div => Op::FDiv,
            BinaryOp::Rem => return Err(CodegenError::unexpanded_float_rem(super::TARGET)),
            _ => return Err(internal(format!("{op:?} on {}", a.ty))),
        };
        let r = self.float_op(spv, reg, &[a.id, b.id])?;
        self.finish_float(a.ty, r)
    }

    fn int_binary(&mut self, op: BinaryOp, a: Val, b: Val) -> R<Word> {
        let reg = self.reg_type(a.ty)?;
        let signed = a.ty.scalar.is_signed_int();
        let simple = match op {
            BinaryOp::Add => Some(Op::IAdd),
            BinaryOp::Sub => Some(Op::ISub),
            BinaryOp::Mul => Some(Op::IMul),
            BinaryOp::And => Some(Op::BitwiseAnd),
            BinaryOp::Or => Some(Op::BitwiseOr),
            BinaryOp::Xor => Some(Op::BitwiseXor),
            _ => None,
        };
        if let Some(spv) = simple {
            return self.ins(spv, reg, &[a.id, b.id]);
        }
        match op {
            BinaryOp::Div | BinaryOp::Rem => self.int_div(op == BinaryOp::Div, a, b),
            BinaryOp::Shl => self.shift(Op::ShiftLeftLogical, a, b),
            BinaryOp::Shr if signed => self.shift(Op::ShiftRightArithmetic, a, b),
            BinaryOp::Shr => self.shift(Op::ShiftRightLogical, a, b),
            _ => Err(internal(format!("{op:?} on {}", a.ty))),
        }
    }

    /// Guarded integer division or remainder (see the module documentation of
    /// [`super`]): divisor 0 -> result 0 and `DIVISION_BY_ZERO`; signed `MIN / -1`
    /// divides by 1 instead (`MIN`, remainder 0), as SPIR-V leaves it undefined.
    fn int_div(&mut self, is_div: bool, n: Val, d: Val) -> R<Word> {
        let ty = n.ty;
        let reg = self.reg_type(ty)?;
        let bools = self.bool_like(ty)?;
        let s = ty.scalar;
        let zero = self.zero(ty)?;
        let one = self.splat_const(Scalar::one(s), ty.lanes)?;
        let d_zero = self.ins(Op::IEqual, bools, &[d.id, zero])?;
        let any_zero = self.any(d_zero, ty.lanes)?;
        self.raise_if(any_zero, status::DIVISION_BY_ZERO)?;
        let mut safe_d = self.ins(Op::Select, reg, &[d_zero, one, d.id])?;
        if s.is_signed_int() {
            let (min, minus_one) = match s {
                ScalarType::I64 => (Scalar::I64(i64::MIN), Scalar::I64(-1)),
                _ => (Scalar::I32(i32::MIN), Scalar::I32(-1)),
            };
            let min = self.splat_const(min, ty.lanes)?;
            let minus_one = self.splat_const(minus_one, ty.lanes)?;
            let n_min = self.ins(Op::IEqual, bools, &[n.id, min])?;
            let d_m1 = self.ins(Op::IEqual, bools, &[d.id, minus_one])?;
            let overflow = self.and(bools, n_min, d_m1)?;
            safe_d = self.ins(Op::Select, reg, &[overflow, one, safe_d])?;
        }
        let q = match (is_div, s.is_signed_int()) {
            (true, true) => self.ins(Op::SDiv, reg, &[n.id, safe_d])?,
            (true, false) => self.ins(Op::UDiv, reg, &[n.id, safe_d])?,
            // `n - d * (n / d)`, the sign of the dividend as the IR wants. Not OpSRem:
            // NVIDIA's Vulkan driver gave `-7 % 3 = 2` with it (GLSL's `%` is undefined
            // for negative operands, and drivers carry that over).
            (false, true) => {
                let quotient = self.ins(Op::SDiv, reg, &[n.id, safe_d])?;
                let product = self.ins(Op::IMul, reg, &[quotient, safe_d])?;
                self.ins(Op::ISub, reg, &[n.id, product])?
            }
            (false, false) => self.ins(Op::UMod, reg, &[n.id, safe_d])?,
        };
        self.ins(Op::Select, reg, &[d_zero, zero, q])
    }

    /// A shift by a u32 amount: `amount >= width` shifts by `amount % width` and sets
    /// `SHIFT_OVERFLOW` (SPIR-V leaves such shifts undefined).
    fn shift(&mut self, spv: Op, base: Val, amount: Val) -> R<Word> {
        let reg = self.reg_type(base.ty)?;
        let lanes = amount.ty.lanes;
        let width = base.ty.scalar.bits();
        let bools = self.bool_like(amount.ty)?;
        let u = self.reg_type(amount.ty)?;
        let width_c = self.u32s(width, lanes)?;
        let over = self.ins(Op::UGreaterThanEqual, bools, &[amount.id, width_c])?;
        let any_over = self.any(over, lanes)?;
        self.raise_if(any_over, status::SHIFT_OVERFLOW)?;
        let mask = self.u32s(width - 1, lanes)?;
        let amt = self.ins(Op::BitwiseAnd, u, &[amount.id, mask])?;
        self.ins(spv, reg, &[base.id, amt])
    }

    pub(crate) fn compare(&mut self, op: CmpOp, a: Val, b: Val) -> R<Val> {
        let ty = a.ty.with_scalar(ScalarType::Bool);
        let reg = self.reg_type(ty)?;
        let s = a.ty.scalar;
        let signed = s.is_signed_int();
        let spv = if s == ScalarType::Bool {
            match op {
                CmpOp::Eq => Op::LogicalEqual,
                CmpOp::Ne => Op::LogicalNotEqual,
                _ => return Err(internal(format!("{op:?} on bool"))),
            }
        } else if s.is_float() {
            // Ordered comparisons: false with a NaN, except `!=` (unordered: true).
            match op {
                CmpOp::Eq => Op::FOrdEqual,
                CmpOp::Ne => Op::FUnordNotEqual,
                CmpOp::Lt => Op::FOrdLessThan,
                CmpOp::Le => Op::FOrdLessThanEqual,
                CmpOp::Gt => Op::FOrdGreaterThan,
                CmpOp::Ge => Op::FOrdGreaterThanEqual,
            }
        } else {
            match (op, signed) {
                (CmpOp::Eq, _) => Op::IEqual,
                (CmpOp::Ne, _) => Op::INotEqual,
                (CmpOp::Lt, true) => Op::SLessThan,
                (CmpOp::Le, true) => Op::SLessThanEqual,
                (CmpOp::Gt, true) => Op::SGreaterThan,
                (CmpOp::Ge, true) => Op::SGreaterThanEqual,
                (CmpOp::Lt, false) => Op::ULessThan,
                (CmpOp::Le, false) => Op::ULessThanEqual,
                (CmpOp::Gt, false) => Op::UGreaterThan,
                (CmpOp::Ge, false) => Op::UGreaterThanEqual,
            }
        };
        Ok(Val {
            id: self.ins(spv, reg, &[a.id, b.id])?,
            ty,
        })
    }

    pub(crate) fn math(&mut self, func: MathFn, args: &[Val]) -> R<Val> {
        let x = *args
            .first()
            .ok_or_else(|| internal(format!("{} without arguments", func.name())))?;
        let arg = |i: usize| {
            args.get(i)
                .copied()
                .ok_or_else(|| internal(format!("{} without argument {i}", func.name())))
        };
        let ty = x.ty;
        let reg = self.reg_type(ty)?;
        let s = ty.scalar;
        let id = match func {
            MathFn::Sqrt => self.float_call(Glsl::Sqrt, x)?,
            MathFn::Rsqrt => self.float_call(Glsl::InverseSqrt, x)?,
            // Exact: an f16 argument gives a result on the f16 grid.
            MathFn::Floor => self.glsl(Glsl::Floor, reg, &[x.id])?,
            MathFn::Ceil => self.glsl(Glsl::Ceil, reg, &[x.id])?,
            MathFn::Round => self.glsl(Glsl::RoundEven, reg, &[x.id])?,
            MathFn::Abs if s.is_float() => self.glsl(Glsl::FAbs, reg, &[x.id])?,
            MathFn::Abs if s.is_signed_int() => self.wrapping_abs(x)?,
            MathFn::Abs => x.id,
            MathFn::Min | MathFn::Max => {
                let y = arg(1)?;
                self.min_max(func == MathFn::Min, x, y)?
            }
            MathFn::Fma => {
                let (b, c) = (arg(1)?, arg(2)?);
                let r = self.glsl(Glsl::Fma, reg, &[x.id, b.id, c.id])?;
                self.finish_float(ty, r)?
            }
            MathFn::Exp
            | MathFn::Exp2
            | MathFn::Log
            | MathFn::Log2
            | MathFn::Tanh
            | MathFn::Erf
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Pow => {
                return Err(unsupported(format!(
                    "`{}` on {ty} (GLSL.std.450's version is not accurate enough for the \
                     tolerance table, and it has none for f64; expand it into IR first \
                     with kernelc_ir::passes::for_target and \
                     kernelc_codegen::spirv::required_expansion(f64))",
                    func.name()
                )))
            }
        };
        Ok(Val { id, ty })
    }

    /// A rounding GLSL float function, rounded back for f16.
    fn float_call(&mut self, f: Glsl, x: Val) -> R<Word> {
        let reg = self.reg_type(x.ty)?;
        let r = self.glsl(f, reg, &[x.id])?;
        self.finish_float(x.ty, r)
    }

    /// `x < 0 ? 0 - x : x` with wrapping negation (`abs(MIN) = MIN`).
    fn wrapping_abs(&mut self, x: Val) -> R<Word> {
        let reg = self.reg_type(x.ty)?;
        let bools = self.bool_like(x.ty)?;
        let zero = self.zero(x.ty)?;
        let neg = self.ins(Op::SLessThan, bools, &[x.id, zero])?;
        let negated = self.ins(Op::SNegate, reg, &[x.id])?;
        self.ins(Op::Select, reg, &[neg, negated, x.id])
    }

    /// Integer min/max through GLSL; float ones as IEEE minNum/maxNum:
    /// `(x < y || y != y) ? x : y` for min (a NaN operand yields the other, two NaNs
    /// a NaN). GLSL `FMin`/`FMax` are undefined for NaN operands.
    fn min_max(&mut self, is_min: bool, x: Val, y: Val) -> R<Word> {
        let reg = self.reg_type(x.ty)?;
        let s = x.ty.scalar;
        if s.is_int() {
            let f = match (is_min, s.is_signed_int()) {
                (true, true) => Glsl::SMin,
                (true, false) => Glsl::UMin,
                (false, true) => Glsl::SMax,
                (false, false) => Glsl::UMax,
            };
            return self.glsl(f, reg, &[x.id, y.id]);
        }
        let bools = self.bool_like(x.ty)?;
        let better = if is_min {
            Op::FOrdLessThan
        } else {
            Op::FOrdGreaterThan
        };
        let x_better = self.ins(better, bools, &[x.id, y.id])?;
        let y_nan = self.is_nan(bools, y.id)?;
        let take_x = self.or(bools, x_better, y_nan)?;
        self.ins(Op::Select, reg, &[take_x, x.id, y.id])
    }
}
