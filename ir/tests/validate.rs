//! The validator: one test per `ValidationErrorKind` variant, each asserting the kind
//! and the path of the offending node; plus kernels that must validate.

use kernelc_ir::builder::*;
use kernelc_ir::ScalarType::{Bool, F32, I32, I64, U32};
use kernelc_ir::ValidationErrorKind as K;
use kernelc_ir::*;

// ---- helpers for hand-written kernels ---------------------------------------------

fn kernel(
    params: Vec<Param>,
    shared: Vec<SharedDecl>,
    locals: Vec<LocalDecl>,
    body: Vec<Stmt>,
) -> Kernel {
    Kernel {
        name: "k".into(),
        workgroup_size: [64, 1, 1],
        params,
        shared,
        locals,
        fragments: vec![],
        body,
    }
}

fn buf(name: &str, elem: ScalarType, len: u64, access: Access) -> Param {
    Param::Buffer {
        name: name.into(),
        elem,
        len,
        access,
    }
}

fn scalar_param(name: &str, ty: ScalarType) -> Param {
    Param::Scalar {
        name: name.into(),
        ty,
    }
}

fn shared(name: &str, elem: ScalarType, len: u32) -> SharedDecl {
    SharedDecl {
        name: name.into(),
        elem,
        len,
        reuses: None,
    }
}

fn local(name: &str, ty: Type, mutable: bool) -> LocalDecl {
    LocalDecl {
        name: name.into(),
        ty,
        mutable,
    }
}

fn lit_u32(v: u32) -> Expr {
    Expr::Lit(Scalar::U32(v))
}

fn lit_f32(v: f32) -> Expr {
    Expr::Lit(Scalar::f32(v))
}

fn gid() -> Expr {
    Expr::Builtin {
        builtin: Builtin::GlobalId,
        axis: 0,
    }
}

fn load(mem: Memory, index: Expr, lanes: u8) -> Expr {
    Expr::Load {
        mem,
        index: Box::new(index),
        lanes,
    }
}

fn let_(l: u32, value: Expr) -> Stmt {
    Stmt::Let {
        local: LocalId(l),
        value,
    }
}

/// The error, with its path as text.
fn fails(k: &Kernel) -> (K, String) {
    let e = validate(k).expect_err("kernel should be rejected");
    assert_eq!(e.kernel, k.name);
    (e.kind.clone(), e.path.to_string())
}

/// A `store(out, gid, value)` kernel with `out: f32[64]` write-only as param 0, and
/// `x: f32[64]` read-only as param 1, around one expression.
fn store_expr(value: Expr) -> Kernel {
    kernel(
        vec![
            buf("out", F32, 64, Access::Write),
            buf("x", F32, 64, Access::Read),
        ],
        vec![],
        vec![],
        vec![Stmt::Store {
            mem: Memory::Buffer(ParamId(0)),
            index: gid(),
            value,
        }],
    )
}

// ---- one test per error kind --------------------------------------------------------

#[test]
fn zero_workgroup_size() {
    let k = KernelBuilder::new("k", [64, 0, 1])
        .build(|_| {})
        .unwrap_err();
    assert!(matches!(k.kind, K::ZeroWorkgroupSize([64, 0, 1])));
    assert_eq!(k.path.to_string(), "kernel.workgroup_size");
}

#[test]
fn zero_length() {
    let k = kernel(
        vec![
            buf("a", F32, 4, Access::Read),
            buf("b", F32, 0, Access::Read),
        ],
        vec![],
        vec![],
        vec![],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::ZeroLength { what: "buffer", ref name } if name == "b"));
    assert_eq!(path, "kernel.params[1]");

    let k = kernel(vec![], vec![shared("tile", F32, 0)], vec![], vec![]);
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::ZeroLength { what: "shared array", ref name } if name == "tile"));
    assert_eq!(path, "kernel.shared[0]");
}

