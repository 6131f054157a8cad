//! A GEMM written with matrix fragments, with its inputs and its defining result,
//! for the tests of every executor (interpreter, expansion, devices).

use crate::builder::*;
use crate::fragment::{
    element_index_expr, round_to_tf32, swizzle_row, FragmentLayout::*, FragmentRole, MmaShape,
    RowReduction, MMA_KINDS,
};
use crate::interp::HostBuffer;
use crate::kernel::{Access, Kernel};
use crate::scalar::Scalar;
use crate::types::ScalarType;

/// Deterministic values in [-2, 2) with full mantissas, rounded to `ty`.
pub fn values(ty: ScalarType, n: usize, seed: u64) -> Vec<Scalar> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (s >> 11) as f64 / (1u64 << 53) as f64;
            Scalar::from_f64(ty, unit * 4.0 - 2.0)
        })
        .collect()
}

/// `C (M × N, row-major) = A (M × K, row-major) · B (K × N, column-major) + C` with one
/// warp (warpgroup for the `m64` shapes) per `m × n` tile of C, B staged through
/// shared memory when `via_shared`. A warpgroup's shapes stage A and B always, in the
/// tiled layouts their loads need.
pub struct FragmentGemm {
    pub shape: MmaShape,
    pub input: ScalarType,
    pub acc: ScalarType,
    /// Tiles of C along M and N, one warp each.
    pub tiles: (u32, u32),
    /// `k`-deep steps of the reduction.
    pub k_steps: u32,
    /// Whether B goes through shared memory (a barrier) or is read from its buffer.
    pub via_shared: bool,
}

impl FragmentGemm {
    /// `(M, N, K)`.
    pub fn dims(&self) -> (u32, u32, u32) {
        let MmaShape { m, n, k } = self.shape;
        (m * self.tiles.0, n * self.tiles.1, k * self.k_steps)
    }

    /// The kernel (one workgroup).
    pub fn kernel(&self) -> Kernel {
        let (mm, nn, kk) = self.dims();
        let MmaShape { m, n, k } = self.shape;
        let group = self.shape.group();
        let warps = self.tiles.0 * self.tiles.1;
        let mut kb = KernelBuilder::new("fragment_gemm", [group * warps, 1, 1]);
        let a = kb.buffer("a", self.input, (mm * kk) as u64, Access::Read);
        let b = kb.buffer("b", self.input, (kk * nn) as u64, Access::Read);
        let c = kb.buffer("c", self.acc, (mm * nn) as u64, Access::ReadWrite);
        if self.shape.is_warpgroup() {
            let (sa_len, sb_len) = match self.swizzled_band() {
                Some(band) => (mm / 8 * band, nn / 8 * band),
                None => (mm * kk, kk * nn),
            };
            let sa = kb.shared("sa", self.input, sa_len);
            let sb = kb.shared("sb", self.input, sb_len);
            return kb
                .build(|f| self.warpgroup_body(f, [a, b, c], [sa, sb]))
                .unwrap();
        }
        let sb = self
            .via_shared
            .then(|| kb.shared("sb", self.input, kk * nn));
        let (shape, input, acc, n_tiles, k_steps) =
            (self.shape, self.input, self.acc, self.tiles.1, self.k_steps);
        kb.build(|f| {
            let fa = f.fragment("fa", FragmentRole::A, shape, input);
            let fb = f.fragment("fb", FragmentRole::B, shape, input);
            let fc = f.fragment("fc", FragmentRole::Accumulator, shape, acc);
            let source = match sb {
                Some(sb) => {
                    let threads = 32 * warps;
                    f.for_("e", local_id(0), kk * nn, threads, |f, e| {
                        f.store(sb, e.clone(), b.at(e));
                    });
                    f.barrier();
                    sb
                }
                None => b,
            };
            let warp = f.let_("warp", local_id(0) / 32u32);
            let ti = f.let_("ti", warp.clone() / n_tiles);
            let tj = f.let_("tj", warp % n_tiles);
            let c_at = f.let_("c_at", ti.clone() * (m * nn) + tj.clone() * n);
            f.load_fragment(fc, c, c_at.clone(), nn, RowMajor);
            f.for_("s", 0u32, k_steps, 1, |f, s| {
                f.load_fragment(fa, a, ti.clone() * (m * kk) + s.clone() * k, kk, RowMajor);
                f.load_fragment(fb, source, tj.clone() * (n * kk) + s * k, kk, ColMajor);
                f.mma(fc, fa, fb, fc);
            });
            f.store_fragment(fc, c, c_at, nn, RowMajor);
        })
        .unwrap()
    }

