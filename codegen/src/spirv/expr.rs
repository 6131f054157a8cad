//! Expressions: a tree walk that returns one register value per node. Expressions have
//! no control flow (loads are branch-free, see [`super::memory`]).

use super::emitter::{build_error, Emitter, Val, R};
use super::globals::builtin_slot;
use super::internal;
use kernelc_ir::{Expr, Type};
use rspirv::spirv::Op;

impl Emitter<'_> {
    pub(crate) fn expr(&mut self, e: &Expr) -> R<Val> {
        match e {
            Expr::Lit(s) => Ok(Val {
                id: self.scalar_const(*s)?,
                ty: Type::scalar(s.ty()),
            }),
            Expr::Local(id) => super::stmt::read_local(self, *id),
            Expr::Param(p) => self
                .scalars
                .get(p.0 as usize)
                .copied()
                .flatten()
                .ok_or_else(|| internal(format!("parameter #{} is not a scalar", p.0))),
            Expr::Builtin { builtin, axis } => {
                if *axis > 2 {
                    return Err(internal(format!("builtin axis {axis}")));
                }
                let v = self.builtins[builtin_slot(*builtin)]
                    .ok_or_else(|| internal(format!("builtin {} not loaded", builtin.name())))?;
                let u = self.u32_ty();
                Ok(Val {
                    id: self.extract(u, v, *axis as u32)?,
                    ty: Type::U32,
                })
            }
            Expr::Load { mem, index, lanes } => {
                let i = self.expr(index)?;
                self.load_mem(*mem, i.id, index, *lanes)
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                self.unary(*op, a)
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                self.binary(*op, a, b)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                self.compare(*op, a, b)
            }
            Expr::Math { func, args } => {
                let vals = args.iter().map(|a| self.expr(a)).collect::<R<Vec<Val>>>()?;
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
                self.select(c, t, f)
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                self.cast(*to, a)
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                self.bitcast(*to, a)
            }
            Expr::Vector(items) => {
                let vals = items
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<R<Vec<Val>>>()?;
                let first = vals.first().ok_or_else(|| internal("an empty vector"))?;
                let ty = Type::vector(first.ty.scalar, vals.len() as u8);
                let reg = self.reg_type(ty)?;
                let id = self
                    .b
                    .composite_construct(reg, None, vals.iter().map(|v| v.id))
                    .map_err(build_error)?;
                Ok(Val { id, ty })
            }
            Expr::Splat { lanes, arg } => {
                let a = self.expr(arg)?;
                let ty = Type::vector(a.ty.scalar, *lanes);
                let reg = self.reg_type(ty)?;
                let id = self
                    .b
                    .composite_construct(reg, None, vec![a.id; *lanes as usize])
                    .map_err(build_error)?;
                Ok(Val { id, ty })
            }
            Expr::Extract { arg, lane } => {
                let a = self.expr(arg)?;
                if *lane >= a.ty.lanes {
                    return Err(internal(format!("lane {lane} of {}", a.ty)));
                }
                let ty = Type::scalar(a.ty.scalar);
                let reg = self.reg_type(ty)?;
                let id = if a.ty.lanes == 1 {
                    a.id
                } else {
                    self.extract(reg, a.id, *lane as u32)?
                };
                Ok(Val { id, ty })
            }
        }
    }

    /// `cond ? t : f`, lane-wise; a scalar condition is splatted over vector arms
    /// (SPIR-V 1.3 wants one condition lane per arm lane).
    pub(crate) fn select(&mut self, c: Val, t: Val, f: Val) -> R<Val> {
        let cond = if c.ty.lanes == 1 && t.ty.lanes > 1 {
            self.splat_bool(c.id, t.ty.lanes)?
        } else {
            c.id
        };
        let reg = self.reg_type(t.ty)?;
        Ok(Val {
            id: self.ins(Op::Select, reg, &[cond, t.id, f.id])?,
            ty: t.ty,
        })
    }
}
