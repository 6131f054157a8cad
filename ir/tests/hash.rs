//! The stable content hash: pinned, equal for equal kernels, different for any change.

use kernelc_ir::builder::*;
use kernelc_ir::hash::DOMAIN;
use kernelc_ir::ScalarType::{F32, U32};
use kernelc_ir::*;
use std::collections::HashSet;

/// The fixed kernel whose hash is pinned below. Do not edit it.
fn fixed(name: &str, n: u64, wg: [u32; 3], scale: f32, op: BinaryOp) -> Kernel {
    let mut k = KernelBuilder::new(name, wg);
    let a = k.buffer("a", F32, n, Access::Read);
    let b = k.buffer("b", F32, n, Access::Read);
    let c = k.buffer("c", F32, n, Access::Write);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.if_(i.clone().lt(n as u32), |f| {
            let sum = E(Expr::Binary {
                op,
                lhs: Box::new(a.at(i.clone()).0),
                rhs: Box::new(b.at(i.clone()).0),
            });
            f.store(c, i, sum * scale);
        });
    })
    .unwrap()
}

fn vec_add() -> Kernel {
    fixed("vec_add", 1000, [64, 1, 1], 0.5, BinaryOp::Add)
}

/// The kernel whose hash is pinned, written out by hand (independent of the builder):
/// `c[i] = (a[i] + b[i]) * 0.5f` for `i < 1000u`, with a loop around a
/// barrier, a divergent return and a -0.0 literal.
fn pinned_kernel() -> Kernel {
    let buffer = |name: &str, access| Param::Buffer {
        name: name.into(),
        elem: F32,
        len: 1000,
        access,
    };
    let load = |p| Expr::Load {
        mem: Memory::Buffer(ParamId(p)),
        index: Box::new(Expr::Local(LocalId(0))),
        lanes: 1,
    };
    Kernel {
        name: "vec_add".into(),
        workgroup_size: [64, 1, 1],
        params: vec![
            buffer("a", Access::Read),
            buffer("b", Access::Read),
            buffer("c", Access::Write),
        ],
        shared: vec![],
        locals: vec![
            LocalDecl {
                name: "i".into(),
                ty: Type::U32,
                mutable: false,
            },
            LocalDecl {
                name: "k".into(),
                ty: Type::U32,
                mutable: false,
            },
        ],
        fragments: vec![],
        body: vec![
            Stmt::Let {
                local: LocalId(0),
                value: Expr::Builtin {
                    builtin: Builtin::GlobalId,
                    axis: 0,
                },
            },
            Stmt::For {
                var: LocalId(1),
                start: Expr::Lit(Scalar::U32(0)),
                end: Expr::Lit(Scalar::U32(2)),
                step: 1,
                body: vec![Stmt::Barrier],
            },
            Stmt::If {
                cond: Expr::Cmp {
                    op: CmpOp::Lt,
                    lhs: Box::new(Expr::Local(LocalId(0))),
                    rhs: Box::new(Expr::Lit(Scalar::U32(1000))),
                },
                then_body: vec![Stmt::Store {
                    mem: Memory::Buffer(ParamId(2)),
                    index: Expr::Local(LocalId(0)),
                    value: Expr::Binary {
                        op: BinaryOp::Mul,
                        lhs: Box::new(Expr::Binary {
                            op: BinaryOp::Add,
                            lhs: Box::new(load(0)),
                            rhs: Box::new(load(1)),
                        }),
                        rhs: Box::new(Expr::Lit(Scalar::f32(0.5))),
                    },
                }],
                else_body: vec![Stmt::Return],
            },
            Stmt::Store {
                mem: Memory::Buffer(ParamId(2)),
                index: Expr::Lit(Scalar::U32(0)),
                value: Expr::Lit(Scalar::f32(-0.0)),
            },
        ],
    }
}

/// PINNED: the cache key of `pinned_kernel()` on every machine, in every process.
///
/// Changing this literal means every on-disk cache key changes. That is intended only
/// for a semantic change of the IR or of its serialization (then also bump the version
/// in `kernelc_ir::hash::DOMAIN`), never as a side effect of a refactor. If this test
/// fails, `canonical_json_is_pinned` shows which serialized bytes moved.
const PINNED_HASH: &str = "8d2ecee8d1ca2b0ab5f2f616ebe9c9cd48a805ff7d0f0a50f9e3579f4f884471";

/// The bytes the pinned hash covers (after `DOMAIN`).
const PINNED_JSON: &str = concat!(
    "{\"name\":\"vec_add\",\"workgroup_size\":[64,1,1],\"params\":[{\"kind\":\"buffer\",",
    "\"name\":\"a\",\"elem\":\"f32\",\"len\":1000,\"access\":\"read\"},{\"kind\":\"buffer\",\"name\":\"b\",",
    "\"elem\":\"f32\",\"len\":1000,\"access\":\"read\"},{\"kind\":\"buffer\",\"name\":\"c\",\"elem\":\"f32\",",
    "\"len\":1000,\"access\":\"write\"}],\"shared\":[],\"locals\":[{\"name\":\"i\",\"ty\":{\"scalar\":\"u32\",",
    "\"lanes\":1},\"mutable\":false},{\"name\":\"k\",\"ty\":{\"scalar\":\"u32\",\"lanes\":1},",
    "\"mutable\":false}],\"body\":[{\"let\":{\"local\":0,\"value\":{\"builtin\":{\"builtin\":\"global_id\",",
    "\"axis\":0}}}},{\"for\":{\"var\":1,\"start\":{\"lit\":{\"u32\":0}},\"end\":{\"lit\":{\"u32\":2}},",
    "\"step\":1,\"body\":[\"barrier\"]}},{\"if\":{\"cond\":{\"cmp\":{\"op\":\"lt\",\"lhs\":{\"local\":0},",
    "\"rhs\":{\"lit\":{\"u32\":1000}}}},\"then_body\":[{\"store\":{\"mem\":{\"buffer\":2},",
    "\"index\":{\"local\":0},\"value\":{\"binary\":{\"op\":\"mul\",\"lhs\":{\"binary\":{\"op\":\"add\",",
    "\"lhs\":{\"load\":{\"mem\":{\"buffer\":0},\"index\":{\"local\":0},\"lanes\":1}},\"rhs\":{\"load\":{\"mem\":{\"buffer\":1},",
    "\"index\":{\"local\":0},\"lanes\":1}}}},\"rhs\":{\"lit\":{\"f32\":0.5}}}}}}],\"else_body\":[\"return\"]}},",
    "{\"store\":{\"mem\":{\"buffer\":2},\"index\":{\"lit\":{\"u32\":0}},\"value\":{\"lit\":{\"f32\":-0.0}}}}]}",
);

