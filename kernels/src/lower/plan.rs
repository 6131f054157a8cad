//! The result of lowering: kernels, their grids, and what each parameter binds to.

use super::{LowerError, TargetCaps};
use crate::spec::TensorSig;
use kernelc_ir::builder::{KernelBuilder, Mem};
use kernelc_ir::{Access, Kernel, Scalar, ScalarType};
use serde::{Deserialize, Serialize};

/// What one kernel parameter is bound to at launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// Input tensor `i` of the op (in `OpSpec::inputs` order).
    Input(usize),
    /// Output tensor `i` of the op (in `OpSpec::outputs` order).
    Output(usize),
    /// Temporary buffer `i` of the plan.
    Temp(usize),
    /// A scalar the lowering computed from the spec's structure (a shape-derived
    /// constant); part of the plan, so of its cache key.
    Scalar(Scalar),
    /// Per-call value `i` of the op (in [`OpSpec::uniforms`](crate::OpSpec::uniforms)
    /// order): bound at launch from the spec being run, so the plan and its kernels
    /// serve every value.
    Uniform(usize),
    /// The elements of a tensor from element `start`, as many as the kernel parameter
    /// declares: a piece of a tensor too large for one kernel's 32-bit indices
    /// ([`split`](super::split)). `start` is a multiple of the target's
    /// [`binding_alignment`](super::TargetCaps::binding_alignment) bytes, so the device
    /// binds the piece where it is (a piece starting between two is bound from the one
    /// below and indexed past it: `lower::rebase`).
    Part { of: Whole, start: u64 },
}

/// The tensor a [`Binding::Part`] is a piece of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whole {
    Input(usize),
    Output(usize),
    Temp(usize),
}

impl Whole {
    /// The binding of the whole tensor.
    pub fn binding(self) -> Binding {
        match self {
            Whole::Input(i) => Binding::Input(i),
            Whole::Output(i) => Binding::Output(i),
            Whole::Temp(i) => Binding::Temp(i),
        }
    }
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub kernel: Kernel,
    /// Workgroups along x, y, z.
    pub grid: [u32; 3],
    /// One binding per kernel parameter, in parameter order.
    pub bindings: Vec<Binding>,
}

/// A device buffer the plan needs between launches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TempBuffer {
    pub dtype: ScalarType,
    pub len: u64,
}

/// What a [`Prefill`] writes into its output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillSource {
    /// Every element this value (of the output's dtype, as a store leaves it).
    Value(Scalar),
    /// The elements of op input `i` (same dtype and element count).
    Input(usize),
}

/// An output written before any launch without a kernel: by a device fill or copy.
/// What an op over zero-sized inputs gives where its output is not empty (a
/// reduction over an empty axis: its identity; a scatter of no rows: its initial
/// value).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prefill {
    /// Output tensor `i` of the op.
    pub output: usize,
    pub source: PrefillSource,
}

/// An op lowered for one target: its prefills, then its launches in order, each
/// seeing the writes of the ones before it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub launches: Vec<Launch>,
    pub temps: Vec<TempBuffer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefills: Vec<Prefill>,
    /// The schedules the lowering chose between, where it had a choice worth timing
    /// (autotuning: the runtime times them and lowers again with the fastest as
    /// [`TargetCaps::schedule`](super::TargetCaps::schedule)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunable: Option<Tunable>,
}

/// A choice of schedule a plan's lowering made by heuristics, and the alternatives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunable {
    /// The shape class the choice is kept for: problems whose sizes round to the same
    /// powers of two, with the same types and memory layouts (one tuning serves them
    /// all). A plan of several tunable parts keeps the first part's class.
    pub class: String,
    /// The schedules' names, the heuristics' choice first; lowering with
    /// [`TargetCaps::schedule`](super::TargetCaps::schedule) set to one takes it
    /// wherever it is offered.
    pub choices: Vec<String>,
    /// Multiply-adds of the tunable parts (tuning pays only for large ones).
    pub multiply_adds: u64,
}

