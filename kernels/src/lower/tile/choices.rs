//! The engine's named schedules for one problem: the tile the heuristics pick and the
//! alternatives autotuning times ([`Tunable`]), and the shape class a tuned choice is
//! kept for.

use super::mma::{self, MmaTile};
use super::pack::{Packed, Preference};
use super::schedule::{simt_alternatives, Tile};
use super::{Axis, Gather, GemmCore, GemmOperand};
use crate::lower::{TargetCaps, Tunable};
use kernelc_ir::ScalarType;

/// One schedule of the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Schedule {
    Fragments(MmaTile),
    Simt(Tile),
}

impl Schedule {
    fn name(&self) -> String {
        match self {
            Schedule::Fragments(t) => t.name(),
            Schedule::Simt(t) => t.name(),
        }
    }
}

/// The schedules `core` may take on `caps`, the heuristics' first: the fragment tiles
/// where the device multiplies on matrix units (and, for f64, whose DMMA tiles do not
/// always beat it, the heuristics' SIMT tile too), else the SIMT tiles.
fn schedules(core: &GemmCore, caps: &TargetCaps) -> Vec<Schedule> {
    let fragments = mma::alternatives(core, caps);
    let simt = || {
        simt_alternatives(core, caps)
            .into_iter()
            .map(Schedule::Simt)
    };
    if fragments.is_empty() {
        return simt().collect();
    }
    let mut all: Vec<Schedule> = fragments.into_iter().map(Schedule::Fragments).collect();
    if core.a.dtype == ScalarType::F64 {
        all.extend(simt().take(1));
    }
    all
}

/// The schedule `core` takes on `caps` (the one `caps.schedule` names, where offered,
/// else the heuristics'), whether it is one of `packed`'s (the problem with operands
/// packed, `pack.rs`: its schedules are named `"packed: …"` and come first, after or
/// instead of `core`'s as its preference says), and what the plan records of the
/// choice.
pub(super) fn pick(
    core: &GemmCore,
    packed: Option<&Packed>,
    caps: &TargetCaps,
) -> (Schedule, bool, Tunable) {
    let direct = || schedules(core, caps).into_iter().map(|s| (s, false));
    let of_packed = |p: &Packed| schedules(&p.core, caps).into_iter().map(|s| (s, true));
    let mut all: Vec<(Schedule, bool)> = match packed {
        None => direct().collect(),
        Some(p) => match p.preference {
            Preference::Only => of_packed(p).collect(),
            Preference::First => of_packed(p).chain(direct()).collect(),
            Preference::Last => direct().chain(of_packed(p)).collect(),
        },
    };
    let mut names: Vec<String> = Vec::with_capacity(all.len());
    // A name is a schedule: the first of any two that print alike serves.
    all.retain(|(s, packed)| {
        let name = if *packed {
            format!("packed: {}", s.name())
        } else {
            s.name()
        };
        let new = !names.contains(&name);
        if new {
            names.push(name);
        }
        new
    });
    let wanted = caps
        .schedule
        .as_deref()
        .and_then(|want| names.iter().position(|n| n == want));
    let (chosen, is_packed) = match (wanted, all.first()) {
        (Some(i), _) => all[i],
        (None, Some(&first)) => first,
        // `simt_alternatives` always has the heuristic tile, so no list is empty;
        // should one be, the unpacked problem's heuristic tile serves.
        (None, None) => (
            Schedule::Simt(super::schedule::choose_tile(core, caps)),
            false,
        ),
    };
    let tunable = Tunable {
        class: class(core),
        choices: names,
        multiply_adds: core.multiply_adds(),
    };
    (chosen, is_packed, tunable)
}

/// The shape class of `core`: its types, each operand's kind of placement, and its
/// sizes rounded up to powers of two (`"gemm f32 a:reduction b:outer m4096 n4096
/// k4096 batch1"`). Problems of one class take the same schedule.
fn class(core: &GemmCore) -> String {
    let rounding = core
        .input_rounding
        .map_or(String::new(), |t| format!(" rounded to {t}"));
    let bucket = |v: u32| v.max(1).next_power_of_two();
    format!(
        "gemm {}·{}→{}{rounding} a:{} b:{} m{} n{} k{} batch{}",
        core.a.dtype,
        core.b.dtype,
        core.c.dtype,
        placement(core, &core.a, core.m),
        placement(core, &core.b, core.n),
        bucket(core.m),
        bucket(core.n),
        bucket(core.k),
        bucket(core.batch_count()),
    )
}