#[test]
fn hash_of_fixed_kernel_is_pinned() {
    let k = pinned_kernel();
    validate(&k).unwrap();
    assert_eq!(stable_hash(&k).to_hex(), PINNED_HASH);
}

#[test]
fn canonical_json_is_pinned() {
    let json = serde_json::to_string(&pinned_kernel()).unwrap();
    assert_eq!(json, PINNED_JSON);
}

#[test]
fn hash_is_blake3_of_domain_and_compact_json() {
    let k = vec_add();
    let mut bytes = DOMAIN.to_vec();
    bytes.extend(serde_json::to_vec(&k).unwrap());
    assert_eq!(DOMAIN, b"kernelc-ir kernel v1\0");
    assert_eq!(stable_hash(&k).0, *blake3::hash(&bytes).as_bytes());
}

#[test]
fn equal_kernels_hash_equal() {
    let a = vec_add();
    let b = vec_add();
    assert_eq!(a, b);
    assert_eq!(stable_hash(&a), stable_hash(&b));
    assert_eq!(stable_hash(&a), stable_hash(&a.clone()));
    // A JSON round trip is the same kernel.
    assert_eq!(
        stable_hash(&from_json(&to_json(&a)).unwrap()),
        stable_hash(&a)
    );
}

#[test]
fn any_change_changes_the_hash() {
    let base = vec_add();
    let mut variants = vec![
        (
            "literal",
            fixed("vec_add", 1000, [64, 1, 1], 0.25, BinaryOp::Add),
        ),
        (
            "-0.0 vs 0.0",
            fixed("vec_add", 1000, [64, 1, 1], -0.0, BinaryOp::Add),
        ),
        (
            "0.0",
            fixed("vec_add", 1000, [64, 1, 1], 0.0, BinaryOp::Add),
        ),
        (
            "buffer length",
            fixed("vec_add", 1001, [64, 1, 1], 0.5, BinaryOp::Add),
        ),
        (
            "workgroup size",
            fixed("vec_add", 1000, [128, 1, 1], 0.5, BinaryOp::Add),
        ),
        (
            "workgroup axes",
            fixed("vec_add", 1000, [1, 64, 1], 0.5, BinaryOp::Add),
        ),
        ("op", fixed("vec_add", 1000, [64, 1, 1], 0.5, BinaryOp::Sub)),
        (
            "name",
            fixed("vec_sub", 1000, [64, 1, 1], 0.5, BinaryOp::Add),
        ),
    ];
    let mut edit = |what: &'static str, f: &dyn Fn(&mut Kernel)| {
        let mut k = base.clone();
        f(&mut k);
        validate(&k).unwrap();
        variants.push((what, k));
    };
    edit("access mode", &|k| {
        if let Param::Buffer { access, .. } = &mut k.params[0] {
            *access = Access::ReadWrite;
        }
    });
    edit("param name", &|k| {
        if let Param::Buffer { name, .. } = &mut k.params[1] {
            *name = "bb".into();
        }
    });
    edit("local name", &|k| k.locals[0].name = "j".into());
    edit("param order", &|k| k.params.swap(0, 1));
    edit("extra shared array", &|k| {
        k.shared.push(SharedDecl {
            name: "t".into(),
            elem: U32,
            len: 1,
            reuses: None,
        })
    });
    edit("extra barrier", &|k| k.body.push(Stmt::Barrier));

    let base_hash = stable_hash(&base);
    let mut seen = HashSet::from([base_hash]);
    for (what, k) in &variants {
        assert_ne!(k, &base, "{what}: the variant must differ");
        let h = stable_hash(k);
        assert_ne!(h, base_hash, "{what} did not change the hash");
        assert!(seen.insert(h), "{what}: two variants collide");
    }
}

#[test]
fn hex_forms() {
    let h = stable_hash(&vec_add());
    let hex = h.to_hex();
    assert_eq!(hex.len(), 64);
    assert!(hex
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    assert_eq!(h.to_string(), hex);
    assert_eq!(format!("{h:?}"), format!("KernelHash({hex})"));
    assert_eq!(KernelHash::from_hex(&hex), Some(h));
    assert_eq!(KernelHash::from_hex(&hex.to_uppercase()), Some(h));
    assert_eq!(KernelHash::from_hex(&hex[1..]), None);
    assert_eq!(KernelHash::from_hex(&format!("{}g", &hex[1..])), None);
    assert_eq!(KernelHash::from_hex(&"é".repeat(32)), None);
    assert_eq!(KernelHash([0xab; 32]).to_hex(), "ab".repeat(32));
}