    /// The distance between bands of 8 rows where a warpgroup's operands stage in
    /// the swizzled layouts (TF32: the instruction reads them along the reduction
    /// only, swizzled), whole 128-byte rows; `None` where they stage in the tiled
    /// layouts (16-bit elements).
    fn swizzled_band(&self) -> Option<u32> {
        let (_, _, kk) = self.dims();
        let row = swizzle_row(self.input);
        (self.input == ScalarType::F32).then(|| 8 * row * kk.div_ceil(row))
    }

    /// The body for a warpgroup's shape: A and B staged in shared memory as
    /// `RowMajorTiles` (A) and `ColMajorTiles` (B, by its columns), bands of 8 rows
    /// (columns) `8·K` apart; TF32 ones as `RowMajorSwizzled` and `ColMajorSwizzled`.
    fn warpgroup_body(&self, f: &mut Body, [a, b, c]: [Mem; 3], [sa, sb]: [Mem; 2]) {
        let (mm, nn, kk) = self.dims();
        let MmaShape { m, n, k } = self.shape;
        let threads = self.shape.group() * self.tiles.0 * self.tiles.1;
        let input = self.input;
        let band = self.swizzled_band();
        let tiled = |outer: E, p: E| match band {
            Some(band) => element_index_expr(
                RowMajorSwizzled,
                input,
                E::from(0u32),
                E::from(band),
                outer,
                p,
            ),
            None => {
                (outer.clone() / 8u32) * (8 * kk)
                    + (p.clone() / 8u32) * 64u32
                    + (outer % 8u32) * 8u32
                    + p % 8u32
            }
        };
        // A fragment's first element: unswizzled (the load swizzles).
        let first = |outer: E, p: E| match band {
            Some(band) => {
                let row = swizzle_row(input);
                (outer / 8u32) * band + (p.clone() / row) * (8 * row) + p % row
            }
            None => tiled(outer, p),
        };
        let (layout_a, layout_b, stride) = match band {
            Some(band) => (RowMajorSwizzled, ColMajorSwizzled, band),
            None => (RowMajorTiles, ColMajorTiles, 8 * kk),
        };
        for (src, dst, outer) in [(a, sa, mm), (b, sb, nn)] {
            f.for_("e", local_id(0), outer * kk, threads, |f, e| {
                let at = tiled(e.clone() / kk, e.clone() % kk);
                f.store(dst, at, src.at(e));
            });
        }
        f.barrier();
        let fa = f.fragment("fa", FragmentRole::A, self.shape, self.input);
        let fb = f.fragment("fb", FragmentRole::B, self.shape, self.input);
        let fc = f.fragment("fc", FragmentRole::Accumulator, self.shape, self.acc);
        let group = f.let_("group", local_id(0) / self.shape.group());
        let ti = f.let_("ti", group.clone() / self.tiles.1);
        let tj = f.let_("tj", group % self.tiles.1);
        let c_at = f.let_("c_at", ti.clone() * (m * nn) + tj.clone() * n);
        f.load_fragment(fc, c, c_at.clone(), nn, RowMajor);
        f.for_("s", 0u32, self.k_steps, 1, |f, s| {
            let a_at = first(ti.clone() * m, s.clone() * k);
            f.load_fragment(fa, sa, a_at, stride, layout_a);
            let b_at = first(tj.clone() * n, s * k);
            f.load_fragment(fb, sb, b_at, stride, layout_b);
            f.mma(fc, fa, fb, fc);
        });
        f.store_fragment(fc, c, c_at, nn, RowMajor);
    }

