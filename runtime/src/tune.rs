//! Autotuning: where lowering had a choice of schedules ([`Tunable`]: a GEMM's or a
//! convolution's tile shape, pipeline stages, fragment shape), the runtime times each
//! on this device the first time a problem of the shape class comes, and keeps the
//! fastest for every later problem of the class.
//!
//! * **When**: a plan offering more than one schedule, of at least
//!   [`TUNE_MIN_MULTIPLY_ADDS`] (smaller problems cost less than timing them), with
//!   [`Autotune::On`] (the default; `KERNELC_AUTOTUNE=off` keeps the heuristics).
//! * **How**: on scratch inputs of the op's shapes (never the caller's tensors),
//!   each schedule is lowered and compiled (the alternatives up to four at a time,
//!   side by side, the first alone), run once to warm up, then timed over at least 3
//!   synchronised runs (up to 10 within 50 ms); the median decides. The heuristics'
//!   schedule is timed first, the others while the tuning budget lasts
//!   ([`DEFAULT_TUNING_BUDGET`], `KERNELC_TUNING_BUDGET`): no
//!   compile starts that is expected to end past it (each in proportion to its
//!   kernels' IR nodes, at the rate the heuristics' compile, which loads its modules,
//!   took theirs, or the runtime's last tuning's rate where those kernels were all in
//!   memory: a driver's JIT may compile one module at a time; one too large is
//!   skipped and the next considered), and
//!   no timing that would pass it, unless that timing is cheap (the last one took at
//!   most the 50 ms timing window: the compile, the expensive part, is spent by
//!   then). The heuristics' compile, which the call needs anyway, is not tuning time.
//! * **Failures**: tuning is an optimisation. An error queued on the device before
//!   it is the caller's and returned as such; where tuning itself fails (scratch
//!   memory, a schedule that does not run) or a stored choice does not lower or
//!   compile here, the heuristics' schedule serves (a `tracing` warning says why).
//! * **Threads**: timing synchronises the whole device, so work other threads queue
//!   on the same runtime meanwhile counts in a schedule's time, and an error of
//!   theirs surfacing then is taken for the schedule's failure; two first calls of
//!   one class at once both tune. Tune on a quiet device for choices worth keeping
//!   (`Runtime::retune` replaces one).
//! * **Kept**: per runtime in memory, and in the disk cache beside the kernels (one
//!   `<key>.tune` file per shape class and device, JSON under the cache's checksummed
//!   header; the key covers the class, the device's name, target and options and the
//!   kernelc version): a second process finds the choice and times nothing. A damaged
//!   or unreadable record is ignored and the class tuned again.

use crate::cache::CacheKey;
use crate::error::{Result, RuntimeError};
use crate::runtime::{Prepared, Runtime};
use crate::tensor::Tensor;
use kernelc_kernels::conformance::inputs;
use kernelc_kernels::lower::{Plan, TargetCaps, Tunable};
use kernelc_kernels::spec::OpSpec;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wall time one shape class's tuning may take by default (lowering and compiling
/// the alternatives, timing them all; `RuntimeOptions::tuning_budget`,
/// `KERNELC_TUNING_BUDGET`); a step started within it may end past it.
pub const DEFAULT_TUNING_BUDGET: Duration = Duration::from_secs(1);

/// Plans of fewer multiply-adds are not tuned: the heuristics' schedule serves them.
pub const TUNE_MIN_MULTIPLY_ADDS: u64 = 1 << 27;

/// Schedules compiled side by side, then timed, before the next batch is compiled.
const COMPILE_BATCH: usize = 4;

/// Timed runs per schedule: at least the first, at most the second, within
/// [`TIMING_WINDOW`] past the first.
const RUNS: (usize, usize) = (3, 10);
const TIMING_WINDOW: Duration = Duration::from_millis(50);

/// Whether the runtime tunes schedules on first use (`KERNELC_AUTOTUNE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Autotune {
    /// Time the schedules of a new shape class (or take a stored choice).
    #[default]
    On,
    /// The heuristics' schedule always; stored choices are not read either.
    Off,
}

impl Autotune {
    /// `KERNELC_AUTOTUNE`: `on` (the default) or `off` (also `1`/`0`, `true`/`false`).
    pub fn from_env() -> Result<Autotune> {
        match std::env::var("KERNELC_AUTOTUNE") {
            Err(std::env::VarError::NotPresent) => Ok(Autotune::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(RuntimeError::BadArgument(
                "KERNELC_AUTOTUNE is not valid Unicode".into(),
            )),
            Ok(text) => text.parse(),
        }
    }
}

impl std::str::FromStr for Autotune {
    type Err = RuntimeError;

