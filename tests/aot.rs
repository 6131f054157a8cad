//! `kernelc emit` as a user runs it: the files and the manifest of every target, the
//! manifest accumulating over calls, a clear error for each kind of bad input, and
//! programs that do not link kernelc running what it wrote: `examples/aot_wgpu.rs`
//! (plain wgpu, on lavapipe in CI) and a C harness linking the emitted objects.

#[path = "../examples/aot_wgpu.rs"]
#[allow(dead_code)]
mod loader;

mod common;

use common::{assert_fails, kernelc};
use std::path::Path;
use std::process::{Command, Output};

use kernelc::aot::manifest::{BufferSource, Manifest, OpEntry, ParamEntry, ScalarSource};
use kernelc::aot::parse_manifest;
use kernelc::kernels::reference::reference;
use kernelc::kernels::spec::OpSpec;

const SOFTMAX: &str = r#"{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1}"#;
const GEMM: &str = r#"{"op":"gemm","dtype":"f32","m":5,"n":7,"k":9,"alpha":1.5,"beta":0.0,"trans_a":false,"trans_b":true,"bias":true}"#;
const SCALE: &str = r#"{"op":"scalar","func":"mul","dtype":"f32","shape":[8],"scalar":2.5}"#;

fn emit(spec: &str, targets: &str, dir: &Path, name: &str) -> String {
    let out = kernelc(&[
        "emit",
        spec,
        "--target",
        targets,
        "--name",
        name,
        "--out",
        dir.to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "emit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn manifest(dir: &Path) -> Manifest {
    let path = dir.join("manifest.json");
    parse_manifest(&path, &std::fs::read(&path).expect("manifest written")).expect("valid")
}

fn entry<'m>(m: &'m Manifest, name: &str, target: &str) -> &'m OpEntry {
    m.kernels
        .iter()
        .find(|e| e.name == name && e.target == target)
        .unwrap_or_else(|| panic!("no {name} for {target} in {m:#?}"))
}

/// Inputs of `spec`: `0.1·((7i + 3k) mod 11) − 0.5`.
fn inputs(spec: &OpSpec) -> Vec<Vec<f64>> {
    spec.inputs()
        .iter()
        .enumerate()
        .map(|(k, s)| {
            (0..s.numel())
                .map(|i| 0.1 * ((7 * i + 3 * k) % 11) as f64 - 0.5)
                .collect()
        })
        .collect()
}