#[test]
fn duplicate_name() {
    let k = kernel(
        vec![buf("a", F32, 4, Access::Read), scalar_param("a", F32)],
        vec![],
        vec![],
        vec![],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::DuplicateName(ref n) if n == "a"));
    assert_eq!(path, "kernel.params[1]");

    // A shared array may not reuse a parameter's name either.
    let k = kernel(
        vec![scalar_param("n", U32)],
        vec![shared("n", F32, 4)],
        vec![],
        vec![],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::DuplicateName(ref n) if n == "n"));
    assert_eq!(path, "kernel.shared[0]");
}

#[test]
fn bad_lanes() {
    // A 3-lane local.
    let k = kernel(
        vec![],
        vec![],
        vec![local("v", Type::vector(F32, 3), false)],
        vec![],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadLanes(3)));
    assert_eq!(path, "kernel.locals[0]");

    // A 3-lane load.
    let k = store_expr(Expr::Extract {
        arg: Box::new(load(Memory::Buffer(ParamId(1)), lit_u32(0), 3)),
        lane: 0,
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadLanes(3)));
    assert_eq!(path, "kernel.body[0].store.value.extract.arg.load");

    // A 3-item vector and a 3-lane splat.
    let k = store_expr(Expr::Extract {
        arg: Box::new(Expr::Vector(vec![lit_f32(1.0), lit_f32(2.0), lit_f32(3.0)])),
        lane: 0,
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadLanes(3)));
    assert_eq!(path, "kernel.body[0].store.value.extract.arg.vector");

    let k = store_expr(Expr::Extract {
        arg: Box::new(Expr::Splat {
            lanes: 8,
            arg: Box::new(lit_f32(1.0)),
        }),
        lane: 0,
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadLanes(8)));
    assert_eq!(path, "kernel.body[0].store.value.extract.arg.splat");
}

#[test]
fn unknown_local() {
    // Read of a local that is not declared.
    let k = store_expr(Expr::Local(LocalId(7)));
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UnknownLocal(7)));
    assert_eq!(path, "kernel.body[0].store.value");

    // Let of one.
    let k = kernel(vec![], vec![], vec![], vec![let_(0, lit_u32(1))]);
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UnknownLocal(0)));
    assert_eq!(path, "kernel.body[0].let");
}

#[test]
fn unknown_param() {
    let k = store_expr(Expr::Binary {
        op: BinaryOp::Add,
        lhs: Box::new(lit_f32(1.0)),
        rhs: Box::new(Expr::Param(ParamId(5))),
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UnknownParam(5)));
    assert_eq!(path, "kernel.body[0].store.value.binary.rhs");

    // Store to a buffer that does not exist.
    let k = kernel(
        vec![],
        vec![],
        vec![],
        vec![Stmt::Store {
            mem: Memory::Buffer(ParamId(2)),
            index: lit_u32(0),
            value: lit_f32(0.0),
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UnknownParam(2)));
    assert_eq!(path, "kernel.body[0].store");
}

#[test]
fn unknown_shared() {
    let k = store_expr(load(Memory::Shared(SharedId(1)), gid(), 1));
    let k = Kernel {
        shared: vec![shared("tile", F32, 64)],
        ..k
    };
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UnknownShared(1)));
    assert_eq!(path, "kernel.body[0].store.value.load");
}

#[test]
fn buffer_used_as_scalar() {
    let k = store_expr(Expr::Binary {
        op: BinaryOp::Mul,
        lhs: Box::new(Expr::Param(ParamId(1))),
        rhs: Box::new(lit_f32(2.0)),
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BufferUsedAsScalar(ref n) if n == "x"));
    assert_eq!(path, "kernel.body[0].store.value.binary.lhs");
}

#[test]
fn scalar_used_as_buffer() {
    let k = kernel(
        vec![scalar_param("alpha", F32)],
        vec![],
        vec![],
        vec![Stmt::Store {
            mem: Memory::Buffer(ParamId(0)),
            index: lit_u32(0),
            value: lit_f32(1.0),
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::ScalarUsedAsBuffer(ref n) if n == "alpha"));
    assert_eq!(path, "kernel.body[0].store");

    // And as a load.
    let k = store_expr(load(Memory::Buffer(ParamId(2)), lit_u32(0), 1));
    let k = Kernel {
        params: [k.params, vec![scalar_param("alpha", F32)]].concat(),
        ..k
    };
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::ScalarUsedAsBuffer(ref n) if n == "alpha"));
    assert_eq!(path, "kernel.body[0].store.value.load");
}

