//! [`SpecError`]: what is wrong with an [`OpSpec`](crate::OpSpec) or with the data
//! handed to a reference implementation.

use kernelc_ir::ScalarType;

/// Why an [`OpSpec`](crate::OpSpec) is impossible, or why the inputs given to
/// [`reference`](crate::reference::reference) do not fit it. Every variant names the
/// offending tensor, attribute or axis, so the message alone says what to fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// Two shapes (or dimensions, written as one-element shapes) that must agree do not.
    #[error("{what}: expected {expected:?}, found {found:?}")]
    ShapeMismatch {
        what: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },

    /// A tensor or dimension has size zero where the op needs at least one element.
    #[error("{what} is zero-sized")]
    ZeroSized { what: String },

    /// The dtype is not one the op accepts for this tensor.
    #[error("{op}: dtype {dtype} is not supported (allowed: {})", join_dtypes(.allowed))]
    UnsupportedDtype {
        op: String,
        dtype: ScalarType,
        allowed: Vec<ScalarType>,
    },

    /// An attribute has a value the op cannot use.
    #[error("attribute `{name}` = {value}: {why}")]
    BadAttribute {
        name: String,
        value: String,
        why: String,
    },

    /// An axis is outside `0..rank` (after counting negative axes from the end).
    #[error("axis {axis} is out of range for a tensor of rank {rank}")]
    BadAxis { axis: i64, rank: usize },

    /// Two shapes cannot be broadcast together under NumPy rules.
    #[error("shapes {lhs:?} and {rhs:?} are not broadcastable")]
    NotBroadcastable { lhs: Vec<usize>, rhs: Vec<usize> },

    /// A tensor has more elements than a spec may have (see [`MAX_ELEMENTS`](crate::shape::MAX_ELEMENTS)).
    #[error("{what} has {elements} elements, more than the limit of {limit}")]
    TooLarge {
        what: String,
        elements: u128,
        limit: usize,
    },

    /// [`reference`](crate::reference::reference) got the wrong number of input buffers.
    #[error("{op}: expected {expected} input buffers, got {found}")]
    InputCount {
        op: String,
        expected: usize,
        found: usize,
    },

    /// An input buffer handed to [`reference`](crate::reference::reference) has the wrong length.
    #[error("input `{name}`: expected {expected} elements, got {found}")]
    InputLength {
        name: String,
        expected: usize,
        found: usize,
    },
}

fn join_dtypes(list: &[ScalarType]) -> String {
    list.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

impl SpecError {
    pub(crate) fn bad_attr(name: &str, value: impl std::fmt::Display, why: &str) -> SpecError {
        SpecError::BadAttribute {
            name: name.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        }
    }

    pub(crate) fn mismatch(what: &str, expected: Vec<usize>, found: Vec<usize>) -> SpecError {
        SpecError::ShapeMismatch {
            what: what.to_string(),
            expected,
            found,
        }
    }

    pub(crate) fn zero(what: &str) -> SpecError {
        SpecError::ZeroSized {
            what: what.to_string(),
        }
    }
}
