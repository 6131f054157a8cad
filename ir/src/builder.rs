//! A builder DSL in which a kernel reads like its math.
//!
//! ```
//! use kernelc_ir::builder::*;
//! use kernelc_ir::{Access, ScalarType::F32};
//!
//! let n = 1000u32;
//! let mut k = KernelBuilder::new("vec_add", [64, 1, 1]);
//! let a = k.buffer("a", F32, n as u64, Access::Read);
//! let b = k.buffer("b", F32, n as u64, Access::Read);
//! let c = k.buffer("c", F32, n as u64, Access::Write);
//! let kernel = k
//!     .build(|f| {
//!         let i = f.let_("i", global_id(0));
//!         f.if_(i.clone().lt(n), |f| f.store(c, i.clone(), a.at(i.clone()) + b.at(i)));
//!     })
//!     .unwrap();
//! assert_eq!(kernel.params.len(), 3);
//! ```

use crate::async_copy::{AsyncCopyOp, CopyStart};
use crate::fragment::{
    FragmentDecl, FragmentId, FragmentLayout, FragmentMap, FragmentOp, FragmentRole, MapArg,
    MmaShape, RowReduction,
};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use crate::validate::{type_of, validate, ValidationError};
use half::{bf16, f16};
use std::collections::HashSet;
use std::ops;

/// An expression handle. Operators build IR; nothing is evaluated.
#[derive(Clone, Debug)]
pub struct E(pub Expr);

impl E {
    pub fn expr(&self) -> &Expr {
        &self.0
    }
    pub fn into_expr(self) -> Expr {
        self.0
    }

    fn cmp(self, op: CmpOp, rhs: impl Into<E>) -> E {
        E(Expr::Cmp {
            op,
            lhs: Box::new(self.0),
            rhs: Box::new(rhs.into().0),
        })
    }
    pub fn lt(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Lt, rhs)
    }
    pub fn le(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Le, rhs)
    }
    pub fn gt(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Gt, rhs)
    }
    pub fn ge(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Ge, rhs)
    }
    pub fn eq(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Eq, rhs)
    }
    pub fn ne(self, rhs: impl Into<E>) -> E {
        self.cmp(CmpOp::Ne, rhs)
    }

    fn math(func: MathFn, args: Vec<E>) -> E {
        E(Expr::Math {
            func,
            args: args.into_iter().map(|a| a.0).collect(),
        })
    }
    pub fn exp(self) -> E {
        E::math(MathFn::Exp, vec![self])
    }
    pub fn exp2(self) -> E {
        E::math(MathFn::Exp2, vec![self])
    }
    pub fn log(self) -> E {
        E::math(MathFn::Log, vec![self])
    }
    pub fn log2(self) -> E {
        E::math(MathFn::Log2, vec![self])
    }
    pub fn sqrt(self) -> E {
        E::math(MathFn::Sqrt, vec![self])
    }
    pub fn rsqrt(self) -> E {
        E::math(MathFn::Rsqrt, vec![self])
    }
    pub fn tanh(self) -> E {
        E::math(MathFn::Tanh, vec![self])
    }
    pub fn erf(self) -> E {
        E::math(MathFn::Erf, vec![self])
    }
    pub fn sin(self) -> E {
        E::math(MathFn::Sin, vec![self])
    }
    pub fn cos(self) -> E {
        E::math(MathFn::Cos, vec![self])
    }
    pub fn pow(self, y: impl Into<E>) -> E {
        E::math(MathFn::Pow, vec![self, y.into()])
    }
    pub fn floor(self) -> E {
        E::math(MathFn::Floor, vec![self])
    }
    pub fn ceil(self) -> E {
        E::math(MathFn::Ceil, vec![self])
    }
    pub fn round(self) -> E {
        E::math(MathFn::Round, vec![self])
    }
    pub fn abs(self) -> E {
        E::math(MathFn::Abs, vec![self])
    }
    pub fn min(self, y: impl Into<E>) -> E {
        E::math(MathFn::Min, vec![self, y.into()])
    }
    pub fn max(self, y: impl Into<E>) -> E {
        E::math(MathFn::Max, vec![self, y.into()])
    }
    /// `self * b + c` with one rounding.
    pub fn fma(self, b: impl Into<E>, c: impl Into<E>) -> E {
        E::math(MathFn::Fma, vec![self, b.into(), c.into()])
    }

    pub fn cast(self, to: ScalarType) -> E {
        E(Expr::Cast {
            to,
            arg: Box::new(self.0),
        })
    }
    pub fn bitcast(self, to: ScalarType) -> E {
        E(Expr::Bitcast {
            to,
            arg: Box::new(self.0),
        })
    }
    /// `self ? on_true : on_false`.
    pub fn select(self, on_true: impl Into<E>, on_false: impl Into<E>) -> E {
        E(Expr::Select {
            cond: Box::new(self.0),
            on_true: Box::new(on_true.into().0),
            on_false: Box::new(on_false.into().0),
        })
    }
    pub fn splat(self, lanes: u8) -> E {
        E(Expr::Splat {
            lanes,
            arg: Box::new(self.0),
        })
    }
    pub fn lane(self, lane: u8) -> E {
        E(Expr::Extract {
            arg: Box::new(self.0),
            lane,
        })
    }
}

