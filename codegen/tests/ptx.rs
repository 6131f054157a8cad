//! The PTX target: every catalogue kernel emits PTX that NVIDIA's `ptxas` assembles,
//! and focused checks of the emitted text for the semantics that are easy to get
//! wrong (no fma contraction, correctly rounded division and square root, saturating
//! casts, minNum/maxNum, exact fmod, wide loads, the kernel ABI, typed refusals).
//!
//! `ptxas`: `$PTXAS`, else `$HOME/.cache/kernelc-tools/cuda/nvidia/cu13/bin/ptxas`.
//! Without it the catalogue test fails, unless `KERNELC_ALLOW_MISSING_TOOLS=1` (and
//! `CI` unset), where it reports NOT RUN loudly instead of assembling.
#![cfg(feature = "ptx")]

use kernelc_codegen::ptx::{self, PtxOptLevel, PtxOptions};
use kernelc_codegen::CodegenError;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Kernel, ScalarType};
use kernelc_kernels::conformance::catalogue_kernels;
use kernelc_kernels::lower::TargetCaps;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use ScalarType::{Bf16, Bool, F16, F32, F64, I32, I64, U32};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

fn ptxas_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME")?;
    let p = Path::new(&home).join(".cache/kernelc-tools/cuda/nvidia/cu13/bin/ptxas");
    p.exists().then_some(p)
}

/// `ptxas`, or `None` (after a loud NOT RUN) where missing tools are allowed.
fn require_ptxas() -> Option<PathBuf> {
    if let Some(p) = ptxas_path() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!("ptxas not found (set PTXAS) and CI is set: the PTX cannot be checked");
    }
    if std::env::var("KERNELC_ALLOW_MISSING_TOOLS").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! NOT RUN: ptxas not found (set PTXAS); the emitted PTX was NOT \
             assembled !!!!!!!!\n"
        );
        return None;
    }
    panic!("ptxas not found: set PTXAS, or KERNELC_ALLOW_MISSING_TOOLS=1 to skip assembling");
}

/// Assembles `ptx` with `ptxas -arch=sm_90` (`sm_90a` where the PTX targets it); the
/// error output on failure.
fn assemble(ptxas: &Path, dir: &Path, name: &str, ptx: &str) -> Result<(), String> {
    let src = dir.join(format!("{name}.ptx"));
    let out = dir.join(format!("{name}.cubin"));
    std::fs::write(&src, ptx).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let arch = if ptx.contains(".target sm_90a") {
        "-arch=sm_90a"
    } else {
        "-arch=sm_90"
    };
    let result = Command::new(ptxas)
        .arg(arch)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    if result.status.success() {
        let _ = std::fs::remove_file(&src);
        let _ = std::fs::remove_file(&out);
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        ))
    }
}

fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kernelc-ptx-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

fn emit(kernel: &Kernel) -> String {
    match ptx::emit(kernel, &PtxOptions::default()) {
        Ok(p) => p,
        Err(e) => panic!("ptx::emit failed: {e}\n{kernel}"),
    }
}

/// Emits and, when ptxas is there, assembles.
fn emit_checked(kernel: &Kernel) -> String {
    let ptx = emit(kernel);
    if let Some(ptxas) = ptxas_path() {
        let dir = scratch_dir(&kernel.name);
        if let Err(e) = assemble(&ptxas, &dir, &kernel.name, &ptx) {
            panic!("ptxas rejected `{}`:\n{e}\n{ptx}", kernel.name);
        }
        let _ = std::fs::remove_dir(&dir);
    }
    ptx
}

/// The instruction lines of a PTX text (no comments, directives or labels).
fn instructions(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('.'))
        .filter(|l| !l.ends_with(':') && *l != "{" && *l != "}")
        .collect()
}

/// The opcode of an instruction line (`ret;` -> `ret`).
fn opcode(line: &str) -> &str {
    line.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(';')
}

fn has_instr(ptx: &str, op: &str) -> bool {
    instructions(ptx).iter().any(|l| opcode(l) == op)
}

fn count_instr_prefix(ptx: &str, prefix: &str) -> usize {
    instructions(ptx)
        .iter()
        .filter(|l| opcode(l).starts_with(prefix))
        .count()
}

/// `out[i] = f(a[i], b[i], c[i])` over `n` elements of `ty`, one per invocation.
fn ternary(name: &str, ty: ScalarType, out_ty: ScalarType, f: impl FnOnce(E, E, E) -> E) -> Kernel {
    let n = 256;
    let mut k = KernelBuilder::new(name, [64, 1, 1]);
    let a = k.buffer("a", ty, n, Access::Read);
    let b = k.buffer("b", ty, n, Access::Read);
    let c = k.buffer("c", ty, n, Access::Read);
    let out = k.buffer("out", out_ty, n, Access::Write);
    k.build(|body| {
        let i = body.let_("i", global_id(0));
        body.if_(i.clone().lt(n as u32), |body| {
            let v = f(a.at(i.clone()), b.at(i.clone()), c.at(i.clone()));
            body.store(out, i, v);
        });
    })
    .expect("valid kernel")
}

// ---------------------------------------------------------------------------------------
// The catalogue
// ---------------------------------------------------------------------------------------

