//! Scaled dot-product attention, fused and tiled over keys with an online softmax
//! (flash-attention style): one launch, and the `seq_q × seq_k` score matrix never
//! touches global memory.
//!
//! **Schedule.** A workgroup owns a block of `BQ` query rows of one (batch, head). It
//! stages its queries once in shared memory, then walks the keys in blocks of `BK`:
//!
//! 1. stage the `BK × head_dim` blocks of K and V in shared memory (coalesced: the
//!    invocations walk each block in memory order; rows past `seq_k` are zero-filled);
//! 2. scores `S = scale·(Q·Kᵀ) (+ mask)`, `−∞` where a key is past `seq_k`, hidden by causality
//!    or the row is past `seq_q`. Register-blocked: one step of an invocation computes
//!    one key against 4 query rows, so each K element read from shared memory feeds 4
//!    FMAs; neighbouring invocations take neighbouring keys, and the K tile's rows are
//!    padded to an odd stride so that they hit different banks;
//! 3. per row: the new running max `m`, the rescale `α = e^{m_old − m}` of what was
//!    accumulated so far;
//! 4. probabilities `P = e^{S − m}` in place, all invocations at once;
//! 5. `O = α·O + P·V` (one step of an invocation updates one column `d` of 4 query
//!    rows, each V element read feeding 4 FMAs; neighbouring invocations on neighbouring
//!    columns) and `l = α·l + Σ P` per row,
//!
//! with a barrier between phases. At the end `o = O / l`, or 0 for a row that saw no key
//! (`l = 0`: the reference's rule for a query with no visible key or only `−∞` scores);
//! a NaN `l` (a NaN or `+∞` score) leaves the row NaN. A row whose running max is still
//! `−∞` shifts by 0 instead, so `e^{−∞ − (−∞)}` (NaN) never happens. The max ignores NaN
//! scores (IEEE maxNum); their `e^{NaN}` makes `l` and `O` NaN. With `causal`, key
//! blocks that no row of the query block can see are not visited, and within a block a
//! key hidden from a row never enters its `P·V` (see `accumulate`).
//!
//! `BQ`/`BK` are the largest tiles (at most 64, at most the sequence lengths, `BQ` a
//! multiple of the 4-row blocking where it can be) whose shared arrays fit
//! `caps.shared_memory_bytes`: 32×32 for head_dim 64 in f32 under 48 KiB, 64×64 on the
//! CPU. The accumulator `O` lives in shared memory, so any `head_dim` works with any
//! invocation count; a head_dim too large even for 1×1 tiles is a
//! [`LowerError::SharedMemory`]. A CPU workgroup is one invocation running every phase
//! loop with stride 1: the same kernel, its barriers trivially uniform.
//!
//! Storage f16/bf16 widen to f32 on load; every sum, max and exponential is in the
//! compute type (f32, or f64 for f64); the output is rounded once on store. The
//! log-sum-exp output (`lse`) is `shift + ln l` per row, from the same statistics.

use crate::lower::index::resolve_index;
use crate::lower::math::{compute_type, Num};
use crate::lower::schedule::{fold_grid, linear_workgroup, plan_1d};
use crate::lower::{
    declare_tensor, Binding, Launch, LowerError, Plan, ScalarParam, TargetCaps, Uniforms,
};
use crate::shape::broadcast_strides;
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// The largest query / key tile tried.
const MAX_TILE: u32 = 64;
/// Query rows one invocation carries through the score and P·V loops (register
/// blocking: each staged K or V element read from shared memory feeds this many FMAs).
const MAX_ROWS_PER_THREAD: u32 = 4;

/// Tile sizes of one lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tiles {
    /// Query rows per workgroup (a multiple of `rows`).
    pub bq: u32,
    /// Keys per staged block.
    pub bk: u32,
    /// Query rows per invocation step in the blocked loops.
    pub rows: u32,
    /// Row stride of the staged K tile: `head_dim`, made odd to spread shared-memory
    /// banks over neighbouring keys.
    pub k_stride: u32,
}

impl Tiles {
    /// Shared-memory elements the kernel declares for these tiles.
    fn shared_elems(&self, d: u32) -> u64 {
        let (bq, bk, d) = (self.bq as u64, self.bk as u64, d as u64);
        // Q and O (bq×d), K (bk×stride), V (bk×d), S (bq×bk), four per-row statistics.
        2 * bq * d + bk * self.k_stride as u64 + bk * d + bq * bk + 4 * bq
    }

    /// The register-blocking factor for `bq` rows: the largest power of two up to
    /// [`MAX_ROWS_PER_THREAD`] that divides it.
    fn rows_for(bq: u32) -> u32 {
        let mut r = MAX_ROWS_PER_THREAD;
        while bq % r != 0 {
            r /= 2;
        }
        r
    }
}