    /// `on` or `off` (also `1`/`0`, `true`/`false`), any case.
    fn from_str(text: &str) -> Result<Autotune> {
        match text.trim().to_ascii_lowercase().as_str() {
            "on" | "1" | "true" => Ok(Autotune::On),
            "off" | "0" | "false" => Ok(Autotune::Off),
            _ => Err(RuntimeError::BadArgument(format!(
                "KERNELC_AUTOTUNE=`{text}`: expected `on` or `off`"
            ))),
        }
    }
}

/// The outcome of one shape class's tuning, as kept in memory and on disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    /// The shape class ([`Tunable::class`]).
    pub class: String,
    /// The schedule taken: the fastest timed.
    pub chosen: String,
    /// Every schedule offered, in the order they were timed (the heuristics' first).
    pub candidates: Vec<CandidateTiming>,
    /// Wall time the tuning took, all candidates together (µs).
    pub tuning_micros: u64,
}

/// One schedule's timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateTiming {
    pub name: String,
    /// Median time of one run (µs); `None` when it was not timed.
    pub micros: Option<f64>,
    /// Why it was not timed (it failed to lower, compile or run, or the budget was
    /// spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a [`TuneReport`]'s record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneSource {
    /// Timed now.
    Timed,
    /// Tuned earlier by this runtime.
    Memory,
    /// Tuned by an earlier process (the disk cache).
    Disk,
}

/// What [`Runtime::tune`] found for one op.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneReport {
    pub record: Arc<TuneRecord>,
    pub source: TuneSource,
}

impl Runtime {
    /// The tuned schedule of `spec`'s shape class: the stored choice if there is one
    /// (memory, then disk), else timed now, whatever [`Autotune`] and the problem's
    /// size say (the heuristics' choices are timed, not a schedule set by hand).
    /// `None` when lowering offers no choice for `spec`. The next call of `spec`
    /// runs the choice, unless autotuning is off or a schedule is set by hand.
    pub fn tune(&self, spec: &OpSpec) -> Result<Option<TuneReport>> {
        self.tune_with(spec, false)
    }

    /// As [`Runtime::tune`], but timed again even when a choice is stored (which it
    /// replaces).
    pub fn retune(&self, spec: &OpSpec) -> Result<Option<TuneReport>> {
        self.tune_with(spec, true)
    }

    fn tune_with(&self, spec: &OpSpec, again: bool) -> Result<Option<TuneReport>> {
        spec.validate()?;
        let structural = spec.structural();
        let caps = TargetCaps {
            schedule: None,
            ..self.caps().clone()
        };
        let plan = self.lower(&structural, &caps)?;
        let Some(tunable) = plan.tunable.clone().filter(|t| t.choices.len() > 1) else {
            return Ok(None);
        };
        let stored = if again {
            None
        } else {
            self.stored_tuning(&tunable.class)
        };
        let report = match stored {
            Some(report) => report,
            None => {
                // An error queued before now is the caller's, not a schedule's.
                self.synchronize()?;
                TuneReport {
                    record: self.time_schedules(spec, &caps, &plan, &tunable)?.0,
                    source: TuneSource::Timed,
                }
            }
        };
        self.forget_plan(spec)?;
        Ok(Some(report))
    }

