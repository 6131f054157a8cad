//! Cases for data movement (permute, slice, concat, gather, scatter), rope, dropout,
//! adam and image filters.
//!
//! Shapes cover 1, primes, sizes that are no multiple of the 32×32 transpose tile, of
//! the 256-invocation workgroup or of the 4-lane vectors, and the layouts that select
//! each schedule (tiled transpose, strided gather, vector copies; scatter with several
//! index tiles; fused and two-pass gaussian blur).

use crate::rng::RngScheme;
use crate::spec::*;
use kernelc_ir::ScalarType::{self, *};

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    match kind {
        OpKind::Permute => permute(),
        OpKind::Slice => slice(),
        OpKind::Concat => concat(),
        OpKind::Gather => gather(),
        OpKind::Scatter => scatter(),
        OpKind::Rope => rope(),
        OpKind::Dropout => dropout(),
        OpKind::Adam => adam(),
        OpKind::ImageFilter => image(),
        _ => vec![kind.example()],
    }
}

fn permute() -> Vec<OpSpec> {
    let case = |dtype: ScalarType, shape: &[usize], perm: &[usize]| {
        OpSpec::Permute(PermuteSpec {
            dtype,
            shape: shape.to_vec(),
            perm: perm.to_vec(),
        })
    };
    vec![
        // Tiled transposes: ragged tiles, a batch, batch dims moved too, bool tiles.
        case(F32, &[37, 41], &[1, 0]),
        case(F64, &[2, 9, 11], &[0, 2, 1]),
        case(F16, &[3, 4, 9, 10], &[1, 3, 0, 2]),
        case(Bool, &[12, 9], &[1, 0]),
        case(F32, &[64, 70], &[1, 0]),
        // Gathers: merged dims, narrow tiles, size-1 dims, inner dim kept, identity.
        case(Bf16, &[2, 3, 4], &[2, 0, 1]),
        case(I32, &[1, 7, 1, 5], &[3, 2, 1, 0]),
        case(F32, &[5, 33, 17, 3], &[0, 2, 1, 3]),
        case(F32, &[4, 8], &[0, 1]),
        case(U32, &[1], &[0]),
    ]
}

fn slice() -> Vec<OpSpec> {
    let case =
        |dtype: ScalarType, shape: &[usize], starts: &[usize], sizes: &[usize], steps: &[i64]| {
            OpSpec::Slice(SliceSpec {
                dtype,
                shape: shape.to_vec(),
                starts: starts.to_vec(),
                sizes: sizes.to_vec(),
                steps: steps.to_vec(),
            })
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
    ]
}

fn concat() -> Vec<OpSpec> {
    let case = |dtype: ScalarType, shapes: &[&[usize]], axis: usize| {
        OpSpec::Concat(ConcatSpec {
            dtype,
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            axis,
        })
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
    ]
}

fn gather() -> Vec<OpSpec> {
    let case = |dtype: ScalarType,
                index_dtype: ScalarType,
                data: &[usize],
                indices: &[usize],
                axis: usize| {
        OpSpec::Gather(GatherSpec {
            dtype,
            index_dtype,
            data: data.to_vec(),
            indices: indices.to_vec(),
            axis,
        })
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
    ]
}

fn scatter() -> Vec<OpSpec> {
    use ScatterCombine::{Last, Sum};
    use ScatterInit::{Prior, Zero};
    let case = |combine,
                init,
                dtype: ScalarType,
                index_dtype: ScalarType,
                data: &[usize],
                indices: &[usize],
                axis| {
        OpSpec::Scatter(ScatterSpec {
            dtype,
            index_dtype,
            data: data.to_vec(),
            indices: indices.to_vec(),
            axis,
            combine,
            init,
        })
    };
    vec![
        case(Sum, Zero, F32, U32, &[10, 4], &[3], 0),
        case(Sum, Prior, F64, I32, &[7, 5], &[11], 0),
        case(Last, Zero, F16, F32, &[3, 6, 5], &[9], 1),
        case(Last, Prior, I32, I32, &[5, 3], &[17], 0),
        case(Sum, Zero, Bf16, I32, &[2, 9, 3], &[2, 5], 1),
        case(Sum, Prior, F32, U32, &[1], &[1], 0),
        case(Sum, Zero, I32, U32, &[4, 4], &[6], 1),
        // More indices than one GPU tile of 256: several scans.
        case(Last, Prior, F32, I32, &[300, 2], &[400], 0),
        case(Sum, Prior, F32, F32, &[37, 3], &[263], 0),
        // More indices than one CPU tile of 2048.
        case(Sum, Zero, F32, I32, &[5, 2], &[2100], 0),
    ]
}

fn rope() -> Vec<OpSpec> {
    let case = |dtype, index_dtype, [batch, seq, heads, head_dim, max_positions]: [usize; 5]| {
        OpSpec::Rope(RopeSpec {
            dtype,
            index_dtype,
            batch,
            seq,
            heads,
            head_dim,
            max_positions,
        })
    };
    vec![
        case(F32, U32, [1, 2, 2, 8, 16]),
        case(F64, I32, [2, 3, 1, 6, 5]),
        case(F16, F32, [1, 1, 3, 2, 1]),
        case(Bf16, I32, [3, 5, 2, 8, 7]),
        // Halves of whole vectors.
        case(F32, F32, [2, 7, 3, 16, 11]),
    ]
}

