//! The fragment statements that compute in registers between multiplies: `map`
//! (element by element), `reduce_rows` and `convert` (see `crate::fragment`). A group
//! holds whole matrices here, as in `fragment.rs`.

use super::exec::Ctx;
use super::fault::{fault, malformed, At, FaultKind, Res, Seg::Name};
use super::fragment::FragmentValue;
use crate::eval::{self, Value};
use crate::fragment::*;
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::Type;

impl Ctx<'_, '_> {
    /// `m` for the group of `group` invocations whose first warp is `warp`: per
    /// element, the bound locals set, the body run and the value computed by the
    /// group's first invocation and by one other, element by element in turn (so
    /// every invocation is compared over the fragment): a value that depends on who
    /// computes it differs between most pairs.
    pub(super) fn exec_map(&mut self, m: &FragmentMap, warp: u32, group: u32) -> Res<()> {
        let leader = warp * WARP;
        let (rows, cols) = self.fragment_decl(m.dst, leader)?.dims();
        let mut args = Vec::with_capacity(m.args.len());
        for a in &m.args {
            let width = self.fragment_decl(a.frag, leader)?.dims().1.max(1);
            let value = self.fragment_value(a.frag, warp, leader).at(Name("args"))?;
            args.push((value.clone(), width));
        }
        let mut out = Vec::with_capacity((rows * cols) as usize);
        for e in 0..rows * cols {
            let (r, c) = (e / cols, e % cols);
            let other = (leader + 1 + e % (group - 1).max(1)).min(leader + group - 1);
            let mut invocations = vec![leader, other];
            invocations.dedup();
            for &inv in &invocations {
                self.set_local(m.row, Type::U32, inv, Value::scalar(Scalar::U32(r)))?;
                self.set_local(m.col, Type::U32, inv, Value::scalar(Scalar::U32(c)))?;
                for (a, (value, width)) in m.args.iter().zip(&args) {
                    let Some(&v) = value.get((r * width + c % width) as usize) else {
                        return Err(malformed(leader, "a map argument of another size"));
                    };
                    self.set_local(a.local, Type::scalar(v.ty()), inv, Value::scalar(v))?;
                }
            }
            let mut mask = invocations.clone();
            self.exec_block(&m.body, &mut mask, "body")?;
            let v = self.group_scalar(&m.value, &invocations);
            out.push(v.at(Name("value"))?);
        }
        self.set_fragment(m.dst, warp, out, leader)
    }

    /// `e` on each of `invocations`, which must agree bit for bit.
    fn group_scalar(&mut self, e: &Expr, invocations: &[u32]) -> Res<Scalar> {
        let leader = invocations.first().copied().unwrap_or(0);
        let first = self.scalar_of(e, leader)?;
        for &inv in &invocations[1..] {
            let v = self.scalar_of(e, inv)?;
            if v.ty() != first.ty() || v.to_bits() != first.to_bits() {
                return Err(fault(FaultKind::FragmentOperandDiffers {
                    inv,
                    operand: "map value",
                    expected: first.to_string(),
                    found: v.to_string(),
                }));
            }
        }
        Ok(first)
    }

    fn scalar_of(&mut self, e: &Expr, inv: u32) -> Res<Scalar> {
        self.eval(e, inv)?
            .as_scalar()
            .ok_or_else(|| malformed(inv, "a vector map value"))
    }

    /// Every element of row `r` of `dst` becomes the reduction of row `r` of `srcs`,
    /// in [`row_reduction_order`].
    pub(super) fn exec_reduce_rows(
        &mut self,
        dst: FragmentId,
        srcs: &[FragmentId],
        reduction: RowReduction,
        warp: u32,
    ) -> Res<()> {
        let leader = warp * WARP;
        let (rows, width) = self.fragment_decl(dst, leader)?.dims();
        let first = srcs.first().copied().unwrap_or(dst);
        let shape = self.fragment_decl(first, leader)?.shape;
        let cols = shape.n;
        let values = self.sources(srcs, warp)?;
        let combine = |a: Scalar, b: Scalar| -> Result<Scalar, String> {
            let (a, b) = (Value::scalar(a), Value::scalar(b));
            let v = match reduction {
                RowReduction::Max => eval::math(MathFn::Max, &[a, b]),
                RowReduction::Sum => eval::binary(BinaryOp::Add, a, b),
            }
            .map_err(|e| e.to_string())?;
            v.as_scalar()
                .ok_or_else(|| "a vector reduction".to_string())
        };
        let fold = |items: &mut dyn Iterator<Item = Scalar>| -> Result<Option<Scalar>, String> {
            let mut acc = None;
            for x in items {
                acc = Some(match acc {
                    None => x,
                    Some(a) => combine(a, x)?,
                });
            }
            Ok(acc)
        };
        let order = row_reduction_order(shape, srcs.len());
        let mut out = Vec::with_capacity((rows * width) as usize);
        for r in 0..rows {
            let element = |(s, c): &(usize, u32)| -> Option<Scalar> {
                values.get(*s)?.get((r * cols + c) as usize).copied()
            };
            let mut runs = Vec::with_capacity(order.len());
            for run in &order {
                let items: Option<Vec<Scalar>> = run.iter().map(element).collect();
                let items = items.ok_or_else(|| malformed(leader, "a source of another size"))?;
                let sum = fold(&mut items.into_iter()).map_err(|w| malformed(leader, w))?;
                runs.extend(sum);
            }
            let total = fold(&mut runs.into_iter())
                .map_err(|w| malformed(leader, w))?
                .ok_or_else(|| malformed(leader, "an empty row"))?;
            out.extend(std::iter::repeat_n(total, width as usize));
        }
        self.set_fragment(dst, warp, out, leader)
    }

    /// The values of `srcs` for the group whose first warp is `warp`.
    fn sources(&self, srcs: &[FragmentId], warp: u32) -> Res<Vec<FragmentValue>> {
        srcs.iter()
            .map(|&s| {
                let v = self.fragment_value(s, warp, warp * WARP).at(Name("srcs"))?;
                Ok(v.clone())
            })
            .collect()
    }

    /// `dst[r][c] = cat[r][first + c]` (the sources side by side), rounded to `dst`'s type.
    pub(super) fn exec_convert(
        &mut self,
        dst: FragmentId,
        srcs: &[FragmentId],
        first: u32,
        warp: u32,
    ) -> Res<()> {
        let leader = warp * WARP;
        let decl = self.fragment_decl(dst, leader)?.clone();
        let (rows, cols) = decl.dims();
        let n = match srcs.first() {
            Some(&s) => self.fragment_decl(s, leader)?.shape.n,
            None => decl.shape.n,
        };
        let values = self.sources(srcs, warp)?;
        let mut out = Vec::with_capacity((rows * cols) as usize);
        for r in 0..rows {
            for c in (first..).take(cols as usize) {
                let v = values
                    .get((c / n) as usize)
                    .and_then(|v| v.get((r * n + c % n) as usize))
                    .ok_or_else(|| malformed(leader, "a conversion source of another size"))?;
                out.push(eval::cast_scalar(decl.elem, *v));
            }
        }
        self.set_fragment(dst, warp, out, leader)
    }
}