#[test]
fn every_catalogue_kernel_emits_and_assembles() {
    // As the CUDA device compiles them: every transcendental, f64 too, and float `%`
    // in IR.
    let kernels = catalogue_kernels(&TargetCaps::cuda_sm90(), &ptx::required_expansion())
        .expect("lowering the catalogue");
    let options = PtxOptions::default();
    let mut emitted: Vec<(String, String)> = Vec::new();
    let mut unsupported: Vec<(String, String)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut times_ms: Vec<f64> = Vec::new();
    for (i, ck) in kernels.iter().enumerate() {
        let start = Instant::now();
        let result = ptx::emit(&ck.kernel, &options);
        times_ms.push(start.elapsed().as_secs_f64() * 1e3);
        match result {
            Ok(text) => emitted.push((format!("k{i}"), text)),
            Err(CodegenError::Unsupported { construct, .. }) => {
                unsupported.push((ck.label.clone(), construct))
            }
            Err(e) => failed.push(format!("{}: {e}", ck.label)),
        }
    }
    times_ms.sort_by(f64::total_cmp);
    let median = times_ms.get(times_ms.len() / 2).copied().unwrap_or(0.0);
    let max = times_ms.last().copied().unwrap_or(0.0);
    println!(
        "PTX: {} catalogue kernels: {} emitted, {} unsupported, {} failed; emit time \
         median {median:.2} ms, max {max:.2} ms",
        kernels.len(),
        emitted.len(),
        unsupported.len(),
        failed.len()
    );
    for (label, why) in &unsupported {
        println!("  unsupported: {label}: {why}");
    }
    assert!(failed.is_empty(), "emission failed:\n{}", failed.join("\n"));
    // With the math expanded, every kernel emits.
    assert!(
        unsupported.is_empty(),
        "unexpectedly unsupported:\n{}",
        unsupported
            .iter()
            .map(|(l, w)| format!("{l}: {w}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(!emitted.is_empty());

    // (`.extern .shared` is the dynamic shared memory of kernels past 48 KiB.)
    for (name, text) in &emitted {
        assert!(
            !text.contains(".extern .func"),
            "{name} calls an external function"
        );
    }

    let Some(ptxas) = require_ptxas() else {
        return;
    };
    let dir = scratch_dir("catalogue");
    let threads = 2;
    let chunk = emitted.len().div_ceil(threads);
    let rejected: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = emitted
            .chunks(chunk)
            .map(|part| {
                let (ptxas, dir) = (&ptxas, &dir);
                s.spawn(move || {
                    part.iter()
                        .filter_map(|(name, text)| {
                            assemble(ptxas, dir, name, text)
                                .err()
                                .map(|e| format!("{name}: {e}"))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("ptxas thread"))
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "ptxas -arch=sm_90: {}/{} emitted kernels assembled",
        emitted.len() - rejected.len(),
        emitted.len()
    );
    assert!(
        rejected.is_empty(),
        "ptxas rejected:\n{}",
        rejected.join("\n")
    );
}

/// No catalogue kernel has an fma that its IR did not ask for: each `fma` instruction
/// in the PTX is matched by an IR `fma` (or comes from kernelc's own math expansion,
/// which writes `fma` explicitly where it wants one).
#[test]
fn catalogue_kernels_fuse_only_where_the_ir_says_fma() {
    fn ir_has_fma(k: &Kernel) -> bool {
        format!("{k}").contains("fma(")
    }
    let kernels = catalogue_kernels(&TargetCaps::cuda_sm90(), &ptx::required_expansion())
        .expect("lowering the catalogue");
    let mut checked = 0;
    for ck in &kernels {
        let Ok(text) = ptx::emit(&ck.kernel, &PtxOptions::default()) else {
            continue;
        };
        let fmas = count_instr_prefix(&text, "fma");
        if fmas > 0 && !ir_has_fma(&ck.kernel) {
            panic!(
                "{}: {fmas} fma instructions without an IR fma\n{text}",
                ck.label
            );
        }
        // Every float add/sub/mul carries an explicit rounding mode.
        for l in instructions(&text) {
            let op = opcode(l);
            for bare in [
                "add.f32", "sub.f32", "mul.f32", "add.f64", "sub.f64", "mul.f64",
            ] {
                assert_ne!(op, bare, "{}: `{l}` may be contracted by ptxas", ck.label);
            }
        }
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn emission_is_deterministic_and_thread_safe() {
    let kernels = catalogue_kernels(&TargetCaps::cuda_sm90(), &ptx::required_expansion())
        .expect("lowering the catalogue");
    let sample: Vec<&Kernel> = kernels.iter().step_by(7).map(|c| &c.kernel).collect();
    let options = PtxOptions::default();
    let sequential: Vec<Result<String, CodegenError>> =
        sample.iter().map(|k| ptx::emit(k, &options)).collect();
    let parallel: Vec<Vec<Result<String, CodegenError>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| sample.iter().map(|k| ptx::emit(k, &options)).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    for run in parallel {
        assert_eq!(run, sequential);
    }
}

// ---------------------------------------------------------------------------------------
// Focused checks
// ---------------------------------------------------------------------------------------

#[test]
fn entry_point_parameters_and_block_size() {
    let mut k = KernelBuilder::new("abi", [64, 2, 1]);
    let x = k.buffer("x", F32, 128, Access::Read);
    let s = k.scalar("s", F32);
    let n = k.scalar("n", U32);
    let flags = k.buffer("flags", Bool, 128, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0) + local_id(1) * 64u32);
            b.if_(i.clone().lt(n), |b| {
                b.store(flags, i.clone(), (x.at(i) * s).gt(0.0f32));
            });
        })
        .expect("valid");
    let ptx = emit_checked(&kernel);
    assert!(ptx.contains(".visible .entry main("), "{ptx}");
    assert!(ptx.contains(".version 9.0"), "{ptx}");
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert!(ptx.contains(".reqntid 64, 2, 1"), "{ptx}");
    // 4 IR parameters + status, every one 8 bytes, in order.
    let params: Vec<&str> = ptx
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(".param"))
        .collect();
    assert_eq!(params.len(), 5, "{params:#?}");
    for (i, p) in params.iter().enumerate() {
        assert!(
            p.starts_with(".param .u64"),
            "parameter {i} is not 8 bytes: {p}"
        );
        assert!(p.contains(&format!("main_param_{i}")), "{p}");
    }
    for i in [0, 3, 4] {
        assert!(
            params[i].contains(".ptr .global"),
            "parameter {i}: {}",
            params[i]
        );
    }
    // Bool elements are bytes.
    assert!(
        has_instr(&ptx, "st.global.b8") || has_instr(&ptx, "st.global.u8"),
        "{ptx}"
    );
    // Every access is provably in bounds here, so the status word is never touched.
    assert!(!ptx.contains("atom."), "{ptx}");

    // A kernel that can fail ORs its status in, atomically, once.
    let mut k = KernelBuilder::new("abi_status", [64, 1, 1]);
    let x = k.buffer("x", F32, 16, Access::ReadWrite);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            b.store(x, i.clone(), x.at(i) + 1.0f32);
        })
        .expect("valid");
    let ptx = emit_checked(&kernel);
    assert_eq!(count_instr_prefix(&ptx, "atom."), 1, "{ptx}");
    assert!(has_instr(&ptx, "atom.global.or.b32"), "{ptx}");
}

#[test]
fn float_arithmetic_is_rounded_explicitly_and_never_contracted() {
    for ty in [F32, F64] {
        let kernel = ternary("mad", ty, ty, |a, b, c| a.clone() * b - c.clone() + a * c);
        let ptx = emit_checked(&kernel);
        let t = if ty == F32 { "f32" } else { "f64" };
        assert!(has_instr(&ptx, &format!("mul.rn.{t}")), "{ptx}");
        assert!(has_instr(&ptx, &format!("add.rn.{t}")), "{ptx}");
        assert!(has_instr(&ptx, &format!("sub.rn.{t}")), "{ptx}");
        assert_eq!(count_instr_prefix(&ptx, "fma"), 0, "{ptx}");
    }
}

#[test]
fn explicit_fma_is_one_fma() {
    let kernel = ternary("fma", F32, F32, |a, b, c| a.fma(b, c));
    let ptx = emit_checked(&kernel);
    assert!(has_instr(&ptx, "fma.rn.f32"), "{ptx}");
    assert_eq!(count_instr_prefix(&ptx, "mul"), 1, "{ptx}"); // the index arithmetic
}

#[test]
fn division_and_sqrt_are_correctly_rounded() {
    for ty in [F32, F64] {
        let kernel = ternary("divsqrt", ty, ty, |a, b, c| (a / b).sqrt() + c.rsqrt());
        let ptx = emit_checked(&kernel);
        let t = if ty == F32 { "f32" } else { "f64" };
        assert!(has_instr(&ptx, &format!("div.rn.{t}")), "{ptx}");
        // rsqrt of f32 is 1 / sqrt in f64, rounded once.
        assert!(has_instr(&ptx, "sqrt.rn.f64"), "{ptx}");
        assert!(has_instr(&ptx, &format!("sqrt.rn.{t}")), "{ptx}");
        assert!(!ptx.contains("approx"), "{ptx}");
        assert!(!ptx.contains(".ftz"), "{ptx}");
    }
}

#[test]
fn float_to_int_casts_saturate_and_map_nan_to_zero() {
    let kernel = ternary("sat", F32, I32, |a, _, _| a.cast(I32));
    let ir = ptx::emit_llvm_ir(&kernel, &PtxOptions::default()).expect("llvm ir");
    assert!(ir.contains("llvm.fptosi.sat.i32.f32"), "{ir}");
    let ptx = emit_checked(&kernel);
    assert!(has_instr(&ptx, "cvt.rzi.s32.f32"), "{ptx}");
    // NaN is tested explicitly (NaN -> 0), as are both ends of the range.
    assert!(
        ptx.contains("setp.nan.f32") || ptx.contains("setp.num.f32"),
        "{ptx}"
    );
    assert!(ptx.contains("2147483647"), "{ptx}");
    assert!(ptx.contains("-2147483648"), "{ptx}");

    let kernel = ternary("satu", F64, U32, |a, _, _| a.cast(U32));
    let ir = ptx::emit_llvm_ir(&kernel, &PtxOptions::default()).expect("llvm ir");
    assert!(ir.contains("llvm.fptoui.sat.i32.f64"), "{ir}");
    emit_checked(&kernel);
}

#[test]
fn float_min_max_are_ieee_min_num_max_num() {
    let kernel = ternary("minmax", F32, F32, |a, b, c| a.min(b).max(c));
    let ir = ptx::emit_llvm_ir(&kernel, &PtxOptions::default()).expect("llvm ir");
    assert!(
        ir.contains("llvm.minnum.f32") && ir.contains("llvm.maxnum.f32"),
        "{ir}"
    );
    let ptx = emit_checked(&kernel);
    // PTX min/max return the non-NaN operand (the `.NaN` forms would propagate it).
    assert!(
        has_instr(&ptx, "min.f32") && has_instr(&ptx, "max.f32"),
        "{ptx}"
    );
    assert!(!ptx.contains(".NaN"), "{ptx}");
}

#[test]
fn round_is_half_to_even() {
    let kernel = ternary("round", F32, F32, |a, b, c| {
        a.round() + b.floor() + c.ceil()
    });
    let ptx = emit_checked(&kernel);
    assert!(has_instr(&ptx, "cvt.rni.f32.f32"), "{ptx}");
    assert!(has_instr(&ptx, "cvt.rmi.f32.f32"), "{ptx}");
    assert!(has_instr(&ptx, "cvt.rpi.f32.f32"), "{ptx}");
}

#[test]
fn float_rem_is_refused_unexpanded_and_exact_integer_code_once_expanded() {
    for ty in [F32, F64, F16] {
        let kernel = ternary("fmod", ty, ty, |a, b, _| a % b);
        match ptx::emit(&kernel, &PtxOptions::default()) {
            Err(CodegenError::Unsupported { construct, .. }) => {
                assert!(construct.contains("float `%`"), "{construct}");
                assert!(construct.contains("with_float_rem"), "{construct}");
            }
            other => panic!("expected Unsupported for an unexpanded {ty} %, got {other:?}"),
        }
        let expanded = kernelc_ir::passes::for_target(&kernel, &ptx::required_expansion());
        let options = PtxOptions {
            opt_level: PtxOptLevel::O0,
            ..PtxOptions::default()
        };
        let ir = ptx::emit_llvm_ir(&expanded, &options).expect("llvm ir");
        assert!(!ir.contains("frem"), "{ir}");
        let ptx = emit_checked(&expanded);
        // NVPTX's frem would be `x - trunc(x / y) * y`: no division may appear.
        assert_eq!(count_instr_prefix(&ptx, "div."), 0, "{ptx}");
        assert!(!ptx.contains(".extern"), "{ptx}");
    }
}

#[test]
fn integer_division_is_guarded() {
    for ty in [I32, U32, I64] {
        let mut k = KernelBuilder::new("div", [32, 1, 1]);
        let a = k.buffer("a", ty, 32, Access::Read);
        let b = k.buffer("b", ty, 32, Access::Read);
        let q = k.buffer("q", ty, 32, Access::Write);
        let r = k.buffer("r", ty, 32, Access::Write);
        let kernel = k
            .build(|body| {
                let i = body.let_("i", local_id(0));
                body.store(q, i.clone(), a.at(i.clone()) / b.at(i.clone()));
                body.store(r, i.clone(), a.at(i.clone()) % b.at(i));
            })
            .expect("valid");
        let ir = ptx::emit_llvm_ir(
            &kernel,
            &PtxOptions {
                opt_level: PtxOptLevel::O0,
                ..PtxOptions::default()
            },
        )
        .expect("llvm ir");
        // The divisor is replaced (zero, and -1 for signed) before dividing.
        assert!(ir.contains("select i1"), "{ir}");
        let ptx = emit_checked(&kernel);
        assert!(count_instr_prefix(&ptx, "div.") >= 1, "{ptx}");
        assert!(has_instr(&ptx, "atom.global.or.b32"), "{ptx}");
    }
}

#[test]
fn shifts_mask_the_amount_and_report_overflow() {
    let mut k = KernelBuilder::new("shift", [32, 1, 1]);
    let a = k.buffer("a", I64, 32, Access::Read);
    let s = k.buffer("s", U32, 32, Access::Read);
    let out = k.buffer("out", I64, 32, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            let v = a.at(i.clone()) >> s.at(i.clone());
            b.store(out, i, v);
        })
        .expect("valid");
    let ir = ptx::emit_llvm_ir(&kernel, &PtxOptions::default()).expect("llvm ir");
    assert!(ir.contains("and i32") && ir.contains(", 63"), "{ir}");
    let ptx = emit_checked(&kernel);
    assert!(has_instr(&ptx, "shr.s64"), "{ptx}");
    assert!(has_instr(&ptx, "atom.global.or.b32"), "{ptx}");
}

#[test]
fn vector_loads_and_stores_are_single_wide_accesses() {
    let n = 1024u64;
    let mut k = KernelBuilder::new("vec4", [64, 1, 1]);
    let a = k.buffer("a", F32, n, Access::Read);
    let out = k.buffer("out", F32, n, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0) * 4u32);
            b.if_(i.clone().lt(n as u32), |b| {
                let v = a.load(i.clone(), 4);
                b.store(out, i, v.clone() * v);
            });
        })
        .expect("valid");
    let ptx = emit_checked(&kernel);
    // LLVM 22 spells 32-bit vector accesses `.b32` (`.f32` in older versions).
    assert!(
        has_instr(&ptx, "ld.global.v4.b32") || has_instr(&ptx, "ld.global.v4.f32"),
        "{ptx}"
    );
    assert!(
        has_instr(&ptx, "st.global.v4.b32") || has_instr(&ptx, "st.global.v4.f32"),
        "{ptx}"
    );
    assert_eq!(count_instr_prefix(&ptx, "ld.global.b32"), 0, "{ptx}");
}

