//! Reduction-family lowering (the conformance cases run in the root harness):
//! (CPU and GPU caps), and the shape of the schedules (shared-memory trees and
//! workgroup sizes on GPU caps, loops on CPU caps, the split path, typed refusals).

use kernelc_ir::{ScalarType, Stmt};
use kernelc_kernels::conformance::{cases, check, Interpreter};
use kernelc_kernels::lower::{lower, LowerError, Plan, TargetCaps};
use kernelc_kernels::spec::*;

const SEED: u64 = 0x5eed;

/// This family's table cases.
fn family_cases() -> Vec<OpSpec> {
    [
        OpKind::Reduce,
        OpKind::Softmax,
        OpKind::SoftmaxBackward,
        OpKind::CrossEntropy,
        OpKind::LayerNorm,
        OpKind::LayerNormBackward,
        OpKind::BatchNorm,
        OpKind::BatchNormBackward,
    ]
    .into_iter()
    .flat_map(cases::for_kind)
    .collect()
}

fn has_barrier(block: &[Stmt]) -> bool {
    block.iter().any(|s| match s {
        Stmt::Barrier => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => has_barrier(then_body) || has_barrier(else_body),
        Stmt::For { body, .. } => has_barrier(body),
        _ => false,
    })
}

fn sum_rows(rows: usize, cols: usize) -> OpSpec {
    OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::Sum,
        dtype: ScalarType::F32,
        shape: vec![rows, cols],
        axes: vec![1],
        keepdim: false,
        index_dtype: None,
        accumulate: false,
    })
}

fn plan(spec: &OpSpec, caps: &TargetCaps) -> Plan {
    lower(spec, caps).expect("lowers")
}

#[test]
fn long_rows_use_a_shared_memory_tree_on_gpu() {
    let p = plan(&sum_rows(64, 1000), &TargetCaps::cuda_sm90());
    assert_eq!(p.launches.len(), 1);
    let k = &p.launches[0].kernel;
    assert_eq!(k.workgroup_size, [256, 1, 1]);
    assert!(!k.shared.is_empty());
    assert!(has_barrier(&k.body));
    assert_eq!(p.launches[0].grid, [64, 1, 1]);
}

#[test]
fn short_rows_share_a_workgroup() {
    let p = plan(&sum_rows(100, 7), &TargetCaps::cuda_sm90());
    let k = &p.launches[0].kernel;
    // 8 invocations per row, 32 rows per workgroup.
    assert_eq!(k.workgroup_size, [256, 1, 1]);
    assert_eq!(p.launches[0].grid, [4, 1, 1]);
}

#[test]
fn cpu_caps_loop_without_shared_memory() {
    let p = plan(&sum_rows(64, 1000), &TargetCaps::cpu());
    let k = &p.launches[0].kernel;
    assert_eq!(k.workgroup_size, [1, 1, 1]);
    assert!(k.shared.is_empty());
    assert!(!has_barrier(&k.body));
}

#[test]
fn a_whole_tensor_sum_splits() {
    let spec = OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::Sum,
        dtype: ScalarType::F32,
        shape: vec![1 << 20],
        axes: vec![0],
        keepdim: false,
        index_dtype: None,
        accumulate: false,
    });
    for caps in [TargetCaps::cuda_sm90(), TargetCaps::cpu()] {
        let p = plan(&spec, &caps);
        assert_eq!(p.launches.len(), 2, "partials, then combine");
        assert!(p.launches[0].grid[0] > 1);
        assert!(!p.temps.is_empty());
    }
}

#[test]
fn f64_on_a_gpu_without_f64_is_refused() {
    let spec = OpSpec::Softmax(SoftmaxSpec {
        dtype: ScalarType::F64,
        shape: vec![4, 5],
        axis: 1,
        log: false,
    });
    assert!(matches!(
        lower(&spec, &TargetCaps::gpu_baseline()),
        Err(LowerError::UnsupportedDtype { .. })
    ));
}

