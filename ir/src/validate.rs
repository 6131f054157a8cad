//! The validator: every backend and the interpreter run only validated kernels.
//!
//! It checks declarations, types, memory access modes, definite assignment of locals,
//! constant indices against static lengths, and that barriers sit in uniform control
//! flow. Each error names the offending node by its path from the kernel root, e.g.
//! `body[2].if.then[0].store.value.lhs`.

use crate::async_copy::AsyncCopyOp;
use crate::fragment::*;
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use std::collections::HashSet;
use std::fmt;
use thiserror::Error;

/// Where in a kernel a node sits: `body[1].for.body[0].let.value.rhs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePath(Vec<String>);

impl NodePath {
    pub fn root(name: &str) -> NodePath {
        NodePath(vec![name.to_string()])
    }
    fn push(&mut self, seg: impl Into<String>) {
        self.0.push(seg.into());
    }
    fn pop(&mut self) {
        self.0.pop();
    }
}

impl fmt::Display for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// A validation failure: what is wrong, and where.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("invalid kernel `{kernel}` at {path}: {kind}")]
pub struct ValidationError {
    pub kernel: String,
    pub path: NodePath,
    pub kind: ValidationErrorKind,
}

/// What is wrong with a kernel.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ValidationErrorKind {
    #[error("workgroup size {0:?} has a zero dimension")]
    ZeroWorkgroupSize([u32; 3]),
    #[error("{what} `{name}` has length 0")]
    ZeroLength { what: &'static str, name: String },
    #[error("two declarations are named `{0}`")]
    DuplicateName(String),
    #[error("vector of {0} lanes (only 2 and 4 exist)")]
    BadLanes(u8),
    #[error("unknown local #{0}")]
    UnknownLocal(u32),
    #[error("unknown parameter #{0}")]
    UnknownParam(u32),
    #[error("unknown shared array #{0}")]
    UnknownShared(u32),
    #[error("parameter `{0}` is a buffer, not a scalar: load from it")]
    BufferUsedAsScalar(String),
    #[error("parameter `{0}` is a scalar, not a buffer")]
    ScalarUsedAsBuffer(String),
    #[error("builtin axis {0} (only 0, 1, 2 exist)")]
    BadAxis(u8),
    #[error("type mismatch: {context} expects {expected}, found {found}")]
    TypeMismatch {
        context: String,
        expected: String,
        found: Type,
    },
    #[error("operator `{op}` does not take {ty}")]
    BadOperand { op: String, ty: Type },
    #[error("`{func}` takes {expected} arguments, found {found}")]
    WrongArity {
        func: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("bitcast from {from} to {to} changes the width")]
    BitcastWidth { from: Type, to: ScalarType },
    #[error("lane {lane} of a {lanes}-lane vector")]
    LaneOutOfRange { lane: u8, lanes: u8 },
    #[error("buffer `{0}` is write-only and cannot be loaded")]
    LoadFromWriteOnly(String),
    #[error("buffer `{0}` is read-only and cannot be stored to")]
    StoreToReadOnly(String),
    #[error("local `{0}` is immutable and cannot be assigned")]
    AssignToImmutable(String),
    #[error("local `{0}` is read before it is definitely assigned")]
    UseBeforeAssign(String),
    #[error("loop counter `{0}` must be an immutable i32 or u32 local")]
    BadLoopCounter(String),
    #[error("loop step is 0")]
    ZeroStep,
    #[error("loop counter `{0}` is written inside its own loop")]
    LoopCounterWritten(String),
    #[error("constant index {index} is out of bounds of `{memory}` (length {len})")]
    IndexOutOfBounds {
        memory: String,
        index: i64,
        len: u64,
    },
    #[error("constant index {index} of a {lanes}-lane access to `{memory}` is not a multiple of {lanes}")]
    UnalignedVectorAccess {
        memory: String,
        index: i64,
        lanes: u8,
    },
    #[error("{what} has type {ty}, which only buffer elements may have (a load yields {value}, a store takes it)", value = ty.value_type())]
    StorageOnlyType { what: String, ty: ScalarType },
    #[error("barrier in non-uniform control flow ({0})")]
    NonUniformBarrier(&'static str),
    #[error("unknown fragment #{0}")]
    UnknownFragment(u32),
    #[error("fragment `{name}`: {why}")]
    BadFragment { name: String, why: String },
    #[error("workgroup size {size:?} is not a whole number of the groups of {group} invocations its fragments need (warps of 32, warpgroups of 128)")]
    WorkgroupNotWarps { size: [u32; 3], group: u32 },
    #[error("fragment `{0}` is read before it is definitely written")]
    FragmentUseBeforeAssign(String),
    #[error("fragment statement in non-uniform control flow ({0})")]
    NonUniformFragment(&'static str),
    #[error("asynchronous copy: {0}")]
    BadAsyncCopy(String),
    #[error("shared array `{name}` cannot reuse {why}")]
    BadSharedReuse { name: String, why: String },
}

/// Checks a kernel; `Ok` means every backend may take it.
pub fn validate(kernel: &Kernel) -> Result<(), ValidationError> {
    let mut v = Validator::new(kernel);
    v.check_decls()?;
    v.check_fragment_decls()?;
    let mut assigned = HashSet::new();
    v.check_block(&kernel.body, &mut assigned, "body")?;
    check_uniformity(kernel)
}

/// The type of an expression in a kernel's context; the first error found otherwise.
pub fn type_of(kernel: &Kernel, expr: &Expr) -> Result<Type, ValidationError> {
    Validator::new(kernel).expr_type(expr, None)
}

struct Validator<'k> {
    kernel: &'k Kernel,
    path: NodePath,
    /// Fragments definitely written at this point (as `assigned` is for locals).
    fragments_written: HashSet<FragmentId>,
    /// The layout each warpgroup `A`/`B` fragment is loaded in (one per fragment).
    warpgroup_layouts: std::collections::HashMap<FragmentId, FragmentLayout>,
}

impl<'k> Validator<'k> {
    fn new(kernel: &'k Kernel) -> Self {
        Validator {
            kernel,
            path: NodePath::root("kernel"),
            fragments_written: HashSet::new(),
            warpgroup_layouts: Default::default(),
        }
    }

    fn err<T>(&self, kind: ValidationErrorKind) -> Result<T, ValidationError> {
        Err(ValidationError {
            kernel: self.kernel.name.clone(),
            path: self.path.clone(),
            kind,
        })
    }

    /// Runs `f` with `seg` appended to the current path.
    fn at<T>(&mut self, seg: impl Into<String>, f: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(seg);
        let r = f(self);
        self.path.pop();
        r
    }

    fn check_decls(&mut self) -> Result<(), ValidationError> {
        let k = self.kernel;
        if k.workgroup_size.contains(&0) {
            return self.at("workgroup_size", |v| {
                v.err(ValidationErrorKind::ZeroWorkgroupSize(k.workgroup_size))
            });
        }
        let mut names = HashSet::new();
        for (i, p) in k.params.iter().enumerate() {
            self.at(format!("params[{i}]"), |v| {
                if !names.insert(p.name().to_string()) {
                    return v.err(ValidationErrorKind::DuplicateName(p.name().to_string()));
                }
                match p {
                    Param::Buffer { name, len: 0, .. } => v.err(ValidationErrorKind::ZeroLength {
                        what: "buffer",
                        name: name.clone(),
                    }),
                    Param::Scalar { name, ty } => {
                        v.value_type_only(&format!("scalar parameter `{name}`"), *ty)
                    }
                    Param::Buffer { .. } => Ok(()),
                }
            })?;
        }
        for (i, s) in k.shared.iter().enumerate() {
            self.at(format!("shared[{i}]"), |v| {
                if !names.insert(s.name.clone()) {
                    return v.err(ValidationErrorKind::DuplicateName(s.name.clone()));
                }
                if s.len == 0 {
                    return v.err(ValidationErrorKind::ZeroLength {
                        what: "shared array",
                        name: s.name.clone(),
                    });
                }
                if let Some(owner) = s.reuses {
                    let why = match k.shared_decl(owner) {
                        None => Some(format!("unknown shared array #{}", owner.0)),
                        Some(o) if owner.0 as usize >= i => {
                            Some(format!("`{}`, which is not declared before it", o.name))
                        }
                        Some(o) if o.reuses.is_some() => Some(format!(
                            "`{}`, which reuses another array itself (reuse that one)",
                            o.name
                        )),
                        Some(_) => None,
                    };
                    if let Some(why) = why {
                        return v.err(ValidationErrorKind::BadSharedReuse {
                            name: s.name.clone(),
                            why,
                        });
                    }
                }
                v.value_type_only(&format!("shared array `{}`", s.name), s.elem)
            })?;
        }
        for (i, l) in k.locals.iter().enumerate() {
            self.at(format!("locals[{i}]"), |v| {
                if !Type::is_valid_lanes(l.ty.lanes) {
                    return v.err(ValidationErrorKind::BadLanes(l.ty.lanes));
                }
                v.value_type_only(&format!("local `{}`", l.name), l.ty.scalar)
            })?;
        }
        Ok(())
    }

    /// Refuses a narrow storage type where a value type is needed.
    fn value_type_only(&self, what: &str, ty: ScalarType) -> Result<(), ValidationError> {
        if ty.is_storage_only() {
            return self.err(ValidationErrorKind::StorageOnlyType {
                what: what.to_string(),
                ty,
            });
        }
        Ok(())
    }

    fn local_decl(&self, id: LocalId) -> Result<&'k LocalDecl, ValidationError> {
        match self.kernel.local(id) {
            Some(d) => Ok(d),
            None => self.err(ValidationErrorKind::UnknownLocal(id.0)),
        }
    }

    fn check_block(
        &mut self,
        block: &[Stmt],
        assigned: &mut HashSet<LocalId>,
        name: &str,
    ) -> Result<(), ValidationError> {
        for (i, stmt) in block.iter().enumerate() {
            self.at(format!("{name}[{i}]"), |v| v.check_stmt(stmt, assigned))?;
        }
        Ok(())
    }

    fn check_stmt(
        &mut self,
        stmt: &Stmt,
        assigned: &mut HashSet<LocalId>,
    ) -> Result<(), ValidationError> {
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let is_let = matches!(stmt, Stmt::Let { .. });
                self.at(if is_let { "let" } else { "assign" }, |v| {
                    let decl = v.local_decl(*local)?;
                    if !is_let && !decl.mutable {
                        return v.err(ValidationErrorKind::AssignToImmutable(decl.name.clone()));
                    }
                    let ty = v.at("value", |v| v.expr_type(value, Some(assigned)))?;
                    if ty != decl.ty {
                        return v.at("value", |v| {
                            v.err(ValidationErrorKind::TypeMismatch {
                                context: format!("local `{}`", decl.name),
                                expected: decl.ty.to_string(),
                                found: ty,
                            })
                        });
                    }
                    assigned.insert(*local);
                    Ok(())
                })
            }
            Stmt::Store { mem, index, value } => self.at("store", |v| {
                let (elem, len) = v.memory(*mem)?;
                if let Memory::Buffer(p) = mem {
                    if let Some(Param::Buffer { access, name, .. }) = v.kernel.param(*p) {
                        if !access.can_write() {
                            return v.err(ValidationErrorKind::StoreToReadOnly(name.clone()));
                        }
                    }
                }
                let ty = v.at("value", |v| v.expr_type(value, Some(assigned)))?;
                let value_elem = elem.value_type();
                if ty.scalar != value_elem || !Type::is_valid_lanes(ty.lanes) {
                    return v.at("value", |v| {
                        v.err(ValidationErrorKind::TypeMismatch {
                            context: format!("a store to `{}`", v.kernel.memory_name(*mem)),
                            expected: format!("{value_elem} or a vector of {value_elem}"),
                            found: ty,
                        })
                    });
                }
                v.at("index", |v| {
                    v.check_index(*mem, index, len, ty.lanes, Some(assigned))
                })
            }),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.at("if", |v| {
                let ty = v.at("cond", |v| v.expr_type(cond, Some(assigned)))?;
                v.at("cond", |v| v.expect(ty, Type::BOOL, "an if condition"))?;
                let written_before = v.fragments_written.clone();
                let mut then_assigned = assigned.clone();
                v.check_block(then_body, &mut then_assigned, "then")?;
                let then_written = std::mem::replace(&mut v.fragments_written, written_before);
                let mut else_assigned = assigned.clone();
                v.check_block(else_body, &mut else_assigned, "else")?;
                v.fragments_written.retain(|f| then_written.contains(f));
                // A branch that returns contributes nothing after the if; keep it simple
                // and conservative: only what both branches assign is definitely assigned.
                assigned.extend(then_assigned.intersection(&else_assigned).copied());
                Ok(())
            }),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.at("for", |v| {
                let decl = v.local_decl(*var)?;
                let counter_ok = !decl.mutable && (decl.ty == Type::I32 || decl.ty == Type::U32);
                if !counter_ok {
                    return v.err(ValidationErrorKind::BadLoopCounter(decl.name.clone()));
                }
                if *step == 0 {
                    return v.err(ValidationErrorKind::ZeroStep);
                }
                let st = v.at("start", |v| v.expr_type(start, Some(assigned)))?;
                v.at("start", |v| v.expect(st, decl.ty, "a loop bound"))?;
                let et = v.at("end", |v| v.expr_type(end, Some(assigned)))?;
                v.at("end", |v| v.expect(et, decl.ty, "a loop bound"))?;
                let mut written = Vec::new();
                for s in body {
                    s.written_locals(&mut written);
                }
                if written.contains(var) {
                    return v.err(ValidationErrorKind::LoopCounterWritten(decl.name.clone()));
                }
                let mut body_assigned = assigned.clone();
                body_assigned.insert(*var);
                // The body may run no time: what it writes is not written after it.
                let written_before = v.fragments_written.clone();
                v.check_block(body, &mut body_assigned, "body")?;
                v.fragments_written = written_before;
                Ok(())
            }),
            Stmt::Return | Stmt::Barrier => Ok(()),
            Stmt::Fragment(op) => {
                self.at(op.name(), |v| v.check_fragment_op(op, assigned))?;
                // What a map binds or its body assigns holds the last element's value
                // of whichever invocation computed it: nothing to read after the map.
                let mut written = Vec::new();
                stmt.written_locals(&mut written);
                for l in &written {
                    assigned.remove(l);
                }
                Ok(())
            }
            Stmt::AsyncCopy(op) => self.at(op.name(), |v| v.check_async_copy(op, assigned)),
        }
    }

    fn check_async_copy(
        &mut self,
        op: &AsyncCopyOp,
        assigned: &HashSet<LocalId>,
    ) -> Result<(), ValidationError> {
        let AsyncCopyOp::Start(c) = op else {
            // `Commit` and `Wait` take any invocation at any point.
            return Ok(());
        };
        let bad = |v: &Self, why: String| v.err(ValidationErrorKind::BadAsyncCopy(why));
        let (dst_elem, dst_len) = self.memory(Memory::Shared(c.dst))?;
        let (src_elem, src_len) = self.memory(Memory::Buffer(c.src))?;
        if let Some(Param::Buffer { access, name, .. }) = self.kernel.param(c.src) {
            if access.can_write() {
                return bad(
                    self,
                    format!("the source `{name}` is writable; a copy reads a read-only buffer"),
                );
            }
        }
        if src_elem != dst_elem {
            return bad(
                self,
                format!("copies {src_elem} elements into a shared array of {dst_elem}"),
            );
        }
        let bytes = c.len as u32 * dst_elem.size_bytes();
        if !crate::async_copy::COPY_BYTES.contains(&bytes) {
            return bad(
                self,
                format!(
                    "{} elements of {dst_elem} are {bytes} bytes; a copy moves 4, 8 or 16",
                    c.len
                ),
            );
        }
        self.at("dst_index", |v| {
            v.check_index(
                Memory::Shared(c.dst),
                &c.dst_index,
                dst_len,
                c.len,
                Some(assigned),
            )
        })?;
        self.at("src_index", |v| {
            v.check_index(
                Memory::Buffer(c.src),
                &c.src_index,
                src_len,
                c.len,
                Some(assigned),
            )
        })?;
        let ty = self.at("valid", |v| v.expr_type(&c.valid, Some(assigned)))?;
        self.at("valid", |v| v.expect(ty, Type::BOOL, "a copy's condition"))
    }

    fn expect(&self, found: Type, expected: Type, context: &str) -> Result<(), ValidationError> {
        if found == expected {
            Ok(())
        } else {
            self.err(ValidationErrorKind::TypeMismatch {
                context: context.to_string(),
                expected: expected.to_string(),
                found,
            })
        }
    }

    fn memory(&self, mem: Memory) -> Result<(ScalarType, u64), ValidationError> {
        match mem {
            Memory::Buffer(p) => match self.kernel.param(p) {
                None => self.err(ValidationErrorKind::UnknownParam(p.0)),
                Some(Param::Scalar { name, .. }) => {
                    self.err(ValidationErrorKind::ScalarUsedAsBuffer(name.clone()))
                }
                Some(Param::Buffer { elem, len, .. }) => Ok((*elem, *len)),
            },
            Memory::Shared(s) => match self.kernel.shared_decl(s) {
                None => self.err(ValidationErrorKind::UnknownShared(s.0)),
                Some(d) => Ok((d.elem, d.len as u64)),
            },
        }
    }

    /// Index type, constant bounds and vector alignment of one access.
    fn check_index(
        &mut self,
        mem: Memory,
        index: &Expr,
        len: u64,
        lanes: u8,
        assigned: Option<&HashSet<LocalId>>,
    ) -> Result<(), ValidationError> {
        let ty = self.expr_type(index, assigned)?;
        self.expect(ty, Type::U32, "an index")?;
        if let Some(Scalar::U32(i)) = index.as_lit() {
            let name = self.kernel.memory_name(mem);
            if lanes > 1 && i % lanes as u32 != 0 {
                return self.err(ValidationErrorKind::UnalignedVectorAccess {
                    memory: name,
                    index: i as i64,
                    lanes,
                });
            }
            if i as u64 + lanes as u64 > len {
                return self.err(ValidationErrorKind::IndexOutOfBounds {
                    memory: name,
                    index: i as i64,
                    len,
                });
            }
        }
        Ok(())
    }

    /// Infers the type of `expr`. With `assigned`, also checks definite assignment.
    fn expr_type(
        &mut self,
        expr: &Expr,
        assigned: Option<&HashSet<LocalId>>,
    ) -> Result<Type, ValidationError> {
        use ValidationErrorKind as K;
        match expr {
            Expr::Lit(s) => Ok(Type::scalar(s.ty())),
            Expr::Local(id) => {
                let decl = self.local_decl(*id)?;
                if let Some(set) = assigned {
                    if !set.contains(id) {
                        return self.err(K::UseBeforeAssign(decl.name.clone()));
                    }
                }
                Ok(decl.ty)
            }
            Expr::Param(p) => match self.kernel.param(*p) {
                None => self.err(K::UnknownParam(p.0)),
                Some(Param::Buffer { name, .. }) => self.err(K::BufferUsedAsScalar(name.clone())),
                Some(Param::Scalar { ty, .. }) => Ok(Type::scalar(*ty)),
            },
            Expr::Builtin { axis, .. } => {
                if *axis > 2 {
                    return self.err(K::BadAxis(*axis));
                }
                Ok(Type::U32)
            }
            Expr::Load { mem, index, lanes } => self.at("load", |v| {
                if !Type::is_valid_lanes(*lanes) {
                    return v.err(K::BadLanes(*lanes));
                }
                let (elem, len) = v.memory(*mem)?;
                if let Memory::Buffer(p) = mem {
                    if let Some(Param::Buffer { access, name, .. }) = v.kernel.param(*p) {
                        if !access.can_read() {
                            return v.err(K::LoadFromWriteOnly(name.clone()));
                        }
                    }
                }
                v.at("index", |v| {
                    v.check_index(*mem, index, len, *lanes, assigned)
                })?;
                Ok(Type::vector(elem.value_type(), *lanes))
            }),
            Expr::Unary { op, arg } => self.at("unary", |v| {
                let ty = v.at("arg", |v| v.expr_type(arg, assigned))?;
                let ok = match op {
                    UnaryOp::Neg => ty.scalar.is_float() || ty.scalar.is_signed_int(),
                    UnaryOp::Not => ty.scalar.is_int() || ty.scalar == ScalarType::Bool,
                };
                if !ok {
                    return v.err(K::BadOperand {
                        op: format!("{op:?}").to_lowercase(),
                        ty,
                    });
                }
                Ok(ty)
            }),
            Expr::Binary { op, lhs, rhs } => self.at("binary", |v| {
                let lt = v.at("lhs", |v| v.expr_type(lhs, assigned))?;
                let rt = v.at("rhs", |v| v.expr_type(rhs, assigned))?;
                let s = lt.scalar;
                let operand_ok = match op {
                    BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Rem => s.is_float() || s.is_int(),
                    BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                        s.is_int() || s == ScalarType::Bool
                    }
                    BinaryOp::Shl | BinaryOp::Shr => s.is_int(),
                };
                if !operand_ok {
                    return v.at("lhs", |v| {
                        v.err(K::BadOperand {
                            op: op.symbol().to_string(),
                            ty: lt,
                        })
                    });
                }
                let expected_rhs = match op {
                    BinaryOp::Shl | BinaryOp::Shr => lt.with_scalar(ScalarType::U32),
                    _ => lt,
                };
                v.at("rhs", |v| {
                    v.expect(
                        rt,
                        expected_rhs,
                        &format!("the right side of `{}`", op.symbol()),
                    )
                })?;
                Ok(lt)
            }),
            Expr::Cmp { op, lhs, rhs } => self.at("cmp", |v| {
                let lt = v.at("lhs", |v| v.expr_type(lhs, assigned))?;
                let rt = v.at("rhs", |v| v.expr_type(rhs, assigned))?;
                let ordered = !matches!(op, CmpOp::Eq | CmpOp::Ne);
                if ordered && lt.scalar == ScalarType::Bool {
                    return v.at("lhs", |v| {
                        v.err(K::BadOperand {
                            op: op.symbol().to_string(),
                            ty: lt,
                        })
                    });
                }
                v.at("rhs", |v| {
                    v.expect(rt, lt, &format!("the right side of `{}`", op.symbol()))
                })?;
                Ok(lt.with_scalar(ScalarType::Bool))
            }),
            Expr::Math { func, args } => self.at(func.name(), |v| {
                if args.len() != func.arity() {
                    return v.err(K::WrongArity {
                        func: func.name(),
                        expected: func.arity(),
                        found: args.len(),
                    });
                }
                let mut first = None;
                for (i, a) in args.iter().enumerate() {
                    let ty = v.at(format!("args[{i}]"), |v| v.expr_type(a, assigned))?;
                    match first {
                        None => {
                            let ok =
                                ty.scalar.is_float() || (func.accepts_int() && ty.scalar.is_int());
                            if !ok {
                                return v.at(format!("args[{i}]"), |v| {
                                    v.err(K::BadOperand {
                                        op: func.name().to_string(),
                                        ty,
                                    })
                                });
                            }
                            first = Some(ty);
                        }
                        Some(t0) => v.at(format!("args[{i}]"), |v| {
                            v.expect(ty, t0, &format!("argument {i} of `{}`", func.name()))
                        })?,
                    }
                }
                // Arity is at least one, so `first` is set.
                Ok(first.unwrap_or(Type::F32))
            }),
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => self.at("select", |v| {
                let ct = v.at("cond", |v| v.expr_type(cond, assigned))?;
                let tt = v.at("on_true", |v| v.expr_type(on_true, assigned))?;
                let ft = v.at("on_false", |v| v.expr_type(on_false, assigned))?;
                v.at("on_false", |v| {
                    v.expect(ft, tt, "the false arm of a select")
                })?;
                let cond_ok = ct == Type::BOOL || ct == tt.with_scalar(ScalarType::Bool);
                if !cond_ok {
                    return v.at("cond", |v| {
                        v.err(K::TypeMismatch {
                            context: "a select condition".into(),
                            expected: format!("bool or {}", tt.with_scalar(ScalarType::Bool)),
                            found: ct,
                        })
                    });
                }
                Ok(tt)
            }),
            Expr::Cast { to, arg } => self.at("cast", |v| {
                let ty = v.at("arg", |v| v.expr_type(arg, assigned))?;
                v.value_type_only("a cast's result", *to)?;
                Ok(ty.with_scalar(*to))
            }),
            Expr::Bitcast { to, arg } => self.at("bitcast", |v| {
                let ty = v.at("arg", |v| v.expr_type(arg, assigned))?;
                v.value_type_only("a bitcast's result", *to)?;
                let same_width = ty.scalar != ScalarType::Bool
                    && *to != ScalarType::Bool
                    && ty.scalar.size_bytes() == to.size_bytes();
                if !same_width {
                    return v.err(K::BitcastWidth { from: ty, to: *to });
                }
                Ok(ty.with_scalar(*to))
            }),
            Expr::Vector(items) => self.at("vector", |v| {
                let n = items.len();
                if !(n == 2 || n == 4) {
                    return v.err(K::BadLanes(n.min(255) as u8));
                }
                let mut first: Option<Type> = None;
                for (i, item) in items.iter().enumerate() {
                    let ty = v.at(format!("items[{i}]"), |v| v.expr_type(item, assigned))?;
                    let expected = first.unwrap_or(Type::scalar(ty.scalar));
                    v.at(format!("items[{i}]"), |v| {
                        v.expect(ty, expected, "a vector lane")
                    })?;
                    first = Some(expected);
                }
                Ok(Type::vector(
                    first.map_or(ScalarType::F32, |t| t.scalar),
                    n as u8,
                ))
            }),
            Expr::Splat { lanes, arg } => self.at("splat", |v| {
                if !(*lanes == 2 || *lanes == 4) {
                    return v.err(K::BadLanes(*lanes));
                }
                let ty = v.at("arg", |v| v.expr_type(arg, assigned))?;
                v.at("arg", |v| v.expect(ty, Type::scalar(ty.scalar), "a splat"))?;
                Ok(Type::vector(ty.scalar, *lanes))
            }),
            Expr::Extract { arg, lane } => self.at("extract", |v| {
                let ty = v.at("arg", |v| v.expr_type(arg, assigned))?;
                if *lane >= ty.lanes || ty.lanes == 1 {
                    return v.err(K::LaneOutOfRange {
                        lane: *lane,
                        lanes: ty.lanes,
                    });
                }
                Ok(Type::scalar(ty.scalar))
            }),
        }
    }
}

