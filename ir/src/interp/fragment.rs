//! Fragment statements: each group of the workgroup (a warp, or a warpgroup for the
//! `m64` shapes) holds its own value of every fragment, the whole matrix, and runs
//! each statement once (see `crate::fragment`). A group is named by its first warp.

use super::exec::Ctx;
use super::expr::as_index;
use super::fault::{fault, malformed, At, FaultKind, Res, Seg::Name};
use super::track::{accumulator_access, warp_access};
use crate::eval::{self, Value};
use crate::fragment::*;
use crate::kernel::*;
use crate::scalar::Scalar;

/// A warp's value of one fragment: its `rows × cols` elements, row by row.
pub(super) type FragmentValue = Vec<Scalar>;

/// Where a warpgroup's `A` or `B` fragment was loaded from: the matrix units read it
/// at the `mma` or later (until the next barrier), so the interpreter reads it there
/// again.
#[derive(Clone, Copy, Debug)]
pub(super) struct FragmentSource {
    mem: Memory,
    index: u32,
    stride: u32,
    layout: FragmentLayout,
}

/// A warpgroup multiply's operand, read again at the next barrier: the fragment,
/// its group's first warp, its source and the values loaded.
#[derive(Clone, Debug)]
pub(super) struct PendingRead {
    id: FragmentId,
    warp: u32,
    source: FragmentSource,
    loaded: FragmentValue,
}

impl Ctx<'_, '_> {
    /// Every pending warpgroup operand still holds what was loaded (at a barrier or
    /// the end of a workgroup); none is pending after.
    pub(super) fn check_pending_reads(&mut self) -> Res<()> {
        for read in std::mem::take(&mut self.pending_reads) {
            self.compare_source(read.id, read.warp, read.source, &read.loaded)?;
        }
        Ok(())
    }

    pub(super) fn exec_fragment(&mut self, op: &FragmentOp, mask: &[u32]) -> Res<()> {
        if mask.len() != self.n_inv {
            return Err(fault(FaultKind::DivergentFragment {
                arrived: mask.len(),
            }));
        }
        let id = op.first_fragment();
        let group = self.fragment_decl(id, 0)?.group();
        if self.n_inv % group as usize != 0 {
            return Err(malformed(
                0,
                format!(
                    "fragments of groups of {group} in a workgroup of {} invocations",
                    self.n_inv
                ),
            ));
        }
        for first in (0..self.n_inv as u32).step_by(group as usize) {
            self.exec_fragment_in(op, first / WARP, group)?;
        }
        Ok(())
    }

    /// `op` for the group of `group` invocations whose first warp is `warp`.
    fn exec_fragment_in(&mut self, op: &FragmentOp, warp: u32, group: u32) -> Res<()> {
        let leader = warp * WARP;
        match op {
            FragmentOp::Fill { frag, value } => {
                let value = self
                    .warp_value(value, (leader, group), "fill value")
                    .at(Name("value"))?;
                let decl = self.fragment_decl(*frag, leader)?;
                let value = match value.as_scalar() {
                    Some(s) if s.ty() == decl.elem => s,
                    _ => return Err(malformed(leader, "a fill value of another type")),
                };
                let len = decl.len() as usize;
                self.set_fragment(*frag, warp, vec![value; len], leader)
            }
            FragmentOp::Load {
                frag,
                mem,
                index,
                stride,
                layout,
            } => {
                let (index, stride) = self.warp_address(index, stride, (leader, group))?;
                let decl = self.fragment_decl(*frag, leader)?.clone();
                let source = FragmentSource {
                    mem: *mem,
                    index,
                    stride,
                    layout: *layout,
                };
                let read_at_mma = decl.is_read_in_place();
                if read_at_mma && (index % TILE != 0 || stride % TILE != 0) {
                    return Err(fault(FaultKind::MisalignedFragment {
                        inv: leader,
                        fragment: *frag,
                        index,
                        stride,
                    }));
                }
                let elements = self.read_fragment(&decl, source, warp)?;
                let slot = self.slot(*frag, warp);
                if let Some(s) = self.fragment_sources.get_mut(slot) {
                    *s = read_at_mma.then_some(source);
                }
                self.set_fragment(*frag, warp, elements, leader)
            }
            FragmentOp::Store {
                frag,
                mem,
                index,
                stride,
                layout,
            } => {
                let (index, stride) = self.warp_address(index, stride, (leader, group))?;
                let decl = self.fragment_decl(*frag, leader)?;
                let cols = decl.dims().1;
                let who = access_identity(decl, warp);
                let Some((elem, _)) = self.kernel.memory(*mem) else {
                    return Err(malformed(leader, "a fragment store to unknown memory"));
                };
                let elements = self.fragment_value(*frag, warp, leader)?.clone();
                for (e, value) in elements.iter().enumerate() {
                    let (r, c) = (e as u32 / cols, e as u32 % cols);
                    let at = element_index(*layout, elem, index, stride, r, c);
                    let value = eval::cast_scalar(elem.value_type(), *value);
                    self.store_as(*mem, at, Value::scalar(value), leader, who(e as u32))?;
                }
                Ok(())
            }
            FragmentOp::Mma { d, a, b, c } => {
                for (operand, id) in [("a", *a), ("b", *b)] {
                    self.read_source_again(id, warp).at(Name(operand))?;
                }
                let shape = self.fragment_decl(*d, leader)?.shape;
                let acc = self.fragment_decl(*d, leader)?.elem;
                let product = {
                    let av = self.fragment_value(*a, warp, leader).at(Name("a"))?;
                    let bv = self.fragment_value(*b, warp, leader).at(Name("b"))?;
                    let cv = self.fragment_value(*c, warp, leader).at(Name("c"))?;
                    multiply(shape, acc, av, bv, cv).map_err(|what| malformed(leader, what))?
                };
                self.set_fragment(*d, warp, product, leader)
            }
            FragmentOp::Map(m) => self.exec_map(m, warp, group),
            FragmentOp::ReduceRows {
                dst,
                srcs,
                reduction,
            } => self.exec_reduce_rows(*dst, srcs, *reduction, warp),
            FragmentOp::Convert { dst, srcs, first } => self.exec_convert(*dst, srcs, *first, warp),
        }
    }

