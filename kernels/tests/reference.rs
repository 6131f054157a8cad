//! Hand-computed small cases for every op family, adjointness and finite-difference
//! checks for the backward ops, and the JSON round trip of every OpSpec variant.

use kernelc_ir::ScalarType::*;
use kernelc_kernels::rng::{self, pcg_hash, RngScheme};
use kernelc_kernels::*;

fn run(spec: &OpSpec, inputs: &[&[f64]]) -> Vec<Vec<f64>> {
    reference(spec, inputs).unwrap_or_else(|e| panic!("{}: {e}", spec.name()))
}

fn run1(spec: &OpSpec, inputs: &[&[f64]]) -> Vec<f64> {
    run(spec, inputs).remove(0)
}

#[track_caller]
fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "length: got {got:?}, want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w} (got {got:?})"
        );
    }
}

/// Deterministic values in [-1, 1).
fn rnd(n: usize, salt: u32) -> Vec<f64> {
    (0..n)
        .map(|i| rng::uniform(pcg_hash(i as u32 ^ pcg_hash(salt))) * 2.0 - 1.0)
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Checks `grad` against central differences of `L(x) = Σ f(x) ⊙ r`.
#[track_caller]
fn check_grad(f: impl Fn(&[f64]) -> Vec<f64>, x: &[f64], r: &[f64], grad: &[f64], tol: f64) {
    let h = 1e-6;
    for k in 0..x.len() {
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[k] += h;
        xm[k] -= h;
        let num = (dot(&f(&xp), r) - dot(&f(&xm), r)) / (2.0 * h);
        assert!(
            (num - grad[k]).abs() <= tol * (1.0 + num.abs()),
            "d/dx[{k}]: numeric {num}, analytic {}",
            grad[k]
        );
    }
}

// ---------------------------------------------------------------- GEMM

const A: [f64; 4] = [1.0, 2.0, 3.0, 4.0];
const B: [f64; 4] = [5.0, 6.0, 7.0, 8.0];

#[test]
fn gemm_2x2_plain_and_transposes() {
    let g = GemmSpec::new(F32, 2, 2, 2);
    close(
        &run1(&OpSpec::Gemm(g.clone()), &[&A, &B]),
        &[19., 22., 43., 50.],
        0.0,
    );
    let mut ta = g.clone();
    ta.trans_a = true;
    close(
        &run1(&OpSpec::Gemm(ta), &[&A, &B]),
        &[26., 30., 38., 44.],
        0.0,
    );
    let mut tb = g.clone();
    tb.trans_b = true;
    close(
        &run1(&OpSpec::Gemm(tb), &[&A, &B]),
        &[17., 23., 39., 53.],
        0.0,
    );
    let mut both = g;
    both.trans_a = true;
    both.trans_b = true;
    // Aᵀ Bᵀ = (B A)ᵀ; B A = [[23, 34], [31, 46]].
    close(
        &run1(&OpSpec::Gemm(both), &[&A, &B]),
        &[23., 31., 34., 46.],
        0.0,
    );
}

#[test]
fn gemm_alpha_beta_bias() {
    let mut g = GemmSpec::new(F64, 2, 2, 2);
    g.alpha = 2.0;
    g.beta = 0.5;
    let spec = OpSpec::Gemm(g.clone());
    assert_eq!(
        spec.inputs()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert_eq!(
        spec.aliases(),
        vec![Alias {
            input: 2,
            output: 0
        }]
    );
    close(
        &run1(&spec, &[&A, &B, &[1.0; 4]]),
        &[38.5, 44.5, 86.5, 100.5],
        0.0,
    );
    let mut b = GemmSpec::new(F32, 2, 2, 2);
    b.bias = true;
    close(
        &run1(&OpSpec::Gemm(b), &[&A, &B, &[10.0, 20.0]]),
        &[29., 42., 53., 70.],
        0.0,
    );
}

#[test]
fn gemm_column_major_with_leading_dimension() {
    // The same logical matrices stored column-major.
    let mut g = GemmSpec::new(F64, 2, 2, 2);
    g.layout = Layout::ColMajor;
    let (a_cm, b_cm) = ([1.0, 3.0, 2.0, 4.0], [5.0, 7.0, 6.0, 8.0]);
    close(
        &run1(&OpSpec::Gemm(g.clone()), &[&a_cm, &b_cm]),
        &[19., 43., 22., 50.],
        0.0,
    );
    // lda = 3: one padding element between the columns of A.
    g.lda = Some(3);
    let spec = OpSpec::Gemm(g);
    assert_eq!(spec.inputs()[0].shape, vec![5]);
    let a_pad = [1.0, 3.0, 99.0, 2.0, 4.0];
    close(&run1(&spec, &[&a_pad, &b_cm]), &[19., 43., 22., 50.], 0.0);
}

#[test]
fn gemm_strided_batch_with_broadcast_operand() {
    let mut g = GemmSpec::new(F32, 2, 2, 2);
    g.batch = vec![2];
    g.stride_b = Some(vec![0]); // one B for both batches
    let spec = OpSpec::Gemm(g);
    spec.validate().unwrap();
    let a: Vec<f64> = A
        .iter()
        .chain(A.iter().map(|v| v * 2.0).collect::<Vec<_>>().iter())
        .copied()
        .collect();
    close(
        &run1(&spec, &[&a, &B]),
        &[19., 22., 43., 50., 38., 44., 86., 100.],
        0.0,
    );
}

#[test]
fn gemm_input_rounding_to_f16() {
    let mut g = GemmSpec::new(F32, 1, 1, 1);
    let a = [1.0 + 2f64.powi(-12)]; // not an f16: rounds to 1.0
    close(&run1(&OpSpec::Gemm(g.clone()), &[&a, &[1.0]]), &a, 0.0);
    g.input_rounding = Some(InputRounding::F16);
    close(&run1(&OpSpec::Gemm(g), &[&a, &[1.0]]), &[1.0], 0.0);
}

// ---------------------------------------------------------------- elementwise

#[test]
fn broadcasting_2x1_by_3() {
    let spec = OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: F32,
        lhs: vec![2, 1],
        rhs: vec![3],
        out_dtype: None,
    });
    assert_eq!(spec.outputs()[0].shape, vec![2, 3]);
    close(
        &run1(&spec, &[&[10.0, 20.0], &[1.0, 2.0, 3.0]]),
        &[11., 12., 13., 21., 22., 23.],
        0.0,
    );
}

