//! The fragment statements that keep a computation in registers between multiplies
//! (`map`, `reduce_rows`, `convert`): their meaning in the interpreter, the
//! expansion's agreement with it bit for bit, the passes, and the errors.

use kernelc_ir::builder::*;
use kernelc_ir::fragment::{
    row_reduction_order, FragmentLayout::RowMajor, FragmentRole, MmaShape, RowReduction, MMA_KINDS,
};
use kernelc_ir::interp::{HostBuffer, InterpError};
use kernelc_ir::passes::{expand_fragments, expand_math, optimize, MathExpansion, PassOptions};
use kernelc_ir::testing::fragments::{
    attention_step, attention_step_inputs, row_statistics_kernel, warpgroup_attention_step,
    warpgroup_attention_step_inputs, WARPGROUP_STEP_KEYS,
};
use kernelc_ir::{Access, ScalarType, ValidationErrorKind};

mod common;
use common::{run_kernel, Rng};

const F32: ScalarType = ScalarType::F32;

/// The step in f64, `P` rounded to bf16 as the kernel rounds it.
fn step_reference(inputs: &[HostBuffer]) -> Vec<f64> {
    let (s, v) = (inputs[0].to_f64(), inputs[1].to_f64());
    let mut out = vec![0.0; 256];
    for w in 0..2 {
        for r in 0..16 {
            let x: Vec<f64> = (0..16)
                .map(|c| match c <= r {
                    true => 2.0 * s[w * 256 + r * 16 + c],
                    false => f64::NEG_INFINITY,
                })
                .collect();
            let max = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = x.iter().map(|x| (x - max).exp2()).collect();
            let l: f64 = p.iter().sum();
            for j in 0..8 {
                let dot: f64 = (0..16)
                    .map(|c| half::bf16::from_f64(p[c]).to_f64() * v[c * 8 + j])
                    .sum();
                out[w * 128 + r * 8 + j] = dot / l;
            }
        }
    }
    out
}

