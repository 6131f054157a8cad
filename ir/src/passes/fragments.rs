//! Expansion of matrix fragments into plain per-invocation code, for targets without
//! matrix units (the CPU tiers, WGSL, SPIR-V without cooperative matrices), so that
//! every kernel written with fragments runs everywhere.
//!
//! Each invocation becomes one lane of its group (`lane = flat local id mod G`, `G`
//! the shape's group: 32, or 128 for a warpgroup) and owns `P = m·n / G`
//! consecutive elements of every accumulator of an `m × n × k` shape: row
//! `lane·P / n`, columns `(lane·P mod n) + 0..P` (every shape of [`MMA_KINDS`] has `P`
//! dividing `n`, so they lie in one row). It keeps in mutable
//! locals what its elements need: that row of every `A` fragment (`k` values), those
//! columns of every `B` fragment (`k·P` values) and its accumulator elements (`P`).
//! A load reads exactly those elements from memory (lanes sharing a row read it
//! alike), a store writes the lane's own, and `mma` is the defining `fma` chain per
//! element, so a kernel that runs without error computes bit for bit what the
//! interpreter computes on the original. (One that fails still fails, perhaps at
//! another element or invocation first.)

use super::{rewrite_leaves, with_body};
use crate::builder::{local_id, E};
use crate::fragment::*;
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// The kernel with its fragments replaced by plain locals, loads, stores and `fma`s;
/// a kernel without fragments is returned unchanged.
pub fn expand_fragments(kernel: &Kernel) -> Kernel {
    if !kernel.uses_fragments() {
        return kernel.clone();
    }
    let mut x = Expander {
        kernel: kernel.clone(),
        lanes: Vec::new(),
        geometry: Vec::new(),
        scratch: Vec::new(),
    };
    x.kernel.fragments.clear();
    x.declare_lanes(kernel);
    let mut body = Vec::new();
    for (shape, geometry) in x.geometry.clone() {
        let lane = (flat_local_id(kernel.workgroup_size) % shape.group()).0;
        let lane_id = x.local("fragment_lane", Type::U32, false);
        body.push(Stmt::Let {
            local: lane_id,
            value: lane,
        });
        body.push(Stmt::Let {
            local: geometry.row,
            value: ((local(lane_id) * per_lane(shape)) / shape.n).0,
        });
        body.push(Stmt::Let {
            local: geometry.col,
            value: ((local(lane_id) * per_lane(shape)) % shape.n).0,
        });
    }
    body.extend(x.block(&kernel.body));
    with_body(&x.kernel, body)
}

/// Accumulator elements per lane.
fn per_lane(shape: MmaShape) -> u32 {
    shape.m * shape.n / shape.group()
}

/// Where a lane's elements of one shape lie: its row and first column.
#[derive(Clone, Copy)]
struct Geometry {
    row: LocalId,
    col: LocalId,
}

struct Expander {
    kernel: Kernel,
    /// The locals standing for each fragment, by fragment id (see the module docs
    /// for their order: `A` by `p`, `B` by `p` then column, accumulators by column).
    lanes: Vec<(FragmentDecl, Vec<LocalId>)>,
    geometry: Vec<(MmaShape, Geometry)>,
    /// The shared array, per element type, through which lanes exchange elements
    /// (`reduce_rows`, `convert`).
    scratch: Vec<(ScalarType, SharedId)>,
}

impl Expander {
    fn local(&mut self, name: &str, ty: Type, mutable: bool) -> LocalId {
        let id = LocalId(self.kernel.locals.len() as u32);
        self.kernel.locals.push(LocalDecl {
            name: format!("{name}_{}", id.0),
            ty,
            mutable,
        });
        id
    }

    fn declare_lanes(&mut self, original: &Kernel) {
        for f in &original.fragments {
            let p = per_lane(f.shape);
            let count = match f.role {
                FragmentRole::A => f.shape.k,
                FragmentRole::B => f.shape.k * p,
                FragmentRole::Accumulator => p,
            };
            let ty = Type::scalar(f.elem.value_type());
            let locals = (0..count)
                .map(|i| self.local(&format!("{}_{i}", f.name), ty, true))
                .collect();
            self.lanes.push((f.clone(), locals));
            if !self.geometry.iter().any(|(s, _)| *s == f.shape) {
                let MmaShape { m, n, k } = f.shape;
                let row = self.local(&format!("fragment_row_m{m}n{n}k{k}"), Type::U32, false);
                let col = self.local(&format!("fragment_col_m{m}n{n}k{k}"), Type::U32, false);
                self.geometry.push((f.shape, Geometry { row, col }));
            }
        }
    }

