//! JSON: lossless round trips, typed errors for every kind of bad input, no panics.

use half::{bf16, f16};
use kernelc_ir::builder::*;
use kernelc_ir::json::from_json_slice;
use kernelc_ir::ScalarType::{Bf16, Bool, F16, F32, F64, I32, I64, U32};
use kernelc_ir::ValidationErrorKind as K;
use kernelc_ir::*;
use proptest::prelude::*;

/// A valid kernel that uses every `Expr` and `Stmt` variant, every scalar type, every
/// operator and math function, and the float literals JSON cannot spell.
fn everything() -> Kernel {
    let mut k = KernelBuilder::new("everything", [64, 2, 1]);
    let x = k.buffer("x", F32, 256, Access::Read);
    let out = k.buffer("out", F32, 256, Access::ReadWrite);
    let h = k.buffer("h", F16, 16, Access::Write);
    let hb = k.buffer("hb", Bf16, 16, Access::Write);
    let d = k.buffer("d", F64, 16, Access::Write);
    let l = k.buffer("l", I64, 16, Access::Write);
    let iw = k.buffer("iw", I32, 16, Access::ReadWrite);
    let uw = k.buffer("uw", U32, 16, Access::Write);
    // Every narrow storage type: loaded as u32/i32, stored from them.
    let narrow = ScalarType::NARROW.map(|t| k.buffer(format!("n_{t}"), t, 16, Access::ReadWrite));
    let scale = k.scalar("scale", F32);
    let flag = k.scalar("flag", Bool);
    let tile = k.shared("tile", F32, 64);
    k.build(|f| {
        let g = f.let_("g", global_id(0));
        let lid = f.let_("lid", local_id(0) + local_id(1) * 64u32);
        let wg = f.let_("wg", workgroup_id(2) + num_workgroups(1));
        // Float specials of every width, and integer extremes.
        let specials32 = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.1,
            f32::MIN_POSITIVE,
            1e-45,
            f32::MAX,
        ];
        for (i, v) in specials32.into_iter().enumerate() {
            f.store(out, 128u32 + i as u32, v);
        }
        let specials64 = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.1,
            5e-324,
            f64::MAX,
            std::f64::consts::PI,
        ];
        for (i, v) in specials64.into_iter().enumerate() {
            f.store(d, i as u32, v);
        }
        let specials16 = [
            f16::NAN,
            f16::INFINITY,
            f16::NEG_INFINITY,
            f16::NEG_ZERO,
            f16::MIN_POSITIVE_SUBNORMAL,
            f16::MAX,
        ];
        for (i, v) in specials16.into_iter().enumerate() {
            f.store(h, i as u32, v);
        }
        let specials_bf = [
            bf16::NAN,
            bf16::INFINITY,
            bf16::NEG_INFINITY,
            bf16::NEG_ZERO,
            bf16::MIN_POSITIVE_SUBNORMAL,
            bf16::MAX,
        ];
        for (i, v) in specials_bf.into_iter().enumerate() {
            f.store(hb, i as u32, v);
        }
        f.store(l, 0u32, i64::MIN);
        f.store(l, 1u32, i64::MAX);
        for n in narrow {
            f.store(n, 1u32, n.at(0u32) + n.at(2u32));
        }
        f.store(uw, 0u32, u32::MAX);
        f.store(iw, 0u32, i32::MIN);
        f.store(iw, 1u32, (E::from(u32::MAX).cast(I32) << 1u32) >> 2u32);
        let t = f.let_("t", flag.clone() & true | !E::from(false) ^ flag.clone());
        // Every binary, unary and comparison operator.
        let v = f.var("v", x.at(g.clone()));
        f.assign(
            v,
            (v.get() + scale.clone() - 1.0f32) * 2.0f32 / 3.0f32 % 4.0f32,
        );
        f.assign(v, -v.get());
        let bits = f.let_("bits", v.get().bitcast(U32) & 0x7fffffffu32 | 1u32 ^ 2u32);
        let c = f.let_(
            "c",
            (g.clone().lt(1u32) | g.clone().le(2u32) | g.clone().gt(3u32))
                & (g.clone().ge(4u32) | g.clone().eq(5u32) | g.clone().ne(bits)),
        );
        // Every math function.
        let m = f.var("m", 0.0f32);
        for func in MathFn::ALL {
            let args = vec![v.get(), scale.clone(), E::from(0.5f32)][..func.arity()].to_vec();
            f.assign(
                m,
                m.get()
                    + E(Expr::Math {
                        func,
                        args: args.into_iter().map(E::into_expr).collect(),
                    }),
            );
        }
        // Vectors: loads, construction, splat, extraction, selects, casts.
        let q = f.let_("q", x.load(lid.clone() / 4u32 * 4u32 % 256u32, 4));
        let w = f.let_(
            "w",
            vector([v.get(), m.get(), 1.0f32.into(), q.clone().lane(3)]) + scale.clone().splat(4),
        );
        let p2 = f.let_("p2", vector([w.clone().lane(0), w.clone().lane(1)]));
        let sel = f.let_("sel", c.clone().select(p2.clone().lane(0), p2.lane(1)));
        let wide = f.let_("wide", sel.clone().cast(F64) + wg.cast(F64));
        f.store(d, 8u32, wide);
        f.store(out, g.clone() / 4u32 * 4u32 % 256u32, w);
        // Shared memory, a barrier in uniform flow, a counted loop.
        f.store(tile, lid.clone() % 64u32, sel);
        f.barrier();
        f.for_("k", 0u32, 64u32, 8, |f, k| {
            f.assign(m, m.get() + tile.at(k));
        });
        f.for_("j", -4i32, 4i32, 3, |f, j| {
            f.store(iw, 4u32, j.cast(I32));
        });
        f.if_else(
            t,
            |f| f.store(out, 0u32, m.get()),
            |f| f.if_(c, |f| f.ret()),
        );
        f.if_(g.clone().ge(256u32), |f| f.ret());
        f.store(out, g, m.get().max(0.0f32));
        f.ret();
    })
    .unwrap()
}

