//! Matrix fragments: tiles of a matrix multiply held by a *warp* of invocations
//! together, the IR's form of tensor cores (`mma.sync` on NVIDIA, cooperative
//! matrices on Vulkan).
//!
//! A kernel declares fragments ([`FragmentDecl`]) beside its locals. Each is one
//! operand of an `m × n × k` multiply: `A` (`m × k`), `B` (`k × n`) or an accumulator
//! (`m × n`). Statements ([`FragmentOp`]) use them: fill an accumulator, load a
//! fragment from memory, store an accumulator, multiply-accumulate `D = A·B + C`, and
//! three that keep a computation in registers between multiplies (FlashAttention's
//! softmax between its two products): compute an accumulator element by element
//! from others and the element's row and column ([`FragmentMap`]), reduce the rows of
//! accumulators ([`RowReduction`]), and round accumulators into an `A` operand.
//!
//! **Who holds a fragment.** The invocations of a workgroup, in order of their flat
//! local index (`x + y·X + z·X·Y`), form *groups* of consecutive invocations, the
//! group of the fragment's shape ([`MmaShape::group`]): a warp of [`WARP`] for the
//! `mma.sync` shapes, a warpgroup of [`WARPGROUP`] for the `m64` shapes of Hopper's
//! `wgmma`. Every group holds its own value of every fragment. How a group spreads a
//! fragment's elements over its invocations is the target's business (the
//! interpreter holds the whole matrix per group), so a kernel only reaches the
//! elements through memory. Below, "warp" means the fragment's group.
//!
//! **Rules** (the validator checks the static ones):
//! * a kernel with fragments has a multiple of each used shape's group of
//!   invocations per workgroup, and its fragment statements sit in uniform control
//!   flow, as barriers do;
//! * a fragment statement's index and stride may differ between warps but must be the
//!   same for every invocation of one warp (the interpreter reports a difference);
//! * `A` and `B` fragments of the warpgroup shapes are read by the matrix units from
//!   shared memory *asynchronously* (an `A` declared [`FragmentDecl::in_registers`]
//!   excepted: `convert` fills it and the multiply reads it from registers), at some point between the load and the
//!   workgroup's next barrier after the `mma` that uses them (or the kernel's end):
//!   they load only from shared memory, in a tiled layout
//!   ([`FragmentLayout::RowMajorTiles`], [`FragmentLayout::ColMajorTiles`]) with
//!   index and stride multiples of [`TILE`], each fragment in one layout throughout
//!   the kernel (the multiply instruction carries it), and the elements they were
//!   loaded from must hold the same values until that barrier (the interpreter reads
//!   them again at the `mma` and at the barrier, and reports a change or a
//!   misaligned load);
//! * `mma` computes every element of `D` as `C[i][j]` followed by
//!   `fma(A[i][p], B[p][j], ·)` for `p = 0, 1, …, k − 1`, in the accumulator's type
//!   (A's and B's elements widened exactly). That is the interpreter's definition and
//!   the expansion's; tensor cores sum in another order and within a bound
//!   (docs/semantics.md, "Matrix fragments");
//! * `map`, `reduce_rows` and `convert` take the accumulators of the `mma.sync`
//!   shapes and of the warpgroup shapes alike (`convert` into an f16/bf16 `A` held
//!   in registers: a warp shape's, or a warpgroup's declared `in_registers`, as
//!   `wgmma` takes its `A` from registers where FlashAttention's `P` lies). A map's value must be the same for every
//!   invocation of the group (the interpreter computes it on each and reports a
//!   difference): it is computed once per element by whichever invocation holds it.

use crate::kernel::{Block, Expr, LocalId, Memory};
use crate::types::ScalarType;
use serde::{Deserialize, Serialize};

/// Invocations in one warp, the group that holds a fragment of the `mma.sync` shapes.
pub const WARP: u32 = 32;

/// Invocations in one warpgroup (four consecutive warps), the group that holds a
/// fragment of the `m64` shapes.
pub const WARPGROUP: u32 = 128;

/// Rows and columns of a tile of the tiled layouts (for 16-bit elements, the 8 rows
/// of 16 bytes of a tensor-core "core matrix").
pub const TILE: u32 = 8;

