//! Ahead-of-time emission: an op's kernels as files (`.wgsl`, `.spv`, `.ptx`, `.o`)
//! plus `manifest.json`, which tells a program that does not link kernelc how to bind
//! and launch them (docs/manifest.md).
//!
//! Each target's kernels are what its device in the runtime compiles: the op lowered
//! for the target's caps (WebGPU's defaults for the shader targets, sm_90 for PTX, the
//! CPU's), every kernel put through [`passes::for_target`] with the target's math
//! expansion, then emitted. Files are written whole or not at all (a temporary file
//! renamed into place); the manifest is read, updated and rewritten the same way, so
//! several `emit` calls into one directory accumulate.

#[cfg(feature = "wgpu")]
pub mod check;
pub mod manifest;

use std::path::{Path, PathBuf};

use kernelc_codegen::abi::{ParamSlot, ShaderLayout, ENTRY_POINT};
use kernelc_ir::passes::{self, MathExpansion};
use kernelc_ir::{Kernel, Param, ScalarType};
use kernelc_kernels::lower::{lower, Binding, Launch, PrefillSource, TargetCaps, Whole};
use kernelc_kernels::spec::{OpSpec, TensorSig};

use manifest::*;

/// A target of ahead-of-time emission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// WGSL through naga (WebGPU's default caps).
    Wgsl,
    /// SPIR-V through rspirv (WebGPU's default caps).
    Spirv,
    /// CUDA PTX through LLVM (sm_90 caps).
    Ptx,
    /// A relocatable object through Cranelift.
    Cpu,
}

impl Target {
    pub const ALL: [Target; 4] = [Target::Wgsl, Target::Spirv, Target::Ptx, Target::Cpu];

