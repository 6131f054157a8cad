//! Kernel IR -> the naga module: globals, the entry point, statements.
//!
//! Expressions are in `expr`, the operators with explicit semantics in `ops`, checked
//! memory accesses in `memory`.

use super::func::FnBuilder;
use super::{backend, types};
use crate::abi::{ParamSlot, ShaderLayout, ENTRY_POINT};
use crate::shader::Packing;
use crate::CodegenError;
use kernelc_ir::analysis::{uniform_vector_widths, Ranges};
use kernelc_ir::{Builtin, Expr, Kernel, LocalId, Param, ScalarType, Stmt, Type};
use naga::{
    AddressSpace, ArraySize, BinaryOperator, Block, Expression, Handle, ResourceBinding,
    ScalarKind, Span, Statement, StorageAccess, TypeInner,
};
use std::num::NonZeroU32;

/// A lowered IR value: the naga expression and the IR type it has.
#[derive(Clone, Copy, Debug)]
pub(super) struct Val {
    pub(super) h: Handle<Expression>,
    pub(super) ty: Type,
}

/// An internal inconsistency (the kernel was validated, so this is a kernelc bug).
pub(super) fn internal(what: impl std::fmt::Display) -> CodegenError {
    backend(format!("internal error: {what}"))
}

/// Whether control continues after a statement or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// Every path returned; what follows in the block is unreachable and not emitted.
    Returned,
}

/// The entry point's builtin arguments, in argument order (named as the IR names
/// them).
const BUILTINS: [(Builtin, naga::BuiltIn); 4] = [
    (Builtin::GlobalId, naga::BuiltIn::GlobalInvocationId),
    (Builtin::LocalId, naga::BuiltIn::LocalInvocationId),
    (Builtin::WorkgroupId, naga::BuiltIn::WorkGroupId),
    (Builtin::NumWorkgroups, naga::BuiltIn::NumWorkGroups),
];

/// Builds the module of a validated kernel whose constructs `support::check` accepted.
pub(super) fn build(kernel: &Kernel) -> Result<naga::Module, CodegenError> {
    let mut lower = Lower::new(kernel)?;
    lower.block(&kernel.body)?;
    lower.finish()
}

/// The state of lowering one kernel.
pub(super) struct Lower<'k> {
    pub(super) kernel: &'k Kernel,
    pub(super) module: naga::Module,
    /// The function being built (the entry point, or briefly a helper).
    pub(super) f: FnBuilder,
    pub(super) ranges: Ranges,
    /// Per parameter: the pointer to its buffer (`None` for scalars).
    pub(super) buffers: Vec<Option<Handle<Expression>>>,
    /// Per parameter: `Some(L)` when its buffer is declared `array<vecL<T>>` (every
    /// access is an aligned `L`-lane vector; see `uniform_vector_widths`).
    pub(super) buffer_views: Vec<Option<u8>>,
    /// Per shared array: the pointer to it.
    pub(super) shared: Vec<Handle<Expression>>,
    /// Per parameter: its decoded value (`None` for buffers).
    scalars: Vec<Option<Val>>,
    /// Per builtin (in `BUILTINS` order) and axis: the `u32` component.
    builtins: Vec<[Handle<Expression>; 3]>,
    /// Pointer to the atomic status word.
    pub(super) status_ptr: Handle<Expression>,
    /// Per IR local: the pointer to its variable.
    locals: Vec<Handle<Expression>>,
    /// What an IR barrier synchronises.
    barrier: naga::Barrier,
}

