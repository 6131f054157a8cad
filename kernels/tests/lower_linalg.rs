//! GEMM / conv lowering: the conformance cases of gemm, conv2d, im2col and col2im on
//! the interpreter (CPU and GPU caps), and the shape of the schedules (shared-memory
//! tiles and 256 invocations on GPU caps, one invocation on CPU caps, split-K, the
//! number of launches, typed refusals).

use kernelc_ir::{Access, Param, ScalarType};
use kernelc_kernels::lower::{lower, Binding, LowerError, Plan, TargetCaps};
use kernelc_kernels::spec::*;

fn plan(spec: GemmSpec, caps: &TargetCaps) -> Plan {
    lower(&OpSpec::Gemm(spec), caps).expect("lowers")
}

#[test]
fn gpu_gemm_uses_shared_tiles_and_256_invocations() {
    let caps = TargetCaps::cuda_sm90();
    let p = plan(GemmSpec::new(ScalarType::F32, 130, 70, 40), &caps);
    assert_eq!(p.launches.len(), 1);
    let k = &p.launches[0].kernel;
    assert_eq!(k.invocations_per_workgroup(), 256);
    assert!(k.shared_bytes() > 0 && k.shared_bytes() <= caps.shared_memory_bytes as u64);
    // 64×64 tiles: 3 × 2 workgroups.
    assert_eq!(p.launches[0].grid.iter().product::<u32>(), 6);
}

#[test]
fn large_gemm_gets_large_tiles() {
    let caps = TargetCaps::cuda_sm90();
    let p = plan(GemmSpec::new(ScalarType::F32, 4096, 4096, 64), &caps);
    // 128×128 tiles: 32 × 32 workgroups.
    assert_eq!(p.launches[0].grid.iter().product::<u32>(), 32 * 32);
}

#[test]
fn skinny_gemm_gets_flat_tiles() {
    let caps = TargetCaps::cuda_sm90();
    // 1 × 4096: 16 × 256 tiles, so 16 workgroups (not 64 of mostly empty 64 × 64).
    let p = plan(GemmSpec::new(ScalarType::F32, 1, 4096, 64), &caps);
    assert_eq!(p.launches[0].grid.iter().product::<u32>(), 16);
}

#[test]
fn cpu_gemm_is_one_invocation_per_workgroup() {
    let p = plan(
        GemmSpec::new(ScalarType::F32, 130, 70, 40),
        &TargetCaps::cpu(),
    );
    let k = &p.launches[0].kernel;
    assert_eq!(k.invocations_per_workgroup(), 1);
    // 32×32 tiles: 5 × 3 workgroups.
    assert_eq!(p.launches[0].grid.iter().product::<u32>(), 15);
}

#[test]
fn long_reduction_splits_on_gpu_but_not_on_cpu() {
    let spec = GemmSpec::new(ScalarType::F32, 5, 3, 4000);
    let gpu = plan(spec.clone(), &TargetCaps::cuda_sm90());
    assert_eq!(gpu.launches.len(), 2, "tile kernel + split sum");
    assert_eq!(gpu.temps.len(), 1);
    let cpu = plan(spec, &TargetCaps::cpu());
    assert_eq!(cpu.launches.len(), 1);
}

#[test]
fn beta_zero_does_not_bind_c() {
    let p = plan(GemmSpec::new(ScalarType::F32, 7, 13, 5), &TargetCaps::cpu());
    let launch = &p.launches[0];
    let reads: Vec<&Binding> = launch
        .kernel
        .params
        .iter()
        .zip(&launch.bindings)
        .filter(|(p, _)| {
            matches!(
                p,
                Param::Buffer {
                    access: Access::Read,
                    ..
                }
            )
        })
        .map(|(_, b)| b)
        .collect();
    assert_eq!(reads, vec![&Binding::Input(0), &Binding::Input(1)]);
}

#[test]
fn unsupported_dtype_is_a_typed_error() {
    let spec = OpSpec::Gemm(GemmSpec::new(ScalarType::F64, 4, 4, 4));
    assert!(matches!(
        lower(&spec, &TargetCaps::gpu_baseline()),
        Err(LowerError::UnsupportedDtype { .. })
    ));
}

fn conv(pass: ConvPass, batch: usize, hw: usize, window: Window2d) -> OpSpec {
    OpSpec::Conv2d(Conv2dSpec {
        dtype: ScalarType::F32,
        pass,
        batch,
        in_channels: 2,
        out_channels: 3,
        height: hw,
        width: hw,
        window,
        bias: false,
    })
}

#[test]
fn conv_forward_is_one_implicit_gemm_launch() {
    let spec = conv(ConvPass::Forward, 2, 9, Window2d::square(3, 1, 1));
    for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
        let p = lower(&spec, &caps).expect("lowers");
        assert_eq!(p.launches.len(), 1);
        assert!(p.temps.is_empty(), "no column buffer");
        assert_eq!(
            p.launches[0].kernel.invocations_per_workgroup(),
            caps.invocations_1d() as u64
        );
        assert!(p.launches[0].kernel.shared_bytes() > 0);
    }
}