#[test]
fn a_softmax_between_two_products_stays_in_fragments() {
    let kernel = attention_step(ScalarType::Bf16);
    for seed in [1, 7, 99] {
        let inputs = attention_step_inputs(ScalarType::Bf16, seed);
        let got = run_kernel(&kernel, &inputs).unwrap()[2].to_f64();
        let want = step_reference(&inputs);
        for (e, (x, y)) in got.iter().zip(&want).enumerate() {
            // f32 sums, and P rounded to bf16 from an f32 exp2 (one ulp of bf16 apart
            // from the f64 one at worst).
            assert!(
                (x - y).abs() <= 1e-2 * y.abs().max(0.1),
                "seed {seed} element {e}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn the_expansion_and_the_passes_compute_the_step_bit_for_bit() {
    let kernel = attention_step(ScalarType::Bf16);
    let inputs = attention_step_inputs(ScalarType::Bf16, 5);
    let want = run_kernel(&kernel, &inputs).unwrap();
    let expanded = expand_fragments(&kernel);
    assert!(!expanded.uses_fragments());
    kernelc_ir::validate(&expanded).unwrap();
    assert_eq!(run_kernel(&expanded, &inputs).unwrap(), want, "expanded");
    let optimized = optimize(&kernel, &PassOptions::default());
    kernelc_ir::validate(&optimized).unwrap();
    assert_eq!(run_kernel(&optimized, &inputs).unwrap(), want, "optimized");
    // exp2 expanded into statements: they stay inside the map that reads the
    // element (its value reads the map's bound locals).
    let math = expand_math(&kernel, &MathExpansion::all_transcendental());
    kernelc_ir::validate(&math).unwrap();
    let got = run_kernel(&math, &inputs).unwrap()[2].to_f64();
    for (x, y) in got.iter().zip(&want[2].to_f64()) {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs {y}");
    }
}

/// For every accumulator kind: a map (`x·x + row − col`) and both reductions of two
/// sources, stored side by side; the reductions checked against the documented order.
#[test]
fn rows_reduce_in_the_documented_order_in_every_kind() {
    let mut kinds: Vec<(MmaShape, ScalarType)> = MMA_KINDS.iter().map(|k| (k.0, k.2)).collect();
    kinds.dedup();
    for (shape, elem) in kinds {
        let (m, n) = (shape.m, shape.n);
        let wg = shape.group() * 2;
        let len = 2 * 2 * m * n;
        let mut kb = KernelBuilder::new("rows", [wg, 1, 1]);
        let x_in = kb.buffer("x", elem, len as u64, Access::Read);
        let out = kb.buffer("out", elem, 3 * len as u64, Access::Write);
        let kernel = kb
            .build(|f| {
                let group = f.let_("group", local_id(0) / shape.group());
                let base = f.let_("base", group * (2 * m * n));
                let acc =
                    |f: &mut Body, name| f.fragment(name, FragmentRole::Accumulator, shape, elem);
                let srcs = [acc(f, "a"), acc(f, "b")];
                for (i, &s) in srcs.iter().enumerate() {
                    f.load_fragment(s, x_in, base.clone() + i as u32 * m * n, n, RowMajor);
                    f.map_fragment(s, &[s], |f, row, col, x| {
                        let shift =
                            f.let_("shift", (row.cast(elem) - col.cast(elem)) * lit(elem, 0.5));
                        x[0].clone().fma(x[0].clone(), shift)
                    });
                    f.store_fragment(s, out, base.clone() + i as u32 * m * n, n, RowMajor);
                }
                for (i, reduction) in [RowReduction::Sum, RowReduction::Max]
                    .into_iter()
                    .enumerate()
                {
                    let r = acc(f, "r");
                    f.reduce_rows(r, &srcs, reduction);
                    let at = base.clone() + (len + i as u32 * len);
                    f.store_fragment(r, out, at, n, RowMajor);
                }
            })
            .unwrap();
        let mut rng = Rng(u64::from(m * 31 + n));
        let x: Vec<f64> = (0..len).map(|_| rng.uniform(-3.0, 3.0) as f64).collect();
        let x = match elem {
            F32 => HostBuffer::from_f32(&x.iter().map(|&v| v as f32).collect::<Vec<_>>()),
            _ => HostBuffer::from_f64(&x),
        };
        let inputs = vec![x, HostBuffer::zeros(elem, 3 * len as usize)];
        let got = run_kernel(&kernel, &inputs).unwrap();
        let expanded = run_kernel(&expand_fragments(&kernel), &inputs).unwrap();
        assert_eq!(got, expanded, "{shape:?} {elem}: expanded");
        let o = got[1].to_f64();
        let order = row_reduction_order(shape, 2);
        let round = |v: f64| if elem == F32 { v as f32 as f64 } else { v };
        for g in 0..2 {
            let base = (g * 2 * m * n) as usize;
            for r in 0..m as usize {
                let at = |(s, c): (usize, u32)| {
                    o[base + s * (m * n) as usize + r * n as usize + c as usize]
                };
                let runs: Vec<f64> = order
                    .iter()
                    .map(|run| {
                        run.iter()
                            .map(|&sc| at(sc))
                            .reduce(|a, b| round(a + b))
                            .unwrap()
                    })
                    .collect();
                let sum = runs.into_iter().reduce(|a, b| round(a + b)).unwrap();
                let max = (0..2)
                    .flat_map(|s| (0..n).map(move |c| (s, c)))
                    .map(at)
                    .fold(f64::NEG_INFINITY, f64::max);
                for c in 0..n as usize {
                    let sum_at = base + len as usize + r * n as usize + c;
                    assert_eq!(
                        o[sum_at].to_bits(),
                        sum.to_bits(),
                        "{shape:?} {elem} sum row {r}"
                    );
                    assert_eq!(
                        o[sum_at + len as usize],
                        max,
                        "{shape:?} {elem} max row {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_map_value_that_differs_within_a_warp_is_reported() {
    let shape = MmaShape::M16N8K16;
    let mut kb = KernelBuilder::new("differs", [32, 1, 1]);
    let out = kb.buffer("out", F32, 128, Access::Write);
    let kernel = kb
        .build(|f| {
            let a = f.fragment("a", FragmentRole::Accumulator, shape, F32);
            // The holder of an element is the target's business: a value read from
            // the invocation's id has no meaning.
            f.map_fragment(a, &[], |_, _, _, _| local_id(0).cast(F32));
            f.store_fragment(a, out, 0u32, 8u32, RowMajor);
        })
        .unwrap();
    let err = run_kernel(&kernel, &[HostBuffer::zeros(F32, 128)]).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::FragmentOperandDiffers {
                operand: "map value",
                ..
            }
        ),
        "{err}"
    );
}

fn validation_error(build: impl FnOnce(&mut Body)) -> ValidationErrorKind {
    let mut kb = KernelBuilder::new("bad", [128, 1, 1]);
    let _ = kb.buffer("out", F32, 4096, Access::ReadWrite);
    kb.build(build).unwrap_err().kind
}

#[test]
fn the_validator_names_what_is_wrong_with_row_statements() {
    let s = MmaShape::M16N8K16;
    let why = |kind: ValidationErrorKind| match kind {
        ValidationErrorKind::BadFragment { why, .. } => why,
        other => panic!("{other:?}"),
    };
    // A store in a map's body.
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        f.fill_fragment(a, 0.0f32);
        f.map_fragment(a, &[a], |f, _, _, x| {
            f.barrier();
            x[0].clone()
        });
    });
    assert!(why(kind).contains("a barrier"));
    // One accumulator for an A of k = 16 (two needed).
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        let p = f.fragment("p", FragmentRole::A, s, ScalarType::Bf16);
        f.fill_fragment(a, 0.0f32);
        f.convert_fragments(p, &[a]);
    });
    assert!(why(kind).contains("end in the last"));
    // A warpgroup's A read from shared memory: no conversion into it.
    let wg = MmaShape::M64N64K16;
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, wg, F32);
        let p = f.fragment("p", FragmentRole::A, wg, ScalarType::Bf16);
        f.fill_fragment(a, 0.0f32);
        f.convert_fragments(p, &[a]);
    });
    assert!(why(kind).contains("declare it in registers"));
    // Held in registers: a conversion from a column of no multiple of 8, one past
    // the sources, a source left unused, a load.
    for (first, sources, wanted) in [
        (4, 1, "columns 4..20 of 1 accumulators 64 wide"),
        (56, 1, "columns 56..72 of 1 accumulators"),
        (16, 2, "columns 16..32 of 2 accumulators"),
        (64, 2, "columns 64..80 of 2 accumulators"),
        // Past u32 in the message: no overflow.
        (u32::MAX - 7, 1, "columns 4294967288..4294967304 of 1"),
    ] {
        let kind = validation_error(|f| {
            let a = f.fragment("a", FragmentRole::Accumulator, wg, F32);
            let p = f.fragment_in_registers("p", wg, ScalarType::Bf16);
            f.fill_fragment(a, 0.0f32);
            f.convert_fragments_from(p, &vec![a; sources], first);
        });
        assert!(
            why(kind).contains(wanted),
            "from {first}, {sources}: {wanted}"
        );
    }
    // Sources of two shapes, of other rows, none.
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, wg, F32);
        let b = f.fragment("b", FragmentRole::Accumulator, MmaShape::M64N128K16, F32);
        let p = f.fragment_in_registers("p", wg, ScalarType::Bf16);
        f.fill_fragment(a, 0.0f32);
        f.fill_fragment(b, 0.0f32);
        f.convert_fragments_from(p, &[a, b], 56);
    });
    assert!(why(kind).contains("several shapes"));
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        let p = f.fragment_in_registers("p", wg, ScalarType::Bf16);
        f.fill_fragment(a, 0.0f32);
        f.convert_fragments_from(p, &[a, a], 0);
    });
    assert!(why(kind).contains("other invocations hold"));
    let kind = validation_error(|f| {
        let p = f.fragment_in_registers("p", wg, ScalarType::Bf16);
        f.convert_fragments_from(p, &[], 0);
    });
    assert!(why(kind).contains("no accumulators"));
    let kind = validation_error(|f| {
        let p = f.fragment_in_registers("p", wg, ScalarType::Bf16);
        let out = Mem(kernelc_ir::Memory::Buffer(kernelc_ir::ParamId(0)));
        f.load_fragment(p, out, 0u32, 64u32, RowMajor);
    });
    assert!(why(kind).contains("no load"));
    // Only a warpgroup's 16-bit A is held in registers; a TF32 A takes no conversion
    // (its registers hold other elements than the accumulators').
    let kind = validation_error(|f| {
        f.fragment_in_registers("p", MmaShape::M64N64K8, F32);
    });
    assert!(why(kind).contains("declared in registers"));
    let kind = validation_error(|f| {
        let k8 = MmaShape::M16N8K8;
        let a = f.fragment("a", FragmentRole::Accumulator, k8, F32);
        let p = f.fragment("p", FragmentRole::A, k8, F32);
        f.fill_fragment(a, 0.0f32);
        f.convert_fragments(p, &[a]);
    });
    assert!(why(kind).contains("only f16/bf16"));
    // Sources of another shape; a source never written.
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        let b = f.fragment("b", FragmentRole::Accumulator, MmaShape::M16N8K8, F32);
        f.fill_fragment(a, 0.0f32);
        f.fill_fragment(b, 0.0f32);
        f.reduce_rows(a, &[a, b], RowReduction::Max);
    });
    assert!(why(kind).contains("another shape"));
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        let b = f.fragment("b", FragmentRole::Accumulator, s, F32);
        f.reduce_rows(a, &[b], RowReduction::Sum);
    });
    assert!(
        matches!(kind, ValidationErrorKind::FragmentUseBeforeAssign(_)),
        "{kind:?}"
    );
    // The value's type is the destination's.
    let kind = validation_error(|f| {
        let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
        f.map_fragment(a, &[], |_, row, _, _| row);
    });
    assert!(
        matches!(kind, ValidationErrorKind::TypeMismatch { .. }),
        "{kind:?}"
    );
}

