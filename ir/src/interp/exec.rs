//! Execution state and statements: workgroups, active masks, loops, barriers, locals.

use super::expr::as_index;
use super::fault::{
    fault, malformed, stmt_seg, At, FaultKind, Res,
    Seg::{Indexed, Name},
};
use super::host::Arg;
use super::track::Track;
use crate::eval::Value;
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

// ---------------------------------------------------------------------------------------
// Execution state
// ---------------------------------------------------------------------------------------

/// A parameter bound to its argument.
pub(super) enum Binding<'a> {
    Buffer {
        data: &'a mut [Scalar],
        elem: ScalarType,
        /// Access history; `None` for read-only buffers, which are never written.
        track: Option<Vec<Track>>,
    },
    Scalar(Scalar),
}

pub(super) struct SharedMem {
    pub(super) elem: ScalarType,
    pub(super) data: Vec<Scalar>,
    pub(super) track: Vec<Track>,
}

/// One invocation's state in a running loop.
#[derive(Clone, Copy)]
pub(super) struct LoopLane {
    inv: u32,
    cur: i64,
    end: i64,
}

pub(super) struct Ctx<'k, 'a> {
    pub(super) kernel: &'k Kernel,
    pub(super) grid: [u32; 3],
    pub(super) wg_size: [u32; 3],
    pub(super) n_inv: usize,
    pub(super) n_locals: usize,
    /// Local id of each invocation (by linear local index).
    pub(super) local_ids: Vec<[u32; 3]>,
    pub(super) bindings: Vec<Binding<'a>>,
    pub(super) shared: Vec<SharedMem>,

    // Per-workgroup state.
    pub(super) wg_id: [u32; 3],
    /// `locals[inv * n_locals + local]`.
    pub(super) locals: Vec<Option<Value>>,
    pub(super) returned: Vec<bool>,
    pub(super) returned_count: usize,
    pub(super) epoch: u64,
    /// First epoch of the running workgroup.
    pub(super) wg_start: u64,
    /// First epoch of every workgroup run so far, by linear workgroup index.
    pub(super) wg_starts: Vec<u64>,

    pub(super) mask_pool: Vec<Vec<u32>>,
    pub(super) loop_pool: Vec<Vec<LoopLane>>,
    /// `fragment_values[warp * fragments + fragment]` of the running workgroup (for a
    /// warpgroup's fragment, `warp` is its group's first).
    pub(super) fragment_values: Vec<Option<super::fragment::FragmentValue>>,
    /// Where each warpgroup `A`/`B` fragment of `fragment_values` was loaded from,
    /// read again at the `mma`.
    pub(super) fragment_sources: Vec<Option<super::fragment::FragmentSource>>,
    /// The operands of warpgroup multiplies since the last barrier, which the matrix
    /// units may read until the next one (checked there and at the end).
    pub(super) pending_reads: Vec<super::fragment::PendingRead>,
    /// Copies in flight and arrays in use of the running workgroup.
    pub(super) rules: super::shared::SharedRules,
}

impl<'k, 'a> Ctx<'k, 'a> {
    pub(super) fn new(kernel: &'k Kernel, grid: [u32; 3], args: &'a mut [Arg]) -> Self {
        let wg = kernel.workgroup_size;
        let n_inv = kernel.invocations_per_workgroup() as usize;
        let n_locals = kernel.locals.len();
        let local_ids = (0..n_inv as u64)
            .map(|i| {
                let x = i % wg[0] as u64;
                let y = (i / wg[0] as u64) % wg[1] as u64;
                let z = i / (wg[0] as u64 * wg[1] as u64);
                [x as u32, y as u32, z as u32]
            })
            .collect();
        let bindings = kernel
            .params
            .iter()
            .zip(args.iter_mut())
            .map(|(param, arg)| match arg {
                Arg::Buffer(buf) => {
                    let writable = match param {
                        Param::Buffer { access, .. } => access.can_write(),
                        Param::Scalar { .. } => false,
                    };
                    let track = writable.then(|| vec![Track::new(); buf.data.len()]);
                    Binding::Buffer {
                        elem: buf.elem,
                        data: &mut buf.data[..],
                        track,
                    }
                }
                Arg::Scalar(s) => Binding::Scalar(*s),
            })
            .collect();
        let shared = kernel
            .shared
            .iter()
            .map(|d| SharedMem {
                elem: d.elem,
                data: vec![Scalar::zero(d.elem); d.len as usize],
                track: vec![Track::new(); d.len as usize],
            })
            .collect();
        Ctx {
            kernel,
            grid,
            wg_size: wg,
            n_inv,
            n_locals,
            local_ids,
            bindings,
            shared,
            wg_id: [0; 3],
            locals: vec![None; n_inv * n_locals],
            returned: vec![false; n_inv],
            returned_count: 0,
            epoch: 0,
            wg_start: 0,
            wg_starts: Vec::new(),
            mask_pool: Vec::new(),
            loop_pool: Vec::new(),
            fragment_values: vec![
                None;
                n_inv.div_ceil(crate::fragment::WARP as usize)
                    * kernel.fragments.len()
            ],
            pending_reads: Vec::new(),
            rules: super::shared::SharedRules::new(kernel, n_inv),
            fragment_sources: vec![
                None;
                n_inv.div_ceil(crate::fragment::WARP as usize)
                    * kernel.fragments.len()
            ],
        }
    }

