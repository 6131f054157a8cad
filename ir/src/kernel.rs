//! The kernel IR: one launch of a compute kernel.
//!
//! A [`Kernel`] holds declaration tables (parameters, shared arrays, locals) and a
//! structured body. Expressions are trees: they are pure apart from loads, which may
//! only fail (out of bounds), never change state. Shapes are constants: every buffer
//! has a static length, so index arithmetic folds and bounds are checkable.

use crate::async_copy::AsyncCopyOp;
use crate::fragment::{FragmentDecl, FragmentId, FragmentOp};
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;

/// Index into [`Kernel::params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ParamId(pub u32);

/// Index into [`Kernel::shared`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SharedId(pub u32);

/// Index into [`Kernel::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LocalId(pub u32);

/// How a kernel may touch a storage buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn can_read(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub fn can_write(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read_write",
        }
    }
}

/// A kernel parameter, bound in declaration order (binding `i` is parameter `i`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Param {
    /// A storage buffer of `len` elements of `elem`.
    Buffer {
        name: String,
        elem: ScalarType,
        len: u64,
        access: Access,
    },
    /// A uniform scalar, the same for every invocation.
    Scalar { name: String, ty: ScalarType },
}

impl Param {
    pub fn name(&self) -> &str {
        match self {
            Param::Buffer { name, .. } | Param::Scalar { name, .. } => name,
        }
    }
}

/// A workgroup-shared array with a static length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedDecl {
    pub name: String,
    pub elem: ScalarType,
    pub len: u32,
    /// The earlier array whose bytes this one reuses (one that reuses none), so that
    /// a kernel whose phases need different arrays (a pipeline's staged tiles, then
    /// its epilogue's rows) takes the largest of them, not their sum. The arrays of
    /// one such set are used one at a time, a barrier between the last access to one
    /// and the first to another, and an array's elements are undefined again when
    /// the set switches to it (the interpreter reports a read of them, or a switch
    /// without the barrier). Targets that cannot alias arrays (WGSL, SPIR-V) give
    /// each its own: more memory, the same meaning. Absent from the JSON when `None`,
    /// so kernels without it keep their stable hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuses: Option<SharedId>,
}

/// A function-local variable. Immutable locals are written only by `Let` (a loop body
/// may re-run its `Let`s); mutable ones also by `Assign`. Loop counters are immutable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocalDecl {
    pub name: String,
    pub ty: Type,
    pub mutable: bool,
}

/// Which memory a load or store addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    /// A storage-buffer parameter.
    Buffer(ParamId),
    /// A workgroup-shared array.
    Shared(SharedId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    /// Invocation id within the whole dispatch: `workgroup_id * workgroup_size + local_id`.
    GlobalId,
    /// Invocation id within its workgroup.
    LocalId,
    /// Workgroup id within the dispatch grid.
    WorkgroupId,
    /// Number of workgroups in the dispatch grid.
    NumWorkgroups,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        match self {
            Builtin::GlobalId => "global_id",
            Builtin::LocalId => "local_id",
            Builtin::WorkgroupId => "workgroup_id",
            Builtin::NumWorkgroups => "num_workgroups",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    /// Arithmetic negation (wrapping for integers).
    Neg,
    /// Logical not for bool, bitwise not for integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Float division, or integer division truncating toward zero.
    Div,
    /// Remainder with the sign of the dividend (C, WGSL, PTX `rem`).
    Rem,
    /// Bitwise and for integers, logical and for bool (both sides evaluated).
    And,
    Or,
    Xor,
    /// Shifts: the amount is a u32 below the bit width of the left operand.
    Shl,
    /// Arithmetic shift for signed, logical for unsigned.
    Shr,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor => "^",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// Math functions. All are lane-wise; all but `Abs`, `Min` and `Max` take floats only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MathFn {
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Tanh,
    Erf,
    Sin,
    Cos,
    /// `pow(x, y)` for floats.
    Pow,
    Floor,
    Ceil,
    /// Round half to even (WGSL `round`, PTX `cvt.rni`).
    Round,
    Abs,
    /// IEEE minNum for floats: a NaN operand is ignored unless both are NaN.
    Min,
    Max,
    /// `fma(a, b, c) = a * b + c` with one rounding.
    Fma,
}

impl MathFn {
    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow | MathFn::Min | MathFn::Max => 2,
            MathFn::Fma => 3,
            _ => 1,
        }
    }

    /// Whether integers are accepted as well as floats.
    pub fn accepts_int(self) -> bool {
        matches!(self, MathFn::Abs | MathFn::Min | MathFn::Max)
    }

    pub fn name(self) -> &'static str {
        match self {
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Tanh => "tanh",
            MathFn::Erf => "erf",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Pow => "pow",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Round => "round",
            MathFn::Abs => "abs",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::Fma => "fma",
        }
    }

    pub const ALL: [MathFn; 18] = [
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Tanh,
        MathFn::Erf,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Pow,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Round,
        MathFn::Abs,
        MathFn::Min,
        MathFn::Max,
        MathFn::Fma,
    ];
}

