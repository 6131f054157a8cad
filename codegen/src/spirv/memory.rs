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
//! Bool and narrow-integer buffers are `u32[]`s of packed words
//! ([`crate::shader::Packing`]): a load extracts the element's bits, a store is an
//! atomic clear and set of them (or one atomic store of each word a vector covers).

use super::emitter::{build_error, Emitter, Val, R};
use super::internal;
use crate::abi::status;
use crate::shader::{PackedKind, Packing};
use kernelc_ir::{Expr, Memory, ScalarType, Type};
use rspirv::spirv::{self, Op, SelectionControl, StorageClass, Word};

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
    /// Packed sub-word elements, and whether their words are atomic.
    packing: Option<Packing>,
    atomic: bool,
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
                    packing: b.packing,
                    atomic: b.atomic,
                }),
            Memory::Shared(s) => self.shared.get(s.0 as usize).map(|s| Place {
                var: s.var,
                elem: s.elem,
                len: s.len,
                in_buffer: false,
                view_lanes: 1,
                packing: None,
                atomic: false,
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
        let ty = Type::vector(p.elem.value_type(), lanes);
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
        let loaded = if let Some(packing) = p.packing {
            self.load_packed(p, packing, safe_index, lanes, reg)?
        } else if p.view_lanes > 1 {
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
        if value.ty.scalar != p.elem.value_type() {
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
        if let Some(packing) = p.packing {
            self.store_packed(p, packing, index, value)?;
        } else if p.view_lanes > 1 {
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

/// Packed buffers: words, bit positions and atomics.
impl Emitter<'_> {
    /// Device scope and relaxed semantics, the operands of every atomic here.
    fn device_relaxed(&mut self) -> (Word, Word) {
        let device = self.const_u32(spirv::Scope::Device as u32);
        let relaxed = self.const_u32(spirv::MemorySemantics::RELAXED.bits());
        (device, relaxed)
    }

    /// A pointer to word `word` (a u32 id) of a packed buffer.
    fn word_ptr(&mut self, p: Place, word: Word) -> R<Word> {
        let u = self.u32_ty();
        let ptr_ty = self.pointer(StorageClass::StorageBuffer, u);
        let member = self.const_u32(0);
        self.b
            .access_chain(ptr_ty, None, p.var, [member, word])
            .map_err(build_error)
    }

    /// The word element `i` (a u32 id) is in, and the element's bit offset there.
    fn packed_position(&mut self, packing: Packing, i: Word) -> R<(Word, Word)> {
        let u = self.u32_ty();
        let word_shift = self.const_u32(packing.word_shift());
        let word = self.ins(Op::ShiftRightLogical, u, &[i, word_shift])?;
        let slot_mask = self.const_u32(packing.per_word() - 1);
        let slot = self.ins(Op::BitwiseAnd, u, &[i, slot_mask])?;
        let bit_shift = self.const_u32(packing.bit_shift());
        let offset = self.ins(Op::ShiftLeftLogical, u, &[slot, bit_shift])?;
        Ok((word, offset))
    }

    fn read_word(&mut self, p: Place, ptr: Word) -> R<Word> {
        let u = self.u32_ty();
        if !p.atomic {
            return self.load(u, ptr);
        }
        let (scope, semantics) = self.device_relaxed();
        self.b
            .atomic_load(u, None, ptr, scope, semantics)
            .map_err(build_error)
    }

    /// The register value of the element at bit `offset` of `word`.
    fn unpack(&mut self, packing: Packing, word: Word, offset: Word) -> R<Word> {
        let u = self.u32_ty();
        let field = self.ins(Op::ShiftRightLogical, u, &[word, offset])?;
        let mask = self.const_u32(packing.mask());
        let bits = self.ins(Op::BitwiseAnd, u, &[field, mask])?;
        match packing.kind {
            PackedKind::Unsigned => Ok(bits),
            PackedKind::Bool => {
                let b = self.bool_ty();
                let zero = self.const_u32(0);
                self.ins(Op::INotEqual, b, &[bits, zero])
            }
            PackedKind::Signed => {
                let i = self.i32_ty();
                let signed = self.ins(Op::Bitcast, i, &[bits])?;
                let up = self.const_u32(32 - packing.bits);
                let high = self.ins(Op::ShiftLeftLogical, i, &[signed, up])?;
                self.ins(Op::ShiftRightArithmetic, i, &[high, up])
            }
        }
    }

    /// The element bits (at offset 0) a store of register scalar `v` writes.
    fn pack(&mut self, packing: Packing, v: Word) -> R<Word> {
        let u = self.u32_ty();
        let bits = match packing.kind {
            PackedKind::Bool => {
                let one = self.const_u32(1);
                let zero = self.const_u32(0);
                return self.ins(Op::Select, u, &[v, one, zero]);
            }
            PackedKind::Unsigned => v,
            PackedKind::Signed => self.ins(Op::Bitcast, u, &[v])?,
        };
        let mask = self.const_u32(packing.mask());
        self.ins(Op::BitwiseAnd, u, &[bits, mask])
    }

    /// `lanes` elements from `index` (safe: in bounds, aligned for vectors) of a
    /// packed buffer, as a register value of type `reg`.
    fn load_packed(
        &mut self,
        p: Place,
        packing: Packing,
        index: Word,
        lanes: u8,
        reg: Word,
    ) -> R<Word> {
        let mut parts = Vec::with_capacity(lanes as usize);
        for lane in 0..lanes {
            let i = self.lane_index(index, lane)?;
            let (word, offset) = self.packed_position(packing, i)?;
            let ptr = self.word_ptr(p, word)?;
            let w = self.read_word(p, ptr)?;
            parts.push(self.unpack(packing, w, offset)?);
        }
        if lanes == 1 {
            return Ok(parts[0]);
        }
        self.b
            .composite_construct(reg, None, parts)
            .map_err(build_error)
    }

    /// Stores `value` at `index` (in bounds and, for vectors, aligned: only such
    /// accesses run) into a packed buffer: one atomic store per word a vector covers
    /// whole, else an atomic clear and set of each element's bits.
    fn store_packed(&mut self, p: Place, packing: Packing, index: Word, value: Val) -> R<()> {
        let lanes = value.ty.lanes;
        let scalar = self.reg_scalar(value.ty.scalar)?;
        let mut bits = Vec::with_capacity(lanes as usize);
        for lane in 0..lanes {
            let v = if lanes == 1 {
                value.id
            } else {
                self.extract(scalar, value.id, lane as u32)?
            };
            bits.push(self.pack(packing, v)?);
        }
        let u = self.u32_ty();
        let (scope, semantics) = self.device_relaxed();
        if let (Some(words), true) = (packing.whole_words(lanes), lanes > 1) {
            let word_shift = self.const_u32(packing.word_shift());
            let first = self.ins(Op::ShiftRightLogical, u, &[index, word_shift])?;
            let per_word = packing.per_word() as usize;
            for (w, chunk) in bits.chunks(per_word).enumerate().take(words as usize) {
                let mut word = chunk[0];
                for (slot, &b) in chunk.iter().enumerate().skip(1) {
                    let offset = self.const_u32(slot as u32 * packing.bits);
                    let placed = self.ins(Op::ShiftLeftLogical, u, &[b, offset])?;
                    word = self.ins(Op::BitwiseOr, u, &[word, placed])?;
                }
                let at = self.lane_index(first, w as u8)?;
                let ptr = self.word_ptr(p, at)?;
                self.b
                    .atomic_store(ptr, scope, semantics, word)
                    .map_err(build_error)?;
            }
            return Ok(());
        }
        for (lane, b) in bits.into_iter().enumerate() {
            let i = self.lane_index(index, lane as u8)?;
            let (word, offset) = self.packed_position(packing, i)?;
            let ptr = self.word_ptr(p, word)?;
            let mask = self.const_u32(packing.mask());
            let field = self.ins(Op::ShiftLeftLogical, u, &[mask, offset])?;
            let keep = self.ins(Op::Not, u, &[field])?;
            let set = self.ins(Op::ShiftLeftLogical, u, &[b, offset])?;
            self.b
                .atomic_and(u, None, ptr, scope, semantics, keep)
                .map_err(build_error)?;
            self.b
                .atomic_or(u, None, ptr, scope, semantics, set)
                .map_err(build_error)?;
        }
        Ok(())
    }
}