#[test]
fn row_statements_print_and_round_trip_through_json() {
    let kernel = attention_step(ScalarType::Bf16);
    let text = kernelc_ir::print::print(&kernel);
    for part in [
        "map s0[row, col](s0_e = s0) {",
        "reduce_rows max = max(s0, s1)",
        "convert p = s0, s1",
    ] {
        assert!(text.contains(part), "{part} in\n{text}");
    }
    let json = kernelc_ir::to_json(&kernel);
    assert_eq!(kernelc_ir::from_json(&json).unwrap(), kernel);
}

/// The warpgroup step in f64, `P` rounded to `input` as the kernel rounds it.
fn warpgroup_step_reference(inputs: &[HostBuffer], input: ScalarType) -> Vec<f64> {
    let (s, v) = (inputs[0].to_f64(), inputs[1].to_f64());
    let round = |x: f64| match input {
        ScalarType::F16 => half::f16::from_f64(x).to_f64(),
        _ => half::bf16::from_f64(x).to_f64(),
    };
    let mut out = vec![0.0; 64 * 64];
    for r in 0..64 {
        let keys = WARPGROUP_STEP_KEYS.start as usize..(WARPGROUP_STEP_KEYS.end as usize);
        let seen: Vec<usize> = keys.filter(|&c| c <= r + 56).collect();
        let max = seen
            .iter()
            .map(|&c| 2.0 * s[r * 128 + c])
            .fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<(usize, f64)> = seen
            .iter()
            .map(|&c| (c, (2.0 * s[r * 128 + c] - max).exp2()))
            .collect();
        let l: f64 = p.iter().map(|x| x.1).sum();
        for j in 0..64 {
            let dot: f64 = p.iter().map(|&(c, p)| round(p) * v[c * 64 + j]).sum();
            out[r * 64 + j] = dot / l;
        }
    }
    out
}

