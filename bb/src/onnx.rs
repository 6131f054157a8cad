//! ONNX's conventions for the primitives' attributes: negative axes, reshape's `0`
//! and `-1`, slice windows with clamping and negative steps, `TensorProto` data types
//! and payloads.

use crate::BbError;
use bb_ir::proto::onnx::TensorProto;
use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{BinaryFn, ReduceFn, SliceSpec};

/// `axis` of a tensor of `rank` dims, counted from the end when negative.
pub(crate) fn axis(op: &'static str, axis: i64, rank: usize) -> Result<usize, BbError> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(BbError::invalid(
            op,
            format!("axis {axis} of a {rank}-dim tensor"),
        ));
    }
    Ok(a as usize)
}

/// Distinct axes, each as [`axis`] normalises it, in ascending order.
pub(crate) fn axes(op: &'static str, list: &[i64], rank: usize) -> Result<Vec<usize>, BbError> {
    let mut out = list
        .iter()
        .map(|&a| axis(op, a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(BbError::invalid(op, format!("axes {list:?} repeat a dim")));
    }
    Ok(out)
}

/// The shape `Reshape` gives `input` for `target`: `0` keeps the input's dim there, one
/// `-1` takes what is left.
pub(crate) fn reshape(input: &[usize], target: &[i64]) -> Result<Vec<usize>, BbError> {
    let bad = |why: String| BbError::invalid("Reshape", why);
    let numel: usize = input.iter().product();
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        shape.push(match d {
            0 => *input
                .get(i)
                .ok_or_else(|| bad(format!("0 at dim {i} past the input's {input:?}")))?,
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            d if d > 0 => d as usize,
            d => return Err(bad(format!("dim {d} in {target:?}"))),
        });
    }
    let known: usize = shape.iter().product();
    if let Some(i) = infer {
        if known == 0 || numel % known != 0 {
            return Err(bad(format!("{input:?} cannot take the shape {target:?}")));
        }
        shape[i] = numel / known;
    }
    if shape.iter().product::<usize>() != numel {
        return Err(bad(format!(
            "{input:?} ({numel} elements) cannot take the shape {target:?}"
        )));
    }
    Ok(shape)
}

/// One axis of a `Slice`: first element, count and step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub start: usize,
    pub size: usize,
    pub step: i64,
}

/// ONNX `Slice` on a dim of `n`: negative `start`/`end` count from the end, then
/// clamp (to `[0, n]` for a positive step, `[-1, n - 1]` for a negative one).
pub(crate) fn window(n: usize, start: i64, end: i64, step: i64) -> Result<Window, BbError> {
    if step == 0 {
        return Err(BbError::invalid("Slice", "a step of 0".into()));
    }
    let n = n as i64;
    let from_end = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (start, end) = (from_end(start), from_end(end));
    let (first, count) = if step > 0 {
        let (s, e) = (start.clamp(0, n), end.clamp(0, n));
        (s, if e > s { (e - s + step - 1) / step } else { 0 })
    } else {
        let (s, e) = (start.clamp(0, n - 1), end.clamp(-1, n - 1));
        (s, if s > e { (s - e - step - 1) / -step } else { 0 })
    };
    Ok(Window {
        start: first.max(0) as usize,
        size: count as usize,
        step,
    })
}

/// kernelc's type of an ONNX `TensorProto.DataType`.
pub(crate) fn dtype(code: i32) -> Result<ScalarType, BbError> {
    Ok(match code {
        1 => ScalarType::F32,
        2 => ScalarType::U8,
        3 => ScalarType::I8,
        4 => ScalarType::U16,
        5 => ScalarType::I16,
        6 => ScalarType::I32,
        7 => ScalarType::I64,
        9 => ScalarType::Bool,
        10 => ScalarType::F16,
        11 => ScalarType::F64,
        12 => ScalarType::U32,
        16 => ScalarType::Bf16,
        other => {
            return Err(BbError::unsupported(
                "Cast",
                format!(
                    "ONNX data type {other} (kernelc has no strings, u64, complex or 8-bit floats)"
                ),
            ))
        }
    })
}