    fn geometry(&self, shape: MmaShape) -> Geometry {
        // Every declared shape has one (declare_lanes).
        self.geometry
            .iter()
            .find(|(s, _)| *s == shape)
            .map(|(_, g)| *g)
            .unwrap_or(Geometry {
                row: LocalId(u32::MAX),
                col: LocalId(u32::MAX),
            })
    }

    fn fragment(&self, id: FragmentId) -> (FragmentDecl, Vec<LocalId>) {
        // The validator checked every id.
        self.lanes.get(id.0 as usize).cloned().unwrap_or_else(|| {
            (
                FragmentDecl {
                    name: String::new(),
                    role: FragmentRole::Accumulator,
                    shape: MmaShape::M16N8K16,
                    elem: ScalarType::F32,
                    in_registers: false,
                },
                Vec::new(),
            )
        })
    }

    fn block(&mut self, block: &[Stmt]) -> Block {
        rewrite_leaves(block, &mut |s, out| match s {
            Stmt::Fragment(op) => self.op(op, out),
            other => out.push(other.clone()),
        })
    }

    /// The `(r, c)` of each of a lane's locals of fragment `decl`.
    fn coordinates(&self, decl: &FragmentDecl) -> Vec<(Expr, Expr)> {
        let g = self.geometry(decl.shape);
        let row = Expr::Local(g.row);
        let p = per_lane(decl.shape);
        let col_at = |j: u32| (local(g.col) + j).0;
        match decl.role {
            FragmentRole::A => (0..decl.shape.k).map(|q| (row.clone(), lit(q))).collect(),
            FragmentRole::B => (0..decl.shape.k)
                .flat_map(|q| (0..p).map(move |j| (q, j)))
                .map(|(q, j)| (lit(q), col_at(j)))
                .collect(),
            FragmentRole::Accumulator => (0..p).map(|j| (row.clone(), col_at(j))).collect(),
        }
    }

    fn op(&mut self, op: &FragmentOp, out: &mut Block) {
        match op {
            FragmentOp::Fill { frag, value } => {
                let (_, locals) = self.fragment(*frag);
                let v = self.local("fill", Type::scalar(self.fragment(*frag).0.elem), false);
                out.push(Stmt::Let {
                    local: v,
                    value: value.clone(),
                });
                for l in locals {
                    out.push(Stmt::Let {
                        local: l,
                        value: Expr::Local(v),
                    });
                }
            }
            FragmentOp::Load {
                frag,
                mem,
                index,
                stride,
                layout,
            } => {
                let (decl, locals) = self.fragment(*frag);
                let (base, stride) = self.address(index, stride, out);
                let stored = self.kernel.memory(*mem).map_or(decl.elem, |(elem, _)| elem);
                for (l, (r, c)) in locals.into_iter().zip(self.coordinates(&decl)) {
                    out.push(Stmt::Let {
                        local: l,
                        value: Expr::Load {
                            mem: *mem,
                            index: Box::new(element((*layout, stored), base, stride, r, c)),
                            lanes: 1,
                        },
                    });
                }
            }
            FragmentOp::Store {
                frag,
                mem,
                index,
                stride,
                layout,
            } => {
                let (decl, locals) = self.fragment(*frag);
                let stored = self.kernel.memory(*mem).map_or(decl.elem, |(elem, _)| elem);
                let to = stored.value_type();
                let (base, stride) = self.address(index, stride, out);
                for (l, (r, c)) in locals.into_iter().zip(self.coordinates(&decl)) {
                    let value = if to == decl.elem {
                        Expr::Local(l)
                    } else {
                        Expr::Cast {
                            to,
                            arg: Box::new(Expr::Local(l)),
                        }
                    };
                    out.push(Stmt::Store {
                        mem: *mem,
                        index: element((*layout, stored), base, stride, r, c),
                        value,
                    });
                }
            }
            FragmentOp::Mma { d, a, b, c } => {
                let (dd, d_locals) = self.fragment(*d);
                let (_, a_locals) = self.fragment(*a);
                let (_, b_locals) = self.fragment(*b);
                let (_, c_locals) = self.fragment(*c);
                let acc = dd.elem;
                let widen = |l: LocalId| Expr::Cast {
                    to: acc,
                    arg: Box::new(Expr::Local(l)),
                };
                let p = per_lane(dd.shape) as usize;
                // Element j of d reads only element j of c, so d may be c.
                for (j, (&dl, &cl)) in d_locals.iter().zip(&c_locals).enumerate() {
                    let mut sum = Expr::Local(cl);
                    for (q, &al) in a_locals.iter().enumerate() {
                        let bl = b_locals.get(q * p + j).copied().unwrap_or(al);
                        sum = Expr::Math {
                            func: MathFn::Fma,
                            args: vec![widen(al), widen(bl), sum],
                        };
                    }
                    out.push(Stmt::Let {
                        local: dl,
                        value: sum,
                    });
                }
            }
            FragmentOp::Map(m) => self.map(m, out),
            FragmentOp::ReduceRows {
                dst,
                srcs,
                reduction,
            } => self.reduce_rows(*dst, srcs, *reduction, out),
            FragmentOp::Convert { dst, srcs, first } => self.convert(*dst, srcs, *first, out),
        }
    }

