//! Staging blocks of query, key and value rows in shared memory for the fragment
//! kernels: each invocation's loads of a block are all issued into registers before
//! the first is stored ([`InFlight`]), so a block costs one memory latency, and none
//! where other work runs between the two halves.

use super::lower::Shape;
use crate::lower::math::Num;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{element_index_expr, FragmentLayout};

/// A block of rows on its way to shared memory: each invocation's loads, in flight
/// in registers.
pub(super) struct InFlight {
    /// `rows` rows of `cols` elements (zeros past `head_dim`), `lanes` per load.
    rows: u32,
    cols: u32,
    lanes: u32,
    /// An invocation's loads: the `q`-th covers item `thread + q · invocations`.
    regs: Vec<Var>,
}

impl InFlight {
    /// Runs `body(f, q, row, column)` for each load `q` of this invocation whose item
    /// is inside the block.
    fn each(&self, f: &mut Body, sh: &Shape, body: impl Fn(&mut Body, usize, E, E)) {
        each_piece(f, sh, (self.rows, self.cols, self.lanes), body);
    }
}

/// Runs `body(f, q, row, column)` for the `q`-th of this invocation's pieces of a
/// `rows × cols` block cut into runs of `lanes` (piece `thread + q · invocations`),
/// those past the block skipped.
fn each_piece(
    f: &mut Body,
    sh: &Shape,
    (rows, cols, lanes): (u32, u32, u32),
    body: impl Fn(&mut Body, usize, E, E),
) {
    let per_row = cols / lanes;
    let items = rows * per_row;
    for q in 0..items.div_ceil(sh.invocations) {
        let item = local_id(0) + q * sh.invocations;
        let run = |f: &mut Body| {
            let item = f.let_("item", item.clone());
            let r = f.let_("r", item.clone() / per_row);
            let e = f.let_("e", (item % per_row) * lanes);
            body(f, q as usize, r, e);
        };
        if (q + 1) * sh.invocations <= items {
            run(f);
        } else {
            f.if_(item.clone().lt(items), run);
        }
    }
}

/// Row `r`, column `e` of the rows from `first` of a sequence (`limit` rows long) at
/// `base`, `stride` apart: its index, and whether it exists (inside the sequence and
/// `head_dim`).
fn source(
    f: &mut Body,
    sh: &Shape,
    (first, limit): (&E, u32),
    (base, stride): (&E, u32),
    (r, e): (E, &E),
) -> (E, E) {
    let pos = f.let_("pos", first.clone() + r);
    let inside = pos.clone().lt(limit) & e.clone().lt(sh.d);
    (base.clone() + pos * stride + e.clone(), inside)
}

/// Loads `rows` rows of `cols` elements from `first` of a sequence (`limit` rows
/// long) at `base`, `stride` apart: columns past `head_dim` and rows past `limit` are
/// zero. 4 elements per load where `head_dim` allows (every row then starts at a
/// multiple of 4; `cols` is a multiple of 8).
pub(super) fn load_rows(
    f: &mut Body,
    sh: &Shape,
    (src, rows, cols): (Mem, u32, u32),
    (first, limit): (&E, u32),
    (base, stride): (&E, u32),
) -> InFlight {
    let lanes: u32 = if sh.d % 4 == 0 { 4 } else { 1 };
    let zero = Num {
        ty: sh.dtype,
        lanes: lanes as u8,
    }
    .lit(0.0);
    let count = (rows * cols / lanes).div_ceil(sh.invocations);
    let block = InFlight {
        rows,
        cols,
        lanes,
        regs: (0..count).map(|_| f.var("staged", zero.clone())).collect(),
    };
    block.each(f, sh, |f, q, r, e| {
        let (at, inside) = source(f, sh, (first, limit), (base, stride), (r, &e));
        let reg = block.regs[q];
        f.if_(inside, |f| f.assign(reg, src.load(at, lanes as u8)));
    });
    block
}

/// Where element `(row, col)` of a staged block goes.
pub(super) type Placement = Box<dyn Fn(E, E) -> E>;

/// Rows `row` elements apart.
pub(super) fn padded(row: u32) -> Placement {
    Box::new(move |r, c| r * row + c)
}

/// The swizzled layout a warpgroup's operand loads read, rows of `cols` elements of
/// `elem` (a multiple of 128 bytes) in bands of 8: a row written whole hits every
/// bank once.
pub(super) fn swizzled(cols: u32, elem: kernelc_ir::ScalarType) -> Placement {
    Box::new(move |r, c| {
        let zero = E::from(0u32);
        element_index_expr(
            FragmentLayout::RowMajorSwizzled,
            elem,
            zero,
            E::from(8 * cols),
            r,
            c,
        )
    })
}

/// Stores a block loaded by [`load_rows`] into `dst` at `place(row, column)` (the
/// loads' lanes lie side by side there: every placement keeps runs of 4).
pub(super) fn store_rows(f: &mut Body, sh: &Shape, block: &InFlight, dst: Mem, place: Placement) {
    block.each(f, sh, |f, q, r, e| {
        f.store(dst, place(r, e), block.regs[q].get());
    });
}

/// Starts copying `rows` rows of `cols` elements from `first` of a sequence (`limit`
/// rows long) at `base`, `stride` apart, into `dst` at `offset + place(row,
/// column)`, 16 bytes (8 elements) at a time: zeros past `head_dim` (a multiple of 8)
/// and past `limit`.
pub(super) fn copy_rows(
    f: &mut Body,
    sh: &Shape,
    (src, rows, cols): (Mem, u32, u32),
    (first, limit): (&E, u32),
    (base, stride): (&E, u32),
    (dst, offset, place): (Mem, &E, &Placement),
) {
    const CHUNK: u32 = 8;
    each_piece(f, sh, (rows, cols, CHUNK), |f, _, r, e| {
        let (at, valid) = source(f, sh, (first, limit), (base, stride), (r.clone(), &e));
        let to = offset.clone() + place(r, e);
        f.copy_start((dst, to), (src, at), CHUNK as u8, valid);
    });
}