#[test]
fn unaligned_vector_access_is_checked() {
    let mut k = KernelBuilder::new("vec_unaligned", [64, 1, 1]);
    let a = k.buffer("a", F64, 256, Access::Read);
    let off = k.scalar("off", U32);
    let out = k.buffer("out", F64, 256, Access::Write);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0) * 2u32 + off);
            b.store(out, local_id(0) * 2u32, a.load(i, 2));
        })
        .expect("valid");
    // The emitted IR has one vector load (LLVM's InstCombine may scalarise it, and
    // the NVPTX load/store vectoriser merges it again: the PTX is what counts).
    let o0 = PtxOptions {
        opt_level: PtxOptLevel::O0,
        ..PtxOptions::default()
    };
    let ir = ptx::emit_llvm_ir(&kernel, &o0).expect("llvm ir");
    assert!(ir.contains("load <2 x double>"), "{ir}");
    assert!(ir.contains("align 16"), "{ir}");
    let ptx = emit_checked(&kernel);
    assert!(
        has_instr(&ptx, "ld.global.v2.b64") || has_instr(&ptx, "ld.global.v2.f64"),
        "{ptx}"
    );
    assert!(has_instr(&ptx, "atom.global.or.b32"), "{ptx}");
}

#[test]
fn shared_memory_and_barriers() {
    let mut k = KernelBuilder::new("reverse", [128, 1, 1]);
    let a = k.buffer("a", F16, 128, Access::Read);
    let out = k.buffer("out", F16, 128, Access::Write);
    let tile = k.shared("tile", F16, 128);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", local_id(0));
            b.store(tile, i.clone(), a.at(i.clone()));
            b.barrier();
            let v = tile.at(E::from(127u32) - i.clone());
            b.store(out, i, v.clone() + v);
        })
        .expect("valid");
    let ptx = emit_checked(&kernel);
    assert!(ptx.contains(".shared .align 16"), "{ptx}");
    assert!(has_instr(&ptx, "bar.sync"), "{ptx}");
    assert!(
        has_instr(&ptx, "st.shared.b16") && has_instr(&ptx, "ld.shared.b16"),
        "{ptx}"
    );
}

