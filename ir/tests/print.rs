//! The text printer: exact output for a fixed kernel, determinism, parentheses.

use kernelc_ir::builder::*;
use kernelc_ir::print::{print, print_expr};
use kernelc_ir::ScalarType::{F32, I32, U32};
use kernelc_ir::*;

/// A small kernel touching most printed forms.
fn sample() -> Kernel {
    let mut k = KernelBuilder::new("saxpy_tile", [64, 1, 1]);
    let x = k.buffer("x", F32, 1024, Access::Read);
    let y = k.buffer("y", F32, 1024, Access::ReadWrite);
    let alpha = k.scalar("alpha", F32);
    let tile = k.shared("tile", F32, 64);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        let l = f.let_("l", local_id(0));
        f.if_else(
            i.clone().lt(1024u32),
            |f| f.store(tile, l.clone(), x.at(i.clone())),
            |f| f.store(tile, l.clone(), 0.0f32),
        );
        f.barrier();
        let acc = f.var("acc", 0.0f32);
        f.for_("k", 0u32, 64u32, 2, |f, k| {
            let t = tile.at(k.clone());
            f.assign(acc, t.fma(alpha.clone(), acc.get()));
        });
        f.if_(i.clone().ge(1024u32), |f| f.ret());
        let v = f.let_("v", x.load(i.clone() / 4u32 * 4u32, 4));
        f.store(y, i.clone(), (y.at(i.clone()) + acc.get()) * v.lane(3));
        let acc2 = f.var("acc", -1.5f32);
        f.assign(acc2, acc2.get().max(acc.get()));
    })
    .unwrap()
}

const SAMPLE_TEXT: &str = "\
kernel saxpy_tile workgroup(64, 1, 1) {
  param x: buffer<f32, 1024> read
  param y: buffer<f32, 1024> read_write
  param alpha: f32
  shared tile: array<f32, 64>
  let i: u32 = global_id.x
  let l: u32 = local_id.x
  if i < 1024u {
    tile[l] = x[i]
  } else {
    tile[l] = 0.0f
  }
  barrier
  var acc: f32 = 0.0f
  for k: u32 in 0u..64u step 2 {
    acc = fma(tile[k], alpha, acc)
  }
  if i >= 1024u {
    return
  }
  let v: vec4<f32> = x[i / 4u * 4u; 4]
  y[i] = (y[i] + acc) * v.lane3
  var acc_1: f32 = -1.5f
  acc_1 = max(acc_1, acc)
}
";

#[test]
fn fixed_kernel_prints_exactly() {
    assert_eq!(print(&sample()), SAMPLE_TEXT);
}

#[test]
fn display_is_print() {
    let k = sample();
    assert_eq!(k.to_string(), print(&k));
}

#[test]
fn printing_is_deterministic() {
    let a = print(&sample());
    for _ in 0..10 {
        assert_eq!(print(&sample()), a);
    }
    // A clone and a JSON round trip print the same.
    let k = sample();
    assert_eq!(print(&k.clone()), a);
    assert_eq!(print(&from_json(&to_json(&k)).unwrap()), a);
}

/// A kernel with scalar params `a, b, c: f32` (and `n, m: u32`) to print expressions in.
fn ctx() -> (Kernel, E, E, E, E, E) {
    let mut k = KernelBuilder::new("ctx", [1, 1, 1]);
    let a = k.scalar("a", F32);
    let b = k.scalar("b", F32);
    let c = k.scalar("c", F32);
    let n = k.scalar("n", U32);
    let m = k.scalar("m", U32);
    (k.build(|_| {}).unwrap(), a, b, c, n, m)
}

fn p(k: &Kernel, e: E) -> String {
    print_expr(k, e.expr())
}