#[test]
fn binary_functions_and_integer_rules() {
    let f = |func, dtype, a: f64, b: f64| {
        run1(
            &OpSpec::Binary(BinarySpec {
                func,
                dtype,
                lhs: vec![1],
                rhs: vec![1],
                out_dtype: None,
            }),
            &[&[a], &[b]],
        )[0]
    };
    assert_eq!(f(BinaryFn::Div, I32, -7.0, 2.0), -3.0);
    assert_eq!(f(BinaryFn::Mod, I32, -7.0, 2.0), -1.0);
    assert_eq!(f(BinaryFn::Div, I32, 7.0, 0.0), 0.0);
    assert_eq!(f(BinaryFn::Add, I32, i32::MAX as f64, 1.0), i32::MIN as f64);
    assert_eq!(f(BinaryFn::Sub, U32, 0.0, 1.0), u32::MAX as f64);
    assert_eq!(f(BinaryFn::Mod, F32, -7.5, 2.0), -1.5);
    assert_eq!(f(BinaryFn::Pow, F32, 2.0, 10.0), 1024.0);
    assert_eq!(f(BinaryFn::Max, F32, f64::NAN, 1.0), 1.0);
    assert_eq!(f(BinaryFn::Min, F32, 3.0, f64::NAN), 3.0);
    assert_eq!(f(BinaryFn::Lt, F32, 1.0, 2.0), 1.0);
    assert_eq!(f(BinaryFn::Ge, F32, 1.0, 2.0), 0.0);
    assert_eq!(f(BinaryFn::Eq, F32, f64::NAN, f64::NAN), 0.0);
    assert_eq!(f(BinaryFn::Ne, F32, f64::NAN, f64::NAN), 1.0);
    // silu(1) = σ(1) as the f32 the kernel holds (docs/ops.md, "Special values"), times 2.
    close(
        &[f(BinaryFn::SiluMul, F32, 1.0, 2.0)],
        &[2.0 * (0.7310585786300049f64 as f32) as f64],
        1e-15,
    );
    close(
        &[f(BinaryFn::SiluMul, F64, 1.0, 2.0)],
        &[2.0 * 0.7310585786300049],
        1e-15,
    );
}

#[test]
fn scalar_where_cast_fill() {
    let s = OpSpec::Scalar(ScalarSpec {
        func: BinaryFn::Sub,
        dtype: F32,
        shape: vec![3],
        scalar: 10.0,
        reversed: true,
        out_dtype: None,
    });
    close(&run1(&s, &[&[1.0, 2.0, 3.0]]), &[9., 8., 7.], 0.0);

    let w = OpKind::Where.example(); // cond [2,1], a [2,3], b [3]
    close(
        &run1(
            &w,
            &[&[1.0, 0.0], &[1., 2., 3., 4., 5., 6.], &[-1., -2., -3.]],
        ),
        &[1., 2., 3., -1., -2., -3.],
        0.0,
    );

    let cast = |to, x: f64| {
        run1(
            &OpSpec::Cast(CastSpec {
                from: F64,
                to,
                shape: vec![1],
            }),
            &[&[x]],
        )[0]
    };
    assert_eq!(cast(I32, -2.7), -2.0);
    assert_eq!(cast(I32, 1e20), i32::MAX as f64);
    assert_eq!(cast(U32, -5.0), 0.0);
    assert_eq!(cast(I32, f64::NAN), 0.0);
    assert_eq!(cast(F16, 1.0 + 2f64.powi(-12)), 1.0);
    assert_eq!(cast(Bf16, 1.0 + 2f64.powi(-9)), 1.0);
    assert_eq!(cast(F32, 0.1), 0.1f32 as f64);
    assert_eq!(cast(Bool, f64::NAN), 1.0);

    let fill = OpSpec::Fill(FillSpec {
        dtype: F32,
        shape: vec![2, 2],
        value: FillValue::Constant { value: 0.1 },
        offset: 0,
    });
    assert_eq!(run1(&fill, &[]), vec![0.1f32 as f64; 4]);
}

#[test]
fn random_fills_are_deterministic_and_distributed() {
    let n = 100_000;
    let normal = |step| {
        OpSpec::Fill(FillSpec {
            dtype: F32,
            shape: vec![n],
            value: FillValue::Normal {
                mean: 0.0,
                std: 1.0,
                seed: 3,
                step,
            },
            offset: 0,
        })
    };
    let a = run1(&normal(0), &[]);
    assert_eq!(a, run1(&normal(0), &[]));
    assert_ne!(a, run1(&normal(1), &[]));
    let mean = a.iter().sum::<f64>() / n as f64;
    let var = a.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    assert!(mean.abs() < 0.02, "mean {mean}");
    assert!((var - 1.0).abs() < 0.02, "var {var}");
    let u = run1(
        &OpSpec::Fill(FillSpec {
            dtype: F32,
            shape: vec![n],
            value: FillValue::Uniform {
                low: 2.0,
                high: 4.0,
                seed: 1,
                step: 9,
            },
            offset: 0,
        }),
        &[],
    );
    assert!(u.iter().all(|&v| (2.0..4.0).contains(&v)));
    let m = u.iter().sum::<f64>() / n as f64;
    assert!((m - 3.0).abs() < 0.01, "uniform mean {m}");
}

#[test]
fn unary_functions() {
    let f = |func, x: f64| UnaryFn::eval(&func, x);
    assert_eq!(f(UnaryFn::Round, 2.5), 2.0);
    assert_eq!(f(UnaryFn::Round, -0.5), -0.0);
    assert_eq!(f(UnaryFn::Round, 3.5), 4.0);
    assert_eq!(f(UnaryFn::Rsqrt, 4.0), 0.5);
    assert_eq!(f(UnaryFn::LeakyRelu { slope: 0.1 }, -2.0), -0.2);
    assert_eq!(f(UnaryFn::Relu, -3.0), 0.0);
    close(&[f(UnaryFn::Sigmoid, 0.0)], &[0.5], 0.0);
    close(&[f(UnaryFn::Silu, 1.0)], &[0.7310585786300049], 1e-15);
    let spec = OpSpec::Unary(UnarySpec {
        func: UnaryFn::Neg,
        dtype: I32,
        shape: vec![2],
    });
    assert_eq!(
        run1(&spec, &[&[i32::MIN as f64, 5.0]]),
        vec![i32::MIN as f64, -5.0]
    );
}

#[test]
fn gelu_values_at_known_points() {
    close(&[UnaryFn::GeluErf.eval(1.0)], &[0.8413447460685429], 1e-15);
    close(&[UnaryFn::GeluTanh.eval(1.0)], &[0.8411919906082768], 1e-15);
    close(
        &[UnaryFn::GeluErf.eval(-1.0)],
        &[-0.15865525393145707],
        1e-15,
    );
    assert_eq!(UnaryFn::GeluErf.eval(0.0), 0.0);
}

#[test]
fn activation_backward_matches_finite_differences() {
    let x = rnd(9, 1);
    let dy = rnd(9, 2);
    for func in [
        UnaryFn::Relu,
        UnaryFn::LeakyRelu { slope: 0.2 },
        UnaryFn::Sigmoid,
        UnaryFn::Tanh,
        UnaryFn::GeluErf,
        UnaryFn::GeluTanh,
        UnaryFn::Silu,
    ] {
        let fwd = OpSpec::Unary(UnarySpec {
            func,
            dtype: F32,
            shape: vec![9],
        });
        let bwd = OpSpec::ActivationBackward(ActivationBackwardSpec {
            func: func.activation().expect("an activation"),
            dtype: F32,
            shape: vec![9],
        });
        let y = run1(&fwd, &[&x]);
        let saved = if func.backward_saves() == Some(Saved::Output) {
            assert_eq!(bwd.inputs()[0].name, "y");
            y
        } else {
            assert_eq!(bwd.inputs()[0].name, "x");
            x.clone()
        };
        let dx = run1(&bwd, &[&saved, &dy]);
        check_grad(|v| run1(&fwd, &[v]), &x, &dy, &dx, 1e-6);
    }
}