/// The table's normalised tolerances scale with `len · max|input|` (targets and saved
/// statistics included), which is loose for long rows. This holds the f32 and f64
/// cases to a much tighter bound relative to each output's own scale, so a wrong
/// formula cannot hide inside the allowance.
#[test]
fn f32_and_f64_results_are_tight() {
    use kernelc_kernels::conformance::{case_data, Executor};
    use kernelc_kernels::reference;
    for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
        let exec = Interpreter::new("tight", caps);
        for spec in family_cases() {
            let outs = spec.outputs();
            let dtype = outs[0].dtype;
            let rel = match dtype {
                ScalarType::F64 => 1e-12,
                ScalarType::F32 => 2e-5,
                _ => continue,
            };
            let data = case_data(&spec, SEED);
            let refs: Vec<&[f64]> = data.values.iter().map(|v| v.as_slice()).collect();
            let want = reference(&spec, &refs).expect("reference");
            let got = exec.run(&spec, &data.buffers).expect("runs");
            for ((sig, got), want) in outs.iter().zip(&got).zip(&want) {
                let scale = want
                    .iter()
                    .filter(|v| v.is_finite())
                    .fold(1e-3f64, |m, v| m.max(v.abs()));
                for (i, (g, w)) in got.to_f64().iter().zip(want).enumerate() {
                    let ok = if w.is_nan() {
                        g.is_nan()
                    } else if w.is_infinite() {
                        *g == *w
                    } else {
                        (g - w).abs() <= rel * scale
                    };
                    assert!(
                        ok,
                        "{} {}[{i}]: got {g}, want {w} ({})",
                        spec.name(),
                        sig.name,
                        serde_json::to_string(&spec).unwrap_or_default()
                    );
                }
            }
        }
    }
}

fn max_load_lanes(block: &[Stmt]) -> u8 {
    use kernelc_ir::Expr;
    fn expr(e: &Expr) -> u8 {
        let own = match e {
            Expr::Load { lanes, .. } => *lanes,
            _ => 1,
        };
        e.children().into_iter().map(expr).fold(own, u8::max)
    }
    block
        .iter()
        .map(|s| match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr(value),
            Stmt::Store { index, value, .. } => expr(index).max(expr(value)),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => expr(cond)
                .max(max_load_lanes(then_body))
                .max(max_load_lanes(else_body)),
            Stmt::For { body, .. } => max_load_lanes(body),
            _ => 1,
        })
        .fold(1, u8::max)
}

#[test]
fn contiguous_rows_load_vectors() {
    for caps in [TargetCaps::cuda_sm90(), TargetCaps::cpu()] {
        let p = plan(&sum_rows(64, 1000), &caps);
        assert_eq!(max_load_lanes(&p.launches[0].kernel.body), 4);
        // 255 is no multiple of any width: scalar steps.
        let p = plan(&sum_rows(64, 255), &caps);
        assert_eq!(max_load_lanes(&p.launches[0].kernel.body), 1);
    }
    // f64 vectors stop at 16 bytes.
    let spec = OpSpec::Softmax(SoftmaxSpec {
        dtype: ScalarType::F64,
        shape: vec![8, 1000],
        axis: 1,
        log: false,
    });
    let p = plan(&spec, &TargetCaps::cuda_sm90());
    assert_eq!(max_load_lanes(&p.launches[0].kernel.body), 2);
}

#[test]
fn layer_norm_parameter_gradients_split_over_rows_on_gpu() {
    let spec = OpSpec::LayerNormBackward(LayerNormBackwardSpec {
        dtype: ScalarType::F32,
        shape: vec![8192, 1024],
        rms: false,
        weight: true,
        bias: true,
        param_grads: true,
    });
    let p = plan(&spec, &TargetCaps::cuda_sm90());
    // dx (one row per group of 32 invocations, 8 rows per workgroup), partial column
    // sums, their combine.
    assert_eq!(p.launches.len(), 3);
    assert_eq!(p.launches[0].kernel.workgroup_size, [256, 1, 1]);
    assert_eq!(p.launches[0].grid, [1024, 1, 1]);
    assert!(p.launches[1].grid[0] >= 64, "{:?}", p.launches[1].grid);
}