#[test]
fn bad_axis() {
    let mut k = KernelBuilder::new("k", [64, 1, 1]);
    let out = k.buffer("out", U32, 64, Access::Write);
    let e = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(out, i, workgroup_id(3));
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::BadAxis(3)));
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value");
}

#[test]
fn type_mismatch() {
    // f32 + u32.
    let mut k = KernelBuilder::new("k", [64, 1, 1]);
    let x = k.buffer("x", F32, 64, Access::Read);
    let out = k.buffer("out", F32, 64, Access::Write);
    let e = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), x.at(i.clone()) + i);
        })
        .unwrap_err();
    assert!(matches!(
        e.kind,
        K::TypeMismatch { ref expected, found: Type::U32, .. } if expected == "f32"
    ));
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value.binary.rhs");

    // Storing a u32 into an f32 buffer.
    let k = store_expr(gid());
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::TypeMismatch {
            found: Type::U32,
            ..
        }
    ));
    assert_eq!(path, "kernel.body[0].store.value");

    // A local given a value of another type.
    let k = kernel(
        vec![],
        vec![],
        vec![local("x", Type::F32, false)],
        vec![let_(0, lit_u32(1))],
    );
    let (kind, path) = fails(&k);
    assert!(
        matches!(kind, K::TypeMismatch { ref expected, found: Type::U32, .. } if expected == "f32")
    );
    assert_eq!(path, "kernel.body[0].let.value");

    // A non-bool if condition and an f32 index.
    let k = kernel(
        vec![],
        vec![],
        vec![],
        vec![Stmt::If {
            cond: lit_u32(1),
            then_body: vec![],
            else_body: vec![],
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::TypeMismatch {
            found: Type::U32,
            ..
        }
    ));
    assert_eq!(path, "kernel.body[0].if.cond");

    let k = store_expr(load(Memory::Buffer(ParamId(1)), lit_f32(0.0), 1));
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::TypeMismatch {
            found: Type::F32,
            ..
        }
    ));
    assert_eq!(path, "kernel.body[0].store.value.load.index");
}

#[test]
fn bad_operand() {
    // bool + bool.
    let k = kernel(
        vec![],
        vec![],
        vec![local("b", Type::BOOL, false)],
        vec![let_(
            0,
            Expr::Binary {
                op: BinaryOp::Add,
                lhs: Box::new(Expr::Lit(Scalar::Bool(true))),
                rhs: Box::new(Expr::Lit(Scalar::Bool(false))),
            },
        )],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadOperand { ref op, ty: Type::BOOL } if op == "+"));
    assert_eq!(path, "kernel.body[0].let.value.binary.lhs");

    // exp of an integer, via the builder.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let out = kb.buffer("out", F32, 64, Access::Write);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), i.exp());
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::BadOperand { ref op, ty: Type::U32 } if op == "exp"));
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value.exp.args[0]");

    // Negating an unsigned integer.
    let k = kernel(
        vec![],
        vec![],
        vec![local("n", Type::U32, false)],
        vec![let_(
            0,
            Expr::Unary {
                op: UnaryOp::Neg,
                arg: Box::new(lit_u32(1)),
            },
        )],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadOperand { ref op, ty: Type::U32 } if op == "neg"));
    assert_eq!(path, "kernel.body[0].let.value.unary");

    // Ordering booleans.
    let k = kernel(
        vec![],
        vec![],
        vec![local("b", Type::BOOL, false)],
        vec![let_(
            0,
            Expr::Cmp {
                op: CmpOp::Lt,
                lhs: Box::new(Expr::Lit(Scalar::Bool(true))),
                rhs: Box::new(Expr::Lit(Scalar::Bool(false))),
            },
        )],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadOperand { ref op, ty: Type::BOOL } if op == "<"));
    assert_eq!(path, "kernel.body[0].let.value.cmp.lhs");
}

