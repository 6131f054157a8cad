//! The CPU target against the reference interpreter: every kernel here runs on both,
//! and the buffers must agree bit for bit (NaNs compare equal whatever their payload:
//! neither the IR nor the hardware promises payloads).

mod common;

use common::*;
use kernelc_codegen::cpu::{self, AlignedBytes, CpuArg, CpuKernel, LaunchError};
use kernelc_codegen::CodegenError;
use kernelc_ir::args::ArgError;
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer, InterpError};
use kernelc_ir::testing;
use kernelc_ir::{Access, Kernel, MathFn, Scalar, ScalarType, Type};
use ScalarType::{Bf16, Bool, F16, F32, F64, I32, I64, U32};

fn compile(kernel: &Kernel) -> CpuKernel {
    match cpu::compile(kernel) {
        Ok(k) => k,
        Err(e) => panic!("cpu::compile failed: {e}\n{kernel}"),
    }
}

// ---------------------------------------------------------------------------------------
// Kernels from the schedules: vector add, reduction
// ---------------------------------------------------------------------------------------

const SIZES: [u32; 4] = [1, 7, 255, 1000];

/// Vector add as the CPU schedule writes it: one invocation per workgroup, each owning
/// a chunk of `chunk` items.
fn vec_add_chunked(n: u32, chunk: u32) -> Kernel {
    let mut k = KernelBuilder::new("vec_add_chunked", [1, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let c = k.buffer("c", F32, n as u64, Access::Write);
    k.build(|f| {
        let base = f.let_("base", workgroup_id(0) * chunk);
        let end = f.let_(
            "end",
            base.clone()
                .lt(n)
                .select(base.clone() + (E::from(n) - base.clone()).min(chunk), 0u32),
        );
        f.for_("i", base, end, 1, |f, i| {
            f.store(c, i.clone(), a.at(i.clone()) + b.at(i))
        });
    })
    .expect("valid")
}

/// Vector add with 64 invocations per workgroup and a bounds guard.
fn vec_add_wide(n: u32) -> Kernel {
    let mut k = KernelBuilder::new("vec_add_wide", [64, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let c = k.buffer("c", F32, n as u64, Access::Write);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.if_(i.clone().lt(n), |f| {
            f.store(c, i.clone(), a.at(i.clone()) + b.at(i))
        });
    })
    .expect("valid")
}

fn f32_args(n: u32, rng: &mut Lcg) -> Vec<Arg> {
    let a: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0).collect();
    vec![
        Arg::Buffer(HostBuffer::from_f32(&a)),
        Arg::Buffer(HostBuffer::from_f32(&b)),
        poison(F32, n as usize),
    ]
}

#[test]
fn vector_add_one_invocation_chunked() {
    let mut rng = Lcg(1);
    for n in SIZES {
        let chunk = 64;
        let args = f32_args(n, &mut rng);
        let want = check(&vec_add_chunked(n, chunk), [n.div_ceil(chunk), 1, 1], &args);
        // And against plain Rust.
        let (a, b) = (args[0].as_buffer().unwrap(), args[1].as_buffer().unwrap());
        let c = want[2].as_buffer().unwrap().to_f32();
        let (a, b) = (a.to_f32(), b.to_f32());
        assert_eq!(c.len(), n as usize);
        for (i, &ci) in c.iter().enumerate() {
            assert_eq!(ci, a[i] + b[i]);
        }
    }
}

#[test]
fn vector_add_64_invocations_without_barrier() {
    let mut rng = Lcg(2);
    for n in SIZES {
        let args = f32_args(n, &mut rng);
        check(&vec_add_wide(n), [n.div_ceil(64), 1, 1], &args);
    }
}

#[test]
fn vector_add_on_typed_slices() {
    let n = 1000u32;
    let k = compile(&vec_add_chunked(n, 64));
    let mut a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let mut c = vec![f32::NAN; n as usize];
    k.launch(
        [n.div_ceil(64), 1, 1],
        &mut [
            CpuArg::from_slice(&mut a),
            CpuArg::from_slice(&mut b),
            CpuArg::from_slice(&mut c),
        ],
    )
    .expect("launch");
    for (i, &ci) in c.iter().enumerate() {
        assert_eq!(ci, 1.5 * i as f32);
    }
}

/// Per workgroup (one invocation): copy a chunk of 16 into shared memory, barrier,
/// tree-reduce it there, write the sum.
fn shared_reduction(n: u32, ty: ScalarType) -> Kernel {
    const CHUNK: u32 = 16;
    let groups = n.div_ceil(CHUNK);
    let mut k = KernelBuilder::new("shared_reduction", [1, 1, 1]);
    let input = k.buffer("input", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, groups as u64, Access::Write);
    let sh = k.shared("sh", ty, CHUNK);
    k.build(|f| {
        let base = f.let_("base", workgroup_id(0) * CHUNK);
        f.for_("j", 0u32, CHUNK, 1, |f, j| {
            let g = f.let_("g", base.clone() + j.clone());
            f.if_else(
                g.clone().lt(n),
                |f| f.store(sh, j.clone(), input.at(g.clone())),
                |f| f.store(sh, j.clone(), lit(ty, 0.0)),
            );
        });
        f.barrier();
        for stride in [8u32, 4, 2, 1] {
            f.for_("s", 0u32, stride, 1, |f, s| {
                f.store(sh, s.clone(), sh.at(s.clone()) + sh.at(s + stride));
            });
            f.barrier();
        }
        f.store(out, workgroup_id(0), sh.at(0u32));
    })
    .expect("valid")
}

#[test]
fn shared_memory_reduction_one_invocation() {
    let mut rng = Lcg(3);
    for n in SIZES {
        for ty in [U32, F32, F64, F16] {
            let data = values(ty, n as usize, &mut rng)
                .into_iter()
                .map(|s| match s {
                    // Keep the sums finite and NaN-free so the result is informative.
                    Scalar::U32(v) => Scalar::U32(v % 1000),
                    _ => Scalar::from_f64(ty, (rng.f32() * 8.0) as f64),
                })
                .collect();
            let args = vec![buffer(ty, data), poison(ty, n.div_ceil(16) as usize)];
            check(&shared_reduction(n, ty), [n.div_ceil(16), 1, 1], &args);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Math functions, casts, integer ops, floats
// ---------------------------------------------------------------------------------------

#[test]
fn every_math_function_on_special_values() {
    let mut rng = Lcg(4);
    let shapes = [
        Type::F32,
        Type::F64,
        Type::vector(F32, 4),
        Type::vector(F64, 2),
        Type::vector(F64, 4),
        Type::vector(F32, 2),
        Type::F16,
        Type::BF16,
        Type::vector(F16, 4),
    ];
    for ty in shapes {
        for func in MathFn::ALL {
            let ins = vec![ty; func.arity()];
            let name = format!("math_{}_{}", func.name(), ty).replace(['<', '>'], "_");
            check_elementwise(&name, &ins, ty.scalar, 64, &mut rng, |args| {
                E(kernelc_ir::Expr::Math {
                    func,
                    args: args.into_iter().map(|a| a.0).collect(),
                })
            });
        }
    }
}

#[test]
fn integer_math_functions() {
    let mut rng = Lcg(5);
    for ty in [
        Type::I32,
        Type::U32,
        Type::I64,
        Type::vector(I32, 4),
        Type::vector(U32, 4),
        Type::vector(I64, 2),
        Type::vector(I64, 4),
        Type::vector(U32, 2),
    ] {
        for func in [MathFn::Abs, MathFn::Min, MathFn::Max] {
            let ins = vec![ty; func.arity()];
            check_elementwise("int_math", &ins, ty.scalar, 40, &mut rng, |args| {
                E(kernelc_ir::Expr::Math {
                    func,
                    args: args.into_iter().map(|a| a.0).collect(),
                })
            });
        }
    }
}

#[test]
fn every_cast_pair() {
    let mut rng = Lcg(6);
    for from in ScalarType::VALUES {
        for to in ScalarType::VALUES {
            for lanes in [1u8, 4] {
                let ty = Type::vector(from, lanes);
                check_elementwise("cast", &[ty], to, 200, &mut rng, |a| a[0].clone().cast(to));
            }
        }
    }
}

#[test]
fn every_bitcast_pair() {
    let mut rng = Lcg(7);
    for from in ScalarType::VALUES {
        for to in ScalarType::VALUES {
            if from == Bool || to == Bool || from.size_bytes() != to.size_bytes() {
                continue;
            }
            for lanes in [1u8, 2, 4] {
                let ty = Type::vector(from, lanes);
                check_elementwise("bitcast", &[ty], to, 50, &mut rng, |a| {
                    a[0].clone().bitcast(to)
                });
            }
        }
    }
}

/// Replaces zero divisors by 1 and shift amounts by `amount % bits`, which the IR
/// rejects at run time (tested separately).
fn sanitize_rhs(op: &str, ty: ScalarType, data: &mut [Scalar]) {
    for s in data.iter_mut() {
        *s = match (op, *s) {
            ("div" | "rem", Scalar::I32(0)) => Scalar::I32(1),
            ("div" | "rem", Scalar::U32(0)) => Scalar::U32(1),
            ("div" | "rem", Scalar::I64(0)) => Scalar::I64(1),
            ("shl" | "shr", Scalar::U32(a)) => Scalar::U32(a % (ty.size_bytes() * 8)),
            (_, other) => other,
        };
    }
}

#[test]
fn integer_operators_wrap() {
    let mut rng = Lcg(8);
    type Op = fn(E, E) -> E;
    let ops: [(&str, Op); 10] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("rem", |a, b| a % b),
        ("and", |a, b| a & b),
        ("or", |a, b| a | b),
        ("xor", |a, b| a ^ b),
        ("shl", |a, b| a << b),
        ("shr", |a, b| a >> b),
    ];
    for scalar in [I32, U32, I64] {
        for lanes in [1u8, 2, 4] {
            let ty = Type::vector(scalar, lanes);
            for (name, op) in ops {
                let shift = name.starts_with("sh");
                let rhs_ty = if shift { ty.with_scalar(U32) } else { ty };
                let n = 120u32;
                let count = n as usize * lanes as usize;
                let kernel = elementwise(name, &[ty, rhs_ty], scalar, n, |a| {
                    op(a[0].clone(), a[1].clone())
                });
                let lhs = values(scalar, count, &mut rng);
                let mut rhs = values(rhs_ty.scalar, count, &mut rng);
                rhs.rotate_left(5);
                sanitize_rhs(name, scalar, &mut rhs);
                let args = vec![
                    buffer(scalar, lhs),
                    buffer(rhs_ty.scalar, rhs),
                    poison(scalar, count),
                ];
                check(&kernel, [1, 1, 1], &args);
            }
        }
    }
    // Unary: negation, not.
    for ty in [
        Type::I32,
        Type::I64,
        Type::vector(I32, 4),
        Type::vector(I64, 2),
    ] {
        check_elementwise("neg", &[ty], ty.scalar, 40, &mut rng, |a| -a[0].clone());
    }
    for ty in [
        Type::U32,
        Type::I32,
        Type::I64,
        Type::vector(U32, 4),
        Type::vector(Bool, 4),
        Type::BOOL,
    ] {
        check_elementwise("not", &[ty], ty.scalar, 40, &mut rng, |a| !a[0].clone());
    }
}

#[test]
fn float_arithmetic_comparisons_and_select() {
    let mut rng = Lcg(9);
    type Op = fn(E, E) -> E;
    let ops: [(&str, Op); 5] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("rem", |a, b| a % b),
    ];
    type Cmp = fn(E, E) -> E;
    let cmps: [(&str, Cmp); 6] = [
        ("eq", |a, b| a.eq(b)),
        ("ne", |a, b| a.ne(b)),
        ("lt", |a, b| a.lt(b)),
        ("le", |a, b| a.le(b)),
        ("gt", |a, b| a.gt(b)),
        ("ge", |a, b| a.ge(b)),
    ];
    for scalar in [F32, F64, F16, Bf16] {
        for lanes in [1u8, 2, 4] {
            let ty = Type::vector(scalar, lanes);
            for (name, op) in ops {
                check_elementwise(name, &[ty, ty], scalar, 80, &mut rng, |a| {
                    op(a[0].clone(), a[1].clone())
                });
            }
            check_elementwise("neg", &[ty], scalar, 40, &mut rng, |a| -a[0].clone());
            for (name, cmp) in cmps {
                // The bool result, stored as u32 words.
                check_elementwise(name, &[ty, ty], Bool, 60, &mut rng, |a| {
                    cmp(a[0].clone(), a[1].clone())
                });
                // Through a lane-wise select (masks on SIMD types).
                check_elementwise(name, &[ty, ty], scalar, 60, &mut rng, |a| {
                    cmp(a[0].clone(), a[1].clone()).select(a[0].clone(), a[1].clone())
                });
            }
        }
    }
    for scalar in [I32, U32, I64] {
        for lanes in [1u8, 4] {
            let ty = Type::vector(scalar, lanes);
            for (name, cmp) in cmps {
                check_elementwise(name, &[ty, ty], scalar, 60, &mut rng, |a| {
                    cmp(a[0].clone(), a[1].clone()).select(a[0].clone(), a[1].clone())
                });
            }
        }
    }
}

#[test]
fn bool_vectors_masks_and_mixed_shapes() {
    let mut rng = Lcg(10);
    // Masks combined with &, |, ^, !, then used to select f64x4 (other mask shape) and
    // stored as bools.
    let f4 = Type::vector(F32, 4);
    let d4 = Type::vector(F64, 4);
    check_elementwise("mask_logic", &[f4, f4], Bool, 50, &mut rng, |a| {
        let m1 = a[0].clone().lt(a[1].clone());
        let m2 = a[0].clone().ne(a[1].clone());
        (m1.clone() & m2.clone()) ^ !(m1 | m2)
    });
    check_elementwise("mask_cross_select", &[f4, f4], F64, 50, &mut rng, |a| {
        let m = a[0].clone().ge(a[1].clone());
        m.select(a[0].clone().cast(F64), a[1].clone().cast(F64))
    });
    check_elementwise("d4_select", &[d4, d4], F64, 50, &mut rng, |a| {
        let m = a[0].clone().gt(a[1].clone()) | a[0].clone().eq(a[1].clone());
        m.select(a[0].clone(), a[1].clone())
    });
    // Scalar condition selecting vectors; splat, extract, vector construction.
    check_elementwise("scalar_cond", &[f4, f4], F32, 50, &mut rng, |a| {
        let c = a[0].clone().lane(2).lt(a[1].clone().lane(1));
        c.select(
            a[0].clone(),
            vector([
                a[1].clone().lane(3),
                a[0].clone().lane(0),
                E::from(1.5f32),
                a[1].clone().lane(0) * 2.0f32,
            ]),
        ) + E::from(0.25f32).splat(4)
    });
}

#[test]
fn half_precision_arithmetic_rounds_per_operation() {
    let mut rng = Lcg(11);
    for ty in [F16, Bf16] {
        for lanes in [1u8, 4] {
            let t = Type::vector(ty, lanes);
            check_elementwise("half_chain", &[t, t], ty, 100, &mut rng, |a| {
                ((a[0].clone() * a[1].clone()) + a[0].clone()).sqrt() / a[1].clone()
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// f16 / bf16 conversions against the `half` crate
// ---------------------------------------------------------------------------------------

#[test]
fn all_f16_patterns_round_trip_like_half() {
    common::all_f16_patterns_round_trip_like_half(true);
}

#[test]
fn all_bf16_patterns_round_trip_like_half() {
    common::all_bf16_patterns_round_trip_like_half(true);
}

#[test]
fn f32_and_f64_to_half_types_round_once_bit_for_bit() {
    common::f32_and_f64_to_half_types_round_once_bit_for_bit(true);
}

// ---------------------------------------------------------------------------------------
// Control flow, builtins, scalars
// ---------------------------------------------------------------------------------------

#[test]
fn builtins_on_a_3d_grid_with_3d_workgroups() {
    let wg = [2u32, 3, 2];
    let grid = [3u32, 2, 2];
    let total: u32 = (0..3).map(|a| wg[a] * grid[a]).product();
    let mut k = KernelBuilder::new("builtins", wg);
    let out = k.buffer("out", U32, total as u64 * 12, Access::Write);
    let kernel = k
        .build(|f| {
            let gx = wg[0] * grid[0];
            let gy = wg[1] * grid[1];
            let lin = f.let_(
                "lin",
                (global_id(2) * gy + global_id(1)) * gx + global_id(0),
            );
            let base = f.let_("base", lin * 12u32);
            for axis in 0..3u8 {
                let values = [
                    global_id(axis),
                    local_id(axis),
                    workgroup_id(axis),
                    num_workgroups(axis),
                ];
                for (j, v) in values.into_iter().enumerate() {
                    f.store(out, base.clone() + (axis as u32 * 4 + j as u32), v);
                }
            }
        })
        .expect("valid");
    check(&kernel, grid, &[poison(U32, total as usize * 12)]);
}

#[test]
fn loops_returns_and_scalar_parameters() {
    let mut k = KernelBuilder::new("control", [4, 1, 1]);
    let out = k.buffer("out", I32, 64, Access::ReadWrite);
    let lo = k.scalar("lo", I32);
    let hi = k.scalar("hi", I32);
    let scale = k.scalar("scale", F32);
    let flag = k.scalar("flag", Bool);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().ge(16u32), |f| f.ret());
            let acc = f.var("acc", 0i32);
            // A signed loop over a negative range, with an early return inside.
            f.for_("j", lo.clone(), hi.clone(), 3, |f, j| {
                f.if_(
                    j.clone().eq(i.clone().cast(I32) - 5i32) & flag.clone(),
                    |f| {
                        f.store(out, i.clone() * 4u32, acc.get());
                        f.ret();
                    },
                );
                f.assign(acc, acc.get() + j * 2i32);
            });
            f.store(out, i.clone() * 4u32 + 1u32, acc.get());
            f.store(
                out,
                i.clone() * 4u32 + 2u32,
                (scale.clone() * i.clone().cast(F32)).cast(I32),
            );
            // A u32 loop whose counter would wrap: ends instead.
            let n = f.var("n", 0i32);
            f.for_("u", 0xFFFF_FFF0u32, 0xFFFF_FFFFu32, 7, |f, _| {
                f.assign(n, n.get() + 1i32);
            });
            f.store(out, i * 4u32 + 3u32, n.get());
        })
        .expect("valid");
    for flag in [false, true] {
        let args = vec![
            poison(I32, 64),
            Arg::Scalar(Scalar::I32(-10)),
            Arg::Scalar(Scalar::I32(20)),
            Arg::Scalar(Scalar::f32(2.5)),
            Arg::Scalar(Scalar::Bool(flag)),
        ];
        check(&kernel, [5, 1, 1], &args);
    }
}

#[test]
fn vector_locals_loads_and_stores_of_every_type() {
    let mut rng = Lcg(13);
    for s in ScalarType::ALL {
        for lanes in [2u8, 4] {
            // Through a mutable vector local, assigned in a loop.
            let n = 16u32;
            let len = (n * lanes as u32) as u64;
            let mut k = KernelBuilder::new("vec_locals", [1, 1, 1]);
            let a = k.buffer("a", s, len, Access::Read);
            let out = k.buffer("out", s, len, Access::Write);
            let kernel = k
                .build(|f| {
                    let v = f.var("v", a.load(0u32, lanes));
                    f.for_("i", 0u32, n, 1, |f, i| {
                        let idx = f.let_("idx", i * lanes as u32);
                        let x = f.let_("x", a.load(idx.clone(), lanes));
                        f.store(out, idx, v.get());
                        f.assign(v, x);
                    });
                })
                .expect("valid");
            let args = vec![
                buffer(s, values(s, len as usize, &mut rng)),
                poison(s, len as usize),
            ];
            check(&kernel, [1, 1, 1], &args);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

#[test]
fn barrier_with_several_invocations_is_unsupported() {
    let mut k = KernelBuilder::new("barrier64", [64, 1, 1]);
    let out = k.buffer("out", F32, 64, Access::Write);
    let kernel = k
        .build(|f| {
            f.barrier();
            f.store(out, local_id(0), 1.0f32);
        })
        .expect("valid");
    match cpu::compile(&kernel) {
        Err(CodegenError::Unsupported { target, construct }) => {
            assert_eq!(target, "cpu");
            assert!(construct.contains("barrier"), "{construct}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(matches!(
        cpu::emit_object(&kernel),
        Err(CodegenError::Unsupported { .. })
    ));
}

#[test]
fn invalid_kernel_is_rejected() {
    let mut k = KernelBuilder::new("bad", [1, 1, 1]);
    let out = k.buffer("out", F32, 4, Access::Read);
    let mut kernel = k
        .build(|f| f.store(out, 0u32, out.at(1u32)))
        .unwrap_or_else(|_| {
            // The builder validates; build the invalid kernel by hand instead.
            Kernel {
                name: "bad".into(),
                workgroup_size: [1, 1, 1],
                params: vec![],
                shared: vec![],
                locals: vec![],
                fragments: vec![],
                body: vec![],
            }
        });
    kernel.workgroup_size = [0, 1, 1];
    assert!(matches!(
        cpu::compile(&kernel),
        Err(CodegenError::Invalid(_))
    ));
}

#[test]
fn argument_mismatches_are_typed_errors() {
    let mut k = KernelBuilder::new("args", [1, 1, 1]);
    let a = k.buffer("a", F32, 4, Access::Read);
    let b = k.buffer("b", I64, 4, Access::Write);
    let s = k.scalar("s", U32);
    let kernel = k
        .build(|f| {
            f.for_("i", 0u32, 4u32, 1, |f, i| {
                f.store(b, i.clone(), (a.at(i) * s.clone().cast(F32)).cast(I64))
            })
        })
        .expect("valid");
    let k = compile(&kernel);
    let mut fa = vec![1.0f32; 4];
    let mut fb = vec![0i64; 4];
    // Correct.
    k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::from_slice(&mut fa),
            CpuArg::from_slice(&mut fb),
            CpuArg::Scalar(Scalar::U32(3)),
        ],
    )
    .expect("launch");
    assert_eq!(fb, vec![3; 4]);
    // Count.
    let e = k.launch([1, 1, 1], &mut [CpuArg::from_slice(&mut fa)]);
    assert!(
        matches!(
            e,
            Err(LaunchError::Arg(ArgError::Count {
                expected: 3,
                found: 1,
                ..
            }))
        ),
        "{e:?}"
    );
    // Kind.
    let e = k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::Scalar(Scalar::f32(1.0)),
            CpuArg::from_slice(&mut fb),
            CpuArg::Scalar(Scalar::U32(3)),
        ],
    );
    assert!(
        matches!(
            e,
            Err(LaunchError::Arg(ArgError::Kind {
                index: 0,
                expected: "buffer",
                found: "scalar",
                ..
            }))
        ),
        "{e:?}"
    );
    // Element type.
    let mut wrong = vec![0u64 as f64; 2];
    let e = k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::from_slice(&mut fa),
            CpuArg::from_slice(&mut wrong),
            CpuArg::Scalar(Scalar::U32(3)),
        ],
    );
    assert!(
        matches!(
            e,
            Err(LaunchError::Arg(ArgError::Type {
                index: 1,
                expected: I64,
                found: F64,
                ..
            }))
        ),
        "{e:?}"
    );
    // Scalar type.
    let e = k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::from_slice(&mut fa),
            CpuArg::from_slice(&mut fb),
            CpuArg::Scalar(Scalar::I32(3)),
        ],
    );
    assert!(
        matches!(
            e,
            Err(LaunchError::Arg(ArgError::Type {
                index: 2,
                expected: U32,
                found: I32,
                ..
            }))
        ),
        "{e:?}"
    );
    // Length.
    let mut short = vec![0i64; 3];
    let e = k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::from_slice(&mut fa),
            CpuArg::from_slice(&mut short),
            CpuArg::Scalar(Scalar::U32(3)),
        ],
    );
    assert!(
        matches!(
            e,
            Err(LaunchError::Arg(ArgError::Length {
                index: 1,
                expected: 32,
                found: 24,
                ..
            }))
        ),
        "{e:?}"
    );
    // Alignment: 16 bytes for f32 starting at an odd address.
    let mut raw = AlignedBytes::zeroed(17);
    let e = k.launch(
        [1, 1, 1],
        &mut [
            CpuArg::buffer(F32, &mut raw.as_mut_bytes()[1..]),
            CpuArg::from_slice(&mut fb),
            CpuArg::Scalar(Scalar::U32(3)),
        ],
    );
    assert!(
        matches!(
            e,
            Err(LaunchError::ArgMisaligned {
                index: 0,
                align: 4,
                ..
            })
        ),
        "{e:?}"
    );
    // Grid too large for u32 global ids (checked before anything runs).
    let mut g = KernelBuilder::new("wide", [2, 1, 1]);
    let out = g.buffer("out", U32, 4, Access::Write);
    let wide = g
        .build(|f| f.store(out, 0u32, global_id(0)))
        .expect("valid");
    let mut o = vec![0u32; 4];
    let e = compile(&wide).launch([u32::MAX, 1, 1], &mut [CpuArg::from_slice(&mut o)]);
    assert!(matches!(e, Err(LaunchError::GridTooLarge { .. })), "{e:?}");
}

