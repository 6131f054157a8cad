//! The WGSL target: every catalogue kernel (WebGPU-baseline caps, with and without
//! f16) emits a module that naga validates, whose WGSL text naga's WGSL front end
//! parses back and validates again; plus focused checks of the code emitted for the
//! tricky semantics and of the binding layout.

#![cfg(feature = "wgsl")]

use kernelc_codegen::abi::{ShaderLayout, ENTRY_POINT};
use kernelc_codegen::wgsl::{self, WgslShader};
use kernelc_codegen::CodegenError;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Kernel, ScalarType};
use kernelc_kernels::conformance::catalogue_kernels;
use kernelc_kernels::lower::TargetCaps;
use naga::valid::{Capabilities, ValidationFlags, Validator};
use ScalarType::{Bf16, Bool, F16, F32, F64, I32, I64, U32};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

fn emit(kernel: &Kernel) -> WgslShader {
    match wgsl::emit(kernel) {
        Ok(s) => s,
        Err(e) => panic!("wgsl::emit failed: {e}\n{kernel}"),
    }
}

/// Parses WGSL text with naga's front end and validates the result (every check on,
/// f16 allowed). `Err` carries a readable report.
fn reparse(text: &str) -> Result<naga::Module, String> {
    let module = naga::front::wgsl::parse_str(text).map_err(|e| e.emit_to_string(text))?;
    Validator::new(ValidationFlags::all(), Capabilities::SHADER_FLOAT16)
        .validate(&module)
        .map_err(|e| e.emit_to_string(text))?;
    Ok(module)
}

/// The one entry point of a module.
fn entry(module: &naga::Module) -> &naga::EntryPoint {
    assert_eq!(module.entry_points.len(), 1);
    &module.entry_points[0]
}

fn statements_contain(block: &naga::Block, pred: &dyn Fn(&naga::Statement) -> bool) -> bool {
    block.iter().any(|s| {
        pred(s)
            || match s {
                naga::Statement::Block(b) => statements_contain(b, pred),
                naga::Statement::If { accept, reject, .. } => {
                    statements_contain(accept, pred) || statements_contain(reject, pred)
                }
                naga::Statement::Loop {
                    body, continuing, ..
                } => statements_contain(body, pred) || statements_contain(continuing, pred),
                naga::Statement::Switch { cases, .. } => {
                    cases.iter().any(|c| statements_contain(&c.body, pred))
                }
                _ => false,
            }
    })
}

/// Whether the entry point ORs `bit` into the status word somewhere.
fn raises(module: &naga::Module, bit: u32) -> bool {
    let f = &entry(module).function;
    statements_contain(&f.body, &|s| {
        match s {
        naga::Statement::Atomic {
            fun: naga::AtomicFunction::InclusiveOr,
            value,
            ..
        } => match f.expressions[*value] {
            naga::Expression::Literal(naga::Literal::U32(v)) => v == bit,
            // A select between fault bits (loads/stores).
            naga::Expression::Select { accept, reject, .. } => [accept, reject].iter().any(|h| {
                matches!(f.expressions[*h], naga::Expression::Literal(naga::Literal::U32(v)) if v == bit)
            }),
            _ => false,
        },
        _ => false,
    }
    })
}

fn uses_math(module: &naga::Module, fun: naga::MathFunction) -> bool {
    let uses = |f: &naga::Function| {
        f.expressions
            .iter()
            .any(|(_, e)| matches!(e, naga::Expression::Math { fun: g, .. } if *g == fun))
    };
    uses(&entry(module).function) || module.functions.iter().any(|(_, f)| uses(f))
}

// ---------------------------------------------------------------------------------------
// The catalogue
// ---------------------------------------------------------------------------------------

