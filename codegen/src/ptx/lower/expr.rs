//! Expressions: dispatch, and the operators on whole values (lane by lane).

use super::value::{int, Val};
use super::{internal, Lower, OrInternal};
use crate::CodegenError;
use inkwell::values::BasicValueEnum;
use kernelc_ir::{Expr, ScalarType, Type};

impl<'ctx> Lower<'_, 'ctx> {
    pub(super) fn expr(&mut self, e: &Expr) -> Result<Val<'ctx>, CodegenError> {
        match e {
            Expr::Lit(s) => Ok(Val::scalar(s.ty(), self.literal(*s)?)),
            Expr::Local(id) => self.read_local(*id),
            Expr::Param(p) => self.param_value(p.0),
            Expr::Builtin { builtin, axis } => {
                let v = self.builtin(*builtin, *axis)?;
                Ok(Val::scalar(ScalarType::U32, v.into()))
            }
            Expr::Load { mem, index, lanes } => {
                let i = int(self.expr(index)?.first()?)?;
                self.load(*mem, i, index, *lanes)
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                let s = a.ty.scalar;
                self.lanewise(a.ty, &[&a], |l, x| l.scalar_unary(*op, s, x[0]))
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                let s = a.ty.scalar;
                self.lanewise(a.ty, &[&a, &b], |l, x| l.scalar_binary(*op, s, x[0], x[1]))
            }
            Expr::Cmp { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                let s = a.ty.scalar;
                let ty = a.ty.with_scalar(ScalarType::Bool);
                self.lanewise(ty, &[&a, &b], |l, x| l.scalar_compare(*op, s, x[0], x[1]))
            }
            Expr::Math { func, args } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.expr(a)?);
                }
                let ty = vals
                    .first()
                    .map(|v| v.ty)
                    .ok_or_else(|| internal(format!("`{}` without arguments", func.name())))?;
                let refs: Vec<&Val<'ctx>> = vals.iter().collect();
                self.lanewise(ty, &refs, |l, x| l.scalar_math(*func, ty.scalar, x))
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
                let from = a.ty.scalar;
                self.lanewise(a.ty.with_scalar(*to), &[&a], |l, x| {
                    l.cast_scalar(from, *to, x[0])
                })
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                let llvm = self.scalar_type(*to);
                let between_halves = a.ty.scalar != *to
                    && [a.ty.scalar, *to]
                        .iter()
                        .all(|s| matches!(s, ScalarType::F16 | ScalarType::Bf16));
                self.lanewise(a.ty.with_scalar(*to), &[&a], |l, x| {
                    if between_halves {
                        l.opaque_half_bitcast(x[0], llvm)
                    } else {
                        l.b.build_bit_cast(x[0], llvm, "").or_internal()
                    }
                })
            }
            Expr::Vector(items) => {
                let mut lanes = Vec::with_capacity(items.len());
                let mut scalar = ScalarType::Bool;
                for item in items {
                    let v = self.expr(item)?;
                    scalar = v.ty.scalar;
                    lanes.push(v.first()?);
                }
                Ok(Val {
                    ty: Type::vector(scalar, items.len() as u8),
                    lanes,
                })
            }
            Expr::Splat { lanes, arg } => {
                let a = self.expr(arg)?;
                let x = a.first()?;
                Ok(Val {
                    ty: Type::vector(a.ty.scalar, *lanes),
                    lanes: vec![x; *lanes as usize],
                })
            }
            Expr::Extract { arg, lane } => {
                let a = self.expr(arg)?;
                let x = a
                    .lanes
                    .get(*lane as usize)
                    .copied()
                    .ok_or_else(|| internal(format!("lane {lane} of a {}", a.ty)))?;
                Ok(Val::scalar(a.ty.scalar, x))
            }
        }
    }

    /// Applies `f` to every lane (all `args` have `ty`'s number of lanes).
    fn lanewise(
        &mut self,
        ty: Type,
        args: &[&Val<'ctx>],
        mut f: impl FnMut(
            &mut Self,
            &[BasicValueEnum<'ctx>],
        ) -> Result<BasicValueEnum<'ctx>, CodegenError>,
    ) -> Result<Val<'ctx>, CodegenError> {
        let n = ty.lanes as usize;
        if args.iter().any(|a| a.lanes.len() != n) {
            return Err(internal("lane counts differ"));
        }
        let mut lanes = Vec::with_capacity(n);
        let mut lane_args = Vec::with_capacity(args.len());
        for i in 0..n {
            lane_args.clear();
            lane_args.extend(args.iter().map(|a| a.lanes[i]));
            lanes.push(f(self, &lane_args)?);
        }
        Ok(Val { ty, lanes })
    }

    /// `cond ? t : f`, lane-wise when `cond` is a vector (both arms evaluated).
    fn select(
        &mut self,
        c: &Val<'ctx>,
        t: &Val<'ctx>,
        f: &Val<'ctx>,
    ) -> Result<Val<'ctx>, CodegenError> {
        if c.ty.lanes == 1 {
            let cond = int(c.first()?)?;
            return self.lanewise(t.ty, &[t, f], |l, x| {
                l.b.build_select(cond, x[0], x[1], "").or_internal()
            });
        }
        self.lanewise(t.ty, &[c, t, f], |l, x| {
            l.b.build_select(int(x[0])?, x[1], x[2], "").or_internal()
        })
    }
}
