//! The rules of shared memory beyond data races: asynchronous copies in flight
//! ([`crate::async_copy`]) and arrays that reuse another's bytes
//! ([`SharedDecl::reuses`]).

use super::exec::Ctx;
use super::expr::as_index;
use super::fault::{fault, malformed, At, FaultKind, Res, Seg::Name};
use super::track::Track;
use crate::async_copy::AsyncCopyOp;
use crate::eval::Value;
use crate::kernel::*;
use crate::scalar::Scalar;
use std::collections::{HashMap, VecDeque};

/// Elements one load of the interpreter moves at most (the IR's widest vector).
const MAX_LANES: u32 = 4;

/// One started copy: where it goes and what it read.
struct Copy {
    dst: SharedId,
    index: u32,
    values: Vec<Scalar>,
}

/// One invocation's copies: started since its last commit, and committed groups,
/// oldest first.
#[derive(Default)]
struct Flight {
    open: Vec<Copy>,
    committed: VecDeque<Vec<Copy>>,
}

/// The running workgroup's copies in flight and the arrays in use of each set that
/// shares bytes.
pub(super) struct SharedRules {
    flights: Vec<Flight>,
    /// `(array, element)` → the invocation whose copy is in flight into it.
    in_flight: HashMap<(u32, u32), u32>,
    /// For each array that others reuse (by its index): the array of its set used
    /// last, and in which epoch.
    in_use: Vec<Option<(SharedId, u64)>>,
    reuse: bool,
}

impl SharedRules {
    pub(super) fn new(kernel: &Kernel, invocations: usize) -> SharedRules {
        SharedRules {
            flights: (0..invocations).map(|_| Flight::default()).collect(),
            in_flight: HashMap::new(),
            in_use: vec![None; kernel.shared.len()],
            reuse: kernel.shared.iter().any(|s| s.reuses.is_some()),
        }
    }

    pub(super) fn begin_workgroup(&mut self) {
        for f in &mut self.flights {
            f.open.clear();
            f.committed.clear();
        }
        self.in_flight.clear();
        self.in_use.fill(None);
    }
}

impl Ctx<'_, '_> {
    /// Checks an access by `inv` to `lanes` elements of `shared` from `start`: none
    /// has a copy in flight, and the array may be used now (a barrier since another
    /// array of its set was, whose use leaves this one's elements undefined).
    pub(super) fn check_shared_rules(
        &mut self,
        shared: SharedId,
        start: usize,
        lanes: usize,
        inv: u32,
    ) -> Res<()> {
        if self.rules.reuse {
            self.enter_shared(shared, inv)?;
        }
        if self.rules.in_flight.is_empty() {
            return Ok(());
        }
        for i in start..start + lanes {
            if let Some(&copier) = self.rules.in_flight.get(&(shared.0, i as u32)) {
                let [x, y, z] = self.local_id(copier);
                return Err(fault(FaultKind::AsyncCopy {
                    inv,
                    shared,
                    index: i as u64,
                    what: format!(
                        "touched while a copy into it by invocation ({x}, {y}, {z}) is in flight"
                    ),
                }));
            }
        }
        Ok(())
    }

    fn enter_shared(&mut self, shared: SharedId, inv: u32) -> Res<()> {
        let owner = self.kernel.shared_storage(shared).0 as usize;
        let epoch = self.epoch;
        let Some(slot) = self.rules.in_use.get_mut(owner) else {
            return Err(malformed(inv, format!("unknown shared array #{owner}")));
        };
        match *slot {
            Some((previous, used)) if previous != shared => {
                if used == epoch {
                    return Err(fault(FaultKind::SharedReuse {
                        inv,
                        shared,
                        previous,
                    }));
                }
                // The set's bytes held another array's values: none of this one's.
                if let Some(mem) = self.shared.get_mut(shared.0 as usize) {
                    mem.track.fill(Track::new());
                }
            }
            Some(_) | None => {}
        }
        *slot = Some((shared, epoch));
        Ok(())
    }