#[test]
fn precedence_parenthesises_only_where_needed() {
    let (k, a, b, c, n, m) = ctx();
    assert_eq!(p(&k, (a.clone() + b.clone()) * c.clone()), "(a + b) * c");
    assert_eq!(p(&k, a.clone() + b.clone() * c.clone()), "a + b * c");
    assert_eq!(p(&k, a.clone() * b.clone() + c.clone()), "a * b + c");
    assert_eq!(p(&k, c.clone() * (a.clone() + b.clone())), "c * (a + b)");
    // Left associativity: the right operand of an equal-precedence operator needs parens.
    assert_eq!(p(&k, a.clone() - b.clone() - c.clone()), "a - b - c");
    assert_eq!(p(&k, a.clone() - (b.clone() - c.clone())), "a - (b - c)");
    assert_eq!(p(&k, a.clone() / (b.clone() * c.clone())), "a / (b * c)");
    assert_eq!(p(&k, a.clone() / b.clone() * c.clone()), "a / b * c");
    // Unary binds tighter than binary, looser than postfix.
    assert_eq!(p(&k, -(a.clone() + b.clone())), "-(a + b)");
    assert_eq!(p(&k, -a.clone() + b.clone()), "-a + b");
    assert_eq!(p(&k, -(-a.clone())), "-(-a)");
    assert_eq!(p(&k, a.clone() * -1.0f32), "a * -1.0f");
    assert_eq!(p(&k, -E::from(-1.0f32)), "-(-1.0f)");
    // Shifts and bitwise operators follow Rust's order.
    assert_eq!(p(&k, (n.clone() + m.clone()) << 2u32), "n + m << 2u");
    assert_eq!(p(&k, (n.clone() << 2u32) + m.clone()), "(n << 2u) + m");
    assert_eq!(p(&k, n.clone() + (m.clone() << 2u32)), "n + (m << 2u)");
    assert_eq!(p(&k, n.clone() & m.clone() | 1u32), "n & m | 1u");
    assert_eq!(p(&k, n.clone() & (m.clone() | 1u32)), "n & (m | 1u)");
    assert_eq!(p(&k, (n.clone() ^ m.clone()) & 1u32), "(n ^ m) & 1u");
    assert_eq!(p(&k, (n.clone() & 1u32).eq(0u32)), "n & 1u == 0u");
    // Comparisons do not chain.
    assert_eq!(
        p(&k, (n.clone() + 1u32).lt(m.clone() * 2u32)),
        "n + 1u < m * 2u"
    );
    assert_eq!(p(&k, n.clone().lt(m.clone()).eq(true)), "(n < m) == true");
    assert_eq!(p(&k, !n.clone().lt(m.clone())), "!(n < m)");
    // Calls reset precedence inside their parentheses.
    assert_eq!(
        p(&k, (a.clone() + b.clone()).exp() * c.clone()),
        "exp(a + b) * c"
    );
    assert_eq!(
        p(&k, a.clone().fma(b.clone(), c.clone() + 1.0f32)),
        "fma(a, b, c + 1.0f)"
    );
    assert_eq!(
        p(&k, n.clone().lt(m.clone()).select(a.clone(), b.clone())),
        "select(n < m, a, b)"
    );
    assert_eq!(p(&k, (n.clone() + m.clone()).cast(F32)), "cast<f32>(n + m)");
    assert_eq!(p(&k, a.clone().bitcast(U32)), "bitcast<u32>(a)");
    assert_eq!(
        p(&k, vector([a.clone(), b.clone(), c.clone(), a.clone()])),
        "vec4(a, b, c, a)"
    );
    assert_eq!(p(&k, a.clone().splat(2)), "splat2(a)");
    assert_eq!(
        p(&k, (a.clone().splat(4) + b.clone().splat(4)).lane(1)),
        "(splat4(a) + splat4(b)).lane1"
    );
    assert_eq!(p(&k, a.clone().splat(2).lane(0)), "splat2(a).lane0");
    assert_eq!(
        p(&k, workgroup_id(2) * num_workgroups(1)),
        "workgroup_id.z * num_workgroups.y"
    );
}

#[test]
fn literals_carry_type_suffixes() {
    let (k, ..) = ctx();
    let cases: Vec<(E, &str)> = vec![
        (E::from(3u32), "3u"),
        (E::from(-1i32), "-1i"),
        (E::from(2i64), "2i64"),
        (E::from(1.5f32), "1.5f"),
        (E::from(0.25f64), "0.25f64"),
        (E::from(true), "true"),
        (lit(ScalarType::F16, 1.0), "1.0h"),
        (lit(ScalarType::Bf16, 1.0), "1.0bf"),
    ];
    for (e, text) in cases {
        assert_eq!(p(&k, e), text);
    }
}

