//! Every way a runtime call can fail, each saying what was wrong.

use kernelc_ir::ScalarType;
use kernelc_kernels::lower::LowerError;
use kernelc_kernels::SpecError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("invalid op: {0}")]
    Spec(#[from] SpecError),
    // Boxed: a graph error is large and rare; every `Result` carries the enum.
    #[error("invalid graph: {0}")]
    Graph(Box<kernelc_kernels::graph::GraphError>),
    #[error("cannot lower the op for {device}: {source}")]
    Lower {
        device: String,
        // Boxed: a lowering error is large and rare; every `Result` carries the enum.
        #[source]
        source: Box<LowerError>,
    },
    #[error("cannot compile kernel `{kernel}` for {device}: {message}")]
    Compile {
        device: String,
        kernel: String,
        message: String,
    },
    #[error("kernel `{kernel}` failed on {device}: {message}")]
    Launch {
        device: String,
        kernel: String,
        message: String,
        /// The run-time faults the kernel raised, as `kernelc_codegen::abi::status`
        /// bits (out of bounds, unaligned, division by zero, shift overflow); 0 for
        /// a launch that failed otherwise (refused, or the driver's error).
        status: u32,
    },
    #[error("{op} takes {expected} input tensors, got {found}")]
    InputCount {
        op: String,
        expected: usize,
        found: usize,
    },
    #[error("{op}: input `{input}` must have shape {expected:?}, got {found:?}")]
    InputShape {
        op: String,
        input: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{op}: input `{input}` must be {expected}, got {found}")]
    InputDtype {
        op: String,
        input: String,
        expected: ScalarType,
        found: ScalarType,
    },
    #[error("{op} writes {expected} outputs, got {found}")]
    OutputCount {
        op: String,
        expected: usize,
        found: usize,
    },
    #[error("{op}: output `{output}` must have shape {expected:?}, got {found:?}")]
    OutputShape {
        op: String,
        output: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{op}: output `{output}` must be {expected}, got {found}")]
    OutputDtype {
        op: String,
        output: String,
        expected: ScalarType,
        found: ScalarType,
    },
    #[error(
        "{op}: output `{output}` overlaps {other} (an output may share memory only with \
         the input the op updates in place, and then exactly)"
    )]
    Overlap {
        op: String,
        output: String,
        other: String,
    },
    #[error(
        "{what}: bytes {offset}..{offset}+{bytes} are not inside the {buffer_bytes}-byte buffer"
    )]
    OutOfRange {
        what: String,
        offset: u64,
        bytes: u64,
        buffer_bytes: u64,
    },
    #[error("{what}: byte offset {offset} is not a multiple of {alignment}")]
    Misaligned {
        what: String,
        offset: u64,
        alignment: u64,
    },
    #[error("invalid kernel: {0}")]
    InvalidKernel(String),
    #[error("address {address:#x} {problem}")]
    BadAddress { address: u64, problem: String },
    #[error("tensor lives on {tensor_device}, but this runtime runs on {runtime_device}")]
    WrongDevice {
        tensor_device: String,
        runtime_device: String,
    },
    #[error("shape {shape:?} holds {expected} elements, but {found} values were given")]
    DataLength {
        shape: Vec<usize>,
        expected: usize,
        found: usize,
    },
    #[error("tensor is {found}, not {expected}")]
    Dtype {
        expected: ScalarType,
        found: ScalarType,
    },
    #[error(
        "a tensor of shape {shape:?} ({dtype}) needs {bytes} bytes, over the limit of {limit}"
    )]
    TooLarge {
        shape: Vec<usize>,
        dtype: ScalarType,
        bytes: u128,
        limit: u64,
    },
    #[error("a buffer of {bytes} bytes is over the limit of {limit}")]
    BufferTooLarge { bytes: u64, limit: u64 },
    #[error("out of memory allocating {bytes} bytes on {device}")]
    OutOfMemory { device: String, bytes: u64 },
    #[error("{0}")]
    BadArgument(String),
    #[error("{what} cannot run on {device}: {why}")]
    Unsupported {
        what: String,
        device: String,
        why: String,
    },
    #[error("device unavailable: {0}")]
    NoDevice(String),
    /// A state kernelc's own invariants exclude: a bug in kernelc, reported, not hidden.
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

impl From<kernelc_kernels::graph::GraphError> for RuntimeError {
    fn from(e: kernelc_kernels::graph::GraphError) -> RuntimeError {
        RuntimeError::Graph(Box::new(e))
    }
}