#[test]
fn wrong_arity() {
    let k = store_expr(Expr::Math {
        func: MathFn::Fma,
        args: vec![lit_f32(1.0), lit_f32(2.0)],
    });
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::WrongArity {
            func: "fma",
            expected: 3,
            found: 2
        }
    ));
    assert_eq!(path, "kernel.body[0].store.value.fma");
}

#[test]
fn storage_only_type() {
    use kernelc_ir::ScalarType::{I8, U16, U8};
    // A narrow element loads as its value type and stores from it.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", U8, 64, Access::Read);
    let out = kb.buffer("out", I8, 64, Access::Write);
    kb.build(|f| {
        let i = f.let_("i", global_id(0));
        let v = f.let_("v", x.at(i.clone()).cast(I32) - 3i32);
        f.store(out, i, v);
    })
    .unwrap();

    // Storing a u32 into i8 memory is a type mismatch naming the value type.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", U8, 64, Access::Read);
    let out = kb.buffer("out", I8, 64, Access::Write);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), x.at(i));
        })
        .unwrap_err();
    assert!(
        matches!(&e.kind, K::TypeMismatch { expected, found: Type::U32, .. } if expected.starts_with("i32")),
        "{e}"
    );

    // Narrow types are not value types: a cast to one, a local, a scalar parameter and
    // a shared array of one are refused, each at its node.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let out = kb.buffer("out", U32, 64, Access::Write);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), i.cast(U8));
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::StorageOnlyType { ty: U8, .. }), "{e}");
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value.cast");
    assert!(e.to_string().contains("a load yields u32"), "{e}");

    let k = kernel(
        vec![Param::Scalar {
            name: "s".into(),
            ty: U16,
        }],
        vec![],
        vec![],
        vec![],
    );
    let e = validate(&k).unwrap_err();
    assert!(matches!(e.kind, K::StorageOnlyType { ty: U16, .. }), "{e}");
    assert_eq!(e.path.to_string(), "kernel.params[0]");

    let k = kernel(
        vec![],
        vec![SharedDecl {
            name: "sh".into(),
            elem: I8,
            len: 4,
            reuses: None,
        }],
        vec![],
        vec![],
    );
    let e = validate(&k).unwrap_err();
    assert_eq!(e.path.to_string(), "kernel.shared[0]");

    let k = kernel(
        vec![],
        vec![],
        vec![LocalDecl {
            name: "l".into(),
            ty: Type::scalar(U8),
            mutable: false,
        }],
        vec![],
    );
    let e = validate(&k).unwrap_err();
    assert!(matches!(e.kind, K::StorageOnlyType { ty: U8, .. }), "{e}");
    assert_eq!(e.path.to_string(), "kernel.locals[0]");
}

#[test]
fn bitcast_width() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", F32, 64, Access::Read);
    let out = kb.buffer("out", I64, 64, Access::Write);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), x.at(i).bitcast(I64));
        })
        .unwrap_err();
    assert!(matches!(
        e.kind,
        K::BitcastWidth {
            from: Type::F32,
            to: I64
        }
    ));
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value.bitcast");

    // bool has no bit layout to reinterpret.
    let k = kernel(
        vec![],
        vec![],
        vec![local("b", Type::BOOL, false)],
        vec![let_(
            0,
            Expr::Bitcast {
                to: Bool,
                arg: Box::new(lit_u32(1)),
            },
        )],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::BitcastWidth {
            from: Type::U32,
            to: Bool
        }
    ));
    assert_eq!(path, "kernel.body[0].let.value.bitcast");
}

