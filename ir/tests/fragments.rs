//! Matrix fragments: the interpreter's definition (the `fma` chain per element, bit for
//! bit), the expansion's agreement with it, the validator's and interpreter's errors,
//! printing and JSON.

use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout::*, FragmentRole, MmaShape};
use kernelc_ir::interp::{HostBuffer, InterpError};
use kernelc_ir::passes::expand_fragments;
use kernelc_ir::testing::fragments::{every_kind, values};
use kernelc_ir::{Access, Kernel, Scalar, ScalarType, ValidationErrorKind};

mod common;
use common::run_kernel;

#[test]
fn mma_is_the_fma_chain_per_element_in_every_kind() {
    for g in every_kind(None) {
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
    for g in every_kind(None) {
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
    assert!(matches!(e, K::WorkgroupNotWarps { .. }), "{e}");
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
    // A fragment the kernel does not declare.
    let mut k = KernelBuilder::new("unknown", [32, 1, 1])
        .build(|_| {})
        .unwrap();
    k.body
        .push(kernelc_ir::Stmt::Fragment(kernelc_ir::FragmentOp::Fill {
            frag: kernelc_ir::FragmentId(3),
            value: kernelc_ir::Expr::Lit(Scalar::f32(0.0)),
        }));
    let e = kernelc_ir::validate(&k).unwrap_err().kind;
    assert!(matches!(e, K::UnknownFragment(3)), "{e}");
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

/// f32 operands are TF32 ones: a multiply of an element with low significand bits set
/// is reported, naming the operand; the same element rounded to TF32 multiplies.
#[test]
fn a_tf32_multiply_reports_an_operand_that_is_no_tf32_value() {
    let g = every_kind(Some(false))
        .into_iter()
        .find(|g| g.input == ScalarType::F32)
        .expect("a TF32 kind");
    let mut inputs = g.inputs();
    let mut b: Vec<f32> = inputs[1].to_f64().iter().map(|&x| x as f32).collect();
    b[5] = f32::from_bits(0x3F80_0001); // 1 + 2⁻²³
    inputs[1] = HostBuffer::from_f32(&b);
    let err = run_kernel(&g.kernel(), &inputs).unwrap_err().to_string();
    assert!(err.contains("B operand of a TF32 multiply"), "{err}");
    b[5] = kernelc_ir::fragment::round_to_tf32(b[5]);
    inputs[1] = HostBuffer::from_f32(&b);
    assert!(run_kernel(&g.kernel(), &inputs).is_ok());
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
    let g = &every_kind(None)[1];
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

/// The passes keep a fragment kernel's meaning: optimised (its loops unrolled, its
/// indices folded) and fitted under a loop budget, every kind computes what it did.
#[test]
fn passes_keep_what_fragment_kernels_compute() {
    use kernelc_ir::passes::{fit_loop_budget, optimize, LoopBudget, PassOptions};
    let mut unrolled = 0;
    for g in every_kind(None) {
        let kernel = g.kernel();
        let inputs = g.inputs();
        let want = run_kernel(&kernel, &inputs).unwrap();
        let optimized = optimize(&kernel, &PassOptions::default());
        kernelc_ir::validate(&optimized).unwrap();
        assert_eq!(
            run_kernel(&optimized, &inputs).unwrap(),
            want,
            "{:?}",
            g.shape
        );
        let budget = LoopBudget {
            iterations: 4,
            max_workgroups: [1, 1, 1],
            max_unrolled_nodes: 100_000,
        };
        // The kernels staging B through shared memory run 9 iterations: unrolled.
        // (A warpgroup's staging loops run too many to unroll under this budget.)
        if g.shape.is_warpgroup() {
            continue;
        }
        let fitted = fit_loop_budget(&kernel, &budget).unwrap();
        unrolled += usize::from(fitted != kernel);
        assert_eq!(run_kernel(&fitted, &inputs).unwrap(), want, "{:?}", g.shape);
    }
    assert!(unrolled >= 2, "{unrolled} kernels needed fitting");
}

/// A warpgroup's m64n64k16 multiply from shared memory (`[64][16]` A, `[64][16]`
/// B by columns, both tiled), with `between` run after the loads and before the
/// `mma`, and the A load at `a_at`.
fn warpgroup_kernel(a_at: u32, between: impl FnOnce(&mut Body, Mem)) -> Kernel {
    warpgroup_kernel_then(a_at, between, |_, _| {})
}

/// As [`warpgroup_kernel`], with `after` run after the `mma`.
fn warpgroup_kernel_then(
    a_at: u32,
    between: impl FnOnce(&mut Body, Mem),
    after: impl FnOnce(&mut Body, Mem),
) -> Kernel {
    let s = MmaShape::M64N64K16;
    let mut kb = KernelBuilder::new("warpgroup", [128, 1, 1]);
    let c = kb.buffer("c", ScalarType::F32, 64 * 64, Access::ReadWrite);
    let sa = kb.shared("sa", ScalarType::Bf16, 2048);
    let sb = kb.shared("sb", ScalarType::Bf16, 1024);
    kb.build(|f| {
        for sh in [sa, sb] {
            f.for_("e", local_id(0), 1024u32, 128u32, |f, e| {
                f.store(sh, e, half::bf16::ONE);
            });
        }
        f.barrier();
        let fa = f.fragment("fa", FragmentRole::A, s, ScalarType::Bf16);
        let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::Bf16);
        let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
        f.fill_fragment(fc, 0f32);
        f.load_fragment(fa, sa, a_at, 128u32, RowMajorTiles);
        f.load_fragment(fb, sb, 0u32, 128u32, ColMajorTiles);
        between(f, sa);
        f.mma(fc, fa, fb, fc);
        after(f, sa);
        f.store_fragment(fc, c, 0u32, 64u32, RowMajor);
    })
    .unwrap()
}

#[allow(clippy::result_large_err)]
fn run_warpgroup(kernel: &Kernel) -> Result<Vec<f64>, InterpError> {
    let c = HostBuffer::new(ScalarType::F32, vec![Scalar::f32(0.0); 64 * 64]);
    Ok(run_kernel(kernel, &[c])?[0].to_f64())
}

#[test]
fn a_warpgroup_reads_its_operands_from_shared_memory_at_the_mma() {
    // Sixteen products of ones.
    let out = run_warpgroup(&warpgroup_kernel(0, |_, _| {})).unwrap();
    assert!(out.iter().all(|&v| v == 16.0), "{:?}", &out[..4]);
    // The same through the expansion.
    let expanded = expand_fragments(&warpgroup_kernel(0, |_, _| {}));
    assert_eq!(run_warpgroup(&expanded).unwrap(), out);
    // Shared memory written between the load and the mma (after a barrier, so no
    // race): the matrix units would read the new values.
    let changed = warpgroup_kernel(0, |f, sa| {
        f.barrier();
        f.if_(local_id(0).eq(0u32), |f| {
            f.store(sa, 5u32, half::bf16::ZERO)
        });
        f.barrier();
    });
    let e = run_warpgroup(&changed).unwrap_err();
    assert!(
        matches!(e, InterpError::FragmentSourceChanged { ref fragment, .. } if fragment == "fa"),
        "{e}"
    );
    // Written past the fragment (element 1024 on): no change it reads.
    let elsewhere = warpgroup_kernel(0, |f, sa| {
        f.barrier();
        f.if_(local_id(0).eq(0u32), |f| {
            f.store(sa, 1500u32, half::bf16::ZERO)
        });
        f.barrier();
    });
    assert!(run_warpgroup(&elsewhere).is_ok());
    // Written after the mma but before the next barrier: the matrix units may still
    // be reading it.
    let early = warpgroup_kernel_then(
        0,
        |_, _| {},
        |f, sa| {
            f.if_(local_id(0).eq(0u32), |f| {
                f.store(sa, 5u32, half::bf16::ZERO)
            });
            f.barrier();
        },
    );
    // (The race with the mma's read is found first.)
    let e = run_warpgroup(&early).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::Race { .. } | InterpError::FragmentSourceChanged { .. }
        ),
        "{e}"
    );
    // After a barrier it is free again.
    let later = warpgroup_kernel_then(
        0,
        |_, _| {},
        |f, sa| {
            f.barrier();
            f.if_(local_id(0).eq(0u32), |f| {
                f.store(sa, 5u32, half::bf16::ZERO)
            });
        },
    );
    assert_eq!(run_warpgroup(&later).unwrap(), out);
    // An index that is not a multiple of 8.
    let e = run_warpgroup(&warpgroup_kernel(4, |_, _| {})).unwrap_err();
    assert!(
        matches!(e, InterpError::MisalignedFragment { index: 4, .. }),
        "{e}"
    );
}

#[test]
fn the_validator_keeps_warpgroup_operands_in_shared_tiles() {
    use ValidationErrorKind as K;
    let s = MmaShape::M64N128K16;
    let a_mem = || Mem(kernelc_ir::Memory::Buffer(kernelc_ir::ParamId(0)));
    // From a buffer.
    let e = validation_error(
        |f| {
            let fa = f.fragment("fa", FragmentRole::A, s, ScalarType::F16);
            f.load_fragment(fa, a_mem(), 0u32, 64u32, RowMajorTiles);
        },
        128,
    );
    assert!(
        matches!(e, K::BadFragment { ref why, .. } if why.contains("shared")),
        "{e}"
    );
    // Not whole warpgroups.
    let e = validation_error(
        |f| {
            let fc = f.fragment("fc", FragmentRole::Accumulator, s, ScalarType::F32);
            f.fill_fragment(fc, 0f32);
        },
        64,
    );
    assert!(matches!(e, K::WorkgroupNotWarps { group: 128, .. }), "{e}");
    // Shared memory but a plain layout.
    let mut kb = KernelBuilder::new("plain", [128, 1, 1]);
    let sh = kb.shared("sh", ScalarType::F16, 4096);
    let e = kb
        .build(|f| {
            let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::F16);
            f.load_fragment(fb, sh, 0u32, 16u32, ColMajor);
        })
        .unwrap_err()
        .kind;
    assert!(
        matches!(e, K::BadFragment { ref why, .. } if why.contains("tiled")),
        "{e}"
    );
}

