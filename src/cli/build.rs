//! `kernelc build kernels.toml --out DIR`: many ops × variants × targets in one go
//! (for a `build.rs`), incremental: an entry whose spec, targets, options and kernelc
//! are unchanged since the last build into `DIR`, with its files present, is not
//! emitted again, and entries an earlier build made that the list no longer has are
//! removed with their files. The keys live in `DIR/.kernelc-build.json`.
//!
//! ```toml
//! targets = ["wgsl", "spirv"]            # the default targets
//!
//! [[kernel]]
//! name = "softmax"
//! spec = { op = "softmax", dtype = "f32", shape = [4, 8], axis = 1 }
//! vary = { dtype = ["f32", "f16"], shape = [[4, 8], [64, 64]] }   # 4 kernels
//! targets = ["wgsl", "cpu"]              # this entry's own
//! ```
//!
//! A varied entry is named after its values: `softmax_f16_64x64`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kernelc::aot::manifest::OpEntry;
use kernelc::aot::{check_name, edit_manifest, emit_op, EmitOptions, Target};
use kernelc_kernels::spec::OpSpec;
use serde::Deserialize;
use serde_json::Value;

use super::emit::{parse_targets, TargetOptions};
use super::{CliError, UsageError};

#[derive(Args, Debug)]
#[command(
    after_help = "Example kernels.toml:\n  targets = [\"wgsl\", \"spirv\"]\n  [[kernel]]\n  name = \"softmax\"\n  spec = { op = \"softmax\", dtype = \"f32\", shape = [4, 8], axis = 1 }\n  vary = { shape = [[4, 8], [64, 64]] }\n\n  kernelc build kernels.toml --out kernels/"
)]
pub struct BuildArgs {
    /// The list of kernels (TOML).
    list: PathBuf,
    /// The directory to write into (files, manifest.json, .kernelc-build.json).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    targets: TargetOptions,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct List {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    kernel: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    spec: toml::Value,
    #[serde(default)]
    vary: BTreeMap<String, Vec<toml::Value>>,
    targets: Option<Vec<String>>,
}

/// One op to emit for some targets.
struct Job {
    name: String,
    spec: OpSpec,
    targets: Vec<Target>,
}

const STATE: &str = ".kernelc-build.json";