#[test]
fn lane_out_of_range() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", F32, 64, Access::Read);
    let out = kb.buffer("out", F32, 64, Access::Write);
    let e = kb
        .build(|f| {
            let v = f.let_("v", x.load(0u32, 2));
            f.store(out, 0u32, v.lane(2));
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::LaneOutOfRange { lane: 2, lanes: 2 }));
    assert_eq!(e.path.to_string(), "kernel.body[1].store.value.extract");

    // Lane 0 of a scalar is not a lane either.
    let k = store_expr(Expr::Extract {
        arg: Box::new(lit_f32(1.0)),
        lane: 0,
    });
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::LaneOutOfRange { lane: 0, lanes: 1 }));
    assert_eq!(path, "kernel.body[0].store.value.extract");
}

#[test]
fn load_from_write_only() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let out = kb.buffer("out", F32, 64, Access::Write);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(out, i.clone(), out.at(i) + 1.0f32);
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::LoadFromWriteOnly(ref n) if n == "out"));
    assert_eq!(
        e.path.to_string(),
        "kernel.body[1].store.value.binary.lhs.load"
    );
}

#[test]
fn store_to_read_only() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", F32, 64, Access::Read);
    let e = kb
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().lt(64u32), |f| f.store(x, i, 0.0f32));
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::StoreToReadOnly(ref n) if n == "x"));
    assert_eq!(e.path.to_string(), "kernel.body[1].if.then[0].store");
}

#[test]
fn assign_to_immutable() {
    let k = kernel(
        vec![],
        vec![],
        vec![local("n", Type::U32, false)],
        vec![
            let_(0, lit_u32(1)),
            Stmt::Assign {
                local: LocalId(0),
                value: lit_u32(2),
            },
        ],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::AssignToImmutable(ref n) if n == "n"));
    assert_eq!(path, "kernel.body[1].assign");
}

#[test]
fn use_before_assign() {
    // Read before its let.
    let k = kernel(
        vec![],
        vec![],
        vec![local("a", Type::U32, false), local("b", Type::U32, false)],
        vec![let_(1, Expr::Local(LocalId(0))), let_(0, lit_u32(1))],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UseBeforeAssign(ref n) if n == "a"));
    assert_eq!(path, "kernel.body[0].let.value");

    // Given a value in one branch only, then read after the if.
    let k = kernel(
        vec![buf("out", U32, 64, Access::Write)],
        vec![],
        vec![local("a", Type::U32, true)],
        vec![
            Stmt::If {
                cond: Expr::Cmp {
                    op: CmpOp::Lt,
                    lhs: Box::new(gid()),
                    rhs: Box::new(lit_u32(3)),
                },
                then_body: vec![let_(0, lit_u32(1))],
                else_body: vec![],
            },
            Stmt::Store {
                mem: Memory::Buffer(ParamId(0)),
                index: Expr::Local(LocalId(0)),
                value: lit_u32(0),
            },
        ],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UseBeforeAssign(ref n) if n == "a"));
    assert_eq!(path, "kernel.body[1].store.index");

    // Given a value only inside a loop body (which may run zero times).
    let k = kernel(
        vec![buf("out", U32, 64, Access::Write)],
        vec![],
        vec![local("i", Type::U32, false), local("a", Type::U32, false)],
        vec![
            Stmt::For {
                var: LocalId(0),
                start: lit_u32(0),
                end: lit_u32(4),
                step: 1,
                body: vec![let_(1, Expr::Local(LocalId(0)))],
            },
            Stmt::Store {
                mem: Memory::Buffer(ParamId(0)),
                index: lit_u32(0),
                value: Expr::Local(LocalId(1)),
            },
        ],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::UseBeforeAssign(ref n) if n == "a"));
    assert_eq!(path, "kernel.body[1].store.value");
}

#[test]
fn bad_loop_counter() {
    // An f32 counter (the builder takes the counter's type from `start`).
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| f.for_("t", 0.0f32, 1.0f32, 1, |_, _| {}))
        .unwrap_err();
    assert!(matches!(e.kind, K::BadLoopCounter(ref n) if n == "t"));
    assert_eq!(e.path.to_string(), "kernel.body[0].for");

    // A mutable counter.
    let k = kernel(
        vec![],
        vec![],
        vec![local("i", Type::U32, true)],
        vec![Stmt::For {
            var: LocalId(0),
            start: lit_u32(0),
            end: lit_u32(4),
            step: 1,
            body: vec![],
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::BadLoopCounter(ref n) if n == "i"));
    assert_eq!(path, "kernel.body[0].for");
}