#[test]
fn out_of_bounds_accesses_are_reported_not_performed() {
    // out[i] = a[i + 1] over i < 8 with len 8: the last load is out of bounds.
    let mut k = KernelBuilder::new("oob", [1, 1, 1]);
    let a = k.buffer("a", F32, 8, Access::Read);
    let out = k.buffer("out", F32, 8, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", workgroup_id(0));
            f.store(out, i.clone(), a.at(i.clone() + 1u32));
        })
        .expect("valid");
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&[1.0; 8])), poison(F32, 8)];
    assert!(matches!(
        run(&kernel, [8, 1, 1], &mut args.clone()),
        Err(InterpError::OutOfBounds { .. })
    ));
    let e = compile(&kernel).launch_host([8, 1, 1], &mut args);
    assert_eq!(
        e,
        Err(LaunchError::OutOfBounds {
            kernel: "oob".into(),
            workgroup: [7, 1 - 1, 0],
            status: kernelc_codegen::abi::status::OUT_OF_BOUNDS,
        })
    );
    // A store out of bounds, with buffers surrounded by guard bytes that stay intact.
    let mut k = KernelBuilder::new("oob_store", [1, 1, 1]);
    let out = k.buffer("out", U32, 4, Access::Write);
    let kernel = k
        .build(|f| f.store(out, workgroup_id(0) * 1000u32, 7u32))
        .expect("valid");
    let k = compile(&kernel);
    let mut raw = AlignedBytes::zeroed(4 * 4 + 4096);
    let bytes = raw.as_mut_bytes();
    bytes.fill(0xAB);
    let e = k.launch([3, 1, 1], &mut [CpuArg::buffer(U32, &mut bytes[..16])]);
    assert!(matches!(e, Err(LaunchError::OutOfBounds { .. })), "{e:?}");
    assert!(
        bytes[16..].iter().all(|&b| b == 0xAB),
        "a guard byte was written"
    );
    assert_eq!(&bytes[..4], &7u32.to_le_bytes());
}

