//! The shared-memory tree that combines the states of a group's invocations.

use super::group::{assign_all, Group};
use super::monoid::Monoid;
use kernelc_ir::builder::*;

/// Shared arrays combining per-invocation states across a group.
pub struct Tree {
    pub(super) shared: Vec<Mem>,
    pub(super) g: u32,
    /// Distance in invocation ids between ranks `r` and `r + 1` of a group.
    pub(super) stride: u32,
    /// Lanes of a state (one per slice of the group).
    pub(super) lanes: u8,
}

impl Tree {
    fn at(&self, mem: Mem, lid: E) -> E {
        if self.lanes == 1 {
            mem.at(lid)
        } else {
            mem.load(lid * self.lanes as u32, self.lanes)
        }
    }

    fn put(&self, f: &mut Body, mem: Mem, lid: E, value: E) {
        if self.lanes == 1 {
            f.store(mem, lid, value);
        } else {
            f.store(mem, lid * self.lanes as u32, value);
        }
    }

    /// Combines `acc` across the group by a tree in shared memory (log₂ g steps, each
    /// ending in a barrier). Returns the total: in every invocation of the group with
    /// `broadcast`, else in the leader only. Must be called in uniform control flow.
    pub fn reduce(
        &self,
        f: &mut Body,
        group: &Group,
        monoid: &dyn Monoid,
        acc: &[Var],
        broadcast: bool,
    ) -> Vec<E> {
        if self.g == 1 {
            return acc.iter().map(|v| v.get()).collect();
        }
        for (mem, v) in self.shared.iter().zip(acc) {
            self.put(f, *mem, group.lid.clone(), v.get());
        }
        f.barrier();
        let mut step = self.g / 2;
        while step >= 1 {
            // Ranks below `step` absorb the state `step` ranks up. Only ranks in
            // [step, 2·step) are read, and they do not write in this step.
            let partner = group.lid.clone() + step * self.stride;
            let last = step == 1;
            f.if_(group.r.clone().lt(step), |f| {
                let mine: Vec<E> = acc.iter().map(|v| v.get()).collect();
                let other: Vec<E> = self
                    .shared
                    .iter()
                    .map(|m| f.let_("other", self.at(*m, partner.clone())))
                    .collect();
                let next = monoid.combine(f, &mine, &other, self.lanes);
                assign_all(f, acc, next);
                if !last || broadcast {
                    for (mem, v) in self.shared.iter().zip(acc) {
                        self.put(f, *mem, group.lid.clone(), v.get());
                    }
                }
            });
            f.barrier();
            step /= 2;
        }
        if !broadcast {
            return acc.iter().map(|v| v.get()).collect();
        }
        let leader = group.lid.clone() - group.r.clone() * self.stride;
        let leader = f.let_("leader_id", leader);
        let total: Vec<E> = self
            .shared
            .iter()
            .map(|m| f.let_("total", self.at(*m, leader.clone())))
            .collect();
        // The arrays are reused by the next reduction: everyone must have read first.
        f.barrier();
        total
    }
}
