//! kernelc-kernels: the op catalogue.
//!
//! Every op kernelc serves is defined here once, as plain data and as math:
//!
//! * [`ops`]: one folder per op family; each op kind is a spec type implementing
//!   [`op::Op`] (validation, buffers, per-call values, f64 reference, lowering,
//!   tolerance, conformance cases), and `ops/mod.rs` lists the catalogue, one line per
//!   kind, from which [`OpSpec`] and [`OpKind`] are made.
//! * [`spec`]: the vocabulary every spec shares ([`TensorSig`], [`Alias`]) and every
//!   spec type re-exported.
//! * [`mod@reference`]: [`reference()`] runs an op's independent f64 implementation,
//!   written from the op's mathematical definition (never from its IR); the
//!   conformance harness and the fuzzer hold every target to it.
//! * [`lower`]: [`lower::lower`] and the lowering machinery every op shares (it names
//!   no op).
//! * [`rng`]: the counter-based random bits behind dropout and random fills, in 32-bit
//!   integer operations only, so every target produces the same masks.
//! * [`seeds`]: which op (or host-side mechanism) serves each method of the five seed
//!   backend traits.
//!
//! The table of all ops with their formulas and a JSON example of each is
//! `docs/ops.md`.

pub mod conformance;
pub mod error;
pub mod fuzz;
pub mod graph;
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
