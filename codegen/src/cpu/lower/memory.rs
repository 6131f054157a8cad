//! Loads and stores, each checked against the memory's static length.
//!
//! An access of `lanes` elements at `index` is done only when
//! `index <= len - lanes` (and, for vectors, `index % lanes == 0`): one compare (plus
//! an `and` for vectors) and one branch. Otherwise a cold block ORs
//! [`status::OUT_OF_BOUNDS`](crate::cpu::status::OUT_OF_BOUNDS) or
//! [`status::UNALIGNED`](crate::cpu::status::UNALIGNED) into the status word and skips
//! the access (a load yields zeros).
//!
//! A check that cannot fail is left out: the value-range analysis
//! ([`kernelc_ir::analysis::Ranges`], computed once per kernel) bounds the index
//! expression, and when its range proves `hi + lanes <= len` the bounds compare goes,
//! when its alignment is a multiple of `lanes` the alignment test goes, and with both
//! the access is a plain load or store without a branch. (Literal indices, which the
//! validator checked, are the simplest case: their range is exact.)

use super::value::Val;
use super::{internal, Lower};
use crate::cpu::repr::memory_clif;
use crate::cpu::status;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_module::Module;
use kernelc_ir::{Expr, Memory, ScalarType, Type};

/// Flags of a checked access: in bounds by construction, maybe not 16-byte aligned.
fn access_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

use kernelc_ir::analysis::AccessProof as Proven;

