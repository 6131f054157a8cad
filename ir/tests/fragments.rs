//! Matrix fragments: the interpreter's definition (the `fma` chain per element, bit for
//! bit), the expansion's agreement with it, the validator's and interpreter's errors,
//! printing and JSON.

use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout::*, FragmentRole, MmaShape, MMA_KINDS};
use kernelc_ir::interp::{run, Arg, HostBuffer, InterpError};
use kernelc_ir::passes::expand_fragments;
use kernelc_ir::{Access, Kernel, Scalar, ScalarType, ValidationErrorKind};

/// Deterministic values in [-2, 2) with full mantissas, rounded to `ty`.
fn values(ty: ScalarType, n: usize, seed: u64) -> Vec<Scalar> {
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
/// warp per `m × n` tile of C, B staged through shared memory when `via_shared`.
struct Gemm {
    shape: MmaShape,
    input: ScalarType,
    acc: ScalarType,
    tiles: (u32, u32),
    k_steps: u32,
    via_shared: bool,
}

impl Gemm {
    fn dims(&self) -> (u32, u32, u32) {
        let MmaShape { m, n, k } = self.shape;
        (m * self.tiles.0, n * self.tiles.1, k * self.k_steps)
    }

    fn kernel(&self) -> Kernel {
        let (mm, nn, kk) = self.dims();
        let MmaShape { m, n, k } = self.shape;
        let warps = self.tiles.0 * self.tiles.1;
        let mut kb = KernelBuilder::new("fragment_gemm", [32 * warps, 1, 1]);
        let a = kb.buffer("a", self.input, (mm * kk) as u64, Access::Read);
        let b = kb.buffer("b", self.input, (kk * nn) as u64, Access::Read);
        let c = kb.buffer("c", self.acc, (mm * nn) as u64, Access::ReadWrite);
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

    fn inputs(&self) -> Vec<HostBuffer> {
        let (mm, nn, kk) = self.dims();
        vec![
            HostBuffer::new(self.input, values(self.input, (mm * kk) as usize, 1)),
            HostBuffer::new(self.input, values(self.input, (kk * nn) as usize, 2)),
            HostBuffer::new(self.acc, values(self.acc, (mm * nn) as usize, 3)),
        ]
    }

    /// The definition: per element, C then one `fma` per `p` in the accumulator type.
    fn reference(&self, inputs: &[HostBuffer]) -> Vec<f64> {
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

fn run_kernel(kernel: &Kernel, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, InterpError> {
    let mut args: Vec<Arg> = inputs.iter().cloned().map(Arg::Buffer).collect();
    run(kernel, [1, 1, 1], &mut args)?;
    Ok(args
        .into_iter()
        .filter_map(|a| match a {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        })
        .collect())
}

fn every_kind() -> Vec<Gemm> {
    MMA_KINDS
        .iter()
        .enumerate()
        .map(|(i, &(shape, input, acc))| Gemm {
            shape,
            input,
            acc,
            tiles: [(2, 1), (1, 2), (2, 2)][i % 3],
            k_steps: 3,
            via_shared: i % 2 == 0,
        })
        .collect()
}

#[test]
fn mma_is_the_fma_chain_per_element_in_every_kind() {
    for g in every_kind() {
        let inputs = g.inputs();
        let out = run_kernel(&g.kernel(), &inputs).unwrap();
        let got = out[2].to_f64();
        let want = g.reference(&inputs);
        for (e, (x, y)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                x.to_bits(),
                y.to_bits(),
                "{:?} {} -> {}: element {e}: {x} vs {y}",
                g.shape,
                g.input,
                g.acc
            );
        }
    }
}

#[test]
fn the_expansion_computes_what_the_interpreter_does_bit_for_bit() {
    for g in every_kind() {
        let kernel = g.kernel();
        let expanded = expand_fragments(&kernel);
        assert!(expanded.fragments.is_empty() && !expanded.uses_fragments());
        kernelc_ir::validate(&expanded).unwrap();
        let inputs = g.inputs();
        let a = run_kernel(&kernel, &inputs).unwrap();
        let b = run_kernel(&expanded, &inputs).unwrap();
        assert_eq!(a, b, "{:?} {} -> {}", g.shape, g.input, g.acc);
    }
}

#[test]
fn stores_round_to_the_memory_type() {
    // An f32 accumulator stored into bf16 memory: each element rounds once.
    let shape = MmaShape::M16N8K16;
    let mut kb = KernelBuilder::new("round", [32, 1, 1]);
    let c = kb.buffer("c", ScalarType::F32, 128, Access::Read);
    let out = kb.buffer("out", ScalarType::Bf16, 16 * 10, Access::Write);
    let kernel = kb
        .build(|f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, shape, ScalarType::F32);
            f.load_fragment(fc, c, 0u32, 8u32, RowMajor);
            // Column-major with a stride of 16 into a 16 × 10 window.
            f.store_fragment(fc, out, 16u32, 16u32, ColMajor);
        })
        .unwrap();
    let inputs = vec![
        HostBuffer::new(ScalarType::F32, values(ScalarType::F32, 128, 9)),
        HostBuffer::zeros(ScalarType::Bf16, 160),
    ];
    for k in [kernel.clone(), expand_fragments(&kernel)] {
        let got = run_kernel(&k, &inputs).unwrap();
        let c = inputs[0].to_f64();
        let out = got[1].to_f64();
        for r in 0..16 {
            for col in 0..8 {
                let want = half::bf16::from_f32(c[r * 8 + col] as f32).to_f64();
                assert_eq!(out[16 + col * 16 + r], want);
            }
        }
        assert!(out[..16].iter().all(|&v| v == 0.0), "before the window");
    }
}

fn validation_error(build: impl FnOnce(&mut Body), wg: u32) -> ValidationErrorKind {
    let mut kb = KernelBuilder::new("bad", [wg, 1, 1]);
    let a = kb.buffer("a", ScalarType::F16, 4096, Access::Read);
    let _ = a;
    kb.build(build).unwrap_err().kind
}

#[test]
fn the_validator_names_what_is_wrong_with_fragments() {
    use ValidationErrorKind as K;
    let s = MmaShape::M16N8K16;
    let a_mem = || Mem(kernelc_ir::Memory::Buffer(kernelc_ir::ParamId(0)));
    // Not whole warps.
    let e = validation_error(
        |f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.fill_fragment(fc, 0f32);
        },
        48,
    );
    assert!(matches!(e, K::WorkgroupNotWarps(_)), "{e}");
    // A kind no multiply has: f16 accumulators.
    let e = validation_error(
        |f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F16);
            f.fill_fragment(fc, half::f16::ZERO);
        },
        32,
    );
    assert!(matches!(e, K::BadFragment { .. }), "{e}");
    // Read before written.
    let e = validation_error(
        |f| {
            let fa = f.fragment("fa", FragmentRole::A, s, ScalarType::F16);
            let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::F16);
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.fill_fragment(fc, 0f32);
            f.load_fragment(fb, a_mem(), 0u32, 8u32, RowMajor);
            f.mma(fc, fa, fb, fc);
        },
        32,
    );
    assert!(
        matches!(e, K::FragmentUseBeforeAssign(ref n) if n == "fa"),
        "{e}"
    );
    // Operands swapped: b where a goes.
    let e = validation_error(
        |f| {
            let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::F16);
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.fill_fragment(fc, 0f32);
            f.load_fragment(fb, a_mem(), 0u32, 8u32, RowMajor);
            f.mma(fc, fb, fb, fc);
        },
        32,
    );
    assert!(matches!(e, K::BadFragment { .. }), "{e}");
    // Shapes that do not match.
    let e = validation_error(
        |f| {
            let fa = f.fragment("fa", FragmentRole::A, MmaShape::M16N8K8, ScalarType::F16);
            let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::F16);
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.fill_fragment(fc, 0f32);
            f.load_fragment(fa, a_mem(), 0u32, 8u32, RowMajor);
            f.load_fragment(fb, a_mem(), 0u32, 8u32, RowMajor);
            f.mma(fc, fa, fb, fc);
        },
        32,
    );
    assert!(matches!(e, K::BadFragment { .. }), "{e}");
    // A load from memory of another type: an f32 accumulator from f16 memory.
    let e = validation_error(
        |f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.load_fragment(fc, a_mem(), 0u32, 8u32, RowMajor);
        },
        32,
    );
    assert!(matches!(e, K::BadFragment { .. }), "{e}");
    // Under a condition that differs between invocations.
    let e = validation_error(
        |f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.if_(local_id(0).lt(16u32), |f| f.fill_fragment(fc, 0f32));
        },
        32,
    );
    assert!(matches!(e, K::NonUniformFragment(_)), "{e}");
}

