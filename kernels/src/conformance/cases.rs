//! The case table: every op kind's own cases ([`Op::cases`](crate::op::Op::cases)),
//! in catalogue order.
//!
//! Shapes include 1, primes and sizes that are no multiple of any tile, and stay small
//! enough that the whole table runs on the interpreter in a few minutes on two cores.

use crate::spec::{OpKind, OpSpec};
use kernelc_ir::ScalarType;

/// Every case of the table, for every kind.
pub fn all() -> Vec<OpSpec> {
    OpKind::ALL.iter().flat_map(|&k| for_kind(k)).collect()
}

/// The cases of one kind (at least three shapes each).
pub fn for_kind(kind: OpKind) -> Vec<OpSpec> {
    kind.cases()
}

/// The dtypes the table uses, for reporting.
pub fn dtypes_of(spec: &OpSpec) -> Vec<ScalarType> {
    spec.inputs()
        .iter()
        .chain(spec.outputs().iter())
        .map(|s| s.dtype)
        .collect()
}
