//! The IR the algorithms emit: [`Emitter`] implements the operations trait with IR
//! expressions, binding named values to new immutable locals.

use super::double::Ops64;
use super::expander::Expander;
use super::width::{Ops, Width};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// Emits IR for one call: values are expressions of `lanes` lanes; `bind` adds a `Let`.
pub(super) struct Emitter<'a, 'b> {
    pub(super) x: &'a mut Expander<'b>,
    pub(super) out: &'a mut Block,
    pub(super) lanes: u8,
    pub(super) prefix: &'static str,
}

impl Emitter<'_, '_> {
    pub(super) fn lit(&self, s: Scalar) -> Expr {
        let lit = Expr::Lit(s);
        if self.lanes > 1 {
            Expr::Splat {
                lanes: self.lanes,
                arg: Box::new(lit),
            }
        } else {
            lit
        }
    }

    /// Binds `e` to a new local of scalar type `scalar` unless it is already trivial.
    pub(super) fn bind_as(&mut self, e: Expr, scalar: ScalarType) -> Expr {
        let trivial = match &e {
            Expr::Local(_) | Expr::Lit(_) | Expr::Param(_) => true,
            Expr::Splat { arg, .. } => matches!(**arg, Expr::Lit(_)),
            _ => false,
        };
        if trivial {
            return e;
        }
        let id = self
            .x
            .new_local(self.prefix, Type::vector(scalar, self.lanes));
        self.out.push(Stmt::Let {
            local: id,
            value: e,
        });
        Expr::Local(id)
    }

    pub(super) fn bin(op: BinaryOp, a: &Expr, b: &Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(a.clone()),
            rhs: Box::new(b.clone()),
        }
    }

    pub(super) fn cmp(op: CmpOp, a: &Expr, b: &Expr) -> Expr {
        Expr::Cmp {
            op,
            lhs: Box::new(a.clone()),
            rhs: Box::new(b.clone()),
        }
    }

    pub(super) fn select(c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Expr::Select {
            cond: Box::new(c.clone()),
            on_true: Box::new(t.clone()),
            on_false: Box::new(f.clone()),
        }
    }

    pub(super) fn shift(&self, op: BinaryOp, a: &Expr, n: u32) -> Expr {
        let amount = self.lit(Scalar::U32(n));
        Self::bin(op, a, &amount)
    }

    pub(super) fn math(func: MathFn, args: &[&Expr]) -> Expr {
        Expr::Math {
            func,
            args: args.iter().map(|&a| a.clone()).collect(),
        }
    }

    pub(super) fn convert(e: &Expr, to: ScalarType, bitwise: bool) -> Expr {
        let arg = Box::new(e.clone());
        if bitwise {
            Expr::Bitcast { to, arg }
        } else {
            Expr::Cast { to, arg }
        }
    }
}

impl<W: Width> Ops<W> for Emitter<'_, '_> {
    type F = Expr;
    type I = Expr;
    type B = Expr;
    fn cf(&mut self, v: W::Float) -> Expr {
        self.lit(W::float_lit(v))
    }
    fn ci(&mut self, v: W::Int) -> Expr {
        self.lit(W::int_lit(v))
    }
    fn add(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Sub, a, b)
    }
    fn mul(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Mul, a, b)
    }
    fn div(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Div, a, b)
    }
    fn neg(&mut self, a: &Expr) -> Expr {
        Expr::Unary {
            op: UnaryOp::Neg,
            arg: Box::new(a.clone()),
        }
    }
    fn abs(&mut self, a: &Expr) -> Expr {
        Self::math(MathFn::Abs, &[a])
    }
    fn round(&mut self, a: &Expr) -> Expr {
        Self::math(MathFn::Round, &[a])
    }
    fn lt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Lt, a, b)
    }
    fn gt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Gt, a, b)
    }
    fn ge(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Ge, a, b)
    }
    fn feq(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Eq, a, b)
    }
    fn fne(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Ne, a, b)
    }
    fn and(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::And, a, b)
    }
    fn or(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Or, a, b)
    }
    fn not(&mut self, a: &Expr) -> Expr {
        Expr::Unary {
            op: UnaryOp::Not,
            arg: Box::new(a.clone()),
        }
    }
    fn sel(&mut self, c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Self::select(c, t, f)
    }
    fn iadd(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Add, a, b)
    }
    fn isub(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Sub, a, b)
    }
    fn iand(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::And, a, b)
    }
    fn shl(&mut self, a: &Expr, n: u32) -> Expr {
        self.shift(BinaryOp::Shl, a, n)
    }
    fn shr(&mut self, a: &Expr, n: u32) -> Expr {
        self.shift(BinaryOp::Shr, a, n)
    }
    fn ieq(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Eq, a, b)
    }
    fn ilt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Lt, a, b)
    }
    fn isel(&mut self, c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Self::select(c, t, f)
    }
    fn bits_of(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::INT, true)
    }
    fn float_of_bits(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::FLOAT, true)
    }
    fn ftoi(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::INT, false)
    }
    fn itof(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::FLOAT, false)
    }
    fn bind(&mut self, a: Expr) -> Expr {
        self.bind_as(a, W::FLOAT)
    }
    /// `bits(a) | z` with `z = (num_workgroups.x == 0)`: `a` itself, since a launch
    /// has at least one workgroup, but not to a compiler (`MathExpansion::opaque_sums`).
    fn opaque(&mut self, a: &Expr) -> Expr {
        if !self.x.opts.opaque_sums {
            return a.clone();
        }
        let workgroups = Expr::Builtin {
            builtin: Builtin::NumWorkgroups,
            axis: 0,
        };
        let none = Self::cmp(CmpOp::Eq, &workgroups, &Expr::Lit(Scalar::U32(0)));
        let zero = Self::convert(&none, W::INT, false);
        let zero = if self.lanes > 1 {
            Expr::Splat {
                lanes: self.lanes,
                arg: Box::new(zero),
            }
        } else {
            zero
        };
        let bits = Self::convert(a, W::INT, true);
        let same = Self::convert(&Self::bin(BinaryOp::Or, &bits, &zero), W::FLOAT, true);
        self.bind_as(same, W::FLOAT)
    }
    fn bindi(&mut self, a: Expr) -> Expr {
        self.bind_as(a, W::INT)
    }
    fn bindb(&mut self, a: Expr) -> Expr {
        self.bind_as(a, ScalarType::Bool)
    }
}

impl Ops64 for Emitter<'_, '_> {
    fn fma(&mut self, a: &Expr, b: &Expr, c: &Expr) -> Expr {
        if self.x.opts.fused_fma {
            Self::math(MathFn::Fma, &[a, b, c])
        } else {
            super::double::emulated_fma(self, a, b, c)
        }
    }
}