    pub(super) fn run_grid(&mut self) -> Res<()> {
        let kernel = self.kernel;
        let mut mask = Vec::with_capacity(self.n_inv);
        for z in 0..self.grid[2] {
            for y in 0..self.grid[1] {
                for x in 0..self.grid[0] {
                    self.begin_workgroup([x, y, z]);
                    mask.clear();
                    mask.extend(0..self.n_inv as u32);
                    self.exec_block(&kernel.body, &mut mask, "body")?;
                    self.check_pending_reads()?;
                    self.check_copies_done()?;
                }
            }
        }
        Ok(())
    }

    fn begin_workgroup(&mut self, id: [u32; 3]) {
        self.wg_id = id;
        self.epoch = self.epoch.wrapping_add(1);
        self.wg_start = self.epoch;
        self.wg_starts.push(self.epoch);
        self.locals.fill(None);
        self.returned.fill(false);
        self.returned_count = 0;
        self.fragment_values.fill(None);
        self.fragment_sources.fill(None);
        self.pending_reads.clear();
        self.rules.begin_workgroup();
    }

    fn take_mask(&mut self) -> Vec<u32> {
        let mut m = self.mask_pool.pop().unwrap_or_default();
        m.clear();
        m
    }

    fn give_mask(&mut self, m: Vec<u32>) {
        self.mask_pool.push(m);
    }

    // -- statements -----------------------------------------------------------------

    pub(super) fn exec_block(
        &mut self,
        block: &[Stmt],
        mask: &mut Vec<u32>,
        name: &'static str,
    ) -> Res<()> {
        for (i, stmt) in block.iter().enumerate() {
            if mask.is_empty() {
                break;
            }
            let before = self.returned_count;
            self.exec_stmt(stmt, mask).at(Indexed(name, i))?;
            if self.returned_count != before {
                let returned = &self.returned;
                mask.retain(|&inv| !returned[inv as usize]);
            }
        }
        Ok(())
    }

    fn exec_stmt(&mut self, stmt: &Stmt, mask: &[u32]) -> Res<()> {
        match self.exec_stmt_node(stmt, mask) {
            Ok(()) => Ok(()),
            Err(mut f) => {
                if let Some(seg) = stmt_seg(stmt) {
                    f.segs.push(seg);
                }
                Err(f)
            }
        }
    }

