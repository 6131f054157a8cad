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
// loop_budget
// ---------------------------------------------------------------------------------------

/// A kernel summing `0..trips` by `step` into `out[0]`, with the loop nested in one of
/// `outer` trips (which adds its trips to `out[1]`).
fn counting_kernel(trips: u32, step: u32, outer: u32) -> Kernel {
    let mut k = KernelBuilder::new("count", [1, 1, 1]);
    let out = k.buffer("out", U32, 2, Access::Write);
    k.build(|b| {
        let acc = b.var("acc", 0u32);
        let n = b.var("n", 0u32);
        b.for_("o", 0u32, outer, 1, |b, _| {
            b.for_("i", 0u32, trips, step, |b, i| {
                b.assign(acc, acc.get() + i);
                b.assign(n, n.get() + 1u32);
            });
        });
        b.store(out, 0u32, acc.get());
        b.store(out, 1u32, n.get());
    })
    .unwrap()
}

/// wgpu's limit on workgroups per grid axis.
const GRID: [u32; 3] = [65_535; 3];

fn budget(iterations: u64) -> passes::LoopBudget {
    passes::LoopBudget {
        iterations,
        max_workgroups: GRID,
        max_unrolled_nodes: 4096,
    }
}

fn run_counting(kernel: &Kernel) -> Vec<Scalar> {
    use kernelc_ir::interp::{run, Arg, HostBuffer};
    let mut args = vec![Arg::Buffer(HostBuffer::filled(U32, 2, Scalar::U32(7)))];
    run(kernel, [1, 1, 1], &mut args).unwrap();
    args[0].as_buffer().unwrap().data.clone()
}

#[test]
fn loop_budget_unrolls_a_long_loop_under_the_budget() {
    // llvmpipe's case: 90,000 trips against 65,535.
    let kernel = counting_kernel(90_000, 1, 1);
    assert_eq!(passes::worst_case_loop_iterations(&kernel, GRID), 90_001);
    let fitted = passes::fit_loop_budget(&kernel, &budget(65_535)).unwrap();
    validate(&fitted).unwrap();
    assert!(passes::worst_case_loop_iterations(&fitted, GRID) <= 65_535);
    assert_eq!(run_counting(&fitted), run_counting(&kernel));
    // Trip counts that do not divide the factor, a step, and nesting.
    for (trips, step, outer) in [(1001, 1, 7), (1000, 3, 5), (7, 2, 300), (0, 1, 3)] {
        let kernel = counting_kernel(trips, step, outer);
        let fitted = passes::fit_loop_budget(&kernel, &budget(1000)).unwrap();
        validate(&fitted).unwrap();
        assert_eq!(
            run_counting(&fitted),
            run_counting(&kernel),
            "{trips} by {step}, {outer}"
        );
    }
}

#[test]
fn loop_budget_leaves_a_kernel_within_it_alone() {
    let kernel = counting_kernel(1000, 1, 2);
    assert_eq!(
        passes::fit_loop_budget(&kernel, &budget(65_535)).unwrap(),
        kernel
    );
}

#[test]
fn loop_budget_that_cannot_be_met_is_an_error_with_the_bound() {
    let kernel = counting_kernel(10_000_000, 1, 1);
    let e = passes::fit_loop_budget(&kernel, &budget(65_535)).unwrap_err();
    assert_eq!((e.worst_case, e.budget), (10_000_001, 65_535));
    assert!(
        e.after_unrolling > 65_535 && e.after_unrolling < e.worst_case,
        "{e}"
    );
    assert!(e.to_string().contains("10000001 loop iterations"), "{e}");
    // A loop whose end is a parameter may run for as long as the type allows.
    let mut k = KernelBuilder::new("param", [1, 1, 1]);
    let out = k.buffer("out", U32, 1, Access::Write);
    let n = k.scalar("n", U32);
    let kernel = k
        .build(|b| {
            b.for_("i", 0u32, n, 1, |b, i| b.store(out, 0u32, i));
        })
        .unwrap();
    assert_eq!(
        passes::worst_case_loop_iterations(&kernel, GRID),
        u32::MAX as u64
    );
    assert!(passes::fit_loop_budget(&kernel, &budget(65_535)).is_err());
}

