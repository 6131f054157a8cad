//! Data movement: permute, slice, concat, gather and scatter.
//!
//! Every kernel here is indexed by the OUTPUT, so each output element is written by
//! exactly one invocation and neighbouring invocations write neighbouring addresses
//! (coalesced stores on a GPU, a contiguous loop on the CPU). Shapes are simplified on
//! the host first (size-1 dims dropped, dims that stay contiguous merged) so the index
//! arithmetic is as short as the layout allows, with every extent and stride a folded
//! u32 constant.
//!
//! * **slice** and **permute without a moved inner dim** are one strided gather,
//!   `y[i] = x[base + Σ coord_d(i) · coef_d]`; when the innermost run is contiguous and
//!   aligned, items are `vector_width`-lane vectors (wide loads and stores). Negative
//!   slice steps subtract their terms after the positive ones, so no intermediate
//!   value leaves `0..len(x)` (no wrapping).
//! * **permute that moves the innermost dim** is a tiled transpose between the input's
//!   innermost dim and the output's innermost dim (the other dims are a batch): a
//!   workgroup reads a 32×32 tile with consecutive invocations on consecutive input
//!   addresses into a 32×33 shared array (the pad column makes the transposed read
//!   bank-conflict free), waits at a barrier, and writes it out with consecutive
//!   invocations on consecutive output addresses. On the CPU (one invocation) the same
//!   kernel is a cache-blocked transpose. Tiles with fewer than 8 rows or columns
//!   would leave most invocations idle, so such permutes use the gather.
//! * **concat** is one launch: each output element compares its position along the
//!   (merged) concat axis with the constant offsets of the inputs and copies from the
//!   one it falls in; items are vectors when every input's run is a whole number of
//!   vectors.
//! * **gather** reads its index once per output element, resolves it branch-free
//!   (negative counts from the end, out of range or NaN reads 0) and loads through a
//!   clamped address, so no load is ever out of bounds.
//! * **scatter** is a gather over the index list, so no two invocations ever write one
//!   element and no atomics are needed: each output element `(o, r, k)` scans all `J`
//!   indices for matches with its row `r` (in increasing `j`, which is exactly the
//!   reference's order for `sum`, and makes `last` the largest matching `j`). That is
//!   O(rows·inner × J) compares; the index list is resolved once per workgroup tile
//!   into shared memory (256 at a time on a GPU, where all invocations then read the
//!   same shared word: a broadcast), and each CPU invocation serves 8 output elements
//!   per scan. A sort-based O(J log J) schedule can replace it when large index lists
//!   matter.

use crate::lower::index::resolve_index;
use crate::lower::math::{compute_type, Num};
use crate::lower::schedule::{fold_grid, linear_workgroup, plan_1d, TiledTranspose};
use crate::lower::tile::and_opt;
use crate::lower::{Binding, Launch, LowerError, Plan, TargetCaps};
use crate::shape::row_major_strides;
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// `v` as a u32 index constant. Every extent and offset of a valid spec is below 2^31.
fn c32(v: usize) -> u32 {
    v as u32
}

/// The row-major coordinates of flat `index` in `dims`, skipping divisions by 1 and the
/// modulo of the outermost dim.
fn coords(index: &E, dims: &[usize]) -> Vec<E> {
    let strides = row_major_strides(dims);
    dims.iter()
        .zip(&strides)
        .enumerate()
        .map(|(d, (&extent, &stride))| {
            let mut c = index.clone();
            if stride != 1 {
                c = c / c32(stride);
            }
            if d != 0 {
                c = c % c32(extent);
            }
            c
        })
        .collect()
}

/// `y[i] = x[base + Σ_d coord_d(i) · coef_d]` over output dims `dims`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Strided {
    pub base: usize,
    pub dims: Vec<usize>,
    pub coefs: Vec<i64>,
}

