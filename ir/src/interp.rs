//! The reference interpreter: the executable definition of the IR's meaning.
//!
//! [`run`] executes a kernel over a whole grid on the host. Workgroups run one after
//! another (x fastest, then y, then z). The invocations of one workgroup run in lockstep
//! at statement granularity under an *active mask*: a statement is executed for every
//! active invocation before the next statement starts.
//!
//! * `If` evaluates its condition per active invocation, runs `then` with the invocations
//!   for which it held and then `else` with the others.
//! * `For` evaluates `start` and `end` once per invocation, then iterates while any
//!   invocation still runs; each iteration's mask is the invocations whose counter is
//!   below their `end`. A counter that would wrap past the type's maximum ends its loop.
//! * `Return` removes an invocation for the rest of the dispatch.
//! * `Barrier` must be reached by every invocation of the workgroup (none returned, none
//!   masked off), else [`InterpError::DivergentBarrier`]; it starts a new *epoch*.
//!
//! All value operations go through [`crate::eval`], so the interpreter and constant
//! folding agree bit for bit.
//!
//! Besides computing results, the interpreter checks what a GPU would leave undefined:
//! out-of-bounds and misaligned accesses, reads of never-written shared memory, and data
//! races, each reported as a typed [`InterpError`] naming the memory, the element, the
//! invocations and the IR node (with the validator's path syntax, e.g.
//! `kernel.body[3].if.then[0].store`).
//!
//! Race rules, per element:
//! * shared memory: within one epoch of a workgroup, two different invocations writing,
//!   or one writing and another reading (either order), is a race;
//! * storage buffers: two different invocations writing is a write-write race unless they
//!   belong to the same workgroup and different epochs; a write and a read by different
//!   invocations race unless they belong to the same workgroup and different epochs.

use crate::args::{check_args as check_args_shared, ArgShape};
use crate::eval::{self, EvalError, Value};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use crate::validate::{validate, ValidationError};
use half::{bf16, f16};
use std::fmt;
use thiserror::Error;

/// The most invocations one workgroup may have in the interpreter (GPUs allow 1024).
pub const MAX_INVOCATIONS_PER_WORKGROUP: u64 = 1 << 16;
/// The most shared-array elements (all arrays together) the interpreter will allocate.
pub const MAX_SHARED_ELEMENTS: u64 = 1 << 24;
/// The most local-variable slots (invocations per workgroup x locals) it will allocate.
pub const MAX_LOCAL_SLOTS: u64 = 1 << 24;

// ---------------------------------------------------------------------------------------
// Host-side arguments
// ---------------------------------------------------------------------------------------

/// Host-side storage for one buffer parameter: `data[i]` is element `i`, and every
/// element is a scalar of type `elem`.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBuffer {
    pub elem: ScalarType,
    pub data: Vec<Scalar>,
}

impl HostBuffer {
    pub fn new(elem: ScalarType, data: Vec<Scalar>) -> Self {
        HostBuffer { elem, data }
    }

    pub fn from_f32(v: &[f32]) -> Self {
        Self::new(ScalarType::F32, v.iter().map(|&x| Scalar::f32(x)).collect())
    }
    pub fn from_f64(v: &[f64]) -> Self {
        Self::new(ScalarType::F64, v.iter().map(|&x| Scalar::f64(x)).collect())
    }
    pub fn from_f16(v: &[f16]) -> Self {
        Self::new(ScalarType::F16, v.iter().map(|&x| Scalar::f16(x)).collect())
    }
    pub fn from_bf16(v: &[bf16]) -> Self {
        Self::new(
            ScalarType::Bf16,
            v.iter().map(|&x| Scalar::bf16(x)).collect(),
        )
    }
    pub fn from_u32(v: &[u32]) -> Self {
        Self::new(ScalarType::U32, v.iter().map(|&x| Scalar::U32(x)).collect())
    }
    pub fn from_i32(v: &[i32]) -> Self {
        Self::new(ScalarType::I32, v.iter().map(|&x| Scalar::I32(x)).collect())
    }
    pub fn from_i64(v: &[i64]) -> Self {
        Self::new(ScalarType::I64, v.iter().map(|&x| Scalar::I64(x)).collect())
    }
    pub fn from_bool(v: &[bool]) -> Self {
        Self::new(
            ScalarType::Bool,
            v.iter().map(|&x| Scalar::Bool(x)).collect(),
        )
    }

    /// `len` copies of `value` (e.g. a poison NaN for an output). A `value` of another
    /// type than `elem` is converted with `Cast` semantics.
    pub fn filled(elem: ScalarType, len: usize, value: Scalar) -> Self {
        let value = if value.ty() == elem {
            value
        } else {
            eval::cast_scalar(elem, value)
        };
        Self::new(elem, vec![value; len])
    }

    /// `len` zeros of `elem`.
    pub fn zeros(elem: ScalarType, len: usize) -> Self {
        Self::filled(elem, len, Scalar::zero(elem))
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<Scalar> {
        self.data.get(i).copied()
    }

    /// Every element as f64 (exact for every type but i64 beyond 2^53).
    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|s| s.to_f64()).collect()
    }
    /// Every element as f32 (exact for f32, f16 and bf16; rounded otherwise).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::F32(b) => f32::from_bits(b),
                other => other.to_f64() as f32,
            })
            .collect()
    }
    /// Every element converted to u32 with `Cast` semantics (exact for u32 buffers).
    pub fn to_u32(&self) -> Vec<u32> {
        self.data
            .iter()
            .map(|s| match eval::cast_scalar(ScalarType::U32, *s) {
                Scalar::U32(v) => v,
                _ => 0,
            })
            .collect()
    }
    /// Every element converted to i32 with `Cast` semantics (exact for i32 buffers).
    pub fn to_i32(&self) -> Vec<i32> {
        self.data
            .iter()
            .map(|s| match eval::cast_scalar(ScalarType::I32, *s) {
                Scalar::I32(v) => v,
                _ => 0,
            })
            .collect()
    }
    /// The raw bits of every f16 element (`None` unless `elem` is f16).
    pub fn to_f16(&self) -> Option<Vec<f16>> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::F16(b) => Some(f16::from_bits(b)),
                _ => None,
            })
            .collect()
    }
    /// The bf16 elements (`None` unless `elem` is bf16).
    pub fn to_bf16(&self) -> Option<Vec<bf16>> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::Bf16(b) => Some(bf16::from_bits(b)),
                _ => None,
            })
            .collect()
    }
}

