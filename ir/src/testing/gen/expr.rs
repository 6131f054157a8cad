//! Expressions of a generated kernel, loads included.

use super::{
    bin, global_id0, lit_of, local_id0, u32_lit, Gen, SharedPhase, IN_LEN, SHARED_SLOTS, SLOTS,
};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::testing::values::special_values;
use crate::types::{ScalarType, Type};

impl Gen<'_> {
    pub(super) fn expr(&mut self, ty: Type, depth: u32) -> Expr {
        if depth == 0 {
            return self.leaf(ty);
        }
        let d = depth - 1;
        let s = ty.scalar;
        match self.pick(14) {
            0 | 1 => self.leaf(ty),
            2 => self.unary(ty, d),
            3 | 4 => self.binary(ty, d),
            5 => self.binary_with_literal(ty, d),
            6 | 7 if s == ScalarType::Bool => self.cmp(ty, d),
            6 | 7 => self.math(ty, d),
            8 => {
                let cond_ty = if ty.lanes > 1 && self.pick(2) == 1 {
                    ty.with_scalar(ScalarType::Bool)
                } else {
                    Type::BOOL
                };
                Expr::Select {
                    cond: Box::new(self.expr(cond_ty, d)),
                    on_true: Box::new(self.expr(ty, d)),
                    on_false: Box::new(self.expr(ty, d)),
                }
            }
            9 => {
                let from = self.scalar_type();
                Expr::Cast {
                    to: s,
                    arg: Box::new(self.expr(ty.with_scalar(from), d)),
                }
            }
            10 if s != ScalarType::Bool => {
                let same: Vec<ScalarType> = self
                    .layout
                    .types
                    .iter()
                    .copied()
                    .filter(|t| *t != ScalarType::Bool && t.size_bytes() == s.size_bytes())
                    .filter(|t| self.config.float_bitcasts || !t.is_float())
                    .collect();
                let from = self.pick_of(&same).unwrap_or(s);
                let mut arg = self.expr(ty.with_scalar(from), d);
                if from.is_float() {
                    arg = nan_as_one(arg, from, ty.lanes);
                }
                Expr::Bitcast {
                    to: s,
                    arg: Box::new(arg),
                }
            }
            11 if ty.lanes == 1 && self.config.vectors => {
                let lanes = self.lanes();
                let lane = self.pick(lanes as u32) as u8;
                Expr::Extract {
                    arg: Box::new(self.expr(Type::vector(s, lanes), d)),
                    lane,
                }
            }
            11 if ty.lanes > 1 => self.build_vector(ty, d),
            12 => self.load(ty, d),
            _ => self.leaf(ty),
        }
    }

    fn build_vector(&mut self, ty: Type, d: u32) -> Expr {
        let scalar = Type::scalar(ty.scalar);
        if self.pick(2) == 0 {
            Expr::Splat {
                lanes: ty.lanes,
                arg: Box::new(self.expr(scalar, d)),
            }
        } else {
            Expr::Vector((0..ty.lanes).map(|_| self.expr(scalar, d)).collect())
        }
    }

    fn leaf(&mut self, ty: Type) -> Expr {
        let s = ty.scalar;
        let candidates = self.locals_of(ty);
        match self.pick(7) {
            0 | 1 => {
                let c = self.lit(s);
                lit_of(ty, c)
            }
            2 | 3 if !candidates.is_empty() => {
                let i = self.pick(candidates.len() as u32) as usize;
                Expr::Local(candidates[i])
            }
            4 if ty.lanes == 1 && self.layout.memory.contains(&s) => {
                Expr::Param(self.layout.param(s))
            }
            5 => self.load(ty, 0),
            6 if ty == Type::U32 => {
                let builtin = [
                    Builtin::GlobalId,
                    Builtin::LocalId,
                    Builtin::WorkgroupId,
                    Builtin::NumWorkgroups,
                ][self.pick(4) as usize];
                Expr::Builtin { builtin, axis: 0 }
            }
            _ if ty.lanes > 1 => Expr::Splat {
                lanes: ty.lanes,
                arg: Box::new(self.leaf(Type::scalar(s))),
            },
            _ => Expr::Lit(self.lit(s)),
        }
    }

    /// A load of `ty`: mostly from the input buffer of its type, sometimes from this
    /// invocation's output region or from shared memory. A type no memory holds is
    /// cast from a load of one that does.
    fn load(&mut self, ty: Type, d: u32) -> Expr {
        if let Some(load) = self.narrow_load(ty, d) {
            return load;
        }
        if !self.layout.memory.contains(&ty.scalar) {
            let from = self.memory_type();
            return Expr::Cast {
                to: ty.scalar,
                arg: Box::new(self.load(ty.with_scalar(from), d)),
            };
        }
        let lanes = ty.lanes as u32;
        let (mem, index) = match self.pick(8) {
            5 | 6 if self.shared == SharedPhase::Own => {
                let slot = self.slot(SHARED_SLOTS, lanes);
                let base = bin(BinaryOp::Mul, local_id0(), u32_lit(SHARED_SLOTS));
                (
                    self.layout.shared(ty.scalar),
                    bin(BinaryOp::Add, base, slot),
                )
            }
            5 | 6 if self.shared == SharedPhase::Any => {
                let index = self.any_index(self.layout.shared_len(), lanes, d);
                (self.layout.shared(ty.scalar), index)
            }
            7 => {
                let slot = self.slot(SLOTS, lanes);
                let index = self.own_slot(self.layout.stride(), slot);
                (self.layout.output(ty.scalar), index)
            }
            _ => (
                self.layout.input(ty.scalar),
                self.any_index(IN_LEN, lanes, d),
            ),
        };
        Expr::Load {
            mem,
            index: Box::new(index),
            lanes: ty.lanes,
        }
    }

    /// Sometimes (when the config has narrow types whose value type is `ty`'s), a
    /// load of `ty` from a narrow buffer: its input, or (scalars and 2-lane vectors)
    /// this invocation's region of its output.
    fn narrow_load(&mut self, ty: Type, d: u32) -> Option<Expr> {
        let options = self.layout.narrow_of(ty.scalar);
        if options.is_empty() || self.pick(4) != 0 {
            return None;
        }
        let n = self.pick_of(&options)?;
        let lanes = ty.lanes as u32;
        let (mem, index) = if lanes <= 2 && self.pick(3) == 0 {
            (self.layout.narrow_output(n), self.narrow_slot(lanes))
        } else {
            (
                self.layout.narrow_input(n),
                self.any_index(IN_LEN, lanes, d),
            )
        };
        Some(Expr::Load {
            mem,
            index: Box::new(index),
            lanes: ty.lanes,
        })
    }

    /// An index into memory of `len` elements that no invocation writes while it is
    /// read: mostly in bounds and aligned; with run-time errors, sometimes unmasked or
    /// in bounds but unaligned.
    fn any_index(&mut self, len: u32, lanes: u32, d: u32) -> Expr {
        let mask = (len - 1) & !(lanes - 1);
        let raw = if d == 0 {
            match self.pick(3) {
                0 => global_id0(),
                1 => Expr::Lit(Scalar::U32(self.raw())),
                _ => {
                    let locals = self.locals_of(Type::U32);
                    match self.pick_of(&locals) {
                        Some(l) => Expr::Local(l),
                        None => global_id0(),
                    }
                }
            }
        } else {
            self.expr(Type::U32, d.min(2))
        };
        let errors = self.config.runtime_errors;
        match (raw, self.pick(10)) {
            // A literal index must be valid as it stands.
            (Expr::Lit(Scalar::U32(v)), _) => u32_lit(v & mask),
            (raw, 0) if errors => raw,
            (raw, 1) if errors && lanes > 1 => bin(BinaryOp::And, raw, u32_lit(len / 2 - 1)),
            (raw, _) => bin(BinaryOp::And, raw, u32_lit(mask)),
        }
    }

    fn unary(&mut self, ty: Type, d: u32) -> Expr {
        let op = match ty.scalar {
            // (No value has a narrow type; they are listed for the exhaustive match.)
            ScalarType::Bool
            | ScalarType::U32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => UnaryOp::Not,
            ScalarType::I32 | ScalarType::I64 if self.pick(2) == 0 => UnaryOp::Not,
            ScalarType::I32
            | ScalarType::I64
            | ScalarType::F16
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::F64 => UnaryOp::Neg,
        };
        Expr::Unary {
            op,
            arg: Box::new(self.expr(ty, d)),
        }
    }

    fn binary_op(&mut self, s: ScalarType) -> BinaryOp {
        use BinaryOp as B;
        let ops: &[BinaryOp] = if s == ScalarType::Bool {
            &[B::And, B::Or, B::Xor]
        } else if s.is_float() && self.config.float_rem {
            &[B::Add, B::Sub, B::Mul, B::Div, B::Rem]
        } else if s.is_float() {
            &[B::Add, B::Sub, B::Mul, B::Div]
        } else {
            &[
                B::Add,
                B::Mul,
                B::Sub,
                B::And,
                B::Or,
                B::Xor,
                B::Shl,
                B::Shr,
                B::Div,
                B::Rem,
            ]
        };
        self.pick_of(ops).unwrap_or(B::Add)
    }

    fn binary(&mut self, ty: Type, d: u32) -> Expr {
        let op = self.binary_op(ty.scalar);
        let lhs = self.expr(ty, d);
        let rhs = match op {
            BinaryOp::Shl | BinaryOp::Shr => self.shift_amount(ty, d),
            BinaryOp::Div | BinaryOp::Rem
                if ty.scalar.is_int() && (!self.config.runtime_errors || self.pick(4) != 0) =>
            {
                // Mostly nonzero divisors (`y | 1`), so that the rest of the kernel
                // runs too.
                let one = lit_of(ty, Scalar::one(ty.scalar));
                bin(BinaryOp::Or, self.expr(ty, d), one)
            }
            _ => self.expr(ty, d),
        };
        bin(op, lhs, rhs)
    }

    fn shift_amount(&mut self, ty: Type, d: u32) -> Expr {
        let amount_ty = ty.with_scalar(ScalarType::U32);
        let bits = ty.scalar.bits();
        let errors = self.config.runtime_errors;
        match self.pick(4) {
            0 => {
                let a = self.pick(if errors { bits + 4 } else { bits });
                lit_of(amount_ty, Scalar::U32(a))
            }
            1 if errors => self.expr(amount_ty, d),
            _ => bin(
                BinaryOp::And,
                self.expr(amount_ty, d),
                lit_of(amount_ty, Scalar::U32(bits - 1)),
            ),
        }
    }

    /// `x op c` or `c op x` with an interesting constant: what simplify looks for.
    fn binary_with_literal(&mut self, ty: Type, d: u32) -> Expr {
        let op = self.binary_op(ty.scalar);
        let x = self.expr(ty, d);
        if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
            let amount_ty = ty.with_scalar(ScalarType::U32);
            let bits = ty.scalar.bits();
            let a = self.pick(if self.config.runtime_errors {
                bits + 2
            } else {
                bits
            });
            return bin(op, x, lit_of(amount_ty, Scalar::U32(a)));
        }
        let special = special_values(ty.scalar);
        let k = self.pick(8) as usize;
        let c = special.get(k).copied().unwrap_or(Scalar::zero(ty.scalar));
        let divides = matches!(op, BinaryOp::Div | BinaryOp::Rem) && ty.scalar.is_int();
        let c = if divides && !self.config.runtime_errors && c.is_zero() {
            Scalar::one(ty.scalar)
        } else {
            c
        };
        let c = lit_of(ty, c);
        if self.pick(2) == 0 {
            bin(op, x, c)
        } else if divides && !self.config.runtime_errors {
            // `c / x` may divide by zero: guard the divisor.
            let one = lit_of(ty, Scalar::one(ty.scalar));
            bin(op, c, bin(BinaryOp::Or, x, one))
        } else {
            bin(op, c, x)
        }
    }

    fn cmp(&mut self, ty: Type, d: u32) -> Expr {
        let operand = ty.with_scalar(self.scalar_type());
        let ops: &[CmpOp] = if operand.scalar == ScalarType::Bool {
            &[CmpOp::Eq, CmpOp::Ne]
        } else {
            &[
                CmpOp::Lt,
                CmpOp::Eq,
                CmpOp::Ne,
                CmpOp::Le,
                CmpOp::Gt,
                CmpOp::Ge,
            ]
        };
        let op = self.pick_of(ops).unwrap_or(CmpOp::Eq);
        Expr::Cmp {
            op,
            lhs: Box::new(self.expr(operand, d)),
            rhs: Box::new(self.expr(operand, d)),
        }
    }

    fn math(&mut self, ty: Type, d: u32) -> Expr {
        let s = ty.scalar;
        let funcs: Vec<MathFn> = self
            .config
            .math
            .iter()
            .copied()
            .filter(|f| s.is_float() || f.accepts_int())
            .collect();
        let Some(func) = self.pick_of(&funcs) else {
            return self.binary(ty, d);
        };
        Expr::Math {
            func,
            args: (0..func.arity()).map(|_| self.expr(ty, d)).collect(),
        }
    }
}

/// `x`, with every NaN the same NaN: a NaN's sign and payload are unspecified
/// (docs/semantics.md), so the bits a float bitcast reads must not depend on them (the
/// CPU target's `fma` of a negative NaN gave the positive one, seed
/// 1795925408764813029).
fn nan_as_one(x: Expr, ty: ScalarType, lanes: u8) -> Expr {
    let mut nan = Expr::Lit(Scalar::from_f64(ty, f64::NAN));
    if lanes > 1 {
        nan = Expr::Splat {
            lanes,
            arg: Box::new(nan),
        };
    }
    Expr::Select {
        cond: Box::new(Expr::Cmp {
            op: CmpOp::Eq,
            lhs: Box::new(x.clone()),
            rhs: Box::new(x.clone()),
        }),
        on_true: Box::new(x),
        on_false: Box::new(nan),
    }
}