// Matrix fragments.
impl<'k> Validator<'k> {
    fn check_fragment_decls(&mut self) -> Result<(), ValidationError> {
        let k = self.kernel;
        let mut names = HashSet::new();
        for (i, f) in k.fragments.iter().enumerate() {
            self.at(format!("fragments[{i}]"), |v| {
                if !names.insert(&f.name) {
                    return v.err(ValidationErrorKind::DuplicateName(f.name.clone()));
                }
                let known = MMA_KINDS.iter().any(|&(shape, input, acc)| {
                    shape == f.shape
                        && match f.role {
                            FragmentRole::A | FragmentRole::B => input == f.elem,
                            FragmentRole::Accumulator => acc == f.elem,
                        }
                });
                let register_a = f.role == FragmentRole::A
                    && f.shape.is_warpgroup()
                    && matches!(f.elem, ScalarType::F16 | ScalarType::Bf16);
                if f.in_registers && !register_a {
                    return v.err(ValidationErrorKind::BadFragment {
                        name: f.name.clone(),
                        why: format!(
                            "declared in registers, which only a warpgroup's f16/bf16 A \
                             fragment can be (wgmma's register operand), not a {} fragment \
                             of {} and {} invocations",
                            f.role.name(),
                            f.elem,
                            f.group()
                        ),
                    });
                }
                if !known {
                    let MmaShape { m, n, k } = f.shape;
                    return v.err(ValidationErrorKind::BadFragment {
                        name: f.name.clone(),
                        why: format!(
                            "no multiply has {} fragments of {} and shape m{m}n{n}k{k} \
                             (the kinds: fragment::MMA_KINDS)",
                            f.role.name(),
                            f.elem
                        ),
                    });
                }
                Ok(())
            })?;
        }
        let group = k.fragments.iter().map(FragmentDecl::group).max();
        if let Some(group) = group {
            if k.invocations_per_workgroup() % group as u64 != 0 {
                return self.at("workgroup_size", |v| {
                    v.err(ValidationErrorKind::WorkgroupNotWarps {
                        size: k.workgroup_size,
                        group,
                    })
                });
            }
        }
        Ok(())
    }

