//! The SPIR-V target: every catalogue kernel emits a module that `spirv-val` accepts
//! for Vulkan 1.1 (and that naga's SPIR-V front end parses), plus focused checks of the
//! code emitted for the tricky semantics.
//!
//! External tool: `spirv-val` (SPIRV-Tools); naga's `spv-in` front end runs in-process.
//! A missing tool fails the test with a loud "NOT RUN", unless
//! `KERNELC_ALLOW_MISSING_TOOLS=1` (never honoured when `CI` is set).

#![cfg(feature = "spirv")]

use kernelc_codegen::spirv::{disassemble, emit, emit_with, required_expansion, SpirvOptions};
use kernelc_codegen::CodegenError;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Kernel, ScalarType};
use kernelc_kernels::conformance::catalogue_kernels;
use kernelc_kernels::lower::TargetCaps;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use ScalarType::{Bf16, Bool, F16, F32, F64, I32, I64, U32};

// ---------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------

/// The path of an external tool, or `None` after deciding that its absence is allowed
/// (panics otherwise: a check that silently passes is not a check).
fn tool(name: &str, candidates: &[&str]) -> Option<PathBuf> {
    for c in candidates {
        let p = Path::new(c);
        if p.is_file() {
            return Some(p.to_path_buf());
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let in_ci = std::env::var_os("CI").is_some();
    let allowed = std::env::var("KERNELC_ALLOW_MISSING_TOOLS").as_deref() == Ok("1");
    eprintln!(
        "\n========================================================================\n\
         NOT RUN: `{name}` was not found; the SPIR-V modules were NOT checked by it.\n\
         ========================================================================\n"
    );
    if in_ci || !allowed {
        panic!(
            "`{name}` is required (install it, or set KERNELC_ALLOW_MISSING_TOOLS=1 \
             outside CI to skip this check)"
        );
    }
    None
}

fn spirv_val() -> Option<PathBuf> {
    tool("spirv-val", &["/usr/bin/spirv-val"])
}

/// A fresh temporary file path.
fn temp_path(ext: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "kernelc-spirv-test-{}-{n}.{ext}",
        std::process::id()
    ))
}

fn write_words(words: &[u32]) -> PathBuf {
    let path = temp_path("spv");
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).expect("write a temporary SPIR-V file");
    path
}

/// Runs `spirv-val --target-env vulkan1.1` on the module: `Err(message)` if rejected.
fn validate_with(tool: &Path, words: &[u32]) -> Result<(), String> {
    let path = write_words(words);
    let out = Command::new(tool)
        .arg("--target-env")
        .arg("vulkan1.1")
        .arg(&path)
        .output()
        .expect("run spirv-val");
    let _ = std::fs::remove_file(&path);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Parses the module with naga's SPIR-V front end (as wgpu's SPIR-V path does) and
/// validates the result with naga's validator.
fn naga_parse(words: &[u32]) -> Result<(), String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let options = naga::front::spv::Options {
        adjust_coordinate_space: false,
        strict_capabilities: true,
        block_ctx_dump_prefix: None,
    };
    let module = naga::front::spv::parse_u8_slice(&bytes, &options)
        .map_err(|e| format!("naga spv-in: {e}"))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("naga validation: {:?}", e.into_inner()))?;
    Ok(())
}

fn emit_ok(kernel: &Kernel) -> Vec<u32> {
    match emit(kernel) {
        Ok(w) => w,
        Err(e) => panic!("spirv::emit failed: {e}\n{kernel}"),
    }
}

/// Emits and validates; returns the disassembly.
fn emit_valid(kernel: &Kernel) -> String {
    let words = emit_ok(kernel);
    if let Some(val) = spirv_val() {
        if let Err(msg) = validate_with(&val, &words) {
            panic!(
                "spirv-val rejected `{}`:\n{msg}\n{}",
                kernel.name,
                disassemble(&words)
            );
        }
    }
    disassemble(&words)
}

// ---------------------------------------------------------------------------------------
// The catalogue
// ---------------------------------------------------------------------------------------

fn catalogue_caps() -> Vec<(&'static str, TargetCaps)> {
    vec![
        ("gpu_baseline", TargetCaps::gpu_baseline()),
        (
            "gpu_baseline+f16",
            TargetCaps {
                f16: true,
                ..TargetCaps::gpu_baseline()
            },
        ),
        (
            "cuda_sm90-bf16",
            TargetCaps {
                bf16: false,
                ..TargetCaps::cuda_sm90()
            },
        ),
    ]
}