#[test]
fn everything_uses_every_variant() {
    let k = everything();
    let mut exprs = std::collections::BTreeSet::new();
    let mut stmts = std::collections::BTreeSet::new();
    let mut scalars = std::collections::BTreeSet::new();
    fn walk_expr(
        e: &Expr,
        exprs: &mut std::collections::BTreeSet<String>,
        scalars: &mut std::collections::BTreeSet<ScalarType>,
    ) {
        let name = format!("{e:?}");
        exprs.insert(name.split(['(', ' ']).next().unwrap_or("").to_string());
        if let Expr::Lit(s) = e {
            scalars.insert(s.ty());
        }
        for c in e.children() {
            walk_expr(c, exprs, scalars);
        }
    }
    fn walk_block(
        b: &[Stmt],
        exprs: &mut std::collections::BTreeSet<String>,
        stmts: &mut std::collections::BTreeSet<String>,
        scalars: &mut std::collections::BTreeSet<ScalarType>,
    ) {
        for s in b {
            let name = format!("{s:?}");
            stmts.insert(name.split(['(', ' ']).next().unwrap_or("").to_string());
            match s {
                Stmt::Let { value, .. } | Stmt::Assign { value, .. } => {
                    walk_expr(value, exprs, scalars)
                }
                Stmt::Store { index, value, .. } => {
                    walk_expr(index, exprs, scalars);
                    walk_expr(value, exprs, scalars);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    walk_expr(cond, exprs, scalars);
                    walk_block(then_body, exprs, stmts, scalars);
                    walk_block(else_body, exprs, stmts, scalars);
                }
                Stmt::For {
                    start, end, body, ..
                } => {
                    walk_expr(start, exprs, scalars);
                    walk_expr(end, exprs, scalars);
                    walk_block(body, exprs, stmts, scalars);
                }
                Stmt::Fragment(op) => {
                    for (_, e) in op.exprs() {
                        walk_expr(e, exprs, scalars);
                    }
                }
                Stmt::AsyncCopy(op) => {
                    for (_, e) in op.exprs() {
                        walk_expr(e, exprs, scalars);
                    }
                }
                Stmt::Return | Stmt::Barrier => {}
            }
        }
    }
    walk_block(&k.body, &mut exprs, &mut stmts, &mut scalars);
    let expected_exprs = [
        "Binary", "Bitcast", "Builtin", "Cast", "Cmp", "Extract", "Lit", "Load", "Local", "Math",
        "Param", "Select", "Splat", "Unary", "Vector",
    ];
    assert_eq!(
        exprs.iter().map(String::as_str).collect::<Vec<_>>(),
        expected_exprs
    );
    assert_eq!(
        stmts.iter().map(String::as_str).collect::<Vec<_>>(),
        ["Assign", "Barrier", "For", "If", "Let", "Return", "Store"]
    );
    // Literals have every value type; buffers every type.
    assert_eq!(scalars.into_iter().collect::<Vec<_>>(), ScalarType::VALUES);
    let elems: std::collections::BTreeSet<ScalarType> =
        k.params
            .iter()
            .map(|p| match p {
                kernelc_ir::Param::Buffer { elem, .. }
                | kernelc_ir::Param::Scalar { ty: elem, .. } => *elem,
            })
            .collect();
    assert_eq!(elems.into_iter().collect::<Vec<_>>(), ScalarType::ALL);
}

