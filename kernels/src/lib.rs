//! kernelc-kernels: the op catalogue.
//!
//! Every op kernelc serves is defined here once, as plain data and as math:
//!
//! * [`spec`]: [`OpSpec`], one variant per op family with a small attribute struct
//!   (dtypes, shapes, attributes), a validating [`OpSpec::validate`] that returns a
//!   typed [`SpecError`], and the buffer signatures [`OpSpec::inputs`] /
//!   [`OpSpec::outputs`] that lowering, the runtime and the fuzzer all share.
//! * [`mod@reference`]: an independent f64 implementation of every op, written from the
//!   op's mathematical definition (never from its IR); the conformance harness and
//!   the fuzzer hold every target to it.
//! * [`rng`]: the counter-based random bits behind dropout and random fills, in 32-bit
//!   integer operations only, so every target produces the same masks.
//! * [`seeds`]: which op (or host-side mechanism) serves each method of the five seed
//!   backend traits.
//!
//! Lowering (`OpSpec` → kernel IR for a target's capabilities) builds on these types
//! and lives in its own module.
//!
//! The table of all ops with their formulas is `docs/ops.md`.

pub mod conformance;
pub mod error;
pub mod lower;
pub mod op;
pub mod ops;
pub mod reference;
pub mod rng;
pub mod seeds;
pub mod shape;
pub mod spec;
pub mod tolerance;

pub use error::SpecError;
pub use reference::reference;
pub use spec::*;
