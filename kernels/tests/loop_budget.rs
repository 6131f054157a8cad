//! Every kernel of the catalogue fits a loop-iteration budget like llvmpipe's (65,535
//! per invocation), and the bound `fit_loop_budget` reasons with holds on real runs:
//! each conformance case runs on the interpreter with every loop trip counted.

use kernelc_ir::interp::HostBuffer;
use kernelc_ir::passes::{self, LoopBudget, MathExpansion};
use kernelc_ir::testing;
use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::conformance::{case_data, cases};
use kernelc_kernels::lower::{lower, poison, run_plan, Binding, TargetCaps};

/// llvmpipe's budget under wgpu's grid limit.
const LAVAPIPE: LoopBudget = LoopBudget {
    iterations: 65_535,
    max_workgroups: [65_535; 3],
    max_unrolled_nodes: 4096,
};

#[test]
fn every_case_runs_within_its_loop_bound_and_fits_the_budget() {
    // What the wgpu paths expand (every transcendental, f64 too, and float `%`, whose
    // long division loops).
    let expansion = MathExpansion::all_transcendental_with_f64().with_float_rem(true);
    let mut checked = 0;
    // The budget matters to GPU-shaped kernels (llvmpipe runs those); the bound must
    // hold for the CPU's too.
    for (caps, budgeted) in [
        (TargetCaps::cpu(), false),
        (TargetCaps::gpu_baseline(), true),
    ] {
        for spec in cases::all() {
            let sigs = spec.inputs().into_iter().chain(spec.outputs());
            if !sigs.into_iter().all(|s| caps.supports(s.dtype)) {
                continue;
            }
            let mut plan = lower(&spec, &caps).unwrap();
            let outputs = spec.outputs();
            let mut buffers: Vec<HostBuffer> = outputs
                .iter()
                .map(|s| HostBuffer::filled(s.dtype, s.numel(), poison(s.dtype)))
                .collect();
            let mut bounds = Vec::new();
            for launch in &mut plan.launches {
                let kernel = passes::for_target(&launch.kernel, &expansion);
                let bound = passes::worst_case_loop_iterations(&kernel, launch.grid);
                if budgeted {
                    if let Err(e) = passes::fit_loop_budget(&kernel, &LAVAPIPE) {
                        panic!("{}: {e}", spec.name());
                    }
                }
                launch.kernel = testing::with_loop_counter(&kernel, launch.grid).unwrap();
                launch.bindings.push(Binding::Output(buffers.len()));
                let invocations = testing::invocations(&kernel, launch.grid) as usize;
                buffers.push(HostBuffer::filled(
                    ScalarType::U32,
                    invocations,
                    Scalar::U32(0),
                ));
                bounds.push(bound);
            }
            let data = case_data(&spec, 0x5eed);
            run_plan(&plan, &spec.uniforms(), &data.buffers, &mut buffers)
                .unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
            for (i, bound) in bounds.iter().enumerate() {
                let ran = testing::most(&buffers[outputs.len() + i]);
                assert!(
                    ran <= *bound,
                    "{} launch {i}: an invocation ran {ran} loop iterations, over the bound \
                     {bound}\n{}",
                    serde_json::to_string(&spec).unwrap_or_default(),
                    passes::for_target(
                        &lower(&spec, &caps).unwrap().launches[i].kernel,
                        &expansion
                    )
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 400, "only {checked} cases checked");
}