#[test]
fn tiled_layouts_place_elements_in_eight_by_eight_tiles() {
    use kernelc_ir::fragment::element_index;
    use ScalarType::{F16, F32};
    // Row-major tiles: (r, c) = (9, 10) is tile (1, 1), inside it (1, 2).
    assert_eq!(
        element_index(RowMajorTiles, F16, 0, 200, 9, 10),
        200 + 64 + 8 + 2
    );
    // Column-major tiles: the transpose.
    assert_eq!(
        element_index(ColMajorTiles, F16, 8, 200, 10, 9),
        8 + 200 + 64 + 8 + 2
    );
    assert_eq!(element_index(RowMajorTiles, F16, 0, 200, 7, 7), 63);
    // Swizzled: row 3 of a block has its chunks flipped by 3: chunk 1 goes to 2.
    assert_eq!(
        element_index(RowMajorSwizzled, F16, 0, 512, 3, 9),
        3 * 64 + 2 * 8 + 1
    );
    // The swizzle takes the absolute index: at 64 elements further (row 1 of the
    // block), the same element lands by row 4's pattern.
    assert_eq!(
        element_index(RowMajorSwizzled, F16, 64, 512, 3, 9),
        4 * 64 + 5 * 8 + 1
    );
    // A band further: 8 rows down, `stride` on.
    assert_eq!(element_index(RowMajorSwizzled, F16, 0, 512, 8, 0), 512);
    assert_eq!(
        element_index(ColMajorSwizzled, F16, 0, 512, 9, 3),
        3 * 64 + 2 * 8 + 1
    );
    // 32-bit elements: rows of 32, chunks of 4. Row 3's chunk 2 (elements 8-11)
    // goes to chunk 1; a band is 8 rows of 32.
    assert_eq!(
        element_index(RowMajorSwizzled, F32, 0, 256, 3, 9),
        3 * 32 + 4 + 1
    );
    assert_eq!(element_index(RowMajorSwizzled, F32, 0, 256, 8, 0), 256);
    // Column 33: the second block of the band (256 on), row 5, chunk 0 → 5.
    assert_eq!(
        element_index(RowMajorSwizzled, F32, 0, 256, 5, 33),
        256 + 5 * 32 + 5 * 4 + 1
    );
}