    /// The elements of `decl` at `source`, row by row, read on behalf of the group
    /// whose first warp is `warp`.
    fn read_fragment(
        &mut self,
        decl: &FragmentDecl,
        source: FragmentSource,
        warp: u32,
    ) -> Res<FragmentValue> {
        let leader = warp * WARP;
        let (rows, cols) = decl.dims();
        let who = access_identity(decl, warp);
        let mut elements = Vec::with_capacity((rows * cols) as usize);
        let mut v = Value::scalar(Scalar::Bool(false));
        for r in 0..rows {
            for c in 0..cols {
                let at = element_index(source.layout, decl.elem, source.index, source.stride, r, c);
                self.load_as(source.mem, at, 1, leader, who(r * cols + c), &mut v)?;
                match v.as_scalar() {
                    Some(s) => elements.push(s),
                    None => return Err(malformed(leader, "a vector fragment element")),
                }
            }
        }
        Ok(elements)
    }

    /// For a warpgroup's `A` or `B` fragment: its source read again (the matrix
    /// units read it at the `mma` or up to the next barrier), which must still hold
    /// the loaded values; pending until that barrier.
    fn read_source_again(&mut self, id: FragmentId, warp: u32) -> Res<()> {
        let leader = warp * WARP;
        let slot = self.slot(id, warp);
        let Some(Some(source)) = self.fragment_sources.get(slot).copied() else {
            return Ok(());
        };
        let loaded = self.fragment_value(id, warp, leader)?.clone();
        self.compare_source(id, warp, source, &loaded)?;
        self.pending_reads.push(PendingRead {
            id,
            warp,
            source,
            loaded,
        });
        Ok(())
    }

    /// `source` still holds `loaded` (else `FragmentSourceChanged`).
    fn compare_source(
        &mut self,
        id: FragmentId,
        warp: u32,
        source: FragmentSource,
        loaded: &FragmentValue,
    ) -> Res<()> {
        let leader = warp * WARP;
        let decl = self.fragment_decl(id, leader)?.clone();
        let now = self.read_fragment(&decl, source, warp)?;
        let same = now.len() == loaded.len()
            && now
                .iter()
                .zip(loaded)
                .all(|(x, y)| x.ty() == y.ty() && x.to_bits() == y.to_bits());
        if same {
            Ok(())
        } else {
            Err(fault(FaultKind::FragmentSourceChanged {
                inv: leader,
                fragment: id,
            }))
        }
    }

    /// `e`, which every invocation of the group of `group` from `leader` must
    /// compute alike.
    fn warp_value(
        &mut self,
        e: &Expr,
        (leader, group): (u32, u32),
        operand: &'static str,
    ) -> Res<Value> {
        let first = self.eval(e, leader)?;
        for inv in leader + 1..leader + group {
            let v = self.eval(e, inv)?;
            if v.lanes() != first.lanes() {
                return Err(fault(FaultKind::FragmentOperandDiffers {
                    inv,
                    operand,
                    expected: show(&first),
                    found: show(&v),
                }));
            }
        }
        Ok(first)
    }

