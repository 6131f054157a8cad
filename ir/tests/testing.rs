//! Tests of `kernelc_ir::testing` itself: the generator covers every construct it
//! promises and nothing a config leaves out, and the comparison rule decides as its
//! documentation says.

use kernelc_ir::builder::*;
use kernelc_ir::passes::math::{expand_math, MathExpansion};
use kernelc_ir::testing::{
    compare, compare_interpreter_runs, Case, FaultKind, Faults, GenConfig, InterpRun, Outcome,
    Shape,
};
use kernelc_ir::{Access, Arg, Expr, HostBuffer, Kernel, MathFn, Memory, Scalar, ScalarType, Stmt};
use std::collections::BTreeMap;

/// Deterministic pseudo-random words (the cases must not depend on proptest's seed).
fn words(seed: u64, n: usize) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        })
        .collect()
}

fn generate(config: &GenConfig, shape: Shape, seed: u64) -> Case {
    Case::from_words(config, shape, &words(seed, 512), &words(seed ^ 0xA5A5, 64))
}

/// Calls `f` on 300 valid cases of every shape under `config`.
fn for_cases(config: &GenConfig, mut f: impl FnMut(&Case)) {
    for seed in 0..300 {
        for shape in [
            Shape::Expression,
            Shape::AccumulatingLoop,
            Shape::Statements,
        ] {
            let case = generate(config, shape, seed);
            kernelc_ir::validate(&case.kernel).unwrap_or_else(|e| panic!("{e}\n{case:?}"));
            f(&case);
        }
    }
}

/// Counts the constructs of a kernel by name.
fn census(kernel: &Kernel, counts: &mut BTreeMap<String, usize>) {
    let elem = |mem: &Memory| kernel.memory(*mem).map(|(e, _)| e);
    // Accesses of narrow storage types, by type and lanes.
    accesses(&kernel.body, &mut |access| {
        let (name, mem) = match access {
            Touch::Load(mem, lanes) => (format!("load {lanes}"), mem),
            Touch::Store(mem) => ("store".to_string(), mem),
        };
        if let Some(e) = elem(mem).filter(|e| e.is_storage_only()) {
            *counts.entry(format!("{name} {e}")).or_default() += 1;
        }
    });
    fn expr(e: &Expr, counts: &mut BTreeMap<String, usize>) {
        let name = match e {
            Expr::Lit(_) => "lit".to_string(),
            Expr::Local(_) => "local".into(),
            Expr::Param(_) => "param".into(),
            Expr::Builtin { builtin, .. } => builtin.name().into(),
            Expr::Load { mem, lanes, .. } => match mem {
                Memory::Buffer(_) => format!("load buffer {lanes}"),
                Memory::Shared(_) => format!("load shared {lanes}"),
            },
            Expr::Unary { op, .. } => format!("{op:?}"),
            Expr::Binary { op, .. } => format!("{op:?}"),
            Expr::Cmp { op, .. } => format!("{op:?}"),
            Expr::Math { func, .. } => func.name().into(),
            Expr::Select { .. } => "select".into(),
            Expr::Cast { .. } => "cast".into(),
            Expr::Bitcast { .. } => "bitcast".into(),
            Expr::Vector(_) => "vector".into(),
            Expr::Splat { .. } => "splat".into(),
            Expr::Extract { .. } => "extract".into(),
        };
        *counts.entry(name).or_default() += 1;
        for c in e.children() {
            expr(c, counts);
        }
    }
    fn block(b: &[Stmt], counts: &mut BTreeMap<String, usize>) {
        for s in b {
            let name = match s {
                Stmt::Let { value, .. } => {
                    expr(value, counts);
                    "let"
                }
                Stmt::Assign { value, .. } => {
                    expr(value, counts);
                    "assign"
                }
                Stmt::Store { index, value, .. } => {
                    expr(index, counts);
                    expr(value, counts);
                    "store"
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    expr(cond, counts);
                    block(then_body, counts);
                    block(else_body, counts);
                    "if"
                }
                Stmt::For {
                    start, end, body, ..
                } => {
                    expr(start, counts);
                    expr(end, counts);
                    block(body, counts);
                    "for"
                }
                Stmt::Return => "return",
                Stmt::Barrier => "barrier",
                // The generator writes no fragments and no copies.
                Stmt::Fragment(op) => op.name(),
                Stmt::AsyncCopy(op) => op.name(),
            };
            *counts.entry(name.to_string()).or_default() += 1;
        }
    }
    block(&kernel.body, counts);
    for l in &kernel.locals {
        *counts.entry(format!("local type {}", l.ty)).or_default() += 1;
    }
    if !kernel.shared.is_empty() {
        *counts.entry("shared arrays".into()).or_default() += 1;
    }
}