impl Tunable {
    /// `other`'s choices and work added to these (a plan of several tunable parts).
    pub fn merge(&mut self, other: Tunable) {
        for name in other.choices {
            if !self.choices.contains(&name) {
                self.choices.push(name);
            }
        }
        self.multiply_adds = self.multiply_adds.saturating_add(other.multiply_adds);
    }
}

/// Records `offered` into a plan's `tunable` (merged with what is there).
pub(crate) fn offer(tunable: &mut Option<Tunable>, offered: Option<Tunable>) {
    match (tunable.as_mut(), offered) {
        (Some(have), Some(more)) => have.merge(more),
        (None, more) => *tunable = more,
        (Some(_), None) => {}
    }
}

impl Plan {
    /// A plan of one launch and no temporaries.
    pub fn single(launch: Launch) -> Plan {
        Plan {
            launches: vec![launch],
            ..Plan::default()
        }
    }

    /// A plan that writes its outputs without kernels.
    pub fn prefilled(prefills: Vec<Prefill>) -> Plan {
        Plan {
            prefills,
            ..Plan::default()
        }
    }

    /// A plan that writes every element of output `output` with `value` (the zero of
    /// a sum of nothing, a reduction's identity), without kernels.
    pub fn filled(output: usize, value: Scalar) -> Plan {
        Plan::filled_all(&[output], value)
    }

    /// A plan that writes `value` into every element of each of `outputs`.
    pub fn filled_all(outputs: &[usize], value: Scalar) -> Plan {
        Plan::prefilled(
            outputs
                .iter()
                .map(|&output| Prefill {
                    output,
                    source: PrefillSource::Value(value),
                })
                .collect(),
        )
    }

    /// This plan with every op input `i` it refers to renamed `inputs[i]`: the plan of
    /// an op over a subset of another op's inputs (a concat of its non-empty pieces),
    /// serving that other op.
    pub fn with_inputs(mut self, inputs: &[usize]) -> Plan {
        let rename = |i: &mut usize| {
            if let Some(&to) = inputs.get(*i) {
                *i = to;
            }
        };
        for launch in &mut self.launches {
            for b in &mut launch.bindings {
                if let Binding::Input(i)
                | Binding::Part {
                    of: Whole::Input(i),
                    ..
                } = b
                {
                    rename(i);
                }
            }
        }
        for fill in &mut self.prefills {
            if let PrefillSource::Input(i) = &mut fill.source {
                rename(i);
            }
        }
        self
    }
}

/// Launches and temporaries accumulated by one or more lowerings (several engines may
/// append to one plan), collected into a [`Plan`].
#[derive(Default)]
pub(crate) struct PlanBuilder {
    pub launches: Vec<Launch>,
    pub temps: Vec<TempBuffer>,
    pub tunable: Option<Tunable>,
}

impl PlanBuilder {
    /// A new temporary buffer of `len` elements, and the binding that names it.
    pub fn temp(&mut self, dtype: ScalarType, len: u64) -> Binding {
        self.temps.push(TempBuffer { dtype, len });
        Binding::Temp(self.temps.len() - 1)
    }

