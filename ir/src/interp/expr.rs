//! Expressions and memory accesses of one invocation.

use super::exec::{Binding, Ctx};
use super::fault::{
    expr_seg, fault, malformed, race, At, FaultKind, Res,
    Seg::{Indexed, Name},
};
use crate::eval::{self, EvalError, Value};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// A placeholder value, overwritten before it is read.
#[inline]
fn blank() -> Value {
    Value::scalar(Scalar::Bool(false))
}

impl Ctx<'_, '_> {
    // -- expressions ----------------------------------------------------------------
    //
    // Values are written through `out` rather than returned inside a `Result`: moving a
    // 72-byte `Value` in and out of `Result`s dominated the interpreter's time.

    /// Evaluates `e` for invocation `inv`.
    pub(super) fn eval(&mut self, e: &Expr, inv: u32) -> Res<Value> {
        let mut v = blank();
        self.eval_into(e, inv, &mut v)?;
        Ok(v)
    }

    /// Evaluates `e` for invocation `inv` into `out`.
    fn eval_into(&mut self, e: &Expr, inv: u32, out: &mut Value) -> Res<()> {
        match self.eval_node(e, inv, out) {
            Ok(()) => Ok(()),
            Err(mut f) => {
                if let Some(seg) = expr_seg(e) {
                    f.segs.push(seg);
                }
                Err(f)
            }
        }
    }

