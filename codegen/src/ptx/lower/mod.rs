//! Kernel IR -> LLVM IR for one kernel function.
//!
//! [`build_module`] creates the module (NVPTX triple and data layout), the kernel
//! function with the ABI of [`crate::ptx`], and its body:
//!
//! * an entry block with one `alloca` per lane of every IR local (zero-initialised),
//!   per loop counter and for the status accumulator (LLVM's `mem2reg`/SROA turn them
//!   into SSA values), and the decoding of scalar parameters;
//! * the statements, structured as the IR is (an `if` is a conditional branch and a
//!   merge block, a `for` a header/body/exit triple, a `return` a branch to the exit);
//! * the exit block, where an invocation whose status is nonzero ORs it atomically
//!   into the status word (once per invocation, not once per error).
//!
//! Submodules: [`value`] (lowered values, LLVM types), `expr` (expressions), `scalar`
//! (per-lane operators), `cast`, `memory` (checked loads and stores).

mod cast;
mod copy;
mod expr;
mod flavor;
mod fragment;
mod fragment_rows;
mod memory;
mod narrow;
mod scalar;
pub(super) mod value;
mod warpgroup;

pub(crate) use warpgroup::uses_warpgroups;

pub(crate) use flavor::{check_cpu_supported, Flavor};

use super::{internal, unsupported};
use crate::abi::ENTRY_POINT;
use crate::CodegenError;
use inkwell::attributes::AttributeLoc;
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue, ValueKind,
};
use inkwell::{AddressSpace, AtomicOrdering, AtomicRMWBinOp, IntPredicate};
use kernelc_ir::analysis::Ranges;
use kernelc_ir::{Builtin, Expr, Kernel, LocalId, Param, ScalarType, Stmt, Type};
use value::{int, Val};

/// LLVM's `ptx_kernel` calling convention (`CallingConv::PTX_Kernel`): marks the
/// function as a `.entry`. (LLVM 22 ignores the old `nvvm.annotations` metadata.)
const PTX_KERNEL_CC: u32 = 71;
/// NVPTX address spaces.
pub(super) const GLOBAL: u16 = 1;
pub(super) const SHARED: u16 = 3;
/// Alignment of every shared array (bytes).
pub(super) const SHARED_ALIGN: u32 = 16;
/// Alignment the runtime guarantees for buffer arguments (CUDA allocations are
/// 256-byte aligned; 16 is all the widest access, 128 bits, needs).
pub(super) const BUFFER_ALIGN: u32 = 16;