impl Strided {
    /// Drops size-1 dims and merges a dim into the next one when together they walk
    /// the input with one stride.
    fn collapse(&self) -> Strided {
        let mut dims: Vec<usize> = Vec::new();
        let mut coefs: Vec<i64> = Vec::new();
        for (&extent, &coef) in self.dims.iter().zip(&self.coefs) {
            if extent == 1 {
                continue;
            }
            match (dims.last_mut(), coefs.last_mut()) {
                (Some(d), Some(c)) if *c == extent as i64 * coef => {
                    *d *= extent;
                    *c = coef;
                }
                _ => {
                    dims.push(extent);
                    coefs.push(coef);
                }
            }
        }
        Strided {
            base: self.base,
            dims,
            coefs,
        }
    }

    /// Lanes per item: `width` when the innermost run is contiguous and every vector
    /// starts aligned in both buffers.
    fn lanes(&self, width: u8) -> u8 {
        let w = width as i64;
        let outer = &self.coefs[..self.coefs.len().saturating_sub(1)];
        let aligned = w > 1
            && self.coefs.last() == Some(&1)
            && self.dims.last().is_some_and(|&d| d as i64 % w == 0)
            && self.base as i64 % w == 0
            && outer.iter().all(|c| c % w == 0);
        if aligned {
            width
        } else {
            1
        }
    }

    /// The input offset of output element `index`: the base and the positive terms
    /// first, then the negative ones, so every partial sum is a valid offset.
    fn offset(&self, index: &E) -> E {
        let cs = coords(index, &self.dims);
        let term = |c: &E, coef: i64| {
            if coef.unsigned_abs() == 1 {
                c.clone()
            } else {
                c.clone() * c32(coef.unsigned_abs() as usize)
            }
        };
        let mut acc: Option<E> = (self.base != 0).then(|| E::from(c32(self.base)));
        for (c, &coef) in cs.iter().zip(&self.coefs) {
            if coef > 0 {
                let t = term(c, coef);
                acc = Some(match acc {
                    None => t,
                    Some(a) => a + t,
                });
            }
        }
        let mut acc = acc.unwrap_or_else(|| E::from(0u32));
        for (c, &coef) in cs.iter().zip(&self.coefs) {
            if coef < 0 {
                acc = acc - term(c, coef);
            }
        }
        acc
    }
}

/// One launch copying `x` to `y` by the strided map `s`.
pub(super) fn strided_copy(
    name: &str,
    caps: &TargetCaps,
    x: &TensorSig,
    y: &TensorSig,
    s: &Strided,
) -> Result<Plan, LowerError> {
    let s = s.collapse();
    let numel = y.numel() as u64;
    let lanes = s.lanes(caps.vector_width);
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let xm = k.buffer(x.name.clone(), x.dtype, x.numel() as u64, Access::Read);
    let ym = k.buffer(y.name.clone(), y.dtype, numel, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            let src = s.offset(&index);
            f.store(ym, index, xm.load(src, lanes));
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    }))
}

/// One launch writing `values` (dense) into `out` at the positions of the strided map
/// `s` (`out[s(i)] = values[i]`; the positions are distinct, so each element has one
/// writer). Elements at no position are not written.
pub(super) fn strided_scatter(
    name: &str,
    caps: &TargetCaps,
    values: &TensorSig,
    out: &TensorSig,
    s: &Strided,
) -> Result<Plan, LowerError> {
    let s = s.collapse();
    let numel = values.numel() as u64;
    let lanes = s.lanes(caps.vector_width);
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let vm = k.buffer(values.name.clone(), values.dtype, numel, Access::Read);
    let om = k.buffer(
        out.name.clone(),
        out.dtype,
        out.numel() as u64,
        Access::Write,
    );
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            let dst = s.offset(&index);
            f.store(om, dst, vm.load(index, lanes));
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    }))
}