/// A pure expression tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Lit(Scalar),
    Local(LocalId),
    /// A uniform scalar parameter.
    Param(ParamId),
    /// A builtin id along axis 0 (x), 1 (y) or 2 (z); type u32.
    Builtin {
        builtin: Builtin,
        axis: u8,
    },
    /// `lanes` consecutive elements starting at `index` (a u32). A vector load of
    /// `lanes` > 1 requires `index` to be a multiple of `lanes`.
    Load {
        mem: Memory,
        index: Box<Expr>,
        lanes: u8,
    },
    Unary {
        op: UnaryOp,
        arg: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Cmp {
        op: CmpOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Math {
        func: MathFn,
        args: Vec<Expr>,
    },
    /// `cond ? on_true : on_false`, lane-wise when `cond` is a bool vector. Both arms
    /// are evaluated.
    Select {
        cond: Box<Expr>,
        on_true: Box<Expr>,
        on_false: Box<Expr>,
    },
    /// Value conversion, lane-wise: float to int saturates (NaN -> 0), int to float
    /// rounds to nearest even, float to float rounds to nearest even, to bool tests `!= 0`.
    Cast {
        to: ScalarType,
        arg: Box<Expr>,
    },
    /// Reinterprets the bits as another scalar type of the same width.
    Bitcast {
        to: ScalarType,
        arg: Box<Expr>,
    },
    /// Builds a vector from 2 or 4 scalars of one type.
    Vector(Vec<Expr>),
    /// A vector of `lanes` copies of a scalar.
    Splat {
        lanes: u8,
        arg: Box<Expr>,
    },
    /// One lane of a vector.
    Extract {
        arg: Box<Expr>,
        lane: u8,
    },
}

/// A sequence of statements.
pub type Block = Vec<Stmt>;

/// A statement of the structured body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stmt {
    /// Gives a local its value (immutable or mutable).
    Let { local: LocalId, value: Expr },
    /// Overwrites a mutable local.
    Assign { local: LocalId, value: Expr },
    /// Writes `value` (a scalar or a vector of the memory's element type) at `index`.
    Store {
        mem: Memory,
        index: Expr,
        value: Expr,
    },
    If {
        cond: Expr,
        then_body: Block,
        else_body: Block,
    },
    /// `for var in start..end by step`: `start` and `end` are evaluated once, `var`
    /// (an immutable i32 or u32 local) takes `start, start+step, ...` while `< end`.
    For {
        var: LocalId,
        start: Expr,
        end: Expr,
        step: u32,
        body: Block,
    },
    /// Ends this invocation.
    Return,
    /// Workgroup execution and shared-memory barrier. Must be in uniform control flow.
    Barrier,
    /// A statement on matrix fragments ([`crate::fragment`]), executed by every warp.
    /// Must be in uniform control flow.
    Fragment(FragmentOp),
    /// An asynchronous copy into shared memory ([`crate::async_copy`]), executed by
    /// each invocation on its own.
    AsyncCopy(AsyncCopyOp),
}

