//! # kernelc-ir
//!
//! The one tensor-kernel IR every op is written against and every target compiles.
//!
//! * [`types`] and [`scalar`](mod@scalar): the type system and constant values.
//! * [`kernel`]: the IR itself — a [`Kernel`] is one launch with typed parameters, shared
//!   arrays, locals and a structured body of statements over pure expression trees.
//! * [`fragment`]: matrix fragments, tiles of a multiply held by a warp (tensor cores).
//! * [`builder`]: a DSL in which a kernel reads like its math.
//! * [`validate`](mod@validate): the checker every backend relies on; errors name the offending node.
//! * [`eval`]: the meaning of each operator on values (shared by the interpreter and
//!   constant folding, so they agree bit for bit).
//! * [`print`](mod@print), [`json`] and [`hash`]: the kernel as readable text, as storable JSON,
//!   and its stable content hash (the IR part of every cache key).
//! * `testing` (cargo feature `testing`): random valid kernels and the rule for
//!   comparing two runs of one, for tests and fuzzers.
//!
//! Invariants: the crate depends on nothing of kernelc's; every other crate consumes
//! only validated kernels.

pub mod analysis;
pub mod args;
pub mod async_copy;
pub mod builder;
pub mod eval;
pub mod fragment;
pub mod hash;
pub mod interp;
pub mod json;
pub mod kernel;
pub mod passes;
pub mod print;
pub mod scalar;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;
pub mod validate;

pub use async_copy::{AsyncCopyOp, CopyStart};
pub use fragment::{
    FragmentDecl, FragmentId, FragmentLayout, FragmentMap, FragmentOp, FragmentRole, MapArg,
    MmaShape, RowReduction,
};
pub use hash::{stable_hash, KernelHash};
pub use interp::{Arg, HostBuffer, InterpError, Invocation, MemorySpace, RaceKind, Site};
pub use json::{from_json, to_json, IrJsonError};
pub use kernel::*;
pub use scalar::Scalar;
pub use types::{ScalarType, Type};
pub use validate::{validate, ValidationError, ValidationErrorKind};
