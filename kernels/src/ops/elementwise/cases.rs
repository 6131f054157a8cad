//! Conformance cases of the elementwise family.

use super::spec::*;
use kernelc_ir::ScalarType::*;

pub(super) fn unary() -> Vec<UnarySpec> {
    let funcs = [
        UnaryFn::Neg,
        UnaryFn::Abs,
        UnaryFn::Sqrt,
        UnaryFn::Rsqrt,
        UnaryFn::Exp,
        UnaryFn::Log,
        UnaryFn::Sin,
        UnaryFn::Cos,
        UnaryFn::Tan,
        UnaryFn::Floor,
        UnaryFn::Ceil,
        UnaryFn::Round,
        UnaryFn::Relu,
        UnaryFn::LeakyRelu { slope: 0.1 },
        UnaryFn::Sigmoid,
        UnaryFn::Tanh,
        UnaryFn::GeluErf,
        UnaryFn::GeluTanh,
        UnaryFn::Silu,
    ];
    let mut v = Vec::new();
    for (i, func) in funcs.into_iter().enumerate() {
        let shapes = [vec![1], vec![7, 13], vec![1000]];
        for (j, shape) in shapes.into_iter().enumerate() {
            let dtype = [F32, F64, F16, Bf16][(i + j) % 4];
            v.push(UnarySpec { func, dtype, shape });
        }
    }
    // The signed integers: every width, wrapping (−(−128) is −128 in i8).
    for (func, dtype, shape) in [
        (UnaryFn::Abs, I32, vec![31]),
        (UnaryFn::Neg, I64, vec![29]),
        (UnaryFn::Abs, I8, vec![37]),
        (UnaryFn::Neg, I8, vec![2, 9]),
        (UnaryFn::Relu, I16, vec![5]),
        (UnaryFn::Relu, I64, vec![3, 7]),
        // Zero-sized: nothing to compute.
        (UnaryFn::Exp, F32, vec![0]),
        (UnaryFn::Neg, I8, vec![3, 0, 2]),
    ] {
        v.push(UnarySpec { func, dtype, shape });
    }
    v
}

pub(super) fn activation_backward() -> Vec<ActivationBackwardSpec> {
    let funcs = [
        Activation::Relu,
        Activation::LeakyRelu { slope: 0.2 },
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::GeluErf,
        Activation::GeluTanh,
        Activation::Silu,
    ];
    let mut v = Vec::new();
    for (i, func) in funcs.into_iter().enumerate() {
        for (j, shape) in [vec![1], vec![3, 5], vec![257]].into_iter().enumerate() {
            let dtype = [F32, F64, F16][(i + j) % 3];
            v.push(ActivationBackwardSpec { func, dtype, shape });
        }
    }
    v.push(ActivationBackwardSpec {
        func: Activation::Silu,
        dtype: F32,
        shape: vec![4, 0],
    });
    v
}