/// CUDA's limits on a block (every SM kernelc accepts).
const MAX_THREADS_PER_BLOCK: u64 = 1024;
const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Static shared memory a kernel may declare (CUDA's limit without opt-in).
const MAX_STATIC_SHARED_BYTES: u64 = 48 * 1024;
/// Shared memory a block may have at all, past the static limit as dynamic shared
/// memory the launch opts into (sm_90's limit; older SMs' drivers refuse more at
/// load, which the runtime reports).
const MAX_DYNAMIC_SHARED_BYTES: u64 = 227 * 1024;

/// The dynamic shared memory `kernel`'s PTX declares, which its launch must pass
/// (and opt into past 48 KiB): the padded size of its shared arrays where they
/// exceed the static limit, else 0 (static arrays, nothing to pass).
pub fn dynamic_shared_bytes(kernel: &Kernel) -> u32 {
    let bytes = shared_bytes(kernel);
    if bytes > MAX_STATIC_SHARED_BYTES {
        bytes as u32
    } else {
        0
    }
}

/// Results of LLVM builder calls: a failure is a bug in the emitter (the builder is
/// always positioned, operands are well typed).
pub(super) trait OrInternal<T> {
    fn or_internal(self) -> Result<T, CodegenError>;
}

impl<T> OrInternal<T> for Result<T, BuilderError> {
    fn or_internal(self) -> Result<T, CodegenError> {
        self.map_err(|e| internal(format!("LLVM builder: {e}")))
    }
}

/// The alignment of each shared array of `kernel`: [`SHARED_ALIGN`], or 1024 bytes
/// where warpgroup fragments may read them swizzled (the tensor cores swizzle
/// absolute addresses in 1024-byte blocks, the IR's layouts absolute indices).
fn shared_align(kernel: &Kernel) -> u32 {
    if warpgroup::uses_warpgroups(kernel) {
        1024
    } else {
        SHARED_ALIGN
    }
}

/// Bytes of the shared arrays, each padded to [`shared_align`] (a set of arrays that
/// shares bytes counted once, as its largest).
fn shared_bytes(kernel: &Kernel) -> u64 {
    kernel.shared_layout(shared_align(kernel) as u64).1
}

/// Shared memory of one SM of `sm` (CUDA's table: 228 KiB from sm_90), of which each
/// resident block also takes [`BLOCK_RESERVED_SHARED_BYTES`].
fn sm_shared_bytes(sm: u32) -> u64 {
    let kib = match sm {
        90.. => 228,
        80 => 164,
        86..=89 => 100,
        70 | 72 => 96,
        _ => 64,
    };
    kib * 1024
}
const BLOCK_RESERVED_SHARED_BYTES: u64 = 1024;
/// Registers of one SM.
const SM_REGISTERS: u64 = 65536;

/// The SM number of an NVPTX target machine (`sm_90a` → 90; 0 if it has none).
fn target_sm(tm: &TargetMachine) -> u32 {
    let cpu = tm.get_cpu().to_string();
    let digits: String = cpu
        .trim_start_matches("sm_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

/// The blocks per SM to ask ptxas to fit (`.minnctapersm`, which caps a thread's
/// registers at 65536 / (blocks · threads)), if any:
/// * tensor-core tiles hold many accumulators: 2, so that the next block's loads and
///   multiplies hide this one's latency (the bf16 tile: 157 registers and one block,
///   or 128 and two, without spills), where the cap leaves room for the accumulators
///   and about 48 registers of addresses besides;
/// * other kernels with shared memory past the static 48 KiB (schedules written for
///   the opt-in memory): as many as that memory lets reside on an SM of `sm`, so that
///   registers do not lower the occupancy further (left alone, ptxas spends them on
///   scheduling: the register-blocked f32 attention took 148 registers and one block
///   where its memory allows four), where that leaves at least 64 registers.
fn blocks_per_sm(kernel: &Kernel, sm: u32) -> Option<u64> {
    let threads = kernel.invocations_per_workgroup().max(1);
    if kernel.uses_fragments() {
        let cap = SM_REGISTERS / (2 * threads);
        return (fragment::accumulator_registers(kernel) + 48 <= cap).then_some(2);
    }
    let shared = shared_bytes(kernel);
    if shared <= MAX_STATIC_SHARED_BYTES {
        return None;
    }
    let blocks = sm_shared_bytes(sm) / (shared + BLOCK_RESERVED_SHARED_BYTES);
    (blocks >= 2 && SM_REGISTERS / (blocks * threads) >= 64).then_some(blocks)
}

/// What a valid kernel may still ask for that no CUDA block can give.
pub(super) fn check_supported(kernel: &Kernel) -> Result<(), CodegenError> {
    let size = kernel.workgroup_size;
    let threads = kernel.invocations_per_workgroup();
    if threads > MAX_THREADS_PER_BLOCK || size.iter().zip(MAX_BLOCK_DIM).any(|(&d, m)| d > m) {
        return Err(unsupported(format!(
            "a workgroup of {}x{}x{} invocations (a CUDA block has at most {MAX_THREADS_PER_BLOCK} \
             threads, at most {}x{}x{})",
            size[0], size[1], size[2], MAX_BLOCK_DIM[0], MAX_BLOCK_DIM[1], MAX_BLOCK_DIM[2]
        )));
    }
    let shared = shared_bytes(kernel);
    if shared > MAX_DYNAMIC_SHARED_BYTES {
        return Err(unsupported(format!(
            "{shared} bytes of shared memory (a block has at most {MAX_DYNAMIC_SHARED_BYTES})"
        )));
    }
    Ok(())
}

/// The LLVM module of `kernel` (validated and checked by [`check_supported`] or
/// [`check_cpu_supported`]) for `tm`'s machine, as `flavor`'s function named `entry`
/// (the PTX form is always [`ENTRY_POINT`]).
pub(crate) fn build_module<'ctx>(
    context: &'ctx Context,
    kernel: &Kernel,
    tm: &TargetMachine,
    flavor: Flavor,
    entry: &str,
) -> Result<Module<'ctx>, CodegenError> {
    let module = context.create_module(&kernel.name);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let func = match flavor {
        Flavor::Ptx => declare_kernel(context, &module, kernel, target_sm(tm))?,
        Flavor::Cpu => {
            let cpu = tm.get_cpu().to_string();
            let features = tm.get_feature_string().to_string_lossy().into_owned();
            flavor::declare_cpu_kernel(context, &module, entry, (&cpu, &features))
        }
    };
    Lower::new(context, &module, kernel, func, flavor)?.build_body()?;
    Ok(module)
}

/// Whether control continues after a statement or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// The invocation returned: the current block is terminated.
    Returned,
}