    /// `plan` (lowered from `spec` by the heuristics) as the tuned schedule of its
    /// class would have it: lowered again with the stored choice, or (`may_time`)
    /// the one timed now, already compiled, when the class is new and the problem
    /// large enough. With [`Autotune::Off`], `plan` itself.
    pub(crate) fn tuned_plan(
        &self,
        spec: &OpSpec,
        caps: &TargetCaps,
        plan: Arc<Plan>,
        may_time: bool,
    ) -> Result<Tuned> {
        // A schedule set by hand (`Runtime::set_schedule`) is not second-guessed.
        if self.autotune() == Autotune::Off || caps.schedule.is_some() {
            return Ok(Tuned::Plan(plan));
        }
        let Some(tunable) = plan.tunable.clone().filter(|t| t.choices.len() > 1) else {
            return Ok(Tuned::Plan(plan));
        };
        let record = match self.stored_tuning(&tunable.class) {
            Some(report) => report.record,
            None if may_time && tunable.multiply_adds >= TUNE_MIN_MULTIPLY_ADDS => {
                // An error queued before now is the caller's, not a schedule's.
                self.synchronize()?;
                // Tuning is an optimisation: where it fails (scratch memory, a
                // schedule that does not run), the heuristics' plan serves, and
                // fails as it would have, if it is the culprit.
                return Ok(match self.time_schedules(spec, caps, &plan, &tunable) {
                    Ok((_, prepared)) => Tuned::Prepared(prepared),
                    Err(e) => {
                        tracing::warn!(class = %tunable.class, error = %e, "tuning failed; the heuristics' schedule serves");
                        Tuned::Plan(plan)
                    }
                });
            }
            None => return Ok(Tuned::Plan(plan)),
        };
        if record.chosen == tunable.choices[0] || !tunable.choices.contains(&record.chosen) {
            return Ok(Tuned::Plan(plan));
        }
        match self.lower(&spec.structural(), &with_schedule(caps, &record.chosen)) {
            Ok(tuned) => Ok(Tuned::Plan(tuned)),
            Err(e) => {
                tracing::warn!(chosen = %record.chosen, error = %e, "the tuned schedule does not lower; the heuristics' serves");
                Ok(Tuned::Plan(plan))
            }
        }
    }

