//! Kernel IR -> Cranelift IR for one kernel function.
//!
//! [`define_kernel`] builds the function described in the [`crate::cpu`] module
//! documentation: it loads the arguments once in the entry block, runs the body once
//! (one invocation per workgroup) or in a loop over the local invocations (several
//! invocations, no barrier), and returns the status word.
//!
//! Submodules: [`value`] (lowered values and their representations), `expr`
//! (expressions), `scalar` (per-lane operators), `cast`, `half` (f16/bf16 conversions),
//! `memory` (checked loads and stores).

mod cast;
mod expr;
mod half;
mod memory;
mod scalar;
pub(crate) mod value;

use super::helpers::HelperId;
use super::isa::Features;
use super::TARGET;
use crate::CodegenError;
use cranelift_codegen::ir::{
    types, AbiParam, Block, FuncRef, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::{FuncId, Linkage, Module};
use kernelc_ir::analysis::Ranges;
use kernelc_ir::{Builtin, Kernel, LocalId, Param, Scalar, ScalarType, Stmt, Type};
use std::collections::BTreeMap;
use value::Val;

/// An internal inconsistency (the IR was validated, so this is a kernelc bug).
pub(crate) fn internal(what: impl Into<String>) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: format!("internal error: {}", what.into()),
    }
}

fn backend(what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: what.to_string(),
    }
}

/// The C signature of every compiled kernel (see the module documentation of
/// [`crate::cpu`]): five pointers in, a `u32` status out.
pub(crate) fn kernel_signature<M: Module>(module: &M) -> Signature {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for _ in 0..5 {
        sig.params.push(AbiParam::new(ptr));
    }
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// Builds the kernel's function and defines it as `func_id` in `module`. Returns the
/// CLIF text of the function when `want_text` is set (before Cranelift optimises it).
pub(crate) fn define_kernel<M: Module>(
    module: &mut M,
    kernel: &Kernel,
    features: Features,
    func_id: FuncId,
    want_text: bool,
) -> Result<Option<String>, CodegenError> {
    define_kernel_cached(module, kernel, features, func_id, want_text, None)
}

/// [`define_kernel`], reusing machine code from `store` when it holds this function's
/// compiled form (Cranelift's incremental cache, keyed by a hash of the function and
/// the ISA), and adding it there otherwise.
pub(crate) fn define_kernel_cached<M: Module>(
    module: &mut M,
    kernel: &Kernel,
    features: Features,
    func_id: FuncId,
    want_text: bool,
    store: Option<&mut dyn super::CodeStore>,
) -> Result<Option<String>, CodegenError> {
    let mut ctx = module.make_context();
    ctx.func.signature = kernel_signature(module);
    ctx.func.name = UserFuncName::user(0, func_id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    {
        let builder = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let mut lower = Lower::new(builder, module, kernel, features)?;
        lower.build_body()?;
        lower.finish();
    }
    let text = want_text.then(|| ctx.func.display().to_string());
    match store {
        Some(store) => define_from_store(module, func_id, &mut ctx, store)?,
        None => define(module, func_id, &mut ctx)?,
    }
    Ok(text)
}

/// Compiles through Cranelift's incremental cache backed by `store`, then defines the
/// resulting bytes (a cache hit skips code generation entirely).
fn define_from_store<M: Module>(
    module: &mut M,
    id: FuncId,
    ctx: &mut Context,
    store: &mut dyn super::CodeStore,
) -> Result<(), CodegenError> {
    let mut kv = StoreAdapter(std::cell::RefCell::new(store));
    let (bytes, alignment, mach_relocs) = {
        let (code, _hit) = ctx
            .compile_with_cache(module.isa(), &mut kv, &mut Default::default())
            .map_err(|e| {
                backend(cranelift_codegen::print_errors::pretty_error(
                    e.func, e.inner,
                ))
            })?;
        (
            code.code_buffer().to_vec(),
            code.buffer.alignment as u64,
            code.buffer.relocs().to_vec(),
        )
    };
    let relocs: Vec<cranelift_module::ModuleReloc> = mach_relocs
        .iter()
        .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    module
        .define_function_bytes(id, alignment, &bytes, &relocs)
        .map_err(backend)
}

/// Cranelift's key-value cache interface over a [`super::CodeStore`].
struct StoreAdapter<'s>(std::cell::RefCell<&'s mut dyn super::CodeStore>);

impl cranelift_codegen::incremental_cache::CacheKvStore for StoreAdapter<'_> {
    fn get(&self, key: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.0.borrow_mut().load(key).map(std::borrow::Cow::Owned)
    }

    fn insert(&mut self, key: &[u8], val: Vec<u8>) {
        self.0.get_mut().store(key, val);
    }
}

