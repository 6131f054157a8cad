//! The CPU target's LLVM tier (`cpu::llvm`) against the reference interpreter, bit
//! for bit (NaN payloads aside), on what its code does itself rather than what it
//! shares with the PTX target: f16/bf16 rounding without compiler-rt (f32 → bf16 on
//! the bits, f64 → f16/bf16 through f32 rounded to odd), float min/max of signed
//! zeros, arithmetic and comparisons on every float type and vector width; and what it
//! refuses. Float `%` goes through its IR expansion first, as the tier requires (exact,
//! so the interpreter's unexpanded `%` is the same value).

#![cfg(feature = "ptx")]

mod common;

use common::*;
use kernelc_codegen::cpu::{self, CpuKernel};
use kernelc_codegen::CodegenError;
use kernelc_ir::builder::*;
use kernelc_ir::passes::{expand_math, MathExpansion};
use kernelc_ir::{Access, Kernel, ScalarType, Type};
use ScalarType::{Bf16, Bool, F16, F32, F64};

fn compile(kernel: &Kernel) -> CpuKernel {
    let expanded = expand_math(kernel, &MathExpansion::none().with_float_rem(true));
    match cpu::llvm::compile(&expanded) {
        Ok(k) => k,
        Err(e) => panic!("cpu::llvm::compile failed: {e}\n{kernel}"),
    }
}

#[test]
fn all_f16_patterns_round_trip_like_half() {
    common::all_f16_patterns_round_trip_like_half(false);
}

#[test]
fn all_bf16_patterns_round_trip_like_half() {
    common::all_bf16_patterns_round_trip_like_half(false);
}

#[test]
fn f32_and_f64_to_half_types_round_once_bit_for_bit() {
    common::f32_and_f64_to_half_types_round_once_bit_for_bit(false);
}

/// `min(−0, +0)` is the first operand, a NaN operand yields the other, on every float
/// type (f16/bf16 through f32) and vector width: what the interpreter computes, which
/// `llvm.minnum` alone leaves open.
#[test]
fn min_and_max_keep_the_interpreters_zero_and_nan_rules() {
    let mut rng = Lcg(31);
    for scalar in [F32, F64, F16, Bf16] {
        for lanes in [1u8, 4] {
            let ty = Type::vector(scalar, lanes);
            check_elementwise("min", &[ty, ty], scalar, 120, &mut rng, |a| {
                a[0].clone().min(a[1].clone())
            });
            check_elementwise("max", &[ty, ty], scalar, 120, &mut rng, |a| {
                a[0].clone().max(a[1].clone())
            });
        }
    }
}

#[test]
fn float_arithmetic_and_comparisons_on_every_type() {
    let mut rng = Lcg(32);
    type Op = fn(E, E) -> E;
    let ops: [(&str, Op); 9] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("rem", |a, b| a % b),
        ("fma", |a, b| a.clone().fma(b.clone(), a)),
        ("sqrt", |a, _| a.sqrt()),
        ("lt", |a, b| a.lt(b)),
        ("ne", |a, b| a.ne(b)),
    ];
    for scalar in [F32, F64, F16, Bf16] {
        for lanes in [1u8, 2, 4] {
            let ty = Type::vector(scalar, lanes);
            for (name, op) in ops {
                let out = if matches!(name, "lt" | "ne") {
                    Bool
                } else {
                    scalar
                };
                check_elementwise(name, &[ty, ty], out, 60, &mut rng, |a| {
                    op(a[0].clone(), a[1].clone())
                });
            }
        }
    }
}

/// A workgroup of several invocations and an unexpanded transcendental are
/// `Unsupported` (the runtime leaves such kernels to Cranelift), never a panic.
#[test]
fn what_the_tier_does_not_take_is_unsupported() {
    let wide = {
        let mut k = KernelBuilder::new("wide", [4, 1, 1]);
        let out = k.buffer("out", F32, 4, Access::Write);
        k.build(|b| b.store(out, local_id(0), 1.0f32))
            .expect("valid")
    };
    let exp = elementwise("exp", &[Type::scalar(F32)], F32, 8, |a| a[0].clone().exp());
    for kernel in [wide, exp] {
        match cpu::llvm::compile(&kernel) {
            Err(CodegenError::Unsupported { target, .. }) => assert_eq!(target, "cpu-llvm"),
            other => panic!("{}: {other:?}", kernel.name),
        }
    }
}

/// The tier's required expansion takes every transcendental it refuses, f32 `exp2`
/// included (PTX keeps that one native: `ex2.approx` is a GPU instruction), so a
/// kernel through it compiles on the tier instead of falling back to Cranelift; and
/// an f32 `exp2` left unexpanded is refused like any other.
#[test]
fn the_tiers_expansion_leaves_nothing_it_refuses() {
    let exp2 = elementwise("exp2", &[Type::scalar(F32)], F32, 8, |a| {
        a[0].clone().exp2()
    });
    assert!(matches!(
        cpu::llvm::compile(&exp2),
        Err(CodegenError::Unsupported { .. })
    ));
    let expanded = kernelc_ir::passes::for_target(&exp2, &cpu::llvm::required_expansion());
    cpu::llvm::compile(&expanded).expect("f32 exp2 through the tier's expansion");
}

/// Integers past the half types' range become ±∞ when cast to them, and a cast of
/// that infinity to a wider integer saturates (a fuzz finding, seed
/// 1795924807057387597: `cast<i64>(cast<f16>(i32::MIN))` was −2³¹, not −2⁶³).
#[test]
fn integers_past_the_half_types_become_infinite() {
    use kernelc_ir::Scalar;
    use ScalarType::{I32, I64, U32};
    let ints: Vec<i64> = vec![
        i32::MIN as i64,
        i32::MAX as i64,
        65504,
        65519,
        65520,
        -65520,
        70000,
        1 << 40,
        i64::MIN,
        i64::MAX,
        3,
        -7,
    ];
    for from in [I32, U32, I64] {
        for half in [F16, Bf16] {
            for to in [I64, I32, F32] {
                let data: Vec<Scalar> = ints
                    .iter()
                    .map(|&v| Scalar::int_wrapping(from, v).expect("an integer type"))
                    .collect();
                let n = data.len() as u32;
                let kernel = elementwise("casts", &[Type::scalar(from)], to, n, |a| {
                    a[0].clone().cast(half).cast(to)
                });
                check(
                    &kernel,
                    [1, 1, 1],
                    &[buffer(from, data), poison(to, n as usize)],
                );
            }
        }
    }
}

/// The fuzz finding's own shape: an integer of one significant bit (`i32::MIN << s`)
/// cast to f16 and back. LLVM knows its bits fit f16's significand, so the casts must
/// not fold to the integer: 2³¹ is past f16's range.
#[test]
fn a_one_bit_integer_past_f16_still_overflows() {
    use kernelc_ir::Scalar;
    use ScalarType::{I64, U32};
    let shifts: Vec<Scalar> = [0u32, 1, 5, 16, 31, 32, 33].map(Scalar::U32).to_vec();
    let n = shifts.len() as u32;
    for half in [F16, Bf16] {
        let kernel = elementwise("one_bit", &[Type::scalar(U32)], I64, n, |a| {
            let s = a[0].clone() & 31u32;
            (E::from(i32::MIN) << s).cast(half).cast(I64)
        });
        check(
            &kernel,
            [1, 1, 1],
            &[buffer(U32, shifts.clone()), poison(I64, n as usize)],
        );
    }
}
