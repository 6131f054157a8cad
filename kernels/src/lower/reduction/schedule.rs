//! Schedules: how groups of invocations are laid over the slices of a view, and how
//! many parts a slice is cut into when the slices are too few to fill the device.

use super::group::Group;
use super::tree::Tree;
use super::view::{too_large, View};
use crate::lower::math::bind;
use crate::lower::schedule::{fold_grid, linear_workgroup};
use crate::lower::{LowerError, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// Invocations the device should have busy before a reduction is split (GPU), and the
/// fewest elements worth giving one invocation.
const GPU_TARGET_INVOCATIONS: u64 = 65_536;
const GPU_MIN_PER_INVOCATION: u64 = 32;
/// The same on a CPU, where a workgroup is one invocation on one host thread.
const CPU_TARGET_INVOCATIONS: u64 = 64;
const CPU_MIN_PER_INVOCATION: u64 = 8192;
/// Elements one CPU workgroup folds before it is worth its scheduling.
const CPU_WORK: u32 = 4096;
/// Widest vector access, in bytes (128-bit loads).
const MAX_VECTOR_BYTES: u32 = 16;

fn pow2_ceil(n: u32) -> u32 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 31)
}

fn pow2_floor(n: u32) -> u32 {
    if n == 0 {
        1
    } else {
        1 << (31 - n.leading_zeros())
    }
}

/// How groups of invocations are laid over the slices of a [`View`] (see the module
/// docs): `p` groups of `g` invocations per workgroup, `t` passes per workgroup, each
/// slice cut into `parts` parts of `part_len` elements. A step of an invocation loads
/// `lanes` contiguous elements of one slice (rows), or one element of each of
/// `slice_lanes` adjacent slices (columns); at most one of the two exceeds 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub view: View,
    pub slices: u32,
    pub len: u32,
    pub parts: u32,
    pub part_len: u32,
    /// Contiguous elements of one slice per step, 1, 2 or 4.
    pub lanes: u8,
    /// Adjacent slices per group, one per lane, 1, 2 or 4.
    pub slice_lanes: u8,
    /// Invocations per group (a power of two).
    pub g: u32,
    /// Groups per workgroup pass (a power of two).
    pub p: u32,
    /// Passes of one workgroup (1 on a GPU).
    pub t: u32,
    /// Rows layout (a group's invocations are neighbours) or columns.
    pub rows: bool,
    pub workgroups: u32,
    pub grid: [u32; 3],
}

/// `(lanes, slice_lanes)`: the caps' vector width (at most 16 bytes of `elem_bytes`
/// elements) along the contiguous axis, when its extent is a multiple of it, so that
/// every vector is aligned and stays inside one contiguous run. The contiguous axis is
/// the innermost reduced one (rows: lanes of one slice) or the innermost kept one
/// (columns: lanes of adjacent slices).
fn lanes_for(view: &View, caps: &TargetCaps, elem_bytes: u32) -> (u8, u8) {
    let widest = (caps.vector_width as u32).min(MAX_VECTOR_BYTES / elem_bytes.max(1));
    let pick = |extent: u32| {
        [4u32, 2]
            .into_iter()
            .find(|&l| l <= widest && extent % l == 0)
            .map_or(1, |l| l as u8)
    };
    if view.contiguous() {
        (view.reduced.last().map_or(1, |d| pick(d.0)), 1)
    } else {
        match view.kept.last() {
            Some(&(extent, 1)) if view.across => (1, pick(extent)),
            _ => (1, 1),
        }
    }
}