// ---------------------------------------------------------------- reductions, softmax

#[test]
fn reductions_along_each_axis() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let red = |func, axes: Vec<usize>, keepdim| {
        let index_dtype = if matches!(func, ReduceFn::ArgMax | ReduceFn::ArgMin) {
            Some(U32)
        } else {
            None
        };
        let spec = OpSpec::Reduce(ReduceSpec {
            func,
            dtype: F32,
            shape: vec![2, 3],
            axes,
            keepdim,
            index_dtype,
            accumulate: false,
        });
        (spec.outputs()[0].shape.clone(), run1(&spec, &[&x]))
    };
    assert_eq!(
        red(ReduceFn::Sum, vec![0], false),
        (vec![3], vec![5., 7., 9.])
    );
    assert_eq!(
        red(ReduceFn::Sum, vec![1], true),
        (vec![2, 1], vec![6., 15.])
    );
    assert_eq!(red(ReduceFn::Sum, vec![0, 1], false), (vec![], vec![21.]));
    assert_eq!(red(ReduceFn::Mean, vec![1], false).1, vec![2., 5.]);
    assert_eq!(red(ReduceFn::Max, vec![0], false).1, vec![4., 5., 6.]);
    assert_eq!(red(ReduceFn::Min, vec![1], false).1, vec![1., 4.]);
    assert_eq!(red(ReduceFn::ArgMax, vec![1], false).1, vec![2., 2.]);
    assert_eq!(red(ReduceFn::ArgMin, vec![0, 1], false).1, vec![0.]);
    assert_eq!(red(ReduceFn::ArgMax, vec![0, 1], false).1, vec![5.]);

    // The middle axis of a 3-D tensor, and accumulation into a prior output.
    let spec = OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::Sum,
        dtype: F32,
        shape: vec![2, 2, 2],
        axes: vec![1],
        keepdim: false,
        index_dtype: None,
        accumulate: true,
    });
    let x3: Vec<f64> = (1..=8).map(f64::from).collect();
    // [[1,2],[3,4]] -> [4,6]; [[5,6],[7,8]] -> [12,14]; plus prior 100.
    assert_eq!(
        run1(&spec, &[&x3, &[100.0; 4]]),
        vec![104., 106., 112., 114.]
    );
}

#[test]
fn softmax_of_1_2_3() {
    let spec = |log| {
        OpSpec::Softmax(SoftmaxSpec {
            dtype: F32,
            shape: vec![3],
            axis: 0,
            log,
        })
    };
    let x = [1.0, 2.0, 3.0];
    let y = run1(&spec(false), &[&x]);
    close(
        &y,
        &[0.09003057317038046, 0.24472847105479764, 0.6652409557748219],
        1e-15,
    );
    let lse = 3.0 + (1.0 + (-1f64).exp() + (-2f64).exp()).ln();
    close(
        &run1(&spec(true), &[&x]),
        &[1.0 - lse, 2.0 - lse, 3.0 - lse],
        1e-15,
    );
    // Along axis 0 of a [2, 2]: columns are independent.
    let col = OpSpec::Softmax(SoftmaxSpec {
        dtype: F32,
        shape: vec![2, 2],
        axis: 0,
        log: false,
    });
    let y = run1(&col, &[&[0.0, 5.0, 0.0, 5.0]]);
    close(&y, &[0.5, 0.5, 0.5, 0.5], 1e-15);
    // Fully masked slice gives zeros.
    let y = run1(&spec(false), &[&[f64::NEG_INFINITY; 3]]);
    assert_eq!(y, vec![0.0; 3]);
}

#[test]
fn softmax_backward_matches_finite_differences() {
    for log in [false, true] {
        let shape = vec![2, 4];
        let fwd = OpSpec::Softmax(SoftmaxSpec {
            dtype: F32,
            shape: shape.clone(),
            axis: 1,
            log,
        });
        let bwd = OpSpec::SoftmaxBackward(SoftmaxBackwardSpec {
            dtype: F32,
            shape,
            axis: 1,
            log,
        });
        let x = rnd(8, 3);
        let dy = rnd(8, 4);
        let y = run1(&fwd, &[&x]);
        let dx = run1(&bwd, &[&y, &dy]);
        check_grad(|v| run1(&fwd, &[v]), &x, &dy, &dx, 1e-6);
    }
}

// ---------------------------------------------------------------- norms

#[test]
fn layer_norm_of_a_small_row() {
    let spec = OpSpec::LayerNorm(LayerNormSpec {
        dtype: F32,
        shape: vec![1, 4],
        eps: 0.0,
        rms: false,
        weight: true,
        bias: true,
        residual: false,
        save_stats: true,
        epilogue: None,
    });
    let out = run(
        &spec,
        &[&[1., 2., 3., 4.], &[1., 2., 1., 1.], &[0., 0., 1., 0.]],
    );
    let r = 1.0 / 1.25f64.sqrt();
    close(
        &out[0],
        &[-1.5 * r, -0.5 * 2.0 * r, 0.5 * r + 1.0, 1.5 * r],
        1e-15,
    );
    close(&out[1], &[2.5, r], 1e-15);

    // RMS norm with residual: normalises x + residual.
    let rms = OpSpec::LayerNorm(LayerNormSpec {
        dtype: F32,
        shape: vec![2],
        eps: 0.0,
        rms: true,
        weight: false,
        bias: false,
        residual: true,
        save_stats: false,
        epilogue: None,
    });
    let out = run(&rms, &[&[1.0, 2.0], &[2.0, 2.0]]);
    let r = 1.0 / 12.5f64.sqrt(); // mean of [9, 16] = 12.5
    close(&out[0], &[3.0 * r, 4.0 * r], 1e-15);
    close(&out[1], &[3.0, 4.0], 0.0);
}

#[test]
fn layer_norm_backward_matches_finite_differences() {
    for rms in [false, true] {
        let shape = vec![3, 5];
        let fwd = OpSpec::LayerNorm(LayerNormSpec {
            dtype: F32,
            shape: shape.clone(),
            eps: 1e-3,
            rms,
            weight: true,
            bias: true,
            residual: false,
            save_stats: true,
            epilogue: None,
        });
        let bwd = OpSpec::LayerNormBackward(LayerNormBackwardSpec {
            dtype: F32,
            shape,
            rms,
            weight: true,
            bias: true,
            param_grads: true,
        });
        let (x, w, b, dy) = (rnd(15, 5), rnd(5, 6), rnd(5, 7), rnd(15, 8));
        let fw = run(&fwd, &[&x, &w, &b]);
        let g = run(&bwd, &[&dy, &x, &w, &fw[1]]);
        check_grad(|v| run1(&fwd, &[v, &w, &b]), &x, &dy, &g[0], 1e-5);
        check_grad(|v| run1(&fwd, &[&x, v, &b]), &w, &dy, &g[1], 1e-5);
        check_grad(|v| run1(&fwd, &[&x, &w, v]), &b, &dy, &g[2], 1e-5);
    }
}

