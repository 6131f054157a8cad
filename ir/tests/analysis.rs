//! Tests of the value-range analysis: exact ranges on small kernels, and a randomized
//! check that every value the interpreter computes lies in the range the analysis gives.

#![allow(clippy::identity_op, clippy::erasing_op)]

use kernelc_ir::analysis::{Interval, Ranges};
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer};
use kernelc_ir::ScalarType::{I32, U32};
use kernelc_ir::{
    validate, Access, Expr, Kernel, LocalDecl, LocalId, MathFn, Memory, Param, ParamId, Scalar,
    Stmt, Type,
};

fn iv(lo: u64, hi: u64, align: u64) -> Option<Interval> {
    Some(Interval { lo, hi, align })
}

/// Builds a kernel with the body `f` makes and returns the ranges of the expressions
/// `f` returns.
fn ranges_of(wg: [u32; 3], f: impl FnOnce(&mut Body) -> Vec<E>) -> Vec<Option<Interval>> {
    let mut exprs = Vec::new();
    let kb = KernelBuilder::new("k", wg);
    // Expressions may read locals out of their scope: the ranges hold anywhere.
    let kernel = kb.build(|b| exprs = f(b)).expect("valid kernel");
    let ranges = Ranges::of(&kernel);
    exprs.iter().map(|e| ranges.range(e.expr())).collect()
}

#[test]
fn literals_and_local_ids() {
    let r = ranges_of([64, 2, 1], |_| {
        vec![
            E::from(7u32),
            E::from(0u32),
            local_id(0),
            local_id(1),
            local_id(2),
        ]
    });
    assert_eq!(r[0], iv(7, 7, 7));
    assert_eq!(r[1].map(|i| (i.lo, i.hi)), Some((0, 0)));
    assert_eq!(r[1].map(|i| i.align % 4), Some(0));
    assert_eq!(r[2], iv(0, 63, 1));
    assert_eq!(r[3], iv(0, 1, 1));
    assert_eq!(r[4].map(|i| (i.lo, i.hi)), Some((0, 0)));
}

#[test]
fn unknown_sources() {
    let mut kb = KernelBuilder::new("k", [8, 1, 1]);
    let inp = kb.buffer("inp", U32, 16, Access::Read);
    let out = kb.buffer("out", U32, 16, Access::Write);
    let n = kb.scalar("n", U32);
    let mut exprs = Vec::new();
    let kernel = kb
        .build(|b| {
            exprs = vec![
                global_id(0),
                workgroup_id(0),
                num_workgroups(0),
                inp.at(0u32),
                n.clone(),
                lit(kernelc_ir::ScalarType::F32, 1.0),
                E::from(-1i32),
            ];
            for (i, e) in exprs.iter().take(5).enumerate() {
                b.store(out, i as u32, e);
            }
        })
        .expect("valid");
    let ranges = Ranges::of(&kernel);
    for e in &exprs {
        assert_eq!(ranges.range(e.expr()), None, "{:?}", e.expr());
    }
}

#[test]
fn loop_counters_and_gemm_index() {
    // `a_tile[kk * 32u + row0]` with `for kk in 0u..128u step 8`, `row0 = mi * 4u`,
    // `for mi in 0u..8u`.
    let mut got = Vec::new();
    let mut kb = KernelBuilder::new("k", [1, 1, 1]);
    let out = kb.buffer("out", U32, 4096, Access::Write);
    let kernel = kb
        .build(|b| {
            b.for_("kk", 0u32, 128u32, 8, |b, kk| {
                b.for_("mi", 0u32, 8u32, 1, |b, mi| {
                    let row0 = b.let_("row0", mi.clone() * 4u32);
                    let index = kk.clone() * 32u32 + row0.clone();
                    b.store(out, index.clone(), 1u32);
                    got = vec![kk.clone(), mi, row0, index];
                });
            });
        })
        .expect("valid");
    let ranges = Ranges::of(&kernel);
    let r: Vec<_> = got.iter().map(|e| ranges.range(e.expr())).collect();
    assert_eq!(r[0], iv(0, 120, 8));
    assert_eq!(r[1], iv(0, 7, 1));
    assert_eq!(r[2], iv(0, 28, 4));
    assert_eq!(r[3], iv(0, 120 * 32 + 28, 4));
}