    /// Appends the launches of `sub`, another op's plan serving this one: its input
    /// `i` reads `inputs[i]`, its output `i` writes `outputs[i]`, its temporaries
    /// follow this plan's, its schedules (if it offers a choice) join this plan's. A
    /// sub-plan with prefills, per-call values, a binding past those given or a piece
    /// of an input or output (lowered past 32-bit indices) is an internal error: the
    /// caller lowers one whose every tensor fits one kernel.
    pub fn append(
        &mut self,
        sub: Plan,
        inputs: &[Binding],
        outputs: &[Binding],
    ) -> Result<(), LowerError> {
        if !sub.prefills.is_empty() {
            return Err(LowerError::Internal("a sub-plan prefills its outputs"));
        }
        let first_temp = self.temps.len();
        let rebind = |b: Binding| -> Result<Binding, LowerError> {
            let given = |list: &[Binding], i: usize| {
                list.get(i)
                    .cloned()
                    .ok_or(LowerError::Internal("a sub-plan binds a tensor not given"))
            };
            match b {
                Binding::Input(i) => given(inputs, i),
                Binding::Output(i) => given(outputs, i),
                Binding::Temp(i) => Ok(Binding::Temp(first_temp + i)),
                Binding::Part {
                    of: Whole::Temp(i),
                    start,
                } => Ok(Binding::Part {
                    of: Whole::Temp(first_temp + i),
                    start,
                }),
                Binding::Part {
                    of: Whole::Input(_) | Whole::Output(_),
                    ..
                } => Err(LowerError::Internal(
                    "a sub-plan binds a piece of an input or output",
                )),
                // The sub-op's per-call values are not this op's.
                Binding::Uniform(_) => {
                    Err(LowerError::Internal("a sub-plan binds a per-call value"))
                }
                Binding::Scalar(_) => Ok(b),
            }
        };
        for mut launch in sub.launches {
            launch.bindings = launch
                .bindings
                .into_iter()
                .map(rebind)
                .collect::<Result<_, _>>()?;
            self.launches.push(launch);
        }
        self.temps.extend(sub.temps);
        offer(&mut self.tunable, sub.tunable);
        Ok(())
    }

    /// The plan: the launches in the order they were appended.
    pub fn finish(self) -> Plan {
        Plan {
            launches: self.launches,
            temps: self.temps,
            prefills: Vec::new(),
            tunable: self.tunable,
        }
    }
}

/// One way to lower an op, among several that compute the same result by different
/// launches (a convolution on its image as given or on a channels-last copy): it
/// appends its launches to a plan for the caps given, and its schedules are named
/// with `prefix`.
pub(crate) struct Form<'a> {
    pub prefix: &'static str,
    pub lower: &'a dyn Fn(&TargetCaps, &mut PlanBuilder) -> Result<(), LowerError>,
}

/// The plan of an op with several [`Form`]s, the heuristics' first: every form's
/// schedules are offered (named with its prefix), and the form one of whose schedules
/// `caps.schedule` names is taken with that schedule, else the first that lowers with
/// its heuristics. The prefixes must tell the forms apart (an empty one matches what
/// no other does). A form that does not lower is left out (none lowering: the first
/// one's error). The shape class names the forms offered (a problem offered one form
/// and one offered two are tuned apart), and the work is one form's, not their sum.
pub(crate) fn lower_forms(caps: &TargetCaps, forms: &[Form]) -> Result<Plan, LowerError> {
    let mut plans = Vec::with_capacity(forms.len());
    let mut offered: Option<Tunable> = None;
    let mut wanted = None;
    let mut first_error = None;
    let mut names = Vec::new();
    let mut work = 0u64;
    for form in forms {
        let mut form_caps = caps.clone();
        form_caps.schedule = caps
            .schedule
            .as_deref()
            .and_then(|s| s.strip_prefix(form.prefix))
            .map(str::to_string);
        let mut plan = PlanBuilder::default();
        if let Err(e) = (form.lower)(&form_caps, &mut plan) {
            first_error.get_or_insert(e);
            continue;
        }
        names.push(form.prefix.trim_end_matches([' ', ':']));
        if let Some(mut tunable) = plan.tunable.take() {
            for choice in &mut tunable.choices {
                *choice = format!("{}{choice}", form.prefix);
            }
            let named = caps
                .schedule
                .as_ref()
                .is_some_and(|s| tunable.choices.contains(s));
            if named && wanted.is_none() {
                wanted = Some(plans.len());
            }
            work = work.max(tunable.multiply_adds);
            offer(&mut offered, Some(tunable));
        }
        plans.push(plan);
    }
    if plans.is_empty() {
        return Err(first_error.unwrap_or(LowerError::Internal("an op lowered with no form")));
    }
    let mut plan = plans.swap_remove(wanted.unwrap_or(0));
    if let Some(t) = offered.as_mut() {
        t.multiply_adds = work;
        let named: Vec<&str> = names.into_iter().filter(|n| !n.is_empty()).collect();
        if !named.is_empty() {
            t.class = format!("{} forms:{}", t.class, named.join(","));
        }
    }
    plan.tunable = offered;
    Ok(plan.finish())
}

