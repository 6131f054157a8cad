use kernelc_kernels::conformance::cases;
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::*;
#[test]
fn print() {
    let which = std::env::var("WHICH").unwrap_or_default();
    for kind in [
        OpKind::Reduce,
        OpKind::Softmax,
        OpKind::SoftmaxBackward,
        OpKind::CrossEntropy,
        OpKind::LayerNorm,
        OpKind::LayerNormBackward,
        OpKind::BatchNorm,
        OpKind::BatchNormBackward,
    ] {
        for spec in cases::for_kind(kind) {
            for (label, caps) in [("cpu", TargetCaps::cpu()), ("gpu", TargetCaps::cuda_sm90())] {
                let Ok(p) = lower(&spec, &caps) else { continue };
                let desc: Vec<String> = p
                    .launches
                    .iter()
                    .map(|l| {
                        format!(
                            "{}{:?}x{:?}",
                            l.kernel.name, l.kernel.workgroup_size[0], l.grid
                        )
                    })
                    .collect();
                println!(
                    "{label} {} {}",
                    serde_json::to_string(&spec).unwrap(),
                    desc.join(" | ")
                );
                if !which.is_empty()
                    && serde_json::to_string(&spec).unwrap().contains(&which)
                    && label == "gpu"
                {
                    for l in &p.launches {
                        println!("{}", kernelc_ir::print::print(&l.kernel));
                    }
                }
            }
        }
    }
}