/// A warpgroup's `P` converted into `A` fragments held in registers, slice by slice
/// from a column (one slice across its two accumulators), feeds the second multiply:
/// the interpreter against f64, the expansion and the passes bit for bit.
#[test]
fn a_warpgroup_multiplies_p_from_registers() {
    for input in [ScalarType::Bf16, ScalarType::F16] {
        let kernel = warpgroup_attention_step(input);
        for seed in [2, 11] {
            let inputs = warpgroup_attention_step_inputs(input, seed);
            let want = run_kernel(&kernel, &inputs).unwrap();
            let reference = warpgroup_step_reference(&inputs, input);
            for (e, (x, y)) in want[2].to_f64().iter().zip(&reference).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-2 * y.abs().max(0.1),
                    "{input} seed {seed} element {e}: {x} vs {y}"
                );
            }
            let expanded = expand_fragments(&kernel);
            kernelc_ir::validate(&expanded).unwrap();
            assert_eq!(run_kernel(&expanded, &inputs).unwrap(), want, "expanded");
            let optimized = optimize(&kernel, &PassOptions::default());
            assert_eq!(run_kernel(&optimized, &inputs).unwrap(), want, "optimized");
        }
    }
    let text = kernelc_ir::print::print(&warpgroup_attention_step(ScalarType::Bf16));
    for part in [
        "fragment p: a<bf16, m64n64k16> in registers",
        "convert p_3 = s0, s1 from column 56",
    ] {
        assert!(text.contains(part), "{part} in\n{text}");
    }
    let kernel = warpgroup_attention_step(ScalarType::Bf16);
    let json = kernelc_ir::to_json(&kernel);
    assert_eq!(kernelc_ir::from_json(&json).unwrap(), kernel);
}