/// A per-call value of an op: the name of the kernel parameter it binds to and its
/// value, typed as the kernels compute with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Uniform {
    pub name: String,
    pub value: Scalar,
}

impl Uniform {
    /// Uniform `name` holding `value` converted to `ty` (as [`Scalar::from_f64`]).
    pub fn new(name: &str, ty: ScalarType, value: f64) -> Uniform {
        Uniform {
            name: name.to_string(),
            value: Scalar::from_f64(ty, value),
        }
    }

    /// Uniform `name` holding the 32 bits `value`.
    pub fn u32(name: &str, value: u32) -> Uniform {
        Uniform {
            name: name.to_string(),
            value: Scalar::U32(value),
        }
    }
}

/// A scalar parameter a lowering declares on a kernel: its name, type, and what it
/// binds to at launch.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarParam {
    pub name: String,
    pub ty: ScalarType,
    pub binding: Binding,
}

impl ScalarParam {
    /// Declares the parameter on `k` (after whatever `k` declared before).
    pub fn declare(&self, k: &mut kernelc_ir::builder::KernelBuilder) -> kernelc_ir::builder::E {
        k.scalar(self.name.clone(), self.ty)
    }
}

/// The per-call values of the spec being lowered, declared as kernel parameters on
/// demand: lowering sees only their names and types, and binds them by index.
pub struct Uniforms<'a> {
    list: &'a [Uniform],
}

impl<'a> Uniforms<'a> {
    pub fn new(list: &'a [Uniform]) -> Uniforms<'a> {
        Uniforms { list }
    }

    /// Uniform `name` as a parameter to declare on a kernel.
    pub fn param(&self, name: &str) -> Result<ScalarParam, crate::lower::LowerError> {
        let index = self.list.iter().position(|u| u.name == name).ok_or(
            crate::lower::LowerError::Internal(
                "a lowering asked for a uniform its spec does not list",
            ),
        )?;
        Ok(ScalarParam {
            name: name.to_string(),
            ty: self.list[index].value.ty(),
            binding: Binding::Uniform(index),
        })
    }

    /// Every uniform, in order, as parameters: for the one launch of an op that reads
    /// all its per-call values.
    pub fn params(&self) -> Result<Vec<ScalarParam>, crate::lower::LowerError> {
        self.list.iter().map(|u| self.param(&u.name)).collect()
    }

    /// Declares uniform `name` as a scalar parameter of `k` (after whatever `k`
    /// declared before), returning the parameter and the binding that feeds it.
    pub fn declare(
        &self,
        k: &mut kernelc_ir::builder::KernelBuilder,
        name: &str,
    ) -> Result<(kernelc_ir::builder::E, Binding), crate::lower::LowerError> {
        let p = self.param(name)?;
        Ok((p.declare(k), p.binding))
    }

    /// Declares every uniform named in `names`, in order.
    pub fn declare_all(
        &self,
        k: &mut kernelc_ir::builder::KernelBuilder,
        names: &[&str],
    ) -> Result<(Vec<kernelc_ir::builder::E>, Vec<Binding>), crate::lower::LowerError> {
        let mut params = Vec::with_capacity(names.len());
        let mut bindings = Vec::with_capacity(names.len());
        for name in names {
            let (p, b) = self.declare(k, name)?;
            params.push(p);
            bindings.push(b);
        }
        Ok((params, bindings))
    }
}

/// Declares `sig` as a whole-tensor buffer parameter of `k`, named after it.
pub(crate) fn declare_tensor(k: &mut KernelBuilder, sig: &TensorSig, access: Access) -> Mem {
    k.buffer(sig.name.clone(), sig.dtype, sig.numel() as u64, access)
}