#[test]
fn loop_with_nonzero_start_and_bounds_from_locals() {
    let r = ranges_of([1, 1, 1], |b| {
        let lo = b.let_("lo", 6u32);
        let hi = b.let_("hi", lo.clone() * 10u32);
        let mut got = Vec::new();
        b.for_("i", lo, hi, 4, |_, i| got.push(i));
        got
    });
    // 6, 10, 14, ..., 58: multiples of gcd(6, 4) = 2 in [6, 59] -> [6, 58].
    assert_eq!(r[0], iv(6, 58, 2));
}

#[test]
fn nested_lets() {
    let r = ranges_of([64, 1, 1], |b| {
        let a = b.let_("a", local_id(0));
        let c = b.let_("c", a.clone() * 4u32 + 16u32);
        let d = b.let_("d", c.clone() / 4u32);
        let e = b.let_("e", d.clone() % 8u32);
        let f = b.let_("f", c.clone() >> 2u32);
        let g = b.let_("g", a.clone() << 3u32);
        let h = b.let_("h", c.clone() - 16u32);
        vec![a, c, d, e, f, g, h]
    });
    assert_eq!(r[0], iv(0, 63, 1));
    assert_eq!(r[1], iv(16, 268, 4));
    assert_eq!(r[2], iv(4, 67, 1));
    assert_eq!(r[3], iv(0, 7, 1));
    assert_eq!(r[4], iv(4, 67, 1));
    assert_eq!(r[5], iv(0, 504, 8));
    assert_eq!(r[6], iv(0, 252, 4));
}

/// A kernel with hand-made locals (the builder gives each `Let` a fresh local).
fn raw_kernel(locals: Vec<LocalDecl>, body: Vec<Stmt>) -> Kernel {
    let kernel = Kernel {
        name: "k".into(),
        workgroup_size: [16, 1, 1],
        params: vec![Param::Buffer {
            name: "out".into(),
            elem: U32,
            len: 1 << 20,
            access: Access::ReadWrite,
        }],
        shared: vec![],
        locals,
        fragments: vec![],
        body,
    };
    validate(&kernel).expect("valid kernel");
    kernel
}

fn decl(name: &str, ty: Type, mutable: bool) -> LocalDecl {
    LocalDecl {
        name: name.into(),
        ty,
        mutable,
    }
}

fn l(id: u32) -> E {
    E(Expr::Local(LocalId(id)))
}

fn let_(id: u32, value: impl Into<E>) -> Stmt {
    Stmt::Let {
        local: LocalId(id),
        value: value.into().0,
    }
}

fn store(index: impl Into<E>) -> Stmt {
    Stmt::Store {
        mem: Memory::Buffer(ParamId(0)),
        index: index.into().0,
        value: Expr::Lit(Scalar::U32(0)),
    }
}

#[test]
fn several_lets_give_the_hull() {
    // if lid < 4 { let x = 8 } else { let x = lid * 8 + 24 }; later `let x = 40` too.
    let k = raw_kernel(
        vec![decl("x", Type::U32, false)],
        vec![
            Stmt::If {
                cond: local_id(0).lt(4u32).0,
                then_body: vec![let_(0, 8u32), store(l(0))],
                else_body: vec![let_(0, local_id(0) * 8u32 + 24u32), store(l(0))],
            },
            let_(0, 40u32),
            store(l(0)),
        ],
    );
    let r = Ranges::of(&k);
    assert_eq!(r.local(LocalId(0)), iv(8, 15 * 8 + 24, 8));
    assert_eq!(r.range(&l(0).0), iv(8, 144, 8));
}

#[test]
fn cyclic_lets_are_unknown() {
    // let x = 0; for i in 0..4 { let x = x + 1 }; y depends on x.
    let k = raw_kernel(
        vec![
            decl("x", Type::U32, false),
            decl("i", Type::U32, false),
            decl("y", Type::U32, false),
            decl("z", Type::U32, false),
        ],
        vec![
            let_(0, 0u32),
            let_(3, 5u32),
            Stmt::For {
                var: LocalId(1),
                start: Expr::Lit(Scalar::U32(0)),
                end: Expr::Lit(Scalar::U32(4)),
                step: 1,
                body: vec![let_(0, l(0) + 1u32), let_(2, l(0) * 2u32), store(l(2))],
            },
        ],
    );
    let r = Ranges::of(&k);
    assert_eq!(r.local(LocalId(0)), None);
    assert_eq!(r.local(LocalId(2)), None);
    assert_eq!(r.local(LocalId(1)), iv(0, 3, 1));
    assert_eq!(r.local(LocalId(3)), iv(5, 5, 5));
}