    fn exec_stmt_node(&mut self, stmt: &Stmt, mask: &[u32]) -> Res<()> {
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let first = mask.first().copied().unwrap_or(0);
                let ty = match self.kernel.local(*local) {
                    Some(d) => d.ty,
                    None => return Err(malformed(first, format!("unknown local #{}", local.0))),
                };
                for &inv in mask.iter() {
                    let v = self.eval(value, inv).at(Name("value"))?;
                    self.set_local(*local, ty, inv, v).at(Name("value"))?;
                }
                Ok(())
            }
            Stmt::Store { mem, index, value } => {
                for &inv in mask.iter() {
                    let i = self.eval(index, inv).at(Name("index"))?;
                    let i = as_index(&i, inv).at(Name("index"))?;
                    let v = self.eval(value, inv).at(Name("value"))?;
                    self.store(*mem, i, v, inv)?;
                }
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let mut on_true = self.take_mask();
                let mut on_false = self.take_mask();
                for &inv in mask.iter() {
                    let c = self.eval(cond, inv).at(Name("cond"))?;
                    match c.as_scalar() {
                        Some(Scalar::Bool(true)) => on_true.push(inv),
                        Some(Scalar::Bool(false)) => on_false.push(inv),
                        _ => {
                            return Err(malformed(
                                inv,
                                format!("if condition is a {}, not a bool", c.ty()),
                            ))
                            .at(Name("cond"))
                        }
                    }
                }
                let r = self.exec_block(then_body, &mut on_true, "then");
                let r = r.and_then(|()| self.exec_block(else_body, &mut on_false, "else"));
                self.give_mask(on_true);
                self.give_mask(on_false);
                r
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.exec_for(*var, start, end, *step, body, mask),
            Stmt::Return => {
                for &inv in mask.iter() {
                    if let Some(r) = self.returned.get_mut(inv as usize) {
                        if !*r {
                            *r = true;
                            self.returned_count += 1;
                        }
                    }
                }
                Ok(())
            }
            Stmt::Barrier => {
                if mask.len() != self.n_inv {
                    let mut present = vec![false; self.n_inv];
                    for &inv in mask.iter() {
                        if let Some(p) = present.get_mut(inv as usize) {
                            *p = true;
                        }
                    }
                    let missing = present.iter().position(|&p| !p).unwrap_or(0) as u32;
                    return Err(fault(FaultKind::Divergent {
                        arrived: mask.len(),
                        missing,
                    }));
                }
                // A warpgroup's multiplies may read their operands up to here.
                self.check_pending_reads()?;
                self.epoch = self.epoch.wrapping_add(1);
                Ok(())
            }
            Stmt::Fragment(op) => self.exec_fragment(op, mask),
            Stmt::AsyncCopy(op) => self.exec_copy(op, mask),
        }
    }

    fn exec_for(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: u32,
        body: &[Stmt],
        mask: &[u32],
    ) -> Res<()> {
        let first = mask.first().copied().unwrap_or(0);
        let ty = match self.kernel.local(var) {
            Some(d) => d.ty,
            None => return Err(malformed(first, format!("unknown loop counter #{}", var.0))),
        };
        if ty != Type::I32 && ty != Type::U32 {
            return Err(malformed(
                first,
                format!("loop counter of type {ty} (only i32 and u32)"),
            ));
        }
        if step == 0 {
            return Err(malformed(first, "loop step is 0"));
        }
        let counter = |v: Value, inv: u32| -> Res<i64> {
            match v.as_scalar() {
                Some(Scalar::I32(x)) if ty == Type::I32 => Ok(x as i64),
                Some(Scalar::U32(x)) if ty == Type::U32 => Ok(x as i64),
                _ => Err(malformed(
                    inv,
                    format!("loop bound of type {} for a {ty} counter", v.ty()),
                )),
            }
        };
        let mut lanes = self.loop_pool.pop().unwrap_or_default();
        lanes.clear();
        for &inv in mask {
            let s = self.eval(start, inv).at(Name("start"))?;
            let s = counter(s, inv).at(Name("start"))?;
            let e = self.eval(end, inv).at(Name("end"))?;
            let e = counter(e, inv).at(Name("end"))?;
            lanes.push(LoopLane {
                inv,
                cur: s,
                end: e,
            });
        }
        let mut iter_mask = self.take_mask();
        let mut result = Ok(());
        loop {
            let returned = &self.returned;
            lanes.retain(|l| l.cur < l.end && !returned[l.inv as usize]);
            if lanes.is_empty() {
                break;
            }
            iter_mask.clear();
            for l in &lanes {
                let c = if ty == Type::I32 {
                    Scalar::I32(l.cur as i32)
                } else {
                    Scalar::U32(l.cur as u32)
                };
                if let Err(e) = self.set_local(var, ty, l.inv, Value::scalar(c)) {
                    result = Err(e);
                    break;
                }
                iter_mask.push(l.inv);
            }
            if result.is_ok() {
                result = self.exec_block(body, &mut iter_mask, "body");
            }
            if result.is_err() {
                break;
            }
            for l in lanes.iter_mut() {
                // No overflow in i64; a counter that would wrap the counter type is past
                // `end` (at most the type's maximum), so its loop ends.
                l.cur += step as i64;
            }
        }
        self.give_mask(iter_mask);
        self.loop_pool.push(lanes);
        result
    }

    pub(super) fn set_local(&mut self, local: LocalId, ty: Type, inv: u32, v: Value) -> Res<()> {
        if v.ty() != ty {
            return Err(malformed(
                inv,
                format!(
                    "a {} value for local `{}` of type {ty}",
                    v.ty(),
                    self.kernel.local_name(local)
                ),
            ));
        }
        let slot = (inv as usize)
            .checked_mul(self.n_locals)
            .and_then(|b| b.checked_add(local.0 as usize))
            .filter(|_| (local.0 as usize) < self.n_locals)
            .and_then(|i| self.locals.get_mut(i));
        match slot {
            Some(s) => {
                *s = Some(v);
                Ok(())
            }
            None => Err(malformed(inv, format!("unknown local #{}", local.0))),
        }
    }

    pub(super) fn read_local(&self, local: LocalId, inv: u32, out: &mut Value) -> Res<()> {
        let idx = local.0 as usize;
        if idx >= self.n_locals {
            return Err(malformed(inv, format!("unknown local #{}", local.0)));
        }
        match self.locals.get(inv as usize * self.n_locals + idx) {
            Some(Some(v)) => {
                *out = *v;
                Ok(())
            }
            _ => Err(fault(FaultKind::UnsetLocal { inv, local })),
        }
    }
}