#[test]
fn batch_norm_momentum_and_eps_are_uniforms() {
    use kernelc_kernels::lower::Binding;
    let spec = OpSpec::BatchNorm(BatchNormSpec {
        dtype: ScalarType::F32,
        shape: vec![2, 3, 4, 4],
        eps: 1e-5,
        momentum: 0.25,
        training: true,
    });
    let p = plan(&spec, &TargetCaps::cpu());
    let uniforms: Vec<&Binding> = p
        .launches
        .iter()
        .flat_map(|l| &l.bindings)
        .filter(|b| matches!(b, Binding::Uniform(_)))
        .collect();
    // Momentum and eps in the statistics launch.
    assert_eq!(uniforms.len(), 2);
    // Other values, same plan: the IR does not depend on them.
    let other = OpSpec::BatchNorm(BatchNormSpec {
        momentum: 0.5,
        eps: 1e-3,
        ..match spec {
            OpSpec::BatchNorm(s) => s,
            _ => unreachable!(),
        }
    });
    let q = plan(&other, &TargetCaps::cpu());
    assert_eq!(p, q);
}

/// A small seeded generator of this family's specs: ranks 1-4, extents that are 1,
/// primes, powers of two and neither, every dtype and flag.
struct Gen(u64);

impl Gen {
    fn below(&mut self, k: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % k
    }
    fn flag(&mut self) -> bool {
        self.below(2) == 1
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn shape(&mut self, rank: usize) -> Vec<usize> {
        (0..rank)
            .map(|_| self.pick(&[1, 1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 64, 65]))
            .collect()
    }
    fn float(&mut self) -> ScalarType {
        use ScalarType::*;
        self.pick(&[F32, F64, F16, Bf16])
    }

    fn spec(&mut self) -> OpSpec {
        use ScalarType::*;
        let rank = 1 + self.below(4) as usize;
        let axis = self.below(rank as u64) as usize;
        match self.below(8) {
            0 => {
                let shape = self.shape(rank);
                let mut axes: Vec<usize> = (0..rank).filter(|_| self.flag()).collect();
                if axes.is_empty() {
                    axes.push(axis);
                }
                use ReduceFn::*;
                let func = self.pick(&[Sum, Mean, Max, Min, ArgMax, ArgMin]);
                let dtype = if func == Mean {
                    self.float()
                } else {
                    self.pick(&[F32, F64, F16, Bf16, I32, U32])
                };
                let index_dtype = func.is_arg().then(|| self.pick(&[U32, I32, F32]));
                OpSpec::Reduce(ReduceSpec {
                    func,
                    dtype,
                    shape,
                    axes,
                    keepdim: self.flag(),
                    index_dtype,
                    accumulate: !func.is_arg() && self.flag(),
                })
            }
            1 => OpSpec::Softmax(SoftmaxSpec {
                dtype: self.float(),
                shape: self.shape(rank),
                axis,
                log: self.flag(),
            }),
            2 => OpSpec::SoftmaxBackward(SoftmaxBackwardSpec {
                dtype: self.float(),
                shape: self.shape(rank),
                axis,
                log: self.flag(),
            }),
            3 => OpSpec::CrossEntropy(CrossEntropySpec {
                dtype: self.float(),
                index_dtype: self.pick(&[U32, I32, F32]),
                batch: self.shape(1)[0],
                classes: self.shape(1)[0],
                divide_by_batch: self.flag(),
                grad: self.flag(),
                probs: self.flag(),
            }),
            4 => OpSpec::LayerNorm(LayerNormSpec {
                dtype: self.float(),
                shape: self.shape(rank),
                eps: 1e-5,
                rms: self.flag(),
                weight: self.flag(),
                bias: self.flag(),
                residual: self.flag(),
                save_stats: self.flag(),
                epilogue: None,
            }),
            5 => {
                let (weight, bias) = (self.flag(), self.flag());
                OpSpec::LayerNormBackward(LayerNormBackwardSpec {
                    dtype: self.float(),
                    shape: self.shape(rank),
                    rms: self.flag(),
                    weight,
                    bias,
                    param_grads: (weight || bias) && self.flag(),
                })
            }
            6 => OpSpec::BatchNorm(BatchNormSpec {
                dtype: self.float(),
                shape: self.shape(rank.max(2)),
                eps: 1e-5,
                momentum: 0.3,
                training: self.flag(),
            }),
            _ => OpSpec::BatchNormBackward(BatchNormBackwardSpec {
                dtype: self.float(),
                shape: self.shape(rank.max(2)),
                param_grads: self.flag(),
                given_grads: None,
            }),
        }
    }
}

/// Random specs of every kind of the family on every caps: the schedules' corner
/// cases (one-element slices, strided views, vector and scalar steps, slices shorter
/// and longer than a group) against the reference.
#[test]
fn random_specs_match_the_reference() {
    let mut gen = Gen(0x5eed_f00d);
    let all_caps = [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ];
    let mut failures = Vec::new();
    for i in 0..240 {
        let spec = gen.spec();
        if spec.validate().is_err() {
            continue;
        }
        for caps in &all_caps {
            let supported = spec
                .inputs()
                .iter()
                .chain(spec.outputs().iter())
                .all(|s| caps.supports(s.dtype));
            if !supported {
                continue;
            }
            let exec = Interpreter::new("random", caps.clone());
            if let Err(f) = check(&exec, &spec, i) {
                failures.push(format!(
                    "{} invocations: {}: {f}",
                    caps.invocations_1d(),
                    serde_json::to_string(&spec).unwrap_or_default()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Shapes near the 2^31-element limit lower on every caps (grids fold past 65,535
/// workgroups per axis; index arithmetic stays in u32).
#[test]
fn huge_shapes_lower() {
    let specs = [
        OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::ArgMax,
            dtype: ScalarType::F32,
            shape: vec![(1 << 31) - 1],
            axes: vec![0],
            keepdim: false,
            index_dtype: Some(ScalarType::U32),
            accumulate: false,
        }),
        sum_rows(1 << 21, 1000),
        OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::Sum,
            dtype: ScalarType::F32,
            shape: vec![3, 1 << 28, 2],
            axes: vec![1],
            keepdim: false,
            index_dtype: None,
            accumulate: true,
        }),
        OpSpec::Softmax(SoftmaxSpec {
            dtype: ScalarType::F32,
            shape: vec![1 << 24, 127],
            axis: 1,
            log: true,
        }),
        OpSpec::BatchNorm(BatchNormSpec {
            dtype: ScalarType::F32,
            shape: vec![256, 3, 1024, 2048],
            eps: 1e-5,
            momentum: 0.1,
            training: true,
        }),
        OpSpec::LayerNormBackward(LayerNormBackwardSpec {
            dtype: ScalarType::F32,
            shape: vec![1 << 20, 2047],
            rms: false,
            weight: true,
            bias: true,
            param_grads: true,
        }),
    ];
    for caps in [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ] {
        for spec in &specs {
            let p = plan(spec, &caps);
            for l in &p.launches {
                assert!(l
                    .grid
                    .iter()
                    .all(|&g| g <= caps.max_workgroups_per_dimension));
            }
        }
    }
}

fn has_loop(block: &[Stmt]) -> bool {
    block.iter().any(|s| match s {
        Stmt::For { .. } => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => has_loop(then_body) || has_loop(else_body),
        _ => false,
    })
}

/// GPU caps with 32-invocation workgroups: a handful of short rows then already takes
/// groups of 32 invocations with several steps each, as 65536 rows do on a real GPU.
fn narrow_gpu() -> TargetCaps {
    TargetCaps {
        max_invocations_per_workgroup: 32,
        max_workgroup_size: [32, 32, 32],
        ..TargetCaps::cuda_sm90()
    }
}

fn softmax_spec(dtype: ScalarType, shape: &[usize], axis: usize, log: bool) -> OpSpec {
    OpSpec::Softmax(SoftmaxSpec {
        dtype,
        shape: shape.to_vec(),
        axis,
        log,
    })
}

/// Short slices are unrolled into registers (no loop in the kernel): vector and scalar
/// steps, a ragged last step, lanes across slices (axis 0), every float dtype and
/// log-softmax, all against the reference.
#[test]
fn short_softmax_slices_stay_in_registers() {
    use ScalarType::*;
    let caps = narrow_gpu();
    let exec = Interpreter::new("narrow-gpu", caps.clone());
    for (dtype, shape, axis, log) in [
        (F32, vec![3, 1024], 1, false),
        (F32, vec![3, 1000], 1, false),
        (F32, vec![5, 999], 1, true),
        (F32, vec![40, 8], 0, false),
        (F32, vec![37, 12], 0, true),
        (F64, vec![4, 100], 1, false),
        (F16, vec![6, 130], 1, false),
        (Bf16, vec![2, 33], 1, true),
    ] {
        let spec = softmax_spec(dtype, &shape, axis, log);
        let p = plan(&spec, &caps);
        assert!(
            !has_loop(&p.launches[0].kernel.body),
            "{} loops",
            spec.name()
        );
        if let Err(f) = check(&exec, &spec, SEED) {
            panic!("{}: {f}", spec.name());
        }
    }
}

/// Fully masked rows (−∞ everywhere), rows where one invocation's elements are all
/// −∞, NaN and +∞ give what the reference gives, on both softmax schedules.
#[test]
fn softmax_special_values_match_the_reference() {
    use kernelc_ir::HostBuffer;
    use kernelc_kernels::reference;
    let (rows, cols) = (5, 999);
    let mut x: Vec<f64> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1013) as f64 / 97.0 - 5.0)
        .collect();
    let row = |_: &mut Vec<f64>, r: usize| (r * cols..(r + 1) * cols).collect::<Vec<_>>();
    for i in row(&mut x, 0) {
        x[i] = f64::NEG_INFINITY;
    }
    for i in row(&mut x, 1) {
        // Invocation 5 of a 32-wide group owns columns 5, 37, 69, ...
        if (i - cols) % 32 == 5 || (i - cols) < 200 {
            x[i] = f64::NEG_INFINITY;
        }
    }
    x[2 * cols + 17] = f64::NAN;
    x[3 * cols + 400] = f64::INFINITY;
    let input = HostBuffer::from_f32(&x.iter().map(|&v| v as f32).collect::<Vec<_>>());
    for caps in [narrow_gpu(), TargetCaps::cuda_sm90(), TargetCaps::cpu()] {
        let exec = Interpreter::new("special", caps.clone());
        for log in [false, true] {
            let spec = softmax_spec(ScalarType::F32, &[rows, cols], 1, log);
            let want = reference(&spec, &[&x]).expect("reference").remove(0);
            let got = kernelc_kernels::conformance::Executor::run(
                &exec,
                &spec,
                std::slice::from_ref(&input),
            )
            .expect("runs")
            .remove(0)
            .to_f64();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let ok = if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() {
                    g == w
                } else {
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0)
                };
                assert!(
                    ok,
                    "{} on {} invocations, [{i}]: got {g}, want {w}",
                    spec.name(),
                    caps.invocations_1d()
                );
            }
        }
    }
}

