//! Attention on matrix fragments (tensor cores) for f16 and bf16, on devices whose caps
//! say `matrix_fragments`: FlashAttention-2's schedule, the softmax between the two
//! products kept in registers.
//!
//! A workgroup owns a block of query rows of one (batch, head), four warps of 16 rows
//! each (64). Queries, keys and values are staged in shared memory in the storage
//! type, in rows of `head_dim` rounded up to 16 (zeros past it) and padded by 8
//! elements (16-byte aligned rows for `ldmatrix`, 8 of them on distinct banks); each
//! load of a block is issued into registers before the first is stored ([`InFlight`]):
//! each value block while its scores form, each key block while the values multiply.
//! Per key block:
//!
//! 1. `S = Q·Kᵀ` on `m16n8k16` fragments (the warp's queries held as `A` fragments
//!    for head dims up to 128, reloaded from shared memory past that);
//! 2. in registers (`map`, `reduce_rows`): scale and mask, the new running max `m`
//!    (a row's elements, then its quad's, `reduce_rows`), its finite shift and the
//!    rescale `α = 2^{m_old − shift}`, `P = 2^{S − shift}` (the scores carry the
//!    factor log₂e, so each weight is one `exp2`), `l = α·l + P` per element (the
//!    row sum is taken once, at the end), `O = α·O`;
//! 3. `P` rounded to the storage type as `A` fragments in the registers it is in
//!    (`convert`), and `O += P·V` with `V` read by `ldmatrix.trans`.
//!
//! Three barriers per block: the key tile is read (by step 1) before the value tile is
//! stored, the value tile is stored before `P·V` reads it, and the next key tile is
//! stored after. With `causal`, a block that some row of the workgroup does not see
//! whole takes `P·V` element by element instead (a `map` over `O` whose rows read the
//! weights, f32, from shared memory over the keys they see): a key hidden from a row
//! never multiplies into it, so a NaN or ∞ value there cannot leak (the family's rule),
//! a block or two per row of blocks.
//!
//! The rounding of `P` to f16/bf16 is in the family's tolerance row
//! (`condition::attention`); the sums are the tensor cores' and the quads' own order
//! (docs/semantics.md, "Matrix fragments"); the rest is as [`super::lower`] computes
//! it. The end is [`super::lower`]'s: `O`, `l` and the shift stored to shared memory
//! (`O` in the key tile's bytes), `o = O / l`, and `lse`.

use super::lower::{
    block_coords, declare_buffers, each_workgroup, key_block_count, shape_of, single_launch,
    strided, Buffers, Shape, Tiles,
};
use super::online::{
    exponentiate, natural_shift, partly_visible, rescale, scale_and_mask, store_and_finish,
    Leftovers, RowStatistics, ScoreBlock,
};
use super::staging::{load_rows, padded, store_rows};
use super::AttentionSpec;
use crate::lower::math::Num;
use crate::lower::{LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout, FragmentRole, MmaShape, RowReduction, WARP};
use kernelc_ir::{FragmentId, ScalarType};

/// The multiply: f16/bf16 operands, f32 sums.
const SHAPE: MmaShape = MmaShape::M16N8K16;
/// Padding of a staged row of Q, K and V (16 bytes of 16-bit elements).
const PAD: u32 = 8;
/// The largest padded head dim whose queries a warp keeps in registers (8 `A`
/// fragments); past it, `O`'s fragments take the registers.
const QUERIES_IN_REGISTERS: u32 = 128;

/// The sizes of one lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FragmentTiles {
    /// Warps of a workgroup, each owning `SHAPE.m` query rows.
    warps: u32,
    /// Keys per block.
    bk: u32,
    /// `head_dim` rounded up to the multiply's depth (16).
    dk: u32,
    /// `head_dim` rounded up to a fragment's width (8): the columns of `O`.
    dn: u32,
    /// Whether the weights of partly visible blocks go through shared memory.
    causal: bool,
}

