//! Cases for data movement (permute, slice, concat, gather, scatter), rope, dropout, adam and image filters.

use crate::spec::*;

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    vec![kind.example()]
}