/// How an operand is read: along which axis its elements are contiguous, or gathered.
fn placement(core: &GemmCore, op: &GemmOperand, outer_len: u32) -> &'static str {
    match op.gather {
        Gather::Strided { .. } => match op.gather.contiguous(outer_len, core.k) {
            Axis::Outer => "outer",
            Axis::Reduction => "reduction",
        },
        Gather::Split { .. } => "split",
        Gather::Custom(_) => "gathered",
    }
}

#[cfg(test)]
mod tests {
    //! Every schedule a plan offers lowers, is taken when asked for, and computes the
    //! op within the table's tolerance (in the interpreter: the fragment schedules as
    //! the tensor cores run them).

    use crate::conformance::{check, Interpreter};
    use crate::lower::{lower, TargetCaps};
    use crate::spec::{ConvPass, GemmSpec, Layout, OpKind, OpSpec};
    use kernelc_ir::ScalarType::{Bf16, F32, F64};

    fn with_schedule(caps: &TargetCaps, name: &str) -> TargetCaps {
        TargetCaps {
            schedule: Some(name.to_string()),
            ..caps.clone()
        }
    }

    /// Lowers `spec` with each schedule its plan offers and checks it against the
    /// reference; returns the choices.
    fn every_choice_conforms(spec: &OpSpec, caps: &TargetCaps, label: &str) -> Vec<String> {
        let first = lower(spec, caps).unwrap();
        let tunable = first
            .tunable
            .clone()
            .expect("a GEMM plan offers its schedules");
        let mut kernels = Vec::new();
        for name in &tunable.choices {
            let caps = with_schedule(caps, name);
            let plan = lower(spec, &caps).unwrap();
            assert_eq!(plan.tunable.as_ref(), Some(&tunable), "{label} {name}");
            let exec = Interpreter::new(&format!("{label} {name}"), caps);
            if let Err(e) = check(&exec, spec, 11) {
                panic!("{label}: {name}: {spec:?}: {e}");
            }
            kernels.push(plan.launches.last().unwrap().kernel.clone());
        }
        // Each choice is a schedule of its own, and the heuristics' comes first.
        assert_eq!(kernels[0], first.launches.last().unwrap().kernel);
        for (i, a) in kernels.iter().enumerate() {
            for (j, b) in kernels.iter().enumerate().skip(i + 1) {
                let names = (&tunable.choices[i], &tunable.choices[j]);
                assert!(a != b, "{label}: {names:?} lower to one kernel");
            }
        }
        tunable.choices
    }

    #[test]
    fn every_simt_schedule_conforms() {
        let mut spec = GemmSpec::new(F32, 70, 90, 40);
        spec.layout = Layout::ColMajor;
        let spec = OpSpec::Gemm(spec);
        // The GPU's heuristics take one of its tiles already; WebGPU's 16 KiB of
        // shared memory leave out the 128 × 128 tile's 16-deep slabs.
        for (label, caps, count) in [
            ("cpu", TargetCaps::cpu(), 3),
            ("gpu", TargetCaps::gpu_baseline(), 3),
            ("cuda f32", TargetCaps::cuda_sm90(), 4),
        ] {
            let choices = every_choice_conforms(&spec, &caps, label);
            assert_eq!(choices.len(), count, "{label}: {choices:?}");
            assert!(
                choices.iter().all(|c| c.starts_with("simt ")),
                "{choices:?}"
            );
        }
    }