/// Picks the largest tiles that fit the shared-memory budget: both start at
/// `min(64, seq)` (the query tile rounded up to a multiple of 4 rows for register
/// blocking; rows past `seq_q` are masked); the key tile shrinks first, since query
/// rows amortise the K/V loads.
fn pick_tiles(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    elem_bytes: u64,
) -> Result<Tiles, LowerError> {
    let d = dim(spec.head_dim, "head_dim")?;
    let k_stride = if d % 2 == 0 { d + 1 } else { d };
    let budget = caps.shared_memory_bytes as u64 / elem_bytes;
    let seq_q = dim(spec.seq_q, "seq_q")?;
    let bq = if seq_q < MAX_ROWS_PER_THREAD {
        seq_q
    } else {
        MAX_TILE.min(seq_q.next_multiple_of(MAX_ROWS_PER_THREAD))
    };
    let mut t = Tiles {
        bq,
        bk: MAX_TILE.min(dim(spec.seq_k, "seq_k")?),
        rows: 1,
        k_stride,
    };
    while t.shared_elems(d) > budget {
        if t.bq == 1 && t.bk == 1 {
            return Err(LowerError::SharedMemory {
                op: OpSpec::Attention(spec.clone()).name(),
                needed: t.shared_elems(d) * elem_bytes,
                available: caps.shared_memory_bytes as u64,
            });
        }
        if t.bk >= t.bq {
            t.bk = t.bk.div_ceil(2);
        } else if t.bq > 2 * MAX_ROWS_PER_THREAD {
            // Stay a multiple of the blocking factor while there is room.
            t.bq = (t.bq / 2).next_multiple_of(MAX_ROWS_PER_THREAD);
        } else {
            t.bq = t.bq.div_ceil(2);
        }
    }
    t.rows = Tiles::rows_for(t.bq);
    Ok(t)
}

/// A size as u32 (every tensor has fewer than 2^31 elements, so this holds for valid
/// specs; the error keeps a bad one from wrapping).
fn dim(v: usize, what: &str) -> Result<u32, LowerError> {
    u32::try_from(v).map_err(|_| LowerError::TooLarge {
        what: what.into(),
        value: v as u64,
        limit: u32::MAX as u64,
    })
}

/// Where rows of one (batch, head) live in a q/k/v/o tensor.
pub(super) struct HeadLayout {
    /// Elements between consecutive sequence positions.
    pub row_stride: u32,
    /// Elements between heads (bhsd: a whole head's rows; bshd: one row).
    head_stride: u32,
    /// Elements between batches.
    batch_stride: u32,
}

impl HeadLayout {
    fn new(layout: AttentionLayout, heads: u32, seq: u32, d: u32) -> HeadLayout {
        match layout {
            AttentionLayout::Bhsd => HeadLayout {
                row_stride: d,
                head_stride: seq * d,
                batch_stride: heads * seq * d,
            },
            AttentionLayout::Bshd => HeadLayout {
                row_stride: heads * d,
                head_stride: d,
                batch_stride: seq * heads * d,
            },
        }
    }

    /// Offset of row 0, element 0 of head `h` of batch `b`.
    fn base(&self, b: &E, h: &E) -> E {
        b.clone() * self.batch_stride + h.clone() * self.head_stride
    }
}

/// Element strides of the mask over `[batch, heads, seq_q, seq_k]` (0 where it
/// broadcasts).
fn mask_strides(spec: &AttentionSpec) -> Option<[u32; 4]> {
    let shape = spec.mask.as_ref()?;
    let s = broadcast_strides(shape, &spec.score_shape());
    // Each stride is below the mask's element count (< 2^31).
    Some([s[0] as u32, s[1] as u32, s[2] as u32, s[3] as u32])
}

/// `coef · e` with the zero and unit cases folded away.
fn scaled(e: E, coef: u32) -> Option<E> {
    match coef {
        0 => None,
        1 => Some(e),
        c => Some(e * c),
    }
}

/// Sum of optional terms (0 when all are absent).
fn sum_terms(terms: impl IntoIterator<Item = Option<E>>) -> E {
    terms
        .into_iter()
        .flatten()
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| E::from(0u32))
}

/// Everything the kernel body needs to know, fixed at lowering time.
pub(super) struct Shape {
    pub tiles: Tiles,
    pub invocations: u32,
    pub d: u32,
    pub seq_q: u32,
    pub seq_k: u32,
    pub heads: u32,
    pub group: u32,
    pub q_blocks: u32,
    pub workgroups: u32,
    pub grid: [u32; 3],
    pub q_layout: HeadLayout,
    pub kv_layout: HeadLayout,
    /// Where rows of one (batch, head) live in `lse`, with `lse`.
    pub lse_layout: Option<HeadLayout>,
    pub mask: Option<[u32; 4]>,
    pub causal: bool,
    /// Key `j` is visible to query `i` iff `j + seq_q ≤ i + causal_keys` (with causal).
    pub causal_keys: u32,
    pub dtype: ScalarType,
    pub num: Num,
}

/// The buffers and the scale of the kernel.
pub(super) struct Buffers {
    pub q: Mem,
    pub k: Mem,
    pub v: Mem,
    pub mask: Option<Mem>,
    pub o: Mem,
    pub lse: Option<Mem>,
    /// The scale (a uniform parameter).
    pub scale: E,
}

/// Per-row statistics of the online softmax, in shared memory (`bq` each).
pub(super) struct RowStats {
    /// Running max per row (may be −∞).
    pub max: Mem,
    /// The finite shift of the current block per row (the max, or 0 while it is −∞).
    pub shift: Mem,
    /// The rescale `e^{m_old − m_new}` of the current block per row.
    pub scale: Mem,
    /// Running sum of probabilities per row.
    pub sum: Mem,
}