/// A vector of 2 or 4 lanes from scalars.
pub fn vector(items: impl IntoIterator<Item = E>) -> E {
    E(Expr::Vector(items.into_iter().map(|e| e.0).collect()))
}

fn builtin(builtin: Builtin, axis: u8) -> E {
    E(Expr::Builtin { builtin, axis })
}
/// Invocation id in the dispatch along `axis`.
pub fn global_id(axis: u8) -> E {
    builtin(Builtin::GlobalId, axis)
}
/// Invocation id in its workgroup along `axis`.
pub fn local_id(axis: u8) -> E {
    builtin(Builtin::LocalId, axis)
}
pub fn workgroup_id(axis: u8) -> E {
    builtin(Builtin::WorkgroupId, axis)
}
pub fn num_workgroups(axis: u8) -> E {
    builtin(Builtin::NumWorkgroups, axis)
}

/// A literal of a given type from an f64 (see [`Scalar::from_f64`]).
pub fn lit(ty: ScalarType, v: f64) -> E {
    E(Expr::Lit(Scalar::from_f64(ty, v)))
}

macro_rules! literal_from {
    ($($t:ty => $ctor:expr),* $(,)?) => {$(
        impl From<$t> for E {
            fn from(v: $t) -> E {
                let ctor: fn($t) -> Scalar = $ctor;
                E(Expr::Lit(ctor(v)))
            }
        }
    )*};
}
literal_from!(
    bool => Scalar::Bool,
    i32 => Scalar::I32,
    u32 => Scalar::U32,
    i64 => Scalar::I64,
    f16 => Scalar::f16,
    bf16 => Scalar::bf16,
    f32 => Scalar::f32,
    f64 => Scalar::f64,
);

impl From<&E> for E {
    fn from(e: &E) -> E {
        e.clone()
    }
}

macro_rules! binary_ops {
    ($($trait:ident $method:ident => $op:ident),* $(,)?) => {$(
        impl<R: Into<E>> ops::$trait<R> for E {
            type Output = E;
            fn $method(self, rhs: R) -> E {
                E(Expr::Binary { op: BinaryOp::$op, lhs: Box::new(self.0), rhs: Box::new(rhs.into().0) })
            }
        }
        impl<R: Into<E>> ops::$trait<R> for &E {
            type Output = E;
            fn $method(self, rhs: R) -> E {
                ops::$trait::$method(self.clone(), rhs)
            }
        }
        binary_ops!(@literal_lhs $trait $method => $op; f32, f64, u32, i32, i64);
    )*};
    (@literal_lhs $trait:ident $method:ident => $op:ident; $($lit:ty),*) => {$(
        impl ops::$trait<E> for $lit {
            type Output = E;
            fn $method(self, rhs: E) -> E {
                ops::$trait::$method(E::from(self), rhs)
            }
        }
    )*};
}
binary_ops!(
    Add add => Add,
    Sub sub => Sub,
    Mul mul => Mul,
    Div div => Div,
    Rem rem => Rem,
    BitAnd bitand => And,
    BitOr bitor => Or,
    BitXor bitxor => Xor,
    Shl shl => Shl,
    Shr shr => Shr,
);