    /// Its name in the manifest and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::Wgsl => "wgsl",
            Target::Spirv => "spirv",
            Target::Ptx => "ptx",
            Target::Cpu => "cpu",
        }
    }

    /// The extension of its artifacts.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Wgsl => "wgsl",
            Target::Spirv => "spv",
            Target::Ptx => "ptx",
            Target::Cpu => "o",
        }
    }

    /// The caps its kernels are lowered for: the shader targets get WebGPU's
    /// defaults plus the optional features asked for.
    fn caps(self, options: &EmitOptions) -> TargetCaps {
        match self {
            Target::Wgsl | Target::Spirv => {
                let features = options.shader_features;
                TargetCaps {
                    f16: features.f16,
                    f64: features.f64,
                    i64: features.int64,
                    ..TargetCaps::gpu_baseline()
                }
            }
            #[cfg(feature = "cuda")]
            Target::Ptx => TargetCaps {
                matrix_fragments: options.sm >= kernelc_codegen::ptx::FRAGMENTS_MIN_SM,
                // sm_90a PTX runs on compute capability 9.0 only, so ahead-of-time
                // PTX keeps to `mma.sync` (any later GPU's driver can take it).
                warpgroup_fragments: false,
                async_copies: options.sm >= kernelc_codegen::ptx::ASYNC_COPY_MIN_SM,
                f64_m16_fragments: options.sm >= kernelc_codegen::ptx::F64_M16_FRAGMENTS_MIN_SM,
                // A kernel past 48 KiB of shared memory needs its launcher to opt it
                // in and pass the size, which the manifest does not carry: every
                // ahead-of-time kernel stays within the static limit.
                opt_in_shared_memory_bytes: 0,
                ..TargetCaps::cuda_sm90()
            },
            #[cfg(not(feature = "cuda"))]
            Target::Ptx => TargetCaps {
                warpgroup_fragments: false,
                opt_in_shared_memory_bytes: 0,
                ..TargetCaps::cuda_sm90()
            },
            Target::Cpu => TargetCaps::cpu(),
        }
    }

    /// Whether this build has its emitter (features `wgpu` and `cuda`).
    pub fn is_compiled_in(self) -> bool {
        match self {
            Target::Cpu => true,
            Target::Wgsl | Target::Spirv => cfg!(feature = "wgpu"),
            Target::Ptx => cfg!(feature = "cuda"),
        }
    }

    /// `kernel`'s artifact for this target, as `emit` writes it: the kernel through
    /// the target's expansions, then its emitter (`.wgsl` text, `.spv` words, `.ptx`
    /// text, a relocatable object).
    pub fn artifact(self, kernel: &Kernel, options: &EmitOptions) -> Result<Vec<u8>, AotError> {
        let expanded = passes::for_target(kernel, &self.expansion(options)?);
        self.emit(&expanded, options)
    }

    /// Whether its kernels bind parameters by the shader layout (`abi`).
    fn is_shader(self) -> bool {
        matches!(self, Target::Wgsl | Target::Spirv)
    }

    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    fn expansion(self, options: &EmitOptions) -> Result<MathExpansion, AotError> {
        match self {
            Target::Cpu => Ok(MathExpansion::all_transcendental()),
            #[cfg(feature = "wgpu")]
            Target::Wgsl => Ok(kernelc_codegen::wgsl::required_expansion()),
            #[cfg(feature = "wgpu")]
            // The device is unknown: its driver may contract or reassociate, so the
            // error-free sums go through opaque values (as WGSL's always do).
            Target::Spirv => {
                Ok(kernelc_codegen::spirv::required_expansion(false).with_opaque_sums(true))
            }
            #[cfg(feature = "cuda")]
            Target::Ptx => Ok(kernelc_codegen::ptx::expansion_for_sm(options.sm)),
            #[allow(unreachable_patterns)]
            other => Err(other.missing()),
        }
    }

    fn missing(self) -> AotError {
        let feature = match self {
            Target::Ptx => "cuda",
            Target::Wgsl | Target::Spirv | Target::Cpu => "wgpu",
        };
        AotError::Missing {
            target: self.name(),
            feature,
        }
    }

    /// `kernel`'s artifact.
    fn emit(self, kernel: &Kernel, options: &EmitOptions) -> Result<Vec<u8>, AotError> {
        let codegen = |e: kernelc_codegen::CodegenError| AotError::Codegen {
            target: self.name(),
            kernel: kernel.name.clone(),
            message: e.to_string(),
        };
        match self {
            Target::Cpu => kernelc_codegen::cpu::emit_object_for(kernel, options.triple.as_deref())
                .map_err(codegen),
            #[cfg(feature = "wgpu")]
            Target::Wgsl => kernelc_codegen::wgsl::wgsl_text(kernel)
                .map(String::into_bytes)
                .map_err(codegen),
            #[cfg(feature = "wgpu")]
            Target::Spirv => kernelc_codegen::spirv::emit(kernel)
                .map(|words| words.iter().flat_map(|w| w.to_le_bytes()).collect())
                .map_err(codegen),
            #[cfg(feature = "cuda")]
            Target::Ptx => {
                let ptx = kernelc_codegen::ptx::PtxOptions {
                    sm: options.sm,
                    ptx_isa: options.ptx_isa,
                    ..Default::default()
                };
                kernelc_codegen::ptx::emit(kernel, &ptx)
                    .map(String::into_bytes)
                    .map_err(codegen)
            }
            #[allow(unreachable_patterns)]
            other => Err(other.missing()),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = AotError;
    fn from_str(s: &str) -> Result<Target, AotError> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| AotError::UnknownTarget(s.to_string()))
    }
}

/// Options of [`emit_op`].
#[derive(Clone, Debug)]
pub struct EmitOptions {
    /// PTX: the SM architecture (`.target sm_{sm}`).
    pub sm: u32,
    /// PTX: the ISA version times ten (`.version`).
    pub ptx_isa: u32,
    /// cpu: the target triple of the object (the host, with all its extensions, when
    /// unset).
    pub triple: Option<String>,
    /// Shader targets: fit every kernel's loops under this many iterations per
    /// invocation (a driver that cuts longer loops short, as lavapipe's does at
    /// 65,535: docs/semantics.md).
    pub max_loop_iterations: Option<u64>,
    /// Shader targets: the optional capabilities kernels may use (none by default:
    /// WebGPU's baseline). A kernel that uses one lists it in its manifest entry's
    /// `features`, which its loader must enable on the device.
    pub shader_features: ShaderFeatures,
}