#[test]
fn a_warpgroup_operand_keeps_one_layout() {
    let s = MmaShape::M64N64K16;
    let mut kb = KernelBuilder::new("two_layouts", [128, 1, 1]);
    let sh = kb.shared("sh", ScalarType::Bf16, 4096);
    let e = kb
        .build(|f| {
            let fb = f.fragment("fb", FragmentRole::B, s, ScalarType::Bf16);
            f.load_fragment(fb, sh, 0u32, 128u32, ColMajorTiles);
            f.load_fragment(fb, sh, 0u32, 128u32, RowMajorTiles);
        })
        .unwrap_err()
        .kind;
    assert!(
        matches!(e, ValidationErrorKind::BadFragment { ref why, .. } if why.contains("one layout")),
        "{e}"
    );
}

/// A target with warp fragments but not warpgroup ones (or not Hopper's f64
/// m16n8k16) gets such a kernel expanded whole, and keeps the other kernels'
/// fragments.
#[test]
fn fragments_a_target_lacks_are_expanded_where_only_the_others_run() {
    use kernelc_ir::passes::{for_target, MathExpansion};
    let warp_only = MathExpansion::none().with_native_fragments(true);
    let all = warp_only
        .clone()
        .with_native_warpgroup_fragments(true)
        .with_native_f64_m16_fragments(true);
    for g in every_kind(Some(true)) {
        let kernel = g.kernel();
        let hopper_only =
            g.shape.is_warpgroup() || (g.shape == MmaShape::M16N8K16 && g.input == ScalarType::F64);
        let kept = for_target(&kernel, &warp_only).uses_fragments();
        assert_eq!(kept, !hopper_only, "{:?} {}", g.shape, g.input);
        assert!(for_target(&kernel, &all).uses_fragments(), "{:?}", g.shape);
    }
}