/// One kernel argument; `args[i]` binds `kernel.params[i]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Buffer(HostBuffer),
    Scalar(Scalar),
}

impl Arg {
    pub fn as_buffer(&self) -> Option<&HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn as_buffer_mut(&mut self) -> Option<&mut HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn into_buffer(self) -> Option<HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn as_scalar(&self) -> Option<Scalar> {
        match self {
            Arg::Scalar(s) => Some(*s),
            Arg::Buffer(_) => None,
        }
    }
}

impl From<HostBuffer> for Arg {
    fn from(b: HostBuffer) -> Arg {
        Arg::Buffer(b)
    }
}

impl From<Scalar> for Arg {
    fn from(s: Scalar) -> Arg {
        Arg::Scalar(s)
    }
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------

/// Runs `kernel` over a grid of `grid` workgroups (x, y, z), reading and writing `args`
/// (`args[i]` binds `kernel.params[i]`).
///
/// The kernel is validated first ([`InterpError::Invalid`]), then the arguments are
/// checked against the parameters. On an execution error the buffers hold whatever was
/// written before it.
#[allow(clippy::result_large_err)]
pub fn run(kernel: &Kernel, grid: [u32; 3], args: &mut [Arg]) -> Result<(), InterpError> {
    validate(kernel)?;
    run_unvalidated(kernel, grid, args)
}

/// [`run`] without validation: the interpreter is defensive and reports what the
/// validator would have rejected as typed errors (e.g. [`InterpError::DivergentBarrier`]
/// for a barrier under divergent control flow, [`InterpError::Malformed`] for ill-typed
/// IR) instead of panicking. Meant for testing the interpreter's own checks.
#[allow(clippy::result_large_err)]
pub fn run_unvalidated(
    kernel: &Kernel,
    grid: [u32; 3],
    args: &mut [Arg],
) -> Result<(), InterpError> {
    check_args(kernel, args)?;
    check_limits(kernel, grid)?;
    if grid.contains(&0) || kernel.workgroup_size.contains(&0) {
        return Ok(());
    }
    let mut ctx = Ctx::new(kernel, grid, args);
    match ctx.run_grid() {
        Ok(()) => Ok(()),
        Err(fault) => Err(ctx.to_error(*fault)),
    }
}

#[allow(clippy::result_large_err)]
fn check_args(kernel: &Kernel, args: &[Arg]) -> Result<(), InterpError> {
    let shapes: Vec<ArgShape> = args
        .iter()
        .map(|a| match a {
            Arg::Buffer(buf) => ArgShape::Buffer {
                elem: Some(buf.elem),
                len: buf.data.len() as u64,
            },
            Arg::Scalar(s) => ArgShape::Scalar(s.ty()),
        })
        .collect();
    check_args_shared(&kernel.name, &kernel.params, &shapes, "elements", |_| 1)?;
    // Host buffers carry a type per element: every element must be of the buffer's type.
    for (index, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let (Param::Buffer { elem, .. }, Arg::Buffer(buf)) = (param, arg) else {
            continue;
        };
        if let Some((element, s)) = buf.data.iter().enumerate().find(|(_, s)| s.ty() != *elem) {
            return Err(InterpError::ArgData {
                kernel: kernel.name.clone(),
                index,
                param: param.name().to_string(),
                element,
                expected: *elem,
                found: s.ty(),
            });
        }
    }
    Ok(())
}

#[allow(clippy::result_large_err)]
fn check_limits(kernel: &Kernel, grid: [u32; 3]) -> Result<(), InterpError> {
    let limit = |what, requested: u64, limit: u64| {
        if requested > limit {
            Err(InterpError::ResourceLimit {
                kernel: kernel.name.clone(),
                what,
                requested,
                limit,
            })
        } else {
            Ok(())
        }
    };
    let wg = kernel.workgroup_size;
    let n_inv = kernel.invocations_per_workgroup();
    limit(
        "invocations per workgroup",
        n_inv,
        MAX_INVOCATIONS_PER_WORKGROUP,
    )?;
    let shared: u64 = kernel.shared.iter().map(|s| s.len as u64).sum();
    limit("shared-array elements", shared, MAX_SHARED_ELEMENTS)?;
    limit(
        "local-variable slots",
        n_inv.saturating_mul(kernel.locals.len() as u64),
        MAX_LOCAL_SLOTS,
    )?;
    if (0..3).any(|a| grid[a] as u64 * wg[a] as u64 > 1u64 << 32) {
        return Err(InterpError::GridTooLarge {
            kernel: kernel.name.clone(),
            grid,
            workgroup_size: wg,
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Internal faults: built where an error happens, given a path while unwinding
// ---------------------------------------------------------------------------------------

/// One segment of a node path, pushed innermost first while an error unwinds.
#[derive(Clone, Copy, Debug)]
enum Seg {
    Name(&'static str),
    Indexed(&'static str, usize),
}

#[derive(Debug)]
enum FaultKind {
    Eval {
        inv: u32,
        source: EvalError,
    },
    OutOfBounds {
        inv: u32,
        mem: Memory,
        index: u64,
        lanes: u8,
        len: u64,
    },
    Unaligned {
        inv: u32,
        mem: Memory,
        index: u64,
        lanes: u8,
    },
    Uninit {
        inv: u32,
        mem: Memory,
        index: u64,
    },
    Race {
        mem: Memory,
        index: u64,
        kind: RaceKind,
        /// Epoch and local index of the earlier access.
        first_epoch: u64,
        first_local: u32,
        second_local: u32,
    },
    Divergent {
        arrived: usize,
        missing: u32,
    },
    UnsetLocal {
        inv: u32,
        local: LocalId,
    },
    Malformed {
        inv: u32,
        what: String,
    },
}

#[derive(Debug)]
struct Fault {
    kind: FaultKind,
    segs: Vec<Seg>,
}

type Res<T> = Result<T, Box<Fault>>;

fn fault(kind: FaultKind) -> Box<Fault> {
    Box::new(Fault {
        kind,
        segs: Vec::new(),
    })
}

fn malformed(inv: u32, what: impl Into<String>) -> Box<Fault> {
    fault(FaultKind::Malformed {
        inv,
        what: what.into(),
    })
}

trait At {
    fn at(self, seg: Seg) -> Self;
}

impl<T> At for Res<T> {
    #[inline]
    fn at(self, seg: Seg) -> Self {
        self.map_err(|mut f| {
            f.segs.push(seg);
            f
        })
    }
}

use Seg::{Indexed, Name};

/// The path segment a statement adds (as in the validator).
fn stmt_seg(s: &Stmt) -> Option<Seg> {
    Some(Name(match s {
        Stmt::Let { .. } => "let",
        Stmt::Assign { .. } => "assign",
        Stmt::Store { .. } => "store",
        Stmt::If { .. } => "if",
        Stmt::For { .. } => "for",
        Stmt::Return | Stmt::Barrier => return None,
    }))
}

/// The path segment an expression node adds (as in the validator).
fn expr_seg(e: &Expr) -> Option<Seg> {
    Some(Name(match e {
        Expr::Lit(_) | Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } => return None,
        Expr::Load { .. } => "load",
        Expr::Unary { .. } => "unary",
        Expr::Binary { .. } => "binary",
        Expr::Cmp { .. } => "cmp",
        Expr::Math { func, .. } => func.name(),
        Expr::Select { .. } => "select",
        Expr::Cast { .. } => "cast",
        Expr::Bitcast { .. } => "bitcast",
        Expr::Vector(_) => "vector",
        Expr::Splat { .. } => "splat",
        Expr::Extract { .. } => "extract",
    }))
}

// ---------------------------------------------------------------------------------------
// Race tracking
// ---------------------------------------------------------------------------------------

/// A placeholder value, overwritten before it is read.
#[inline]
fn blank() -> Value {
    Value::scalar(Scalar::Bool(false))
}

/// No invocation (a local index no workgroup reaches).
const NONE: u32 = u32::MAX;

/// Access history of one element. Epochs are numbered across the whole dispatch (each
/// workgroup starts a new one, and so does each barrier), so an epoch identifies its
/// workgroup too, and "earlier workgroup" is `epoch < current workgroup's first epoch`.
/// Epoch 0 means "never".
#[derive(Clone, Copy, Debug, Default)]
struct Track {
    /// Last write: epoch and local index of the writer.
    write_epoch: u64,
    writer: u32,
    /// First read in the dispatch (only used for buffers).
    first_read_epoch: u64,
    first_reader: u32,
    /// Readers in the last epoch in which the element was read: the first one and
    /// another, different one (or `NONE`).
    read_epoch: u64,
    reader: u32,
    other_reader: u32,
}

/// A conflict found by the tracker: kind, and epoch + local index of the earlier access.
type Conflict = (RaceKind, u64, u32);

impl Track {
    fn new() -> Track {
        Track {
            writer: NONE,
            first_reader: NONE,
            reader: NONE,
            other_reader: NONE,
            ..Track::default()
        }
    }

    /// Records a read; `Some(conflict)` if it races with an earlier write.
    #[inline]
    fn read(&mut self, local: u32, epoch: u64, conflicts_with_write: bool) -> Option<Conflict> {
        if conflicts_with_write {
            return Some((RaceKind::ReadWrite, self.write_epoch, self.writer));
        }
        if self.first_read_epoch == 0 {
            self.first_read_epoch = epoch;
            self.first_reader = local;
        }
        if self.read_epoch != epoch {
            self.read_epoch = epoch;
            self.reader = local;
            self.other_reader = NONE;
        } else if self.reader != local && self.other_reader == NONE {
            self.other_reader = local;
        }
        None
    }

    /// A different reader than `local` in this epoch, if any.
    #[inline]
    fn other_reader_in(&self, local: u32, epoch: u64) -> Option<u32> {
        if self.read_epoch != epoch {
            None
        } else if self.reader != local {
            Some(self.reader)
        } else if self.other_reader != NONE {
            Some(self.other_reader)
        } else {
            None
        }
    }

    /// Buffer read by `local` in `epoch` of the workgroup starting at `wg_start`.
    #[inline]
    fn buffer_read(&mut self, local: u32, epoch: u64, wg_start: u64) -> Option<Conflict> {
        let conflict = self.write_epoch != 0
            && (self.write_epoch < wg_start || (self.write_epoch == epoch && self.writer != local));
        self.read(local, epoch, conflict)
    }

    /// Buffer write: races with any write or read from an earlier workgroup, and with a
    /// write or read by another invocation of this epoch.
    #[inline]
    fn buffer_write(&mut self, local: u32, epoch: u64, wg_start: u64) -> Option<Conflict> {
        if self.write_epoch != 0
            && (self.write_epoch < wg_start || (self.write_epoch == epoch && self.writer != local))
        {
            return Some((RaceKind::WriteWrite, self.write_epoch, self.writer));
        }
        if self.first_read_epoch != 0 && self.first_read_epoch < wg_start {
            return Some((
                RaceKind::ReadWrite,
                self.first_read_epoch,
                self.first_reader,
            ));
        }
        if let Some(r) = self.other_reader_in(local, epoch) {
            return Some((RaceKind::ReadWrite, epoch, r));
        }
        self.write_epoch = epoch;
        self.writer = local;
        None
    }

    /// Shared read (initialisation is checked by the caller).
    #[inline]
    fn shared_read(&mut self, local: u32, epoch: u64) -> Option<Conflict> {
        let conflict = self.write_epoch == epoch && self.writer != local;
        self.read(local, epoch, conflict)
    }

    /// Shared write: races with a write or read by another invocation of this epoch.
    #[inline]
    fn shared_write(&mut self, local: u32, epoch: u64) -> Option<Conflict> {
        if self.write_epoch == epoch && self.writer != local {
            return Some((RaceKind::WriteWrite, epoch, self.writer));
        }
        if let Some(r) = self.other_reader_in(local, epoch) {
            return Some((RaceKind::ReadWrite, epoch, r));
        }
        self.write_epoch = epoch;
        self.writer = local;
        None
    }
}

// ---------------------------------------------------------------------------------------
// Execution state
// ---------------------------------------------------------------------------------------

/// A parameter bound to its argument.
enum Binding<'a> {
    Buffer {
        data: &'a mut [Scalar],
        elem: ScalarType,
        /// Access history; `None` for read-only buffers, which are never written.
        track: Option<Vec<Track>>,
    },
    Scalar(Scalar),
}

struct SharedMem {
    elem: ScalarType,
    data: Vec<Scalar>,
    track: Vec<Track>,
}

/// One invocation's state in a running loop.
#[derive(Clone, Copy)]
struct LoopLane {
    inv: u32,
    cur: i64,
    end: i64,
}

struct Ctx<'k, 'a> {
    kernel: &'k Kernel,
    grid: [u32; 3],
    wg_size: [u32; 3],
    n_inv: usize,
    n_locals: usize,
    /// Local id of each invocation (by linear local index).
    local_ids: Vec<[u32; 3]>,
    bindings: Vec<Binding<'a>>,
    shared: Vec<SharedMem>,

    // Per-workgroup state.
    wg_id: [u32; 3],
    /// `locals[inv * n_locals + local]`.
    locals: Vec<Option<Value>>,
    returned: Vec<bool>,
    returned_count: usize,
    epoch: u64,
    /// First epoch of the running workgroup.
    wg_start: u64,
    /// First epoch of every workgroup run so far, by linear workgroup index.
    wg_starts: Vec<u64>,

    mask_pool: Vec<Vec<u32>>,
    loop_pool: Vec<Vec<LoopLane>>,
}

impl<'k, 'a> Ctx<'k, 'a> {
    fn new(kernel: &'k Kernel, grid: [u32; 3], args: &'a mut [Arg]) -> Self {
        let wg = kernel.workgroup_size;
        let n_inv = kernel.invocations_per_workgroup() as usize;
        let n_locals = kernel.locals.len();
        let local_ids = (0..n_inv as u64)
            .map(|i| {
                let x = i % wg[0] as u64;
                let y = (i / wg[0] as u64) % wg[1] as u64;
                let z = i / (wg[0] as u64 * wg[1] as u64);
                [x as u32, y as u32, z as u32]
            })
            .collect();
        let bindings = kernel
            .params
            .iter()
            .zip(args.iter_mut())
            .map(|(param, arg)| match arg {
                Arg::Buffer(buf) => {
                    let writable = match param {
                        Param::Buffer { access, .. } => access.can_write(),
                        Param::Scalar { .. } => false,
                    };
                    let track = writable.then(|| vec![Track::new(); buf.data.len()]);
                    Binding::Buffer {
                        elem: buf.elem,
                        data: &mut buf.data[..],
                        track,
                    }
                }
                Arg::Scalar(s) => Binding::Scalar(*s),
            })
            .collect();
        let shared = kernel
            .shared
            .iter()
            .map(|d| SharedMem {
                elem: d.elem,
                data: vec![Scalar::zero(d.elem); d.len as usize],
                track: vec![Track::new(); d.len as usize],
            })
            .collect();
        Ctx {
            kernel,
            grid,
            wg_size: wg,
            n_inv,
            n_locals,
            local_ids,
            bindings,
            shared,
            wg_id: [0; 3],
            locals: vec![None; n_inv * n_locals],
            returned: vec![false; n_inv],
            returned_count: 0,
            epoch: 0,
            wg_start: 0,
            wg_starts: Vec::new(),
            mask_pool: Vec::new(),
            loop_pool: Vec::new(),
        }
    }

    fn run_grid(&mut self) -> Res<()> {
        let kernel = self.kernel;
        let mut mask = Vec::with_capacity(self.n_inv);
        for z in 0..self.grid[2] {
            for y in 0..self.grid[1] {
                for x in 0..self.grid[0] {
                    self.begin_workgroup([x, y, z]);
                    mask.clear();
                    mask.extend(0..self.n_inv as u32);
                    self.exec_block(&kernel.body, &mut mask, "body")?;
                }
            }
        }
        Ok(())
    }

    fn begin_workgroup(&mut self, id: [u32; 3]) {
        self.wg_id = id;
        self.epoch = self.epoch.wrapping_add(1);
        self.wg_start = self.epoch;
        self.wg_starts.push(self.epoch);
        self.locals.fill(None);
        self.returned.fill(false);
        self.returned_count = 0;
    }

    fn take_mask(&mut self) -> Vec<u32> {
        let mut m = self.mask_pool.pop().unwrap_or_default();
        m.clear();
        m
    }

    fn give_mask(&mut self, m: Vec<u32>) {
        self.mask_pool.push(m);
    }

    // -- statements -----------------------------------------------------------------

    fn exec_block(&mut self, block: &[Stmt], mask: &mut Vec<u32>, name: &'static str) -> Res<()> {
        for (i, stmt) in block.iter().enumerate() {
            if mask.is_empty() {
                break;
            }
            let before = self.returned_count;
            self.exec_stmt(stmt, mask).at(Indexed(name, i))?;
            if self.returned_count != before {
                let returned = &self.returned;
                mask.retain(|&inv| !returned[inv as usize]);
            }
        }
        Ok(())
    }

    fn exec_stmt(&mut self, stmt: &Stmt, mask: &mut Vec<u32>) -> Res<()> {
        match self.exec_stmt_node(stmt, mask) {
            Ok(()) => Ok(()),
            Err(mut f) => {
                if let Some(seg) = stmt_seg(stmt) {
                    f.segs.push(seg);
                }
                Err(f)
            }
        }
    }

    fn exec_stmt_node(&mut self, stmt: &Stmt, mask: &mut Vec<u32>) -> Res<()> {
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let first = mask.first().copied().unwrap_or(0);
                let ty = match self.kernel.local(*local) {
                    Some(d) => d.ty,
                    None => return Err(malformed(first, format!("unknown local #{}", local.0))),
                };
                for &inv in mask.iter() {
                    let v = self.eval(value, inv).at(Name("value"))?;
                    self.set_local(*local, ty, inv, v).at(Name("value"))?;
                }
                Ok(())
            }
            Stmt::Store { mem, index, value } => {
                for &inv in mask.iter() {
                    let i = self.eval(index, inv).at(Name("index"))?;
                    let i = as_index(&i, inv).at(Name("index"))?;
                    let v = self.eval(value, inv).at(Name("value"))?;
                    self.store(*mem, i, v, inv)?;
                }
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let mut on_true = self.take_mask();
                let mut on_false = self.take_mask();
                for &inv in mask.iter() {
                    let c = self.eval(cond, inv).at(Name("cond"))?;
                    match c.as_scalar() {
                        Some(Scalar::Bool(true)) => on_true.push(inv),
                        Some(Scalar::Bool(false)) => on_false.push(inv),
                        _ => {
                            return Err(malformed(
                                inv,
                                format!("if condition is a {}, not a bool", c.ty()),
                            ))
                            .at(Name("cond"))
                        }
                    }
                }
                let r = self.exec_block(then_body, &mut on_true, "then");
                let r = r.and_then(|()| self.exec_block(else_body, &mut on_false, "else"));
                self.give_mask(on_true);
                self.give_mask(on_false);
                r
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.exec_for(*var, start, end, *step, body, mask),
            Stmt::Return => {
                for &inv in mask.iter() {
                    if let Some(r) = self.returned.get_mut(inv as usize) {
                        if !*r {
                            *r = true;
                            self.returned_count += 1;
                        }
                    }
                }
                Ok(())
            }
            Stmt::Barrier => {
                if mask.len() != self.n_inv {
                    let mut present = vec![false; self.n_inv];
                    for &inv in mask.iter() {
                        if let Some(p) = present.get_mut(inv as usize) {
                            *p = true;
                        }
                    }
                    let missing = present.iter().position(|&p| !p).unwrap_or(0) as u32;
                    return Err(fault(FaultKind::Divergent {
                        arrived: mask.len(),
                        missing,
                    }));
                }
                self.epoch = self.epoch.wrapping_add(1);
                Ok(())
            }
        }
    }

    fn exec_for(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: u32,
        body: &[Stmt],
        mask: &[u32],
    ) -> Res<()> {
        let first = mask.first().copied().unwrap_or(0);
        let ty = match self.kernel.local(var) {
            Some(d) => d.ty,
            None => return Err(malformed(first, format!("unknown loop counter #{}", var.0))),
        };
        if ty != Type::I32 && ty != Type::U32 {
            return Err(malformed(
                first,
                format!("loop counter of type {ty} (only i32 and u32)"),
            ));
        }
        if step == 0 {
            return Err(malformed(first, "loop step is 0"));
        }
        let counter = |v: Value, inv: u32| -> Res<i64> {
            match v.as_scalar() {
                Some(Scalar::I32(x)) if ty == Type::I32 => Ok(x as i64),
                Some(Scalar::U32(x)) if ty == Type::U32 => Ok(x as i64),
                _ => Err(malformed(
                    inv,
                    format!("loop bound of type {} for a {ty} counter", v.ty()),
                )),
            }
        };
        let mut lanes = self.loop_pool.pop().unwrap_or_default();
        lanes.clear();
        for &inv in mask {
            let s = self.eval(start, inv).at(Name("start"))?;
            let s = counter(s, inv).at(Name("start"))?;
            let e = self.eval(end, inv).at(Name("end"))?;
            let e = counter(e, inv).at(Name("end"))?;
            lanes.push(LoopLane {
                inv,
                cur: s,
                end: e,
            });
        }
        let mut iter_mask = self.take_mask();
        let mut result = Ok(());
        loop {
            let returned = &self.returned;
            lanes.retain(|l| l.cur < l.end && !returned[l.inv as usize]);
            if lanes.is_empty() {
                break;
            }
            iter_mask.clear();
            for l in &lanes {
                let c = if ty == Type::I32 {
                    Scalar::I32(l.cur as i32)
                } else {
                    Scalar::U32(l.cur as u32)
                };
                if let Err(e) = self.set_local(var, ty, l.inv, Value::scalar(c)) {
                    result = Err(e);
                    break;
                }
                iter_mask.push(l.inv);
            }
            if result.is_ok() {
                result = self.exec_block(body, &mut iter_mask, "body");
            }
            if result.is_err() {
                break;
            }
            for l in lanes.iter_mut() {
                // No overflow in i64; a counter that would wrap the counter type is past
                // `end` (at most the type's maximum), so its loop ends.
                l.cur += step as i64;
            }
        }
        self.give_mask(iter_mask);
        self.loop_pool.push(lanes);
        result
    }

    fn set_local(&mut self, local: LocalId, ty: Type, inv: u32, v: Value) -> Res<()> {
        if v.ty() != ty {
            return Err(malformed(
                inv,
                format!(
                    "a {} value for local `{}` of type {ty}",
                    v.ty(),
                    self.kernel.local_name(local)
                ),
            ));
        }
        let slot = (inv as usize)
            .checked_mul(self.n_locals)
            .and_then(|b| b.checked_add(local.0 as usize))
            .filter(|_| (local.0 as usize) < self.n_locals)
            .and_then(|i| self.locals.get_mut(i));
        match slot {
            Some(s) => {
                *s = Some(v);
                Ok(())
            }
            None => Err(malformed(inv, format!("unknown local #{}", local.0))),
        }
    }

    fn read_local(&self, local: LocalId, inv: u32, out: &mut Value) -> Res<()> {
        let idx = local.0 as usize;
        if idx >= self.n_locals {
            return Err(malformed(inv, format!("unknown local #{}", local.0)));
        }
        match self.locals.get(inv as usize * self.n_locals + idx) {
            Some(Some(v)) => {
                *out = *v;
                Ok(())
            }
            _ => Err(fault(FaultKind::UnsetLocal { inv, local })),
        }
    }

    // -- expressions ----------------------------------------------------------------
    //
    // Values are written through `out` rather than returned inside a `Result`: moving a
    // 72-byte `Value` in and out of `Result`s dominated the interpreter's time.

    /// Evaluates `e` for invocation `inv`.
    fn eval(&mut self, e: &Expr, inv: u32) -> Res<Value> {
        let mut v = blank();
        self.eval_into(e, inv, &mut v)?;
        Ok(v)
    }

    /// Evaluates `e` for invocation `inv` into `out`.
    fn eval_into(&mut self, e: &Expr, inv: u32, out: &mut Value) -> Res<()> {
        match self.eval_node(e, inv, out) {
            Ok(()) => Ok(()),
            Err(mut f) => {
                if let Some(seg) = expr_seg(e) {
                    f.segs.push(seg);
                }
                Err(f)
            }
        }
    }

    fn eval_node(&mut self, e: &Expr, inv: u32, out: &mut Value) -> Res<()> {
        let put = |r: Result<Value, EvalError>, out: &mut Value| match r {
            Ok(v) => {
                *out = v;
                Ok(())
            }
            Err(source) => Err(fault(FaultKind::Eval { inv, source })),
        };
        match e {
            Expr::Lit(s) => {
                *out = Value::scalar(*s);
                Ok(())
            }
            Expr::Local(id) => self.read_local(*id, inv, out),
            Expr::Param(p) => match self.bindings.get(p.0 as usize) {
                Some(Binding::Scalar(s)) => {
                    *out = Value::scalar(*s);
                    Ok(())
                }
                _ => Err(malformed(
                    inv,
                    format!("parameter #{} is not a scalar parameter", p.0),
                )),
            },
            Expr::Builtin { builtin, axis } => {
                let a = *axis as usize;
                if a > 2 {
                    return Err(malformed(inv, format!("builtin axis {axis}")));
                }
                let lid = self.local_ids.get(inv as usize).map_or(0, |l| l[a]);
                let v = match builtin {
                    Builtin::LocalId => lid,
                    Builtin::WorkgroupId => self.wg_id[a],
                    Builtin::NumWorkgroups => self.grid[a],
                    // Fits: `check_limits` bounds grid * workgroup size by 2^32.
                    Builtin::GlobalId => self.wg_id[a]
                        .wrapping_mul(self.wg_size[a])
                        .wrapping_add(lid),
                };
                *out = Value::scalar(Scalar::U32(v));
                Ok(())
            }
            Expr::Load { mem, index, lanes } => {
                self.eval_into(index, inv, out).at(Name("index"))?;
                let i = as_index(out, inv).at(Name("index"))?;
                self.load(*mem, i, *lanes, inv, out)
            }
            Expr::Unary { op, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::unary(*op, *out), out)
            }
            Expr::Binary { op, lhs, rhs } => {
                let mut b = blank();
                self.eval_into(lhs, inv, out).at(Name("lhs"))?;
                self.eval_into(rhs, inv, &mut b).at(Name("rhs"))?;
                put(eval::binary(*op, *out, b), out)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let mut b = blank();
                self.eval_into(lhs, inv, out).at(Name("lhs"))?;
                self.eval_into(rhs, inv, &mut b).at(Name("rhs"))?;
                put(eval::cmp(*op, *out, b), out)
            }
            Expr::Math { func, args } => {
                if args.is_empty() || args.len() > 3 {
                    return Err(malformed(
                        inv,
                        format!("`{}` with {} arguments", func.name(), args.len()),
                    ));
                }
                let mut vals = [blank(); 3];
                for (i, a) in args.iter().enumerate() {
                    self.eval_into(a, inv, &mut vals[i])
                        .at(Indexed("args", i))?;
                }
                put(eval::math(*func, &vals[..args.len()]), out)
            }
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => {
                let (mut c, mut f) = (blank(), blank());
                self.eval_into(cond, inv, &mut c).at(Name("cond"))?;
                self.eval_into(on_true, inv, out).at(Name("on_true"))?;
                self.eval_into(on_false, inv, &mut f).at(Name("on_false"))?;
                if c.lane_count() != 1 && c.lane_count() != out.lane_count() {
                    return Err(malformed(
                        inv,
                        format!("select condition {} for {} arms", c.ty(), out.ty()),
                    ));
                }
                put(eval::select(c, *out, f), out)
            }
            Expr::Cast { to, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                *out = eval::cast(*to, *out);
                Ok(())
            }
            Expr::Bitcast { to, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::bitcast(*to, *out), out)
            }
            Expr::Vector(items) => {
                if !(items.len() == 2 || items.len() == 4) {
                    return Err(malformed(inv, format!("vector of {} lanes", items.len())));
                }
                let mut lanes = [Scalar::Bool(false); 4];
                for (i, item) in items.iter().enumerate() {
                    self.eval_into(item, inv, out).at(Indexed("items", i))?;
                    match out.as_scalar() {
                        Some(s) if i == 0 || s.ty() == lanes[0].ty() => lanes[i] = s,
                        _ => {
                            return Err(malformed(
                                inv,
                                format!("vector lane {i} is a {}", out.ty()),
                            ))
                            .at(Indexed("items", i))
                        }
                    }
                }
                *out = Value::from_lanes(&lanes[..items.len()]);
                Ok(())
            }
            Expr::Splat { lanes, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                if !(*lanes == 2 || *lanes == 4) || out.lane_count() != 1 {
                    return Err(malformed(
                        inv,
                        format!("splat of a {} to {lanes} lanes", out.ty()),
                    ));
                }
                *out = eval::splat(*lanes, *out);
                Ok(())
            }
            Expr::Extract { arg, lane } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::extract(*out, *lane), out)
            }
        }
    }

