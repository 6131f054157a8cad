//! Movement ops past one kernel's indices ([`crate::lower::split`]) whose pieces of
//! rows would not fit (a permute moving the first dimension, a slice or `as_strided`
//! of any view, a concat along the first axis): the op as affine moves, `y[to(i)] =
//! x[from(i)]` for `i` over a box of dims, cut into blocks whose elements and whose
//! spans in `x` and in `y` each fit one kernel's indices. Each block is one launch
//! binding the part of `x` and of `y` it touches, from a multiple of
//! [`PIECE_ALIGNMENT`] elements. A scatter along axis 0 whose updates pass the limit
//! runs in blocks of them.

use kernelc_ir::ScalarType;

use super::lower::{block_copy, Strided};
use super::{ScatterInit, ScatterSpec};
use crate::lower::split::{assemble, Piece, PieceUniforms, Place, PIECE_ALIGNMENT};
use crate::lower::{Binding, Launch, LowerError, Plan, TargetCaps, Whole};
use crate::spec::OpSpec;

/// Blocks past this many are refused: the map is too scattered to copy in pieces.
const MAX_BLOCKS: u64 = 1 << 14;

/// One side of a move: the flat element of the box's first element, and the step in
/// elements per unit of each dim (negative: backwards).
#[derive(Clone, Debug)]
pub(crate) struct Side {
    pub of: Whole,
    pub base: u64,
    pub coefs: Vec<i64>,
}

/// `y[to(i)] = x[from(i)]` for `i` over `dims`.
#[derive(Clone, Debug)]
pub(crate) struct Move {
    pub dims: Vec<usize>,
    pub from: Side,
    pub to: Side,
}

/// A side's dense row-major coefficients over `dims` from `base`.
pub(crate) fn dense(of: Whole, base: u64, dims: &[usize]) -> Side {
    let strides = crate::shape::row_major_strides(dims);
    Side {
        of,
        base,
        coefs: strides.iter().map(|&s| s as i64).collect(),
    }
}

/// Elements a side spans over a box of `extents`.
fn span(coefs: &[i64], extents: &[usize]) -> u64 {
    coefs
        .iter()
        .zip(extents)
        .map(|(&c, &e)| c.unsigned_abs() * (e.max(1) as u64 - 1))
        .sum::<u64>()
        + 1
}

/// Block extents for `m` under `limit`: dims with the largest steps cut first, each
/// to the most that still fits.
fn block_extents(m: &Move, limit: u64) -> Vec<usize> {
    let mut b = m.dims.clone();
    let fits = |b: &[usize]| {
        span(&m.from.coefs, b) <= limit
            && span(&m.to.coefs, b) <= limit
            && b.iter().map(|&e| e as u64).product::<u64>() <= limit
    };
    let mut order: Vec<usize> = (0..b.len()).collect();
    let weight = |d: usize| {
        m.from.coefs[d]
            .unsigned_abs()
            .max(m.to.coefs[d].unsigned_abs())
    };
    order.sort_by_key(|&d| std::cmp::Reverse((weight(d), std::cmp::Reverse(d))));
    for d in order {
        if fits(&b) {
            break;
        }
        // The most of dim d that fits with the others as they are (binary search).
        let (mut lo, mut hi) = (1usize, b[d]);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            b[d] = mid;
            if fits(&b) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        b[d] = lo;
    }
    b
}

/// The plan of `moves` (in order) for an op named `what` of `dtype`.
pub(crate) fn plan_moves(
    what: &str,
    caps: &TargetCaps,
    dtype: ScalarType,
    moves: &[Move],
) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    // Room for a part's start rounded down to the alignment.
    let room = limit.saturating_sub(PIECE_ALIGNMENT).max(1);
    let mut plan = Plan::default();
    for m in moves {
        let b = block_extents(m, room);
        let counts: Vec<u64> = m
            .dims
            .iter()
            .zip(&b)
            .map(|(&d, &e)| (d as u64).div_ceil(e.max(1) as u64))
            .collect();
        let blocks: u64 = counts.iter().product();
        if blocks > MAX_BLOCKS {
            return Err(LowerError::TooLarge {
                what: format!("{what}: blocks of a strided map past one kernel's indices"),
                value: blocks,
                limit: MAX_BLOCKS,
            });
        }
        for block in 0..blocks {
            plan.launches
                .push(block_launch(what, caps, dtype, m, &b, &counts, block)?);
        }
    }
    Ok(plan)
}