impl RowStats {
    pub fn declare(k: &mut KernelBuilder, ty: ScalarType, bq: u32) -> RowStats {
        RowStats {
            max: k.shared("row_max", ty, bq),
            shift: k.shared("row_shift", ty, bq),
            scale: k.shared("row_scale", ty, bq),
            sum: k.shared("row_sum", ty, bq),
        }
    }

    /// Row `r`'s running max moves from `old` to `max`: its finite shift (the max, or
    /// 0 while it is −∞) and the rescale `e^{old − shift}` of what was accumulated.
    pub fn update(&self, f: &mut Body, n: Num, r: E, (old, max): (E, E)) {
        self.update_with(f, n, r, (old, max), E::exp);
    }

    /// [`RowStats::update`] with `exp` for the exponential (`E::exp2` where the scores
    /// carry log₂e).
    pub fn update_with(
        &self,
        f: &mut Body,
        n: Num,
        r: E,
        (old, max): (E, E),
        exp: impl Fn(E) -> E,
    ) {
        let shift = f.let_(
            "shift",
            max.clone()
                .eq(n.lit(f64::NEG_INFINITY))
                .select(n.lit(0.0), max.clone()),
        );
        // e^{−∞ − shift} = 0: nothing was accumulated while the max was −∞.
        f.store(self.scale, r.clone(), exp(old - shift.clone()));
        f.store(self.max, r.clone(), max);
        f.store(self.shift, r, shift);
    }
}

/// The buffers and shared arrays of the kernel.
struct Mems {
    io: Buffers,
    /// Scaled queries, `bq × d`.
    qs: Mem,
    /// Keys, `bk × k_stride`.
    ks: Mem,
    /// Values, `bk × d`.
    vs: Mem,
    /// Scores, then probabilities, `bq × bk`.
    s: Mem,
    /// Unnormalised output, `bq × d`.
    acc: Mem,
    rows: RowStats,
}

impl Shape {
    /// Whether query `i` sees key `kj`: both inside their sequences and, with
    /// `causal`, `kj ≤ i + causal_keys − seq_q` (without a negative intermediate).
    pub(super) fn sees(&self, i: &E, kj: &E) -> E {
        let visible = i.clone().lt(self.seq_q) & kj.clone().lt(self.seq_k);
        if self.causal {
            visible & (kj.clone() + self.seq_q).le(i.clone() + self.causal_keys)
        } else {
            visible
        }
    }

    /// How many of a block's `bk` keys from `k0` query `i` sees (causal), with
    /// `from = k0 + seq_q`: the first `clamp(i + causal_keys + 1 − seq_q − k0, 0, bk)`,
    /// without a negative intermediate.
    pub(super) fn keys_seen(&self, from: &E, i: E, bk: u32) -> E {
        ((i + (self.causal_keys + 1))
            .max(from.clone())
            .min(from.clone() + bk)
            - from.clone())
        // A no-op that bounds the loops over it for the loop-budget analysis, which
        // does not relate `from` to itself across the max and min.
        .min(bk)
    }

    /// The score of a pair query `i` sees: `scale·dot`, plus the mask's element.
    pub(super) fn score(&self, io: &Buffers, blk: &Block, dot: E, (i, kj): (E, E)) -> E {
        let s = dot * io.scale.clone();
        match (io.mask, &blk.mask_base, self.mask) {
            (Some(mask), Some(base), Some([_, _, si, sj])) => {
                let src = sum_terms([Some(base.clone()), scaled(i, si), scaled(kj, sj)]);
                s + self.num.load(mask, self.dtype, src)
            }
            _ => s,
        }
    }
}

/// The sizes and grid of one lowering with `tiles`, `invocations` per workgroup.
pub(super) fn shape_of(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    tiles: Tiles,
    invocations: u32,
) -> Result<Shape, LowerError> {
    let ct = compute_type(spec.dtype);
    let d = dim(spec.head_dim, "head_dim")?;
    let seq_q = dim(spec.seq_q, "seq_q")?;
    let seq_k = dim(spec.seq_k, "seq_k")?;
    let heads = dim(spec.heads, "heads")?;
    let kv_heads = dim(spec.kv_heads, "kv_heads")?;
    let batch = dim(spec.batch, "batch")?;
    let q_blocks = seq_q.div_ceil(tiles.bq);
    // batch · heads · q_blocks ≤ batch · heads · seq_q < 2^31 for a valid spec.
    let workgroups = batch * heads * q_blocks;
    Ok(Shape {
        tiles,
        invocations,
        d,
        seq_q,
        seq_k,
        heads,
        group: heads / kv_heads,
        q_blocks,
        workgroups,
        grid: fold_grid(workgroups, caps)?,
        q_layout: HeadLayout::new(spec.layout, heads, seq_q, d),
        kv_layout: HeadLayout::new(spec.layout, kv_heads, seq_k, d),
        lse_layout: spec
            .lse
            .then(|| HeadLayout::new(spec.layout, heads, seq_q, 1)),
        mask: mask_strides(spec),
        causal: spec.causal,
        causal_keys: dim(spec.causal_keys(), "seq")?,
        dtype: spec.dtype,
        num: Num::scalar(ct),
    })
}

