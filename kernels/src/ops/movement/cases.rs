//! Conformance cases of the data-movement family.
//!
//! Shapes cover 1, primes, sizes that are no multiple of the 32×32 transpose tile, of
//! the 256-invocation workgroup or of the 4-lane vectors, and the layouts that select
//! each schedule (tiled transpose, strided gather, vector copies; scatter with several
//! index tiles).

use super::spec::*;
use kernelc_ir::ScalarType::{self, *};

pub(super) fn permute() -> Vec<PermuteSpec> {
    let case = |dtype: ScalarType, shape: &[usize], perm: &[usize]| PermuteSpec {
        dtype,
        shape: shape.to_vec(),
        perm: perm.to_vec(),
    };
    vec![
        // Tiled transposes: ragged tiles, a batch, batch dims moved too, bool tiles.
        case(F32, &[37, 41], &[1, 0]),
        case(F64, &[2, 9, 11], &[0, 2, 1]),
        case(F16, &[3, 4, 9, 10], &[1, 3, 0, 2]),
        case(Bool, &[12, 9], &[1, 0]),
        case(F32, &[64, 70], &[1, 0]),
        // Narrow elements by 4-byte vectors in 64-wide tiles: ragged, whole, a batch.
        case(Bf16, &[3, 70, 36], &[0, 2, 1]),
        case(U8, &[40, 72], &[1, 0]),
        case(F16, &[64, 128], &[1, 0]),
        // Gathers: merged dims, narrow tiles, size-1 dims, inner dim kept, identity.
        case(Bf16, &[2, 3, 4], &[2, 0, 1]),
        case(I32, &[1, 7, 1, 5], &[3, 2, 1, 0]),
        case(F32, &[5, 33, 17, 3], &[0, 2, 1, 3]),
        case(F32, &[4, 8], &[0, 1]),
        case(U32, &[1], &[0]),
        // Every integer width (narrow tiles hold their values), i64, bool gathers.
        case(U8, &[37, 41], &[1, 0]),
        case(I16, &[3, 33, 34], &[0, 2, 1]),
        case(I64, &[2, 3, 4], &[2, 0, 1]),
        case(Bool, &[5, 3, 7], &[1, 2, 0]),
        case(I8, &[9, 5], &[1, 0]),
        case(F32, &[0, 7], &[1, 0]),
    ]
}

pub(super) fn slice() -> Vec<SliceSpec> {
    let case =
        |dtype: ScalarType, shape: &[usize], starts: &[usize], sizes: &[usize], steps: &[i64]| {
            SliceSpec {
                dtype,
                shape: shape.to_vec(),
                starts: starts.to_vec(),
                sizes: sizes.to_vec(),
                steps: steps.to_vec(),
            }
        };
    vec![
        case(F32, &[4, 6], &[1, 5], &[2, 3], &[1, -2]),
        case(F64, &[7], &[6], &[7], &[-1]),
        // Contiguous aligned rows: vector copies.
        case(F16, &[5, 13, 8], &[0, 2, 0], &[5, 4, 8], &[1, 3, 1]),
        case(I32, &[1, 11], &[0, 10], &[1, 4], &[1, -3]),
        case(F32, &[9, 10], &[2, 0], &[5, 10], &[1, 1]),
        case(Bf16, &[6, 7, 5], &[5, 6, 4], &[3, 7, 5], &[-2, -1, -1]),
        case(F32, &[3, 8], &[0, 0], &[3, 8], &[1, 1]),
        case(F32, &[1], &[0], &[1], &[1]),
        // A size-1 dim may carry any step.
        case(F32, &[4, 5], &[2, 0], &[1, 3], &[i64::MAX, 2]),
        case(U8, &[5, 13], &[4, 1], &[3, 6], &[-1, 2]),
        case(I64, &[6, 7], &[0, 6], &[6, 7], &[1, -1]),
        case(Bool, &[3, 9], &[0, 1], &[3, 8], &[1, 1]),
        case(U16, &[11], &[10], &[4], &[-3]),
        // Empty slices: of a non-empty tensor, and of an empty one.
        case(F32, &[5, 6], &[2, 0], &[0, 6], &[1, 1]),
        case(I32, &[0, 4], &[0, 1], &[0, 2], &[1, 1]),
    ]
}