fn define<M: Module>(module: &mut M, id: FuncId, ctx: &mut Context) -> Result<(), CodegenError> {
    match module.define_function(id, ctx) {
        Ok(()) => Ok(()),
        Err(cranelift_module::ModuleError::Compilation(e)) => Err(backend(
            cranelift_codegen::print_errors::pretty_error(&ctx.func, e),
        )),
        Err(e) => Err(backend(e)),
    }
}

/// Whether control continues after a statement or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// The invocation returned: the current Cranelift block is terminated.
    Returned,
}

/// Where the local invocation ids come from.
enum LocalIds {
    /// One invocation per workgroup: all zero.
    Zero(Value),
    /// A loop over the invocations: `x`, `y`, `z` counters.
    Loop([Variable; 3]),
}

/// The state of lowering one kernel.
pub(crate) struct Lower<'a, 'f, M: Module> {
    pub(crate) b: FunctionBuilder<'f>,
    module: &'a mut M,
    kernel: &'a Kernel,
    pub(crate) features: Features,
    ptr_ty: cranelift_codegen::ir::Type,
    helper_refs: BTreeMap<HelperId, FuncRef>,
    /// Base address of each buffer parameter (by parameter index).
    buffers: Vec<Option<Value>>,
    /// Value of each scalar parameter (by parameter index).
    scalars: Vec<Option<Val>>,
    /// Base address of each shared array.
    shared: Vec<Value>,
    wg_id: [Value; 3],
    num_wg: [Value; 3],
    local_ids: LocalIds,
    /// Value ranges of the kernel's index expressions (which access checks can go).
    ranges: Ranges,
    /// The canonical CLIF variables of each IR local.
    locals: Vec<Vec<Variable>>,
    status: Variable,
    /// Where `return` goes: the end of the current invocation.
    ret_block: Option<Block>,
    exit: Block,
}

impl<'a, 'f, M: Module> Lower<'a, 'f, M> {
    fn new(
        mut b: FunctionBuilder<'f>,
        module: &'a mut M,
        kernel: &'a Kernel,
        features: Features,
    ) -> Result<Self, CodegenError> {
        let ptr_ty = module.target_config().pointer_type();
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let &[buffers_ptr, scalars_ptr, wg_ptr, nwg_ptr, shared_ptr] = params.as_slice() else {
            return Err(internal("kernel signature does not have five parameters"));
        };
        let exit = b.create_block();
        let status = b.declare_var(types::I32);
        let zero = b.ins().iconst(types::I32, 0);
        b.def_var(status, zero);
        let mut lower = Lower {
            b,
            module,
            kernel,
            features,
            ptr_ty,
            helper_refs: BTreeMap::new(),
            buffers: Vec::new(),
            scalars: Vec::new(),
            shared: Vec::new(),
            wg_id: [zero; 3],
            num_wg: [zero; 3],
            local_ids: LocalIds::Zero(zero),
            ranges: Ranges::of(kernel),
            locals: Vec::new(),
            status,
            ret_block: None,
            exit,
        };
        lower.load_params(buffers_ptr, scalars_ptr)?;
        lower.load_grid(wg_ptr, nwg_ptr, shared_ptr);
        lower.declare_locals();
        Ok(lower)
    }

    /// Flags for loads of the argument arrays: aligned, in bounds, never written.
    fn arg_flags() -> MemFlagsData {
        MemFlagsData::trusted().with_readonly()
    }

    fn load_params(&mut self, buffers_ptr: Value, scalars_ptr: Value) -> Result<(), CodegenError> {
        let ptr_bytes = self.ptr_ty.bytes() as i32;
        for (i, param) in self.kernel.params.iter().enumerate() {
            match param {
                Param::Buffer { .. } => {
                    let base = self.b.ins().load(
                        self.ptr_ty,
                        Self::arg_flags(),
                        buffers_ptr,
                        i as i32 * ptr_bytes,
                    );
                    self.buffers.push(Some(base));
                    self.scalars.push(None);
                }
                Param::Scalar { ty, .. } => {
                    let bits =
                        self.b
                            .ins()
                            .load(types::I64, Self::arg_flags(), scalars_ptr, i as i32 * 8);
                    let v = self.scalar_from_bits(*ty, bits);
                    self.buffers.push(None);
                    self.scalars.push(Some(Val::scalar(*ty, v)));
                }
            }
        }
        Ok(())
    }

