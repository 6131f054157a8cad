//! `kernelc emit SPEC --target … --out DIR`: an op's kernels as files plus
//! `manifest.json` (docs/manifest.md), for programs that do not link kernelc.

use std::path::{Path, PathBuf};

use clap::Args;
use kernelc::aot::manifest::OpEntry;
use kernelc::aot::{
    check_name, emit_op, update_manifest, AotError, EmitOptions, ShaderFeatures, Target,
};
use kernelc_kernels::spec::OpSpec;

use super::{CliError, UsageError};

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  kernelc emit '{\"op\":\"softmax\",\"dtype\":\"f32\",\"shape\":[4,8],\"axis\":1}' \\\n      --target wgsl,spirv --out kernels/\n  writes kernels/softmax.0.wgsl, kernels/softmax.0.spv and kernels/manifest.json"
)]
pub struct EmitArgs {
    /// The op as OpSpec JSON, inline, a file holding it, or `-` for standard input.
    spec: String,
    #[command(flatten)]
    to: Destination,
}

/// Where `emit` and `compile` write, for which targets, under which name.
#[derive(Args, Debug)]
pub struct Destination {
    /// Targets, comma-separated: wgsl, spirv, ptx, cpu.
    #[arg(long, value_delimiter = ',', default_value = "wgsl,spirv,ptx,cpu")]
    target: Vec<String>,
    /// The directory to write into (created if missing; an existing manifest there is
    /// updated).
    #[arg(long)]
    out: PathBuf,
    /// The name files and the manifest entry take (default: the op's or kernel's name).
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    targets: TargetOptions,
}

/// The targets' options, shared by `emit`, `compile` and `build`.
#[derive(Args, Debug)]
pub struct TargetOptions {
    /// PTX: the SM architecture.
    #[arg(long, default_value_t = 90)]
    sm: u32,
    /// PTX: the ISA version times ten (90 is PTX 9.0).
    #[arg(long, default_value_t = 90)]
    ptx_isa: u32,
    /// cpu: the object's target triple (default: the host, with all its extensions).
    #[arg(long)]
    triple: Option<String>,
    /// Shader targets: fit loops under this many iterations per invocation (65535 for
    /// lavapipe).
    #[arg(long)]
    max_loop_iterations: Option<u64>,
    /// Shader targets: optional capabilities kernels may use, comma-separated
    /// (shader-f16, shader-f64, shader-int64); the manifest lists each kernel's, for
    /// its loader to enable. Default: WebGPU's baseline (f32, i32, u32).
    #[arg(long, value_delimiter = ',')]
    shader_features: Vec<String>,
}

impl TargetOptions {
    /// The options; an unknown shader feature is a usage error.
    pub fn emit_options(&self) -> Result<EmitOptions, CliError> {
        let shader_features =
            ShaderFeatures::parse(&self.shader_features).map_err(|e| UsageError(e.to_string()))?;
        Ok(EmitOptions {
            sm: self.sm,
            ptx_isa: self.ptx_isa,
            triple: self.triple.clone(),
            max_loop_iterations: self.max_loop_iterations,
            shader_features,
        })
    }
}

pub fn run(args: EmitArgs) -> Result<(), CliError> {
    let text = super::read_json_arg(&args.spec)?;
    let spec: OpSpec = serde_json::from_str(&text).map_err(|e| format!("invalid op spec: {e}"))?;
    args.to
        .emit_each(spec.kind_name(), |name, target, options, out| {
            emit_op(&spec, name, target, options, out)
        })
}

/// Target names (`wgsl`, `spirv`, `ptx`, `cpu`) as targets; an unknown one is a usage
/// error.
pub fn parse_targets(names: &[String]) -> Result<Vec<Target>, CliError> {
    names
        .iter()
        .map(|t| {
            t.parse::<Target>()
                .map_err(|e| UsageError(e.to_string()).into())
        })
        .collect()
}

impl Destination {
    /// Checks the name (`default_name` unless `--name`) and the targets, creates the
    /// directory, emits one entry per target with `emit(name, target, options, dir)`,
    /// printing each file, then merges the entries into the directory's manifest.
    pub fn emit_each(
        &self,
        default_name: &str,
        emit: impl Fn(&str, Target, &EmitOptions, &Path) -> Result<OpEntry, AotError>,
    ) -> Result<(), CliError> {
        let targets = parse_targets(&self.target)?;
        let name = self.name.as_deref().unwrap_or(default_name);
        check_name(name).map_err(|e| UsageError(e.to_string()))?;
        let out = &self.out;
        std::fs::create_dir_all(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        let options = self.targets.emit_options()?;
        let mut entries = Vec::new();
        for target in targets {
            let entry = emit(name, target, &options, out)?;
            for launch in &entry.launches {
                println!("{}", out.join(&launch.file).display());
            }
            entries.push(entry);
        }
        update_manifest(out, entries)?;
        println!("{}", out.join("manifest.json").display());
        Ok(())
    }
}
