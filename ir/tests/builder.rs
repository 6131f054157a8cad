//! The builder DSL builds exactly the IR it says.

use kernelc_ir::builder::*;
use kernelc_ir::ScalarType::{Bool, F32, I32, U32};
use kernelc_ir::ValidationErrorKind as K;
use kernelc_ir::*;

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn lit_u32(v: u32) -> Expr {
    Expr::Lit(Scalar::U32(v))
}

#[test]
fn vec_add_builds_the_expected_kernel() {
    let n = 1000u32;
    let mut k = KernelBuilder::new("vec_add", [64, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let c = k.buffer("c", F32, n as u64, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().lt(n), |f| {
                f.store(c, i.clone(), a.at(i.clone()) + b.at(i))
            });
        })
        .unwrap();

    let i = LocalId(0);
    let load = |p: u32| Expr::Load {
        mem: Memory::Buffer(ParamId(p)),
        index: bx(Expr::Local(i)),
        lanes: 1,
    };
    let expected = Kernel {
        name: "vec_add".into(),
        workgroup_size: [64, 1, 1],
        params: vec![
            Param::Buffer {
                name: "a".into(),
                elem: F32,
                len: 1000,
                access: Access::Read,
            },
            Param::Buffer {
                name: "b".into(),
                elem: F32,
                len: 1000,
                access: Access::Read,
            },
            Param::Buffer {
                name: "c".into(),
                elem: F32,
                len: 1000,
                access: Access::Write,
            },
        ],
        shared: vec![],
        locals: vec![LocalDecl {
            name: "i".into(),
            ty: Type::U32,
            mutable: false,
        }],
        fragments: vec![],
        body: vec![
            Stmt::Let {
                local: i,
                value: Expr::Builtin {
                    builtin: Builtin::GlobalId,
                    axis: 0,
                },
            },
            Stmt::If {
                cond: Expr::Cmp {
                    op: CmpOp::Lt,
                    lhs: bx(Expr::Local(i)),
                    rhs: bx(lit_u32(1000)),
                },
                then_body: vec![Stmt::Store {
                    mem: Memory::Buffer(ParamId(2)),
                    index: Expr::Local(i),
                    value: Expr::Binary {
                        op: BinaryOp::Add,
                        lhs: bx(load(0)),
                        rhs: bx(load(1)),
                    },
                }],
                else_body: vec![],
            },
        ],
    };
    assert_eq!(kernel, expected);
}

#[test]
fn declarations_get_sequential_ids() {
    let mut k = KernelBuilder::new("decls", [8, 8, 1]);
    let x = k.buffer("x", F32, 16, Access::ReadWrite);
    let s = k.scalar("s", I32);
    let t0 = k.shared("t0", F32, 4);
    let t1 = k.shared("t1", U32, 8);
    assert_eq!(x, Mem(Memory::Buffer(ParamId(0))));
    assert!(matches!(s.expr(), Expr::Param(ParamId(1))));
    assert_eq!(t0, Mem(Memory::Shared(SharedId(0))));
    assert_eq!(t1, Mem(Memory::Shared(SharedId(1))));
    let kernel = k
        .build(|f| {
            let v = f.var("v", s.clone());
            f.for_("j", 0u32, 4u32, 2, |f, j| {
                f.store(t0, j.clone(), x.at(j.clone()));
                f.assign(v, v.get() + 1i32);
            });
            f.barrier();
            f.store(t1, 0u32, 7u32);
            f.ret();
        })
        .unwrap();
    assert_eq!(kernel.workgroup_size, [8, 8, 1]);
    assert_eq!(kernel.shared.len(), 2);
    assert_eq!(kernel.locals.len(), 2);
    assert_eq!(
        kernel.locals[0],
        LocalDecl {
            name: "v".into(),
            ty: Type::I32,
            mutable: true
        }
    );
    assert_eq!(
        kernel.locals[1],
        LocalDecl {
            name: "j".into(),
            ty: Type::U32,
            mutable: false
        }
    );
    assert!(matches!(
        &kernel.body[1],
        Stmt::For { var: LocalId(1), step: 2, body, .. } if body.len() == 2
            && matches!(&body[1], Stmt::Assign { local: LocalId(0), .. })
    ));
    assert!(matches!(kernel.body[2], Stmt::Barrier));
    assert!(matches!(kernel.body[4], Stmt::Return));
}

/// Builds one expression in a context with `x, y: f32`, `n, m: u32` and `b: bool`.
fn ctx() -> (E, E, E, E, E) {
    let mut k = KernelBuilder::new("ctx", [1, 1, 1]);
    (
        k.scalar("x", F32),
        k.scalar("y", F32),
        k.scalar("n", U32),
        k.scalar("m", U32),
        k.scalar("b", Bool),
    )
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: bx(lhs),
        rhs: bx(rhs),
    }
}