impl<'k> Lower<'k> {
    fn new(kernel: &'k Kernel) -> Result<Self, CodegenError> {
        let mut module = naga::Module::default();
        let mut f = FnBuilder::new(ENTRY_POINT);
        let layout = ShaderLayout::of(kernel);

        let uvec3 = types::intern(
            &mut module.types,
            TypeInner::Vector {
                size: naga::VectorSize::Tri,
                scalar: naga::Scalar::U32,
            },
        );
        let mut builtin_args = Vec::with_capacity(BUILTINS.len());
        {
            let (args, _) = f.signature_mut();
            for (ir, builtin) in BUILTINS {
                args.push(naga::FunctionArgument {
                    name: Some(ir.name().to_string()),
                    ty: uvec3,
                    binding: Some(naga::Binding::BuiltIn(builtin)),
                });
            }
        }
        for i in 0..BUILTINS.len() {
            builtin_args.push(f.expr(Expression::FunctionArgument(i as u32)));
        }

        let ranges = Ranges::of(kernel);
        let mut buffer_views = uniform_vector_widths(kernel, &ranges);
        // Packed buffers are arrays of words, never of vectors.
        for (view, param) in buffer_views.iter_mut().zip(&kernel.params) {
            if let Param::Buffer { elem, .. } = param {
                if Packing::of(*elem).is_some() {
                    *view = None;
                }
            }
        }
        let buffer_vars = declare_buffers(&mut module, kernel, &layout, &buffer_views)?;
        let shared_vars = declare_shared(&mut module, kernel)?;
        let scalar_block = declare_scalar_block(&mut module, &layout);
        let status_var = declare_status(&mut module, &layout);

        // Pointers to globals are pre-emitted expressions, valid everywhere.
        let buffers = buffer_vars
            .into_iter()
            .map(|v| v.map(|g| f.expr(Expression::GlobalVariable(g))))
            .collect();
        let shared = shared_vars
            .into_iter()
            .map(|g| f.expr(Expression::GlobalVariable(g)))
            .collect();
        let status_base = f.expr(Expression::GlobalVariable(status_var));

        let mut locals = Vec::with_capacity(kernel.locals.len());
        for decl in &kernel.locals {
            let ty = types::value_type(&mut module.types, decl.ty)?;
            locals.push(f.local(&decl.name, ty));
        }

        // Values computed once at the top of the entry point: they dominate (and so
        // are in scope in) every later block.
        let status_ptr = f.expr(Expression::AccessIndex {
            base: status_base,
            index: 0,
        });
        let builtins = builtin_args
            .iter()
            .map(|&arg| {
                [0, 1, 2].map(|axis| {
                    f.expr(Expression::AccessIndex {
                        base: arg,
                        index: axis,
                    })
                })
            })
            .collect();

        let barrier = if kernel.params.iter().any(|p| match p {
            Param::Buffer { access, .. } => access.can_write(),
            Param::Scalar { .. } => false,
        }) {
            naga::Barrier::STORAGE | naga::Barrier::WORK_GROUP
        } else {
            naga::Barrier::WORK_GROUP
        };

        let mut lower = Lower {
            kernel,
            module,
            f,
            ranges,
            buffers,
            buffer_views,
            shared,
            scalars: Vec::new(),
            builtins,
            status_ptr,
            locals,
            barrier,
        };
        lower.scalars = lower.decode_scalars(&layout, scalar_block)?;
        Ok(lower)
    }

    /// Loads and decodes every scalar parameter from the packed words.
    fn decode_scalars(
        &mut self,
        layout: &ShaderLayout,
        block: Option<Handle<naga::GlobalVariable>>,
    ) -> Result<Vec<Option<Val>>, CodegenError> {
        let mut out = Vec::with_capacity(self.kernel.params.len());
        let kernel = self.kernel;
        for (param, slot) in kernel.params.iter().zip(&layout.params) {
            let (Param::Scalar { ty, .. }, ParamSlot::Scalar { word }) = (param, slot) else {
                out.push(None);
                continue;
            };
            let block = block.ok_or_else(|| internal("scalar parameter without a scalar block"))?;
            let base = self.f.expr(Expression::GlobalVariable(block));
            let ptr = self.e(Expression::AccessIndex { base, index: *word });
            let bits = self.e(Expression::Load { pointer: ptr });
            let h = match ty {
                ScalarType::U32 => bits,
                ScalarType::I32 => self.bitcast(bits, ScalarKind::Sint),
                ScalarType::F32 => self.bitcast(bits, ScalarKind::Float),
                ScalarType::Bool => {
                    let zero = self.lit_u32(0);
                    self.binary(BinaryOperator::NotEqual, bits, zero)
                }
                ScalarType::F16 => self.f16_bits_to_f32(bits, 1)?,
                ScalarType::Bf16 => {
                    let sixteen = self.lit_u32(16);
                    let high = self.binary(BinaryOperator::ShiftLeft, bits, sixteen);
                    self.bitcast(high, ScalarKind::Float)
                }
                other => return Err(types::unsupported_type(*other)),
            };
            out.push(Some(Val {
                h,
                ty: Type::scalar(*ty),
            }));
        }
        Ok(out)
    }

