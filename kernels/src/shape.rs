//! Shape helpers shared by specs, references and adapters: element counts, row-major
//! strides, NumPy broadcasting and axis normalisation.

use crate::error::SpecError;

/// The most elements any one tensor of a spec may have: 2^48, past any device's
/// memory, so that element and byte counts never overflow. One kernel indexes at
/// most [`TargetCaps::max_kernel_elements`](crate::lower::TargetCaps::max_kernel_elements);
/// a larger tensor is split into pieces, or refused by an op that does not split.
pub const MAX_ELEMENTS: usize = if usize::BITS >= 64 {
    (1u64 << 48) as usize
} else {
    isize::MAX as usize
};

/// Number of elements of `shape` (1 for rank 0), saturating at `usize::MAX`.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
}

/// Row-major (C order) strides of `shape`, in elements.
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

/// NumPy broadcasting of two shapes: align on the right; each pair of dimensions must
/// `shape` with its first dimension `rows` (a piece of rows of a split op).
pub fn with_rows(shape: &[usize], rows: usize) -> Vec<usize> {
    let mut shape = shape.to_vec();
    if let Some(first) = shape.first_mut() {
        *first = rows;
    }
    shape
}

/// be equal or one of them 1; the result takes the larger.
pub fn broadcast_shapes(lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>, SpecError> {
    let rank = lhs.len().max(rhs.len());
    let mut out = vec![0usize; rank];
    for (i, o) in out.iter_mut().enumerate() {
        let a = dim_from_right(lhs, rank, i);
        let b = dim_from_right(rhs, rank, i);
        *o = if a == b || b == 1 {
            a
        } else if a == 1 {
            b
        } else {
            return Err(SpecError::NotBroadcastable {
                lhs: lhs.to_vec(),
                rhs: rhs.to_vec(),
            });
        };
    }
    Ok(out)
}

fn dim_from_right(shape: &[usize], rank: usize, i: usize) -> usize {
    let pad = rank - shape.len();
    if i < pad {
        1
    } else {
        shape[i - pad]
    }
}

/// Strides (in elements of `input`) that read `input` broadcast to `out`: a broadcast
/// dimension gets stride 0. `out` must be a broadcast of `input`.
pub fn broadcast_strides(input: &[usize], out: &[usize]) -> Vec<usize> {
    let own = row_major_strides(input);
    let pad = out.len().saturating_sub(input.len());
    (0..out.len())
        .map(|i| {
            if i < pad {
                0
            } else {
                let d = input[i - pad];
                if d == 1 && out[i] != 1 {
                    0
                } else {
                    own[i - pad]
                }
            }
        })
        .collect()
}

/// Turns a possibly negative axis (counted from the end, as in NumPy, ONNX and the
/// seed traits' `dim: i32`) into an index in `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, SpecError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        Err(SpecError::BadAxis { axis, rank })
    } else {
        Ok(a as usize)
    }
}

/// Checks that a tensor shape has at most [`MAX_ELEMENTS`] elements. A dimension may
/// be 0: the tensor is empty (NumPy/ONNX), and lowering computes nothing for it.
pub(crate) fn check_shape(what: &str, shape: &[usize]) -> Result<(), SpecError> {
    let elements = shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
        .unwrap_or(u128::MAX);
    check_count(what, elements)
}

/// Checks an element count against [`MAX_ELEMENTS`].
pub(crate) fn check_count(what: &str, elements: u128) -> Result<(), SpecError> {
    if elements > MAX_ELEMENTS as u128 {
        return Err(SpecError::TooLarge {
            what: what.to_string(),
            elements,
            limit: MAX_ELEMENTS,
        });
    }
    Ok(())
}

/// Checks that a single dimension is non-zero.
pub(crate) fn check_dim(what: &str, d: usize) -> Result<(), SpecError> {
    if d == 0 {
        Err(SpecError::zero(what))
    } else {
        Ok(())
    }
}

/// Iterates over all multi-indices of `shape` in row-major order, calling `f` with the
/// multi-index. Rank 0 yields one empty index.
pub fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Dot product of a multi-index with strides.
pub fn offset(idx: &[usize], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(i, s)| i * s).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_rules() {
        assert_eq!(broadcast_shapes(&[2, 1], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes(&[], &[4, 5]).unwrap(), vec![4, 5]);
        assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
        assert_eq!(broadcast_strides(&[2, 1], &[2, 3]), vec![1, 0]);
        assert_eq!(broadcast_strides(&[3], &[2, 3]), vec![0, 1]);
    }

    #[test]
    fn axes() {
        assert_eq!(normalize_axis(-1, 3).unwrap(), 2);
        assert!(normalize_axis(3, 3).is_err());
        assert!(normalize_axis(-4, 3).is_err());
    }

    #[test]
    fn iterate() {
        let mut seen = vec![];
        for_each_index(&[2, 2], |i| seen.push(i.to_vec()));
        assert_eq!(seen, vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]);
        let mut n = 0;
        for_each_index(&[], |_| n += 1);
        assert_eq!(n, 1);
    }
}