/// One compute kernel, i.e. one launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub workgroup_size: [u32; 3],
    pub params: Vec<Param>,
    pub shared: Vec<SharedDecl>,
    pub locals: Vec<LocalDecl>,
    /// Matrix fragments ([`crate::fragment`]); absent from the JSON when empty, so
    /// kernels without them keep their stable hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fragments: Vec<FragmentDecl>,
    pub body: Block,
}

impl Kernel {
    pub fn param(&self, id: ParamId) -> Option<&Param> {
        self.params.get(id.0 as usize)
    }
    pub fn shared_decl(&self, id: SharedId) -> Option<&SharedDecl> {
        self.shared.get(id.0 as usize)
    }
    pub fn local(&self, id: LocalId) -> Option<&LocalDecl> {
        self.locals.get(id.0 as usize)
    }
    pub fn fragment(&self, id: FragmentId) -> Option<&FragmentDecl> {
        self.fragments.get(id.0 as usize)
    }

    pub fn fragment_name(&self, id: FragmentId) -> String {
        self.fragment(id)
            .map_or_else(|| format!("fragment#{}", id.0), |f| f.name.clone())
    }

    /// Whether the body has a fragment statement.
    pub fn uses_fragments(&self) -> bool {
        !self.fragments.is_empty() || self.any_stmt(&|s| matches!(s, Stmt::Fragment(_)))
    }

    /// Whether the body has an asynchronous-copy statement.
    pub fn uses_async_copies(&self) -> bool {
        self.any_stmt(&|s| matches!(s, Stmt::AsyncCopy(_)))
    }

    /// Whether some statement of the body, nested ones included, satisfies `pred`.
    pub fn any_stmt(&self, pred: &impl Fn(&Stmt) -> bool) -> bool {
        any_stmt_in(&self.body, pred)
    }

    /// For each local, whether its only write is one `Let` statement (no `Assign`, not
    /// a loop counter, not bound by a fragment map). In a valid kernel every read of
    /// such a local comes after that statement on every path (definite assignment),
    /// and a loop re-running the statement rebinds it before any read in the same
    /// iteration: an emitter may bind the local to the value the statement computed
    /// instead of giving it a slot.
    pub fn locals_bound_once(&self) -> Vec<bool> {
        let mut lets = vec![0u32; self.locals.len()];
        let mut other = vec![false; self.locals.len()];
        let mut mark = |ids: &mut dyn Iterator<Item = LocalId>| {
            for id in ids {
                if let Some(o) = other.get_mut(id.0 as usize) {
                    *o = true;
                }
            }
        };
        for_each_stmt_in(&self.body, &mut |stmt| match stmt {
            Stmt::Let { local, .. } => {
                if let Some(n) = lets.get_mut(local.0 as usize) {
                    *n += 1;
                }
            }
            Stmt::Assign { local, .. } => mark(&mut std::iter::once(*local)),
            Stmt::For { var, .. } => mark(&mut std::iter::once(*var)),
            Stmt::Fragment(FragmentOp::Map(m)) => mark(
                &mut [m.row, m.col]
                    .into_iter()
                    .chain(m.args.iter().map(|a| a.local)),
            ),
            Stmt::Fragment(_)
            | Stmt::Store { .. }
            | Stmt::If { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::AsyncCopy(_) => {}
        });
        lets.iter()
            .zip(&other)
            .map(|(&n, &o)| n == 1 && !o)
            .collect()
    }

    /// The array whose bytes `id` takes: the one it reuses, else itself.
    pub fn shared_storage(&self, id: SharedId) -> SharedId {
        self.shared_decl(id).and_then(|d| d.reuses).unwrap_or(id)
    }

    /// Where each shared array lies in one block of workgroup memory, in declaration
    /// order, each array that reuses none at a multiple of `align` bytes after the
    /// one before and each that reuses another at that one's offset; and the block's
    /// size (a multiple of `align`, each set as large as its largest array).
    pub fn shared_layout(&self, align: u64) -> (Vec<u64>, u64) {
        let bytes = |d: &SharedDecl| d.len as u64 * d.elem.size_bytes() as u64;
        let mut extent = vec![0u64; self.shared.len()];
        for (i, d) in self.shared.iter().enumerate() {
            let owner = self.shared_storage(SharedId(i as u32)).0 as usize;
            if let Some(e) = extent.get_mut(owner) {
                *e = (*e).max(bytes(d));
            }
        }
        let mut offsets = Vec::with_capacity(self.shared.len());
        let mut at = 0u64;
        for (i, d) in self.shared.iter().enumerate() {
            match d.reuses {
                Some(owner) => offsets.push(offsets.get(owner.0 as usize).copied().unwrap_or(0)),
                None => {
                    offsets.push(at);
                    at = (at + extent[i]).next_multiple_of(align.max(1));
                }
            }
        }
        (offsets, at)
    }

    /// Invocations per workgroup.
    pub fn invocations_per_workgroup(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| d as u64).product()
    }