impl FragmentTiles {
    /// Query rows of a workgroup.
    fn bq(&self) -> u32 {
        self.warps * SHAPE.m
    }
    /// A staged row of Q, K or V.
    fn row(&self) -> u32 {
        self.dk + PAD
    }
    /// A row of the f32 weights of a partly visible block: 4 words past a multiple
    /// of 32, so that the 8 rows a warp's quads read hit distinct banks.
    fn weights_stride(&self) -> u32 {
        self.bk + 4
    }
    /// Rows of the value tile: the block's, and with `causal` 16 rows of zeros past
    /// them, which a warp multiplies instead of the keys it does not see whole.
    fn value_rows(&self) -> u32 {
        self.bk + if self.causal { SHAPE.k } else { 0 }
    }
    /// A row of `O` at the end: 8 words past a multiple of 32.
    fn acc_stride(&self) -> u32 {
        self.dn + 8
    }

    fn shared_bytes(&self, dtype: ScalarType) -> u64 {
        let elem = dtype.size_bytes() as u64;
        let (bq, bk, row) = (self.bq() as u64, self.bk as u64, self.row() as u64);
        // `O` at the end reuses the key tile's bytes.
        let keys_or_out = (bk * row * elem).max(4 * bq * self.acc_stride() as u64);
        let weights = if self.causal {
            4 * bq * self.weights_stride() as u64
        } else {
            0
        };
        (bq + self.value_rows() as u64) * row * elem
            + keys_or_out
            + weights
            + 2 * 4 * bq * SHAPE.n as u64
    }
}

/// The tiles of the fragment kernel for `spec` on `caps`, or `None` where the SIMT
/// kernel serves: no matrix units, another dtype, empty sequences, or too little
/// shared memory even with 32-key blocks.
pub(super) fn tiles(spec: &AttentionSpec, caps: &TargetCaps) -> Option<FragmentTiles> {
    let eligible = caps.matrix_fragments
        && matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16)
        && caps.max_invocations_per_workgroup >= 4 * WARP
        && spec.seq_q > 0
        && spec.seq_k > 0;
    if !eligible {
        return None;
    }
    let d = u32::try_from(spec.head_dim).ok()?;
    let (dk, dn) = (
        d.checked_next_multiple_of(SHAPE.k)?,
        d.checked_next_multiple_of(SHAPE.n)?,
    );
    let budget = caps.opt_in_shared_memory_limit() as u64;
    [(4, 64), (4, 32)]
        .into_iter()
        .map(|(warps, bk)| FragmentTiles {
            warps,
            bk,
            dk,
            dn,
            causal: spec.causal,
        })
        .find(|t| {
            t.shared_bytes(spec.dtype) <= budget
                && t.warps * WARP <= caps.max_invocations_per_workgroup
        })
}

/// The shared arrays.
struct Staged {
    io: Buffers,
    /// Queries, keys, values: `[rows][row()]` in the storage type.
    qs: Mem,
    ks: Mem,
    vs: Mem,
    /// The f32 weights of a partly visible block, `[bq][weights_stride]` (causal).
    weights: Option<Mem>,
    /// `O` at the end, `[bq][acc_stride]`, in the key tile's bytes.
    acc: Mem,
    /// `l` and the shift of each row at the end, `[8][bq]` (a row's at its index).
    sum: Mem,
    shift: Mem,
}

/// A warp's fragments.
struct Fragments {
    /// The warp's queries, an `A` per 16 columns (none past [`QUERIES_IN_REGISTERS`]:
    /// `a` is loaded from shared memory at each step instead).
    queries: Vec<FragmentId>,
    a: FragmentId,
    /// The `Kᵀ` and `V` operands, loaded before each multiply.
    b: FragmentId,
    /// `S`, then `P` (f32): `BK / 8` accumulators.
    scores: Vec<FragmentId>,
    /// `P` rounded to the storage type: `BK / 16` `A` fragments.
    weights: Vec<FragmentId>,
    /// `O`: `dn / 8` accumulators.
    out: Vec<FragmentId>,
    /// The row statistics of the online softmax.
    stats: RowStatistics,
    /// `l`'s partial sums: a column's share of the row's.
    sum: FragmentId,
}