    /// `a`, `b` and `c`'s initial values (f32 operands rounded to TF32, as the
    /// multiply needs them).
    pub fn inputs(&self) -> Vec<HostBuffer> {
        let (mm, nn, kk) = self.dims();
        let operand = |n: u32, seed| {
            let v = values(self.input, n as usize, seed);
            let tf32 = |s: Scalar| match s {
                Scalar::F32(bits) => Scalar::f32(round_to_tf32(f32::from_bits(bits))),
                other => other,
            };
            HostBuffer::new(self.input, v.into_iter().map(tf32).collect())
        };
        vec![
            operand(mm * kk, 1),
            operand(kk * nn, 2),
            HostBuffer::new(self.acc, values(self.acc, (mm * nn) as usize, 3)),
        ]
    }

    /// The definition: per element, C then one `fma` per `p` in the accumulator type.
    /// How far a sum in another order (tensor cores) may lie from the definition at
    /// element `e` of C: `(K + 1)·2u·(|C| + Σ|A·B|)` with `u` the accumulator's unit
    /// roundoff (docs/semantics.md, "Matrix fragments").
    pub fn accumulation_bound(&self, inputs: &[HostBuffer], e: usize) -> f64 {
        let (_, nn, kk) = self.dims();
        let (nn, kk) = (nn as usize, kk as usize);
        let (i, j) = (e / nn, e % nn);
        let (a, b, c) = (inputs[0].to_f64(), inputs[1].to_f64(), inputs[2].to_f64());
        let magnitude: f64 = c[e].abs()
            + (0..kk)
                .map(|p| (a[i * kk + p] * b[j * kk + p]).abs())
                .sum::<f64>();
        let unit = match self.acc {
            ScalarType::F64 => f64::EPSILON / 2.0,
            _ => f32::EPSILON as f64 / 2.0,
        };
        (kk as f64 + 1.0) * 2.0 * unit * magnitude
    }

    pub fn reference(&self, inputs: &[HostBuffer]) -> Vec<f64> {
        let (mm, nn, kk) = self.dims();
        let (a, b, c) = (inputs[0].to_f64(), inputs[1].to_f64(), inputs[2].to_f64());
        let mut out = c.clone();
        for i in 0..mm as usize {
            for j in 0..nn as usize {
                let (kk, nn) = (kk as usize, nn as usize);
                let terms = (0..kk).map(|p| (a[i * kk + p], b[j * kk + p]));
                out[i * nn + j] = match self.acc {
                    ScalarType::F32 => terms
                        .fold(c[i * nn + j] as f32, |s, (x, y)| {
                            (x as f32).mul_add(y as f32, s)
                        })
                        .into(),
                    _ => terms.fold(c[i * nn + j], |s, (x, y)| x.mul_add(y, s)),
                };
            }
        }
        out
    }
}

/// One GEMM of every kind of [`MMA_KINDS`], with B through shared memory or not as
/// `via_shared` says (`None`: alternating).
pub fn every_kind(via_shared: Option<bool>) -> Vec<FragmentGemm> {
    MMA_KINDS
        .iter()
        .enumerate()
        .map(|(i, &(shape, input, acc))| FragmentGemm {
            shape,
            input,
            acc,
            // (Four warpgroups' m64n256 accumulators would not fit the registers.)
            tiles: match [(2, 1), (1, 2), (2, 2)][i % 3] {
                (2, 2) if shape.is_warpgroup() && shape.n >= 256 => (1, 2),
                tiles => tiles,
            },
            k_steps: 3,
            via_shared: via_shared.unwrap_or(i % 2 == 0),
        })
        .collect()
}

