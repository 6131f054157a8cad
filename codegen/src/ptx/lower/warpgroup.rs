//! Warpgroup fragments on Hopper's `wgmma` (sm_90a).
//!
//! A warpgroup's `A` and `B` loaded from shared memory never enter registers (an
//! `A` declared `in_registers` does, below): a load computes the operand's
//! 64-bit shared-memory *matrix descriptor* (PTX ISA, "Matrix Descriptor Format"),
//! and the multiply hands it to `wgmma.mma_async`, which reads shared memory itself.
//! The IR's tiled layouts are the descriptor's no-swizzle canonical layouts: an 8 × 8
//! tile of 16-bit elements is one 8 × 16-byte core matrix. Loaded along the
//! reduction (`A` by row tiles, `B` by column tiles: "K-major") the tiles next to
//! each other along the reduction are 128 bytes apart (the leading byte offset) and
//! the bands of 8 rows `stride` elements (the stride byte offset); loaded across it
//! ("MN-major", the instruction's transpose flag) the two swap.
//!
//! The accumulators live in registers, each thread's share as `wgmma` lays it out
//! (`share` in `fragment.rs`). A run of multiplies with nothing but warpgroup
//! operand loads between them becomes one inline-asm statement (LLVM 22 has no
//! `wgmma.mma_async` intrinsic): `wgmma.fence`, the multiplies and `commit_group`,
//! every accumulator register tied from input to output. The group runs while the
//! kernel goes on; `wait_group 0`, a second asm statement that ties the same
//! registers, ends it before whatever could see its effects or change its operands:
//! a barrier (the IR lets shared memory change after the next barrier), leaving the
//! kernel, a fragment statement or multiply that touches its accumulators or its `A`
//! held in registers, an `if` or loop with such a statement inside (so both paths
//! reach the join with the group ended), and the end of the block that issued it.
//! Fragment statements on other fragments run while it does (FlashAttention's
//! softmax of one block while the next block's scores multiply). LLVM sees the
//! accumulators only through the wait.
//!
//! An `A` held in registers (`in_registers`) is packed as `mma.sync`'s and passed
//! as four `b32` registers; `wgmma` reads them asynchronously, so nothing writes
//! that fragment until the wait (a `convert` into it is a touching statement). The
//! packed values are PTX virtual registers LLVM never reuses; ptxas keeps them live
//! through the `wait_group`, as for every asynchronous `wgmma` operand (CUTLASS's
//! register-`A` multiplies rely on the same).
//!
//! Plain stores to shared memory that `wgmma` reads later are ordered for it by
//! `fence.proxy.async.shared::cta` ahead of every barrier of a kernel with warpgroup
//! fragments (the IR needs a barrier between them).

use super::value::int;
use super::{internal, Lower, OrInternal};
use crate::CodegenError;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use kernelc_ir::fragment::*;
use kernelc_ir::{Expr, FragmentOp, Kernel, Memory, ScalarType, Stmt};

/// One multiply of a batch, `d = a·b + c`, with `a`'s and `b`'s descriptors and
/// transpositions as they were at the multiply (a later load may replace them).
struct BatchedMma<'ctx> {
    d: FragmentId,
    a: FragmentId,
    c: FragmentId,
    a_operand: AOperand<'ctx>,
    b_descriptor: IntValue<'ctx>,
    transposed: [bool; 2],
}

