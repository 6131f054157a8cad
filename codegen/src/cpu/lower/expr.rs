//! Expressions: dispatch, and the operators that work on whole values (packed SIMD
//! where the type has a packed layout and Cranelift has the operation, lane-wise
//! otherwise).

use super::value::{Repr, Val};
use super::{internal, Lower};
use crate::cpu::repr::mask_of;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_module::Module;
use kernelc_ir::{BinaryOp, CmpOp, Expr, MathFn, Scalar, ScalarType, Type, UnaryOp};

/// Flags for bitcasts between vector types (lane order is the host's).
pub(crate) fn vector_bitcast_flags() -> MemFlagsData {
    let endianness = if cfg!(target_endian = "little") {
        cranelift_codegen::ir::Endianness::Little
    } else {
        cranelift_codegen::ir::Endianness::Big
    };
    MemFlagsData::new().with_endianness(endianness)
}

impl<M: Module> Lower<'_, '_, M> {
    pub(crate) fn expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        match e {
            Expr::Lit(s) => Ok(self.literal(*s)),
            Expr::Local(id) => self.read_local(*id),
            Expr::Param(p) => self
                .scalars
                .get(p.0 as usize)
                .cloned()
                .flatten()
                .ok_or_else(|| internal(format!("parameter #{} is not a scalar", p.0))),
            Expr::Builtin { builtin, axis } => {
                let v = self.builtin(*builtin, *axis)?;
                Ok(Val::scalar(ScalarType::U32, v))
            }
            Expr::Load { mem, index, lanes } => {
                let i = self.expr(index)?;
                let i = self.scalar_of(&i);
                self.load(*mem, i, index, *lanes)
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                self.unary(*op, &a)
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                if let Some(v) = self.shift_by_constant(*op, &a, rhs) {
                    return Ok(v);
                }
                let b = self.expr(rhs)?;
                self.binary(*op, &a, &b)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                self.compare(*op, &a, &b)
            }
            Expr::Math { func, args } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.expr(a)?);
                }
                self.math(*func, &vals)
            }
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => {
                let c = self.expr(cond)?;
                let t = self.expr(on_true)?;
                let f = self.expr(on_false)?;
                self.select(&c, &t, &f)
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                self.cast(*to, &a)
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                self.bitcast(*to, &a)
            }
            Expr::Vector(items) => {
                let mut lanes = Vec::with_capacity(items.len());
                let mut scalar = ScalarType::Bool;
                for item in items {
                    let v = self.expr(item)?;
                    scalar = v.ty.scalar;
                    lanes.push(self.scalar_of(&v));
                }
                Ok(Val::lanes(Type::vector(scalar, items.len() as u8), lanes))
            }
            Expr::Splat { lanes, arg } => {
                let a = self.expr(arg)?;
                Ok(self.splat(*lanes, &a))
            }
            Expr::Extract { arg, lane } => {
                let a = self.expr(arg)?;
                self.extract(&a, *lane)
            }
        }
    }

    /// Applies `f` to every lane (all `args` have the same number of lanes).
    fn lanewise(
        &mut self,
        ty: Type,
        args: &[&Val],
        mut f: impl FnMut(&mut Self, &[Value]) -> Result<Value, CodegenError>,
    ) -> Result<Val, CodegenError> {
        let lanes: Vec<Vec<Value>> = args.iter().map(|a| self.lanes_of(a)).collect();
        let n = ty.lanes as usize;
        if lanes.iter().any(|l| l.len() != n) {
            return Err(internal("lane counts differ"));
        }
        let mut out = Vec::with_capacity(n);
        let mut lane_args = Vec::with_capacity(args.len());
        for i in 0..n {
            lane_args.clear();
            lane_args.extend(lanes.iter().map(|l| l[i]));
            out.push(f(self, &lane_args)?);
        }
        Ok(Val::lanes(ty, out))
    }

    /// Applies `f` to every SIMD chunk, if all `args` have `ty`'s packed layout.
    fn packedwise(
        &mut self,
        ty: Type,
        args: &[&Val],
        mut f: impl FnMut(&mut Self, &[Value]) -> Value,
    ) -> Option<Val> {
        let (_, n) = self.layout(ty)?;
        let mut chunks = Vec::with_capacity(args.len());
        for a in args {
            chunks.push(self.packed_of(a)?);
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let chunk_args: Vec<Value> = chunks.iter().map(|c| c[i]).collect();
            out.push(f(self, &chunk_args));
        }
        Some(Val::packed(ty, out))
    }

    fn unary(&mut self, op: UnaryOp, a: &Val) -> Result<Val, CodegenError> {
        let s = a.ty.scalar;
        if let Repr::Mask(chunks) = &a.repr {
            // `!` of a bool vector held as masks.
            let out = chunks.iter().map(|&c| self.b.ins().bnot(c)).collect();
            return Ok(Val {
                ty: a.ty,
                repr: Repr::Mask(out),
            });
        }
        let packed = self.packedwise(a.ty, &[a], |l, c| match (op, s.is_float()) {
            (UnaryOp::Neg, true) => l.b.ins().fneg(c[0]),
            (UnaryOp::Neg, false) => l.b.ins().ineg(c[0]),
            (UnaryOp::Not, _) => l.b.ins().bnot(c[0]),
        });
        if let Some(v) = packed {
            return Ok(v);
        }
        self.lanewise(a.ty, &[a], |l, x| l.scalar_unary(op, s, x[0]))
    }

    fn binary(&mut self, op: BinaryOp, a: &Val, b: &Val) -> Result<Val, CodegenError> {
        let s = a.ty.scalar;
        if let (Repr::Mask(x), Repr::Mask(y)) = (&a.repr, &b.repr) {
            if let Some(v) = self.mask_binary(op, a.ty, x, y) {
                return Ok(v);
            }
        }
        if simd_binary(op, s) {
            let packed = self.packedwise(a.ty, &[a, b], |l, c| {
                let (x, y) = (c[0], c[1]);
                let ins = l.b.ins();
                match (op, s.is_float()) {
                    (BinaryOp::Add, true) => ins.fadd(x, y),
                    (BinaryOp::Sub, true) => ins.fsub(x, y),
                    (BinaryOp::Mul, true) => ins.fmul(x, y),
                    (BinaryOp::Div, _) => ins.fdiv(x, y),
                    (BinaryOp::Add, false) => ins.iadd(x, y),
                    (BinaryOp::Sub, false) => ins.isub(x, y),
                    (BinaryOp::Mul, false) => ins.imul(x, y),
                    (BinaryOp::And, _) => ins.band(x, y),
                    (BinaryOp::Or, _) => ins.bor(x, y),
                    // Only Xor is left (see `simd_binary`).
                    _ => ins.bxor(x, y),
                }
            });
            if let Some(v) = packed {
                return Ok(v);
            }
        }
        self.lanewise(a.ty, &[a, b], |l, x| l.scalar_binary(op, s, x[0], x[1]))
    }

    /// A packed `<<` or `>>` of an integer vector by a literal amount below its width
    /// (as exp and log expansions shift exponents): one SIMD shift per chunk, with
    /// no per-lane check, since an amount known in range cannot raise
    /// `SHIFT_OVERFLOW`. `None` where the general path must decide.
    fn shift_by_constant(&mut self, op: BinaryOp, a: &Val, amount: &Expr) -> Option<Val> {
        let left = match op {
            BinaryOp::Shl => true,
            BinaryOp::Shr => false,
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor => return None,
        };
        let literal = match amount {
            Expr::Splat { arg, .. } => arg.as_lit(),
            other => other.as_lit(),
        }?;
        let s = a.ty.scalar;
        let bits = crate::cpu::repr::scalar_clif(s).bits() as u64;
        let n = match literal {
            Scalar::U32(n) => u64::from(n),
            _ => return None,
        };
        if !s.is_int() || n >= bits {
            return None;
        }
        let chunks = self.packed_of(a)?;
        let mut out = Vec::with_capacity(chunks.len());
        for c in chunks {
            let amount = self.iconst(types::I32, n);
            let ins = self.b.ins();
            out.push(if left {
                ins.ishl(c, amount)
            } else if s.is_signed_int() {
                ins.sshr(c, amount)
            } else {
                ins.ushr(c, amount)
            });
        }
        Some(Val::packed(a.ty, out))
    }

    /// `&`, `|`, `^` of two bool vectors held as masks of the same shape.
    fn mask_binary(&mut self, op: BinaryOp, ty: Type, x: &[Value], y: &[Value]) -> Option<Val> {
        let same_shape = x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(&a, &b)| self.b.func.dfg.value_type(a) == self.b.func.dfg.value_type(b));
        if !same_shape {
            return None;
        }
        let mut out = Vec::with_capacity(x.len());
        for (&a, &b) in x.iter().zip(y) {
            out.push(match op {
                BinaryOp::And => self.b.ins().band(a, b),
                BinaryOp::Or => self.b.ins().bor(a, b),
                BinaryOp::Xor => self.b.ins().bxor(a, b),
                _ => return None,
            });
        }
        Some(Val {
            ty,
            repr: Repr::Mask(out),
        })
    }

    fn compare(&mut self, op: CmpOp, a: &Val, b: &Val) -> Result<Val, CodegenError> {
        let s = a.ty.scalar;
        let ty = a.ty.with_scalar(ScalarType::Bool);
        if self.layout(a.ty).is_some() {
            if let (Some(x), Some(y)) = (self.packed_of(a), self.packed_of(b)) {
                let mut out = Vec::with_capacity(x.len());
                for (&cx, &cy) in x.iter().zip(&y) {
                    out.push(if s.is_float() {
                        self.b.ins().fcmp(float_cc(op), cx, cy)
                    } else {
                        self.b.ins().icmp(int_cc(op, s), cx, cy)
                    });
                }
                return Ok(Val {
                    ty,
                    repr: Repr::Mask(out),
                });
            }
        }
        self.lanewise(ty, &[a, b], |l, x| Ok(l.scalar_compare(op, s, x[0], x[1])))
    }

    fn select(&mut self, c: &Val, t: &Val, f: &Val) -> Result<Val, CodegenError> {
        let ty = t.ty;
        if c.ty.lanes == 1 {
            let cond = self.scalar_of(c);
            if let Some(v) = self.packedwise(ty, &[t, f], |l, x| l.b.ins().select(cond, x[0], x[1]))
            {
                return Ok(v);
            }
            return self.lanewise(ty, &[t, f], |l, x| Ok(l.b.ins().select(cond, x[0], x[1])));
        }
        if let Some(v) = self.mask_select(c, t, f) {
            return Ok(v);
        }
        self.lanewise(ty, &[c, t, f], |l, x| {
            Ok(l.b.ins().select(x[0], x[1], x[2]))
        })
    }

    /// A lane-wise select whose condition is a mask shaped like the arms' chunks.
    fn mask_select(&mut self, c: &Val, t: &Val, f: &Val) -> Option<Val> {
        let Repr::Mask(masks) = &c.repr else {
            return None;
        };
        let (chunk, n) = self.layout(t.ty)?;
        let fits = masks.len() == n
            && masks
                .iter()
                .all(|&m| self.b.func.dfg.value_type(m) == mask_of(chunk));
        if !fits {
            return None;
        }
        let masks = masks.clone();
        let x = self.packed_of(t)?;
        let y = self.packed_of(f)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let m = self.mask_as(chunk, masks[i]);
            out.push(self.b.ins().bitselect(m, x[i], y[i]));
        }
        Some(Val::packed(t.ty, out))
    }

    /// A mask reinterpreted as the chunk type it selects between.
    pub(crate) fn mask_as(&mut self, chunk: cranelift_codegen::ir::Type, mask: Value) -> Value {
        if self.b.func.dfg.value_type(mask) == chunk {
            mask
        } else {
            self.b.ins().bitcast(chunk, vector_bitcast_flags(), mask)
        }
    }

    fn splat(&mut self, lanes: u8, a: &Val) -> Val {
        let ty = Type::vector(a.ty.scalar, lanes);
        let x = self.scalar_of(a);
        match self.layout(ty) {
            Some((chunk, n)) => {
                let v = self.b.ins().splat(chunk, x);
                Val::packed(ty, vec![v; n])
            }
            None => Val::lanes(ty, vec![x; lanes as usize]),
        }
    }

    fn extract(&mut self, a: &Val, lane: u8) -> Result<Val, CodegenError> {
        let s = a.ty.scalar;
        let pick = |chunks: &[Value], l: &mut Self| -> Result<Value, CodegenError> {
            let per = l.b.func.dfg.value_type(chunks[0]).lane_count() as usize;
            let chunk = chunks
                .get(lane as usize / per)
                .copied()
                .ok_or_else(|| internal(format!("lane {lane} out of range")))?;
            Ok(l.b.ins().extractlane(chunk, (lane as usize % per) as u8))
        };
        let v = match &a.repr {
            Repr::Lanes(l) => l
                .get(lane as usize)
                .copied()
                .ok_or_else(|| internal(format!("lane {lane} out of range")))?,
            Repr::Packed(c) => pick(&c.clone(), self)?,
            Repr::Mask(c) => {
                let m = pick(&c.clone(), self)?;
                self.b.ins().icmp_imm_u(IntCC::NotEqual, m, 0)
            }
        };
        Ok(Val::scalar(s, v))
    }

    fn math(&mut self, func: MathFn, args: &[Val]) -> Result<Val, CodegenError> {
        let first = args
            .first()
            .ok_or_else(|| internal(format!("`{}` without arguments", func.name())))?;
        let ty = first.ty;
        let refs: Vec<&Val> = args.iter().collect();
        if self.simd_math(func, ty) {
            if let Some(v) = self.packedwise(ty, &refs, |l, c| l.packed_math(func, ty.scalar, c)) {
                return Ok(v);
            }
        }
        self.lanewise(ty, &refs, |l, x| l.scalar_math(func, ty.scalar, x))
    }

    /// Whether `func` on `ty` has a packed implementation.
    fn simd_math(&self, func: MathFn, ty: Type) -> bool {
        let s = ty.scalar;
        let float = matches!(s, ScalarType::F32 | ScalarType::F64);
        match func {
            MathFn::Sqrt | MathFn::Floor | MathFn::Ceil | MathFn::Round => float,
            MathFn::Fma => float && self.features.fma,
            MathFn::Rsqrt => s == ScalarType::F64,
            MathFn::Abs | MathFn::Min | MathFn::Max => {
                float || matches!(s, ScalarType::I32 | ScalarType::U32)
            }
            _ => false,
        }
    }

    /// One chunk of a packed math function (see `simd_math`).
    fn packed_math(&mut self, func: MathFn, s: ScalarType, c: &[Value]) -> Value {
        let float = s.is_float();
        let x = c[0];
        match func {
            MathFn::Sqrt => self.b.ins().sqrt(x),
            MathFn::Floor => self.b.ins().floor(x),
            MathFn::Ceil => self.b.ins().ceil(x),
            MathFn::Round => self.b.ins().nearest(x),
            MathFn::Fma => self.b.ins().fma(x, c[1], c[2]),
            MathFn::Rsqrt => {
                let ty = self.b.func.dfg.value_type(x);
                let one = self.b.ins().f64const(1.0);
                let ones = self.b.ins().splat(ty, one);
                let r = self.b.ins().sqrt(x);
                self.b.ins().fdiv(ones, r)
            }
            MathFn::Abs if float => self.b.ins().fabs(x),
            MathFn::Abs if s == ScalarType::U32 => x,
            MathFn::Abs => self.b.ins().iabs(x),
            MathFn::Min | MathFn::Max if float => {
                self.packed_float_minmax(func == MathFn::Min, x, c[1])
            }
            MathFn::Min if s == ScalarType::U32 => self.b.ins().umin(x, c[1]),
            MathFn::Max if s == ScalarType::U32 => self.b.ins().umax(x, c[1]),
            MathFn::Min => self.b.ins().smin(x, c[1]),
            // Max of i32: the only case left that `simd_math` admits.
            _ => self.b.ins().smax(x, c[1]),
        }
    }

    /// IEEE minNum/maxNum on chunks, as the interpreter (Rust's `f32::min`): a NaN
    /// operand yields the other; equal operands yield the first.
    fn packed_float_minmax(&mut self, is_min: bool, x: Value, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let cc = if is_min {
            FloatCC::LessThan
        } else {
            FloatCC::GreaterThan
        };
        let better = self.b.ins().fcmp(cc, y, x);
        let better = self.mask_as(ty, better);
        let t = self.b.ins().bitselect(better, y, x);
        let x_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let x_nan = self.mask_as(ty, x_nan);
        self.b.ins().bitselect(x_nan, y, t)
    }

    fn bitcast(&mut self, to: ScalarType, a: &Val) -> Result<Val, CodegenError> {
        let ty = a.ty.with_scalar(to);
        let from = a.ty.scalar;
        if crate::cpu::repr::scalar_clif(from) == crate::cpu::repr::scalar_clif(to) {
            // i32 <-> u32, f16 <-> bf16: the same CLIF values.
            let values = self.canonical(a);
            if self.layout(a.ty).is_some() == self.layout(ty).is_some() {
                return Ok(self.rebuild(ty, values));
            }
            let lanes = self.lanes_of(a);
            return Ok(Val::lanes(ty, lanes));
        }
        if let (Some((chunk, _)), Some(_)) = (self.layout(ty), self.layout(a.ty)) {
            if let Some(v) = self.packedwise(a.ty, &[a], |l, c| {
                l.b.ins().bitcast(chunk, vector_bitcast_flags(), c[0])
            }) {
                return Ok(Val { ty, repr: v.repr });
            }
        }
        let clif = crate::cpu::repr::scalar_clif(to);
        self.lanewise(ty, &[a], |l, x| {
            Ok(l.b.ins().bitcast(clif, MemFlagsData::new(), x[0]))
        })
    }
}

