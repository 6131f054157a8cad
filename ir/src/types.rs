//! Scalar and vector types of the IR.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A scalar type. Storage and compute types are the same set; a target that lacks
/// one (f16 on some GPUs, f64 on most) is told so by `TargetCaps` before lowering.
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
}

impl ScalarType {
    pub const ALL: [ScalarType; 8] = [
        ScalarType::Bool,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::Bf16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    pub fn is_float(self) -> bool {
        matches!(self, Self::F16 | Self::Bf16 | Self::F32 | Self::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(self, Self::I32 | Self::U32 | Self::I64)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, Self::I32 | Self::I64)
    }

    /// Size in bytes when stored in a buffer (bool is stored as a 32-bit word, as
    /// WGSL and SPIR-V require for host-shareable memory).
    pub fn size_bytes(self) -> u32 {
        match self {
            Self::F16 | Self::Bf16 => 2,
            Self::Bool | Self::I32 | Self::U32 | Self::F32 => 4,
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
        }
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
