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

/// Where in a run something went wrong: the kernel, the IR node, and the invocation.
///
/// Displayed as ``kernel `k` at kernel.body[1].store, invocation (3, 0, 0) of workgroup
/// (1, 0, 0)`` (or ``..., workgroup (1, 0, 0)`` without an invocation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    /// The kernel's name.
    pub kernel: String,
    /// The failing node, in the validator's node-path syntax
    /// (`kernel.body[2].if.then[0].store`).
    pub path: String,
    /// The id of the workgroup that failed.
    pub workgroup: [u32; 3],
    /// The local id of the invocation that failed; `None` where the workgroup failed as
    /// a whole (a divergent barrier).
    pub invocation: Option<[u32; 3]>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}` at {}, ", self.kernel, self.path)?;
        match self.invocation {
            Some(local) => write!(
                f,
                "invocation {} of workgroup {}",
                Xyz(local),
                Xyz(self.workgroup)
            ),
            None => write!(f, "workgroup {}", Xyz(self.workgroup)),
        }
    }
}

/// Why a kernel could not be run, or where its execution went wrong.
///
/// Every error of a running kernel carries one [`Site`]; [`InterpError::site`] returns
/// it.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum InterpError {
    /// The kernel failed validation.
    #[error(transparent)]
    Invalid(#[from] ValidationError),

    /// An argument does not fit its parameter (count, kind, type, length).
    #[error(transparent)]
    Arg(#[from] crate::args::ArgError),

    /// A host buffer holds an element of another type than its parameter's.
    #[error("kernel `{kernel}`: buffer argument {index} (`{param}`) holds {expected} elements, but element {element} is a {found}")]
    ArgData {
        kernel: String,
        index: usize,
        param: String,
        element: usize,
        expected: ScalarType,
        found: ScalarType,
    },

    /// The grid's global ids do not fit in u32.
    #[error("kernel `{kernel}`: grid {} of workgroups of size {} has global ids beyond u32", Xyz(*grid), Xyz(*workgroup_size))]
    GridTooLarge {
        kernel: String,
        grid: [u32; 3],
        workgroup_size: [u32; 3],
    },

    /// The kernel needs more than the interpreter will allocate.
    #[error("kernel `{kernel}` needs {requested} {what}; the interpreter allows at most {limit}")]
    ResourceLimit {
        kernel: String,
        what: &'static str,
        requested: u64,
        limit: u64,
    },

    /// An operator failed (integer division by zero, a shift by the bit width or more).
    #[error("{site}: {source}")]
    Eval { site: Site, source: EvalError },

    /// A load or store past the end of its memory.
    #[error("{site}: {lanes}-lane access at index {index} is out of bounds of {space} `{memory}` (length {len})")]
    OutOfBounds {
        site: Site,
        space: MemorySpace,
        memory: String,
        index: u64,
        lanes: u8,
        len: u64,
    },

    /// An in-bounds vector access at an index that is not a multiple of its lanes.
    #[error("{site}: {lanes}-lane access to {space} `{memory}` at index {index}, which is not a multiple of {lanes}")]
    UnalignedAccess {
        site: Site,
        space: MemorySpace,
        memory: String,
        index: u64,
        lanes: u8,
    },

    /// A read of a shared element no invocation of this workgroup has written.
    #[error(
        "{site}: element {index} of shared array `{memory}` is read before this workgroup wrote it"
    )]
    UninitializedSharedRead {
        site: Site,
        memory: String,
        index: u64,
    },

    /// Two invocations touched one element, at least one writing, with no barrier
    /// between them. The site's invocation is the one whose access found the conflict.
    #[error("{site}: {kind} data race on element {index} of {space} `{memory}` with {first}, which accessed it earlier (no barrier orders them)")]
    Race {
        site: Site,
        space: MemorySpace,
        memory: String,
        index: u64,
        kind: RaceKind,
        /// The invocation whose access came first.
        first: Invocation,
    },

    /// A barrier that some invocations of the workgroup did not reach (the site has no
    /// invocation).
    #[error("{site}: barrier reached by {arrived} of {total} invocations ({returned} returned; e.g. invocation {} did not arrive)", Xyz(*missing))]
    DivergentBarrier {
        site: Site,
        arrived: usize,
        returned: usize,
        total: usize,
        missing: [u32; 3],
    },

    /// A read of a local before any assignment to it.
    #[error("{site}: local `{local}` is read before it is assigned")]
    UnsetLocal { site: Site, local: String },

    /// A fragment statement that some invocations of the workgroup did not reach (the
    /// site has no invocation).
    #[error("{site}: fragment statement reached by {arrived} of {total} invocations; every warp must run it whole")]
    DivergentFragment {
        site: Site,
        arrived: usize,
        total: usize,
    },

    /// A fragment load's or store's index or stride that differs between the
    /// invocations of one warp (the site's invocation differs from its warp's first).
    #[error("{site}: the fragment {operand} is {found} here but {expected} in the first invocation of its warp; one warp must agree on it")]
    FragmentOperandDiffers {
        site: Site,
        operand: &'static str,
        expected: String,
        found: String,
    },

    /// A read of a fragment before any write to it.
    #[error("{site}: fragment `{fragment}` is read before it is written")]
    UnsetFragment { site: Site, fragment: String },

    /// A warpgroup's `A` or `B` fragment loaded at an index or stride that is not a
    /// multiple of 8 (the matrix units address shared memory in 16-byte steps).
    #[error("{site}: fragment `{fragment}` is loaded at index {index} with stride {stride}; a warpgroup's A and B need multiples of 8")]
    MisalignedFragment {
        site: Site,
        fragment: String,
        index: u32,
        stride: u32,
    },

    /// Shared memory that a warpgroup's `A` or `B` fragment was loaded from changed
    /// before the `mma` that reads it (the matrix units read it there).
    #[error("{site}: the shared memory fragment `{fragment}` was loaded from changed before the mma that reads it")]
    FragmentSourceChanged { site: Site, fragment: String },

    /// An asynchronous copy's rules broken ([`crate::async_copy`]): its destination
    /// touched while the copy is in flight, a copy still in flight when the workgroup
    /// ends, or an index that is not a multiple of its length.
    #[error("{site}: element {index} of shared array `{memory}`: {what}")]
    AsyncCopy {
        site: Site,
        memory: String,
        index: u64,
        what: String,
    },

    /// A shared array used right after another one whose bytes it shares
    /// ([`crate::kernel::SharedDecl::reuses`]), with no barrier between.
    #[error("{site}: shared array `{memory}` is used with no barrier since `{previous}`, whose bytes it reuses, was")]
    SharedReuse {
        site: Site,
        memory: String,
        previous: String,
    },

    /// Something the validator rules out (only reachable through
    /// [`run_unvalidated`](super::run_unvalidated)).
    #[error("{site}: malformed IR: {what}")]
    Malformed { site: Site, what: String },
}

/// Which variants carry a [`Site`], in one place for [`InterpError::site`] and
/// [`InterpError::site_mut`] (match ergonomics bind `site` by reference or mutably).
macro_rules! site_of {
    ($error:expr) => {
        match $error {
            InterpError::Invalid(_)
            | InterpError::Arg(_)
            | InterpError::ArgData { .. }
            | InterpError::GridTooLarge { .. }
            | InterpError::ResourceLimit { .. } => None,
            InterpError::Eval { site, .. }
            | InterpError::OutOfBounds { site, .. }
            | InterpError::UnalignedAccess { site, .. }
            | InterpError::UninitializedSharedRead { site, .. }
            | InterpError::Race { site, .. }
            | InterpError::DivergentBarrier { site, .. }
            | InterpError::UnsetLocal { site, .. }
            | InterpError::DivergentFragment { site, .. }
            | InterpError::FragmentOperandDiffers { site, .. }
            | InterpError::UnsetFragment { site, .. }
            | InterpError::MisalignedFragment { site, .. }
            | InterpError::FragmentSourceChanged { site, .. }
            | InterpError::AsyncCopy { site, .. }
            | InterpError::SharedReuse { site, .. }
            | InterpError::Malformed { site, .. } => Some(site),
        }
    };
}

impl InterpError {
    /// Where the running kernel failed; `None` for errors found before it ran.
    pub fn site(&self) -> Option<&Site> {
        site_of!(self)
    }

    /// [`Self::site`], mutably (e.g. to clear the node path before comparing errors of
    /// two kernels a pass made from one another).
    pub fn site_mut(&mut self) -> Option<&mut Site> {
        site_of!(self)
    }
}
