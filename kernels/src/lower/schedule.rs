//! Schedule building blocks shared by every op family: how work is cut into
//! workgroups, how a workgroup's invocations share it, and grids that respect the
//! per-axis workgroup limit.
//!
//! The one idiom everything uses: a workgroup owns a contiguous chunk of items, and
//! its invocations walk the chunk with a stride of the workgroup size. On a GPU
//! (256 invocations) neighbouring invocations touch neighbouring items (coalesced); on
//! a CPU (one invocation) the same loop is a plain contiguous loop.

use super::tile::and_opt;
use super::{LowerError, TargetCaps};
use kernelc_ir::builder::*;

/// How `items` independent items are spread over a 1-D launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid1d {
    /// Invocations per workgroup (along x).
    pub invocations: u32,
    /// Items one workgroup owns.
    pub chunk: u32,
    /// Number of workgroups in all.
    pub workgroups: u32,
    /// The launch grid: `workgroups` folded into x and y when x would exceed the limit.
    pub grid: [u32; 3],
    /// Total items.
    pub items: u32,
}

/// Items a CPU workgroup (one invocation) owns: enough to amortise scheduling, few
/// enough that both cores get many workgroups.
const CPU_CHUNK: u32 = 4096;

/// Plans `items` items with `per_invocation` items per GPU invocation.
pub fn plan_1d(items: u64, caps: &TargetCaps, per_invocation: u32) -> Result<Grid1d, LowerError> {
    let items = u32::try_from(items).map_err(|_| LowerError::TooLarge {
        what: "element count".into(),
        value: items,
        limit: u32::MAX as u64,
    })?;
    let invocations = caps.invocations_1d();
    let chunk = if caps.is_serial() {
        CPU_CHUNK
    } else {
        invocations * per_invocation.max(1)
    };
    let workgroups = items.div_ceil(chunk).max(1);
    let grid = fold_grid(workgroups, caps)?;
    Ok(Grid1d {
        invocations,
        chunk,
        workgroups,
        grid,
        items,
    })
}

/// Folds a workgroup count into (x, y) so that no axis exceeds the device limit.
pub fn fold_grid(workgroups: u32, caps: &TargetCaps) -> Result<[u32; 3], LowerError> {
    let limit = caps.max_workgroups_per_dimension.max(1);
    if workgroups <= limit {
        return Ok([workgroups, 1, 1]);
    }
    let y = workgroups.div_ceil(limit);
    if y > limit {
        return Err(LowerError::TooLarge {
            what: "workgroup count".into(),
            value: workgroups as u64,
            limit: limit as u64 * limit as u64,
        });
    }
    Ok([workgroups.div_ceil(y), y, 1])
}

/// The workgroup's index in a grid made by [`fold_grid`] (row-major over x, y).
pub fn linear_workgroup(grid: [u32; 3]) -> E {
    if grid[1] == 1 {
        workgroup_id(0)
    } else {
        workgroup_id(1) * grid[0] + workgroup_id(0)
    }
}

impl Grid1d {
    /// Calls `body(f, item)` for every item this invocation owns. Workgroups that fall
    /// past the end (a folded grid has a few) do nothing.
    pub fn for_each_item(&self, f: &mut Body, body: impl FnOnce(&mut Body, E)) {
        let wg = f.let_("wg", linear_workgroup(self.grid));
        let base = f.let_("base", wg * self.chunk);
        let start = if self.invocations == 1 {
            base.clone()
        } else {
            base.clone() + local_id(0)
        };
        // Where no workgroup's `base + chunk` can wrap (the grid's workgroups times the
        // chunk fit in u32), `min(base + chunk, items)`: its range ends at `items`, so
        // the value-range analysis (and LLVM) see every item in bounds. Otherwise the
        // form that cannot wrap (`items - base` is only used when base < items).
        let grid_items = self.grid.iter().map(|&g| g as u64).product::<u64>() * self.chunk as u64;
        let end = if grid_items <= u32::MAX as u64 {
            f.let_("end", (base.clone() + self.chunk).min(self.items))
        } else {
            f.let_(
                "end",
                base.clone().lt(self.items).select(
                    base.clone() + (E::from(self.items) - base).min(self.chunk),
                    0u32,
                ),
            )
        };
        f.for_("i", start, end, self.invocations, body);
    }

    /// As [`Grid1d::for_each_item`] over items of `lanes` elements each: `body` gets
    /// the flat index of the item's first element (bound to a local `name` when
    /// `lanes > 1`).
    pub fn for_each_vector(
        &self,
        f: &mut Body,
        lanes: u8,
        name: &str,
        body: impl FnOnce(&mut Body, E),
    ) {
        self.for_each_item(f, |f, item| {
            let index = if lanes == 1 {
                item
            } else {
                f.let_(name, item * lanes as u32)
            };
            body(f, index)
        });
    }

    /// The workgroup size to declare.
    pub fn workgroup_size(&self) -> [u32; 3] {
        [self.invocations, 1, 1]
    }
}

