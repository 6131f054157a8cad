//! The interpreter's public error type and the pieces it names.

use crate::eval::EvalError;
use crate::types::ScalarType;
use crate::validate::ValidationError;
use std::fmt;
use thiserror::Error;

/// One invocation of a dispatch: its workgroup id and its local id within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Invocation {
    pub workgroup: [u32; 3],
    pub local: [u32; 3],
}

impl fmt::Display for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invocation {} of workgroup {}",
            Xyz(self.local),
            Xyz(self.workgroup)
        )
    }
}

/// Formats `[x, y, z]` as `(x, y, z)`.
struct Xyz([u32; 3]);

impl fmt::Display for Xyz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.0[0], self.0[1], self.0[2])
    }
}

/// Which kind of memory an access addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemorySpace {
    /// A storage-buffer parameter.
    Buffer,
    /// A workgroup-shared array.
    Shared,
}

impl fmt::Display for MemorySpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemorySpace::Buffer => "buffer",
            MemorySpace::Shared => "shared array",
        })
    }
}

/// The two accesses that conflict in a data race.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RaceKind {
    /// Two invocations wrote the element.
    WriteWrite,
    /// One invocation wrote the element and another read it (in either order).
    ReadWrite,
}

impl fmt::Display for RaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceKind::WriteWrite => "write-write",
            RaceKind::ReadWrite => "read-write",
        })
    }
}

/// Why a kernel could not be run, or where its execution went wrong.
///
/// `path` fields use the validator's node-path syntax (`kernel.body[2].if.then[0].store`);
/// `workgroup` and `invocation` are the workgroup id and the local id of the invocation
/// that failed.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum InterpError {
    /// The kernel failed validation.
    #[error(transparent)]
    Invalid(#[from] ValidationError),

    /// An argument does not fit its parameter (count, kind, type, length).
    #[error(transparent)]
    Arg(#[from] crate::args::ArgError),

    #[error("kernel `{kernel}`: buffer argument {index} (`{param}`) holds {expected} elements, but element {element} is a {found}")]
    ArgData {
        kernel: String,
        index: usize,
        param: String,
        element: usize,
        expected: ScalarType,
        found: ScalarType,
    },

    #[error("kernel `{kernel}`: grid {} of workgroups of size {} has global ids beyond u32", Xyz(*grid), Xyz(*workgroup_size))]
    GridTooLarge {
        kernel: String,
        grid: [u32; 3],
        workgroup_size: [u32; 3],
    },

    #[error("kernel `{kernel}` needs {requested} {what}; the interpreter allows at most {limit}")]
    ResourceLimit {
        kernel: String,
        what: &'static str,
        requested: u64,
        limit: u64,
    },

    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: {source}", Xyz(*invocation), Xyz(*workgroup))]
    Eval {
        kernel: String,
        path: String,
        workgroup: [u32; 3],
        invocation: [u32; 3],
        source: EvalError,
    },

    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: {lanes}-lane access at index {index} is out of bounds of {space} `{memory}` (length {len})", Xyz(*invocation), Xyz(*workgroup))]
    OutOfBounds {
        kernel: String,
        path: String,
        space: MemorySpace,
        memory: String,
        index: u64,
        lanes: u8,
        len: u64,
        workgroup: [u32; 3],
        invocation: [u32; 3],
    },

    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: {lanes}-lane access to {space} `{memory}` at index {index}, which is not a multiple of {lanes}", Xyz(*invocation), Xyz(*workgroup))]
    UnalignedAccess {
        kernel: String,
        path: String,
        space: MemorySpace,
        memory: String,
        index: u64,
        lanes: u8,
        workgroup: [u32; 3],
        invocation: [u32; 3],
    },

    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: element {index} of shared array `{memory}` is read before this workgroup wrote it", Xyz(*invocation), Xyz(*workgroup))]
    UninitializedSharedRead {
        kernel: String,
        path: String,
        memory: String,
        index: u64,
        workgroup: [u32; 3],
        invocation: [u32; 3],
    },

    #[error("kernel `{kernel}` at {path}: {kind} data race on element {index} of {space} `{memory}` between {first} and {second} (no barrier orders them)")]
    Race {
        kernel: String,
        path: String,
        space: MemorySpace,
        memory: String,
        index: u64,
        kind: RaceKind,
        /// The invocation whose access came first.
        first: Invocation,
        /// The invocation whose access found the conflict (at `path`).
        second: Invocation,
    },

    #[error("kernel `{kernel}` at {path}, workgroup {}: barrier reached by {arrived} of {total} invocations ({returned} returned; e.g. invocation {} did not arrive)", Xyz(*workgroup), Xyz(*missing))]
    DivergentBarrier {
        kernel: String,
        path: String,
        workgroup: [u32; 3],
        arrived: usize,
        returned: usize,
        total: usize,
        missing: [u32; 3],
    },

    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: local `{local}` is read before it is assigned", Xyz(*invocation), Xyz(*workgroup))]
    UnsetLocal {
        kernel: String,
        path: String,
        local: String,
        workgroup: [u32; 3],
        invocation: [u32; 3],
    },

    /// Something the validator rules out (only reachable through [`run_unvalidated`]).
    #[error("kernel `{kernel}` at {path}, invocation {} of workgroup {}: malformed IR: {what}", Xyz(*invocation), Xyz(*workgroup))]
    Malformed {
        kernel: String,
        path: String,
        workgroup: [u32; 3],
        invocation: [u32; 3],
        what: String,
    },
}