/// Where a multiply's `A` is: described in shared memory, or in registers (an `A`
/// declared `in_registers`: its share packed in pairs, as `mma.sync`'s).
enum AOperand<'ctx> {
    Descriptor(IntValue<'ctx>),
    Registers(Vec<IntValue<'ctx>>),
}

/// Bytes of a core matrix (8 rows of 16 bytes): the distance between core matrices
/// next to each other in a tile band (the tiled layouts take 16-bit elements: an
/// 8 × 8 tile is one core matrix).
const TILE_BYTES: u64 = 128;

/// The `wgmma` groups committed and not waited for at a point of the lowering: the
/// fragments they use (accumulators, whose registers the wait ties, and `A`s held in
/// registers), each with the depth of the block that issued it. A wait ends them
/// all; after an `if` or a loop, what any path that goes on leaves is in flight.
#[derive(Clone, Debug, Default)]
pub(super) struct InFlight {
    /// `(fragment, issuing depth, is an accumulator)`.
    fragments: Vec<(FragmentId, usize, bool)>,
}

impl InFlight {
    fn add(&mut self, frag: FragmentId, depth: usize, accumulator: bool) {
        match self.fragments.iter_mut().find(|f| f.0 == frag) {
            Some(f) => f.1 = f.1.min(depth),
            None => self.fragments.push((frag, depth, accumulator)),
        }
    }

    /// What `other` has in flight too.
    pub(super) fn merge(&mut self, other: &InFlight) {
        for &(frag, depth, accumulator) in &other.fragments {
            self.add(frag, depth, accumulator);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// Whether any of `frags` is an accumulator or register `A` of a group in flight.
    pub(super) fn touches(&self, frags: &[FragmentId]) -> bool {
        self.fragments.iter().any(|f| frags.contains(&f.0))
    }

    fn accumulators(&self) -> Vec<FragmentId> {
        self.fragments.iter().filter(|f| f.2).map(|f| f.0).collect()
    }

    /// Whether a group issued by a block at `depth` or deeper is in flight (a block
    /// ends what it issued).
    pub(super) fn issued_at_or_below(&self, depth: usize) -> bool {
        self.fragments.iter().any(|f| f.1 >= depth)
    }
}

/// Whether `kernel` has warpgroup fragments (and so needs sm_90a).
pub(crate) fn uses_warpgroups(kernel: &Kernel) -> bool {
    kernel.fragments.iter().any(|f| f.shape.is_warpgroup())
}

/// Whether `op` multiplies warpgroup fragments, and whether in place (`d = c`).
fn warpgroup_mma(kernel: &Kernel, op: &Stmt) -> Option<bool> {
    match op {
        Stmt::Fragment(FragmentOp::Mma { d, c, .. }) => kernel
            .fragment(*d)
            .is_some_and(|f| f.shape.is_warpgroup())
            .then_some(d == c),
        _ => None,
    }
}

/// Whether `op` loads a warpgroup's `A` or `B` (a descriptor, nothing read).
fn is_warpgroup_operand_load(kernel: &Kernel, op: &Stmt) -> bool {
    match op {
        Stmt::Fragment(FragmentOp::Load { frag, .. }) => {
            kernel.fragment(*frag).is_some_and(|f| f.is_read_in_place())
        }
        _ => false,
    }
}

/// The statements from the first of `stmts` that go into one `wgmma` batch: a
/// warpgroup multiply, then operand loads and in-place multiplies up to the last
/// multiply (one into another accumulator than its `c` goes alone: its `c` is
/// copied ahead of the batch). `0` where the first statement is no warpgroup
/// multiply.
pub(super) fn batch_len(kernel: &Kernel, stmts: &[Stmt]) -> usize {
    match stmts.first().and_then(|s| warpgroup_mma(kernel, s)) {
        None => return 0,
        Some(false) => return 1,
        Some(true) => {}
    }
    let mut len = 1;
    for (i, s) in stmts.iter().enumerate().skip(1) {
        match warpgroup_mma(kernel, s) {
            Some(true) => len = i + 1,
            Some(false) => break,
            None if is_warpgroup_operand_load(kernel, s) => {}
            None => break,
        }
    }
    len
}

/// Whether the layout an `A`/`B` fragment is loaded in is the instruction's
/// transposed ("MN-major") form.
fn transposed(role: FragmentRole, layout: FragmentLayout) -> bool {
    use FragmentLayout::*;
    match (role, layout) {
        (FragmentRole::A, RowMajorTiles | RowMajorSwizzled)
        | (FragmentRole::B, ColMajorTiles | ColMajorSwizzled) => false,
        (FragmentRole::A, ColMajorTiles | ColMajorSwizzled)
        | (FragmentRole::B, RowMajorTiles | RowMajorSwizzled) => true,
        // The validator allows no other layout for these operands.
        (_, FragmentLayout::RowMajor | FragmentLayout::ColMajor)
        | (FragmentRole::Accumulator, _) => false,
    }
}

impl<'ctx> Lower<'_, 'ctx> {
    /// The `i64` descriptor slot of warpgroup operand `i`.
    pub(super) fn warpgroup_operand_slot(
        &mut self,
        i: usize,
    ) -> Result<PointerValue<'ctx>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let slot = self.alloca(i64t.into(), &format!("f{i}.desc"))?;
        self.allocas
            .build_store(slot, i64t.const_zero())
            .or_internal()?;
        Ok(slot)
    }

    /// A warpgroup operand's load: its descriptor. An index or stride that is not a
    /// multiple of 8, or a fragment past the memory, raises the status bit and
    /// describes the memory's start instead (nothing outside it is read).
    pub(super) fn warpgroup_operand(
        &mut self,
        frag: FragmentId,
        mem: Memory,
        (index_expr, stride_expr): (&Expr, &Expr),
        layout: FragmentLayout,
    ) -> Result<(), CodegenError> {
        let decl = self.fragment_decl(frag)?;
        let slot = self
            .fragment_slots(frag)?
            .first()
            .copied()
            .ok_or_else(|| internal("a warpgroup operand without its descriptor slot"))?;
        let index = int(self.expr(index_expr)?.first()?)?;
        let stride = int(self.expr(stride_expr)?.first()?)?;
        let (stored, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let (bands, rest) = super::fragment::last_element(layout, stored, decl.dims());
        let in_bounds = self
            .ranges
            .range(index_expr)
            .zip(self.ranges.range(stride_expr))
            .is_some_and(|(i, s)| {
                let last = i.hi as u128 + s.hi as u128 * bands as u128 + rest as u128;
                super::fragment::swizzled_bound(layout, stored, last) < len as u128
            });
        let aligned = self.ranges.alignment(index_expr) % TILE as u64 == 0
            && self.ranges.alignment(stride_expr) % TILE as u64 == 0;
        let (index, stride) = if in_bounds && aligned {
            (index, stride)
        } else {
            self.checked_operand((layout, stored), (index, stride), (bands, rest), len)?
        };
        let i32t = self.ctx.i32_type();
        let i64t = self.ctx.i64_type();
        let ptr = self.shared_element_ptr(mem, index)?;
        let address = self
            .b
            .build_ptr_to_int(ptr, i64t, "smem_address")
            .or_internal()?;
        let element_bytes = stored.size_bytes() as u64;
        let stride_bytes = self
            .b
            .build_int_mul(stride, i32t.const_int(element_bytes, false), "")
            .or_internal()?;
        let stride_bytes = self
            .b
            .build_int_z_extend(stride_bytes, i64t, "")
            .or_internal()?;
        let tile_bytes = i64t.const_int(TILE_BYTES, false);
        // No swizzle: K-major, tiles along the reduction are the leading dimension
        // and bands of 8 rows the stride; MN-major, the other way. 128-byte swizzle:
        // the bands are the stride either way; K-major's leading offset is unused
        // (16), MN-major's is the step between 64-element blocks along M or N.
        let block_bytes = i64t.const_int((TILE * SWIZZLE_BYTES) as u64, false);
        let unused = i64t.const_int(16, false);
        let (leading, strided) = match (layout.is_swizzled(), transposed(decl.role, layout)) {
            (false, true) => (stride_bytes, tile_bytes),
            (false, false) => (tile_bytes, stride_bytes),
            (true, true) => (block_bytes, stride_bytes),
            (true, false) => (unused, stride_bytes),
        };
        let field = |v: IntValue<'ctx>, shift: u64| -> Result<IntValue<'ctx>, CodegenError> {
            let v = self.bit_field(v, 4, 0x3FFF)?;
            self.b
                .build_left_shift(v, i64t.const_int(shift, false), "")
                .or_internal()
        };
        // Bits 0-13: the address / 16; 16-29: the leading byte offset / 16; 32-45: the
        // stride byte offset / 16; 49-51 (base offset): zero, every shared array of a
        // kernel with warpgroup fragments being 1024-byte aligned, so the swizzle of
        // absolute addresses is the layout's; 62-63: 0 (none) or 1 (128-byte swizzle).
        let mode = i64t.const_int(u64::from(layout.is_swizzled()) << 62, false);
        let desc = self
            .b
            .build_or(field(address, 0)?, mode, "")
            .or_internal()?;
        let desc = self
            .b
            .build_or(desc, field(leading, 16)?, "")
            .or_internal()?;
        let desc = self
            .b
            .build_or(desc, field(strided, 32)?, "desc")
            .or_internal()?;
        self.b.build_store(slot, desc).or_internal()?;
        if let Some(t) = self.operand_transposed.get_mut(frag.0 as usize) {
            *t = Some(transposed(decl.role, layout));
        }
        Ok(())
    }

    /// `(index, stride)` where both are multiples of 8 and the fragment fits in
    /// `len`, else `(0, 0)` with the status bit raised.
    fn checked_operand(
        &mut self,
        (layout, stored): (FragmentLayout, ScalarType),
        (index, stride): (IntValue<'ctx>, IntValue<'ctx>),
        (bands, rest): (u32, u32),
        len: u64,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>), CodegenError> {
        let i32t = self.ctx.i32_type();
        let i64t = self.ctx.i64_type();
        let either = self.b.build_or(index, stride, "").or_internal()?;
        let low = self
            .b
            .build_and(either, i32t.const_int((TILE - 1) as u64, false), "")
            .or_internal()?;
        let aligned = self
            .b
            .build_int_compare(IntPredicate::EQ, low, i32t.const_zero(), "")
            .or_internal()?;
        let last = self.last_index((layout, stored), (index, stride), (bands, rest))?;
        let fits = self
            .b
            .build_int_compare(IntPredicate::ULT, last, i64t.const_int(len, false), "")
            .or_internal()?;
        let ok = self
            .b
            .build_and(aligned, fits, "operand_ok")
            .or_internal()?;
        // The fault as every access raises it, on the failing path only.
        let func = self.func;
        let fault = self.ctx.append_basic_block(func, "operand.fault");
        let checked = self.ctx.append_basic_block(func, "operand.checked");
        self.b
            .build_conditional_branch(ok, checked, fault)
            .or_internal()?;
        self.b.position_at_end(fault);
        self.raise_access_fault(fits)?;
        self.b.build_unconditional_branch(checked).or_internal()?;
        self.b.position_at_end(checked);
        let pick = |v: IntValue<'ctx>| -> Result<IntValue<'ctx>, CodegenError> {
            Ok(self
                .b
                .build_select(ok, v, i32t.const_zero(), "")
                .or_internal()?
                .into_int_value())
        };
        Ok((pick(index)?, pick(stride)?))
    }

    /// A batch of statements from [`batch_len`]: operand loads as they come, the
    /// multiplies together in one asm statement at the end.
    pub(super) fn warpgroup_batch(&mut self, stmts: &[Stmt]) -> Result<(), CodegenError> {
        // Groups in flight on the same accumulators or `A` registers end first (their
        // registers are not to be read before).
        if self.would_wait(stmts) {
            self.wait_wgmma()?;
        }
        let mut mmas = Vec::new();
        for s in stmts {
            match s {
                Stmt::Fragment(FragmentOp::Mma { d, a, b, c }) => {
                    mmas.push(self.batched(*d, *a, *b, *c)?)
                }
                Stmt::Fragment(op) => self.fragment_op(op)?,
                _ => return Err(internal("a statement inside a wgmma batch")),
            }
        }
        self.wgmma_asm(&mmas)
    }

    /// One multiply in a batch of its own (`batch_len` batches every warpgroup
    /// multiply the block lowering sees, so only other callers get here).
    pub(super) fn wgmma_alone(
        &mut self,
        d: FragmentId,
        a: FragmentId,
        b: FragmentId,
        c: FragmentId,
    ) -> Result<(), CodegenError> {
        let mma = self.batched(d, a, b, c)?;
        self.wgmma_asm(&[mma])
    }

    /// `d = a·b + c` with its operands as they are now.
    fn batched(
        &mut self,
        d: FragmentId,
        a: FragmentId,
        b: FragmentId,
        c: FragmentId,
    ) -> Result<BatchedMma<'ctx>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let mut descriptors = [i64t.const_zero(); 2];
        let mut transposed = [false; 2];
        let ad = self.fragment_decl(a)?;
        let registers = if ad.in_registers {
            let values = self.read_fragment(a, ad.elem)?;
            let i32t = self.ctx.i32_type();
            let packed = self.pack(ad.elem, &values)?;
            let words = packed
                .into_iter()
                .map(|v| int(self.b.build_bit_cast(v, i32t, "").or_internal()?))
                .collect::<Result<Vec<_>, CodegenError>>()?;
            Some(words)
        } else {
            None
        };
        for (i, f) in [a, b].into_iter().enumerate() {
            if i == 0 && registers.is_some() {
                continue;
            }
            let ptr = self
                .fragment_slots(f)?
                .first()
                .copied()
                .ok_or_else(|| internal("a warpgroup operand without its descriptor slot"))?;
            descriptors[i] = int(self.b.build_load(i64t, ptr, "").or_internal()?)?;
            // Loaded before (the validator's definite writes), in one layout.
            transposed[i] = self
                .operand_transposed
                .get(f.0 as usize)
                .copied()
                .flatten()
                .ok_or_else(|| internal("a warpgroup operand multiplied before its load"))?;
        }
        let [a_descriptor, b_descriptor] = descriptors;
        Ok(BatchedMma {
            d,
            a,
            c,
            a_operand: match registers {
                Some(words) => AOperand::Registers(words),
                None => AOperand::Descriptor(a_descriptor),
            },
            b_descriptor,
            transposed,
        })
    }

    /// `fence; wgmma.mma_async…; commit; wait 0` over `mmas`, each accumulator's
    /// registers tied in and out.
    fn wgmma_asm(&mut self, mmas: &[BatchedMma<'ctx>]) -> Result<(), CodegenError> {
        // `d = c` where they differ (such a multiply is alone in its batch): c's
        // registers copied into d's first.
        let f32t = self.ctx.f32_type();
        let mut accumulators: Vec<FragmentId> = Vec::new();
        for &BatchedMma { d, c, .. } in mmas {
            if d != c {
                let from = self.fragment_slots(c)?;
                for (&to, &from) in self.fragment_slots(d)?.iter().zip(&from) {
                    let v = self.b.build_load(f32t, from, "").or_internal()?;
                    self.b.build_store(to, v).or_internal()?;
                }
            }
            if !accumulators.contains(&d) {
                accumulators.push(d);
            }
        }
        // Operands: the accumulators' registers (outputs, then tied inputs), the two
        // descriptors of each multiply, and scale-d.
        let mut first_register = Vec::new();
        let mut registers = 0usize;
        for &acc in &accumulators {
            first_register.push(registers);
            registers += self.fragment_slots(acc)?.len();
        }
        // Each multiply's operands after the accumulators: `A`'s descriptor or
        // registers, then `B`'s descriptor.
        let mut inputs: Vec<(BasicMetadataValueEnum<'ctx>, &str)> = Vec::new();
        let mut operand_text = Vec::new();
        for m in mmas {
            let a_text = match &m.a_operand {
                AOperand::Descriptor(desc) => {
                    inputs.push(((*desc).into(), "l"));
                    format!("${}", registers + inputs.len() - 1)
                }
                AOperand::Registers(words) => {
                    let first = registers + inputs.len();
                    inputs.extend(words.iter().map(|&w| (w.into(), "r")));
                    let names: Vec<String> = (first..first + words.len())
                        .map(|r| format!("${r}"))
                        .collect();
                    format!("{{{}}}", names.join(", "))
                }
            };
            inputs.push((m.b_descriptor.into(), "l"));
            operand_text.push(format!("{a_text}, ${}", registers + inputs.len() - 1));
        }
        let mut text = String::from("{\n.reg .pred p;\n");
        let scale_d = registers + inputs.len();
        text.push_str(&format!("setp.ne.b32 p, ${scale_d}, 0;\n"));
        text.push_str("wgmma.fence.sync.aligned;\n");
        for (
            i,
            &BatchedMma {
                d,
                a,
                transposed,
                ref a_operand,
                ..
            },
        ) in mmas.iter().enumerate()
        {
            let dd = self.fragment_decl(d)?;
            let ad = self.fragment_decl(a)?;
            // TF32 takes no transpose flags: its operands are read along the
            // reduction only (the validator keeps them so).
            let (input, flags) = match ad.elem {
                ScalarType::Bf16 => ("bf16", true),
                ScalarType::F16 => ("f16", true),
                ScalarType::F32 => ("tf32", false),
                other => return Err(internal(format!("no wgmma for {other}"))),
            };
            if !flags && (transposed[0] || transposed[1]) {
                return Err(internal(
                    "a TF32 warpgroup operand loaded across the reduction",
                ));
            }
            // An `A` in registers takes no transpose flag of its own.
            let flags = match (flags, a_operand) {
                (false, _) => String::new(),
                (true, AOperand::Registers(_)) => format!(", {}", u8::from(transposed[1])),
                (true, AOperand::Descriptor(_)) => {
                    format!(", {}, {}", u8::from(transposed[0]), u8::from(transposed[1]))
                }
            };
            let at = accumulators
                .iter()
                .position(|&f| f == d)
                .and_then(|p| first_register.get(p).copied())
                .ok_or_else(|| internal("an accumulator outside its batch"))?;
            let regs: Vec<String> = (at..at + self.fragment_slots(d)?.len())
                .map(|r| format!("${r}"))
                .collect();
            text.push_str(&format!(
                "wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{input}.{input} {{{}}}, {}, p, 1, 1{flags};\n",
                dd.shape.n,
                dd.shape.k,
                regs.join(", "),
                operand_text.get(i).ok_or_else(|| internal("a multiply without operands"))?,
            ));
        }
        text.push_str("wgmma.commit_group.sync.aligned;\n}");
        let i32t = self.ctx.i32_type();
        inputs.push((i32t.const_int(1, false).into(), "r"));
        self.accumulator_asm(text, &inputs, &accumulators)?;
        let depth = self.depth;
        for acc in accumulators {
            self.in_flight.add(acc, depth, true);
        }
        for m in mmas {
            if matches!(m.a_operand, AOperand::Registers(_)) {
                self.in_flight.add(m.a, depth, false);
            }
        }
        Ok(())
    }

    /// One convergent, side-effecting asm statement `text` (which clobbers memory)
    /// over `accumulators`' registers, tied in and out as its first operands
    /// (`$0`, `$1`, …, in order), then `inputs` with their constraints.
    fn accumulator_asm(
        &mut self,
        text: String,
        inputs: &[(BasicMetadataValueEnum<'ctx>, &str)],
        accumulators: &[FragmentId],
    ) -> Result<(), CodegenError> {
        let f32t = self.ctx.f32_type();
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = inputs.iter().map(|i| i.0).collect();
        for &acc in accumulators {
            for slot in self.fragment_slots(acc)? {
                args.push(self.b.build_load(f32t, slot, "").or_internal()?.into());
            }
        }
        let registers = args.len() - inputs.len();
        let arg_types: Vec<BasicMetadataTypeEnum<'ctx>> = args
            .iter()
            .map(|a| match a {
                BasicMetadataValueEnum::IntValue(v) => v.get_type().into(),
                _ => f32t.into(),
            })
            .collect();
        let mut constraints: Vec<String> = vec!["=f".into(); registers];
        constraints.extend(inputs.iter().map(|i| i.1.to_string()));
        constraints.extend((0..registers).map(|r| r.to_string()));
        constraints.push("~{memory}".into());
        let result_t = self.ctx.struct_type(&vec![f32t.into(); registers], false);
        let fn_t = result_t.fn_type(&arg_types, false);
        let asm =
            self.ctx
                .create_inline_asm(fn_t, text, constraints.join(","), true, false, None, false);
        let call = self
            .b
            .build_indirect_call(fn_t, asm, &args, "wgmma")
            .or_internal()?;
        // The instruction needs the whole warpgroup: LLVM must not move it into or
        // out of control flow.
        let convergent = Attribute::get_named_enum_kind_id("convergent");
        call.add_attribute(
            AttributeLoc::Function,
            self.ctx.create_enum_attribute(convergent, 0),
        );
        let result = call
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| internal("an accumulator asm returned nothing"))?
            .into_struct_value();
        self.store_accumulators(accumulators, result)
    }

    /// The registers of `accumulators`, in order, from `result`'s fields.
    fn store_accumulators(
        &mut self,
        accumulators: &[FragmentId],
        result: inkwell::values::StructValue<'ctx>,
    ) -> Result<(), CodegenError> {
        let mut field = 0u32;
        for &acc in accumulators {
            for slot in self.fragment_slots(acc)? {
                let v = self
                    .b
                    .build_extract_value(result, field, "")
                    .or_internal()?;
                self.b.build_store(slot, v).or_internal()?;
                field += 1;
            }
        }
        Ok(())
    }

    /// `wgmma.wait_group 0` for the groups in flight, their accumulators tied
    /// through it: nothing is in flight past it.
    pub(super) fn wait_wgmma(&mut self) -> Result<(), CodegenError> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let accumulators = self.in_flight.accumulators();
        let text = "wgmma.wait_group.sync.aligned 0;".to_string();
        self.accumulator_asm(text, &[], &accumulators)?;
        // Nothing is in flight past this point (a branch's state merges with the
        // other's, `Lower::if_`).
        self.in_flight = InFlight::default();
        Ok(())
    }

    /// `fence.proxy.async.shared::cta`: plain shared-memory stores before it are
    /// visible to `wgmma`'s reads after the barrier that follows.
    pub(super) fn async_proxy_fence(&mut self) -> Result<(), CodegenError> {
        let fn_t = self.ctx.void_type().fn_type(&[], false);
        let asm = self.ctx.create_inline_asm(
            fn_t,
            "fence.proxy.async.shared::cta;".into(),
            "~{memory}".into(),
            true,
            false,
            None,
            false,
        );
        self.b
            .build_indirect_call(fn_t, asm, &[], "")
            .or_internal()?;
        Ok(())
    }
}