    /// Bytes of workgroup-shared memory the kernel declares (a set of arrays that
    /// reuse one's bytes counts as its largest).
    pub fn shared_bytes(&self) -> u64 {
        self.shared_layout(1).1
    }

    /// The element type and length of a memory, if it exists and is addressable.
    pub fn memory(&self, mem: Memory) -> Option<(ScalarType, u64)> {
        match mem {
            Memory::Buffer(p) => match self.param(p)? {
                Param::Buffer { elem, len, .. } => Some((*elem, *len)),
                Param::Scalar { .. } => None,
            },
            Memory::Shared(s) => self.shared_decl(s).map(|d| (d.elem, d.len as u64)),
        }
    }

    pub fn memory_name(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(p) => self
                .param(p)
                .map_or_else(|| format!("param#{}", p.0), |p| p.name().to_string()),
            Memory::Shared(s) => self
                .shared_decl(s)
                .map_or_else(|| format!("shared#{}", s.0), |d| d.name.clone()),
        }
    }

    pub fn local_name(&self, id: LocalId) -> String {
        self.local(id)
            .map_or_else(|| format!("local#{}", id.0), |l| l.name.clone())
    }
}

impl Expr {
    pub fn lit(s: Scalar) -> Expr {
        Expr::Lit(s)
    }

    /// The direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Lit(_) | Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } => vec![],
            Expr::Load { index, .. } => vec![index],
            Expr::Unary { arg, .. }
            | Expr::Cast { arg, .. }
            | Expr::Bitcast { arg, .. }
            | Expr::Splat { arg, .. }
            | Expr::Extract { arg, .. } => vec![arg],
            Expr::Binary { lhs, rhs, .. } | Expr::Cmp { lhs, rhs, .. } => vec![lhs, rhs],
            Expr::Math { args, .. } | Expr::Vector(args) => args.iter().collect(),
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => vec![cond, on_true, on_false],
        }
    }

    /// The direct sub-expressions, mutably, in evaluation order.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Lit(_) | Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } => vec![],
            Expr::Load { index, .. } => vec![index],
            Expr::Unary { arg, .. }
            | Expr::Cast { arg, .. }
            | Expr::Bitcast { arg, .. }
            | Expr::Splat { arg, .. }
            | Expr::Extract { arg, .. } => vec![arg],
            Expr::Binary { lhs, rhs, .. } | Expr::Cmp { lhs, rhs, .. } => vec![lhs, rhs],
            Expr::Math { args, .. } | Expr::Vector(args) => args.iter_mut().collect(),
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => vec![cond, on_true, on_false],
        }
    }

    /// Whether the expression contains a load (and so may fail at run time).
    pub fn has_load(&self) -> bool {
        matches!(self, Expr::Load { .. }) || self.children().iter().any(|c| c.has_load())
    }

    /// Whether the expression reads local `id`.
    pub fn reads_local(&self, id: LocalId) -> bool {
        matches!(self, Expr::Local(l) if *l == id)
            || self.children().iter().any(|c| c.reads_local(id))
    }

    pub fn as_lit(&self) -> Option<Scalar> {
        match self {
            Expr::Lit(s) => Some(*s),
            _ => None,
        }
    }

    /// Number of nodes in the tree.
    pub fn size(&self) -> usize {
        1 + self.children().iter().map(|c| c.size()).sum::<usize>()
    }
}