/// One FlashAttention step per warp on two warps: 16 × 16 scores (two accumulators),
/// causal-masked and doubled, their row max, `P = 2^(S − max)`, the row sums, `P`
/// rounded to `input` (f16 or bf16) as an `A` operand times a 16 × 8 `V`, divided by
/// the sums.
pub fn attention_step(input: ScalarType) -> Kernel {
    let shape = MmaShape::M16N8K16;
    let acc = |f: &mut Body, name: &str| {
        f.fragment(name, FragmentRole::Accumulator, shape, ScalarType::F32)
    };
    let mut kb = KernelBuilder::new("attention_step", [64, 1, 1]);
    let s_in = kb.buffer("s", ScalarType::F32, 2 * 256, Access::Read);
    let v_in = kb.buffer("v", input, 16 * 8, Access::Read);
    let out = kb.buffer("out", ScalarType::F32, 2 * 128, Access::Write);
    kb.build(|f| {
        let warp = f.let_("warp", local_id(0) / 32u32);
        let s = [acc(f, "s0"), acc(f, "s1")];
        for (i, &si) in s.iter().enumerate() {
            f.load_fragment(
                si,
                s_in,
                warp.clone() * 256u32 + i as u32 * 8,
                16u32,
                RowMajor,
            );
            let first = i as u32 * 8;
            f.map_fragment(si, &[si], |_, row, col, x| {
                (col + first)
                    .le(row)
                    .select(x[0].clone() * 2.0f32, f32::NEG_INFINITY)
            });
        }
        let max = acc(f, "max");
        f.reduce_rows(max, &s, RowReduction::Max);
        for &si in &s {
            f.map_fragment(si, &[si, max], |_, _, _, x| {
                (x[0].clone() - x[1].clone()).exp2()
            });
        }
        let sum = acc(f, "sum");
        f.reduce_rows(sum, &s, RowReduction::Sum);
        let p = f.fragment("p", FragmentRole::A, shape, input);
        f.convert_fragments(p, &s);
        let v = f.fragment("v", FragmentRole::B, shape, input);
        f.load_fragment(v, v_in, 0u32, 8u32, RowMajor);
        let o = acc(f, "o");
        f.fill_fragment(o, 0.0f32);
        f.mma(o, p, v, o);
        f.map_fragment(o, &[o, sum], |_, _, _, x| x[0].clone() / x[1].clone());
        f.store_fragment(o, out, warp * 128u32, 8u32, RowMajor);
    })
    .unwrap()
}

/// Keys a [`warpgroup_attention_step`] weighs: columns 8..120 of its 128 scores, in
/// seven slices of 16, the fourth (56..72) across its two accumulators.
pub const WARPGROUP_STEP_KEYS: std::ops::Range<u32> = 8..120;

/// [`attention_step`] on a warpgroup with `P` in registers: 64 × 128 scores (two
/// m64n64 accumulators), causal-masked (`key ≤ row + 56`, and only
/// [`WARPGROUP_STEP_KEYS`]) and doubled, the row max into an m64n16 accumulator,
/// `P = 2^(S − max)`, the row sums, then `P` rounded to `input` slice by slice into
/// `A` fragments held in registers (`convert` from a column) times a 128 × 64 `V`
/// staged in shared memory, divided by the sums: `out` 64 × 64, row-major.
pub fn warpgroup_attention_step(input: ScalarType) -> Kernel {
    let (wide, narrow) = (MmaShape::M64N64K16, MmaShape::M64N16K16);
    let mut kb = KernelBuilder::new("warpgroup_attention_step", [128, 1, 1]);
    let s_in = kb.buffer("s", ScalarType::F32, 64 * 128, Access::Read);
    let v_in = kb.buffer("v", input, 128 * 64, Access::Read);
    let out = kb.buffer("out", ScalarType::F32, 64 * 64, Access::Write);
    let vs = kb.shared("v_tile", input, 128 * 64);
    let layout = RowMajorTiles;
    kb.build(|f| {
        f.for_("e", local_id(0), 128u32 * 64, 128u32, |f, e| {
            let (r, c) = (e.clone() / 64u32, e.clone() % 64u32);
            let at = element_index_expr(layout, input, E::from(0u32), E::from(512u32), r, c);
            f.store(vs, at, v_in.at(e));
        });
        f.barrier();
        let acc = |f: &mut Body, name: &str, shape| {
            f.fragment(name, FragmentRole::Accumulator, shape, ScalarType::F32)
        };
        let s = [acc(f, "s0", wide), acc(f, "s1", wide)];
        for (i, &si) in (0u32..).zip(&s) {
            f.load_fragment(si, s_in, i * 64, 128u32, RowMajor);
            f.map_fragment(si, &[si], |_, row, col, x| {
                let key = col + i * 64;
                let seen = key.clone().le(row + 56u32)
                    & key.clone().ge(WARPGROUP_STEP_KEYS.start)
                    & key.lt(WARPGROUP_STEP_KEYS.end);
                seen.select(x[0].clone() * 2.0f32, f32::NEG_INFINITY)
            });
        }
        let max = acc(f, "max", narrow);
        f.reduce_rows(max, &s, RowReduction::Max);
        for &si in &s {
            f.map_fragment(si, &[si, max], |_, _, _, x| {
                (x[0].clone() - x[1].clone()).exp2()
            });
        }
        let sum = acc(f, "sum", narrow);
        f.reduce_rows(sum, &s, RowReduction::Sum);
        let o = acc(f, "o", wide);
        f.fill_fragment(o, 0.0f32);
        let v = f.fragment("v", FragmentRole::B, wide, input);
        let slices: Vec<u32> = WARPGROUP_STEP_KEYS.step_by(16).collect();
        let p: Vec<_> = slices
            .iter()
            .map(|_| f.fragment_in_registers("p", wide, input))
            .collect();
        for (&pj, &first) in p.iter().zip(&slices) {
            let used: Vec<_> = (first / 64..=(first + 15) / 64)
                .map(|i| s[i as usize])
                .collect();
            f.convert_fragments_from(pj, &used, first - first / 64 * 64);
        }
        for (&pj, &first) in p.iter().zip(&slices) {
            // Rows `first..` of V: bands of 8 rows 512 apart.
            f.load_fragment(v, vs, first / 8 * 512, 512u32, layout);
            f.mma(o, pj, v, o);
        }
        f.map_fragment(o, &[o, sum], |_, _, _, x| x[0].clone() / x[1].clone());
        f.store_fragment(o, out, 0u32, 64u32, RowMajor);
    })
    .unwrap()
}

