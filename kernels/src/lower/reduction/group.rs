//! Groups: one group's place in a launch as its invocations see it, the per-invocation
//! fold over the group's elements, and the combining of vector lanes and unrolled steps.

use super::monoid::Monoid;
use super::view::View;
use crate::lower::math::{bind, Num};
use kernelc_ir::builder::*;
use kernelc_ir::{Expr, ScalarType};

/// One group's place in the launch, as seen by one of its invocations.
pub struct Group {
    /// Invocation id in the workgroup.
    pub lid: E,
    /// Rank in the group (0 is the leader).
    pub r: E,
    /// Group index (`part · slices / slice_lanes + slice / slice_lanes`); past the
    /// end for groups that do not exist.
    pub gamma: E,
    /// The group exists (`gamma` is in range).
    pub valid: E,
    /// The group exists and this is its rank 0: the one invocation that writes the
    /// slice's results.
    pub leader: E,
    /// The (first) slice (clamped into range for groups past the end).
    pub q: E,
    /// Offset of the (first) slice's first element.
    pub base: E,
    /// The group's elements are `j0..j1` (empty for groups past the end).
    pub j0: E,
    pub j1: E,
    pub(super) g: u32,
    /// Contiguous elements of the slice per step: `j` given to bodies is the first.
    pub lanes: u8,
    /// Adjacent slices of the group, one per lane of every value.
    pub slice_lanes: u8,
    /// One part per slice: the group's elements are the whole slice.
    pub(super) whole_slices: bool,
    pub(super) view: View,
}

/// One step of an invocation whose steps are all known at compile time
/// ([`Group::resident_steps`]).
pub struct Step {
    /// The step's first element, clamped into the slice: a load at `j` stays in the
    /// slice even where the step is past its end (it then reads the slice's last step).
    pub j: E,
    /// Whether the step's elements are this group's to write: the group exists and,
    /// for a `ragged` step, `j` is not past the slice's end.
    pub inside: E,
    /// Some invocations' step lies past the slice's end: its values are duplicates of
    /// the last step and must not count in non-idempotent folds (sums).
    pub ragged: bool,
}

impl Group {
    /// Offset of element `j` of the slice (of the first lane's, for vectors).
    pub fn offset(&self, j: &E) -> E {
        let o = self.view.offset(j);
        match self.base.expr() {
            Expr::Lit(s) if s.is_zero() => o,
            _ => self.base.clone() + o,
        }
    }

    /// Lanes of a step's values.
    pub fn step_lanes(&self) -> u8 {
        self.lanes.max(self.slice_lanes)
    }