#[test]
fn batch_norm_forward_and_backward() {
    // One channel, two samples of [1, 2] and [3, 4]: mean 2.5, biased var 1.25. (f64,
    // where the momentum 0.1 is exact: an f32 op computes with 0.1f32.)
    let spec = OpSpec::BatchNorm(BatchNormSpec {
        dtype: F64,
        shape: vec![2, 1, 2],
        eps: 0.0,
        momentum: 0.1,
        training: true,
    });
    let out = run(&spec, &[&[1., 2., 3., 4.], &[2.0], &[1.0], &[0.0], &[1.0]]);
    let r = 1.0 / 1.25f64.sqrt();
    close(
        &out[0],
        &[1.0 - 3.0 * r, 1.0 - r, 1.0 + r, 1.0 + 3.0 * r],
        1e-15,
    );
    close(&out[1], &[2.5, r], 1e-15);
    close(&out[2], &[0.25], 1e-15);
    close(&out[3], &[0.9 + 0.125], 1e-15);
    assert_eq!(spec.aliases().len(), 2);
    // Inference uses the running stats.
    let infer = OpSpec::BatchNorm(BatchNormSpec {
        dtype: F32,
        shape: vec![1, 1, 2],
        eps: 0.0,
        momentum: 0.1,
        training: false,
    });
    close(
        &run1(&infer, &[&[3.0, 5.0], &[1.0], &[0.0], &[1.0], &[4.0]]),
        &[1.0, 2.0],
        1e-15,
    );

    let shape = vec![2, 3, 2, 2];
    let fwd = OpSpec::BatchNorm(BatchNormSpec {
        dtype: F32,
        shape: shape.clone(),
        eps: 1e-3,
        momentum: 0.1,
        training: true,
    });
    let bwd = OpSpec::BatchNormBackward(BatchNormBackwardSpec {
        dtype: F32,
        shape,
        param_grads: true,
        given_grads: None,
    });
    let (x, w, b, dy) = (rnd(24, 9), rnd(3, 10), rnd(3, 11), rnd(24, 12));
    let (rm, rv) = ([0.0; 3], [1.0; 3]);
    let f = run(&fwd, &[&x, &w, &b, &rm, &rv]);
    let g = run(&bwd, &[&dy, &x, &w, &f[1]]);
    check_grad(|v| run1(&fwd, &[v, &w, &b, &rm, &rv]), &x, &dy, &g[0], 1e-5);
    check_grad(|v| run1(&fwd, &[&x, v, &b, &rm, &rv]), &w, &dy, &g[1], 1e-5);
    check_grad(|v| run1(&fwd, &[&x, &w, v, &rm, &rv]), &b, &dy, &g[2], 1e-5);
}

// ---------------------------------------------------------------- attention, rope

fn attention(causal: bool, seq_q: usize, seq_k: usize, mask: Option<Vec<usize>>) -> OpSpec {
    OpSpec::Attention(AttentionSpec {
        dtype: F32,
        layout: AttentionLayout::Bhsd,
        batch: 1,
        heads: 1,
        kv_heads: 1,
        seq_q,
        seq_k,
        head_dim: 1,
        scale: 1.0,
        causal,
        mask,
        causal_align: Default::default(),
        lse: false,
    })
}

#[test]
fn attention_causal_vs_hand_computation() {
    let (q, k, v) = ([1.0, 1.0], [1.0, 2.0], [10.0, 20.0]);
    // Query 0 sees key 0 only; query 1 sees both, scores [1, 2].
    let p1 = 1.0 / (1.0 + (-1.0f64).exp()); // softmax([1, 2])[1]
    let want = [10.0, 10.0 * (1.0 - p1) + 20.0 * p1];
    close(
        &run1(&attention(true, 2, 2, None), &[&q, &k, &v]),
        &want,
        1e-15,
    );
    // The same through an additive mask.
    let o = run1(
        &attention(false, 2, 2, Some(vec![2, 2])),
        &[&q, &k, &v, &[0.0, f64::NEG_INFINITY, 0.0, 0.0]],
    );
    close(&o, &want, 1e-15);
    // Bottom-right alignment: one query over three keys sees all of them.
    let o = run1(
        &attention(true, 1, 3, None),
        &[&[0.0], &[1.0, 2.0, 3.0], &[3.0, 6.0, 9.0]],
    );
    close(&o, &[6.0], 1e-15);
    // More queries than keys: the first query sees nothing and outputs zero.
    let o = run1(&attention(true, 2, 1, None), &[&[1.0, 1.0], &[1.0], &[7.0]]);
    close(&o, &[0.0, 7.0], 0.0);
}

#[test]
fn attention_layouts_and_grouped_heads_agree() {
    let (b, h, kvh, sq, sk, d) = (2, 4, 2, 3, 5, 4);
    let spec = |layout| AttentionSpec {
        dtype: F32,
        layout,
        batch: b,
        heads: h,
        kv_heads: kvh,
        seq_q: sq,
        seq_k: sk,
        head_dim: d,
        scale: 0.5,
        causal: true,
        mask: None,
        causal_align: Default::default(),
        lse: false,
    };
    let (q, k, v) = (
        rnd(b * h * sq * d, 20),
        rnd(b * kvh * sk * d, 21),
        rnd(b * kvh * sk * d, 22),
    );
    let o_bhsd = run1(
        &OpSpec::Attention(spec(AttentionLayout::Bhsd)),
        &[&q, &k, &v],
    );
    // Permute [b, h, s, d] -> [b, s, h, d] for the other layout.
    let to_bshd = |x: &[f64], heads: usize, seq: usize| {
        run1(
            &OpSpec::Permute(PermuteSpec {
                dtype: F32,
                shape: vec![b, heads, seq, d],
                perm: vec![0, 2, 1, 3],
            }),
            &[x],
        )
    };
    let o_bshd = run1(
        &OpSpec::Attention(spec(AttentionLayout::Bshd)),
        &[
            &to_bshd(&q, h, sq),
            &to_bshd(&k, kvh, sk),
            &to_bshd(&v, kvh, sk),
        ],
    );
    close(&o_bshd, &to_bshd(&o_bhsd, h, sq), 1e-14);
    // Grouped-query: heads 0 and 1 share kv head 0, so with equal queries they agree.
    let mut q2 = q.clone();
    let plane = sq * d;
    let head0: Vec<f64> = q2[..plane].to_vec();
    q2[plane..2 * plane].copy_from_slice(&head0);
    let o = run1(
        &OpSpec::Attention(spec(AttentionLayout::Bhsd)),
        &[&q2, &k, &v],
    );
    close(&o[plane..2 * plane], &o[..plane], 0.0);
}

