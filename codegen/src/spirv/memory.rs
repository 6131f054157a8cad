//! Loads and stores, checked against the memory's static length.
//!
//! An access of `lanes` elements at `index` may proceed when `index <= len - lanes`
//! and, for vectors, `index % lanes == 0`. Checks that
//! [`kernelc_ir::analysis::Ranges`] proves unnecessary are not emitted.
//!
//! * A load is branch-free: a failing access reads at index 0 instead (in bounds: the
//!   memory has at least `lanes` elements, or nothing is read at all) and the result
//!   is replaced by zero.
//! * A failing store is skipped: a selection construct around the store.
//!
//! Either way the failure ORs `OUT_OF_BOUNDS` or `UNALIGNED` into the status.
//! Memory is an array of scalars, where vector accesses are composed of scalar
//! accesses, except for a buffer declared as an array of `vecL<T>` (its accesses are
//! all aligned `L`-lane vectors, see `globals::declare_buffers`): there an access is
//! one vector load or store of slot `index / L`. The checks stay in element units.

use super::emitter::{build_error, Emitter, Val, R};
use super::internal;
use crate::abi::status;
use kernelc_ir::{Expr, Memory, ScalarType, Type};
use rspirv::spirv::{Op, SelectionControl, StorageClass, Word};

/// Where a memory lives.
#[derive(Clone, Copy, Debug)]
struct Place {
    var: Word,
    elem: ScalarType,
    len: u64,
    /// Storage buffers wrap their array in a struct (member 0).
    in_buffer: bool,
    /// Lanes of the array's element type (1: scalars).
    view_lanes: u8,
}

/// The dynamic conditions of one access (constants where proven).
struct Checks {
    ok: Word,
    in_bounds: Word,
}