/// `values` stored as `dtype`, as the conformance harness stores inputs.
fn stored(dtype: ScalarType, values: &[f64]) -> kernelc_ir::HostBuffer {
    kernelc_ir::HostBuffer {
        elem: dtype,
        data: values
            .iter()
            .map(|&v| kernelc_ir::Scalar::from_f64(dtype, v))
            .collect(),
    }
}

/// Runs `spec` on the interpreter with `caps`; its outputs and the reference's.
fn run_and_reference(
    caps: &TargetCaps,
    spec: &OpSpec,
    inputs: &[Vec<f64>],
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let sigs = spec.inputs();
    let buffers: Vec<_> = sigs
        .iter()
        .zip(inputs)
        .map(|(sig, v)| stored(sig.dtype, v))
        .collect();
    let exec = Interpreter::new("custom", caps.clone());
    let got = kernelc_kernels::conformance::Executor::run(&exec, spec, &buffers)
        .expect("runs")
        .iter()
        .map(|b| b.to_f64())
        .collect();
    let values: Vec<Vec<f64>> = buffers.iter().map(|b| b.to_f64()).collect();
    let refs: Vec<&[f64]> = values.iter().map(|v| v.as_slice()).collect();
    let want = kernelc_kernels::reference(spec, &refs).expect("reference");
    (got, want)
}