/// Index into [`Kernel::fragments`](crate::Kernel::fragments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FragmentId(pub u32);

/// Which operand of `D = A·B + C` a fragment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FragmentRole {
    /// `m × k`.
    A,
    /// `k × n`.
    B,
    /// `m × n`: `C` and `D`.
    Accumulator,
}

impl FragmentRole {
    pub fn name(self) -> &'static str {
        match self {
            FragmentRole::A => "a",
            FragmentRole::B => "b",
            FragmentRole::Accumulator => "accumulator",
        }
    }
}

/// The shape of one multiply: `(m × k) · (k × n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MmaShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl MmaShape {
    pub const M16N8K16: MmaShape = MmaShape { m: 16, n: 8, k: 16 };
    pub const M16N8K8: MmaShape = MmaShape { m: 16, n: 8, k: 8 };
    pub const M8N8K4: MmaShape = MmaShape { m: 8, n: 8, k: 4 };
    pub const M64N16K16: MmaShape = MmaShape {
        m: 64,
        n: 16,
        k: 16,
    };
    pub const M64N64K16: MmaShape = MmaShape {
        m: 64,
        n: 64,
        k: 16,
    };
    pub const M64N128K16: MmaShape = MmaShape {
        m: 64,
        n: 128,
        k: 16,
    };
    pub const M64N256K16: MmaShape = MmaShape {
        m: 64,
        n: 256,
        k: 16,
    };
    pub const M64N64K8: MmaShape = MmaShape { m: 64, n: 64, k: 8 };
    pub const M64N128K8: MmaShape = MmaShape {
        m: 64,
        n: 128,
        k: 8,
    };
    pub const M64N256K8: MmaShape = MmaShape {
        m: 64,
        n: 256,
        k: 8,
    };

    /// The invocations that hold a fragment of this shape together: a warpgroup for
    /// the `m64` shapes, else a warp.
    pub fn group(self) -> u32 {
        if self.m == 64 {
            WARPGROUP
        } else {
            WARP
        }
    }

    /// Whether a warpgroup holds it (whose `A` and `B` are read from shared memory at
    /// the `mma`; see the module docs).
    pub fn is_warpgroup(self) -> bool {
        self.group() == WARPGROUP
    }

    /// `(rows, cols)` of a fragment of this shape in `role`.
    pub fn dims(self, role: FragmentRole) -> (u32, u32) {
        match role {
            FragmentRole::A => (self.m, self.k),
            FragmentRole::B => (self.k, self.n),
            FragmentRole::Accumulator => (self.m, self.n),
        }
    }
}

/// The multiplies the IR has: a shape, the element type of `A` and `B`, and that of
/// the accumulators. Every one of them runs everywhere: natively where the target
/// has it, expanded elsewhere (the warpgroup shapes need sm_90a's `wgmma`, f64
/// m16n8k16 sm_90's DMMA; the rest sm_80's `mma.sync`).
///
/// f32 `A` and `B` are **TF32** operands: every element a multiply reads must be a
/// TF32 value ([`is_tf32`]: f32 with its low 13 significand bits zero), as
/// [`round_to_tf32`] leaves it; the interpreter reports another. Their products are
/// then exact in f32, as those of f16 and bf16 are.
pub const MMA_KINDS: [(MmaShape, ScalarType, ScalarType); 18] = [
    (MmaShape::M16N8K16, ScalarType::F16, ScalarType::F32),
    (MmaShape::M16N8K16, ScalarType::Bf16, ScalarType::F32),
    (MmaShape::M16N8K8, ScalarType::F16, ScalarType::F32),
    (MmaShape::M16N8K8, ScalarType::Bf16, ScalarType::F32),
    (MmaShape::M8N8K4, ScalarType::F64, ScalarType::F64),
    (MmaShape::M64N64K16, ScalarType::F16, ScalarType::F32),
    (MmaShape::M64N64K16, ScalarType::Bf16, ScalarType::F32),
    (MmaShape::M64N128K16, ScalarType::F16, ScalarType::F32),
    (MmaShape::M64N128K16, ScalarType::Bf16, ScalarType::F32),
    (MmaShape::M64N256K16, ScalarType::F16, ScalarType::F32),
    (MmaShape::M64N256K16, ScalarType::Bf16, ScalarType::F32),
    // The narrowest the kernels use: per-row values beside wider accumulators.
    (MmaShape::M64N16K16, ScalarType::F16, ScalarType::F32),
    (MmaShape::M64N16K16, ScalarType::Bf16, ScalarType::F32),
    // Hopper's f64 shape (DMMA at its full rate; m8n8k4 runs at half of it there).
    (MmaShape::M16N8K16, ScalarType::F64, ScalarType::F64),
    // TF32 (sm_80's `mma.sync` of f32 operands; sm_90a's `wgmma`, whose operands
    // load along the reduction only, in the swizzled layouts).
    (MmaShape::M16N8K8, ScalarType::F32, ScalarType::F32),
    (MmaShape::M64N64K8, ScalarType::F32, ScalarType::F32),
    (MmaShape::M64N128K8, ScalarType::F32, ScalarType::F32),
    (MmaShape::M64N256K8, ScalarType::F32, ScalarType::F32),
];