/// Two stages of four f32 (or eight bf16) per invocation, copied asynchronously, the
/// last tile partly past the buffer (zero-filled).
fn copy_pipeline(elem: ScalarType, len: u8) -> Kernel {
    let mut k = KernelBuilder::new("copies", [32, 1, 1]);
    let tile = 32 * len as u32;
    let a = k.buffer("a", elem, 3 * tile as u64, Access::Read);
    let out = k.buffer("out", elem, 3 * 32, Access::Write);
    let stages = k.shared("stages", elem, 2 * tile);
    k.build(|f| {
        let i = f.let_("i", local_id(0));
        let copy = |f: &mut Body, t: E| {
            let at = f.let_("at", t.clone() * tile + i.clone() * len as u32);
            let dst = (t % 2u32) * tile + i.clone() * len as u32;
            f.copy_start((stages, dst), (a, at.clone()), len, at.lt(3 * tile - 40));
            f.copy_commit();
        };
        copy(f, E::from(0u32));
        f.for_("t", 0u32, 3u32, 1, |f, t| {
            f.copy_wait(0);
            f.barrier();
            f.if_(t.clone().lt(2u32), |f| copy(f, t.clone() + 1u32));
            let read = (t.clone() % 2u32) * tile + ((i.clone() + 1u32) % 32u32) * len as u32;
            f.store(out, t * 32u32 + i.clone(), stages.at(read));
        });
    })
    .expect("valid")
}