    /// A scalar of type `ty` from its encoding in a `u64` (see `cpu::encode_scalar`).
    fn scalar_from_bits(&mut self, ty: ScalarType, bits: Value) -> Value {
        let ins = |b: &mut FunctionBuilder<'f>, t| b.ins().ireduce(t, bits);
        match ty {
            ScalarType::Bool => {
                self.b
                    .ins()
                    .icmp_imm_u(cranelift_codegen::ir::condcodes::IntCC::NotEqual, bits, 0)
            }
            // (The validator refuses scalar parameters of narrow types.)
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => ins(&mut self.b, types::I32),
            ScalarType::I64 => bits,
            ScalarType::F16 | ScalarType::Bf16 => ins(&mut self.b, types::I16),
            ScalarType::F32 => {
                let w = ins(&mut self.b, types::I32);
                self.b.ins().bitcast(types::F32, MemFlagsData::new(), w)
            }
            ScalarType::F64 => self.b.ins().bitcast(types::F64, MemFlagsData::new(), bits),
        }
    }

    fn load_grid(&mut self, wg_ptr: Value, nwg_ptr: Value, shared_ptr: Value) {
        for axis in 0..3 {
            let off = axis as i32 * 4;
            self.wg_id[axis] = self
                .b
                .ins()
                .load(types::I32, Self::arg_flags(), wg_ptr, off);
            self.num_wg[axis] = self
                .b
                .ins()
                .load(types::I32, Self::arg_flags(), nwg_ptr, off);
        }
        let (offsets, _) = crate::abi::cpu_shared_layout(self.kernel);
        for off in offsets {
            let base = self.b.ins().iadd_imm_u(shared_ptr, off as i64);
            self.shared.push(base);
        }
    }

    fn declare_locals(&mut self) {
        for decl in &self.kernel.locals {
            let types = self.canonical_types(decl.ty);
            let mut vars = Vec::with_capacity(types.len());
            for t in types {
                let var = self.b.declare_var(t);
                let zero = self.zero_of(t);
                self.b.def_var(var, zero);
                vars.push(var);
            }
            self.locals.push(vars);
        }
    }

    /// Emits the body: once, or in a loop over the local invocations.
    fn build_body(&mut self) -> Result<(), CodegenError> {
        let body = &self.kernel.body;
        if self.kernel.invocations_per_workgroup() == 1 {
            self.ret_block = Some(self.exit);
            if self.block(body)? == Flow::Continue {
                self.b.ins().jump(self.exit, &[]);
            }
        } else {
            self.invocation_loop(body)?;
        }
        self.b.switch_to_block(self.exit);
        let status = self.b.use_var(self.status);
        self.b.ins().return_(&[status]);
        Ok(())
    }

    /// `for z, for y, for x { body }` over the local ids, as one loop with carries.
    fn invocation_loop(&mut self, body: &[Stmt]) -> Result<(), CodegenError> {
        let vars = [
            self.b.declare_var(types::I32),
            self.b.declare_var(types::I32),
            self.b.declare_var(types::I32),
        ];
        let zero = self.b.ins().iconst(types::I32, 0);
        for v in vars {
            self.b.def_var(v, zero);
        }
        self.local_ids = LocalIds::Loop(vars);
        let inv = self.b.create_block();
        let next = self.b.create_block();
        self.b.ins().jump(inv, &[]);
        self.b.switch_to_block(inv);
        self.ret_block = Some(next);
        if self.block(body)? == Flow::Continue {
            self.b.ins().jump(next, &[]);
        }
        self.b.switch_to_block(next);
        let size = self.kernel.workgroup_size;
        let mut carry = self.b.ins().iconst(types::I32, 1);
        for axis in 0..3 {
            let cur = self.b.use_var(vars[axis]);
            let bumped = self.b.ins().iadd(cur, carry);
            let limit = self.iconst(types::I32, size[axis] as u64);
            let wrapped = self.b.ins().icmp(
                cranelift_codegen::ir::condcodes::IntCC::Equal,
                bumped,
                limit,
            );
            let new = if axis < 2 {
                self.b.ins().select(wrapped, zero, bumped)
            } else {
                bumped
            };
            self.b.def_var(vars[axis], new);
            carry = self.b.ins().uextend(types::I32, wrapped);
        }
        // `carry` is 1 when z wrapped past its size: every invocation ran.
        self.b.ins().brif(carry, self.exit, &[], inv, &[]);
        Ok(())
    }