    pub(super) fn exec_copy(&mut self, op: &AsyncCopyOp, mask: &[u32]) -> Res<()> {
        match op {
            AsyncCopyOp::Start(c) => {
                for &inv in mask {
                    let di = self.eval(&c.dst_index, inv).at(Name("dst_index"))?;
                    let di = as_index(&di, inv).at(Name("dst_index"))?;
                    let si = self.eval(&c.src_index, inv).at(Name("src_index"))?;
                    let si = as_index(&si, inv).at(Name("src_index"))?;
                    let ok = match self.eval(&c.valid, inv).at(Name("valid"))?.as_scalar() {
                        Some(Scalar::Bool(b)) => b,
                        _ => return Err(malformed(inv, "a copy's condition is not a bool")),
                    };
                    self.start_copy(c.dst, di, c.src, ok.then_some(si), c.len, inv)?;
                }
                Ok(())
            }
            AsyncCopyOp::Commit => {
                for &inv in mask {
                    if let Some(f) = self.rules.flights.get_mut(inv as usize) {
                        let group = std::mem::take(&mut f.open);
                        f.committed.push_back(group);
                    }
                }
                Ok(())
            }
            AsyncCopyOp::Wait { pending } => {
                for &inv in mask {
                    while let Some(group) = self.finished_group(inv, *pending) {
                        for copy in group {
                            self.complete(copy, inv)?;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// The oldest committed group of `inv`'s while more than `pending` are.
    fn finished_group(&mut self, inv: u32, pending: u32) -> Option<Vec<Copy>> {
        let f = self.rules.flights.get_mut(inv as usize)?;
        if f.committed.len() <= pending as usize {
            return None;
        }
        f.committed.pop_front()
    }

    /// Reads the source (`None`: zeros) and marks the destination in flight.
    fn start_copy(
        &mut self,
        dst: SharedId,
        di: u32,
        src: ParamId,
        si: Option<u32>,
        len: u8,
        inv: u32,
    ) -> Res<()> {
        let (elem, dst_len) = match self.kernel.shared_decl(dst) {
            Some(d) => (d.elem, d.len),
            None => return Err(malformed(inv, format!("unknown shared array #{}", dst.0))),
        };
        let n = len as u32;
        let mem = Memory::Shared(dst);
        if di as u64 + n as u64 > dst_len as u64 {
            return Err(fault(FaultKind::OutOfBounds {
                inv,
                mem,
                index: di as u64,
                lanes: len,
                len: dst_len as u64,
            }));
        }
        for (index, what) in [(Some(di), "destination"), (si, "source")] {
            if let Some(i) = index.filter(|i| n == 0 || i % n != 0) {
                return Err(fault(FaultKind::AsyncCopy {
                    inv,
                    shared: dst,
                    index: di as u64,
                    what: format!(
                        "a copy of {len} elements with its {what} at index {i}, not a multiple of {len}"
                    ),
                }));
            }
        }
        let mut values = Vec::with_capacity(len as usize);
        match si {
            Some(si) => {
                for at in (0..n).step_by(MAX_LANES as usize) {
                    let lanes = (n - at).min(MAX_LANES) as u8;
                    let mut v = Value::scalar(Scalar::zero(elem));
                    self.load_as(Memory::Buffer(src), si + at, lanes, inv, inv, &mut v)?;
                    values.extend_from_slice(v.lanes());
                }
            }
            None => values.resize(len as usize, Scalar::zero(elem)),
        }
        self.check_shared_rules(dst, di as usize, len as usize, inv)?;
        for i in di..di + n {
            self.rules.in_flight.insert((dst.0, i), inv);
        }
        if let Some(f) = self.rules.flights.get_mut(inv as usize) {
            f.open.push(Copy {
                dst,
                index: di,
                values,
            });
        }
        Ok(())
    }

    /// A copy's elements become `inv`'s writes.
    fn complete(&mut self, copy: Copy, inv: u32) -> Res<()> {
        for j in 0..copy.values.len() as u32 {
            self.rules.in_flight.remove(&(copy.dst.0, copy.index + j));
        }
        for (j, v) in copy.values.into_iter().enumerate() {
            let at = copy.index + j as u32;
            self.store_as(Memory::Shared(copy.dst), at, Value::scalar(v), inv, inv)?;
        }
        Ok(())
    }

    /// At the end of a workgroup: no copy is in flight.
    pub(super) fn check_copies_done(&self) -> Res<()> {
        for (inv, f) in self.rules.flights.iter().enumerate() {
            let unfinished = f.open.iter().chain(f.committed.iter().flatten()).next();
            if let Some(copy) = unfinished {
                return Err(fault(FaultKind::AsyncCopy {
                    inv: inv as u32,
                    shared: copy.dst,
                    index: copy.index as u64,
                    what: "a copy into it is still in flight when the workgroup ends (no wait \
                           completes it)"
                        .into(),
                }));
            }
        }
        Ok(())
    }
}
