//! Pure reductions ([`fold_plan`]): fold each slice and hand the total to an epilogue,
//! in one launch, or two when the slices are split into parts.

use super::group::{per_lane, Group, Slices};
use super::launch::{declare, declare_uniforms, Buf};
use super::monoid::{Monoid, Partials};
use super::schedule::{split_parts, Schedule};
use super::view::View;
use crate::lower::math::{bind, Num};
use crate::lower::{LowerError, PlanBuilder, ScalarParam, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// A pure reduction: fold each slice of `view` with `monoid` and hand the total to an
/// epilogue that writes the slice's results.
pub struct Fold<'a> {
    pub name: String,
    pub view: View,
    /// The widest type the items load (sizes vector loads).
    pub elem: ScalarType,
    pub monoid: &'a dyn Monoid,
    /// Buffers the items read (given to `prologue` and `item`).
    pub items: Vec<Buf>,
    /// Buffers the epilogue reads or writes.
    pub finals: Vec<Buf>,
    /// Scalar parameters the epilogue reads (per-call values, kept out of the
    /// kernel so that its cache key does not change).
    pub uniforms: Vec<ScalarParam>,
    /// Scalar parameters the items read (an elementwise prologue's per-call values).
    pub item_uniforms: Vec<ScalarParam>,
}

/// What an item closure sees: the items' buffers, the prologue's values (one lane
/// per slice of the group), and the step's first element `j` at `off`.
pub struct Item<'a> {
    pub mems: &'a [Mem],
    /// The declared [`Fold::item_uniforms`].
    pub uniforms: &'a [E],
    pub pre: &'a [E],
    pub off: E,
    pub j: E,
    /// Contiguous elements of one slice in the step.
    pub lanes: u8,
    /// Adjacent slices in the step, one per lane.
    pub slice_lanes: u8,
}

impl Item<'_> {
    /// The numeric context of the step: `ty` with its lanes.
    pub fn num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.lanes.max(self.slice_lanes),
        }
    }

    /// A per-slice value (a prologue value) made to match the step's values.
    pub fn splat(&self, e: E) -> E {
        if self.lanes == 1 {
            e
        } else {
            e.splat(self.lanes)
        }
    }

    /// Per-position values that are not contiguous: `value(f, position)` for each
    /// lane's element position, as the step's lanes.
    pub fn gather(&self, f: &mut Body, value: impl Fn(&mut Body, E) -> E) -> E {
        if self.slice_lanes > 1 {
            // Every lane is at position j (of its own slice).
            let v = value(f, self.j.clone());
            return v.splat(self.slice_lanes);
        }
        per_lane(f, &self.j, self.lanes, value)
    }
}

/// Per-slice values computed before the fold (`prologue(f, items, slices)`, one lane
/// per slice of the group), the values of one step (`item(f, &Item)`), and the
/// leader's epilogue for one slice (`epilogue(f, finals, uniforms, q, total)`, scalars;
/// called once per slice of the group).
pub struct FoldFns<P, I, Ep> {
    pub prologue: P,
    pub item: I,
    pub epilogue: Ep,
}

/// Runs `epilogue` for each slice of `group` with that slice's lane of `total`.
fn per_slice<Ep>(f: &mut Body, group: &Group, total: &[E], epilogue: Ep)
where
    Ep: Fn(&mut Body, &E, &[E]),
{
    if group.slice_lanes == 1 {
        epilogue(f, &group.q, total);
        return;
    }
    for l in 0..group.slice_lanes {
        let q = f.let_("slice", group.q.clone() + l as u32);
        let lane: Vec<E> = total
            .iter()
            .map(|t| f.let_("total", t.clone().lane(l)))
            .collect();
        epilogue(f, &q, &lane);
    }
}