    /// The stored choice for `class`: this runtime's, else the disk cache's (then
    /// kept in memory too).
    fn stored_tuning(&self, class: &str) -> Option<TuneReport> {
        if let Some(record) = crate::lock(&self.tunings).get(class) {
            return Some(TuneReport {
                record: record.clone(),
                source: TuneSource::Memory,
            });
        }
        let bytes = self.disk_cache().load(&self.tuning_key(class), "tune")?;
        let record: TuneRecord = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(class, error = %e, "unreadable tuning record; tuning again");
                return None;
            }
        };
        if record.class != class {
            tracing::warn!(class, found = %record.class, "tuning record of another class; tuning again");
            return None;
        }
        let record = Arc::new(record);
        crate::lock(&self.tunings).insert(class.to_string(), record.clone());
        Some(TuneReport {
            record,
            source: TuneSource::Disk,
        })
    }

    /// The disk cache key of `class`'s record on this device.
    fn tuning_key(&self, class: &str) -> CacheKey {
        let options = format!("{}\0{}", self.device.target_options(), self.device_name());
        CacheKey::new(
            blake3::hash(class.as_bytes()).as_bytes(),
            self.target_name(),
            &options,
        )
    }

    /// Times every schedule `tunable` offers for `spec` (whose heuristics' plan is
    /// `plan`) on scratch operands, within the budget; keeps and returns the record,
    /// with the chosen schedule compiled (so the call compiles nothing again).
    fn time_schedules(
        &self,
        spec: &OpSpec,
        caps: &TargetCaps,
        plan: &Arc<Plan>,
        tunable: &Tunable,
    ) -> Result<(Arc<TuneRecord>, Prepared)> {
        let structural = spec.structural();
        // The heuristics' schedule is compiled for the call anyway: not tuning time.
        // Its failure is the op's. Its compile (which loads its modules: a driver's
        // JIT) sets the rate the others' compiles are expected at (below).
        let compiling = Instant::now();
        let loaded_before = self.kernels_compiled_or_loaded();
        let first = self.prepare_plan(plan.clone(), &structural)?;
        let compile_cost = compiling.elapsed();
        let first_compiled = self.kernels_compiled_or_loaded() > loaded_before;
        let budget = self.tuning_budget();
        let started = Instant::now();
        let inputs = self.scratch_inputs(&structural)?;
        let outputs = structural
            .outputs()
            .iter()
            .map(|sig| self.zeros(&sig.shape, sig.dtype))
            .collect::<Result<Vec<_>>>()?;
        let (inputs, outputs) = (refs(&inputs), refs(&outputs));
        let mut candidates = Vec::with_capacity(tunable.choices.len());
        // The compiled schedules, by candidate, for the chosen one's return.
        let mut compiled: Vec<Option<Prepared>> = Vec::with_capacity(tunable.choices.len());
        let mut last_cost = Duration::ZERO;
        let mut time = |name: &String, prepared: std::result::Result<Prepared, Untimed>| {
            let candidate_started = Instant::now();
            // A compiled schedule is timed unless its timing (as long as the last
            // timing's) would pass the budget and cost more than the timing window.
            let over = started.elapsed() + last_cost > budget && last_cost > TIMING_WINDOW;
            let (timed, kept) = match prepared {
                Err(why) => (Err(why), None),
                Ok(_) if !candidates.is_empty() && over => (Err(Untimed::Budget), None),
                Ok(p) => {
                    let timed = self.time_prepared(spec, &p, &inputs, &outputs);
                    last_cost = candidate_started.elapsed();
                    let ran = timed.is_ok();
                    (timed.map_err(Untimed::Failed), ran.then_some(p))
                }
            };
            compiled.push(kept);
            let (micros, note) = match timed {
                Ok(median) => (Some(median.as_secs_f64() * 1e6), None),
                // The heuristics' schedule is what the op runs untuned: its failure
                // is the op's.
                Err(Untimed::Failed(e)) if candidates.is_empty() => return Err(e),
                Err(Untimed::Budget) => {
                    (None, Some("not timed: the tuning budget was spent".into()))
                }
                Err(Untimed::TooLarge) => (
                    None,
                    Some(
                        "not timed: its compile would pass what is left of the tuning budget"
                            .into(),
                    ),
                ),
                Err(Untimed::Failed(e)) => (None, Some(format!("failed: {e}"))),
            };
            candidates.push(CandidateTiming {
                name: name.clone(),
                micros,
                note,
            });
            Ok(())
        };
        time(&tunable.choices[0], Ok(first))?;
        // Each alternative's compile (its kernels and their modules: a driver's JIT
        // may compile one module at a time) is expected to take its kernels' IR nodes
        // at the rate the heuristics' compile took theirs (the warpgroup tiles' twice
        // as many nodes took twice as long on an H200); where none of the heuristics'
        // kernels was compiled or loaded now (all in memory), at the rate this
        // runtime's last tuning measured. Each batch's compile corrects the rate
        // upward (timings are budgeted apart: `last_cost`). An alternative that would
        // end past the budget is left untimed and the next, perhaps smaller,
        // considered; one slower than expected overruns the budget by the difference
        // (a compile cannot be stopped).
        let mut per_node = if first_compiled {
            let rate = compile_cost.as_secs_f64() / plan_nodes(plan).max(1) as f64;
            self.remember_node_cost(rate);
            rate
        } else {
            self.remembered_node_cost()
        };
        let mut measured = false;
        let mut batch: Vec<(&String, Arc<Plan>)> = Vec::new();
        let mut batch_nodes = 0usize;
        let mut waiting: Option<(&String, Arc<Plan>)> = None;
        let mut choices = tunable.choices[1..].iter();
        loop {
            let left = budget.saturating_sub(started.elapsed()).as_secs_f64();
            let next = match waiting.take() {
                Some(next) => Some(next),
                None => match choices.next() {
                    // Nothing left of the budget: not lowered at all.
                    Some(name) if left <= 0.0 && batch.is_empty() => {
                        time(name, Err(Untimed::Budget))?;
                        continue;
                    }
                    Some(name) => match self.lower(&structural, &with_schedule(caps, name)) {
                        Ok(plan) => Some((name, plan)),
                        Err(e) => {
                            time(name, Err(Untimed::Failed(e)))?;
                            continue;
                        }
                    },
                    None => None,
                },
            };
            let most = if measured { COMPILE_BATCH } else { 1 };
            match next {
                None if batch.is_empty() => break,
                None => {}
                Some((name, plan)) => {
                    let nodes = plan_nodes(&plan);
                    match admit(per_node, left, (batch.len(), batch_nodes), nodes, most) {
                        Admit::Join => {
                            batch.push((name, plan));
                            batch_nodes += nodes;
                            continue;
                        }
                        Admit::Skip => {
                            time(name, Err(Untimed::TooLarge))?;
                            continue;
                        }
                        Admit::AfterBatch => waiting = Some((name, plan)),
                    }
                }
            }
            // Compile the batch side by side, then time each.
            let batch_started = Instant::now();
            let plans: Vec<Arc<Plan>> = batch.iter().map(|(_, p)| p.clone()).collect();
            let compiled = self.compile_plans(&structural, plans);
            let rate = batch_started.elapsed().as_secs_f64() / batch_nodes.max(1) as f64;
            self.remember_node_cost(rate);
            per_node = per_node.max(rate);
            measured = true;
            for ((name, _), prepared) in batch.iter().zip(compiled) {
                time(name, prepared)?;
            }
            batch.clear();
            batch_nodes = 0;
        }
        // The heuristics' schedule was timed (or tuning failed above): the fastest
        // timed one is at hand compiled.
        let fastest = candidates
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.micros?, i)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(0, |(_, i)| i);
        let prepared = compiled
            .get_mut(fastest)
            .and_then(Option::take)
            .ok_or_else(|| RuntimeError::Internal("the fastest schedule is not compiled".into()))?;
        let record = Arc::new(TuneRecord {
            class: tunable.class.clone(),
            chosen: candidates[fastest].name.clone(),
            candidates,
            tuning_micros: started.elapsed().as_micros() as u64,
        });
        tracing::info!(
            class = %record.class,
            chosen = %record.chosen,
            millis = record.tuning_micros / 1000,
            "tuned"
        );
        self.count_tuning(record.tuning_micros);
        crate::lock(&self.tunings).insert(record.class.clone(), record.clone());
        match serde_json::to_vec_pretty(&*record) {
            Ok(json) => {
                if let Err(e) =
                    self.disk_cache()
                        .store(&self.tuning_key(&record.class), "tune", &json)
                {
                    tracing::warn!(class = %record.class, error = %e, "cannot store the tuning record");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode the tuning record"),
        }
        Ok((record, prepared))
    }

    /// The plans of `spec`'s schedules compiled side by side (a tensor-core kernel's
    /// compile takes hundreds of milliseconds, its run well under one).
    fn compile_plans(
        &self,
        spec: &OpSpec,
        plans: Vec<Arc<Plan>>,
    ) -> Vec<std::result::Result<Prepared, Untimed>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = plans
                .into_iter()
                .map(|plan| {
                    scope.spawn(move || self.prepare_plan(plan, spec).map_err(Untimed::Failed))
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle.join().unwrap_or_else(|_| {
                        Err(Untimed::Failed(RuntimeError::Internal(
                            "a schedule's compile panicked".into(),
                        )))
                    })
                })
                .collect()
        })
    }

    /// Median wall time of one synchronised run of `prepared` after a warm-up run.
    fn time_prepared(
        &self,
        spec: &OpSpec,
        prepared: &Prepared,
        inputs: &[crate::device::BindingRef<'_>],
        outputs: &[crate::device::BindingRef<'_>],
    ) -> Result<Duration> {
        let run = || -> Result<Duration> {
            let t = Instant::now();
            self.launch_prepared(spec, prepared, inputs, outputs)?;
            self.synchronize()?;
            Ok(t.elapsed())
        };
        run()?;
        let window = Instant::now();
        let mut samples = Vec::with_capacity(RUNS.1);
        while samples.len() < RUNS.0 || (samples.len() < RUNS.1 && window.elapsed() < TIMING_WINDOW)
        {
            samples.push(run()?);
        }
        samples.sort();
        Ok(samples[samples.len() / 2])
    }

    /// Inputs of `spec`'s shapes for timing: floats all one small value (every byte
    /// 0x3C), other types the conformance inputs of `spec` (indices in range).
    fn scratch_inputs(&self, spec: &OpSpec) -> Result<Vec<Tensor>> {
        let mut generated: Option<Vec<Vec<f64>>> = None;
        let sigs = spec.inputs();
        let mut tensors = Vec::with_capacity(sigs.len());
        for (i, sig) in sigs.iter().enumerate() {
            let tensor = if sig.dtype.is_float() {
                let t = self.zeros(&sig.shape, sig.dtype)?;
                t.storage.fill(0x3C)?;
                t
            } else {
                let data = generated.get_or_insert_with(|| inputs::generate(spec, 0x7e57));
                match data.get(i) {
                    Some(values) => self.tensor_from_f64(&sig.shape, sig.dtype, values)?,
                    None => self.zeros(&sig.shape, sig.dtype)?,
                }
            };
            tensors.push(tensor);
        }
        Ok(tensors)
    }
}

fn refs(tensors: &[Tensor]) -> Vec<crate::device::BindingRef<'_>> {
    tensors.iter().map(|t| t.binding()).collect()
}

