//! Loads and stores, each checked against the memory's static length.
//!
//! An access of `lanes` elements at `index` is done only when `index <= len - lanes`
//! (and, for vectors, `index % lanes == 0`). Otherwise the invocation ORs
//! `OUT_OF_BOUNDS` or `UNALIGNED` into its status and skips the access (a load yields
//! zeros). Checks the value-range analysis ([`kernelc_ir::analysis::Ranges`]) proves
//! unnecessary are left out; with all of them gone the access is a plain load or store
//! without a branch.
//!
//! A vector access is one LLVM vector load or store (`ld.global.v4.b32` for 4 x f32),
//! aligned to `lanes * size` bytes, at most 16 (the widest PTX access on sm_90 is 128
//! bits, and LLVM splits wider vectors into 16-byte pieces): the index is a multiple
//! of `lanes` by then, and buffers and shared arrays are at least 16-byte aligned.

use super::value::{int, Val};
use super::{internal, Flavor, Lower, OrInternal, BUFFER_ALIGN, SHARED_ALIGN};
use crate::abi::status;
use crate::CodegenError;
use inkwell::basic_block::BasicBlock;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, InstructionValue, IntValue, PointerValue};
use inkwell::IntPredicate;
use kernelc_ir::{Expr, Memory, ScalarType, Type};

use kernelc_ir::analysis::AccessProof as Proven;

/// Where an access goes: base pointer, element type, length, base alignment.
pub(super) struct Target<'ctx> {
    base: PointerValue<'ctx>,
    pub(super) elem: ScalarType,
    pub(super) len: u64,
    align: u32,
}

