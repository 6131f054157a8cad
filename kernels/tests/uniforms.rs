//! Per-call values are uniforms: for every conformance case and every caps, lowering
//! never reads them (the plan of a spec equals the plan of its structural spec), the
//! structural spec lists uniforms of the same names and types, and every uniform
//! binding feeds a kernel parameter of the uniform's type. A lowering that baked a
//! per-call value into a literal fails the first check.

use kernelc_ir::{Param, ScalarType};
use kernelc_kernels::conformance::cases;
use kernelc_kernels::lower::{lower, Binding, TargetCaps, Whole};
use kernelc_kernels::spec::*;

fn all_caps() -> [(&'static str, TargetCaps); 3] {
    [
        ("cpu", TargetCaps::cpu()),
        ("gpu", TargetCaps::cuda_sm90()),
        ("webgpu", TargetCaps::gpu_baseline()),
    ]
}

fn supported(spec: &OpSpec, caps: &TargetCaps) -> bool {
    spec.inputs()
        .iter()
        .chain(spec.outputs().iter())
        .all(|s| caps.supports(s.dtype))
}

#[test]
fn lowering_never_reads_a_per_call_value() {
    let mut checked = 0;
    for spec in cases::all() {
        let structural = spec.structural();
        assert!(
            structural.validate().is_ok(),
            "{}: structural spec {structural:?} is invalid",
            spec.name()
        );
        assert_eq!(
            structural.structural(),
            structural,
            "structural is idempotent"
        );
        let (u, su) = (spec.uniforms(), structural.uniforms());
        let shape = |v: &[kernelc_kernels::lower::Uniform]| {
            v.iter()
                .map(|u| (u.name.clone(), u.value.ty()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            shape(&u),
            shape(&su),
            "{}: uniform names/types",
            spec.name()
        );
        for (label, caps) in all_caps() {
            if !supported(&spec, &caps) {
                continue;
            }
            let plan = lower(&spec, &caps).expect("lowers");
            let again = lower(&structural, &caps).expect("structural lowers");
            assert_eq!(
                plan,
                again,
                "{} on {label} caps: the plan depends on a per-call value ({:?})",
                spec.name(),
                u
            );
            for launch in &plan.launches {
                for (param, binding) in launch.kernel.params.iter().zip(&launch.bindings) {
                    if let Binding::Uniform(i) = binding {
                        let uniform = u.get(*i).expect("uniform index in range");
                        let Param::Scalar { ty, .. } = param else {
                            panic!("{}: a uniform binds a buffer parameter", spec.name());
                        };
                        assert_eq!(
                            *ty,
                            uniform.value.ty(),
                            "{}: `{}`",
                            spec.name(),
                            uniform.name
                        );
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 900, "only {checked} plans checked");
}

/// The attributes named in issue #12 are uniforms: changing them leaves the
/// structural spec (the cache key) unchanged.
#[test]
fn the_per_call_attributes_do_not_change_the_key() {
    let adam = |lr: f64, step: u64| {
        OpSpec::Adam(AdamSpec {
            dtype: ScalarType::F32,
            len: 10,
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            decoupled: true,
            step,
        })
    };
    assert_eq!(adam(1e-3, 1).structural(), adam(3e-4, 977).structural());
    let dropout = |seed: u64, step: u64| {
        OpSpec::Dropout(DropoutSpec {
            dtype: ScalarType::F32,
            shape: vec![5],
            p: 0.25,
            seed,
            step,
            mask: true,
            rng: kernelc_kernels::rng::RngScheme::Counter,
            offset: 0,
        })
    };
    assert_eq!(dropout(1, 2).structural(), dropout(99, 100).structural());
    let scalar = |v: f64| {
        OpSpec::Scalar(ScalarSpec {
            func: BinaryFn::Mul,
            dtype: ScalarType::F32,
            shape: vec![5],
            scalar: v,
            reversed: false,
            out_dtype: None,
        })
    };
    assert_eq!(scalar(0.5).structural(), scalar(-3e9).structural());
    let gemm = |alpha: f64, beta: f64| {
        let mut g = GemmSpec::new(ScalarType::F32, 3, 4, 5);
        g.alpha = alpha;
        g.beta = beta;
        OpSpec::Gemm(g)
    };
    assert_eq!(gemm(2.0, 0.5).structural(), gemm(-1.0, 3.0).structural());
    // beta = 0 reads no C: a different kernel, on purpose.
    assert_ne!(gemm(2.0, 0.0).structural(), gemm(2.0, 0.5).structural());
    // p = 0 is a copy: a different kernel, on purpose.
    let mut keep_all = dropout(1, 2);
    if let OpSpec::Dropout(d) = &mut keep_all {
        d.p = 0.0;
    }
    assert_ne!(keep_all.structural(), dropout(1, 2).structural());
}

/// Inputs are read-only in every kernel that binds them: the runtime lends host slices
/// and caller views as inputs and relies on no kernel writing them (a kernel that
/// updates an input in place does so through an output the spec aliases to it).
#[test]
fn every_input_binds_a_read_only_parameter() {
    let mut checked = 0;
    // The table, and the split cases in pieces (inputs bound as parts).
    let specs = cases::all()
        .into_iter()
        .map(|s| (s, TargetCaps::MAX_KERNEL_ELEMENTS))
        .chain(cases::split().into_iter().map(|s| (s, cases::SPLIT_LIMIT)));
    for (spec, limit) in specs {
        for (name, caps) in all_caps() {
            let caps = TargetCaps {
                max_kernel_elements: limit,
                ..caps
            };
            if !supported(&spec, &caps) {
                continue;
            }
            let plan = lower(&spec, &caps).unwrap_or_else(|e| panic!("{name}: {e}"));
            for launch in &plan.launches {
                for (binding, param) in launch.bindings.iter().zip(&launch.kernel.params) {
                    if let (
                        Binding::Input(i)
                        | Binding::Part {
                            of: Whole::Input(i),
                            ..
                        },
                        Param::Buffer {
                            access, name: p, ..
                        },
                    ) = (binding, param)
                    {
                        assert!(
                            !access.can_write(),
                            "{name}: {}: input {i} binds the writable parameter `{p}`",
                            spec.name()
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} input bindings checked");
}