pub(super) fn attention(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    ft: FragmentTiles,
) -> Result<Plan, LowerError> {
    let tiles = Tiles {
        bq: ft.bq(),
        bk: ft.bk,
        rows: 1,
        k_stride: ft.row(),
    };
    let sh = shape_of(spec, caps, tiles, ft.warps * WARP)?;
    let op = OpSpec::Attention(spec.clone());
    let mut k = KernelBuilder::new(format!("{}_mma", op.name()), [sh.invocations, 1, 1]);
    let uniforms = op.uniforms();
    let scale = Uniforms::new(&uniforms).param("scale")?;
    let io = declare_buffers(&mut k, &op, &scale)?;
    let (dt, f32) = (spec.dtype, ScalarType::F32);
    let ks = k.shared("k_tile", dt, ft.bk * ft.row());
    let m = Staged {
        io,
        qs: k.shared("q_tile", dt, ft.bq() * ft.row()),
        vs: k.shared("v_tile", dt, ft.value_rows() * ft.row()),
        weights: ft
            .causal
            .then(|| k.shared("weights", f32, ft.bq() * ft.weights_stride())),
        acc: k.shared_reusing("acc", f32, ft.bq() * ft.acc_stride(), ks),
        ks,
        sum: k.shared("row_sum", f32, SHAPE.n * ft.bq()),
        shift: k.shared("row_shift", f32, SHAPE.n * ft.bq()),
    };
    let kernel = k.build(|f| {
        let acc = |f: &mut Body, name: &str| {
            f.fragment(name, FragmentRole::Accumulator, SHAPE, ScalarType::F32)
        };
        let in_registers = if ft.dk <= QUERIES_IN_REGISTERS {
            ft.dk / SHAPE.k
        } else {
            0
        };
        let fr = Fragments {
            queries: (0..in_registers)
                .map(|_| f.fragment("q", FragmentRole::A, SHAPE, dt))
                .collect(),
            a: f.fragment("a", FragmentRole::A, SHAPE, dt),
            b: f.fragment("b", FragmentRole::B, SHAPE, dt),
            scores: (0..ft.bk / SHAPE.n).map(|_| acc(f, "s")).collect(),
            weights: (0..ft.bk / SHAPE.k)
                .map(|_| f.fragment("p", FragmentRole::A, SHAPE, dt))
                .collect(),
            out: (0..ft.dn / SHAPE.n).map(|_| acc(f, "o")).collect(),
            stats: RowStatistics {
                max: acc(f, "row_max"),
                block: acc(f, "block_max"),
                alpha: acc(f, "alpha"),
            },
            sum: acc(f, "row_sum"),
        };
        each_workgroup(f, &sh, |f, wg| body(f, &sh, ft, &m, &fr, wg))
    })?;
    Ok(single_launch(&op, kernel, sh.grid, scale))
}