impl ops::Neg for E {
    type Output = E;
    fn neg(self) -> E {
        E(Expr::Unary {
            op: UnaryOp::Neg,
            arg: Box::new(self.0),
        })
    }
}

impl ops::Not for E {
    type Output = E;
    fn not(self) -> E {
        E(Expr::Unary {
            op: UnaryOp::Not,
            arg: Box::new(self.0),
        })
    }
}

/// A buffer or shared array handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mem(pub Memory);

impl Mem {
    /// The element at `index`.
    pub fn at(self, index: impl Into<E>) -> E {
        self.load(index, 1)
    }
    /// `lanes` consecutive elements from `index` (which must be a multiple of `lanes`).
    pub fn load(self, index: impl Into<E>, lanes: u8) -> E {
        E(Expr::Load {
            mem: self.0,
            index: Box::new(index.into().0),
            lanes,
        })
    }
}

/// A mutable local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var(pub LocalId);

impl Var {
    pub fn get(self) -> E {
        E(Expr::Local(self.0))
    }
}

impl From<Var> for E {
    fn from(v: Var) -> E {
        v.get()
    }
}

/// Declares a kernel's parameters and shared arrays, then builds its body.
pub struct KernelBuilder {
    kernel: Kernel,
}

impl KernelBuilder {
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        KernelBuilder {
            kernel: Kernel {
                name: name.into(),
                workgroup_size,
                params: Vec::new(),
                shared: Vec::new(),
                locals: Vec::new(),
                fragments: Vec::new(),
                body: Vec::new(),
            },
        }
    }

    fn next_param(&self) -> ParamId {
        ParamId(self.kernel.params.len() as u32)
    }

    /// A storage buffer of `len` elements (bound at the next binding).
    pub fn buffer(
        &mut self,
        name: impl Into<String>,
        elem: ScalarType,
        len: u64,
        access: Access,
    ) -> Mem {
        let id = self.next_param();
        self.kernel.params.push(Param::Buffer {
            name: name.into(),
            elem,
            len,
            access,
        });
        Mem(Memory::Buffer(id))
    }

    /// A uniform scalar parameter.
    pub fn scalar(&mut self, name: impl Into<String>, ty: ScalarType) -> E {
        let id = self.next_param();
        self.kernel.params.push(Param::Scalar {
            name: name.into(),
            ty,
        });
        E(Expr::Param(id))
    }

    /// A workgroup-shared array.
    pub fn shared(&mut self, name: impl Into<String>, elem: ScalarType, len: u32) -> Mem {
        let id = SharedId(self.kernel.shared.len() as u32);
        self.kernel.shared.push(SharedDecl {
            name: name.into(),
            elem,
            len,
            reuses: None,
        });
        Mem(Memory::Shared(id))
    }

    /// A workgroup-shared array in the bytes of `owner` (a shared array from
    /// [`KernelBuilder::shared`]), used in other phases of the kernel
    /// ([`SharedDecl::reuses`]).
    pub fn shared_reusing(
        &mut self,
        name: impl Into<String>,
        elem: ScalarType,
        len: u32,
        owner: Mem,
    ) -> Mem {
        let id = SharedId(self.kernel.shared.len() as u32);
        let reuses = match owner.0 {
            Memory::Shared(s) => s,
            // A buffer owns no shared bytes: the validator reports an unknown array.
            Memory::Buffer(_) => SharedId(u32::MAX),
        };
        self.kernel.shared.push(SharedDecl {
            name: name.into(),
            elem,
            len,
            reuses: Some(reuses),
        });
        Mem(Memory::Shared(id))
    }

    /// Builds the body with `f`, then validates the kernel.
    pub fn build(self, f: impl FnOnce(&mut Body)) -> Result<Kernel, ValidationError> {
        let mut body = Body {
            names: self.kernel.locals.iter().map(|l| l.name.clone()).collect(),
            kernel: self.kernel,
            blocks: vec![Vec::new()],
            error: None,
        };
        f(&mut body);
        let mut kernel = body.kernel;
        kernel.body = body.blocks.pop().unwrap_or_default();
        let checked = validate(&kernel);
        if let Some(e) = body.error {
            // `e` was found typing an expression on its own, so its path starts at that
            // expression; the validator reports the same error with the statement path.
            return Err(match checked {
                Err(full) if full.kind == e.kind => full,
                _ => e,
            });
        }
        checked?;
        Ok(kernel)
    }
}

