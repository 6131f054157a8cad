//! Staging: a slab of each operand is loaded from global memory (coalesced, vector
//! loads where the staging plan allows, zero outside the operand, converted once) and
//! stored reduction-major into shared memory, directly or one slab ahead through
//! registers.

use super::kernel::{Mems, Place};
use super::schedule::{Stage, TileKernel};
use super::{add, and_opt, div, rem, scale, Axis, GemmOperand};
use crate::lower::math::{bind, Num};
use kernelc_ir::builder::*;

/// One operand's side of a tile kernel: its staging plan, shared row length, extent
/// and this workgroup's tile origin and batch offset.
pub(super) struct Side<'k> {
    pub op: &'k GemmOperand,
    pub plan: Stage,
    pub ld: u32,
    pub outer_len: u32,
    pub tile_outer: u32,
    pub mem: Mem,
    pub sh: Mem,
    pub r0: E,
    pub off: E,
}

/// Where one of an invocation's staging loads goes in the tile.
pub(super) struct Coord {
    /// `e < items` when the last round of loads is partial.
    pub guard: Option<E>,
    pub o: E,
    pub p: E,
    pub r: E,
}

impl<'a> TileKernel<'a> {
    /// The A and B sides of the kernel, with this workgroup's tile origin and batch
    /// offset.
    pub(super) fn sides<'s>(&'s self, m: &Mems, place: &Place) -> [Side<'s>; 2] {
        let core = self.core;
        [
            Side {
                op: &core.a,
                plan: self.stage_a,
                ld: self.lda,
                outer_len: core.m,
                tile_outer: self.tile.bm,
                mem: m.a,
                sh: m.a_sh,
                r0: place.m0.clone(),
                off: place.off_a.clone(),
            },
            Side {
                op: &core.b,
                plan: self.stage_b,
                ld: self.ldb,
                outer_len: core.n,
                tile_outer: self.tile.bn,
                mem: m.b,
                sh: m.b_sh,
                r0: place.n0.clone(),
                off: place.off_b.clone(),
            },
        ]
    }

    /// Loads per invocation per slab of one side.
    fn items(&self, side: &Side) -> (u32, u32) {
        let items = side.tile_outer * self.tile.bk / side.plan.lanes as u32;
        (items, items.div_ceil(self.tile.invocations()))
    }

    /// The slab-invariant coordinates of this invocation's loads, computed once before
    /// the slab loop; `None` when there are too many to unroll (then each slab loops).
    pub(super) fn stage_coords(&self, f: &mut Body, side: &Side, tid: &E) -> Option<Vec<Coord>> {
        let (items, per_invocation) = self.items(side);
        if per_invocation > 8 {
            return None;
        }
        let nt = self.tile.invocations();
        let mut coords = Vec::new();
        for q in 0..per_invocation {
            let e = bind(f, "e", add(tid.clone(), E::from(q * nt)));
            let guard = ((q + 1) * nt > items).then(|| e.clone().lt(items));
            coords.push(self.coord(f, side, e, guard));
        }
        Some(coords)
    }

    /// Tile coordinates `(o, p)` of load `e` and the matrix row `r0 + o`: neighbouring
    /// invocations take neighbouring addresses along the operand's contiguous axis.
    fn coord(&self, f: &mut Body, side: &Side, e: E, guard: Option<E>) -> Coord {
        let lanes = side.plan.lanes as u32;
        let (o, p) = match side.plan.axis {
            Axis::Outer => {
                let w = side.tile_outer / lanes;
                (scale(rem(e.clone(), w), lanes), div(e, w))
            }
            Axis::Reduction => {
                let w = self.tile.bk / lanes;
                (div(e.clone(), w), scale(rem(e, w), lanes))
            }
        };
        let o = bind(f, "o", o);
        let p = bind(f, "p", p);
        let r = bind(f, "r", add(side.r0.clone(), o.clone()));
        Coord { guard, o, p, r }
    }

    /// Stages the slab starting at reduction index `p0` of one side into shared memory.
    pub(super) fn stage(
        &self,
        f: &mut Body,
        side: &Side,
        coords: Option<&[Coord]>,
        p0: &E,
        tid: &E,
    ) {
        match coords {
            Some(coords) => {
                for c in coords {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.stage_item(f, side, c, p0)),
                        None => self.stage_item(f, side, c, p0),
                    }
                }
            }
            None => {
                let (items, _) = self.items(side);
                f.for_("e", tid.clone(), items, self.tile.invocations(), |f, e| {
                    let c = self.coord(f, side, e, None);
                    self.stage_item(f, side, &c, p0);
                });
            }
        }
    }

    /// The global index of a slab element and whether it is inside the operand (`None`:
    /// always).
    fn locate(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E) -> (E, Option<E>) {
        let t = self.tile;
        let core = self.core;
        let pk = bind(f, "pk", add(p0.clone(), c.p.clone()));
        let (offset, inside) = side.op.gather.address(f, &c.r, &pk);
        let mut valid = None;
        if side.outer_len % side.tile_outer != 0 {
            valid = Some(c.r.clone().lt(side.outer_len));
        }
        if core.k % t.bk != 0 {
            valid = and_opt(valid, Some(pk.clone().lt(core.k)));
        }
        (add(side.off.clone(), offset), and_opt(valid, inside))
    }

    /// The numeric context of one side's loads.
    pub(super) fn side_num(&self, side: &Side) -> Num {
        Num {
            ty: self.core.compute(),
            lanes: side.plan.lanes,
        }
    }

    /// The element (or vector) at `index`, in the compute type, rounded first when the
    /// GEMM rounds its inputs.
    fn fetch(&self, f: &mut Body, side: &Side, index: E) -> E {
        self.core
            .load_operand(f, &self.side_num(side), side.mem, side.op, index)
    }

    /// Loads one element (or vector) of a slab, zero outside the operand, and stores it
    /// into shared memory.
    fn stage_item(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E) {
        let (index, valid) = self.locate(f, side, c, p0);
        let value = match valid {
            None => {
                let v = self.fetch(f, side, index);
                bind(f, "v", v)
            }
            Some(cond) => {
                let v = f.var("v", self.side_num(side).lit(0.0));
                f.if_(cond, |f| {
                    let value = self.fetch(f, side, index);
                    f.assign(v, value)
                });
                v.get()
            }
        };
        self.store_shared(f, side, c, value);
    }

    /// Loads one element (or vector) of a slab into the register `reg` (zero outside
    /// the operand), to be stored into shared memory one slab later.
    pub(super) fn prefetch_item(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E, reg: Var) {
        let (index, valid) = self.locate(f, side, c, p0);
        match valid {
            None => {
                let v = self.fetch(f, side, index);
                f.assign(reg, v)
            }
            Some(cond) => f.if_else(
                cond,
                |f| {
                    let v = self.fetch(f, side, index.clone());
                    f.assign(reg, v)
                },
                |f| f.assign(reg, self.side_num(side).lit(0.0)),
            ),
        }
    }

    /// Stores a staged value reduction-major into the side's shared tile.
    pub(super) fn store_shared(&self, f: &mut Body, side: &Side, c: &Coord, value: E) {
        let (plan, ld) = (side.plan, side.ld);
        let lanes = plan.lanes as u32;
        let at = |lane: u32| {
            let (p, o) = match plan.axis {
                Axis::Outer => (c.p.clone(), add(c.o.clone(), E::from(lane))),
                Axis::Reduction => (add(c.p.clone(), E::from(lane)), c.o.clone()),
            };
            add(scale(p, ld), o)
        };
        if lanes == 1 || plan.axis == Axis::Outer && ld % lanes == 0 {
            f.store(side.sh, at(0), value);
        } else {
            for lane in 0..lanes {
                f.store(side.sh, at(lane), value.clone().lane(lane as u8));
            }
        }
    }
}