fn body(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged, fr: &Fragments, wg: E) {
    let blk = block_coords(f, sh, wg);
    let n = Num::scalar(ScalarType::F32);
    let q_at = (&blk.q_base, sh.q_layout.row_stride);
    let kv_at = (&blk.kv_base, sh.kv_layout.row_stride);
    let queries = load_rows(f, sh, (m.io.q, ft.bq(), ft.dk), (&blk.q0, sh.seq_q), q_at);
    let keys = load_rows(
        f,
        sh,
        (m.io.k, ft.bk, ft.dk),
        (&E::from(0u32), sh.seq_k),
        kv_at,
    );
    store_rows(f, sh, &queries, m.qs, padded(ft.row()));
    store_rows(f, sh, &keys, m.ks, padded(ft.row()));
    let zeros = (ft.value_rows() - ft.bk) * ft.row();
    if zeros > 0 {
        let first = ft.bk * ft.row();
        let zero = Num::scalar(sh.dtype).lit(0.0);
        strided(f, sh, "z", zeros, |f, z| f.store(m.vs, z + first, zero));
    }
    for &o in &fr.out {
        f.fill_fragment(o, n.lit(0.0));
    }
    f.fill_fragment(fr.stats.max, n.lit(f64::NEG_INFINITY));
    f.fill_fragment(fr.sum, n.lit(0.0));
    f.barrier();
    // Warp `w` owns query rows `16·w ..`: its fragment accesses start there.
    let warp_row = f.let_("warp_row", (local_id(0) / WARP) * SHAPE.m);
    for (c, &q) in (0u32..).zip(&fr.queries) {
        let at = warp_row.clone() * ft.row() + c * SHAPE.k;
        f.load_fragment(q, m.qs, at, ft.row(), FragmentLayout::RowMajor);
    }
    let scale_log2 = f.let_(
        "scale_log2",
        m.io.scale.clone() * n.lit(std::f64::consts::LOG2_E),
    );
    let key_blocks = key_block_count(f, sh, &blk);
    f.for_("kb", 0u32, key_blocks, 1, |f, kb| {
        let k0 = f.let_("k0", kb * ft.bk);
        let values = load_rows(f, sh, (m.io.v, ft.bk, ft.dk), (&k0, sh.seq_k), kv_at);
        scores(f, ft, m, fr, &warp_row);
        let at = ScoreBlock {
            io: &m.io,
            blk: &blk,
            k0: &k0,
            first_row: &warp_row,
            bk: ft.bk,
        };
        softmax(f, sh, fr, &at, &scale_log2);
        f.barrier();
        store_rows(f, sh, &values, m.vs, padded(ft.row()));
        let next = f.let_("k_next", k0.clone() + ft.bk);
        let keys = load_rows(f, sh, (m.io.k, ft.bk, ft.dk), (&next, sh.seq_k), kv_at);
        match (m.weights, partly_visible(sh, ft.bk, &blk, &k0)) {
            (Some(weights), Some(partial)) => {
                f.if_(partial.clone(), |f| {
                    for (j, &s) in (0u32..).zip(&fr.scores) {
                        let at = warp_row.clone() * ft.weights_stride() + j * SHAPE.n;
                        let stride = ft.weights_stride();
                        f.store_fragment(s, weights, at, stride, FragmentLayout::RowMajor);
                    }
                });
                f.barrier();
                f.if_else(
                    partial,
                    |f| {
                        // The chunks of 16 keys the warp's first row sees whole (so
                        // every row of the warp does) multiply on fragments; the
                        // rest, element by element.
                        let from = f.let_("k_from", k0.clone() + sh.seq_q);
                        let first = blk.q0.clone() + warp_row.clone();
                        let whole = f.let_("whole", sh.keys_seen(&from, first, ft.bk) / SHAPE.k);
                        accumulate(f, ft, m, fr, Some(&whole));
                        accumulate_seen(f, sh, ft, (m, fr), (&at, &from, whole * SHAPE.k), weights);
                    },
                    |f| accumulate(f, ft, m, fr, None),
                );
            }
            _ => {
                f.barrier();
                accumulate(f, ft, m, fr, None);
            }
        }
        store_rows(f, sh, &keys, m.ks, padded(ft.row()));
        f.barrier();
    });
    // `l`'s partial sums into the row's; the shift back in natural log units (for
    // `lse = shift + ln l`): the max, or 0 while it is −∞.
    f.reduce_rows(fr.sum, &[fr.sum], RowReduction::Sum);
    natural_shift(f, &fr.stats);
    let out = (0u32..)
        .zip(&fr.out)
        .map(|(j, &o)| (o, warp_row.clone() * ft.acc_stride() + j * SHAPE.n))
        .collect();
    let leftovers = Leftovers {
        out,
        acc: (m.acc, ft.acc_stride()),
        sum: (fr.sum, m.sum),
        shift: (fr.stats.max, m.shift),
        first_row: &warp_row,
        rows: ft.bq(),
    };
    store_and_finish(f, sh, &m.io, &blk, leftovers);
}

/// `S = Q·Kᵀ` for each warp's rows, in `fr.scores`.
fn scores(f: &mut Body, ft: FragmentTiles, m: &Staged, fr: &Fragments, warp_row: &E) {
    let row = ft.row();
    for &s in &fr.scores {
        f.fill_fragment(s, Num::scalar(ScalarType::F32).lit(0.0));
    }
    for kd in 0..ft.dk / SHAPE.k {
        let col = kd * SHAPE.k;
        let a = match fr.queries.get(kd as usize) {
            Some(&q) => q,
            None => {
                let at = warp_row.clone() * row + col;
                f.load_fragment(fr.a, m.qs, at, row, FragmentLayout::RowMajor);
                fr.a
            }
        };
        for (j, &s) in (0u32..).zip(&fr.scores) {
            // Kᵀ: element (e, key) at key·row + e.
            let k_at = col + j * SHAPE.n * row;
            f.load_fragment(fr.b, m.ks, k_at, row, FragmentLayout::ColMajor);
            f.mma(s, a, fr.b, s);
        }
    }
}