    // -- memory ---------------------------------------------------------------------

    /// Checks lane count, alignment and bounds of an access; returns the first element.
    fn check_access(&self, mem: Memory, index: u32, lanes: u8, len: usize, inv: u32) -> Res<usize> {
        if !Type::is_valid_lanes(lanes) {
            return Err(malformed(inv, format!("access of {lanes} lanes")));
        }
        let index64 = index as u64;
        if lanes > 1 && index % lanes as u32 != 0 {
            return Err(fault(FaultKind::Unaligned {
                inv,
                mem,
                index: index64,
                lanes,
            }));
        }
        if index64 + lanes as u64 > len as u64 {
            return Err(fault(FaultKind::OutOfBounds {
                inv,
                mem,
                index: index64,
                lanes,
                len: len as u64,
            }));
        }
        Ok(index as usize)
    }

    fn load(&mut self, mem: Memory, index: u32, lanes: u8, inv: u32, out: &mut Value) -> Res<()> {
        let mut out_lanes = [Scalar::Bool(false); 4];
        let (epoch, wg_start) = (self.epoch, self.wg_start);
        match mem {
            Memory::Buffer(p) => {
                let len = match self.bindings.get(p.0 as usize) {
                    Some(Binding::Buffer { data, .. }) => data.len(),
                    _ => {
                        return Err(malformed(
                            inv,
                            format!("parameter #{} is not a buffer", p.0),
                        ))
                    }
                };
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(Binding::Buffer { data, track, .. }) = self.bindings.get_mut(p.0 as usize)
                else {
                    return Err(malformed(inv, "buffer binding vanished"));
                };
                for lane in 0..lanes as usize {
                    let i = start + lane;
                    out_lanes[lane] = data[i];
                    if let Some(track) = track {
                        if let Some(c) = track[i].buffer_read(inv, epoch, wg_start) {
                            return Err(race(mem, i, c, inv));
                        }
                    }
                }
            }
            Memory::Shared(s) => {
                let len = match self.shared.get(s.0 as usize) {
                    Some(sh) => sh.data.len(),
                    None => return Err(malformed(inv, format!("unknown shared array #{}", s.0))),
                };
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(sh) = self.shared.get_mut(s.0 as usize) else {
                    return Err(malformed(inv, "shared array vanished"));
                };
                for lane in 0..lanes as usize {
                    let i = start + lane;
                    let t = &mut sh.track[i];
                    if t.write_epoch < wg_start {
                        return Err(fault(FaultKind::Uninit {
                            inv,
                            mem,
                            index: i as u64,
                        }));
                    }
                    if let Some(c) = t.shared_read(inv, epoch) {
                        return Err(race(mem, i, c, inv));
                    }
                    out_lanes[lane] = sh.data[i];
                }
            }
        }
        *out = Value::from_lanes(&out_lanes[..lanes as usize]);
        Ok(())
    }