    fn fragment_decl(
        &self,
        id: FragmentId,
        role: FragmentRole,
    ) -> Result<&'k FragmentDecl, ValidationError> {
        let kernel: &'k Kernel = self.kernel;
        let Some(decl) = kernel.fragment(id) else {
            return self.err(ValidationErrorKind::UnknownFragment(id.0));
        };
        if decl.role != role {
            return self.err(ValidationErrorKind::BadFragment {
                name: decl.name.clone(),
                why: format!(
                    "used as {} fragment but declared {}",
                    role.name(),
                    decl.role.name()
                ),
            });
        }
        Ok(decl)
    }

    fn fragment_read(&self, id: FragmentId) -> Result<(), ValidationError> {
        if self.fragments_written.contains(&id) {
            Ok(())
        } else {
            self.err(ValidationErrorKind::FragmentUseBeforeAssign(
                self.kernel.fragment_name(id),
            ))
        }
    }

    fn u32_operand(
        &mut self,
        name: &'static str,
        e: &Expr,
        assigned: &HashSet<LocalId>,
    ) -> Result<(), ValidationError> {
        self.at(name, |v| {
            let ty = v.expr_type(e, Some(assigned))?;
            v.expect(ty, Type::U32, &format!("a fragment's {name}"))
        })
    }

    fn check_fragment_op(
        &mut self,
        op: &FragmentOp,
        assigned: &HashSet<LocalId>,
    ) -> Result<(), ValidationError> {
        use ValidationErrorKind as K;
        match op {
            FragmentOp::Fill { frag, value } => {
                let decl = self.fragment_decl(*frag, FragmentRole::Accumulator)?;
                let ty = self.at("value", |v| v.expr_type(value, Some(assigned)))?;
                self.at("value", |v| {
                    v.expect(ty, Type::scalar(decl.elem), "an accumulator's fill value")
                })?;
                self.fragments_written.insert(*frag);
            }
            FragmentOp::Load {
                frag,
                mem,
                index,
                stride,
                layout,
            } => {
                let kernel: &'k Kernel = self.kernel;
                let Some(decl) = kernel.fragment(*frag) else {
                    return self.err(K::UnknownFragment(frag.0));
                };
                if decl.in_registers {
                    return self.err(K::BadFragment {
                        name: decl.name.clone(),
                        why: "is held in registers: `convert` fills it, no load".into(),
                    });
                }
                let read_at_mma = decl.is_read_in_place();
                if read_at_mma
                    && (!matches!(mem, Memory::Shared(_)) || !layout.is_for_matrix_units())
                {
                    return self.err(K::BadFragment {
                        name: decl.name.clone(),
                        why: format!(
                            "a warpgroup's {} fragment loads only from shared memory in a tiled \
                             layout (the matrix units read it there), not {} {}",
                            decl.role.name(),
                            match mem {
                                Memory::Shared(_) => "shared memory",
                                Memory::Buffer(_) => "a buffer",
                            },
                            layout.name()
                        ),
                    });
                }
                let along_reduction = matches!(
                    (decl.role, layout),
                    (FragmentRole::A, FragmentLayout::RowMajorSwizzled)
                        | (FragmentRole::B, FragmentLayout::ColMajorSwizzled)
                );
                if read_at_mma && decl.elem == ScalarType::F32 && !along_reduction {
                    return self.err(K::BadFragment {
                        name: decl.name.clone(),
                        why: format!(
                            "a TF32 warpgroup {} fragment loads along the reduction in the \
                             swizzled layout ({}), not {}: `wgmma` reads TF32 operands \
                             K-major only",
                            decl.role.name(),
                            match decl.role {
                                FragmentRole::A => "row_major_swizzled",
                                _ => "col_major_swizzled",
                            },
                            layout.name()
                        ),
                    });
                }
                if read_at_mma {
                    let first = *self.warpgroup_layouts.entry(*frag).or_insert(*layout);
                    if first != *layout {
                        return self.err(K::BadFragment {
                            name: decl.name.clone(),
                            why: format!(
                                "a warpgroup's {} fragment is loaded {} here and {} elsewhere; \
                                 it takes one layout (the multiply instruction carries it)",
                                decl.role.name(),
                                layout.name(),
                                first.name()
                            ),
                        });
                    }
                }
                let (elem, _) = self.memory(*mem)?;
                if let Memory::Buffer(p) = mem {
                    if let Some(Param::Buffer { access, name, .. }) = self.kernel.param(*p) {
                        if !access.can_read() {
                            return self.err(K::LoadFromWriteOnly(name.clone()));
                        }
                    }
                }
                if elem != decl.elem {
                    return self.err(K::BadFragment {
                        name: decl.name.clone(),
                        why: format!("a fragment of {} loads from memory of {elem}", decl.elem),
                    });
                }
                self.u32_operand("index", index, assigned)?;
                self.u32_operand("stride", stride, assigned)?;
                self.fragments_written.insert(*frag);
            }
            FragmentOp::Store {
                frag,
                mem,
                index,
                stride,
                ..
            } => {
                let decl = self.fragment_decl(*frag, FragmentRole::Accumulator)?;
                self.fragment_read(*frag)?;
                let (elem, _) = self.memory(*mem)?;
                if let Memory::Buffer(p) = mem {
                    if let Some(Param::Buffer { access, name, .. }) = self.kernel.param(*p) {
                        if !access.can_write() {
                            return self.err(K::StoreToReadOnly(name.clone()));
                        }
                    }
                }
                if !elem.is_float() {
                    return self.err(K::BadFragment {
                        name: decl.name.clone(),
                        why: format!("stored to memory of {elem}; only float memory takes it"),
                    });
                }
                self.u32_operand("index", index, assigned)?;
                self.u32_operand("stride", stride, assigned)?;
            }
            FragmentOp::Mma { d, a, b, c } => {
                let dd = self.at("d", |v| v.fragment_decl(*d, FragmentRole::Accumulator))?;
                let ad = self.at("a", |v| v.fragment_decl(*a, FragmentRole::A))?;
                let bd = self.at("b", |v| v.fragment_decl(*b, FragmentRole::B))?;
                let cd = self.at("c", |v| v.fragment_decl(*c, FragmentRole::Accumulator))?;
                for (seg, f) in [("a", a), ("b", b), ("c", c)] {
                    self.at(seg, |v| v.fragment_read(*f))?;
                }
                let same_shape = [ad, bd, cd].iter().all(|f| f.shape == dd.shape);
                let why = if !same_shape {
                    Some("its four fragments have different shapes".to_string())
                } else if ad.elem != bd.elem || cd.elem != dd.elem {
                    Some("a and b, or c and d, have different element types".to_string())
                } else if !is_mma_kind(dd.shape, ad.elem, dd.elem) {
                    Some(format!("no multiply takes {} into {}", ad.elem, dd.elem))
                } else {
                    None
                };
                if let Some(why) = why {
                    return self.err(K::BadFragment {
                        name: dd.name.clone(),
                        why,
                    });
                }
                self.fragments_written.insert(*d);
            }
            FragmentOp::Map(m) => self.check_map(m, assigned)?,
            FragmentOp::ReduceRows { dst, srcs, .. } => {
                let dd = self.at("dst", |v| v.fragment_decl(*dst, FragmentRole::Accumulator))?;
                let first = srcs.first().and_then(|s| self.kernel.fragment(*s));
                let shape = first.map_or(dd.shape, |d| d.shape);
                if !same_rows(shape, dd.shape) {
                    return self.err(K::BadFragment {
                        name: dd.name.clone(),
                        why: "holds other rows than the rows it reduces".into(),
                    });
                }
                let same =
                    |s: &FragmentDecl| s.elem == dd.elem && s.elem.is_float() && s.shape == shape;
                self.check_sources(dd, srcs, same)?;
                self.fragments_written.insert(*dst);
            }
            FragmentOp::Convert { dst, srcs, first } => {
                let dd = self.at("dst", |v| v.fragment_decl(*dst, FragmentRole::A))?;
                let first_src = srcs.first().and_then(|s| self.kernel.fragment(*s));
                let (src_shape, elem) = (first_src.map(|d| d.shape), first_src.map(|d| d.elem));
                if let Some(why) = convert_problem(dd, src_shape, srcs.len() as u32, *first) {
                    return self.err(K::BadFragment {
                        name: dd.name.clone(),
                        why,
                    });
                }
                let same_shape = |s: &FragmentDecl| Some(s.shape) == src_shape;
                if !srcs
                    .iter()
                    .all(|s| self.kernel.fragment(*s).is_none_or(same_shape))
                {
                    return self.err(K::BadFragment {
                        name: dd.name.clone(),
                        why: "converted from accumulators of several shapes".into(),
                    });
                }
                self.check_sources(dd, srcs, |s| s.elem.is_float() && Some(s.elem) == elem)?;
                self.fragments_written.insert(*dst);
            }
        }
        Ok(())
    }

    /// Each of `srcs` an accumulator of `dst`'s shape, written, and `ok`.
    fn check_sources(
        &mut self,
        dst: &FragmentDecl,
        srcs: &[FragmentId],
        ok: impl Fn(&FragmentDecl) -> bool,
    ) -> Result<(), ValidationError> {
        if srcs.is_empty() {
            return self.err(ValidationErrorKind::BadFragment {
                name: dst.name.clone(),
                why: "no source fragments".into(),
            });
        }
        for (i, src) in srcs.iter().enumerate() {
            self.at(format!("srcs[{i}]"), |v| {
                let sd = v.fragment_decl(*src, FragmentRole::Accumulator)?;
                v.fragment_read(*src)?;
                if !same_rows(sd.shape, dst.shape) || !ok(sd) {
                    return v.err(ValidationErrorKind::BadFragment {
                        name: sd.name.clone(),
                        why: format!(
                            "a source of {} {} of another shape or element type (or not a \
                             float)",
                            dst.elem, dst.name
                        ),
                    });
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn check_map(
        &mut self,
        m: &FragmentMap,
        assigned: &HashSet<LocalId>,
    ) -> Result<(), ValidationError> {
        use ValidationErrorKind as K;
        let dd = self.at("dst", |v| v.fragment_decl(m.dst, FragmentRole::Accumulator))?;
        let mut inner = assigned.clone();
        let mut bound = vec![(m.row, Type::U32), (m.col, Type::U32)];
        for (i, arg) in m.args.iter().enumerate() {
            let ad = self.at(format!("args[{i}]"), |v| {
                let ad = v.fragment_decl(arg.frag, FragmentRole::Accumulator)?;
                v.fragment_read(arg.frag)?;
                if !same_rows(ad.shape, dd.shape) {
                    return v.err(K::BadFragment {
                        name: ad.name.clone(),
                        why: format!(
                            "read by a map into {}, whose rows it does not hold",
                            dd.name
                        ),
                    });
                }
                Ok(ad)
            })?;
            bound.push((arg.local, Type::scalar(ad.elem)));
        }
        for (local, ty) in bound {
            let decl = self.local_decl(local)?;
            if decl.ty != ty {
                return self.err(K::TypeMismatch {
                    context: format!("local `{}` bound by a map", decl.name),
                    expected: ty.to_string(),
                    found: decl.ty,
                });
            }
            inner.insert(local);
        }
        if let Some(why) = map_body_violation(&m.body) {
            return self.err(K::BadFragment {
                name: dd.name.clone(),
                why: format!("a map's body only computes values; it has {why}"),
            });
        }
        let written_before = self.fragments_written.clone();
        self.check_block(&m.body, &mut inner, "body")?;
        self.fragments_written = written_before;
        let ty = self.at("value", |v| v.expr_type(&m.value, Some(&inner)))?;
        self.at("value", |v| {
            v.expect(ty, Type::scalar(dd.elem), "a map's value")
        })?;
        self.fragments_written.insert(m.dst);
        Ok(())
    }
}

/// The first statement a map's body may not have (see [`FragmentMap`]).
fn map_body_violation(block: &[Stmt]) -> Option<&'static str> {
    block.iter().find_map(|s| match s {
        Stmt::Let { .. } | Stmt::Assign { .. } => None,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => map_body_violation(then_body).or_else(|| map_body_violation(else_body)),
        Stmt::For { body, .. } => map_body_violation(body),
        Stmt::Store { .. } => Some("a store"),
        Stmt::Return => Some("a return"),
        Stmt::Barrier => Some("a barrier"),
        Stmt::Fragment(_) => Some("a fragment statement"),
        Stmt::AsyncCopy(_) => Some("an asynchronous copy"),
    })
}

/// Uniformity: a barrier must be reached by every invocation of a workgroup or by none.
///
/// Values that derive from local/global ids, from loads other than read-only buffers at
/// uniform indices, or from locals written under non-uniform control flow are
/// non-uniform. An `if` or loop whose condition or bounds are non-uniform, or a
/// `return` under non-uniform control flow, makes what follows non-uniform.
fn check_uniformity(kernel: &Kernel) -> Result<(), ValidationError> {
    let mut analysis = Uniformity {
        kernel,
        non_uniform: HashSet::new(),
        diverged: false,
        path: NodePath::root("kernel"),
        error: None,
    };
    // Grow the set of non-uniform locals to a fixpoint (loops carry values backwards).
    loop {
        let before = analysis.non_uniform.len();
        analysis.diverged = false;
        analysis.error = None;
        analysis.block(&kernel.body, true, "body");
        if analysis.non_uniform.len() == before {
            break;
        }
    }
    match analysis.error {
        Some((path, kind)) => Err(ValidationError {
            kernel: kernel.name.clone(),
            path,
            kind,
        }),
        None => Ok(()),
    }
}

struct Uniformity<'k> {
    kernel: &'k Kernel,
    non_uniform: HashSet<LocalId>,
    /// Some invocation may have returned under non-uniform control flow.
    diverged: bool,
    path: NodePath,
    error: Option<(NodePath, ValidationErrorKind)>,
}

impl Uniformity<'_> {
    fn is_uniform(&self, e: &Expr) -> bool {
        let here = match e {
            Expr::Local(l) => !self.non_uniform.contains(l),
            Expr::Builtin { builtin, .. } => {
                matches!(builtin, Builtin::WorkgroupId | Builtin::NumWorkgroups)
            }
            Expr::Load {
                mem: Memory::Buffer(p),
                ..
            } => matches!(
                self.kernel.param(*p),
                Some(Param::Buffer {
                    access: Access::Read,
                    ..
                })
            ),
            Expr::Load { .. } => false,
            _ => true,
        };
        here && e.children().iter().all(|c| self.is_uniform(c))
    }

    fn block(&mut self, block: &[Stmt], uniform_cf: bool, name: &str) {
        for (i, s) in block.iter().enumerate() {
            self.path.push(format!("{name}[{i}]"));
            self.stmt(s, uniform_cf);
            self.path.pop();
        }
    }

    fn stmt(&mut self, s: &Stmt, uniform_cf: bool) {
        let uniform_cf = uniform_cf && !self.diverged;
        match s {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                if !uniform_cf || !self.is_uniform(value) {
                    self.non_uniform.insert(*local);
                }
            }
            Stmt::Store { .. } | Stmt::AsyncCopy(_) => {}
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let inner = uniform_cf && self.is_uniform(cond);
                self.path.push("if".to_string());
                self.block(then_body, inner, "then");
                self.block(else_body, inner, "else");
                self.path.pop();
                if !inner {
                    // Locals written in a divergent branch differ between invocations.
                    let mut written = Vec::new();
                    s.written_locals(&mut written);
                    self.non_uniform.extend(written);
                }
            }
            Stmt::For {
                var,
                start,
                end,
                body,
                ..
            } => {
                let inner = uniform_cf && self.is_uniform(start) && self.is_uniform(end);
                if !inner {
                    self.non_uniform.insert(*var);
                }
                self.path.push("for".to_string());
                // Twice: a divergent return late in the body reaches a barrier early
                // in the next iteration.
                self.block(body, inner, "body");
                self.block(body, inner, "body");
                self.path.pop();
                if !inner {
                    let mut written = Vec::new();
                    s.written_locals(&mut written);
                    self.non_uniform.extend(written);
                }
            }
            Stmt::Return => {
                if !uniform_cf {
                    self.diverged = true;
                }
            }
            Stmt::Barrier | Stmt::Fragment(_) => {
                if self.error.is_none() && !uniform_cf {
                    let why = if self.diverged {
                        "some invocations may have returned before it"
                    } else {
                        "it is under a condition or loop that differs between invocations"
                    };
                    let kind = match s {
                        Stmt::Fragment(_) => ValidationErrorKind::NonUniformFragment(why),
                        _ => ValidationErrorKind::NonUniformBarrier(why),
                    };
                    self.error = Some((self.path.clone(), kind));
                }
                // A map's locals differ between invocations after it.
                let mut written = Vec::new();
                s.written_locals(&mut written);
                self.non_uniform.extend(written);
            }
        }
    }
}

