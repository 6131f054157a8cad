//! The one conformance harness: (op, shapes, dtype) × executor, against the f64
//! reference, under the tolerance table of [`crate::tolerance`].
//!
//! [`cases`] collects every op's own cases ([`Op::cases`](crate::op::Op::cases): 1,
//! primes, sizes that are not a multiple of any tile, the dtypes it takes), so no op
//! of the catalogue can be left out. [`inputs`] makes seeded random inputs
//! that are never all zeros and stay in each op's domain. An [`Executor`] runs a spec:
//! the reference interpreter here, and each device of the runtime in its own crate.
//! Every target plugs into this harness; none gets a private one.

pub mod cases;
pub mod inputs;

use crate::lower::{lower, poison, run_plan, Plan, TargetCaps};
use crate::reference::{reference, round_to};
use crate::spec::OpSpec;
use crate::tolerance::{compare, tolerance, Mismatch, Needs};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::Scalar;
use std::fmt;

/// Runs op specs somewhere: a device, or the interpreter.
pub trait Executor {
    /// A short label for reports (`"interp/cpu-caps"`, `"cpu"`, `"wgpu/wgsl"`).
    fn name(&self) -> String;
    /// Runs `spec` on `inputs` (in `spec.inputs()` order) and returns the outputs (in
    /// `spec.outputs()` order). Outputs must be poisoned before the run.
    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String>;
}

/// The reference interpreter running plans lowered for `caps`.
pub struct Interpreter {
    pub label: String,
    pub caps: TargetCaps,
}

impl Interpreter {
    pub fn new(label: &str, caps: TargetCaps) -> Interpreter {
        Interpreter {
            label: label.to_string(),
            caps,
        }
    }
}

impl Executor for Interpreter {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        let plan = lower(spec, &self.caps).map_err(|e| format!("lowering: {e}"))?;
        interpret(&plan, spec, inputs)
    }
}

/// The interpreter on a Hopper's caps, refusing a spec that lowers to no fragment
/// kernel: the tensor-core kernels as written, or (`expanded`) as the expansions make
/// them for targets without matrix units and asynchronous copies.
#[cfg(test)]
pub(crate) struct OnFragments {
    pub expanded: bool,
}

#[cfg(test)]
impl Executor for OnFragments {
    fn name(&self) -> String {
        format!("fragment kernels (expanded: {})", self.expanded)
    }
    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        let mut plan = lower(spec, &TargetCaps::cuda_sm90()).map_err(|e| e.to_string())?;
        if !plan.launches.iter().any(|l| l.kernel.uses_fragments()) {
            return Err(format!("{} lowers to no fragment kernel", spec.name()));
        }
        if self.expanded {
            for launch in &mut plan.launches {
                let copied = kernelc_ir::passes::expand_async_copies(&launch.kernel);
                launch.kernel = kernelc_ir::passes::expand_fragments(&copied);
            }
        }
        interpret(&plan, spec, inputs)
    }
}

/// Runs `plan` (lowered from `spec`) on the interpreter with `spec`'s per-call values,
/// into poisoned outputs (so an element no kernel writes is caught).
pub fn interpret(
    plan: &Plan,
    spec: &OpSpec,
    inputs: &[HostBuffer],
) -> Result<Vec<HostBuffer>, String> {
    let mut outputs: Vec<HostBuffer> = spec
        .outputs()
        .iter()
        .map(|s| HostBuffer::filled(s.dtype, s.numel(), poison(s.dtype)))
        .collect();
    run_plan(plan, &spec.uniforms(), inputs, &mut outputs).map_err(|e| e.to_string())?;
    Ok(outputs)
}

/// Why one case failed.
#[derive(Debug)]
pub enum Failure {
    /// The reference rejected the spec or inputs (a harness bug).
    Reference(String),
    /// The executor failed to run it.
    Run(String),
    /// The executor returned the wrong number or size of outputs.
    Shape(String),
    /// An element outside its allowance.
    Mismatch(Mismatch),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Reference(e) => write!(f, "reference: {e}"),
            Failure::Run(e) => write!(f, "run: {e}"),
            Failure::Shape(e) => write!(f, "outputs: {e}"),
            Failure::Mismatch(m) => write!(f, "mismatch: {m}"),
        }
    }
}

/// Inputs of a case as device buffers and as the f64 values the reference sees (the
/// device values exactly: generated, rounded to the dtype, read back).
pub struct CaseData {
    pub buffers: Vec<HostBuffer>,
    pub values: Vec<Vec<f64>>,
}

/// Seeded inputs for `spec`.
pub fn case_data(spec: &OpSpec, seed: u64) -> CaseData {
    case_data_from_values(spec, inputs::generate(spec, seed))
}

