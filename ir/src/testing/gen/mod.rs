//! The generator: a valid random kernel from a stream of choices, and its arguments
//! from a stream of words.
//!
//! Each choice picks one option; an exhausted stream picks the first, simplest option,
//! so a shorter (shrunk) stream gives a smaller kernel. Validity is by construction:
//! every expression is built for the type its context needs, every read local is in
//! scope, constant indices are in bounds and aligned, and what the IR forbids outright
//! (races, reads of unwritten shared memory, divergent barriers) cannot happen:
//!
//! * every invocation writes only its own region of each output buffer
//!   (`global_id * stride + slot`) and of each shared array
//!   (`local_id * SHARED_SLOTS + slot`), and reads only its own regions, input
//!   buffers, and (after a barrier) other invocations' shared regions;
//! * every invocation writes its whole shared region first, before any statement that
//!   may return;
//! * barriers sit at the top level of the body, with no `return` before them; between
//!   the two barriers nobody writes shared memory, so anybody may read any of it.
//!
//! Run-time errors, when the config allows them, come from loads of input buffers and
//! shared memory at unmasked indices (out of bounds or unaligned), stores past the end
//! of every region, unguarded integer divisors and unmasked shift amounts.

use super::values::value_from_words;
use super::{GenConfig, Shape};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

mod expr;
mod layout;

pub(in crate::testing) use layout::Layout;

/// Elements of every input buffer.
const IN_LEN: u32 = 16;
/// Output slots per invocation for stores in the body; the final values of the
/// mutable locals follow (one slot per memory type, rounded up to a multiple of 4 so
/// that every region starts vector-aligned).
const SLOTS: u32 = 16;
/// Shared-array elements per invocation.
const SHARED_SLOTS: u32 = 8;
/// Depth of the expressions statements compute.
const EXPR_DEPTH: u32 = 4;

/// Scalar types in the order a choice of 0, 1, ... picks them: the most common types
/// in real kernels first.
const PREFERENCE: [ScalarType; 8] = [
    ScalarType::F32,
    ScalarType::U32,
    ScalarType::I32,
    ScalarType::Bool,
    ScalarType::F64,
    ScalarType::F16,
    ScalarType::I64,
    ScalarType::Bf16,
];

/// What shared memory the statements being generated may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SharedPhase {
    /// None: the kernel has no shared arrays, or they are not written yet.
    Off,
    /// The invocation's own region, for reading and writing.
    Own,
    /// Any element, for reading only (between two barriers).
    Any,
}

/// The generator's state while it builds one kernel.
pub(super) struct Gen<'a> {
    config: &'a GenConfig,
    layout: &'a Layout,
    choices: &'a [u32],
    pos: usize,
    locals: Vec<LocalDecl>,
    /// Locals readable here (definitely assigned), with their types.
    scope: Vec<(LocalId, Type)>,
    /// One mutable local per memory type, stored at the end.
    mutables: Vec<(LocalId, ScalarType)>,
    shared: SharedPhase,
    /// Whether a `return` may be generated here (not before a barrier).
    returns: bool,
}

impl<'a> Gen<'a> {
    pub(super) fn new(config: &'a GenConfig, layout: &'a Layout, choices: &'a [u32]) -> Self {
        Gen {
            config,
            layout,
            choices,
            pos: 0,
            locals: Vec::new(),
            scope: Vec::new(),
            mutables: Vec::new(),
            shared: SharedPhase::Off,
            returns: config.returns,
        }
    }

