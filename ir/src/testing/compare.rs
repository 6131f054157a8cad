//! The one rule for comparing two runs of a kernel (see the module doc of
//! [`crate::testing`]).

use super::values::is_nan;
use super::Case;
use crate::eval::EvalError;
use crate::interp::{self, Arg, InterpError};
use crate::kernel::Kernel;
use crate::scalar::Scalar;
use std::fmt;

/// A run-time error valid IR can hit (docs/semantics.md). Every compiled target
/// reports each as one bit of its status word and carries on; the interpreter stops at
/// the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// A load or store past the end of its memory (also when it is unaligned too).
    OutOfBounds,
    /// An in-bounds vector access at an index that is not a multiple of its lanes.
    Unaligned,
    /// Integer division or remainder by zero.
    DivisionByZero,
    /// A shift by the bit width or more.
    ShiftOverflow,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 4] = [
        FaultKind::OutOfBounds,
        FaultKind::Unaligned,
        FaultKind::DivisionByZero,
        FaultKind::ShiftOverflow,
    ];

    fn bit(self) -> u8 {
        match self {
            FaultKind::OutOfBounds => 1,
            FaultKind::Unaligned => 2,
            FaultKind::DivisionByZero => 4,
            FaultKind::ShiftOverflow => 8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FaultKind::OutOfBounds => "out of bounds",
            FaultKind::Unaligned => "unaligned",
            FaultKind::DivisionByZero => "division by zero",
            FaultKind::ShiftOverflow => "shift overflow",
        }
    }
}

/// A set of [`FaultKind`]s: what a target's status word reports, decoded.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Faults(u8);

impl Faults {
    /// No fault.
    pub const NONE: Faults = Faults(0);

    /// The set with `kind` added.
    pub fn with(self, kind: FaultKind) -> Faults {
        Faults(self.0 | kind.bit())
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: FaultKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// Whether the set is empty (the run completed).
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every kind of `self` is in `other`.
    pub fn is_subset(self, other: Faults) -> bool {
        self.0 & !other.0 == 0
    }

    /// The kinds in the set, in [`FaultKind::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(move |k| self.contains(*k))
    }
}

impl FromIterator<FaultKind> for Faults {
    fn from_iter<I: IntoIterator<Item = FaultKind>>(iter: I) -> Faults {
        iter.into_iter().fold(Faults::NONE, Faults::with)
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(FaultKind::name).collect();
        write!(f, "{{{}}}", names.join(", "))
    }
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What one run of a kernel produced, as the comparison sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The run finished without a run-time error: the arguments after it (buffers are
    /// compared, scalars are what they were).
    Completed(Vec<Arg>),
    /// The run hit run-time errors (never empty). Buffers are not compared: the
    /// interpreter stops at its first error, while a target skips the access and
    /// carries on.
    Faulted(Faults),
}

impl Outcome {
    /// A target's run: `faults` decoded from its status word ([`Faults::NONE`] when it
    /// is zero), `args` the arguments after the run.
    pub fn of_target(faults: Faults, args: &[Arg]) -> Outcome {
        if faults.is_empty() {
            Outcome::Completed(args.to_vec())
        } else {
            Outcome::Faulted(faults)
        }
    }
}

/// An interpreter error that no target run can be compared with: a generated kernel
/// must never hit one (the generator's bug, or the interpreter's), and a hand-written
/// kernel that does is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct NotComparable(
    /// The interpreter's error.
    pub InterpError,
);

impl fmt::Display for NotComparable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the interpreter failed with an error no target reports: {}",
            self.0
        )
    }
}

impl std::error::Error for NotComparable {}

/// One run of the interpreter, kept whole: the result and the arguments after it.
#[derive(Clone, Debug, PartialEq)]
pub struct InterpRun {
    /// What `interp::run` returned.
    pub result: Result<(), InterpError>,
    /// The arguments after the run (after an error, as far as it got).
    pub args: Vec<Arg>,
}

impl InterpRun {
    /// Runs `kernel` (the case's own, or one a pass made from it) on a copy of the
    /// case's arguments.
    pub fn new(case: &Case, kernel: &Kernel) -> InterpRun {
        let mut args = case.args.clone();
        let result = interp::run(kernel, case.grid, &mut args);
        InterpRun { result, args }
    }

    /// The run as the comparison sees it: [`Outcome::Faulted`] with the one kind for
    /// a run-time error of valid IR, [`NotComparable`] for any other error.
    #[allow(clippy::result_large_err)]
    pub fn outcome(&self) -> Result<Outcome, NotComparable> {
        let kind = match &self.result {
            Ok(()) => return Ok(Outcome::Completed(self.args.clone())),
            Err(e) => match e {
                InterpError::OutOfBounds { .. } => FaultKind::OutOfBounds,
                InterpError::UnalignedAccess { .. } => FaultKind::Unaligned,
                InterpError::Eval { source, .. } => match source {
                    EvalError::DivisionByZero => FaultKind::DivisionByZero,
                    EvalError::ShiftOverflow { .. } => FaultKind::ShiftOverflow,
                    EvalError::TypeMismatch => return Err(NotComparable(e.clone())),
                },
                InterpError::Invalid(_)
                | InterpError::Arg(_)
                | InterpError::ArgData { .. }
                | InterpError::GridTooLarge { .. }
                | InterpError::ResourceLimit { .. }
                | InterpError::UninitializedSharedRead { .. }
                | InterpError::Race { .. }
                | InterpError::DivergentBarrier { .. }
                | InterpError::UnsetLocal { .. }
                | InterpError::DivergentFragment { .. }
                | InterpError::FragmentOperandDiffers { .. }
                | InterpError::UnsetFragment { .. }
                | InterpError::MisalignedFragment { .. }
                | InterpError::FragmentSourceChanged { .. }
                | InterpError::AsyncCopy { .. }
                | InterpError::SharedReuse { .. }
                | InterpError::Malformed { .. } => return Err(NotComparable(e.clone())),
            },
        };
        Ok(Outcome::Faulted(Faults::NONE.with(kind)))
    }
}