    fn finish(mut self) {
        self.b.seal_all_blocks();
        let config = self.module.target_config();
        self.b.finalize(config);
    }

    // -- statements -----------------------------------------------------------------

    fn block(&mut self, stmts: &[Stmt]) -> Result<Flow, CodegenError> {
        for s in stmts {
            if self.stmt(s)? == Flow::Returned {
                return Ok(Flow::Returned);
            }
        }
        Ok(Flow::Continue)
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<Flow, CodegenError> {
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let v = self.expr(value)?;
                self.write_local(*local, &v)?;
            }
            Stmt::Store { mem, index, value } => {
                let i = self.expr(index)?;
                let i = self.scalar_of(&i);
                let v = self.expr(value)?;
                self.store(*mem, i, index, &v)?;
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => return self.if_(cond, then_body, else_body),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => return self.for_(*var, start, end, *step, body),
            Stmt::Return => {
                let target = self
                    .ret_block
                    .ok_or_else(|| internal("return outside body"))?;
                self.b.ins().jump(target, &[]);
                return Ok(Flow::Returned);
            }
            // One invocation per workgroup (or no barrier at all): nothing to wait for.
            Stmt::Barrier => {}
            Stmt::Fragment(_) => return Err(CodegenError::unexpanded_fragments(super::TARGET)),
            Stmt::AsyncCopy(_) => return Err(CodegenError::unexpanded_async_copies(super::TARGET)),
        }
        Ok(Flow::Continue)
    }

    fn if_(
        &mut self,
        cond: &kernelc_ir::Expr,
        then_body: &[Stmt],
        else_body: &[Stmt],
    ) -> Result<Flow, CodegenError> {
        let c = self.expr(cond)?;
        let c = self.scalar_of(&c);
        let then_b = self.b.create_block();
        let else_b = self.b.create_block();
        self.b.ins().brif(c, then_b, &[], else_b, &[]);
        let mut merge = None;
        for (block, body) in [(then_b, then_body), (else_b, else_body)] {
            self.b.switch_to_block(block);
            if self.block(body)? == Flow::Continue {
                let m = *merge.get_or_insert_with(|| self.b.create_block());
                self.b.ins().jump(m, &[]);
            }
        }
        match merge {
            Some(m) => {
                self.b.switch_to_block(m);
                Ok(Flow::Continue)
            }
            None => Ok(Flow::Returned),
        }
    }

