//! Attention over more keys than one kernel indexes: each block of queries runs over
//! blocks of keys, each block's attention with its log-sum-exp `ℓ`, and the results
//! are combined as they come (flash-decoding's split-k), in the compute type:
//!
//! ```text
//! M  = max(L, ℓ) (NaN-propagating),  M' = max(M, lowest finite)
//! a  = e^{L − M'},  c = e^{ℓ − M'},  s = a + c
//! O ← (a·O + c·o) / max(s, 1),       L ← M' + ln s
//! ```
//!
//! `s ≥ 1` unless both sides saw no key (`L = ℓ = −∞`: then `a = c = 0`, both
//! outputs are 0 and `L` stays `−∞`); a NaN on either side stays NaN. Key blocks
//! that no query of the block sees (causal) are not visited. A narrow dtype's block
//! results are rounded to it once each, then widened for the combination; the
//! output is rounded once more at the end.

use kernelc_ir::ScalarType;

use super::large::{piece, q_offset, Block};
use super::AttentionSpec;
use crate::lower::math::compute_type;
use crate::lower::split::{assemble, cast_step, step, Piece, Place};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, UnaryFn};
use crate::spec::OpSpec;

/// The temporaries of the plan, by index.
const RUNNING_O: [usize; 2] = [0, 1];
const RUNNING_L: [usize; 2] = [2, 3];
const BLOCK_O: usize = 4;
const BLOCK_L: usize = 5;
/// A narrow dtype's block output, widened.
const BLOCK_O_WIDE: usize = 6;

/// The plan of `blocks` of queries (each over every key), each run over blocks of
/// `keys` keys and combined.
pub(super) fn combined(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    mask: Option<[usize; 4]>,
    blocks: &[Block],
    keys: usize,
) -> Result<Plan, LowerError> {
    let d = spec.head_dim;
    let ct = compute_type(spec.dtype);
    let narrow = ct != spec.dtype;
    let rows = blocks.iter().map(|b| b.rows * b.heads).max().unwrap_or(0);
    let temp = |dtype: ScalarType, len: usize| TempBuffer {
        dtype,
        len: len as u64,
    };
    let mut temps = vec![
        temp(ct, rows * d),
        temp(ct, rows * d),
        temp(ct, rows),
        temp(ct, rows),
        temp(spec.dtype, rows * d),
        temp(ct, rows),
    ];
    if narrow {
        temps.push(temp(ct, rows * d));
    }
    let mut pieces = Vec::new();
    for block in blocks {
        query_block(spec, mask, *block, keys, &mut pieces);
    }
    assemble(caps, temps, pieces)
}

/// A temporary from its start.
fn temp(i: usize) -> Place {
    Place::at(Whole::Temp(i), 0)
}

/// Key blocks that some query of `b` sees (all of them without `causal`; the first
/// always, to start the running result).
fn visible_key_blocks(spec: &AttentionSpec, b: &Block, keys: usize) -> Vec<usize> {
    (0..spec.seq_k)
        .step_by(keys)
        .filter(|&k0| {
            // The last row `q0 + rows − 1` sees key `k0` iff
            // `k0 + seq_q ≤ q0 + rows − 1 + causal_keys`.
            k0 == 0 || !spec.causal || k0 + spec.seq_q < b.q0 + b.rows + spec.causal_keys()
        })
        .collect()
}

/// The steps of one block of queries, appended to `pieces`.
fn query_block(
    spec: &AttentionSpec,
    mask: Option<[usize; 4]>,
    b: Block,
    keys: usize,
    pieces: &mut Vec<Piece>,
) {
    let d = spec.head_dim;
    let ct = compute_type(spec.dtype);
    let narrow = ct != spec.dtype;
    let x = b.rows * b.heads;
    let q_at = q_offset(spec, &b);
    let o_final = Place::at(Whole::Output(0), q_at as u64);
    let lse_final = spec
        .lse
        .then(|| Place::at(Whole::Output(1), (q_at / d) as u64));
    let of_keys = |k0: usize| Block {
        k0,
        keys: keys.min(spec.seq_k - k0),
        ..b
    };
    let visible = visible_key_blocks(spec, &b, keys);
    if let [k0] = visible[..] {
        // One block sees every visible key: the plain attention of it.
        let outputs = [Some(o_final), lse_final].into_iter().flatten().collect();
        pieces.push(piece(spec, mask, of_keys(k0), spec.lse, outputs));
        return;
    }
    let [mut o_now, mut o_next] = RUNNING_O.map(temp);
    let [mut l_now, mut l_next] = RUNNING_L.map(temp);
    for (n, &k0) in visible.iter().enumerate() {
        let last = n + 1 == visible.len();
        let o_block = if narrow || n > 0 {
            temp(BLOCK_O)
        } else {
            o_now
        };
        let l_block = if n > 0 { temp(BLOCK_L) } else { l_now };
        pieces.push(piece(spec, mask, of_keys(k0), true, vec![o_block, l_block]));
        let o_wide = if narrow {
            let wide = if n > 0 { temp(BLOCK_O_WIDE) } else { o_now };
            pieces.push(cast_step(spec.dtype, ct, x * d, o_block, wide));
            wide
        } else {
            o_block
        };
        if n == 0 {
            continue;
        }
        let o_to = if last && !narrow { o_final } else { o_next };
        pieces.push(step(
            combine_outputs(ct, x, d),
            vec![o_now, l_now, o_wide, l_block],
            o_to,
        ));
        if last && narrow {
            pieces.push(cast_step(ct, spec.dtype, x * d, o_next, o_final));
        }
        match (last, lse_final) {
            (true, None) => {}
            (true, Some(lse)) => pieces.push(step(combine_lse(ct, x), vec![l_now, l_block], lse)),
            (false, _) => pieces.push(step(combine_lse(ct, x), vec![l_now, l_block], l_next)),
        }
        std::mem::swap(&mut o_now, &mut o_next);
        std::mem::swap(&mut l_now, &mut l_next);
    }
}

