//! Tests of the IR passes: exact results on small kernels, and a property test that
//! `optimize` never changes what the interpreter computes.

// The tests build IR like `x * 0u` on purpose: the operators build trees, not values.
#![allow(
    clippy::erasing_op,
    clippy::modulo_one,
    clippy::identity_op,
    clippy::type_complexity
)]

use kernelc_ir::builder::*;
use kernelc_ir::passes::{self, PassOptions};
use kernelc_ir::ScalarType::{Bool, F32, I32, U32};
use kernelc_ir::{validate, Access, Block, Expr, Kernel, LocalId, Memory, ParamId, Scalar, Stmt};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn local(id: u32) -> E {
    E(Expr::Local(LocalId(id)))
}

fn store(buffer: u32, index: impl Into<E>, value: impl Into<E>) -> Stmt {
    Stmt::Store {
        mem: Memory::Buffer(ParamId(buffer)),
        index: index.into().0,
        value: value.into().0,
    }
}

fn let_(id: u32, value: impl Into<E>) -> Stmt {
    Stmt::Let {
        local: LocalId(id),
        value: value.into().0,
    }
}

fn assign(id: u32, value: impl Into<E>) -> Stmt {
    Stmt::Assign {
        local: LocalId(id),
        value: value.into().0,
    }
}

/// Runs a pass, checks the result validates, returns its body.
fn body_after(kernel: &Kernel, pass: impl Fn(&Kernel) -> Kernel) -> Block {
    validate(kernel).expect("input kernel must validate");
    let out = pass(kernel);
    if let Err(e) = validate(&out) {
        panic!("pass output does not validate: {e}\n{out}");
    }
    out.body
}

/// `out[i] = f(i)` over a u32 output buffer, `i = global_id(0)` (local 0).
fn store_u32(f: impl FnOnce(E) -> E) -> Kernel {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    k.build(|b| {
        let i = b.let_("i", global_id(0));
        b.store(out, i.clone(), f(i));
    })
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// fold
// ---------------------------------------------------------------------------------------

#[test]
fn fold_arithmetic_and_math() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", F32, 4, Access::Write);
    let kernel = k
        .build(|b| {
            b.store(out, 1u32 + 2u32, (E::from(2.0f32) * 3.0f32).sqrt());
            b.store(out, 0u32, E::from(1u32).cast(F32) + E::from(-0.0f32));
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    assert_eq!(
        body,
        vec![store(0, 3u32, 6.0f32.sqrt()), store(0, 0u32, 1.0f32),]
    );
}

#[test]
fn fold_keeps_integer_division_by_zero() {
    let kernel = store_u32(|i| {
        let _ = i;
        E::from(5u32) / 0u32
    });
    let body = body_after(&kernel, passes::fold);
    assert_eq!(body[1], store(0, local(0), E::from(5u32) / 0u32));

    // Also through propagation: `let z = 0u; out[i] = i / z` -> `i / 0u`, not folded.
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            let z = b.let_("z", 0u32);
            b.store(out, i.clone(), i / z);
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    assert_eq!(body[2], store(0, local(0), local(0) / 0u32));
}

#[test]
fn fold_keeps_shift_overflow() {
    let kernel = store_u32(|_| E::from(1u32) << 32u32);
    let body = body_after(&kernel, passes::fold);
    assert_eq!(body[1], store(0, local(0), E::from(1u32) << 32u32));
    let kernel = store_u32(|_| E::from(1u32) << 31u32);
    let body = body_after(&kernel, passes::fold);
    assert_eq!(body[1], store(0, local(0), 0x8000_0000u32));
}

#[test]
fn fold_if_on_literal_is_spliced() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.if_else(
                E::from(1u32).lt(2u32),
                |b| {
                    let _ = b.let_("x", 7u32);
                    b.store(out, i.clone(), 1u32);
                },
                |b| b.store(out, i.clone(), 2u32),
            );
            b.if_else(
                E::from(false),
                |b| b.store(out, i.clone(), 3u32),
                |b| b.store(out, i.clone(), 4u32),
            );
            // x is definitely assigned after the splice: it was not before, so it is not
            // read here, but the spliced `let` must still propagate.
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    assert_eq!(
        body,
        vec![
            let_(0, global_id(0)),
            let_(1, 7u32),
            store(0, local(0), 1u32),
            store(0, local(0), 4u32),
        ]
    );
}

#[test]
fn fold_select_drops_arm_only_without_load() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let out = k.buffer("out", F32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            // The dropped arm loads: the load may fail, keep the select.
            b.store(
                out,
                i.clone(),
                E::from(true).select(1.0f32, a.at(i.clone())),
            );
            // The dropped arm cannot fail: fold to the chosen arm.
            b.store(
                out,
                i.clone(),
                E::from(false).select(2.0f32, a.at(i.clone())),
            );
            // An integer division by a non-literal may fail too.
            b.store(
                out,
                i.clone(),
                E::from(true).select(1.0f32, (E::from(1u32) / i.clone()).cast(F32)),
            );
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    assert_eq!(
        body[1],
        store(1, local(0), E::from(true).select(1.0f32, a.at(local(0))))
    );
    assert_eq!(body[2], store(1, local(0), a.at(local(0))));
    assert!(matches!(
        &body[3],
        Stmt::Store {
            value: Expr::Select { .. },
            ..
        }
    ));
}

#[test]
fn fold_extract_of_vector_and_splat() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", F32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            b.store(
                out,
                0u32,
                vector([E::from(1.0f32), E::from(2.0f32)]).lane(1),
            );
            b.store(out, 1u32, E::from(3.0f32).splat(4).lane(3));
            // Vectors themselves are not literals.
            b.store(out, 2u32, E::from(3.0f32).splat(2));
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    assert_eq!(body[0], store(0, 0u32, 2.0f32));
    assert_eq!(body[1], store(0, 1u32, 3.0f32));
    assert_eq!(body[2], store(0, 2u32, E::from(3.0f32).splat(2)));
}