/// Lowers a [`Fold`]: one launch, or two when [`split_parts`] cuts the slices
/// (partial states in temporaries, then a column reduction of the partials that runs
/// the epilogue).
pub fn fold_plan<P, I, Ep>(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    fold: Fold,
    fns: FoldFns<P, I, Ep>,
) -> Result<(), LowerError>
where
    P: FnOnce(&mut Body, &[Mem], &Slices) -> Vec<E>,
    I: Fn(&mut Body, &Item) -> Vec<E>,
    Ep: Fn(&mut Body, &[Mem], &[E], &E, &[E]),
{
    let elem_bytes = fold.elem.size_bytes();
    let parts = split_parts(&fold.view, caps, elem_bytes)?;
    let types = fold.monoid.types();
    let n_items = fold.items.len();
    let sched = Schedule::new(fold.view.clone(), caps, parts, elem_bytes)?;
    let split = sched.parts > 1;
    let FoldFns {
        prologue,
        item,
        epilogue,
    } = fns;

    // Launch 1: fold each group's elements; finish, or leave partial states (slice q
    // of part k at k·slices + q).
    let partials: Vec<Buf> = if split {
        let len = sched.slices * sched.parts;
        types
            .iter()
            .enumerate()
            .map(|(c, &ty)| plan.temp_buf(&format!("partial{c}"), ty, len, Access::Write))
            .collect()
    } else {
        Vec::new()
    };
    let mut bufs = fold.items.clone();
    bufs.extend(if split {
        partials.iter().cloned()
    } else {
        fold.finals.iter().cloned()
    });
    let name = if split {
        format!("{}_partial", fold.name)
    } else {
        fold.name.clone()
    };
    let mut uniforms = fold.item_uniforms.clone();
    if !split {
        uniforms.extend(fold.uniforms.iter().cloned());
    }
    let mut k = KernelBuilder::new(name.clone(), sched.workgroup_size());
    let (mems, params) = declare(&mut k, &bufs);
    let declared = declare_uniforms(&mut k, &uniforms);
    let (item_uni, uni) = declared.split_at(fold.item_uniforms.len());
    let tree = sched.tree(&mut k, &types, caps, &name)?;
    let kernel = k.build(|f| {
        sched.for_each_group(f, |f, g| {
            let items = &mems[..n_items];
            let pre = prologue(f, items, &g.slices());
            let acc = g.fold(f, fold.monoid, |f, j| {
                let off = bind(f, "off", g.offset(j));
                let step = Item {
                    mems: items,
                    uniforms: item_uni,
                    pre: &pre,
                    off,
                    j: j.clone(),
                    lanes: g.lanes,
                    slice_lanes: g.slice_lanes,
                };
                item(f, &step)
            });
            let total = tree.reduce(f, g, fold.monoid, &acc, false);
            let outs = &mems[n_items..];
            f.if_(g.leader.clone(), |f| {
                if split {
                    let sl = g.slice_lanes as u32;
                    let at = if sl == 1 {
                        g.gamma.clone()
                    } else {
                        g.gamma.clone() * sl
                    };
                    for (m, v) in outs.iter().zip(&total) {
                        f.store(*m, at.clone(), v.clone());
                    }
                } else {
                    per_slice(f, g, &total, |f, q, t| epilogue(f, outs, uni, q, t));
                }
            });
        });
    })?;
    plan.push(kernel, sched.grid, &params, &uniforms);
    if !split {
        return Ok(());
    }

    // Launch 2: the partials of slice q sit at k·slices + q: a column reduction.
    let (slices, parts) = (sched.slices, sched.parts);
    let view = View::strided(&[(slices, 1)], &[(parts, slices)]);
    let widest = types.iter().map(|t| t.size_bytes()).max().unwrap_or(4);
    let sched = Schedule::new(view, caps, 1, widest)?;
    let monoid = Partials(fold.monoid);
    let mut bufs: Vec<Buf> = partials.into_iter().map(Buf::reading).collect();
    let n_partials = bufs.len();
    bufs.extend(fold.finals.iter().cloned());
    let name = format!("{}_combine", fold.name);
    let mut k = KernelBuilder::new(name.clone(), sched.workgroup_size());
    let (mems, params) = declare(&mut k, &bufs);
    let uni = declare_uniforms(&mut k, &fold.uniforms);
    let tree = sched.tree(&mut k, &types, caps, &name)?;
    let kernel = k.build(|f| {
        sched.for_each_group(f, |f, g| {
            let (parts, outs) = mems.split_at(n_partials);
            let acc = g.fold(f, &monoid, |f, j| {
                let off = bind(f, "off", g.offset(j));
                parts
                    .iter()
                    .map(|m| m.load(off.clone(), g.step_lanes()))
                    .collect()
            });
            let total = tree.reduce(f, g, &monoid, &acc, false);
            f.if_(g.leader.clone(), |f| {
                per_slice(f, g, &total, |f, q, t| epilogue(f, outs, &uni, q, t));
            });
        });
    })?;
    plan.push(kernel, sched.grid, &params, &fold.uniforms);
    Ok(())
}