impl Schedule {
    /// Lays groups over `view` (elements of `elem_bytes` bytes) with each slice cut
    /// into `parts` parts.
    pub fn new(
        view: View,
        caps: &TargetCaps,
        parts: u32,
        elem_bytes: u32,
    ) -> Result<Schedule, LowerError> {
        let (slices, len) = (view.slices(), view.len());
        let (lanes, slice_lanes) = lanes_for(&view, caps, elem_bytes);
        let l = lanes as u32;
        let parts = parts.clamp(1, (len / l).max(1));
        // Parts start on a vector boundary.
        let part_len = len.div_ceil(parts).div_ceil(l).max(1) * l;
        let parts = len.div_ceil(part_len).max(1);
        let steps = part_len / l;
        let vector_slices = slices / slice_lanes as u32;
        let groups = vector_slices
            .checked_mul(parts)
            .ok_or_else(|| too_large("reduction groups", vector_slices as u64 * parts as u64))?;
        let inv = pow2_floor(caps.invocations_1d());
        let rows = view.contiguous();
        let (g, p) = if rows {
            // Small groups with several steps each (at least GPU_MIN_PER_INVOCATION
            // elements) and several rows per workgroup, rather than one step per
            // invocation and a deep tree of barriers -- unless there are too few
            // rows to keep the device busy that way.
            let min_steps = (GPU_MIN_PER_INVOCATION as u32 / l).max(1);
            let small = pow2_ceil(steps.div_ceil(min_steps));
            let fill = pow2_ceil(
                GPU_TARGET_INVOCATIONS
                    .div_ceil(groups.max(1) as u64)
                    .min(inv as u64) as u32,
            );
            let g = inv.min(pow2_ceil(steps)).min(small.max(fill));
            (g, (inv / g).min(pow2_ceil(groups)))
        } else {
            // Neighbouring slices of one part share a workgroup: more parts mean more
            // workgroups, not fewer invocations per slice.
            let p = inv.min(pow2_ceil(vector_slices));
            ((inv / p).min(pow2_ceil(steps)), p)
        };
        let t = if caps.is_serial() {
            (CPU_WORK / (part_len * slice_lanes as u32)).clamp(1, groups)
        } else {
            1
        };
        let workgroups = groups.div_ceil(p * t).max(1);
        let grid = fold_grid(workgroups, caps)?;
        Ok(Schedule {
            view,
            slices,
            len,
            parts,
            part_len,
            lanes,
            slice_lanes,
            g,
            p,
            t,
            rows,
            workgroups,
            grid,
        })
    }

    /// Groups in all: `slices / slice_lanes · parts`.
    pub fn groups(&self) -> u32 {
        self.vector_slices() * self.parts
    }

    fn vector_slices(&self) -> u32 {
        self.slices / self.slice_lanes as u32
    }

    /// The workgroup size to declare.
    pub fn workgroup_size(&self) -> [u32; 3] {
        [self.p * self.g, 1, 1]
    }

    /// Invocations launched in all.
    fn invocations(&self) -> u64 {
        self.workgroups as u64 * (self.p * self.g) as u64
    }

    /// Shared arrays for combining states of `types` across a group (none if `g = 1`).
    pub fn tree(
        &self,
        k: &mut KernelBuilder,
        types: &[ScalarType],
        caps: &TargetCaps,
        name: &str,
    ) -> Result<Tree, LowerError> {
        let len = self.p * self.g * self.slice_lanes as u32;
        let mut shared = Vec::new();
        if self.g > 1 {
            let bytes: u64 = types
                .iter()
                .map(|t| t.size_bytes() as u64 * len as u64)
                .sum();
            if bytes > caps.shared_memory_bytes as u64 {
                return Err(LowerError::SharedMemory {
                    op: name.to_string(),
                    needed: bytes,
                    available: caps.shared_memory_bytes as u64,
                });
            }
            for (c, &ty) in types.iter().enumerate() {
                shared.push(k.shared(format!("tree{c}"), ty, len));
            }
        }
        Ok(Tree {
            shared,
            g: self.g,
            stride: if self.rows { 1 } else { self.p },
            lanes: self.slice_lanes,
        })
    }

