//! f32 attention on GPUs without tensor-core f32 (the SIMT path), register-blocked as
//! a SIMT GEMM is: FlashAttention-2's schedule with each product computed in blocks
//! of 8 rows by 4 keys (or columns) per invocation, so that a value read from shared
//! memory feeds four or eight multiply-adds and the products are `fma`s.
//!
//! A workgroup of 128 invocations owns 64 query rows of one (batch, head); invocation
//! `t` owns rows `8·(t / 16) ..` of the block (its *row group*) and, of each block of
//! 64 keys, the keys `4·(t mod 16) ..` (scores) and of `O` the columns
//! `(head_dim / 16)·(t mod 16) ..` (held in registers throughout). Queries are staged
//! once, transposed (`qt[d][i]`), so that a row group's queries are two vector reads;
//! per key block:
//!
//! 1. stage K transposed (`kt[d][j]`) and V as is (zeros past `seq_k`);
//! 2. `S = Q·Kᵀ` in registers, scaled (and masked: `−∞` where hidden or past the
//!    sequences) in the log₂ domain (the scores carry log₂e, so each weight is one
//!    `exp2`, as the fragment kernels do: docs/semantics.md); each row group's
//!    partial max per row to shared memory;
//! 3. per row (64 invocations): the block's max, the running max, its finite shift
//!    and the rescale `α = 2^{m_old − shift}`;
//! 4. `P = 2^{S − shift}` from the registers into shared memory (row-major, rows
//!    padded by 4 so that the row groups' stores fall on distinct banks), the
//!    partial sums per row beside (padded likewise);
//! 5. `O = α·O + P·V` in registers (a row's weights read four keys at a time, V's
//!    row read as vectors), and per row `l = α·l + Σ P`.
//!
//! With `causal`, a block some row of the workgroup sees only in part takes step 5
//! key by key, each product kept from the rows that do not see the key (its value
//! could be NaN or ∞: the family's rule); keys no row sees are not visited. At the
//! end `o = O / l` from the registers (0 for a row that saw no key) and `lse`.
//!
//! The keys and the weights share their bytes (the scores read the keys last, the
//! weights are written after and read last by the products, before the next keys are
//! staged), so that at head dim 64 the shared arrays take 54 KiB: four workgroups to
//! an SM of sm_90 (the PTX emitter caps the registers to match, 128), which also
//! evens out the waves of a grid of a thousand workgroups. Measured on an H200
//! (`bench/gpu/results/2026-11-29-h200-issue19-f32-attention.md`): blocks of 8 rows
//! run 8% faster than blocks of 4 rows with twice the invocations (fewer shared
//! reads per `fma`: the kernel is bound by shared memory).
//!
//! Taken where a workgroup may have 128 invocations and the shared arrays fit the
//! opt-in shared memory (CUDA), for head dims 16, 32, 64 and 128; elsewhere
//! [`super::lower`]'s kernel, which any caps can run.