fn check_catalogue(caps: &TargetCaps, what: &str) -> usize {
    let kernels = catalogue_kernels(caps, &wgsl::required_expansion())
        .unwrap_or_else(|e| panic!("lowering the catalogue ({what}): {e}"));
    assert!(!kernels.is_empty());
    let mut failures = Vec::new();
    let mut vector_views = 0;
    for k in &kernels {
        let shader = match wgsl::emit(&k.kernel) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: emit: {e}", k.label));
                continue;
            }
        };
        if shader.text.contains(": array<vec") {
            vector_views += 1;
        }
        if let Err(e) = reparse(&shader.text) {
            failures.push(format!(
                "{}: re-parse/validate:\n{e}\n{}",
                k.label, shader.text
            ));
        }
    }
    let passed = kernels.len() - failures.len();
    println!(
        "wgsl catalogue ({what}): {passed}/{} kernels emit, validate, and re-parse + validate \
         ({vector_views} with a buffer viewed as vectors)",
        kernels.len()
    );
    if !failures.is_empty() {
        let headlines: Vec<&str> = failures
            .iter()
            .map(|f| f.lines().next().unwrap_or(""))
            .collect();
        panic!(
            "{} of {} catalogue kernels failed ({what}):\n{}\n\nthe first in full:\n{}",
            failures.len(),
            kernels.len(),
            headlines.join("\n"),
            failures[0]
        );
    }
    kernels.len()
}

#[test]
fn every_catalogue_kernel_emits_validates_and_reparses_gpu_baseline() {
    let n = check_catalogue(&TargetCaps::gpu_baseline(), "gpu_baseline");
    assert!(n > 10);
}

#[test]
fn every_catalogue_kernel_emits_validates_and_reparses_with_f16() {
    let caps = TargetCaps {
        f16: true,
        ..TargetCaps::gpu_baseline()
    };
    let n = check_catalogue(&caps, "gpu_baseline + f16");
    assert!(n > 10);
}

// ---------------------------------------------------------------------------------------
// Focused semantics
// ---------------------------------------------------------------------------------------

/// `out[i] = f(x[i], y[i])` for `i` in one workgroup of `n` invocations.
fn binary_kernel(
    name: &str,
    in_ty: ScalarType,
    out_ty: ScalarType,
    f: impl FnOnce(E, E) -> E,
) -> Kernel {
    let n = 64u64;
    let mut k = KernelBuilder::new(name, [64, 1, 1]);
    let x = k.buffer("x", in_ty, n, Access::Read);
    let y = k.buffer("y", in_ty, n, Access::Read);
    let out = k.buffer("out", out_ty, n, Access::Write);
    k.build(|b| {
        let i = b.let_("i", local_id(0));
        b.store(out, i.clone(), f(x.at(i.clone()), y.at(i)));
    })
    .unwrap()
}

fn unary_kernel(
    name: &str,
    in_ty: ScalarType,
    out_ty: ScalarType,
    f: impl FnOnce(E) -> E,
) -> Kernel {
    binary_kernel(name, in_ty, out_ty, |x, _| f(x))
}

#[test]
fn integer_division_guards_zero_and_min_by_minus_one() {
    let k = binary_kernel("div", I32, I32, |x, y| x / y);
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(
        raises(&s.module, kernelc_codegen::abi::status::DIVISION_BY_ZERO),
        "no DIVISION_BY_ZERO raise:\n{}",
        s.text
    );
    // The divisor is tested against 0 and -1, and replaced before dividing.
    assert!(s.text.contains("== 0i"), "{}", s.text);
    assert!(s.text.contains("== -1i"), "{}", s.text);
    assert!(s.text.contains("atomicOr("), "{}", s.text);
    // Unsigned division needs no -1 guard but still the zero guard.
    let k = binary_kernel("udiv", U32, U32, |x, y| x % y);
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(raises(
        &s.module,
        kernelc_codegen::abi::status::DIVISION_BY_ZERO
    ));
    assert!(!s.text.contains("-1"), "{}", s.text);
}

#[test]
fn shifts_mask_the_amount_and_raise_on_overflow() {
    let mut k = KernelBuilder::new("shl", [64, 1, 1]);
    let x = k.buffer("x", I32, 64, Access::Read);
    let a = k.buffer("a", U32, 64, Access::Read);
    let out = k.buffer("out", I32, 64, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            b.store(
                out,
                i.clone(),
                E(kernelc_ir::Expr::Binary {
                    op: kernelc_ir::BinaryOp::Shr,
                    lhs: Box::new(x.at(i.clone()).0),
                    rhs: Box::new(a.at(i).0),
                }),
            );
        })
        .unwrap();
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(raises(
        &s.module,
        kernelc_codegen::abi::status::SHIFT_OVERFLOW
    ));
    assert!(s.text.contains("& 31u"), "{}", s.text);
    assert!(s.text.contains(">= 32u"), "{}", s.text);
}