/// Every catalogue kernel for each caps (transcendentals expanded to IR, f64 ones
/// too, as a device with f64 would): emitted, and the module checked by `check`. Any
/// emission error, and every module `check` rejects, is a failure.
fn check_catalogue(tool_name: &str, check: &dyn Fn(&[u32]) -> Result<(), String>) {
    check_catalogue_with(tool_name, &SpirvOptions::default(), check)
}

/// [`check_catalogue`], emitting with `options`.
fn check_catalogue_with(
    tool_name: &str,
    options: &SpirvOptions,
    check: &dyn Fn(&[u32]) -> Result<(), String>,
) {
    let expansion = required_expansion(true);
    let mut failures = Vec::new();
    let mut total = 0usize;
    let mut checked = 0usize;
    for (label, caps) in catalogue_caps() {
        let kernels = catalogue_kernels(&caps, &expansion).expect("lower the catalogue");
        let mut passed = 0usize;
        for k in &kernels {
            total += 1;
            match emit_with(&k.kernel, options) {
                Err(e) => failures.push(format!("[{label}] {}: emit failed: {e}", k.label)),
                Ok(words) => match check(&words) {
                    Ok(()) => passed += 1,
                    Err(msg) => failures.push(format!("[{label}] {}: {msg}", k.label)),
                },
            }
        }
        checked += passed;
        eprintln!(
            "{tool_name}: {passed}/{} catalogue kernels pass for {label}",
            kernels.len()
        );
    }
    assert!(checked > 0, "nothing was checked");
    assert!(
        failures.is_empty(),
        "{} of {total} catalogue kernels failed {tool_name}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_catalogue_kernel_passes_spirv_val() {
    let Some(val) = spirv_val() else { return };
    check_catalogue("spirv-val", &|w| validate_with(&val, w));
}

/// With float controls declared (the passthrough path on a device that has them).
#[test]
fn every_catalogue_kernel_with_float_controls_passes_spirv_val() {
    let Some(val) = spirv_val() else { return };
    let options = SpirvOptions {
        preserve_f32_specials: true,
        preserve_f64_specials: true,
        preserve_f32_denormals: true,
        preserve_f64_denormals: true,
    };
    check_catalogue_with("spirv-val (float controls)", &options, &|w| {
        validate_with(&val, w)?;
        let text = disassemble(w);
        let f64 = text.contains("OpCapability Float64");
        let f16 = text.contains("OpCapability Float16");
        let declared = text.contains("SignedZeroInfNanPreserve 32");
        let f64_ok = !f64 || text.contains("SignedZeroInfNanPreserve 64");
        // Denormal modes for every computed width, none with f16 arithmetic.
        let denormals_ok = if f16 {
            !text.contains("DenormPreserve")
        } else {
            text.contains("DenormPreserve 32") && (!f64 || text.contains("DenormPreserve 64"))
        };
        match (
            declared && f64_ok && denormals_ok,
            text.contains("OpExtension \"SPV_KHR_float_controls\""),
        ) {
            (true, true) => Ok(()),
            _ => Err("float controls not declared as asked".into()),
        }
    });
}

#[test]
fn every_catalogue_kernel_parses_with_naga_spv_in() {
    check_catalogue("naga spv-in", &naga_parse);
}

// ---------------------------------------------------------------------------------------
// Focused checks
// ---------------------------------------------------------------------------------------

/// The ids of the results of `op` in the disassembly (`%12 = OpFAdd %float %3 %4`).
fn results_of(text: &str, op: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (lhs, rhs) = l.trim().split_once(" = ")?;
            (rhs.split_whitespace().next() == Some(op)).then(|| lhs.trim().to_string())
        })
        .collect()
}

fn decorated(text: &str, id: &str, decoration: &str) -> bool {
    text.lines()
        .any(|l| l.trim() == format!("OpDecorate {id} {decoration}"))
}

fn count(text: &str, op: &str) -> usize {
    text.lines()
        .filter(|l| l.split_whitespace().any(|w| w == op))
        .count()
}