/// The online softmax of a block in registers ([`super::online`]), then
/// `l = α·l + P` element by element (the row sums once, at the end), `O` rescaled,
/// and `P` rounded into `A` fragments in the registers it is in.
fn softmax(f: &mut Body, sh: &Shape, fr: &Fragments, at: &ScoreBlock, scale_log2: &E) {
    let scores: Vec<(FragmentId, u32)> = (0u32..)
        .zip(&fr.scores)
        .map(|(j, &s)| (s, j * SHAPE.n))
        .collect();
    scale_and_mask(f, sh, at, &scores, scale_log2);
    exponentiate(f, &fr.stats, &fr.scores);
    // A pairwise sum of the block's columns.
    let mut args = vec![fr.sum, fr.stats.alpha];
    args.extend(&fr.scores);
    f.map_fragment(fr.sum, &args, |_, _, _, x| {
        let mut p: Vec<E> = x[2..].to_vec();
        while p.len() > 1 {
            p = p
                .chunks(2)
                .map(|c| c.iter().cloned().reduce(|a, b| a + b))
                .collect::<Option<Vec<E>>>()
                .unwrap_or_default();
        }
        match p.pop() {
            Some(block) => x[0].clone() * x[1].clone() + block,
            None => x[0].clone() * x[1].clone(),
        }
    });
    rescale(f, &fr.stats, &fr.out);
    for (p, pair) in fr.weights.iter().zip(fr.scores.chunks(2)) {
        f.convert_fragments(*p, pair);
    }
}

/// `O += P·V` on fragments; with `whole`, only the first `whole` chunks of 16 keys
/// (the others multiply the value tile's rows of zeros: a hidden key's value never
/// meets its weight, 0, which would make a NaN of an infinite value).
fn accumulate(f: &mut Body, ft: FragmentTiles, m: &Staged, fr: &Fragments, whole: Option<&E>) {
    let row = ft.row();
    for (t, &p) in (0u32..).zip(&fr.weights) {
        let chunk = t * SHAPE.k * row;
        let chunk = match whole {
            Some(w) => E::from(t).lt(w.clone()).select(chunk, ft.bk * row),
            None => E::from(chunk),
        };
        let chunk = f.let_("v_chunk", chunk);
        for (j, &o) in (0u32..).zip(&fr.out) {
            let v_at = chunk.clone() + j * SHAPE.n;
            f.load_fragment(fr.b, m.vs, v_at, row, FragmentLayout::RowMajor);
            f.mma(o, p, fr.b, o);
        }
    }
}

/// `O += P·V` element by element for the keys from `first` on that each row sees
/// (the block's first `clamp(i + causal_keys + 1 − seq_q − k0, 0, bk)`, with
/// `from = k0 + seq_q`), with the f32 weights.
fn accumulate_seen(
    f: &mut Body,
    sh: &Shape,
    ft: FragmentTiles,
    (m, fr): (&Staged, &Fragments),
    (at, from, first): (&ScoreBlock, &E, E),
    weights: Mem,
) {
    let n = sh.num;
    let first = f.let_("k_first", first);
    for (j, &o) in (0u32..).zip(&fr.out) {
        f.map_fragment(o, &[o], |f, row, col, x| {
            let r = f.let_("r", at.first_row.clone() + row);
            let i = at.blk.q0.clone() + r.clone();
            let seen = f.let_("seen", sh.keys_seen(from, i, ft.bk));
            let e = f.let_("e", col + j * SHAPE.n);
            let w_row = f.let_("w_row", r * ft.weights_stride());
            let sum = f.var("pv", n.lit(0.0));
            f.for_("key", first.clone(), seen, 1, |f, key| {
                let v = n.widen(m.vs.at(key.clone() * ft.row() + e.clone()), sh.dtype);
                f.assign(sum, sum.get() + weights.at(w_row.clone() + key) * v);
            });
            x[0].clone() + sum.get()
        });
    }
}