/// Significand bits of f32 that TF32 drops.
const TF32_DROPPED_BITS: u32 = 13;

/// Whether `x` is a TF32 value, as the f32 operands of a multiply must be: its low 13
/// significand bits are zero. (A NaN whose payload lies only there would reach the
/// tensor cores, which do not read those bits, as an infinity.)
pub fn is_tf32(x: f32) -> bool {
    x.to_bits() & ((1 << TF32_DROPPED_BITS) - 1) == 0
}

/// `x` rounded to TF32 (NVIDIA's TensorFloat-32: f32's sign and exponent, 10 explicit
/// significand bits), nearest even, on its bits: add half of the dropped unit (less
/// one, plus the kept lowest bit, so that ties go to even) and clear the dropped bits.
/// A carry into the exponent is the next binade (∞ past the largest finite TF32), as
/// rounding gives; subnormals round at the same bit; NaN stays NaN, quieted (its
/// sign kept, its dropped payload bits cleared: a TF32 NaN).
pub fn round_to_tf32(x: f32) -> f32 {
    let dropped = (1 << TF32_DROPPED_BITS) - 1;
    let bits = x.to_bits();
    if x.is_nan() {
        return f32::from_bits((bits | TF32_QUIET_NAN) & !dropped);
    }
    let kept_lsb = (bits >> TF32_DROPPED_BITS) & 1;
    let half = (1 << (TF32_DROPPED_BITS - 1)) - 1;
    f32::from_bits(bits.wrapping_add(half + kept_lsb) & !dropped)
}

/// f32's quiet-NaN bit (the significand's highest).
const TF32_QUIET_NAN: u32 = 1 << 22;

/// Whether `(shape, input type, accumulator type)` is one of [`MMA_KINDS`].
pub fn is_mma_kind(shape: MmaShape, input: ScalarType, acc: ScalarType) -> bool {
    MMA_KINDS.contains(&(shape, input, acc))
}

/// How a fragment's `rows × cols` elements lie in memory from `index` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FragmentLayout {
    /// Element `(r, c)` at `index + r·stride + c`.
    RowMajor,
    /// Element `(r, c)` at `index + c·stride + r`.
    ColMajor,
    /// [`TILE`] × [`TILE`] tiles, each row-major in `TILE²` consecutive elements;
    /// the tiles of a band of rows lie side by side, the bands `stride` apart:
    /// element `(r, c)` at `index + (r / 8)·stride + (c / 8)·64 + (r mod 8)·8 + c mod 8`.
    /// (With 16-bit elements each tile is a tensor core's 8 × 16-byte "core matrix".)
    RowMajorTiles,
    /// The transpose: element `(r, c)` where `RowMajorTiles` puts `(c, r)`.
    ColMajorTiles,
    /// The tensor cores' 128-byte swizzle: rows of [`swizzle_row`] elements (128
    /// bytes: `R` = 64 of 16 bits, 32 of 32 bits) in bands of 8 rows, `stride`
    /// apart, each band a run of `8 × R` blocks (1024 bytes), with the 16-byte chunks
    /// (`C` = 8 or 4 elements) of each row permuted by its row: element `(r, c)` at
    /// `swizzle(index + (r / 8)·stride + (c / R)·8R + (r mod 8)·R + c mod R)`, where
    /// [`swizzle`]`(e) = e ^ ((e >> 3) & 7C)` flips the chunk bits of the *absolute*
    /// index (bits 3-5 for 16-bit elements, 2-4 for 32-bit) by the row's three bits
    /// above them. Rows written and read whole hit every bank once.
    RowMajorSwizzled,
    /// The transpose: element `(r, c)` where `RowMajorSwizzled` puts `(c, r)`.
    ColMajorSwizzled,
}