    /// Per element of the lane: the bound locals, the body, the value. Element `j`
    /// reads only element `j` of each argument, so `dst` may be one.
    fn map(&mut self, m: &FragmentMap, out: &mut Block) {
        let (decl, dst) = self.fragment(m.dst);
        let g = self.geometry(decl.shape);
        let mut args: Vec<(LocalId, Vec<LocalId>)> = Vec::with_capacity(m.args.len());
        for a in &m.args {
            let locals = self.row_values(a.frag, decl.shape, out);
            args.push((a.local, locals));
        }
        for (j, &dl) in dst.iter().enumerate() {
            out.push(Stmt::Let {
                local: m.row,
                value: Expr::Local(g.row),
            });
            out.push(Stmt::Let {
                local: m.col,
                value: (local(g.col) + j as u32).0,
            });
            for (bound, locals) in &args {
                if let Some(&l) = locals.get(j) {
                    out.push(Stmt::Let {
                        local: *bound,
                        value: Expr::Local(l),
                    });
                }
            }
            out.extend(m.body.iter().cloned());
            out.push(Stmt::Let {
                local: dl,
                value: m.value.clone(),
            });
        }
    }

    /// The locals holding `frag`'s elements `(r, c mod n)` for the lane's elements
    /// `(r, c)` of an accumulator of `shape` (same rows: the same lanes hold a row of
    /// both). Of the same width, its own; else read back from shared memory, where
    /// each lane writes its elements.
    fn row_values(&mut self, frag: FragmentId, shape: MmaShape, out: &mut Block) -> Vec<LocalId> {
        let (decl, locals) = self.fragment(frag);
        let width = decl.shape.n;
        if width == shape.n {
            return locals;
        }
        let (own, at) = (self.geometry(decl.shape), self.geometry(shape));
        let group = shape.group();
        let rows = self.invocations() / group * shape.m * width;
        let scratch = self.scratch(decl.elem, rows);
        let flat = flat_local_id(self.kernel.workgroup_size);
        let row = (flat / group) * (shape.m * width) + local(own.row) * width;
        for (j, l) in locals.iter().enumerate() {
            out.push(Stmt::Store {
                mem: scratch,
                index: (row.clone() + local(own.col) + j as u32).0,
                value: Expr::Local(*l),
            });
        }
        out.push(Stmt::Barrier);
        let values: Vec<LocalId> = (0..per_lane(shape))
            .map(|j| {
                let v = self.local("row_value", Type::scalar(decl.elem), false);
                let col = (local(at.col) + j) % width;
                out.push(Stmt::Let {
                    local: v,
                    value: shared_at(scratch, row.clone() + col).0,
                });
                v
            })
            .collect();
        out.push(Stmt::Barrier);
        values
    }

    /// Each lane reduces its run of every source, the runs of a row meet in shared
    /// memory (the lanes of a row are consecutive), and each lane reduces them in
    /// order: [`row_reduction_order`], as the interpreter.
    fn reduce_rows(
        &mut self,
        dst: FragmentId,
        srcs: &[FragmentId],
        reduction: RowReduction,
        out: &mut Block,
    ) {
        let (decl, dst) = self.fragment(dst);
        let combine = |a: Expr, b: Expr| match reduction {
            RowReduction::Max => Expr::Math {
                func: MathFn::Max,
                args: vec![a, b],
            },
            RowReduction::Sum => Expr::Binary {
                op: BinaryOp::Add,
                lhs: Box::new(a),
                rhs: Box::new(b),
            },
        };
        let items: Vec<Expr> = srcs
            .iter()
            .flat_map(|s| self.fragment(*s).1)
            .map(Expr::Local)
            .collect();
        let Some(partial) = items.into_iter().reduce(combine) else {
            return;
        };
        let invocations = self.invocations();
        let scratch = self.scratch(decl.elem, invocations);
        let flat = flat_local_id(self.kernel.workgroup_size);
        out.push(Stmt::Store {
            mem: scratch,
            index: flat.0.clone(),
            value: partial,
        });
        out.push(Stmt::Barrier);
        let per_row = (decl.shape.n / per_lane(decl.shape)).max(1);
        let first = flat.clone() - flat % per_row;
        let runs = (0..per_row).map(|q| shared_at(scratch, first.clone() + q).0);
        let total = self.local("row", Type::scalar(decl.elem), false);
        if let Some(value) = runs.reduce(combine) {
            out.push(Stmt::Let {
                local: total,
                value,
            });
        }
        out.push(Stmt::Barrier);
        for l in dst {
            out.push(Stmt::Let {
                local: l,
                value: Expr::Local(total),
            });
        }
    }