/// Optional shader capabilities, by their manifest names: `shader-f16` (WebGPU's
/// `shader-f16`, Vulkan's `shaderFloat16` with 16-bit storage), `shader-f64`,
/// `shader-int64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ShaderFeatures {
    pub f16: bool,
    pub f64: bool,
    pub int64: bool,
}

impl ShaderFeatures {
    /// The manifest names of every feature.
    pub const NAMES: [&'static str; 3] = ["shader-f16", "shader-f64", "shader-int64"];

    /// The features named (manifest names); an unknown name is an error naming it.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<ShaderFeatures, AotError> {
        let mut features = ShaderFeatures::default();
        for name in names {
            match name.as_ref() {
                "shader-f16" => features.f16 = true,
                "shader-f64" => features.f64 = true,
                "shader-int64" => features.int64 = true,
                other => return Err(AotError::UnknownFeature(other.to_string())),
            }
        }
        Ok(features)
    }

    /// The manifest names of the features set.
    pub fn names(self) -> Vec<&'static str> {
        let set = [self.f16, self.f64, self.int64];
        ShaderFeatures::NAMES
            .into_iter()
            .zip(set)
            .filter_map(|(name, on)| on.then_some(name))
            .collect()
    }
}

impl Default for EmitOptions {
    fn default() -> Self {
        EmitOptions {
            sm: 90,
            ptx_isa: 90,
            triple: None,
            max_loop_iterations: None,
            shader_features: ShaderFeatures::default(),
        }
    }
}