/// An op's plan as tuning leaves it: to compile, or compiled while it was timed.
pub(crate) enum Tuned {
    Plan(Arc<Plan>),
    Prepared(Prepared),
}

/// Why a schedule was not timed.
enum Untimed {
    /// The tuning budget was spent before its turn.
    Budget,
    /// Its compile is expected to take longer than what is left of the budget.
    TooLarge,
    /// It failed to lower, compile or run.
    Failed(RuntimeError),
}

/// What becomes of the next alternative, of `nodes` IR nodes, with a batch of
/// `(count, nodes)` pending and `left` seconds of budget at `per_node` seconds a node.
#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// It joins the batch: the batch and it fit in what is left.
    Join,
    /// The batch compiles and is timed first; then it is considered again.
    AfterBatch,
    /// Too large for what is left, even alone: not timed.
    Skip,
}

fn admit(
    per_node: f64,
    left: f64,
    (count, batch_nodes): (usize, usize),
    nodes: usize,
    most: usize,
) -> Admit {
    let fits = per_node * (batch_nodes + nodes) as f64 <= left;
    if fits && count < most {
        Admit::Join
    } else if count > 0 {
        Admit::AfterBatch
    } else {
        Admit::Skip
    }
}

/// IR nodes of a plan's kernels: what its compile is expected to take in proportion.
fn plan_nodes(plan: &Plan) -> usize {
    plan.launches
        .iter()
        .map(|l| kernelc_ir::block_size(&l.kernel.body))
        .sum()
}

