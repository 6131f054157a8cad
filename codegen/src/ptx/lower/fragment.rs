//! Matrix fragments on tensor cores: `mma.sync` (sm_80 and later).
//!
//! Each thread holds its share of a fragment in the layout `mma.sync` defines for its
//! shape (PTX ISA, "Matrix Fragments for mma.m16n8k16" and neighbours): with
//! `g = lane / 4` and `t = lane mod 4`, element `i` of the thread's share lies at a
//! row and column of the form `w·W + g·G + t·T + C` ([`Coord`], [`share`]; `w`, the
//! warp within its warpgroup, places the rows of `wgmma`'s accumulators, see
//! `warpgroup.rs`, which also has the warpgroup `A`/`B` operands). The share lives
//! in one `alloca` per element (promoted to registers by LLVM). A load reads the
//! share's elements, a store writes them (each rounded to the memory's type), and
//! `mma` packs the `A` and `B` shares into the registers the instruction takes
//! (`i32` pairs for bf16, `<2 x half>` for f16, an `i32` of its bits for TF32, the
//! element itself for f64).
//!
//! Loads and stores check bounds once per fragment: where the largest element index
//! (without wrapping) is below the memory's length, every element is accessed
//! unchecked; otherwise each element is checked on its own, raising the status bit
//! and skipping the access as every access does.

use super::value::{int, Val};
use super::{internal, Lower, OrInternal};
use crate::CodegenError;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use kernelc_ir::fragment::*;
use kernelc_ir::{Expr, Memory, ScalarType, Type};

/// `w·W + g·G + t·T + C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Coord {
    pub w: u32,
    pub g: u32,
    pub t: u32,
    pub c: u32,
}

const fn at(g: u32, t: u32, c: u32) -> Coord {
    Coord { w: 0, g, t, c }
}

/// The `(row, col)` of each element of a thread's share of a fragment of `elem`s,
/// in register order (the lower-numbered element of a packed pair first).
pub(super) fn share(role: FragmentRole, shape: MmaShape, elem: ScalarType) -> Vec<(Coord, Coord)> {
    let accumulator = |i: u32| (at(1, 0, 8 * (i >> 1)), at(0, 2, i & 1));
    // m16n8k16's 16-bit `A`: rows g and g + 8, column pairs 2t and 2t + 8.
    let a16 = |i: u32| {
        (
            at(1, 0, 8 * ((i >> 1) & 1)),
            at(0, 2, (i & 1) + 8 * (i >> 2)),
        )
    };
    if shape.is_warpgroup() {
        // wgmma's D: warp w has rows 16w.. as m16n8 accumulators side by side, one
        // per 8 columns (PTX ISA, "Register Fragments" for wgmma's D).
        return match role {
            FragmentRole::Accumulator => (0..shape.n / 2)
                .map(|i| {
                    let row = Coord {
                        w: 16,
                        ..at(1, 0, 8 * ((i >> 1) & 1))
                    };
                    (row, at(0, 2, 8 * (i >> 2) + (i & 1)))
                })
                .collect(),
            // An `A` in registers: warp w has rows 16w.. as m16n8k16's `A` (PTX ISA,
            // "Register Fragments" for wgmma's A).
            FragmentRole::A => (0..8)
                .map(|i| {
                    let (row, col) = a16(i);
                    (Coord { w: 16, ..row }, col)
                })
                .collect(),
            // Read from shared memory by the instruction (a descriptor).
            FragmentRole::B => Vec::new(),
        };
    }
    // f64 m16n8k16 (sm_90) and TF32 m16n8k8: one element per register, rows g and
    // g + 8 alternating, the columns of `A` (rows of `B`) 4 apart.
    let wide = matches!(elem, ScalarType::F32 | ScalarType::F64);
    match (shape, role) {
        (MmaShape::M16N8K16 | MmaShape::M16N8K8, FragmentRole::A) if wide => (0..shape.k / 2)
            .map(|i| (at(1, 0, 8 * (i & 1)), at(0, 1, 4 * (i >> 1))))
            .collect(),
        (MmaShape::M16N8K16 | MmaShape::M16N8K8, FragmentRole::B) if wide => (0..shape.k / 4)
            .map(|i| (at(0, 1, 4 * i), at(1, 0, 0)))
            .collect(),
        (MmaShape::M16N8K16, FragmentRole::A) => (0..8).map(a16).collect(),
        (MmaShape::M16N8K16, FragmentRole::B) => (0..4)
            .map(|i| (at(0, 2, (i & 1) + 8 * (i >> 1)), at(1, 0, 0)))
            .collect(),
        (MmaShape::M16N8K8, FragmentRole::A) => (0..4)
            .map(|i| (at(1, 0, 8 * (i >> 1)), at(0, 2, i & 1)))
            .collect(),
        (MmaShape::M16N8K8, FragmentRole::B) => {
            (0..2).map(|i| (at(0, 2, i), at(1, 0, 0))).collect()
        }
        (MmaShape::M8N8K4, FragmentRole::A) => vec![(at(1, 0, 0), at(0, 1, 0))],
        (MmaShape::M8N8K4, FragmentRole::B) => vec![(at(0, 1, 0), at(1, 0, 0))],
        (MmaShape::M8N8K4, FragmentRole::Accumulator) => {
            (0..2).map(|i| (at(1, 0, 0), at(0, 2, i))).collect()
        }
        (_, FragmentRole::Accumulator) => (0..4).map(accumulator).collect(),
        // Shapes the validator rejects.
        _ => Vec::new(),
    }
}

