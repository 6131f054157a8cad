//! `manifest.json`: what a program needs to run emitted kernels without kernelc (the
//! schema is documented in docs/manifest.md; [`SCHEMA_VERSION`] changes with any
//! change a loader would notice).

use kernelc_ir::{Access, ScalarType};
use kernelc_kernels::spec::OpSpec;
use serde::{Deserialize, Serialize};

/// The manifest's `schema` field.
pub const SCHEMA: &str = "kernelc-manifest";

/// The version of the manifest's layout; a loader checks it before reading anything
/// else.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole manifest: every op emitted into one directory, per target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub version: u32,
    /// The kernelc that wrote it.
    pub kernelc: String,
    /// The kernel ABI (`kernelc_codegen::abi::ABI_VERSION`) every artifact follows.
    pub abi: u32,
    pub kernels: Vec<OpEntry>,
}

impl Manifest {
    /// An empty manifest of this version.
    pub fn new() -> Manifest {
        Manifest {
            schema: SCHEMA.to_string(),
            version: SCHEMA_VERSION,
            kernelc: env!("CARGO_PKG_VERSION").to_string(),
            abi: kernelc_codegen::abi::ABI_VERSION,
            kernels: Vec::new(),
        }
    }

    /// Adds `entry`, replacing one of the same name and target.
    pub fn put(&mut self, entry: OpEntry) {
        self.kernels
            .retain(|e| !(e.name == entry.name && e.target == entry.target));
        self.kernels.push(entry);
    }
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest::new()
    }
}

/// One op emitted for one target: its tensors, per-call values and launches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpEntry {
    /// The name the op was emitted under (file names start with it).
    pub name: String,
    /// `wgsl`, `spirv`, `ptx` or `cpu`.
    pub target: String,
    /// The op spec, as given (absent for a kernel `compile`d from IR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpSpec>,
    pub inputs: Vec<TensorEntry>,
    pub outputs: Vec<TensorEntry>,
    /// Per-call values in binding order, with the spec's values; a loader may pass
    /// others of the same type.
    pub uniforms: Vec<UniformEntry>,
    /// Scratch buffers the launches share (allocated by the loader, contents
    /// irrelevant between calls).
    pub temps: Vec<TempEntry>,
    /// Outputs written before the launches (an op over empty inputs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefills: Vec<PrefillEntry>,
    /// What the device must enable: `shader-f16`, `shader-f64`, `shader-int64`.
    pub features: Vec<String>,
    /// In order; each sees the writes of the ones before.
    pub launches: Vec<LaunchEntry>,
}

/// An input or output tensor: dense, row-major, little-endian.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub elements: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UniformEntry {
    pub name: String,
    pub dtype: ScalarType,
    /// The spec's value.
    pub value: f64,
    /// Its bits as the kernels take them (`abi::encode_scalar_bits`).
    pub bits: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TempEntry {
    pub dtype: ScalarType,
    pub elements: u64,
    pub bytes: u64,
}

/// Output `output` filled with `value` (of its dtype) or copied from input `input`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefillEntry {
    pub output: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<usize>,
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchEntry {
    /// The artifact, relative to the manifest.
    pub file: String,
    /// The entry point (WGSL, SPIR-V, PTX: `main`) or exported symbol (cpu).
    pub entry_point: String,
    /// The kernel's own name (for messages).
    pub kernel: String,
    pub workgroup_size: [u32; 3],
    /// Workgroups along x, y, z.
    pub grid: [u32; 3],
    /// The kernel's parameters in declaration order (PTX and cpu pass them in this
    /// order; the shader targets bind them as `binding` and `word` say).
    pub params: Vec<ParamEntry>,
    /// Shader targets: the binding of the packed scalar words and their count
    /// (absent without scalar parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalar_block: Option<ScalarBlock>,
    /// Shader targets: the binding of the status word (the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_binding: Option<u32>,
    /// cpu: bytes of shared scratch each call needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalarBlock {
    pub binding: u32,
    pub words: u32,
}

/// One kernel parameter and what to pass for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamEntry {
    Buffer {
        name: String,
        dtype: ScalarType,
        access: Access,
        /// Elements the kernel addresses from the buffer's start.
        elements: u64,
        bytes: u64,
        /// Shader targets: its binding in group 0.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<u32>,
        source: BufferSource,
    },
    Scalar {
        name: String,
        dtype: ScalarType,
        /// Shader targets: its word in the scalar block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        word: Option<u32>,
        source: ScalarSource,
    },
}

/// The tensor a buffer parameter binds: a whole input, output or temp, or the part of
/// one from element `start` (a piece of a split op).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferSource {
    Input(usize),
    Output(usize),
    Temp(usize),
    Part { of: Tensor, start: u64 },
}

/// A whole tensor of the op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tensor {
    Input(usize),
    Output(usize),
    Temp(usize),
}

/// What a scalar parameter takes: per-call value `uniform` (an index into
/// [`OpEntry::uniforms`]) or a constant the plan fixed (its value and bits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalarSource {
    Uniform(usize),
    Constant { value: f64, bits: u64 },
}