#[test]
fn unaligned_vector_access_is_reported() {
    let mut k = KernelBuilder::new("unaligned", [1, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let out = k.buffer("out", F32, 16, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", workgroup_id(0) * 2u32);
            f.store(out, i.clone(), a.load(i.clone(), 4).lane(0));
        })
        .expect("valid");
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&[1.0; 16])),
        poison(F32, 16),
    ];
    assert!(matches!(
        run(&kernel, [2, 1, 1], &mut args.clone()),
        Err(InterpError::UnalignedAccess { .. })
    ));
    let e = compile(&kernel).launch_host([2, 1, 1], &mut args);
    assert!(
        matches!(
            e,
            Err(LaunchError::UnalignedAccess {
                workgroup: [1, 0, 0],
                ..
            })
        ),
        "{e:?}"
    );
}

#[test]
fn division_by_zero_and_shift_overflow_are_reported_without_crashing() {
    for (name, ty, op) in [
        ("div_i32", I32, 0u8),
        ("rem_i32", I32, 1),
        ("div_u32", U32, 0),
        ("rem_i64", I64, 1),
        ("div_i64", I64, 0),
    ] {
        let mut k = KernelBuilder::new(name, [1, 1, 1]);
        let a = k.buffer("a", ty, 4, Access::Read);
        let b = k.buffer("b", ty, 4, Access::Read);
        let out = k.buffer("out", ty, 4, Access::Write);
        let kernel = k
            .build(|f| {
                let i = f.let_("i", workgroup_id(0));
                let (x, y) = (a.at(i.clone()), b.at(i.clone()));
                f.store(out, i, if op == 0 { x / y } else { x % y });
            })
            .expect("valid");
        let mut args = vec![
            buffer(ty, values(ty, 4, &mut Lcg(1)).into_iter().rev().collect()),
            buffer(
                ty,
                [3.0, 5.0, 0.0, 2.0]
                    .map(|v| Scalar::from_f64(ty, v))
                    .to_vec(),
            ),
            poison(ty, 4),
        ];
        assert!(matches!(
            run(&kernel, [4, 1, 1], &mut args.clone()),
            Err(InterpError::Eval { .. })
        ));
        let e = compile(&kernel).launch_host([4, 1, 1], &mut args);
        assert!(
            matches!(
                e,
                Err(LaunchError::DivisionByZero {
                    workgroup: [2, 0, 0],
                    ..
                })
            ),
            "{name}: {e:?}"
        );
    }
    // MIN / -1 and MIN % -1 wrap (no trap, no error).
    for ty in [I32, I64] {
        let min = if ty == I32 {
            Scalar::I32(i32::MIN)
        } else {
            Scalar::I64(i64::MIN)
        };
        let minus1 = Scalar::from_f64(ty, -1.0);
        for (name, f) in [
            ("div", (|x: E, y: E| x / y) as fn(E, E) -> E),
            ("rem", |x, y| x % y),
        ] {
            let kernel = elementwise(name, &[Type::scalar(ty); 2], ty, 1, |a| {
                f(a[0].clone(), a[1].clone())
            });
            check(
                &kernel,
                [1, 1, 1],
                &[
                    buffer(ty, vec![min]),
                    buffer(ty, vec![minus1]),
                    poison(ty, 1),
                ],
            );
        }
    }
    let kernel = elementwise("shift", &[Type::U32, Type::U32], U32, 2, |a| {
        a[0].clone() << a[1].clone()
    });
    let mut args = vec![
        buffer(U32, vec![Scalar::U32(1), Scalar::U32(1)]),
        buffer(U32, vec![Scalar::U32(31), Scalar::U32(32)]),
        poison(U32, 2),
    ];
    let e = compile(&kernel).launch_host([1, 1, 1], &mut args);
    assert!(matches!(e, Err(LaunchError::ShiftOverflow { .. })), "{e:?}");
}