/// The state of lowering one kernel.
pub(super) struct Lower<'a, 'ctx> {
    pub(super) ctx: &'ctx Context,
    module: &'a Module<'ctx>,
    pub(super) b: Builder<'ctx>,
    /// Positioned at the end of the entry block (which gets its branch to the body
    /// last): where `alloca`s go.
    allocas: Builder<'ctx>,
    entry: BasicBlock<'ctx>,
    pub(super) kernel: &'a Kernel,
    func: FunctionValue<'ctx>,
    /// Value ranges of the kernel's index expressions (which access checks can go).
    pub(super) ranges: Ranges,
    /// The pointer of each buffer parameter (by parameter index).
    pub(super) buffers: Vec<Option<PointerValue<'ctx>>>,
    /// The value of each scalar parameter (by parameter index).
    scalars: Vec<Option<Val<'ctx>>>,
    /// The `addrspace(3)` global of each shared array (the CPU form: its place in
    /// the scratch).
    pub(super) shared: Vec<PointerValue<'ctx>>,
    /// One `alloca` per lane of each IR local that needs a slot (none for one bound
    /// once: [`Kernel::locals_bound_once`]).
    locals: Vec<Vec<PointerValue<'ctx>>>,
    /// The value of each local bound once, from its `Let` as lowered last.
    bound: Vec<Option<Val<'ctx>>>,
    /// One `alloca` per element of this thread's share of each fragment.
    fragments: Vec<Vec<PointerValue<'ctx>>>,
    /// `wgmma` groups committed but not waited for at this point of the lowering
    /// ([`warpgroup::InFlight`]).
    in_flight: warpgroup::InFlight,
    depth: usize,
    /// Whether each warpgroup `A`/`B` fragment is loaded in the instruction's
    /// transposed form, recorded at its load (the validator allows one layout).
    operand_transposed: Vec<Option<bool>>,
    /// The invocation's status bits so far (an `i32` alloca).
    status: PointerValue<'ctx>,
    /// The status word (the last kernel parameter; the CPU form returns the bits).
    status_out: Option<PointerValue<'ctx>>,
    exit: BasicBlock<'ctx>,
    pub(super) flavor: Flavor,
}

impl<'a, 'ctx> Lower<'a, 'ctx> {
    fn new(
        ctx: &'ctx Context,
        module: &'a Module<'ctx>,
        kernel: &'a Kernel,
        func: FunctionValue<'ctx>,
        flavor: Flavor,
    ) -> Result<Self, CodegenError> {
        let entry = ctx.append_basic_block(func, "entry");
        let exit = ctx.append_basic_block(func, "exit");
        let allocas = ctx.create_builder();
        allocas.position_at_end(entry);
        let b = ctx.create_builder();
        b.position_at_end(entry);
        let status = allocas
            .build_alloca(ctx.i32_type(), "status")
            .or_internal()?;
        allocas
            .build_store(status, ctx.i32_type().const_zero())
            .or_internal()?;
        let status_out = match flavor {
            Flavor::Ptx => Some(
                func.get_nth_param(kernel.params.len() as u32)
                    .ok_or_else(|| internal("the kernel function lacks its status parameter"))?
                    .into_pointer_value_checked()?,
            ),
            Flavor::Cpu => None,
        };
        let mut lower = Lower {
            ctx,
            module,
            b,
            allocas,
            entry,
            kernel,
            func,
            ranges: Ranges::of(kernel),
            buffers: Vec::new(),
            scalars: Vec::new(),
            shared: Vec::new(),
            locals: Vec::new(),
            bound: Vec::new(),
            fragments: Vec::new(),
            in_flight: warpgroup::InFlight::default(),
            depth: 0,
            operand_transposed: vec![None; kernel.fragments.len()],
            status,
            status_out,
            exit,
            flavor,
        };
        match flavor {
            Flavor::Ptx => {
                lower.bind_params()?;
                lower.declare_shared()?;
            }
            Flavor::Cpu => {
                lower.bind_cpu_params()?;
                lower.bind_cpu_shared()?;
            }
        }
        lower.declare_locals()?;
        lower.declare_fragments()?;
        Ok(lower)
    }

    /// Buffer pointers and decoded scalar parameters.
    fn bind_params(&mut self) -> Result<(), CodegenError> {
        for (i, param) in self.kernel.params.iter().enumerate() {
            let value = self
                .func
                .get_nth_param(i as u32)
                .ok_or_else(|| internal(format!("the kernel function lacks parameter {i}")))?;
            match param {
                Param::Buffer { .. } => {
                    self.buffers.push(Some(value.into_pointer_value_checked()?));
                    self.scalars.push(None);
                }
                Param::Scalar { ty, .. } => {
                    let v = self.scalar_from_bits(*ty, int(value)?)?;
                    self.buffers.push(None);
                    self.scalars.push(Some(Val::scalar(*ty, v)));
                }
            }
        }
        Ok(())
    }

