//! Kernels as JSON: the storable form of the IR.
//!
//! [`to_json`] writes pretty JSON; [`from_json`] reads it back and always validates, so
//! a kernel that comes out of it is one every backend may take. Floats that JSON cannot
//! hold (NaN, infinities) are written as the strings `"nan"`, `"inf"`, `"-inf"` (see
//! [`Scalar`](crate::Scalar)). Reading never panics, whatever the input.

use crate::kernel::Kernel;
use crate::validate::{validate, ValidationError};
use thiserror::Error;

/// Why a text is not a valid kernel.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum IrJsonError {
    /// Not JSON at all: a syntax error or unexpected end of input.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// Well-formed JSON of the wrong shape: a missing or unknown field, a wrong type,
    /// an unknown enum variant, a number out of range.
    #[error("JSON is not a kernel (line {line}, column {column}): {message}")]
    Schema {
        line: usize,
        column: usize,
        message: String,
    },
    /// A kernel, but an invalid one.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

impl From<serde_json::Error> for IrJsonError {
    fn from(e: serde_json::Error) -> Self {
        let (line, column) = (e.line(), e.column());
        let full = e.to_string();
        // serde_json appends the position; it is kept in fields of its own.
        let suffix = format!(" at line {line} column {column}");
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
        match e.classify() {
            serde_json::error::Category::Data => IrJsonError::Schema {
                line,
                column,
                message,
            },
            serde_json::error::Category::Syntax
            | serde_json::error::Category::Eof
            | serde_json::error::Category::Io => IrJsonError::Syntax {
                line,
                column,
                message,
            },
        }
    }
}

/// The kernel as pretty-printed JSON.
pub fn to_json(kernel: &Kernel) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::pretty(&mut buf);
    serialize(kernel, &mut ser);
    // serde_json writes UTF-8 only.
    String::from_utf8_lossy(&buf).into_owned()
}

/// Parses and validates a kernel.
pub fn from_json(text: &str) -> Result<Kernel, IrJsonError> {
    let kernel: Kernel = serde_json::from_str(text)?;
    validate(&kernel)?;
    Ok(kernel)
}

/// [`from_json`] on bytes (e.g. a file read from disk); invalid UTF-8 is a syntax error.
pub fn from_json_slice(bytes: &[u8]) -> Result<Kernel, IrJsonError> {
    let kernel: Kernel = serde_json::from_slice(bytes)?;
    validate(&kernel)?;
    Ok(kernel)
}

/// Writes the canonical (compact) serialization, the bytes the stable hash covers.
pub(crate) fn write_canonical<W: std::io::Write>(out: W, kernel: &Kernel) {
    let mut ser = serde_json::Serializer::new(out);
    serialize(kernel, &mut ser);
}

fn serialize<W: std::io::Write, F: serde_json::ser::Formatter>(
    kernel: &Kernel,
    ser: &mut serde_json::Serializer<W, F>,
) {
    use serde::Serialize;
    // Cannot fail: the IR has no maps (so no non-string keys), its float serializers
    // write only finite numbers or strings, and the writers used here (a Vec, a BLAKE3
    // hasher) never fail.
    kernel
        .serialize(ser)
        .expect("serializing a kernel to JSON is infallible");
}
