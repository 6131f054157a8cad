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

/// The most elements per kernel the split cases are run with
/// ([`TargetCaps::max_kernel_elements`](crate::lower::TargetCaps::max_kernel_elements)):
/// small enough that every case of [`split`] is lowered in pieces.
pub const SPLIT_LIMIT: u64 = 1024;

/// Cases past [`SPLIT_LIMIT`] elements, for the splitting of tensors past one
/// kernel's indices: map-like ops flat and along rows (broadcast operands whole),
/// reductions along kept rows and over a split axis (sum, mean, max, min, argmax on
/// kept rows, with a prior), every one with pieces of unequal sizes.
pub fn split() -> Vec<OpSpec> {
    let json = [
        r#"{"op":"unary","func":"exp","dtype":"f32","shape":[3001]}"#,
        r#"{"op":"unary","func":{"leaky_relu":{"slope":0.25}},"dtype":"f16","shape":[7,433]}"#,
        r#"{"op":"binary","func":"add","dtype":"f32","lhs":[2600],"rhs":[2600]}"#,
        r#"{"op":"binary","func":"mul","dtype":"i32","lhs":[41,64],"rhs":[64]}"#,
        r#"{"op":"binary","func":"lt","dtype":"u8","lhs":[1,37,128],"rhs":[128],"out_dtype":"bool"}"#,
        r#"{"op":"scalar","func":"sub","dtype":"f64","shape":[2049],"scalar":0.5,"reversed":true}"#,
        r#"{"op":"where","dtype":"f32","cond_dtype":"bool","cond":[33,64],"a":[33,64],"b":[64]}"#,
        r#"{"op":"cast","from":"f32","to":"i8","shape":[1500]}"#,
        r#"{"op":"fill","dtype":"bf16","shape":[1999],"value":{"constant":{"value":2.5}}}"#,
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[3000],"axes":[0]}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f64","shape":[3,1000],"axes":[0,1],"keepdim":true}"#,
        r#"{"op":"reduce","func":"max","dtype":"i64","shape":[2,1,1300],"axes":[0,2]}"#,
        r#"{"op":"reduce","func":"min","dtype":"f32","shape":[1000,4],"axes":[0]}"#,
        r#"{"op":"reduce","func":"sum","dtype":"u8","shape":[1800],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f32","shape":[1100,2],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[700,2],"axes":[1],"accumulate":true}"#,
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[600,4],"axes":[1],"index_dtype":"i64"}"#,
    ];
    json.iter()
        .map(|j| serde_json::from_str(j).unwrap_or_else(|e| panic!("split case {j}: {e}")))
        .collect()
}