#[test]
fn operators_build_binary_and_unary_nodes() {
    let (x, y, n, m, b) = ctx();
    let (xe, ye, ne, me, be) = (
        x.0.clone(),
        y.0.clone(),
        n.0.clone(),
        m.0.clone(),
        b.0.clone(),
    );
    let two = Expr::Lit(Scalar::f32(2.0));
    assert_eq!(
        (x.clone() + y.clone()).0,
        binary(BinaryOp::Add, xe.clone(), ye.clone())
    );
    assert_eq!(
        (x.clone() - y.clone()).0,
        binary(BinaryOp::Sub, xe.clone(), ye.clone())
    );
    assert_eq!((&x * &y).0, binary(BinaryOp::Mul, xe.clone(), ye.clone()));
    assert_eq!(
        (x.clone() / 2.0f32).0,
        binary(BinaryOp::Div, xe.clone(), two.clone())
    );
    // A literal on the left.
    assert_eq!(
        (2.0f32 * x.clone()).0,
        binary(BinaryOp::Mul, two.clone(), xe.clone())
    );
    assert_eq!(
        (1u32 - n.clone()).0,
        binary(BinaryOp::Sub, lit_u32(1), ne.clone())
    );
    assert_eq!(
        (n.clone() % m.clone()).0,
        binary(BinaryOp::Rem, ne.clone(), me.clone())
    );
    assert_eq!(
        (n.clone() & m.clone()).0,
        binary(BinaryOp::And, ne.clone(), me.clone())
    );
    assert_eq!(
        (n.clone() | m.clone()).0,
        binary(BinaryOp::Or, ne.clone(), me.clone())
    );
    assert_eq!(
        (n.clone() ^ m.clone()).0,
        binary(BinaryOp::Xor, ne.clone(), me.clone())
    );
    assert_eq!(
        (n.clone() << 3u32).0,
        binary(BinaryOp::Shl, ne.clone(), lit_u32(3))
    );
    assert_eq!(
        (n.clone() >> 3u32).0,
        binary(BinaryOp::Shr, ne.clone(), lit_u32(3))
    );
    assert_eq!(
        (-x.clone()).0,
        Expr::Unary {
            op: UnaryOp::Neg,
            arg: bx(xe.clone())
        }
    );
    assert_eq!(
        (!b.clone()).0,
        Expr::Unary {
            op: UnaryOp::Not,
            arg: bx(be.clone())
        }
    );
    // Nesting follows Rust's precedence: x + y * 2 is x + (y * 2).
    assert_eq!(
        (x.clone() + y.clone() * 2.0f32).0,
        binary(
            BinaryOp::Add,
            xe.clone(),
            binary(BinaryOp::Mul, ye.clone(), two.clone())
        )
    );
}

#[test]
fn comparisons_build_cmp_nodes() {
    let (x, y, ..) = ctx();
    let cases = [
        (x.clone().lt(y.clone()), CmpOp::Lt),
        (x.clone().le(y.clone()), CmpOp::Le),
        (x.clone().gt(y.clone()), CmpOp::Gt),
        (x.clone().ge(y.clone()), CmpOp::Ge),
        (x.clone().eq(y.clone()), CmpOp::Eq),
        (x.clone().ne(y.clone()), CmpOp::Ne),
    ];
    for (e, op) in cases {
        assert_eq!(
            e.0,
            Expr::Cmp {
                op,
                lhs: bx(x.0.clone()),
                rhs: bx(y.0.clone())
            }
        );
    }
    // A literal right side.
    assert_eq!(
        x.clone().lt(1.5f32).0,
        Expr::Cmp {
            op: CmpOp::Lt,
            lhs: bx(x.0.clone()),
            rhs: bx(Expr::Lit(Scalar::f32(1.5)))
        }
    );
}

#[test]
fn math_methods_and_conversions() {
    let (x, y, n, _, b) = ctx();
    type Method = fn(E) -> E;
    let unary: [(Method, MathFn); 13] = [
        (E::exp, MathFn::Exp),
        (E::exp2, MathFn::Exp2),
        (E::log, MathFn::Log),
        (E::log2, MathFn::Log2),
        (E::sqrt, MathFn::Sqrt),
        (E::rsqrt, MathFn::Rsqrt),
        (E::tanh, MathFn::Tanh),
        (E::erf, MathFn::Erf),
        (E::sin, MathFn::Sin),
        (E::cos, MathFn::Cos),
        (E::floor, MathFn::Floor),
        (E::ceil, MathFn::Ceil),
        (E::round, MathFn::Round),
    ];
    for (method, func) in unary {
        assert_eq!(
            method(x.clone()).0,
            Expr::Math {
                func,
                args: vec![x.0.clone()]
            }
        );
    }
    assert_eq!(
        x.clone().abs().0,
        Expr::Math {
            func: MathFn::Abs,
            args: vec![x.0.clone()]
        }
    );
    for (e, func) in [
        (x.clone().pow(y.clone()), MathFn::Pow),
        (x.clone().min(y.clone()), MathFn::Min),
        (x.clone().max(y.clone()), MathFn::Max),
    ] {
        assert_eq!(
            e.0,
            Expr::Math {
                func,
                args: vec![x.0.clone(), y.0.clone()]
            }
        );
    }
    assert_eq!(
        x.clone().fma(y.clone(), 1.0f32).0,
        Expr::Math {
            func: MathFn::Fma,
            args: vec![x.0.clone(), y.0.clone(), Expr::Lit(Scalar::f32(1.0))]
        }
    );
    assert_eq!(
        n.clone().cast(F32).0,
        Expr::Cast {
            to: F32,
            arg: bx(n.0.clone())
        }
    );
    assert_eq!(
        x.clone().bitcast(U32).0,
        Expr::Bitcast {
            to: U32,
            arg: bx(x.0.clone())
        }
    );
    assert_eq!(
        b.clone().select(x.clone(), y.clone()).0,
        Expr::Select {
            cond: bx(b.0.clone()),
            on_true: bx(x.0.clone()),
            on_false: bx(y.0.clone())
        }
    );
    assert_eq!(
        x.clone().splat(4).lane(3).0,
        Expr::Extract {
            arg: bx(Expr::Splat {
                lanes: 4,
                arg: bx(x.0.clone())
            }),
            lane: 3
        }
    );
    assert_eq!(
        vector([x.clone(), y.clone()]).0,
        Expr::Vector(vec![x.0.clone(), y.0.clone()])
    );
    assert_eq!(lit(F32, 0.5).0, Expr::Lit(Scalar::f32(0.5)));
    assert_eq!(lit(I32, -3.7).0, Expr::Lit(Scalar::I32(-3)));
    assert_eq!(
        local_id(1).0,
        Expr::Builtin {
            builtin: Builtin::LocalId,
            axis: 1
        }
    );
    assert_eq!(
        num_workgroups(2).0,
        Expr::Builtin {
            builtin: Builtin::NumWorkgroups,
            axis: 2
        }
    );
}