#[test]
fn every_float_arithmetic_result_is_no_contraction() {
    let mut k = KernelBuilder::new("no_contraction", [64, 1, 1]);
    let a = k.buffer("a", F32, 64, Access::Read);
    let b = k.buffer("b", F32, 64, Access::Read);
    let c = k.buffer("c", F32, 64, Access::Write);
    let h = k.buffer("h", F16, 64, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            let x = a.at(i.clone());
            let y = b.at(i.clone());
            // a*b + c written as two operations must stay two roundings.
            f.store(
                c,
                i.clone(),
                x.clone() * y.clone() + x.clone() - y.clone() / x.clone(),
            );
            f.store(c, i.clone(), -(a.at(i.clone())));
            f.store(h, i.clone(), h.at(i.clone()) * h.at(i.clone()) + h.at(i));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    let mut checked = 0;
    for op in ["OpFAdd", "OpFSub", "OpFMul", "OpFDiv", "OpFNegate"] {
        let ids = results_of(&text, op);
        assert!(!ids.is_empty(), "no {op} in\n{text}");
        for id in ids {
            assert!(
                decorated(&text, &id, "NoContraction"),
                "{op} result {id} is not NoContraction:\n{text}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 7);
    assert_eq!(count(&text, "OpExtInst"), count(&text, "OpExtInst"));
    assert!(!text.contains("Fma"), "an fma appeared:\n{text}");
}

#[test]
fn integer_division_is_guarded() {
    let mut k = KernelBuilder::new("int_div", [64, 1, 1]);
    let a = k.buffer("a", I32, 64, Access::Read);
    let b = k.buffer("b", I32, 64, Access::Read);
    let q = k.buffer("q", I32, 64, Access::Write);
    let r = k.buffer("r", I32, 64, Access::Write);
    let u = k.buffer("u", U32, 64, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(q, i.clone(), a.at(i.clone()) / b.at(i.clone()));
            f.store(r, i.clone(), a.at(i.clone()) % b.at(i.clone()));
            f.store(u, i.clone(), u.at(i.clone()) / u.at(i.clone()));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    // Signed remainder is `n - d * (n / d)`, never OpSRem (NVIDIA's driver gets its
    // sign wrong for negative operands).
    assert_eq!(count(&text, "OpSRem"), 0, "{text}");
    assert_eq!(
        count(&text, "OpSDiv"),
        2,
        "one for `/`, one for `%`:\n{text}"
    );
    // The divisor of every OpSDiv/OpUDiv is a select (never the raw load).
    for op in ["OpSDiv", "OpUDiv"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("= {op} ")))
            .unwrap_or_else(|| panic!("no {op}:\n{text}"));
        let divisor = line.split_whitespace().last().unwrap();
        assert!(
            text.lines()
                .any(|l| l.trim().starts_with(&format!("{divisor} = OpSelect"))),
            "{op} divides by an unguarded value:\n{line}\n{text}"
        );
    }
    // MIN / -1 is detected for the signed ones.
    assert!(text.contains("-2147483648"), "no MIN constant:\n{text}");
    // Division by zero reports through the status word: atomic OR of the accumulated bits.
    assert_eq!(count(&text, "OpAtomicOr"), 1, "{text}");
}

#[test]
fn status_word_is_only_atomically_ored() {
    let mut k = KernelBuilder::new("status", [64, 1, 1]);
    let a = k.buffer("a", F32, 10, Access::Read);
    let c = k.buffer("c", F32, 10, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().gt(5u32), |f| f.ret());
            f.store(c, i.clone(), a.at(i.clone() + 1u32));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    // One publication per return: the early return and the end of the body.
    assert_eq!(count(&text, "OpAtomicOr"), 2, "{text}");
    assert_eq!(count(&text, "OpReturn"), 2, "{text}");
    // Two buffers and no scalars: the status word is the third binding (dense, see
    // `dense_bindings`).
    let (named, _) = bindings(&text);
    assert!(
        named.contains(&("kernelc_status".to_string(), 2)),
        "{named:?}\n{text}"
    );
    // The read-only input is NonWritable.
    assert!(text.contains("NonWritable"), "{text}");
    // Unproven accesses are checked: an unsigned compare against len - 1.
    assert!(count(&text, "OpULessThanEqual") >= 2, "{text}");
}

#[test]
fn proven_accesses_are_unchecked() {
    let mut k = KernelBuilder::new("proven", [64, 1, 1]);
    let a = k.buffer("a", F32, 64, Access::Read);
    let c = k.buffer("c", F32, 64, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(c, i.clone(), a.at(i));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    assert_eq!(count(&text, "OpULessThanEqual"), 0, "{text}");
    assert_eq!(
        count(&text, "OpSelectionMerge"),
        1,
        "only the status flush:\n{text}"
    );
}

#[test]
fn float_min_max_handle_nan_explicitly() {
    let mut k = KernelBuilder::new("minmax", [1, 1, 1]);
    let a = k.buffer("a", F32, 4, Access::Read);
    let c = k.buffer("c", F32, 4, Access::Write);
    let kernel = k
        .build(|f| {
            f.store(c, 0u32, a.at(0u32).min(a.at(1u32)));
            f.store(c, 1u32, a.at(2u32).max(a.at(3u32)));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    assert!(!text.contains("FMin") && !text.contains("FMax"), "{text}");
    assert!(count(&text, "OpFUnordNotEqual") >= 2, "{text}");
}

#[test]
fn float_to_int_casts_saturate() {
    let mut k = KernelBuilder::new("casts", [1, 1, 1]);
    let a = k.buffer("a", F32, 4, Access::Read);
    let i = k.buffer("i", I32, 4, Access::Write);
    let u = k.buffer("u", U32, 4, Access::Write);
    let kernel = k
        .build(|f| {
            f.store(i, 0u32, a.at(0u32).cast(I32));
            f.store(u, 0u32, a.at(1u32).cast(U32));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    // The conversion only ever sees a selected (in-range or zero) operand.
    for op in ["OpConvertFToS", "OpConvertFToU"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("= {op} ")))
            .unwrap_or_else(|| panic!("no {op}:\n{text}"));
        let operand = line.split_whitespace().last().unwrap();
        assert!(
            text.lines()
                .any(|l| l.trim().starts_with(&format!("{operand} = OpSelect"))),
            "{op} converts an unclamped value:\n{text}"
        );
    }
    assert!(
        text.contains("2147483647"),
        "no saturation to i32::MAX:\n{text}"
    );
    assert!(
        text.contains("4294967295"),
        "no saturation to u32::MAX:\n{text}"
    );
}

#[test]
fn shifts_are_masked_and_reported() {
    let mut k = KernelBuilder::new("shifts", [1, 1, 1]);
    let a = k.buffer("a", U32, 4, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            f.store(a, 0u32, a.at(0u32) << a.at(1u32));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    let line = text
        .lines()
        .find(|l| l.contains("= OpShiftLeftLogical "))
        .expect("a shift");
    let amount = line.split_whitespace().last().unwrap();
    assert!(
        text.lines()
            .any(|l| l.trim().starts_with(&format!("{amount} = OpBitwiseAnd"))),
        "{text}"
    );
}

#[test]
fn barrier_orders_workgroup_and_storage_memory() {
    let mut k = KernelBuilder::new("barrier", [64, 1, 1]);
    let a = k.buffer("a", F32, 64, Access::Read);
    let c = k.buffer("c", F32, 64, Access::Write);
    let s = k.shared("s", F32, 64);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(s, i.clone(), a.at(i.clone()));
            f.barrier();
            f.store(c, i.clone(), s.at(63u32 - i));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    assert_eq!(count(&text, "OpControlBarrier"), 1, "{text}");
    // AcquireRelease | UniformMemory | WorkgroupMemory = 0x8 | 0x40 | 0x100.
    assert!(
        text.contains("OpConstant  %uint 328") || text.contains("328"),
        "{text}"
    );
    assert!(text.contains("Workgroup"), "{text}");
}

#[test]
fn loops_with_returns_are_structured() {
    let mut k = KernelBuilder::new("loops", [32, 1, 1]);
    let a = k.buffer("a", I32, 256, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.for_("j", 0u32, 8u32, 1, |f, j| {
                let idx = f.let_("idx", i.clone() * 8u32 + j.clone());
                f.if_(a.at(idx.clone()).lt(0i32), |f| f.ret());
                f.store(a, idx.clone(), a.at(idx) + 1i32);
            });
        })
        .unwrap();
    let text = emit_valid(&kernel);
    assert_eq!(count(&text, "OpLoopMerge"), 1, "{text}");
}

#[test]
fn f16_and_wide_types_declare_their_capabilities() {
    let mut k = KernelBuilder::new("types", [1, 1, 1]);
    let h = k.buffer("h", F16, 4, Access::ReadWrite);
    let d = k.buffer("d", F64, 4, Access::ReadWrite);
    let l = k.buffer("l", I64, 4, Access::ReadWrite);
    let b = k.buffer("b", Bool, 4, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            f.store(h, 0u32, h.at(1u32) + d.at(0u32).cast(F16));
            f.store(d, 1u32, d.at(2u32).sqrt() * d.at(3u32));
            f.store(l, 0u32, l.at(1u32) / l.at(2u32) + h.at(2u32).cast(I64));
            f.store(b, 0u32, b.at(1u32) ^ b.at(2u32));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    for cap in [
        "OpCapability StorageBuffer16BitAccess",
        "OpCapability Float64",
        "OpCapability Int64",
    ] {
        assert!(text.contains(cap), "missing {cap}:\n{text}");
    }

    let mut k = KernelBuilder::new("plain", [1, 1, 1]);
    let a = k.buffer("a", F32, 4, Access::ReadWrite);
    let kernel = k.build(|f| f.store(a, 0u32, a.at(1u32) + 1.0f32)).unwrap();
    let text = emit_valid(&kernel);
    assert_eq!(count(&text, "OpCapability"), 1, "only Shader:\n{text}");
}

/// Emits, checks with spirv-val and naga's front end; returns the disassembly.
fn emit_valid_for_naga(kernel: &Kernel) -> String {
    let text = emit_valid(kernel);
    if let Err(msg) = naga_parse(&emit_ok(kernel)) {
        panic!("naga rejected `{}`: {msg}\n{text}", kernel.name);
    }
    text
}

/// The `OpFunction` lines of the disassembly.
fn functions(text: &str) -> usize {
    count(text, "OpFunction")
}

#[test]
fn float_remainder_is_refused_unexpanded_and_integer_code_once_expanded() {
    // f32 scalar and vector, f16 (computed in f32 registers) and f64.
    let mut k = KernelBuilder::new("fmod", [4, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let c = k.buffer("c", F32, 16, Access::Write);
    let h = k.buffer("h", F16, 4, Access::ReadWrite);
    let d = k.buffer("d", F64, 4, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0) * 4u32);
            f.store(c, 0u32, a.at(0u32) % a.at(1u32));
            let v = a.load(i.clone(), 4) % a.load(i.clone(), 4).sqrt();
            f.store(c, i, v);
            f.store(h, 0u32, h.at(1u32) % h.at(2u32));
            f.store(d, 0u32, d.at(1u32) % d.at(2u32));
        })
        .unwrap();
    match emit(&kernel) {
        Err(CodegenError::Unsupported { construct, .. }) => {
            assert!(construct.contains("float `%`"), "{construct}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let expanded = kernelc_ir::passes::for_target(&kernel, &required_expansion(true));
    let text = emit_valid_for_naga(&expanded);
    assert_eq!(functions(&text), 1, "the entry point only:\n{text}");
    for op in ["OpFRem", "OpFMod", "OpFDiv"] {
        assert_eq!(count(&text, op), 0, "{op} in\n{text}");
    }
    assert!(text.contains("OpCapability Int64"), "{text}");
}

#[test]
fn scalars_and_vectors_emit_valid_code() {
    let mut k = KernelBuilder::new("vectors", [16, 1, 1]);
    let a = k.buffer("a", F32, 64, Access::Read);
    let c = k.buffer("c", F32, 64, Access::Write);
    let s = k.scalar("s", F32);
    let n = k.scalar("n", I64);
    let hs = k.scalar("hs", F16);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0) * 4u32);
            let v = f.let_("v", a.load(i.clone(), 4));
            let w = f.let_("w", v.clone() * s.clone().splat(4));
            let m = w.clone().lane(0).max(hs.cast(F32)) + n.cast(F32);
            f.store(
                c,
                i.clone(),
                vector([m, w.clone().lane(1), w.clone().lane(2), w.lane(3)]),
            );
        })
        .unwrap();
    let text = emit_valid(&kernel);
    assert!(text.contains("OpTypeVector"), "{text}");
}

#[test]
fn bf16_is_unsupported() {
    let mut k = KernelBuilder::new("bf16", [1, 1, 1]);
    let a = k.buffer("a", Bf16, 4, Access::ReadWrite);
    let kernel = k.build(|f| f.store(a, 0u32, a.at(1u32))).unwrap();
    match emit(&kernel) {
        Err(CodegenError::Unsupported { target, construct }) => {
            assert_eq!(target, "spirv");
            assert!(construct.contains("bf16"), "{construct}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn bf16_values_are_computed_in_f32_registers() {
    let mut k = KernelBuilder::new("bf16_values", [4, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let n = k.buffer("n", I32, 16, Access::Read);
    let d = k.buffer("d", F64, 16, Access::Read);
    let c = k.buffer("c", F32, 16, Access::Write);
    let s = k.scalar("s", Bf16);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0) * 4u32);
            let rounded = a.load(i.clone(), 4).cast(Bf16) * s.clone().splat(4);
            f.store(c, i.clone(), rounded.cast(F32));
            let from_int = n.at(i.clone()).cast(Bf16) + d.at(i.clone()).cast(Bf16);
            f.store(c, i.clone() + 1u32, from_int.cast(F32));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    // Rounding to bf16 keeps the upper 16 bits: the mask 0xffff0000.
    assert!(text.contains("4294901760"), "{text}");
}

#[test]
fn unexpanded_transcendentals_are_unsupported() {
    for ty in [F32, F64] {
        let mut k = KernelBuilder::new("exp", [1, 1, 1]);
        let a = k.buffer("a", ty, 4, Access::ReadWrite);
        let kernel = k.build(|f| f.store(a, 0u32, a.at(1u32).exp())).unwrap();
        match emit(&kernel) {
            Err(CodegenError::Unsupported { target, construct }) => {
                assert_eq!(target, "spirv");
                assert!(construct.contains("exp"), "{construct}");
            }
            other => panic!("expected Unsupported for {ty} exp, got {other:?}"),
        }
    }
}

#[test]
fn invalid_kernels_are_rejected() {
    let mut kernel = {
        let mut k = KernelBuilder::new("bad", [1, 1, 1]);
        let a = k.buffer("a", F32, 4, Access::ReadWrite);
        k.build(|f| f.store(a, 0u32, a.at(1u32))).unwrap()
    };
    kernel.workgroup_size = [0, 1, 1];
    assert!(matches!(emit(&kernel), Err(CodegenError::Invalid(_))));
}

#[test]
fn entry_point_lists_only_input_variables() {
    let mut k = KernelBuilder::new("iface", [8, 8, 1]);
    let a = k.buffer("a", U32, 4096, Access::Write);
    let kernel = k
        .build(|f| {
            let x = f.let_("x", global_id(0) + workgroup_id(1) + num_workgroups(2));
            f.store(a, local_id(0) * 8u32 + local_id(1), x);
        })
        .unwrap();
    let text = emit_valid(&kernel);
    let entry = text
        .lines()
        .find(|l| l.contains("OpEntryPoint"))
        .expect("an entry point");
    assert!(
        entry.contains("GLCompute") && entry.contains("\"main\""),
        "{entry}"
    );
    // Four builtins, no buffer.
    assert_eq!(
        entry
            .split_whitespace()
            .filter(|w| w.starts_with('%'))
            .count(),
        5,
        "{entry}"
    );
    assert!(text.contains("LocalSize 8 8 1"), "{text}");
}

#[test]
fn every_scalar_type_round_trips_through_memory() {
    for ty in [Bool, I32, U32, I64, F16, F32, F64] {
        let mut k = KernelBuilder::new("copy", [4, 1, 1]);
        let a = k.buffer("a", ty, 16, Access::Read);
        let c = k.buffer("c", ty, 16, Access::Write);
        let kernel = k
            .build(|f| {
                let i = f.let_("i", local_id(0) * 4u32);
                f.store(c, i.clone(), a.load(i.clone(), 4));
                f.store(c, i.clone() + 17u32, a.at(i));
            })
            .unwrap();
        emit_valid(&kernel);
    }
}

/// Writes every catalogue module (`.spv`) and its kernel (`.ir`) into the directory
/// named by `KERNELC_SPIRV_DUMP` (for debugging a failure by hand; run explicitly
/// with `--ignored`).
#[test]
#[ignore]
fn dump_catalogue() {
    let Some(dir) = std::env::var_os("KERNELC_SPIRV_DUMP") else {
        panic!("set KERNELC_SPIRV_DUMP to a directory");
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let expansion = required_expansion(true);
    for (label, caps) in catalogue_caps() {
        for (i, k) in catalogue_kernels(&caps, &expansion)
            .unwrap()
            .iter()
            .enumerate()
        {
            let stem: String = format!("{label}-{i:03}-{}", k.label)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            std::fs::write(dir.join(format!("{stem}.ir")), k.kernel.to_string()).unwrap();
            if let Ok(words) = emit(&k.kernel) {
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                std::fs::write(dir.join(format!("{stem}.spv")), bytes).unwrap();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Resource bindings
// ---------------------------------------------------------------------------------------

/// The `Binding` decoration of each named resource variable, by name, and every
/// (descriptor set, binding) pair the module declares, from its disassembly.
/// Each named resource's binding, and every (descriptor set, binding) pair.
type Bindings = (Vec<(String, u32)>, Vec<(u32, u32)>);

fn bindings(text: &str) -> Bindings {
    let mut names = std::collections::HashMap::new();
    let mut set_of = std::collections::HashMap::new();
    let mut binding_of = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["OpName", id, name] => {
                names.insert(id.to_string(), name.trim_matches('"').to_string());
            }
            ["OpDecorate", id, "DescriptorSet", set] => {
                set_of.insert(id.to_string(), set.parse::<u32>().expect("a set number"));
            }
            ["OpDecorate", id, "Binding", b] => {
                binding_of.push((id.to_string(), b.parse::<u32>().expect("a binding number")));
            }
            _ => {}
        }
    }
    let named = binding_of
        .iter()
        .map(|(id, b)| (names.get(id).cloned().unwrap_or_else(|| id.clone()), *b))
        .collect();
    let pairs = binding_of
        .iter()
        .map(|(id, b)| (set_of.get(id).copied().unwrap_or(u32::MAX), *b))
        .collect();
    (named, pairs)
}

/// `Ok` when the module's resources sit in descriptor set 0 at bindings exactly
/// `0..n`, without gaps.
///
/// wgpu-hal's Vulkan backend (wgpu 30) numbers the `VkDescriptorSetLayoutBinding`s of a
/// bind group layout densely, in the order of the layout's wgpu binding numbers, and
/// remaps only the shaders naga generates. A passthrough SPIR-V module is used as is,
/// so its binding numbers must already be those dense ones (gfx-rs/wgpu#9326). A gap
/// (numbering bindings by parameter index leaves one per scalar parameter, and one for
/// an absent scalar block) shifts every later resource: the scalar block reads another
/// buffer (GEMM's `alpha` read as 0), and the status word names a binding the
/// pipeline layout lacks (undefined in Vulkan), so run-time errors may go unreported.
fn dense_bindings(words: &[u32]) -> Result<(), String> {
    let (_, mut pairs) = bindings(&disassemble(words));
    pairs.sort_unstable();
    let expected: Vec<(u32, u32)> = (0..pairs.len() as u32).map(|b| (0, b)).collect();
    if pairs == expected {
        Ok(())
    } else {
        Err(format!(
            "(descriptor set, binding) pairs {pairs:?} are not set 0, bindings 0..{}",
            pairs.len()
        ))
    }
}

/// The failure behind GEMM, conv2d and batch-norm training giving wrong results (a
/// scalar parameter read as 0) through wgpu's SPIR-V passthrough on lavapipe: a
/// scalar parameter between buffers must not leave a hole in the binding numbers.
#[test]
fn bindings_are_dense_around_scalar_parameters() {
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    let xs = k.buffer("xs", F32, 64, Access::Read);
    let alpha = k.scalar("alpha", F32);
    let ys = k.buffer("ys", F32, 64, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().lt(64u32), |f| {
                let v = alpha.clone() * xs.at(i.clone()) + ys.at(i.clone());
                f.store(ys, i, v);
            });
        })
        .unwrap();
    let words = emit_ok(&kernel);
    let text = emit_valid(&kernel);
    let (mut named, _) = bindings(&text);
    named.sort_by_key(|(_, b)| *b);
    let expected = [
        ("xs", 0),
        ("ys", 1),
        ("kernelc_scalars", 2),
        ("kernelc_status", 3),
    ];
    let expected: Vec<(String, u32)> = expected.iter().map(|(n, b)| (n.to_string(), *b)).collect();
    assert_eq!(named, expected, "{text}");
    dense_bindings(&words).unwrap_or_else(|e| panic!("{e}\n{text}"));
}

#[test]
fn every_catalogue_kernel_has_dense_bindings() {
    check_catalogue("dense bindings", &dense_bindings);
}

/// The disassembly line defining `id` (`%5 = OpTypeVector %6 4` for `%5`).
fn definition<'t>(text: &'t str, id: &str) -> Option<&'t str> {
    text.lines()
        .map(str::trim)
        .find(|l| l.split_once(" = ").is_some_and(|(lhs, _)| lhs.trim() == id))
}

/// The operand `n` (after the opcode) of the instruction defining `id`.
fn operand<'t>(text: &'t str, id: &str, n: usize) -> Option<&'t str> {
    definition(text, id)?
        .split_once(" = ")?
        .1
        .split_whitespace()
        .nth(n + 1)
}

/// The runtime array inside the `Block` variable named `name`: (the definition of its
/// element type, its `ArrayStride`).
fn buffer_array(text: &str, name: &str) -> (String, u32) {
    let var = text
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("OpName ")?;
            let (id, quoted) = rest.split_once(' ')?;
            (quoted == format!("\"{name}\"")).then(|| id.to_string())
        })
        .unwrap_or_else(|| panic!("no variable `{name}`:\n{text}"));
    let ptr = operand(text, &var, 0).expect("variable type");
    let block = operand(text, ptr, 1).expect("pointee");
    let array = operand(text, block, 0).expect("struct member");
    assert!(
        definition(text, array).is_some_and(|d| d.contains("OpTypeRuntimeArray")),
        "`{name}` is not a runtime array:\n{text}"
    );
    let elem = operand(text, array, 0).expect("array element");
    let stride = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(&format!("OpDecorate {array} ArrayStride "))?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no ArrayStride on {array}:\n{text}"));
    (
        definition(text, elem).unwrap_or_default().to_string(),
        stride,
    )
}

#[test]
fn aligned_vector_buffers_are_vector_arrays() {
    let mut k = KernelBuilder::new("add4", [64, 1, 1]);
    let a = k.buffer("a", F32, 256, Access::Read);
    let b = k.buffer("b", F32, 256, Access::Read);
    let mixed = k.buffer("mixed", F32, 256, Access::Read);
    let out = k.buffer("out", F32, 256, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0) * 4u32);
            let sum = a.load(i.clone(), 4)
                + b.load(i.clone(), 4)
                + mixed.load(i.clone(), 4)
                + mixed.at(i.clone()).splat(4);
            f.store(out, i, sum);
        })
        .unwrap();
    let text = emit_valid(&kernel);
    naga_parse(&emit_ok(&kernel)).unwrap_or_else(|e| panic!("naga: {e}\n{text}"));
    for name in ["a", "b", "out"] {
        let (elem, stride) = buffer_array(&text, name);
        assert!(
            elem.contains("OpTypeVector") && elem.ends_with(" 4"),
            "`{name}` element is {elem}:\n{text}"
        );
        assert_eq!(stride, 16, "`{name}`:\n{text}");
    }
    let (elem, stride) = buffer_array(&text, "mixed");
    assert!(
        elem.contains("OpTypeFloat 32"),
        "`mixed` element is {elem}:\n{text}"
    );
    assert_eq!(stride, 4);
    // a, b: one vector load each; mixed: 4 + 1 scalar loads; out: one vector store.
    assert_eq!(
        count(&text, "OpLoad") - loads_outside_buffers(&text),
        2 + 5,
        "{text}"
    );
    assert_eq!(
        count(&text, "OpStore") - stores_outside_buffers(&text),
        1,
        "{text}"
    );
    assert_eq!(count(&text, "OpShiftRightLogical"), 3, "{text}");
}

