//! `kernelc check`: validates what `emit` wrote, or any artifact of the four kinds: a
//! manifest against its schema and for consistency (bindings dense with the status
//! word last, every source, uniform and scalar word in range, byte counts that match,
//! every file present), WGSL through naga's parser and validator, SPIR-V through naga's
//! SPIR-V front end and validator and `spirv-val` where it is installed, PTX through
//! `ptxas` where it is installed (`$PTXAS` or on `PATH`), objects by their header.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::{BufferSource, Manifest, OpEntry, ParamEntry, ScalarSource, Tensor};
use super::{parse_manifest, AotError};

/// What checking one file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Valid; what was checked.
    Valid(String),
    /// Invalid, and why.
    Invalid(String),
    /// Not checked (a tool that is not installed), and why.
    Skipped(String),
}

/// One file's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub verdict: Verdict,
}

/// Checks `path`: a directory holding `manifest.json` (the manifest and every file it
/// names), a manifest, or one artifact (by its extension).
pub fn check_path(path: &Path) -> Result<Vec<Finding>, AotError> {
    let manifest_path = if path.is_dir() {
        path.join("manifest.json")
    } else {
        path.to_path_buf()
    };
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| AotError::Manifest {
            path: p.to_path_buf(),
            message: format!("cannot read: {e}"),
        })
    };
    if path.is_dir() || manifest_path.extension().is_some_and(|e| e == "json") {
        let bytes = read(&manifest_path)?;
        let dir = manifest_path.parent().unwrap_or(Path::new("."));
        return Ok(match parse_manifest(&manifest_path, &bytes) {
            Ok(manifest) => check_manifest(&manifest_path, dir, &manifest),
            Err(e) => vec![Finding {
                path: manifest_path.clone(),
                verdict: Verdict::Invalid(e.to_string()),
            }],
        });
    }
    let bytes = read(path)?;
    Ok(vec![Finding {
        path: path.to_path_buf(),
        verdict: check_artifact(path, &bytes, &[]),
    }])
}

/// The manifest's own findings, then each file's.
fn check_manifest(path: &Path, dir: &Path, manifest: &Manifest) -> Vec<Finding> {
    let problems: Vec<String> = manifest.kernels.iter().flat_map(entry_problems).collect();
    let mut findings = vec![Finding {
        path: path.to_path_buf(),
        verdict: if problems.is_empty() {
            Verdict::Valid(format!(
                "manifest version {}: {} entries consistent",
                manifest.version,
                manifest.kernels.len()
            ))
        } else {
            Verdict::Invalid(problems.join("; "))
        },
    }];
    for entry in &manifest.kernels {
        for launch in &entry.launches {
            let file = dir.join(&launch.file);
            let verdict = match std::fs::read(&file) {
                Ok(bytes) => check_artifact(&file, &bytes, &entry.features),
                Err(e) => Verdict::Invalid(format!("named by the manifest, cannot read: {e}")),
            };
            findings.push(Finding {
                path: file,
                verdict,
            });
        }
    }
    findings
}

/// What is inconsistent in one entry (empty: nothing).
fn entry_problems(e: &OpEntry) -> Vec<String> {
    let mut out = Vec::new();
    let mut say = |what: String| out.push(format!("{} ({}): {what}", e.name, e.target));
    if !["wgsl", "spirv", "ptx", "cpu"].contains(&e.target.as_str()) {
        say(format!("unknown target `{}`", e.target));
    }
    if let Some(op) = &e.op {
        if op.inputs().len() != e.inputs.len() || op.outputs().len() != e.outputs.len() {
            say("tensors that do not match the op".into());
        }
    }
    let elements = |t: &Tensor| match *t {
        Tensor::Input(i) => e.inputs.get(i).map(|s| s.elements),
        Tensor::Output(i) => e.outputs.get(i).map(|s| s.elements),
        Tensor::Temp(i) => e.temps.get(i).map(|s| s.elements),
    };
    let shader = matches!(e.target.as_str(), "wgsl" | "spirv");
    for (k, l) in e.launches.iter().enumerate() {
        let mut bindings = BTreeSet::new();
        for p in &l.params {
            match p {
                ParamEntry::Buffer {
                    name,
                    dtype,
                    elements: n,
                    bytes,
                    binding,
                    source,
                    ..
                } => {
                    if *bytes != n * dtype.size_bytes() as u64 {
                        say(format!(
                            "launch {k}: `{name}` has {bytes} bytes for {n} {dtype}"
                        ));
                    }
                    let (tensor, start) = match source {
                        BufferSource::Input(i) => (Tensor::Input(*i), 0),
                        BufferSource::Output(i) => (Tensor::Output(*i), 0),
                        BufferSource::Temp(i) => (Tensor::Temp(*i), 0),
                        BufferSource::Part { of, start } => (*of, *start),
                    };
                    match elements(&tensor) {
                        Some(len) if start + n <= len => {}
                        Some(len) => say(format!(
                            "launch {k}: `{name}` reads {n} elements from {start} of a tensor of {len}"
                        )),
                        None => say(format!("launch {k}: `{name}` binds a tensor the op lacks")),
                    }
                    match (shader, binding) {
                        (true, Some(b)) => {
                            bindings.insert(*b);
                        }
                        (true, None) => say(format!("launch {k}: `{name}` has no binding")),
                        (false, _) => {}
                    }
                }
                ParamEntry::Scalar {
                    name, word, source, ..
                } => {
                    if let ScalarSource::Uniform(i) = source {
                        if *i >= e.uniforms.len() {
                            say(format!(
                                "launch {k}: `{name}` reads uniform {i} of {}",
                                e.uniforms.len()
                            ));
                        }
                    }
                    let words = l.scalar_block.map_or(0, |b| b.words);
                    match (shader, word) {
                        (true, Some(w)) if *w < words => {}
                        (true, _) => say(format!(
                            "launch {k}: `{name}` lies outside the scalar block"
                        )),
                        (false, _) => {}
                    }
                }
            }
        }
        if shader {
            bindings.extend(l.scalar_block.map(|b| b.binding));
            let status = l.status_binding.unwrap_or(u32::MAX);
            let dense = bindings.iter().copied().eq(0..bindings.len() as u32);
            if !dense || status != bindings.len() as u32 {
                say(format!(
                    "launch {k}: bindings {bindings:?} and status {status} are not 0..n with the status last"
                ));
            }
        }
    }
    out
}

