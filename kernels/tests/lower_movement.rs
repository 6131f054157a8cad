//! Lowering of the movement family (permute, slice, concat, gather, scatter), rope,
//! dropout, adam and the image filters: the conformance table of these kinds on the
//! interpreter under CPU and GPU caps (the same check as the workspace conformance
//! test, runnable with this crate alone), plus schedule properties.

use kernelc_ir::interp::HostBuffer;
use kernelc_ir::ScalarType;
use kernelc_kernels::lower::{lower, run_plan, LowerError, Plan, TargetCaps};
use kernelc_kernels::rng::RngScheme;
use kernelc_kernels::spec::*;

fn plan(spec: OpSpec, caps: &TargetCaps) -> Plan {
    lower(&spec, caps).expect("lowers")
}

#[test]
fn transpose_uses_a_padded_shared_tile_on_gpu() {
    let spec = OpSpec::Permute(PermuteSpec {
        dtype: ScalarType::F32,
        shape: vec![100, 200],
        perm: vec![1, 0],
    });
    let p = plan(spec, &TargetCaps::cuda_sm90());
    let k = &p.launches[0].kernel;
    assert_eq!(k.workgroup_size, [32, 8, 1]);
    assert_eq!(k.shared.len(), 1);
    assert_eq!(k.shared[0].len, 32 * 33);
    assert_eq!(p.launches[0].grid, [4 * 7, 1, 1]);
}

#[test]
fn contiguous_copies_are_vectorised() {
    let spec = OpSpec::Slice(SliceSpec {
        dtype: ScalarType::F32,
        shape: vec![6, 16],
        starts: vec![1, 0],
        sizes: vec![4, 16],
        steps: vec![1, 1],
    });
    let p = plan(spec, &TargetCaps::cuda_sm90());
    let printed = format!("{:?}", p.launches[0].kernel.body);
    assert!(printed.contains("lanes: 4"), "{printed}");
}

#[test]
fn unsupported_dtype_is_a_typed_error() {
    let spec = OpSpec::Gather(GatherSpec {
        dtype: ScalarType::F64,
        index_dtype: ScalarType::U32,
        data: vec![4, 4],
        indices: vec![2],
        axis: 0,
        rows_of: None,
    });
    assert!(matches!(
        lower(&spec, &TargetCaps::gpu_baseline()),
        Err(LowerError::UnsupportedDtype { .. })
    ));
}

/// Gather with out-of-range, negative and fractional f32 indices, checked by hand.
#[test]
fn gather_index_rules() {
    let spec = OpSpec::Gather(GatherSpec {
        dtype: ScalarType::F32,
        index_dtype: ScalarType::F32,
        data: vec![4],
        indices: vec![7],
        axis: 0,
        rows_of: None,
    });
    let data = HostBuffer::from_f32(&[10.0, 11.0, 12.0, 13.0]);
    let idx = HostBuffer::from_f32(&[1.9, -1.0, -4.5, 4.0, f32::NAN, -0.5, f32::INFINITY]);
    for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
        let p = plan(spec.clone(), &caps);
        let mut out = vec![HostBuffer::from_f32(&[f32::NAN; 7])];
        run_plan(&p, &[], &[data.clone(), idx.clone()], &mut out).expect("runs");
        assert_eq!(out[0].to_f32(), vec![11.0, 13.0, 10.0, 0.0, 0.0, 10.0, 0.0]);
    }
}

#[test]
fn dropout_rng_schemes_differ() {
    let mk = |rng| {
        OpSpec::Dropout(DropoutSpec {
            dtype: ScalarType::F32,
            shape: vec![64],
            p: 0.5,
            seed: 3,
            step: 5,
            mask: true,
            rng,
            offset: 0,
        })
    };
    let a = plan(mk(RngScheme::Counter), &TargetCaps::cpu());
    let b = plan(mk(RngScheme::Rumus), &TargetCaps::cpu());
    assert_ne!(a.launches[0].kernel, b.launches[0].kernel);
}