#[test]
fn asynchronous_copies_are_cp_async_with_zero_fill() {
    for (elem, len, op) in [
        (F32, 4, "cp.async.cg.shared.global"),
        (Bf16, 8, "cp.async.cg.shared.global"),
        (F32, 2, "cp.async.ca.shared.global"),
        (F32, 1, "cp.async.ca.shared.global"),
    ] {
        let kernel = copy_pipeline(elem, len);
        let ptx = emit_checked(&kernel);
        let copies: Vec<&str> = instructions(&ptx)
            .into_iter()
            .filter(|l| {
                ["cp.async.ca.", "cp.async.cg."]
                    .iter()
                    .any(|p| opcode(l).starts_with(p))
            })
            .collect();
        assert!(!copies.is_empty(), "{elem} x {len}: {ptx}");
        for c in &copies {
            assert!(opcode(c) == op, "{elem} x {len}: {c}");
            let bytes = len as u32 * elem.size_bytes();
            // Destination, source, copy size and source size (the zero fill).
            assert!(c.contains(&format!(", {bytes}, ")), "{elem} x {len}: {c}");
        }
        assert!(has_instr(&ptx, "cp.async.commit_group"), "{ptx}");
        assert!(has_instr(&ptx, "cp.async.wait_group"), "{ptx}");
    }
    // Before sm_80 there is no `cp.async`: the kernel must be expanded.
    let options = PtxOptions {
        sm: 75,
        ptx_isa: 78,
        ..PtxOptions::default()
    };
    let e = ptx::emit(&copy_pipeline(F32, 4), &options).unwrap_err();
    assert!(e.to_string().contains("asynchronous copies"), "{e}");
    let expanded = kernelc_ir::passes::expand_async_copies(&copy_pipeline(F32, 4));
    let ptx = ptx::emit(&expanded, &options).expect("the expansion emits for sm_75");
    assert!(!ptx.contains("cp.async"), "{ptx}");
}

#[test]
fn arrays_that_share_bytes_lie_at_one_offset() {
    let mut k = KernelBuilder::new("phases", [64, 1, 1]);
    let out = k.buffer("out", F32, 64, Access::Write);
    let stage = k.shared("stage", F32, 64);
    let rows = k.shared_reusing("rows", F64, 32, stage);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(stage, i.clone(), i.clone().cast(F32));
            f.barrier();
            let v = stage.at((i.clone() + 1u32) % 64u32);
            f.barrier();
            f.if_(i.clone().lt(32u32), |f| {
                f.store(rows, i.clone(), v.cast(F64))
            });
            f.barrier();
            let w = rows.at(i.clone() % 32u32).cast(F32);
            f.store(out, i, w);
        })
        .expect("valid");
    assert_eq!(kernel.shared_bytes(), 256);
    let ptx = emit_checked(&kernel);
    // One array of the set's size, not one per declaration.
    let shared: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains(".shared .align"))
        .collect();
    assert_eq!(shared.len(), 1, "{ptx}");
    assert!(shared[0].contains("[256]"), "{ptx}");
}

#[test]
fn half_precision_rounds_back_after_each_operation() {
    for ty in [F16, Bf16] {
        let kernel = ternary("half", ty, ty, |a, b, c| a * b + c);
        let ptx = emit_checked(&kernel);
        assert_eq!(count_instr_prefix(&ptx, "fma"), 0, "{ptx}");
        // Either computed in f32 and rounded back, or an equivalent 16-bit `.rn` op.
        assert!(
            ptx.contains(if ty == F16 {
                "cvt.rn.f16.f32"
            } else {
                "cvt.rn.bf16.f32"
            }) || has_instr(
                &ptx,
                if ty == F16 {
                    "mul.rn.f16"
                } else {
                    "mul.rn.bf16"
                }
            ),
            "{ptx}"
        );
    }
}