/// What went wrong emitting, with the file, op or kernel it concerns.
#[derive(Debug, thiserror::Error)]
pub enum AotError {
    #[error("unknown target `{0}` (targets: wgsl, spirv, ptx, cpu)")]
    UnknownTarget(String),
    #[error("unknown shader feature `{0}` (features: shader-f16, shader-f64, shader-int64)")]
    UnknownFeature(String),
    #[error("this kernelc was built without the {target} target (feature `{feature}`)")]
    Missing {
        target: &'static str,
        feature: &'static str,
    },
    #[error("the name `{0}` must be 1 to 64 ASCII letters, digits, `_` or `-`")]
    BadName(String),
    #[error("{op} for {target}: {message}")]
    Lower {
        op: String,
        target: &'static str,
        message: String,
    },
    #[error("{target}: kernel `{kernel}`: {message}")]
    Codegen {
        target: &'static str,
        kernel: String,
        message: String,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
}

/// For a shader target, the optional features `spec`'s tensors need that `options`
/// leave off, as advice appended to a lowering error ("" when none).
fn feature_hint(spec: &OpSpec, target: Target, options: &EmitOptions) -> String {
    if !target.is_shader() {
        return String::new();
    }
    let tensors = spec.inputs().into_iter().chain(spec.outputs());
    let mut needed = ShaderFeatures::default();
    for sig in tensors {
        match sig.dtype {
            ScalarType::F16 => needed.f16 = true,
            ScalarType::F64 => needed.f64 = true,
            ScalarType::I64 => needed.int64 = true,
            ScalarType::Bool
            | ScalarType::I32
            | ScalarType::U32
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => {}
        }
    }
    let have = options.shader_features;
    let missing = ShaderFeatures {
        f16: needed.f16 && !have.f16,
        f64: needed.f64 && !have.f64,
        int64: needed.int64 && !have.int64,
    };
    match missing.names().join(",") {
        names if names.is_empty() => String::new(),
        names => format!(
            " (the shader targets have WebGPU's baseline only; enable `{names}` with --shader-features, or EmitOptions::shader_features, if the devices you load on have it)"
        ),
    }
}

/// Emits `spec`'s kernels for `target` into `dir` as `{name}.{launch}.{ext}` and
/// returns its manifest entry (not yet written: see [`update_manifest`]).
pub fn emit_op(
    spec: &OpSpec,
    name: &str,
    target: Target,
    options: &EmitOptions,
    dir: &Path,
) -> Result<OpEntry, AotError> {
    check_name(name)?;
    let lowering = |message: String| AotError::Lower {
        op: spec.name(),
        target: target.name(),
        message,
    };
    spec.validate().map_err(|e| lowering(e.to_string()))?;
    // Lowering sees the structural spec, as the runtime's does: per-call values are
    // uniform bindings, so the files serve every value.
    let plan = lower(&spec.structural(), &target.caps(options))
        .map_err(|e| lowering(e.to_string() + &feature_hint(spec, target, options)))?;
    let mut launches = Vec::with_capacity(plan.launches.len());
    let mut features = Vec::new();
    for (i, launch) in plan.launches.iter().enumerate() {
        launches.push(emit_launch(
            target,
            options,
            dir,
            name,
            i,
            launch,
            &mut features,
        )?);
    }
    Ok(OpEntry {
        name: name.to_string(),
        target: target.name().to_string(),
        op: Some(spec.clone()),
        inputs: spec.inputs().iter().map(tensor_entry).collect(),
        outputs: spec.outputs().iter().map(tensor_entry).collect(),
        uniforms: spec
            .uniforms()
            .into_iter()
            .map(|u| UniformEntry {
                name: u.name,
                dtype: u.value.ty(),
                value: u.value.to_f64(),
                bits: u.value.to_bits(),
            })
            .collect(),
        temps: plan
            .temps
            .iter()
            .map(|t| TempEntry {
                dtype: t.dtype,
                elements: t.len,
                bytes: t.len * t.dtype.size_bytes() as u64,
            })
            .collect(),
        prefills: plan
            .prefills
            .iter()
            .map(|p| match &p.source {
                PrefillSource::Value(v) => PrefillEntry {
                    output: p.output,
                    value: Some(v.to_f64()),
                    input: None,
                },
                PrefillSource::Input(i) => PrefillEntry {
                    output: p.output,
                    value: None,
                    input: Some(*i),
                },
            })
            .collect(),
        features,
        launches,
    })
}

/// Emits launch `i` of op `name` into `dir` as `{name}.{i}.{ext}`, adding the shader
/// features its kernel needs to `features`, and returns its manifest entry.
fn emit_launch(
    target: Target,
    options: &EmitOptions,
    dir: &Path,
    name: &str,
    i: usize,
    launch: &Launch,
    features: &mut Vec<String>,
) -> Result<LaunchEntry, AotError> {
    let mut kernel = passes::for_target(&launch.kernel, &target.expansion(options)?);
    // One symbol per launch, so that objects of one op link together.
    kernel.name = format!("{name}_{i}");
    if let (true, Some(iterations)) = (target.is_shader(), options.max_loop_iterations) {
        let budget = passes::LoopBudget {
            iterations,
            max_workgroups: [u32::MAX; 3],
            max_unrolled_nodes: 1 << 16,
        };
        kernel = passes::fit_loop_budget(&kernel, &budget).map_err(|e| AotError::Codegen {
            target: target.name(),
            kernel: kernel.name.clone(),
            message: e.to_string(),
        })?;
    }
    let file = format!("{name}.{i}.{}", target.extension());
    write_atomically(&dir.join(&file), &target.emit(&kernel, options)?)?;
    if target.is_shader() {
        for feature in shader_features(&kernel) {
            if !features.contains(&feature) {
                features.push(feature);
            }
        }
    }
    launch_entry(target, launch, &kernel, file, &launch.kernel.name)
}

/// Emits a user's `kernel` (valid IR) for `target` into `dir` as one launch of `grid`
/// workgroups, and returns its manifest entry: its read-only buffer parameters are
/// the entry's inputs, the others its outputs (a read-write one is read as well), its
/// scalar parameters its per-call values (0 in the manifest).
pub fn emit_kernel(
    kernel: &Kernel,
    name: &str,
    grid: [u32; 3],
    target: Target,
    options: &EmitOptions,
    dir: &Path,
) -> Result<OpEntry, AotError> {
    check_name(name)?;
    let (mut inputs, mut outputs, mut uniforms) = (Vec::new(), Vec::new(), Vec::new());
    let bindings = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Buffer {
                name,
                elem,
                len,
                access,
            } => {
                let sig = TensorSig::new(name, *elem, vec![*len as usize]);
                if *access == kernelc_ir::Access::Read {
                    inputs.push(tensor_entry(&sig));
                    Binding::Input(inputs.len() - 1)
                } else {
                    outputs.push(tensor_entry(&sig));
                    Binding::Output(outputs.len() - 1)
                }
            }
            Param::Scalar { name, ty } => {
                uniforms.push(UniformEntry {
                    name: name.clone(),
                    dtype: *ty,
                    value: 0.0,
                    bits: 0,
                });
                Binding::Uniform(uniforms.len() - 1)
            }
        })
        .collect();
    let launch = Launch {
        kernel: kernel.clone(),
        grid,
        bindings,
    };
    let mut features = Vec::new();
    let entry = emit_launch(target, options, dir, name, 0, &launch, &mut features)?;
    Ok(OpEntry {
        name: name.to_string(),
        target: target.name().to_string(),
        op: None,
        inputs,
        outputs,
        uniforms,
        temps: Vec::new(),
        prefills: Vec::new(),
        features,
        launches: vec![entry],
    })
}