/// Vector shifts by a literal amount take one packed shift per chunk (as exp's
/// exponent arithmetic does); they must equal the interpreter for every integer type,
/// signed (arithmetic) and unsigned (logical), at the edges of the range, and an
/// amount of the full width must still raise `ShiftOverflow`.
#[test]
fn vector_shifts_by_literal_amounts() {
    let mut rng = Lcg(21);
    for scalar in [I32, U32, I64] {
        let bits = scalar.size_bytes() * 8;
        for lanes in [2u8, 4] {
            let ty = Type::vector(scalar, lanes);
            for amount in [0, 1, 23, bits - 1] {
                let by = || lit(U32, f64::from(amount)).splat(lanes);
                check_elementwise("shl_lit", &[ty], scalar, 40, &mut rng, |a| {
                    a[0].clone() << by()
                });
                check_elementwise("shr_lit", &[ty], scalar, 40, &mut rng, |a| {
                    a[0].clone() >> by()
                });
            }
        }
    }
    let ty = Type::vector(I32, 4);
    let kernel = elementwise("shl_width", &[ty], I32, 1, |a| {
        a[0].clone() << lit(U32, 32.0).splat(4)
    });
    let mut args = vec![buffer(I32, vec![Scalar::I32(1); 4]), poison(I32, 4)];
    let e = compile(&kernel).launch_host([1, 1, 1], &mut args);
    assert!(matches!(e, Err(LaunchError::ShiftOverflow { .. })), "{e:?}");
}

