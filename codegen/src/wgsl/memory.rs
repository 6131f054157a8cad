//! Loads and stores, each checked against the memory's static length.
//!
//! An access of `lanes` elements at `index` is done only when
//! `index <= len - lanes` (and, for vectors, `index % lanes == 0`). A failing load
//! reads element 0 instead (so it never leaves the array) and yields zero; a failing
//! store is skipped; either ORs `OUT_OF_BOUNDS` (or `UNALIGNED` for an in-bounds
//! misaligned vector access) into the status word. Checks the value-range analysis
//! ([`kernelc_ir::analysis::Ranges`]) proves unnecessary are not emitted, exactly as
//! the CPU target does.
//!
//! A buffer every access of which is an `L`-lane vector at an index proven a multiple
//! of `L` ([`kernelc_ir::analysis::uniform_vector_widths`]) is declared
//! `array<vecL<T>>` (its view) and each access is one vector load or store of element
//! `index >> log2(L)`: one wide memory transaction instead of `L` scalar ones. The
//! checks stay in element units (`index <= len - L`), so they are the same checks.
//! Every other vector access is `lanes` scalar accesses of the `array<T>`.
//!
//! Bool and narrow-integer buffers are `array<u32>` of packed words
//! ([`crate::shader::Packing`]; `array<atomic<u32>>` when the kernel writes them): a
//! load extracts the element's bits, a store is an `atomicAnd` clearing them and an
//! `atomicOr` setting them, or one `atomicStore` per word a vector covers whole.

use super::lower::{internal, Lower, Val};
use crate::abi::status;
use crate::shader::{PackedKind, Packing};
use crate::CodegenError;
use kernelc_ir::{Expr, Memory, Scalar, ScalarType, Type};
use naga::{
    AtomicFunction, BinaryOperator as Bo, Expression, Handle, ScalarKind, Statement, UnaryOperator,
};

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

/// A memory as declared: what an access addresses.
#[derive(Clone, Copy, Debug)]
struct Array {
    /// The pointer to the global variable.
    base: H,
    /// The IR element type and length (in elements), which the checks use.
    elem: ScalarType,
    len: u64,
    /// The lanes of one array element: 1 for `array<T>`, `L` for `array<vecL<T>>`.
    view: u8,
    /// Packed sub-word elements (a buffer's only).
    packing: Option<Packing>,
}