    /// The numeric context of one step: `ty` with the step's lanes.
    pub fn num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.step_lanes(),
        }
    }

    /// The numeric context of per-slice values (totals): one lane per slice.
    pub fn stat_num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.slice_lanes,
        }
    }

    /// A per-slice value (a total) made to match a step's values.
    pub fn splat(&self, e: E) -> E {
        if self.lanes == 1 {
            e
        } else {
            e.splat(self.lanes)
        }
    }

    /// The positions of a step's lanes: `j`, `(j, j+1, ...)` along one slice, or
    /// `(j, j, ...)` across slices.
    pub fn lane_index(&self, j: &E) -> E {
        if self.slice_lanes > 1 {
            return j.clone().splat(self.slice_lanes);
        }
        if self.lanes == 1 {
            return j.clone();
        }
        let ramp = vector((0..self.lanes as u32).map(E::from));
        j.clone().splat(self.lanes) + ramp
    }

    /// The group's slices, for per-slice values.
    pub fn slices(&self) -> Slices {
        Slices {
            q: self.q.clone(),
            lanes: self.slice_lanes,
        }
    }

    /// Calls `body(f, j)` for this invocation's steps: `j = j0 + r·lanes`, then every
    /// `g·lanes` elements further.
    pub fn for_each(&self, f: &mut Body, body: impl FnOnce(&mut Body, E)) {
        let l = self.lanes as u32;
        let first = if l == 1 {
            self.r.clone()
        } else {
            self.r.clone() * l
        };
        let start = match self.j0.expr() {
            Expr::Lit(s) if s.is_zero() => first,
            _ => self.j0.clone() + first,
        };
        f.for_("j", start, self.j1.clone(), self.g * l, body);
    }

    /// Folds this invocation's elements into accumulators of per-slice shape: `item(f,
    /// j)` gives the values of step `j`; lanes along one slice are combined at the end.
    pub fn fold(
        &self,
        f: &mut Body,
        monoid: &dyn Monoid,
        item: impl Fn(&mut Body, &E) -> Vec<E>,
    ) -> Vec<Var> {
        let lanes = self.step_lanes();
        let first = if monoid.starts_from_first() {
            let zero = E::from(0u32);
            let x = item(f, &zero);
            Some(monoid.lift(f, x, &self.lane_index(&zero), lanes))
        } else {
            None
        };
        let vars: Vec<Var> = monoid
            .start(first, lanes)
            .into_iter()
            .map(|e| f.var("acc", e))
            .collect();
        self.for_each(f, |f, j| {
            let acc: Vec<E> = vars.iter().map(|v| v.get()).collect();
            let x = item(f, &j);
            let at = self.lane_index(&j);
            let next = monoid.update(f, &acc, x, &at, lanes);
            assign_all(f, &vars, next);
        });
        if self.lanes == 1 {
            return vars;
        }
        let state: Vec<E> = vars.iter().map(|v| v.get()).collect();
        self.combine_lanes(f, monoid, state)
            .into_iter()
            .map(|e| f.var("acc", e))
            .collect()
    }

    /// A step's state made per-slice: the lanes along one slice combined pairwise
    /// (lane order kept, so ties of arg-reductions still see the lower position on the
    /// left). Lanes across slices stay apart.
    fn combine_lanes(&self, f: &mut Body, monoid: &dyn Monoid, state: Vec<E>) -> Vec<E> {
        if self.lanes == 1 {
            return state;
        }
        let lanes: Vec<Vec<E>> = (0..self.lanes)
            .map(|l| state.iter().map(|e| e.clone().lane(l)).collect())
            .collect();
        combine_pairwise(f, monoid, lanes, 1)
    }

    /// This invocation's steps, unrolled, when the group covers whole slices and every
    /// invocation has at most `most_elements` elements (so that its values can stay in
    /// registers); `None` otherwise. Step `k` starts at `r·lanes + k·g·lanes`.
    pub fn resident_steps(&self, f: &mut Body, most_elements: u32) -> Option<Vec<Step>> {
        let l = self.lanes as u32;
        let stride = self.g * l;
        let len = self.view.len();
        let count = len.div_ceil(stride);
        if !self.whole_slices || count * self.step_lanes() as u32 > most_elements {
            return None;
        }
        let first = if l == 1 {
            self.r.clone()
        } else {
            self.r.clone() * l
        };
        let steps = (0..count).map(|k| {
            let j = bind(f, "j", first.clone() + k * stride);
            if (k + 1) * stride <= len {
                return Step {
                    j,
                    inside: self.valid.clone(),
                    ragged: false,
                };
            }
            let inside = f.let_("inside", j.clone().lt(self.j1.clone()));
            Step {
                j: f.let_("j_in", j.min(len - l)),
                inside,
                ragged: true,
            }
        });
        Some(steps.collect())
    }

    /// Combines the states of unrolled steps (one per step, of the step's lanes) into
    /// one per-slice state, pairwise: a dependency chain of log₂ steps, not one per
    /// step. Ragged steps must already hold the monoid's identity, or a duplicate for
    /// an idempotent one.
    pub fn combine_steps(&self, f: &mut Body, monoid: &dyn Monoid, states: Vec<Vec<E>>) -> Vec<E> {
        let state = combine_pairwise(f, monoid, states, self.step_lanes());
        self.combine_lanes(f, monoid, state)
    }
}

/// `s₀ ⊕ s₁ ⊕ …` by combining neighbours pairwise (order kept), each partial bound.
fn combine_pairwise(
    f: &mut Body,
    monoid: &dyn Monoid,
    mut states: Vec<Vec<E>>,
    lanes: u8,
) -> Vec<E> {
    while states.len() > 1 {
        let mut next = Vec::new();
        for pair in states.chunks(2) {
            let merged = match pair {
                [a, b] => monoid.combine(f, a, b, lanes),
                _ => pair[0].clone(),
            };
            next.push(merged.into_iter().map(|e| bind(f, "lanes", e)).collect());
        }
        states = next;
    }
    states.into_iter().next().unwrap_or_default()
}

/// The slices of one group: `q`, or `q .. q + lanes` (one per lane).
pub struct Slices {
    pub q: E,
    pub lanes: u8,
}

impl Slices {
    /// A per-slice value, `value(f, slice)` for each of the group's slices, gathered
    /// into one lane per slice.
    pub fn gather(&self, f: &mut Body, value: impl Fn(&mut Body, E) -> E) -> E {
        per_lane(f, &self.q, self.lanes, value)
    }
}

/// `value(f, first + l)` for each of `lanes` lanes, each bound, as one vector (a scalar
/// for one lane).
pub(super) fn per_lane(f: &mut Body, first: &E, lanes: u8, value: impl Fn(&mut Body, E) -> E) -> E {
    if lanes == 1 {
        return value(f, first.clone());
    }
    let lanes: Vec<E> = (0..lanes as u32)
        .map(|l| {
            let v = value(f, first.clone() + l);
            bind(f, "lane", v)
        })
        .collect();
    vector(lanes)
}

/// Assigns every var at once: the new values are bound first, so that no update
/// reads a var already overwritten.
pub(super) fn assign_all(f: &mut Body, vars: &[Var], values: Vec<E>) {
    let pending: Vec<(Var, E)> = vars
        .iter()
        .zip(values)
        .filter(|(v, e)| !matches!(e.expr(), Expr::Local(l) if *l == v.0))
        .map(|(v, e)| (*v, e))
        .collect();
    if let [(v, e)] = pending.as_slice() {
        f.assign(*v, e.clone());
        return;
    }
    let bound: Vec<(Var, E)> = pending
        .into_iter()
        .map(|(v, e)| (v, bind(f, "next", e)))
        .collect();
    for (v, e) in bound {
        f.assign(v, e);
    }
}