// ---------------------------------------------------------------------------------------
// Object files and CLIF
// ---------------------------------------------------------------------------------------

#[test]
fn object_file_is_elf_and_exports_the_kernel() {
    let kernel = elementwise("my-kernel.v2", &[Type::F32], F32, 4, |a| a[0].clone().exp());
    let obj = cpu::emit_object(&kernel).expect("object");
    if cfg!(target_os = "linux") {
        assert_eq!(&obj[..4], b"\x7fELF");
    }
    let symbol = cpu::symbol_name(&kernel);
    assert_eq!(symbol, "my_kernel_v2");
    let contains = |needle: &[u8]| obj.windows(needle.len()).any(|w| w == needle);
    assert!(
        contains(symbol.as_bytes()),
        "the kernel symbol is in the object"
    );
    assert!(contains(b"kernelc_cpu_exp_f32"), "the helper is imported");
    let text = cpu::emit_clif(&kernel).expect("clif");
    assert!(text.contains("call"), "{text}");
}

#[test]
fn kernels_can_be_launched_from_several_threads_at_once() {
    let n = 4096u32;
    let k = compile(&vec_add_chunked(n, 64));
    std::thread::scope(|s| {
        for t in 0..3 {
            let k = &k;
            s.spawn(move || {
                let mut a: Vec<f32> = (0..n).map(|i| (i + t) as f32).collect();
                let mut b = vec![1.0f32; n as usize];
                let mut c = vec![0.0f32; n as usize];
                k.launch(
                    [n / 64, 1, 1],
                    &mut [
                        CpuArg::from_slice(&mut a),
                        CpuArg::from_slice(&mut b),
                        CpuArg::from_slice(&mut c),
                    ],
                )
                .expect("launch");
                assert!(c
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == (i as u32 + t) as f32 + 1.0));
            });
        }
    });
}