/// Declares the buffers (q, k, v, mask if any, o, lse if any: binding order) and the
/// scale.
pub(super) fn declare_buffers(
    k: &mut KernelBuilder,
    op: &OpSpec,
    scale: &ScalarParam,
) -> Result<Buffers, LowerError> {
    let inputs = op.inputs();
    let outputs = op.outputs();
    let (Some(q), Some(kk), Some(v), Some(o)) = (
        inputs.first(),
        inputs.get(1),
        inputs.get(2),
        outputs.first(),
    ) else {
        return Err(LowerError::Internal("attention without q, k, v and o"));
    };
    let (q, kk, v) = (
        declare_tensor(k, q, Access::Read),
        declare_tensor(k, kk, Access::Read),
        declare_tensor(k, v, Access::Read),
    );
    let mask = inputs.get(3).map(|m| declare_tensor(k, m, Access::Read));
    let o = declare_tensor(k, o, Access::Write);
    let lse = outputs.get(1).map(|l| declare_tensor(k, l, Access::Write));
    let scale = scale.declare(k);
    Ok(Buffers {
        q,
        k: kk,
        v,
        mask,
        o,
        lse,
        scale,
    })
}

/// Declares the buffers and the shared arrays.
fn declare(
    k: &mut KernelBuilder,
    op: &OpSpec,
    sh: &Shape,
    scale: &ScalarParam,
) -> Result<Mems, LowerError> {
    let io = declare_buffers(k, op, scale)?;
    let (ct, d, t) = (sh.num.ty, sh.d, sh.tiles);
    Ok(Mems {
        io,
        qs: k.shared("q_tile", ct, t.bq * d),
        ks: k.shared("k_tile", ct, t.bk * t.k_stride),
        vs: k.shared("v_tile", ct, t.bk * d),
        s: k.shared("scores", ct, t.bq * t.bk),
        acc: k.shared("acc", ct, t.bq * d),
        rows: RowStats::declare(k, ct, t.bq),
    })
}

pub(super) fn attention(spec: &AttentionSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    if let Some(tiles) = super::warpgroup::tiles(spec, caps) {
        return super::warpgroup::attention(spec, caps, tiles);
    }
    if let Some(tiles) = super::fragments::tiles(spec, caps) {
        return super::fragments::attention(spec, caps, tiles);
    }
    if super::blocked::eligible(spec, caps) {
        return super::blocked::attention(spec, caps);
    }
    let ct = compute_type(spec.dtype);
    let tiles = pick_tiles(spec, caps, ct.size_bytes() as u64)?;
    let sh = shape_of(spec, caps, tiles, caps.invocations_1d())?;
    let op = OpSpec::Attention(spec.clone());
    let mut k = KernelBuilder::new(op.name(), [sh.invocations, 1, 1]);
    let uniforms = op.uniforms();
    let scale = Uniforms::new(&uniforms).param("scale")?;
    let mems = declare(&mut k, &op, &sh, &scale)?;
    let kernel = k.build(|f| each_workgroup(f, &sh, |f, wg| body(f, &sh, &mems, wg)))?;
    Ok(single_launch(&op, kernel, sh.grid, scale))
}

/// Runs `body` for each in-range workgroup of the (possibly folded) grid.
pub(super) fn each_workgroup(f: &mut Body, sh: &Shape, body: impl FnOnce(&mut Body, E)) {
    let wg = f.let_("wg", linear_workgroup(sh.grid));
    if sh.grid[0] * sh.grid[1] == sh.workgroups {
        body(f, wg);
    } else {
        // A folded grid has a few spare workgroups; the condition is uniform, so the
        // barriers inside stay in uniform control flow.
        f.if_(wg.clone().lt(sh.workgroups), |f| body(f, wg));
    }
}

/// The one launch of an attention kernel: q, k, v, mask if any, then the outputs,
/// then the scale.
pub(super) fn single_launch(
    op: &OpSpec,
    kernel: kernelc_ir::Kernel,
    grid: [u32; 3],
    scale: ScalarParam,
) -> Plan {
    let inputs = op.inputs().len();
    let mut bindings: Vec<Binding> = (0..inputs).map(Binding::Input).collect();
    bindings.extend((0..op.outputs().len()).map(Binding::Output));
    bindings.push(scale.binding);
    Plan::single(Launch {
        kernel,
        grid,
        bindings,
    })
}

/// The position of the current invocation within its workgroup.
fn thread(sh: &Shape) -> E {
    if sh.invocations == 1 {
        E::from(0u32)
    } else {
        local_id(0)
    }
}

/// `for t in tid..count step invocations`: the workgroup's invocations share `count`
/// items, neighbours on neighbouring items.
pub(super) fn strided(
    f: &mut Body,
    sh: &Shape,
    name: &str,
    count: u32,
    body: impl FnOnce(&mut Body, E),
) {
    f.for_(name, thread(sh), count, sh.invocations, body);
}