    #[test]
    fn every_fragment_schedule_conforms() {
        let sm90 = TargetCaps::cuda_sm90();
        let half = OpSpec::Gemm(GemmSpec::new(Bf16, 130, 200, 72));
        let choices = every_choice_conforms(&half, &sm90, "sm90 bf16");
        // Warpgroups (two tiles) and mma.sync (two tiles), all by copies.
        assert_eq!(choices.len(), 4, "{choices:?}");
        assert!(
            choices.iter().all(|c| c.ends_with("by copies")),
            "{choices:?}"
        );
        assert!(
            choices.contains(&"mma m64n256k16 128x256x64 2x1 warpgroups 4 stages by copies".into())
        );
        let double = OpSpec::Gemm(GemmSpec::new(F64, 70, 60, 36));
        let choices = every_choice_conforms(&double, &sm90, "sm90 f64");
        // Hopper's f64 shape first, the older one among the alternatives.
        assert!(choices[0].starts_with("mma m16n8k16"), "{choices:?}");
        assert!(
            choices.iter().any(|c| c.starts_with("mma m8n8k4")),
            "{choices:?}"
        );
        assert!(
            choices.iter().any(|c| c.starts_with("simt ")),
            "{choices:?}"
        );
    }

    #[test]
    fn a_convolution_offers_the_schedules_of_its_gemm() {
        let sm90 = TargetCaps::cuda_sm90();
        let conv = OpKind::Conv2d
            .cases()
            .into_iter()
            .find(|s| matches!(s, OpSpec::Conv2d(c) if c.dtype == Bf16))
            .expect("a bf16 convolution case");
        let choices = every_choice_conforms(&conv, &sm90, "sm90 conv");
        assert!(choices.len() >= 2, "{choices:?}");
        // Its image, gathered 2 bytes at a time, also packed for the warpgroups (after
        // the unpacked schedules at this size).
        assert!(!choices[0].starts_with("packed: "), "{choices:?}");
        assert!(
            choices
                .iter()
                .any(|c| c.starts_with("packed: mma m64n256k16")),
            "{choices:?}"
        );
    }

    /// A 16-bit convolution whose channels fill 16-byte copies is also offered on
    /// channels-last copies of its image and filter (after the form as given at these
    /// sizes); every schedule of both forms conforms.
    #[test]
    fn a_convolution_offers_its_channels_last_form() {
        let sm90 = TargetCaps::cuda_sm90();
        let eligible: Vec<OpSpec> = OpKind::Conv2d
            .cases()
            .into_iter()
            .filter(|s| {
                matches!(s, OpSpec::Conv2d(c)
                    if c.pass == ConvPass::Forward
                        && c.dtype.size_bytes() == 2
                        && c.in_channels % 8 == 0
                        && c.in_channels > 0)
            })
            .collect();
        assert_eq!(eligible.len(), 3, "the table's channels-last cases");
        for conv in &eligible {
            let choices = every_choice_conforms(conv, &sm90, "sm90 conv");
            assert!(!choices[0].starts_with("channels-last: "), "{choices:?}");
            let channels_last: Vec<_> = choices
                .iter()
                .filter(|c| c.starts_with("channels-last: mma"))
                .collect();
            assert!(
                channels_last.iter().any(|c| c.contains("warpgroups")),
                "{choices:?}"
            );
            // Its operands are staged whole: nothing left to pack.
            assert!(
                !choices
                    .iter()
                    .any(|c| c.starts_with("channels-last: packed")),
                "{choices:?}"
            );
        }
        // Without asynchronous copies, only the form as given.
        let no_copies = TargetCaps {
            async_copies: false,
            ..sm90.clone()
        };
        let plan = lower(&eligible[0], &no_copies).unwrap();
        let choices = plan
            .tunable
            .expect("a convolution offers its schedules")
            .choices;
        assert!(
            !choices.iter().any(|c| c.starts_with("channels-last: ")),
            "{choices:?}"
        );
    }

