//! Pooling lowering: the table's cases on every caps (the GPU baseline included), the
//! launch structure of each schedule, and exhaustive small sweeps of the closed-form
//! window ranges (pooling with every kernel/stride/padding, adaptive with every size
//! pair) against the reference.

use kernelc_ir::ScalarType::*;
use kernelc_kernels::conformance::{cases, Interpreter};
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::*;

fn all_caps() -> Vec<(&'static str, TargetCaps)> {
    vec![
        ("cpu", TargetCaps::cpu()),
        ("sm90", TargetCaps::cuda_sm90()),
        ("baseline", TargetCaps::gpu_baseline()),
    ]
}

/// The sweeps' specs on every caps, through the shared harness.
fn conform(specs: &[OpSpec]) {
    for (label, caps) in all_caps() {
        kernelc_kernels::conformance::conform(
            &Interpreter::new(label, caps.clone()),
            &caps,
            specs,
            3,
        )
        .assert_ok(label);
    }
}

#[test]
fn launch_structure() {
    let caps = TargetCaps::cuda_sm90();
    for s in cases::for_kind(OpKind::Pool2dBackward) {
        let OpSpec::Pool2dBackward(b) = &s else {
            continue;
        };
        if s.outputs().iter().all(|o| o.numel() == 0) {
            // Zero-sized: nothing to launch.
            continue;
        }
        let plan = lower(&s, &caps).unwrap();
        // The gather is one launch; only window-less max routing needs two.
        let expected = if b.window.is_some() { 1 } else { 2 };
        assert_eq!(plan.launches.len(), expected, "{s:?}");
        assert_eq!(plan.launches[0].kernel.workgroup_size, [256, 1, 1]);
    }
    let cpu = lower(&OpKind::Pool2d.example(), &TargetCaps::cpu()).unwrap();
    assert_eq!(cpu.launches[0].kernel.workgroup_size, [1, 1, 1]);
}

/// Every kernel 1..=4, stride 1..=3, legal padding, on ragged images: forward (max with
/// indices, avg both count modes) and the backward gather, against the reference.
#[test]
fn window_sweep() {
    let mut specs = Vec::new();
    for k in 1..=4 {
        for stride in 1..=3 {
            for pad in 0..=k / 2 {
                let window = Window2d {
                    kernel: [k, 5 - k],
                    stride: [stride, 4 - stride],
                    padding: [pad, (5 - k) / 2],
                };
                let (h, w) = (7, 6);
                let Some([oh, ow]) = window.out_size([h, w]) else {
                    continue;
                };
                for (kind, include) in [
                    (PoolKind::Max, false),
                    (PoolKind::Avg, false),
                    (PoolKind::Avg, true),
                ] {
                    let max = kind == PoolKind::Max;
                    specs.push(OpSpec::Pool2d(Pool2dSpec {
                        kind,
                        dtype: F32,
                        image: Nchw::new([1, 2, h, w]),
                        window,
                        count_include_pad: include,
                        indices: max.then_some(U32),
                    }));
                    specs.push(OpSpec::Pool2dBackward(Pool2dBackwardSpec {
                        kind,
                        dtype: F32,
                        image: Nchw::new([1, 2, h, w]),
                        out_height: oh,
                        out_width: ow,
                        window: Some(window),
                        count_include_pad: include,
                        index_dtype: max.then_some(I32),
                        accumulate: stride == 2,
                    }));
                }
            }
        }
    }
    assert!(specs.len() > 50);
    conform(&specs);
}

/// Every input/output size pair up to 7 on one axis (down- and upsampling).
#[test]
fn adaptive_sweep() {
    let mut specs = Vec::new();
    for i in 1..=7 {
        for o in 1..=7 {
            for (kind, pass) in [
                (PoolKind::Max, PoolPass::Forward),
                (PoolKind::Avg, PoolPass::Forward),
                (PoolKind::Avg, PoolPass::Backward),
            ] {
                specs.push(OpSpec::AdaptivePool2d(AdaptivePool2dSpec {
                    kind,
                    pass,
                    dtype: F32,
                    batch: 1,
                    channels: 1,
                    in_size: [i, 8 - i],
                    out_size: [o, 8 - o],
                }));
            }
        }
    }
    conform(&specs);
}