impl Lower<'_> {
    /// The declared array of a memory.
    fn memory_of(&self, mem: Memory) -> Result<Array, CodegenError> {
        let (elem, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let (base, view) = match mem {
            Memory::Buffer(p) => (
                self.buffers.get(p.0 as usize).copied().flatten(),
                self.buffer_views.get(p.0 as usize).copied().flatten(),
            ),
            Memory::Shared(s) => (self.shared.get(s.0 as usize).copied(), None),
        };
        let base = base.ok_or_else(|| internal(format!("no variable for {mem:?}")))?;
        let packing = match mem {
            Memory::Buffer(_) => Packing::of(elem),
            Memory::Shared(_) => None,
        };
        Ok(Array {
            base,
            elem,
            len,
            view: view.unwrap_or(1),
            packing,
        })
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
        let array = self.memory_of(mem)?;
        let ty = Type::vector(array.elem.value_type(), lanes);
        let h = match self.check(index.h, index_expr, lanes, array.len) {
            Check::None => self.raw_load(array, index.h, ty)?,
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
                let v = self.raw_load(array, safe_index, ty)?;
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

    /// The view element an access of `lanes` at element `index` is, when the array
    /// is a view (`index` is then a proven multiple of the view's lanes).
    fn view_index(&mut self, array: Array, index: H, lanes: u8) -> Result<Option<H>, CodegenError> {
        if array.view == 1 {
            return Ok(None);
        }
        if lanes != array.view {
            return Err(internal(format!(
                "a {lanes}-lane access of a buffer viewed as {}-lane vectors",
                array.view
            )));
        }
        let shift = self.lit_u32(array.view.trailing_zeros());
        Ok(Some(self.binary(Bo::ShiftRight, index, shift)))
    }

    fn raw_load(&mut self, array: Array, index: H, ty: Type) -> Result<H, CodegenError> {
        if let Some(packing) = array.packing {
            return self.load_packed(array, packing, index, ty);
        }
        let base = array.base;
        if let Some(i) = self.view_index(array, index, ty.lanes)? {
            // A view holds only f32/i32/u32: the loaded vector is the value.
            let pointer = self.e(Expression::Access { base, index: i });
            return Ok(self.e(Expression::Load { pointer }));
        }
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
        let array = self.memory_of(mem)?;
        if value.ty.scalar != array.elem.value_type() {
            return Err(internal(format!(
                "storing {} into memory of {}",
                value.ty, array.elem
            )));
        }
        match self.check(index.h, index_expr, value.ty.lanes, array.len) {
            Check::None => self.raw_store(array, index.h, value),
            Check::Never => {
                let oob = self.lit_u32(status::OUT_OF_BOUNDS);
                self.raise(oob);
                Ok(())
            }
            Check::Test { ok, fault } => {
                self.f.open();
                self.raw_store(array, index.h, value)?;
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

    fn raw_store(&mut self, array: Array, index: H, value: Val) -> Result<(), CodegenError> {
        if let Some(packing) = array.packing {
            return self.store_packed(array, packing, index, value);
        }
        let base = array.base;
        let lanes = value.ty.lanes;
        if let Some(i) = self.view_index(array, index, lanes)? {
            let pointer = self.e(Expression::Access { base, index: i });
            self.f.stmt(Statement::Store {
                pointer,
                value: value.h,
            });
            return Ok(());
        }
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

/// Packed buffers: words, bit positions and atomics.
impl Lower<'_> {
    /// The word element `i` is in, and the element's bit offset there.
    fn packed_position(&mut self, packing: Packing, i: H) -> (H, H) {
        let word_shift = self.lit_u32(packing.word_shift());
        let word = self.binary(Bo::ShiftRight, i, word_shift);
        let slot_mask = self.lit_u32(packing.per_word() - 1);
        let slot = self.binary(Bo::And, i, slot_mask);
        let bit_shift = self.lit_u32(packing.bit_shift());
        (word, self.binary(Bo::ShiftLeft, slot, bit_shift))
    }

    /// The value of the element at bit `offset` of `word`.
    fn unpack(&mut self, packing: Packing, word: H, offset: H) -> H {
        let field = self.binary(Bo::ShiftRight, word, offset);
        let mask = self.lit_u32(packing.mask());
        let bits = self.binary(Bo::And, field, mask);
        match packing.kind {
            PackedKind::Unsigned => bits,
            PackedKind::Bool => {
                let zero = self.lit_u32(0);
                self.binary(Bo::NotEqual, bits, zero)
            }
            PackedKind::Signed => {
                let signed = self.bitcast(bits, ScalarKind::Sint);
                let up = self.lit_u32(32 - packing.bits);
                let high = self.binary(Bo::ShiftLeft, signed, up);
                self.binary(Bo::ShiftRight, high, up)
            }
        }
    }

    /// The element bits (at offset 0) a store of scalar `v` writes.
    fn pack(&mut self, packing: Packing, v: H) -> H {
        let bits = match packing.kind {
            PackedKind::Bool => {
                let one = self.lit_u32(1);
                let zero = self.lit_u32(0);
                return self.select(v, one, zero);
            }
            PackedKind::Unsigned => v,
            PackedKind::Signed => self.bitcast(v, ScalarKind::Uint),
        };
        let mask = self.lit_u32(packing.mask());
        self.binary(Bo::And, bits, mask)
    }

    /// `ty.lanes` elements from `index` (in bounds, aligned for vectors) of a packed
    /// buffer. A load of an atomic word is WGSL's `atomicLoad`.
    fn load_packed(
        &mut self,
        array: Array,
        packing: Packing,
        index: H,
        ty: Type,
    ) -> Result<H, CodegenError> {
        let mut lanes = Vec::with_capacity(ty.lanes as usize);
        for l in 0..ty.lanes {
            let i = self.lane_index(index, l);
            let (word, offset) = self.packed_position(packing, i);
            let pointer = self.e(Expression::Access {
                base: array.base,
                index: word,
            });
            let w = self.e(Expression::Load { pointer });
            lanes.push(self.unpack(packing, w, offset));
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

    /// Stores `value` at `index` (in bounds and, for vectors, aligned: only such
    /// accesses run): one `atomicStore` per word a vector covers whole, else an
    /// `atomicAnd` clearing and an `atomicOr` setting each element's bits.
    fn store_packed(
        &mut self,
        array: Array,
        packing: Packing,
        index: H,
        value: Val,
    ) -> Result<(), CodegenError> {
        let lanes = value.ty.lanes;
        let mut bits = Vec::with_capacity(lanes as usize);
        for l in 0..lanes {
            let v = if lanes == 1 {
                value.h
            } else {
                self.e(Expression::AccessIndex {
                    base: value.h,
                    index: l as u32,
                })
            };
            bits.push(self.pack(packing, v));
        }
        if let (Some(words), true) = (packing.whole_words(lanes), lanes > 1) {
            let word_shift = self.lit_u32(packing.word_shift());
            let first = self.binary(Bo::ShiftRight, index, word_shift);
            let per_word = packing.per_word() as usize;
            for (w, chunk) in bits.chunks(per_word).enumerate().take(words as usize) {
                let mut word = chunk[0];
                for (slot, &b) in chunk.iter().enumerate().skip(1) {
                    let offset = self.lit_u32(slot as u32 * packing.bits);
                    let placed = self.binary(Bo::ShiftLeft, b, offset);
                    word = self.binary(Bo::InclusiveOr, word, placed);
                }
                let at = self.lane_index(first, w as u8);
                let pointer = self.e(Expression::Access {
                    base: array.base,
                    index: at,
                });
                self.f.stmt(Statement::Store {
                    pointer,
                    value: word,
                });
            }
            return Ok(());
        }
        for (l, b) in bits.into_iter().enumerate() {
            let i = self.lane_index(index, l as u8);
            let (word, offset) = self.packed_position(packing, i);
            let pointer = self.e(Expression::Access {
                base: array.base,
                index: word,
            });
            let mask = self.lit_u32(packing.mask());
            let field = self.binary(Bo::ShiftLeft, mask, offset);
            let keep = self.unary(UnaryOperator::BitwiseNot, field);
            let set = self.binary(Bo::ShiftLeft, b, offset);
            for (fun, value) in [
                (AtomicFunction::And, keep),
                (AtomicFunction::InclusiveOr, set),
            ] {
                self.f.stmt(Statement::Atomic {
                    pointer,
                    fun,
                    value,
                    result: None,
                });
            }
        }
        Ok(())
    }
}