#[test]
fn built_math_kernel_validates_and_types() {
    let mut k = KernelBuilder::new("gelu", [64, 1, 1]);
    let x = k.buffer("x", F32, 256, Access::Read);
    let y = k.buffer("y", F32, 256, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().lt(256u32), |f| {
                let v = f.let_("v", x.at(i.clone()));
                let t = f.let_(
                    "t",
                    (0.7978846f32 * (v.clone() + 0.044715f32 * v.clone() * v.clone() * v.clone()))
                        .tanh(),
                );
                let ty = f.type_of(&t);
                assert_eq!(ty, Type::F32);
                f.store(y, i.clone(), 0.5f32 * v * (1.0f32 + t));
            });
        })
        .unwrap();
    validate(&kernel).unwrap();
    assert_eq!(
        kernel.locals.iter().map(|l| l.ty).collect::<Vec<_>>(),
        [Type::U32, Type::F32, Type::F32]
    );
}

#[test]
fn local_names_are_made_unique() {
    let kernel = KernelBuilder::new("names", [1, 1, 1])
        .build(|f| {
            f.let_("x", 1u32);
            f.let_("x", 2u32);
            f.var("x", 3u32);
            f.let_("x_4", 4u32);
            f.for_("x", 0u32, 1u32, 1, |f, _| {
                f.let_("y", 0i32);
            });
            f.let_("y", 1i32);
            f.let_("x", 5u32);
        })
        .unwrap();
    let names: Vec<&str> = kernel.locals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["x", "x_1", "x_2", "x_4", "x_3", "y", "y_1", "x_5"]);
    assert!(kernel.locals[2].mutable);
}

#[test]
fn type_error_is_returned_with_its_path() {
    // f32 + u32 in a let: the builder sees it while typing the value; the error names
    // the node inside the kernel body.
    let mut k = KernelBuilder::new("bad", [64, 1, 1]);
    let x = k.buffer("x", F32, 64, Access::Read);
    let err = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            let v = f.let_("v", x.at(i.clone()));
            f.let_("w", v + i);
        })
        .unwrap_err();
    assert_eq!(err.kernel, "bad");
    assert!(matches!(
        err.kind,
        K::TypeMismatch { ref expected, found: Type::U32, .. } if expected == "f32"
    ));
    assert_eq!(err.path.to_string(), "kernel.body[2].let.value.binary.rhs");
    assert!(err
        .to_string()
        .contains("kernel.body[2].let.value.binary.rhs"));

    // A type error in a store value (not typed by the builder) is the validator's.
    let mut k = KernelBuilder::new("bad", [64, 1, 1]);
    let out = k.buffer("out", F32, 64, Access::Write);
    let err = k
        .build(|f| f.store(out, 0u32, E::from(1u32).min(2.0f32)))
        .unwrap_err();
    assert!(matches!(
        err.kind,
        K::TypeMismatch {
            found: Type::F32,
            ..
        }
    ));
    assert_eq!(
        err.path.to_string(),
        "kernel.body[0].store.value.min.args[1]"
    );
}

#[test]
fn first_builder_error_wins() {
    // The counter's type comes from a start bound that does not type: the builder's own
    // error is reported, not the follow-on bad counter.
    let err = KernelBuilder::new("bad", [1, 1, 1])
        .build(|f| {
            f.for_("i", E::from(1u32) + 1.0f32, 4u32, 1, |_, _| {});
        })
        .unwrap_err();
    assert!(matches!(
        err.kind,
        K::TypeMismatch {
            found: Type::F32,
            ..
        }
    ));
}