impl Stmt {
    /// Locals this statement (and its nested blocks) may write.
    pub fn written_locals(&self, out: &mut Vec<LocalId>) {
        match self {
            Stmt::Let { local, .. } | Stmt::Assign { local, .. } => out.push(*local),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                for s in then_body.iter().chain(else_body) {
                    s.written_locals(out);
                }
            }
            Stmt::For { var, body, .. } => {
                out.push(*var);
                for s in body {
                    s.written_locals(out);
                }
            }
            Stmt::Fragment(FragmentOp::Map(m)) => {
                out.extend([m.row, m.col]);
                out.extend(m.args.iter().map(|a| a.local));
                for s in &m.body {
                    s.written_locals(out);
                }
            }
            Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_)
            | Stmt::AsyncCopy(_) => {}
        }
    }

    /// Number of statement and expression nodes, nested blocks included.
    pub fn size(&self) -> usize {
        1 + match self {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => value.size(),
            Stmt::Store { index, value, .. } => index.size() + value.size(),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => cond.size() + block_size(then_body) + block_size(else_body),
            Stmt::For {
                start, end, body, ..
            } => start.size() + end.size() + block_size(body),
            Stmt::Return | Stmt::Barrier => 0,
            Stmt::Fragment(op) => {
                op.exprs().iter().map(|(_, e)| e.size()).sum::<usize>()
                    + op.body().map_or(0, |b| block_size(b))
            }
            Stmt::AsyncCopy(op) => op.exprs().iter().map(|(_, e)| e.size()).sum(),
        }
    }
}

pub fn block_size(block: &[Stmt]) -> usize {
    block.iter().map(Stmt::size).sum()
}

/// Calls `visit` on every statement of `block`, nested ones included (a map's body
/// too), each before the statements nested in it, until it breaks.
pub fn try_for_each_stmt_in<B>(
    block: &[Stmt],
    visit: &mut impl FnMut(&Stmt) -> ControlFlow<B>,
) -> ControlFlow<B> {
    for s in block {
        visit(s)?;
        match s {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                try_for_each_stmt_in(then_body, visit)?;
                try_for_each_stmt_in(else_body, visit)?;
            }
            Stmt::For { body, .. } => try_for_each_stmt_in(body, visit)?,
            Stmt::Fragment(op) => {
                if let Some(b) = op.body() {
                    try_for_each_stmt_in(b, visit)?;
                }
            }
            Stmt::Let { .. }
            | Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::AsyncCopy(_) => {}
        }
    }
    ControlFlow::Continue(())
}

/// Calls `visit` on every statement of `block` ([`try_for_each_stmt_in`]'s order).
pub fn for_each_stmt_in(block: &[Stmt], visit: &mut impl FnMut(&Stmt)) {
    let _ = try_for_each_stmt_in::<()>(block, &mut |s| {
        visit(s);
        ControlFlow::Continue(())
    });
}

/// Whether some statement of `block`, nested ones included (a map's body too),
/// satisfies `pred` (the walk stops at the first).
pub fn any_stmt_in(block: &[Stmt], pred: &impl Fn(&Stmt) -> bool) -> bool {
    try_for_each_stmt_in(block, &mut |s| match pred(s) {
        true => ControlFlow::Break(()),
        false => ControlFlow::Continue(()),
    })
    .is_break()
}