// ---------------------------------------------------------------------------------------
// Property test: optimizing never changes what the interpreter computes
// ---------------------------------------------------------------------------------------

mod fuzz {
    use super::*;
    use kernelc_ir::testing::{self, compare_interpreter_runs, Case, GenConfig, InterpRun, Shape};
    use proptest::prelude::*;

    /// Runs the case's kernel before and after each pass and `optimize`: the same
    /// outputs bit for bit, the same error (if any), by the rule for two interpreter
    /// runs (`testing::compare_interpreter_runs`).
    fn check(case: &Case) -> Result<(), TestCaseError> {
        let kernel = &case.kernel;
        if let Err(e) = validate(kernel) {
            return Err(TestCaseError::fail(format!(
                "generator bug: invalid kernel: {e}\n{kernel}"
            )));
        }
        let expected = case.run_interpreter();
        if let Err(e) = expected.outcome() {
            return Err(TestCaseError::fail(format!("generator bug: {e}\n{kernel}")));
        }
        let opts = PassOptions::default();
        if std::env::var("FUZZ_STATS").is_ok() {
            let o = passes::optimize(kernel, &opts);
            eprintln!(
                "STAT ok={} size={} opt_size={} changed={}",
                expected.result.is_ok(),
                kernelc_ir::block_size(&kernel.body),
                kernelc_ir::block_size(&o.body),
                o != *kernel
            );
            if let Err(e) = &expected.result {
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
            let got = InterpRun::new(case, &optimized);
            if let Err(m) = compare_interpreter_runs(&expected, &got) {
                return Err(TestCaseError::fail(format!(
                    "{name} changed the result: {m}\nbefore:\n{kernel}\nafter:\n{optimized}"
                )));
            }
        }
        check_loop_bound(case)?;
        // A budget of two iterations unrolls every loop it can, as far as it can.
        if let Ok(fitted) = passes::fit_loop_budget(kernel, &super::budget(2)) {
            if let Err(e) = validate(&fitted) {
                return Err(TestCaseError::fail(format!(
                    "loop_budget output does not validate: {e}\nbefore:\n{kernel}\nafter:\n{fitted}"
                )));
            }
            let got = InterpRun::new(case, &fitted);
            if let Err(m) = compare_interpreter_runs(&expected, &got) {
                return Err(TestCaseError::fail(format!(
                    "loop_budget changed the result: {m}\nbefore:\n{kernel}\nafter:\n{fitted}"
                )));
            }
        }
        Ok(())
    }

    /// The loop iterations each invocation really runs are within
    /// `worst_case_loop_iterations` for the case's grid.
    fn check_loop_bound(case: &Case) -> Result<(), TestCaseError> {
        let most = testing::most_loop_iterations(&case.kernel, case.grid, &case.args)
            .map_err(TestCaseError::fail)?;
        let bound = passes::worst_case_loop_iterations(&case.kernel, case.grid);
        prop_assert!(
            most <= bound,
            "an invocation ran {most} loop iterations, over the bound {bound}\n{}",
            case.kernel
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(testing::proptest_config(1000))]

        /// One random expression of a random type, stored to the output.
        #[test]
        fn optimize_preserves_expressions(
            case in testing::cases(&GenConfig::full(), Shape::Expression)
        ) {
            check(&case)?;
        }

        /// A loop accumulating into a local, plus whatever else.
        #[test]
        fn optimize_preserves_accumulating_loops(
            case in testing::cases(&GenConfig::full(), Shape::AccumulatingLoop)
        ) {
            check(&case)?;
        }

        /// Random structured bodies: lets, assignments, stores, ifs, loops, returns,
        /// shared memory and barriers.
        #[test]
        fn optimize_preserves_statements(
            case in testing::cases(&GenConfig::full(), Shape::Statements)
        ) {
            check(&case)?;
        }
    }
}
