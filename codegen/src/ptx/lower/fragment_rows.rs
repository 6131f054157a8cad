//! The fragment statements that compute on a thread's share of accumulators in
//! registers (`map`, `reduce_rows`, `convert`; see `kernelc_ir::fragment`).
//!
//! Every accumulator layout (`mma.sync`'s and `wgmma`'s D) gives a row to the four
//! lanes of a quad (`t = lane mod 4` only moves the column): a row reduction is each
//! thread's elements of that row, then two butterfly shuffles across the quad. The
//! `A` layout of `m16n8k16` (and `m16n8k8`) puts each element at a row and column that
//! one of the accumulators side by side holds in the same thread, so `convert` is a
//! rounding per register (FlashAttention-2's reuse of `P`).

use super::fragment::{share, Coord};
use super::value::Val;
use super::{internal, Lower, OrInternal};
use crate::CodegenError;
use inkwell::values::{BasicValueEnum, FloatValue};
use kernelc_ir::fragment::{FragmentMap, FragmentRole, RowReduction};
use kernelc_ir::{FragmentId, MathFn, ScalarType};

impl<'ctx> Lower<'_, 'ctx> {
    /// Per element of the thread's share: the bound locals, the body, the value.
    /// Element `e` reads only element `e` of each argument, so `dst` may be one.
    pub(super) fn fragment_map(&mut self, m: &FragmentMap) -> Result<(), CodegenError> {
        let decl = self.fragment_decl(m.dst)?;
        let coords = share(decl.role, decl.shape, decl.elem);
        let quad = self.lane_quad()?;
        let dst = self.fragment_slots(m.dst)?;
        let mut args = Vec::with_capacity(m.args.len());
        for a in &m.args {
            let arg = self.fragment_decl(a.frag)?;
            // Element `(r, c mod n)` of a narrower argument: the register of this
            // thread at that row and column (the same rows lie in the same threads).
            let own = share(arg.role, arg.shape, arg.elem);
            let all = self.fragment_slots(a.frag)?;
            let mut slots = Vec::with_capacity(coords.len());
            for (r, c) in &coords {
                let c = Coord {
                    c: c.c % arg.shape.n,
                    ..*c
                };
                let i = own
                    .iter()
                    .position(|(ar, ac)| ar == r && *ac == c)
                    .ok_or_else(|| internal("a map argument holds no such element"))?;
                slots.push(all[i]);
            }
            args.push((a.local, arg.elem, slots));
        }
        for (e, (r, c)) in coords.iter().enumerate() {
            let row = self.coord(*r, quad)?;
            let col = self.coord(*c, quad)?;
            self.write_local(m.row, &Val::scalar(ScalarType::U32, row.into()))?;
            self.write_local(m.col, &Val::scalar(ScalarType::U32, col.into()))?;
            for (local, elem, slots) in &args {
                let slot = *slots
                    .get(e)
                    .ok_or_else(|| internal("a map argument's share"))?;
                let v = self
                    .b
                    .build_load(self.scalar_type(*elem), slot, "")
                    .or_internal()?;
                self.write_local(*local, &Val::scalar(*elem, v))?;
            }
            self.block(&m.body)?;
            let v = self.expr(&m.value)?.first()?;
            let slot = *dst.get(e).ok_or_else(|| internal("a map's share"))?;
            self.b.build_store(slot, v).or_internal()?;
        }
        Ok(())
    }

    /// Each thread reduces its elements of a row across every source (in order), then
    /// the quad's four partial results meet by two butterfly shuffles.
    pub(super) fn reduce_rows(
        &mut self,
        dst: FragmentId,
        srcs: &[FragmentId],
        reduction: RowReduction,
    ) -> Result<(), CodegenError> {
        let decl = self.fragment_decl(dst)?;
        let first = srcs.first().copied().unwrap_or(dst);
        let source = self.fragment_decl(first)?;
        let coords = share(FragmentRole::Accumulator, source.shape, source.elem);
        let ty = self.scalar_type(decl.elem);
        // The thread's distinct rows, in register order.
        let mut rows: Vec<Coord> = Vec::new();
        for (r, _) in &coords {
            if !rows.contains(r) {
                rows.push(*r);
            }
        }
        let mut totals = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut acc: Option<FloatValue<'ctx>> = None;
            for &src in srcs {
                let slots = self.fragment_slots(src)?;
                for (slot, (r, _)) in slots.iter().zip(&coords) {
                    if r != row {
                        continue;
                    }
                    let v = self.b.build_load(ty, *slot, "").or_internal()?;
                    let v = v.into_float_value();
                    acc = Some(match acc {
                        None => v,
                        Some(a) => self.combine(reduction, a, v)?,
                    });
                }
            }
            let mut v = acc.ok_or_else(|| internal("a row without elements"))?;
            for lanes in [1u64, 2] {
                let other = self.shuffle_xor(decl.elem, v.into(), lanes)?;
                v = self.combine(reduction, v, other.into_float_value())?;
            }
            totals.push(v);
        }
        let slots = self.fragment_slots(dst)?;
        for (slot, (r, _)) in slots.iter().zip(share(decl.role, decl.shape, decl.elem)) {
            let i = rows
                .iter()
                .position(|x| *x == r)
                .ok_or_else(|| internal("a row of the share"))?;
            self.b.build_store(*slot, totals[i]).or_internal()?;
        }
        Ok(())
    }

    fn combine(
        &mut self,
        reduction: RowReduction,
        a: FloatValue<'ctx>,
        b: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        match reduction {
            RowReduction::Max => self.float_math(MathFn::Max, &[a, b]),
            RowReduction::Sum => self.b.build_float_add(a, b, "").or_internal(),
        }
    }

    /// `v` of the lane `lane ^ mask` (a full warp takes part: fragment statements are
    /// in uniform control flow).
    fn shuffle_xor(
        &self,
        elem: ScalarType,
        v: BasicValueEnum<'ctx>,
        mask: u64,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let all = i32t.const_int(0xffff_ffff, false);
        let lanes = i32t.const_int(mask, false);
        let clamp = i32t.const_int(0x1f, false);
        let word = |w: BasicValueEnum<'ctx>| {
            self.call_intrinsic(
                "llvm.nvvm.shfl.sync.bfly.i32",
                &[],
                &[all.into(), w, lanes.into(), clamp.into()],
            )
        };
        match elem {
            ScalarType::F32 => {
                let bits = self.b.build_bit_cast(v, i32t, "").or_internal()?;
                let got = word(bits)?;
                self.b
                    .build_bit_cast(got, self.ctx.f32_type(), "")
                    .or_internal()
            }
            ScalarType::F64 => {
                let i64t = self.ctx.i64_type();
                let bits = self.b.build_bit_cast(v, i64t, "").or_internal()?;
                let bits = bits.into_int_value();
                let lo = self.b.build_int_truncate(bits, i32t, "").or_internal()?;
                let hi = self
                    .b
                    .build_right_shift(bits, i64t.const_int(32, false), false, "")
                    .or_internal()?;
                let hi = self.b.build_int_truncate(hi, i32t, "").or_internal()?;
                let lo = word(lo.into())?.into_int_value();
                let hi = word(hi.into())?.into_int_value();
                let lo = self.b.build_int_z_extend(lo, i64t, "").or_internal()?;
                let hi = self.b.build_int_z_extend(hi, i64t, "").or_internal()?;
                let hi = self
                    .b
                    .build_left_shift(hi, i64t.const_int(32, false), "")
                    .or_internal()?;
                let bits = self.b.build_or(hi, lo, "").or_internal()?;
                self.b
                    .build_bit_cast(bits, self.ctx.f64_type(), "")
                    .or_internal()
            }
            other => Err(internal(format!("a row reduction of {other}"))),
        }
    }

    /// Each register of `A` from the accumulator (of the sources side by side) that
    /// holds its row and column in this thread, rounded.
    pub(super) fn convert_fragments(
        &mut self,
        dst: FragmentId,
        srcs: &[FragmentId],
        first: u32,
    ) -> Result<(), CodegenError> {
        let decl = self.fragment_decl(dst)?;
        let src_decl = match srcs.first() {
            Some(&src) => self.fragment_decl(src)?,
            None => return Err(internal("a conversion without sources")),
        };
        let n = src_decl.shape.n;
        let acc_coords = share(FragmentRole::Accumulator, src_decl.shape, src_decl.elem);
        let dst_slots = self.fragment_slots(dst)?;
        for (slot, (r, c)) in dst_slots
            .iter()
            .zip(share(decl.role, decl.shape, decl.elem))
        {
            // `first` is a multiple of 8: the register's column term stays `c.c`'s.
            let at = first + c.c;
            let source = (at / n) as usize;
            let col = Coord { c: at % n, ..c };
            let element = acc_coords
                .iter()
                .position(|(ar, ac)| *ar == r && *ac == col)
                .ok_or_else(|| internal("an A register no accumulator register matches"))?;
            let src = *srcs
                .get(source)
                .ok_or_else(|| internal("a conversion source past the list"))?;
            let from = self.fragment_decl(src)?.elem;
            let src_slot = *self
                .fragment_slots(src)?
                .get(element)
                .ok_or_else(|| internal("an accumulator's share"))?;
            let v = self
                .b
                .build_load(self.scalar_type(from), src_slot, "")
                .or_internal()?;
            let v = self.cast_scalar(from, decl.elem, v)?;
            self.b.build_store(*slot, v).or_internal()?;
        }
        Ok(())
    }
}