#[test]
fn fold_propagation_respects_branches_and_loops() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0)); // 0
            let x = b.var("x", 1u32); // 1
            let y = b.var("y", 5u32); // 2
            b.if_(i.clone().lt(3u32), |b| {
                b.store(out, x.get(), 10u32); // x known inside: 1
                b.assign(x, 2u32);
                b.assign(y, 5u32); // same value as before: still known after
            });
            b.store(out, x.get(), y.get()); // x unknown, y = 5
            b.for_("k", 0u32, i.clone(), 1, |b, kk| {
                b.store(out, y.get(), kk.clone()); // y written below: unknown
                b.assign(y, kk);
                b.store(out, y.get(), 0u32); // y = kk here, not a literal
                b.assign(x, 3u32);
                b.store(out, x.get(), 0u32); // x = 3 here
            });
            b.store(out, x.get(), y.get()); // both unknown after the loop
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    let x = local(1);
    let y = local(2);
    let kk = local(3);
    assert_eq!(
        body,
        vec![
            let_(0, global_id(0)),
            let_(1, 1u32),
            let_(2, 5u32),
            Stmt::If {
                cond: local(0).lt(3u32).0,
                then_body: vec![store(0, 1u32, 10u32), assign(1, 2u32), assign(2, 5u32)],
                else_body: vec![],
            },
            store(0, x.clone(), 5u32),
            Stmt::For {
                var: LocalId(3),
                start: E::from(0u32).0,
                end: local(0).0,
                step: 1,
                body: vec![
                    store(0, y.clone(), kk.clone()),
                    assign(2, kk.clone()),
                    store(0, y.clone(), 0u32),
                    assign(1, 3u32),
                    store(0, 3u32, 0u32),
                ],
            },
            store(0, x, y),
        ]
    );
}

#[test]
fn fold_never_creates_an_out_of_bounds_literal_index() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let a = k.buffer("a", U32, 4, Access::Read);
    let out = k.buffer("out", U32, 4, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            let j = b.let_("j", 100u32);
            b.if_(i.clone().gt(1000u32), |b| {
                b.store(out, j.clone(), a.at(j.clone() + 1u32));
                // Index 3 is unaligned for a vec2 store, 2 is fine for the load.
                b.store(out, E::from(2u32) + 1u32, a.load(j.clone() - 98u32, 2));
                b.store(out, i.clone(), a.load(j.clone() - 99u32, 2).lane(0)); // 1: unaligned
            });
        })
        .unwrap();
    let body = body_after(&kernel, passes::fold);
    let Stmt::If { then_body, .. } = &body[2] else {
        panic!("if expected, got {:?}", body[2]);
    };
    assert_eq!(then_body[0], store(1, local(1), a.at(local(1) + 1u32)));
    assert_eq!(
        then_body[1],
        store(1, E::from(2u32) + 1u32, a.load(2u32, 2))
    );
    assert_eq!(
        then_body[2],
        store(1, local(0), a.load(local(1) - 99u32, 2).lane(0))
    );
}

// ---------------------------------------------------------------------------------------
// simplify
// ---------------------------------------------------------------------------------------

#[test]
fn simplify_reassociates_index_constants() {
    let kernel = store_u32(|i| (i * 4u32 + 2u32) + 3u32);
    let body = body_after(&kernel, passes::simplify);
    assert_eq!(body[1], store(0, local(0), local(0) * 4u32 + 5u32));
}

#[test]
fn simplify_integer_identities() {
    let cases: Vec<(fn(E) -> E, fn(E) -> E)> = vec![
        (|i| i + 0u32, |i| i),
        (|i| 0u32 + i, |i| i),
        (|i| i - 0u32, |i| i),
        (|i| i * 1u32, |i| i),
        (|i| 1u32 * i, |i| i),
        (|i| i / 1u32, |i| i),
        (|i| i << 0u32, |i| i),
        (|i| i >> 0u32, |i| i),
        (|i| i | 0u32, |i| i),
        (|i| i ^ 0u32, |i| i),
        (|i| i & u32::MAX, |i| i),
        (|i| i * 0u32, |_| E::from(0u32)),
        (|i| 0u32 * i, |_| E::from(0u32)),
        (|i| i & 0u32, |_| E::from(0u32)),
        (|i| i % 1u32, |_| E::from(0u32)),
        (|i| 3u32 + i, |i| i + 3u32),
        (|i| 3u32 * i, |i| i * 3u32),
        (|i| (i * 3u32) * 5u32, |i| i * 15u32),
        (|i| i - 3u32, |i| i + 4294967293u32),
        (|i| (i + 2u32) * 3u32, |i| i * 3u32 + 6u32),
        (|i| (i + 1u32) - 1u32, |i| i),
        (|i| !!i, |i| i),
        (|i| (i + 0x8000_0000u32) + 0x8000_0000u32, |i| i),
        (|i| i.cast(U32), |i| i),
    ];
    for (n, (input, expected)) in cases.into_iter().enumerate() {
        let kernel = store_u32(input);
        let body = body_after(&kernel, passes::simplify);
        assert_eq!(body[1], store(0, local(0), expected(local(0))), "case {n}");
    }
}

#[test]
fn simplify_signed_wrapping() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", I32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0).cast(I32));
            b.store(out, 0u32, i.clone() - i32::MIN);
            b.store(out, 1u32, -(-i.clone()));
            b.store(out, 2u32, (i.clone() * -1i32) * -1i32);
        })
        .unwrap();
    let body = body_after(&kernel, passes::simplify);
    assert_eq!(body[1], store(0, 0u32, local(0) + i32::MIN));
    assert_eq!(body[2], store(0, 1u32, local(0)));
    assert_eq!(body[3], store(0, 2u32, local(0)));
}

#[test]
fn simplify_keeps_loads_and_floats() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let a = k.buffer("a", U32, 16, Access::Read);
    let f = k.buffer("f", F32, 16, Access::Read);
    let out = k.buffer("out", U32, 16, Access::Write);
    let outf = k.buffer("outf", F32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.store(out, 0u32, a.at(i.clone()) * 0u32);
            b.store(out, 1u32, (E::from(5u32) / i.clone()) & 0u32);
            b.store(outf, 0u32, E::from(1.0f32) * f.at(i.clone()));
            b.store(outf, 1u32, f.at(i.clone()) + 0.0f32);
            b.store(outf, 2u32, (f.at(i.clone()) + 1.0f32) + 2.0f32);
            b.store(outf, 3u32, f.at(i.clone()) * 0.0f32);
            b.store(outf, 4u32, -(-f.at(i.clone())));
        })
        .unwrap();
    let body = body_after(&kernel, passes::simplify);
    assert_eq!(body[1..], kernel.body[1..]);
}