    /// The lanes write their elements of the sources into a group's `m × k` rows in
    /// shared memory; each reads back its row of the `A` fragment, rounded.
    /// Each lane's accumulator elements of the columns taken (`first..first + k` of
    /// the sources side by side) into its group's rows of the scratch, then its `A`
    /// row.
    fn convert(&mut self, dst: FragmentId, srcs: &[FragmentId], first: u32, out: &mut Block) {
        let (decl, a) = self.fragment(dst);
        let Some(src) = srcs.first().map(|s| self.fragment(*s).0) else {
            return;
        };
        let MmaShape { m, k, .. } = decl.shape;
        let n = src.shape.n;
        let group = decl.shape.group();
        let scratch = self.scratch(src.elem, self.invocations() / group * m * k);
        let flat = flat_local_id(self.kernel.workgroup_size);
        let group_rows = (flat / group) * (m * k);
        let g = self.geometry(src.shape);
        for (s, id) in srcs.iter().enumerate() {
            for (j, l) in self.fragment(*id).1.into_iter().enumerate() {
                // The element's column of the taken ones (wrapping below `first`).
                let taken = local(g.col) + (s as u32 * n + j as u32) - first;
                out.push(Stmt::If {
                    cond: taken.clone().lt(k).0,
                    then_body: vec![Stmt::Store {
                        mem: scratch,
                        index: (group_rows.clone() + local(g.row) * k + taken).0,
                        value: Expr::Local(l),
                    }],
                    else_body: Vec::new(),
                });
            }
        }
        out.push(Stmt::Barrier);
        let a_row = group_rows + local(self.geometry(decl.shape).row) * k;
        for (q, l) in a.into_iter().enumerate() {
            out.push(Stmt::Let {
                local: l,
                value: Expr::Cast {
                    to: decl.elem,
                    arg: Box::new(shared_at(scratch, a_row.clone() + q as u32).0),
                },
            });
        }
        out.push(Stmt::Barrier);
    }

    fn invocations(&self) -> u32 {
        self.kernel.workgroup_size.iter().product()
    }

    /// The exchange array of `elem`, at least `len` long.
    fn scratch(&mut self, elem: ScalarType, len: u32) -> Memory {
        if let Some(&(_, id)) = self.scratch.iter().find(|(e, _)| *e == elem) {
            if let Some(d) = self.kernel.shared.get_mut(id.0 as usize) {
                d.len = d.len.max(len);
            }
            return Memory::Shared(id);
        }
        let id = SharedId(self.kernel.shared.len() as u32);
        self.kernel.shared.push(SharedDecl {
            name: format!("fragment_exchange_{elem}"),
            elem,
            len,
            reuses: None,
        });
        self.scratch.push((elem, id));
        Memory::Shared(id)
    }

    /// Binds a load's or store's index and stride once.
    fn address(&mut self, index: &Expr, stride: &Expr, out: &mut Block) -> (LocalId, LocalId) {
        let base = self.local("fragment_index", Type::U32, false);
        out.push(Stmt::Let {
            local: base,
            value: index.clone(),
        });
        let step = self.local("fragment_stride", Type::U32, false);
        out.push(Stmt::Let {
            local: step,
            value: stride.clone(),
        });
        (base, step)
    }
}

/// Element `(r, c)`'s index in memory of `stored` ([`element_index_expr`]).
fn element(
    (layout, stored): (FragmentLayout, ScalarType),
    base: LocalId,
    stride: LocalId,
    r: Expr,
    c: Expr,
) -> Expr {
    element_index_expr(layout, stored, local(base), local(stride), E(r), E(c)).0
}

fn local(id: LocalId) -> E {
    E(Expr::Local(id))
}

/// `x + y·X + z·X·Y`.
fn flat_local_id([x, y, _]: [u32; 3]) -> E {
    local_id(0) + local_id(1) * x + local_id(2) * x.wrapping_mul(y)
}

fn lit(v: u32) -> Expr {
    Expr::Lit(Scalar::U32(v))
}

fn shared_at(mem: Memory, index: E) -> E {
    E(Expr::Load {
        mem,
        index: Box::new(index.0),
        lanes: 1,
    })
}