/// Per-workgroup coordinates (all uniform).
pub(super) struct Block {
    /// First query row of the block.
    pub q0: E,
    /// Offsets of the (batch, head) in q/o and of its kv head in k/v.
    pub q_base: E,
    pub kv_base: E,
    /// Mask offset of (batch, head), when there is a mask.
    pub mask_base: Option<E>,
    /// Offset of (batch, head) in `lse`, with `lse`.
    pub lse_base: Option<E>,
}

pub(super) fn block_coords(f: &mut Body, sh: &Shape, wg: E) -> Block {
    // With `causal`, the last query blocks see the most keys: they start first, so
    // that the short ones fill the end of the grid.
    let qb = match sh.causal {
        true => sh.q_blocks.saturating_sub(1) - wg.clone() % sh.q_blocks,
        false => wg.clone() % sh.q_blocks,
    };
    let qb = f.let_("q_block", qb);
    let bh = f.let_("bh", wg / sh.q_blocks);
    let h = f.let_("head", bh.clone() % sh.heads);
    let b = f.let_("batch", bh / sh.heads);
    let g = f.let_("kv_head", h.clone() / sh.group);
    let q0 = f.let_("q0", qb * sh.tiles.bq);
    let q_base = f.let_("q_base", sh.q_layout.base(&b, &h));
    let kv_base = f.let_("kv_base", sh.kv_layout.base(&b, &g));
    let lse_base = sh
        .lse_layout
        .as_ref()
        .map(|l| f.let_("lse_base", l.base(&b, &h)));
    let mask_base = sh.mask.map(|[sb, sh_, _, _]| {
        let e = sum_terms([scaled(b.clone(), sb), scaled(h.clone(), sh_)]);
        f.let_("mask_base", e)
    });
    Block {
        q0,
        q_base,
        kv_base,
        mask_base,
        lse_base,
    }
}

/// The kernel body of one in-range workgroup.
fn body(f: &mut Body, sh: &Shape, m: &Mems, wg: E) {
    let blk = block_coords(f, sh, wg);
    init(f, sh, m, &blk);
    f.barrier();
    let key_blocks = key_block_count(f, sh, &blk);
    f.for_("kb", 0u32, key_blocks, 1, |f, kb| {
        let k0 = f.let_("k0", kb * sh.tiles.bk);
        stage_kv(f, sh, m, &blk, &k0);
        f.barrier();
        scores(f, sh, m, &blk, &k0);
        f.barrier();
        row_stats(f, sh, m);
        f.barrier();
        probabilities(f, sh, m);
        f.barrier();
        accumulate(f, sh, m, &blk, &k0);
        f.barrier();
    });
    finish(
        f,
        sh,
        &m.io,
        (m.acc, sh.d),
        (m.rows.sum, m.rows.shift),
        &blk,
    );
}

/// Stages the block's queries (zero past `seq_q`) and clears the accumulator and the
/// row statistics. The scale multiplies each dot product, not the queries: a query
/// scaled first could underflow to 0 and meet an infinite key as `0·∞ = NaN`.
fn init(f: &mut Body, sh: &Shape, m: &Mems, blk: &Block) {
    let (n, d) = (sh.num, sh.d);
    strided(f, sh, "t", sh.tiles.bq * d, |f, t| {
        let qi = f.let_("qi", t.clone() / d);
        let dd = f.let_("dd", t.clone() % d);
        let i = f.let_("i", blk.q0.clone() + qi);
        let src = blk.q_base.clone() + i.clone() * sh.q_layout.row_stride + dd;
        f.if_else(
            i.lt(sh.seq_q),
            |f| {
                f.store(m.qs, t.clone(), n.load(m.io.q, sh.dtype, src));
            },
            |f| f.store(m.qs, t.clone(), n.lit(0.0)),
        );
        f.store(m.acc, t, n.lit(0.0));
    });
    init_rows(f, sh, &m.rows);
}

/// Clears the row statistics: max `−∞`, shift and sum 0.
pub(super) fn init_rows(f: &mut Body, sh: &Shape, rows: &RowStats) {
    let n = sh.num;
    strided(f, sh, "r", sh.tiles.bq, |f, r| {
        f.store(rows.max, r.clone(), n.lit(f64::NEG_INFINITY));
        // Read by `finish` for lse even where no key block is visited.
        f.store(rows.shift, r.clone(), n.lit(0.0));
        f.store(rows.sum, r, n.lit(0.0));
    });
}

/// How many key blocks the workgroup visits: all of them, or with `causal` only those
/// up to the last key its last row sees (`j ≤ i + causal_keys − seq_q`).
pub(super) fn key_block_count(f: &mut Body, sh: &Shape, blk: &Block) -> E {
    let bk = sh.tiles.bk;
    if !sh.causal {
        return E::from(sh.seq_k.div_ceil(bk));
    }
    // Keys visible to the block's last row `end − 1`: clamp(end + causal_keys − seq_q,
    // 0, seq_k). `end + causal_keys` < 2^32: both are below 2^31.
    let end = (blk.q0.clone() + sh.tiles.bq).min(sh.seq_q);
    let reach = f.let_("reach", end + sh.causal_keys);
    let visible = f.let_("visible", (reach.max(sh.seq_q) - sh.seq_q).min(sh.seq_k));
    f.let_("key_blocks", (visible + (bk - 1)) / bk)
}