/// Nodes after inputs `l` (running) and `lb` (the block's): `M'`, `a`, `c`, `s` (see
/// the module doc), returning their indices.
fn weights(nodes: &mut Vec<FusedNode>, ct: ScalarType, l: usize, lb: usize) -> [usize; 4] {
    let lowest = match ct {
        ScalarType::F64 => f64::MIN,
        _ => f64::from(f32::MIN),
    };
    let mut push = |node| {
        nodes.push(node);
        nodes.len() - 1
    };
    let m = push(FusedNode::Binary {
        func: BinaryFn::MaxNan,
        a: l,
        b: lb,
    });
    let shift = push(FusedNode::Scalar {
        func: BinaryFn::MaxNan,
        x: m,
        scalar: lowest,
        reversed: false,
    });
    let mut weight = |of: usize| {
        let diff = push(FusedNode::Binary {
            func: BinaryFn::Sub,
            a: of,
            b: shift,
        });
        push(FusedNode::Unary {
            func: UnaryFn::Exp,
            x: diff,
        })
    };
    let a = weight(l);
    let c = weight(lb);
    let s = push(FusedNode::Binary {
        func: BinaryFn::Add,
        a,
        b: c,
    });
    [shift, a, c, s]
}

/// `(a·O + c·o) / max(s, 1)` over inputs `O [x, d]`, `L [x, 1]`, `o [x, d]`,
/// `ℓ [x, 1]`.
fn combine_outputs(ct: ScalarType, x: usize, d: usize) -> OpSpec {
    let mut nodes: Vec<FusedNode> = (0..4).map(FusedNode::Input).collect();
    let [_, a, c, s] = weights(&mut nodes, ct, 1, 3);
    let mut push = |node| {
        nodes.push(node);
        nodes.len() - 1
    };
    let old = push(FusedNode::Binary {
        func: BinaryFn::Mul,
        a: 0,
        b: a,
    });
    let new = push(FusedNode::Binary {
        func: BinaryFn::Mul,
        a: 2,
        b: c,
    });
    let sum = push(FusedNode::Binary {
        func: BinaryFn::Add,
        a: old,
        b: new,
    });
    let denominator = push(FusedNode::Scalar {
        func: BinaryFn::MaxNan,
        x: s,
        scalar: 1.0,
        reversed: false,
    });
    push(FusedNode::Binary {
        func: BinaryFn::Div,
        a: sum,
        b: denominator,
    });
    OpSpec::Fused(FusedSpec {
        dtype: ct,
        inputs: vec![vec![x, d], vec![x, 1], vec![x, d], vec![x, 1]],
        nodes,
    })
}

/// `M' + ln s` over inputs `L [x]`, `ℓ [x]`.
fn combine_lse(ct: ScalarType, x: usize) -> OpSpec {
    let mut nodes: Vec<FusedNode> = (0..2).map(FusedNode::Input).collect();
    let [shift, _, _, s] = weights(&mut nodes, ct, 0, 1);
    nodes.push(FusedNode::Unary {
        func: UnaryFn::Log,
        x: s,
    });
    nodes.push(FusedNode::Binary {
        func: BinaryFn::Add,
        a: shift,
        b: nodes.len() - 1,
    });
    OpSpec::Fused(FusedSpec {
        dtype: ct,
        inputs: vec![vec![x], vec![x]],
        nodes,
    })
}