#[test]
fn rope_rotates_half_pairs() {
    let spec = OpSpec::Rope(RopeSpec {
        dtype: F32,
        index_dtype: U32,
        batch: 1,
        seq: 2,
        heads: 1,
        head_dim: 2,
        max_positions: 2,
        interleaved: false,
        rotary_dim: None,
        batch_positions: false,
    });
    let theta: f64 = 0.3;
    let (cos, sin) = ([1.0, theta.cos()], [0.0, theta.sin()]);
    // Token 0 at position 1, token 1 at position 0.
    let y = run1(&spec, &[&[1.0, 0.0, 1.0, 2.0], &cos, &sin, &[1.0, 0.0]]);
    close(&y, &[theta.cos(), theta.sin(), 1.0, 2.0], 1e-15);
}

/// GPT-J pairs `(2k, 2k + 1)`, two rotated dims of four (the rest copied), and
/// positions per batch item.
#[test]
fn rope_interleaved_partial_and_per_batch_positions() {
    let spec = OpSpec::Rope(RopeSpec {
        dtype: F32,
        index_dtype: U32,
        batch: 2,
        seq: 1,
        heads: 1,
        head_dim: 4,
        max_positions: 2,
        interleaved: true,
        rotary_dim: Some(2),
        batch_positions: true,
    });
    let theta: f64 = 0.3;
    let (cos, sin) = ([1.0, theta.cos()], [0.0, theta.sin()]);
    // Item 0 at position 1 (rotated by θ), item 1 at position 0 (unchanged).
    let x = [1.0, 0.0, 5.0, 6.0, 1.0, 2.0, 7.0, 8.0];
    let y = run1(&spec, &[&x, &cos, &sin, &[1.0, 0.0]]);
    let want = [theta.cos(), theta.sin(), 5.0, 6.0, 1.0, 2.0, 7.0, 8.0];
    close(&y, &want, 1e-15);
}

/// Causal attention aligned top-left: with one key per query step and more keys than
/// queries, query `i` sees keys `0..=i` (bottom-right, it would see `0..=i + 2`).
#[test]
fn causal_top_left_sees_keys_up_to_its_own_position() {
    let mut a = match OpKind::Attention.example() {
        OpSpec::Attention(a) => a,
        _ => unreachable!(),
    };
    (a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_k, a.head_dim) = (1, 1, 1, 2, 4, 1);
    (a.mask, a.causal, a.scale) = (None, true, 0.0);
    a.layout = AttentionLayout::Bhsd;
    let (q, k, v) = ([1.0, 1.0], [0.0; 4], [1.0, 2.0, 3.0, 4.0]);
    // Scale 0: equal weights over the visible keys, so `o` is their values' mean.
    let bottom = run1(&OpSpec::Attention(a.clone()), &[&q, &k, &v]);
    close(&bottom, &[2.0, 2.5], 1e-15);
    a.causal_align = CausalAlign::TopLeft;
    let top = run1(&OpSpec::Attention(a), &[&q, &k, &v]);
    close(&top, &[1.0, 1.5], 1e-15);
}

// ---------------------------------------------------------------- conv, patches, pooling

fn conv(pass: ConvPass, bias: bool) -> Conv2dSpec {
    Conv2dSpec {
        dtype: F32,
        pass,
        batch: 1,
        in_channels: 1,
        out_channels: 1,
        height: 3,
        width: 3,
        window: Window2d::square(3, 2, 1),
        bias,
    }
}

#[test]
fn conv2d_with_padding_and_stride() {
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let spec = OpSpec::Conv2d(conv(ConvPass::Forward, false));
    assert_eq!(spec.outputs()[0].shape, vec![1, 1, 2, 2]);
    close(&run1(&spec, &[&x, &[1.0; 9]]), &[12., 16., 24., 28.], 0.0);
    // An asymmetric filter catches flips: w[0,0] = 1, w[2,2] = 2, plus bias 0.5.
    let w = [1., 0., 0., 0., 0., 0., 0., 0., 2.];
    let spec = OpSpec::Conv2d(conv(ConvPass::Forward, true));
    close(&run1(&spec, &[&x, &w, &[0.5]]), &[10.5, 0.5, 0.5, 5.5], 0.0);
}

#[test]
fn conv2d_backward_passes_are_adjoint() {
    let s = Conv2dSpec {
        dtype: F32,
        pass: ConvPass::Forward,
        batch: 2,
        in_channels: 3,
        out_channels: 2,
        height: 5,
        width: 4,
        window: Window2d {
            kernel: [3, 2],
            stride: [2, 1],
            padding: [1, 0],
        },
        bias: false,
    };
    let fwd = OpSpec::Conv2d(s.clone());
    let (xs, ws, ys) = (
        fwd.inputs()[0].numel(),
        fwd.inputs()[1].numel(),
        fwd.outputs()[0].numel(),
    );
    let (x, w, dy) = (rnd(xs, 30), rnd(ws, 31), rnd(ys, 32));
    let y = run1(&fwd, &[&x, &w]);
    let dx = run1(
        &OpSpec::Conv2d(Conv2dSpec {
            pass: ConvPass::BackwardData,
            ..s.clone()
        }),
        &[&dy, &w],
    );
    let dw = run1(
        &OpSpec::Conv2d(Conv2dSpec {
            pass: ConvPass::BackwardFilter,
            ..s
        }),
        &[&x, &dy],
    );
    let lhs = dot(&y, &dy);
    assert!((lhs - dot(&x, &dx)).abs() < 1e-12 * (1.0 + lhs.abs()));
    assert!((lhs - dot(&w, &dw)).abs() < 1e-12 * (1.0 + lhs.abs()));
}

#[test]
fn im2col_values_and_col2im_adjointness() {
    let small = OpSpec::Im2col(Im2colSpec {
        dtype: F32,
        image: Nchw::new([1, 1, 2, 2]),
        window: Window2d::square(2, 1, 0),
    });
    assert_eq!(small.outputs()[0].shape, vec![1, 4, 1]);
    assert_eq!(run1(&small, &[&[1., 2., 3., 4.]]), vec![1., 2., 3., 4.]);
    // Padding 1: the first column reads (−1,−1),(−1,0),(0,−1),(0,0).
    let padded = OpSpec::Im2col(Im2colSpec {
        dtype: F32,
        image: Nchw::new([1, 1, 2, 2]),
        window: Window2d::square(2, 1, 1),
    });
    let cols = run1(&padded, &[&[1., 2., 3., 4.]]);
    assert_eq!(cols.len(), 4 * 9);
    // Row (ky=1, kx=1) = x[oy, ox] for the 3x3 outputs that are in range.
    assert_eq!(&cols[27..36], &[1., 2., 0., 3., 4., 0., 0., 0., 0.]);

    let window = Window2d {
        kernel: [3, 2],
        stride: [2, 1],
        padding: [1, 1],
    };
    let i2c = OpSpec::Im2col(Im2colSpec {
        dtype: F32,
        image: Nchw::new([2, 2, 5, 4]),
        window,
    });
    let c2i = |accumulate| {
        OpSpec::Col2im(Col2imSpec {
            dtype: F32,
            image: Nchw::new([2, 2, 5, 4]),
            window,
            accumulate,
        })
    };
    let x = rnd(i2c.inputs()[0].numel(), 40);
    let c = rnd(i2c.outputs()[0].numel(), 41);
    let back = run1(&c2i(false), &[&c]);
    let lhs = dot(&run1(&i2c, &[&x]), &c);
    assert!((lhs - dot(&x, &back)).abs() < 1e-12);
    // Accumulate adds onto the prior image.
    let acc = run1(&c2i(true), &[&c, &x]);
    close(
        &acc,
        &back.iter().zip(&x).map(|(a, b)| a + b).collect::<Vec<_>>(),
        1e-15,
    );
}