    fn store(&mut self, mem: Memory, index: u32, value: Value, inv: u32) -> Res<()> {
        let lanes = value.lane_count();
        let (epoch, wg_start) = (self.epoch, self.wg_start);
        let vty = value.ty().scalar;
        let mismatch = |elem: ScalarType| {
            malformed(
                inv,
                format!("storing a {} into memory of {elem}", value.ty()),
            )
        };
        match mem {
            Memory::Buffer(p) => {
                let (len, elem) = match self.bindings.get(p.0 as usize) {
                    Some(Binding::Buffer { data, elem, .. }) => (data.len(), *elem),
                    _ => {
                        return Err(malformed(
                            inv,
                            format!("parameter #{} is not a buffer", p.0),
                        ))
                    }
                };
                if vty != elem {
                    return Err(mismatch(elem));
                }
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(Binding::Buffer { data, track, .. }) = self.bindings.get_mut(p.0 as usize)
                else {
                    return Err(malformed(inv, "buffer binding vanished"));
                };
                let Some(track) = track else {
                    return Err(malformed(inv, "store to a read-only buffer"));
                };
                for (lane, s) in value.lanes().iter().enumerate() {
                    let i = start + lane;
                    if let Some(c) = track[i].buffer_write(inv, epoch, wg_start) {
                        return Err(race(mem, i, c, inv));
                    }
                    data[i] = *s;
                }
            }
            Memory::Shared(sid) => {
                let (len, elem) = match self.shared.get(sid.0 as usize) {
                    Some(sh) => (sh.data.len(), sh.elem),
                    None => return Err(malformed(inv, format!("unknown shared array #{}", sid.0))),
                };
                if vty != elem {
                    return Err(mismatch(elem));
                }
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(sh) = self.shared.get_mut(sid.0 as usize) else {
                    return Err(malformed(inv, "shared array vanished"));
                };
                for (lane, s) in value.lanes().iter().enumerate() {
                    let i = start + lane;
                    if let Some(c) = sh.track[i].shared_write(inv, epoch) {
                        return Err(race(mem, i, c, inv));
                    }
                    sh.data[i] = *s;
                }
            }
        }
        Ok(())
    }