/// One kernel copying `x` to `y` element by element over `dims`: element `i` of the
/// block goes from `x[from(i)]` to `y[to(i)]` (`from` and `to` strided maps over the
/// same dims; `to` distinct). `lens`: the elements of `x` and of `y` the kernel may
/// touch. Returns the kernel and its grid.
pub(super) fn block_copy(
    name: &str,
    caps: &TargetCaps,
    dtype: ScalarType,
    (from, to): (&Strided, &Strided),
    lens: (u64, u64),
) -> Result<(kernelc_ir::Kernel, [u32; 3]), LowerError> {
    let numel: u64 = from.dims.iter().map(|&d| d as u64).product();
    let w = caps.vector_width;
    let lanes = if from.lanes(w) == w && to.lanes(w) == w {
        w
    } else {
        1
    };
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let xm = k.buffer("x", dtype, lens.0, Access::Read);
    let ym = k.buffer("y", dtype, lens.1, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            let (src, dst) = (from.offset(&index), to.offset(&index));
            f.store(ym, dst, xm.load(src, lanes));
        });
    })?;
    Ok((kernel, grid.grid))
}

fn sig(sigs: Vec<TensorSig>, i: usize) -> Result<TensorSig, LowerError> {
    sigs.into_iter().nth(i).ok_or(LowerError::Internal(
        "op signature without the expected buffer",
    ))
}

// ---------------------------------------------------------------------------------------
// permute
// ---------------------------------------------------------------------------------------

/// The permutation on merged dims: size-1 dims dropped, and input dims that stay
/// adjacent and in order in the output merged. Returns the merged input dims and the
/// permutation over them (`out dim j = in dim perm[j]`).
fn reduce_permute(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // Runs of input dims, in output order; each run is consecutive in the input.
    let mut runs: Vec<(usize, usize)> = Vec::new(); // (first input dim, merged size)
    let mut prev: Option<usize> = None;
    for &p in perm {
        if shape[p] == 1 {
            continue;
        }
        // Consecutive also across dropped size-1 input dims.
        let adjacent = prev.is_some_and(|q| (q + 1..p).all(|d| shape[d] == 1) && p > q);
        match runs.last_mut() {
            Some(run) if adjacent => run.1 *= shape[p],
            _ => runs.push((p, shape[p])),
        }
        prev = Some(p);
    }
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&r| runs[r].0);
    let dims: Vec<usize> = order.iter().map(|&r| runs[r].1).collect();
    let mut new_perm = vec![0; runs.len()];
    for (pos, &r) in order.iter().enumerate() {
        new_perm[r] = pos;
    }
    (dims, new_perm)
}

/// Edge of a transpose tile.
const TILE: u32 = 32;
/// Tiles narrower than this leave too many invocations idle: gather instead.
const MIN_TILE_EXTENT: usize = 8;

pub(super) fn permute(spec: &PermuteSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Permute(spec.clone());
    let (x, y) = (sig(op.inputs(), 0)?, sig(op.outputs(), 0)?);
    let (dims, perm) = reduce_permute(&spec.shape, &spec.perm);
    let in_strides = row_major_strides(&dims);
    let rank = dims.len();
    let gather = |caps: &TargetCaps| {
        let s = Strided {
            base: 0,
            dims: perm.iter().map(|&p| dims[p]).collect(),
            coefs: perm.iter().map(|&p| in_strides[p] as i64).collect(),
        };
        strided_copy(&op.name(), caps, &x, &y, &s)
    };
    if rank < 2 || perm[rank - 1] == rank - 1 {
        return gather(caps);
    }
    let q = perm[rank - 1];
    // The tile holds values (a narrow element as its u32/i32).
    let tile_bytes = (TILE * (TILE + 1) * spec.dtype.value_type().size_bytes()) as u64;
    if dims[q] < MIN_TILE_EXTENT
        || dims[rank - 1] < MIN_TILE_EXTENT
        || tile_bytes > caps.shared_memory_bytes as u64
    {
        return gather(caps);
    }
    transpose_tiled(&op.name(), caps, &x, &y, &dims, &perm)
}