/// Bytes of a row of the swizzled layouts.
pub const SWIZZLE_BYTES: u32 = 128;

/// Elements of a row of the swizzled layouts for elements of `elem`: 64 of 16 bits,
/// 32 of 32 bits.
pub fn swizzle_row(elem: ScalarType) -> u32 {
    SWIZZLE_BYTES / elem.size_bytes().max(1)
}

/// The swizzled layouts' permutation of an absolute element index for elements of
/// `elem`: the index's 16-byte chunk within its row flipped by the row's place in its
/// block of 8 (bits 3-5 by bits 6-8 for 16-bit elements, 2-4 by 5-7 for 32-bit; it
/// keeps every index inside its aligned run of one row).
pub fn swizzle(e: u32, elem: ScalarType) -> u32 {
    e ^ ((e >> 3) & (7 * swizzle_chunk(elem)))
}

/// Elements of a 16-byte chunk of a swizzled row (whose 8 chunks the swizzle
/// permutes).
pub fn swizzle_chunk(elem: ScalarType) -> u32 {
    (16 / elem.size_bytes().max(1)).max(1)
}

impl FragmentLayout {
    pub fn name(self) -> &'static str {
        match self {
            FragmentLayout::RowMajor => "row_major",
            FragmentLayout::ColMajor => "col_major",
            FragmentLayout::RowMajorTiles => "row_major_tiles",
            FragmentLayout::ColMajorTiles => "col_major_tiles",
            FragmentLayout::RowMajorSwizzled => "row_major_swizzled",
            FragmentLayout::ColMajorSwizzled => "col_major_swizzled",
        }
    }

    /// Whether it is one of the layouts the matrix units read from shared memory
    /// themselves (tiled or swizzled: a warpgroup's operands).
    pub fn is_for_matrix_units(self) -> bool {
        match self {
            FragmentLayout::RowMajor | FragmentLayout::ColMajor => false,
            FragmentLayout::RowMajorTiles
            | FragmentLayout::ColMajorTiles
            | FragmentLayout::RowMajorSwizzled
            | FragmentLayout::ColMajorSwizzled => true,
        }
    }

    /// Whether it is one of the swizzled layouts.
    pub fn is_swizzled(self) -> bool {
        matches!(
            self,
            FragmentLayout::RowMajorSwizzled | FragmentLayout::ColMajorSwizzled
        )
    }
}

/// A fragment declaration: the operand it is of one multiply shape, and its element
/// type (`A`/`B`: the inputs' type; accumulators: the sums' type).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FragmentDecl {
    pub name: String,
    pub role: FragmentRole,
    pub shape: MmaShape,
    pub elem: ScalarType,
    /// A warpgroup `A` held in registers (filled by `convert`, never loaded) rather
    /// than read from shared memory by the multiply; only on warpgroup `A`
    /// fragments of f16/bf16 (`wgmma`'s register operand).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_registers: bool,
}

