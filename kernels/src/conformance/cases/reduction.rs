//! Cases for reductions, softmax (+ backward), cross-entropy, layer norm and batch norm (+ backward).

use crate::spec::*;

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    vec![kind.example()]
}