pub(super) fn concat() -> Vec<ConcatSpec> {
    let case = |dtype: ScalarType, shapes: &[&[usize]], axis: usize| ConcatSpec {
        dtype,
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        axis,
    };
    vec![
        case(F32, &[&[2, 3], &[2, 1]], 1),
        case(F64, &[&[1, 5], &[3, 5], &[2, 5]], 0),
        case(F16, &[&[2, 4, 3], &[2, 1, 3], &[2, 7, 3]], 1),
        case(I32, &[&[7], &[13], &[1]], 0),
        // Runs of whole vectors.
        case(F32, &[&[3, 4], &[3, 8]], 1),
        case(Bf16, &[&[1], &[1]], 0),
        case(F32, &[&[1, 1, 1]], 2),
        case(U8, &[&[3, 5], &[3, 2], &[3, 9]], 1),
        case(I64, &[&[2, 3], &[4, 3]], 0),
        case(Bool, &[&[7], &[6], &[1]], 0),
        case(I8, &[&[2, 2, 3], &[2, 3, 3]], 1),
        // Empty pieces are skipped; every piece empty gives an empty result.
        case(F32, &[&[2, 0], &[2, 3], &[2, 0], &[2, 1]], 1),
        case(U8, &[&[0, 3], &[4, 3]], 0),
        case(F32, &[&[0, 2], &[0, 2]], 0),
    ]
}

pub(super) fn gather() -> Vec<GatherSpec> {
    let case = |dtype: ScalarType,
                index_dtype: ScalarType,
                data: &[usize],
                indices: &[usize],
                axis: usize| {
        GatherSpec {
            dtype,
            index_dtype,
            data: data.to_vec(),
            indices: indices.to_vec(),
            axis,
            rows_of: None,
        }
    };
    vec![
        case(F32, U32, &[10, 4], &[3], 0),
        case(F64, I32, &[7, 5], &[11], 1),
        case(F16, F32, &[3, 6, 5], &[2, 4], 1),
        case(I32, U32, &[1], &[1], 0),
        case(Bf16, I32, &[4, 9, 8], &[5], 2),
        // Rows of whole vectors (embedding lookup).
        case(F32, I32, &[13, 8], &[3, 3], 0),
        case(U32, F32, &[5, 7], &[13], 0),
        // i64 indices (ONNX `Gather`, PyTorch `embedding`), narrow and bool data.
        case(F32, I64, &[13, 8], &[2, 3], 0),
        case(U8, I64, &[9, 5], &[7], 1),
        case(Bool, I32, &[6, 4], &[5], 0),
        case(I64, U32, &[4, 3], &[6], 0),
        case(I16, I64, &[3, 7, 2], &[4], 1),
        // No indices: an empty result. An empty axis: every index is out of range
        // (zeros).
        case(F32, I64, &[5, 3], &[0], 0),
        case(F32, I32, &[0, 3], &[4], 0),
        // A piece of a split table: rows 4..9 of 12; other rows keep the prior.
        GatherSpec {
            rows_of: Some([4, 12]),
            ..case(F32, I64, &[5, 4], &[9], 0)
        },
        GatherSpec {
            rows_of: Some([0, 7]),
            ..case(I32, I32, &[3, 1], &[2, 5], 0)
        },
    ]
}

pub(super) fn scatter() -> Vec<ScatterSpec> {
    use ScatterCombine::{Last, Sum};
    use ScatterInit::{Prior, Zero};
    let case = |combine,
                init,
                dtype: ScalarType,
                index_dtype: ScalarType,
                data: &[usize],
                indices: &[usize],
                axis| {
        ScatterSpec {
            dtype,
            index_dtype,
            data: data.to_vec(),
            indices: indices.to_vec(),
            axis,
            combine,
            init,
            rows_of: None,
        }
    };
    vec![
        case(Sum, Zero, F32, U32, &[10, 4], &[3], 0),
        case(Sum, Prior, F64, I32, &[7, 5], &[11], 0),
        case(Last, Zero, F16, F32, &[3, 6, 5], &[9], 1),
        case(Last, Prior, I32, I32, &[5, 3], &[17], 0),
        case(Sum, Zero, Bf16, I32, &[2, 9, 3], &[2, 5], 1),
        case(Sum, Prior, F32, U32, &[1], &[1], 0),
        case(Sum, Zero, I32, U32, &[4, 4], &[6], 1),
        case(Sum, Prior, U32, I32, &[6, 3], &[9], 0),
        // More indices than one GPU tile of 256: several scans.
        case(Last, Prior, F32, I32, &[300, 2], &[400], 0),
        case(Sum, Prior, F32, F32, &[37, 3], &[263], 0),
        // More indices than one CPU tile of 2048.
        case(Sum, Zero, F32, I32, &[5, 2], &[2100], 0),
        // i64 indices (embedding backward), every integer width, bool data.
        case(Sum, Zero, F32, I64, &[10, 4], &[13], 0),
        case(Sum, Prior, I64, I64, &[7, 5], &[11], 0),
        case(Sum, Zero, U8, I32, &[6, 2], &[17], 0),
        case(Last, Prior, Bool, I64, &[8, 3], &[5], 0),
        case(Last, Zero, I16, U32, &[4, 5], &[7], 1),
        // No indices: the initial value (zeros, or the prior).
        case(Sum, Zero, F32, I64, &[4, 3], &[0], 0),
        case(Sum, Prior, F32, I32, &[4, 3], &[0], 1),
        case(Last, Prior, I64, I64, &[3, 2], &[0], 0),
    ]
}