pub fn run(args: BuildArgs) -> Result<(), CliError> {
    let text = super::read_input(&args.list)?;
    let list: List = toml::from_str(&text).map_err(|e| format!("{}: {e}", args.list.display()))?;
    let jobs = jobs(&list)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let options = args.targets.emit_options()?;
    let state_path = args.out.join(STATE);
    let mut state: BTreeMap<String, String> = std::fs::read(&state_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let total: usize = jobs.iter().map(|j| j.targets.len()).sum();
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let manifest = args.out.join("manifest.json");
    let known = known_files(&manifest);
    let (mut emitted, mut unchanged) = (0, 0);
    let mut entries = Vec::new();
    for job in &jobs {
        for &target in &job.targets {
            bar.set_message(format!("{} ({})", job.name, target.name()));
            let id = format!("{}/{}", job.name, target.name());
            let key = key_of(&job.spec, target, &options)?;
            let present = known.get(&id).is_some_and(|files| {
                !files.is_empty() && files.iter().all(|f| args.out.join(f).exists())
            });
            if present && state.get(&id) == Some(&key) {
                unchanged += 1;
            } else {
                entries.push(emit_op(&job.spec, &job.name, target, &options, &args.out)?);
                state.insert(id, key);
                emitted += 1;
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // Entries an earlier build made that the list no longer has: gone, files too.
    let listed: Vec<String> = jobs
        .iter()
        .flat_map(|j| j.targets.iter().map(|t| format!("{}/{}", j.name, t.name())))
        .collect();
    let stale: Vec<(String, String)> = state
        .keys()
        .filter(|id| !listed.contains(id))
        .filter_map(|id| id.split_once('/'))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    state.retain(|id, _| listed.contains(id));
    if !entries.is_empty() || !stale.is_empty() || !manifest.exists() {
        edit_manifest(&args.out, entries, &stale)?;
    }
    let state_text = serde_json::to_vec_pretty(&state)?;
    let tmp = state_path.with_extension("json.tmp");
    std::fs::write(&tmp, state_text)
        .and_then(|()| std::fs::rename(&tmp, &state_path))
        .map_err(|e| format!("cannot write {}: {e}", state_path.display()))?;
    println!(
        "{emitted} emitted, {unchanged} unchanged, {} removed ({})",
        stale.len(),
        manifest.display()
    );
    Ok(())
}

/// The jobs of `list`: every entry's variants, with their targets.
fn jobs(list: &List) -> Result<Vec<Job>, CliError> {
    let defaults = if list.targets.is_empty() {
        Target::ALL.to_vec()
    } else {
        parse_targets(&list.targets)?
    };
    let mut jobs = Vec::new();
    for entry in &list.kernel {
        let targets = match &entry.targets {
            Some(t) => parse_targets(t)?,
            None => defaults.clone(),
        };
        let base = match &entry.spec {
            toml::Value::String(json) => serde_json::from_str::<Value>(json),
            other => serde_json::to_value(other).map_err(serde::de::Error::custom),
        }
        .map_err(|e| format!("kernel `{}`: its spec: {e}", entry.name))?;
        for (suffix, value) in variants(&base, &entry.vary)? {
            let name = format!("{}{suffix}", entry.name);
            check_name(&name).map_err(|e| UsageError(e.to_string()))?;
            let spec: OpSpec = serde_json::from_value(value)
                .map_err(|e| format!("kernel `{name}`: invalid op spec: {e}"))?;
            spec.validate()
                .map_err(|e| format!("kernel `{name}`: {e}"))?;
            jobs.push(Job {
                name,
                spec,
                targets: targets.clone(),
            });
        }
    }
    Ok(jobs)
}

/// Every combination of `vary`'s values set into `base`, with its name suffix
/// (`_f16_64x64`); `base` alone without `vary`.
fn variants(
    base: &Value,
    vary: &BTreeMap<String, Vec<toml::Value>>,
) -> Result<Vec<(String, Value)>, CliError> {
    let mut out = vec![(String::new(), base.clone())];
    for (field, values) in vary {
        let mut next = Vec::new();
        for (suffix, spec) in &out {
            for v in values {
                let v = serde_json::to_value(v)?;
                let mut spec = spec.clone();
                spec.as_object_mut()
                    .ok_or("a spec must be a table")?
                    .insert(field.clone(), v.clone());
                next.push((format!("{suffix}_{}", label(&v)), spec));
            }
        }
        out = next;
    }
    Ok(out)
}

/// A value as a name part: strings as they are, numbers, arrays joined by `x`.
fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(label).collect::<Vec<_>>().join("x"),
        other => other.to_string().replace(['.', '-', '"'], ""),
    }
}

/// What an entry's artifacts depend on.
fn key_of(spec: &OpSpec, target: Target, options: &EmitOptions) -> Result<String, CliError> {
    let text = serde_json::to_string(&serde_json::json!({
        "spec": spec,
        "target": target.name(),
        "sm": options.sm,
        "ptx_isa": options.ptx_isa,
        "triple": options.triple,
        "max_loop_iterations": options.max_loop_iterations,
        "shader_features": options.shader_features.names(),
        "kernelc": env!("CARGO_PKG_VERSION"),
        "abi": kernelc_codegen::abi::ABI_VERSION,
    }))?;
    Ok(blake3::hash(text.as_bytes()).to_hex().to_string())
}

/// The files of each `name/target` the manifest at `path` lists (none without one).
fn known_files(path: &Path) -> BTreeMap<String, Vec<String>> {
    let Some(manifest) = std::fs::read(path)
        .ok()
        .and_then(|b| kernelc::aot::parse_manifest(path, &b).ok())
    else {
        return BTreeMap::new();
    };
    manifest
        .kernels
        .iter()
        .map(|e: &OpEntry| {
            let files = e.launches.iter().map(|l| l.file.clone()).collect();
            (format!("{}/{}", e.name, e.target), files)
        })
        .collect()
}
