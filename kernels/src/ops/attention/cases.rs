//! Conformance cases of the attention family.

use super::spec::*;
use crate::op::Op;
use kernelc_ir::ScalarType::{self, *};

/// One attention case: `[batch, heads, kv_heads]`, `[seq_q, seq_k, head_dim]`.
fn attn(
    dtype: ScalarType,
    layout: AttentionLayout,
    bhk: [usize; 3],
    sizes: [usize; 3],
    causal: bool,
    mask: Option<Vec<usize>>,
) -> AttentionSpec {
    let [batch, heads, kv_heads] = bhk;
    let [seq_q, seq_k, head_dim] = sizes;
    AttentionSpec {
        dtype,
        layout,
        batch,
        heads,
        kv_heads,
        seq_q,
        seq_k,
        head_dim,
        scale: 1.0 / (head_dim as f64).sqrt(),
        causal,
        mask,
        causal_align: Default::default(),
        lse: false,
    }
}

pub(super) fn attention() -> Vec<AttentionSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    vec![
        AttentionSpec::example(),
        // One query, one key.
        attn(F32, Bhsd, [1, 1, 1], [1, 1, 8], false, None),
        // GQA (2 query heads per kv head), causal with seq_q < seq_k, full mask.
        attn(
            F32,
            Bhsd,
            [2, 4, 2],
            [7, 33, 13],
            true,
            Some(vec![2, 4, 7, 33]),
        ),
        // seq_q > seq_k causal: the first 26 rows see no key and output zeros;
        // a per-batch key-padding mask.
        attn(
            F64,
            Bshd,
            [2, 2, 2],
            [33, 7, 8],
            true,
            Some(vec![2, 1, 1, 7]),
        ),
        // head_dim 64 in f16, a per-head key mask.
        attn(
            F16,
            Bhsd,
            [1, 2, 1],
            [33, 33, 64],
            false,
            Some(vec![2, 1, 33]),
        ),
        // head_dim 64, 100 keys: ragged against the 32-key tile the GPU caps pick and the
        // 64-key tile of the CPU caps; causal with seq_q < seq_k, a full mask.
        attn(
            F32,
            Bshd,
            [1, 2, 2],
            [33, 100, 64],
            true,
            Some(vec![1, 2, 33, 100]),
        ),
        // 70 keys (ragged against a 64-key tile), bshd, causal, no mask.
        attn(Bf16, Bshd, [1, 3, 1], [7, 70, 16], true, None),
        // 70 queries over 5 keys, key mask broadcast over everything else.
        attn(F32, Bshd, [1, 2, 1], [70, 5, 13], false, Some(vec![5])),
        // No keys: every output row is a sum of nothing (zeros, as PyTorch's
        // softmax-then-matmul). No queries: nothing.
        attn(F32, Bhsd, [1, 2, 1], [3, 0, 8], false, None),
        attn(F32, Bshd, [2, 2, 2], [0, 5, 8], true, None),
    ]
    .into_iter()
    .chain(top_left())
    .chain(with_lse())
    .chain(tensor_core_shapes())
    .chain(blocked_simt_shapes())
    .collect()
}

/// f32 shapes past one block of the register-blocked SIMT kernel's tiles (64 queries,
/// 64 keys) at each head dim it takes: several query and key blocks, ragged, a causal
/// diagonal through them (blocks seen whole and in part), both alignments, GQA, bshd,
/// a mask and lse.
fn blocked_simt_shapes() -> Vec<AttentionSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    vec![
        attn(F32, Bhsd, [1, 2, 1], [130, 150, 64], true, None),
        AttentionSpec {
            lse: true,
            ..attn(F32, Bshd, [2, 2, 2], [70, 80, 128], false, None)
        },
        attn(
            F32,
            Bhsd,
            [1, 2, 2],
            [64, 128, 32],
            false,
            Some(vec![1, 2, 64, 128]),
        ),
        AttentionSpec {
            causal_align: CausalAlign::TopLeft,
            lse: true,
            ..attn(F32, Bshd, [1, 2, 1], [90, 64, 16], true, None)
        },
        // More queries than keys, causal: the first query block visits no key block,
        // the second has rows that see no key (zeros, lse −∞).
        AttentionSpec {
            lse: true,
            ..attn(F32, Bshd, [1, 2, 1], [150, 40, 32], true, None)
        },
    ]
}