#[test]
fn zero_step() {
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| f.for_("i", 0u32, 8u32, 0, |_, _| {}))
        .unwrap_err();
    assert!(matches!(e.kind, K::ZeroStep));
    assert_eq!(e.path.to_string(), "kernel.body[0].for");
}

#[test]
fn loop_counter_written() {
    let k = kernel(
        vec![],
        vec![],
        vec![local("i", Type::I32, false)],
        vec![Stmt::For {
            var: LocalId(0),
            start: Expr::Lit(Scalar::I32(0)),
            end: Expr::Lit(Scalar::I32(4)),
            step: 1,
            body: vec![Stmt::If {
                cond: Expr::Lit(Scalar::Bool(true)),
                then_body: vec![let_(0, Expr::Lit(Scalar::I32(3)))],
                else_body: vec![],
            }],
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(kind, K::LoopCounterWritten(ref n) if n == "i"));
    assert_eq!(path, "kernel.body[0].for");
}

#[test]
fn index_out_of_bounds() {
    // A shared array indexed at its length.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let tile = kb.shared("tile", F32, 256);
    let e = kb.build(|f| f.store(tile, 256u32, 0.0f32)).unwrap_err();
    assert!(matches!(
        e.kind,
        K::IndexOutOfBounds { ref memory, index: 256, len: 256 } if memory == "tile"
    ));
    assert_eq!(e.path.to_string(), "kernel.body[0].store.index");

    // The last index is fine.
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let tile = kb.shared("tile", F32, 256);
    kb.build(|f| f.store(tile, 255u32, 0.0f32)).unwrap();

    // A buffer load past the end.
    let k = store_expr(load(Memory::Buffer(ParamId(1)), lit_u32(64), 1));
    let (kind, path) = fails(&k);
    assert!(
        matches!(kind, K::IndexOutOfBounds { ref memory, index: 64, len: 64 } if memory == "x")
    );
    assert_eq!(path, "kernel.body[0].store.value.load.index");

    // A vector load whose last lane is past the end.
    let k = kernel(
        vec![buf("x", F32, 66, Access::Read)],
        vec![],
        vec![local("v", Type::vector(F32, 4), false)],
        vec![let_(0, load(Memory::Buffer(ParamId(0)), lit_u32(64), 4))],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::IndexOutOfBounds {
            index: 64,
            len: 66,
            ..
        }
    ));
    assert_eq!(path, "kernel.body[0].let.value.load.index");
}

#[test]
fn unaligned_vector_access() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let x = kb.buffer("x", F32, 64, Access::Read);
    let e = kb
        .build(|f| {
            f.let_("v", x.load(2u32, 4));
        })
        .unwrap_err();
    assert!(matches!(
        e.kind,
        K::UnalignedVectorAccess { ref memory, index: 2, lanes: 4 } if memory == "x"
    ));
    assert_eq!(e.path.to_string(), "kernel.body[0].let.value.load.index");

    // A vector store too.
    let k = kernel(
        vec![buf("out", F32, 64, Access::Write)],
        vec![],
        vec![],
        vec![Stmt::Store {
            mem: Memory::Buffer(ParamId(0)),
            index: lit_u32(6),
            value: Expr::Splat {
                lanes: 4,
                arg: Box::new(lit_f32(0.0)),
            },
        }],
    );
    let (kind, path) = fails(&k);
    assert!(matches!(
        kind,
        K::UnalignedVectorAccess {
            index: 6,
            lanes: 4,
            ..
        }
    ));
    assert_eq!(path, "kernel.body[0].store.index");
}

