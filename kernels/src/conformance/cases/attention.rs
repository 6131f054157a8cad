//! Cases for attention and pooling.

use crate::spec::*;

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    vec![kind.example()]
}