#[track_caller]
fn assert_near(what: &str, got: &[f64], want: &[f64], tol: f64) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

/// `sum = x + residual` is an f16 output, and y normalises that rounded sum: the
/// row [1 + 2⁻¹⁰ + 2⁻¹², 1 + 2⁻⁹, 1] is [1 + 2⁻¹⁰, 1 + 2⁻⁹, 1] in f16, whose x̂ is
/// [0, √1.5, −√1.5] (the unrounded row's would start at 0.2).
#[test]
fn layer_norm_normalises_the_rounded_residual_sum() {
    let spec = OpSpec::LayerNorm(LayerNormSpec {
        residual: true,
        ..LayerNormSpec::new(ScalarType::F16, &[1, 3], 0.0)
    });
    let x = vec![1.0 + 2f64.powi(-10), 1.0 + 2f64.powi(-9), 1.0];
    let residual = vec![2f64.powi(-12), 0.0, 0.0];
    let s = 1.5f64.sqrt();
    for caps in [TargetCaps::cpu(), narrow_gpu(), TargetCaps::cuda_sm90()] {
        let (got, want) = run_and_reference(&caps, &spec, &[x.clone(), residual.clone()]);
        assert_near("reference y", &want[0], &[0.0, s, -s], 1e-12);
        assert_near("y", &got[0], &[0.0, s, -s], 2f64.powi(-10));
        assert_eq!(got[1], want[1], "sum");
    }
}

