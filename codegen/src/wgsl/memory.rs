//! Loads and stores, each checked against the memory's static length.
//!
//! An access of `lanes` elements at `index` is done only when
//! `index <= len - lanes` (and, for vectors, `index % lanes == 0`). A failing load
//! reads element 0 instead (so it never leaves the array) and yields zero; a failing
//! store is skipped; either ORs `OUT_OF_BOUNDS` (or `UNALIGNED` for an in-bounds
//! misaligned vector access) into the status word. Checks the value-range analysis
//! ([`kernelc_ir::analysis::Ranges`]) proves unnecessary are not emitted, exactly as
//! the CPU target does. Vector accesses are `lanes` scalar accesses of the `array<T>`.

use super::lower::{internal, Lower, Val};
use crate::abi::status;
use crate::CodegenError;
use kernelc_ir::{Expr, Memory, Scalar, ScalarType, Type};
use naga::{BinaryOperator as Bo, Expression, Handle, ScalarKind, Statement, UnaryOperator};

type H = Handle<Expression>;


/// The run-time test of an access that may fail.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// Never fails: no test.
    None,
    /// Always fails (the memory is shorter than the access): no access at all.
    Never,
    /// `ok`: the access may proceed; `fault`: the status bits a failure raises.
    Test { ok: H, fault: H },
}