    /// Runs `body` once per group this invocation belongs to (`t` times on a CPU).
    /// Every invocation runs it, also those of groups past the end (whose element
    /// range is empty): the group's barriers stay in uniform control flow.
    pub fn for_each_group(&self, f: &mut Body, body: impl FnOnce(&mut Body, &Group)) {
        let inv = self.p * self.g;
        let lid = if inv > 1 {
            f.let_("lid", local_id(0))
        } else {
            E::from(0u32)
        };
        let (slot, r) = if inv == 1 {
            (E::from(0u32), E::from(0u32))
        } else if self.rows {
            (
                lid.clone() >> self.g.trailing_zeros(),
                lid.clone() & (self.g - 1),
            )
        } else {
            (
                lid.clone() & (self.p - 1),
                lid.clone() >> self.p.trailing_zeros(),
            )
        };
        let slot = bind(f, "slot", slot);
        let r = bind(f, "r", r);
        let wg = f.let_("wg", linear_workgroup(self.grid));
        if self.t == 1 {
            let gamma = if self.p == 1 {
                wg
            } else {
                wg * self.p + slot.clone()
            };
            self.group(f, lid, r, gamma, body);
        } else {
            f.for_("pass", 0u32, self.t, 1, |f, pass| {
                let first = wg * self.t + pass;
                let gamma = if self.p == 1 {
                    first
                } else {
                    first * self.p + slot.clone()
                };
                self.group(f, lid, r, gamma, body);
            });
        }
    }

    fn group(&self, f: &mut Body, lid: E, r: E, gamma: E, body: impl FnOnce(&mut Body, &Group)) {
        let groups = self.groups();
        let vector_slices = self.vector_slices();
        let sl = self.slice_lanes as u32;
        let gamma = f.let_("gamma", gamma);
        let valid = f.let_("valid", gamma.clone().lt(groups));
        // Loads of a group past the end go to the last group, so they stay in bounds.
        let safe = f.let_("group", gamma.clone().min(groups - 1));
        let (qv, j0, j1) = if self.parts == 1 {
            let end = valid.clone().select(self.len, 0u32);
            (safe, E::from(0u32), f.let_("end", end))
        } else {
            let qv = f.let_("qv", safe.clone() % vector_slices);
            let j0 = f.let_("j0", safe / vector_slices * self.part_len);
            let end = (j0.clone() + self.part_len).min(self.len);
            let end = valid.clone().select(end, j0.clone());
            (qv, j0, f.let_("end", end))
        };
        let q = if sl == 1 { qv } else { f.let_("q", qv * sl) };
        let base = bind(f, "base", self.view.base(&q));
        let leader = if self.g == 1 {
            valid.clone()
        } else {
            f.let_("leader", valid.clone() & r.clone().eq(0u32))
        };
        let group = Group {
            lid,
            r,
            gamma,
            valid,
            leader,
            q,
            base,
            j0,
            j1,
            g: self.g,
            lanes: self.lanes,
            slice_lanes: self.slice_lanes,
            whole_slices: self.parts == 1,
            view: self.view.clone(),
        };
        body(f, &group);
    }
}

/// How many parts to cut each slice of `view` into: enough to keep the device busy
/// when slices are few, never so many that a part stops paying for its partial state.
pub fn split_parts(view: &View, caps: &TargetCaps, elem_bytes: u32) -> Result<u32, LowerError> {
    let base = Schedule::new(view.clone(), caps, 1, elem_bytes)?;
    let (target, min_per) = if caps.is_serial() {
        (CPU_TARGET_INVOCATIONS, CPU_MIN_PER_INVOCATION)
    } else {
        (GPU_TARGET_INVOCATIONS, GPU_MIN_PER_INVOCATION)
    };
    let len = view.len() as u64;
    let work = view.slices() as u64 * len;
    let by_parallelism = target.min(work / min_per) / base.invocations().max(1);
    let by_work = len / (base.g as u64 * min_per);
    Ok(by_parallelism.min(by_work).clamp(1, u32::MAX as u64) as u32)
}