impl Emitter<'_> {
    fn place(&self, mem: Memory) -> R<Place> {
        match mem {
            Memory::Buffer(p) => self
                .buffers
                .get(p.0 as usize)
                .copied()
                .flatten()
                .map(|b| Place {
                    var: b.var,
                    elem: b.elem,
                    len: b.len,
                    in_buffer: true,
                    view_lanes: b.view_lanes,
                }),
            Memory::Shared(s) => self.shared.get(s.0 as usize).map(|s| Place {
                var: s.var,
                elem: s.elem,
                len: s.len,
                in_buffer: false,
                view_lanes: 1,
            }),
        }
        .ok_or_else(|| internal(format!("unknown memory {mem:?}")))
    }

    /// The checks of an access, or `None` when the analysis proves it safe.
    fn checks(&mut self, index: Word, index_expr: &Expr, lanes: u8, len: u64) -> R<Option<Checks>> {
        let n = lanes as u64;
        let proven = self.ranges.access(index_expr, lanes, len);
        if proven.in_bounds && proven.aligned {
            return Ok(None);
        }
        let bool_ty = self.bool_ty();
        // `len >= lanes` here (callers handle shorter memories), and an index is a u32:
        // a limit of u32::MAX or more is never exceeded.
        let in_bounds = if proven.in_bounds || len - n >= u32::MAX as u64 {
            self.const_bool(true)
        } else {
            let limit = self.const_u32((len - n) as u32);
            self.ins(Op::ULessThanEqual, bool_ty, &[index, limit])?
        };
        let ok = if proven.aligned {
            in_bounds
        } else {
            let u = self.u32_ty();
            let mask = self.const_u32(lanes as u32 - 1);
            let low = self.ins(Op::BitwiseAnd, u, &[index, mask])?;
            let zero = self.const_u32(0);
            let aligned = self.ins(Op::IEqual, bool_ty, &[low, zero])?;
            self.and(bool_ty, in_bounds, aligned)?
        };
        Ok(Some(Checks { ok, in_bounds }))
    }

    /// Records why an access failed, when it did.
    fn raise_fault(&mut self, c: &Checks) -> R<()> {
        let u = self.u32_ty();
        let unaligned = self.const_u32(status::UNALIGNED);
        let oob = self.const_u32(status::OUT_OF_BOUNDS);
        let none = self.const_u32(0);
        let why = self.ins(Op::Select, u, &[c.in_bounds, unaligned, oob])?;
        let bits = self.ins(Op::Select, u, &[c.ok, none, why])?;
        self.raise(bits)
    }

    /// A pointer to element `index` of a memory.
    fn element_ptr(&mut self, p: Place, index: Word) -> R<Word> {
        let elem_ty = self.storage_scalar(p.elem, p.in_buffer)?;
        let (class, chain) = if p.in_buffer {
            (StorageClass::StorageBuffer, vec![self.const_u32(0), index])
        } else {
            (StorageClass::Workgroup, vec![index])
        };
        let ptr_ty = self.pointer(class, elem_ty);
        self.b
            .access_chain(ptr_ty, None, p.var, chain)
            .map_err(build_error)
    }

    /// A pointer to the vector slot holding elements `index .. index + lanes` of a
    /// buffer viewed as `vecL<T>[]`. The index is a proven multiple of `lanes` (the
    /// view exists only then), so the slot is `index >> log2(lanes)`.
    fn vector_slot_ptr(&mut self, p: Place, index: Word, lanes: u8) -> R<Word> {
        let shift = match (p.view_lanes, lanes, p.elem) {
            (view, 2 | 4, ScalarType::F32 | ScalarType::I32 | ScalarType::U32) if view == lanes => {
                lanes.trailing_zeros()
            }
            _ => {
                return Err(internal(format!(
                    "{lanes}-lane access to a vec{}<{}> buffer view",
                    p.view_lanes, p.elem
                )))
            }
        };
        let u = self.u32_ty();
        let amount = self.const_u32(shift);
        let slot = self.ins(Op::ShiftRightLogical, u, &[index, amount])?;
        let scalar = self.storage_scalar(p.elem, p.in_buffer)?;
        let vector = self.vector_of(scalar, lanes);
        let ptr_ty = self.pointer(StorageClass::StorageBuffer, vector);
        let member = self.const_u32(0);
        self.b
            .access_chain(ptr_ty, None, p.var, [member, slot])
            .map_err(build_error)
    }

    /// `index + lane`.
    fn lane_index(&mut self, index: Word, lane: u8) -> R<Word> {
        if lane == 0 {
            return Ok(index);
        }
        let u = self.u32_ty();
        let l = self.const_u32(lane as u32);
        self.ins(Op::IAdd, u, &[index, l])
    }

    pub(crate) fn load_mem(
        &mut self,
        mem: Memory,
        index: Word,
        index_expr: &Expr,
        lanes: u8,
    ) -> R<Val> {
        let p = self.place(mem)?;
        let ty = Type::vector(p.elem, lanes);
        if p.len < lanes as u64 {
            // Never in bounds: nothing is read.
            let oob = self.const_u32(status::OUT_OF_BOUNDS);
            self.raise(oob)?;
            return Ok(Val {
                id: self.zero(ty)?,
                ty,
            });
        }
        let checks = self.checks(index, index_expr, lanes, p.len)?;
        let safe_index = match &checks {
            None => index,
            Some(c) => {
                self.raise_fault(c)?;
                let u = self.u32_ty();
                let zero = self.const_u32(0);
                self.ins(Op::Select, u, &[c.ok, index, zero])?
            }
        };
        let reg = self.reg_type(ty)?;
        let loaded = if p.view_lanes > 1 {
            // f32/i32/u32 only: the memory type is the register type.
            let ptr = self.vector_slot_ptr(p, safe_index, lanes)?;
            self.load(reg, ptr)?
        } else {
            let mut parts = Vec::with_capacity(lanes as usize);
            for lane in 0..lanes {
                let i = self.lane_index(safe_index, lane)?;
                let ptr = self.element_ptr(p, i)?;
                parts.push(self.read_element(p, ptr)?);
            }
            if lanes == 1 {
                parts[0]
            } else {
                self.b
                    .composite_construct(reg, None, parts)
                    .map_err(build_error)?
            }
        };
        let id = match &checks {
            None => loaded,
            Some(c) => {
                let ok = self.splat_bool(c.ok, lanes)?;
                let zero = self.zero(ty)?;
                self.ins(Op::Select, reg, &[ok, loaded, zero])?
            }
        };
        Ok(Val { id, ty })
    }

    /// One element, converted from its memory type to its register type.
    fn read_element(&mut self, p: Place, ptr: Word) -> R<Word> {
        let stored = self.storage_scalar(p.elem, p.in_buffer)?;
        let v = self.load(stored, ptr)?;
        let reg = self.reg_scalar(p.elem)?;
        match p.elem {
            ScalarType::Bool => {
                let zero = self.const_u32(0);
                self.ins(Op::INotEqual, reg, &[v, zero])
            }
            // Exact: every f16 is an f32.
            ScalarType::F16 => self.ins(Op::FConvert, reg, &[v]),
            _ => Ok(v),
        }
    }

    /// One element, converted from its register type to its memory type.
    fn write_element(&mut self, p: Place, ptr: Word, v: Word) -> R<()> {
        let stored_ty = self.storage_scalar(p.elem, p.in_buffer)?;
        let stored = match p.elem {
            ScalarType::Bool => {
                let one = self.const_u32(1);
                let zero = self.const_u32(0);
                self.ins(Op::Select, stored_ty, &[v, one, zero])?
            }
            // Exact: f16 registers hold values on the f16 grid.
            ScalarType::F16 => self.ins(Op::FConvert, stored_ty, &[v])?,
            _ => v,
        };
        self.store(ptr, stored)
    }

    pub(crate) fn store_mem(
        &mut self,
        mem: Memory,
        index: Word,
        index_expr: &Expr,
        value: Val,
    ) -> R<()> {
        let p = self.place(mem)?;
        if value.ty.scalar != p.elem {
            return Err(internal(format!(
                "storing {} into memory of {}",
                value.ty, p.elem
            )));
        }
        let lanes = value.ty.lanes;
        if p.len < lanes as u64 {
            let oob = self.const_u32(status::OUT_OF_BOUNDS);
            return self.raise(oob);
        }
        let checks = self.checks(index, index_expr, lanes, p.len)?;
        let merge = match &checks {
            None => None,
            Some(c) => {
                self.raise_fault(c)?;
                let write = self.b.id();
                let merge = self.b.id();
                self.b
                    .selection_merge(merge, SelectionControl::NONE)
                    .map_err(build_error)?;
                self.b
                    .branch_conditional(c.ok, write, merge, [])
                    .map_err(build_error)?;
                self.b.begin_block(Some(write)).map_err(build_error)?;
                Some(merge)
            }
        };
        if p.view_lanes > 1 {
            let ptr = self.vector_slot_ptr(p, index, lanes)?;
            self.store(ptr, value.id)?;
        } else {
            self.store_lanes(p, index, value)?;
        }
        if let Some(merge) = merge {
            self.b.branch(merge).map_err(build_error)?;
            self.b.begin_block(Some(merge)).map_err(build_error)?;
        }
        Ok(())
    }

    /// Stores `value` lane by lane into a memory of scalars.
    fn store_lanes(&mut self, p: Place, index: Word, value: Val) -> R<()> {
        let lanes = value.ty.lanes;
        let scalar = self.reg_scalar(p.elem)?;
        for lane in 0..lanes {
            let v = if lanes == 1 {
                value.id
            } else {
                self.extract(scalar, value.id, lane as u32)?
            };
            let i = self.lane_index(index, lane)?;
            let ptr = self.element_ptr(p, i)?;
            self.write_element(p, ptr, v)?;
        }
        Ok(())
    }
}