fn local(name: &str, ty: Type, mutable: bool) -> LocalDecl {
    LocalDecl {
        name: name.into(),
        ty,
        mutable,
    }
}

#[test]
fn repeated_local_names_are_disambiguated() {
    // Hand-written: the builder never repeats a name, but the IR allows it.
    let k = Kernel {
        name: "dups".into(),
        workgroup_size: [1, 1, 1],
        params: vec![Param::Scalar {
            name: "t".into(),
            ty: ScalarType::I32,
        }],
        shared: vec![],
        locals: vec![
            local("acc", Type::I32, true),
            local("acc", Type::I32, false),
            local("x", Type::I32, false),
            local("t", Type::I32, false),
        ],
        fragments: vec![],
        body: vec![
            Stmt::Let {
                local: LocalId(0),
                value: Expr::Lit(Scalar::I32(0)),
            },
            Stmt::Let {
                local: LocalId(1),
                value: Expr::Local(LocalId(0)),
            },
            Stmt::Let {
                local: LocalId(2),
                value: Expr::Local(LocalId(1)),
            },
            Stmt::Let {
                local: LocalId(3),
                value: Expr::Param(ParamId(0)),
            },
            Stmt::Assign {
                local: LocalId(0),
                value: Expr::Local(LocalId(3)),
            },
        ],
    };
    validate(&k).unwrap();
    assert_eq!(
        print(&k),
        "\
kernel dups workgroup(1, 1, 1) {
  param t: i32
  var acc#0: i32 = 0i
  let acc#1: i32 = acc#0
  let x: i32 = acc#1
  let t#3: i32 = t
  acc#0 = t#3
}
"
    );
}

#[test]
fn else_if_chains_odd_names_and_vector_stores() {
    let mut k = KernelBuilder::new("my kernel", [8, 2, 1]);
    let out = k.buffer("out-put", I32, 16, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.if_else(
                i.clone().eq(0u32),
                |f| f.store(out, 0u32, 1i32),
                |f| {
                    f.if_else(
                        i.clone().eq(1u32),
                        |f| f.store(out, 4u32, vector([2i32, 3i32, 4i32, 5i32].map(E::from))),
                        |f| f.ret(),
                    )
                },
            );
            f.if_(i.clone().gt(7u32), |f| {
                f.store(out, 1u32, 0i32);
                f.store(out, 2u32, 0i32);
            });
        })
        .unwrap();
    assert_eq!(
        print(&kernel),
        "\
kernel \"my kernel\" workgroup(8, 2, 1) {
  param \"out-put\": buffer<i32, 16> write
  let i: u32 = local_id.x
  if i == 0u {
    \"out-put\"[0u] = 1i
  } else if i == 1u {
    \"out-put\"[4u; 4] = vec4(2i, 3i, 4i, 5i)
  } else {
    return
  }
  if i > 7u {
    \"out-put\"[1u] = 0i
    \"out-put\"[2u] = 0i
  }
}
"
    );
}

#[test]
fn invalid_kernels_print_too() {
    let k = Kernel {
        name: "bad".into(),
        workgroup_size: [0, 1, 1],
        params: vec![],
        shared: vec![],
        locals: vec![],
        fragments: vec![],
        body: vec![
            Stmt::Assign {
                local: LocalId(9),
                value: Expr::Load {
                    mem: Memory::Shared(SharedId(2)),
                    index: Box::new(Expr::Param(ParamId(5))),
                    lanes: 3,
                },
            },
            Stmt::Store {
                mem: Memory::Buffer(ParamId(1)),
                index: Expr::Builtin {
                    builtin: Builtin::GlobalId,
                    axis: 7,
                },
                value: Expr::Vector(vec![]),
            },
        ],
    };
    assert_eq!(
        print(&k),
        "\
kernel bad workgroup(0, 1, 1) {
  local#9 = shared#2[param#5; 3]
  param#1[global_id.axis7] = vec0()
}
"
    );
}