    fn raw(&mut self) -> u32 {
        let v = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    fn pick(&mut self, n: u32) -> u32 {
        self.raw() % n.max(1)
    }

    fn pick_of<T: Copy>(&mut self, options: &[T]) -> Option<T> {
        let i = self.pick(options.len() as u32) as usize;
        options.get(i).copied()
    }

    fn scalar_type(&mut self) -> ScalarType {
        let layout = self.layout;
        self.pick_of(&layout.types).unwrap_or(ScalarType::U32)
    }

    fn memory_type(&mut self) -> ScalarType {
        let layout = self.layout;
        self.pick_of(&layout.memory).unwrap_or(ScalarType::U32)
    }

    fn lanes(&mut self) -> u8 {
        if self.pick(2) == 0 {
            2
        } else {
            4
        }
    }

    /// A scalar of `s`, or (a third of the time, with vectors) a vector of it.
    fn maybe_vector(&mut self, s: ScalarType) -> Type {
        if self.config.vectors && self.pick(3) == 2 {
            let lanes = self.lanes();
            Type::vector(s, lanes)
        } else {
            Type::scalar(s)
        }
    }

    fn lit(&mut self, s: ScalarType) -> Scalar {
        let (a, b) = (self.raw(), self.raw());
        value_from_words(s, a, b)
    }

    fn declare(&mut self, ty: Type, mutable: bool) -> LocalId {
        let id = LocalId(self.locals.len() as u32);
        self.locals.push(LocalDecl {
            name: format!("v{}", id.0),
            ty,
            mutable,
        });
        id
    }

    fn locals_of(&self, ty: Type) -> Vec<LocalId> {
        self.scope
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(l, _)| *l)
            .collect()
    }

    // -- the kernel -------------------------------------------------------------------

    /// The whole kernel: mutable locals initialised, shared regions written, the shape's
    /// statements (split by two barriers, sometimes), the mutable locals stored.
    pub(super) fn kernel(mut self, shape: Shape) -> Kernel {
        let layout = self.layout;
        let mut body = Vec::new();
        for &s in &layout.memory {
            let value = self.expr(Type::scalar(s), 1);
            let local = self.declare(Type::scalar(s), true);
            self.mutables.push((local, s));
            self.scope.push((local, Type::scalar(s)));
            body.push(Stmt::Let { local, value });
        }
        let uses_shared = self.config.shared && self.pick(2) == 1;
        if uses_shared {
            body.push(self.shared_init());
            self.shared = SharedPhase::Own;
        }
        if self.config.barriers && self.pick(2) == 1 {
            body.push(Stmt::Barrier);
            if uses_shared {
                self.shared = SharedPhase::Any;
            }
            self.returns = false;
            body.extend(self.shape_body(shape, 4));
            body.push(Stmt::Barrier);
            if uses_shared {
                self.shared = SharedPhase::Own;
            }
            self.returns = self.config.returns;
            body.extend(self.shape_body(shape, 4));
        } else {
            body.extend(self.shape_body(shape, 6));
        }
        for (i, (local, s)) in self.mutables.clone().into_iter().enumerate() {
            let slot = Expr::Lit(Scalar::U32(SLOTS + i as u32));
            body.push(Stmt::Store {
                mem: self.layout.output(s),
                index: self.own_slot(self.layout.stride(), slot),
                value: Expr::Local(local),
            });
        }
        let shared = if uses_shared {
            self.layout
                .memory
                .iter()
                .map(|&s| SharedDecl {
                    name: format!("sh_{s}"),
                    elem: s,
                    len: self.layout.shared_len(),
                    reuses: None,
                })
                .collect()
        } else {
            Vec::new()
        };
        Kernel {
            name: "fuzz".into(),
            workgroup_size: [self.layout.workgroup, 1, 1],
            params: self.layout.params(),
            shared,
            locals: self.locals,
            fragments: Vec::new(),
            body,
        }
    }

    fn shape_body(&mut self, shape: Shape, max_len: u32) -> Block {
        match shape {
            Shape::Expression => {
                let mut body: Block = (0..self.pick(4)).map(|_| self.stmt(0)).collect();
                let ty = self.store_type();
                let value = self.expr(ty, EXPR_DEPTH + 1);
                body.push(self.store_value(ty, value));
                body
            }
            Shape::AccumulatingLoop => {
                let i = self.pick(self.mutables.len() as u32) as usize;
                let acc = self.mutables.get(i).copied();
                vec![self.for_loop(2, acc)]
            }
            Shape::Statements => self.block(3, max_len),
        }
    }