/// The transpose of merged input dims `dims` by `perm`, whose last entry `q` is not the
/// last input dim: tiles of (input dim `q`) × (input dim `rank-1`) per workgroup.
fn transpose_tiled(
    name: &str,
    caps: &TargetCaps,
    x: &TensorSig,
    y: &TensorSig,
    dims: &[usize],
    perm: &[usize],
) -> Result<Plan, LowerError> {
    let rank = dims.len();
    let c = rank - 1;
    let q = perm[rank - 1];
    let in_strides = row_major_strides(dims);
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let out_strides_by_pos = row_major_strides(&out_dims);
    // The output stride of each input dim.
    let mut out_strides = vec![0usize; rank];
    for (j, &p) in perm.iter().enumerate() {
        out_strides[p] = out_strides_by_pos[j];
    }
    let batch: Vec<usize> = (0..rank).filter(|&d| d != c && d != q).collect();
    let batch_dims: Vec<usize> = batch.iter().map(|&d| dims[d]).collect();
    let batch_count: usize = batch_dims.iter().product();
    // Narrow elements move as 4-byte vectors, in tiles twice as wide, where both tile
    // axes' extents keep the vectors whole and aligned and the tile fits (fewer,
    // wider accesses: the 2-byte transpose of a channels-last convolution's image was
    // bound by its instructions).
    let size = x.dtype.size_bytes();
    let value_bytes = x.dtype.value_type().size_bytes() as u64;
    let wide = 2 * TILE;
    let fits = (wide * (wide + 1)) as u64 * value_bytes <= caps.shared_memory_bytes as u64;
    let (edge, lanes) = match 4 / size.clamp(1, 4) {
        lanes
            if lanes > 1
                && x.dtype != ScalarType::Bool
                && caps.vector_width > 1
                && fits
                && dims[q] % lanes as usize == 0
                && dims[c] % lanes as usize == 0 =>
        {
            (wide, lanes)
        }
        _ => (TILE, 1),
    };
    let (tiles_q, tiles_c) = (
        dims[q].div_ceil(edge as usize),
        dims[c].div_ceil(edge as usize),
    );
    let tiles = (batch_count * tiles_q * tiles_c) as u64;
    let t = TiledTranspose::with_lanes("transpose tile count", tiles, (edge, lanes), caps)?;
    let grid = t.grid;
    let pitch = edge + 1;

    let mut k = KernelBuilder::new(name, t.workgroup);
    let xm = k.buffer(x.name.clone(), x.dtype, x.numel() as u64, Access::Read);
    let ym = k.buffer(y.name.clone(), y.dtype, y.numel() as u64, Access::Write);
    let tile = k.shared("tile", x.dtype.value_type(), edge * pitch);
    let (qn, cn) = (c32(dims[q]), c32(dims[c]));
    let kernel = k.build(|f| {
        let wg = f.let_("wg", linear_workgroup(grid));
        let tc = wg.clone() % c32(tiles_c);
        let rest = f.let_("rest", wg.clone() / c32(tiles_c));
        let q0 = f.let_("q0", (rest.clone() % c32(tiles_q)) * edge);
        let c0 = f.let_("c0", tc * edge);
        let b = rest / c32(tiles_q);
        let bc = coords(&b, &batch_dims);
        let sum = |f: &mut Body, name: &str, strides: &[usize]| {
            let terms: Vec<E> = batch
                .iter()
                .zip(&bc)
                .map(|(&d, coord)| coord.clone() * c32(strides[d]))
                .collect();
            let e = terms.into_iter().reduce(|a, t| a + t);
            f.let_(name, e.unwrap_or_else(|| E::from(0u32)))
        };
        let in_b = sum(f, "in_base", &in_strides);
        let out_b = sum(f, "out_base", &out_strides);
        // Read: rows along input dim q, columns along the input's contiguous dim.
        t.each(f, |f, row, col| {
            let (qi, ci) = (q0.clone() + row.clone(), c0.clone() + col.clone());
            let ok = and_opt(t.inside(qi.clone(), qn), t.inside(ci.clone(), cn));
            t.when(f, &wg, ok, |f| {
                let src = in_b.clone() + qi * c32(in_strides[q]) + ci;
                let at = row * pitch + col;
                if lanes == 1 {
                    f.store(tile, at, xm.at(src));
                } else {
                    let v = f.let_("v", xm.load(src, lanes as u8));
                    for lane in 0..lanes {
                        f.store(tile, at.clone() + lane, v.clone().lane(lane as u8));
                    }
                }
            });
        });
        f.barrier();
        // Write: rows along input dim c, columns along the output's contiguous dim q.
        t.each(f, |f, row, col| {
            let (ci, qi) = (c0.clone() + row.clone(), q0.clone() + col.clone());
            let ok = and_opt(t.inside(qi.clone(), qn), t.inside(ci.clone(), cn));
            t.when(f, &wg, ok, |f| {
                let dst = out_b.clone() + ci * c32(out_strides[c]) + qi;
                let value = if lanes == 1 {
                    tile.at(col * pitch + row)
                } else {
                    vector(
                        (0..lanes).map(|lane| tile.at((col.clone() + lane) * pitch + row.clone())),
                    )
                };
                f.store(ym, dst, value);
            });
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid,
        bindings: vec![Binding::Input(0), Binding::Output(0)],
    }))
}

// ---------------------------------------------------------------------------------------
// slice
// ---------------------------------------------------------------------------------------

pub(super) fn slice(spec: &SliceSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Slice(spec.clone());
    let (x, y) = (sig(op.inputs(), 0)?, sig(op.outputs(), 0)?);
    let strides = row_major_strides(&spec.shape);
    let s = Strided {
        base: spec
            .starts
            .iter()
            .zip(&strides)
            .map(|(&s, &st)| s * st)
            .sum(),
        dims: spec.sizes.clone(),
        // A size-1 dim reads only its start, and its step may be any i64: leave it out
        // (where size ≥ 2, |step| < dim and the product is below 2^62).
        coefs: spec
            .steps
            .iter()
            .zip(&strides)
            .zip(&spec.sizes)
            .map(|((&step, &st), &size)| if size == 1 { 0 } else { step * st as i64 })
            .collect(),
    };
    strided_copy(&op.name(), caps, &x, &y, &s)
}

// ---------------------------------------------------------------------------------------
// concat
// ---------------------------------------------------------------------------------------

pub(super) fn concat(spec: &ConcatSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Concat(spec.clone());
    let inputs = op.inputs();
    let y = sig(op.outputs(), 0)?;
    let axis = spec.axis;
    let outer: usize = y.shape[..axis].iter().product();
    let inner: usize = y.shape[axis + 1..].iter().product();
    // Each input contributes a run of `chunk_t` elements to every outer row.
    let chunks: Vec<usize> = spec.shapes.iter().map(|s| s[axis] * inner).collect();
    let row: usize = chunks.iter().sum();
    let w = caps.vector_width as usize;
    let lanes = if w > 1 && chunks.iter().all(|c| c % w == 0) {
        w as u8
    } else {
        1
    };
    let numel = (outer * row) as u64;
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let xs: Vec<Mem> = inputs
        .iter()
        .map(|s| k.buffer(s.name.clone(), s.dtype, s.numel() as u64, Access::Read))
        .collect();
    let ym = k.buffer(y.name.clone(), y.dtype, numel, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            let (o, r) = if outer == 1 {
                (None, index.clone())
            } else {
                let o = f.let_("o", index.clone() / c32(row));
                (Some(o), f.let_("r", index.clone() % c32(row)))
            };
            let pick = ConcatPick {
                xs: &xs,
                chunks: &chunks,
                lanes,
                o,
                r,
                out: ym,
                index,
            };
            pick.emit(f, 0, 0);
        });
    })?;
    let mut bindings: Vec<Binding> = (0..inputs.len()).map(Binding::Input).collect();
    bindings.push(Binding::Output(0));
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}