#[test]
fn row_statistics_live_in_a_narrower_accumulator() {
    let kernel = row_statistics_kernel();
    let mut rng = Rng(17);
    let x: Vec<f32> = (0..64 * 64).map(|_| rng.uniform(-8.0, 8.0)).collect();
    let inputs = vec![HostBuffer::from_f32(&x)];
    let got = run_kernel(&kernel, &inputs).unwrap();
    let out = got[0].to_f64();
    for r in 0..64 {
        let max = x[r * 64..(r + 1) * 64]
            .iter()
            .cloned()
            .fold(f32::MIN, f32::max);
        for c in 0..64 {
            let want = (x[r * 64 + c] - max) + c as f32;
            assert_eq!(out[r * 64 + c], want as f64, "({r}, {c})");
        }
    }
    let expanded = expand_fragments(&kernel);
    kernelc_ir::validate(&expanded).unwrap();
    assert_eq!(run_kernel(&expanded, &inputs).unwrap(), got);
    // Rows held by other invocations: a warp's accumulator is not a warpgroup's row.
    let kind = validation_error(|f| {
        let s = f.fragment("s", FragmentRole::Accumulator, MmaShape::M64N64K16, F32);
        let t = f.fragment("t", FragmentRole::Accumulator, MmaShape::M16N8K16, F32);
        f.fill_fragment(t, 0.0f32);
        f.reduce_rows(s, &[t], RowReduction::Max);
    });
    assert!(
        matches!(kind, ValidationErrorKind::BadFragment { .. }),
        "{kind:?}"
    );
}

/// What a map binds or its body assigns holds, after it, whatever element each
/// invocation computed last: reading it after the map (a store's index, a barrier's
/// condition) is a read of an unassigned local, even where it had a value before.
#[test]
fn a_maps_locals_are_not_readable_after_it() {
    use kernelc_ir::{CmpOp, Expr, FragmentOp, Memory, ParamId, Scalar, Stmt};
    let s = MmaShape::M16N8K16;
    let mut kb = KernelBuilder::new("after_map", [32, 1, 1]);
    let out = kb.buffer("out", F32, 128, Access::Write);
    let kernel = kb
        .build(|f| {
            let a = f.fragment("a", FragmentRole::Accumulator, s, F32);
            f.map_fragment(a, &[], |_, row, _, _| row.cast(F32));
            f.store_fragment(a, out, 0u32, 8u32, RowMajor);
        })
        .unwrap();
    let Stmt::Fragment(FragmentOp::Map(m)) = kernel.body[0].clone() else {
        panic!("the map first");
    };
    let zero = Expr::Lit(Scalar::U32(0));
    let reads = [
        Stmt::Store {
            mem: Memory::Buffer(ParamId(0)),
            index: Expr::Local(m.row),
            value: Expr::Lit(Scalar::from_f64(F32, 1.0)),
        },
        Stmt::If {
            cond: Expr::Cmp {
                op: CmpOp::Eq,
                lhs: Box::new(Expr::Local(m.row)),
                rhs: Box::new(zero.clone()),
            },
            then_body: vec![Stmt::Barrier],
            else_body: vec![],
        },
    ];
    for read in reads {
        let mut k = kernel.clone();
        k.body.insert(
            0,
            Stmt::Let {
                local: m.row,
                value: zero.clone(),
            },
        );
        k.body.push(read);
        let err = kernelc_ir::validate(&k).unwrap_err();
        assert!(
            matches!(err.kind, ValidationErrorKind::UseBeforeAssign(_)),
            "{err}"
        );
    }
}