#[test]
fn non_uniform_barrier_under_local_id_condition() {
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| {
            let l = f.let_("l", local_id(0));
            f.if_(l.lt(3u32), |f| f.barrier());
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(_)));
    assert_eq!(e.path.to_string(), "kernel.body[1].if.then[0]");

    // Through a local derived from the id, in the else branch.
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| {
            let g = f.let_("g", global_id(0) / 2u32);
            let odd = f.let_("odd", (g & 1u32).eq(1u32));
            f.if_else(odd, |_| {}, |f| f.barrier());
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(_)));
    assert_eq!(e.path.to_string(), "kernel.body[2].if.else[0]");
}

#[test]
fn non_uniform_barrier_after_divergent_return() {
    let mut kb = KernelBuilder::new("k", [64, 1, 1]);
    let tile = kb.shared("tile", F32, 64);
    let e = kb
        .build(|f| {
            let l = f.let_("l", local_id(0));
            f.if_(l.clone().ge(32u32), |f| f.ret());
            f.store(tile, l, 1.0f32);
            f.barrier();
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(why) if why.contains("returned")));
    assert_eq!(e.path.to_string(), "kernel.body[3]");
}

#[test]
fn non_uniform_barrier_in_loops() {
    // Loop bounds that differ between invocations.
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| {
            f.for_("i", 0u32, local_id(0), 1, |f, _| f.barrier());
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(_)));
    assert_eq!(e.path.to_string(), "kernel.body[0].for.body[0]");

    // A divergent return late in the body reaches the barrier early in the next
    // iteration.
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| {
            let l = f.let_("l", local_id(0));
            f.for_("i", 0u32, 4u32, 1, |f, i| {
                f.barrier();
                f.if_(l.clone().eq(i), |f| f.ret());
            });
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(_)));
    assert_eq!(e.path.to_string(), "kernel.body[1].for.body[0]");

    // A local that becomes non-uniform in a loop and later guards a barrier.
    let e = KernelBuilder::new("k", [64, 1, 1])
        .build(|f| {
            let n = f.var("n", 0u32);
            f.for_("i", 0u32, 4u32, 1, |f, _| {
                f.if_(n.get().gt(2u32), |f| f.barrier());
                f.assign(n, local_id(0));
            });
        })
        .unwrap_err();
    assert!(matches!(e.kind, K::NonUniformBarrier(_)));
    assert_eq!(e.path.to_string(), "kernel.body[1].for.body[0].if.then[0]");
}

// ---- kernels that must validate --------------------------------------------------------

/// The classic shared-memory tree reduction: barriers in uniform flow, divergent work
/// between them.
#[test]
fn tree_reduction_validates() {
    let n = 256u32;
    let mut kb = KernelBuilder::new("reduce_sum", [n, 1, 1]);
    let x = kb.buffer("x", F32, 4096, Access::Read);
    let out = kb.buffer("out", F32, 16, Access::Write);
    let tile = kb.shared("tile", F32, n);
    let k = kb
        .build(|f| {
            let l = f.let_("l", local_id(0));
            let g = f.let_("g", global_id(0));
            f.store(tile, l.clone(), x.at(g));
            f.barrier();
            let mut s = n / 2;
            while s > 0 {
                f.if_(l.clone().lt(s), |f| {
                    f.store(tile, l.clone(), tile.at(l.clone()) + tile.at(l.clone() + s));
                });
                f.barrier();
                s /= 2;
            }
            f.if_(l.eq(0u32), |f| f.store(out, workgroup_id(0), tile.at(0u32)));
        })
        .unwrap();
    validate(&k).unwrap();
}