/// Picks the input whose run holds position `r` of output row `o` and copies from it.
struct ConcatPick<'a> {
    xs: &'a [Mem],
    chunks: &'a [usize],
    lanes: u8,
    o: Option<E>,
    r: E,
    out: Mem,
    index: E,
}

impl ConcatPick<'_> {
    /// `if r < off_{t+1} { copy from x_t } else { …the inputs after t… }`; the last
    /// input needs no test. `offset` is `off_t`.
    fn emit(&self, f: &mut Body, t: usize, offset: usize) {
        let copy = |f: &mut Body| {
            let local = if offset == 0 {
                self.r.clone()
            } else {
                self.r.clone() - c32(offset)
            };
            let src = match &self.o {
                Some(o) => o.clone() * c32(self.chunks[t]) + local,
                None => local,
            };
            f.store(
                self.out,
                self.index.clone(),
                self.xs[t].load(src, self.lanes),
            );
        };
        if t + 1 == self.xs.len() {
            copy(f);
        } else {
            let end = offset + self.chunks[t];
            f.if_else(self.r.clone().lt(c32(end)), copy, |f| {
                self.emit(f, t + 1, end)
            });
        }
    }
}

/// `data` split at `axis` into `[outer, n, inner]`, with `count` indices.
struct AxisSplit {
    outer: usize,
    n: usize,
    inner: usize,
    count: usize,
}