use super::lower::{
    block_coords, declare_buffers, each_workgroup, init_rows, key_block_count, normalized,
    shape_of, single_launch, store_lse, Block, Buffers, RowStats, Shape, Tiles,
};
use super::online::{masked_score, partly_visible, scaled_or_masked};
use super::AttentionSpec;
use crate::lower::math::Num;
use crate::lower::{LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// Query rows per workgroup, keys per block.
const BQ: u32 = 64;
const BK: u32 = 64;
/// Rows per invocation (a row group, a multiple of 4: read as vectors), and keys
/// per invocation in the scores.
const ROWS: u32 = 8;
const KEYS: u32 = 4;
/// Invocations sharing a row group (16): they split the keys, then `O`'s columns.
const PER_ROW_GROUP: u32 = BK / KEYS;
/// Invocations per workgroup: 16 per row group.
const INVOCATIONS: u32 = BQ / ROWS * PER_ROW_GROUP;
/// Row stride of the weights `P` (padded: see the module docs).
const P_STRIDE: u32 = BK + 4;
/// Row stride of the partial maxes and sums (padded: a row group's 16 invocations
/// store theirs as vectors of 4 rows, which would otherwise all fall on the same
/// banks, 8-way conflicts measured on an H200).
const PART_STRIDE: u32 = BQ + 4;

/// The head dims this kernel takes, `head_dim / 16` columns of `O` per invocation.
fn columns_per_invocation(d: usize) -> Option<u32> {
    match d {
        16 | 32 | 64 | 128 => Some(d as u32 / PER_ROW_GROUP),
        _ => None,
    }
}

/// f32 elements of the shared arrays for head dim `d`.
fn shared_elems(d: u32) -> u32 {
    // qt and vs; kt and P in one set of bytes; the partial maxes/sums; max, shift,
    // scale, sum per row.
    2 * d * BQ + (d * BK).max(BQ * P_STRIDE) + PER_ROW_GROUP * PART_STRIDE + 4 * BQ
}

/// Whether this kernel takes `spec` on `caps`.
pub(super) fn eligible(spec: &AttentionSpec, caps: &TargetCaps) -> bool {
    let Some(cols) = columns_per_invocation(spec.head_dim) else {
        return false;
    };
    let d = cols * PER_ROW_GROUP;
    spec.dtype == ScalarType::F32
        && spec.seq_q > 0
        && spec.seq_k > 0
        && caps.preferred_invocations >= INVOCATIONS
        && caps.max_invocations_per_workgroup >= INVOCATIONS
        && caps.max_workgroup_size[0] >= INVOCATIONS
        && caps.max_loop_iterations.is_none()
        && shared_elems(d) as u64 * 4 <= caps.opt_in_shared_memory_limit() as u64
}

/// The shared arrays and buffers.
struct Mems {
    io: Buffers,
    /// Queries and keys transposed, `[d][64]`; values `[64][d]`.
    qt: Mem,
    kt: Mem,
    vs: Mem,
    /// The weights, `[64][P_STRIDE]`.
    p: Mem,
    /// Per row group's invocations, per row: partial maxes, then partial sums,
    /// `[16][PART_STRIDE]`.
    part: Mem,
    /// Per row: the running max (log₂ domain), its finite shift, the rescale `α`, and
    /// the running sum `l`.
    rows: RowStats,
}

pub(super) fn attention(spec: &AttentionSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    // `rows` and `k_stride` are the general kernel's (this one reads neither).
    let tiles = Tiles {
        bq: BQ,
        bk: BK,
        rows: ROWS,
        k_stride: BK,
    };
    let sh = shape_of(spec, caps, tiles, INVOCATIONS)?;
    let cols = columns_per_invocation(spec.head_dim).ok_or(LowerError::Internal(
        "blocked attention for an unsupported head dim",
    ))?;
    let op = OpSpec::Attention(spec.clone());
    let mut k = KernelBuilder::new(op.name(), [INVOCATIONS, 1, 1]);
    let uniforms = op.uniforms();
    let scale = Uniforms::new(&uniforms).param("scale")?;
    let io = declare_buffers(&mut k, &op, &scale)?;
    let (f32t, d) = (ScalarType::F32, sh.d);
    // The keys are read last by the scores, the weights first written after them and
    // read last by the products, before the next keys are staged: one set of bytes.
    let p = k.shared("weights", f32t, BQ * P_STRIDE);
    let m = Mems {
        io,
        qt: k.shared("q_tile", f32t, d * BQ),
        kt: k.shared_reusing("k_tile", f32t, d * BK, p),
        vs: k.shared("v_tile", f32t, BK * d),
        p,
        part: k.shared("partials", f32t, PER_ROW_GROUP * PART_STRIDE),
        rows: RowStats::declare(&mut k, f32t, BQ),
    };
    let kernel = k.build(|f| each_workgroup(f, &sh, |f, wg| body(f, &sh, &m, cols, wg)))?;
    Ok(single_launch(&op, kernel, sh.grid, scale))
}

fn f32s() -> Num {
    Num::scalar(ScalarType::F32)
}

/// This invocation's place: its row group's first row, its index within the group
/// (its keys in the scores, its columns of `O`), and its first column of `O`.
struct Place {
    row0: E,
    lane: E,
    col0: E,
}

fn body(f: &mut Body, sh: &Shape, m: &Mems, cols: u32, wg: E) {
    let n = f32s();
    let blk = block_coords(f, sh, wg);
    let t = local_id(0);
    let at = Place {
        row0: f.let_("row0", t.clone() / PER_ROW_GROUP * ROWS),
        lane: f.let_("lane", t.clone() % PER_ROW_GROUP),
        col0: f.let_("col0", t % PER_ROW_GROUP * cols),
    };
    let q_at = (&blk.q_base, &blk.q0, sh.q_layout.row_stride);
    stage_transposed(f, sh.d, (m.io.q, m.qt), q_at, (sh.seq_q, BQ));
    init_rows(f, sh, &m.rows);
    f.barrier();
    let out: Vec<Vec<Var>> = (0..ROWS)
        .map(|_| (0..cols).map(|_| f.var("o", n.lit(0.0))).collect())
        .collect();
    let scale_log2 = f.let_(
        "scale_log2",
        m.io.scale.clone() * n.lit(std::f64::consts::LOG2_E),
    );
    let key_blocks = key_block_count(f, sh, &blk);
    f.for_("kb", 0u32, key_blocks, 1, |f, kb| {
        let k0 = f.let_("k0", kb * BK);
        let k_at = (&blk.kv_base, &k0, sh.kv_layout.row_stride);
        stage_transposed(f, sh.d, (m.io.k, m.kt), k_at, (sh.seq_k, BK));
        stage_values(f, sh, m, &blk, &k0);
        f.barrier();
        let s = scores(f, sh, m, (&blk, &k0, &at), &scale_log2);
        f.barrier();
        row_stats(f, m);
        f.barrier();
        weights(f, m, &at, &s);
        f.barrier();
        accumulate(f, sh, m, (&blk, &k0, &at), &out);
        f.barrier();
    });
    finish(f, sh, m, (&blk, &at), &out);
}

/// `dst[e][r] = src[base + (first + r)·stride + e]` for the `rows` rows from `first`
/// (zero past `seq`): each invocation reads 4 consecutive elements of a row as one
/// vector (neighbours on neighbouring rows) and stores them a row of `dst` apart.
fn stage_transposed(
    f: &mut Body,
    d: u32,
    (src, dst): (Mem, Mem),
    (base, first, stride): (&E, &E, u32),
    (seq, rows): (u32, u32),
) {
    let n = f32s();
    f.for_("u", local_id(0), rows * (d / 4), INVOCATIONS, |f, u| {
        let r = f.let_("r", u.clone() % rows);
        let e = f.let_("e", u / rows * 4u32);
        let row = f.let_("row", first.clone() + r.clone());
        let quad = f.var("quad", n.lit(0.0).splat(4));
        f.if_(row.clone().lt(seq), |f| {
            f.assign(quad, src.load(base.clone() + row * stride + e.clone(), 4));
        });
        for c in 0..4u8 {
            let to = (e.clone() + c as u32) * rows + r.clone();
            f.store(dst, to, quad.get().lane(c));
        }
    });
}

/// `vs[j][e] = v[kv_base + (k0 + j)·stride + e]` (zero past `seq_k`), 4 elements a
/// vector.
fn stage_values(f: &mut Body, sh: &Shape, m: &Mems, blk: &Block, k0: &E) {
    let (n, quads) = (f32s(), sh.d / 4);
    f.for_("u", local_id(0), BK * quads, INVOCATIONS, |f, u| {
        let j = f.let_("j", u.clone() / quads);
        let e = f.let_("e", u.clone() % quads * 4u32);
        let kj = f.let_("kj", k0.clone() + j.clone());
        let to = u * 4u32;
        f.if_else(
            kj.clone().lt(sh.seq_k),
            |f| {
                let at = blk.kv_base.clone() + kj * sh.kv_layout.row_stride + e;
                f.store(m.vs, to.clone(), m.io.v.load(at, 4));
            },
            |f| f.store(m.vs, to.clone(), n.lit(0.0).splat(4)),
        );
    });
}

/// A row group's `ROWS` consecutive elements of `mem` from `index` (a multiple of 4),
/// read as vectors of 4.
fn read_rows(f: &mut Body, mem: Mem, index: E) -> Vec<E> {
    (0..ROWS / 4)
        .map(|v| f.let_("rows", mem.load(index.clone() + v * 4, 4)))
        .collect()
}

/// Element `r` of what [`read_rows`] read.
fn element(quads: &[E], r: u32) -> E {
    quads[(r / 4) as usize].clone().lane((r % 4) as u8)
}

/// Writes a row group's `ROWS` values to `mem` from `index` (a multiple of 4) as
/// vectors of 4.
fn write_rows(f: &mut Body, mem: Mem, index: E, values: impl IntoIterator<Item = E>) {
    let values: Vec<E> = values.into_iter().collect();
    for (v, quad) in (0u32..).zip(values.chunks(4)) {
        f.store(mem, index.clone() + v * 4, vector(quad.iter().cloned()));
    }
}

/// The block's scores of this invocation's rows and keys, `[row][key]`, in the log₂
/// domain; each row's max over them into `part[lane][row]` (rows `PART_STRIDE` apart).
fn scores(
    f: &mut Body,
    sh: &Shape,
    m: &Mems,
    (blk, k0, at): (&Block, &E, &Place),
    scale_log2: &E,
) -> Vec<Vec<Var>> {
    let n = f32s();
    let dots: Vec<Vec<Var>> = (0..ROWS)
        .map(|_| (0..KEYS).map(|_| f.var("dot", n.lit(0.0))).collect())
        .collect();
    let key0 = f.let_("key0", at.lane.clone() * KEYS);
    f.for_("e", 0u32, sh.d, 4, |f, e| {
        for de in 0..4u32 {
            let row = e.clone() + de;
            let q = read_rows(f, m.qt, row.clone() * BQ + at.row0.clone());
            let k = f.let_("k", m.kt.load(row * BK + key0.clone(), 4));
            for (r, dots) in (0u32..).zip(&dots) {
                for (c, dot) in (0u8..).zip(dots) {
                    let q = element(&q, r);
                    f.assign(*dot, q.fma(k.clone().lane(c), dot.get()));
                }
            }
        }
    });
    // `(scale·dot + mask)·log₂e`, or `−∞` where hidden or past the sequences; a block
    // every row sees whole, without a mask, is only scaled.
    let masked = |f: &mut Body| {
        for (r, dots) in (0u32..).zip(&dots) {
            let i = f.let_("i", blk.q0.clone() + at.row0.clone() + r);
            for (c, dot) in (0u32..).zip(dots) {
                let kj = f.let_("kj", k0.clone() + key0.clone() + c);
                let score = masked_score(f, sh, (&m.io, blk), dot.get(), (&i, &kj));
                f.assign(*dot, score);
            }
        }
    };
    let scaled = |f: &mut Body| {
        for dot in dots.iter().flatten() {
            f.assign(*dot, dot.get() * scale_log2.clone());
        }
    };
    scaled_or_masked(f, sh, (BK, blk, k0), scaled, masked);
    let maxes = dots.iter().map(|row| {
        row.iter()
            .map(|s| s.get())
            .reduce(|a, b| a.max(b))
            .unwrap_or_else(|| n.lit(f64::NEG_INFINITY))
    });
    write_rows(
        f,
        m.part,
        at.lane.clone() * PART_STRIDE + at.row0.clone(),
        maxes,
    );
    dots
}

/// Per row (the first 64 invocations): the block's max over the partial maxes, the
/// running max, its finite shift and the rescale `α = 2^{m_old − shift}`.
fn row_stats(f: &mut Body, m: &Mems) {
    let r = local_id(0);
    f.if_(r.clone().lt(BQ), |f| {
        let old = f.let_("m_old", m.rows.max.at(r.clone()));
        let max = f.var("m_new", old.clone());
        for g in 0..PER_ROW_GROUP {
            f.assign(max, max.get().max(m.part.at(r.clone() + g * PART_STRIDE)));
        }
        m.rows.update_with(f, f32s(), r, (old, max.get()), E::exp2);
    });
}

/// `P = 2^{S − shift}` of this invocation's scores into `p` (a row's four as one
/// vector), and each row's sum of them into `part[lane][row]` (rows `PART_STRIDE` apart).
fn weights(f: &mut Body, m: &Mems, at: &Place, s: &[Vec<Var>]) {
    let shifts = read_rows(f, m.rows.shift, at.row0.clone());
    let mut sums = Vec::with_capacity(ROWS as usize);
    for (r, row) in (0u32..).zip(s) {
        let shift = element(&shifts, r);
        let p: Vec<E> = row
            .iter()
            .map(|x| f.let_("p", (x.get() - shift.clone()).exp2()))
            .collect();
        let to = (at.row0.clone() + r) * P_STRIDE + at.lane.clone() * KEYS;
        f.store(m.p, to, vector(p.iter().cloned()));
        sums.push(
            p.into_iter()
                .reduce(|a, b| a + b)
                .unwrap_or_else(|| f32s().lit(0.0)),
        );
    }
    write_rows(
        f,
        m.part,
        at.lane.clone() * PART_STRIDE + at.row0.clone(),
        sums,
    );
}

/// `O = α·O + P·V` for this invocation's rows and columns, then (the first 64
/// invocations) `l = α·l + Σ P` per row.
fn accumulate(
    f: &mut Body,
    sh: &Shape,
    m: &Mems,
    (blk, k0, at): (&Block, &E, &Place),
    out: &[Vec<Var>],
) {
    let cols = out.first().map_or(0, |row| row.len() as u32);
    let alphas = read_rows(f, m.rows.scale, at.row0.clone());
    for (r, row) in (0u32..).zip(out) {
        for o in row {
            f.assign(*o, o.get() * element(&alphas, r));
        }
    }
    // Row `r`'s weights at `p_row(r) + j`.
    let p_row = |r: u32| (at.row0.clone() + r) * P_STRIDE;
    // Key `j`'s values for this invocation's columns, as vectors of up to 4.
    let values = |f: &mut Body, j: &E| -> Vec<E> {
        let lanes = cols.min(4);
        (0..cols / lanes)
            .map(|v| {
                let index = j.clone() * sh.d + at.col0.clone() + v * lanes;
                f.let_("v", m.vs.load(index, lanes as u8))
            })
            .collect()
    };
    let value = |vs: &[E], c: u32| {
        let lanes = cols.min(4);
        let v = vs[(c / lanes) as usize].clone();
        if lanes == 1 {
            v
        } else {
            v.lane((c % lanes) as u8)
        }
    };
    let whole = |f: &mut Body| {
        f.for_("j", 0u32, BK, 4, |f, j| {
            let ps: Vec<E> = (0..ROWS)
                .map(|r| f.let_("ps", m.p.load(p_row(r) + j.clone(), 4)))
                .collect();
            for dj in 0..4u32 {
                let vs = values(f, &(j.clone() + dj));
                for (ps, row) in ps.iter().zip(out) {
                    for (c, o) in (0u32..).zip(row) {
                        let p = ps.clone().lane(dj as u8);
                        f.assign(*o, p.fma(value(&vs, c), o.get()));
                    }
                }
            }
        });
    };
    match partly_visible(sh, BK, blk, k0) {
        None => whole(f),
        Some(partial) => f.if_else(
            partial,
            |f| {
                // Key by key, each product kept from the rows that do not see the key:
                // `k0 + j + seq_q ≤ i + causal_keys` for row `i`.
                let from = f.let_("k_from", k0.clone() + sh.seq_q);
                let first = f.let_("first_row", blk.q0.clone() + at.row0.clone());
                f.for_("j", 0u32, BK, 1, |f, j| {
                    let vs = values(f, &j);
                    let key = f.let_("kj_plus_seq_q", from.clone() + j.clone());
                    for (r, row) in (0u32..).zip(out) {
                        let p = f.let_("p", m.p.at(p_row(r) + j.clone()));
                        let sees = key.clone().le(first.clone() + (sh.causal_keys + r));
                        for (c, o) in (0u32..).zip(row) {
                            let sum = p.clone().fma(value(&vs, c), o.get());
                            f.assign(*o, sees.clone().select(sum, o.get()));
                        }
                    }
                });
            },
            whole,
        ),
    }
    let r = local_id(0);
    f.if_(r.clone().lt(BQ), |f| {
        let rows = &m.rows;
        let sum = f.var("p_sum", rows.sum.at(r.clone()) * rows.scale.at(r.clone()));
        for g in 0..PER_ROW_GROUP {
            f.assign(sum, sum.get() + m.part.at(r.clone() + g * PART_STRIDE));
        }
        f.store(rows.sum, r, sum.get());
    });
}

/// `o = O / l` from the registers for the rows below `seq_q` (0 where `l = 0`: no key
/// was seen; a NaN `l` keeps the row NaN), then `lse` with the shift in natural-log
/// units.
fn finish(f: &mut Body, sh: &Shape, m: &Mems, (blk, at): (&Block, &Place), out: &[Vec<Var>]) {
    let n = f32s();
    let cols = out.first().map_or(0, |row| row.len() as u32);
    for (r, row) in (0u32..).zip(out) {
        let qi = f.let_("qi", at.row0.clone() + r);
        let i = f.let_("i", blk.q0.clone() + qi.clone());
        f.if_(i.clone().lt(sh.seq_q), |f| {
            let l = f.let_("l", m.rows.sum.at(qi));
            let base = f.let_(
                "o_at",
                blk.q_base.clone() + i * sh.q_layout.row_stride + at.col0.clone(),
            );
            let values: Vec<E> = row
                .iter()
                .map(|o| normalized(n, o.get(), l.clone()))
                .collect();
            // As vectors of up to 4 (a row's columns from `col0`, a multiple of 4
            // where there are 4 or more).
            for (v, chunk) in (0u32..).zip(values.chunks(cols.min(4) as usize)) {
                let value = match chunk {
                    [one] => one.clone(),
                    many => vector(many.iter().cloned()),
                };
                f.store(m.io.o, base.clone() + v * cols.min(4), value);
            }
        });
    }
    // Invocation `r` wrote row `r`'s sum and shift last, and takes its `lse`.
    let unit = Some(std::f64::consts::LN_2);
    store_lse(f, sh, &m.io, (m.rows.sum, m.rows.shift, unit), blk);
}

#[cfg(test)]
mod tests {
    use super::eligible;
    use crate::conformance::cases;
    use crate::lower::{lower, TargetCaps};
    use crate::op::Op;
    use crate::ops::attention::AttentionSpec;
    use crate::spec::{OpKind, OpSpec};
    use kernelc_ir::ScalarType;

    fn f32_spec(head_dim: usize) -> AttentionSpec {
        AttentionSpec {
            dtype: ScalarType::F32,
            head_dim,
            ..AttentionSpec::example()
        }
    }

    /// The CUDA caps take it for f32 at its head dims; the CPU, WebGPU's limits
    /// (no opt-in shared memory), other dtypes and head dims keep the general kernel.
    #[test]
    fn only_f32_on_cuda_caps_at_its_head_dims() {
        let cuda = TargetCaps::cuda_sm90();
        for d in [16, 32, 64, 128] {
            assert!(eligible(&f32_spec(d), &cuda), "head_dim {d}");
            let plan = lower(&OpSpec::Attention(f32_spec(d)), &cuda).unwrap();
            let kernel = &plan.launches[0].kernel;
            assert_eq!(
                kernel.invocations_per_workgroup(),
                super::INVOCATIONS as u64,
                "head_dim {d}"
            );
            assert!(
                kernel.shared.iter().any(|s| s.name == "weights"),
                "head_dim {d}"
            );
        }
        for d in [8, 13, 48, 256] {
            assert!(!eligible(&f32_spec(d), &cuda), "head_dim {d}");
        }
        for dtype in [ScalarType::F64, ScalarType::F16, ScalarType::Bf16] {
            let spec = AttentionSpec {
                dtype,
                ..f32_spec(64)
            };
            assert!(!eligible(&spec, &cuda), "{dtype}");
        }
        for caps in [TargetCaps::cpu(), TargetCaps::gpu_baseline()] {
            assert!(!eligible(&f32_spec(64), &caps), "{caps:?}");
        }
        let plain = TargetCaps {
            opt_in_shared_memory_bytes: 0,
            ..cuda
        };
        assert!(!eligible(&f32_spec(64), &plain));
    }

    /// The conformance table reaches it at every head dim it takes, with and without
    /// `causal`, a mask and `lse`.
    #[test]
    fn the_table_covers_it() {
        let cuda = TargetCaps::cuda_sm90();
        let taken: Vec<AttentionSpec> = cases::for_kind(OpKind::Attention)
            .into_iter()
            .filter_map(|s| match s {
                OpSpec::Attention(a) if eligible(&a, &cuda) => Some(a),
                _ => None,
            })
            .collect();
        for d in [16, 32, 64, 128] {
            assert!(taken.iter().any(|a| a.head_dim == d), "head_dim {d}");
        }
        assert!(taken
            .iter()
            .any(|a| a.causal && a.seq_q > 64 && a.seq_k > 64));
        assert!(taken.iter().any(|a| !a.causal && a.mask.is_none()));
        assert!(taken.iter().any(|a| a.mask.is_some()));
        assert!(taken.iter().any(|a| a.lse));
        // Causal with a query block that sees no key at all (bottom-right aligned).
        assert!(taken.iter().any(|a| a.causal && a.seq_q >= a.seq_k + 64));
    }
}