impl FragmentDecl {
    /// `(rows, cols)`.
    pub fn dims(&self) -> (u32, u32) {
        self.shape.dims(self.role)
    }
    pub fn len(&self) -> u32 {
        let (r, c) = self.dims();
        r * c
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The invocations holding it together ([`MmaShape::group`]).
    pub fn group(&self) -> u32 {
        self.shape.group()
    }
    /// Whether the matrix units read it from shared memory themselves, at the
    /// `mma` or up to the next barrier: a warpgroup's `A` or `B` (module docs).
    pub fn is_read_in_place(&self) -> bool {
        self.shape.is_warpgroup() && self.role != FragmentRole::Accumulator && !self.in_registers
    }
    /// Whether it is of Hopper's f64 shape (m16n8k16 of f64), which older tensor
    /// cores lack: a target without it expands such a kernel.
    pub fn is_f64_m16(&self) -> bool {
        self.shape == MmaShape::M16N8K16 && self.elem == ScalarType::F64
    }
}

/// A statement on fragments, executed by every warp of the workgroup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FragmentOp {
    /// Every element of an accumulator becomes `value` (a scalar of its type).
    Fill { frag: FragmentId, value: Expr },
    /// Reads a fragment's elements (memory of its element type) at `index` (u32) with
    /// `stride` (u32) between rows (row-major) or columns (column-major).
    Load {
        frag: FragmentId,
        mem: Memory,
        index: Expr,
        stride: Expr,
        layout: FragmentLayout,
    },
    /// Writes an accumulator's elements, each rounded to the memory's element type (a
    /// float type), as a load would read them.
    Store {
        frag: FragmentId,
        mem: Memory,
        index: Expr,
        stride: Expr,
        layout: FragmentLayout,
    },
    /// `d = a·b + c` (`d` may be `c`).
    Mma {
        d: FragmentId,
        a: FragmentId,
        b: FragmentId,
        c: FragmentId,
    },
    /// Element by element ([`FragmentMap`]).
    Map(FragmentMap),
    /// `dst[r][c] = reduction of row r of every source` for every column `c` (all
    /// accumulators of one shape and float type, `dst` of that type and the same rows
    /// ([`same_rows`]); `dst` may be a source).
    ReduceRows {
        dst: FragmentId,
        srcs: Vec<FragmentId>,
        reduction: RowReduction,
    },
    /// `dst[r][c] = cat[r][first + c]` rounded to `dst`'s type, as a cast, where `cat`
    /// is the accumulators `srcs` side by side (all of one shape, `n` columns each:
    /// `cat[r][x] = srcs[x / n][r][x mod n]`): accumulators become the `A` operand of
    /// a second multiply (f16/bf16, held in registers; the same rows, [`same_rows`]).
    /// `first` is a multiple of 8, and the `k` columns taken start in the first
    /// source and end in the last.
    Convert {
        dst: FragmentId,
        srcs: Vec<FragmentId>,
        #[serde(default, skip_serializing_if = "is_zero")]
        first: u32,
    },
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// `dst[r][c] = value` for every element `(r, c)` of accumulator `dst`, with `row`
/// and `col` bound to `r` and `c` (u32), each `(local, fragment)` of `args` to that
/// fragment's element `(r, c mod n)` (`n` its columns), and `body` run first (locals
/// and control flow only: no memory writes, barriers, fragments, copies or return).
/// Every fragment is an accumulator with `dst`'s rows and group ([`same_rows`]: a
/// narrower one holds per-row values, as `reduce_rows` leaves them); all are read
/// before `dst` is written (`dst` may be among `args`). Loads may read memory (the
/// same for every invocation of the group).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FragmentMap {
    pub dst: FragmentId,
    pub row: LocalId,
    pub col: LocalId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<MapArg>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub body: Block,
    pub value: Expr,
}

/// A fragment a [`FragmentMap`] reads, and the local its element is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapArg {
    pub local: LocalId,
    pub frag: FragmentId,
}

/// How `reduce_rows` combines a row's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowReduction {
    /// IEEE maxNum (NaN ignored), as `max`: exact in any order.
    Max,
    /// `+`, in the order [`row_reduction_order`] gives (the interpreter's; targets
    /// with matrix units add in their own order, bound as `mma`'s sums are).
    Sum,
}

impl RowReduction {
    pub fn name(self) -> &'static str {
        match self {
            RowReduction::Max => "max",
            RowReduction::Sum => "sum",
        }
    }
}

/// Whether accumulators of shapes `a` and `b` have the same rows held by the same
/// group (so that every target holds a row's elements of both in the same
/// invocations: a map may read one while computing the other, a reduction may leave
/// one's rows in the other).
pub fn same_rows(a: MmaShape, b: MmaShape) -> bool {
    a.m == b.m && a.group() == b.group()
}

/// Elements of an accumulator of `shape` one invocation of the expansion holds: a run
/// of consecutive elements of one row (every shape of [`MMA_KINDS`] has runs that
/// divide its rows).
pub fn run_length(shape: MmaShape) -> u32 {
    shape.m * shape.n / shape.group()
}

