//! Attention whose batch item passes one kernel's indices (`lower::split`): heads and
//! queries are independent, so pieces of them:
//!
//! * `[batch, heads, seq, head_dim]`: a piece per batch item and key/value head (its
//!   group of query heads) where that fits, else per query head, in blocks of
//!   queries;
//! * `[batch, seq, heads, head_dim]`: blocks of query positions, all heads.
//!
//! A block of queries keeps the whole sequence's causal diagonal
//! (`CausalAlign::Keys`), and reads its rows of the mask (each of the mask's
//! dimensions of extent 1 bound whole). Where the keys of one head (one batch item,
//! `bshd`) pass the limit too, each block of queries runs over blocks of keys and
//! their results are combined by their log-sum-exp (`key_blocks`). RoPE's batch item
//! splits into blocks of positions. Refused with [`LowerError::TooLarge`]: one key
//! row or query row past the limit, a `bshd` mask with both heads and query rows cut
//! by a block, and a `bshd` mask per head and key with keys past the limit.

use super::{AttentionLayout, AttentionSpec, CausalAlign, RopeSpec};
use crate::lower::split::{assemble, Piece, PieceUniforms, Place};
use crate::lower::{LowerError, Plan, TargetCaps, Whole};
use crate::spec::OpSpec;

/// One piece: batch item `r`, query heads from `head0` (`heads` of them), queries
/// from `q0` (`rows` of them), keys from `k0` (`keys` of them).
#[derive(Clone, Copy)]
pub(super) struct Block {
    pub r: usize,
    pub head0: usize,
    pub heads: usize,
    pub q0: usize,
    pub rows: usize,
    pub k0: usize,
    pub keys: usize,
}