/// f16/bf16 shapes past one block of the tensor-core kernel's tiles (64 queries, 64
/// keys): several query and key blocks with a causal diagonal through them (blocks
/// seen whole and in part), head dims that are no multiple of 16 (or 4) or reach 256,
/// GQA, masks and lse.
fn tensor_core_shapes() -> Vec<AttentionSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    vec![
        attn(Bf16, Bhsd, [1, 2, 1], [130, 150, 128], true, None),
        AttentionSpec {
            lse: true,
            ..attn(
                F16,
                Bshd,
                [2, 4, 2],
                [70, 80, 40],
                false,
                Some(vec![2, 1, 70, 80]),
            )
        },
        attn(Bf16, Bhsd, [1, 1, 1], [20, 300, 256], false, None),
        // Three query blocks over four key blocks (the last ragged) without a mask:
        // the warpgroup kernel's pipeline through every stage, GQA, bshd.
        attn(Bf16, Bshd, [1, 2, 1], [130, 200, 64], false, None),
        // A head dim no multiple of 4 (staged an element at a time), causal.
        attn(F16, Bhsd, [1, 1, 1], [70, 90, 10], true, None),
        AttentionSpec {
            causal_align: CausalAlign::TopLeft,
            ..attn(F16, Bshd, [1, 2, 2], [90, 64, 64], true, None)
        },
    ]
}

/// The log-sum-exp output: GQA with a mask, rows that see no key (`−∞`), a narrow
/// dtype (lse in f32), the bshd layout, and no keys at all.
fn with_lse() -> Vec<AttentionSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    [
        attn(
            F32,
            Bhsd,
            [2, 4, 2],
            [7, 33, 13],
            true,
            Some(vec![2, 4, 7, 33]),
        ),
        attn(F64, Bshd, [2, 2, 2], [33, 7, 8], true, None),
        attn(
            F16,
            Bhsd,
            [1, 2, 1],
            [33, 70, 64],
            false,
            Some(vec![2, 1, 70]),
        ),
        attn(Bf16, Bshd, [1, 3, 1], [7, 70, 16], true, None),
        attn(F32, Bhsd, [1, 2, 1], [3, 0, 8], false, None),
    ]
    .map(|a| AttentionSpec { lse: true, ..a })
    .into()
}

/// Causal attention aligned top-left (query `i` sees keys `j ≤ i`): fewer queries than
/// keys (the keys past the last query never seen; ragged against the key tile), more
/// queries than keys (the last rows see every key), with a mask.
fn top_left() -> Vec<AttentionSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    [
        attn(F32, Bhsd, [2, 2, 1], [5, 70, 16], true, None),
        attn(F16, Bshd, [1, 2, 2], [40, 9, 8], true, Some(vec![40, 9])),
        attn(F64, Bhsd, [1, 1, 1], [33, 100, 64], true, None),
    ]
    .map(|a| AttentionSpec {
        causal_align: CausalAlign::TopLeft,
        ..a
    })
    .into()
}

/// A plain (NeoX, whole-head, per-step positions) rope case of
/// `[batch, seq, heads, head_dim, max_positions]`.
fn rope_case(
    dtype: ScalarType,
    index_dtype: ScalarType,
    [batch, seq, heads, head_dim, max_positions]: [usize; 5],
) -> RopeSpec {
    RopeSpec {
        dtype,
        index_dtype,
        batch,
        seq,
        heads,
        head_dim,
        max_positions,
        interleaved: false,
        rotary_dim: None,
        batch_positions: false,
    }
}

pub(super) fn rope() -> Vec<RopeSpec> {
    let case = rope_case;
    vec![
        case(F32, U32, [1, 2, 2, 8, 16]),
        case(F64, I32, [2, 3, 1, 6, 5]),
        case(F16, F32, [1, 1, 3, 2, 1]),
        case(Bf16, I32, [3, 5, 2, 8, 7]),
        // Halves of whole vectors.
        case(F32, F32, [2, 7, 3, 16, 11]),
        // i64 positions (PyTorch's `position_ids`).
        case(F32, I64, [2, 4, 2, 8, 9]),
        case(F32, I32, [2, 0, 2, 8, 9]),
    ]
    .into_iter()
    .chain(rope_variants())
    .collect()
}

/// GPT-J's interleaved pairs, partial rotary dims (the rest passes through), and
/// positions per batch item (`[batch, seq]`), alone and together.
fn rope_variants() -> Vec<RopeSpec> {
    let case = |dtype, dims| rope_case(dtype, I64, dims);
    vec![
        RopeSpec {
            interleaved: true,
            ..case(F32, [2, 3, 2, 8, 9])
        },
        RopeSpec {
            rotary_dim: Some(4),
            ..case(F16, [1, 5, 3, 10, 7])
        },
        RopeSpec {
            batch_positions: true,
            ..case(F32, [3, 4, 2, 16, 12])
        },
        RopeSpec {
            interleaved: true,
            rotary_dim: Some(6),
            batch_positions: true,
            ..case(Bf16, [2, 3, 1, 9, 5])
        },
    ]
}