#[test]
fn simplify_bool_logic() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let a = k.buffer("a", Bool, 16, Access::Read);
    let out = k.buffer("out", Bool, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            let c = b.let_("c", i.clone().lt(4u32));
            b.store(out, 0u32, E::from(true) & c.clone());
            b.store(out, 1u32, E::from(false) | c.clone());
            b.store(out, 2u32, c.clone() & false);
            b.store(out, 3u32, !!c.clone());
            b.store(out, 4u32, a.at(i.clone()) & false); // the load stays
            b.store(out, 5u32, c.clone() | true);
        })
        .unwrap();
    let body = body_after(&kernel, passes::simplify);
    assert_eq!(body[2], store(1, 0u32, local(1)));
    assert_eq!(body[3], store(1, 1u32, local(1)));
    assert_eq!(body[4], store(1, 2u32, false));
    assert_eq!(body[5], store(1, 3u32, local(1)));
    assert_eq!(body[6], kernel.body[6]);
    assert_eq!(body[7], store(1, 5u32, true));
}

// ---------------------------------------------------------------------------------------
// unroll
// ---------------------------------------------------------------------------------------

fn loop_kernel(start: impl Into<E>, end: impl Into<E>, step: u32) -> Kernel {
    let (start, end) = (start.into(), end.into());
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    k.build(|b| {
        b.for_("k", start, end, step, |b, kk| {
            b.store(out, kk.clone().cast(U32) & 15u32, 1u32);
        });
    })
    .unwrap()
}

fn unrolled_counters(kernel: &Kernel) -> Option<Vec<Scalar>> {
    let body = body_after(kernel, |k| passes::unroll(k, 8, 512));
    if matches!(body.first(), Some(Stmt::For { .. })) {
        return None;
    }
    let mut values = Vec::new();
    for pair in body.chunks(2) {
        match pair {
            [Stmt::Let {
                local: LocalId(0),
                value: Expr::Lit(v),
            }, Stmt::Store { .. }] => values.push(*v),
            other => panic!("unexpected unrolled body {other:?}"),
        }
    }
    Some(values)
}

#[test]
fn unroll_four_trips() {
    let kernel = loop_kernel(0u32, 4u32, 1);
    let body = body_after(&kernel, |k| passes::unroll(k, 8, 512));
    let Stmt::For {
        body: loop_body, ..
    } = &kernel.body[0]
    else {
        panic!()
    };
    let mut expected = Vec::new();
    for v in 0..4u32 {
        expected.push(let_(0, v));
        expected.extend(loop_body.iter().cloned());
    }
    assert_eq!(body, expected);
}

#[test]
fn unroll_counter_values() {
    use Scalar::{I32 as Si, U32 as Su};
    assert_eq!(
        unrolled_counters(&loop_kernel(0u32, 4u32, 1))
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        unrolled_counters(&loop_kernel(1u32, 10u32, 3)),
        Some(vec![Su(1), Su(4), Su(7)])
    );
    assert_eq!(
        unrolled_counters(&loop_kernel(-5i32, 3i32, 4)),
        Some(vec![Si(-5), Si(-1)])
    );
    assert_eq!(unrolled_counters(&loop_kernel(5u32, 5u32, 1)), Some(vec![]));
    assert_eq!(
        unrolled_counters(&loop_kernel(7i32, -3i32, 1)),
        Some(vec![])
    );
    assert_eq!(
        unrolled_counters(&loop_kernel(0u32, 8u32, 1)).map(|v| v.len()),
        Some(8)
    );
    // Too many trips.
    assert_eq!(unrolled_counters(&loop_kernel(0u32, 9u32, 1)), None);
    assert_eq!(unrolled_counters(&loop_kernel(0u32, 1000u32, 1)), None);
    assert_eq!(unrolled_counters(&loop_kernel(0u32, u32::MAX, 1)), None);
    // A counter stepping past the type's maximum ends the loop (no wrapping).
    assert_eq!(
        unrolled_counters(&loop_kernel(u32::MAX - 5, u32::MAX, 4)),
        Some(vec![Su(u32::MAX - 5), Su(u32::MAX - 1)])
    );
    assert_eq!(
        unrolled_counters(&loop_kernel(i32::MAX - 2, i32::MAX, 2)),
        Some(vec![Si(i32::MAX - 2)])
    );
    // Non-literal bounds.
    assert_eq!(unrolled_counters(&loop_kernel(0u32, global_id(0), 1)), None);
}

#[test]
fn unroll_respects_node_budget_and_nests() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 64, Access::Write);
    let kernel = k
        .build(|b| {
            b.for_("a", 0u32, 4u32, 1, |b, a| {
                b.for_("b", 0u32, 4u32, 1, |b, bb| {
                    b.store(out, a.clone() * 4u32 + bb, 1u32);
                });
            });
        })
        .unwrap();
    // Inner body: store(1) + index (5) + value (1) = 7 nodes; 4 trips: 4 * (1 + 1 + 1 + 7).
    let body = body_after(&kernel, |k| passes::unroll(k, 8, 512));
    assert_eq!(body.len(), 4 * (1 + 4 * 2));
    assert!(!body.iter().any(|s| matches!(s, Stmt::For { .. })));
    // A tight node budget unrolls the inner loop only.
    let body = body_after(&kernel, |k| passes::unroll(k, 8, 40));
    assert_eq!(body.len(), 1);
    let Stmt::For { body: inner, .. } = &body[0] else {
        panic!()
    };
    assert_eq!(inner.len(), 8);
    // 1000 trips: untouched.
    let kernel = loop_kernel(0u32, 1000u32, 1);
    assert_eq!(
        body_after(&kernel, |k| passes::unroll(k, 8, 512)),
        kernel.body
    );
}

// ---------------------------------------------------------------------------------------
// optimize
// ---------------------------------------------------------------------------------------