/// The order `reduce_rows` of `Sum` adds a row: the columns are cut into runs of
/// [`run_length`]; each run is summed left to right across every source in order
/// (source 0's run, then source 1's, ...), and the runs' sums left to right. Returns,
/// per run, its `(source, column)` pairs in order.
pub fn row_reduction_order(shape: MmaShape, sources: usize) -> Vec<Vec<(usize, u32)>> {
    let run = run_length(shape).min(shape.n).max(1);
    (0..shape.n / run)
        .map(|q| {
            (0..sources)
                .flat_map(|s| (0..run).map(move |j| (s, q * run + j)))
                .collect()
        })
        .collect()
}

impl FragmentOp {
    /// The expressions, in evaluation order, with their path segment names.
    pub fn exprs(&self) -> Vec<(&'static str, &Expr)> {
        match self {
            FragmentOp::Fill { value, .. } => vec![("value", value)],
            FragmentOp::Load { index, stride, .. } | FragmentOp::Store { index, stride, .. } => {
                vec![("index", index), ("stride", stride)]
            }
            FragmentOp::Map(m) => vec![("value", &m.value)],
            FragmentOp::Mma { .. } | FragmentOp::ReduceRows { .. } | FragmentOp::Convert { .. } => {
                vec![]
            }
        }
    }

    /// A map's statements, which passes walk as any block.
    pub fn body(&self) -> Option<&Block> {
        match self {
            FragmentOp::Map(m) => Some(&m.body),
            FragmentOp::Fill { .. }
            | FragmentOp::Load { .. }
            | FragmentOp::Store { .. }
            | FragmentOp::Mma { .. }
            | FragmentOp::ReduceRows { .. }
            | FragmentOp::Convert { .. } => None,
        }
    }

    /// The fragment the statement writes (none for a store).
    pub fn written(&self) -> Option<FragmentId> {
        match self {
            FragmentOp::Fill { frag, .. } | FragmentOp::Load { frag, .. } => Some(*frag),
            FragmentOp::Store { .. } => None,
            FragmentOp::Mma { d, .. } => Some(*d),
            FragmentOp::Map(m) => Some(m.dst),
            FragmentOp::ReduceRows { dst, .. } | FragmentOp::Convert { dst, .. } => Some(*dst),
        }
    }

    /// Every fragment the statement reads or writes.
    pub fn fragments(&self) -> Vec<FragmentId> {
        match self {
            FragmentOp::Fill { frag, .. }
            | FragmentOp::Load { frag, .. }
            | FragmentOp::Store { frag, .. } => vec![*frag],
            FragmentOp::Mma { d, a, b, c } => vec![*d, *a, *b, *c],
            FragmentOp::Map(m) => std::iter::once(m.dst)
                .chain(m.args.iter().map(|a| a.frag))
                .collect(),
            FragmentOp::ReduceRows { dst, srcs, .. } | FragmentOp::Convert { dst, srcs, .. } => {
                std::iter::once(*dst).chain(srcs.iter().copied()).collect()
            }
        }
    }

    /// Any fragment the statement names (the one whose group runs it).
    pub fn first_fragment(&self) -> FragmentId {
        match self {
            FragmentOp::Store { frag, .. } => *frag,
            other => other.written().unwrap_or(FragmentId(0)),
        }
    }