/// Whether a binary operator on `s` has a packed implementation.
fn simd_binary(op: BinaryOp, s: ScalarType) -> bool {
    let float = matches!(s, ScalarType::F32 | ScalarType::F64);
    let int = s.is_int();
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => float || int,
        BinaryOp::Div => float,
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => int,
        BinaryOp::Rem | BinaryOp::Shl | BinaryOp::Shr => false,
    }
}

/// The float condition of a comparison: ordered, except `!=` (true with NaN).
pub(crate) fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The integer condition of a comparison (signed for i32/i64, unsigned otherwise).
pub(crate) fn int_cc(op: CmpOp, s: ScalarType) -> IntCC {
    let signed = s.is_signed_int();
    match op {
        CmpOp::Eq => IntCC::Equal,
        CmpOp::Ne => IntCC::NotEqual,
        CmpOp::Lt if signed => IntCC::SignedLessThan,
        CmpOp::Le if signed => IntCC::SignedLessThanOrEqual,
        CmpOp::Gt if signed => IntCC::SignedGreaterThan,
        CmpOp::Ge if signed => IntCC::SignedGreaterThanOrEqual,
        CmpOp::Lt => IntCC::UnsignedLessThan,
        CmpOp::Le => IntCC::UnsignedLessThanOrEqual,
        CmpOp::Gt => IntCC::UnsignedGreaterThan,
        CmpOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
    }
}