/// f64 → f16/bf16 must round once (as `Scalar::from_f64`): a direct `cvt.rn` from
/// f64, never through an f32 rounded to nearest (which turns a value just above a tie
/// into a tie).
#[test]
fn f64_to_half_types_round_once() {
    for (ty, cvt) in [(F16, "cvt.rn.f16.f64"), (Bf16, "cvt.rn.bf16.f64")] {
        let kernel = ternary("narrow", F64, ty, |a, _, _| a.cast(ty));
        let ptx = emit_checked(&kernel);
        assert!(has_instr(&ptx, cvt), "{ptx}");
        assert!(!has_instr(&ptx, "cvt.rn.f32.f64"), "{ptx}");
    }
}

#[test]
fn casts_between_all_types_emit() {
    let all = [Bool, I32, U32, I64, F16, Bf16, F32, F64];
    for from in all {
        let mut k = KernelBuilder::new(format!("cast_{from}"), [32, 1, 1]);
        let a = k.buffer("a", from, 32, Access::Read);
        let outs: Vec<_> = all
            .iter()
            .map(|&to| (to, k.buffer(format!("to_{to}"), to, 32, Access::Write)))
            .collect();
        let kernel = k
            .build(|b| {
                let i = b.let_("i", local_id(0));
                for (to, out) in outs {
                    b.store(out, i.clone(), a.at(i.clone()).cast(to));
                }
            })
            .expect("valid");
        emit_checked(&kernel);
    }
}

#[test]
fn loops_early_returns_and_selects_emit() {
    let mut k = KernelBuilder::new("control", [64, 1, 1]);
    let a = k.buffer("a", F32, 1024, Access::Read);
    let out = k.buffer("out", F32, 64, Access::Write);
    let n = k.scalar("n", I32);
    let kernel = k
        .build(|b| {
            let i = b.let_("i", global_id(0));
            b.if_(i.clone().ge(64u32), |b| b.ret());
            let acc = b.var("acc", 0.0f32);
            b.for_("j", 0i32, n, 3, |b, j| {
                let idx = j.cast(U32) + i.clone();
                let x = a.at(idx);
                b.assign(acc, x.clone().gt(0.0f32).select(acc.get() + x, acc.get()));
            });
            b.store(out, i, acc.get());
        })
        .expect("valid");
    let ptx = emit_checked(&kernel);
    assert!(has_instr(&ptx, "ret"), "{ptx}");
}