pub(super) fn attention_by_head(
    spec: &AttentionSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let (h, d, sq, sk) = (spec.heads, spec.head_dim, spec.seq_q, spec.seq_k);
    let group = h / spec.kv_heads;
    let mask = spec.mask.as_ref().map(|m| rank4(m));
    let too_large = |what: &str, value: usize| LowerError::TooLarge {
        what: format!("attention: {what}"),
        value: value as u64,
        limit,
    };
    let fits = |n: usize| n as u64 <= limit;
    // Elements of one key (every key/value head of it in bshd).
    let key_row = match spec.layout {
        AttentionLayout::Bhsd => d,
        AttentionLayout::Bshd => spec.kv_heads * d,
    };
    let key_blocks = !fits(sk * key_row);
    // Blocks of keys cut the mask's rows where it varies along keys: its rows stay
    // contiguous in a piece only one query row at a time.
    let mask_rows_cut = key_blocks && mask.is_some_and(|[_, _, mq, mk]| mq > 1 && mk > 1);
    // Query rows a block of `heads` heads may take: q/o and the mask's rows fit.
    let rows_for = |heads: usize| {
        let mut rows = (limit / (heads * d).max(1) as u64) as usize;
        if let Some([_, mh, mq, mk]) = mask {
            if mq > 1 {
                let mask_heads = if mh > 1 { heads } else { 1 };
                rows = rows.min((limit / (mask_heads * mk).max(1) as u64) as usize);
            }
        }
        if mask_rows_cut {
            rows = rows.min(1);
        }
        rows.min(sq)
    };
    let mut blocks = Vec::new();
    let mut push_blocks = |r: usize, head0: usize, heads: usize, rows: usize| {
        for q0 in (0..sq).step_by(rows) {
            blocks.push(Block {
                r,
                head0,
                heads,
                q0,
                rows: rows.min(sq - q0),
                k0: 0,
                keys: sk,
            });
        }
    };
    match spec.layout {
        AttentionLayout::Bhsd => {
            let whole_groups = !key_blocks && fits(group * sq * d) && rows_for(group) == sq;
            let heads = if whole_groups { group } else { 1 };
            let rows = rows_for(heads);
            if rows == 0 {
                return Err(too_large("one query row of a head", d));
            }
            for r in 0..spec.batch {
                for head0 in (0..h).step_by(heads) {
                    push_blocks(r, head0, heads, rows);
                }
            }
        }
        AttentionLayout::Bshd => {
            let rows = rows_for(h);
            if rows == 0 {
                return Err(too_large("one query position of all heads", h * d));
            }
            if let Some([_, mh, mq, mk]) = mask {
                if mh > 1 && mq > 1 && rows < sq {
                    return Err(too_large(
                        "a mask per head and query, cut across heads by a block of queries",
                        sq * h * d,
                    ));
                }
                if mh > 1 && mk > 1 && key_blocks {
                    return Err(too_large(
                        "a mask per head and key, cut across heads by a block of keys",
                        sk * key_row,
                    ));
                }
            }
            for r in 0..spec.batch {
                push_blocks(r, 0, h, rows);
            }
        }
    }
    if key_blocks {
        let keys = (limit / key_row.max(1) as u64) as usize;
        if keys == 0 {
            return Err(too_large("one key of every key/value head", key_row));
        }
        return super::key_blocks::combined(spec, caps, mask, &blocks, keys);
    }
    let pieces = blocks
        .into_iter()
        .map(|block| {
            let q_at = q_offset(spec, &block);
            let mut outputs = vec![Place::at(Whole::Output(0), q_at as u64)];
            if spec.lse {
                outputs.push(Place::at(Whole::Output(1), (q_at / d) as u64));
            }
            piece(spec, mask, block, spec.lse, outputs)
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}

/// A mask shape left-padded with 1s to `[batch, heads, seq_q, seq_k]`'s rank.
fn rank4(mask: &[usize]) -> [usize; 4] {
    let mut out = [1; 4];
    for (o, &m) in out.iter_mut().rev().zip(mask.iter().rev()) {
        *o = m;
    }
    out
}

/// Where block `b`'s queries (and outputs) start in `q` (and `o`).
pub(super) fn q_offset(spec: &AttentionSpec, b: &Block) -> usize {
    let (h, d, sq) = (spec.heads, spec.head_dim, spec.seq_q);
    match spec.layout {
        AttentionLayout::Bhsd => ((b.r * h + b.head0) * sq + b.q0) * d,
        AttentionLayout::Bshd => (b.r * sq + b.q0) * h * d,
    }
}

/// The attention of block `b` (with an `lse` output if `lse`), writing `outputs`.
pub(super) fn piece(
    spec: &AttentionSpec,
    mask: Option<[usize; 4]>,
    b: Block,
    lse: bool,
    outputs: Vec<Place>,
) -> Piece {
    let (h, d, sq, sk) = (spec.heads, spec.head_dim, spec.seq_q, spec.seq_k);
    let group = h / spec.kv_heads;
    let (kv_at, kv_heads) = match spec.layout {
        AttentionLayout::Bhsd => (
            ((b.r * spec.kv_heads + b.head0 / group) * sk + b.k0) * d,
            b.heads.div_ceil(group),
        ),
        AttentionLayout::Bshd => ((b.r * sk + b.k0) * spec.kv_heads * d, spec.kv_heads),
    };
    let causal_align = if spec.causal {
        // Query `i` of the block is `q0 + i` of the whole, key `j` is `k0 + j`: it
        // sees `k0 + j ≤ q0 + i + keys − seq_q`, the block's diagonal for
        // `q0 + rows + keys − seq_q − k0` keys (none visible to any row when that is
        // not positive; every key to every row from `rows + keys` on).
        let keys = (b.q0 + b.rows + spec.causal_keys()).saturating_sub(sq + b.k0);
        CausalAlign::Keys(keys.min(b.rows + b.keys))
    } else {
        spec.causal_align
    };
    let mut inputs = vec![
        Place::at(Whole::Input(0), q_offset(spec, &b) as u64),
        Place::at(Whole::Input(1), kv_at as u64),
        Place::at(Whole::Input(2), kv_at as u64),
    ];
    let piece_mask = mask.map(|[mb, mh, mq, mk]| {
        let at = (if mb > 1 { b.r } else { 0 }) * mh * mq * mk
            + (if mh > 1 { b.head0 } else { 0 }) * mq * mk
            + (if mq > 1 { b.q0 } else { 0 }) * mk
            + if mk > 1 { b.k0 } else { 0 };
        inputs.push(Place::at(Whole::Input(3), at as u64));
        let heads = if mh > 1 { b.heads } else { 1 };
        let rows = if mq > 1 { b.rows } else { 1 };
        let keys = if mk > 1 { b.keys } else { 1 };
        vec![1, heads, rows, keys]
    });
    Piece {
        spec: OpSpec::Attention(AttentionSpec {
            batch: 1,
            heads: b.heads,
            kv_heads,
            seq_q: b.rows,
            seq_k: b.keys,
            mask: piece_mask,
            causal_align,
            lse,
            ..spec.clone()
        }),
        inputs,
        outputs,
        uniforms: PieceUniforms::Shared,
    }
}

/// RoPE whose batch item passes the limit: blocks of its positions (every head of a
/// position together), each with its positions and the whole tables.
pub(super) fn rope_by_positions(spec: &RopeSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let row = spec.heads * spec.head_dim;
    let rows = (limit / row.max(1) as u64) as usize;
    if rows == 0 {
        return Err(LowerError::TooLarge {
            what: "rope: elements of one position (every head)".into(),
            value: row as u64,
            limit,
        });
    }
    let mut pieces = Vec::new();
    for r in 0..spec.batch {
        for s0 in (0..spec.seq).step_by(rows) {
            let k = rows.min(spec.seq - s0);
            let at = ((r * spec.seq + s0) * row) as u64;
            let positions = if spec.batch_positions {
                r * spec.seq + s0
            } else {
                s0
            };
            pieces.push(Piece {
                spec: OpSpec::Rope(RopeSpec {
                    batch: 1,
                    seq: k,
                    ..spec.clone()
                }),
                inputs: vec![
                    Place::at(Whole::Input(0), at),
                    Place::whole(Whole::Input(1)),
                    Place::whole(Whole::Input(2)),
                    Place::at(Whole::Input(3), positions as u64),
                ],
                outputs: vec![Place::at(Whole::Output(0), at)],
                uniforms: PieceUniforms::Shared,
            });
        }
    }
    assemble(caps, Vec::new(), pieces)
}