impl Lower<'_> {
    /// The pointer to a memory, its element type and its length.
    fn memory_of(&self, mem: Memory) -> Result<(H, ScalarType, u64), CodegenError> {
        let (elem, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let base = match mem {
            Memory::Buffer(p) => self.buffers.get(p.0 as usize).copied().flatten(),
            Memory::Shared(s) => self.shared.get(s.0 as usize).copied(),
        };
        let base = base.ok_or_else(|| internal(format!("no variable for {mem:?}")))?;
        Ok((base, elem, len))
    }

    fn check(&mut self, index: H, index_expr: &Expr, lanes: u8, len: u64) -> Check {
        let proven = self.ranges.access(index_expr, lanes, len);
        let lanes64 = lanes as u64;
        if !proven.in_bounds && len < lanes64 {
            return Check::Never;
        }
        let bounds = if proven.in_bounds || len - lanes64 >= u32::MAX as u64 {
            None
        } else {
            let limit = self.lit_u32((len - lanes64) as u32);
            Some(self.binary(Bo::LessEqual, index, limit))
        };
        let alignment = if lanes == 1 || proven.aligned {
            None
        } else {
            let mask = self.lit_u32(lanes as u32 - 1);
            let low = self.binary(Bo::And, index, mask);
            let zero = self.lit_u32(0);
            Some(self.binary(Bo::Equal, low, zero))
        };
        match (bounds, alignment) {
            (None, None) => Check::None,
            (Some(b), None) => Check::Test {
                ok: b,
                fault: self.lit_u32(status::OUT_OF_BOUNDS),
            },
            (None, Some(a)) => Check::Test {
                ok: a,
                fault: self.lit_u32(status::UNALIGNED),
            },
            (Some(b), Some(a)) => {
                // `UNALIGNED` only for an access that was in bounds.
                let unaligned = self.lit_u32(status::UNALIGNED);
                let oob = self.lit_u32(status::OUT_OF_BOUNDS);
                Check::Test {
                    ok: self.binary(Bo::LogicalAnd, b, a),
                    fault: self.select(b, unaligned, oob),
                }
            }
        }
    }

    /// The index of lane `l` of an access at `index`.
    fn lane_index(&mut self, index: H, l: u8) -> H {
        if l == 0 {
            return index;
        }
        let offset = self.lit_u32(l as u32);
        self.binary(Bo::Add, index, offset)
    }

    pub(super) fn load(
        &mut self,
        mem: Memory,
        index: Val,
        index_expr: &Expr,
        lanes: u8,
    ) -> Result<Val, CodegenError> {
        let (base, elem, len) = self.memory_of(mem)?;
        let ty = Type::vector(elem, lanes);
        let h = match self.check(index.h, index_expr, lanes, len) {
            Check::None => self.raw_load(base, index.h, ty)?,
            Check::Never => {
                let oob = self.lit_u32(status::OUT_OF_BOUNDS);
                self.raise(oob);
                self.zero(ty)?
            }
            Check::Test { ok, fault } => {
                let failed = self.unary(UnaryOperator::LogicalNot, ok);
                self.raise_if(failed, fault)?;
                let zero_index = self.lit_u32(0);
                let safe_index = self.select(ok, index.h, zero_index);
                let v = self.raw_load(base, safe_index, ty)?;
                let zero = self.zero(ty)?;
                self.select(ok, v, zero)
            }
        };
        Ok(Val { h, ty })
    }

    /// The zero (false) of a value type.
    fn zero(&mut self, ty: Type) -> Result<H, CodegenError> {
        self.konst(ty, Scalar::zero(ty.scalar))
    }

    fn raw_load(&mut self, base: H, index: H, ty: Type) -> Result<H, CodegenError> {
        let mut lanes = Vec::with_capacity(ty.lanes as usize);
        for l in 0..ty.lanes {
            let i = self.lane_index(index, l);
            let pointer = self.e(Expression::Access { base, index: i });
            let v = self.e(Expression::Load { pointer });
            lanes.push(match ty.scalar {
                ScalarType::Bool => {
                    let zero = self.lit_u32(0);
                    self.binary(Bo::NotEqual, v, zero)
                }
                // f16 values are held as f32: an exact conversion.
                ScalarType::F16 => self.convert(v, ScalarKind::Float, 4),
                _ => v,
            });
        }
        if ty.lanes == 1 {
            return lanes.pop().ok_or_else(|| internal("a load of no lanes"));
        }
        let vec_ty = super::types::value_type(&mut self.module.types, ty)?;
        Ok(self.e(Expression::Compose {
            ty: vec_ty,
            components: lanes,
        }))
    }

    pub(super) fn store(
        &mut self,
        mem: Memory,
        index: Val,
        index_expr: &Expr,
        value: Val,
    ) -> Result<(), CodegenError> {
        let (base, elem, len) = self.memory_of(mem)?;
        if value.ty.scalar != elem {
            return Err(internal(format!(
                "storing {} into memory of {elem}",
                value.ty
            )));
        }
        match self.check(index.h, index_expr, value.ty.lanes, len) {
            Check::None => self.raw_store(base, index.h, value),
            Check::Never => {
                let oob = self.lit_u32(status::OUT_OF_BOUNDS);
                self.raise(oob);
                Ok(())
            }
            Check::Test { ok, fault } => {
                self.f.open();
                self.raw_store(base, index.h, value)?;
                let accept = self.close()?;
                self.f.open();
                self.raise(fault);
                let reject = self.close()?;
                self.f.stmt(Statement::If {
                    condition: ok,
                    accept,
                    reject,
                });
                Ok(())
            }
        }
    }

    fn raw_store(&mut self, base: H, index: H, value: Val) -> Result<(), CodegenError> {
        let lanes = value.ty.lanes;
        for l in 0..lanes {
            let mut v = if lanes == 1 {
                value.h
            } else {
                self.e(Expression::AccessIndex {
                    base: value.h,
                    index: l as u32,
                })
            };
            match value.ty.scalar {
                ScalarType::Bool => {
                    let one = self.lit_u32(1);
                    let zero = self.lit_u32(0);
                    v = self.select(v, one, zero);
                }
                // An f16 value (held as f32) is representable: an exact conversion.
                ScalarType::F16 => v = self.convert(v, ScalarKind::Float, 2),
                _ => {}
            }
            let i = self.lane_index(index, l);
            let pointer = self.e(Expression::Access { base, index: i });
            self.f.stmt(Statement::Store { pointer, value: v });
        }
        Ok(())
    }
}