#[test]
fn round_trip_is_lossless() {
    let k = everything();
    let text = to_json(&k);
    let back = from_json(&text).unwrap();
    assert_eq!(back, k);
    // Byte-identical on the second trip, and the same content hash.
    assert_eq!(to_json(&back), text);
    assert_eq!(stable_hash(&back), stable_hash(&k));
    // Bytes in, too.
    assert_eq!(from_json_slice(text.as_bytes()).unwrap(), k);
}

/// Every literal of the kernel, in order.
fn literals(k: &Kernel) -> Vec<Scalar> {
    fn expr(e: &Expr, out: &mut Vec<Scalar>) {
        if let Expr::Lit(s) = e {
            out.push(*s);
        }
        for c in e.children() {
            expr(c, out);
        }
    }
    fn block(b: &[Stmt], out: &mut Vec<Scalar>) {
        for s in b {
            match s {
                Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr(value, out),
                Stmt::Store { index, value, .. } => {
                    expr(index, out);
                    expr(value, out);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    expr(cond, out);
                    block(then_body, out);
                    block(else_body, out);
                }
                Stmt::For {
                    start, end, body, ..
                } => {
                    expr(start, out);
                    expr(end, out);
                    block(body, out);
                }
                Stmt::Fragment(op) => op.exprs().into_iter().for_each(|(_, e)| expr(e, out)),
                Stmt::AsyncCopy(op) => op.exprs().into_iter().for_each(|(_, e)| expr(e, out)),
                Stmt::Return | Stmt::Barrier => {}
            }
        }
    }
    let mut out = Vec::new();
    block(&k.body, &mut out);
    out
}

