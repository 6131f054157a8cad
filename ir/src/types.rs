//! Scalar and vector types of the IR.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A scalar type: a value type (every type but the narrow integers) or a memory
/// element type (every type). A target that lacks one (f16 on some GPUs, f64 on most)
/// is told so by `TargetCaps` before lowering.
///
/// **Narrow integers** (`u8`, `i8`, `u16`, `i16`) are *storage* types: only a buffer's
/// elements have them. A load yields the element widened to its
/// [`value_type`](ScalarType::value_type) (zero-extended to `u32`, sign-extended to
/// `i32`); a store takes that value type and keeps its low bits (it wraps, two's
/// complement). Arithmetic on them is 32-bit arithmetic whose result is wrapped on
/// store, which is exactly 8- or 16-bit wrapping arithmetic for `+ − ×`, and exact for
/// division, remainder, comparisons, min and max of in-range values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    Bool,
    I32,
    U32,
    I64,
    F16,
    Bf16,
    F32,
    F64,
    U8,
    I8,
    U16,
    I16,
}

impl ScalarType {
    /// Every scalar type: the value types, then the narrow storage types.
    pub const ALL: [ScalarType; 12] = [
        ScalarType::Bool,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::Bf16,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::U8,
        ScalarType::I8,
        ScalarType::U16,
        ScalarType::I16,
    ];

    /// The types a value (a local, a literal, a scalar parameter, an expression) may
    /// have: every type but the narrow storage types.
    pub const VALUES: [ScalarType; 8] = [
        ScalarType::Bool,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::Bf16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    /// The narrow integer types, which only buffer elements have.
    pub const NARROW: [ScalarType; 4] = [
        ScalarType::U8,
        ScalarType::I8,
        ScalarType::U16,
        ScalarType::I16,
    ];

    /// Whether only buffer elements may have this type (`u8`, `i8`, `u16`, `i16`).
    pub fn is_storage_only(self) -> bool {
        match self {
            Self::U8 | Self::I8 | Self::U16 | Self::I16 => true,
            Self::Bool
            | Self::I32
            | Self::U32
            | Self::I64
            | Self::F16
            | Self::Bf16
            | Self::F32
            | Self::F64 => false,
        }
    }

    /// The type a load of an element of this type yields and a store of one takes:
    /// `u32` for `u8`/`u16`, `i32` for `i8`/`i16`, the type itself otherwise.
    pub fn value_type(self) -> ScalarType {
        match self {
            Self::U8 | Self::U16 => Self::U32,
            Self::I8 | Self::I16 => Self::I32,
            Self::Bool
            | Self::I32
            | Self::U32
            | Self::I64
            | Self::F16
            | Self::Bf16
            | Self::F32
            | Self::F64 => self,
        }
    }

    /// Whether elements of this type are narrower than a 32-bit word in memory
    /// (bool, the narrow integers, f16, bf16): what a target without byte or
    /// half-word stores must pack into words.
    pub fn is_sub_word(self) -> bool {
        self.size_bytes() < 4
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F16 | Self::Bf16 | Self::F32 | Self::F64)
    }

    /// Integers of every width, the narrow storage types included.
    pub fn is_int(self) -> bool {
        matches!(
            self,
            Self::I32 | Self::U32 | Self::I64 | Self::U8 | Self::I8 | Self::U16 | Self::I16
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, Self::I32 | Self::I64 | Self::I8 | Self::I16)
    }

    /// Size in bytes of an element in a buffer (bool is one byte, 0 or 1; a target
    /// without byte stores packs it into words, as it does `u8`).
    pub fn size_bytes(self) -> u32 {
        match self {
            Self::Bool | Self::U8 | Self::I8 => 1,
            Self::F16 | Self::Bf16 | Self::U16 | Self::I16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::F64 => 8,
        }
    }

    /// Width in bits of the value (bool counts as 1).
    pub fn bits(self) -> u32 {
        match self {
            Self::Bool => 1,
            other => other.size_bytes() * 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::I32 => "i32",
            Self::U32 => "u32",
            Self::I64 => "i64",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::U8 => "u8",
            Self::I8 => "i8",
            Self::U16 => "u16",
            Self::I16 => "i16",
        }
    }

    /// The type named `name` (`"f32"`, `"u8"`, ...), as [`ScalarType::name`] spells it.
    pub fn from_name(name: &str) -> Option<ScalarType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value type: a scalar or a short vector of 2 or 4 lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Type {
    pub scalar: ScalarType,
    /// 1, 2 or 4.
    pub lanes: u8,
}

impl Type {
    pub const BOOL: Type = Type::scalar(ScalarType::Bool);
    pub const I32: Type = Type::scalar(ScalarType::I32);
    pub const U32: Type = Type::scalar(ScalarType::U32);
    pub const I64: Type = Type::scalar(ScalarType::I64);
    pub const F16: Type = Type::scalar(ScalarType::F16);
    pub const BF16: Type = Type::scalar(ScalarType::Bf16);
    pub const F32: Type = Type::scalar(ScalarType::F32);
    pub const F64: Type = Type::scalar(ScalarType::F64);

    pub const fn scalar(scalar: ScalarType) -> Type {
        Type { scalar, lanes: 1 }
    }

    pub const fn vector(scalar: ScalarType, lanes: u8) -> Type {
        Type { scalar, lanes }
    }

    pub fn is_scalar(self) -> bool {
        self.lanes == 1
    }

    pub fn is_valid_lanes(lanes: u8) -> bool {
        matches!(lanes, 1 | 2 | 4)
    }

    /// The same shape with another scalar type (e.g. the bool result of a comparison).
    pub fn with_scalar(self, scalar: ScalarType) -> Type {
        Type {
            scalar,
            lanes: self.lanes,
        }
    }
}

impl From<ScalarType> for Type {
    fn from(s: ScalarType) -> Type {
        Type::scalar(s)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            write!(f, "{}", self.scalar)
        } else {
            write!(f, "vec{}<{}>", self.lanes, self.scalar)
        }
    }
}
