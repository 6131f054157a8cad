//! The tile kernel's body: workgroup placement, the slab loop (with register prefetch
//! where the loads unroll), the micro-tile multiply-adds and the epilogue (see the
//! engine's module docs for the schedule).

use super::schedule::{TileKernel, GROUP_M};
use super::stage::{Coord, Side};
use super::{add, div, rem, scale, when_below, BiasAxis, GemmCore};
use crate::lower::math::{bind, Num};
use crate::lower::schedule::{fold_grid, linear_workgroup};
use crate::lower::{Binding, Launch, LowerError, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::Access;

/// Buffers and shared arrays of one tile kernel.
pub(super) struct Mems {
    pub a: Mem,
    pub b: Mem,
    pub bias: Option<Mem>,
    pub c_in: Option<Mem>,
    pub out: Mem,
    pub alpha: Option<E>,
    pub beta: Option<E>,
    pub a_sh: Mem,
    pub b_sh: Mem,
    pub acc_sh: Option<Mem>,
    /// What a NaN's recomputation over the existing terms reads, where operands have
    /// absent elements ([`GemmCore::recompute_buffers`]).
    pub exact: Option<(Mem, Mem)>,
}

impl GemmCore {
    /// Declares what the epilogue reads and writes (bias, prior C, C, alpha, beta)
    /// and records their bindings, in the order every tile kernel binds them.
    pub(super) fn epilogue_buffers(
        &self,
        k: &mut KernelBuilder,
        bindings: &mut Vec<Binding>,
    ) -> EpilogueMems {
        let core = self;
        let compute = core.compute();
        let bias = core.bias.as_ref().map(|bs| {
            let len = match bs.along {
                BiasAxis::Rows => core.m,
                BiasAxis::Cols => core.n,
            };
            bindings.push(bs.binding.clone());
            k.buffer("bias", bs.dtype, len as u64, Access::Read)
        });
        let c_in = core.prior.as_ref().map(|prior| {
            bindings.push(prior.c_in.clone());
            k.buffer("c_in", core.c.dtype, core.c.len, Access::Read)
        });
        bindings.push(core.c.binding.clone());
        let out = k.buffer(core.c.name.clone(), core.c.dtype, core.c.len, Access::Write);
        let alpha = k.scalar("alpha", compute);
        bindings.push(core.alpha.clone());
        let beta = core.prior.as_ref().map(|prior| {
            bindings.push(prior.beta.clone());
            k.scalar("beta", compute)
        });
        EpilogueMems {
            bias,
            c_in,
            out,
            alpha,
            beta,
        }
    }
}

/// What a tile kernel's epilogue reads and writes.
pub(super) struct EpilogueMems {
    pub bias: Option<Mem>,
    pub c_in: Option<Mem>,
    pub out: Mem,
    pub alpha: E,
    pub beta: Option<E>,
}

/// Per-workgroup values of the tile kernel.
pub(super) struct Place {
    pub tid: E,
    pub tx: E,
    pub ty: E,
    pub m0: E,
    pub n0: E,
    pub z: E,
    pub split: E,
    pub off_a: E,
    pub off_b: E,
    pub off_c: E,
}

impl<'a> TileKernel<'a> {
    /// The tile kernel's launch: C through the epilogue, or the raw partial sums into
    /// `partial` when the reduction is split.
    pub(super) fn build(
        &self,
        caps: &TargetCaps,
        partial: Option<&Binding>,
    ) -> Result<Launch, LowerError> {
        let core = self.core;
        let compute = core.compute();
        let grid = self.grid(caps)?;
        let mut k = KernelBuilder::new(
            format!("{}_tile", core.name),
            [self.tile.invocations(), 1, 1],
        );
        let mut bindings = Vec::new();
        let (a, b) = self.operand_buffers(&mut k, &mut bindings);
        // (A split reduction's sum launch recomputes instead.)
        let exact = match self.split {
            None => core.recompute_buffers(&mut k, &mut bindings, Some((a, b))),
            Some(_) => None,
        };
        let (bias, c_in, out, alpha, beta) = match (partial, self.split) {
            (Some(binding), Some(split)) => {
                let len = split.splits as u64
                    * core.batch_count() as u64
                    * core.m as u64
                    * split.ld as u64;
                bindings.push(binding.clone());
                let partial = k.buffer("partial", compute, len, Access::Write);
                (None, None, partial, None, None)
            }
            _ => {
                let e = core.epilogue_buffers(&mut k, &mut bindings);
                (e.bias, e.c_in, e.out, Some(e.alpha), e.beta)
            }
        };
        let t = self.tile;
        let a_sh = k.shared("a_tile", compute, t.bk * self.lda);
        let b_sh = k.shared("b_tile", compute, t.bk * self.ldb);
        let acc_sh = (!t.resident()).then(|| k.shared("acc_tile", compute, t.bm * t.bn));
        let mems = Mems {
            a,
            b,
            bias,
            c_in,
            out,
            alpha,
            beta,
            a_sh,
            b_sh,
            acc_sh,
            exact,
        };
        let kernel = k.build(|f| self.body(f, grid, &mems))?;
        Ok(Launch {
            kernel,
            grid,
            bindings,
        })
    }

    /// The launch grid of [`Self::workgroups`] workgroups (folded onto two axes
    /// where one is not enough).
    pub(super) fn grid(&self, caps: &TargetCaps) -> Result<[u32; 3], LowerError> {
        let count = u32::try_from(self.workgroups()).map_err(|_| LowerError::TooLarge {
            what: format!("{} workgroup count", self.core.name),
            value: self.workgroups(),
            limit: u32::MAX as u64,
        })?;
        fold_grid(count, caps)
    }

    /// Declares A and B (read-only) and records their bindings.
    pub(super) fn operand_buffers(
        &self,
        k: &mut KernelBuilder,
        bindings: &mut Vec<Binding>,
    ) -> (Mem, Mem) {
        let core = self.core;
        let a = k.buffer(core.a.name.clone(), core.a.dtype, core.a.len, Access::Read);
        bindings.push(core.a.binding.clone());
        let b = k.buffer(core.b.name.clone(), core.b.dtype, core.b.len, Access::Read);
        bindings.push(core.b.binding.clone());
        (a, b)
    }

    fn body(&self, f: &mut Body, grid: [u32; 3], m: &Mems) {
        let place = self.place(f, grid);
        let t = self.tile;
        let core = self.core;
        let (begin, end) = match self.split {
            Some(s) => {
                let begin = f.let_("slab_begin", scale(place.split.clone(), s.slabs_per_split));
                let end = f.let_(
                    "slab_end",
                    (begin.clone() + s.slabs_per_split).min(E::from(self.slabs())),
                );
                (begin, end)
            }
            None => (E::from(0u32), E::from(self.slabs())),
        };
        let num = Num {
            ty: core.compute(),
            lanes: t.vn,
        };
        let (steps_m, steps_n) = t.steps();
        let sides = self.sides(m, &place);
        let coords: Vec<Option<Vec<Coord>>> = sides
            .iter()
            .map(|side| self.stage_coords(f, side, &place.tid))
            .collect();
        let stage_slab = |f: &mut Body, slab: &E| {
            let p0 = bind(f, "p0", scale(slab.clone(), t.bk));
            for (side, coords) in sides.iter().zip(&coords) {
                self.stage(f, side, coords.as_deref(), &p0, &place.tid);
            }
        };
        if t.resident() {
            let (row0, col0) = self.micro_origin(&place, E::from(0u32), E::from(0u32));
            let row0 = bind(f, "row0", row0);
            let col0 = bind(f, "col0", col0);
            let acc = self.zero_acc(f, &num);
            let unrolled: Option<Vec<&Vec<Coord>>> = coords.iter().map(|c| c.as_ref()).collect();
            match unrolled {
                Some(unrolled) => {
                    self.pipelined_loop(f, m, &sides, &unrolled, &acc, (&row0, &col0), (begin, end))
                }
                None => f.for_("slab", begin, end, 1, |f, slab| {
                    stage_slab(f, &slab);
                    f.barrier();
                    self.multiply(f, m, &acc, &row0, &col0);
                    f.barrier();
                }),
            }
            let values: Vec<Vec<E>> = acc
                .iter()
                .map(|row| row.iter().map(|v| v.get()).collect())
                .collect();
            self.epilogue(f, m, &place, &row0, &col0, &values);
            return;
        }
        let Some(acc_sh) = m.acc_sh else {
            return;
        };
        // Accumulators live in shared memory between slabs; each invocation zeroes and
        // later reads only its own micro-tiles.
        self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
            for (_, _, index) in self.acc_slots(row0, col0) {
                f.store(acc_sh, index, num.lit(0.0));
            }
        });
        f.for_("slab", begin, end, 1, |f, slab| {
            stage_slab(f, &slab);
            f.barrier();
            self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
                let acc = self.load_acc(f, acc_sh, row0, col0);
                self.multiply(f, m, &acc, row0, col0);
                for (r, cb, index) in self.acc_slots(row0, col0) {
                    f.store(acc_sh, index, acc[r][cb].get());
                }
            });
            f.barrier();
        });
        self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
            let acc = self.load_acc(f, acc_sh, row0, col0);
            let values: Vec<Vec<E>> = acc
                .iter()
                .map(|row| row.iter().map(|v| v.get()).collect())
                .collect();
            self.epilogue(f, m, &place, row0, col0, &values);
        });
    }

    /// The slab loop with register prefetch: the next slab's global loads are issued
    /// before the current slab's multiply-adds, so their latency hides behind them.
    /// Each iteration stores the registers into shared memory, synchronises, fetches
    /// the next slab into the registers and multiplies (the range is never empty).
    #[allow(clippy::too_many_arguments)]
    fn pipelined_loop(
        &self,
        f: &mut Body,
        m: &Mems,
        sides: &[Side],
        coords: &[&Vec<Coord>],
        acc: &[Vec<Var>],
        (row0, col0): (&E, &E),
        (begin, end): (E, E),
    ) {
        let bk = self.tile.bk;
        let regs: Vec<Vec<Var>> = sides
            .iter()
            .zip(coords)
            .map(|(side, cs)| {
                cs.iter()
                    .map(|_| f.var("next", self.side_num(side).lit(0.0)))
                    .collect()
            })
            .collect();
        let fetch_all = |f: &mut Body, p0: &E| {
            for ((side, cs), rs) in sides.iter().zip(coords).zip(&regs) {
                for (c, &reg) in cs.iter().zip(rs) {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.prefetch_item(f, side, c, p0, reg)),
                        None => self.prefetch_item(f, side, c, p0, reg),
                    }
                }
            }
        };
        let first = bind(f, "p_first", scale(begin.clone(), bk));
        fetch_all(f, &first);
        let end = bind(f, "slab_stop", end);
        f.for_("slab", begin, end.clone(), 1, |f, slab| {
            for ((side, cs), rs) in sides.iter().zip(coords).zip(&regs) {
                for (c, reg) in cs.iter().zip(rs) {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.store_shared(f, side, c, reg.get())),
                        None => self.store_shared(f, side, c, reg.get()),
                    }
                }
            }
            f.barrier();
            let next = bind(f, "slab_next", slab + 1u32);
            // Uniform: every invocation agrees on the slab range.
            f.if_(next.clone().lt(end.clone()), |f| {
                let p0 = bind(f, "p_next", scale(next.clone(), bk));
                fetch_all(f, &p0);
            });
            self.multiply(f, m, acc, row0, col0);
            f.barrier();
        });
    }

    /// Workgroup placement: which tile, batch and split this workgroup computes.
    pub(super) fn place(&self, f: &mut Body, grid: [u32; 3]) -> Place {
        let t = self.tile;
        let core = self.core;
        let nt = t.invocations();
        let (tid, tx, ty) = if nt == 1 {
            (E::from(0u32), E::from(0u32), E::from(0u32))
        } else {
            let tid = f.let_("tid", local_id(0));
            let tx = f.let_("tx", rem(tid.clone(), t.tx));
            let ty = f.let_("ty", div(tid.clone(), t.tx));
            (tid, tx, ty)
        };
        let total = self.workgroups() as u32;
        let wg = f.let_("wg", linear_workgroup(grid));
        if grid[0] as u64 * grid[1] as u64 != total as u64 {
            // A folded grid has a few workgroups past the end (uniform: no barrier issue).
            f.if_(wg.clone().ge(total), |f| f.ret());
        }
        let tiles = self.tiles_m * self.tiles_n;
        let (tile, rest) = if total > tiles {
            (
                f.let_("tile", rem(wg.clone(), tiles)),
                f.let_("rest", div(wg, tiles)),
            )
        } else {
            (wg, E::from(0u32))
        };
        let splits = self.split.map_or(1, |s| s.splits);
        let (split, z) = if splits > 1 {
            (
                f.let_("split", rem(rest.clone(), splits)),
                bind(f, "z", div(rest, splits)),
            )
        } else {
            (E::from(0u32), rest)
        };
        let (tm_i, tn_j) = self.tile_coords(f, &tile);
        let m0 = bind(f, "m0", scale(tm_i, t.bm));
        let n0 = bind(f, "n0", scale(tn_j, t.bn));
        let off_a = core.batch_offset(f, "off_a", &z, &core.a.batch_strides, core.a.base);
        let off_b = core.batch_offset(f, "off_b", &z, &core.b.batch_strides, core.b.base);
        let off_c = core.batch_offset(f, "off_c", &z, &core.c.batch_strides, core.c.base);
        Place {
            tid,
            tx,
            ty,
            m0,
            n0,
            z,
            split,
            off_a,
            off_b,
            off_c,
        }
    }

    /// Grouped launch order: `GROUP_M` tile rows are walked column by column, so that
    /// consecutive workgroups reuse the same panels of A and B from cache.
    fn tile_coords(&self, f: &mut Body, tile: &E) -> (E, E) {
        let (tm, tn) = (self.tiles_m, self.tiles_n);
        if tn == 1 {
            return (tile.clone(), E::from(0u32));
        }
        if tm == 1 {
            return (E::from(0u32), tile.clone());
        }
        let g = GROUP_M.min(tm);
        let span = g * tn;
        let group = f.let_("group", div(tile.clone(), span));
        let within = f.let_("within", rem(tile.clone(), span));
        let first = bind(f, "first_m", scale(group, g));
        if tm % g == 0 {
            let tile_m = f.let_("tile_m", add(first, rem(within.clone(), g)));
            let tile_n = f.let_("tile_n", div(within, g));
            (tile_m, tile_n)
        } else {
            let size = f.let_("group_size", (E::from(tm) - first.clone()).min(E::from(g)));
            let tile_m = f.let_("tile_m", first + within.clone() % size.clone());
            let tile_n = f.let_("tile_n", within / size);
            (tile_m, tile_n)
        }
    }

    /// Shared coordinates of a micro-tile's first row and column vector.
    fn micro_origin(&self, place: &Place, mi: E, mj: E) -> (E, E) {
        let t = self.tile;
        let row0 = add(scale(mi, t.tm * t.ty), scale(place.ty.clone(), t.vm as u32));
        let col0 = add(scale(mj, t.tn * t.tx), scale(place.tx.clone(), t.vn as u32));
        (row0, col0)
    }

    /// Shared row of micro-tile row `r` relative to `row0`.
    fn row_offset(&self, r: u32) -> u32 {
        let t = self.tile;
        let vm = t.vm as u32;
        (r / vm) * t.ty * vm + r % vm
    }

    /// Shared column of accumulator vector `cb` relative to `col0`.
    fn col_offset(&self, cb: u32) -> u32 {
        let t = self.tile;
        cb * t.tx * t.vn as u32
    }

    /// `(row, vector, shared index)` of every accumulator of a micro-tile in `acc_tile`.
    fn acc_slots(&self, row0: &E, col0: &E) -> Vec<(usize, usize, E)> {
        let t = self.tile;
        let mut v = Vec::new();
        for r in 0..t.tm {
            for cb in 0..t.tn / t.vn as u32 {
                let row = add(row0.clone(), E::from(self.row_offset(r)));
                let col = add(col0.clone(), E::from(self.col_offset(cb)));
                v.push((r as usize, cb as usize, add(scale(row, t.bn), col)));
            }
        }
        v
    }

    fn for_micro_tiles(
        &self,
        f: &mut Body,
        place: &Place,
        steps_m: u32,
        steps_n: u32,
        body: impl Fn(&mut Body, &E, &E),
    ) {
        f.for_("mi", 0u32, steps_m, 1, |f, mi| {
            f.for_("mj", 0u32, steps_n, 1, |f, mj| {
                let (row0, col0) = self.micro_origin(place, mi, mj);
                let row0 = bind(f, "row0", row0);
                let col0 = bind(f, "col0", col0);
                body(f, &row0, &col0);
            });
        });
    }

    fn zero_acc(&self, f: &mut Body, num: &Num) -> Vec<Vec<Var>> {
        let t = self.tile;
        (0..t.tm)
            .map(|_| {
                (0..t.tn / t.vn as u32)
                    .map(|_| f.var("acc", num.lit(0.0)))
                    .collect()
            })
            .collect()
    }

    /// The accumulators of a micro-tile, loaded from `acc_tile` (slots are listed row by
    /// row, vector by vector).
    fn load_acc(&self, f: &mut Body, acc_sh: Mem, row0: &E, col0: &E) -> Vec<Vec<Var>> {
        let t = self.tile;
        let mut acc: Vec<Vec<Var>> = vec![Vec::new(); t.tm as usize];
        for (r, _, index) in self.acc_slots(row0, col0) {
            let var = f.var("acc", acc_sh.load(index, t.vn));
            acc[r].push(var);
        }
        acc
    }

    /// Accumulates the staged slab into one micro-tile.
    fn multiply(&self, f: &mut Body, m: &Mems, acc: &[Vec<Var>], row0: &E, col0: &E) {
        let t = self.tile;
        if t.unroll >= t.bk {
            for kk in 0..t.bk {
                let a_at = add(row0.clone(), E::from(kk * self.lda));
                let b_at = add(col0.clone(), E::from(kk * self.ldb));
                self.step(f, m, acc, a_at, b_at);
            }
        } else {
            f.for_("kk", 0u32, t.bk, t.unroll, |f, kb| {
                let a_row = bind(f, "a_row", add(scale(kb.clone(), self.lda), row0.clone()));
                let b_row = bind(f, "b_row", add(scale(kb, self.ldb), col0.clone()));
                for u in 0..t.unroll {
                    let a_at = add(a_row.clone(), E::from(u * self.lda));
                    let b_at = add(b_row.clone(), E::from(u * self.ldb));
                    self.step(f, m, acc, a_at, b_at);
                }
            });
        }
    }

    /// One reduction step: `acc[r][c] += a[r] · b[c]` for the micro-tile, reading the
    /// staged row of A from `a_at` and of B from `b_at`.
    fn step(&self, f: &mut Body, m: &Mems, acc: &[Vec<Var>], a_at: E, b_at: E) {
        let t = self.tile;
        let (vm, vn) = (t.vm as u32, t.vn as u32);
        let a_base = bind(f, "a_at", a_at);
        let b_base = bind(f, "b_at", b_at);
        let mut a_vals = Vec::with_capacity(t.tm as usize);
        for ca in 0..t.tm / vm {
            let v = f.let_(
                "a",
                m.a_sh
                    .load(add(a_base.clone(), E::from(ca * t.ty * vm)), t.vm),
            );
            for l in 0..vm {
                let scalar = if vm == 1 {
                    v.clone()
                } else {
                    v.clone().lane(l as u8)
                };
                a_vals.push(if vn == 1 {
                    bind(f, "ar", scalar)
                } else {
                    f.let_("ar", scalar.splat(t.vn))
                });
            }
        }
        let b_vals: Vec<E> = (0..t.tn / vn)
            .map(|cb| {
                f.let_(
                    "b",
                    m.b_sh
                        .load(add(b_base.clone(), E::from(self.col_offset(cb))), t.vn),
                )
            })
            .collect();
        for (r, a) in a_vals.iter().enumerate() {
            for (cb, b) in b_vals.iter().enumerate() {
                let var = acc[r][cb];
                f.assign(var, a.clone().fma(b.clone(), var.get()));
            }
        }
    }

    /// Writes a finished micro-tile: the epilogue into C, or the raw partial sums.
    fn epilogue(&self, f: &mut Body, m: &Mems, place: &Place, row0: &E, col0: &E, acc: &[Vec<E>]) {
        let t = self.tile;
        let core = self.core;
        let first_col = add(place.n0.clone(), col0.clone());
        let cols: Vec<E> = (0..t.tn / t.vn as u32)
            .map(|cb| {
                bind(
                    f,
                    "col",
                    add(first_col.clone(), E::from(self.col_offset(cb))),
                )
            })
            .collect();
        let first_row = add(place.m0.clone(), row0.clone());
        for (r, acc_row) in acc.iter().enumerate() {
            let row = bind(
                f,
                "row",
                add(first_row.clone(), E::from(self.row_offset(r as u32))),
            );
            let body = |f: &mut Body| {
                let row_at = match self.split {
                    Some(s) => {
                        let slice = add(
                            scale(place.split.clone(), core.batch_count()),
                            place.z.clone(),
                        );
                        scale(add(scale(slice, core.m), row.clone()), s.ld)
                    }
                    None => add(place.off_c.clone(), scale(row.clone(), core.c.ld)),
                };
                let row_at = bind(f, "row_at", row_at);
                let row_bias = match self.split {
                    None => self.row_bias(f, m, &row),
                    Some(_) => None,
                };
                for (col, value) in cols.iter().zip(acc_row) {
                    let index = add(row_at.clone(), col.clone());
                    if self.split.is_some() {
                        self.store_partial(f, m, index, col, value.clone());
                    } else {
                        self.store_result(f, m, index, col, row_bias.clone(), value.clone());
                    }
                }
            };
            if core.m % t.bm == 0 {
                body(f);
            } else {
                when_below(f, &row, core.m, body);
            }
        }
        if let Some(terms) = m.exact {
            self.recompute_nan(f, m, terms, place, (&first_row, &first_col), acc);
        }
    }

    /// Stores raw sums into the split-K partial buffer. Its rows are padded to whole
    /// vectors, so a vector that starts inside a row ends inside it.
    fn store_partial(&self, f: &mut Body, m: &Mems, index: E, col: &E, value: E) {
        let core = self.core;
        if core.n % self.tile.bn == 0 {
            f.store(m.out, index, value);
        } else {
            when_below(f, col, core.n, |f| f.store(m.out, index, value));
        }
    }

    /// Stores `vn` columns of C from `index`: one vector store when C's placement is
    /// vector-aligned, else one guarded scalar store per column.
    fn store_result(
        &self,
        f: &mut Body,
        m: &Mems,
        index: E,
        col: &E,
        row_bias: Option<E>,
        value: E,
    ) {
        let core = self.core;
        let t = self.tile;
        let vn = t.vn as u32;
        if vn == 1 || self.c_vector {
            let finish = |f: &mut Body| {
                let index = bind(f, "c_at", index);
                let v = self.finish_value(f, m, &index, col, row_bias.clone(), value.clone(), t.vn);
                f.store(m.out, index, v);
            };
            if core.n % t.bn == 0 {
                finish(f);
            } else {
                when_below(f, col, core.n, finish);
            }
            return;
        }
        let index = bind(f, "c_at", index);
        for lane in 0..vn {
            let col_l = add(col.clone(), E::from(lane));
            let index_l = add(index.clone(), E::from(lane));
            let lane_value = value.clone().lane(lane as u8);
            when_below(f, &col_l, core.n, |f| {
                let v = self.finish_value(f, m, &index_l, &col_l, row_bias.clone(), lane_value, 1);
                f.store(m.out, index_l.clone(), v);
            });
        }
    }

    /// `act(alpha·acc + beta·C_in (+ bias))`, rounded to C's type, for `lanes` columns.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_value(
        &self,
        f: &mut Body,
        m: &Mems,
        index: &E,
        col: &E,
        row_bias: Option<E>,
        acc: E,
        lanes: u8,
    ) -> E {
        let core = self.core;
        let num = Num {
            ty: core.compute(),
            lanes,
        };
        let splat = |e: E| if lanes == 1 { e } else { e.splat(lanes) };
        let mut v = match &m.alpha {
            Some(alpha) => splat(alpha.clone()) * acc,
            None => acc,
        };
        if let (Some(c_in), Some(beta)) = (m.c_in, &m.beta) {
            v = v + splat(beta.clone()) * num.load(c_in, core.c.dtype, index.clone());
        }
        if let (Some(bs), Some(mem)) = (&core.bias, m.bias) {
            v = match (bs.along, row_bias) {
                (BiasAxis::Rows, Some(rb)) => v + splat(rb),
                _ => v + num.load(mem, bs.dtype, col.clone()),
            };
        }
        core.stored_value(f, &num, v)
    }
}
