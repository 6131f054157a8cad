//! Fuzzing op semantics across targets, for tests and for users (`kernelc fuzz`;
//! feature `fuzz`). docs/fuzzing.md says what each fuzzer holds each target to.
//!
//! * [`ops`]: the op fuzzer: random valid op specs (the catalogue's cases changed
//!   through their JSON, `kernels::fuzz`) with inputs over wide ranges, ties and
//!   special values, on each device against the f64 reference under the tolerance
//!   table, with each row's worst error as a share of its bound.
//! * [`programs`]: the program fuzzer: random valid IR kernels on each device against
//!   the reference interpreter, bit for bit.
//! * [`entry`]: the no-panic entry points (IR JSON, op-spec JSON, graph JSON, random
//!   programs through every emitter) that the cargo-fuzz targets in `fuzz/` and the
//!   proptest budget in `tests/no_panic.rs` call; [`no_panic`] feeds them many
//!   inputs on several threads (`kernelc fuzz --no-panic`).
//! * [`sweep`]: the exhaustive unary sweep (`kernelc sweep`): an f32 function on every
//!   f32 input against the f64 reference.

pub mod entry;
pub mod no_panic;
pub mod ops;
pub mod programs;
pub mod sweep;

use proptest::test_runner::{RngAlgorithm, TestRng};

/// The generator a fuzz run draws from, fixed by `seed`.
pub(crate) fn seeded_rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// A fresh seed from the clock, for a run not given one.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed, |d| d.as_nanos() as u64)
}