/// The registers a thread's shares of all accumulators of `kernel` take, and of the
/// warpgroup `A`s held in registers.
pub(super) fn accumulator_registers(kernel: &kernelc_ir::Kernel) -> u64 {
    kernel
        .fragments
        .iter()
        .filter(|f| f.role == FragmentRole::Accumulator || f.in_registers)
        // 16-bit elements of an `A` pack two to a register.
        .map(|f| {
            (share(f.role, f.shape, f.elem).len() as u64 * f.elem.size_bytes() as u64).div_ceil(4)
        })
        .sum()
}

/// How `ldmatrix` reads a share of `decl` from `mem` along `layout`: the `8 × 8`
/// matrices it takes and whether transposed (`.trans`), for 16-bit `A` and `B`
/// fragments in shared memory; `None` for the rest. Row-major `A` and column-major
/// `B` hold each thread's pairs side by side in memory; the other two layouts hold
/// them a row apart, which `.trans` gathers.
fn ldmatrix_kind(decl: &FragmentDecl, mem: Memory, layout: FragmentLayout) -> Option<(u32, bool)> {
    let half = matches!(decl.elem, ScalarType::F16 | ScalarType::Bf16);
    if !half || !matches!(mem, Memory::Shared(_)) {
        return None;
    }
    let transposed = match (decl.role, layout) {
        (FragmentRole::A, FragmentLayout::RowMajor)
        | (FragmentRole::B, FragmentLayout::ColMajor) => false,
        (FragmentRole::A, FragmentLayout::ColMajor)
        | (FragmentRole::B, FragmentLayout::RowMajor) => true,
        // Rows of 8 elements lie apart from each other: read element by element.
        (
            _,
            FragmentLayout::RowMajorTiles
            | FragmentLayout::ColMajorTiles
            | FragmentLayout::RowMajorSwizzled
            | FragmentLayout::ColMajorSwizzled,
        )
        | (FragmentRole::Accumulator, _) => return None,
    };
    let matrices = match (decl.role, decl.shape) {
        (FragmentRole::A, MmaShape::M16N8K16) => 4,
        (FragmentRole::A, MmaShape::M16N8K8) | (FragmentRole::B, MmaShape::M16N8K16) => 2,
        (FragmentRole::B, MmaShape::M16N8K8) => 1,
        _ => return None,
    };
    Some((matrices, transposed))
}

/// `(major, minor)` with every element index of a `dims` fragment along `layout`
/// at most `index + major·stride + minor` before any swizzle (offsets grow with the
/// stride; [`swizzled_bound`] covers the swizzle).
pub(super) fn last_element(
    layout: FragmentLayout,
    stored: ScalarType,
    (rows, cols): (u32, u32),
) -> (u32, u32) {
    let banded = |rows: u32, cols: u32, row: u32| {
        let within = (rows.min(TILE) - 1) * row + cols.min(row) - 1;
        ((rows - 1) / TILE, (cols - 1) / row * TILE * row + within)
    };
    match layout {
        FragmentLayout::RowMajor => (rows - 1, cols - 1),
        FragmentLayout::ColMajor => (cols - 1, rows - 1),
        FragmentLayout::RowMajorTiles => banded(rows, cols, TILE),
        FragmentLayout::ColMajorTiles => banded(cols, rows, TILE),
        FragmentLayout::RowMajorSwizzled => banded(rows, cols, swizzle_row(stored)),
        FragmentLayout::ColMajorSwizzled => banded(cols, rows, swizzle_row(stored)),
    }
}