/// The `OpLoad`s that do not read a buffer element: builtins, locals, the status
/// accumulator.
fn loads_outside_buffers(text: &str) -> usize {
    let chains: Vec<String> = results_of(text, "OpAccessChain");
    text.lines()
        .filter(|l| {
            let mut w = l.split_whitespace().skip_while(|w| *w != "OpLoad");
            w.next().is_some() && w.nth(1).is_some_and(|ptr| !chains.iter().any(|c| c == ptr))
        })
        .count()
}

/// The `OpStore`s that do not write a buffer element (locals, the status accumulator).
fn stores_outside_buffers(text: &str) -> usize {
    let chains: Vec<String> = results_of(text, "OpAccessChain");
    text.lines()
        .filter(|l| {
            let mut w = l.split_whitespace().skip_while(|w| *w != "OpStore");
            w.next().is_some() && w.next().is_some_and(|ptr| !chains.iter().any(|c| c == ptr))
        })
        .count()
}

#[test]
fn vector_view_keeps_element_unit_bounds_checks() {
    let mut k = KernelBuilder::new("add4_checked", [64, 1, 1]);
    let a = k.buffer("a", U32, 256, Access::Read);
    let out = k.buffer("out", U32, 256, Access::Write);
    let kernel = k
        .build(|f| {
            // In 4..=256: aligned, but the last invocation is out of bounds.
            let i = f.let_("i", local_id(0) * 4u32 + 4u32);
            f.store(out, i.clone(), a.load(i, 4) + E::from(1u32).splat(4));
        })
        .unwrap();
    let text = emit_valid(&kernel);
    for name in ["a", "out"] {
        let (elem, stride) = buffer_array(&text, name);
        assert!(
            elem.contains("OpTypeVector"),
            "`{name}` element is {elem}:\n{text}"
        );
        assert_eq!(stride, 16, "`{name}`:\n{text}");
    }
    // Both accesses compare the element index against len - lanes = 252.
    let limit = results_of(&text, "OpConstant")
        .into_iter()
        .find(|id| definition(&text, id).is_some_and(|d| d.ends_with(" 252")))
        .unwrap_or_else(|| panic!("no constant 252:\n{text}"));
    let checks = text
        .lines()
        .filter(|l| l.contains("OpULessThanEqual") && l.trim_end().ends_with(&format!(" {limit}")))
        .count();
    assert_eq!(checks, 2, "{text}");
}