    /// `for var in start..end by step`: the counter runs in i64, so a step past the
    /// counter type's maximum ends the loop instead of wrapping (as in the interpreter).
    fn for_(
        &mut self,
        var: LocalId,
        start: &kernelc_ir::Expr,
        end: &kernelc_ir::Expr,
        step: u32,
        body: &[Stmt],
    ) -> Result<Flow, CodegenError> {
        use cranelift_codegen::ir::condcodes::IntCC;
        let ty = self.local_type(var)?;
        let signed = ty == Type::I32;
        let s = self.expr(start)?;
        let s = self.scalar_of(&s);
        let e = self.expr(end)?;
        let e = self.scalar_of(&e);
        let widen = |b: &mut FunctionBuilder<'f>, v| {
            if signed {
                b.ins().sextend(types::I64, v)
            } else {
                b.ins().uextend(types::I64, v)
            }
        };
        let s64 = widen(&mut self.b, s);
        let e64 = widen(&mut self.b, e);
        let cur = self.b.declare_var(types::I64);
        self.b.def_var(cur, s64);
        let header = self.b.create_block();
        let body_b = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let c = self.b.use_var(cur);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, c, e64);
        self.b.ins().brif(more, body_b, &[], exit, &[]);
        self.b.switch_to_block(body_b);
        let counter = self.b.ins().ireduce(types::I32, c);
        self.write_local(var, &Val::scalar(ty.scalar, counter))?;
        if self.block(body)? == Flow::Continue {
            let next = self.b.ins().iadd_imm_u(c, step as i64);
            self.b.def_var(cur, next);
            self.b.ins().jump(header, &[]);
        }
        self.b.switch_to_block(exit);
        Ok(Flow::Continue)
    }

    // -- locals ---------------------------------------------------------------------

    fn local_type(&self, id: LocalId) -> Result<Type, CodegenError> {
        self.kernel
            .local(id)
            .map(|d| d.ty)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))
    }

    fn write_local(&mut self, id: LocalId, v: &Val) -> Result<(), CodegenError> {
        let values = self.canonical(v);
        let vars = self
            .locals
            .get(id.0 as usize)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))?;
        if vars.len() != values.len() {
            return Err(internal(format!(
                "local #{} holds {} values, {} given",
                id.0,
                vars.len(),
                values.len()
            )));
        }
        for (&var, &value) in vars.iter().zip(&values) {
            self.b.def_var(var, value);
        }
        Ok(())
    }

    fn read_local(&mut self, id: LocalId) -> Result<Val, CodegenError> {
        let ty = self.local_type(id)?;
        let vars = self
            .locals
            .get(id.0 as usize)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))?
            .clone();
        let values = vars.into_iter().map(|v| self.b.use_var(v)).collect();
        Ok(self.rebuild(ty, values))
    }

    // -- builtins, literals, status ---------------------------------------------------

    fn local_id(&mut self, axis: usize) -> Value {
        match &self.local_ids {
            LocalIds::Zero(z) => *z,
            LocalIds::Loop(vars) => {
                let v = vars[axis];
                self.b.use_var(v)
            }
        }
    }

    fn builtin(&mut self, builtin: Builtin, axis: u8) -> Result<Value, CodegenError> {
        let a = axis as usize;
        if a > 2 {
            return Err(internal(format!("builtin axis {axis}")));
        }
        Ok(match builtin {
            Builtin::LocalId => self.local_id(a),
            Builtin::WorkgroupId => self.wg_id[a],
            Builtin::NumWorkgroups => self.num_wg[a],
            Builtin::GlobalId => {
                let size = self.kernel.workgroup_size[a];
                let base = self.b.ins().imul_imm_u(self.wg_id[a], size as i64);
                let lid = self.local_id(a);
                self.b.ins().iadd(base, lid)
            }
        })
    }

    /// An integer constant of a CLIF integer type from its bits (masked to the width).
    pub(crate) fn iconst(&mut self, ty: cranelift_codegen::ir::Type, bits: u64) -> Value {
        let width = ty.bits();
        let masked = if width >= 64 {
            bits
        } else {
            bits & ((1u64 << width) - 1)
        };
        self.b.ins().iconst(ty, masked as i64)
    }

    fn literal(&mut self, s: Scalar) -> Val {
        use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
        let v = match s {
            Scalar::Bool(b) => self.iconst(types::I8, b as u64),
            Scalar::I32(v) => self.iconst(types::I32, v as u32 as u64),
            Scalar::U32(v) => self.iconst(types::I32, v as u64),
            Scalar::I64(v) => self.iconst(types::I64, v as u64),
            Scalar::F16(b) | Scalar::Bf16(b) => self.iconst(types::I16, b as u64),
            Scalar::F32(b) => self.b.ins().f32const(Ieee32::with_bits(b)),
            Scalar::F64(b) => self.b.ins().f64const(Ieee64::with_bits(b)),
        };
        Val::scalar(s.ty(), v)
    }

    /// ORs `bits` (an i32) into the status word.
    pub(crate) fn raise(&mut self, bits: Value) {
        let s = self.b.use_var(self.status);
        let s = self.b.ins().bor(s, bits);
        self.b.def_var(self.status, s);
    }

    /// ORs `bit` into the status word when `cond` (a bool) holds.
    pub(crate) fn raise_if(&mut self, cond: Value, bit: u32) {
        let on = self.iconst(types::I32, bit as u64);
        let off = self.iconst(types::I32, 0);
        let bits = self.b.ins().select(cond, on, off);
        self.raise(bits);
    }

    /// Calls a helper, importing it into the function on first use.
    pub(crate) fn call_helper(
        &mut self,
        id: HelperId,
        args: &[Value],
    ) -> Result<Value, CodegenError> {
        let fref = match self.helper_refs.get(&id) {
            Some(f) => *f,
            None => {
                let h = id.helper();
                let mut sig = self.module.make_signature();
                sig.params
                    .extend(h.params.iter().map(|&t| AbiParam::new(t)));
                sig.returns.push(AbiParam::new(h.ret));
                let fid = self
                    .module
                    .declare_function(h.name, Linkage::Import, &sig)
                    .map_err(backend)?;
                let fref = self.module.declare_func_in_func(fid, self.b.func);
                self.helper_refs.insert(id, fref);
                fref
            }
        };
        let call = self.b.ins().call(fref, args);
        self.b
            .inst_results(call)
            .first()
            .copied()
            .ok_or_else(|| internal(format!("helper `{}` returned nothing", id.helper().name)))
    }
}