// ---------------------------------------------------------------------------------------
// Random kernels: interpreter vs JIT
// ---------------------------------------------------------------------------------------

/// Random kernels of `kernelc_ir::testing` run on the interpreter and the JIT (in the
/// spirit of Cranelift's interpreter-vs-native fuzzing) and compared by the one rule,
/// `testing::compare`: the same outputs, or the same run-time error.
mod fuzz {
    use super::*;
    use kernelc_codegen::abi::status;
    use kernelc_ir::testing::{Case, FaultKind, Faults, GenConfig, Outcome, Shape};
    use proptest::prelude::*;

    /// The faults a status word reports.
    fn faults(bits: u32) -> Faults {
        [
            (status::OUT_OF_BOUNDS, FaultKind::OutOfBounds),
            (status::UNALIGNED, FaultKind::Unaligned),
            (status::DIVISION_BY_ZERO, FaultKind::DivisionByZero),
            (status::SHIFT_OVERFLOW, FaultKind::ShiftOverflow),
        ]
        .into_iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, kind)| kind)
        .collect()
    }

    /// What the CPU target compiles: everything but barriers, which it supports only in
    /// workgroups of one invocation (it runs a workgroup's invocations one after the
    /// other).
    fn cpu() -> GenConfig {
        GenConfig {
            barriers: false,
            ..GenConfig::full()
        }
    }

    /// Barriers, in workgroups of one invocation.
    fn cpu_with_barriers() -> GenConfig {
        GenConfig {
            workgroup_size: 1,
            grid: 4,
            ..GenConfig::full()
        }
    }

    fn check(case: &Case) -> Result<(), TestCaseError> {
        let kernel = &case.kernel;
        let fail = |what: String| TestCaseError::fail(format!("{what}\n{case:?}"));
        if let Err(e) = kernelc_ir::validate(kernel) {
            return Err(fail(format!("generator bug: invalid kernel: {e}")));
        }
        let want = case
            .run_interpreter()
            .outcome()
            .map_err(|e| fail(format!("generator bug: {e}")))?;
        let compiled = cpu::compile(kernel).map_err(|e| fail(format!("compile failed: {e}")))?;
        let mut args = case.args.clone();
        let got = match compiled.launch_host(case.grid, &mut args) {
            Ok(()) => Outcome::of_target(Faults::NONE, &args),
            Err(e) if e.status() != 0 => Outcome::of_target(faults(e.status()), &args),
            Err(e) => return Err(fail(format!("launch failed: {e}"))),
        };
        testing::compare(&want, &got).map_err(|m| fail(m.to_string()))
    }

    proptest! {
        #![proptest_config(testing::proptest_config(300))]

        #[test]
        fn random_kernels_agree_with_the_interpreter(
            case in testing::cases(&cpu(), Shape::Statements)
        ) {
            check(&case)?;
        }

        #[test]
        fn random_expressions_agree_with_the_interpreter(
            case in testing::cases(&cpu(), Shape::Expression)
        ) {
            check(&case)?;
        }

        #[test]
        fn random_kernels_with_barriers_agree_with_the_interpreter(
            case in testing::cases(&cpu_with_barriers(), Shape::Statements)
        ) {
            check(&case)?;
        }
    }
}