/// One launch writing `value` (a value of `dtype`'s value type) into every element
/// of the `len`-element buffer `binding` names (a temporary the plan needs zeroed).
pub(crate) fn fill_launch(
    name: &str,
    caps: &TargetCaps,
    binding: super::Binding,
    dtype: kernelc_ir::ScalarType,
    len: u64,
    value: kernelc_ir::Scalar,
) -> Result<super::Launch, LowerError> {
    let grid = plan_1d(len, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let out = k.buffer("out", dtype, len, kernelc_ir::Access::Write);
    let kernel = k.build(|b| {
        grid.for_each_item(b, |b, i| b.store(out, i, E(kernelc_ir::Expr::Lit(value))));
    })?;
    Ok(super::Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![binding],
    })
}

/// The workgroups of a tiled transpose through shared memory: one `tile × tile` tile
/// per workgroup of a folded grid of `total`, `tile / lanes` invocations along x (a
/// warp per tile row on a GPU), the rest along y; each invocation moves vectors of
/// `lanes` neighbours along a tile row.
pub(crate) struct TiledTranspose {
    pub grid: [u32; 3],
    pub workgroup: [u32; 3],
    tile: u32,
    total: u32,
    lanes: u32,
}

/// Runs `body` for `first, first + step, …` below `end` (`first < step`): once where
/// `step` covers it; else, where `step` divides `end`, by a loop of literal bounds
/// (`first + i·step`, which the unroller unrolls: the iterations' loads are then in
/// flight together), else by a loop from `first`.
fn strided(
    f: &mut Body,
    name: &str,
    first: &E,
    end: u32,
    step: u32,
    body: &mut dyn FnMut(&mut Body, E),
) {
    debug_assert!(step > 0);
    if step >= end {
        body(f, first.clone());
    } else if end % step == 0 {
        f.for_(name, 0u32, end / step, 1, |f, i| {
            let at = f.let_(&format!("{name}_at"), first.clone() + i * step);
            body(f, at)
        });
    } else {
        f.for_(name, first.clone(), end, step, |f, at| body(f, at));
    }
}

impl TiledTranspose {
    /// `total` tiles of `tile × tile` (`TooLarge` naming `what` past u32).
    pub(crate) fn new(
        what: &str,
        total: u64,
        tile: u32,
        caps: &TargetCaps,
    ) -> Result<TiledTranspose, LowerError> {
        TiledTranspose::with_lanes(what, total, (tile, 1), caps)
    }

    /// As [`TiledTranspose::new`], each invocation moving `lanes` neighbours at once
    /// (a divisor of `tile`).
    pub(crate) fn with_lanes(
        what: &str,
        total: u64,
        (tile, lanes): (u32, u32),
        caps: &TargetCaps,
    ) -> Result<TiledTranspose, LowerError> {
        if lanes == 0 || tile % lanes != 0 {
            return Err(LowerError::Internal(
                "a transpose's vectors do not divide its tile",
            ));
        }
        let total = u32::try_from(total).map_err(|_| LowerError::TooLarge {
            what: what.to_string(),
            value: total,
            limit: u32::MAX as u64,
        })?;
        let grid = fold_grid(total, caps)?;
        let inv = caps.invocations_1d();
        let tx = inv.min(tile / lanes);
        let ty = (inv / tx)
            .clamp(1, tile)
            .min(caps.max_workgroup_size[1].max(1));
        Ok(TiledTranspose {
            lanes,
            grid,
            workgroup: [tx, ty, 1],
            tile,
            total,
        })
    }

    /// Runs `body` where `cond` holds (`None`: always) and workgroup `wg` is one of the
    /// tiles (a folded grid has a few past the end).
    pub(crate) fn when(&self, f: &mut Body, wg: &E, cond: Option<E>, body: impl FnOnce(&mut Body)) {
        let folded = self.grid[0] as u64 * self.grid[1] as u64 != self.total as u64;
        let tile = folded.then(|| wg.clone().lt(self.total));
        match and_opt(tile, cond) {
            None => body(f),
            Some(c) => f.if_(c, body),
        }
    }

    /// `index < extent` for a tile row or column `index` along an axis of `extent`
    /// elements; `None` (always true) where the tiles divide the axis.
    pub(crate) fn inside(&self, index: E, extent: u32) -> Option<E> {
        (extent % self.tile != 0).then(|| index.lt(extent))
    }

    /// Visits the tile's positions this invocation owns: vectors starting at columns
    /// `lx·lanes, (lx+tx)·lanes, …`, rows `ly, ly+ty, …` (one vector per row per
    /// invocation on a GPU, all of them on a CPU).
    pub(crate) fn each(&self, f: &mut Body, body: impl Fn(&mut Body, E, E)) {
        let ([tx, ty, _], tile) = (self.workgroup, self.tile);
        let lx = if tx == 1 { E::from(0u32) } else { local_id(0) };
        let ly = if ty == 1 { E::from(0u32) } else { local_id(1) };
        let rows = |f: &mut Body, col: E| {
            strided(f, "row", &ly, tile, ty, &mut |f, row| {
                body(f, row, col.clone())
            });
        };
        let lanes = self.lanes;
        let first = if lanes == 1 { lx } else { lx * lanes };
        strided(f, "col", &first, tile, tx * lanes, &mut |f, col| {
            rows(f, col)
        });
    }
}