/// Stages K and V rows `k0 .. k0 + bk` (zero past `seq_k`).
fn stage_kv(f: &mut Body, sh: &Shape, m: &Mems, blk: &Block, k0: &E) {
    let (n, d) = (sh.num, sh.d);
    strided(f, sh, "t", sh.tiles.bk * d, |f, t| {
        let j = f.let_("j", t.clone() / d);
        let dd = f.let_("dd", t.clone() % d);
        let kj = f.let_("kj", k0.clone() + j.clone());
        let k_at = f.let_("k_at", j * sh.tiles.k_stride + dd.clone());
        let src = blk.kv_base.clone() + kj.clone() * sh.kv_layout.row_stride + dd;
        f.if_else(
            kj.lt(sh.seq_k),
            |f| {
                let src = f.let_("src", src);
                f.store(m.ks, k_at.clone(), n.load(m.io.k, sh.dtype, src.clone()));
                f.store(m.vs, t.clone(), n.load(m.io.v, sh.dtype, src));
            },
            |f| {
                f.store(m.ks, k_at.clone(), n.lit(0.0));
                f.store(m.vs, t.clone(), n.lit(0.0));
            },
        );
    });
}

/// `S[qi, j] = scale·(q_i · k_j) (+ mask)` for visible pairs, `−∞` elsewhere. One step of an
/// invocation computes key `j` against `rows` query rows: each K element read feeds
/// `rows` FMAs; neighbouring invocations take neighbouring keys.
fn scores(f: &mut Body, sh: &Shape, m: &Mems, blk: &Block, k0: &E) {
    let (n, d, bk, rows) = (sh.num, sh.d, sh.tiles.bk, sh.tiles.rows);
    strided(f, sh, "t", sh.tiles.bq / rows * bk, |f, t| {
        let g = f.let_("row_group", t.clone() / bk);
        let j = f.let_("j", t % bk);
        let kj = f.let_("kj", k0.clone() + j.clone());
        let k_row = f.let_("k_row", j.clone() * sh.tiles.k_stride);
        let q_rows = f.let_("q_rows", g.clone() * (rows * d));
        // Rows and keys past the sequences hold zeros: the dot is harmless, then hidden.
        let dots: Vec<Var> = (0..rows).map(|_| f.var("dot", n.lit(0.0))).collect();
        f.for_("dd", 0u32, d, 1, |f, dd| {
            let kv = f.let_("kv", m.ks.at(k_row.clone() + dd.clone()));
            for (r, dot) in (0u32..).zip(&dots) {
                let qv = m.qs.at(q_rows.clone() + (dd.clone() + r * d));
                f.assign(*dot, dot.get() + qv * kv.clone());
            }
        });
        for (r, dot) in (0u32..).zip(&dots) {
            let qi = f.let_("qi", g.clone() * rows + r);
            let i = f.let_("i", blk.q0.clone() + qi.clone());
            let at = f.let_("s_at", qi * bk + j.clone());
            f.if_else(
                sh.sees(&i, &kj),
                |f| {
                    let s = sh.score(&m.io, blk, dot.get(), (i, kj.clone()));
                    f.store(m.s, at.clone(), s);
                },
                |f| f.store(m.s, at.clone(), n.lit(f64::NEG_INFINITY)),
            );
        }
    });
}

/// Per row: the new running max over this block, the finite shift the block's
/// probabilities use, and the rescale of everything accumulated before.
fn row_stats(f: &mut Body, sh: &Shape, m: &Mems) {
    let (n, bk) = (sh.num, sh.tiles.bk);
    strided(f, sh, "r", sh.tiles.bq, |f, r| {
        let old = f.let_("m_old", m.rows.max.at(r.clone()));
        let row = f.let_("s_row", r.clone() * bk);
        let max = f.var("m_new", old.clone());
        f.for_("j", 0u32, bk, 1, |f, j| {
            f.assign(max, max.get().max(m.s.at(row.clone() + j)));
        });
        m.rows.update(f, n, r, (old, max.get()));
    });
}

/// `P = e^{S − shift}` in place (masked scores become 0).
fn probabilities(f: &mut Body, sh: &Shape, m: &Mems) {
    let bk = sh.tiles.bk;
    strided(f, sh, "t", sh.tiles.bq * bk, |f, t| {
        let shift = m.rows.shift.at(t.clone() / bk);
        f.store(m.s, t.clone(), (m.s.at(t) - shift).exp());
    });
}