fn dropout() -> Vec<OpSpec> {
    let case = |dtype, shape: &[usize], p, seed, step, mask, rng| {
        OpSpec::Dropout(DropoutSpec {
            dtype,
            shape: shape.to_vec(),
            p,
            seed,
            step,
            mask,
            rng,
        })
    };
    use RngScheme::{Counter, Rumus};
    vec![
        case(F32, &[64], 0.1, 42, 1, true, Counter),
        case(F64, &[7, 13], 0.5, 7, 3, false, Rumus),
        case(F16, &[1], 0.3, 1, 0, true, Counter),
        case(Bf16, &[257], 0.9, 0, 12, true, Rumus),
        case(F32, &[3, 5], 0.25, u64::MAX - 5, 1 << 40, false, Counter),
        // p = 0 keeps everything (no random bits); p within 2^-24 of 1 drops everything.
        case(F32, &[1000], 0.0, 9, 9, true, Counter),
        case(F32, &[33], 1.0 - 1e-9, 9, 9, true, Rumus),
    ]
}

fn adam() -> Vec<OpSpec> {
    let case = |dtype, len, lr, [beta1, beta2, eps]: [f64; 3], weight_decay, decoupled, step| {
        OpSpec::Adam(AdamSpec {
            dtype,
            len,
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            step,
        })
    };
    let betas = [0.9, 0.999, 1e-8];
    vec![
        case(F32, 16, 1e-3, betas, 0.0, false, 1),
        case(F64, 7, 1e-2, betas, 0.01, false, 3),
        case(F16, 1, 1e-3, betas, 0.1, true, 1000),
        case(Bf16, 257, 3e-3, betas, 0.05, true, 10),
        case(F32, 1000, 1e-3, betas, 0.01, false, 5),
        case(F32, 13, 0.1, [0.0, 0.5, 1e-6], 0.2, true, 2),
    ]
}

fn image() -> Vec<OpSpec> {
    use ImageFilter::*;
    let case = |filter, dtype, [height, width, channels]: [usize; 3]| {
        OpSpec::ImageFilter(ImageFilterSpec {
            filter,
            dtype,
            height,
            width,
            channels,
        })
    };
    let blur = |sigma, radius| GaussianBlur { sigma, radius };
    vec![
        case(Sobel { threshold: 0.5 }, F32, [6, 5, 3]),
        case(Sobel { threshold: 0.3 }, F16, [1, 1, 1]),
        case(Sobel { threshold: 1.2 }, F64, [13, 11, 4]),
        case(Sobel { threshold: 0.8 }, Bf16, [37, 41, 1]),
        case(Sobel { threshold: -1.0 }, F32, [3, 2, 3]),
        // Fused (staged, separable in shared memory) blurs; radius 0 is the identity.
        case(blur(1.0, 1), F32, [7, 9, 3]),
        case(blur(2.0, 3), F16, [17, 33, 4]),
        case(blur(0.5, 0), F32, [5, 5, 1]),
        case(blur(1.5, 2), F64, [1, 1, 4]),
        case(blur(3.0, 5), Bf16, [40, 70, 1]),
        // A wide blur: two direct passes through a temporary.
        case(blur(8.0, 20), F32, [9, 23, 3]),
        case(Grayscale, F32, [5, 7, 3]),
        case(Grayscale, F16, [1, 1, 4]),
        case(Grayscale, F64, [9, 4, 4]),
        case(Grayscale, Bf16, [3, 3, 3]),
        case(Threshold { value: 0.3 }, F32, [6, 7, 3]),
        case(Threshold { value: 0.5 }, F16, [1, 1, 1]),
        case(Threshold { value: 0.7 }, Bf16, [5, 5, 4]),
        case(Threshold { value: 0.1 }, F64, [3, 11, 4]),
        case(Brightness { factor: 1.5 }, F32, [9, 9, 3]),
        case(Brightness { factor: 0.5 }, F16, [1, 3, 4]),
        case(Brightness { factor: 2.0 }, F64, [7, 1, 1]),
        case(Contrast { factor: 1.8 }, F32, [5, 6, 4]),
        case(Contrast { factor: 0.5 }, Bf16, [1, 1, 3]),
        case(Contrast { factor: 3.0 }, F16, [11, 13, 1]),
        case(Invert, F32, [4, 4, 4]),
        case(Invert, F64, [1, 1, 1]),
        case(Invert, F16, [7, 5, 3]),
        case(Sharpen, F32, [7, 9, 3]),
        case(Sharpen, F16, [1, 1, 1]),
        case(Sharpen, F64, [11, 40, 4]),
        case(Sharpen, Bf16, [37, 3, 1]),
        case(Sobel { threshold: 0.6 }, F32, [67, 101, 4]),
        case(blur(1.2, 2), F32, [45, 130, 3]),
    ]
}