#[test]
fn optimize_folds_an_unrolled_accumulation() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let acc = b.var("acc", 0u32);
            b.for_("k", 0u32, 4u32, 1, |b, kk| {
                b.assign(acc, acc.get() + kk * 2u32);
            });
            b.store(out, 0u32, acc.get());
        })
        .unwrap();
    let body = body_after(&kernel, |k| passes::optimize(k, &PassOptions::default()));
    assert_eq!(body.last(), Some(&store(0, 0u32, 12u32)));
}

#[test]
fn optimize_handles_triangular_loops() {
    let mut k = KernelBuilder::new("t", [1, 1, 1]);
    let out = k.buffer("out", U32, 16, Access::Write);
    let kernel = k
        .build(|b| {
            let acc = b.var("acc", 0u32);
            b.for_("a", 0u32, 3u32, 1, |b, a| {
                b.for_("b", 0u32, a, 1, |b, bb| {
                    b.assign(acc, acc.get() + bb + 1u32);
                });
            });
            b.store(out, 0u32, acc.get());
        })
        .unwrap();
    let body = body_after(&kernel, |k| passes::optimize(k, &PassOptions::default()));
    // a = 1: +1; a = 2: +1 +2 -> 4
    assert_eq!(body.last(), Some(&store(0, 0u32, 4u32)));
    assert!(!body.iter().any(|s| matches!(s, Stmt::For { .. })));
}

#[test]
fn optimize_unrolls_loops_with_barriers_and_shared_memory() {
    use kernelc_ir::interp::{run, Arg, HostBuffer};
    let mut k = KernelBuilder::new("t", [4, 1, 1]);
    let input = k.buffer("in", F32, 4, Access::Read);
    let out = k.buffer("out", F32, 12, Access::Write);
    let s = k.shared("s", F32, 4);
    let kernel = k
        .build(|b| {
            let lid = b.let_("lid", local_id(0));
            b.for_("k", 0u32, 3u32, 1, |b, kk| {
                b.store(s, lid.clone(), input.at(lid.clone()) * kk.clone().cast(F32));
                b.barrier();
                b.store(
                    out,
                    lid.clone() * 3u32 + kk,
                    s.at((lid.clone() + 1u32) & 3u32),
                );
                b.barrier();
            });
        })
        .unwrap();
    let optimized = passes::optimize(&kernel, &PassOptions::default());
    validate(&optimized).unwrap();
    assert!(!optimized.body.iter().any(|s| matches!(s, Stmt::For { .. })));
    let args = || {
        vec![
            Arg::Buffer(HostBuffer::from_f32(&[1.5, -2.0, 0.25, 8.0])),
            Arg::Buffer(HostBuffer::filled(F32, 12, Scalar::f32(f32::NAN))),
        ]
    };
    let (mut before, mut after) = (args(), args());
    run(&kernel, [1, 1, 1], &mut before).unwrap();
    run(&optimized, [1, 1, 1], &mut after).unwrap();
    assert_eq!(before, after);
    let written = before[1].as_buffer().unwrap();
    assert!(written.data.iter().all(|v| !v.to_f64().is_nan()));
}

// ---------------------------------------------------------------------------------------
// Property test: optimizing never changes what the interpreter computes
// ---------------------------------------------------------------------------------------

mod fuzz {
    use super::*;
    use kernelc_ir::interp::{run, Arg, HostBuffer, InterpError};
    use kernelc_ir::{
        BinaryOp, Builtin, CmpOp, LocalDecl, MathFn, Param, ScalarType, Type, UnaryOp,
    };
    use proptest::prelude::*;

    const TYPES: [ScalarType; 8] = ScalarType::ALL;
    /// Length of every input buffer.
    const IN_LEN: u32 = 8;
    /// Workgroup size and grid (x): 2 x 2 = 4 invocations.
    const WG: u32 = 2;
    const GRID: u32 = 2;
    const INVOCATIONS: u32 = WG * GRID;
    /// Output slots per invocation: 16 for stores anywhere in the body, then one per
    /// scalar type for the final values of the mutable locals.
    const SLOTS: u32 = 16;
    const STRIDE: u32 = SLOTS + TYPES.len() as u32;
    const EXPR_DEPTH: u32 = 4;

    fn type_index(s: ScalarType) -> u32 {
        TYPES.iter().position(|&t| t == s).unwrap_or(0) as u32
    }
    fn in_buf(s: ScalarType) -> Memory {
        Memory::Buffer(ParamId(type_index(s)))
    }
    fn param(s: ScalarType) -> ParamId {
        ParamId(TYPES.len() as u32 + type_index(s))
    }
    fn out_buf(s: ScalarType) -> Memory {
        Memory::Buffer(ParamId(2 * TYPES.len() as u32 + type_index(s)))
    }

    /// Interesting constants first; the rest are random bit patterns.
    fn special(s: ScalarType, k: usize) -> Option<Scalar> {
        use Scalar as S;
        let f32s = [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            0.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            1e-45,
            f32::MAX,
            2.5,
            -3.75,
            1e10,
        ];
        let f64s = [
            0.0f64,
            -0.0,
            1.0,
            -1.0,
            0.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            2.5,
            -3.75,
            1e300,
        ];
        let f16s: [u16; 13] = [
            0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x7E00, 0x7C00, 0xFC00, 0x0001, 0x7BFF, 0x4500,
            0x7C01, 0xC900,
        ];
        let bf16s: [u16; 13] = [
            0x0000, 0x8000, 0x3F80, 0xBF80, 0x3F00, 0x7FC0, 0x7F80, 0xFF80, 0x0001, 0x7F7F, 0x40A0,
            0x7F81, 0xC120,
        ];
        let i32s = [0, 1, -1, 2, 3, 7, 31, 32, i32::MIN, i32::MAX, -8, 16];
        let u32s = [0, 1, 2, 3, 7, 31, 32, 0x8000_0000, u32::MAX, 8, 255, 4];
        let i64s = [0, 1, -1, 2, 63, 64, i64::MIN, i64::MAX, 1 << 40, -7, 3];
        match s {
            ScalarType::Bool => [S::Bool(false), S::Bool(true)].get(k).copied(),
            ScalarType::I32 => i32s.get(k).map(|&v| S::I32(v)),
            ScalarType::U32 => u32s.get(k).map(|&v| S::U32(v)),
            ScalarType::I64 => i64s.get(k).map(|&v| S::I64(v)),
            ScalarType::F16 => f16s.get(k).map(|&v| S::F16(v)),
            ScalarType::Bf16 => bf16s.get(k).map(|&v| S::Bf16(v)),
            ScalarType::F32 => f32s.get(k).map(|&v| S::f32(v)),
            ScalarType::F64 => f64s.get(k).map(|&v| S::f64(v)),
        }
    }