/// The statement builder handed to body closures.
pub struct Body {
    kernel: Kernel,
    /// Innermost block last; the outermost is the kernel body.
    blocks: Vec<Block>,
    names: HashSet<String>,
    error: Option<ValidationError>,
}

impl Body {
    fn push(&mut self, stmt: Stmt) {
        if let Some(block) = self.blocks.last_mut() {
            block.push(stmt);
        }
    }

    /// A fresh local name: `name`, or `name_1`, `name_2`, ... if taken.
    fn unique_name(&mut self, name: &str) -> String {
        let mut candidate = name.to_string();
        let mut n = 1;
        while self.names.contains(&candidate) {
            candidate = format!("{name}_{n}");
            n += 1;
        }
        self.names.insert(candidate.clone());
        candidate
    }

    fn declare(&mut self, name: &str, ty: Type, mutable: bool) -> LocalId {
        let id = LocalId(self.kernel.locals.len() as u32);
        let name = self.unique_name(name);
        self.kernel.locals.push(LocalDecl { name, ty, mutable });
        id
    }

    /// The type of `e` here; a type error is kept and reported by `build`.
    pub fn type_of(&mut self, e: &E) -> Type {
        match type_of(&self.kernel, &e.0) {
            Ok(t) => t,
            Err(err) => {
                self.error.get_or_insert(err);
                Type::F32
            }
        }
    }

    /// Binds `value` to a new immutable local and returns it as an expression.
    pub fn let_(&mut self, name: &str, value: impl Into<E>) -> E {
        let value = value.into();
        let ty = self.type_of(&value);
        let id = self.declare(name, ty, false);
        self.push(Stmt::Let {
            local: id,
            value: value.0,
        });
        E(Expr::Local(id))
    }

    /// A new mutable local initialised to `value`.
    pub fn var(&mut self, name: &str, value: impl Into<E>) -> Var {
        let value = value.into();
        let ty = self.type_of(&value);
        let id = self.declare(name, ty, true);
        self.push(Stmt::Let {
            local: id,
            value: value.0,
        });
        Var(id)
    }

    pub fn assign(&mut self, var: Var, value: impl Into<E>) {
        self.push(Stmt::Assign {
            local: var.0,
            value: value.into().0,
        });
    }

    pub fn store(&mut self, mem: Mem, index: impl Into<E>, value: impl Into<E>) {
        self.push(Stmt::Store {
            mem: mem.0,
            index: index.into().0,
            value: value.into().0,
        });
    }

    fn nested(&mut self, f: impl FnOnce(&mut Body)) -> Block {
        self.blocks.push(Vec::new());
        f(self);
        self.blocks.pop().unwrap_or_default()
    }

    pub fn if_(&mut self, cond: impl Into<E>, then: impl FnOnce(&mut Body)) {
        self.if_else(cond, then, |_| {});
    }