/// Why `convert` into `dst` from `sources` accumulators of `src` (the first's shape)
/// from column `first` is malformed, if it is: `dst` an f16/bf16 `A` held in
/// registers, the sources of its rows, the `k` columns taken starting in the first
/// source and ending in the last, at a multiple of 8 (a register pair's place in
/// every target's accumulator layout).
fn convert_problem(
    dst: &FragmentDecl,
    src: Option<MmaShape>,
    sources: u32,
    first: u32,
) -> Option<String> {
    let MmaShape { m, n, k } = dst.shape;
    if !matches!(dst.elem, ScalarType::F16 | ScalarType::Bf16) {
        return Some(format!(
            "converted into an A fragment of {}: only f16/bf16 A fragments share their \
             registers' layout with the accumulators",
            dst.elem
        ));
    }
    if dst.shape.is_warpgroup() && !dst.in_registers {
        return Some(format!(
            "converted into m{m}n{n}k{k}, a warpgroup A read from shared memory; declare \
             it in registers"
        ));
    }
    if sources == 0 {
        return Some("converted from no accumulators".into());
    }
    // An unknown source: `check_sources` names it.
    let src = src?;
    if !same_rows(src, dst.shape) {
        return Some(format!(
            "converted from accumulators of m{}n{}, whose rows other invocations hold",
            src.m, src.n
        ));
    }
    // In u64: `first` is any u32 of a malformed kernel.
    let (first, k, n) = (u64::from(first), u64::from(k), u64::from(src.n));
    let covers = first % u64::from(TILE) == 0
        && first < n
        && first + k <= u64::from(sources) * n
        && (first + k - 1) / n == u64::from(sources) - 1;
    (!covers).then(|| {
        format!(
            "converted from columns {first}..{} of {sources} accumulators {n} wide: the \
             columns start at a multiple of 8 in the first source and end in the last",
            first + k
        )
    })
}