#[test]
fn float_to_int_cast_saturates_and_maps_nan_to_zero() {
    let s = emit(&unary_kernel("cast", F32, I32, |x| x.cast(I32)));
    reparse(&s.text).unwrap();
    let t = &s.text;
    // Clamped to the largest f32 whose truncation fits, the maximum chosen from 2^31 up,
    // NaN detected on the bits (magnitude above the infinity pattern).
    assert!(t.contains("clamp("), "{t}");
    assert!(
        t.contains("2147483500f") || t.contains("2147483520f"),
        "{t}"
    );
    assert!(
        t.contains("2147483600f") || t.contains("2147483648f"),
        "{t}"
    );
    assert!(t.contains("2147483647i"), "{t}");
    assert!(
        t.contains("2147483647u") && t.contains("2139095040u"),
        "{t}"
    );
    let s = emit(&unary_kernel("cast_u", F32, U32, |x| x.cast(U32)));
    reparse(&s.text).unwrap();
    assert!(s.text.contains("4294967295u"), "{}", s.text);
}

#[test]
fn float_min_max_are_minnum_maxnum_not_the_builtin() {
    let s = emit(&binary_kernel("min", F32, F32, |x, y| x.min(y)));
    reparse(&s.text).unwrap();
    assert!(!uses_math(&s.module, naga::MathFunction::Min), "{}", s.text);
    assert!(s.text.contains("select("), "{}", s.text);
    // The NaN test of the first operand.
    assert!(s.text.contains("2139095040u"), "{}", s.text);
    // Integer min is the builtin (exact).
    let s = emit(&binary_kernel("imin", I32, I32, |x, y| x.min(y)));
    assert!(uses_math(&s.module, naga::MathFunction::Min));
}

#[test]
fn float_not_equal_is_true_for_nan() {
    let s = emit(&binary_kernel("ne", F32, Bool, |x, y| x.ne(y)));
    reparse(&s.text).unwrap();
    assert!(
        s.text.contains("!((") && s.text.contains(" == "),
        "{}",
        s.text
    );
    assert!(!s.text.contains(" != "), "{}", s.text);
}

#[test]
fn float_remainder_is_refused_unexpanded_and_integer_code_once_expanded() {
    let k = binary_kernel("rem", F32, F32, |x, y| x % y);
    let c = unsupported(&k);
    assert!(
        c.contains("float `%`") && c.contains("with_float_rem"),
        "{c}"
    );
    let s = emit(&kernelc_ir::passes::for_target(
        &k,
        &wgsl::required_expansion(),
    ));
    reparse(&s.text).unwrap();
    // No helper function and no float `%` anywhere: the IR's exact long division.
    assert_eq!(s.module.functions.len(), 0, "{}", s.text);
    assert!(!s.text.contains(" % "), "{}", s.text);
    assert!(s.text.contains("loop {"), "{}", s.text);
}

#[test]
fn f16_memory_enables_f16_and_bf16_compute_does_not() {
    let s = emit(&binary_kernel("add_h", F16, F16, |x, y| x + y));
    reparse(&s.text).unwrap();
    assert!(s.text.starts_with("enable f16;"), "{}", s.text);
    assert!(s.text.contains("array<f16>"), "{}", s.text);
    assert_eq!(
        wgsl::capabilities(&binary_kernel("add_h", F16, F16, |x, y| x + y)),
        Capabilities::SHADER_FLOAT16
    );
    // f32 rounded to bf16 and f16 precision: no f16 type needed at all.
    let k = unary_kernel("round_bf", F32, F32, |x| {
        x.cast(Bf16).cast(F32).cast(F16).cast(F32)
    });
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(!s.text.contains("f16"), "{}", s.text);
    assert_eq!(wgsl::capabilities(&k), Capabilities::empty());
    // The bf16 rounding adds 0x7fff and the low bit, then truncates.
    assert!(
        s.text.contains("32767u") && s.text.contains("4294901760u"),
        "{}",
        s.text
    );
}

#[test]
fn non_finite_literals_are_bitcasts() {
    let k = unary_kernel("inf", F32, F32, |x| {
        x.max(lit(F32, f64::NEG_INFINITY)).min(lit(F32, f64::NAN))
    });
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(s.text.contains("bitcast<f32>(4286578688u)"), "{}", s.text);
    assert!(
        !s.text.contains("inf") && !s.text.contains("NaN"),
        "{}",
        s.text
    );
}