#[test]
fn float_specials_survive() {
    let k = everything();
    let back = from_json(&to_json(&k)).unwrap();
    let lits = literals(&back);
    let has = |s: Scalar| lits.contains(&s);
    // -0.0, compared by bits (Scalar's equality is bitwise).
    assert!(has(Scalar::F32((-0.0f32).to_bits())));
    assert!(has(Scalar::F64((-0.0f64).to_bits())));
    assert!(has(Scalar::F16(f16::NEG_ZERO.to_bits())));
    assert!(has(Scalar::Bf16(bf16::NEG_ZERO.to_bits())));
    assert!(!has(Scalar::F32(0)) || literals(&k).contains(&Scalar::F32(0)));
    // NaN stays NaN; infinities keep their sign.
    let nans = lits
        .iter()
        .filter(|s| s.ty().is_float() && s.to_f64().is_nan())
        .count();
    assert_eq!(nans, 4);
    for ty in [F16, Bf16, F32, F64] {
        assert!(lits
            .iter()
            .any(|s| s.ty() == ty && s.to_f64() == f64::INFINITY));
        assert!(lits
            .iter()
            .any(|s| s.ty() == ty && s.to_f64() == f64::NEG_INFINITY));
    }
    // Extremes and subnormals exactly.
    assert!(has(Scalar::f32(1e-45)));
    assert!(has(Scalar::f32(f32::MAX)));
    assert!(has(Scalar::f64(5e-324)));
    assert!(has(Scalar::f64(f64::MAX)));
    assert!(has(Scalar::I64(i64::MIN)));
    assert!(has(Scalar::I32(i32::MIN)));
    assert!(has(Scalar::U32(u32::MAX)));
}

#[test]
fn floats_that_need_exact_parsing_round_trip() {
    // serde_json's default float parser is off by one ulp on this one; the crate enables
    // `float_roundtrip`.
    let mut kb = KernelBuilder::new("exact", [1, 1, 1]);
    let d = kb.buffer("d", F64, 1, Access::Write);
    let bits = 5983967707106795775u64;
    let k = kb
        .build(|f| f.store(d, 0u32, E(Expr::Lit(Scalar::F64(bits)))))
        .unwrap();
    assert_eq!(
        literals(&from_json(&to_json(&k)).unwrap()),
        [Scalar::U32(0), Scalar::F64(bits)]
    );
}

#[test]
fn nan_payloads_become_the_canonical_nan() {
    // Documented: JSON keeps NaN-ness, not payloads.
    let mut kb = KernelBuilder::new("nan", [1, 1, 1]);
    let out = kb.buffer("out", F32, 1, Access::Write);
    let mut k = kb.build(|f| f.store(out, 0u32, 0.0f32)).unwrap();
    if let Stmt::Store { value, .. } = &mut k.body[0] {
        *value = Expr::Lit(Scalar::F32(0xffc0_1234));
    }
    let back = from_json(&to_json(&k)).unwrap();
    match &back.body[0] {
        Stmt::Store {
            value: Expr::Lit(Scalar::F32(bits)),
            ..
        } => assert!(f32::from_bits(*bits).is_nan()),
        other => panic!("unexpected {other:?}"),
    }
}

fn valid_text() -> String {
    to_json(&everything())
}

/// The everything kernel as a JSON value, edited by `f`, as text.
fn edited(f: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&valid_text()).unwrap();
    f(&mut v);
    v.to_string()
}

#[test]
fn empty_input_is_a_syntax_error() {
    for text in ["", "   ", "\n"] {
        let e = from_json(text).unwrap_err();
        assert!(matches!(e, IrJsonError::Syntax { .. }), "{e:?}");
    }
    let e = from_json("").unwrap_err();
    assert!(
        matches!(e, IrJsonError::Syntax { line: 1, column: 0, ref message } if message.contains("EOF"))
    );
    assert!(
        !e.to_string().contains(" at line 1 column 0"),
        "position not repeated: {e}"
    );
}