/// Reads `dir/manifest.json` (a new manifest when there is none), puts `entries` in it
/// (replacing entries of the same name and target) and writes it back whole.
pub fn update_manifest(dir: &Path, entries: Vec<OpEntry>) -> Result<Manifest, AotError> {
    edit_manifest(dir, entries, &[])
}

/// [`update_manifest`] that also drops the entries `(name, target)` of `remove` and
/// deletes their files.
pub fn edit_manifest(
    dir: &Path,
    entries: Vec<OpEntry>,
    remove: &[(String, String)],
) -> Result<Manifest, AotError> {
    let path = dir.join("manifest.json");
    let mut manifest = match std::fs::read(&path) {
        Ok(bytes) => parse_manifest(&path, &bytes)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::new(),
        Err(e) => {
            return Err(AotError::Manifest {
                path,
                message: e.to_string(),
            })
        }
    };
    for entry in entries {
        manifest.put(entry);
    }
    let (gone, kept) = manifest
        .kernels
        .into_iter()
        .partition(|e| remove.contains(&(e.name.clone(), e.target.clone())));
    manifest.kernels = kept;
    for launch in gone.iter().flat_map(|e: &OpEntry| &e.launches) {
        let file = dir.join(&launch.file);
        if let Err(e) = std::fs::remove_file(&file) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(AotError::Write {
                    path: file,
                    source: e,
                });
            }
        }
    }
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| AotError::Manifest {
        path: path.clone(),
        message: e.to_string(),
    })?;
    write_atomically(&path, &text)?;
    Ok(manifest)
}

/// A manifest from its bytes, checked to be one of this schema and version.
pub fn parse_manifest(path: &Path, bytes: &[u8]) -> Result<Manifest, AotError> {
    let bad = |message: String| AotError::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    if value.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
        return Err(bad(format!(
            "not a kernelc manifest (no \"schema\": \"{SCHEMA}\")"
        )));
    }
    let version = value.get("version").and_then(|v| v.as_u64());
    if version != Some(SCHEMA_VERSION as u64) {
        return Err(bad(format!(
            "manifest version {version:?}; this kernelc reads version {SCHEMA_VERSION}"
        )));
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// Checks `name` can name files and a manifest entry: 1 to 64 ASCII letters, digits,
/// `_` or `-`.
pub fn check_name(name: &str) -> Result<(), AotError> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if fine {
        Ok(())
    } else {
        Err(AotError::BadName(name.to_string()))
    }
}

/// Writes `bytes` to `path` through a temporary file renamed into place: a reader
/// sees the old file or the new one, never part of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), AotError> {
    let failed = |source| AotError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        // Nothing half-written stays behind.
        let _ = std::fs::remove_file(&tmp);
        failed(e)
    })
}

fn tensor_entry(sig: &TensorSig) -> TensorEntry {
    let elements = sig.numel() as u64;
    TensorEntry {
        name: sig.name.clone(),
        dtype: sig.dtype,
        shape: sig.shape.clone(),
        elements,
        bytes: elements * sig.dtype.size_bytes() as u64,
    }
}