impl<'ctx> Lower<'_, 'ctx> {
    pub(super) fn memory_of(&self, mem: Memory) -> Result<Target<'ctx>, CodegenError> {
        let (elem, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let (base, align) = match mem {
            Memory::Buffer(p) => (
                self.buffers.get(p.0 as usize).copied().flatten(),
                BUFFER_ALIGN,
            ),
            Memory::Shared(s) => (self.shared.get(s.0 as usize).copied(), SHARED_ALIGN),
        };
        // The CPU ABI promises buffers aligned to their element only (a view may
        // start anywhere); x86 and AArch64 vector accesses need no more.
        let align = match self.flavor {
            Flavor::Ptx => align,
            Flavor::Cpu => elem.size_bytes().max(1),
        };
        let base = base.ok_or_else(|| internal(format!("no base pointer for {mem:?}")))?;
        Ok(Target {
            base,
            elem,
            len,
            align,
        })
    }

    /// `(ok, in_bounds)` as `i1`s: whether the access may proceed, and whether it is in
    /// bounds. Checks in `proven` are constant true.
    pub(super) fn access_ok(
        &self,
        index: IntValue<'ctx>,
        lanes: u8,
        len: u64,
        proven: Proven,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>), CodegenError> {
        let bool_t = self.ctx.bool_type();
        let i32t = self.ctx.i32_type();
        let lanes64 = lanes as u64;
        let in_bounds = if proven.in_bounds {
            bool_t.const_int(1, false)
        } else if len < lanes64 {
            bool_t.const_zero()
        } else if len - lanes64 >= u32::MAX as u64 {
            bool_t.const_int(1, false)
        } else {
            self.b
                .build_int_compare(
                    IntPredicate::ULE,
                    index,
                    i32t.const_int(len - lanes64, false),
                    "in_bounds",
                )
                .or_internal()?
        };
        if proven.aligned {
            return Ok((in_bounds, in_bounds));
        }
        let low = self
            .b
            .build_and(index, i32t.const_int(lanes64 - 1, false), "")
            .or_internal()?;
        let aligned = self
            .b
            .build_int_compare(IntPredicate::EQ, low, i32t.const_zero(), "aligned")
            .or_internal()?;
        let ok = self.b.build_and(in_bounds, aligned, "ok").or_internal()?;
        Ok((ok, in_bounds))
    }

    /// In the failure branch of an access: records why it failed.
    pub(super) fn raise_access_fault(&self, in_bounds: IntValue<'ctx>) -> Result<(), CodegenError> {
        let i32t = self.ctx.i32_type();
        let bits = self
            .b
            .build_select(
                in_bounds,
                i32t.const_int(status::UNALIGNED as u64, false),
                i32t.const_int(status::OUT_OF_BOUNDS as u64, false),
                "",
            )
            .or_internal()?;
        self.raise(int(bits)?)
    }

    /// Branches on the checks `proven` leaves: `access` (which adds no control flow)
    /// runs where they pass; where they fail, the fault is raised and the access
    /// skipped. Leaves the builder in the merge block and returns `access`'s result with
    /// the merge block's two predecessors (access, fault).
    fn guarded<R>(
        &mut self,
        name: &str,
        index: IntValue<'ctx>,
        lanes: u8,
        len: u64,
        proven: Proven,
        access: impl FnOnce(&mut Self) -> Result<R, CodegenError>,
    ) -> Result<(R, BasicBlock<'ctx>, BasicBlock<'ctx>), CodegenError> {
        let (ok, in_bounds) = self.access_ok(index, lanes, len, proven)?;
        self.branch_on_checks(name, (ok, in_bounds), access)
    }

    /// [`Self::guarded`] on checks already made (`ok`, `in_bounds`: see
    /// [`Self::access_ok`]), for an access of several memories.
    pub(super) fn branch_on_checks<R>(
        &mut self,
        name: &str,
        (ok, in_bounds): (IntValue<'ctx>, IntValue<'ctx>),
        access: impl FnOnce(&mut Self) -> Result<R, CodegenError>,
    ) -> Result<(R, BasicBlock<'ctx>, BasicBlock<'ctx>), CodegenError> {
        let func = self.func;
        let ok_b = self.ctx.append_basic_block(func, name);
        let fail_b = self.ctx.append_basic_block(func, &format!("{name}.fault"));
        let merge = self.ctx.append_basic_block(func, &format!("{name}.end"));
        self.b
            .build_conditional_branch(ok, ok_b, fail_b)
            .or_internal()?;

        self.b.position_at_end(ok_b);
        let result = access(self)?;
        self.b.build_unconditional_branch(merge).or_internal()?;

        self.b.position_at_end(fail_b);
        self.raise_access_fault(in_bounds)?;
        self.b.build_unconditional_branch(merge).or_internal()?;

        self.b.position_at_end(merge);
        Ok((result, ok_b, fail_b))
    }

    /// The pointer to element `index` (in bounds when used).
    pub(super) fn element_ptr(
        &self,
        t: &Target<'ctx>,
        index: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>, CodegenError> {
        let wide = self
            .b
            .build_int_z_extend(index, self.ctx.i64_type(), "")
            .or_internal()?;
        let elem = self.memory_type(t.elem);
        // SAFETY: `build_in_bounds_gep` is unsafe only because an out-of-bounds GEP is
        // poison; callers use the pointer only where `index + lanes <= len` is checked
        // or proven, i.e. inside the buffer or shared array.
        unsafe { self.b.build_in_bounds_gep(elem, t.base, &[wide], "") }.or_internal()
    }

    /// The alignment of a `lanes`-wide access at a multiple of `lanes`.
    fn access_align(t: &Target<'ctx>, lanes: u8) -> u32 {
        (lanes as u32 * t.elem.size_bytes()).min(t.align)
    }

    fn set_align(inst: Option<InstructionValue<'ctx>>, align: u32) -> Result<(), CodegenError> {
        inst.ok_or_else(|| internal("a memory access is not an instruction"))?
            .set_alignment(align)
            .map_err(|e| internal(format!("setting alignment {align}: {e}")))
    }

    pub(super) fn load(
        &mut self,
        mem: Memory,
        index: IntValue<'ctx>,
        index_expr: &Expr,
        lanes: u8,
    ) -> Result<Val<'ctx>, CodegenError> {
        let t = self.memory_of(mem)?;
        let ty = Type::vector(t.elem.value_type(), lanes);
        let proven = self.ranges.access(index_expr, lanes, t.len);
        if proven.all() {
            let lanes = self.raw_load(&t, index, lanes)?;
            return Ok(Val { ty, lanes });
        }
        let (loaded, ok_b, fail_b) = self.guarded("load", index, lanes, t.len, proven, |l| {
            l.raw_load(&t, index, lanes)
        })?;
        let scalar: BasicTypeEnum<'ctx> = self.scalar_type(ty.scalar);
        let zero = self.zero(ty.scalar);
        let mut out = Vec::with_capacity(loaded.len());
        for v in loaded {
            let phi = self.b.build_phi(scalar, "").or_internal()?;
            phi.add_incoming(&[(&v, ok_b), (&zero, fail_b)]);
            out.push(phi.as_basic_value());
        }
        Ok(Val { ty, lanes: out })
    }

    /// The lanes at `index` (one wide load for vectors), as values of the IR type.
    fn raw_load(
        &mut self,
        t: &Target<'ctx>,
        index: IntValue<'ctx>,
        lanes: u8,
    ) -> Result<Vec<BasicValueEnum<'ctx>>, CodegenError> {
        let ptr = self.element_ptr(t, index)?;
        let elem = self.memory_type(t.elem);
        let align = Self::access_align(t, lanes);
        let raw: Vec<BasicValueEnum<'ctx>> = if lanes == 1 {
            let v = self.b.build_load(elem, ptr, "").or_internal()?;
            Self::set_align(v.as_instruction_value(), align)?;
            vec![v]
        } else {
            let vec_t = vector_type(elem, lanes)?;
            let v = self.b.build_load(vec_t, ptr, "").or_internal()?;
            Self::set_align(v.as_instruction_value(), align)?;
            let v = inkwell::values::VectorValue::try_from(v)
                .map_err(|_| internal("a vector load is not a vector"))?;
            let mut out = Vec::with_capacity(lanes as usize);
            for l in 0..lanes {
                let i = self.ctx.i32_type().const_int(l as u64, false);
                out.push(self.b.build_extract_element(v, i, "").or_internal()?);
            }
            out
        };
        let i32t = self.ctx.i32_type();
        let mut out = Vec::with_capacity(raw.len());
        for w in raw {
            let b = &self.b;
            out.push(match t.elem {
                // Bool bytes: nonzero is true.
                ScalarType::Bool => {
                    let w = int(w)?;
                    b.build_int_compare(IntPredicate::NE, w, w.get_type().const_zero(), "")
                        .or_internal()?
                        .into()
                }
                ScalarType::U8 | ScalarType::U16 => b
                    .build_int_z_extend(int(w)?, i32t, "")
                    .or_internal()?
                    .into(),
                ScalarType::I8 | ScalarType::I16 => b
                    .build_int_s_extend(int(w)?, i32t, "")
                    .or_internal()?
                    .into(),
                ScalarType::I32
                | ScalarType::U32
                | ScalarType::I64
                | ScalarType::F16
                | ScalarType::Bf16
                | ScalarType::F32
                | ScalarType::F64 => w,
            });
        }
        Ok(out)
    }

    /// The pointer to element `index` of shared array `mem` (in bounds when used).
    pub(super) fn shared_element_ptr(
        &self,
        mem: Memory,
        index: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>, CodegenError> {
        let t = self.memory_of(mem)?;
        self.element_ptr(&t, index)
    }

    /// One element at `index`, checked against the memory's length when `checked`
    /// (a fragment's element, whose index the range analysis has not seen).
    pub(super) fn load_element(
        &mut self,
        mem: Memory,
        index: IntValue<'ctx>,
        checked: bool,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let t = self.memory_of(mem)?;
        if !checked {
            return first(self.raw_load(&t, index, 1)?);
        }
        let proven = Proven {
            in_bounds: false,
            aligned: true,
        };
        let (loaded, ok_b, fail_b) = self.guarded("load", index, 1, t.len, proven, |l| {
            l.raw_load(&t, index, 1)
        })?;
        let value = t.elem.value_type();
        let phi = self
            .b
            .build_phi(self.scalar_type(value), "")
            .or_internal()?;
        phi.add_incoming(&[(&first(loaded)?, ok_b), (&self.zero(value), fail_b)]);
        Ok(phi.as_basic_value())
    }

    /// [`Self::load_element`]'s store.
    pub(super) fn store_element(
        &mut self,
        mem: Memory,
        index: IntValue<'ctx>,
        value: &Val<'ctx>,
        checked: bool,
    ) -> Result<(), CodegenError> {
        let t = self.memory_of(mem)?;
        if !checked {
            return self.raw_store(&t, index, value);
        }
        let proven = Proven {
            in_bounds: false,
            aligned: true,
        };
        self.guarded("store", index, 1, t.len, proven, |l| {
            l.raw_store(&t, index, value)
        })?;
        Ok(())
    }

    pub(super) fn store(
        &mut self,
        mem: Memory,
        index: IntValue<'ctx>,
        index_expr: &Expr,
        value: &Val<'ctx>,
    ) -> Result<(), CodegenError> {
        let t = self.memory_of(mem)?;
        if value.ty.scalar != t.elem.value_type() {
            return Err(internal(format!(
                "storing {} into memory of {}",
                value.ty, t.elem
            )));
        }
        let lanes = value.ty.lanes;
        let proven = self.ranges.access(index_expr, lanes, t.len);
        if proven.all() {
            return self.raw_store(&t, index, value);
        }
        self.guarded("store", index, lanes, t.len, proven, |l| {
            l.raw_store(&t, index, value)
        })?;
        Ok(())
    }

    fn raw_store(
        &mut self,
        t: &Target<'ctx>,
        index: IntValue<'ctx>,
        value: &Val<'ctx>,
    ) -> Result<(), CodegenError> {
        let mut lanes = Vec::with_capacity(value.lanes.len());
        for &v in &value.lanes {
            let memory = || match self.memory_type(t.elem) {
                BasicTypeEnum::IntType(i) => Ok(i),
                other => Err(internal(format!("{other:?} holds {}", t.elem))),
            };
            lanes.push(match t.elem {
                // true is stored as 1.
                ScalarType::Bool => self
                    .b
                    .build_int_z_extend(int(v)?, memory()?, "")
                    .or_internal()?
                    .into(),
                // A narrow element keeps the value's low bits.
                ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => self
                    .b
                    .build_int_truncate(int(v)?, memory()?, "")
                    .or_internal()?
                    .into(),
                ScalarType::I32
                | ScalarType::U32
                | ScalarType::I64
                | ScalarType::F16
                | ScalarType::Bf16
                | ScalarType::F32
                | ScalarType::F64 => v,
            });
        }
        let ptr = self.element_ptr(t, index)?;
        let align = Self::access_align(t, value.ty.lanes);
        let stored = if let [single] = lanes.as_slice() {
            self.b.build_store(ptr, *single).or_internal()?
        } else {
            let vec_t = vector_type(self.memory_type(t.elem), value.ty.lanes)?;
            let mut v = vec_t.get_poison();
            for (l, lane) in lanes.into_iter().enumerate() {
                let i = self.ctx.i32_type().const_int(l as u64, false);
                v = self.b.build_insert_element(v, lane, i, "").or_internal()?;
            }
            self.b.build_store(ptr, v).or_internal()?
        };
        Self::set_align(Some(stored), align)
    }
}

/// `<lanes x elem>`.
fn vector_type(
    elem: BasicTypeEnum<'_>,
    lanes: u8,
) -> Result<inkwell::types::VectorType<'_>, CodegenError> {
    use inkwell::types::BasicTypeEnum as T;
    let n = lanes as u32;
    Ok(match elem {
        T::IntType(t) => t.vec_type(n),
        T::FloatType(t) => t.vec_type(n),
        other => return Err(internal(format!("vector of {other:?}"))),
    })
}

fn first<'ctx>(lanes: Vec<BasicValueEnum<'ctx>>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
    lanes
        .into_iter()
        .next()
        .ok_or_else(|| internal("an access of no lanes"))
}