    /// `for k in 0..SHARED_SLOTS { sh_T[local_id * SHARED_SLOTS + k] = ... }` for every
    /// memory type: each invocation writes its whole region before anything can
    /// return, so no read of shared memory finds an unwritten element.
    fn shared_init(&mut self) -> Stmt {
        let k = self.declare(Type::U32, false);
        self.scope.push((k, Type::U32));
        let layout = self.layout;
        let mut body = Vec::new();
        for &s in &layout.memory {
            let index = bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, local_id0(), u32_lit(SHARED_SLOTS)),
                Expr::Local(k),
            );
            body.push(Stmt::Store {
                mem: self.layout.shared(s),
                index,
                value: self.expr(Type::scalar(s), 2),
            });
        }
        self.scope.pop();
        Stmt::For {
            var: k,
            start: u32_lit(0),
            end: u32_lit(SHARED_SLOTS),
            step: 1,
            body,
        }
    }

    // -- statements -------------------------------------------------------------------

    fn block(&mut self, depth: u32, max_len: u32) -> Block {
        let n = self.pick(max_len + 1);
        let scope = self.scope.len();
        let block = (0..n).map(|_| self.stmt(depth)).collect();
        self.scope.truncate(scope);
        block
    }

    fn stmt(&mut self, depth: u32) -> Stmt {
        let kinds = if depth > 0 { 14 } else { 9 };
        match self.pick(kinds) {
            0..=2 => {
                let assignable: Vec<(LocalId, Type)> = self
                    .scope
                    .iter()
                    .copied()
                    .filter(|(l, _)| self.locals.get(l.0 as usize).is_some_and(|d| d.mutable))
                    .collect();
                match self.pick_of(&assignable) {
                    Some((local, ty)) => Stmt::Assign {
                        local,
                        value: self.expr(ty, EXPR_DEPTH),
                    },
                    None => self.store(),
                }
            }
            3 | 4 => {
                let s = self.scalar_type();
                let ty = self.maybe_vector(s);
                let value = self.expr(ty, EXPR_DEPTH);
                let mutable = self.pick(4) == 3;
                let local = self.declare(ty, mutable);
                self.scope.push((local, ty));
                Stmt::Let { local, value }
            }
            5 | 6 => self.store(),
            7 if self.returns && self.pick(8) == 0 => Stmt::Return,
            8 if self.returns && self.pick(3) == 0 => Stmt::If {
                cond: self.expr(Type::BOOL, 1),
                then_body: vec![Stmt::Return],
                else_body: vec![],
            },
            7 | 8 => {
                let s = self.memory_type();
                let value = self.expr(Type::scalar(s), EXPR_DEPTH);
                self.store_value(Type::scalar(s), value)
            }
            9..=11 => Stmt::If {
                cond: self.expr(Type::BOOL, 3),
                then_body: self.block(depth - 1, 3),
                else_body: self.block(depth - 1, 2),
            },
            _ => self.for_loop(depth, None),
        }
    }

    fn store_type(&mut self) -> Type {
        let s = self.memory_type();
        self.maybe_vector(s)
    }

    fn store(&mut self) -> Stmt {
        let ty = self.store_type();
        let value = self.expr(ty, EXPR_DEPTH);
        self.store_value(ty, value)
    }

    /// Stores `value` into this invocation's region of the output of its type (or of
    /// the shared array, in the shared phase that allows it), sometimes past the end
    /// of every region.
    fn store_value(&mut self, ty: Type, value: Expr) -> Stmt {
        let lanes = ty.lanes as u32;
        let narrow = self.layout.narrow_of(ty.scalar);
        if lanes <= 2 && !narrow.is_empty() && self.pick(3) == 0 {
            if let Some(n) = self.pick_of(&narrow) {
                return Stmt::Store {
                    mem: self.layout.narrow_output(n),
                    index: self.narrow_slot(lanes),
                    value,
                };
            }
        }
        if self.shared == SharedPhase::Own && self.pick(4) == 3 {
            let slot = self.slot(SHARED_SLOTS, lanes);
            return Stmt::Store {
                mem: self.layout.shared(ty.scalar),
                index: bin(
                    BinaryOp::Add,
                    bin(BinaryOp::Mul, local_id0(), u32_lit(SHARED_SLOTS)),
                    slot,
                ),
                value,
            };
        }
        let slot = self.slot(SLOTS, lanes);
        let mut index = self.own_slot(self.layout.stride(), slot);
        if self.config.runtime_errors && self.pick(32) == 31 {
            index = bin(BinaryOp::Add, index, u32_lit(self.layout.out_len()));
        }
        Stmt::Store {
            mem: self.layout.output(ty.scalar),
            index,
            value,
        }
    }

    /// `global_id * stride + slot`.
    fn own_slot(&self, stride: u32, slot: Expr) -> Expr {
        bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, global_id0(), u32_lit(stride)),
            slot,
        )
    }

    /// An element of this invocation's part of a narrow output (see
    /// `Layout::narrow_out_len`): interleaved with its neighbours' for scalars, in a
    /// region of its own for 2-lane vectors.
    fn narrow_slot(&mut self, lanes: u32) -> Expr {
        let slot = self.slot(SLOTS, lanes);
        if lanes == 1 {
            let invocations = u32_lit(self.layout.invocations());
            return bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, slot, invocations),
                global_id0(),
            );
        }
        let region = self.own_slot(SLOTS, slot);
        bin(
            BinaryOp::Add,
            region,
            u32_lit(SLOTS * self.layout.invocations()),
        )
    }

    /// A slot below `n` aligned to `lanes`: a literal, or a computed index masked.
    fn slot(&mut self, n: u32, lanes: u32) -> Expr {
        if self.pick(3) < 2 {
            u32_lit(self.pick(n / lanes) * lanes)
        } else {
            let e = self.expr(Type::U32, 1);
            bin(BinaryOp::And, e, u32_lit((n - 1) & !(lanes - 1)))
        }
    }

    /// A loop, mostly with literal bounds; `body_first` is assigned first in the body.
    fn for_loop(&mut self, depth: u32, body_first: Option<(LocalId, ScalarType)>) -> Stmt {
        let ty = if self.pick(2) == 0 {
            Type::U32
        } else {
            Type::I32
        };
        let var = self.declare(ty, false);
        let (start, end) = match self.pick(8) {
            // Bounds near the type's maximum: the counter must not wrap.
            0 => {
                let back = self.pick(12) as i64;
                let max = if ty == Type::U32 {
                    u32::MAX as i64
                } else {
                    i32::MAX as i64
                };
                (max - back, max - self.pick(3) as i64)
            }
            // Too many trips to unroll.
            1 => {
                let s = self.pick(4) as i64 - 2;
                (s, s + 9 + self.pick(8) as i64)
            }
            _ => {
                let s = self.pick(6) as i64 - 2;
                (s, s + self.pick(9) as i64 - 1)
            }
        };
        let bound = |v: i64| {
            if ty == Type::U32 {
                u32_lit(v.max(0) as u32)
            } else {
                Expr::Lit(Scalar::I32(v as i32))
            }
        };
        let (start, end) = (bound(start), bound(end));
        // Sometimes a bound computed at run time (not unrolled, not propagated into).
        let end = if self.pick(6) == 0 {
            let e = self.expr(ty, 1);
            let seven = if ty == Type::U32 {
                u32_lit(7)
            } else {
                Expr::Lit(Scalar::I32(7))
            };
            bin(BinaryOp::And, e, seven)
        } else {
            end
        };
        let step = 1 + self.pick(3);
        let scope = self.scope.len();
        self.scope.push((var, ty));
        let mut body = Vec::new();
        if let Some((acc, s)) = body_first {
            body.push(Stmt::Assign {
                local: acc,
                value: self.expr(Type::scalar(s), EXPR_DEPTH),
            });
        }
        body.extend(self.block(depth.saturating_sub(1), 3));
        self.scope.truncate(scope);
        Stmt::For {
            var,
            start,
            end,
            step,
            body,
        }
    }
}

fn lit_of(ty: Type, s: Scalar) -> Expr {
    if ty.lanes == 1 {
        Expr::Lit(s)
    } else {
        Expr::Splat {
            lanes: ty.lanes,
            arg: Box::new(Expr::Lit(s)),
        }
    }
}

fn u32_lit(v: u32) -> Expr {
    Expr::Lit(Scalar::U32(v))
}

fn bin(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
}

fn global_id0() -> Expr {
    Expr::Builtin {
        builtin: Builtin::GlobalId,
        axis: 0,
    }
}

fn local_id0() -> Expr {
    Expr::Builtin {
        builtin: Builtin::LocalId,
        axis: 0,
    }
}
