//! Launches of the reduction engine: buffer parameters ([`Buf`]) and their
//! declaration, temporaries and launches on the plan, and the one launch of a row op
//! ([`row_kernel`]).

use super::group::Group;
use super::monoid::Monoid;
use super::schedule::Schedule;
use super::tree::Tree;
use super::view::View;
use crate::lower::{Binding, Launch, LowerError, PlanBuilder, ScalarParam, TargetCaps};
use crate::spec::{OpSpec, TensorSig};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// One buffer parameter of a launch and what it binds to.
#[derive(Clone, Debug)]
pub struct Buf {
    pub name: String,
    pub dtype: ScalarType,
    pub len: u64,
    pub access: Access,
    pub binding: Binding,
}

impl Buf {
    pub fn new(sig: &TensorSig, access: Access, binding: Binding) -> Buf {
        Buf {
            name: sig.name.clone(),
            dtype: sig.dtype,
            len: sig.numel() as u64,
            access,
            binding,
        }
    }

    /// Input `i` of `sigs` (an op's inputs), read-only.
    pub fn input(sigs: &[TensorSig], i: usize) -> Buf {
        Buf::new(&sigs[i], Access::Read, Binding::Input(i))
    }

    /// Output `i` of `sigs` (an op's outputs), write-only.
    pub fn output(sigs: &[TensorSig], i: usize) -> Buf {
        Buf::new(&sigs[i], Access::Write, Binding::Output(i))
    }

    /// The same binding, read-only (an earlier launch's output read by a later one).
    pub fn reading(mut self) -> Buf {
        self.access = Access::Read;
        self
    }
}

/// Declares `bufs` as the kernel's parameters, in order: a read-only buffer listed
/// again (same binding) is declared once, and an output updating an input in place
/// (same name) is declared as `name_out`. Returns one memory per entry of `bufs` and
/// the parameters declared (whose bindings the launch takes).
pub fn declare(k: &mut KernelBuilder, bufs: &[Buf]) -> (Vec<Mem>, Vec<Buf>) {
    let mut params: Vec<Buf> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut declared: Vec<Mem> = Vec::new();
    let mems = bufs
        .iter()
        .map(|b| {
            let again = params.iter().position(|p| {
                p.binding == b.binding && p.access == Access::Read && b.access == Access::Read
            });
            if let Some(i) = again {
                return declared[i];
            }
            let mut name = b.name.clone();
            while names.contains(&name) {
                name.push_str("_out");
            }
            names.push(name.clone());
            let mem = k.buffer(name, b.dtype, b.len, b.access);
            params.push(b.clone());
            declared.push(mem);
            mem
        })
        .collect();
    (mems, params)
}

/// Reduction launches on the one [`PlanBuilder`]: temporaries described as [`Buf`]s,
/// and launches whose buffer parameters are `Buf`s.
impl PlanBuilder {
    /// A new temporary of `len` elements, as a buffer parameter named `name`.
    pub fn temp_buf(&mut self, name: &str, dtype: ScalarType, len: u32, access: Access) -> Buf {
        let binding = self.temp(dtype, len as u64);
        Buf {
            name: name.to_string(),
            dtype,
            len: len as u64,
            access,
            binding,
        }
    }

    /// A launch whose parameters are `bufs`, then scalar parameters.
    pub fn push(
        &mut self,
        kernel: kernelc_ir::Kernel,
        grid: [u32; 3],
        bufs: &[Buf],
        uniforms: &[ScalarParam],
    ) {
        let scalars = uniforms.iter().map(|u| u.binding.clone());
        self.launches.push(Launch {
            kernel,
            grid,
            bindings: bufs
                .iter()
                .map(|b| b.binding.clone())
                .chain(scalars)
                .collect(),
        });
    }
}

/// Declares `uniforms` as scalar parameters (after the buffers).
pub(super) fn declare_uniforms(k: &mut KernelBuilder, uniforms: &[ScalarParam]) -> Vec<E> {
    uniforms.iter().map(|u| u.declare(k)).collect()
}

/// A plan holding one launch of row op `op` (softmax, norms, ...): each group folds its
/// slice, combines with `tree` (states of `monoid`), and makes a second pass over the slice with the
/// totals; `body(f, mems, params, group, tree)` writes that, with `bufs` declared in
/// order, then the scalar parameters `params`.
/// Vector steps are sized for the widest buffer. Unless the view has
/// [`View::whole_slices`], a group may take adjacent slices as the lanes of its
/// values: the body then treats totals as one lane per slice ([`Group::stat_num`]).
pub fn row_kernel(
    op: &OpSpec,
    caps: &TargetCaps,
    view: View,
    monoid: &dyn Monoid,
    bufs: &[Buf],
    scalars: &[ScalarParam],
    body: impl FnOnce(&mut Body, &[Mem], &[E], &Group, &Tree),
) -> Result<PlanBuilder, LowerError> {
    let widest = bufs.iter().map(|b| b.dtype.size_bytes()).max().unwrap_or(4);
    let sched = Schedule::new(view, caps, 1, widest)?;
    let name = op.name();
    let mut k = KernelBuilder::new(&name, sched.workgroup_size());
    let (mems, params) = declare(&mut k, bufs);
    let uni = declare_uniforms(&mut k, scalars);
    let tree = sched.tree(&mut k, &monoid.types(), caps, &name)?;
    let kernel = k.build(|f| sched.for_each_group(f, |f, g| body(f, &mems, &uni, g, &tree)))?;
    let mut plan = PlanBuilder::default();
    plan.push(kernel, sched.grid, &params, scalars);
    Ok(plan)
}