impl<M: Module> Lower<'_, '_, M> {
    fn memory_of(&self, mem: Memory) -> Result<(Value, ScalarType, u64), CodegenError> {
        let (elem, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let base = match mem {
            Memory::Buffer(p) => self.buffers.get(p.0 as usize).copied().flatten(),
            Memory::Shared(s) => self.shared.get(s.0 as usize).copied(),
        };
        let base = base.ok_or_else(|| internal(format!("no base address for {mem:?}")))?;
        Ok((base, elem, len))
    }

    /// `(ok, in_bounds)`: whether the access may proceed, and whether it is in bounds.
    /// Checks in `proven` are not emitted (their result is the constant true).
    fn access_ok(&mut self, index: Value, lanes: u8, len: u64, proven: Proven) -> (Value, Value) {
        let lanes64 = lanes as u64;
        let in_bounds = if proven.in_bounds {
            self.iconst(types::I8, 1)
        } else if len < lanes64 {
            self.iconst(types::I8, 0)
        } else if len - lanes64 >= u32::MAX as u64 {
            self.iconst(types::I8, 1)
        } else {
            let limit = self.iconst(types::I32, len - lanes64);
            self.b
                .ins()
                .icmp(IntCC::UnsignedLessThanOrEqual, index, limit)
        };
        if lanes == 1 || proven.aligned {
            return (in_bounds, in_bounds);
        }
        let low = self.b.ins().band_imm_u(index, lanes as i64 - 1);
        let aligned = self.b.ins().icmp_imm_u(IntCC::Equal, low, 0);
        if proven.in_bounds {
            return (aligned, in_bounds);
        }
        (self.b.ins().band(in_bounds, aligned), in_bounds)
    }

    /// In the failure block of an access: records why it failed.
    fn raise_access_fault(&mut self, in_bounds: Value) {
        let unaligned = self.iconst(types::I32, status::UNALIGNED as u64);
        let oob = self.iconst(types::I32, status::OUT_OF_BOUNDS as u64);
        let bits = self.b.ins().select(in_bounds, unaligned, oob);
        self.raise(bits);
    }

    /// The address of element `index` of a memory at `base`.
    fn element_addr(&mut self, base: Value, index: Value, elem: ScalarType) -> Value {
        let wide = if self.ptr_ty.bits() > 32 {
            self.b.ins().uextend(self.ptr_ty, index)
        } else {
            index
        };
        let offset = self.b.ins().imul_imm_u(wide, elem.size_bytes() as i64);
        self.b.ins().iadd(base, offset)
    }

    pub(crate) fn load(
        &mut self,
        mem: Memory,
        index: Value,
        index_expr: &Expr,
        lanes: u8,
    ) -> Result<Val, CodegenError> {
        let (base, elem, len) = self.memory_of(mem)?;
        let ty = Type::vector(elem.value_type(), lanes);
        let proven = self.ranges.access(index_expr, lanes, len);
        if proven.all() {
            return Ok(self.raw_load(base, index, elem, lanes));
        }
        let (ok, in_bounds) = self.access_ok(index, lanes, len, proven);
        let ok_b = self.b.create_block();
        let fail_b = self.b.create_block();
        let merge = self.b.create_block();
        self.b.set_cold_block(fail_b);
        let result_types = self.canonical_types(ty);
        for &t in &result_types {
            self.b.append_block_param(merge, t);
        }
        self.b.ins().brif(ok, ok_b, &[], fail_b, &[]);

        self.b.switch_to_block(ok_b);
        let v = self.raw_load(base, index, elem, lanes);
        let values: Vec<BlockArg> = self.canonical(&v).into_iter().map(BlockArg::from).collect();
        self.b.ins().jump(merge, &values);

        self.b.switch_to_block(fail_b);
        self.raise_access_fault(in_bounds);
        let zeros: Vec<BlockArg> = result_types
            .iter()
            .map(|&t| BlockArg::from(self.zero_of(t)))
            .collect();
        self.b.ins().jump(merge, &zeros);

        self.b.switch_to_block(merge);
        let params = self.b.block_params(merge).to_vec();
        Ok(self.rebuild(ty, params))
    }

    /// `lanes` elements of `elem` from element `index`, as a value of its value type.
    fn raw_load(&mut self, base: Value, index: Value, elem: ScalarType, lanes: u8) -> Val {
        let ty = Type::vector(elem.value_type(), lanes);
        let addr = self.element_addr(base, index, elem);
        if let Some((chunk, n)) = self.layout(Type::vector(elem, lanes)) {
            let chunks = (0..n)
                .map(|c| {
                    self.b
                        .ins()
                        .load(chunk, access_flags(), addr, c as i32 * 16)
                })
                .collect();
            return Val::packed(ty, chunks);
        }
        let size = elem.size_bytes() as i32;
        let mut values = Vec::with_capacity(lanes as usize);
        for l in 0..lanes as i32 {
            let (flags, offset) = (access_flags(), l * size);
            let ins = self.b.ins();
            values.push(match elem {
                ScalarType::Bool => {
                    let v = ins.load(types::I8, flags, addr, offset);
                    self.b.ins().icmp_imm_u(IntCC::NotEqual, v, 0)
                }
                ScalarType::U8 => ins.uload8(types::I32, flags, addr, offset),
                ScalarType::I8 => ins.sload8(types::I32, flags, addr, offset),
                ScalarType::U16 => ins.uload16(types::I32, flags, addr, offset),
                ScalarType::I16 => ins.sload16(types::I32, flags, addr, offset),
                ScalarType::I32
                | ScalarType::U32
                | ScalarType::I64
                | ScalarType::F16
                | ScalarType::Bf16
                | ScalarType::F32
                | ScalarType::F64 => ins.load(memory_clif(elem), flags, addr, offset),
            });
        }
        Val::lanes(ty, values)
    }

    pub(crate) fn store(
        &mut self,
        mem: Memory,
        index: Value,
        index_expr: &Expr,
        value: &Val,
    ) -> Result<(), CodegenError> {
        let (base, elem, len) = self.memory_of(mem)?;
        if value.ty.scalar != elem.value_type() {
            return Err(internal(format!(
                "storing {} into memory of {elem}",
                value.ty
            )));
        }
        let lanes = value.ty.lanes;
        let proven = self.ranges.access(index_expr, lanes, len);
        if proven.all() {
            self.raw_store(base, index, elem, value);
            return Ok(());
        }
        let (ok, in_bounds) = self.access_ok(index, lanes, len, proven);
        let ok_b = self.b.create_block();
        let fail_b = self.b.create_block();
        let merge = self.b.create_block();
        self.b.set_cold_block(fail_b);
        self.b.ins().brif(ok, ok_b, &[], fail_b, &[]);

        self.b.switch_to_block(ok_b);
        self.raw_store(base, index, elem, value);
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(fail_b);
        self.raise_access_fault(in_bounds);
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(merge);
        Ok(())
    }

    /// `value` (of `elem`'s value type) stored as elements of `elem` from `index`.
    fn raw_store(&mut self, base: Value, index: Value, elem: ScalarType, value: &Val) {
        let addr = self.element_addr(base, index, elem);
        // A narrow element is narrower than the SIMD lanes of its value type.
        let simd = if elem.is_storage_only() {
            None
        } else {
            self.packed_of(value)
        };
        if let Some(chunks) = simd {
            for (c, chunk) in chunks.into_iter().enumerate() {
                self.b
                    .ins()
                    .store(access_flags(), chunk, addr, c as i32 * 16);
            }
            return;
        }
        let size = elem.size_bytes() as i32;
        for (l, v) in self.lanes_of(value).into_iter().enumerate() {
            let (flags, offset) = (access_flags(), l as i32 * size);
            let ins = self.b.ins();
            match elem {
                // A bool is an `i8` 0 or 1 already; a narrow integer keeps its low bits.
                ScalarType::U8 | ScalarType::I8 => {
                    ins.istore8(flags, v, addr, offset);
                }
                ScalarType::U16 | ScalarType::I16 => {
                    ins.istore16(flags, v, addr, offset);
                }
                ScalarType::Bool
                | ScalarType::I32
                | ScalarType::U32
                | ScalarType::I64
                | ScalarType::F16
                | ScalarType::Bf16
                | ScalarType::F32
                | ScalarType::F64 => {
                    ins.store(flags, v, addr, offset);
                }
            }
        }
    }
}