    /// A scalar of type `ty` from its `u64` encoding (`abi::encode_scalar_bits`).
    fn scalar_from_bits(
        &self,
        ty: ScalarType,
        bits: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let b = &self.b;
        let c = self.ctx;
        Ok(match ty {
            ScalarType::Bool => b
                .build_int_compare(IntPredicate::NE, bits, c.i64_type().const_zero(), "")
                .or_internal()?
                .into(),
            // (The validator refuses scalar parameters of narrow types.)
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => b
                .build_int_truncate(bits, c.i32_type(), "")
                .or_internal()?
                .into(),
            ScalarType::I64 => bits.into(),
            ScalarType::F16 | ScalarType::Bf16 => {
                let w = b.build_int_truncate(bits, c.i16_type(), "").or_internal()?;
                b.build_bit_cast(w, self.scalar_type(ty), "")
                    .or_internal()?
            }
            ScalarType::F32 => {
                let w = b.build_int_truncate(bits, c.i32_type(), "").or_internal()?;
                b.build_bit_cast(w, c.f32_type(), "").or_internal()?
            }
            ScalarType::F64 => b.build_bit_cast(bits, c.f64_type(), "").or_internal()?,
        })
    }

    /// One static `addrspace(3)` array per shared declaration, 16-byte aligned and
    /// padded to a multiple of 16 bytes: ptxas merges neighbouring loads into one
    /// vector load ahead of the branch that guards the second, which must then stay
    /// inside the array (compute-sanitizer's memcheck flags it otherwise; kernels
    /// still index only `decl.len` elements, every access checked or proven).
    ///
    /// Past the static limit the arrays lie one after another in the block's dynamic
    /// shared memory (one `.extern .shared` array), at the same padded sizes; so do
    /// they in one static array where some reuse another's bytes
    /// (`SharedDecl::reuses`), at the offsets of `Kernel::shared_layout`.
    fn declare_shared(&mut self) -> Result<(), CodegenError> {
        let dynamic = dynamic_shared_bytes(self.kernel) > 0;
        if dynamic || self.kernel.shared.iter().any(|s| s.reuses.is_some()) {
            return self.declare_shared_block(dynamic);
        }
        for (i, decl) in self.kernel.shared.iter().enumerate() {
            let size = decl.elem.size_bytes().max(1);
            let padded = (decl.len * size).next_multiple_of(shared_align(self.kernel)) / size;
            let ty = self.memory_type(decl.elem).array_type(padded);
            let global =
                self.module
                    .add_global(ty, Some(AddressSpace::from(SHARED)), &format!("shared{i}"));
            global.set_linkage(Linkage::Internal);
            global.set_initializer(&ty.get_poison());
            global.set_alignment(shared_align(self.kernel));
            self.shared.push(global.as_pointer_value());
        }
        Ok(())
    }

    /// Every shared array in one block of bytes: the block's dynamic shared memory,
    /// or one static array.
    fn declare_shared_block(&mut self, dynamic: bool) -> Result<(), CodegenError> {
        let i8t = self.ctx.i8_type();
        let align = shared_align(self.kernel);
        let (offsets, total) = self.kernel.shared_layout(align as u64);
        let global = if dynamic {
            let g = self.module.add_global(
                i8t.array_type(0),
                Some(AddressSpace::from(SHARED)),
                "dynamic_shared",
            );
            g.set_linkage(Linkage::External);
            g
        } else {
            let ty = i8t.array_type(total as u32);
            let g = self
                .module
                .add_global(ty, Some(AddressSpace::from(SHARED)), "shared");
            g.set_linkage(Linkage::Internal);
            g.set_initializer(&ty.get_poison());
            g
        };
        global.set_alignment(align);
        for offset in offsets {
            let at = self.ctx.i64_type().const_int(offset, false);
            // SAFETY: `build_in_bounds_gep` is unsafe only because an out-of-bounds GEP
            // is poison; `offset` is below the block's size (the static array's, or
            // the dynamic size every launch passes: `dynamic_shared_bytes`, the
            // layout's total).
            let ptr = unsafe {
                self.allocas
                    .build_in_bounds_gep(i8t, global.as_pointer_value(), &[at], "")
            }
            .or_internal()?;
            self.shared.push(ptr);
        }
        Ok(())
    }

    /// A zero-initialised `alloca` per lane of every local but those bound once, which
    /// are values (LLVM's pipeline then has fewer slots to promote: a large kernel's
    /// compile time is mostly that pipeline).
    fn declare_locals(&mut self) -> Result<(), CodegenError> {
        let bound_once = self.kernel.locals_bound_once();
        self.bound = vec![None; self.kernel.locals.len()];
        for (i, decl) in self.kernel.locals.iter().enumerate() {
            if bound_once[i] {
                self.locals.push(Vec::new());
                continue;
            }
            let mut lanes = Vec::with_capacity(decl.ty.lanes as usize);
            for lane in 0..decl.ty.lanes {
                let slot =
                    self.alloca(self.scalar_type(decl.ty.scalar), &format!("l{i}.{lane}"))?;
                self.allocas
                    .build_store(slot, self.zero(decl.ty.scalar))
                    .or_internal()?;
                lanes.push(slot);
            }
            self.locals.push(lanes);
        }
        Ok(())
    }