/// The buffers of `values` (one list per input of `spec`), each value rounded to its
/// input's dtype, and those rounded values as the reference sees them.
pub fn case_data_from_values(spec: &OpSpec, values_raw: Vec<Vec<f64>>) -> CaseData {
    let mut buffers = Vec::new();
    let mut values = Vec::new();
    for (sig, raw) in spec.inputs().iter().zip(values_raw) {
        let data: Vec<Scalar> = raw
            .iter()
            .map(|&v| Scalar::from_f64(sig.dtype, v))
            .collect();
        let buffer = HostBuffer {
            elem: sig.dtype,
            data,
        };
        values.push(buffer.to_f64());
        buffers.push(buffer);
    }
    CaseData { buffers, values }
}

/// Runs one case on `exec` and checks every output against the reference.
pub fn check(exec: &dyn Executor, spec: &OpSpec, seed: u64) -> Result<(), Failure> {
    check_data(exec, spec, &case_data(spec, seed))
}

/// [`check`] on given inputs.
pub fn check_data(exec: &dyn Executor, spec: &OpSpec, data: &CaseData) -> Result<(), Failure> {
    check_run(&run_data(exec, spec, data)?)
}

/// Every output of `run` against the reference under the run's tolerance.
fn check_run(run: &Run) -> Result<(), Failure> {
    for (k, out) in run.outputs.iter().enumerate() {
        let s = run
            .scales
            .as_ref()
            .and_then(|m| m.get(k))
            .map(|v| v.as_slice());
        compare(&out.name, &run.tolerance, out.dtype, &out.got, &out.want, s)
            .map_err(Failure::Mismatch)?;
    }
    Ok(())
}

/// Runs `spec` on `data` and returns how much of its unit the worst element's error
/// used ([`tolerance::error_units`](crate::tolerance::error_units); 0 for an exact
/// row), whether or not it is within the row's `ulps`: the measure behind the table's
/// "worst error" column. Errors only when the run itself fails.
pub fn measure_data(exec: &dyn Executor, spec: &OpSpec, data: &CaseData) -> Result<f64, Failure> {
    Ok(worst_units(&run_data(exec, spec, data)?))
}

/// [`check_data`] and [`measure_data`] from one run: the worst error's units when
/// every output is within the table.
pub fn check_and_measure(
    exec: &dyn Executor,
    spec: &OpSpec,
    data: &CaseData,
) -> Result<f64, Failure> {
    let run = run_data(exec, spec, data)?;
    check_run(&run)?;
    Ok(worst_units(&run))
}

fn worst_units(run: &Run) -> f64 {
    let mut worst = 0.0f64;
    if run.tolerance.scale == crate::tolerance::Scale::Exact {
        return worst;
    }
    for (k, out) in run.outputs.iter().enumerate() {
        let s = run.scales.as_ref().and_then(|m| m.get(k));
        for (i, (&g, &w)) in out.got.iter().zip(&out.want).enumerate() {
            let si = s.and_then(|s| s.get(i)).copied().unwrap_or(0.0);
            worst = worst.max(crate::tolerance::error_units(
                &run.tolerance,
                out.dtype,
                g,
                w,
                si,
            ));
        }
    }
    worst
}

/// One output of a run, beside the reference rounded to its dtype.
struct RunOutput {
    name: String,
    dtype: kernelc_ir::ScalarType,
    got: Vec<f64>,
    want: Vec<f64>,
}

/// A case run on an executor, with what its comparison needs.
struct Run {
    outputs: Vec<RunOutput>,
    tolerance: crate::tolerance::Tolerance,
    scales: Option<Vec<Vec<f64>>>,
}

fn run_data(exec: &dyn Executor, spec: &OpSpec, data: &CaseData) -> Result<Run, Failure> {
    let refs: Vec<&[f64]> = data.values.iter().map(|v| v.as_slice()).collect();
    let want = reference(spec, &refs).map_err(|e| Failure::Reference(e.to_string()))?;
    let got = exec.run(spec, &data.buffers).map_err(Failure::Run)?;
    let sigs = spec.outputs();
    if got.len() != sigs.len() {
        return Err(Failure::Shape(format!(
            "{} outputs, expected {}",
            got.len(),
            sigs.len()
        )));
    }
    let mut outputs = Vec::with_capacity(sigs.len());
    for ((sig, got), want) in sigs.iter().zip(&got).zip(&want) {
        if got.len() != sig.numel() || want.len() != sig.numel() {
            return Err(Failure::Shape(format!(
                "`{}` has {} elements (reference {}), expected {}",
                sig.name,
                got.len(),
                want.len(),
                sig.numel()
            )));
        }
        outputs.push(RunOutput {
            name: sig.name.clone(),
            dtype: sig.dtype,
            got: got.to_f64(),
            want: want.iter().map(|&w| round_to(sig.dtype, w)).collect(),
        });
    }
    Ok(Run {
        outputs,
        tolerance: tolerance(spec),
        scales: error_scales(spec, &data.values)?,
    })
}