    fn eval_node(&mut self, e: &Expr, inv: u32, out: &mut Value) -> Res<()> {
        let put = |r: Result<Value, EvalError>, out: &mut Value| match r {
            Ok(v) => {
                *out = v;
                Ok(())
            }
            Err(source) => Err(fault(FaultKind::Eval { inv, source })),
        };
        match e {
            Expr::Lit(s) => {
                *out = Value::scalar(*s);
                Ok(())
            }
            Expr::Local(id) => self.read_local(*id, inv, out),
            Expr::Param(p) => match self.bindings.get(p.0 as usize) {
                Some(Binding::Scalar(s)) => {
                    *out = Value::scalar(*s);
                    Ok(())
                }
                _ => Err(malformed(
                    inv,
                    format!("parameter #{} is not a scalar parameter", p.0),
                )),
            },
            Expr::Builtin { builtin, axis } => {
                let a = *axis as usize;
                if a > 2 {
                    return Err(malformed(inv, format!("builtin axis {axis}")));
                }
                let lid = self.local_ids.get(inv as usize).map_or(0, |l| l[a]);
                let v = match builtin {
                    Builtin::LocalId => lid,
                    Builtin::WorkgroupId => self.wg_id[a],
                    Builtin::NumWorkgroups => self.grid[a],
                    // Fits: `check_limits` bounds grid * workgroup size by 2^32.
                    Builtin::GlobalId => self.wg_id[a]
                        .wrapping_mul(self.wg_size[a])
                        .wrapping_add(lid),
                };
                *out = Value::scalar(Scalar::U32(v));
                Ok(())
            }
            Expr::Load { mem, index, lanes } => {
                self.eval_into(index, inv, out).at(Name("index"))?;
                let i = as_index(out, inv).at(Name("index"))?;
                self.load(*mem, i, *lanes, inv, out)
            }
            Expr::Unary { op, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::unary(*op, *out), out)
            }
            Expr::Binary { op, lhs, rhs } => {
                let mut b = blank();
                self.eval_into(lhs, inv, out).at(Name("lhs"))?;
                self.eval_into(rhs, inv, &mut b).at(Name("rhs"))?;
                put(eval::binary(*op, *out, b), out)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let mut b = blank();
                self.eval_into(lhs, inv, out).at(Name("lhs"))?;
                self.eval_into(rhs, inv, &mut b).at(Name("rhs"))?;
                put(eval::cmp(*op, *out, b), out)
            }
            Expr::Math { func, args } => {
                if args.is_empty() || args.len() > 3 {
                    return Err(malformed(
                        inv,
                        format!("`{}` with {} arguments", func.name(), args.len()),
                    ));
                }
                let mut vals = [blank(); 3];
                for (i, a) in args.iter().enumerate() {
                    self.eval_into(a, inv, &mut vals[i])
                        .at(Indexed("args", i))?;
                }
                put(eval::math(*func, &vals[..args.len()]), out)
            }
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => {
                let (mut c, mut f) = (blank(), blank());
                self.eval_into(cond, inv, &mut c).at(Name("cond"))?;
                self.eval_into(on_true, inv, out).at(Name("on_true"))?;
                self.eval_into(on_false, inv, &mut f).at(Name("on_false"))?;
                if c.lane_count() != 1 && c.lane_count() != out.lane_count() {
                    return Err(malformed(
                        inv,
                        format!("select condition {} for {} arms", c.ty(), out.ty()),
                    ));
                }
                put(eval::select(c, *out, f), out)
            }
            Expr::Cast { to, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                *out = eval::cast(*to, *out);
                Ok(())
            }
            Expr::Bitcast { to, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::bitcast(*to, *out), out)
            }
            Expr::Vector(items) => {
                if !(items.len() == 2 || items.len() == 4) {
                    return Err(malformed(inv, format!("vector of {} lanes", items.len())));
                }
                let mut lanes = [Scalar::Bool(false); 4];
                for (i, item) in items.iter().enumerate() {
                    self.eval_into(item, inv, out).at(Indexed("items", i))?;
                    match out.as_scalar() {
                        Some(s) if i == 0 || s.ty() == lanes[0].ty() => lanes[i] = s,
                        _ => {
                            return Err(malformed(
                                inv,
                                format!("vector lane {i} is a {}", out.ty()),
                            ))
                            .at(Indexed("items", i))
                        }
                    }
                }
                *out = Value::from_lanes(&lanes[..items.len()]);
                Ok(())
            }
            Expr::Splat { lanes, arg } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                if !(*lanes == 2 || *lanes == 4) || out.lane_count() != 1 {
                    return Err(malformed(
                        inv,
                        format!("splat of a {} to {lanes} lanes", out.ty()),
                    ));
                }
                *out = eval::splat(*lanes, *out);
                Ok(())
            }
            Expr::Extract { arg, lane } => {
                self.eval_into(arg, inv, out).at(Name("arg"))?;
                put(eval::extract(*out, *lane), out)
            }
        }
    }

    // -- memory ---------------------------------------------------------------------

    /// Checks lane count, bounds and alignment of an access; returns the first element.
    /// Bounds come first: an access both out of bounds and unaligned is out of bounds,
    /// as the compiled targets report it too.
    fn check_access(&self, mem: Memory, index: u32, lanes: u8, len: usize, inv: u32) -> Res<usize> {
        if !Type::is_valid_lanes(lanes) {
            return Err(malformed(inv, format!("access of {lanes} lanes")));
        }
        let index64 = index as u64;
        if index64 + lanes as u64 > len as u64 {
            return Err(fault(FaultKind::OutOfBounds {
                inv,
                mem,
                index: index64,
                lanes,
                len: len as u64,
            }));
        }
        if lanes > 1 && index % lanes as u32 != 0 {
            return Err(fault(FaultKind::Unaligned {
                inv,
                mem,
                index: index64,
                lanes,
            }));
        }
        Ok(index as usize)
    }

    fn load(&mut self, mem: Memory, index: u32, lanes: u8, inv: u32, out: &mut Value) -> Res<()> {
        self.load_as(mem, index, lanes, inv, inv, out)
    }

    /// [`Self::load`] recorded in the access history as by `who` (an invocation, or
    /// a warp: `track::WARP_ACCESS`); errors name `inv`.
    pub(super) fn load_as(
        &mut self,
        mem: Memory,
        index: u32,
        lanes: u8,
        inv: u32,
        who: u32,
        out: &mut Value,
    ) -> Res<()> {
        let mut out_lanes = [Scalar::Bool(false); 4];
        let (epoch, wg_start) = (self.epoch, self.wg_start);
        match mem {
            Memory::Buffer(p) => {
                let (len, elem) = match self.bindings.get(p.0 as usize) {
                    Some(Binding::Buffer { data, elem, .. }) => (data.len(), *elem),
                    _ => {
                        return Err(malformed(
                            inv,
                            format!("parameter #{} is not a buffer", p.0),
                        ))
                    }
                };
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(Binding::Buffer { data, track, .. }) = self.bindings.get_mut(p.0 as usize)
                else {
                    return Err(malformed(inv, "buffer binding vanished"));
                };
                for (lane, out) in out_lanes.iter_mut().enumerate().take(lanes as usize) {
                    let i = start + lane;
                    // A narrow element reads as its low bits, whatever the host put there.
                    *out = Scalar::stored(elem, data[i]);
                    if let Some(track) = track {
                        if let Some(c) = track[i].buffer_read(who, epoch, wg_start) {
                            return Err(race(mem, i, c, inv));
                        }
                    }
                }
            }
            Memory::Shared(s) => {
                let len = match self.shared.get(s.0 as usize) {
                    Some(sh) => sh.data.len(),
                    None => return Err(malformed(inv, format!("unknown shared array #{}", s.0))),
                };
                let start = self.check_access(mem, index, lanes, len, inv)?;
                self.check_shared_rules(s, start, lanes as usize, inv)?;
                let Some(sh) = self.shared.get_mut(s.0 as usize) else {
                    return Err(malformed(inv, "shared array vanished"));
                };
                for (lane, out) in out_lanes.iter_mut().enumerate().take(lanes as usize) {
                    let i = start + lane;
                    let t = &mut sh.track[i];
                    if t.write_epoch < wg_start {
                        return Err(fault(FaultKind::Uninit {
                            inv,
                            mem,
                            index: i as u64,
                        }));
                    }
                    if let Some(c) = t.shared_read(who, epoch) {
                        return Err(race(mem, i, c, inv));
                    }
                    *out = sh.data[i];
                }
            }
        }
        *out = Value::from_lanes(&out_lanes[..lanes as usize]);
        Ok(())
    }

    pub(super) fn store(&mut self, mem: Memory, index: u32, value: Value, inv: u32) -> Res<()> {
        self.store_as(mem, index, value, inv, inv)
    }

    /// [`Self::store`] recorded in the access history as by `who`.
    pub(super) fn store_as(
        &mut self,
        mem: Memory,
        index: u32,
        value: Value,
        inv: u32,
        who: u32,
    ) -> Res<()> {
        let lanes = value.lane_count();
        let (epoch, wg_start) = (self.epoch, self.wg_start);
        let vty = value.ty().scalar;
        let mismatch = |elem: ScalarType| {
            malformed(
                inv,
                format!("storing a {} into memory of {elem}", value.ty()),
            )
        };
        match mem {
            Memory::Buffer(p) => {
                let (len, elem) = match self.bindings.get(p.0 as usize) {
                    Some(Binding::Buffer { data, elem, .. }) => (data.len(), *elem),
                    _ => {
                        return Err(malformed(
                            inv,
                            format!("parameter #{} is not a buffer", p.0),
                        ))
                    }
                };
                if vty != elem.value_type() {
                    return Err(mismatch(elem));
                }
                let start = self.check_access(mem, index, lanes, len, inv)?;
                let Some(Binding::Buffer { data, track, .. }) = self.bindings.get_mut(p.0 as usize)
                else {
                    return Err(malformed(inv, "buffer binding vanished"));
                };
                let Some(track) = track else {
                    return Err(malformed(inv, "store to a read-only buffer"));
                };
                for (lane, s) in value.lanes().iter().enumerate() {
                    let i = start + lane;
                    if let Some(c) = track[i].buffer_write(who, epoch, wg_start) {
                        return Err(race(mem, i, c, inv));
                    }
                    data[i] = Scalar::stored(elem, *s);
                }
            }
            Memory::Shared(sid) => {
                let (len, elem) = match self.shared.get(sid.0 as usize) {
                    Some(sh) => (sh.data.len(), sh.elem),
                    None => return Err(malformed(inv, format!("unknown shared array #{}", sid.0))),
                };
                if vty != elem {
                    return Err(mismatch(elem));
                }
                let start = self.check_access(mem, index, lanes, len, inv)?;
                self.check_shared_rules(sid, start, lanes as usize, inv)?;
                let Some(sh) = self.shared.get_mut(sid.0 as usize) else {
                    return Err(malformed(inv, "shared array vanished"));
                };
                for (lane, s) in value.lanes().iter().enumerate() {
                    let i = start + lane;
                    if let Some(c) = sh.track[i].shared_write(who, epoch) {
                        return Err(race(mem, i, c, inv));
                    }
                    sh.data[i] = *s;
                }
            }
        }
        Ok(())
    }
}

pub(super) fn as_index(v: &Value, inv: u32) -> Res<u32> {
    match v.as_scalar() {
        Some(Scalar::U32(i)) => Ok(i),
        _ => Err(malformed(inv, format!("index of type {}, not u32", v.ty()))),
    }
}