/// How two runs differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch(
    /// What differs, in words.
    pub String,
);

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

/// Whether two values agree: the same bits, or both NaN (neither the IR nor the
/// hardware promises NaN payloads or signs).
pub fn same_value(a: Scalar, b: Scalar) -> bool {
    a == b || (is_nan(a) && is_nan(b))
}

/// Compares the interpreter's outcome (`reference`) with a target's: the one rule.
///
/// * Both completed: every buffer agrees element for element by [`same_value`].
/// * Both faulted: the interpreter's fault (it stops at its first) is among the
///   target's (which carries on and may report more). Buffers are not compared.
/// * One faulted and the other not: a mismatch.
pub fn compare(reference: &Outcome, target: &Outcome) -> Result<(), Mismatch> {
    match (reference, target) {
        (Outcome::Completed(want), Outcome::Completed(got)) => {
            compare_buffers(want, got, same_value, ["interpreter", "target"])
        }
        (Outcome::Faulted(want), Outcome::Faulted(got)) => {
            if want.is_subset(*got) {
                Ok(())
            } else {
                Err(Mismatch(format!(
                    "the interpreter faulted with {want}, the target with {got}"
                )))
            }
        }
        (Outcome::Completed(_), Outcome::Faulted(got)) => Err(Mismatch(format!(
            "the interpreter completed, the target faulted with {got}"
        ))),
        (Outcome::Faulted(want), Outcome::Completed(_)) => Err(Mismatch(format!(
            "the interpreter faulted with {want}, the target completed"
        ))),
    }
}

/// Compares two interpreter runs of one case, e.g. before and after a pass, which
/// must agree exactly: the same error (but for the node path, which passes move) with
/// the same invocation and details, and every buffer bit for bit, also after an error
/// (the interpreter is deterministic, and passes preserve meaning exactly).
pub fn compare_interpreter_runs(reference: &InterpRun, other: &InterpRun) -> Result<(), Mismatch> {
    let same = match (&reference.result, &other.result) {
        (Ok(()), Ok(())) => true,
        (Err(a), Err(b)) => without_path(a) == without_path(b),
        (Ok(()), Err(_)) | (Err(_), Ok(())) => false,
    };
    if !same {
        return Err(Mismatch(format!(
            "different results: {} vs {}",
            describe(&reference.result),
            describe(&other.result)
        )));
    }
    compare_buffers(
        &reference.args,
        &other.args,
        |a, b| a == b,
        ["reference", "other"],
    )
}

fn without_path(e: &InterpError) -> InterpError {
    let mut e = e.clone();
    if let Some(site) = e.site_mut() {
        site.path.clear();
    }
    e
}

fn describe(r: &Result<(), InterpError>) -> String {
    match r {
        Ok(()) => "completed".into(),
        Err(e) => format!("`{e}`"),
    }
}

/// The first element of a buffer argument where `want` and `got` differ.
fn compare_buffers(
    want: &[Arg],
    got: &[Arg],
    same: impl Fn(Scalar, Scalar) -> bool,
    names: [&str; 2],
) -> Result<(), Mismatch> {
    if want.len() != got.len() {
        return Err(Mismatch(format!(
            "{} arguments vs {}",
            want.len(),
            got.len()
        )));
    }
    for (p, (w, g)) in want.iter().zip(got).enumerate() {
        let (w, g) = match (w, g) {
            (Arg::Buffer(w), Arg::Buffer(g)) => (w, g),
            (Arg::Scalar(_), Arg::Scalar(_)) => continue,
            (Arg::Buffer(_), Arg::Scalar(_)) | (Arg::Scalar(_), Arg::Buffer(_)) => {
                return Err(Mismatch(format!("argument {p}: a buffer and a scalar")))
            }
        };
        if w.len() != g.len() || w.elem != g.elem {
            return Err(Mismatch(format!(
                "argument {p}: {} {}s vs {} {}s",
                w.len(),
                w.elem,
                g.len(),
                g.elem
            )));
        }
        if let Some((i, (x, y))) = w
            .data
            .iter()
            .zip(&g.data)
            .enumerate()
            .find(|(_, (x, y))| !same(**x, **y))
        {
            let [a, b] = names;
            return Err(Mismatch(format!(
                "argument {p} element {i}: {a} {x:?}, {b} {y:?}"
            )));
        }
    }
    Ok(())
}