    fn warp_address(
        &mut self,
        index: &Expr,
        stride: &Expr,
        (leader, group): (u32, u32),
    ) -> Res<(u32, u32)> {
        let i = self
            .warp_value(index, (leader, group), "index")
            .at(Name("index"))?;
        let i = as_index(&i, leader).at(Name("index"))?;
        let s = self
            .warp_value(stride, (leader, group), "stride")
            .at(Name("stride"))?;
        let s = as_index(&s, leader).at(Name("stride"))?;
        Ok((i, s))
    }

    pub(super) fn fragment_decl(&self, id: FragmentId, inv: u32) -> Res<&FragmentDecl> {
        self.kernel
            .fragment(id)
            .ok_or_else(|| malformed(inv, format!("unknown fragment #{}", id.0)))
    }

    fn slot(&self, id: FragmentId, warp: u32) -> usize {
        warp as usize * self.kernel.fragments.len() + id.0 as usize
    }

    pub(super) fn fragment_value(
        &self,
        id: FragmentId,
        warp: u32,
        inv: u32,
    ) -> Res<&FragmentValue> {
        self.fragment_decl(id, inv)?;
        match self.fragment_values.get(self.slot(id, warp)) {
            Some(Some(v)) => Ok(v),
            _ => Err(fault(FaultKind::UnsetFragment { inv, fragment: id })),
        }
    }

    pub(super) fn set_fragment(
        &mut self,
        id: FragmentId,
        warp: u32,
        v: FragmentValue,
        inv: u32,
    ) -> Res<()> {
        self.fragment_decl(id, inv)?;
        let slot = self.slot(id, warp);
        match self.fragment_values.get_mut(slot) {
            Some(s) => {
                *s = Some(v);
                Ok(())
            }
            None => Err(malformed(inv, "a fragment slot past the workgroup's")),
        }
    }
}

/// `a·b + c`: each element `c[i][j]` then `fma(a[i][p], b[p][j], ·)` for `p` in order,
/// in `acc` (the operands widened exactly).
pub(super) fn multiply(
    shape: MmaShape,
    acc: crate::ScalarType,
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
) -> Result<FragmentValue, String> {
    let MmaShape { m, n, k } = shape;
    let (m, n, k) = (m as usize, n as usize, k as usize);
    if a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return Err("fragments of the wrong sizes for the multiply".into());
    }
    if let Some((what, i, x)) = first_non_tf32(a, b) {
        return Err(format!(
            "element {i} of the {what} operand of a TF32 multiply, {x:e}, is not a TF32 value \
             (its low 13 significand bits are not zero: round it first)"
        ));
    }
    let widen = |s: Scalar| Value::scalar(eval::cast_scalar(acc, s));
    let mut d = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut sum = Value::scalar(c[i * n + j]);
            for p in 0..k {
                let args = [widen(a[i * k + p]), widen(b[p * n + j]), sum];
                sum = eval::math(MathFn::Fma, &args).map_err(|e| e.to_string())?;
            }
            d.push(sum.as_scalar().ok_or("a vector sum")?);
        }
    }
    Ok(d)
}

/// The first f32 element of `a` or `b` that is no TF32 value (f32 operands of a
/// multiply are TF32: [`MMA_KINDS`]), as `(operand, index, value)`.
fn first_non_tf32(a: &[Scalar], b: &[Scalar]) -> Option<(&'static str, usize, f32)> {
    [("A", a), ("B", b)].into_iter().find_map(|(what, v)| {
        v.iter().enumerate().find_map(|(i, s)| match s {
            Scalar::F32(bits) if !crate::fragment::is_tf32(f32::from_bits(*bits)) => {
                Some((what, i, f32::from_bits(*bits)))
            }
            _ => None,
        })
    })
}

fn show(v: &Value) -> String {
    v.as_scalar()
        .map_or_else(|| format!("{v:?}"), |s| s.to_string())
}

/// The access-history identity of each element (`r·cols + c`) of `decl` for `warp`.
fn access_identity(decl: &FragmentDecl, warp: u32) -> impl Fn(u32) -> u32 {
    let accumulator = decl.role == FragmentRole::Accumulator;
    // The shape's place among the distinct shapes of MMA_KINDS (fewer than 8).
    let mut shapes: Vec<MmaShape> = MMA_KINDS.iter().map(|k| k.0).collect();
    shapes.dedup();
    let shape = shapes.iter().position(|s| *s == decl.shape).unwrap_or(0) as u32;
    move |element| {
        if accumulator {
            accumulator_access(warp, shape, element)
        } else {
            warp_access(warp)
        }
    }
}
