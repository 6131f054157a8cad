//! Per-lane operators with the IR's exact semantics.
//!
//! * Integer arithmetic wraps. Division and remainder by zero raise
//!   `DIVISION_BY_ZERO` and yield 0; the divisor is replaced before the division, so
//!   LLVM never sees a division with undefined behaviour (`MIN / -1` is computed as
//!   `-MIN`, which wraps to `MIN`, and `MIN % -1` as 0).
//! * A shift by the bit width or more raises `SHIFT_OVERFLOW`; the amount is masked
//!   to the width (LLVM's shifts by the width or more are poison).
//! * f16/bf16 compute in f32 (`fpext`) and round back (`fptrunc`) after each
//!   operation, as the interpreter.
//! * Float `min`/`max` are `llvm.minnum`/`llvm.maxnum` (IEEE minNum/maxNum: a NaN
//!   operand yields the other), `round` is `llvm.roundeven`, `sqrt` is `llvm.sqrt`
//!   (correctly rounded `sqrt.rn` without fast-math flags). Float `%` must arrive
//!   expanded into integer arithmetic (`MathExpansion::float_rem`): NVPTX's `frem`
//!   rounds.
//! * Transcendental functions have no native form that meets the IR's accuracy
//!   without libdevice: they are rejected as unsupported.

use super::value::{float, int};
use super::{Lower, OrInternal};
use crate::abi::status;
use crate::ptx::{internal, unsupported};
use crate::CodegenError;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use kernelc_ir::{BinaryOp, CmpOp, MathFn, ScalarType, UnaryOp};