/// Per output element, the `Σ|terms|` or condition `Sᵢ` that `spec`'s tolerance is
/// proportional to ([`Tolerance::needs`](crate::tolerance::Tolerance::needs)), for the
/// inputs `values`; `None` when it needs neither.
pub fn error_scales(spec: &OpSpec, values: &[Vec<f64>]) -> Result<Option<Vec<Vec<f64>>>, Failure> {
    Ok(match tolerance(spec).needs() {
        Needs::Magnitudes => Some(magnitudes(spec, values)?),
        Needs::Condition => {
            let refs: Vec<&[f64]> = values.iter().map(|v| v.as_slice()).collect();
            Some(spec.condition(&refs))
        }
        Needs::Nothing => None,
    })
}

/// The reference evaluated on absolute inputs and attributes: per output element, the
/// sum of the magnitudes of its terms (meaningful for the multilinear ops that use
/// [`Scale::Accumulated`](crate::tolerance::Scale::Accumulated)).
fn magnitudes(spec: &OpSpec, values: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, Failure> {
    let abs_spec = spec.absolute();
    let abs_values: Vec<Vec<f64>> = spec
        .inputs()
        .iter()
        .zip(values)
        .map(|(sig, v)| {
            if inputs::is_index(spec, &sig.name) {
                v.clone()
            } else {
                v.iter().map(|x| x.abs()).collect()
            }
        })
        .collect();
    let refs: Vec<&[f64]> = abs_values.iter().map(|v| v.as_slice()).collect();
    let out = reference(&abs_spec, &refs).map_err(|e| Failure::Reference(e.to_string()))?;
    Ok(out
        .into_iter()
        .map(|o| o.into_iter().map(f64::abs).collect())
        .collect())
}

/// The outcome of running a table of cases on one executor.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: usize,
    /// Cases whose dtypes the target lacks (a typed refusal, not a failure).
    pub skipped: usize,
    /// One line per failing case: its name, its spec as JSON, and why.
    pub failures: Vec<String>,
}

impl Report {
    /// Panics with every failure listed, after printing the counts.
    pub fn assert_ok(&self, executor: &str) {
        println!(
            "{executor}: {} passed, {} skipped (dtype unsupported)",
            self.passed, self.skipped
        );
        assert!(
            self.failures.is_empty(),
            "{} cases failed on {executor}:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Runs every case of `specs` that `caps` supports on `exec`.
pub fn conform(exec: &dyn Executor, caps: &TargetCaps, specs: &[OpSpec], seed: u64) -> Report {
    let mut report = Report::default();
    for spec in specs {
        let supported = spec
            .inputs()
            .iter()
            .chain(spec.outputs().iter())
            .all(|s| caps.supports(s.dtype));
        if !supported {
            report.skipped += 1;
            continue;
        }
        match check(exec, spec, seed) {
            Ok(()) => report.passed += 1,
            Err(f) => report.failures.push(format!(
                "{} {}: {f}",
                spec.name(),
                serde_json::to_string(spec).unwrap_or_default()
            )),
        }
    }
    report
}

/// One kernel of the catalogue, as a target compiles it.
#[derive(Clone, Debug)]
pub struct CatalogueKernel {
    /// The case it came from and its launch index (`"softmax[f32 7x33] #1"`).
    pub label: String,
    pub kernel: kernelc_ir::Kernel,
}

/// Every distinct kernel that lowering the conformance [`cases`] for `caps` yields,
/// put through the target passes ([`kernelc_ir::passes::for_target`] with
/// `expansion`), deduplicated by content. Cases whose dtypes `caps` lacks are left
/// out; any other lowering error is returned, as it is a bug. Emitter tests compile
/// these, so "every op kernel of the catalogue" means the same set on every target.
pub fn catalogue_kernels(
    caps: &TargetCaps,
    expansion: &kernelc_ir::passes::MathExpansion,
) -> Result<Vec<CatalogueKernel>, String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for spec in cases::all() {
        let supported = spec
            .inputs()
            .iter()
            .chain(spec.outputs().iter())
            .all(|s| caps.supports(s.dtype));
        if !supported {
            continue;
        }
        let plan = lower(&spec, caps).map_err(|e| format!("{}: {e}", spec.name()))?;
        for (i, launch) in plan.launches.iter().enumerate() {
            let kernel = kernelc_ir::passes::for_target(&launch.kernel, expansion);
            if seen.insert(kernelc_ir::stable_hash(&kernel)) {
                out.push(CatalogueKernel {
                    label: format!("{} #{i}", spec.name()),
                    kernel,
                });
            }
        }
    }
    Ok(out)
}