#[test]
fn mutable_locals_are_unknown() {
    let r = ranges_of([1, 1, 1], |b| {
        let v = b.var("v", 3u32);
        let w = b.var("w", 0u32);
        b.assign(w, w.get() + 1u32);
        vec![v.get(), w.get(), v.get() % 4u32]
    });
    assert_eq!(r[0], None);
    assert_eq!(r[1], None);
    // `x % 4` is below 4 whatever `x` is.
    assert_eq!(r[2], iv(0, 3, 1));
}

#[test]
fn overflow_is_unknown() {
    let r = ranges_of([64, 1, 1], |b| {
        let a = b.let_("a", local_id(0));
        vec![
            a.clone() * 0x1000_0000u32,       // 63 << 28 wraps
            a.clone() * 0x0400_0000u32,       // 63 << 26 fits
            E::from(u32::MAX) + a.clone(),    // wraps
            a.clone() - 1u32,                 // may go below zero
            (a.clone() + 1u32) - 1u32,        // does not
            a.clone() << 27u32,               // wraps
            a.clone() << local_id(0),         // shift amount up to 63
            a.clone() / local_id(0),          // divisor may be zero
            a.clone() % (local_id(0) + 1u32), // divisor at least 1
            E::from(5u32) - 5u32,             // exactly zero
        ]
    });
    assert_eq!(r[0], None);
    assert_eq!(r[1], iv(0, 63 << 26, 1 << 26));
    assert_eq!(r[2], None);
    assert_eq!(r[3], None);
    assert_eq!(r[4], iv(0, 63, 1));
    assert_eq!(r[5], None);
    assert_eq!(r[6], None);
    assert_eq!(r[7], None);
    assert_eq!(r[8], iv(0, 63, 1));
    assert_eq!(r[9].map(|i| (i.lo, i.hi)), Some((0, 0)));
}

#[test]
fn select_min_max_bits() {
    let r = ranges_of([64, 1, 1], |b| {
        let a = b.let_("a", local_id(0) * 4u32);
        let c = b.let_("c", local_id(0).lt(3u32));
        vec![
            c.clone().select(4u32, 12u32),
            c.clone().select(a.clone(), 300u32),
            a.clone().min(100u32),
            a.clone().max(100u32),
            global_id(0).min(10u32), // unknown u32 clamped
            a.clone() & 15u32,
            global_id(0) & 31u32,
            a.clone() | 3u32,
            global_id(0) >> 28u32,
            E(Expr::Math {
                func: MathFn::Abs,
                args: vec![a.clone().0],
            }),
        ]
    });
    assert_eq!(r[0], iv(4, 12, 4));
    assert_eq!(r[1], iv(0, 300, 4));
    assert_eq!(r[2], iv(0, 100, 4));
    assert_eq!(r[3], iv(100, 252, 4));
    assert_eq!(r[4], iv(0, 10, 1));
    assert_eq!(r[5], iv(0, 12, 4));
    assert_eq!(r[6], iv(0, 31, 1));
    assert_eq!(r[7], iv(3, 255, 1));
    assert_eq!(r[8], iv(0, 15, 1));
    assert_eq!(r[9], iv(0, 252, 4));
}

#[test]
fn i32_while_non_negative() {
    let r = ranges_of([1, 1, 1], |b| {
        let mut got = Vec::new();
        b.for_("i", 0i32, 10i32, 2, |b, i| {
            let j = b.let_("j", i.clone() * 3i32 + 1i32);
            got = vec![
                i.clone().cast(U32),
                j.clone().cast(U32),
                (i.clone() - 1i32).cast(U32), // may be negative
                E::from(-4i32).cast(U32),
                E::from(u32::MAX).cast(I32),
                E::from(7u32).cast(I32).cast(U32),
                i.clone().bitcast(U32),
            ];
        });
        got
    });
    assert_eq!(r[0], iv(0, 8, 2));
    assert_eq!(r[1], iv(1, 25, 1));
    assert_eq!(r[2], None);
    assert_eq!(r[3], None);
    assert_eq!(r[4], None);
    assert_eq!(r[5], iv(7, 7, 7));
    assert_eq!(r[6], iv(0, 8, 2));
}