    // -- error reporting ------------------------------------------------------------

    fn local_id(&self, inv: u32) -> [u32; 3] {
        self.local_ids.get(inv as usize).copied().unwrap_or([0; 3])
    }

    /// The workgroup id that ran `epoch`.
    fn workgroup_of_epoch(&self, epoch: u64) -> [u32; 3] {
        let linear = self
            .wg_starts
            .partition_point(|&s| s <= epoch)
            .saturating_sub(1) as u64;
        let (gx, gy) = (self.grid[0].max(1) as u64, self.grid[1].max(1) as u64);
        [
            (linear % gx) as u32,
            ((linear / gx) % gy) as u32,
            (linear / (gx * gy)) as u32,
        ]
    }

    fn space_and_name(&self, mem: Memory) -> (MemorySpace, String) {
        let space = match mem {
            Memory::Buffer(_) => MemorySpace::Buffer,
            Memory::Shared(_) => MemorySpace::Shared,
        };
        (space, self.kernel.memory_name(mem))
    }

    fn to_error(&self, fault: Fault) -> InterpError {
        let mut path = String::from("kernel");
        for seg in fault.segs.iter().rev() {
            match seg {
                Name(n) => {
                    path.push('.');
                    path.push_str(n);
                }
                Indexed(n, i) => {
                    path.push('.');
                    path.push_str(n);
                    path.push_str(&format!("[{i}]"));
                }
            }
        }
        let kernel = self.kernel.name.clone();
        let workgroup = self.wg_id;
        match fault.kind {
            FaultKind::Eval { inv, source } => InterpError::Eval {
                kernel,
                path,
                workgroup,
                invocation: self.local_id(inv),
                source,
            },
            FaultKind::OutOfBounds {
                inv,
                mem,
                index,
                lanes,
                len,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::OutOfBounds {
                    kernel,
                    path,
                    space,
                    memory,
                    index,
                    lanes,
                    len,
                    workgroup,
                    invocation: self.local_id(inv),
                }
            }
            FaultKind::Unaligned {
                inv,
                mem,
                index,
                lanes,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::UnalignedAccess {
                    kernel,
                    path,
                    space,
                    memory,
                    index,
                    lanes,
                    workgroup,
                    invocation: self.local_id(inv),
                }
            }
            FaultKind::Uninit { inv, mem, index } => InterpError::UninitializedSharedRead {
                kernel,
                path,
                memory: self.kernel.memory_name(mem),
                index,
                workgroup,
                invocation: self.local_id(inv),
            },
            FaultKind::Race {
                mem,
                index,
                kind,
                first_epoch,
                first_local,
                second_local,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::Race {
                    kernel,
                    path,
                    space,
                    memory,
                    index,
                    kind,
                    first: Invocation {
                        workgroup: self.workgroup_of_epoch(first_epoch),
                        local: self.local_id(first_local),
                    },
                    second: Invocation {
                        workgroup,
                        local: self.local_id(second_local),
                    },
                }
            }
            FaultKind::Divergent { arrived, missing } => InterpError::DivergentBarrier {
                kernel,
                path,
                workgroup,
                arrived,
                returned: self.returned_count,
                total: self.n_inv,
                missing: self.local_id(missing),
            },
            FaultKind::UnsetLocal { inv, local } => InterpError::UnsetLocal {
                kernel,
                path,
                local: self.kernel.local_name(local),
                workgroup,
                invocation: self.local_id(inv),
            },
            FaultKind::Malformed { inv, what } => InterpError::Malformed {
                kernel,
                path,
                workgroup,
                invocation: self.local_id(inv),
                what,
            },
        }
    }
}

fn race(
    mem: Memory,
    index: usize,
    (kind, first_epoch, first_local): Conflict,
    inv: u32,
) -> Box<Fault> {
    fault(FaultKind::Race {
        mem,
        index: index as u64,
        kind,
        first_epoch,
        first_local,
        second_local: inv,
    })
}

fn as_index(v: &Value, inv: u32) -> Res<u32> {
    match v.as_scalar() {
        Some(Scalar::U32(i)) => Ok(i),
        _ => Err(malformed(inv, format!("index of type {}, not u32", v.ty()))),
    }
}