    /// An `alloca` in the entry block.
    fn alloca(
        &self,
        ty: BasicTypeEnum<'ctx>,
        name: &str,
    ) -> Result<PointerValue<'ctx>, CodegenError> {
        self.allocas.build_alloca(ty, name).or_internal()
    }

    /// Emits the body, then the exit block that publishes the status.
    fn build_body(&mut self) -> Result<(), CodegenError> {
        let body = self.ctx.append_basic_block(self.func, "body");
        self.b.position_at_end(body);
        if self.block(&self.kernel.body)? == Flow::Continue {
            self.b.build_unconditional_branch(self.exit).or_internal()?;
        }
        // The entry block is complete: every alloca is in it.
        self.allocas.position_at_end(self.entry);
        self.allocas
            .build_unconditional_branch(body)
            .or_internal()?;
        self.build_exit()
    }

    /// `if (status != 0) atomicOr(status_out, status); return;` (the CPU form:
    /// `return status;`).
    fn build_exit(&mut self) -> Result<(), CodegenError> {
        let Some(status_out) = self.status_out else {
            self.b.position_at_end(self.exit);
            let status = self
                .b
                .build_load(self.ctx.i32_type(), self.status, "status")
                .or_internal()?;
            self.b.build_return(Some(&status)).or_internal()?;
            return Ok(());
        };
        let report = self.ctx.append_basic_block(self.func, "report");
        let done = self.ctx.append_basic_block(self.func, "done");
        let i32t = self.ctx.i32_type();
        self.b.position_at_end(self.exit);
        let status = int(self
            .b
            .build_load(i32t, self.status, "status")
            .or_internal()?)?;
        let failed = self
            .b
            .build_int_compare(IntPredicate::NE, status, i32t.const_zero(), "failed")
            .or_internal()?;
        self.b
            .build_conditional_branch(failed, report, done)
            .or_internal()?;
        self.b.position_at_end(report);
        self.b
            .build_atomicrmw(
                AtomicRMWBinOp::Or,
                status_out,
                status,
                AtomicOrdering::Monotonic,
            )
            .or_internal()?;
        self.b.build_unconditional_branch(done).or_internal()?;
        self.b.position_at_end(done);
        self.b.build_return(None).or_internal()?;
        Ok(())
    }

    // -- statements -------------------------------------------------------------------

    fn block(&mut self, stmts: &[Stmt]) -> Result<Flow, CodegenError> {
        self.depth += 1;
        let flow = self.block_stmts(stmts)?;
        // `wgmma` groups this block issued end with it (or at an earlier hazard).
        if flow == Flow::Continue && self.in_flight.issued_at_or_below(self.depth) {
            self.wait_wgmma()?;
        }
        self.depth -= 1;
        Ok(flow)
    }

    fn block_stmts(&mut self, stmts: &[Stmt]) -> Result<Flow, CodegenError> {
        let mut rest = stmts;
        while let Some(s) = rest.first() {
            // Warpgroup multiplies with only operand loads between them: one batch.
            let batch = match self.flavor {
                Flavor::Ptx => warpgroup::batch_len(self.kernel, rest),
                Flavor::Cpu => 0,
            };
            if batch > 0 {
                self.warpgroup_batch(&rest[..batch])?;
                rest = &rest[batch..];
                continue;
            }
            if self.stmt(s)? == Flow::Returned {
                return Ok(Flow::Returned);
            }
            rest = &rest[1..];
        }
        Ok(Flow::Continue)
    }

    /// Whether any of `stmts` (nested blocks included) must wait for the `wgmma`
    /// groups in flight now: a barrier, a return, a fragment statement touching them.
    pub(super) fn would_wait(&self, stmts: &[Stmt]) -> bool {
        !self.in_flight.is_empty()
            && kernelc_ir::kernel::any_stmt_in(stmts, &|s| match s {
                Stmt::Barrier | Stmt::Return => true,
                Stmt::Fragment(op) => self.in_flight.touches(&op.fragments()),
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::If { .. }
                | Stmt::For { .. }
                | Stmt::AsyncCopy(_) => false,
            })
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<Flow, CodegenError> {
        // What a `wgmma` in flight must be done before: a barrier (after it shared
        // memory may change), leaving the kernel, a fragment statement that touches
        // its accumulators or its `A` in registers (others run while it does), and an
        // `if` or loop whose body would wait (on one path only, its registers would
        // meet the other path's at the join, a copy ptxas answers by serialising).
        if self.would_wait(std::slice::from_ref(stmt)) {
            self.wait_wgmma()?;
        }
        match stmt {
            Stmt::Let { local, value } | Stmt::Assign { local, value } => {
                let v = self.expr(value)?;
                self.write_local(*local, &v)?;
            }
            Stmt::Store { mem, index, value } => {
                let i = self.expr(index)?;
                let i = int(i.first()?)?;
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
                self.b.build_unconditional_branch(self.exit).or_internal()?;
                return Ok(Flow::Returned);
            }
            Stmt::Barrier => self.barrier()?,
            Stmt::Fragment(op) => self.fragment_op(op)?,
            Stmt::AsyncCopy(op) => self.async_copy(op)?,
        }
        Ok(Flow::Continue)
    }

    fn if_(
        &mut self,
        cond: &Expr,
        then_body: &[Stmt],
        else_body: &[Stmt],
    ) -> Result<Flow, CodegenError> {
        let c = self.expr(cond)?;
        let c = int(c.first()?)?;
        let then_b = self.ctx.append_basic_block(self.func, "then");
        let else_b = self.ctx.append_basic_block(self.func, "else");
        self.b
            .build_conditional_branch(c, then_b, else_b)
            .or_internal()?;
        let mut merge = None;
        // What is in flight after the `if`: what either branch that goes on leaves.
        let before = self.in_flight.clone();
        let mut after = warpgroup::InFlight::default();
        for (block, body) in [(then_b, then_body), (else_b, else_body)] {
            self.b.position_at_end(block);
            self.in_flight = before.clone();
            if self.block(body)? == Flow::Continue {
                after.merge(&self.in_flight);
                let m = match merge {
                    Some(m) => m,
                    None => {
                        let m = self.ctx.append_basic_block(self.func, "endif");
                        merge = Some(m);
                        m
                    }
                };
                self.b.build_unconditional_branch(m).or_internal()?;
            }
        }
        self.in_flight = after;
        match merge {
            Some(m) => {
                self.b.position_at_end(m);
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
        start: &Expr,
        end: &Expr,
        step: u32,
        body: &[Stmt],
    ) -> Result<Flow, CodegenError> {
        let ty = self.local_type(var)?;
        let signed = ty == Type::I32;
        let i64t = self.ctx.i64_type();
        let s = int(self.expr(start)?.first()?)?;
        let e = int(self.expr(end)?.first()?)?;
        let widen = |l: &Self, v: IntValue<'ctx>| {
            if signed {
                l.b.build_int_s_extend(v, i64t, "")
            } else {
                l.b.build_int_z_extend(v, i64t, "")
            }
        };
        let s64 = widen(self, s).or_internal()?;
        let e64 = widen(self, e).or_internal()?;
        let counter = self.alloca(i64t.into(), "counter")?;
        self.b.build_store(counter, s64).or_internal()?;
        let header = self.ctx.append_basic_block(self.func, "for");
        let body_b = self.ctx.append_basic_block(self.func, "for.body");
        let exit = self.ctx.append_basic_block(self.func, "for.end");
        self.b.build_unconditional_branch(header).or_internal()?;
        self.b.position_at_end(header);
        let c = int(self.b.build_load(i64t, counter, "i").or_internal()?)?;
        let more = self
            .b
            .build_int_compare(IntPredicate::SLT, c, e64, "")
            .or_internal()?;
        self.b
            .build_conditional_branch(more, body_b, exit)
            .or_internal()?;
        self.b.position_at_end(body_b);
        let narrow = self
            .b
            .build_int_truncate(c, self.ctx.i32_type(), "")
            .or_internal()?;
        self.write_local(var, &Val::scalar(ty.scalar, narrow.into()))?;
        // The body ends what it issues ([`Lower::block`]): what it leaves in flight
        // was in flight before the loop, which may also run no iteration.
        let before = self.in_flight.clone();
        let flow = self.block(body)?;
        self.in_flight.merge(&before);
        if flow == Flow::Continue {
            let next = self
                .b
                .build_int_add(c, i64t.const_int(step as u64, false), "")
                .or_internal()?;
            self.b.build_store(counter, next).or_internal()?;
            self.b.build_unconditional_branch(header).or_internal()?;
        }
        self.b.position_at_end(exit);
        Ok(Flow::Continue)
    }

    /// Workgroup execution and memory barrier: `bar.sync 0` (also orders the
    /// block's shared and global memory accesses). Nothing in the CPU form, whose
    /// workgroups are one invocation.
    fn barrier(&mut self) -> Result<(), CodegenError> {
        if self.flavor == Flavor::Cpu {
            return Ok(());
        }
        if warpgroup::uses_warpgroups(self.kernel) {
            self.async_proxy_fence()?;
        }
        let zero = self.ctx.i32_type().const_zero();
        self.call_intrinsic_void(
            "llvm.nvvm.barrier.cta.sync.aligned.all",
            &[],
            &[zero.into()],
        )
    }

    // -- locals -----------------------------------------------------------------------

    fn local_type(&self, id: LocalId) -> Result<Type, CodegenError> {
        self.kernel
            .local(id)
            .map(|d| d.ty)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))
    }

    fn local_slots(&self, id: LocalId) -> Result<&[PointerValue<'ctx>], CodegenError> {
        self.locals
            .get(id.0 as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| internal(format!("unknown local #{}", id.0)))
    }

    fn write_local(&mut self, id: LocalId, v: &Val<'ctx>) -> Result<(), CodegenError> {
        if let Some(bound) = self.bound_slot(id)? {
            *bound = Some(v.clone());
            return Ok(());
        }
        let slots = self.local_slots(id)?;
        if slots.len() != v.lanes.len() {
            return Err(internal(format!(
                "local #{} has {} lanes, {} given",
                id.0,
                slots.len(),
                v.lanes.len()
            )));
        }
        for (&slot, &lane) in slots.iter().zip(&v.lanes) {
            self.b.build_store(slot, lane).or_internal()?;
        }
        Ok(())
    }

    /// The value of local `id` if it is bound once (`None` if it has slots).
    fn bound_slot(&mut self, id: LocalId) -> Result<Option<&mut Option<Val<'ctx>>>, CodegenError> {
        let has_slots = !self.local_slots(id)?.is_empty();
        Ok(if has_slots {
            None
        } else {
            self.bound.get_mut(id.0 as usize)
        })
    }

    pub(super) fn read_local(&mut self, id: LocalId) -> Result<Val<'ctx>, CodegenError> {
        if let Some(bound) = self.bound_slot(id)? {
            return bound
                .clone()
                .ok_or_else(|| internal(format!("local #{} is read before its `let`", id.0)));
        }
        let ty = self.local_type(id)?;
        let elem = self.scalar_type(ty.scalar);
        let mut lanes = Vec::with_capacity(ty.lanes as usize);
        for &slot in self.local_slots(id)? {
            lanes.push(self.b.build_load(elem, slot, "").or_internal()?);
        }
        Ok(Val { ty, lanes })
    }

    pub(super) fn param_value(&self, index: u32) -> Result<Val<'ctx>, CodegenError> {
        self.scalars
            .get(index as usize)
            .cloned()
            .flatten()
            .ok_or_else(|| internal(format!("parameter #{index} is not a scalar")))
    }

    // -- builtins, status, intrinsics -------------------------------------------------

    /// A special register: `tid`, `ctaid`, `nctaid` along `axis`.
    fn sreg(&self, name: &str, axis: u8) -> Result<IntValue<'ctx>, CodegenError> {
        if self.flavor == Flavor::Cpu {
            return self.cpu_id(name, axis);
        }
        let axis = match axis {
            0 => "x",
            1 => "y",
            2 => "z",
            _ => return Err(internal(format!("builtin axis {axis}"))),
        };
        int(self.call_intrinsic(&format!("llvm.nvvm.read.ptx.sreg.{name}.{axis}"), &[], &[])?)
    }

    pub(super) fn builtin(
        &self,
        builtin: Builtin,
        axis: u8,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        Ok(match builtin {
            Builtin::LocalId => self.sreg("tid", axis)?,
            Builtin::WorkgroupId => self.sreg("ctaid", axis)?,
            Builtin::NumWorkgroups => self.sreg("nctaid", axis)?,
            Builtin::GlobalId => {
                // workgroup_id * workgroup_size + local_id, wrapping as the IR's u32.
                let size = self
                    .kernel
                    .workgroup_size
                    .get(axis as usize)
                    .copied()
                    .ok_or_else(|| internal(format!("builtin axis {axis}")))?;
                let base = self
                    .b
                    .build_int_mul(
                        self.sreg("ctaid", axis)?,
                        self.ctx.i32_type().const_int(size as u64, false),
                        "",
                    )
                    .or_internal()?;
                self.b
                    .build_int_add(base, self.sreg("tid", axis)?, "gid")
                    .or_internal()?
            }
        })
    }

    /// ORs `bits` (an `i32`) into the invocation's status.
    pub(super) fn raise(&self, bits: IntValue<'ctx>) -> Result<(), CodegenError> {
        let i32t = self.ctx.i32_type();
        let s = int(self.b.build_load(i32t, self.status, "").or_internal()?)?;
        let s = self.b.build_or(s, bits, "").or_internal()?;
        self.b.build_store(self.status, s).or_internal()?;
        Ok(())
    }

    /// ORs `bit` into the invocation's status when `cond` (an `i1`) holds; nothing
    /// when `cond` is the constant false (a division by a nonzero literal, a shift by
    /// one in range: most of a tiled kernel's index arithmetic, whose status updates
    /// would otherwise be left for LLVM's pipeline to delete).
    pub(super) fn raise_if(&self, cond: IntValue<'ctx>, bit: u32) -> Result<(), CodegenError> {
        if cond.get_zero_extended_constant() == Some(0) {
            return Ok(());
        }
        let i32t = self.ctx.i32_type();
        let bits = self
            .b
            .build_select(
                cond,
                i32t.const_int(bit as u64, false),
                i32t.const_zero(),
                "",
            )
            .or_internal()?;
        self.raise(int(bits)?)
    }

    fn intrinsic(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
    ) -> Result<FunctionValue<'ctx>, CodegenError> {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, overloads))
            .ok_or_else(|| internal(format!("LLVM does not know the intrinsic `{name}`")))
    }

    fn call(
        &self,
        func: FunctionValue<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<ValueKind<'ctx>, CodegenError> {
        let args: Vec<BasicMetadataValueEnum<'ctx>> = args.iter().map(|&a| a.into()).collect();
        Ok(self
            .b
            .build_call(func, &args, "")
            .or_internal()?
            .try_as_basic_value())
    }

    /// An f16 <-> bf16 bitcast through a 16-bit move LLVM cannot see through. Folded
    /// away, NVPTX tests the bf16 for zero as an f16 (`cast<bool>(bitcast<f16>(b))`)
    /// with an `and` on a bf16 it cannot select, and aborts the process (found by the
    /// no-panic fuzzer).
    pub(super) fn opaque_half_bitcast(
        &self,
        x: BasicValueEnum<'ctx>,
        to: BasicTypeEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let i16t = self.ctx.i16_type();
        let bits = self.b.build_bit_cast(x, i16t, "").or_internal()?;
        if self.flavor == Flavor::Cpu {
            return self.b.build_bit_cast(bits, to, "").or_internal();
        }
        let move_type = i16t.fn_type(&[i16t.into()], false);
        let asm = self.ctx.create_inline_asm(
            move_type,
            "mov.b16 $0, $1;".to_string(),
            "=h,h".to_string(),
            false,
            false,
            None,
            false,
        );
        let moved = self
            .b
            .build_indirect_call(move_type, asm, &[bits.into()], "")
            .or_internal()?
            .try_as_basic_value();
        let ValueKind::Basic(moved) = moved else {
            return Err(internal("the 16-bit move returned nothing"));
        };
        self.b.build_bit_cast(moved, to, "").or_internal()
    }

    /// Calls an intrinsic that returns a value (`overloads`: its overloaded types).
    pub(super) fn call_intrinsic(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        match self.call(self.intrinsic(name, overloads)?, args)? {
            ValueKind::Basic(v) => Ok(v),
            ValueKind::Instruction(_) => Err(internal(format!("`{name}` returned nothing"))),
        }
    }

    pub(super) fn call_intrinsic_void(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<(), CodegenError> {
        self.call(self.intrinsic(name, overloads)?, args)?;
        Ok(())
    }
}