fn want(spec: &OpSpec) -> Vec<Vec<f64>> {
    let data = inputs(spec);
    let refs: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
    reference(spec, &refs).expect("reference")
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn emit_writes_every_targets_files_and_a_manifest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let printed = emit(SOFTMAX, "wgsl,spirv,ptx,cpu", dir.path(), "softmax");
    let m = manifest(dir.path());
    assert_eq!((m.schema.as_str(), m.version), ("kernelc-manifest", 1));
    assert_eq!(m.kernels.len(), 4);
    for e in &m.kernels {
        assert_eq!(e.inputs[0].shape, vec![4, 8]);
        assert_eq!((e.inputs[0].elements, e.inputs[0].bytes), (32, 128));
        assert!(!e.launches.is_empty());
        for l in &e.launches {
            let path = dir.path().join(&l.file);
            assert!(printed.contains(&l.file), "{printed}");
            let bytes = std::fs::read(&path).expect("artifact written");
            match e.target.as_str() {
                "wgsl" => assert!(String::from_utf8_lossy(&bytes).contains("@compute")),
                "spirv" => assert_eq!(bytes[..4], 0x0723_0203u32.to_le_bytes()),
                "ptx" => assert!(String::from_utf8_lossy(&bytes).contains(".entry main")),
                "cpu" => {
                    assert!(l.entry_point.starts_with("softmax_"), "{}", l.entry_point);
                    assert!(l.shared_bytes.is_some());
                    #[cfg(target_os = "linux")]
                    assert_eq!(bytes[..4], *b"\x7fELF");
                }
                other => panic!("target {other}"),
            }
        }
    }
    // The shader targets' bindings: x read at 0, y written at 1, the status word last.
    let wgsl = entry(&m, "softmax", "wgsl");
    let params = &wgsl.launches[0].params;
    match (&params[0], &params[1]) {
        (
            ParamEntry::Buffer {
                binding: Some(0),
                source: BufferSource::Input(0),
                elements: 32,
                ..
            },
            ParamEntry::Buffer {
                binding: Some(1),
                source: BufferSource::Output(0),
                ..
            },
        ) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(wgsl.launches[0].status_binding, Some(2));
    assert_eq!(wgsl.launches[0].entry_point, "main");
    // ptxas assembles the PTX where it is installed (CI has it).
    if let Some(ptxas) = std::env::var_os("PTXAS").filter(|p| Path::new(p).exists()) {
        let ptx = dir
            .path()
            .join(&entry(&m, "softmax", "ptx").launches[0].file);
        let out = Command::new(ptxas)
            .args(["-arch=sm_90", "-o", "/dev/null"])
            .arg(&ptx)
            .output()
            .expect("ptxas runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--triple`: an object for the host's architecture without the host's extensions.
#[test]
#[cfg(target_os = "linux")]
fn a_triple_picks_the_objects_target() {
    let dir = tempfile::tempdir().expect("temp dir");
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let out = kernelc(&[
        "emit",
        GEMM,
        "--target",
        "cpu",
        "--triple",
        &triple,
        "--out",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(dir.path().join("gemm.0.o")).expect("object written");
    assert_eq!(bytes[..4], *b"\x7fELF");
}

#[test]
fn per_call_values_are_uniforms_and_the_manifest_accumulates() {
    let dir = tempfile::tempdir().expect("temp dir");
    emit(SCALE, "wgsl", dir.path(), "scale");
    emit(GEMM, "wgsl,cpu", dir.path(), "gemm");
    let m = manifest(dir.path());
    assert_eq!(m.kernels.len(), 3, "{m:#?}");
    let scale = entry(&m, "scale", "wgsl");
    assert_eq!(scale.uniforms.len(), 1);
    assert_eq!(scale.uniforms[0].value, 2.5);
    assert_eq!(scale.uniforms[0].bits, 2.5f32.to_bits() as u64);
    let reads_uniform = scale.launches[0].params.iter().any(|p| {
        matches!(
            p,
            ParamEntry::Scalar {
                source: ScalarSource::Uniform(0),
                word: Some(_),
                ..
            }
        )
    });
    assert!(reads_uniform, "{scale:#?}");
    assert!(scale.launches[0].scalar_block.is_some());
    // Emitting again replaces the entry (no duplicate).
    emit(SCALE, "wgsl", dir.path(), "scale");
    assert_eq!(manifest(dir.path()).kernels.len(), 3);
}

#[test]
fn bad_emit_arguments_name_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().to_str().expect("utf-8");
    let run = |args: &[&str]| kernelc(&[&["emit"], args].concat());
    assert_fails(
        &run(&[SOFTMAX, "--target", "vulkan", "--out", out]),
        2,
        "unknown target `vulkan`",
    );
    assert_fails(&run(&[SOFTMAX, "--name", "a/b", "--out", out]), 2, "`a/b`");
    assert_fails(&run(&[SOFTMAX]), 2, "--out");
    assert_fails(
        &run(&["{\"op\":\"softmax\"", "--out", out]),
        1,
        "invalid op spec",
    );
    let bad_axis = r#"{"op":"softmax","dtype":"f32","shape":[4,8],"axis":5}"#;
    assert_fails(
        &run(&[bad_axis, "--target", "wgsl", "--out", out]),
        1,
        "axis",
    );
    let bf16 = r#"{"op":"softmax","dtype":"bf16","shape":[4,8],"axis":1}"#;
    assert_fails(&run(&[bf16, "--target", "wgsl", "--out", out]), 1, "bf16");
    assert_fails(
        &run(&[
            SOFTMAX, "--target", "cpu", "--triple", "nonsense", "--out", out,
        ]),
        1,
        "`nonsense`",
    );
    // An --out under a regular file cannot be created.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").expect("file written");
    let under = file.join("sub");
    let under = under.to_str().expect("utf-8");
    assert_fails(
        &run(&[SOFTMAX, "--target", "wgsl", "--out", under]),
        1,
        "cannot create",
    );
    // A corrupt manifest is reported, not overwritten.
    std::fs::write(dir.path().join("manifest.json"), "{ not json").expect("written");
    assert_fails(
        &run(&[SOFTMAX, "--target", "wgsl", "--out", out]),
        1,
        "manifest.json",
    );
    let kept = std::fs::read_to_string(dir.path().join("manifest.json")).expect("kept");
    assert_eq!(kept, "{ not json");
}

/// `examples/aot_wgpu.rs` (no kernelc inside) runs softmax and GEMM from their WGSL and
/// SPIR-V files on the first wgpu adapter (lavapipe in CI, which must have one).
#[test]
fn plain_wgpu_runs_the_emitted_shaders() {
    let dir = tempfile::tempdir().expect("temp dir");
    emit(SOFTMAX, "wgsl,spirv", dir.path(), "softmax");
    emit(GEMM, "wgsl,spirv", dir.path(), "gemm");
    let gpu = match loader::open_gpu(&[]) {
        Ok(gpu) => gpu,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("NOT RUN: {e}");
            return;
        }
        Err(e) => panic!("CI has lavapipe: {e}"),
    };
    let m = loader::read_manifest(dir.path()).expect("manifest");
    for (name, spec) in [("softmax", SOFTMAX), ("gemm", GEMM)] {
        let spec: OpSpec = serde_json::from_str(spec).expect("spec");
        let data: Vec<Vec<u8>> = inputs(&spec)
            .iter()
            .map(|v| loader::f32_bytes(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()))
            .collect();
        let want = want(&spec);
        for target in ["wgsl", "spirv"] {
            let e = loader::find(&m, name, target).expect("entry");
            let got = loader::run_op(&gpu, dir.path(), e, &data).expect("runs");
            assert_close(
                &loader::f32_values(&got[0]),
                &want[0],
                &format!("{name} {target} on {}", gpu.adapter),
            );
        }
    }
}

/// A C program linking the emitted objects runs softmax and GEMM (the manifest's
/// launches, each workgroup a call) and prints the outputs.
#[test]
fn a_c_harness_links_the_emitted_objects() {
    let dir = tempfile::tempdir().expect("temp dir");
    emit(SOFTMAX, "cpu", dir.path(), "softmax");
    emit(GEMM, "cpu", dir.path(), "gemm");
    let m = manifest(dir.path());
    for (name, spec) in [("softmax", SOFTMAX), ("gemm", GEMM)] {
        let spec: OpSpec = serde_json::from_str(spec).expect("spec");
        let e = entry(&m, name, "cpu");
        let c = dir.path().join(format!("{name}.c"));
        std::fs::write(&c, c_harness(e, &inputs(&spec))).expect("harness written");
        let exe = dir.path().join(name);
        let mut cc = Command::new("cc");
        cc.arg("-O1").arg("-o").arg(&exe).arg(&c);
        for l in &e.launches {
            cc.arg(dir.path().join(&l.file));
        }
        let built = cc.arg("-lm").output().expect("cc runs");
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let run = Command::new(&exe).output().expect("harness runs");
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let got: Vec<f32> = String::from_utf8_lossy(&run.stdout)
            .split_whitespace()
            .map(|v| v.parse().expect("a float"))
            .collect();
        assert_close(&got, &want(&spec)[0], &format!("{name} through C"));
    }
}

/// C source running `e`'s launches on `data` (f32 inputs) and printing output 0.
fn c_harness(e: &OpEntry, data: &[Vec<f64>]) -> String {
    let mut c = String::from("#include <stdint.h>\n#include <stdio.h>\n\n");
    let array = |name: String, bytes: u64| {
        format!("static _Alignas(64) uint8_t {name}[{}];\n", bytes.max(4))
    };
    for (i, (sig, values)) in e.inputs.iter().zip(data).enumerate() {
        let list: Vec<String> = values.iter().map(|v| format!("{v:?}f")).collect();
        c += &format!(
            "static _Alignas(64) float in{i}[{}] = {{{}}};\n",
            sig.elements.max(1),
            list.join(", ")
        );
    }
    for (i, o) in e.outputs.iter().enumerate() {
        c += &array(format!("out{i}"), o.bytes);
    }
    for (i, t) in e.temps.iter().enumerate() {
        c += &array(format!("temp{i}"), t.bytes);
    }
    for l in &e.launches {
        c += &format!("extern uint32_t {}(uint8_t **, const uint64_t *, const uint32_t *, const uint32_t *, uint8_t *);\n", l.entry_point);
    }
    let base = |s: &BufferSource| match s {
        BufferSource::Input(i) => format!("(uint8_t *)in{i}"),
        BufferSource::Output(i) => format!("out{i}"),
        BufferSource::Temp(i) => format!("temp{i}"),
        BufferSource::Part { .. } => unreachable!("these ops are not split"),
    };
    c += "\nint main(void) {\n";
    for (k, l) in e.launches.iter().enumerate() {
        let mut buffers = Vec::new();
        let mut scalars = Vec::new();
        for p in &l.params {
            match p {
                ParamEntry::Buffer { source, .. } => {
                    buffers.push(base(source));
                    scalars.push("0".to_string());
                }
                ParamEntry::Scalar { source, .. } => {
                    buffers.push("0".to_string());
                    scalars.push(match source {
                        ScalarSource::Uniform(i) => format!("{}ull", e.uniforms[*i].bits),
                        ScalarSource::Constant { bits, .. } => format!("{bits}ull"),
                    });
                }
            }
        }
        let [gx, gy, gz] = l.grid;
        c += &format!(
            "  {{\n    uint8_t *b[] = {{{}, 0}};\n    uint64_t s[] = {{{}, 0}};\n    static _Alignas(16) uint8_t shared[{}];\n    uint32_t n[3] = {{{gx}, {gy}, {gz}}};\n    for (uint32_t z = 0; z < {gz}; z++) for (uint32_t y = 0; y < {gy}; y++) for (uint32_t x = 0; x < {gx}; x++) {{\n      uint32_t w[3] = {{x, y, z}};\n      if ({}(b, s, w, n, shared)) {{ fprintf(stderr, \"launch {k}: status\\n\"); return 1; }}\n    }}\n  }}\n",
            buffers.join(", "),
            scalars.join(", "),
            l.shared_bytes.unwrap_or(0).max(16),
            l.entry_point
        );
    }
    c += &format!(
        "  for (int i = 0; i < {}; i++) printf(\"%.9g\\n\", ((float *)out0)[i]);\n  return 0;\n}}\n",
        e.outputs[0].elements
    );
    c
}

/// `kernelc check` accepts what `emit` wrote and names what is wrong with damaged
/// files: a truncated SPIR-V module, a manifest whose bindings no longer fit, a file
/// the manifest names that is gone.
#[test]
#[cfg(feature = "wgpu")]
fn check_accepts_emitted_files_and_names_damage() {
    let dir = tempfile::tempdir().expect("temp dir");
    emit(SOFTMAX, "wgsl,spirv,ptx,cpu", dir.path(), "softmax");
    let path = dir.path().to_str().expect("utf-8");
    let ok = kernelc(&["check", path, "--json"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("JSON");
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 5, "the manifest and four files: {rows:?}");
    assert!(rows.iter().all(|r| r["status"] != "invalid"), "{rows:?}");
    let spv = dir.path().join("softmax.0.spv");
    let words = std::fs::read(&spv).expect("spv");
    std::fs::write(&spv, &words[..words.len() / 2]).expect("truncated");
    assert_fails(&kernelc(&["check", path]), 1, "softmax.0.spv");
    std::fs::write(&spv, &words).expect("restored");
    let manifest_path = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path).expect("manifest");
    let moved = text.replace("\"status_binding\": 2", "\"status_binding\": 7");
    assert_ne!(moved, text);
    std::fs::write(&manifest_path, moved).expect("written");
    assert_fails(&kernelc(&["check", path]), 1, "status 7");
    std::fs::write(&manifest_path, &text).expect("restored");
    std::fs::remove_file(dir.path().join("softmax.0.o")).expect("removed");
    assert_fails(&kernelc(&["check", path]), 1, "cannot read");
}

/// `kernelc build`: a TOML list with variants, incremental (unchanged entries are not
/// written again), entries dropped from the list removed with their files, and the
/// list's mistakes named.
#[test]
fn build_emits_a_list_incrementally() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = dir.path().join("kernels.toml");
    let out = dir.path().join("out");
    let write_list = |shapes: &str| {
        std::fs::write(
            &list,
            format!(
                "targets = [\"wgsl\", \"cpu\"]\n\n[[kernel]]\nname = \"softmax\"\nspec = {{ op = \"softmax\", dtype = \"f32\", shape = [4, 8], axis = 1 }}\nvary = {{ shape = {shapes} }}\n\n[[kernel]]\nname = \"gemm\"\nspec = '{GEMM}'\ntargets = [\"spirv\"]\n"
            ),
        )
        .expect("list written")
    };
    let build = || {
        kernelc(&[
            "build",
            list.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ])
    };
    let said = |o: &Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    write_list("[[4, 8], [16, 16]]");
    assert!(said(&build()).starts_with("5 emitted, 0 unchanged, 0 removed"));
    let wgsl = out.join("softmax_16x16.0.wgsl");
    let before = std::fs::metadata(&wgsl)
        .and_then(|m| m.modified())
        .expect("written");
    assert!(said(&build()).starts_with("0 emitted, 5 unchanged, 0 removed"));
    let after = std::fs::metadata(&wgsl)
        .and_then(|m| m.modified())
        .expect("kept");
    assert_eq!(before, after, "an unchanged entry is not written again");
    write_list("[[4, 8], [32, 32]]");
    assert!(said(&build()).starts_with("2 emitted, 3 unchanged, 2 removed"));
    assert!(!wgsl.exists(), "a dropped entry's files go");
    let m = manifest(&out);
    assert_eq!(m.kernels.len(), 5);
    entry(&m, "softmax_32x32", "cpu");
    entry(&m, "gemm", "spirv");
    std::fs::write(
        &list,
        "[[kernel]]\nname = \"x\"\nspec = { op = \"softmax\" }\n",
    )
    .expect("written");
    assert_fails(&build(), 1, "kernel `x`: invalid op spec");
    std::fs::write(&list, "[[kernel]]\nname = \"x\"\nsepc = 1\n").expect("written");
    assert_fails(&build(), 1, "line 3");
    std::fs::write(
        &list,
        format!("targets = [\"metal\"]\n[[kernel]]\nname = \"x\"\nspec = '{SOFTMAX}'\n"),
    )
    .expect("written");
    assert_fails(&build(), 2, "unknown target `metal`");
}

/// The shader targets stay on WebGPU's baseline unless asked: an f16 op is refused
/// with the feature to enable, and emitted (the feature in its entry) once enabled.
#[test]
fn shader_features_are_opt_in_and_named_in_the_manifest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().to_str().expect("utf-8 path");
    let f16 = r#"{"op":"softmax","dtype":"f16","shape":[4,8],"axis":1}"#;
    let base = ["emit", f16, "--target", "wgsl,spirv", "--out", out];
    assert_fails(
        &kernelc(&base),
        1,
        "enable `shader-f16` with --shader-features",
    );
    let bogus = [&base[..], &["--shader-features", "shader-f8"]].concat();
    assert_fails(&kernelc(&bogus), 2, "unknown shader feature `shader-f8`");
    let enabled = [&base[..], &["--shader-features", "shader-f16"]].concat();
    let ran = kernelc(&enabled);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let m = manifest(dir.path());
    for target in ["wgsl", "spirv"] {
        let e = entry(&m, "softmax", target);
        assert_eq!(e.features, ["shader-f16"], "{target}");
    }
    let checked = kernelc(&["check", out]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
}

/// The 50-entry list the build timing uses (bench/aot) builds for all four targets,
/// its files pass `check`, and a second build emits nothing.
#[test]
fn the_benchmark_list_builds_whole_and_then_not_at_all() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().to_str().expect("utf-8 path");
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/aot/kernels.toml");
    let build = || {
        kernelc(&[
            "build",
            list,
            "--out",
            out,
            "--shader-features",
            "shader-f16",
        ])
    };
    let said = |o: &Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert!(said(&build()).starts_with("200 emitted, 0 unchanged"));
    assert_eq!(manifest(dir.path()).kernels.len(), 200);
    let checked = kernelc(&["check", out]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    assert!(said(&build()).starts_with("0 emitted, 200 unchanged, 0 removed"));
}

/// `saxpy`: `y[i] = a·x[i] + y[i]` over 100 elements, in IR (64 invocations a group).
fn saxpy() -> kernelc::ir::Kernel {
    use kernelc::ir::builder::*;
    use kernelc::ir::{Access, ScalarType::F32};
    let n = 100u32;
    let mut k = KernelBuilder::new("saxpy", [64, 1, 1]);
    let x = k.buffer("x", F32, n as u64, Access::Read);
    let y = k.buffer("y", F32, n as u64, Access::ReadWrite);
    let a = k.scalar("a", F32);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.if_(i.clone().lt(n), |f| {
            f.store(y, i.clone(), a * x.at(i.clone()) + y.at(i))
        });
    })
    .expect("a valid kernel")
}

/// `kernelc compile`: a user's IR kernel through the emitters, into the manifest (its
/// read-only buffer an input, the read-write one an output, its scalar a per-call
/// value), run by the plain-wgpu loader; an invalid kernel named with the path to the
/// node at fault.
#[test]
fn compile_emits_a_users_ir_kernel() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("saxpy.json");
    let text = kernelc::ir::json::to_json(&saxpy());
    std::fs::write(&file, &text).expect("written");
    let out = dir.path().join("out");
    let (file_arg, out_arg) = (file.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let run = kernelc(&["compile", file_arg, "--grid", "2,1,1", "--out", out_arg]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let m = manifest(&out);
    assert_eq!(m.kernels.len(), 4);
    let e = entry(&m, "saxpy", "wgsl");
    assert!(e.op.is_none());
    assert_eq!(
        (e.inputs[0].name.as_str(), e.outputs[0].name.as_str()),
        ("x", "y")
    );
    assert_eq!(e.uniforms[0].name, "a");
    assert_eq!(e.launches[0].grid, [2, 1, 1]);
    let check = kernelc(&["check", out_arg]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    // Run it with plain wgpu, `a` = 2.5 (a loader sets per-call values in the bits).
    if let Ok(gpu) = loader::open_gpu(&[]) {
        let mut manifest = loader::read_manifest(&out).expect("manifest");
        let wgsl = manifest["kernels"]
            .as_array_mut()
            .and_then(|k| k.iter_mut().find(|e| e["target"] == "wgsl"))
            .expect("wgsl entry");
        wgsl["uniforms"][0]["bits"] = 2.5f32.to_bits().into();
        let xs: Vec<f32> = (0..100).map(|i| i as f32 / 8.0).collect();
        let got = loader::run_op(&gpu, &out, wgsl, &[loader::f32_bytes(&xs)]).expect("runs");
        let want: Vec<f64> = xs.iter().map(|&v| 2.5 * v as f64).collect();
        assert_close(&loader::f32_values(&got[0]), &want, "saxpy on wgpu");
    } else {
        assert!(std::env::var_os("CI").is_none(), "CI has lavapipe");
    }
    // A store through a parameter that does not exist: named with its path.
    let mut kernel = saxpy();
    kernel.params.truncate(1);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string(&kernel).expect("json")).expect("written");
    let run = kernelc(&["compile", bad.to_str().expect("utf-8"), "--out", out_arg]);
    assert_fails(
        &run,
        1,
        "at kernel.body[1].if.then[0].store: unknown parameter #1",
    );
    assert_fails(
        &kernelc(&["compile", file_arg, "--grid", "2,1", "--out", out_arg]),
        2,
        "--grid",
    );
}

/// Every subcommand's `--help` ends with an example.
#[test]
fn every_subcommand_help_has_an_example() {
    let top = kernelc(&["--help"]);
    let text = String::from_utf8_lossy(&top.stdout).to_string();
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{text}");
    for command in commands {
        let help = kernelc(&[command, "--help"]);
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains("Example"),
            "`kernelc {command} --help` has no example:\n{help}"
        );
    }
}

/// The PTX of a 64³ GEMM of `dtype` emitted ahead of time for `sm`, all launches.
#[cfg(feature = "cuda")]
fn gemm_ptx(dtype: &str, sm: u32, ptx_isa: u32) -> String {
    use kernelc::aot::{emit_op, EmitOptions, Target};
    let spec: OpSpec = serde_json::from_str(&format!(
        r#"{{"op":"gemm","dtype":"{dtype}","m":64,"n":64,"k":64,"alpha":1.0,"beta":0.0,"trans_a":false,"trans_b":false,"bias":false}}"#
    ))
    .expect("a spec");
    let dir = tempfile::tempdir().expect("temp dir");
    let options = EmitOptions {
        sm,
        ptx_isa,
        ..EmitOptions::default()
    };
    let entry = emit_op(&spec, "gemm", Target::Ptx, &options, dir.path())
        .unwrap_or_else(|e| panic!("{dtype} on sm_{sm}: {e}"));
    entry
        .launches
        .iter()
        .map(|l| std::fs::read_to_string(dir.path().join(&l.file)).expect("the artifact"))
        .collect()
}

/// A bf16 GEMM's PTX uses `mma.sync` for sm_90 (the default) and plain code for an SM
/// before 8.0, which has no `mma` of bf16 (its fragments expanded, its tiles SIMT).
#[cfg(feature = "cuda")]
#[test]
fn ptx_uses_tensor_cores_only_where_the_sm_has_them() {
    for (sm, ptx_isa, tensor_cores) in [(90, 90, true), (75, 78, false)] {
        let text = gemm_ptx("bf16", sm, ptx_isa);
        assert_eq!(text.contains("mma.sync"), tensor_cores, "sm_{sm}");
    }
}

/// An f64 GEMM's PTX multiplies on Hopper's m16n8k16 DMMA shape for sm_90 and on
/// m8n8k4 for sm_80 (which lacks the former: emitting it there would be refused).
#[cfg(feature = "cuda")]
#[test]
fn f64_ptx_takes_the_dmma_shape_of_its_sm() {
    for (sm, ptx_isa, shape) in [(90, 90, "m16n8k16"), (80, 80, "m8n8k4")] {
        let text = gemm_ptx("f64", sm, ptx_isa);
        let want = format!("mma.sync.aligned.{shape}.row.col.f64");
        assert!(text.contains(&want), "sm_{sm}: no {want}");
    }
}

/// Ahead-of-time PTX stays within 48 KiB of static shared memory (no dynamic shared
/// array: a program launching it without kernelc would not opt it in), also for the
/// ops whose JIT kernels take more on a Hopper (bf16 attention on tensor cores).
#[cfg(feature = "cuda")]
#[test]
fn ptx_kernels_need_no_dynamic_shared_memory() {
    use kernelc::aot::{emit_op, EmitOptions, Target};
    let spec: OpSpec = serde_json::from_str(
        r#"{"op":"attention","dtype":"bf16","layout":"bhsd","batch":1,"heads":2,"kv_heads":2,"seq_q":128,"seq_k":128,"head_dim":128,"scale":0.088,"causal":true,"mask":null}"#,
    )
    .expect("a spec");
    let dir = tempfile::tempdir().expect("temp dir");
    let entry = emit_op(
        &spec,
        "attention",
        Target::Ptx,
        &EmitOptions::default(),
        dir.path(),
    )
    .expect("emits");
    for launch in &entry.launches {
        let text = std::fs::read_to_string(dir.path().join(&launch.file)).expect("artifact");
        assert!(!text.contains(".extern .shared"), "{}", launch.file);
    }
}