#[test]
fn raw_launch_and_host_description() {
    let desc = cpu::host_isa_description();
    assert!(desc.starts_with(std::env::consts::ARCH), "{desc}");
    let n = 256u32;
    let k = compile(&vec_add_chunked(n, 64));
    let mut a = AlignedBytes::zeroed(n as usize * 4);
    let mut b = AlignedBytes::zeroed(n as usize * 4);
    let mut c = AlignedBytes::zeroed(n as usize * 4);
    for (i, w) in a.as_mut_bytes().chunks_exact_mut(4).enumerate() {
        w.copy_from_slice(&(i as f32).to_le_bytes());
    }
    for w in b.as_mut_bytes().chunks_exact_mut(4) {
        w.copy_from_slice(&2.0f32.to_le_bytes());
    }
    let raw = |x: &mut AlignedBytes| cpu::RawArg::Buffer {
        ptr: x.as_mut_bytes().as_mut_ptr(),
        bytes: x.len(),
    };
    let args = [raw(&mut a), raw(&mut b), raw(&mut c)];
    // SAFETY: the three buffers are distinct, live for the call and hold n f32s.
    unsafe { k.launch_raw([n / 64, 1, 1], &args) }.expect("launch");
    let out = c.to_host(F32).to_f32();
    assert!(out.iter().enumerate().all(|(i, &v)| v == i as f32 + 2.0));
    // Checked like `launch`: a short buffer is a typed error, not a wild write.
    let short = [
        raw(&mut a),
        raw(&mut b),
        cpu::RawArg::Buffer {
            ptr: c.as_mut_bytes().as_mut_ptr(),
            bytes: 16,
        },
    ];
    // SAFETY: as above; the call is refused before running.
    let e = unsafe { k.launch_raw([n / 64, 1, 1], &short) };
    assert!(
        matches!(e, Err(LaunchError::Arg(ArgError::Length { index: 2, .. }))),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Float `%` expanded to integer IR (the GPU targets' form), JIT-compiled
// ---------------------------------------------------------------------------------------

/// `out[i] = a[i] % b[i]` for `n` elements of `ty`, with float `%` expanded into
/// kernelc's exact integer long division (as every GPU target compiles it), on the CPU.
fn expanded_rem(ty: ScalarType, n: u32) -> CpuKernel {
    let mut k = KernelBuilder::new("rem", [1, 1, 1]);
    let a = k.buffer("a", ty, n as u64, Access::Read);
    let b = k.buffer("b", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, n as u64, Access::Write);
    let chunk = 1024u32;
    let kernel = k
        .build(|f| {
            let start = f.let_("start", workgroup_id(0) * chunk);
            f.for_("i", start.clone(), (start + chunk).min(n), 1, |f, i| {
                f.store(out, i.clone(), a.at(i.clone()) % b.at(i));
            });
        })
        .expect("valid kernel");
    let opts = kernelc_ir::passes::MathExpansion::none().with_float_rem(true);
    let expanded = kernelc_ir::passes::for_target(&kernel, &opts);
    // The CPU could compile `%` natively: make sure it is the expansion that runs.
    let text = format!("{expanded}");
    assert!(!text.contains(" % ") && text.contains("for "), "{text}");
    compile(&expanded)
}

/// Random pairs: half of random bits (every exponent difference), half of nearby
/// magnitudes (long quotients of few bits), every sign.
fn rem_pairs<T>(
    n: usize,
    bits: impl Fn(u64) -> T,
    near: impl Fn(u64, u64) -> (T, T),
) -> (Vec<T>, Vec<T>) {
    let mut rng = Lcg(0x5eed_f00d);
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            a.push(bits(rng.next_u64()));
            b.push(bits(rng.next_u64()));
        } else {
            let (x, y) = near(rng.next_u64(), rng.next_u64());
            a.push(x);
            b.push(y);
        }
    }
    (a, b)
}

/// Runs the expanded `%` on the CPU over `(a, b)` and compares every result with
/// Rust's `%` (C `fmod`): the same bits, or NaN for NaN.
fn check_expanded_rem<T>(mut a: Vec<T>, mut b: Vec<T>, same: impl Fn(T, T) -> bool)
where
    T: kernelc_codegen::cpu::Element + Default + std::ops::Rem<Output = T> + std::fmt::LowerExp,
{
    let n = a.len();
    let mut out = vec![T::default(); n];
    expanded_rem(T::TYPE, n as u32)
        .launch(
            [(n as u32).div_ceil(1024), 1, 1],
            &mut [
                CpuArg::from_slice(&mut a),
                CpuArg::from_slice(&mut b),
                CpuArg::from_slice(&mut out),
            ],
        )
        .expect("launch");
    for i in 0..n {
        let want = a[i] % b[i];
        assert!(
            same(out[i], want),
            "{} {:e} % {:e}: got {:e}, want {want:e}",
            T::TYPE,
            a[i],
            b[i],
            out[i]
        );
    }
}

/// Millions of pairs through the JIT-compiled expansion, bit for bit against Rust's `%`
/// (C `fmod`; any NaN for a NaN). The interpreter-level tests in
/// `ir/tests/fmod_expansion.rs` cover every pair of special values.
#[test]
fn expanded_float_rem_matches_fmod_on_millions_of_pairs() {
    let (a, b) = rem_pairs(
        1 << 21,
        |r| f32::from_bits(r as u32),
        |r, s| {
            let y = f32::from_bits((r as u32) & 0xbfff_ffff);
            (y * (1.0 + (s % 100_000) as f32 / 7.0), y)
        },
    );
    check_expanded_rem(a, b, |x: f32, y: f32| {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    });
    let (a, b) = rem_pairs(1 << 18, f64::from_bits, |r, s| {
        let y = f64::from_bits(r & 0xbfff_ffff_ffff_ffff);
        (y * (1.0 + (s % 10_000_000) as f64 / 3.0), y)
    });
    check_expanded_rem(a, b, |x: f64, y: f64| {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    });
}