/// Rows and channels of 1000 + a spread of ±0.5 (f32) and 10¹⁵ + j/8 (f64): the
/// kernels fold x − x₀ and the reference does as well, and they agree to a few ulps
/// of the normalised values, far inside the table's tolerance.
#[test]
fn norm_kernels_follow_the_reference_when_the_mean_dwarfs_the_spread() {
    let (rows, cols) = (3, 37);
    let f32_row: Vec<f64> = (0..rows * cols)
        .map(|i| 1000.0 + ((i * 7919) % 1013) as f64 / 1013.0 - 0.5)
        .collect();
    let f64_row: Vec<f64> = (0..rows * cols)
        .map(|i| 1e15 + ((i * 7919) % 61) as f64 / 8.0)
        .collect();
    for (dtype, x, tol) in [
        (ScalarType::F32, &f32_row, 1e-5),
        (ScalarType::F64, &f64_row, 1e-12),
    ] {
        let layer = OpSpec::LayerNorm(LayerNormSpec::new(dtype, &[rows, cols], 0.0));
        let batch = OpSpec::BatchNorm(BatchNormSpec {
            dtype,
            shape: vec![cols, rows],
            eps: 0.0,
            momentum: 0.1,
            training: true,
        });
        let ones = vec![1.0; rows];
        let zeros = vec![0.0; rows];
        for caps in [TargetCaps::cpu(), narrow_gpu(), TargetCaps::cuda_sm90()] {
            let (got, want) = run_and_reference(&caps, &layer, std::slice::from_ref(x));
            assert_near(&format!("{dtype} layer norm"), &got[0], &want[0], tol);
            let inputs = [
                x.clone(),
                ones.clone(),
                zeros.clone(),
                zeros.clone(),
                ones.clone(),
            ];
            let (got, want) = run_and_reference(&caps, &batch, &inputs);
            assert_near(&format!("{dtype} batch norm"), &got[0], &want[0], tol);
        }
    }
}