// ---------------------------------------------------------------------------------------
// Randomized soundness: the interpreter's values always lie in the range
// ---------------------------------------------------------------------------------------

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

/// A random u32 expression over `leaves`, `depth` deep at most.
fn random_expr(rng: &mut Lcg, leaves: &[E], depth: u32) -> E {
    if depth == 0 || rng.below(4) == 0 {
        return match rng.below(3) {
            0 => E::from(match rng.below(4) {
                0 => rng.below(4),
                1 => rng.below(40),
                2 => 1u32 << rng.below(32),
                _ => rng.next(),
            }),
            _ => leaves[rng.below(leaves.len() as u32) as usize].clone(),
        };
    }
    let a = random_expr(rng, leaves, depth - 1);
    let b = random_expr(rng, leaves, depth - 1);
    match rng.below(15) {
        0 | 1 => a + b,
        2 => a - b,
        3 | 4 => a * b,
        5 => a / (b | 1u32),
        6 => a % (b | 1u32),
        7 => a << (b & 31u32),
        8 => a >> (b & 31u32),
        9 => a & b,
        10 => a | b,
        11 => a ^ b,
        12 => a.min(b),
        13 => a.max(b),
        _ => {
            let c = random_expr(rng, leaves, 0);
            a.lt(c).select(b, random_expr(rng, leaves, depth - 1))
        }
    }
}