/// Inputs of [`warpgroup_attention_step`]: scores in [-4, 4), values in [-2, 2), the
/// output.
pub fn warpgroup_attention_step_inputs(input: ScalarType, seed: u64) -> Vec<HostBuffer> {
    let s: Vec<Scalar> = values(ScalarType::F32, 64 * 128, seed)
        .into_iter()
        .map(|v| Scalar::from_f64(ScalarType::F32, 2.0 * v.to_f64()))
        .collect();
    vec![
        HostBuffer::new(ScalarType::F32, s),
        HostBuffer::new(input, values(input, 128 * 64, seed + 1)),
        HostBuffer::zeros(ScalarType::F32, 64 * 64),
    ]
}

/// Inputs of [`attention_step`]: scores in [-4, 4), values in [-2, 2), the output.
pub fn attention_step_inputs(input: ScalarType, seed: u64) -> Vec<HostBuffer> {
    let s: Vec<Scalar> = values(ScalarType::F32, 512, seed)
        .into_iter()
        .map(|v| Scalar::from_f64(ScalarType::F32, 2.0 * v.to_f64()))
        .collect();
    let v = values(input, 128, seed + 1);
    vec![
        HostBuffer::new(ScalarType::F32, s),
        HostBuffer::new(input, v),
        HostBuffer::zeros(ScalarType::F32, 256),
    ]
}

/// A warpgroup's scores (m64n64) less their row max, the max held in a narrower
/// accumulator (m64n16, the same rows): `reduce_rows` into it and a `map` reading it.
pub fn row_statistics_kernel() -> Kernel {
    let (wide, narrow) = (MmaShape::M64N64K16, MmaShape::M64N16K16);
    let mut kb = KernelBuilder::new("row_statistics", [128, 1, 1]);
    let x = kb.buffer("x", ScalarType::F32, 64 * 64, Access::ReadWrite);
    kb.build(|f| {
        let s = f.fragment("s", FragmentRole::Accumulator, wide, ScalarType::F32);
        let max = f.fragment("max", FragmentRole::Accumulator, narrow, ScalarType::F32);
        f.load_fragment(s, x, 0u32, 64u32, RowMajor);
        f.reduce_rows(max, &[s], RowReduction::Max);
        f.map_fragment(s, &[s, max], |_, _, col, v| {
            v[0].clone() - v[1].clone() + col.cast(ScalarType::F32)
        });
        f.store_fragment(s, x, 0u32, 64u32, RowMajor);
    })
    .unwrap()
}