    /// A constant of type `s` from two random words: mostly special values.
    fn scalar_from(s: ScalarType, a: u32, b: u32) -> Scalar {
        use Scalar as S;
        if a % 4 != 0 {
            if let Some(v) = special(s, (b % 16) as usize) {
                return v;
            }
        }
        let wide = ((a as u64) << 32) | b as u64;
        match s {
            ScalarType::Bool => S::Bool(b & 1 == 1),
            ScalarType::I32 => S::I32(b as i32),
            ScalarType::U32 => S::U32(b),
            ScalarType::I64 => S::I64(wide as i64),
            ScalarType::F16 => S::F16(b as u16),
            ScalarType::Bf16 => S::Bf16(b as u16),
            ScalarType::F32 => S::F32(b),
            ScalarType::F64 => S::F64(wide),
        }
    }

    fn lit_of(ty: Type, s: Scalar) -> Expr {
        if ty.lanes == 1 {
            Expr::Lit(s)
        } else {
            Expr::Splat {
                lanes: ty.lanes,
                arg: Box::new(Expr::Lit(s)),
            }
        }
    }

    fn bin(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        }
    }

    fn global_id0() -> Expr {
        Expr::Builtin {
            builtin: Builtin::GlobalId,
            axis: 0,
        }
    }

    /// Builds well-typed random kernels from a stream of choices (each choice picks one
    /// option; an exhausted stream always picks the first, simplest option, so shrinking
    /// the stream shrinks the kernel).
    struct Gen<'a> {
        choices: &'a [u32],
        pos: usize,
        locals: Vec<LocalDecl>,
        /// Locals readable here (definitely assigned), with their types.
        scope: Vec<(LocalId, Type)>,
        /// One mutable local per scalar type.
        mutables: Vec<(LocalId, ScalarType)>,
    }

    impl<'a> Gen<'a> {
        fn new(choices: &'a [u32]) -> Self {
            Gen {
                choices,
                pos: 0,
                locals: Vec::new(),
                scope: Vec::new(),
                mutables: Vec::new(),
            }
        }

        fn raw(&mut self) -> u32 {
            let v = self.choices.get(self.pos).copied().unwrap_or(0);
            self.pos += 1;
            v
        }

        fn pick(&mut self, n: u32) -> u32 {
            self.raw() % n.max(1)
        }

        fn scalar_type(&mut self) -> ScalarType {
            // f32 and u32 first: the most common types in real kernels.
            const ORDER: [ScalarType; 8] = [
                ScalarType::F32,
                ScalarType::U32,
                ScalarType::I32,
                ScalarType::Bool,
                ScalarType::F64,
                ScalarType::F16,
                ScalarType::I64,
                ScalarType::Bf16,
            ];
            ORDER[self.pick(8) as usize]
        }

        fn lanes(&mut self) -> u8 {
            if self.pick(2) == 0 {
                2
            } else {
                4
            }
        }

        fn lit(&mut self, s: ScalarType) -> Scalar {
            let (a, b) = (self.raw(), self.raw());
            // An exhausted stream gives (0, 0): a random-bits zero.
            scalar_from(s, a, b)
        }

        fn declare(&mut self, ty: Type, mutable: bool) -> LocalId {
            let id = LocalId(self.locals.len() as u32);
            self.locals.push(LocalDecl {
                name: format!("v{}", id.0),
                ty,
                mutable,
            });
            id
        }

        // -- expressions ----------------------------------------------------------------

        fn expr(&mut self, ty: Type, depth: u32) -> Expr {
            if depth == 0 {
                return self.leaf(ty);
            }
            let d = depth - 1;
            let s = ty.scalar;
            match self.pick(14) {
                0 | 1 => self.leaf(ty),
                2 => self.unary(ty, d),
                3 | 4 => self.binary(ty, d),
                5 => self.binary_with_literal(ty, d),
                6 | 7 if s == ScalarType::Bool => self.cmp(ty, d),
                6 | 7 => self.math(ty, d),
                8 => {
                    let cond_ty = if ty.lanes > 1 && self.pick(2) == 1 {
                        ty.with_scalar(ScalarType::Bool)
                    } else {
                        Type::BOOL
                    };
                    Expr::Select {
                        cond: Box::new(self.expr(cond_ty, d)),
                        on_true: Box::new(self.expr(ty, d)),
                        on_false: Box::new(self.expr(ty, d)),
                    }
                }
                9 => {
                    let from = self.scalar_type();
                    Expr::Cast {
                        to: s,
                        arg: Box::new(self.expr(ty.with_scalar(from), d)),
                    }
                }
                10 if s != ScalarType::Bool => {
                    let same: Vec<ScalarType> = TYPES
                        .iter()
                        .copied()
                        .filter(|t| *t != ScalarType::Bool && t.size_bytes() == s.size_bytes())
                        .collect();
                    let from = same[self.pick(same.len() as u32) as usize];
                    Expr::Bitcast {
                        to: s,
                        arg: Box::new(self.expr(ty.with_scalar(from), d)),
                    }
                }
                11 if ty.lanes == 1 => {
                    let lanes = self.lanes();
                    let lane = self.pick(lanes as u32) as u8;
                    Expr::Extract {
                        arg: Box::new(self.expr(Type::vector(s, lanes), d)),
                        lane,
                    }
                }
                11 => self.build_vector(ty, d),
                12 => self.load(ty, d),
                _ => self.leaf(ty),
            }
        }

        fn build_vector(&mut self, ty: Type, d: u32) -> Expr {
            let scalar = Type::scalar(ty.scalar);
            if self.pick(2) == 0 {
                Expr::Splat {
                    lanes: ty.lanes,
                    arg: Box::new(self.expr(scalar, d)),
                }
            } else {
                Expr::Vector((0..ty.lanes).map(|_| self.expr(scalar, d)).collect())
            }
        }

        fn leaf(&mut self, ty: Type) -> Expr {
            let s = ty.scalar;
            let candidates: Vec<LocalId> = self
                .scope
                .iter()
                .filter(|(_, t)| *t == ty)
                .map(|(l, _)| *l)
                .collect();
            match self.pick(7) {
                0 | 1 => {
                    let c = self.lit(s);
                    lit_of(ty, c)
                }
                2 | 3 if !candidates.is_empty() => {
                    Expr::Local(candidates[self.pick(candidates.len() as u32) as usize])
                }
                4 if ty.lanes == 1 => Expr::Param(param(s)),
                5 => self.load(ty, 0),
                6 if ty == Type::U32 => {
                    let builtin = [Builtin::GlobalId, Builtin::LocalId, Builtin::WorkgroupId]
                        [self.pick(3) as usize];
                    Expr::Builtin { builtin, axis: 0 }
                }
                _ if ty.lanes > 1 => Expr::Splat {
                    lanes: ty.lanes,
                    arg: Box::new(self.leaf(Type::scalar(s))),
                },
                _ => {
                    let c = self.lit(s);
                    Expr::Lit(c)
                }
            }
        }

        /// A load of `ty` from the input buffer of its scalar type, at an index that is
        /// mostly in bounds and aligned (sometimes not: the error must survive).
        fn load(&mut self, ty: Type, d: u32) -> Expr {
            let lanes = ty.lanes;
            let mask = (IN_LEN - 1) & !(lanes as u32 - 1);
            let raw = if d == 0 {
                match self.pick(3) {
                    0 => global_id0(),
                    1 => Expr::Lit(Scalar::U32(self.raw())),
                    _ => {
                        let locals: Vec<LocalId> = self
                            .scope
                            .iter()
                            .filter(|(_, t)| *t == Type::U32)
                            .map(|(l, _)| *l)
                            .collect();
                        match locals.len() {
                            0 => global_id0(),
                            n => Expr::Local(locals[self.pick(n as u32) as usize]),
                        }
                    }
                }
            } else {
                self.expr(Type::U32, d.min(2))
            };
            let index = match (raw, self.pick(10)) {
                // A literal index must be valid as it stands.
                (Expr::Lit(Scalar::U32(v)), _) => Expr::Lit(Scalar::U32(v & mask)),
                (raw, 0) => raw,
                (raw, _) => bin(BinaryOp::And, raw, Expr::Lit(Scalar::U32(mask))),
            };
            Expr::Load {
                mem: in_buf(ty.scalar),
                index: Box::new(index),
                lanes,
            }
        }

        fn unary(&mut self, ty: Type, d: u32) -> Expr {
            let s = ty.scalar;
            let op = match s {
                ScalarType::Bool | ScalarType::U32 => UnaryOp::Not,
                ScalarType::I32 | ScalarType::I64 if self.pick(2) == 0 => UnaryOp::Not,
                _ => UnaryOp::Neg,
            };
            Expr::Unary {
                op,
                arg: Box::new(self.expr(ty, d)),
            }
        }

        fn binary_op(&mut self, s: ScalarType) -> BinaryOp {
            use BinaryOp as B;
            let ops: &[BinaryOp] = if s == ScalarType::Bool {
                &[B::And, B::Or, B::Xor]
            } else if s.is_float() {
                &[B::Add, B::Sub, B::Mul, B::Div, B::Rem]
            } else {
                &[
                    B::Add,
                    B::Mul,
                    B::Sub,
                    B::And,
                    B::Or,
                    B::Xor,
                    B::Shl,
                    B::Shr,
                    B::Div,
                    B::Rem,
                ]
            };
            ops[self.pick(ops.len() as u32) as usize]
        }

        fn binary(&mut self, ty: Type, d: u32) -> Expr {
            let op = self.binary_op(ty.scalar);
            let lhs = self.expr(ty, d);
            let rhs = match op {
                BinaryOp::Shl | BinaryOp::Shr => self.shift_amount(ty, d),
                BinaryOp::Div | BinaryOp::Rem if ty.scalar.is_int() && self.pick(4) != 0 => {
                    // Mostly nonzero divisors, so that the rest of the kernel runs too.
                    let one = lit_of(ty, Scalar::one(ty.scalar));
                    bin(BinaryOp::Or, self.expr(ty, d), one)
                }
                _ => self.expr(ty, d),
            };
            bin(op, lhs, rhs)
        }

        fn shift_amount(&mut self, ty: Type, d: u32) -> Expr {
            let amount_ty = ty.with_scalar(ScalarType::U32);
            let bits = ty.scalar.bits();
            match self.pick(4) {
                0 => {
                    let a = self.pick(bits + 4);
                    lit_of(amount_ty, Scalar::U32(a))
                }
                1 => self.expr(amount_ty, d),
                _ => bin(
                    BinaryOp::And,
                    self.expr(amount_ty, d),
                    lit_of(amount_ty, Scalar::U32(bits - 1)),
                ),
            }
        }

        /// `x op c` or `c op x` with an interesting constant: what simplify looks for.
        fn binary_with_literal(&mut self, ty: Type, d: u32) -> Expr {
            let op = self.binary_op(ty.scalar);
            let x = self.expr(ty, d);
            if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
                let amount_ty = ty.with_scalar(ScalarType::U32);
                let a = self.pick(ty.scalar.bits() + 2);
                return bin(op, x, lit_of(amount_ty, Scalar::U32(a)));
            }
            let k = self.pick(6) as usize;
            let c = special(ty.scalar, k).unwrap_or(Scalar::zero(ty.scalar));
            let c = lit_of(ty, c);
            if self.pick(2) == 0 {
                bin(op, x, c)
            } else {
                bin(op, c, x)
            }
        }

        fn cmp(&mut self, ty: Type, d: u32) -> Expr {
            let operand = ty.with_scalar(self.scalar_type());
            let ops: &[CmpOp] = if operand.scalar == ScalarType::Bool {
                &[CmpOp::Eq, CmpOp::Ne]
            } else {
                &[
                    CmpOp::Lt,
                    CmpOp::Eq,
                    CmpOp::Ne,
                    CmpOp::Le,
                    CmpOp::Gt,
                    CmpOp::Ge,
                ]
            };
            let op = ops[self.pick(ops.len() as u32) as usize];
            Expr::Cmp {
                op,
                lhs: Box::new(self.expr(operand, d)),
                rhs: Box::new(self.expr(operand, d)),
            }
        }

        fn math(&mut self, ty: Type, d: u32) -> Expr {
            let s = ty.scalar;
            if s == ScalarType::Bool {
                return self.binary(ty, d);
            }
            let func = if s.is_float() {
                MathFn::ALL[self.pick(MathFn::ALL.len() as u32) as usize]
            } else {
                [MathFn::Abs, MathFn::Min, MathFn::Max][self.pick(3) as usize]
            };
            Expr::Math {
                func,
                args: (0..func.arity()).map(|_| self.expr(ty, d)).collect(),
            }
        }

        /// A scalar or (sometimes) vector type for a value to compute.
        fn value_type(&mut self) -> Type {
            let s = self.scalar_type();
            if self.pick(5) == 0 {
                let lanes = self.lanes();
                Type::vector(s, lanes)
            } else {
                Type::scalar(s)
            }
        }

        // -- statements -----------------------------------------------------------------

        /// `out_T[global_id * STRIDE + slot] = value`.
        fn store(&mut self, ty: Type, slot: u32, value: Expr) -> Stmt {
            let index = bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, global_id0(), Expr::Lit(Scalar::U32(STRIDE))),
                Expr::Lit(Scalar::U32(slot)),
            );
            Stmt::Store {
                mem: out_buf(ty.scalar),
                index,
                value,
            }
        }

        fn block(&mut self, depth: u32, max_len: u32) -> Block {
            let n = self.pick(max_len + 1);
            let scope = self.scope.len();
            let block = (0..n).map(|_| self.stmt(depth)).collect();
            self.scope.truncate(scope);
            block
        }

        fn stmt(&mut self, depth: u32) -> Stmt {
            let kinds = if depth > 0 { 13 } else { 8 };
            match self.pick(kinds) {
                0..=2 => {
                    let i = self.pick(self.mutables.len() as u32) as usize;
                    let (local, s) = self.mutables[i];
                    let value = self.expr(Type::scalar(s), EXPR_DEPTH);
                    Stmt::Assign { local, value }
                }
                3 | 4 => {
                    let ty = self.value_type();
                    let value = self.expr(ty, EXPR_DEPTH);
                    let local = self.declare(ty, false);
                    self.scope.push((local, ty));
                    Stmt::Let { local, value }
                }
                5 | 6 => {
                    let ty = self.value_type();
                    let value = self.expr(ty, EXPR_DEPTH);
                    let slot = self.pick(SLOTS / ty.lanes as u32) * ty.lanes as u32;
                    self.store(ty, slot, value)
                }
                7 if self.pick(8) == 0 => Stmt::Return,
                7 => {
                    let value = self.expr(Type::F32, EXPR_DEPTH);
                    let slot = self.pick(SLOTS);
                    self.store(Type::F32, slot, value)
                }
                8..=10 => Stmt::If {
                    cond: self.expr(Type::BOOL, 3),
                    then_body: self.block(depth - 1, 3),
                    else_body: self.block(depth - 1, 2),
                },
                _ => self.for_loop(depth, None),
            }
        }

        /// A loop, mostly with literal bounds; `body_first` goes first in the body.
        fn for_loop(&mut self, depth: u32, body_first: Option<(LocalId, ScalarType)>) -> Stmt {
            let ty = if self.pick(2) == 0 {
                Type::U32
            } else {
                Type::I32
            };
            let var = self.declare(ty, false);
            let (start, end) = match self.pick(8) {
                // Bounds near the type's maximum: the counter must not wrap.
                0 => {
                    let back = self.pick(12) as i64;
                    let max = if ty == Type::U32 {
                        u32::MAX as i64
                    } else {
                        i32::MAX as i64
                    };
                    (max - back, max - self.pick(3) as i64)
                }
                // Too many trips to unroll.
                1 => {
                    let s = self.pick(4) as i64 - 2;
                    (s, s + 9 + self.pick(8) as i64)
                }
                _ => {
                    let s = self.pick(6) as i64 - 2;
                    (s, s + self.pick(9) as i64 - 1)
                }
            };
            let bound = |v: i64| {
                if ty == Type::U32 {
                    Expr::Lit(Scalar::U32(v.max(0) as u32))
                } else {
                    Expr::Lit(Scalar::I32(v as i32))
                }
            };
            let (start, end) = (bound(start), bound(end));
            // Sometimes a bound computed at run time (not unrolled, not propagated into).
            let end = if self.pick(6) == 0 {
                let e = self.expr(ty, 1);
                if ty == Type::U32 {
                    bin(BinaryOp::And, e, Expr::Lit(Scalar::U32(7)))
                } else {
                    bin(BinaryOp::And, e, Expr::Lit(Scalar::I32(7)))
                }
            } else {
                end
            };
            let step = 1 + self.pick(3);
            let scope = self.scope.len();
            self.scope.push((var, ty));
            let mut body = Vec::new();
            if let Some((acc, s)) = body_first {
                body.push(Stmt::Assign {
                    local: acc,
                    value: self.expr(Type::scalar(s), EXPR_DEPTH),
                });
            }
            body.extend(self.block(depth.saturating_sub(1), 3));
            self.scope.truncate(scope);
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            }
        }

        /// The whole kernel: mutable locals initialised, then `body`, then the final
        /// value of every mutable local stored.
        fn kernel(&mut self, body: impl FnOnce(&mut Self) -> Block) -> Kernel {
            let mut stmts = Vec::new();
            for s in TYPES {
                let value = self.expr(Type::scalar(s), 1);
                let local = self.declare(Type::scalar(s), true);
                self.mutables.push((local, s));
                self.scope.push((local, Type::scalar(s)));
                stmts.push(Stmt::Let { local, value });
            }
            stmts.extend(body(self));
            for (i, (local, s)) in self.mutables.clone().into_iter().enumerate() {
                stmts.push(self.store(Type::scalar(s), SLOTS + i as u32, Expr::Local(local)));
            }
            let mut params = Vec::new();
            for s in TYPES {
                params.push(Param::Buffer {
                    name: format!("in_{s}"),
                    elem: s,
                    len: IN_LEN as u64,
                    access: Access::Read,
                });
            }
            for s in TYPES {
                params.push(Param::Scalar {
                    name: format!("p_{s}"),
                    ty: s,
                });
            }
            for s in TYPES {
                params.push(Param::Buffer {
                    name: format!("out_{s}"),
                    elem: s,
                    len: (INVOCATIONS * STRIDE) as u64,
                    access: Access::Write,
                });
            }
            Kernel {
                name: "fuzz".into(),
                workgroup_size: [WG, 1, 1],
                params,
                shared: Vec::new(),
                locals: std::mem::take(&mut self.locals),
                body: stmts,
            }
        }
    }

    /// Arguments: random inputs (mostly special values), poisoned outputs.
    fn make_args(data: &[u32]) -> Vec<Arg> {
        let mut words = data.iter().copied().cycle().chain(std::iter::repeat(0));
        let mut next = || words.next().unwrap_or(0);
        let mut args = Vec::new();
        for s in TYPES {
            let values = (0..IN_LEN)
                .map(|_| scalar_from(s, next(), next()))
                .collect();
            args.push(Arg::Buffer(HostBuffer::new(s, values)));
        }
        for s in TYPES {
            args.push(Arg::Scalar(scalar_from(s, next(), next())));
        }
        for s in TYPES {
            let poison = scalar_from(s, 0, 0xDEAD_BEEF);
            args.push(Arg::Buffer(HostBuffer::filled(
                s,
                (INVOCATIONS * STRIDE) as usize,
                poison,
            )));
        }
        args
    }

    /// The error without the path of the failing node (which passes legitimately move).
    fn without_path(mut e: InterpError) -> InterpError {
        if let Some(site) = e.site_mut() {
            site.path.clear();
        }
        e
    }

    fn execute(kernel: &Kernel, data: &[u32]) -> (Result<(), InterpError>, Vec<Arg>) {
        let mut args = make_args(data);
        let r = run(kernel, [GRID, 1, 1], &mut args).map_err(without_path);
        (r, args)
    }

    /// Runs `kernel` before and after each pass and `optimize`: same outputs bit for bit,
    /// same error (if any).
    fn check(kernel: &Kernel, data: &[u32]) -> Result<(), TestCaseError> {
        if let Err(e) = validate(kernel) {
            return Err(TestCaseError::fail(format!(
                "generator bug: invalid kernel: {e}\n{kernel}"
            )));
        }
        let expected = execute(kernel, data);
        let opts = PassOptions::default();
        if std::env::var("FUZZ_STATS").is_ok() {
            let o = passes::optimize(kernel, &opts);
            eprintln!(
                "STAT ok={} size={} opt_size={} changed={}",
                expected.0.is_ok(),
                kernelc_ir::block_size(&kernel.body),
                kernelc_ir::block_size(&o.body),
                o != *kernel
            );
            if let Err(e) = &expected.0 {
                eprintln!("ERR {e}");
            }
        }
        let variants: [(&str, Kernel); 5] = [
            ("fold", passes::fold(kernel)),
            ("simplify", passes::simplify(kernel)),
            ("unroll", passes::unroll(kernel, 8, 512)),
            ("fold_simplify", passes::fold_simplify(kernel)),
            ("optimize", passes::optimize(kernel, &opts)),
        ];
        for (name, optimized) in variants {
            if let Err(e) = validate(&optimized) {
                return Err(TestCaseError::fail(format!(
                    "{name} output does not validate: {e}\nbefore:\n{kernel}\nafter:\n{optimized}"
                )));
            }
            let got = execute(&optimized, data);
            if got != expected {
                return Err(TestCaseError::fail(format!(
                    "{name} changed the result\nbefore:\n{kernel}\nafter:\n{optimized}\n\
                     expected: {:?}\ngot: {:?}\nexpected outputs: {:?}\ngot outputs: {:?}",
                    expected.0,
                    got.0,
                    expected.1.iter().skip(2 * TYPES.len()).collect::<Vec<_>>(),
                    got.1.iter().skip(2 * TYPES.len()).collect::<Vec<_>>(),
                )));
            }
        }
        Ok(())
    }

    fn cases(default: u32) -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        ProptestConfig {
            cases,
            ..ProptestConfig::default()
        }
    }

    fn choices() -> impl Strategy<Value = Vec<u32>> {
        proptest::collection::vec(any::<u32>(), 0..400)
    }

    fn input_words() -> impl Strategy<Value = Vec<u32>> {
        proptest::collection::vec(any::<u32>(), 1..64)
    }

    proptest! {
        #![proptest_config(cases(1000))]

        /// One random expression of a random type, stored to the output.
        #[test]
        fn optimize_preserves_expressions(c in choices(), data in input_words()) {
            let mut g = Gen::new(&c);
            let kernel = g.kernel(|g| {
                let lets: Vec<Stmt> = (0..g.pick(4))
                    .map(|_| g.stmt(0))
                    .collect();
                let ty = g.value_type();
                let value = g.expr(ty, EXPR_DEPTH + 1);
                let mut body = lets;
                body.push(g.store(ty, 0, value));
                body
            });
            check(&kernel, &data)?;
        }

        /// A constant-trip loop accumulating into a local, plus whatever else.
        #[test]
        fn optimize_preserves_accumulating_loops(c in choices(), data in input_words()) {
            let mut g = Gen::new(&c);
            let kernel = g.kernel(|g| {
                let i = g.pick(TYPES.len() as u32) as usize;
                let acc = g.mutables[i];
                vec![g.for_loop(2, Some(acc))]
            });
            check(&kernel, &data)?;
        }

        /// Random structured bodies: lets, assignments, stores, ifs, loops, returns.
        #[test]
        fn optimize_preserves_statements(c in choices(), data in input_words()) {
            let mut g = Gen::new(&c);
            let kernel = g.kernel(|g| g.block(3, 6));
            check(&kernel, &data)?;
        }
    }
}