    pub fn if_else(
        &mut self,
        cond: impl Into<E>,
        then: impl FnOnce(&mut Body),
        otherwise: impl FnOnce(&mut Body),
    ) {
        let cond = cond.into().0;
        let then_body = self.nested(then);
        let else_body = self.nested(otherwise);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
    }

    /// `for name in start..end by step { body(i) }`; the counter's type is `start`'s.
    pub fn for_(
        &mut self,
        name: &str,
        start: impl Into<E>,
        end: impl Into<E>,
        step: u32,
        body: impl FnOnce(&mut Body, E),
    ) {
        let start = start.into();
        let ty = self.type_of(&start);
        let var = self.declare(name, ty, false);
        let block = self.nested(|b| body(b, E(Expr::Local(var))));
        self.push(Stmt::For {
            var,
            start: start.0,
            end: end.into().0,
            step,
            body: block,
        });
    }

    pub fn ret(&mut self) {
        self.push(Stmt::Return);
    }

    pub fn barrier(&mut self) {
        self.push(Stmt::Barrier);
    }

    /// Declares a matrix fragment ([`crate::fragment`]) with a fresh name.
    pub fn fragment(
        &mut self,
        name: &str,
        role: FragmentRole,
        shape: MmaShape,
        elem: ScalarType,
    ) -> FragmentId {
        let id = FragmentId(self.kernel.fragments.len() as u32);
        let taken: HashSet<&str> = self
            .kernel
            .fragments
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        let mut unique = name.to_string();
        let mut n = 1;
        while taken.contains(unique.as_str()) {
            unique = format!("{name}_{n}");
            n += 1;
        }
        self.kernel.fragments.push(FragmentDecl {
            name: unique,
            role,
            shape,
            elem,
            in_registers: false,
        });
        id
    }

    /// A warpgroup `A` fragment held in registers ([`FragmentDecl::in_registers`]),
    /// filled by [`Body::convert_fragments_from`].
    pub fn fragment_in_registers(
        &mut self,
        name: &str,
        shape: MmaShape,
        elem: ScalarType,
    ) -> FragmentId {
        let id = self.fragment(name, FragmentRole::A, shape, elem);
        if let Some(decl) = self.kernel.fragments.last_mut() {
            decl.in_registers = true;
        }
        id
    }

    /// Every element of accumulator `frag` becomes `value`.
    pub fn fill_fragment(&mut self, frag: FragmentId, value: impl Into<E>) {
        self.push(Stmt::Fragment(FragmentOp::Fill {
            frag,
            value: value.into().0,
        }));
    }

    /// Loads `frag` from `mem` at `index`, `stride` apart along `layout`.
    pub fn load_fragment(
        &mut self,
        frag: FragmentId,
        mem: Mem,
        index: impl Into<E>,
        stride: impl Into<E>,
        layout: FragmentLayout,
    ) {
        let (index, stride) = (index.into().0, stride.into().0);
        self.push(Stmt::Fragment(FragmentOp::Load {
            frag,
            mem: mem.0,
            index,
            stride,
            layout,
        }));
    }

    /// Stores accumulator `frag` to `mem` at `index`, `stride` apart along `layout`.
    pub fn store_fragment(
        &mut self,
        frag: FragmentId,
        mem: Mem,
        index: impl Into<E>,
        stride: impl Into<E>,
        layout: FragmentLayout,
    ) {
        let (index, stride) = (index.into().0, stride.into().0);
        self.push(Stmt::Fragment(FragmentOp::Store {
            frag,
            mem: mem.0,
            index,
            stride,
            layout,
        }));
    }

    /// `d = a·b + c`.
    pub fn mma(&mut self, d: FragmentId, a: FragmentId, b: FragmentId, c: FragmentId) {
        self.push(Stmt::Fragment(FragmentOp::Mma { d, a, b, c }));
    }