    fn finish(self) -> Result<naga::Module, CodegenError> {
        let Lower {
            kernel,
            mut module,
            f,
            ..
        } = self;
        let function = f
            .finish()
            .ok_or_else(|| internal("unbalanced blocks in the entry point"))?;
        module.entry_points.push(naga::EntryPoint {
            name: ENTRY_POINT.to_string(),
            stage: naga::ShaderStage::Compute,
            early_depth_test: None,
            workgroup_size: kernel.workgroup_size,
            workgroup_size_overrides: None,
            function,
            mesh_info: None,
            task_payload: None,
            incoming_ray_payload: None,
        });
        Ok(module)
    }

    // -- values of parameters, builtins, locals ---------------------------------------

    pub(super) fn scalar_param(&self, p: kernelc_ir::ParamId) -> Result<Val, CodegenError> {
        self.scalars
            .get(p.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| internal(format!("parameter #{} is not a scalar", p.0)))
    }

    pub(super) fn builtin(&self, builtin: Builtin, axis: u8) -> Result<Val, CodegenError> {
        let index = BUILTINS
            .iter()
            .position(|(b, _)| *b == builtin)
            .ok_or_else(|| internal(format!("unknown builtin {builtin:?}")))?;
        let h = self
            .builtins
            .get(index)
            .and_then(|axes| axes.get(axis as usize))
            .copied()
            .ok_or_else(|| internal(format!("builtin axis {axis}")))?;
        Ok(Val { h, ty: Type::U32 })
    }