/// `O = α·O + P·V` and `l = α·l + Σ_j P` for every row. One step of an invocation
/// updates column `dd` of `rows` query rows: each V element read feeds `rows` FMAs;
/// neighbouring invocations take neighbouring columns.
///
/// With `causal`, a key hidden from a row never enters its sum (its value could be NaN
/// or ∞, and `0·∞` is NaN): the loop runs over the keys every row of the group sees,
/// then over the few (fewer than `rows`) that only its later rows see, each kept for
/// the rows that see it; keys no row of the group sees are not visited.
fn accumulate(f: &mut Body, sh: &Shape, m: &Mems, blk: &Block, k0: &E) {
    let (n, d, bk, rows) = (sh.num, sh.d, sh.tiles.bk, sh.tiles.rows);
    strided(f, sh, "t", sh.tiles.bq / rows * d, |f, t| {
        let g = f.let_("row_group", t.clone() / d);
        let dd = f.let_("dd", t % d);
        let p_rows = f.let_("p_rows", g.clone() * (rows * bk));
        let sums: Vec<Var> = (0..rows).map(|_| f.var("pv", n.lit(0.0))).collect();
        // Key `j` of the block for every row of the group; `sees(r)`, where given,
        // keeps it out of the rows that do not see it.
        let step = |f: &mut Body, j: &E, sees: Option<&dyn Fn(u32) -> E>| {
            let vv = f.let_("vv", m.vs.at(j.clone() * d + dd.clone()));
            for (r, sum) in (0u32..).zip(&sums) {
                let p = m.s.at(p_rows.clone() + (j.clone() + r * bk));
                let term = match sees {
                    Some(sees) => sees(r).select(p * vv.clone(), n.lit(0.0)),
                    None => p * vv.clone(),
                };
                f.assign(*sum, sum.get() + term);
            }
        };
        if sh.causal {
            // Row `i` sees key `k0 + j` iff `k0 + j + seq_q ≤ i + causal_keys`: the
            // block's first `clamp(i + causal_keys + 1 − seq_q − k0, 0, bk)` keys, without a negative
            // intermediate.
            let from = f.let_("k_from", k0.clone() + sh.seq_q);
            let seen = |i: E| sh.keys_seen(&from, i, bk);
            let first = f.let_("first_row", blk.q0.clone() + g.clone() * rows);
            let all = f.let_("all_see", seen(first.clone()));
            let some = f.let_("last_sees", seen(first.clone() + (rows - 1)));
            f.for_("j", 0u32, all.clone(), 1, |f, j| step(f, &j, None));
            f.for_("j", all, some, 1, |f, j| {
                // `k0 + j + seq_q ≤ i + causal_keys` for row `i = first + r`.
                let key = f.let_("kj_plus_seq_q", from.clone() + j.clone());
                let sees = |r: u32| key.clone().le(first.clone() + (sh.causal_keys + r));
                step(f, &j, Some(&sees));
            });
        } else {
            f.for_("j", 0u32, bk, 1, |f, j| step(f, &j, None));
        }
        for (r, sum) in (0u32..).zip(&sums) {
            let qi = f.let_("qi", g.clone() * rows + r);
            let at = f.let_("o_at", qi.clone() * d + dd.clone());
            let alpha = m.rows.scale.at(qi);
            f.store(m.acc, at.clone(), m.acc.at(at) * alpha + sum.get());
        }
    });
    strided(f, sh, "r", sh.tiles.bq, |f, r| {
        let row = f.let_("p_row", r.clone() * bk);
        let sum = f.var("p_sum", n.lit(0.0));
        f.for_("j", 0u32, bk, 1, |f, j| {
            f.assign(sum, sum.get() + m.s.at(row.clone() + j));
        });
        let alpha = m.rows.scale.at(r.clone());
        f.store(m.rows.sum, r.clone(), m.rows.sum.at(r) * alpha + sum.get());
    });
}

/// `o = O / l` for the block's rows below `seq_q`; a row that saw no key (`l = 0`) gets
/// 0. The accumulator `acc` holds row `r` from `r · acc_stride` on; `sum` and `shift`
/// hold row `r`'s `l` and shift at `r`.
pub(super) fn finish(
    f: &mut Body,
    sh: &Shape,
    io: &Buffers,
    (acc, acc_stride): (Mem, u32),
    (sum, shift): (Mem, Mem),
    blk: &Block,
) {
    let (n, d) = (sh.num, sh.d);
    strided(f, sh, "t", sh.tiles.bq * d, |f, t| {
        let qi = f.let_("qi", t.clone() / d);
        let dd = f.let_("dd", t.clone() % d);
        let i = f.let_("i", blk.q0.clone() + qi.clone());
        f.if_(i.clone().lt(sh.seq_q), |f| {
            let l = f.let_("l", sum.at(qi.clone()));
            let at = if acc_stride == d {
                t.clone()
            } else {
                qi * acc_stride + dd.clone()
            };
            let value = normalized(n, acc.at(at), l);
            let dst = blk.q_base.clone() + i * sh.q_layout.row_stride + dd;
            f.store(io.o, dst, n.narrow(value, sh.dtype));
        });
    });
    store_lse(f, sh, io, (sum, shift, None), blk);
}

/// `o = O / l`, or 0 where `l = 0` (only where no key contributed); a NaN `l` (a NaN
/// or `+∞` score) keeps the row NaN.
pub(super) fn normalized(n: Num, out: E, l: E) -> E {
    l.clone().eq(n.lit(0.0)).select(n.lit(0.0), out / l)
}

