//! Rotary position embedding, NeoX half-split, on `x: [batch, seq, heads, head_dim]`.
//!
//! One launch; an item is a pair `(row, k)` with `row = (b·seq + s)·heads + h` and
//! `k < head_dim/2`, and writes both halves of its rotation:
//!
//! ```text
//! y[row, k]     = x[row, k] · cos[p, k] − x[row, k+H] · sin[p, k]
//! y[row, k+H]   = x[row, k] · sin[p, k] + x[row, k+H] · cos[p, k]      p = positions[s]
//! ```
//!
//! Neighbouring invocations take neighbouring `k`, so both halves of `x` and `y` and
//! the `cos`/`sin` rows are walked contiguously (coalesced); items are
//! `vector_width`-lane vectors when `H` is a multiple of it. Each of `x`, `cos`, `sin`
//! is read once per element; the position is resolved branch-free (out of range or
//! negative reads `cos = sin = 0`) and the table address clamped, so no load is out of
//! bounds.

use super::math::{compute_type, Num};
use super::movement::resolve_index;
use super::schedule::plan_1d;
use super::{Binding, Launch, LowerError, Plan, TargetCaps};
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::Access;

pub fn rope(spec: &RopeSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Rope(spec.clone());
    let half = spec.head_dim / 2;
    let rows = spec.batch * spec.seq * spec.heads;
    let w = caps.vector_width as usize;
    let lanes = if w > 1 && half % w == 0 { w as u8 } else { 1 };
    let items = rows * half;
    let grid = plan_1d((items / lanes as usize) as u64, caps, 1)?;
    let ty = compute_type(spec.dtype);
    let n = Num { ty, lanes };
    let x_len = (rows * spec.head_dim) as u64;
    let table_len = (spec.max_positions * half) as u64;

    let mut k = KernelBuilder::new(op.name(), grid.workgroup_size());
    let xm = k.buffer("x", spec.dtype, x_len, Access::Read);
    let cm = k.buffer("cos", spec.dtype, table_len, Access::Read);
    let sm = k.buffer("sin", spec.dtype, table_len, Access::Read);
    let pm = k.buffer("positions", spec.index_dtype, spec.seq as u64, Access::Read);
    let ym = k.buffer("y", spec.dtype, x_len, Access::Write);
    let (h32, heads, seq) = (half as u32, spec.heads as u32, spec.seq as u32);
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, item| {
            let pair = if lanes == 1 {
                item
            } else {
                f.let_("pair", item * lanes as u32)
            };
            let kk = f.let_("k", pair.clone() % h32);
            let row = f.let_("row", pair / h32);
            let s = match (spec.seq, spec.heads) {
                (1, _) => E::from(0u32),
                (_, 1) => row.clone() % seq,
                _ => (row.clone() / heads) % seq,
            };
            let (valid, p) =
                resolve_index(f, pm.at(s), spec.index_dtype, spec.max_positions, false);
            let t = f.let_("t", p * h32 + kk.clone());
            let zero = n.lit(0.0);
            let c = f.let_(
                "c",
                valid
                    .clone()
                    .select(n.load(cm, spec.dtype, t.clone()), zero.clone()),
            );
            let sn = f.let_("sn", valid.select(n.load(sm, spec.dtype, t), zero));
            let lo = f.let_("lo", row * (2 * h32) + kk);
            let hi = f.let_("hi", lo.clone() + h32);
            let x1 = f.let_("x1", n.load(xm, spec.dtype, lo.clone()));
            let x2 = f.let_("x2", n.load(xm, spec.dtype, hi.clone()));
            let y1 = x1.clone() * c.clone() - x2.clone() * sn.clone();
            let y2 = x1 * sn + x2 * c;
            f.store(ym, lo, n.narrow(y1, spec.dtype));
            f.store(ym, hi, n.narrow(y2, spec.dtype));
        });
    })?;
    Ok(Plan::single(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![
            Binding::Input(0),
            Binding::Input(1),
            Binding::Input(2),
            Binding::Input(3),
            Binding::Output(0),
        ],
    }))
}