pub(super) fn binary() -> Vec<BinarySpec> {
    let funcs = [
        BinaryFn::Add,
        BinaryFn::Sub,
        BinaryFn::Mul,
        BinaryFn::Div,
        BinaryFn::Mod,
        BinaryFn::Pow,
        BinaryFn::Max,
        BinaryFn::Min,
        BinaryFn::Eq,
        BinaryFn::Ne,
        BinaryFn::Lt,
        BinaryFn::Le,
        BinaryFn::Gt,
        BinaryFn::Ge,
        BinaryFn::SiluMul,
        BinaryFn::FloorMod,
        BinaryFn::MaxNan,
        BinaryFn::MinNan,
    ];
    let shapes: [(Vec<usize>, Vec<usize>); 4] = [
        (vec![1], vec![1]),
        (vec![7, 1], vec![13]),
        (vec![1000], vec![1000]),
        (vec![2, 3, 5], vec![3, 1]),
    ];
    let mut v = Vec::new();
    for (i, func) in funcs.into_iter().enumerate() {
        for (j, (lhs, rhs)) in shapes.iter().cloned().enumerate() {
            let dtype = match (func, (i + j) % 4) {
                (BinaryFn::Pow | BinaryFn::SiluMul, 3) => F64,
                (_, 3) => I32,
                (_, k) => [F32, F16, F64][k],
            };
            v.push(BinarySpec {
                func,
                dtype,
                lhs,
                rhs,
                out_dtype: None,
            });
        }
    }
    // Every integer width (narrow ones wrap on store), and comparisons with a bool
    // output (ONNX `Equal`/`Less`/`Greater`).
    let more = [
        (BinaryFn::Div, U32, vec![17], vec![17], None),
        (BinaryFn::Add, U8, vec![7, 1], vec![13], None),
        (BinaryFn::Sub, U8, vec![33], vec![33], None),
        (BinaryFn::Mul, I8, vec![2, 3, 5], vec![3, 1], None),
        (BinaryFn::Div, I16, vec![19], vec![1], None),
        (BinaryFn::Mod, I64, vec![7, 1], vec![13], None),
        (BinaryFn::Mul, I64, vec![1000], vec![1000], None),
        (BinaryFn::Sub, U16, vec![9], vec![9], None),
        (BinaryFn::Max, I64, vec![3, 4], vec![4], None),
        (BinaryFn::Min, U8, vec![12], vec![12], None),
        (BinaryFn::Eq, I64, vec![7, 1], vec![13], Some(Bool)),
        (BinaryFn::Lt, F32, vec![1000], vec![1000], Some(Bool)),
        (BinaryFn::Gt, U8, vec![2, 3, 5], vec![3, 1], Some(Bool)),
        (BinaryFn::Ne, F16, vec![17], vec![1], Some(Bool)),
        (BinaryFn::Ge, I8, vec![11], vec![11], None),
        // Python's % on every integer width; NaN-propagating max/min on integers.
        (BinaryFn::FloorMod, I64, vec![7, 1], vec![13], None),
        (BinaryFn::FloorMod, I8, vec![33], vec![33], None),
        (BinaryFn::FloorMod, U16, vec![19], vec![1], None),
        (BinaryFn::MaxNan, I64, vec![3, 4], vec![4], None),
        (BinaryFn::MinNan, U8, vec![12], vec![12], None),
        // Zero-sized: a 0 dimension broadcasts with 1 to 0.
        (BinaryFn::Add, F32, vec![0], vec![1], None),
        (BinaryFn::Eq, I64, vec![3, 0], vec![1, 1], Some(Bool)),
    ];
    for (func, dtype, lhs, rhs, out_dtype) in more {
        v.push(BinarySpec {
            func,
            dtype,
            lhs,
            rhs,
            out_dtype,
        });
    }
    v
}

pub(super) fn scalar() -> Vec<ScalarSpec> {
    [
        (BinaryFn::Mul, F32, vec![1], 0.5, false),
        (BinaryFn::Sub, F64, vec![5, 7], 3.0, true),
        (BinaryFn::Div, F16, vec![1000], -4.0, false),
        (BinaryFn::Pow, F32, vec![33], 2.5, false),
        (BinaryFn::Max, I32, vec![19], 3.0, false),
        // Exact in the table: x mod 0.1f32, not x mod 0.1 (the kernel's operand is f32).
        (BinaryFn::Mod, F32, vec![50], 0.1, false),
        (BinaryFn::FloorMod, F32, vec![50], -0.75, false),
        (BinaryFn::FloorMod, I32, vec![40], -3.0, true),
        // 200 + x wraps in u8; i64 operands past i32.
        (BinaryFn::Add, U8, vec![21], 200.0, false),
        (BinaryFn::Mul, I64, vec![9], -3e9, false),
        (BinaryFn::Sub, I16, vec![3, 5], 7.0, true),
    ]
    .into_iter()
    .map(|(func, dtype, shape, scalar, reversed)| ScalarSpec {
        func,
        dtype,
        shape,
        scalar,
        reversed,
        out_dtype: None,
    })
    .chain([
        ScalarSpec {
            func: BinaryFn::Lt,
            dtype: I64,
            shape: vec![13],
            scalar: 2.0,
            reversed: false,
            out_dtype: Some(Bool),
        },
        ScalarSpec {
            func: BinaryFn::Eq,
            dtype: F32,
            shape: vec![4, 4],
            scalar: 0.5,
            reversed: true,
            out_dtype: Some(Bool),
        },
        ScalarSpec {
            func: BinaryFn::Mul,
            dtype: F16,
            shape: vec![0, 5],
            scalar: 2.0,
            reversed: false,
            out_dtype: None,
        },
    ])
    .collect()
}