#[test]
fn the_interpreter_reports_operands_that_differ_within_a_warp() {
    let s = MmaShape::M16N8K16;
    let mut kb = KernelBuilder::new("differs", [32, 1, 1]);
    let a = kb.buffer("a", ScalarType::F16, 4096, Access::Read);
    let kernel = kb
        .build(|f| {
            let fa = f.fragment("fa", FragmentRole::A, s, ScalarType::F16);
            // Per invocation, not per warp.
            f.load_fragment(fa, a, local_id(0), 16u32, RowMajor);
        })
        .unwrap();
    let err = run_kernel(&kernel, &[HostBuffer::zeros(ScalarType::F16, 4096)]).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::FragmentOperandDiffers {
                operand: "index",
                ..
            }
        ),
        "{err}"
    );
}

/// A warp's fragment stored to shared memory, then read without a barrier: by plain
/// loads, or as a fragment by the same warp (another lane may hold the element).
#[test]
fn fragment_accesses_race_without_a_barrier() {
    let s = MmaShape::M16N8K16;
    for plain_read in [true, false] {
        let mut kb = KernelBuilder::new("race", [32, 1, 1]);
        let out = kb.buffer("out", ScalarType::F32, 128, Access::Write);
        let sc = kb.shared("sc", ScalarType::F32, 128);
        let kernel = kb
            .build(|f| {
                let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
                let fd = f.fragment("fd", FragmentRole::Accumulator, s, ScalarType::F32);
                f.fill_fragment(fc, 1f32);
                f.store_fragment(fc, sc, 0u32, 8u32, RowMajor);
                if plain_read {
                    f.store(out, local_id(0), sc.at(local_id(0)));
                } else {
                    f.load_fragment(fd, sc, 0u32, 8u32, ColMajor);
                    f.store_fragment(fd, out, 0u32, 8u32, RowMajor);
                }
            })
            .unwrap();
        let err = run_kernel(&kernel, &[HostBuffer::zeros(ScalarType::F32, 128)]).unwrap_err();
        assert!(matches!(err, InterpError::Race { .. }), "{err}");
    }
}

