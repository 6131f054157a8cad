//! Sums over the existing terms only, for operands with absent elements (see "Absent
//! elements" in the engine's module docs): the definition's `Σ_p A(i, p)·B(p, j)`
//! element by element, which replaces a tiled sum that came out NaN.

use super::kernel::{Mems, Place};
use super::schedule::TileKernel;
use super::{add, and_opt, div, rem, scale, BiasAxis, GemmCore, GemmOperand};
use crate::lower::math::{bind, Num};
use crate::lower::Binding;
use kernelc_ir::builder::*;
use kernelc_ir::Access;

impl GemmCore {
    /// The operands the sums are defined over: the op's own, also where `a` and `b`
    /// are packed copies of them.
    fn defining(&self) -> [&GemmOperand; 2] {
        match &self.packed_from {
            Some(own) => [&own[0], &own[1]],
            None => [&self.a, &self.b],
        }
    }

    /// Whether an operand has elements that do not exist (read as zero by the slab
    /// loads, or zeros in a packed copy), so that a NaN sum may hold a `0·∞` term the
    /// definition does not have.
    pub(super) fn has_absent(&self) -> bool {
        self.defining().iter().any(|op| op.gather.has_absent())
    }

    /// The buffers [`GemmCore::exact_dot`] reads, where operands have absent
    /// elements: `bound` (the operands a kernel binds already) unless they are
    /// packed copies or not bound, else the op's own operands, bound here as two
    /// more parameters.
    pub(super) fn recompute_buffers(
        &self,
        k: &mut KernelBuilder,
        bindings: &mut Vec<Binding>,
        bound: Option<(Mem, Mem)>,
    ) -> Option<(Mem, Mem)> {
        if !self.has_absent() {
            return None;
        }
        if let (None, Some(mems)) = (&self.packed_from, bound) {
            return Some(mems);
        }
        let [a, b] = self.defining();
        let mut declare = |op: &GemmOperand| {
            bindings.push(op.binding.clone());
            k.buffer(format!("{}_terms", op.name), op.dtype, op.len, Access::Read)
        };
        let a = declare(a);
        let b = declare(b);
        Some((a, b))
    }

    /// Element `index` of operand `op` bound to `mem`, in the compute type (`num`'s
    /// lanes), rounded first when the GEMM rounds its inputs.
    pub(super) fn load_operand(
        &self,
        f: &mut Body,
        num: &Num,
        mem: Mem,
        op: &GemmOperand,
        index: E,
    ) -> E {
        let v = num.load(mem, op.dtype, index);
        match self.input_rounding.map(|r| (r, r.storage())) {
            Some((_, Some(to))) => v.cast(to).cast(num.ty),
            Some((_, None)) => num.round_to_tf32(bind(f, "unrounded", v)),
            None => v,
        }
    }

    /// `Σ_p A(i, p)·B(p, j)` of batch entry `z` over the `p` where both elements
    /// exist, in order of `p` with one `fma` per term as the tiled sum adds them; `a`
    /// and `b` are the buffers [`GemmCore::recompute_buffers`] gave. `i < m` and
    /// `j < n`.
    pub(super) fn exact_dot(&self, f: &mut Body, (a, b): (Mem, Mem), z: &E, i: &E, j: &E) -> E {
        let [op_a, op_b] = self.defining();
        let off_a = self.batch_offset(f, "exact_off_a", z, &op_a.batch_strides, op_a.base);
        let off_b = self.batch_offset(f, "exact_off_b", z, &op_b.batch_strides, op_b.base);
        let num = Num::scalar(self.compute());
        let sum = f.var("exact", num.lit(0.0));
        f.for_("ep", 0u32, self.k, 1, |f, p| {
            let (at_a, in_a) = op_a.gather.address(f, i, &p);
            let (at_b, in_b) = op_b.gather.address(f, j, &p);
            // Loaded only where both exist: an absent element's offset may lie outside.
            let term = |f: &mut Body| {
                let x = self.load_operand(f, &num, a, op_a, add(off_a.clone(), at_a));
                let y = self.load_operand(f, &num, b, op_b, add(off_b.clone(), at_b));
                f.assign(sum, x.fma(y, sum.get()))
            };
            match and_opt(in_a, in_b) {
                Some(exists) => f.if_(exists, term),
                None => term(f),
            }
        });
        sum.get()
    }
}

impl<'a> TileKernel<'a> {
    /// After a micro-tile's epilogue (`first_row`, `first_col`: its first element in C):
    /// if its accumulators `acc` sum to NaN, every element of it is summed again over the
    /// existing terms ([`GemmCore::exact_dot`]) and stored again through the epilogue.
    pub(super) fn recompute_nan(
        &self,
        f: &mut Body,
        m: &Mems,
        terms: (Mem, Mem),
        place: &Place,
        (first_row, first_col): (&E, &E),
        acc: &[Vec<E>],
    ) {
        let t = self.tile;
        let core = self.core;
        let (vm, vn) = (t.vm as u32, t.vn as u32);
        let Some(total) = acc.iter().flatten().cloned().reduce(|x, y| x + y) else {
            return;
        };
        let total = bind(f, "tile_sum", total);
        let total = if vn == 1 {
            total
        } else {
            let lanes = (1..vn).map(|l| total.clone().lane(l as u8));
            bind(
                f,
                "tile_sum",
                lanes.fold(total.clone().lane(0), |s, x| s + x),
            )
        };
        f.if_(total.clone().ne(total), |f| {
            f.for_("er", 0u32, t.tm, 1, |f, r| {
                // Micro-tile row `r` is shared row `(r / vm)·ty·vm + r % vm` (see
                // `row_offset`), column `c` is `(c / vn)·tx·vn + c % vn`.
                let below = add(scale(div(r.clone(), vm), t.ty * vm), rem(r, vm));
                let row = bind(f, "e_row", add(first_row.clone(), below));
                f.if_(row.clone().lt(core.m), |f| {
                    let row_bias = self.row_bias(f, m, &row);
                    f.for_("ec", 0u32, t.tn, 1, |f, c| {
                        let right = add(scale(div(c.clone(), vn), t.tx * vn), rem(c, vn));
                        let col = bind(f, "e_col", add(first_col.clone(), right));
                        f.if_(col.clone().lt(core.n), |f| {
                            let sum = core.exact_dot(f, terms, &place.z, &row, &col);
                            let at = add(scale(row.clone(), core.c.ld), col.clone());
                            let index = bind(f, "e_at", add(place.off_c.clone(), at));
                            let v = self.finish_value(f, m, &index, &col, row_bias.clone(), sum, 1);
                            f.store(m.out, index, v);
                        });
                    });
                });
            });
        });
    }

    /// The bias of C's row `row`, where the bias follows rows.
    pub(super) fn row_bias(&self, f: &mut Body, m: &Mems, row: &E) -> Option<E> {
        match (&self.core.bias, m.bias) {
            (Some(bs), Some(mem)) if bs.along == BiasAxis::Rows => Some(bind(
                f,
                "row_bias",
                Num::scalar(self.core.compute()).load(mem, bs.dtype, row.clone()),
            )),
            _ => None,
        }
    }
}