/// The features a device must enable for a shader kernel, by the types it uses.
fn shader_features(kernel: &Kernel) -> Vec<String> {
    let mut types: Vec<ScalarType> = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Buffer { elem, .. } => *elem,
            Param::Scalar { ty, .. } => *ty,
        })
        .collect();
    types.extend(kernel.shared.iter().map(|s| s.elem));
    types.extend(kernel.locals.iter().map(|l| l.ty.scalar));
    let mut features = Vec::new();
    for (ty, feature) in [
        (ScalarType::F16, "shader-f16"),
        (ScalarType::F64, "shader-f64"),
        (ScalarType::I64, "shader-int64"),
    ] {
        if types.contains(&ty) {
            features.push(feature.to_string());
        }
    }
    features
}

/// The manifest entry of `launch`, emitted as `kernel` into `file`.
fn launch_entry(
    target: Target,
    launch: &Launch,
    kernel: &Kernel,
    file: String,
    lowered_name: &str,
) -> Result<LaunchEntry, AotError> {
    let layout = ShaderLayout::of(kernel);
    let shader = target.is_shader();
    let internal = |message: &str| AotError::Codegen {
        target: target.name(),
        kernel: lowered_name.to_string(),
        message: message.to_string(),
    };
    let mut params = Vec::with_capacity(kernel.params.len());
    for ((param, binding), slot) in kernel
        .params
        .iter()
        .zip(&launch.bindings)
        .zip(&layout.params)
    {
        params.push(match (param, binding) {
            (
                Param::Buffer {
                    name,
                    elem,
                    len,
                    access,
                },
                binding,
            ) => {
                let source = buffer_source(binding)
                    .ok_or_else(|| internal("a buffer parameter bound to a scalar"))?;
                let ParamSlot::Buffer { binding } = slot else {
                    return Err(internal("a buffer parameter in a scalar slot"));
                };
                ParamEntry::Buffer {
                    name: name.clone(),
                    dtype: *elem,
                    access: *access,
                    elements: *len,
                    bytes: len * elem.size_bytes() as u64,
                    binding: shader.then_some(*binding),
                    source,
                }
            }
            (Param::Scalar { name, ty }, binding) => {
                let source = match binding {
                    Binding::Uniform(i) => ScalarSource::Uniform(*i),
                    Binding::Scalar(s) => ScalarSource::Constant {
                        value: s.to_f64(),
                        bits: s.to_bits(),
                    },
                    Binding::Input(_)
                    | Binding::Output(_)
                    | Binding::Temp(_)
                    | Binding::Part { .. } => {
                        return Err(internal("a scalar parameter bound to a tensor"))
                    }
                };
                let ParamSlot::Scalar { word } = slot else {
                    return Err(internal("a scalar parameter in a buffer slot"));
                };
                ParamEntry::Scalar {
                    name: name.clone(),
                    dtype: *ty,
                    word: shader.then_some(*word),
                    source,
                }
            }
        });
    }
    let entry_point = match target {
        Target::Cpu => kernelc_codegen::cpu::symbol_name(kernel),
        Target::Wgsl | Target::Spirv | Target::Ptx => ENTRY_POINT.to_string(),
    };
    Ok(LaunchEntry {
        file,
        entry_point,
        kernel: lowered_name.to_string(),
        workgroup_size: kernel.workgroup_size,
        grid: launch.grid,
        params,
        scalar_block: match (shader, layout.scalar_binding) {
            (true, Some(binding)) => Some(ScalarBlock {
                binding,
                words: layout.scalar_words,
            }),
            _ => None,
        },
        status_binding: shader.then_some(layout.status_binding),
        shared_bytes: (target == Target::Cpu).then(|| kernelc_codegen::cpu::shared_bytes(kernel)),
    })
}

/// Where a buffer binding points, or `None` for a scalar binding.
fn buffer_source(binding: &Binding) -> Option<BufferSource> {
    let whole = |w: &Whole| match w {
        Whole::Input(i) => Tensor::Input(*i),
        Whole::Output(i) => Tensor::Output(*i),
        Whole::Temp(i) => Tensor::Temp(*i),
    };
    match binding {
        Binding::Input(i) => Some(BufferSource::Input(*i)),
        Binding::Output(i) => Some(BufferSource::Output(*i)),
        Binding::Temp(i) => Some(BufferSource::Temp(*i)),
        Binding::Part { of, start } => Some(BufferSource::Part {
            of: whole(of),
            start: *start,
        }),
        Binding::Scalar(_) | Binding::Uniform(_) => None,
    }
}