/// `lse = shift + ln l` for the block's rows below `seq_q`, where the op has the
/// output; `sum` and `shift` hold row `r`'s `l` and shift at `r`, the shift in
/// natural-log units or, with `unit`, in units of that many (ln 2 for a shift in the
/// log₂ domain). Invocation `r` (of a workgroup of at least `bq`) takes row `r`.
pub(super) fn store_lse(
    f: &mut Body,
    sh: &Shape,
    io: &Buffers,
    (sum, shift, unit): (Mem, Mem, Option<f64>),
    blk: &Block,
) {
    if let (Some(lse), Some(base), Some(layout)) = (io.lse, &blk.lse_base, &sh.lse_layout) {
        strided(f, sh, "r", sh.tiles.bq, |f, r| {
            let i = f.let_("i", blk.q0.clone() + r.clone());
            f.if_(i.clone().lt(sh.seq_q), |f| {
                // ln 0 = −∞ for a row that saw no key; a NaN sum stays NaN.
                let shift = match unit {
                    None => shift.at(r.clone()),
                    Some(unit) => shift.at(r.clone()) * sh.num.lit(unit),
                };
                let value = shift + sum.at(r).log();
                f.store(lse, base.clone() + i * layout.row_stride, value);
            });
        });
    }
}

// ---- rope ----
pub(super) fn rope(spec: &RopeSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Rope(spec.clone());
    let half = spec.rotary() / 2;
    let pass = spec.head_dim - spec.rotary();
    let rows = spec.batch * spec.seq * spec.heads;
    // Items of a row: its pairs, then the dims that pass through.
    let per_row = half + pass;
    let w = caps.vector_width as usize;
    let vector = w > 1 && pass == 0 && !spec.interleaved && half % w == 0;
    let lanes = if vector { w as u8 } else { 1 };
    let items = rows * per_row;
    let grid = plan_1d((items / lanes as usize) as u64, caps, 1)?;
    let ty = compute_type(spec.dtype);
    let n = Num { ty, lanes };
    let x_len = (rows * spec.head_dim) as u64;
    let table_len = (spec.max_positions * half) as u64;
    let positions = op.inputs()[3].numel() as u64;

    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let xm = k.buffer("x", spec.dtype, x_len, Access::Read);
    let cm = k.buffer("cos", spec.dtype, table_len, Access::Read);
    let sm = k.buffer("sin", spec.dtype, table_len, Access::Read);
    let pm = k.buffer("positions", spec.index_dtype, positions, Access::Read);
    let ym = k.buffer("y", spec.dtype, x_len, Access::Write);
    let (h32, heads, seq) = (half as u32, spec.heads as u32, spec.seq as u32);
    let (d32, r32) = (spec.head_dim as u32, spec.rotary() as u32);
    let kernel = k.build(|f| {
        grid.for_each_vector(f, lanes, "item", |f, item| {
            let (kk, row) = if per_row == half {
                (f.let_("k", item.clone() % h32), f.let_("row", item / h32))
            } else {
                let per_row = per_row as u32;
                (
                    f.let_("k", item.clone() % per_row),
                    f.let_("row", item / per_row),
                )
            };
            let rotate = |f: &mut Body| {
                // The element of `positions`: the row's step, or its (batch, step).
                let at = match (spec.batch_positions, spec.seq, spec.heads) {
                    (true, _, 1) => row.clone(),
                    (true, _, _) => row.clone() / heads,
                    (false, 1, _) => E::from(0u32),
                    (false, _, 1) => row.clone() % seq,
                    (false, _, _) => (row.clone() / heads) % seq,
                };
                let (valid, p) =
                    resolve_index(f, pm.at(at), spec.index_dtype, spec.max_positions, false);
                let t = f.let_("t", p * h32 + kk.clone());
                let zero = n.lit(0.0);
                let c = f.let_(
                    "c",
                    valid
                        .clone()
                        .select(n.load(cm, spec.dtype, t.clone()), zero.clone()),
                );
                let sn = f.let_("sn", valid.select(n.load(sm, spec.dtype, t), zero));
                let (lo, hi) = if spec.interleaved {
                    let lo = f.let_("lo", row.clone() * d32 + kk.clone() * 2u32);
                    (lo.clone(), f.let_("hi", lo + 1u32))
                } else {
                    let lo = f.let_("lo", row.clone() * d32 + kk.clone());
                    (lo.clone(), f.let_("hi", lo + h32))
                };
                let x1 = f.let_("x1", n.load(xm, spec.dtype, lo.clone()));
                let x2 = f.let_("x2", n.load(xm, spec.dtype, hi.clone()));
                let y1 = x1.clone() * c.clone() - x2.clone() * sn.clone();
                let y2 = x1 * sn + x2 * c;
                f.store(ym, lo, n.narrow(y1, spec.dtype));
                f.store(ym, hi, n.narrow(y2, spec.dtype));
            };
            if pass == 0 {
                rotate(f);
                return;
            }
            // Past the pairs: the dim `rotary + (k − half)` passes through.
            f.if_else(kk.clone().lt(h32), rotate, |f| {
                let at = f.let_("at", row.clone() * d32 + r32 + (kk.clone() - h32));
                f.store(ym, at.clone(), xm.load(at, 1));
            });
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![
            Binding::Input(0),
            Binding::Input(1),
            Binding::Input(2),
            Binding::Input(3),
            Binding::Output(0),
        ],
    }))
}