/// Found by the program fuzzer: a math call on constants outside the function's
/// domain (`sqrt` of a negative literal vector) is an error WGSL raises when it
/// creates the shader; the IR means its run-time value (NaN), so the call must not be
/// a constant expression.
#[test]
fn math_on_constants_outside_the_domain_is_not_evaluated_by_wgsl() {
    let k = unary_kernel("domain", F32, F32, |x| {
        let v = vector([
            lit(F32, -59947327000.0),
            lit(F32, 65520.0),
            lit(F32, 0.0),
            lit(F32, -1.0),
        ]);
        x + v.sqrt().lane(0) + lit(F32, -2.0).sqrt()
    });
    let s = emit(&k);
    reparse(&s.text).unwrap_or_else(|e| panic!("{e}\n{}", s.text));
}

#[test]
fn barrier_orders_shared_and_storage_memory() {
    let mut k = KernelBuilder::new("barrier", [64, 1, 1]);
    let x = k.buffer("x", F32, 64, Access::Read);
    let out = k.buffer("out", F32, 64, Access::Write);
    let tile = k.shared("tile", F32, 64);
    let k = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            b.store(tile, i.clone(), x.at(i.clone()));
            b.barrier();
            b.store(out, i.clone(), tile.at(lit(U32, 63.0) - i));
        })
        .unwrap();
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(s.text.contains("workgroupBarrier();"), "{}", s.text);
    assert!(s.text.contains("storageBarrier();"), "{}", s.text);
    assert!(
        s.text.contains("var<workgroup> tile: array<f32, 64>;"),
        "{}",
        s.text
    );
    // local_id(0) < 64 and 63 - local_id(0) are provably in bounds: no checks at all.
    assert!(!s.text.contains("atomicOr"), "{}", s.text);
}

#[test]
fn unproven_accesses_are_checked_and_report_out_of_bounds() {
    let mut k = KernelBuilder::new("oob", [64, 1, 1]);
    let x = k.buffer("x", F32, 32, Access::Read);
    let out = k.buffer("out", F32, 16, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.store(out, i.clone(), x.at(i));
        })
        .unwrap();
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(raises(
        &s.module,
        kernelc_codegen::abi::status::OUT_OF_BOUNDS
    ));
    assert!(s.text.contains("<= 31u"), "{}", s.text);
    assert!(s.text.contains("<= 15u"), "{}", s.text);
}

#[test]
fn vector_accesses_check_alignment() {
    let mut k = KernelBuilder::new("vec", [64, 1, 1]);
    let x = k.buffer("x", F32, 256, Access::Read);
    let out = k.buffer("out", F32, 256, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.store(out, i.clone(), x.load(i, 4));
        })
        .unwrap();
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(raises(&s.module, kernelc_codegen::abi::status::UNALIGNED));
    assert!(s.text.contains("& 3u) == 0u"), "{}", s.text);
    assert!(s.text.contains("vec4<f32>("), "{}", s.text);
}

#[test]
fn aligned_vector_buffers_are_declared_as_vector_arrays() {
    // The elementwise add as lowered: each invocation loads and stores one vec4 at
    // `local_id * 4`. `mixed` is also read as a scalar, so it keeps `array<f32>`.
    let mut k = KernelBuilder::new("add4", [64, 1, 1]);
    let x = k.buffer("x", F32, 256, Access::Read);
    let y = k.buffer("y", F32, 256, Access::Read);
    let mixed = k.buffer("mixed", F32, 256, Access::Read);
    let out = k.buffer("out", F32, 256, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", local_id(0) * 4u32);
            let v = x.load(i.clone(), 4) + y.load(i.clone(), 4) + mixed.load(i.clone(), 4);
            let v = v + mixed.at(i.clone()).splat(4);
            b.store(out, i, v);
        })
        .unwrap();
    let s = emit(&k);
    let t = &s.text;
    reparse(t).unwrap();
    for expected in [
        "@group(0) @binding(0) \nvar<storage> x: array<vec4<f32>>;",
        "@group(0) @binding(1) \nvar<storage> y: array<vec4<f32>>;",
        "@group(0) @binding(2) \nvar<storage> mixed: array<f32>;",
        "@group(0) @binding(3) \nvar<storage, read_write> out: array<vec4<f32>>;",
    ] {
        assert!(t.contains(expected), "missing {expected:?} in:\n{t}");
    }
    // One vector element per access, addressed by `index >> 2`; only `mixed` is
    // still read lane by lane and composed.
    assert_eq!(t.matches(">> 2u").count(), 3, "{t}");
    assert_eq!(t.matches("vec4<f32>(").count(), 1, "{t}");
    // Every access is proven in bounds and aligned: no check, no status raised.
    assert!(!raises(
        &s.module,
        kernelc_codegen::abi::status::OUT_OF_BOUNDS
    ));
    assert!(!raises(&s.module, kernelc_codegen::abi::status::UNALIGNED));
}