    pub(super) fn local_ptr(
        &self,
        id: LocalId,
    ) -> Result<(Handle<Expression>, Type), CodegenError> {
        let ptr = self
            .locals
            .get(id.0 as usize)
            .copied()
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))?;
        let ty = self
            .kernel
            .local(id)
            .map(|d| d.ty)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))?;
        Ok((ptr, ty))
    }

    // -- statements -------------------------------------------------------------------

    fn block(&mut self, stmts: &[Stmt]) -> Result<Flow, CodegenError> {
        for s in stmts {
            if self.stmt(s)? == Flow::Returned {
                return Ok(Flow::Returned);
            }
        }
        Ok(Flow::Continue)
    }

    /// Lowers `stmts` into a fresh nested block.
    fn nested(&mut self, stmts: &[Stmt]) -> Result<(Block, Flow), CodegenError> {
        self.f.open();
        let flow = self.block(stmts)?;
        let block = self.close()?;
        Ok((block, flow))
    }

    pub(super) fn close(&mut self) -> Result<Block, CodegenError> {
        self.f
            .close()
            .ok_or_else(|| internal("closing the function body as a nested block"))
    }

    /// `if cond { .. }` around the statements `then` emits (`cond` a scalar bool).
    pub(super) fn if_then(
        &mut self,
        cond: Handle<Expression>,
        then: impl FnOnce(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        self.f.open();
        then(self)?;
        let accept = self.close()?;
        self.f.stmt(Statement::If {
            condition: cond,
            accept,
            reject: Block::new(),
        });
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<Flow, CodegenError> {
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let v = self.expr(value)?;
                let (pointer, _) = self.local_ptr(*local)?;
                self.f.stmt(Statement::Store {
                    pointer,
                    value: v.h,
                });
            }
            Stmt::Store { mem, index, value } => {
                let i = self.expr(index)?;
                let v = self.expr(value)?;
                self.store(*mem, i, index, v)?;
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.expr(cond)?;
                let (accept, then_flow) = self.nested(then_body)?;
                let (reject, else_flow) = self.nested(else_body)?;
                self.f.stmt(Statement::If {
                    condition: c.h,
                    accept,
                    reject,
                });
                if then_flow == Flow::Returned && else_flow == Flow::Returned {
                    return Ok(Flow::Returned);
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_(*var, start, end, *step, body)?,
            Stmt::Return => {
                self.f.stmt(Statement::Return { value: None });
                return Ok(Flow::Returned);
            }
            Stmt::Barrier => self.f.stmt(Statement::ControlBarrier(self.barrier)),
            Stmt::Fragment(_) => return Err(CodegenError::unexpanded_fragments(super::TARGET)),
            Stmt::AsyncCopy(_) => return Err(CodegenError::unexpanded_async_copies(super::TARGET)),
        }
        Ok(Flow::Continue)
    }

    /// `for var in start..end by step`, as the interpreter runs it: `start` and `end`
    /// evaluated once, and a step that would pass the counter type's maximum ends the
    /// loop instead of wrapping (the interpreter counts in 64 bits). Emitted as
    ///
    /// ```text
    /// counter = start;
    /// if start < end {
    ///     loop {
    ///         var = counter; body
    ///         continuing {
    ///             let left = u32(end) - u32(counter);   // > 0, exact in u32
    ///             counter = counter + step;             // used only if it fits
    ///             break if left <= step;                // i.e. counter + step >= end
    ///         }
    ///     }
    /// }
    /// ```
    fn for_(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: u32,
        body: &[Stmt],
    ) -> Result<(), CodegenError> {
        let (var_ptr, ty) = self.local_ptr(var)?;
        let signed = match ty.scalar {
            ScalarType::I32 if ty.lanes == 1 => true,
            ScalarType::U32 if ty.lanes == 1 => false,
            _ => return Err(internal(format!("loop counter of type {ty}"))),
        };
        let s = self.expr(start)?;
        let e = self.expr(end)?;
        let naga_ty = types::value_type(&mut self.module.types, ty)?;
        let counter = self.f.local("kernelc_counter", naga_ty);
        self.f.stmt(Statement::Store {
            pointer: counter,
            value: s.h,
        });
        let enter = self.binary(BinaryOperator::Less, s.h, e.h);

        self.f.open(); // if start < end
        self.f.open(); // loop body
        let current = self.e(Expression::Load { pointer: counter });
        self.f.stmt(Statement::Store {
            pointer: var_ptr,
            value: current,
        });
        self.block(body)?;
        let loop_body = self.close()?;

        self.f.open(); // continuing
        let current = self.e(Expression::Load { pointer: counter });
        let (end_u, cur_u) = if signed {
            (
                self.bitcast(e.h, ScalarKind::Uint),
                self.bitcast(current, ScalarKind::Uint),
            )
        } else {
            (e.h, current)
        };
        let left = self.binary(BinaryOperator::Subtract, end_u, cur_u);
        let step_u = self.lit_u32(step);
        let done = self.binary(BinaryOperator::LessEqual, left, step_u);
        let step_t = if signed {
            // The same bits; the wrapped sum is used only when the true sum fits.
            self.f
                .expr(Expression::Literal(naga::Literal::I32(step as i32)))
        } else {
            step_u
        };
        let next = self.binary(BinaryOperator::Add, current, step_t);
        self.f.stmt(Statement::Store {
            pointer: counter,
            value: next,
        });
        let continuing = self.close()?;

        self.f.stmt(Statement::Loop {
            body: loop_body,
            continuing,
            break_if: Some(done),
        });
        let accept = self.close()?;
        self.f.stmt(Statement::If {
            condition: enter,
            accept,
            reject: Block::new(),
        });
        Ok(())
    }
}

fn binding(binding: u32) -> Option<ResourceBinding> {
    Some(ResourceBinding { group: 0, binding })
}

fn global(
    module: &mut naga::Module,
    name: &str,
    space: AddressSpace,
    binding: Option<ResourceBinding>,
    ty: Handle<naga::Type>,
) -> Handle<naga::GlobalVariable> {
    module.global_variables.append(
        naga::GlobalVariable {
            name: Some(name.to_string()),
            space,
            binding,
            ty,
            init: None,
            memory_decorations: naga::MemoryDecorations::empty(),
        },
        Span::UNDEFINED,
    )
}

/// `array<T>` (runtime-sized) or `array<T, n>` of a memory element type, or, with
/// `lanes` > 1, `array<vecN<T>>`: the same bytes, one element per `lanes` of them
/// (only for 4-byte `T`, whose `vec2`/`vec4` have no padding: the stride is the size).
fn array_of(
    module: &mut naga::Module,
    elem: ScalarType,
    lanes: u8,
    size: ArraySize,
) -> Result<Handle<naga::Type>, CodegenError> {
    let s = types::memory_scalar(elem)?;
    let inner = types::inner(s, lanes)?;
    let base = types::intern(&mut module.types, inner);
    Ok(types::intern(
        &mut module.types,
        TypeInner::Array {
            base,
            size,
            stride: s.width as u32 * lanes as u32,
        },
    ))
}

/// One storage buffer per buffer parameter, at binding = parameter index.
fn declare_buffers(
    module: &mut naga::Module,
    kernel: &Kernel,
    layout: &ShaderLayout,
    views: &[Option<u8>],
) -> Result<Vec<Option<Handle<naga::GlobalVariable>>>, CodegenError> {
    let mut out = Vec::with_capacity(kernel.params.len());
    for (p, (param, slot)) in kernel.params.iter().zip(&layout.params).enumerate() {
        let (
            Param::Buffer {
                name, elem, access, ..
            },
            ParamSlot::Buffer { binding: b },
        ) = (param, slot)
        else {
            out.push(None);
            continue;
        };
        let lanes = views.get(p).copied().flatten().unwrap_or(1);
        let ty = if Packing::of(*elem).is_some() && access.can_write() {
            // Packed words that stores change one element at a time: atomics.
            let atomic = types::intern(&mut module.types, TypeInner::Atomic(naga::Scalar::U32));
            types::intern(
                &mut module.types,
                TypeInner::Array {
                    base: atomic,
                    size: ArraySize::Dynamic,
                    stride: 4,
                },
            )
        } else {
            array_of(module, *elem, lanes, ArraySize::Dynamic)?
        };
        let access = if access.can_write() {
            StorageAccess::LOAD | StorageAccess::STORE
        } else {
            StorageAccess::LOAD
        };
        let space = AddressSpace::Storage { access };
        out.push(Some(global(module, name, space, binding(*b), ty)));
    }
    Ok(out)
}

/// One workgroup array per shared declaration (a zero-length array, which WGSL
/// cannot declare, gets one element that no access reaches: every access of it fails
/// its bounds check).
fn declare_shared(
    module: &mut naga::Module,
    kernel: &Kernel,
) -> Result<Vec<Handle<naga::GlobalVariable>>, CodegenError> {
    let mut out = Vec::with_capacity(kernel.shared.len());
    for s in &kernel.shared {
        let len = NonZeroU32::new(s.len.max(1)).unwrap_or(NonZeroU32::MIN);
        let ty = array_of(module, s.elem, 1, ArraySize::Constant(len))?;
        out.push(global(module, &s.name, AddressSpace::WorkGroup, None, ty));
    }
    Ok(out)
}

/// The read-only `array<u32>` of packed scalar words, if the kernel has scalars.
fn declare_scalar_block(
    module: &mut naga::Module,
    layout: &ShaderLayout,
) -> Option<Handle<naga::GlobalVariable>> {
    let b = layout.scalar_binding?;
    let u32_ty = types::intern(&mut module.types, TypeInner::Scalar(naga::Scalar::U32));
    let ty = types::intern(
        &mut module.types,
        TypeInner::Array {
            base: u32_ty,
            size: ArraySize::Dynamic,
            stride: 4,
        },
    );
    let space = AddressSpace::Storage {
        access: StorageAccess::LOAD,
    };
    Some(global(module, "kernelc_scalars", space, binding(b), ty))
}

/// The status word: `array<atomic<u32>, 1>`, read-write.
fn declare_status(
    module: &mut naga::Module,
    layout: &ShaderLayout,
) -> Handle<naga::GlobalVariable> {
    let atomic = types::intern(&mut module.types, TypeInner::Atomic(naga::Scalar::U32));
    let ty = types::intern(
        &mut module.types,
        TypeInner::Array {
            base: atomic,
            size: ArraySize::Constant(NonZeroU32::MIN),
            stride: 4,
        },
    );
    let space = AddressSpace::Storage {
        access: StorageAccess::LOAD | StorageAccess::STORE,
    };
    global(
        module,
        "kernelc_status",
        space,
        binding(layout.status_binding),
        ty,
    )
}