#[test]
fn pooling() {
    let x: Vec<f64> = (0..16).map(f64::from).collect();
    let pool = |kind, indices| {
        OpSpec::Pool2d(Pool2dSpec {
            kind,
            dtype: F32,
            image: Nchw::new([1, 1, 4, 4]),
            window: Window2d::square(2, 2, 0),
            count_include_pad: false,
            indices,
        })
    };
    let out = run(&pool(PoolKind::Max, Some(F32)), &[&x]);
    assert_eq!(out[0], vec![5., 7., 13., 15.]);
    assert_eq!(out[1], vec![5., 7., 13., 15.]);
    assert_eq!(
        run1(&pool(PoolKind::Avg, None), &[&x]),
        vec![2.5, 4.5, 10.5, 12.5]
    );
    // Ties: the first maximum wins.
    assert_eq!(
        run(&pool(PoolKind::Max, Some(U32)), &[&[1.0; 16]])[1],
        vec![0., 2., 8., 10.]
    );

    // Average with padding: count_include_pad decides the divisor at the border.
    let avg_pad = |count_include_pad| {
        OpSpec::Pool2d(Pool2dSpec {
            kind: PoolKind::Avg,
            dtype: F32,
            image: Nchw::new([1, 1, 2, 2]),
            window: Window2d::square(2, 2, 1),
            count_include_pad,
            indices: None,
        })
    };
    assert_eq!(
        run1(&avg_pad(false), &[&[1., 2., 3., 4.]]),
        vec![1., 2., 3., 4.]
    );
    assert_eq!(
        run1(&avg_pad(true), &[&[1., 2., 3., 4.]]),
        vec![0.25, 0.5, 0.75, 1.0]
    );

    // Max backward routes dy to the recorded indices, adding to the prior.
    let back = OpSpec::Pool2dBackward(Pool2dBackwardSpec {
        kind: PoolKind::Max,
        dtype: F32,
        image: Nchw::new([1, 1, 4, 4]),
        out_height: 2,
        out_width: 2,
        window: None,
        count_include_pad: false,
        index_dtype: Some(F32),
        accumulate: true,
    });
    let dx = run1(&back, &[&[1., 2., 3., 4.], &[5., 7., 13., 15.], &[1.0; 16]]);
    let mut want = vec![1.0; 16];
    want[5] += 1.0;
    want[7] += 2.0;
    want[13] += 3.0;
    want[15] += 4.0;
    assert_eq!(dx, want);

    // Average backward is the adjoint of average forward.
    let window = Window2d::square(3, 2, 1);
    let fwd = OpSpec::Pool2d(Pool2dSpec {
        kind: PoolKind::Avg,
        dtype: F32,
        image: Nchw::new([2, 2, 5, 6]),
        window,
        count_include_pad: false,
        indices: None,
    });
    let [oh, ow] = window.out_size([5, 6]).unwrap();
    let bwd = OpSpec::Pool2dBackward(Pool2dBackwardSpec {
        kind: PoolKind::Avg,
        dtype: F32,
        image: Nchw::new([2, 2, 5, 6]),
        out_height: oh,
        out_width: ow,
        window: Some(window),
        count_include_pad: false,
        index_dtype: None,
        accumulate: false,
    });
    let (x, dy) = (rnd(120, 50), rnd(2 * 2 * oh * ow, 51));
    let lhs = dot(&run1(&fwd, &[&x]), &dy);
    assert!((lhs - dot(&x, &run1(&bwd, &[&dy]))).abs() < 1e-12);
}

#[test]
fn adaptive_pooling() {
    let ad = |kind, pass| {
        OpSpec::AdaptivePool2d(AdaptivePool2dSpec {
            kind,
            pass,
            dtype: F32,
            batch: 1,
            channels: 1,
            in_size: [3, 3],
            out_size: [2, 2],
        })
    };
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    // Windows [0, 2) and [1, 3) in both dimensions (they overlap).
    assert_eq!(
        run1(&ad(PoolKind::Avg, PoolPass::Forward), &[&x]),
        vec![3., 4., 6., 7.]
    );
    assert_eq!(
        run1(&ad(PoolKind::Max, PoolPass::Forward), &[&x]),
        vec![5., 6., 8., 9.]
    );
    let dy = rnd(4, 60);
    let dx = run1(&ad(PoolKind::Avg, PoolPass::Backward), &[&dy]);
    let y = run1(&ad(PoolKind::Avg, PoolPass::Forward), &[&x]);
    assert!((dot(&y, &dy) - dot(&x, &dx)).abs() < 1e-12);
}

// ---------------------------------------------------------------- data movement

#[test]
fn permute_slice_concat() {
    let x: Vec<f64> = (0..6).map(f64::from).collect(); // [[0,1,2],[3,4,5]]
    let t = OpSpec::Permute(PermuteSpec {
        dtype: F32,
        shape: vec![2, 3],
        perm: vec![1, 0],
    });
    assert_eq!(run1(&t, &[&x]), vec![0., 3., 1., 4., 2., 5.]);
    let s = OpSpec::Slice(SliceSpec {
        dtype: F32,
        shape: vec![2, 3],
        starts: vec![1, 2],
        sizes: vec![1, 2],
        steps: vec![1, -2],
    });
    assert_eq!(run1(&s, &[&x]), vec![5., 3.]);
    let c = OpKind::Concat.example(); // [2,3] ++ [2,1] along axis 1
    assert_eq!(
        run1(&c, &[&x, &[9., 8.]]),
        vec![0., 1., 2., 9., 3., 4., 5., 8.]
    );
}