/// The launch of block number `block` (row-major over `counts` blocks per dim).
fn block_launch(
    what: &str,
    caps: &TargetCaps,
    dtype: ScalarType,
    m: &Move,
    b: &[usize],
    counts: &[u64],
    block: u64,
) -> Result<Launch, LowerError> {
    let mut rest = block;
    let mut start = vec![0usize; b.len()];
    for d in (0..b.len()).rev() {
        start[d] = (rest % counts[d]) as usize * b[d];
        rest /= counts[d];
    }
    let extents: Vec<usize> = (0..b.len())
        .map(|d| b[d].min(m.dims[d] - start[d]))
        .collect();
    // A side's first element, its part's start (aligned down from its least element)
    // and the map within the part.
    let place = |side: &Side| -> Result<(u64, Strided, u64), LowerError> {
        let at = |lane: &dyn Fn(i64, usize) -> i64| -> i64 {
            side.coefs
                .iter()
                .zip(&start)
                .zip(&extents)
                .map(|((&c, &s), &e)| c * s as i64 + lane(c, e))
                .sum::<i64>()
                + side.base as i64
        };
        let first = at(&|_, _| 0);
        let least = at(&|c, e| if c < 0 { c * (e as i64 - 1) } else { 0 });
        let most = at(&|c, e| if c > 0 { c * (e as i64 - 1) } else { 0 });
        if least < 0 {
            return Err(LowerError::Internal("a move reaches before its tensor"));
        }
        let part = least as u64 / PIECE_ALIGNMENT * PIECE_ALIGNMENT;
        let map = Strided {
            base: (first as u64 - part) as usize,
            dims: extents.clone(),
            coefs: side.coefs.clone(),
        };
        Ok((part, map, most as u64 - part + 1))
    };
    let (x_part, from, x_len) = place(&m.from)?;
    let (y_part, to, y_len) = place(&m.to)?;
    let (from, to) = collapse(from, to);
    let (kernel, grid) = block_copy(what, caps, dtype, (&from, &to), (x_len, y_len))?;
    let bind = |of: Whole, start: u64| Binding::Part { of, start };
    Ok(Launch {
        kernel,
        grid,
        bindings: vec![bind(m.from.of, x_part), bind(m.to.of, y_part)],
    })
}

/// Both maps over the same dims, without dims of extent 1 and with a dim merged into
/// the next where both maps walk the two with one step.
fn collapse(from: Strided, to: Strided) -> (Strided, Strided) {
    let (mut dims, mut fc, mut tc): (Vec<usize>, Vec<i64>, Vec<i64>) = Default::default();
    for d in 0..from.dims.len() {
        let (e, f, t) = (from.dims[d], from.coefs[d], to.coefs[d]);
        if e == 1 {
            continue;
        }
        match (dims.last_mut(), fc.last_mut(), tc.last_mut()) {
            (Some(pd), Some(pf), Some(pt)) if *pf == e as i64 * f && *pt == e as i64 * t => {
                *pd *= e;
                *pf = f;
                *pt = t;
            }
            _ => {
                dims.push(e);
                fc.push(f);
                tc.push(t);
            }
        }
    }
    let map = |base, coefs| Strided {
        base,
        dims: dims.clone(),
        coefs,
    };
    (map(from.base, fc), map(to.base, tc))
}

/// A scatter along axis 0 whose updates pass the limit: blocks of its updates (the
/// indices flattened), in order, each scattering into the whole output (itself split
/// along its rows where it passes the limit). The first block starts from the op's
/// `init`; each later one from the output so far (`init = prior`, bound to the
/// output), so sums add in increasing `j` and the last update still wins.
pub(super) fn scatter_in_update_blocks(
    spec: &ScatterSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let count = crate::shape::numel(&spec.indices);
    let per_index = crate::shape::numel(&spec.data[1..]);
    let block = (limit / per_index.max(1) as u64).min(limit) as usize;
    if block == 0 {
        return Err(LowerError::TooLarge {
            what: "scatter: elements of one update row".into(),
            value: per_index as u64,
            limit,
        });
    }
    let pieces = (0..count)
        .step_by(block)
        .map(|j0| {
            let k = block.min(count - j0);
            let first = j0 == 0;
            let mut inputs = vec![
                Place::at(Whole::Input(0), (j0 * per_index) as u64),
                Place::at(Whole::Input(1), j0 as u64),
            ];
            let init = match (first, spec.init) {
                (true, ScatterInit::Zero) => ScatterInit::Zero,
                (true, ScatterInit::Prior) => {
                    inputs.push(Place::whole(Whole::Input(2)));
                    ScatterInit::Prior
                }
                (false, _) => {
                    inputs.push(Place::whole(Whole::Output(0)));
                    ScatterInit::Prior
                }
            };
            Piece {
                spec: OpSpec::Scatter(ScatterSpec {
                    indices: vec![k],
                    init,
                    ..spec.clone()
                }),
                inputs,
                outputs: vec![Place::whole(Whole::Output(0))],
                uniforms: PieceUniforms::Shared,
            }
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}

/// `op` as `rows` pieces of one row each, every piece `row` (the op over one row's
/// dimensions), the tensors named in `whole` bound whole and every other one at the
/// row's start (its elements divided by `rows` a row).
pub(super) fn per_row(
    op: &impl crate::op::Op,
    caps: &TargetCaps,
    rows: usize,
    whole: &[&str],
    row: OpSpec,
) -> Result<Plan, LowerError> {
    let place = |sigs: Vec<crate::spec::TensorSig>, of: fn(usize) -> Whole, r: usize| {
        sigs.iter()
            .enumerate()
            .map(|(i, sig)| {
                if whole.contains(&sig.name.as_str()) {
                    Place::whole(of(i))
                } else {
                    let per_row = crate::shape::numel(&sig.shape) / rows.max(1);
                    Place::at(of(i), (r * per_row) as u64)
                }
            })
            .collect()
    };
    let pieces = (0..rows)
        .map(|r| Piece {
            spec: row.clone(),
            inputs: place(op.inputs(), Whole::Input, r),
            outputs: place(op.outputs(), Whole::Output, r),
            uniforms: PieceUniforms::Shared,
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}