/// The largest index a fragment access to memory of `stored` may touch, given the
/// largest unswizzled one (`last_element`): the swizzle moves an index within its
/// aligned row.
pub(super) fn swizzled_bound(layout: FragmentLayout, stored: ScalarType, last: u128) -> u128 {
    if layout.is_swizzled() {
        last | (swizzle_row(stored) as u128 - 1)
    } else {
        last
    }
}

/// One fragment load or store, as its elements' code needs it.
struct Access<'a, 'ctx> {
    decl: &'a FragmentDecl,
    mem: Memory,
    layout: FragmentLayout,
    index: IntValue<'ctx>,
    stride: IntValue<'ctx>,
    /// Whether the rows start 16-byte aligned (index and stride multiples of 8).
    aligned_rows: bool,
    slots: &'a [PointerValue<'ctx>],
    /// Each element's index, in `slots`' order.
    elements: &'a [IntValue<'ctx>],
    store: bool,
}

/// The LLVM intrinsic of one multiply kind.
fn intrinsic(shape: MmaShape, input: ScalarType) -> Option<&'static str> {
    Some(match (shape, input) {
        (MmaShape::M16N8K16, ScalarType::Bf16) => "llvm.nvvm.mma.m16n8k16.row.col.bf16",
        (MmaShape::M16N8K16, ScalarType::F16) => "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
        (MmaShape::M16N8K8, ScalarType::Bf16) => "llvm.nvvm.mma.m16n8k8.row.col.bf16",
        (MmaShape::M16N8K8, ScalarType::F16) => "llvm.nvvm.mma.m16n8k8.row.col.f32.f32",
        (MmaShape::M8N8K4, ScalarType::F64) => "llvm.nvvm.mma.m8n8k4.row.col.f64",
        (MmaShape::M16N8K16, ScalarType::F64) => "llvm.nvvm.mma.m16n8k16.row.col.f64",
        (MmaShape::M16N8K8, ScalarType::F32) => "llvm.nvvm.mma.m16n8k8.row.col.tf32",
        _ => return None,
    })
}