/// One artifact's verdict, by its extension (`features`: what its manifest entry says
/// the device enables).
fn check_artifact(path: &Path, bytes: &[u8], features: &[String]) -> Verdict {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "wgsl" => match std::str::from_utf8(bytes) {
            Ok(text) => naga_wgsl(text, features).map_or_else(Verdict::Invalid, |()| {
                Verdict::Valid("naga: parsed and validated".into())
            }),
            Err(e) => Verdict::Invalid(format!("not UTF-8: {e}")),
        },
        "spv" => match naga_spirv(bytes, features) {
            Err(e) => Verdict::Invalid(e),
            Ok(()) => match run_tool("spirv-val", &["--target-env", "vulkan1.1"], path) {
                Some(Ok(())) => Verdict::Valid("naga spv-in and spirv-val".into()),
                Some(Err(e)) => Verdict::Invalid(format!("spirv-val: {e}")),
                None => Verdict::Valid("naga spv-in (spirv-val not installed)".into()),
            },
        },
        "ptx" => check_ptx(path, bytes),
        "o" => check_object(bytes),
        other => Verdict::Invalid(format!("unknown artifact kind `.{other}`")),
    }
}

/// naga's validator capabilities for `features` (every one when none are named: a
/// file checked alone).
fn capabilities(features: &[String]) -> naga::valid::Capabilities {
    use naga::valid::Capabilities;
    let all = Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64 | Capabilities::SHADER_INT64;
    if features.is_empty() {
        return all;
    }
    let mut caps = Capabilities::empty();
    for f in features {
        caps |= match f.as_str() {
            "shader-f16" => Capabilities::SHADER_FLOAT16,
            "shader-f64" => Capabilities::FLOAT64,
            "shader-int64" => Capabilities::SHADER_INT64,
            _ => Capabilities::empty(),
        };
    }
    caps
}

fn validate(module: &naga::Module, features: &[String]) -> Result<(), String> {
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities(features))
        .validate(module)
        .map(|_| ())
        .map_err(|e| format!("naga validation: {}", e.into_inner()))
}

fn naga_wgsl(text: &str, features: &[String]) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(text)
        .map_err(|e| format!("naga: {}", e.emit_to_string(text)))?;
    validate(&module, features)
}

fn naga_spirv(bytes: &[u8], features: &[String]) -> Result<(), String> {
    let options = naga::front::spv::Options {
        adjust_coordinate_space: false,
        strict_capabilities: true,
        block_ctx_dump_prefix: None,
    };
    let module = naga::front::spv::parse_u8_slice(bytes, &options)
        .map_err(|e| format!("naga spv-in: {e}"))?;
    validate(&module, features)
}

/// `ptxas` (`$PTXAS`, else on `PATH`) for the file's own `.target`.
fn check_ptx(path: &Path, bytes: &[u8]) -> Verdict {
    let text = String::from_utf8_lossy(bytes);
    let Some(target) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .map(|t| t.split([',', ' ']).next().unwrap_or("").to_string())
    else {
        return Verdict::Invalid("no `.target` line: not PTX".into());
    };
    let ptxas = std::env::var_os("PTXAS").unwrap_or_else(|| "ptxas".into());
    let arch = format!("-arch={target}");
    match run_tool(&ptxas.to_string_lossy(), &[&arch, "-o", "/dev/null"], path) {
        Some(Ok(())) => Verdict::Valid(format!("ptxas {arch}")),
        Some(Err(e)) => Verdict::Invalid(format!("ptxas: {e}")),
        None => Verdict::Skipped("ptxas not installed".into()),
    }
}

/// An object file's header: ELF, Mach-O or COFF (x86-64, AArch64).
fn check_object(bytes: &[u8]) -> Verdict {
    let kind = match bytes {
        [0x7f, b'E', b'L', b'F', ..] => "ELF",
        [0xcf, 0xfa, 0xed, 0xfe, ..] => "Mach-O",
        [0x64, 0x86, ..] | [0x64, 0xaa, ..] => "COFF",
        _ => return Verdict::Invalid("not an ELF, Mach-O or COFF object".into()),
    };
    Verdict::Valid(format!("{kind} object"))
}

/// Runs `tool args… path`: `None` when the tool is not installed, else whether it
/// accepted the file (its message when not).
fn run_tool(tool: &str, args: &[&str], path: &Path) -> Option<Result<(), String>> {
    match Command::new(tool).args(args).arg(path).output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(e.to_string())),
        Ok(out) if out.status.success() => Some(Ok(())),
        Ok(out) => Some(Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}