/// The kernel function: one 8-byte parameter per IR parameter (buffers as global
/// pointers, scalars as `i64`), then the status pointer; the `ptx_kernel` calling
/// convention; `.reqntid` = the workgroup size.
fn declare_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    kernel: &Kernel,
    sm: u32,
) -> Result<FunctionValue<'ctx>, CodegenError> {
    let global_ptr = ctx.ptr_type(AddressSpace::from(GLOBAL));
    let mut params: Vec<BasicMetadataTypeEnum<'ctx>> = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Buffer { .. } => global_ptr.into(),
            Param::Scalar { .. } => ctx.i64_type().into(),
        })
        .collect();
    params.push(global_ptr.into());
    let fn_type = ctx.void_type().fn_type(&params, false);
    let func = module.add_function(ENTRY_POINT, fn_type, Some(Linkage::External));
    func.set_call_conventions(PTX_KERNEL_CC);
    let [x, y, z] = kernel.workgroup_size;
    func.add_attribute(
        AttributeLoc::Function,
        ctx.create_string_attribute("nvvm.reqntid", &format!("{x},{y},{z}")),
    );
    if let Some(blocks) = blocks_per_sm(kernel, sm) {
        func.add_attribute(
            AttributeLoc::Function,
            ctx.create_string_attribute("nvvm.minctasm", &blocks.to_string()),
        );
    }
    for (i, p) in kernel.params.iter().enumerate() {
        if let Some(v) = func.get_nth_param(i as u32) {
            v.set_name(p.name());
        }
    }
    if let Some(v) = func.get_nth_param(kernel.params.len() as u32) {
        v.set_name("status");
    }
    Ok(func)
}

/// A checked `into_pointer_value` (the inkwell one panics on other values).
pub(super) trait IntoPointerChecked<'ctx> {
    fn into_pointer_value_checked(self) -> Result<PointerValue<'ctx>, CodegenError>;
}

impl<'ctx> IntoPointerChecked<'ctx> for BasicValueEnum<'ctx> {
    fn into_pointer_value_checked(self) -> Result<PointerValue<'ctx>, CodegenError> {
        PointerValue::try_from(self).map_err(|_| internal("a kernel parameter is not a pointer"))
    }
}
