//! Random valid kernels, and the one rule for comparing two runs of a kernel. For tests
//! and fuzzers only: behind the cargo feature `testing` (which brings in proptest), and
//! no part of kernelc's API.
//!
//! # Generating
//!
//! [`cases`] is a proptest strategy of [`Case`]s: a random valid kernel, the grid to
//! run it on, and random arguments. The kernel is built from a stream of choices (an
//! exhausted stream picks the simplest option), so proptest shrinks a failing case to
//! a small kernel; [`Case::from_words`] builds one from raw words, for a fuzzer's input.
//!
//! A kernel has, for each memory type `T` of the [`GenConfig`], an input buffer `in_T`
//! (16 elements, mostly special values), a scalar `p_T` and an output `out_T` of which
//! each invocation owns a region, poisoned before the run. Its body initialises one
//! mutable local per memory type, writes the invocation's region of every shared array
//! (when it has them), runs the [`Shape`]'s statements (sometimes twice, between two
//! barriers, the first time reading any element of shared memory), and stores the
//! mutable locals. Statements: `let` (scalars and 2/4-lane vectors of every type,
//! sometimes mutable), assignments, stores (literal and computed slots), `if`, counted
//! `for` loops (i32 and u32 counters, bounds near the type's maximum, too many trips to
//! unroll, bounds computed at run time, steps 1 to 3), `return` (bare and under a
//! condition). Expressions: literals (mostly special values), locals, scalar
//! parameters, the four builtins, loads (input, own output region, shared memory),
//! unary, binary (also with the constants `simplify` looks for), comparisons, math
//! functions, select (scalar and lane-wise conditions), cast, bitcast, vector
//! construction, splat and extraction.
//!
//! Every kernel is valid, and none can race, read unwritten shared memory or reach a
//! barrier divergently (the module `gen` says how). With [`GenConfig::runtime_errors`] it
//! may fail at run time: indices out of bounds or unaligned, integer division by
//! zero, shifts by the bit width or more.
//!
//! # Comparing: one rule for run-time errors
//!
//! The interpreter stops at a kernel's first run-time error and reports it as an
//! [`InterpError`](crate::InterpError). A compiled target skips the failing access (a
//! load reads 0), sets a bit of its status word and carries on, so it may report more
//! errors, and its buffers after an error mean nothing. So a run is classified into an
//! [`Outcome`] ([`InterpRun::outcome`] for the interpreter, [`Outcome::of_target`] for
//! a target's decoded status word), and [`compare`] is the rule:
//!
//! * both completed: every buffer agrees element for element, bit for bit except NaN
//!   payloads and signs ([`same_value`]: neither the IR nor hardware promises them);
//! * both faulted: the interpreter's [`FaultKind`] is among the target's; buffers are
//!   not compared;
//! * one faulted and the other not: a mismatch.
//!
//! An access both out of bounds and unaligned is out of bounds everywhere. An
//! interpreter error no target reports (a race, a read of unwritten shared memory, a
//! divergent barrier, invalid IR) is [`NotComparable`]: for a generated kernel, a bug
//! of the generator.
//!
//! Two runs of the interpreter (a kernel before and after a pass) are held to more:
//! [`compare_interpreter_runs`] wants the same error with the same details (but the
//! node path, which passes move) and every buffer bit for bit, after an error too.

mod compare;
pub mod fragments;
mod gen;
mod loops;
mod values;

pub use compare::{
    compare, compare_interpreter_runs, same_value, FaultKind, Faults, InterpRun, Mismatch,
    NotComparable, Outcome,
};
pub use loops::{invocations, most, most_loop_iterations, with_loop_counter};
pub use values::{poison, special_values, value_from_words};

use crate::interp::Arg;
use crate::kernel::{Kernel, MathFn};
use crate::types::ScalarType;
use gen::{Gen, Layout};
use proptest::prelude::*;
use std::fmt;