    /// The expressions, mutably, in evaluation order.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            FragmentOp::Fill { value, .. } => vec![value],
            FragmentOp::Load { index, stride, .. } | FragmentOp::Store { index, stride, .. } => {
                vec![index, stride]
            }
            FragmentOp::Map(m) => vec![&mut m.value],
            FragmentOp::Mma { .. } | FragmentOp::ReduceRows { .. } | FragmentOp::Convert { .. } => {
                vec![]
            }
        }
    }

    /// A map's statements, mutably.
    pub fn body_mut(&mut self) -> Option<&mut Block> {
        match self {
            FragmentOp::Map(m) => Some(&mut m.body),
            FragmentOp::Fill { .. }
            | FragmentOp::Load { .. }
            | FragmentOp::Store { .. }
            | FragmentOp::Mma { .. }
            | FragmentOp::ReduceRows { .. }
            | FragmentOp::Convert { .. } => None,
        }
    }

    /// The path segment of the statement (as in the validator).
    pub fn name(&self) -> &'static str {
        match self {
            FragmentOp::Fill { .. } => "fragment_fill",
            FragmentOp::Load { .. } => "fragment_load",
            FragmentOp::Store { .. } => "fragment_store",
            FragmentOp::Mma { .. } => "mma",
            FragmentOp::Map(_) => "fragment_map",
            FragmentOp::ReduceRows { .. } => "reduce_rows",
            FragmentOp::Convert { .. } => "fragment_convert",
        }
    }

    /// The memory a load or store addresses.
    pub fn memory(&self) -> Option<Memory> {
        match self {
            FragmentOp::Load { mem, .. } | FragmentOp::Store { mem, .. } => Some(*mem),
            FragmentOp::Fill { .. }
            | FragmentOp::Mma { .. }
            | FragmentOp::Map(_)
            | FragmentOp::ReduceRows { .. }
            | FragmentOp::Convert { .. } => None,
        }
    }
}

/// [`element_index`] as an IR expression (u32, wrapping as every index), for the
/// code that places elements in these layouts itself: the expansion, and ops that
/// stage operands for warpgroup loads.
pub fn element_index_expr(
    layout: FragmentLayout,
    elem: ScalarType,
    index: crate::builder::E,
    stride: crate::builder::E,
    r: crate::builder::E,
    c: crate::builder::E,
) -> crate::builder::E {
    use crate::builder::E;
    // Bands of 8 rows `stride` apart, rows of `row` elements in blocks of 8 rows.
    let banded = |r: E, c: E, row: u32| {
        // (Grouped as the ops' staging writes it, so its kernels are unchanged.)
        (r.clone() / TILE) * stride.clone()
            + (c.clone() / row) * (TILE * row)
            + ((r % TILE) * row + c % row)
    };
    let swizzled = |linear: E| {
        let e = index.clone() + linear;
        e.clone() ^ ((e >> 3u32) & (7 * swizzle_chunk(elem)))
    };
    let row = swizzle_row(elem);
    match layout {
        FragmentLayout::RowMajor => index.clone() + (r * stride.clone() + c),
        FragmentLayout::ColMajor => index.clone() + (c * stride.clone() + r),
        FragmentLayout::RowMajorTiles => index.clone() + banded(r, c, TILE),
        FragmentLayout::ColMajorTiles => index.clone() + banded(c, r, TILE),
        FragmentLayout::RowMajorSwizzled => swizzled(banded(r, c, row)),
        FragmentLayout::ColMajorSwizzled => swizzled(banded(c, r, row)),
    }
}

/// The index of element `(r, c)` of a fragment access at `index` to memory of `elem`
/// (the swizzled layouts' rows are 128 bytes), in u32 arithmetic as every index (it
/// wraps).
pub fn element_index(
    layout: FragmentLayout,
    elem: ScalarType,
    index: u32,
    stride: u32,
    r: u32,
    c: u32,
) -> u32 {
    let tiled = |r: u32, c: u32| {
        (r / TILE)
            .wrapping_mul(stride)
            .wrapping_add((c / TILE) * TILE * TILE + (r % TILE) * TILE + c % TILE)
    };
    let swizzled = |r: u32, c: u32| {
        let row = swizzle_row(elem);
        let linear = (r / TILE)
            .wrapping_mul(stride)
            .wrapping_add((c / row) * TILE * row + (r % TILE) * row + c % row);
        swizzle(index.wrapping_add(linear), elem)
    };
    match layout {
        FragmentLayout::RowMajor => index.wrapping_add(r.wrapping_mul(stride).wrapping_add(c)),
        FragmentLayout::ColMajor => index.wrapping_add(c.wrapping_mul(stride).wrapping_add(r)),
        FragmentLayout::RowMajorTiles => index.wrapping_add(tiled(r, c)),
        FragmentLayout::ColMajorTiles => index.wrapping_add(tiled(c, r)),
        FragmentLayout::RowMajorSwizzled => swizzled(r, c),
        FragmentLayout::ColMajorSwizzled => swizzled(c, r),
    }
}