    /// A large convolution of 256 output channels packs its image and runs on
    /// warpgroups by the heuristics (of 128, it offers the packed form after the
    /// unpacked one); without asynchronous copies (or warpgroups) nothing is packed.
    #[test]
    fn a_large_convolution_packs_its_image_for_the_warpgroups() {
        use crate::spec::{Conv2dSpec, ConvPass, Window2d};
        let conv = OpSpec::Conv2d(Conv2dSpec {
            dtype: Bf16,
            pass: ConvPass::Forward,
            batch: 16,
            // Not a multiple of 8: no channels-last form (whose copies need whole
            // 16-byte runs of channels); 132·9 a multiple of 4, as the packed form needs.
            in_channels: 132,
            out_channels: 256,
            height: 28,
            width: 28,
            window: Window2d {
                kernel: [3, 3],
                stride: [1, 1],
                padding: [1, 1],
            },
            bias: false,
        });
        let sm90 = TargetCaps::cuda_sm90();
        let plan = lower(&conv, &sm90).unwrap();
        let choices = plan.tunable.as_ref().unwrap().choices.clone();
        assert!(
            choices[0].starts_with("packed: mma m64n256k16"),
            "{choices:?}"
        );
        assert!(choices.iter().any(|c| !c.starts_with("packed: ")));
        assert_eq!(
            plan.temps.len(),
            1,
            "the image only: the filter stages as it is"
        );
        let names: Vec<&str> = plan
            .launches
            .iter()
            .map(|l| l.kernel.name.as_str())
            .collect();
        assert!(names[0].contains("_pack_input"), "{names:?}");
        let gemm = &plan.launches.last().unwrap().kernel;
        assert!(gemm
            .fragments
            .iter()
            .all(|f| f.shape == kernelc_ir::MmaShape::M64N256K16));
        let OpSpec::Conv2d(mut narrow) = conv.clone() else {
            unreachable!()
        };
        narrow.out_channels = 128;
        // An operand that stages element by element for another reason (a reduction of
        // no multiple of 4) gains nothing by packing: not offered.
        let odd = OpSpec::Gemm(GemmSpec::new(Bf16, 4096, 4096, 4094));
        let choices = lower(&odd, &sm90).unwrap().tunable.unwrap().choices;
        assert!(
            choices.iter().all(|c| !c.starts_with("packed: ")),
            "{choices:?}"
        );
        let plan = lower(&OpSpec::Conv2d(narrow), &sm90).unwrap();
        let choices = plan.tunable.unwrap().choices;
        assert!(!choices[0].starts_with("packed: "), "{choices:?}");
        assert!(choices.iter().any(|c| c.starts_with("packed: ")));
        for caps in [
            TargetCaps {
                async_copies: false,
                ..sm90.clone()
            },
            TargetCaps {
                warpgroup_fragments: false,
                ..sm90
            },
        ] {
            let plan = lower(&conv, &caps).unwrap();
            assert!(plan.temps.is_empty());
            let choices = &plan.tunable.unwrap().choices;
            assert!(choices.iter().all(|c| !c.starts_with("packed: ")));
        }
    }

    #[test]
    fn an_unknown_schedule_leaves_the_heuristics_choice() {
        let spec = OpSpec::Gemm(GemmSpec::new(F32, 64, 64, 64));
        let caps = TargetCaps::gpu_baseline();
        let plain = lower(&spec, &caps).unwrap();
        let other = lower(&spec, &with_schedule(&caps, "simt 1x1x1 1x1 of 1x1")).unwrap();
        assert_eq!(plain, other);
    }

    #[test]
    fn one_class_serves_sizes_that_round_alike() {
        let class = |m, n, k, layout| {
            let mut g = GemmSpec::new(F32, m, n, k);
            g.layout = layout;
            lower(&OpSpec::Gemm(g), &TargetCaps::cpu())
                .unwrap()
                .tunable
                .unwrap()
        };
        let a = class(1000, 3000, 4096, Layout::RowMajor);
        assert_eq!(a.class, class(1024, 2049, 4000, Layout::RowMajor).class);
        assert_eq!(a.multiply_adds, 1000 * 3000 * 4096);
        assert_ne!(a.class, class(1025, 3000, 4096, Layout::RowMajor).class);
        assert_ne!(a.class, class(1000, 3000, 4096, Layout::ColMajor).class);
        assert!(a.class.starts_with("gemm f32·f32→f32 "), "{}", a.class);
    }
}