/// A `TensorProto`'s dtype, shape and elements as a device byte image (little-endian,
/// bool one byte): `raw_data` as it is, else the typed field ONNX keeps that type in.
pub(crate) fn decode(t: &TensorProto) -> Result<(ScalarType, Vec<usize>, Vec<u8>), BbError> {
    let ty = dtype(t.data_type)?;
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| BbError::invalid("Constant", format!("dim {d}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let numel: usize = shape.iter().product();
    let size = ty.size_bytes() as usize;
    if !t.external_data.is_empty() {
        return Err(BbError::unsupported("Constant", "external data".into()));
    }
    let bytes = if !t.raw_data.is_empty() {
        t.raw_data.clone()
    } else {
        let words: Vec<u64> = match ty {
            ScalarType::F32 => t.float_data.iter().map(|v| v.to_bits() as u64).collect(),
            ScalarType::F64 => t.double_data.iter().map(|v| v.to_bits()).collect(),
            ScalarType::I64 => t.int64_data.iter().map(|&v| v as u64).collect(),
            ScalarType::U32 => t.uint64_data.clone(),
            // int32_data holds the rest: narrow integers, bool, f16/bf16 bits.
            _ => t.int32_data.iter().map(|&v| v as u32 as u64).collect(),
        };
        words
            .iter()
            .flat_map(|w| w.to_le_bytes()[..size].to_vec())
            .collect()
    };
    if bytes.len() != numel * size {
        return Err(BbError::invalid(
            "Constant",
            format!(
                "{} bytes of data for {shape:?} of {ty} ({} bytes)",
                bytes.len(),
                numel * size
            ),
        ));
    }
    Ok((ty, shape, bytes))
}

/// `Squeeze`'s result shape: `axes` dropped (each must be 1), or every 1 when empty.
pub(crate) fn squeezed(shape: &[usize], axes: &[i64]) -> Result<Vec<usize>, BbError> {
    let drop = if axes.is_empty() {
        (0..shape.len()).filter(|&d| shape[d] == 1).collect()
    } else {
        self::axes("Squeeze", axes, shape.len())?
    };
    if let Some(&d) = drop.iter().find(|&&d| shape[d] != 1) {
        return Err(BbError::invalid(
            "Squeeze",
            format!("dim {d} of {shape:?} is not 1"),
        ));
    }
    Ok((0..shape.len())
        .filter(|d| !drop.contains(d))
        .map(|d| shape[d])
        .collect())
}

/// `Unsqueeze`'s result shape: new dims of 1 at `axes` of the result (negative ones
/// count from its end).
pub(crate) fn unsqueezed(shape: &[usize], axes: &[i64]) -> Result<Vec<usize>, BbError> {
    let rank = shape.len() + axes.len();
    let new = self::axes("Unsqueeze", axes, rank)?;
    let mut rest = shape.iter();
    Ok((0..rank)
        .map(|d| {
            if new.contains(&d) {
                1
            } else {
                rest.next().copied().unwrap_or(1)
            }
        })
        .collect())
}

/// `Slice` of a `dtype` tensor of `shape` as one strided slice: empty `axes` are
/// `0..starts.len()`, empty `steps` all 1; each axis at most once.
pub(crate) fn slice_spec(
    dtype: ScalarType,
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> Result<SliceSpec, BbError> {
    let rank = shape.len();
    let axes: Vec<usize> = if axes.is_empty() {
        (0..starts.len()).collect()
    } else {
        axes.iter()
            .map(|&d| axis("Slice", d, rank))
            .collect::<Result<_, _>>()?
    };
    let steps: Vec<i64> = if steps.is_empty() {
        vec![1; axes.len()]
    } else {
        steps.to_vec()
    };
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.len() != axes.len() {
        return Err(BbError::invalid(
            "Slice",
            format!(
                "starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
            ),
        ));
    }
    let mut spec = SliceSpec {
        dtype,
        shape: shape.to_vec(),
        starts: vec![0; rank],
        sizes: shape.to_vec(),
        steps: vec![1; rank],
    };
    let mut seen = vec![false; rank];
    for (i, &d) in axes.iter().enumerate() {
        if std::mem::replace(&mut seen[d], true) {
            return Err(BbError::invalid("Slice", format!("axis {d} given twice")));
        }
        let w = window(shape[d], starts[i], ends[i], steps[i])?;
        (spec.starts[d], spec.sizes[d], spec.steps[d]) = (w.start, w.size, w.step);
    }
    Ok(spec)
}

/// `Split` along `axis` into consecutive parts of `sizes` (which must add up to the
/// dim): one slice each.
pub(crate) fn split_specs(
    dtype: ScalarType,
    shape: &[usize],
    axis: usize,
    sizes: &[usize],
) -> Result<Vec<SliceSpec>, BbError> {
    if sizes.iter().sum::<usize>() != shape[axis] {
        return Err(BbError::invalid(
            "Split",
            format!("sizes {sizes:?} do not add up to dim {axis} of {shape:?}"),
        ));
    }
    let mut start = 0;
    Ok(sizes
        .iter()
        .map(|&size| {
            let mut spec = SliceSpec {
                dtype,
                shape: shape.to_vec(),
                starts: vec![0; shape.len()],
                sizes: shape.to_vec(),
                steps: vec![1; shape.len()],
            };
            (spec.starts[axis], spec.sizes[axis]) = (start, size);
            start += size;
            spec
        })
        .collect())
}

/// ONNX's `Max`/`Min`: NaN-propagating for floats (as NumPy and torch).
pub(crate) fn max_or_min(dtype: ScalarType, max: bool) -> BinaryFn {
    match (dtype.is_float(), max) {
        (true, true) => BinaryFn::MaxNan,
        (true, false) => BinaryFn::MinNan,
        (false, true) => BinaryFn::Max,
        (false, false) => BinaryFn::Min,
    }
}

/// ONNX's `ReduceMax`/`ReduceMin`: NaN-propagating for floats.
pub(crate) fn reduce_max_or_min(dtype: ScalarType, max: bool) -> ReduceFn {
    match (dtype.is_float(), max) {
        (true, true) => ReduceFn::MaxNan,
        (true, false) => ReduceFn::MinNan,
        (false, true) => ReduceFn::Max,
        (false, false) => ReduceFn::Min,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_windows_follow_onnx() {
        let w = |n, s, e, st| window(n, s, e, st).map(|w| (w.start, w.size)).ok();
        assert_eq!(w(10, 2, 7, 1), Some((2, 5)));
        assert_eq!(w(10, -3, i64::MAX, 1), Some((7, 3)));
        assert_eq!(w(10, 1, 8, 3), Some((1, 3)));
        assert_eq!(w(10, i64::MAX, i64::MIN, -1), Some((9, 10)));
        assert_eq!(w(10, 8, 1, -3), Some((8, 3)));
        assert_eq!(w(10, 5, 5, 1), Some((5, 0)));
        assert_eq!(w(10, 0, 3, 0), None);
    }

    #[test]
    fn reshape_takes_zero_and_minus_one() {
        assert_eq!(reshape(&[2, 3, 4], &[0, -1]).ok(), Some(vec![2, 12]));
        assert_eq!(reshape(&[2, 3, 4], &[4, 0, 2]).ok(), Some(vec![4, 3, 2]));
        assert!(reshape(&[2, 3, 4], &[5, -1]).is_err());
        assert!(reshape(&[2, 3], &[-1, -1]).is_err());
        assert!(reshape(&[2, 3], &[7]).is_err());
    }
}