#[test]
fn transcendentals_without_libdevice_are_unsupported() {
    let kernel = ternary("exp64", F64, F64, |a, _, _| a.exp());
    match ptx::emit(&kernel, &PtxOptions::default()) {
        Err(CodegenError::Unsupported { target, construct }) => {
            assert_eq!(target, "ptx");
            assert!(construct.contains("f64 exp (no libdevice)"), "{construct}");
            // The math pass expands f64 calls too (`all_transcendental_with_f64`).
            assert!(
                construct.contains("all_transcendental_with_f64"),
                "{construct}"
            );
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // An f32 one that skipped the math expansion: refused too, with a hint.
    let kernel = ternary("sin32", F32, F32, |a, _, _| a.sin());
    match ptx::emit(&kernel, &PtxOptions::default()) {
        Err(CodegenError::Unsupported { construct, .. }) => {
            assert!(construct.contains("f32 sin (no libdevice)"), "{construct}");
            assert!(construct.contains("for_target"), "{construct}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // After the expansion it emits.
    let expanded = kernelc_ir::passes::for_target(&kernel, &ptx::required_expansion());
    emit_checked(&expanded);
}

/// f32 `exp2` stays a call through the math pass and is `ex2.approx.f32` (not the
/// flushing `.ftz` form); f16 and f64 `exp2` are expanded, no `ex2` in them.
#[test]
fn f32_exp2_is_one_ex2_and_the_other_widths_are_expanded() {
    for (ty, native) in [(F32, true), (F64, false), (F16, false)] {
        let kernel = ternary("exp2", ty, ty, |a, _, _| a.exp2());
        let expanded = kernelc_ir::passes::for_target(&kernel, &ptx::required_expansion());
        let ptx = emit_checked(&expanded);
        assert_eq!(has_instr(&ptx, "ex2.approx.f32"), native, "{ty}: {ptx}");
        assert_eq!(
            count_instr_prefix(&ptx, "ex2"),
            usize::from(native),
            "{ty}: {ptx}"
        );
    }
}

#[test]
fn invalid_kernels_and_bad_options_are_typed_errors() {
    let mut kernel = ternary("ok", F32, F32, |a, b, _| a + b);
    let good = PtxOptions::default();
    for bad in [
        PtxOptions { sm: 91, ..good },
        PtxOptions {
            ptx_isa: 70,
            ..good
        },
        PtxOptions {
            ptx_isa: 99,
            ..good
        },
    ] {
        match ptx::emit(&kernel, &bad) {
            Err(CodegenError::Unsupported { .. }) => {}
            other => panic!("{bad:?}: expected Unsupported, got {other:?}"),
        }
    }
    // Older SMs with their PTX ISA work.
    let sm80 = PtxOptions {
        sm: 80,
        ptx_isa: 80,
        ..good
    };
    let text = ptx::emit(&kernel, &sm80).expect("sm_80");
    assert!(text.contains(".target sm_80"), "{text}");

    kernel.workgroup_size = [2048, 1, 1];
    match ptx::emit(&kernel, &good) {
        Err(CodegenError::Unsupported { construct, .. }) => {
            assert!(construct.contains("workgroup"), "{construct}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // A kernel that fails validation.
    let mut broken = ternary("broken", F32, F32, |a, _, _| a);
    broken.body.push(kernelc_ir::Stmt::Store {
        mem: kernelc_ir::Memory::Buffer(kernelc_ir::ParamId(0)),
        index: kernelc_ir::Expr::Lit(kernelc_ir::Scalar::U32(0)),
        value: kernelc_ir::Expr::Lit(kernelc_ir::Scalar::f32(1.0)),
    });
    match ptx::emit(&broken, &good) {
        Err(CodegenError::Invalid(_)) => {}
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn every_optimisation_level_emits_valid_ptx() {
    let kernel = ternary("levels", F32, F32, |a, b, c| (a % b).min(c));
    let kernel = kernelc_ir::passes::for_target(&kernel, &ptx::required_expansion());
    for opt_level in [
        PtxOptLevel::O0,
        PtxOptLevel::O1,
        PtxOptLevel::O2,
        PtxOptLevel::O3,
    ] {
        let text = ptx::emit(
            &kernel,
            &PtxOptions {
                opt_level,
                ..PtxOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{opt_level:?}: {e}"));
        if let Some(ptxas) = ptxas_path() {
            let dir = scratch_dir("levels");
            assemble(&ptxas, &dir, &format!("{opt_level:?}"), &text)
                .unwrap_or_else(|e| panic!("{opt_level:?}: {e}\n{text}"));
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Matrix fragments
// ---------------------------------------------------------------------------------------

/// One warp: loads A (row-major), B (column-major) and C, one multiply, stores D.
fn mma_kernel(shape: kernelc_ir::MmaShape, input: ScalarType, acc: ScalarType) -> Kernel {
    use kernelc_ir::fragment::FragmentLayout::{ColMajor, RowMajor};
    use kernelc_ir::FragmentRole;
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let mut kb = KernelBuilder::new(format!("mma_{input}_m{m}n{n}k{k}"), [64, 1, 1]);
    let a = kb.buffer("a", input, (2 * m * k) as u64, Access::Read);
    let b = kb.buffer("b", input, (k * n) as u64, Access::Read);
    let c = kb.buffer("c", acc, (2 * m * n) as u64, Access::ReadWrite);
    kb.build(|f| {
        let fa = f.fragment("fa", FragmentRole::A, shape, input);
        let fb = f.fragment("fb", FragmentRole::B, shape, input);
        let fc = f.fragment("fc", FragmentRole::Accumulator, shape, acc);
        let warp = f.let_("warp", local_id(0) / 32u32);
        f.load_fragment(fa, a, warp.clone() * (m * k), k, RowMajor);
        f.load_fragment(fb, b, 0u32, k, ColMajor);
        f.load_fragment(fc, c, warp.clone() * (m * n), n, RowMajor);
        f.mma(fc, fa, fb, fc);
        f.store_fragment(fc, c, warp * (m * n), n, RowMajor);
    })
    .unwrap()
}

#[test]
fn every_multiply_kind_is_one_mma_sync_that_ptxas_assembles() {
    for (shape, input, acc) in kernelc_ir::fragment::MMA_KINDS {
        if shape.is_warpgroup() {
            continue; // wgmma: the next test
        }
        let kernel = mma_kernel(shape, input, acc);
        let ptx = emit_checked(&kernel);
        let (m, n, k) = (shape.m, shape.n, shape.k);
        // f32 operands multiply as TF32.
        let input = match input {
            F32 => "tf32".to_string(),
            other => other.to_string(),
        };
        let want = format!("mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc}.{input}.{input}.{acc}");
        let count = ptx.matches(&want).count();
        assert_eq!(count, 1, "{want} x{count} in\n{ptx}");
    }
}

/// Hopper's f64 shape is refused for older SMs (its `mma.sync` needs sm_90), with a
/// typed error naming it; m8n8k4 is not.
#[test]
fn f64_fragments_of_m16n8k16_need_sm_90() {
    let sm80 = PtxOptions {
        sm: 80,
        ptx_isa: 80,
        ..PtxOptions::default()
    };
    use kernelc_ir::fragment::MmaShape;
    let wide = mma_kernel(MmaShape::M16N8K16, F64, F64);
    match ptx::emit(&wide, &sm80) {
        Err(CodegenError::Unsupported { construct, .. }) => {
            assert!(
                construct.contains("m16n8k16") && construct.contains("sm_90"),
                "{construct}"
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    ptx::emit(&mma_kernel(MmaShape::M8N8K4, F64, F64), &sm80).expect("m8n8k4 on sm_80");
}

/// Every warpgroup kind on sm_90a: its operands as shared-memory descriptors, the
/// multiplies of one reduction step in one fenced and waited batch, a proxy fence
/// before each barrier.
#[test]
fn warpgroup_kinds_are_wgmma_on_sm_90a_that_ptxas_assembles() {
    use kernelc_ir::testing::fragments::every_kind;
    for g in every_kind(None)
        .into_iter()
        .filter(|g| g.shape.is_warpgroup())
    {
        let ptx = emit_checked(&g.kernel());
        assert!(ptx.contains(".target sm_90a"), "{:?}", g.shape);
        let tf32 = g.input == F32;
        let input = if tf32 {
            "tf32".to_string()
        } else {
            g.input.to_string()
        };
        let want = format!(
            "wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{input}.{input}",
            g.shape.n, g.shape.k,
        );
        assert!(ptx.contains(&want), "no {want}");
        // A K-major A and B: no transposition (TF32 takes no such flags).
        let flags = if tf32 {
            ", p, 1, 1;"
        } else {
            ", p, 1, 1, 0, 0;"
        };
        assert!(ptx.contains(flags), "{:?}: transposed?", g.shape);
        for want in [
            "wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned 0",
            "fence.proxy.async.shared::cta",
        ] {
            assert!(ptx.contains(want), "{:?}: no {want}", g.shape);
        }
        assert!(!ptx.contains("mma.sync"), "{:?}", g.shape);
    }
    // Any other SM refuses them, with the way out.
    let g = every_kind(None)
        .into_iter()
        .find(|g| g.shape.is_warpgroup())
        .unwrap();
    let sm80 = PtxOptions {
        sm: 80,
        ..PtxOptions::default()
    };
    let err = ptx::emit(&g.kernel(), &sm80).unwrap_err();
    assert!(
        matches!(err, CodegenError::Unsupported { ref construct, .. } if construct.contains("sm_90a")),
        "{err}"
    );
}

#[test]
fn fragments_are_refused_before_sm_80_and_by_targets_without_matrix_units() {
    let kernel = mma_kernel(kernelc_ir::MmaShape::M16N8K16, Bf16, F32);
    let old = PtxOptions {
        sm: 75,
        ptx_isa: 78,
        ..PtxOptions::default()
    };
    let err = ptx::emit(&kernel, &old).unwrap_err();
    assert!(
        matches!(err, CodegenError::Unsupported { ref construct, .. } if construct.contains("expand")),
        "{err}"
    );
    // Expanded, it compiles for sm_75 too (and has no mma).
    let expanded = kernelc_ir::passes::expand_fragments(&kernel);
    let ptx = ptx::emit(&expanded, &old).unwrap();
    assert!(!ptx.contains("mma"));
}

#[test]
fn the_half_gemm_tile_reads_shared_fragments_by_ldmatrix() {
    use kernelc_kernels::lower::lower;
    use kernelc_kernels::spec::{GemmSpec, OpSpec};
    // Row-major A pairs its elements along memory (plain ldmatrix); row-major B a
    // row apart (ldmatrix.trans); transposed, the other way round.
    for (dtype, trans, a, b) in [
        (Bf16, false, "x4.shared.b16", "x2.trans.shared.b16"),
        (F16, true, "x4.trans.shared.b16", "x2.shared.b16"),
    ] {
        let mut gemm = GemmSpec::new(dtype, 256, 256, 256);
        (gemm.trans_a, gemm.trans_b) = (trans, trans);
        let spec = OpSpec::Gemm(gemm);
        let plan = lower(&spec, &TargetCaps::cuda_sm90()).unwrap();
        let tile = plan
            .launches
            .iter()
            .find(|l| l.kernel.uses_fragments())
            .expect("a fragment tile kernel");
        let kernel = kernelc_ir::passes::for_target(&tile.kernel, &ptx::required_expansion());
        let ptx = emit_checked(&kernel);
        let (a, b) = (
            format!("ldmatrix.sync.aligned.m8n8.{a}"),
            format!("ldmatrix.sync.aligned.m8n8.{b}"),
        );
        for want in [a.as_str(), b.as_str(), "mma.sync.aligned.m16n8k16"] {
            assert!(ptx.contains(want), "{dtype}: no {want}");
        }
    }
}

/// A softmax between two multiplies kept in registers: the row reductions are two
/// butterfly shuffles per row, the conversion of `P` packs registers (no shared
/// memory, no barrier), and ptxas assembles it.
#[test]
fn row_statements_stay_in_registers() {
    for input in [Bf16, F16] {
        let ptx = emit_checked(&kernelc_ir::testing::fragments::attention_step(input));
        let shuffles = ptx.matches("shfl.sync.bfly.b32").count();
        // Two reductions, two rows per thread, two shuffles per row.
        assert_eq!(shuffles, 8, "{ptx}");
        assert!(
            !has_instr(&ptx, "bar.sync") && !ptx.contains(".shared"),
            "{ptx}"
        );
        assert!(ptx.contains(&format!("cvt.rn.{input}")), "{ptx}");
        assert_eq!(ptx.matches("mma.sync.aligned.m16n8k16").count(), 1, "{ptx}");
    }
}

/// Row statistics of a warpgroup's accumulator in a narrower one (m64n16): the
/// reduction's result and the map's reads stay in the thread's registers.
#[test]
fn row_statistics_of_a_warpgroup_stay_in_registers() {
    let ptx = emit_checked(&kernelc_ir::testing::fragments::row_statistics_kernel());
    // One reduction, two rows per thread, two shuffles per row.
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 4, "{ptx}");
    assert!(
        !has_instr(&ptx, "bar.sync") && !ptx.contains(".shared"),
        "{ptx}"
    );
}

/// A warpgroup's `P` converted into `A` fragments held in registers: `wgmma` takes
/// four `b32` registers for its `A` (no descriptor, one transpose flag), the
/// conversion packs registers (no shared memory but the staged `V`), and ptxas
/// assembles it.
#[test]
fn a_warpgroup_a_in_registers_is_wgmma_s_register_operand() {
    for input in [Bf16, F16] {
        let kernel = kernelc_ir::testing::fragments::warpgroup_attention_step(input);
        let ptx = emit_checked(&kernel);
        let mmas: Vec<&str> = ptx
            .lines()
            .filter(|l| l.contains("wgmma.mma_async"))
            .collect();
        assert_eq!(mmas.len(), 7, "{ptx}");
        for mma in mmas {
            // `{d…}, {a0, a1, a2, a3}, desc-b, p, 1, 1, trans-b;`
            let operands = mma.rsplit('}').next().unwrap_or_default();
            assert_eq!(operands.matches(',').count(), 5, "{mma}");
            assert_eq!(mma.matches('{').count(), 2, "{mma}");
            assert!(mma.trim_end().ends_with("p, 1, 1, 1;"), "{mma}");
        }
        assert!(ptx.contains(&format!("cvt.rn.{input}")), "{ptx}");
        // One barrier: after V is staged.
        assert_eq!(ptx.matches("bar.sync").count(), 1, "{ptx}");
    }
}