#[test]
fn gather_and_embedding_backward_with_repeated_ids() {
    let weight: Vec<f64> = (0..8).map(f64::from).collect(); // [4, 2]
    let g = OpSpec::Gather(GatherSpec {
        dtype: F32,
        index_dtype: I32,
        data: vec![4, 2],
        indices: vec![4],
        axis: 0,
        rows_of: None,
    });
    // -1 counts from the end; 7 is out of range and reads zeros.
    assert_eq!(
        run1(&g, &[&weight, &[1.0, 3.0, -1.0, 7.0]]),
        vec![2., 3., 6., 7., 6., 7., 0., 0.]
    );
    let g1 = OpSpec::Gather(GatherSpec {
        dtype: F32,
        index_dtype: U32,
        data: vec![2, 3],
        indices: vec![2],
        axis: 1,
        rows_of: None,
    });
    assert_eq!(
        run1(&g1, &[&[0., 1., 2., 3., 4., 5.], &[2.0, 0.0]]),
        vec![2., 0., 5., 3.]
    );

    let scatter = |combine, init| {
        OpSpec::Scatter(ScatterSpec {
            dtype: F32,
            index_dtype: U32,
            data: vec![4, 2],
            indices: vec![3],
            axis: 0,
            combine,
            init,
            rows_of: None,
        })
    };
    let ids = [1.0, 3.0, 1.0];
    let dy = [1., 1., 2., 2., 3., 3.];
    assert_eq!(
        run1(
            &scatter(ScatterCombine::Sum, ScatterInit::Zero),
            &[&dy, &ids]
        ),
        vec![0., 0., 4., 4., 0., 0., 2., 2.]
    );
    assert_eq!(
        run1(
            &scatter(ScatterCombine::Sum, ScatterInit::Prior),
            &[&dy, &ids, &[1.0; 8]]
        ),
        vec![1., 1., 5., 5., 1., 1., 3., 3.]
    );
    assert_eq!(
        run1(
            &scatter(ScatterCombine::Last, ScatterInit::Prior),
            &[&dy, &ids, &[9.0; 8]]
        ),
        vec![9., 9., 3., 3., 9., 9., 2., 2.]
    );
}

// ---------------------------------------------------------------- training

#[test]
fn cross_entropy_tiny() {
    let spec = |divide_by_batch| {
        OpSpec::CrossEntropy(CrossEntropySpec {
            dtype: F32,
            index_dtype: F32,
            batch: 2,
            classes: 3,
            divide_by_batch,
            grad: true,
            probs: true,
        })
    };
    let logits = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
    let targets = [2.0, 0.0];
    let p = [0.09003057317038046, 0.24472847105479764, 0.6652409557748219];
    let loss0 = (1.0 + (-1f64).exp() + (-2f64).exp()).ln(); // lse − 3
    let loss1 = 3f64.ln();
    let out = run(&spec(false), &[&logits, &targets]);
    close(&out[0], &[loss0, loss1], 1e-15);
    let third = 1.0 / 3.0;
    close(
        &out[1],
        &[p[0], p[1], p[2] - 1.0, third - 1.0, third, third],
        1e-15,
    );
    close(&out[2], &[p[0], p[1], p[2], third, third, third], 1e-15);
    let out = run(&spec(true), &[&logits, &targets]);
    close(&out[0], &[loss0 / 2.0, loss1 / 2.0], 1e-15);
    close(
        &out[1][..3],
        &[p[0] / 2.0, p[1] / 2.0, (p[2] - 1.0) / 2.0],
        1e-15,
    );
}

#[test]
fn adam_one_step() {
    // f64, where the attributes are exact (an f32 op computes with them rounded to f32).
    let spec = |weight_decay, decoupled| {
        OpSpec::Adam(AdamSpec {
            dtype: F64,
            len: 1,
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            decoupled,
            step: 1,
        })
    };
    let out = run(&spec(0.0, false), &[&[1.0], &[0.5], &[0.0], &[0.0]]);
    // m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25.
    close(&out[1], &[0.05], 1e-15);
    close(&out[2], &[0.00025], 1e-15);
    close(&out[0], &[1.0 - 0.1 * 0.5 / (0.5 + 1e-8)], 1e-15);
    // AdamW: the decay is applied to the parameter, not folded into the moments.
    let out = run(&spec(0.1, true), &[&[1.0], &[0.5], &[0.0], &[0.0]]);
    close(&out[1], &[0.05], 1e-15);
    close(&out[0], &[1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.1)], 1e-15);
    // L2: g = 0.5 + 0.1 = 0.6 goes into the moments; m̂/√v̂ is still 1.
    let out = run(&spec(0.1, false), &[&[1.0], &[0.5], &[0.0], &[0.0]]);
    close(&out[1], &[0.06], 1e-15);
    close(&out[0], &[1.0 - 0.1 * 0.6 / (0.6 + 1e-8)], 1e-15);
}

#[test]
fn dropout_mask_determinism_and_keep_rate() {
    let n = 100_000;
    // f64, where the scale 1/(1 − p) is not rounded to f32.
    let spec = |step, rng| {
        OpSpec::Dropout(DropoutSpec {
            dtype: F64,
            shape: vec![n],
            p: 0.3,
            seed: 1234,
            step,
            mask: true,
            rng,
            offset: 0,
        })
    };
    let x = vec![2.0; n];
    let a = run(&spec(5, RngScheme::Counter), &[&x]);
    assert_eq!(
        a,
        run(&spec(5, RngScheme::Counter), &[&x]),
        "same seed and step, same mask"
    );
    let b = run(&spec(6, RngScheme::Counter), &[&x]);
    assert_ne!(a[1], b[1], "another step gives another mask");
    let kept = a[1].iter().filter(|&&m| m != 0.0).count() as f64 / n as f64;
    assert!((kept - 0.7).abs() < 0.01, "keep rate {kept}");
    for (y, m) in a[0].iter().zip(&a[1]) {
        assert!(
            *m == 0.0 && *y == 0.0
                || (*m - 1.0 / 0.7).abs() < 1e-15 && (*y - 2.0 / 0.7).abs() < 1e-12
        );
    }
    // Neighbouring steps are not the same mask shuffled in pairs (the rumus scheme's flaw).
    let same = a[1].iter().zip(&b[1]).filter(|(p, q)| p == q).count() as f64 / n as f64;
    assert!(
        (same - 0.58).abs() < 0.02,
        "agreement {same} (independent masks agree 0.7²+0.3²)"
    );
    // The rumus scheme keeps at the same rate.
    let r = run(&spec(5, RngScheme::Rumus), &[&x]);
    let kept = r[1].iter().filter(|&&m| m != 0.0).count() as f64 / n as f64;
    assert!((kept - 0.7).abs() < 0.01, "rumus keep rate {kept}");
}

// ---------------------------------------------------------------- image filters

fn image(filter: ImageFilter, h: usize, w: usize, c: usize) -> OpSpec {
    OpSpec::ImageFilter(ImageFilterSpec {
        filter,
        dtype: F32,
        height: h,
        width: w,
        channels: c,
    })
}