#[test]
fn the_lowered_large_f32_add_loads_and_stores_whole_vec4s() {
    // The case this view exists for: 256M f32 added elementwise, as the runtime
    // lowers it for a WebGPU device, reads and writes one `vec4<f32>` per access.
    let spec = kernelc_kernels::OpSpec::Binary(kernelc_kernels::BinarySpec {
        func: kernelc_kernels::BinaryFn::Add,
        dtype: F32,
        lhs: vec![1 << 28],
        rhs: vec![1 << 28],
        out_dtype: None,
    });
    let plan = kernelc_kernels::lower::lower(&spec, &TargetCaps::gpu_baseline()).unwrap();
    assert_eq!(plan.launches.len(), 1);
    let s = emit(&plan.launches[0].kernel);
    let t = &s.text;
    reparse(t).unwrap();
    assert_eq!(t.matches(": array<vec4<f32>>;").count(), 3, "{t}");
    assert!(!t.contains(": array<f32>;"), "{t}");
    assert!(!t.contains("vec4<f32>("), "{t}");
}

#[test]
fn vector_array_accesses_keep_their_bounds_checks_in_elements() {
    // `local_id * 4` (up to 252) is aligned but not proven in bounds for 200
    // elements: the check is still `index <= len - 4` in elements, and a failing
    // load reads element 0 of the view.
    let mut k = KernelBuilder::new("add4_checked", [64, 1, 1]);
    let x = k.buffer("x", F32, 200, Access::Read);
    let out = k.buffer("out", U32, 200, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", local_id(0) * 4u32);
            b.store(out, i.clone(), x.load(i, 4).bitcast(U32));
        })
        .unwrap();
    let s = emit(&k);
    let t = &s.text;
    reparse(t).unwrap();
    assert!(t.contains("x: array<vec4<f32>>;"), "{t}");
    assert!(t.contains("out: array<vec4<u32>>;"), "{t}");
    assert!(t.contains("<= 196u"), "{t}");
    assert!(t.contains("x[(select(0u, "), "{t}");
    assert!(raises(
        &s.module,
        kernelc_codegen::abi::status::OUT_OF_BOUNDS
    ));
    assert!(!raises(&s.module, kernelc_codegen::abi::status::UNALIGNED));
}

#[test]
fn loops_break_before_the_counter_wraps() {
    let mut k = KernelBuilder::new("loop", [1, 1, 1]);
    let out = k.buffer("out", U32, 1, Access::ReadWrite);
    let k = k
        .build(|b| {
            let acc = b.var("acc", lit(U32, 0.0));
            b.for_(
                "j",
                lit(U32, 0.0),
                lit(U32, 4294967295.0),
                1 << 31,
                |b, j| {
                    b.assign(acc, acc.get() + j);
                },
            );
            b.store(out, lit(U32, 0.0), acc.get());
        })
        .unwrap();
    let s = emit(&k);
    reparse(&s.text).unwrap();
    assert!(s.text.contains("loop {"), "{}", s.text);
    assert!(s.text.contains("continuing {"), "{}", s.text);
    assert!(s.text.contains("break if"), "{}", s.text);
    // The distance to the end is compared with the step, not the wrapped next value.
    assert!(s.text.contains("<= 2147483648u"), "{}", s.text);
}

// ---------------------------------------------------------------------------------------
// Unsupported constructs
// ---------------------------------------------------------------------------------------

fn unsupported(kernel: &Kernel) -> String {
    match wgsl::emit(kernel) {
        Err(CodegenError::Unsupported { target, construct }) => {
            assert_eq!(target, "wgsl");
            construct
        }
        Err(other) => panic!("expected Unsupported, got {other}"),
        Ok(s) => panic!("expected Unsupported, got a shader:\n{}", s.text),
    }
}