impl AxisSplit {
    fn new(data: &[usize], indices: &[usize], axis: usize) -> AxisSplit {
        AxisSplit {
            outer: data[..axis].iter().product(),
            n: data[axis],
            inner: data[axis + 1..].iter().product(),
            count: indices.iter().product(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// gather
// ---------------------------------------------------------------------------------------

pub(super) fn gather(spec: &GatherSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Gather(spec.clone());
    let (data, indices, out) = (
        sig(op.inputs(), 0)?,
        sig(op.inputs(), 1)?,
        sig(op.outputs(), 0)?,
    );
    let g = AxisSplit::new(&spec.data, &spec.indices, spec.axis);
    let w = caps.vector_width as usize;
    // A vector never crosses a gathered row when the row length is a multiple of it.
    let lanes = if w > 1 && g.inner % w == 0 {
        w as u8
    } else {
        1
    };
    let numel = out.numel() as u64;
    let grid = plan_1d(numel / lanes as u64, caps, 1)?;
    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let dm = k.buffer(
        data.name.clone(),
        data.dtype,
        data.numel() as u64,
        Access::Read,
    );
    let im = k.buffer(
        indices.name.clone(),
        indices.dtype,
        indices.numel() as u64,
        Access::Read,
    );
    // A piece of a split table: its rows of the whole axis, and what else it keeps.
    let (row0, axis_len) = spec.rows_window();
    let prior = match spec.rows_of {
        Some(_) => {
            let p = sig(op.inputs(), 2)?;
            Some(k.buffer(p.name.clone(), p.dtype, p.numel() as u64, Access::Read))
        }
        None => None,
    };
    let om = k.buffer(out.name.clone(), out.dtype, numel, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "index", |f, index| {
            // index = (o · J + j) · inner + kk
            let c = coords(&index, &[g.outer, g.count, g.inner]);
            let (o, j, kk) = (c[0].clone(), c[1].clone(), c[2].clone());
            let j = if g.count == 1 { E::from(0u32) } else { j };
            let (valid, r) = resolve_index(f, im.at(j), spec.index_dtype, axis_len, true);
            let zero = Num {
                ty: spec.dtype.value_type(),
                lanes,
            }
            .lit(0.0);
            // Outside this piece's rows (but in the table): the prior.
            let (valid, r, otherwise) = match prior {
                Some(pm) => {
                    let r = f.let_("r_all", r);
                    let inside = f.let_(
                        "inside",
                        valid.clone() & r.clone().ge(c32(row0)) & r.clone().lt(c32(row0 + g.n)),
                    );
                    let shifted = inside.clone().select(r - c32(row0), 0u32);
                    let kept = valid.select(pm.load(index.clone(), lanes), zero.clone());
                    (inside, shifted, kept)
                }
                None => (valid, r, zero),
            };
            let mut row = r;
            if g.outer != 1 {
                row = o * c32(g.n) + row;
            }
            let mut src = if g.inner == 1 {
                row
            } else {
                row * c32(g.inner)
            };
            if g.inner != 1 {
                src = src + kk;
            }
            f.store(om, index, valid.select(dm.load(src, lanes), otherwise));
        });
    })?;
    let mut bindings = vec![Binding::Input(0), Binding::Input(1)];
    bindings.extend(prior.map(|_| Binding::Input(2)));
    bindings.push(Binding::Output(0));
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    }))
}

