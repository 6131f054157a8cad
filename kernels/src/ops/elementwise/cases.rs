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
    v.push(UnarySpec {
        func: UnaryFn::Abs,
        dtype: I32,
        shape: vec![31],
    });
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
            });
        }
    }
    v.push(BinarySpec {
        func: BinaryFn::Div,
        dtype: U32,
        lhs: vec![17],
        rhs: vec![17],
    });
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
    ]
    .into_iter()
    .map(|(func, dtype, shape, scalar, reversed)| ScalarSpec {
        func,
        dtype,
        shape,
        scalar,
        reversed,
    })
    .collect()
}

pub(super) fn where_() -> Vec<WhereSpec> {
    [
        (F32, U32, vec![1], vec![1], vec![1]),
        (F64, F32, vec![7, 1], vec![7, 5], vec![5]),
        (F16, I32, vec![3, 1, 4], vec![2, 4], vec![3, 2, 1]),
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
        },
        // Just above the tie between the f16 values 1 and 1 + 2⁻¹⁰: one rounding gives
        // the upper one; rounding to f32 first would land on the tie and give 1.
        FillSpec {
            dtype: F16,
            shape: vec![5],
            value: FillValue::Constant {
                value: 1.0 + 2f64.powi(-11) + 2f64.powi(-40),
            },
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
        },
    ]
}