#[test]
fn sixty_four_bit_types_and_bf16_memory_are_unsupported_and_named() {
    let c = unsupported(&binary_kernel("i64", I64, I64, |x, y| x + y));
    assert!(c.contains("i64") && c.contains("parameter `x`"), "{c}");
    let c = unsupported(&unary_kernel("f64", F32, F32, |x| x.cast(F64).cast(F32)));
    assert!(c.contains("f64") && c.contains("cast"), "{c}");
    let c = unsupported(&binary_kernel("bf", Bf16, Bf16, |x, y| x + y));
    assert!(c.contains("bf16") && c.contains("parameter `x`"), "{c}");
}

#[test]
fn unexpanded_transcendentals_are_unsupported_and_named() {
    let k = unary_kernel("exp", F32, F32, |x| x.exp());
    let c = unsupported(&k);
    assert!(c.contains("`exp`"), "{c}");
    // After the expansion every target runs, the same kernel compiles.
    let expanded = kernelc_ir::passes::for_target(&k, &wgsl::required_expansion());
    reparse(&emit(&expanded).text).unwrap();
}

#[test]
fn invalid_kernels_are_rejected_as_invalid() {
    let mut k = unary_kernel("bad", F32, F32, |x| x);
    k.workgroup_size = [0, 1, 1];
    assert!(matches!(wgsl::emit(&k), Err(CodegenError::Invalid(_))));
}

// ---------------------------------------------------------------------------------------
// Interface (snapshot-like)
// ---------------------------------------------------------------------------------------

#[test]
fn bindings_follow_the_shader_layout() {
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    let xs = k.buffer("xs", F32, 100, Access::Read);
    let alpha = k.scalar("alpha", F32);
    let ys = k.buffer("ys", F32, 100, Access::ReadWrite);
    let flags = k.buffer("flags", Bool, 100, Access::Write);
    let k = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.if_(i.clone().lt(100u32), |b| {
                let v = alpha.clone() * xs.at(i.clone()) + ys.at(i.clone());
                b.store(ys, i.clone(), v.clone());
                b.store(flags, i, v.gt(lit(F32, 0.0)));
            });
        })
        .unwrap();
    let s = emit(&k);
    let t = &s.text;
    reparse(t).unwrap();
    let layout = ShaderLayout::of(&k);
    assert_eq!(layout.scalar_binding, Some(3));
    assert_eq!(layout.status_binding, 4);
    for expected in [
        "@group(0) @binding(0) \nvar<storage> xs: array<f32>;",
        "@group(0) @binding(1) \nvar<storage, read_write> ys: array<f32>;",
        // Bool bytes packed four to a word, written atomically.
        "@group(0) @binding(2) \nvar<storage, read_write> flags: array<atomic<u32>>;",
        "@group(0) @binding(3) \nvar<storage> kernelc_scalars: array<u32>;",
        "@group(0) @binding(4) \nvar<storage, read_write> kernelc_status: array<atomic<u32>, 1>;",
        "@compute @workgroup_size(64, 1, 1) \nfn main(@builtin(global_invocation_id) global_id: vec3<u32>",
        "= kernelc_scalars[0];",
    ] {
        assert!(t.contains(expected), "missing {expected:?} in:\n{t}");
    }
    // `alpha` is decoded from its word (packed at word 0) and has no binding: the
    // bindings are dense, 0..=4 (wgpu's Vulkan backend numbers them so, see abi.rs).
    assert!(t.contains("bitcast<f32>(_e"), "{t}");
    assert!(!t.contains("@binding(5)"), "{t}");
    let ep = entry(&s.module);
    assert_eq!(ep.name, ENTRY_POINT);
    assert_eq!(ep.workgroup_size, [64, 1, 1]);
    assert_eq!(ep.stage, naga::ShaderStage::Compute);
    // Bool stored as 1/0 bytes: cleared and set in its word.
    assert!(t.contains("select(0u, 1u, "), "{t}");
    assert!(t.contains("atomicAnd((&flags["), "{t}");
    assert!(t.contains("atomicOr((&flags["), "{t}");
}

#[test]
fn emit_module_and_text_agree() {
    let k = binary_kernel("add", F32, F32, |x, y| x + y);
    let (module, _) = wgsl::emit_module(&k).unwrap();
    let shader = emit(&k);
    assert_eq!(
        module.global_variables.len(),
        shader.module.global_variables.len()
    );
    assert_eq!(wgsl::wgsl_text(&k).unwrap(), shader.text);
}