// ---------------------------------------------------------------------------------------
// scatter
// ---------------------------------------------------------------------------------------

/// Output elements each invocation owns per index scan (locals, unrolled): a CPU
/// invocation amortises the scan over several; a GPU has 256 invocations for that.
fn scatter_elems(caps: &TargetCaps) -> u32 {
    if caps.is_serial() {
        8
    } else {
        1
    }
}

/// Indices resolved into shared memory per tile.
fn scatter_tile(caps: &TargetCaps, count: usize) -> u32 {
    let cap = if caps.is_serial() {
        2048
    } else {
        caps.invocations_1d()
    };
    // u32 entries; stay well inside the shared budget.
    let budget = (caps.shared_memory_bytes / 4 / 2).max(1);
    c32(count).min(cap).min(budget).max(1)
}

/// One output element of a scatter: where it is and what it accumulates.
struct ScatterElem {
    elem: E,
    valid: E,
    /// Row along the axis; `n + 1` (matches no index) when not valid.
    r: E,
    /// The update row base `o · J` and the inner offset.
    o_j: E,
    kk: E,
    acc: Var,
}

pub(super) fn scatter(spec: &ScatterSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Scatter(spec.clone());
    let inputs = op.inputs();
    let (updates, indices, out) = (
        sig(inputs.clone(), 0)?,
        sig(inputs.clone(), 1)?,
        sig(op.outputs(), 0)?,
    );
    let prior = (spec.init == ScatterInit::Prior)
        .then(|| sig(inputs, 2))
        .transpose()?;
    let g = AxisSplit::new(&spec.data, &spec.indices, spec.axis);
    // The rows of the whole axis this scatter writes (all of them but in a split).
    let (row0, axis_len) = spec.rows_window();
    let inv = caps.invocations_1d();
    let per = scatter_elems(caps);
    let tile_len = scatter_tile(caps, g.count);
    let tiles = c32(g.count).div_ceil(tile_len);
    let numel = out.numel();
    let chunk = inv * per;
    let workgroups =
        u32::try_from(numel.div_ceil(chunk as usize)).map_err(|_| LowerError::TooLarge {
            what: "scatter workgroups".into(),
            value: numel as u64,
            limit: u32::MAX as u64,
        })?;
    let grid = fold_grid(workgroups, caps)?;
    let acc_ty = match spec.combine {
        ScatterCombine::Sum => compute_type(spec.dtype),
        ScatterCombine::Last => spec.dtype,
    };
    let num = Num::scalar(acc_ty);

    let mut k = KernelBuilder::new(op.name(), [inv, 1, 1]);
    let um = k.buffer(
        updates.name.clone(),
        updates.dtype,
        updates.numel() as u64,
        Access::Read,
    );
    let im = k.buffer(
        indices.name.clone(),
        indices.dtype,
        indices.numel() as u64,
        Access::Read,
    );
    let pm = prior
        .as_ref()
        .map(|p| k.buffer(p.name.clone(), p.dtype, p.numel() as u64, Access::Read));
    let om = k.buffer(out.name.clone(), out.dtype, numel as u64, Access::Write);
    let rows = k.shared("rows", ScalarType::U32, tile_len);
    let (n, count, total) = (c32(g.n), c32(g.count), c32(numel));
    let kernel = k.build(|f| {
        let wg = f.let_("wg", linear_workgroup(grid));
        let base = f.let_("base", wg * chunk);
        let lid = if inv == 1 { E::from(0u32) } else { local_id(0) };
        let elems: Vec<ScatterElem> = (0..per)
            .map(|e| {
                let elem = f.let_("elem", base.clone() + lid.clone() + e * inv);
                let valid = f.let_("live", elem.clone().lt(total));
                let c = coords(&elem, &[g.outer, g.n, g.inner]);
                let r = f.let_("row", valid.clone().select(c[1].clone(), n + 1));
                let o_j = f.let_("o_j", c[0].clone() * count);
                let kk = f.let_("kk", c[2].clone());
                let acc = match spec.combine {
                    ScatterCombine::Sum => {
                        let init = match pm {
                            Some(pm) => {
                                let at = valid.clone().select(elem.clone(), 0u32);
                                num.widen(pm.at(at), spec.dtype)
                            }
                            None => num.lit(0.0),
                        };
                        f.var("acc", init)
                    }
                    // `last` keeps the winning position (J: none yet); the value is
                    // loaded once at the end.
                    ScatterCombine::Last => f.var("last", count),
                };
                ScatterElem {
                    elem,
                    valid,
                    r,
                    o_j,
                    kk,
                    acc,
                }
            })
            .collect();
        f.for_("tile", 0u32, tiles, 1, |f, tile| {
            let first = f.let_("first", tile * tile_len);
            // Nobody may still be scanning the previous tile's rows.
            f.barrier();
            f.for_("t", lid.clone(), tile_len, inv, |f, t| {
                let j = f.let_("j", first.clone() + t.clone());
                let in_list = f.let_("in_list", j.clone().lt(count));
                let at = in_list.clone().select(j, 0u32);
                let (valid, r) = resolve_index(f, im.at(at), spec.index_dtype, axis_len, true);
                // Within this window of the axis (all of it but in a split's pieces).
                let (valid, r) = if (row0, axis_len) == (0, g.n) {
                    (valid, r)
                } else {
                    let r = f.let_("r_all", r);
                    let inside = r.clone().ge(c32(row0)) & r.clone().lt(c32(row0 + g.n));
                    let shifted = inside.clone().select(r - c32(row0), 0u32);
                    (valid & inside, shifted)
                };
                // Invalid indices and padding become row n, which no element has.
                f.store(rows, t, (in_list & valid).select(r, n));
            });
            f.barrier();
            f.for_("t", 0u32, tile_len, 1, |f, t| {
                let row = f.let_("hit_row", rows.at(t.clone()));
                let j = f.let_("j", first.clone() + t);
                for e in &elems {
                    let hit = row.clone().eq(e.r.clone());
                    match spec.combine {
                        ScatterCombine::Sum => f.if_(hit, |f| {
                            let src = (e.o_j.clone() + j.clone()) * c32(g.inner) + e.kk.clone();
                            let u = num.widen(um.at(src), spec.dtype);
                            f.assign(e.acc, e.acc.get() + u);
                        }),
                        ScatterCombine::Last => {
                            f.assign(e.acc, hit.select(j.clone(), e.acc.get()));
                        }
                    }
                }
            });
        });
        for e in &elems {
            f.if_(e.valid.clone(), |f| {
                let value = match spec.combine {
                    ScatterCombine::Sum => num.narrow(e.acc.get(), spec.dtype),
                    ScatterCombine::Last => {
                        let found = f.let_("found", e.acc.get().ne(count));
                        let j = found.clone().select(e.acc.get(), 0u32);
                        let src = (e.o_j.clone() + j) * c32(g.inner) + e.kk.clone();
                        let init = match pm {
                            Some(pm) => pm.at(e.elem.clone()),
                            None => lit(spec.dtype, 0.0),
                        };
                        found.select(um.at(src), init)
                    }
                };
                f.store(om, e.elem.clone(), value);
            });
        }
    })?;
    let mut bindings = vec![Binding::Input(0), Binding::Input(1)];
    if prior.is_some() {
        bindings.push(Binding::Input(2));
    }
    bindings.push(Binding::Output(0));
    Ok(Plan::single(Launch {
        kernel,
        grid,
        bindings,
    }))
}