#[test]
fn sobel_on_a_tiny_image() {
    // A vertical edge: columns 0 and 1 dark, column 2 bright.
    let img = [0., 0., 1., 0., 0., 1., 0., 0., 1.];
    let out = run1(
        &image(ImageFilter::Sobel { threshold: 0.5 }, 3, 3, 1),
        &[&img],
    );
    assert_eq!(out, vec![0., 1., 1., 0., 1., 1., 0., 1., 1.]);
    // The same edge in RGB: luma of white is 1, written to every colour channel.
    let rgb: Vec<f64> = img.iter().flat_map(|&v| [v, v, v]).collect();
    let out = run1(
        &image(ImageFilter::Sobel { threshold: 0.5 }, 3, 3, 3),
        &[&rgb],
    );
    let want: Vec<f64> = (0..9)
        .flat_map(|p| {
            let v = if p % 3 == 0 { 0.0 } else { 1.0 };
            [v, v, v]
        })
        .collect();
    assert_eq!(out, want);
}

#[test]
fn pointwise_image_filters() {
    let px = [0.2, 0.6, 1.0];
    let one = |f| run1(&image(f, 1, 1, 3), &[&px]);
    let l = 0.299 * 0.2 + 0.587 * 0.6 + 0.114;
    close(&one(ImageFilter::Grayscale), &[l, l, l], 1e-15);
    assert_eq!(one(ImageFilter::Threshold { value: 0.6 }), vec![0., 1., 1.]);
    close(
        &one(ImageFilter::Brightness { factor: 1.5 }),
        &[0.3, 0.9, 1.0],
        1e-15,
    );
    close(
        &one(ImageFilter::Contrast { factor: 2.0 }),
        &[0.0, 0.7, 1.0],
        1e-15,
    );
    close(&one(ImageFilter::Invert), &[0.8, 0.4, 0.0], 1e-15);
    // Alpha is copied.
    let rgba = run1(
        &image(ImageFilter::Invert, 1, 1, 4),
        &[&[0.2, 0.6, 1.0, 0.5]],
    );
    close(&rgba, &[0.8, 0.4, 0.0, 0.5], 1e-15);
}

#[test]
fn blur_and_sharpen() {
    // A constant image is a fixed point of both.
    let flat = vec![0.4; 5 * 4];
    let blur = image(
        ImageFilter::GaussianBlur {
            sigma: 1.5,
            radius: 3,
        },
        5,
        4,
        1,
    );
    close(&run1(&blur, &[&flat]), &flat, 1e-15);
    close(
        &run1(&image(ImageFilter::Sharpen, 5, 4, 1), &[&flat]),
        &flat,
        1e-15,
    );
    // A single bright pixel spreads with the normalised Gaussian weights.
    let mut dot_img = vec![0.0; 25];
    dot_img[12] = 1.0;
    let blur = image(
        ImageFilter::GaussianBlur {
            sigma: 1.0,
            radius: 1,
        },
        5,
        5,
        1,
    );
    let out = run1(&blur, &[&dot_img]);
    let e = (-0.5f64).exp();
    let (w0, w1) = (1.0 / (1.0 + 2.0 * e), e / (1.0 + 2.0 * e));
    close(
        &[out[12], out[13], out[18]],
        &[w0 * w0, w0 * w1, w1 * w1],
        1e-15,
    );
    assert_eq!(out[0], 0.0);
    // Sharpen of the dot: 5 at the centre (clamped to 1), −1 around (clamped to 0).
    let out = run1(&image(ImageFilter::Sharpen, 5, 5, 1), &[&dot_img]);
    assert_eq!((out[12], out[13]), (1.0, 0.0));
}

// ---------------------------------------------------------------- JSON

#[test]
fn json_round_trip_of_every_variant() {
    let mut specs: Vec<OpSpec> = OpKind::ALL.iter().map(|k| k.example()).collect();
    // Variants with every optional field set.
    let mut g = GemmSpec::new(F32, 3, 4, 5);
    g.layout = Layout::ColMajor;
    g.batch = vec![2, 3];
    g.lda = Some(7);
    g.stride_a = Some(vec![0, 40]);
    g.input_rounding = Some(InputRounding::Bf16);
    g.alpha = 0.1;
    g.beta = -1.0 / 3.0;
    g.bias = true;
    specs.push(OpSpec::Gemm(g));
    specs.push(OpSpec::Unary(UnarySpec {
        func: UnaryFn::LeakyRelu { slope: 0.01 },
        dtype: Bf16,
        shape: vec![],
    }));
    specs.push(OpSpec::ImageFilter(ImageFilterSpec {
        filter: ImageFilter::GaussianBlur {
            sigma: 2.0,
            radius: 6,
        },
        dtype: F16,
        height: 8,
        width: 8,
        channels: 4,
    }));
    specs.push(OpSpec::Dropout(DropoutSpec {
        dtype: F32,
        shape: vec![3],
        p: 0.5,
        seed: u64::MAX,
        step: 1 << 40,
        mask: false,
        rng: RngScheme::Rumus,
        offset: 0,
    }));
    for spec in specs {
        let json = serde_json::to_string(&spec).unwrap();
        let back: OpSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec, "{json}");
        assert!(
            json.starts_with(&format!("{{\"op\":\"{}\"", spec.kind_name())),
            "{json}"
        );
    }
    // Optional fields may be omitted.
    let spec: OpSpec = serde_json::from_str(
        r#"{"op":"gemm","dtype":"f32","m":2,"n":2,"k":2,"alpha":1.0,"beta":0.0}"#,
    )
    .unwrap();
    assert_eq!(spec, OpSpec::Gemm(GemmSpec::new(F32, 2, 2, 2)));
}

#[test]
fn every_example_runs_and_fills_its_outputs() {
    for &k in OpKind::ALL {
        let spec = k.example();
        let inputs: Vec<Vec<f64>> = spec
            .inputs()
            .iter()
            .enumerate()
            .map(|(n, sig)| {
                if sig.dtype.is_int()
                    || sig.name == "indices"
                    || sig.name == "targets"
                    || sig.name == "positions"
                {
                    (0..sig.numel()).map(|i| (i % 3) as f64).collect()
                } else {
                    rnd(sig.numel(), 100 + n as u32)
                }
            })
            .collect();
        let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
        let out = run(&spec, &refs);
        let sigs = spec.outputs();
        assert_eq!(out.len(), sigs.len(), "{k:?}");
        for (o, sig) in out.iter().zip(&sigs) {
            assert_eq!(o.len(), sig.numel(), "{k:?} output {}", sig.name);
        }
        assert!(!spec.name().is_empty());
        assert!(spec
            .name()
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    }
}

/// A scatter along axis 1 resolves its indices against axis 1's length (4 here), not
/// axis 0's (1): index 3 and index −1 both land in the last column.
#[test]
fn scatter_along_a_later_axis_resolves_against_that_axis() {
    let spec: OpSpec = serde_json::from_str(
        r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[1,4],"indices":[2],"axis":1,"combine":"sum","init":"zero"}"#,
    )
    .expect("a valid spec");
    assert_eq!(
        run1(&spec, &[&[5.0, 2.0], &[3.0, -1.0]]),
        [0.0, 0.0, 0.0, 7.0]
    );
}