impl<'ctx> Lower<'_, 'ctx> {
    /// One zero-initialised `alloca` per element of each fragment's share.
    pub(super) fn declare_fragments(&mut self) -> Result<(), CodegenError> {
        for (i, f) in self.kernel.fragments.iter().enumerate() {
            if f.is_read_in_place() {
                let slot = self.warpgroup_operand_slot(i)?;
                self.fragments.push(vec![slot]);
                continue;
            }
            let ty = self.scalar_type(f.elem);
            let mut slots = Vec::new();
            for e in 0..share(f.role, f.shape, f.elem).len() {
                let slot = self.alloca(ty, &format!("f{i}.{e}"))?;
                self.allocas
                    .build_store(slot, self.zero(f.elem))
                    .or_internal()?;
                slots.push(slot);
            }
            self.fragments.push(slots);
        }
        Ok(())
    }

    pub(super) fn fragment_op(&mut self, op: &FragmentOp) -> Result<(), CodegenError> {
        match op {
            FragmentOp::Fill { frag, value } => {
                let v = self.expr(value)?;
                let v = *v
                    .lanes
                    .first()
                    .ok_or_else(|| internal("an empty fill value"))?;
                for slot in self.fragment_slots(*frag)? {
                    self.b.build_store(slot, v).or_internal()?;
                }
                Ok(())
            }
            FragmentOp::Load {
                frag,
                mem,
                index,
                stride,
                layout,
            } => self.fragment_access(*frag, *mem, index, stride, *layout, false),
            FragmentOp::Store {
                frag,
                mem,
                index,
                stride,
                layout,
            } => self.fragment_access(*frag, *mem, index, stride, *layout, true),
            FragmentOp::Mma { d, a, b, c } => {
                if self.fragment_decl(*d)?.shape.is_warpgroup() {
                    self.wgmma_alone(*d, *a, *b, *c)
                } else {
                    self.mma(*d, *a, *b, *c)
                }
            }
            FragmentOp::Map(m) => self.fragment_map(m),
            FragmentOp::ReduceRows {
                dst,
                srcs,
                reduction,
            } => self.reduce_rows(*dst, srcs, *reduction),
            FragmentOp::Convert { dst, srcs, first } => self.convert_fragments(*dst, srcs, *first),
        }
    }

    pub(super) fn fragment_decl(&self, id: FragmentId) -> Result<FragmentDecl, CodegenError> {
        self.kernel
            .fragment(id)
            .cloned()
            .ok_or_else(|| internal(format!("unknown fragment #{}", id.0)))
    }

    pub(super) fn fragment_slots(
        &self,
        id: FragmentId,
    ) -> Result<Vec<PointerValue<'ctx>>, CodegenError> {
        self.fragments
            .get(id.0 as usize)
            .cloned()
            .ok_or_else(|| internal(format!("unknown fragment #{}", id.0)))
    }

    /// `(w, g, t)` of this thread: its warp in its warpgroup, its lane's quad and
    /// place in the quad.
    pub(super) fn lane_quad(&self) -> Result<[IntValue<'ctx>; 3], CodegenError> {
        let i32t = self.ctx.i32_type();
        let flat = self.flat_local_id()?;
        let w = self.bit_field(flat, 5, 3)?;
        let lane = self.lane()?;
        let g = self
            .b
            .build_right_shift(lane, i32t.const_int(2, false), false, "g")
            .or_internal()?;
        let t = self.bit_field(lane, 0, 3)?;
        Ok([w, g, t])
    }

    /// `(v >> shift) & mask`, in `v`'s type.
    pub(super) fn bit_field(
        &self,
        v: IntValue<'ctx>,
        shift: u64,
        mask: u64,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let ty = v.get_type();
        let v = self
            .b
            .build_right_shift(v, ty.const_int(shift, false), false, "")
            .or_internal()?;
        self.b
            .build_and(v, ty.const_int(mask, false), "")
            .or_internal()
    }

    /// This thread's lane in its warp: its flat local id mod 32.
    fn lane(&self) -> Result<IntValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let flat = self.flat_local_id()?;
        self.b
            .build_and(flat, i32t.const_int(31, false), "lane")
            .or_internal()
    }

    /// `x + y·X + z·X·Y`.
    fn flat_local_id(&self) -> Result<IntValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let [x, y, _] = self.kernel.workgroup_size;
        let mut flat = self.builtin(kernelc_ir::Builtin::LocalId, 0)?;
        for (axis, scale) in [(1, x), (2, x.wrapping_mul(y))] {
            if self.kernel.workgroup_size[axis as usize] > 1 {
                let id = self.builtin(kernelc_ir::Builtin::LocalId, axis)?;
                let scaled = self
                    .b
                    .build_int_mul(id, i32t.const_int(scale as u64, false), "")
                    .or_internal()?;
                flat = self.b.build_int_add(flat, scaled, "").or_internal()?;
            }
        }
        Ok(flat)
    }

    pub(super) fn coord(
        &self,
        c: Coord,
        [w, g, t]: [IntValue<'ctx>; 3],
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let mut v = i32t.const_int(c.c as u64, false);
        for (coef, x) in [(c.w, w), (c.g, g), (c.t, t)] {
            if coef != 0 {
                let term = self
                    .b
                    .build_int_mul(x, i32t.const_int(coef as u64, false), "")
                    .or_internal()?;
                v = self.b.build_int_add(v, term, "").or_internal()?;
            }
        }
        Ok(v)
    }

    /// The index of element `(r, c)` of an access at `index` along `layout`
    /// (`kernelc_ir::fragment::element_index`).
    fn element_index(
        &self,
        (layout, stored): (FragmentLayout, ScalarType),
        (index, stride): (IntValue<'ctx>, IntValue<'ctx>),
        r: IntValue<'ctx>,
        c: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let k = |v: u32| i32t.const_int(v as u64, false);
        let b = &self.b;
        // Bands of 8 rows `stride` apart, rows of `row` elements in blocks of 8 rows.
        let banded = |r: IntValue<'ctx>,
                      c: IntValue<'ctx>,
                      row: u32|
         -> Result<IntValue<'ctx>, CodegenError> {
            let band = b.build_int_unsigned_div(r, k(TILE), "").or_internal()?;
            let band = b.build_int_mul(band, stride, "").or_internal()?;
            let block = b.build_int_unsigned_div(c, k(row), "").or_internal()?;
            let block = b.build_int_mul(block, k(TILE * row), "").or_internal()?;
            let within = b.build_int_unsigned_rem(r, k(TILE), "").or_internal()?;
            let within = b.build_int_mul(within, k(row), "").or_internal()?;
            let col = b.build_int_unsigned_rem(c, k(row), "").or_internal()?;
            let v = b.build_int_add(band, block, "").or_internal()?;
            let v = b.build_int_add(v, within, "").or_internal()?;
            let v = b.build_int_add(v, col, "").or_internal()?;
            b.build_int_add(index, v, "").or_internal()
        };
        let plain = |major: IntValue<'ctx>, minor: IntValue<'ctx>| {
            let v = b.build_int_mul(major, stride, "").or_internal()?;
            let v = b.build_int_add(v, minor, "").or_internal()?;
            b.build_int_add(index, v, "").or_internal()
        };
        let swizzled = |e: IntValue<'ctx>| -> Result<IntValue<'ctx>, CodegenError> {
            let flip = b.build_right_shift(e, k(3), false, "").or_internal()?;
            let flip = b
                .build_and(flip, k(7 * swizzle_chunk(stored)), "")
                .or_internal()?;
            b.build_xor(e, flip, "").or_internal()
        };
        match layout {
            FragmentLayout::RowMajor => plain(r, c),
            FragmentLayout::ColMajor => plain(c, r),
            FragmentLayout::RowMajorTiles => banded(r, c, TILE),
            FragmentLayout::ColMajorTiles => banded(c, r, TILE),
            FragmentLayout::RowMajorSwizzled => swizzled(banded(r, c, swizzle_row(stored))?),
            FragmentLayout::ColMajorSwizzled => swizzled(banded(c, r, swizzle_row(stored))?),
        }
    }

    /// The largest index a fragment access at `(index, stride)` may touch (64-bit, so
    /// that nothing wraps): `index + major·stride + minor` (`last_element`), through
    /// [`swizzled_bound`].
    pub(super) fn last_index(
        &self,
        (layout, stored): (FragmentLayout, ScalarType),
        (index, stride): (IntValue<'ctx>, IntValue<'ctx>),
        (major, minor): (u32, u32),
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let wide = |v: IntValue<'ctx>| self.b.build_int_z_extend(v, i64t, "").or_internal();
        let last = self
            .b
            .build_int_mul(wide(stride)?, i64t.const_int(major as u64, false), "")
            .or_internal()?;
        let last = self.b.build_int_add(last, wide(index)?, "").or_internal()?;
        let last = self
            .b
            .build_int_add(last, i64t.const_int(minor as u64, false), "")
            .or_internal()?;
        if !layout.is_swizzled() {
            return Ok(last);
        }
        let run = i64t.const_int((swizzle_row(stored) - 1) as u64, false);
        self.b.build_or(last, run, "").or_internal()
    }

    /// A fragment load (or, with `store`, an accumulator store).
    fn fragment_access(
        &mut self,
        frag: FragmentId,
        mem: Memory,
        index: &Expr,
        stride: &Expr,
        layout: FragmentLayout,
        store: bool,
    ) -> Result<(), CodegenError> {
        let decl = self.fragment_decl(frag)?;
        if decl.is_read_in_place() {
            return self.warpgroup_operand(frag, mem, (index, stride), layout);
        }
        let slots = self.fragment_slots(frag)?;
        let (index_expr, stride_expr) = (index, stride);
        let index = int(self.expr(index)?.first()?)?;
        let stride = int(self.expr(stride)?.first()?)?;
        let (stored, len) = self
            .kernel
            .memory(mem)
            .ok_or_else(|| internal(format!("unknown memory {mem:?}")))?;
        let quad = self.lane_quad()?;
        let mut elements = Vec::new();
        for (r, c) in share(decl.role, decl.shape, decl.elem) {
            let (r, c) = (self.coord(r, quad)?, self.coord(c, quad)?);
            elements.push(self.element_index((layout, stored), (index, stride), r, c)?);
        }
        let (major, minor) = last_element(layout, stored, decl.dims());
        let aligned_rows = self.ranges.alignment(index_expr) % 8 == 0
            && self.ranges.alignment(stride_expr) % 8 == 0;
        let access = Access {
            decl: &decl,
            mem,
            layout,
            index,
            stride,
            aligned_rows,
            slots: &slots,
            elements: &elements,
            store,
        };
        // Proven by the value ranges of the index and the stride: no check at all.
        let proven = self
            .ranges
            .range(index_expr)
            .zip(self.ranges.range(stride_expr))
            .is_some_and(|(i, s)| {
                let last = i.hi as u128 + s.hi as u128 * major as u128 + minor as u128;
                swizzled_bound(layout, stored, last) < len as u128
            });
        if proven {
            return self.access_elements(&access, false);
        }
        // Whole fragment in bounds: index + (major, minor)'s offset < len, computed in
        // 64 bits so that nothing wraps; else each element is checked.
        let i64t = self.ctx.i64_type();
        let last = self.last_index((layout, stored), (index, stride), (major, minor))?;
        let fits = self
            .b
            .build_int_compare(IntPredicate::ULT, last, i64t.const_int(len, false), "fits")
            .or_internal()?;
        let func = self.func;
        let fast = self.ctx.append_basic_block(func, "fragment.fast");
        let slow = self.ctx.append_basic_block(func, "fragment.checked");
        let done = self.ctx.append_basic_block(func, "fragment.end");
        self.b
            .build_conditional_branch(fits, fast, slow)
            .or_internal()?;
        for (block, checked) in [(fast, false), (slow, true)] {
            self.b.position_at_end(block);
            self.access_elements(&access, checked)?;
            self.b.build_unconditional_branch(done).or_internal()?;
        }
        self.b.position_at_end(done);
        Ok(())
    }

    /// The elements of one fragment load or store, each checked against the memory's
    /// length when `checked`; unchecked 16-bit `A`/`B` loads from shared memory go
    /// through `ldmatrix`.
    fn access_elements(&mut self, a: &Access<'_, 'ctx>, checked: bool) -> Result<(), CodegenError> {
        let elem = self
            .kernel
            .memory(a.mem)
            .ok_or_else(|| internal(format!("unknown memory {:?}", a.mem)))?
            .0;
        if !checked && !a.store {
            if let Some(kind) = ldmatrix_kind(a.decl, a.mem, a.layout) {
                return self.ldmatrix_or_scalar(
                    a.decl,
                    a.mem,
                    (a.index, a.stride, a.aligned_rows),
                    kind,
                    a.slots,
                    a.elements,
                );
            }
        }
        for (&slot, &at) in a.slots.iter().zip(a.elements) {
            if a.store {
                let v = self
                    .b
                    .build_load(self.scalar_type(a.decl.elem), slot, "")
                    .or_internal()?;
                let v = self.cast_scalar(a.decl.elem, elem.value_type(), v)?;
                let v = Val {
                    ty: Type::scalar(elem.value_type()),
                    lanes: vec![v],
                };
                self.store_element(a.mem, at, &v, checked)?;
            } else {
                let v = self.load_element(a.mem, at, checked)?;
                self.b.build_store(slot, v).or_internal()?;
            }
        }
        Ok(())
    }

    /// The share of an `A` or `B` fragment by `ldmatrix` where its rows are aligned,
    /// else by scalar loads (both in bounds).
    fn ldmatrix_or_scalar(
        &mut self,
        decl: &FragmentDecl,
        mem: Memory,
        (index, stride, proven_aligned): (IntValue<'ctx>, IntValue<'ctx>, bool),
        (matrices, transposed): (u32, bool),
        slots: &[PointerValue<'ctx>],
        elements: &[IntValue<'ctx>],
    ) -> Result<(), CodegenError> {
        let i32t = self.ctx.i32_type();
        let either = self.b.build_or(index, stride, "").or_internal()?;
        let low = self
            .b
            .build_and(either, i32t.const_int(7, false), "")
            .or_internal()?;
        let aligned = if proven_aligned {
            self.ctx.bool_type().const_int(1, false)
        } else {
            self.b
                .build_int_compare(IntPredicate::EQ, low, i32t.const_zero(), "rows_aligned")
                .or_internal()?
        };
        let func = self.func;
        let by_matrix = self.ctx.append_basic_block(func, "fragment.ldmatrix");
        let by_element = self.ctx.append_basic_block(func, "fragment.scalar");
        let merge = self.ctx.append_basic_block(func, "fragment.loaded");
        self.b
            .build_conditional_branch(aligned, by_matrix, by_element)
            .or_internal()?;

        self.b.position_at_end(by_matrix);
        // Lane L gives row `r = L mod 8` of matrix `q = L / 8`, at `major·stride +
        // minor` from the index. A's matrices are its 8 × 8 blocks in register order
        // (rows `8·(q mod 2)`, columns `8·(q / 2)`), B's its blocks down the reduction
        // (`8·q`); a row of memory is one of A's rows (row-major) or of its columns
        // (column-major, transposed), one of B's columns (column-major) or of its rows
        // (row-major, transposed).
        let lane = self.lane()?;
        let c = |v: u64| i32t.const_int(v, false);
        let q = self
            .b
            .build_right_shift(lane, c(3), false, "")
            .or_internal()?;
        let r = self.b.build_and(lane, c(7), "").or_internal()?;
        let q_low = self.b.build_and(q, c(1), "").or_internal()?;
        let q_high = self.b.build_right_shift(q, c(1), false, "").or_internal()?;
        let eight = |v: IntValue<'ctx>| self.b.build_left_shift(v, c(3), "").or_internal();
        let (row, col) = match (decl.role, transposed) {
            // Rows 8·(q mod 2) + r, column 8·(q / 2).
            (FragmentRole::A, false) => (
                self.b.build_int_add(eight(q_low)?, r, "").or_internal()?,
                eight(q_high)?,
            ),
            // Reduction row 8·(q / 2) + r, column 8·(q mod 2).
            (FragmentRole::A, true) => (
                self.b.build_int_add(eight(q_high)?, r, "").or_internal()?,
                eight(q_low)?,
            ),
            // Column r of B at reduction offset 8·q.
            (FragmentRole::B | FragmentRole::Accumulator, false) => (r, eight(q)?),
            // Reduction row 8·q + r = L.
            (FragmentRole::B | FragmentRole::Accumulator, true) => (lane, c(0)),
        };
        // Lanes past the matrices' rows give an address too (ignored): keep it in
        // the fragment, at its first row.
        let used = self
            .b
            .build_int_compare(
                IntPredicate::ULT,
                lane,
                i32t.const_int(8 * matrices as u64, false),
                "",
            )
            .or_internal()?;
        let row = self
            .b
            .build_select(used, row, i32t.const_zero(), "")
            .or_internal()?
            .into_int_value();
        let col = self
            .b
            .build_select(used, col, i32t.const_zero(), "")
            .or_internal()?
            .into_int_value();
        let at = self.b.build_int_mul(row, stride, "").or_internal()?;
        let at = self.b.build_int_add(at, col, "").or_internal()?;
        let at = self.b.build_int_add(at, index, "").or_internal()?;
        let ptr = self.shared_element_ptr(mem, at)?;
        let trans = if transposed { ".trans" } else { "" };
        let name = format!("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{matrices}{trans}.b16");
        let func_decl = inkwell::intrinsics::Intrinsic::find(&name)
            .and_then(|i| i.get_declaration(self.module, &[ptr.get_type().into()]))
            .ok_or_else(|| internal(format!("LLVM does not know the intrinsic `{name}`")))?;
        let call = self
            .b
            .build_call(func_decl, &[ptr.into()], "ldmatrix")
            .or_internal()?;
        let result = call
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| internal("ldmatrix returned nothing"))?;
        let regs: Vec<IntValue<'ctx>> = if matrices == 1 {
            vec![int(result)?]
        } else {
            let s = result.into_struct_value();
            (0..matrices)
                .map(|i| {
                    self.b
                        .build_extract_value(s, i, "")
                        .or_internal()
                        .and_then(int)
                })
                .collect::<Result<_, _>>()?
        };
        let elem_t = self.scalar_type(decl.elem);
        let i16t = self.ctx.i16_type();
        for (e, &slot) in slots.iter().enumerate() {
            let reg = regs
                .get(e / 2)
                .copied()
                .ok_or_else(|| internal("fewer ldmatrix registers than elements"))?;
            let half = if e % 2 == 0 {
                reg
            } else {
                self.b
                    .build_right_shift(reg, i32t.const_int(16, false), false, "")
                    .or_internal()?
            };
            let bits = self.b.build_int_truncate(half, i16t, "").or_internal()?;
            let v = self.b.build_bit_cast(bits, elem_t, "").or_internal()?;
            self.b.build_store(slot, v).or_internal()?;
        }
        self.b.build_unconditional_branch(merge).or_internal()?;

        self.b.position_at_end(by_element);
        for (&slot, &at) in slots.iter().zip(elements) {
            let v = self.load_element(mem, at, false)?;
            self.b.build_store(slot, v).or_internal()?;
        }
        self.b.build_unconditional_branch(merge).or_internal()?;
        self.b.position_at_end(merge);
        Ok(())
    }

    /// `d = a·b + c` by the shape's `mma.sync`.
    fn mma(
        &mut self,
        d: FragmentId,
        a: FragmentId,
        b: FragmentId,
        c: FragmentId,
    ) -> Result<(), CodegenError> {
        let (dd, ad) = (self.fragment_decl(d)?, self.fragment_decl(a)?);
        let name = intrinsic(dd.shape, ad.elem)
            .ok_or_else(|| internal(format!("no mma for {:?} of {}", dd.shape, ad.elem)))?;
        let mut args = Vec::new();
        for f in [a, b] {
            let values = self.read_fragment(f, ad.elem)?;
            args.extend(self.pack(ad.elem, &values)?);
        }
        args.extend(self.read_fragment(c, dd.elem)?);
        let func = inkwell::intrinsics::Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, &[]))
            .ok_or_else(|| internal(format!("LLVM does not know the intrinsic `{name}`")))?;
        let args: Vec<inkwell::values::BasicMetadataValueEnum<'ctx>> =
            args.iter().map(|&a| a.into()).collect();
        let call = self.b.build_call(func, &args, "mma").or_internal()?;
        // The instruction needs the whole warp: LLVM must not move it into or out of
        // control flow, and its intrinsic is not marked convergent.
        let convergent = Attribute::get_named_enum_kind_id("convergent");
        call.add_attribute(
            AttributeLoc::Function,
            self.ctx.create_enum_attribute(convergent, 0),
        );
        let result = call
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| internal(format!("`{name}` returned nothing")))?
            .into_struct_value();
        for (i, slot) in self.fragment_slots(d)?.into_iter().enumerate() {
            let v = self
                .b
                .build_extract_value(result, i as u32, "")
                .or_internal()?;
            self.b.build_store(slot, v).or_internal()?;
        }
        Ok(())
    }

    pub(super) fn read_fragment(
        &self,
        id: FragmentId,
        elem: ScalarType,
    ) -> Result<Vec<BasicValueEnum<'ctx>>, CodegenError> {
        let ty: BasicTypeEnum<'ctx> = self.scalar_type(elem);
        self.fragment_slots(id)?
            .into_iter()
            .map(|slot| self.b.build_load(ty, slot, "").or_internal())
            .collect()
    }

    /// The registers `mma` takes for `values` of an `A` or `B` share: pairs of bf16
    /// in an `i32` (the first in the low half), pairs of f16 in a `<2 x half>`, TF32
    /// (f32) as the `i32` of its bits, f64 as they are.
    pub(super) fn pack(
        &self,
        elem: ScalarType,
        values: &[BasicValueEnum<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let i16t = self.ctx.i16_type();
        match elem {
            ScalarType::Bf16 => values
                .chunks(2)
                .map(|pair| {
                    let half = |v: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>, CodegenError> {
                        let bits = self.b.build_bit_cast(v, i16t, "").or_internal()?;
                        self.b
                            .build_int_z_extend(bits.into_int_value(), i32t, "")
                            .or_internal()
                    };
                    let lo = half(pair[0])?;
                    let hi = half(*pair.get(1).unwrap_or(&pair[0]))?;
                    let hi = self
                        .b
                        .build_left_shift(hi, i32t.const_int(16, false), "")
                        .or_internal()?;
                    Ok(self.b.build_or(lo, hi, "").or_internal()?.into())
                })
                .collect(),
            ScalarType::F16 => values
                .chunks(2)
                .map(|pair| {
                    let vec_t = self.ctx.f16_type().vec_type(2);
                    let mut v = vec_t.get_poison();
                    for (l, &x) in pair.iter().enumerate() {
                        let i = i32t.const_int(l as u64, false);
                        v = self.b.build_insert_element(v, x, i, "").or_internal()?;
                    }
                    Ok(v.into())
                })
                .collect(),
            ScalarType::F32 => values
                .iter()
                .map(|&v| self.b.build_bit_cast(v, i32t, "").or_internal())
                .collect(),
            _ => Ok(values.to_vec()),
        }
    }
}