#[cfg(test)]
mod tests {
    //! Every f16/bf16 attention case of the table through the fragment kernel, in the
    //! interpreter as written and as the expansion makes it for other targets.

    use super::tiles;
    use crate::conformance::{cases, check, Executor, OnFragments};
    use crate::lower::{lower, TargetCaps};
    use crate::op::Op;
    use crate::ops::attention::AttentionSpec;
    use crate::spec::{OpKind, OpSpec};
    use kernelc_ir::ScalarType;

    fn half_attention() -> Vec<AttentionSpec> {
        cases::for_kind(OpKind::Attention)
            .into_iter()
            .filter_map(|s| match s {
                OpSpec::Attention(a) if matches!(a.dtype, ScalarType::F16 | ScalarType::Bf16) => {
                    Some(a)
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn half_attention_conforms_on_fragments_and_expanded() {
        let specs = half_attention();
        assert!(specs.len() >= 8, "{} f16/bf16 attention cases", specs.len());
        for spec in &specs {
            let op = OpSpec::Attention(spec.clone());
            let fragments = tiles(spec, &TargetCaps::cuda_sm90()).is_some();
            for expanded in [false, true] {
                let exec = OnFragments { expanded };
                match check(&exec, &op, 11) {
                    Ok(()) => assert!(fragments, "{spec:?} ran without fragments"),
                    Err(e) if !fragments && e.to_string().contains("no fragment kernel") => {}
                    Err(e) => panic!("{}: {spec:?}: {e}", exec.name()),
                }
            }
        }
    }

    /// Head dims up to 256 fit the opt-in shared memory with 64-key blocks; the
    /// plain 48 KiB takes none of them.
    #[test]
    fn tiles_fit_the_shared_memory_they_may_use() {
        let spec = |head_dim| AttentionSpec {
            dtype: ScalarType::Bf16,
            head_dim,
            ..AttentionSpec::example()
        };
        let caps = TargetCaps::cuda_sm90();
        for d in [8, 40, 64, 128, 256] {
            let t = tiles(&spec(d), &caps).unwrap();
            assert_eq!(t.bk, 64, "head_dim {d}");
            assert_eq!(t.warps, 4, "head_dim {d}");
            assert!(t.shared_bytes(ScalarType::Bf16) <= caps.opt_in_shared_memory_bytes as u64);
            assert_eq!(t.dk % 16, 0);
        }
        assert!(tiles(&spec(1024), &caps).is_none());
        let plain = TargetCaps {
            opt_in_shared_memory_bytes: 0,
            ..caps.clone()
        };
        assert!(tiles(&spec(128), &plain).is_none());
        // The kernel it makes: 4 warps, 64 query rows per workgroup.
        let plan = lower(&OpSpec::Attention(spec(128)), &caps).unwrap();
        let kernel = &plan.launches[0].kernel;
        assert!(kernel.uses_fragments());
        assert_eq!(kernel.invocations_per_workgroup(), 128);
        assert_eq!(
            plan.launches[0].grid[0],
            AttentionSpec::example().seq_q.div_ceil(64) as u32
                * (AttentionSpec::example().batch * AttentionSpec::example().heads) as u32
        );
    }

    #[test]
    fn other_devices_and_dtypes_keep_the_simt_kernel() {
        for spec in cases::for_kind(OpKind::Attention) {
            let OpSpec::Attention(a) = &spec else {
                continue;
            };
            for caps in [
                TargetCaps::cpu(),
                TargetCaps::gpu_baseline(),
                TargetCaps::cuda_sm90(),
            ] {
                let fragments = caps.matrix_fragments
                    && matches!(a.dtype, ScalarType::F16 | ScalarType::Bf16)
                    && a.seq_q > 0
                    && a.seq_k > 0;
                let Ok(plan) = lower(&spec, &caps) else {
                    continue;
                };
                let used = plan.launches.iter().any(|l| l.kernel.uses_fragments());
                assert_eq!(used, fragments, "{spec:?}");
            }
        }
    }
}
