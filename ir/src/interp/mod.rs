//! The reference interpreter: the executable definition of the IR's meaning.
//!
//! [`run`] executes a kernel over a whole grid on the host. Workgroups run one after
//! another (x fastest, then y, then z). The invocations of one workgroup run in lockstep
//! at statement granularity under an *active mask*: a statement is executed for every
//! active invocation before the next statement starts.
//!
//! * `If` evaluates its condition per active invocation, runs `then` with the invocations
//!   for which it held and then `else` with the others.
//! * `For` evaluates `start` and `end` once per invocation, then iterates while any
//!   invocation still runs; each iteration's mask is the invocations whose counter is
//!   below their `end`. A counter that would wrap past the type's maximum ends its loop.
//! * `Return` removes an invocation for the rest of the dispatch.
//! * `Barrier` must be reached by every invocation of the workgroup (none returned, none
//!   masked off), else [`InterpError::DivergentBarrier`]; it starts a new *epoch*.
//!
//! All value operations go through [`crate::eval`], so the interpreter and constant
//! folding agree bit for bit.
//!
//! Besides computing results, the interpreter checks what a GPU would leave undefined:
//! out-of-bounds and misaligned accesses, reads of never-written shared memory, and data
//! races, each reported as a typed [`InterpError`] naming the memory, the element, the
//! invocations and the IR node (with the validator's path syntax, e.g.
//! `kernel.body[3].if.then[0].store`).
//!
//! Race rules, per element:
//! * shared memory: within one epoch of a workgroup, two different invocations writing,
//!   or one writing and another reading (either order), is a race;
//! * storage buffers: two different invocations writing is a write-write race unless they
//!   belong to the same workgroup and different epochs; a write and a read by different
//!   invocations race unless they belong to the same workgroup and different epochs.

mod error;
mod exec;
mod expr;
mod fault;
mod fragment;
mod fragment_rows;
mod host;
mod shared;
mod track;

pub use error::{InterpError, Invocation, MemorySpace, RaceKind, Site};
pub use host::{Arg, HostBuffer};

use crate::args::{check_args as check_args_shared, ArgShape};
use crate::kernel::*;
use crate::validate::validate;
use exec::Ctx;

/// The most invocations one workgroup may have in the interpreter (GPUs allow 1024).
pub const MAX_INVOCATIONS_PER_WORKGROUP: u64 = 1 << 16;
/// The most shared-array elements (all arrays together) the interpreter will allocate.
pub const MAX_SHARED_ELEMENTS: u64 = 1 << 24;
/// The most local-variable slots (invocations per workgroup x locals) it will allocate.
pub const MAX_LOCAL_SLOTS: u64 = 1 << 24;

// ---------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------

/// Runs `kernel` over a grid of `grid` workgroups (x, y, z), reading and writing `args`
/// (`args[i]` binds `kernel.params[i]`).
///
/// The kernel is validated first ([`InterpError::Invalid`]), then the arguments are
/// checked against the parameters. On an execution error the buffers hold whatever was
/// written before it.
#[allow(clippy::result_large_err)]
pub fn run(kernel: &Kernel, grid: [u32; 3], args: &mut [Arg]) -> Result<(), InterpError> {
    validate(kernel)?;
    run_unvalidated(kernel, grid, args)
}

/// [`run`] without validation: the interpreter is defensive and reports what the
/// validator would have rejected as typed errors (e.g. [`InterpError::DivergentBarrier`]
/// for a barrier under divergent control flow, [`InterpError::Malformed`] for ill-typed
/// IR) instead of panicking. Meant for testing the interpreter's own checks.
#[allow(clippy::result_large_err)]
pub fn run_unvalidated(
    kernel: &Kernel,
    grid: [u32; 3],
    args: &mut [Arg],
) -> Result<(), InterpError> {
    check_args(kernel, args)?;
    check_limits(kernel, grid)?;
    if grid.contains(&0) || kernel.workgroup_size.contains(&0) {
        return Ok(());
    }
    let mut ctx = Ctx::new(kernel, grid, args);
    match ctx.run_grid() {
        Ok(()) => Ok(()),
        Err(fault) => Err(ctx.to_error(*fault)),
    }
}

#[allow(clippy::result_large_err)]
fn check_args(kernel: &Kernel, args: &[Arg]) -> Result<(), InterpError> {
    let shapes: Vec<ArgShape> = args
        .iter()
        .map(|a| match a {
            Arg::Buffer(buf) => ArgShape::Buffer {
                elem: Some(buf.elem),
                len: buf.data.len() as u64,
            },
            Arg::Scalar(s) => ArgShape::Scalar(s.ty()),
        })
        .collect();
    check_args_shared(&kernel.name, &kernel.params, &shapes, "elements", |_| 1)?;
    // Host buffers carry a type per element: every element must be of the buffer's type
    // (a narrow integer element is held as its value type, `u32` or `i32`).
    for (index, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let (Param::Buffer { elem, .. }, Arg::Buffer(buf)) = (param, arg) else {
            continue;
        };
        if let Some((element, s)) = buf
            .data
            .iter()
            .enumerate()
            .find(|(_, s)| s.ty() != elem.value_type())
        {
            return Err(InterpError::ArgData {
                kernel: kernel.name.clone(),
                index,
                param: param.name().to_string(),
                element,
                expected: elem.value_type(),
                found: s.ty(),
            });
        }
    }
    Ok(())
}

#[allow(clippy::result_large_err)]
fn check_limits(kernel: &Kernel, grid: [u32; 3]) -> Result<(), InterpError> {
    let limit = |what, requested: u64, limit: u64| {
        if requested > limit {
            Err(InterpError::ResourceLimit {
                kernel: kernel.name.clone(),
                what,
                requested,
                limit,
            })
        } else {
            Ok(())
        }
    };
    let wg = kernel.workgroup_size;
    let n_inv = kernel.invocations_per_workgroup();
    limit(
        "invocations per workgroup",
        n_inv,
        MAX_INVOCATIONS_PER_WORKGROUP,
    )?;
    let shared: u64 = kernel.shared.iter().map(|s| s.len as u64).sum();
    limit("shared-array elements", shared, MAX_SHARED_ELEMENTS)?;
    limit(
        "local-variable slots",
        n_inv.saturating_mul(kernel.locals.len() as u64),
        MAX_LOCAL_SLOTS,
    )?;
    if (0..3).any(|a| grid[a] as u64 * wg[a] as u64 > 1u64 << 32) {
        return Err(InterpError::GridTooLarge {
            kernel: kernel.name.clone(),
            grid,
            workgroup_size: wg,
        });
    }
    Ok(())
}