/// A memory access found by [`accesses`].
enum Touch<'a> {
    Load(&'a Memory, u8),
    Store(&'a Memory),
}

/// Every load (with its lanes) and store of `block`.
fn accesses<'a>(block: &'a [Stmt], f: &mut dyn FnMut(Touch<'a>)) {
    fn expr<'a>(e: &'a Expr, f: &mut dyn FnMut(Touch<'a>)) {
        if let Expr::Load { mem, lanes, .. } = e {
            f(Touch::Load(mem, *lanes));
        }
        for c in e.children() {
            expr(c, f);
        }
    }
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr(value, f),
            Stmt::Store { mem, index, value } => {
                expr(index, f);
                expr(value, f);
                f(Touch::Store(mem));
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                expr(cond, f);
                accesses(then_body, f);
                accesses(else_body, f);
            }
            Stmt::For {
                start, end, body, ..
            } => {
                expr(start, f);
                expr(end, f);
                accesses(body, f);
            }
            // The generator writes no fragments and no copies.
            Stmt::Return | Stmt::Barrier | Stmt::Fragment(_) | Stmt::AsyncCopy(_) => {}
        }
    }
}

/// The faults and completions of interpreter runs, by kind.
fn outcome_name(case: &Case) -> String {
    match case.run_interpreter().outcome() {
        Ok(Outcome::Completed(_)) => "completed".into(),
        Ok(Outcome::Faulted(f)) => format!("faulted {f}"),
        Err(e) => panic!("{e}\n{case:?}"),
    }
}

#[test]
fn the_full_config_covers_every_construct_and_fault() {
    let config = GenConfig::full();
    let mut counts = BTreeMap::new();
    for_cases(&config, |case| {
        census(&case.kernel, &mut counts);
        *counts.entry(outcome_name(case)).or_default() += 1;
    });
    let mut wanted: Vec<String> = [
        "let",
        "assign",
        "store",
        "if",
        "for",
        "return",
        "barrier",
        "shared arrays",
        "lit",
        "local",
        "param",
        "global_id",
        "local_id",
        "workgroup_id",
        "num_workgroups",
        "load buffer 1",
        "load buffer 2",
        "load buffer 4",
        "load shared 1",
        "load shared 4",
        "Neg",
        "Not",
        "select",
        "cast",
        "bitcast",
        "vector",
        "splat",
        "extract",
        "completed",
        "faulted {out of bounds}",
        "faulted {unaligned}",
        "faulted {division by zero}",
        "faulted {shift overflow}",
    ]
    .map(String::from)
    .to_vec();
    wanted.extend(
        [
            "Add", "Sub", "Mul", "Div", "Rem", "And", "Or", "Xor", "Shl", "Shr",
        ]
        .map(String::from),
    );
    wanted.extend(["Eq", "Ne", "Lt", "Le", "Gt", "Ge"].map(String::from));
    wanted.extend(MathFn::ALL.map(|f| f.name().to_string()));
    wanted.extend(ScalarType::VALUES.map(|t| format!("local type {t}")));
    wanted.extend(ScalarType::VALUES.map(|t| format!("local type vec4<{t}>")));
    // Narrow buffers: loads of every lane count, stores (scalar or 2-lane).
    for t in ScalarType::NARROW {
        wanted.extend([1, 2, 4].map(|l| format!("load {l} {t}")));
        wanted.push(format!("store {t}"));
    }
    let missing: Vec<&String> = wanted.iter().filter(|w| !counts.contains_key(*w)).collect();
    assert!(
        missing.is_empty(),
        "never generated: {missing:?}\n{counts:#?}"
    );
}

#[test]
fn a_restricted_config_generates_nothing_else() {
    let config = GenConfig {
        types: vec![ScalarType::F32, ScalarType::F16],
        memory_types: vec![ScalarType::F32, ScalarType::U32],
        vectors: false,
        math: vec![MathFn::Sqrt, MathFn::Min],
        float_rem: false,
        float_bitcasts: false,
        runtime_errors: false,
        returns: false,
        shared: false,
        barriers: false,
        workgroup_size: 4,
        grid: 3,
    };
    let allowed_types = ["f32", "f16", "u32", "i32", "bool"];
    for_cases(&config, |case| {
        let k = &case.kernel;
        assert_eq!(k.workgroup_size, [4, 1, 1]);
        assert_eq!(case.grid, [3, 1, 1]);
        // in, scalar and out for each of the two memory types.
        assert_eq!(k.params.len(), 6);
        assert!(k.shared.is_empty());
        let mut counts = BTreeMap::new();
        census(k, &mut counts);
        for name in counts.keys() {
            let forbidden = ["return", "barrier", "exp", "tanh", "abs", "vector"]
                .iter()
                .any(|f| name == f)
                || name.contains("vec")
                || name.ends_with(" 2")
                || name.ends_with(" 4")
                || (name.starts_with("local type")
                    && !allowed_types.iter().any(|t| name.ends_with(t)));
            assert!(!forbidden, "{name} generated\n{case:?}");
        }
        // Integer `%` is allowed; float `%` is not (its expansion changes nothing).
        let no_float_rem = MathExpansion::none().with_float_rem(true);
        assert_eq!(&expand_math(k, &no_float_rem), k, "float %\n{case:?}");
        assert_eq!(outcome_name(case), "completed", "{case:?}");
    });
}