fn blur(radius: usize, hwc: [usize; 3]) -> OpSpec {
    OpSpec::ImageFilter(ImageFilterSpec {
        filter: ImageFilter::GaussianBlur { sigma: 2.0, radius },
        dtype: ScalarType::F32,
        height: hwc[0],
        width: hwc[1],
        channels: hwc[2],
    })
}

#[test]
fn narrow_blur_is_one_staged_launch_and_wide_blur_two_passes() {
    for caps in [
        TargetCaps::cpu(),
        TargetCaps::cuda_sm90(),
        TargetCaps::gpu_baseline(),
    ] {
        let narrow = plan(blur(2, [480, 640, 3]), &caps);
        assert_eq!(narrow.launches.len(), 1);
        let k = &narrow.launches[0].kernel;
        assert_eq!(k.shared.len(), 2, "staged region and row pass");
        assert!(k.shared_bytes() <= caps.shared_memory_bytes as u64);
        assert_eq!(k.workgroup_size[0], caps.invocations_1d());
        let wide = plan(blur(20, [480, 640, 3]), &caps);
        assert_eq!(wide.launches.len(), 2);
        assert_eq!(wide.temps.len(), 1);
    }
}

#[test]
fn stencils_stage_a_tile_in_shared_memory_on_gpu() {
    let caps = TargetCaps::gpu_baseline();
    for filter in [ImageFilter::Sharpen, ImageFilter::Sobel { threshold: 0.5 }] {
        let spec = OpSpec::ImageFilter(ImageFilterSpec {
            filter,
            dtype: ScalarType::F32,
            height: 1080,
            width: 1920,
            channels: 4,
        });
        let p = plan(spec, &caps);
        let k = &p.launches[0].kernel;
        assert_eq!(k.workgroup_size, [256, 1, 1]);
        assert!(!k.shared.is_empty());
        // 8 × 32 pixel tiles.
        assert_eq!(p.launches[0].grid[0] * p.launches[0].grid[1], 135 * 60);
    }
}

#[test]
fn scatter_resolves_indices_into_shared_memory() {
    let spec = OpSpec::Scatter(ScatterSpec {
        dtype: ScalarType::F32,
        index_dtype: ScalarType::I32,
        data: vec![1000, 64],
        indices: vec![5000],
        axis: 0,
        combine: ScatterCombine::Sum,
        init: ScatterInit::Zero,
        rows_of: None,
    });
    let p = plan(spec, &TargetCaps::cuda_sm90());
    let k = &p.launches[0].kernel;
    assert_eq!(k.shared[0].len, 256);
    assert_eq!(
        p.launches[0].grid[0] * p.launches[0].grid[1],
        1000 * 64 / 256
    );
}

/// With almost no shared memory: transposes gather, blurs run two direct passes, and a
/// stencil that must stage reports the shortfall as a typed error.
#[test]
fn tiny_shared_memory_falls_back_or_reports() {
    let caps = TargetCaps {
        shared_memory_bytes: 16,
        ..TargetCaps::gpu_baseline()
    };
    let transpose = OpSpec::Permute(PermuteSpec {
        dtype: ScalarType::F32,
        shape: vec![40, 50],
        perm: vec![1, 0],
    });
    assert!(plan(transpose, &caps).launches[0].kernel.shared.is_empty());
    assert_eq!(plan(blur(1, [20, 30, 3]), &caps).launches.len(), 2);
    let sharpen = OpSpec::ImageFilter(ImageFilterSpec {
        filter: ImageFilter::Sharpen,
        dtype: ScalarType::F32,
        height: 20,
        width: 30,
        channels: 3,
    });
    assert!(matches!(
        lower(&sharpen, &caps),
        Err(LowerError::SharedMemory {
            needed: 108,
            available: 16,
            ..
        })
    ));
}