pub(super) fn where_() -> Vec<WhereSpec> {
    [
        (F32, U32, vec![1], vec![1], vec![1]),
        (F64, F32, vec![7, 1], vec![7, 5], vec![5]),
        (F16, I32, vec![3, 1, 4], vec![2, 4], vec![3, 2, 1]),
        // ONNX `Where`: a bool condition; data of any dtype, bool too.
        (I64, Bool, vec![5, 1], vec![5, 3], vec![3]),
        (Bool, Bool, vec![17], vec![17], vec![1]),
        (U8, I64, vec![2, 6], vec![6], vec![2, 1]),
        (I8, U8, vec![9], vec![9], vec![9]),
        (F32, Bool, vec![0, 1], vec![1, 3], vec![3]),
    ]
    .into_iter()
    .map(|(dtype, cond_dtype, cond, a, b)| WhereSpec {
        dtype,
        cond_dtype,
        cond,
        a,
        b,
    })
    .collect()
}

pub(super) fn cast() -> Vec<CastSpec> {
    [
        (F32, F16, vec![1]),
        (F32, I32, vec![7, 5]),
        (F64, F32, vec![1000]),
        (F32, U32, vec![13]),
        (I32, F32, vec![11]),
        (F16, Bf16, vec![9]),
        (F32, Bf16, vec![1000]),
        // Negative i32 to u32 wraps (two's complement).
        (I32, U32, vec![17]),
        (F64, F16, vec![257]),
        // Every integer width and bool: int → int wraps, float → narrow int goes
        // through i32 (−1.5 → 255 in u8), → bool is `≠ 0`.
        (F32, U8, vec![31]),
        (F32, I8, vec![7, 3]),
        (F64, I16, vec![13]),
        (I64, F32, vec![29]),
        (U8, F16, vec![19]),
        (I8, I64, vec![33]),
        (I64, I32, vec![9]),
        (I32, I64, vec![9]),
        (I64, U8, vec![21]),
        (U16, I16, vec![15]),
        (Bool, U8, vec![11]),
        (F32, Bool, vec![13]),
        (U8, Bool, vec![10]),
        (Bool, F32, vec![6]),
        (I16, U16, vec![5]),
        (F32, I64, vec![0]),
    ]
    .into_iter()
    .map(|(from, to, shape)| CastSpec { from, to, shape })
    .collect()
}

pub(super) fn fill() -> Vec<FillSpec> {
    vec![
        FillSpec {
            dtype: F32,
            shape: vec![1],
            value: FillValue::Constant { value: 2.5 },
            offset: 0,
        },
        // Just above the tie between the f16 values 1 and 1 + 2⁻¹⁰: one rounding gives
        // the upper one; rounding to f32 first would land on the tie and give 1.
        FillSpec {
            dtype: F16,
            shape: vec![5],
            value: FillValue::Constant {
                value: 1.0 + 2f64.powi(-11) + 2f64.powi(-40),
            },
            offset: 0,
        },
        // Constants of every integer width (past i8 in u8, past i32 in i64) and bool.
        FillSpec {
            dtype: U8,
            shape: vec![9],
            value: FillValue::Constant { value: 200.0 },
            offset: 0,
        },
        FillSpec {
            dtype: I64,
            shape: vec![3, 3],
            value: FillValue::Constant { value: -5e12 },
            offset: 0,
        },
        FillSpec {
            dtype: Bool,
            shape: vec![6],
            value: FillValue::Constant { value: 1.0 },
            offset: 0,
        },
        FillSpec {
            dtype: F32,
            shape: vec![2, 0],
            value: FillValue::Constant { value: 1.0 },
            offset: 0,
        },
        FillSpec {
            dtype: F64,
            shape: vec![7, 13],
            value: FillValue::Uniform {
                low: -1.0,
                high: 3.0,
                seed: 5,
                step: 2,
            },
            offset: 0,
        },
        FillSpec {
            dtype: F32,
            shape: vec![1000],
            value: FillValue::Normal {
                mean: 1.0,
                std: 0.5,
                seed: 9,
                step: 1,
            },
            offset: 0,
        },
    ]
}
