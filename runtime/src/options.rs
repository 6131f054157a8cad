//! [`RuntimeOptions`]: the bounds of a runtime's in-memory caches and whether (and
//! how long) it autotunes, with defaults and environment overrides.

use crate::error::{Result, RuntimeError};
use crate::tune::{Autotune, DEFAULT_TUNING_BUDGET};
use std::num::NonZeroUsize;
use std::time::Duration;

/// How many entries a runtime's in-memory caches keep. Past the bound, the least
/// recently used entry is dropped (and counted in [`Stats`](crate::Stats)); a dropped
/// kernel is rebuilt from the disk cache, or compiled again, when it is next needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Lowered plans with their kernels, one per structural spec
    /// (`KERNELC_PLAN_CACHE`; default [`RuntimeOptions::DEFAULT_PLANS`]).
    pub plan_cache_entries: NonZeroUsize,
    /// Compiled kernels (`KERNELC_KERNEL_CACHE`; default
    /// [`RuntimeOptions::DEFAULT_KERNELS`]).
    pub kernel_cache_entries: NonZeroUsize,
    /// Whether new shape classes are tuned (`KERNELC_AUTOTUNE`; default on; see
    /// [`crate::tune`]).
    pub autotune: Autotune,
    /// Wall time one shape class's tuning may take (`KERNELC_TUNING_BUDGET`, in
    /// milliseconds; default [`DEFAULT_TUNING_BUDGET`], 1 s): more times more of the
    /// schedules where each compiles slowly (a long-running job may afford it once).
    pub tuning_budget: Duration,
}

impl RuntimeOptions {
    pub const DEFAULT_PLANS: NonZeroUsize = NonZeroUsize::new(2048).expect("non-zero");
    pub const DEFAULT_KERNELS: NonZeroUsize = NonZeroUsize::new(2048).expect("non-zero");

    /// The defaults, overridden by `KERNELC_PLAN_CACHE` and `KERNELC_KERNEL_CACHE`
    /// (entry counts, at least 1). A malformed value is an error naming the variable.
    pub fn from_env() -> Result<RuntimeOptions> {
        let mut options = RuntimeOptions::default();
        if let Some(n) = entries_from_env("KERNELC_PLAN_CACHE")? {
            options.plan_cache_entries = n;
        }
        if let Some(n) = entries_from_env("KERNELC_KERNEL_CACHE")? {
            options.kernel_cache_entries = n;
        }
        options.autotune = Autotune::from_env()?;
        if let Some(ms) = entries_from_env("KERNELC_TUNING_BUDGET")? {
            options.tuning_budget = Duration::from_millis(ms.get() as u64);
        }
        Ok(options)
    }
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            plan_cache_entries: RuntimeOptions::DEFAULT_PLANS,
            kernel_cache_entries: RuntimeOptions::DEFAULT_KERNELS,
            autotune: Autotune::default(),
            tuning_budget: DEFAULT_TUNING_BUDGET,
        }
    }
}

/// A positive count from `var` (cache entries, milliseconds), `None` where unset.
fn entries_from_env(var: &str) -> Result<Option<NonZeroUsize>> {
    let what = if var == "KERNELC_TUNING_BUDGET" {
        "milliseconds"
    } else {
        "cache entries"
    };
    match std::env::var(var) {
        Ok(text) => text.trim().parse::<NonZeroUsize>().map(Some).map_err(|_| {
            RuntimeError::BadArgument(format!(
                "{var}=`{text}`: expected a number of {what}, at least 1"
            ))
        }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(RuntimeError::BadArgument(format!(
            "{var} is not valid Unicode"
        ))),
    }
}
