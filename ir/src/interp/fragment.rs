//! Fragment statements: each warp of the workgroup holds its own value of every
//! fragment, the whole matrix, and runs each statement once (see `crate::fragment`).

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

impl Ctx<'_, '_> {
    pub(super) fn exec_fragment(&mut self, op: &FragmentOp, mask: &[u32]) -> Res<()> {
        if mask.len() != self.n_inv {
            return Err(fault(FaultKind::DivergentFragment {
                arrived: mask.len(),
            }));
        }
        if self.n_inv % WARP as usize != 0 {
            return Err(malformed(
                0,
                format!(
                    "fragments in a workgroup of {} invocations (not whole warps)",
                    self.n_inv
                ),
            ));
        }
        for warp in 0..(self.n_inv / WARP as usize) as u32 {
            self.exec_fragment_in(op, warp)?;
        }
        Ok(())
    }

    fn exec_fragment_in(&mut self, op: &FragmentOp, warp: u32) -> Res<()> {
        let leader = warp * WARP;
        match op {
            FragmentOp::Fill { frag, value } => {
                let value = self
                    .warp_value(value, warp, "fill value")
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
                let (index, stride) = self.warp_address(index, stride, warp)?;
                let decl = self.fragment_decl(*frag, leader)?;
                let (rows, cols) = decl.dims();
                let who = access_identity(decl, warp);
                let mut elements = Vec::with_capacity((rows * cols) as usize);
                let mut v = Value::scalar(Scalar::Bool(false));
                for r in 0..rows {
                    for c in 0..cols {
                        let at = Self::element_index(*layout, index, stride, r, c);
                        self.load_as(*mem, at, 1, leader, who(r * cols + c), &mut v)?;
                        match v.as_scalar() {
                            Some(s) => elements.push(s),
                            None => return Err(malformed(leader, "a vector fragment element")),
                        }
                    }
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
                let (index, stride) = self.warp_address(index, stride, warp)?;
                let decl = self.fragment_decl(*frag, leader)?;
                let cols = decl.dims().1;
                let who = access_identity(decl, warp);
                let Some((elem, _)) = self.kernel.memory(*mem) else {
                    return Err(malformed(leader, "a fragment store to unknown memory"));
                };
                let elements = self.fragment_value(*frag, warp, leader)?.clone();
                for (e, value) in elements.iter().enumerate() {
                    let (r, c) = (e as u32 / cols, e as u32 % cols);
                    let at = Self::element_index(*layout, index, stride, r, c);
                    let value = eval::cast_scalar(elem.value_type(), *value);
                    self.store_as(*mem, at, Value::scalar(value), leader, who(e as u32))?;
                }
                Ok(())
            }
            FragmentOp::Mma { d, a, b, c } => {
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
        }
    }

    /// `e`, which every invocation of `warp` must compute alike.
    fn warp_value(&mut self, e: &Expr, warp: u32, operand: &'static str) -> Res<Value> {
        let leader = warp * WARP;
        let first = self.eval(e, leader)?;
        for inv in leader + 1..leader + WARP {
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

    fn warp_address(&mut self, index: &Expr, stride: &Expr, warp: u32) -> Res<(u32, u32)> {
        let leader = warp * WARP;
        let i = self.warp_value(index, warp, "index").at(Name("index"))?;
        let i = as_index(&i, leader).at(Name("index"))?;
        let s = self.warp_value(stride, warp, "stride").at(Name("stride"))?;
        let s = as_index(&s, leader).at(Name("stride"))?;
        Ok((i, s))
    }

    /// The index of element `(r, c)`, in u32 arithmetic as every index (it wraps).
    fn element_index(layout: FragmentLayout, index: u32, stride: u32, r: u32, c: u32) -> u32 {
        index.wrapping_add(element_offset(layout, stride, r, c))
    }

    fn fragment_decl(&self, id: FragmentId, inv: u32) -> Res<&FragmentDecl> {
        self.kernel
            .fragment(id)
            .ok_or_else(|| malformed(inv, format!("unknown fragment #{}", id.0)))
    }

    fn slot(&self, id: FragmentId, warp: u32) -> usize {
        warp as usize * self.kernel.fragments.len() + id.0 as usize
    }

    fn fragment_value(&self, id: FragmentId, warp: u32, inv: u32) -> Res<&FragmentValue> {
        self.fragment_decl(id, inv)?;
        match self.fragment_values.get(self.slot(id, warp)) {
            Some(Some(v)) => Ok(v),
            _ => Err(fault(FaultKind::UnsetFragment { inv, fragment: id })),
        }
    }

    fn set_fragment(&mut self, id: FragmentId, warp: u32, v: FragmentValue, inv: u32) -> Res<()> {
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

fn show(v: &Value) -> String {
    v.as_scalar()
        .map_or_else(|| format!("{v:?}"), |s| s.to_string())
}

/// The access-history identity of each element (`r·cols + c`) of `decl` for `warp`.
fn access_identity(decl: &FragmentDecl, warp: u32) -> impl Fn(u32) -> u32 {
    let accumulator = decl.role == FragmentRole::Accumulator;
    let shape = MMA_KINDS
        .iter()
        .position(|(s, _, _)| *s == decl.shape)
        .unwrap_or(0) as u32;
    move |element| {
        if accumulator {
            accumulator_access(warp, shape, element)
        } else {
            warp_access(warp)
        }
    }
}