#[test]
fn barrier_in_uniform_loop_validates() {
    let mut kb = KernelBuilder::new("tiled", [64, 1, 1]);
    let x = kb.buffer("x", F32, 64 * 64, Access::Read);
    let counts = kb.buffer("counts", U32, 4, Access::Read);
    let out = kb.buffer("out", F32, 64, Access::Write);
    let steps = kb.scalar("steps", U32);
    let tile = kb.shared("tile", F32, 64);
    kb.build(|f| {
        let l = f.let_("l", local_id(0));
        let acc = f.var("acc", 0.0f32);
        // Bounds from a uniform parameter and from a read-only buffer at a uniform index.
        f.for_("t", 0u32, steps.clone(), 1, |f, t| {
            f.store(tile, l.clone(), x.at(t * 64u32 + l.clone()));
            f.barrier();
            f.for_("j", 0u32, counts.at(workgroup_id(0) % 4u32), 1, |f, j| {
                f.assign(acc, acc.get() + tile.at(j));
            });
            f.barrier();
        });
        // A uniform early return is fine too.
        f.if_(steps.clone().eq(0u32), |f| f.ret());
        f.barrier();
        f.store(out, l, acc.get());
    })
    .unwrap();
}

#[test]
fn loop_counters_and_definite_assignment_validate() {
    // An i32 counter with a step, lets re-run in a loop body, a mutable local assigned
    // in both branches.
    let mut kb = KernelBuilder::new("k", [1, 1, 1]);
    let out = kb.buffer("out", I32, 8, Access::ReadWrite);
    kb.build(|f| {
        let v = f.var("v", 0i32);
        f.for_("i", 0i32, 8i32, 3, |f, i| {
            let sq = f.let_("sq", i.clone() * i.clone());
            f.if_else(
                sq.clone().gt(4i32),
                |f| f.assign(v, sq),
                |f| f.assign(v, -1i32),
            );
            f.store(out, i.cast(U32), v.get());
        });
    })
    .unwrap();
}

#[test]
fn every_variant_is_covered() {
    // Exhaustive match: adding a variant to ValidationErrorKind fails to compile here
    // until a test for it is added above.
    fn covered(k: &K) -> &'static str {
        match k {
            K::ZeroWorkgroupSize(_) => "zero_workgroup_size",
            K::ZeroLength { .. } => "zero_length",
            K::DuplicateName(_) => "duplicate_name",
            K::BadLanes(_) => "bad_lanes",
            K::UnknownLocal(_) => "unknown_local",
            K::UnknownParam(_) => "unknown_param",
            K::UnknownShared(_) => "unknown_shared",
            K::BufferUsedAsScalar(_) => "buffer_used_as_scalar",
            K::ScalarUsedAsBuffer(_) => "scalar_used_as_buffer",
            K::BadAxis(_) => "bad_axis",
            K::TypeMismatch { .. } => "type_mismatch",
            K::BadOperand { .. } => "bad_operand",
            K::WrongArity { .. } => "wrong_arity",
            K::BitcastWidth { .. } => "bitcast_width",
            K::LaneOutOfRange { .. } => "lane_out_of_range",
            K::LoadFromWriteOnly(_) => "load_from_write_only",
            K::StoreToReadOnly(_) => "store_to_read_only",
            K::AssignToImmutable(_) => "assign_to_immutable",
            K::UseBeforeAssign(_) => "use_before_assign",
            K::BadLoopCounter(_) => "bad_loop_counter",
            K::ZeroStep => "zero_step",
            K::LoopCounterWritten(_) => "loop_counter_written",
            K::IndexOutOfBounds { .. } => "index_out_of_bounds",
            K::UnalignedVectorAccess { .. } => "unaligned_vector_access",
            K::StorageOnlyType { .. } => "storage_only_type",
            K::NonUniformBarrier(_) => "non_uniform_barrier_*",
            // Tested in tests/fragments.rs.
            K::UnknownFragment(_) => "unknown_fragment",
            K::BadFragment { .. } => "bad_fragment",
            K::WorkgroupNotWarps { .. } => "workgroup_not_warps",
            K::FragmentUseBeforeAssign(_) => "fragment_use_before_assign",
            K::NonUniformFragment(_) => "non_uniform_fragment",
            // Tested in tests/async_copy.rs.
            K::BadAsyncCopy(_) => "bad_async_copy",
            K::BadSharedReuse { .. } => "bad_shared_reuse",
        }
    }
    assert_eq!(covered(&K::ZeroStep), "zero_step");
}