impl<'ctx> Lower<'_, 'ctx> {
    /// A float in the type arithmetic is done in: f16/bf16 widen to f32.
    pub(super) fn widen_float(
        &self,
        s: ScalarType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let v = float(v)?;
        match s {
            ScalarType::F16 | ScalarType::Bf16 => self
                .b
                .build_float_ext(v, self.ctx.f32_type(), "")
                .or_internal(),
            _ => Ok(v),
        }
    }

    /// A compute-type result rounded back to `s` (f32 -> f16/bf16, to nearest even).
    pub(super) fn narrow_float(
        &self,
        s: ScalarType,
        v: FloatValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        match s {
            ScalarType::F16 | ScalarType::Bf16 => {
                Ok(self.round_float(v, self.float_type(s)?)?.into())
            }
            _ => Ok(v.into()),
        }
    }

    /// `f` on the compute-type values of float lanes, rounded back to `s`.
    fn float_op(
        &mut self,
        s: ScalarType,
        args: &[BasicValueEnum<'ctx>],
        f: impl FnOnce(&mut Self, &[FloatValue<'ctx>]) -> Result<FloatValue<'ctx>, CodegenError>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let mut wide = Vec::with_capacity(args.len());
        for &a in args {
            wide.push(self.widen_float(s, a)?);
        }
        let r = f(self, &wide)?;
        self.narrow_float(s, r)
    }

    pub(super) fn scalar_unary(
        &mut self,
        op: UnaryOp,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        match op {
            UnaryOp::Neg if s.is_float() => {
                self.float_op(s, &[x], |l, v| l.b.build_float_neg(v[0], "").or_internal())
            }
            UnaryOp::Neg => Ok(self.b.build_int_neg(int(x)?, "").or_internal()?.into()),
            // Bitwise not; on `i1` that is logical not.
            UnaryOp::Not => Ok(self.b.build_not(int(x)?, "").or_internal()?.into()),
        }
    }

    pub(super) fn scalar_binary(
        &mut self,
        op: BinaryOp,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if s.is_float() {
            return self.float_op(s, &[x, y], |l, v| l.float_binary(op, v[0], v[1]));
        }
        let (x, y) = (int(x)?, int(y)?);
        let b = &self.b;
        Ok(match op {
            BinaryOp::Add => b.build_int_add(x, y, "").or_internal()?,
            BinaryOp::Sub => b.build_int_sub(x, y, "").or_internal()?,
            BinaryOp::Mul => b.build_int_mul(x, y, "").or_internal()?,
            BinaryOp::And => b.build_and(x, y, "").or_internal()?,
            BinaryOp::Or => b.build_or(x, y, "").or_internal()?,
            BinaryOp::Xor => b.build_xor(x, y, "").or_internal()?,
            BinaryOp::Div | BinaryOp::Rem => self.int_div_rem(op == BinaryOp::Div, s, x, y)?,
            BinaryOp::Shl | BinaryOp::Shr => self.shift(op == BinaryOp::Shl, s, x, y)?,
        }
        .into())
    }

    /// A binary operator on f32 or f64 values.
    fn float_binary(
        &mut self,
        op: BinaryOp,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let b = &self.b;
        match op {
            BinaryOp::Add => b.build_float_add(x, y, "").or_internal(),
            BinaryOp::Sub => b.build_float_sub(x, y, "").or_internal(),
            BinaryOp::Mul => b.build_float_mul(x, y, "").or_internal(),
            BinaryOp::Div => b.build_float_div(x, y, "").or_internal(),
            BinaryOp::Rem => Err(CodegenError::unexpanded_float_rem(crate::ptx::TARGET)),
            other => Err(internal(format!("float operands for `{}`", other.symbol()))),
        }
    }

    /// Integer `/` or `%` that never divides by zero or overflows (see the module
    /// documentation).
    fn int_div_rem(
        &mut self,
        div: bool,
        s: ScalarType,
        x: IntValue<'ctx>,
        y: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let ty = x.get_type();
        let zero = ty.const_zero();
        let one = ty.const_int(1, false);
        let b = &self.b;
        let is_zero = b
            .build_int_compare(IntPredicate::EQ, y, zero, "")
            .or_internal()?;
        self.raise_if(is_zero, status::DIVISION_BY_ZERO)?;
        // A known condition (a literal divisor) picks its side without a `select`.
        let select = |c: IntValue<'ctx>, t: IntValue<'ctx>, f: IntValue<'ctx>| match c
            .get_zero_extended_constant()
        {
            Some(0) => Ok(f),
            Some(_) => Ok(t),
            None => b.build_select(c, t, f, "").or_internal().and_then(int),
        };
        if !s.is_signed_int() {
            let safe = select(is_zero, one, y)?;
            return if div {
                let q = b.build_int_unsigned_div(x, safe, "").or_internal()?;
                select(is_zero, zero, q)
            } else {
                // x % 1 == 0 when y was 0.
                b.build_int_unsigned_rem(x, safe, "").or_internal()
            };
        }
        let minus_one = ty.const_all_ones();
        let is_m1 = b
            .build_int_compare(IntPredicate::EQ, y, minus_one, "")
            .or_internal()?;
        let bad = b.build_or(is_zero, is_m1, "").or_internal()?;
        let safe = select(bad, one, y)?;
        if div {
            let q = b.build_int_signed_div(x, safe, "").or_internal()?;
            let neg = b.build_int_neg(x, "").or_internal()?;
            let q = select(is_m1, neg, q)?;
            select(is_zero, zero, q)
        } else {
            let r = b.build_int_signed_rem(x, safe, "").or_internal()?;
            select(is_m1, zero, r)
        }
    }

    /// `<<` or `>>` (arithmetic for signed, logical for unsigned) by a u32 amount.
    fn shift(
        &mut self,
        left: bool,
        s: ScalarType,
        x: IntValue<'ctx>,
        amount: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let bits = x.get_type().get_bit_width() as u64;
        let i32t = self.ctx.i32_type();
        let over = self
            .b
            .build_int_compare(IntPredicate::UGE, amount, i32t.const_int(bits, false), "")
            .or_internal()?;
        self.raise_if(over, status::SHIFT_OVERFLOW)?;
        let masked = self
            .b
            .build_and(amount, i32t.const_int(bits - 1, false), "")
            .or_internal()?;
        let masked = if bits > 32 {
            self.b
                .build_int_z_extend(masked, x.get_type(), "")
                .or_internal()?
        } else {
            masked
        };
        if left {
            self.b.build_left_shift(x, masked, "").or_internal()
        } else {
            self.b
                .build_right_shift(x, masked, s.is_signed_int(), "")
                .or_internal()
        }
    }

    /// A comparison of two lanes: an `i1`. Floats are ordered except `!=` (true with
    /// NaN); integers signed for i32/i64, unsigned for u32 and bool.
    pub(super) fn scalar_compare(
        &mut self,
        op: CmpOp,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if s.is_float() {
            let x = self.widen_float(s, x)?;
            let y = self.widen_float(s, y)?;
            let pred = match op {
                CmpOp::Eq => FloatPredicate::OEQ,
                CmpOp::Ne => FloatPredicate::UNE,
                CmpOp::Lt => FloatPredicate::OLT,
                CmpOp::Le => FloatPredicate::OLE,
                CmpOp::Gt => FloatPredicate::OGT,
                CmpOp::Ge => FloatPredicate::OGE,
            };
            return Ok(self
                .b
                .build_float_compare(pred, x, y, "")
                .or_internal()?
                .into());
        }
        let signed = s.is_signed_int();
        let pred = match op {
            CmpOp::Eq => IntPredicate::EQ,
            CmpOp::Ne => IntPredicate::NE,
            CmpOp::Lt if signed => IntPredicate::SLT,
            CmpOp::Le if signed => IntPredicate::SLE,
            CmpOp::Gt if signed => IntPredicate::SGT,
            CmpOp::Ge if signed => IntPredicate::SGE,
            CmpOp::Lt => IntPredicate::ULT,
            CmpOp::Le => IntPredicate::ULE,
            CmpOp::Gt => IntPredicate::UGT,
            CmpOp::Ge => IntPredicate::UGE,
        };
        Ok(self
            .b
            .build_int_compare(pred, int(x)?, int(y)?, "")
            .or_internal()?
            .into())
    }

    /// A math function on one lane of each argument.
    pub(super) fn scalar_math(
        &mut self,
        func: MathFn,
        s: ScalarType,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        if args.len() != func.arity() {
            return Err(internal(format!(
                "`{}` with {} arguments",
                func.name(),
                args.len()
            )));
        }
        if !s.is_float() {
            return self.int_math(func, s, args);
        }
        // What the flavor's required expansion expands is what NVPTX has no accurate
        // native instruction for (without libdevice), nor the CPU form.
        if self.flavor.required_expansion().expands_call(func, s) {
            return Err(unsupported(format!(
                "{s} {} (no libdevice); expand it first with kernelc_ir::passes::for_target \
                 and kernelc_codegen::ptx::required_expansion() (every transcendental: \
                 MathExpansion::all_transcendental_with_f64)",
                func.name()
            )));
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
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let x = args[0];
        let ty = x.get_type();
        let unsigned = s == ScalarType::U32;
        let name = match func {
            MathFn::Abs if unsigned => return Ok(x),
            MathFn::Abs => {
                // Wrapping: abs(MIN) = MIN (the flag says MIN is not poison).
                let no_poison = self.ctx.bool_type().const_zero();
                return self.call_intrinsic("llvm.abs", &[ty], &[x, no_poison.into()]);
            }
            MathFn::Min if unsigned => "llvm.umin",
            MathFn::Max if unsigned => "llvm.umax",
            MathFn::Min => "llvm.smin",
            MathFn::Max => "llvm.smax",
            other => return Err(internal(format!("`{}` on integers", other.name()))),
        };
        self.call_intrinsic(name, &[ty], &[x, args[1]])
    }

    /// IEEE minNum/maxNum as the interpreter (Rust's `f32::min`) and the Cranelift
    /// tier compute it: a NaN `x` yields `y`, otherwise `y` where it is strictly
    /// better, else `x` (equal operands, `-0` and `+0`, yield the first). `llvm.minnum`
    /// leaves the zero open, and LLVM swaps its operands at will.
    fn cpu_minmax(
        &self,
        is_min: bool,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let b = &self.b;
        let better = if is_min {
            FloatPredicate::OLT
        } else {
            FloatPredicate::OGT
        };
        let y_better = b.build_float_compare(better, y, x, "").or_internal()?;
        let t = b.build_select(y_better, y, x, "").or_internal()?;
        let x_nan = b
            .build_float_compare(FloatPredicate::UNO, x, x, "")
            .or_internal()?;
        float(b.build_select(x_nan, y.into(), t, "").or_internal()?)
    }

    /// A non-transcendental math function on f32 or f64 values.
    pub(super) fn float_math(
        &mut self,
        func: MathFn,
        v: &[FloatValue<'ctx>],
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let x = v[0];
        let ty = x.get_type();
        let unary =
            |l: &Self, name: &str| float(l.call_intrinsic(name, &[ty.into()], &[x.into()])?);
        match func {
            MathFn::Sqrt => unary(self, "llvm.sqrt"),
            MathFn::Rsqrt => self.rsqrt(x),
            MathFn::Floor => unary(self, "llvm.floor"),
            MathFn::Ceil => unary(self, "llvm.ceil"),
            MathFn::Round => unary(self, "llvm.roundeven"),
            MathFn::Abs => unary(self, "llvm.fabs"),
            // Left unexpanded for the GPU only (`required_expansion`): CUDA's `exp2f`.
            MathFn::Exp2 if self.flavor == super::Flavor::Ptx => {
                unary(self, "llvm.nvvm.ex2.approx")
            }
            MathFn::Min | MathFn::Max if self.flavor == super::Flavor::Cpu => {
                self.cpu_minmax(func == MathFn::Min, x, v[1])
            }
            MathFn::Min | MathFn::Max => {
                let name = if func == MathFn::Min {
                    "llvm.minnum"
                } else {
                    "llvm.maxnum"
                };
                float(self.call_intrinsic(name, &[ty.into()], &[x.into(), v[1].into()])?)
            }
            MathFn::Fma => float(self.call_intrinsic(
                "llvm.fma",
                &[ty.into()],
                &[x.into(), v[1].into(), v[2].into()],
            )?),
            other => Err(internal(format!("`{}` reached float_math", other.name()))),
        }
    }

    /// `1 / sqrt(x)`; for f32 evaluated in f64 and rounded once (as the interpreter).
    fn rsqrt(&mut self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let f64t = self.ctx.f64_type();
        let is64 = x.get_type() == f64t;
        let wide = if is64 {
            x
        } else {
            self.b.build_float_ext(x, f64t, "").or_internal()?
        };
        let root = float(self.call_intrinsic("llvm.sqrt", &[f64t.into()], &[wide.into()])?)?;
        let r = self
            .b
            .build_float_div(f64t.const_float(1.0), root, "")
            .or_internal()?;
        if is64 {
            Ok(r)
        } else {
            self.round_float(r, x.get_type())
        }
    }

    /// `fma` for f16/bf16, as the interpreter: exact product and sum in f64 (rounded
    /// once to f64), then rounded once to the narrow type.
    fn narrow_fma(
        &mut self,
        s: ScalarType,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let f64t = self.ctx.f64_type();
        let mut wide = Vec::with_capacity(3);
        for &a in args {
            let f = self.widen_float(s, a)?;
            wide.push(self.b.build_float_ext(f, f64t, "").or_internal()?.into());
        }
        let r = float(self.call_intrinsic("llvm.fma", &[f64t.into()], &wide)?)?;
        Ok(self.round_float(r, self.float_type(s)?)?.into())
    }
}