fn f32_buffers(values: &[f32]) -> Vec<Arg> {
    vec![Arg::Buffer(HostBuffer::from_f32(values))]
}

#[test]
fn the_comparison_rule() {
    let done = |v: &[f32]| Outcome::Completed(f32_buffers(v));
    let faults = |kinds: &[FaultKind]| Outcome::Faulted(kinds.iter().copied().collect());
    // Both completed: equal bits, or NaN against NaN of any payload and sign.
    assert!(compare(&done(&[1.0, f32::NAN]), &done(&[1.0, -f32::NAN])).is_ok());
    let m = compare(&done(&[1.0, 0.0]), &done(&[1.0, -0.0])).unwrap_err();
    assert!(m.to_string().contains("argument 0 element 1"), "{m}");
    // Both faulted: the interpreter's kind among the target's.
    use FaultKind::*;
    assert!(compare(
        &faults(&[OutOfBounds]),
        &faults(&[OutOfBounds, DivisionByZero])
    )
    .is_ok());
    assert!(compare(&faults(&[Unaligned]), &faults(&[OutOfBounds])).is_err());
    // One faulted, the other not.
    assert!(compare(&done(&[1.0]), &faults(&[ShiftOverflow])).is_err());
    assert!(compare(&faults(&[ShiftOverflow]), &done(&[1.0])).is_err());
    assert_eq!(
        Faults::NONE
            .with(OutOfBounds)
            .with(ShiftOverflow)
            .to_string(),
        "{out of bounds, shift overflow}"
    );
}

/// A kernel where every invocation writes `out[0]`: a race, which no target reports.
fn racy_case() -> Case {
    let mut k = KernelBuilder::new("racy", [2, 1, 1]);
    let out = k.buffer("out", ScalarType::U32, 4, Access::Write);
    let kernel = k.build(|f| f.store(out, 0u32, local_id(0))).unwrap();
    Case {
        kernel,
        grid: [1, 1, 1],
        args: vec![Arg::Buffer(HostBuffer::zeros(ScalarType::U32, 4))],
    }
}

#[test]
fn interpreter_errors_no_target_reports_are_not_comparable() {
    let run = racy_case().run_interpreter();
    let e = run.outcome().unwrap_err();
    assert!(e.to_string().contains("data race"), "{e}");
}

#[test]
fn two_interpreter_runs_must_agree_exactly() {
    let case = racy_case();
    let a = case.run_interpreter();
    assert!(compare_interpreter_runs(&a, &a).is_ok());
    // The same error at another node is the same (passes move nodes)...
    let mut moved = a.clone();
    if let Err(e) = &mut moved.result {
        if let Some(site) = e.site_mut() {
            site.path = "kernel.body[7]".into();
        }
    }
    assert!(compare_interpreter_runs(&a, &moved).is_ok());
    // ...but other details, or other bits, are not.
    let mut other = a.clone();
    if let Err(e) = &mut other.result {
        if let Some(site) = e.site_mut() {
            site.invocation = Some([0, 0, 0]);
        }
    }
    assert!(compare_interpreter_runs(&a, &other).is_err());
    let mut bits = a.clone();
    if let Some(b) = bits.args[0].as_buffer_mut() {
        b.data[3] = Scalar::U32(9);
    }
    let m = compare_interpreter_runs(&a, &bits).unwrap_err();
    assert!(m.to_string().contains("argument 0 element 3"), "{m}");
    // A NaN payload counts between interpreter runs.
    let nan = |bits: u32| InterpRun {
        result: Ok(()),
        args: vec![Arg::Buffer(HostBuffer::new(
            ScalarType::F32,
            vec![Scalar::F32(bits)],
        ))],
    };
    assert!(compare_interpreter_runs(&nan(0x7FC0_0000), &nan(0x7FC0_0001)).is_err());
}

#[test]
fn cases_are_deterministic_and_shrink_to_small_kernels() {
    let config = GenConfig::full();
    let a = generate(&config, Shape::Statements, 7);
    let b = generate(&config, Shape::Statements, 7);
    assert_eq!(a, b);
    // No choices at all: the simplest kernel of each shape.
    for shape in [
        Shape::Expression,
        Shape::AccumulatingLoop,
        Shape::Statements,
    ] {
        let case = Case::from_words(&config, shape, &[], &[0]);
        kernelc_ir::validate(&case.kernel).unwrap();
        assert!(kernelc_ir::block_size(&case.kernel.body) < 120, "{case:?}");
        assert_eq!(outcome_name(&case), "completed", "{case:?}");
    }
}