/// `caps` preferring the schedule `name`.
fn with_schedule(caps: &TargetCaps, name: &str) -> TargetCaps {
    TargetCaps {
        schedule: Some(name.to_string()),
        ..caps.clone()
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::DiskCache;
    use crate::{Device, Runtime};
    use kernelc_ir::ScalarType::F32;
    use kernelc_kernels::spec::{GemmSpec, OpSpec};
    use std::time::Duration;

    /// Where the heuristics' kernels are all in memory (their compile says nothing),
    /// the compile rate of the runtime's last tuning is expected of the alternatives:
    /// none starts that would not fit.
    #[test]
    fn the_last_tunings_rate_bounds_a_tuning_whose_kernels_were_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpSpec::Gemm(GemmSpec::new(F32, 512, 512, 512));
        let mut rt = Runtime::with_device(Device::cpu(), DiskCache::at(dir.path()));
        rt.set_tuning_budget(Duration::from_secs(60));
        // A second per IR node: a GEMM tile kernel's thousands of nodes take hours.
        rt.remember_node_cost(1.0);
        // Its heuristics' kernels already in memory: their compile says nothing.
        let plan = kernelc_kernels::lower::lower(&spec, rt.caps()).unwrap();
        rt.prepare_plan(std::sync::Arc::new(plan), &spec.structural())
            .unwrap();
        let record = rt.tune(&spec).unwrap().expect("a choice").record;
        assert!(record.candidates.len() >= 2, "{record:?}");
        assert!(record.candidates[0].micros.is_some());
        assert!(
            record.candidates[1..].iter().all(|c| c.micros.is_none()),
            "{record:?}"
        );
        // Without that history the same budget times every schedule (each compiles
        // in milliseconds on the CPU).
        let dir = tempfile::tempdir().unwrap();
        let mut rt = Runtime::with_device(Device::cpu(), DiskCache::at(dir.path()));
        rt.set_tuning_budget(Duration::from_secs(60));
        let record = rt.tune(&spec).unwrap().expect("a choice").record;
        assert!(
            record.candidates.iter().all(|c| c.micros.is_some()),
            "{record:?}"
        );
    }

    /// An alternative expected to end past the budget is skipped (the next one
    /// considered), one that fits joins the batch up to its size, and one that fits
    /// only alone waits for the batch.
    #[test]
    fn alternatives_join_wait_or_are_skipped_by_their_expected_compile() {
        use super::{admit, Admit};
        // 1 ms a node, 0.5 s left.
        let rate = 1e-3;
        assert_eq!(admit(rate, 0.5, (0, 0), 400, 1), Admit::Join);
        assert_eq!(admit(rate, 0.5, (0, 0), 600, 4), Admit::Skip);
        assert_eq!(admit(rate, 0.5, (1, 300), 150, 4), Admit::Join);
        assert_eq!(admit(rate, 0.5, (1, 300), 250, 4), Admit::AfterBatch);
        // A full batch compiles first, however small the next.
        assert_eq!(admit(rate, 0.5, (1, 10), 10, 1), Admit::AfterBatch);
        assert_eq!(admit(rate, 0.5, (4, 40), 10, 4), Admit::AfterBatch);
    }
}