#[test]
fn truncated_input_is_a_syntax_error_with_position() {
    let text = valid_text();
    for cut in [1, text.len() / 3, text.len() / 2, text.len() - 1] {
        let e = from_json(&text[..cut]).unwrap_err();
        match e {
            IrJsonError::Syntax { line, .. } => assert!(line >= 1),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // Garbage and trailing characters.
    assert!(matches!(from_json("{]"), Err(IrJsonError::Syntax { .. })));
    assert!(matches!(
        from_json(&(text.clone() + " x")),
        Err(IrJsonError::Syntax { .. })
    ));
    let e = from_json("{\n  \"name\": tru\n}").unwrap_err();
    assert!(
        matches!(e, IrJsonError::Syntax { line: 2..=3, .. }),
        "{e:?}"
    );
}

#[test]
fn wrong_shapes_are_schema_errors() {
    let cases = [
        // Wrong field types.
        edited(|v| v["workgroup_size"] = serde_json::json!("64")),
        edited(|v| v["workgroup_size"] = serde_json::json!([64, 1])),
        edited(|v| v["name"] = serde_json::json!(7)),
        edited(|v| v["params"][0]["len"] = serde_json::json!(-1)),
        edited(|v| v["locals"][0]["ty"]["lanes"] = serde_json::json!(1.5)),
        // Missing and unknown kinds.
        edited(|v| {
            v.as_object_mut().unwrap().remove("body");
        }),
        edited(|v| v["params"][0]["kind"] = serde_json::json!("texture")),
        edited(|v| v["params"][0]["access"] = serde_json::json!("append")),
        edited(|v| v["body"][0] = serde_json::json!("fence")),
        edited(|v| v["body"][0] = serde_json::json!({"let": {"local": 0, "value": {"call": []}}})),
        edited(|v| v["locals"][0]["ty"]["scalar"] = serde_json::json!("f8")),
        // A float literal that is neither a number nor a known special.
        edited(|v| v["body"][3]["store"]["value"]["lit"]["f32"] = serde_json::json!("NaN!")),
        // Not an object at all.
        "[]".to_string(),
        "null".to_string(),
        "42".to_string(),
    ];
    for text in cases {
        let e = from_json(&text).unwrap_err();
        assert!(
            matches!(e, IrJsonError::Schema { .. }),
            "{e:?} for {text:.200}"
        );
    }
    let e = from_json(&edited(|v| {
        v["params"][0]["access"] = serde_json::json!("append")
    }))
    .unwrap_err();
    assert!(e.to_string().contains("unknown variant `append`"), "{e}");
}

#[test]
fn huge_numbers_are_errors_not_panics() {
    // Beyond u64: parsed as a float, which a length is not.
    let e = from_json(&valid_text().replacen("\"len\": 256", "\"len\": 184467440737095516150", 1))
        .unwrap_err();
    assert!(matches!(e, IrJsonError::Schema { .. }), "{e:?}");
    // Beyond u32.
    let e = from_json(&edited(|v| {
        v["workgroup_size"][0] = serde_json::json!(4294967296u64)
    }))
    .unwrap_err();
    assert!(matches!(e, IrJsonError::Schema { .. }), "{e:?}");
    // Beyond f64.
    let e = from_json(&valid_text().replacen("\"len\": 256", "\"len\": 1e999", 1)).unwrap_err();
    assert!(matches!(e, IrJsonError::Syntax { .. }), "{e:?}");
    // A u64 buffer length is fine, however large.
    let k = from_json(&edited(|v| {
        v["params"][0]["len"] = serde_json::json!(u64::MAX)
    }))
    .unwrap();
    assert!(matches!(k.params[0], Param::Buffer { len: u64::MAX, .. }));
    // A 10k-digit number.
    let text = valid_text().replacen(
        "\"len\": 256",
        &format!("\"len\": {}", "9".repeat(10_000)),
        1,
    );
    assert!(from_json(&text).is_err());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // (A struct may also be written as a JSON array, so this fails on its first element.)
    assert!(from_json(&"[".repeat(100_000)).is_err());
    assert!(from_json(&"{\"name\":".repeat(100_000)).is_err());
    let mut e = String::from("{\"lit\":{\"f32\":1.0}}");
    for _ in 0..10_000 {
        e = format!("{{\"unary\":{{\"op\":\"neg\",\"arg\":{e}}}}}");
    }
    let text =
        edited(|v| v["body"][0]["let"]["value"] = serde_json::json!(null)).replacen("null", &e, 1);
    let e = from_json(&text).unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");
}

#[test]
fn ill_typed_kernels_are_invalid() {
    // Well-formed, right shape, but the first let gives a u32 local an f32.
    let text = edited(|v| v["body"][0]["let"]["value"] = serde_json::json!({"lit": {"f32": 1.0}}));
    let e = from_json(&text).unwrap_err();
    match &e {
        IrJsonError::Invalid(ve) => {
            assert!(matches!(
                ve.kind,
                K::TypeMismatch {
                    found: Type::F32,
                    ..
                }
            ));
            assert_eq!(ve.path.to_string(), "kernel.body[0].let.value");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("kernel.body[0].let.value"));

    // Store into a read-only buffer, unknown local, zero workgroup size.
    let text = edited(|v| v["params"][1]["access"] = serde_json::json!("read"));
    assert!(matches!(
        from_json(&text),
        Err(IrJsonError::Invalid(ValidationError {
            kind: K::StoreToReadOnly(_),
            ..
        }))
    ));
    let text = edited(|v| v["body"][0]["let"]["local"] = serde_json::json!(4000));
    assert!(matches!(
        from_json(&text),
        Err(IrJsonError::Invalid(ValidationError {
            kind: K::UnknownLocal(4000),
            ..
        }))
    ));
    let text = edited(|v| v["workgroup_size"][1] = serde_json::json!(0));
    assert!(matches!(
        from_json(&text),
        Err(IrJsonError::Invalid(ValidationError {
            kind: K::ZeroWorkgroupSize(_),
            ..
        }))
    ));
}

#[test]
fn invalid_utf8_bytes_are_syntax_errors() {
    let mut bytes = valid_text().into_bytes();
    // Inside the kernel's name string.
    let at = bytes.windows(10).position(|w| w == b"everything").unwrap();
    bytes[at] = 0xff;
    assert!(matches!(
        from_json_slice(&bytes),
        Err(IrJsonError::Syntax { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        let _ = from_json(&text);
    }

    #[test]
    fn json_like_strings_never_panic(text in r#"[\[\]{}",:0-9a-z_\-. ]{0,200}"#) {
        let _ = from_json(&text);
    }

    #[test]
    fn mutated_valid_json_never_panics(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = valid_text().into_bytes();
        for (at, byte, how) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                2 => { bytes.remove(i); }
                // Swap in JSON punctuation and digits, which reach deeper than noise.
                _ => {
                    const PUNCT: &[u8] = b"{}[]\":,0123456789-.e";
                    bytes[i] = PUNCT[byte as usize % PUNCT.len()];
                }
            }
        }
        if truncate && !bytes.is_empty() {
            let at = cut.index(bytes.len());
            bytes.truncate(at);
        }
        let _ = from_json_slice(&bytes);
        let _ = from_json(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn float_literals_round_trip_exactly(bits64 in any::<u64>(), bits32 in any::<u32>(), bits16 in any::<u16>()) {
        let mut kb = KernelBuilder::new("floats", [1, 1, 1]);
        let d = kb.buffer("d", F64, 1, Access::Write);
        let s = kb.buffer("s", F32, 1, Access::Write);
        let h = kb.buffer("h", F16, 1, Access::Write);
        let b = kb.buffer("b", Bf16, 1, Access::Write);
        let k = kb.build(|f| {
            f.store(d, 0u32, E(Expr::Lit(Scalar::F64(bits64))));
            f.store(s, 0u32, E(Expr::Lit(Scalar::F32(bits32))));
            f.store(h, 0u32, E(Expr::Lit(Scalar::F16(bits16))));
            f.store(b, 0u32, E(Expr::Lit(Scalar::Bf16(bits16))));
        }).unwrap();
        let back = from_json(&to_json(&k)).unwrap();
        for (a, b) in literals(&k).into_iter().zip(literals(&back)) {
            if a.to_f64().is_nan() {
                prop_assert!(b.to_f64().is_nan());
                prop_assert_eq!(a.ty(), b.ty());
            } else {
                prop_assert_eq!(a, b);
            }
        }
    }
}