/// What generated kernels may contain: a target's tests build the config of what the
/// target compiles (this crate knows no target).
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Types values may have. u32, i32 and bool are always allowed (indices, loop
    /// counters, conditions).
    pub types: Vec<ScalarType>,
    /// Element types of buffers and shared arrays, and types of scalar parameters:
    /// one input, one output and one scalar parameter (and with shared memory, one
    /// shared array) each, so this list also sets how many bindings a kernel has.
    /// Types outside [`Self::types`] are dropped; an empty list means u32. A value of
    /// another type is cast from a load.
    pub memory_types: Vec<ScalarType>,
    /// Vectors of 2 and 4 lanes (values, loads and stores).
    pub vectors: bool,
    /// The math functions float expressions may call (integer expressions those of
    /// them that take integers: `abs`, `min`, `max`).
    pub math: Vec<MathFn>,
    /// Float `%`.
    pub float_rem: bool,
    /// Bitcasts of float values. A bitcast shows a NaN's sign and payload, which
    /// neither the IR nor hardware promises (docs/semantics.md), so its bits may
    /// differ between two correct targets; a target compared bit for bit with the
    /// interpreter turns them off unless it forms NaNs exactly as the interpreter does
    /// (the CPU target).
    pub float_bitcasts: bool,
    /// Whether kernels may fail at run time: loads at indices out of bounds or
    /// unaligned, stores out of bounds, integer division by zero, shifts by the bit
    /// width or more. Without, indices are masked into bounds, divisors are odd and
    /// shift amounts masked.
    pub runtime_errors: bool,
    /// `return` statements.
    pub returns: bool,
    /// Workgroup-shared arrays.
    pub shared: bool,
    /// Barriers (at the top level of the body).
    pub barriers: bool,
    /// Invocations per workgroup (x), rounded up to a power of two in `1..=64`.
    pub workgroup_size: u32,
    /// Workgroups (x), clamped to `1..=8`.
    pub grid: u32,
}

impl GenConfig {
    /// Everything the IR has: what the interpreter and the passes must handle. Two
    /// workgroups of two invocations.
    pub fn full() -> GenConfig {
        GenConfig {
            types: ScalarType::ALL.to_vec(),
            memory_types: ScalarType::ALL.to_vec(),
            vectors: true,
            math: MathFn::ALL.to_vec(),
            float_rem: true,
            float_bitcasts: true,
            runtime_errors: true,
            returns: true,
            shared: true,
            barriers: true,
            workgroup_size: 2,
            grid: 2,
        }
    }
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig::full()
    }
}

/// What the body of a generated kernel is built around.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A few statements, then one deep expression stored.
    Expression,
    /// A loop (sometimes with a constant trip count) accumulating into a mutable local,
    /// plus whatever else its body does.
    AccumulatingLoop,
    /// Random structured statements: lets, assignments, stores, ifs, loops, returns.
    Statements,
}

/// A generated kernel with its grid and arguments.
#[derive(Clone, PartialEq)]
pub struct Case {
    /// The kernel (valid).
    pub kernel: Kernel,
    /// Workgroups to run (x, y, z).
    pub grid: [u32; 3],
    /// Arguments: inputs, scalars, then poisoned outputs (`args[i]` binds
    /// `kernel.params[i]`).
    pub args: Vec<Arg>,
}

impl Case {
    /// The case `choices` (which build the kernel) and `words` (which fill the inputs
    /// and scalars, cycled) give under `config`. Deterministic.
    pub fn from_words(config: &GenConfig, shape: Shape, choices: &[u32], words: &[u32]) -> Case {
        let layout = Layout::new(config);
        let kernel = Gen::new(config, &layout, choices).kernel(shape);
        Case {
            kernel,
            grid: layout.grid(),
            args: layout.arguments(words),
        }
    }

    /// Runs the case's kernel on the interpreter.
    pub fn run_interpreter(&self) -> InterpRun {
        InterpRun::new(self, &self.kernel)
    }
}

/// Shows the kernel as text (proptest prints a failing case with this).
impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "grid {:?}", self.grid)?;
        write!(f, "{}", self.kernel)?;
        for (i, arg) in self.args.iter().enumerate() {
            match arg {
                Arg::Buffer(b) => writeln!(f, "arg {i}: {:?}", b.data)?,
                Arg::Scalar(s) => writeln!(f, "arg {i}: {s:?}")?,
            }
        }
        Ok(())
    }
}

/// Random cases of `shape` under `config`, shrinking to smaller kernels and simpler
/// inputs.
pub fn cases(config: &GenConfig, shape: Shape) -> impl Strategy<Value = Case> {
    let config = config.clone();
    (
        proptest::collection::vec(any::<u32>(), 0..512),
        proptest::collection::vec(any::<u32>(), 1..64),
    )
        .prop_map(move |(choices, words)| Case::from_words(&config, shape, &choices, &words))
}

/// A proptest config of `default_cases` cases, or as many as the environment variable
/// `PROPTEST_CASES` says.
pub fn proptest_config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}