#[test]
fn a_fragment_past_its_memory_is_out_of_bounds() {
    let s = MmaShape::M16N8K16;
    let mut kb = KernelBuilder::new("oob", [32, 1, 1]);
    let a = kb.buffer("a", ScalarType::Bf16, 255, Access::Read);
    let kernel = kb
        .build(|f| {
            let fa = f.fragment("fa", FragmentRole::A, s, ScalarType::Bf16);
            f.load_fragment(fa, a, 0u32, 16u32, RowMajor);
        })
        .unwrap();
    let err = run_kernel(&kernel, &[HostBuffer::zeros(ScalarType::Bf16, 255)]).unwrap_err();
    assert!(
        matches!(err, InterpError::OutOfBounds { index: 255, .. }),
        "{err}"
    );
}

#[test]
fn fragments_print_and_round_trip_through_json() {
    let g = &every_kind()[1];
    let kernel = g.kernel();
    let text = kernelc_ir::print::print(&kernel);
    for needle in [
        "fragment fa: a<bf16, m16n8k16>",
        "fragment fc: accumulator<f32, m16n8k16>",
        "mma fc = fa * fb + fc",
        "load fb = b[",
        "store c[c_at; stride 16u, row_major] = fc",
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
    let json = kernelc_ir::to_json(&kernel);
    assert_eq!(kernelc_ir::from_json(&json).unwrap(), kernel);
    // Kernels without fragments keep their JSON (and so their stable hash).
    assert!(!kernelc_ir::to_json(&expand_fragments(&kernel)).contains("fragments"));
}