    /// `dst[r][c] = f(row, col, args' elements (r, c))` for every element
    /// ([`crate::fragment::FragmentMap`]); `f` may add statements (the map's body)
    /// before returning the value.
    pub fn map_fragment(
        &mut self,
        dst: FragmentId,
        args: &[FragmentId],
        f: impl FnOnce(&mut Body, E, E, &[E]) -> E,
    ) {
        let row = self.declare("row", Type::U32, false);
        let col = self.declare("col", Type::U32, false);
        let args: Vec<MapArg> = args
            .iter()
            .map(|&frag| {
                let elem = self
                    .kernel
                    .fragment(frag)
                    .map_or(ScalarType::F32, |d| d.elem);
                let name = self.kernel.fragment_name(frag);
                MapArg {
                    local: self.declare(&format!("{name}_e"), Type::scalar(elem), false),
                    frag,
                }
            })
            .collect();
        let elements: Vec<E> = args.iter().map(|a| E(Expr::Local(a.local))).collect();
        let mut value = E(Expr::Lit(Scalar::U32(0)));
        let body = self.nested(|b| {
            value = f(b, E(Expr::Local(row)), E(Expr::Local(col)), &elements);
        });
        self.push(Stmt::Fragment(FragmentOp::Map(FragmentMap {
            dst,
            row,
            col,
            args,
            body,
            value: value.0,
        })));
    }

    /// Every element of row `r` of accumulator `dst` becomes the `reduction` of row
    /// `r` of all of `srcs`.
    pub fn reduce_rows(&mut self, dst: FragmentId, srcs: &[FragmentId], reduction: RowReduction) {
        self.push(Stmt::Fragment(FragmentOp::ReduceRows {
            dst,
            srcs: srcs.to_vec(),
            reduction,
        }));
    }

    /// `A` fragment `dst` from the accumulators `srcs` side by side, rounded.
    pub fn convert_fragments(&mut self, dst: FragmentId, srcs: &[FragmentId]) {
        self.convert_fragments_from(dst, srcs, 0);
    }

    /// `A` fragment `dst` from the columns `first..` of the accumulators `srcs` side
    /// by side, rounded ([`FragmentOp::Convert`]).
    pub fn convert_fragments_from(&mut self, dst: FragmentId, srcs: &[FragmentId], first: u32) {
        self.push(Stmt::Fragment(FragmentOp::Convert {
            dst,
            srcs: srcs.to_vec(),
            first,
        }));
    }

    /// Starts copying `len` elements of the read-only buffer `src` at `src_index`
    /// into the shared array `dst` at `dst_index`, zeros where `valid` is false
    /// ([`crate::async_copy`]).
    pub fn copy_start(
        &mut self,
        (dst, dst_index): (Mem, impl Into<E>),
        (src, src_index): (Mem, impl Into<E>),
        len: u8,
        valid: impl Into<E>,
    ) {
        let (Memory::Shared(dst), Memory::Buffer(src)) = (dst.0, src.0) else {
            self.error.get_or_insert(ValidationError {
                kernel: self.kernel.name.clone(),
                path: crate::validate::NodePath::root("copy_start"),
                kind: crate::validate::ValidationErrorKind::BadAsyncCopy(
                    "a copy goes from a buffer into a shared array".into(),
                ),
            });
            return;
        };
        self.push(Stmt::AsyncCopy(AsyncCopyOp::Start(CopyStart {
            dst,
            dst_index: dst_index.into().0,
            src,
            src_index: src_index.into().0,
            len,
            valid: valid.into().0,
        })));
    }

    /// Closes this invocation's group of started copies.
    pub fn copy_commit(&mut self) {
        self.push(Stmt::AsyncCopy(AsyncCopyOp::Commit));
    }

    /// Waits until at most `pending` of this invocation's committed copy groups are
    /// unfinished.
    pub fn copy_wait(&mut self, pending: u32) {
        self.push(Stmt::AsyncCopy(AsyncCopyOp::Wait { pending }));
    }
}