#[test]
fn random_expressions_stay_in_their_ranges() {
    let mut rng = Lcg(0x5eed);
    let mut checked = 0;
    let mut bounded = 0;
    for case in 0..3000 {
        let wg = 1 + rng.below(4);
        let (s1, e1, st1) = (rng.below(6), rng.below(12), 1 + rng.below(4));
        let (s2, e2, st2) = (rng.below(3), rng.below(9), 1 + rng.below(3));
        let n_iter = (e1.saturating_sub(s1).div_ceil(st1)) * (e2.saturating_sub(s2).div_ceil(st2));
        let cap = (n_iter.max(1) * 3) as u64;
        let mut kb = KernelBuilder::new("k", [wg, 1, 1]);
        let out = kb.buffer("out", U32, cap * wg as u64, Access::ReadWrite);
        let mut exprs = Vec::new();
        let kernel = kb
            .build(|b| {
                let base = b.let_("base", local_id(0) * cap as u32);
                let k = b.var("k", base);
                b.for_("i", s1, e1, st1, |b, i| {
                    let t = random_expr(&mut rng, &[i.clone(), local_id(0)], 2);
                    let t = b.let_("t", t);
                    b.for_("j", s2, e2, st2, |b, j| {
                        let leaves = [i.clone(), j.clone(), t.clone(), local_id(0)];
                        let u = random_expr(&mut rng, &leaves, 3);
                        let u = b.let_("u", u);
                        let v = random_expr(&mut rng, &[u.clone(), j.clone(), t.clone()], 2);
                        let v = b.let_("v", v);
                        for x in [&t, &u, &v] {
                            b.store(out, k.get(), x);
                            b.assign(k, k.get() + 1u32);
                        }
                        exprs = vec![t.clone(), u, v];
                    });
                });
            })
            .expect("valid random kernel");
        let ranges = Ranges::of(&kernel);
        let rs: Vec<_> = exprs.iter().map(|e| ranges.range(e.expr())).collect();
        let aligns: Vec<_> = exprs.iter().map(|e| ranges.alignment(e.expr())).collect();
        let mut args = vec![Arg::Buffer(HostBuffer::zeros(
            U32,
            (cap * wg as u64) as usize,
        ))];
        if run(&kernel, [1, 1, 1], &mut args).is_err() {
            continue; // e.g. a shift overflow: nothing to compare
        }
        checked += 1;
        let data = args[0].as_buffer().expect("buffer").to_u32();
        for inv in 0..wg as usize {
            for it in 0..n_iter as usize {
                for (w, r) in rs.iter().enumerate() {
                    let v = data[inv * cap as usize + it * 3 + w] as u64;
                    assert!(
                        v % aligns[w] == 0,
                        "case {case}: value {v} not a multiple of alignment {} of {:?}\n{kernel}",
                        aligns[w],
                        exprs[w].expr()
                    );
                    let Some(r) = r else { continue };
                    bounded += 1;
                    assert!(
                        r.contains(v),
                        "case {case}: value {v} outside {r:?} of {:?}\n{kernel}",
                        exprs[w].expr()
                    );
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} kernels ran");
    assert!(bounded > 1000, "only {bounded} values were bounded");
}

#[test]
fn bool_and_vectors_are_unknown() {
    let r = ranges_of([4, 1, 1], |b| {
        let c = b.let_("c", local_id(0).lt(2u32));
        let v = b.let_("v", local_id(0).splat(4));
        vec![c.clone().select(1u32, 2u32), v.lane(1)]
    });
    assert_eq!(r[0], iv(1, 2, 1));
    assert_eq!(r[1], None);
    let k = raw_kernel(vec![], vec![]);
    assert_eq!(Ranges::of(&k).range(&Expr::Lit(Scalar::Bool(true))), None);
}

#[test]
fn alignment_of_a_sum_is_a_power_of_two_dividing_both_terms() {
    // A literal's range has `align` 6 (or 29), which is no power of two: taking the
    // smaller of 4 and 6 would call `x * 4 + 6` a multiple of 4.
    let kb = KernelBuilder::new("k", [64, 1, 1]);
    let mut exprs = Vec::new();
    let kernel = kb
        .build(|b| {
            let x = b.let_("x", workgroup_id(0));
            let i = b.let_("i", local_id(0) * 6u32);
            exprs = vec![
                x.clone() * 4u32 + 6u32,
                local_id(0).lt(2u32).select(E::from(4u32), E::from(6u32)),
                i.clone() + x.clone() * 8u32,
                i + 12u32,
                x * 4u32 + 12u32,
            ];
        })
        .expect("valid kernel");
    let ranges = Ranges::of(&kernel);
    let aligns: Vec<u64> = exprs.iter().map(|e| ranges.alignment(e.expr())).collect();
    assert_eq!(aligns, vec![2, 2, 2, 2, 4]);
    assert!(!ranges.access(exprs[0].expr(), 4, u64::MAX).aligned);
    assert!(ranges.access(exprs[4].expr(), 4, u64::MAX).aligned);
}

/// `Kernel::locals_bound_once`: a local whose only write is one `let` (also in a loop
/// body) is; a variable assigned later, a loop counter, and a local two `let`s write
/// (one per branch) are not.
#[test]
fn locals_bound_once_are_those_one_let_writes() {
    let mut names = Vec::new();
    let kb = KernelBuilder::new("k", [1, 1, 1]);
    let mut kernel = kb
        .build(|f| {
            let x = f.let_("x", local_id(0) + 1u32);
            let y = f.var("y", 0u32);
            f.for_("i", 0u32, 4u32, 1, |f, i| {
                let z = f.let_("z", i + x.clone());
                f.assign(y, y.get() + z);
            });
            f.if_(y.get().lt(3u32), |f| {
                f.let_("w", y.get());
            });
            names = vec!["x", "y", "i", "z", "w"];
        })
        .expect("valid kernel");
    let bound = |k: &Kernel| -> Vec<(String, bool)> {
        k.locals
            .iter()
            .zip(k.locals_bound_once())
            .map(|(l, b)| (l.name.clone(), b))
            .collect()
    };
    let want = |name: &str| matches!(name, "x" | "z" | "w");
    for (name, b) in bound(&kernel) {
        assert!(names.contains(&name.as_str()), "{name}");
        assert_eq!(b, want(&name), "{name}");
    }
    // `w` written again by an else branch: two lets.
    let Some(Stmt::If {
        then_body,
        else_body,
        ..
    }) = kernel.body.last_mut()
    else {
        panic!("the if is last: {:?}", kernel.body.last());
    };
    else_body.extend(then_body.iter().cloned());
    validate(&kernel).expect("still valid");
    let w = bound(&kernel).into_iter().find(|(n, _)| n == "w").unwrap();
    assert!(!w.1, "two lets write `w`");
}