/// A large 16-bit convolution on tensor-core caps runs on channels-last copies of its
/// image and filter by the heuristics (two permutes, then one multiply), the form as
/// given offered after it; channels that do not fill 16-byte copies, or a CPU, keep
/// the form as given alone.
#[test]
fn large_16_bit_conv_runs_channels_last_on_tensor_core_caps() {
    let spec = |channels: usize| {
        OpSpec::Conv2d(Conv2dSpec {
            dtype: ScalarType::Bf16,
            pass: ConvPass::Forward,
            batch: 16,
            in_channels: channels,
            out_channels: 128,
            height: 56,
            width: 56,
            window: Window2d::square(3, 1, 1),
            bias: true,
        })
    };
    let p = lower(&spec(64), &TargetCaps::cuda_sm90()).expect("lowers");
    assert_eq!(p.launches.len(), 3);
    let lens: Vec<u64> = p.temps.iter().map(|t| t.len).collect();
    assert_eq!(lens, [16 * 64 * 56 * 56, 128 * 64 * 9]);
    assert_eq!(
        p.launches[0].bindings,
        [Binding::Input(0), Binding::Temp(0)]
    );
    assert_eq!(
        p.launches[1].bindings,
        [Binding::Input(1), Binding::Temp(1)]
    );
    let gemm = &p.launches[2].bindings;
    assert_eq!(gemm[..2], [Binding::Temp(1), Binding::Temp(0)]);
    assert!(gemm.contains(&Binding::Input(2)), "the bias: {gemm:?}");
    let tunable = p.tunable.expect("offers its schedules");
    // Tuned apart from problems offered one form; the work is one form's.
    assert!(
        tunable.class.ends_with(" forms:channels-last"),
        "{}",
        tunable.class
    );
    assert_eq!(tunable.multiply_adds, 16 * 56 * 56 * 128 * 64 * 9);
    let choices = tunable.choices;
    assert!(choices[0].starts_with("channels-last: mma"), "{choices:?}");
    assert!(
        choices.iter().any(|c| !c.starts_with("channels-last: ")),
        "{choices:?}"
    );
    for (channels, caps) in [(60, TargetCaps::cuda_sm90()), (64, TargetCaps::cpu())] {
        let p = lower(&spec(channels), &caps).expect("lowers");
        assert_eq!(p.launches.len(), 1, "{channels} channels");
        let choices = p.tunable.map(|t| t.choices).unwrap_or_default();
        assert!(
            !choices.iter().any(|c| c.starts_with("channels-last: ")),
            "{choices:?}"
        );
    }
}

#[test]
fn conv_backward_data_is_implicit_at_stride_one_and_col2im_above() {
    let caps = TargetCaps::cuda_sm90();
    let implicit = lower(
        &conv(ConvPass::BackwardData, 2, 9, Window2d::square(3, 1, 1)),
        &caps,
    )
    .expect("lowers");
    assert_eq!(implicit.launches.len(), 1);
    assert!(implicit.temps.is_empty());
    let strided = lower(
        &conv(ConvPass::BackwardData, 2, 9, Window2d::square(3, 2, 1)),
        &caps,
    )
    .expect("lowers");
    assert_eq!(strided.launches.len(), 2, "GEMM into columns, then col2im");
    assert_eq!(strided.temps.len(), 1);
    assert_eq!(
        strided.launches[1].bindings.last(),
        Some(&Binding::Output(0))
    );
}

#[test]
fn conv_backward_filter_splits_a_long_reduction_on_gpu() {
    let spec = conv(ConvPass::BackwardFilter, 4, 32, Window2d::square(3, 1, 1));
    let gpu = lower(&spec, &TargetCaps::cuda_sm90()).expect("lowers");
    assert_eq!(gpu.launches.len(), 2, "partial tiles, then their sum");
    let cpu = lower(&spec, &TargetCaps::cpu()).expect("lowers");
    assert_eq!(cpu.launches.len(), 1);
}

#[test]
fn im2col_and_col2im_are_one_map_launch() {
    let window = Window2d::square(3, 2, 1);
    let specs = [
        OpSpec::Im2col(Im2colSpec {
            dtype: ScalarType::F32,
            image: Nchw::new([2, 3, 7, 7]),
            window,
        }),
        OpSpec::Col2im(Col2imSpec {
            dtype: ScalarType::F32,
            image: Nchw::new([2, 3, 7, 7]),
            window,
            accumulate: true,
        }),
    ];
    for spec in specs {
        let p = lower(&spec, &TargetCaps::cuda_sm90()).expect("lowers");
        assert_eq!(p.launches.len(), 1);
        assert_eq!(p.launches[0].kernel.invocations_per_workgroup(), 256);
    }
}

/// Small GEMMs with a bias, where a micro-tile's constant columns or rows reach past
/// the matrix: every one lowers (the epilogue once loaded `bias[col]` at a constant
/// column past the bias inside a dead guard, which does not validate) and is right.
#[test]
fn small_gemms_with_a_bias_lower_and_are_right_on_every_caps() {
    use kernelc_kernels::conformance::{check, Interpreter};
    let all_caps = [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ];
    for caps in all_caps {
        let interp = Interpreter::new("interp", caps);
        for m in 1..=5 {
            for n in 1..=9 {
                for (k, layout) in [(1, Layout::RowMajor), (3, Layout::ColMajor)] {
                    let mut g = GemmSpec::new(ScalarType::F32, m, n, k);
                    g.bias = true;
                    g.layout = layout;
                    let spec = OpSpec::Gemm(g);
                    if let Err(e) = check(&interp, &spec, 3) {
                        panic!("{spec:?}: {e}");
                    }
                }
            }
        }
    }
}
