//! The shared machinery of every reduction-shaped op (reductions, softmax,
//! cross-entropy, layer and batch norm, and their backward passes).
//!
//! **View.** A reduction is a set of *slices* (one per output position), each a
//! sequence of `len` elements, laid over a row-major tensor by index arithmetic
//! ([`View`]): the kept axes give the slice's base offset, the reduced axes (any set of
//! them, in row-major order) the offset of element `j`. Neighbouring axes of the same
//! kind are merged first, so the common cases (last axis, middle axis) cost one
//! multiply.
//!
//! **Schedule.** [`Schedule`] cuts the slices into *groups* of `g` invocations (a power
//! of two) that cooperate on one slice: each invocation folds every `g`-th element
//! into private accumulators, then the group combines them with a shared-memory tree
//! ([`Tree`]). Which invocations sit next to each other follows the memory layout:
//!
//! * *rows* (the innermost reduced axis is contiguous): the `g` invocations of a group
//!   are neighbours and walk the slice together, so each step of the loop is one
//!   coalesced read of `g` consecutive elements; short slices pack several groups into
//!   a workgroup;
//! * *columns* (the innermost kept axis is contiguous): neighbouring invocations own
//!   neighbouring slices, so each step reads `p` consecutive elements, one per slice;
//!   what is left of the workgroup splits `len`.
//!
//! On a CPU (one invocation per workgroup) `g = 1`: no shared memory, no barrier, and
//! one workgroup loops over enough slices to amortise its scheduling.
//!
//! **Vectors.** Steps load the caps' vector width (2 or 4 lanes, at most 16 bytes) of
//! contiguous elements where the contiguous axis is a multiple of it. In rows, the
//! lanes are neighbouring elements of one slice, each with its own state, combined
//! before the tree. In columns, they are one element of each of 4 (2) adjacent
//! slices: a group then owns that many slices and every state is one lane per slice,
//! through the tree and into the second pass. On a CPU this is the SIMD width; on a
//! GPU, 128-bit loads.
//!
//! **Split.** When the slices are too few to fill the device and long enough to share
//! ([`split_parts`]), [`fold_plan`] cuts each slice into parts: a first launch folds
//! each part into a partial state in temporaries, a second combines the partials of each
//! slice (a short column reduction) and finishes. Sum of a whole tensor, batch-norm
//! statistics over few channels and the parameter gradients of layer norm take this
//! path.
//!
//! **Monoids.** What is folded is a [`Monoid`]: a tuple of typed values with an
//! associative combine (sums, extrema, `(value, index)` for arg-reductions, `(max, sum)`
//! for online softmax, `(count, mean, M2)` for Welford). The tree, the split and the
//! per-element loop are written once against it.

use super::math::{bind, Num};
use super::plan::{Binding, Launch, PlanBuilder, ScalarParam};
use super::schedule::{fold_grid, linear_workgroup};
use super::{LowerError, TargetCaps};
use crate::spec::TensorSig;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Expr, ScalarType};

// ---- views ----

/// Slices of a row-major tensor: `(extent, stride)` of the kept and of the reduced
/// axes, outermost first; axes of extent 1 dropped, neighbours merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    kept: Vec<(u32, u32)>,
    reduced: Vec<(u32, u32)>,
    /// Whether a group may take adjacent slices as the lanes of its values.
    across: bool,
}

fn too_large(what: &str, value: u64) -> LowerError {
    LowerError::TooLarge {
        what: what.into(),
        value,
        limit: u32::MAX as u64,
    }
}

/// Appends an axis, merging it into the previous one when they are contiguous.
fn push_axis(dims: &mut Vec<(u32, u32)>, extent: u32, stride: u32) {
    if extent == 1 {
        return;
    }
    if let Some(last) = dims.last_mut() {
        if last.1 as u64 == stride as u64 * extent as u64 {
            last.0 *= extent;
            last.1 = stride;
            return;
        }
    }
    dims.push((extent, stride));
}

impl View {
    /// The view of a row-major `shape` reducing the axes for which `reduced(axis)`.
    pub fn of_shape(shape: &[usize], reduced: impl Fn(usize) -> bool) -> Result<View, LowerError> {
        let numel = crate::shape::numel(shape) as u64;
        if numel > u32::MAX as u64 {
            return Err(too_large("element count", numel));
        }
        let mut view = View {
            kept: Vec::new(),
            reduced: Vec::new(),
            across: true,
        };
        let mut stride = 1u32;
        let mut axes: Vec<(usize, u32, u32)> = Vec::new();
        for (axis, &extent) in shape.iter().enumerate().rev() {
            axes.push((axis, extent as u32, stride));
            stride = stride.saturating_mul(extent as u32);
        }
        for (axis, extent, stride) in axes.into_iter().rev() {
            let dims = if reduced(axis) {
                &mut view.reduced
            } else {
                &mut view.kept
            };
            push_axis(dims, extent, stride);
        }
        Ok(view)
    }

    /// A view from explicit `(extent, stride)` lists (outermost first).
    pub fn strided(kept: &[(u32, u32)], reduced: &[(u32, u32)]) -> View {
        let mut view = View {
            kept: Vec::new(),
            reduced: Vec::new(),
            across: true,
        };
        for &(e, s) in kept {
            push_axis(&mut view.kept, e, s);
        }
        for &(e, s) in reduced {
            push_axis(&mut view.reduced, e, s);
        }
        view
    }

    /// The same view, with every group on one slice: per-slice values stay scalars
    /// (ops that index per-slice data, such as saved statistics or targets).
    pub fn whole_slices(mut self) -> View {
        self.across = false;
        self
    }

    /// Number of slices (output positions).
    pub fn slices(&self) -> u32 {
        self.kept.iter().map(|d| d.0).product()
    }

    /// Elements per slice.
    pub fn len(&self) -> u32 {
        self.reduced.iter().map(|d| d.0).product()
    }

    /// Whether consecutive elements of a slice are consecutive in memory.
    pub fn contiguous(&self) -> bool {
        self.reduced.last().is_some_and(|d| d.1 == 1)
    }

    /// Offset of slice `q`'s first element.
    pub fn base(&self, q: &E) -> E {
        offset_of(&self.kept, q)
    }

    /// Offset of element `j` from its slice's base.
    pub fn offset(&self, j: &E) -> E {
        offset_of(&self.reduced, j)
    }
}

/// `Σ coord_d · stride_d` of the row-major `index` over `dims`.
fn offset_of(dims: &[(u32, u32)], index: &E) -> E {
    let mut inner = 1u32;
    let mut terms: Vec<E> = Vec::new();
    for (d, &(extent, stride)) in dims.iter().enumerate().rev() {
        let mut coord = index.clone();
        if inner != 1 {
            coord = coord / inner;
        }
        if d != 0 {
            coord = coord % extent;
        }
        terms.push(if stride == 1 { coord } else { coord * stride });
        inner = inner.saturating_mul(extent);
    }
    terms
        .into_iter()
        .rev()
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| E::from(0u32))
}

// ---- monoids ----

/// A literal of `ty`, splat across `lanes`.
fn konst(ty: ScalarType, v: f64, lanes: u8) -> E {
    Num { ty, lanes }.lit(v)
}

/// What a reduction folds: a tuple of typed values with an associative combine.
///
/// Every method works on scalars (`lanes = 1`) or lane-wise on vectors of `lanes`
/// (an invocation folding 2 or 4 contiguous elements per step keeps one state per
/// lane; [`Group::fold`] combines the lanes before the tree).
pub trait Monoid {
    /// Scalar types of the state's components.
    fn types(&self) -> Vec<ScalarType>;
    /// Whether the starting state is made from the slice's first item (idempotent
    /// combines: extrema), which needs no identity literal (no ±∞ or NaN).
    fn starts_from_first(&self) -> bool {
        false
    }
    /// The state before any item; `first` is the first item's state if
    /// `starts_from_first`.
    fn start(&self, first: Option<Vec<E>>, lanes: u8) -> Vec<E>;
    /// The state of one item: its values `x` at position `j` (u32) of the slice.
    fn lift(&self, f: &mut Body, x: Vec<E>, j: &E, lanes: u8) -> Vec<E>;
    /// `a ⊕ b` (`a` holds the lower positions when that matters).
    fn combine(&self, f: &mut Body, a: &[E], b: &[E], lanes: u8) -> Vec<E>;
    /// `acc ⊕ lift(x)`; overridden where a direct form is cheaper.
    fn update(&self, f: &mut Body, acc: &[E], x: Vec<E>, j: &E, lanes: u8) -> Vec<E> {
        let item = self.lift(f, x, j, lanes);
        self.combine(f, acc, &item, lanes)
    }
}

/// `n` independent sums.
pub struct Sum {
    pub ty: ScalarType,
    pub n: usize,
}

impl Monoid for Sum {
    fn types(&self) -> Vec<ScalarType> {
        vec![self.ty; self.n]
    }
    fn start(&self, _: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        vec![konst(self.ty, 0.0, lanes); self.n]
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, _: &E, _: u8) -> Vec<E> {
        x
    }
    fn combine(&self, _: &mut Body, a: &[E], b: &[E], _: u8) -> Vec<E> {
        a.iter().zip(b).map(|(a, b)| a + b).collect()
    }
}

/// Maximum or minimum (IEEE maxNum/minNum: NaN ignored unless every item is NaN).
pub struct Extremum {
    pub ty: ScalarType,
    pub max: bool,
}

impl Monoid for Extremum {
    fn types(&self) -> Vec<ScalarType> {
        vec![self.ty]
    }
    fn starts_from_first(&self) -> bool {
        true
    }
    fn start(&self, first: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        first.unwrap_or_else(|| vec![konst(self.ty, 0.0, lanes)])
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, _: &E, _: u8) -> Vec<E> {
        x
    }
    fn combine(&self, _: &mut Body, a: &[E], b: &[E], _: u8) -> Vec<E> {
        let (a, b) = (a[0].clone(), b[0].clone());
        vec![if self.max { a.max(b) } else { a.min(b) }]
    }
}

/// `(value, position)` of the first maximum / minimum, NaN ignored (position 0 when
/// every item is NaN), as the reference defines argmax / argmin.
pub struct ArgExtremum {
    pub ty: ScalarType,
    pub max: bool,
}

impl ArgExtremum {
    /// Whether `v` beats the incumbent `w` strictly: `v > w` for argmax, where a
    /// number beats a NaN incumbent and a NaN never wins.
    fn beats(&self, v: &E, w: &E) -> E {
        if !self.ty.is_float() {
            return if self.max {
                v.clone().gt(w.clone())
            } else {
                v.clone().lt(w.clone())
            };
        }
        // !(v <= w) is true for v > w and for a NaN w; `v == v` rules out a NaN v.
        let not_worse = if self.max {
            !v.clone().le(w.clone())
        } else {
            !v.clone().ge(w.clone())
        };
        not_worse & v.clone().eq(v.clone())
    }
}

impl Monoid for ArgExtremum {
    fn types(&self) -> Vec<ScalarType> {
        vec![self.ty, ScalarType::U32]
    }
    fn starts_from_first(&self) -> bool {
        true
    }
    fn start(&self, first: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        first.unwrap_or_else(|| {
            vec![
                konst(self.ty, 0.0, lanes),
                konst(ScalarType::U32, 0.0, lanes),
            ]
        })
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, j: &E, _: u8) -> Vec<E> {
        vec![x[0].clone(), j.clone()]
    }
    fn combine(&self, f: &mut Body, a: &[E], b: &[E], _: u8) -> Vec<E> {
        // Ties go to the lower position, whichever side it comes from.
        let tie = b[0].clone().eq(a[0].clone()) & b[1].clone().lt(a[1].clone());
        let take_b = f.let_("take", self.beats(&b[0], &a[0]) | tie);
        vec![
            take_b.clone().select(b[0].clone(), a[0].clone()),
            take_b.select(b[1].clone(), a[1].clone()),
        ]
    }
    fn update(&self, f: &mut Body, acc: &[E], x: Vec<E>, j: &E, _: u8) -> Vec<E> {
        // Positions only grow within one invocation's (lane's) loop: strict
        // improvement keeps the first extremum.
        let x = bind(f, "x", x[0].clone());
        let take = f.let_("take", self.beats(&x, &acc[0]));
        vec![
            take.clone().select(x, acc[0].clone()),
            take.select(j.clone(), acc[1].clone()),
        ]
    }
}

/// Online softmax statistics `(m, s)`: the running maximum and `Σ e^{x − m}`.
///
/// Combining rescales the smaller side by `e^{−|m₁ − m₂|}`; two `−∞` maxima add
/// without rescaling, so a fully masked slice never computes `−∞ − (−∞)`. A `+∞`
/// element makes the sum NaN, as `e^{∞−∞}` does in the reference. One `exp` per
/// element.
pub struct SoftmaxStats {
    pub ty: ScalarType,
}

impl Monoid for SoftmaxStats {
    fn types(&self) -> Vec<ScalarType> {
        vec![self.ty; 2]
    }
    fn starts_from_first(&self) -> bool {
        true
    }
    fn start(&self, first: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        // The first element is a valid running maximum with an empty sum.
        let m = first.map_or_else(|| konst(self.ty, 0.0, lanes), |v| v[0].clone());
        vec![m, konst(self.ty, 0.0, lanes)]
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, _: &E, lanes: u8) -> Vec<E> {
        vec![x[0].clone(), konst(self.ty, 1.0, lanes)]
    }
    fn combine(&self, f: &mut Body, a: &[E], b: &[E], lanes: u8) -> Vec<E> {
        let (m1, s1, m2, s2) = (&a[0], &a[1], &b[0], &b[1]);
        let a_big = f.let_("a_big", m1.clone().ge(m2.clone()));
        let e = self.rescale(f, m1, m2, lanes);
        let hi = a_big.clone().select(s1.clone(), s2.clone());
        let lo = a_big.clone().select(s2.clone(), s1.clone());
        vec![a_big.select(m1.clone(), m2.clone()), hi + lo * e]
    }
    fn update(&self, f: &mut Body, acc: &[E], x: Vec<E>, _: &E, lanes: u8) -> Vec<E> {
        let (m, s) = (&acc[0], &acc[1]);
        let x = bind(f, "x", x[0].clone());
        let gt = f.let_("gt", x.clone().gt(m.clone()));
        let e = self.rescale(f, m, &x, lanes);
        // e^{x−x}: 1, or NaN for x = +∞ (x = −∞ never exceeds m).
        let own = (x.clone() - x.clone()) + konst(self.ty, 1.0, lanes);
        vec![
            gt.clone().select(x, m.clone()),
            gt.select(s.clone() * e.clone() + own, s.clone() + e),
        ]
    }
}

impl SoftmaxStats {
    /// `e^{−|a − b|}`, and 1 when both are `−∞` (not NaN).
    fn rescale(&self, f: &mut Body, a: &E, b: &E, lanes: u8) -> E {
        let d = -(a.clone() - b.clone()).abs();
        let lowest = lowest_finite(&Num { ty: self.ty, lanes });
        let both_empty = a.clone().eq(b.clone()) & a.clone().lt(lowest);
        let d = both_empty.select(konst(self.ty, 0.0, lanes), d);
        f.let_("e", d.exp())
    }
}

/// Welford's `(count, mean, M2)`, combined with Chan's parallel formula: numerically
/// stable mean and variance in one pass. The count is kept in the compute type (exact
/// up to 2^24 per invocation, and only a weight beyond): no integer-to-float
/// conversion in the loop.
pub struct Welford {
    pub ty: ScalarType,
}

impl Monoid for Welford {
    fn types(&self) -> Vec<ScalarType> {
        vec![self.ty; 3]
    }
    fn start(&self, _: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        vec![konst(self.ty, 0.0, lanes); 3]
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, _: &E, lanes: u8) -> Vec<E> {
        vec![
            konst(self.ty, 1.0, lanes),
            x[0].clone(),
            konst(self.ty, 0.0, lanes),
        ]
    }
    fn combine(&self, f: &mut Body, a: &[E], b: &[E], lanes: u8) -> Vec<E> {
        let n = f.let_("n", a[0].clone() + b[0].clone());
        let d = f.let_("d", b[1].clone() - a[1].clone());
        // The weight of b; an empty total has weight 0 / 1, never 0 / 0.
        let w = f.let_(
            "w",
            b[0].clone() / n.clone().max(konst(self.ty, 1.0, lanes)),
        );
        let spread = d.clone() * d.clone() * a[0].clone() * w.clone();
        vec![
            n,
            a[1].clone() + d * w,
            a[2].clone() + b[2].clone() + spread,
        ]
    }
    fn update(&self, f: &mut Body, acc: &[E], x: Vec<E>, _: &E, lanes: u8) -> Vec<E> {
        let x = bind(f, "x", x[0].clone());
        let n = f.let_("n", acc[0].clone() + konst(self.ty, 1.0, lanes));
        // 1/n depends on the count only: the division stays off the chain of means.
        let inv = f.let_("inv_n", konst(self.ty, 1.0, lanes) / n.clone());
        let d = f.let_("d", x.clone() - acc[1].clone());
        let mean = f.let_("mean", acc[1].clone() + d.clone() * inv);
        vec![n, mean.clone(), acc[2].clone() + d * (x - mean)]
    }
}

/// A monoid whose items are already states (partials of a split reduction).
struct Partials<'a>(&'a dyn Monoid);

impl Monoid for Partials<'_> {
    fn types(&self) -> Vec<ScalarType> {
        self.0.types()
    }
    fn starts_from_first(&self) -> bool {
        self.0.starts_from_first()
    }
    fn start(&self, first: Option<Vec<E>>, lanes: u8) -> Vec<E> {
        self.0.start(first, lanes)
    }
    fn lift(&self, _: &mut Body, x: Vec<E>, _: &E, _: u8) -> Vec<E> {
        x
    }
    fn combine(&self, f: &mut Body, a: &[E], b: &[E], lanes: u8) -> Vec<E> {
        self.0.combine(f, a, b, lanes)
    }
}

// ---- schedule ----

/// Invocations the device should have busy before a reduction is split (GPU), and the
/// fewest elements worth giving one invocation.
const GPU_TARGET_INVOCATIONS: u64 = 65_536;
const GPU_MIN_PER_INVOCATION: u64 = 32;
/// The same on a CPU, where a workgroup is one invocation on one host thread.
const CPU_TARGET_INVOCATIONS: u64 = 64;
const CPU_MIN_PER_INVOCATION: u64 = 8192;
/// Elements one CPU workgroup folds before it is worth its scheduling.
const CPU_WORK: u32 = 4096;
/// Widest vector access, in bytes (128-bit loads).
const MAX_VECTOR_BYTES: u32 = 16;

fn pow2_ceil(n: u32) -> u32 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 31)
}

fn pow2_floor(n: u32) -> u32 {
    if n == 0 {
        1
    } else {
        1 << (31 - n.leading_zeros())
    }
}

/// How groups of invocations are laid over the slices of a [`View`] (see the module
/// docs): `p` groups of `g` invocations per workgroup, `t` passes per workgroup, each
/// slice cut into `parts` parts of `part_len` elements. A step of an invocation loads
/// `lanes` contiguous elements of one slice (rows), or one element of each of
/// `slice_lanes` adjacent slices (columns); at most one of the two exceeds 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub view: View,
    pub slices: u32,
    pub len: u32,
    pub parts: u32,
    pub part_len: u32,
    /// Contiguous elements of one slice per step, 1, 2 or 4.
    pub lanes: u8,
    /// Adjacent slices per group, one per lane, 1, 2 or 4.
    pub slice_lanes: u8,
    /// Invocations per group (a power of two).
    pub g: u32,
    /// Groups per workgroup pass (a power of two).
    pub p: u32,
    /// Passes of one workgroup (1 on a GPU).
    pub t: u32,
    /// Rows layout (a group's invocations are neighbours) or columns.
    pub rows: bool,
    pub workgroups: u32,
    pub grid: [u32; 3],
}

/// `(lanes, slice_lanes)`: the caps' vector width (at most 16 bytes of `elem_bytes`
/// elements) along the contiguous axis, when its extent is a multiple of it, so that
/// every vector is aligned and stays inside one contiguous run. The contiguous axis is
/// the innermost reduced one (rows: lanes of one slice) or the innermost kept one
/// (columns: lanes of adjacent slices).
fn lanes_for(view: &View, caps: &TargetCaps, elem_bytes: u32) -> (u8, u8) {
    let widest = (caps.vector_width as u32).min(MAX_VECTOR_BYTES / elem_bytes.max(1));
    let pick = |extent: u32| {
        [4u32, 2]
            .into_iter()
            .find(|&l| l <= widest && extent % l == 0)
            .map_or(1, |l| l as u8)
    };
    if view.contiguous() {
        (view.reduced.last().map_or(1, |d| pick(d.0)), 1)
    } else {
        match view.kept.last() {
            Some(&(extent, 1)) if view.across => (1, pick(extent)),
            _ => (1, 1),
        }
    }
}

impl Schedule {
    /// Lays groups over `view` (elements of `elem_bytes` bytes) with each slice cut
    /// into `parts` parts.
    pub fn new(
        view: View,
        caps: &TargetCaps,
        parts: u32,
        elem_bytes: u32,
    ) -> Result<Schedule, LowerError> {
        let (slices, len) = (view.slices(), view.len());
        let (lanes, slice_lanes) = lanes_for(&view, caps, elem_bytes);
        let l = lanes as u32;
        let parts = parts.clamp(1, (len / l).max(1));
        // Parts start on a vector boundary.
        let part_len = len.div_ceil(parts).div_ceil(l).max(1) * l;
        let parts = len.div_ceil(part_len).max(1);
        let steps = part_len / l;
        let vector_slices = slices / slice_lanes as u32;
        let groups = vector_slices
            .checked_mul(parts)
            .ok_or_else(|| too_large("reduction groups", vector_slices as u64 * parts as u64))?;
        let inv = pow2_floor(caps.invocations_1d());
        let rows = view.contiguous();
        let (g, p) = if rows {
            // Small groups with several steps each (at least GPU_MIN_PER_INVOCATION
            // elements) and several rows per workgroup, rather than one step per
            // invocation and a deep tree of barriers -- unless there are too few
            // rows to keep the device busy that way.
            let min_steps = (GPU_MIN_PER_INVOCATION as u32 / l).max(1);
            let small = pow2_ceil(steps.div_ceil(min_steps));
            let fill = pow2_ceil(
                GPU_TARGET_INVOCATIONS
                    .div_ceil(groups.max(1) as u64)
                    .min(inv as u64) as u32,
            );
            let g = inv.min(pow2_ceil(steps)).min(small.max(fill));
            (g, (inv / g).min(pow2_ceil(groups)))
        } else {
            // Neighbouring slices of one part share a workgroup: more parts mean more
            // workgroups, not fewer invocations per slice.
            let p = inv.min(pow2_ceil(vector_slices));
            ((inv / p).min(pow2_ceil(steps)), p)
        };
        let t = if caps.is_serial() {
            (CPU_WORK / (part_len * slice_lanes as u32)).clamp(1, groups)
        } else {
            1
        };
        let workgroups = groups.div_ceil(p * t).max(1);
        let grid = fold_grid(workgroups, caps)?;
        Ok(Schedule {
            view,
            slices,
            len,
            parts,
            part_len,
            lanes,
            slice_lanes,
            g,
            p,
            t,
            rows,
            workgroups,
            grid,
        })
    }

    /// Groups in all: `slices / slice_lanes · parts`.
    pub fn groups(&self) -> u32 {
        self.vector_slices() * self.parts
    }

    fn vector_slices(&self) -> u32 {
        self.slices / self.slice_lanes as u32
    }

    /// The workgroup size to declare.
    pub fn workgroup_size(&self) -> [u32; 3] {
        [self.p * self.g, 1, 1]
    }

    /// Invocations launched in all.
    fn invocations(&self) -> u64 {
        self.workgroups as u64 * (self.p * self.g) as u64
    }

    /// Shared arrays for combining states of `types` across a group (none if `g = 1`).
    pub fn tree(
        &self,
        k: &mut KernelBuilder,
        types: &[ScalarType],
        caps: &TargetCaps,
        name: &str,
    ) -> Result<Tree, LowerError> {
        let len = self.p * self.g * self.slice_lanes as u32;
        let mut shared = Vec::new();
        if self.g > 1 {
            let bytes: u64 = types
                .iter()
                .map(|t| t.size_bytes() as u64 * len as u64)
                .sum();
            if bytes > caps.shared_memory_bytes as u64 {
                return Err(LowerError::SharedMemory {
                    op: name.to_string(),
                    needed: bytes,
                    available: caps.shared_memory_bytes as u64,
                });
            }
            for (c, &ty) in types.iter().enumerate() {
                shared.push(k.shared(format!("tree{c}"), ty, len));
            }
        }
        Ok(Tree {
            shared,
            g: self.g,
            stride: if self.rows { 1 } else { self.p },
            lanes: self.slice_lanes,
        })
    }

    /// Runs `body` once per group this invocation belongs to (`t` times on a CPU).
    /// Every invocation runs it, also those of groups past the end (whose element
    /// range is empty): the group's barriers stay in uniform control flow.
    pub fn for_each_group(&self, f: &mut Body, body: impl FnOnce(&mut Body, &Group)) {
        let inv = self.p * self.g;
        let lid = if inv > 1 {
            f.let_("lid", local_id(0))
        } else {
            E::from(0u32)
        };
        let (slot, r) = if inv == 1 {
            (E::from(0u32), E::from(0u32))
        } else if self.rows {
            (
                lid.clone() >> self.g.trailing_zeros(),
                lid.clone() & (self.g - 1),
            )
        } else {
            (
                lid.clone() & (self.p - 1),
                lid.clone() >> self.p.trailing_zeros(),
            )
        };
        let slot = bind(f, "slot", slot);
        let r = bind(f, "r", r);
        let wg = f.let_("wg", linear_workgroup(self.grid));
        if self.t == 1 {
            let gamma = if self.p == 1 {
                wg
            } else {
                wg * self.p + slot.clone()
            };
            self.group(f, lid, r, gamma, body);
        } else {
            f.for_("pass", 0u32, self.t, 1, |f, pass| {
                let first = wg * self.t + pass;
                let gamma = if self.p == 1 {
                    first
                } else {
                    first * self.p + slot.clone()
                };
                self.group(f, lid, r, gamma, body);
            });
        }
    }

    fn group(&self, f: &mut Body, lid: E, r: E, gamma: E, body: impl FnOnce(&mut Body, &Group)) {
        let groups = self.groups();
        let vector_slices = self.vector_slices();
        let sl = self.slice_lanes as u32;
        let gamma = f.let_("gamma", gamma);
        let valid = f.let_("valid", gamma.clone().lt(groups));
        // Loads of a group past the end go to the last group, so they stay in bounds.
        let safe = f.let_("group", gamma.clone().min(groups - 1));
        let (qv, j0, j1) = if self.parts == 1 {
            let end = valid.clone().select(self.len, 0u32);
            (safe, E::from(0u32), f.let_("end", end))
        } else {
            let qv = f.let_("qv", safe.clone() % vector_slices);
            let j0 = f.let_("j0", safe / vector_slices * self.part_len);
            let end = (j0.clone() + self.part_len).min(self.len);
            let end = valid.clone().select(end, j0.clone());
            (qv, j0, f.let_("end", end))
        };
        let q = if sl == 1 { qv } else { f.let_("q", qv * sl) };
        let base = bind(f, "base", self.view.base(&q));
        let leader = if self.g == 1 {
            valid.clone()
        } else {
            f.let_("leader", valid.clone() & r.clone().eq(0u32))
        };
        let group = Group {
            lid,
            r,
            gamma,
            valid,
            leader,
            q,
            base,
            j0,
            j1,
            g: self.g,
            lanes: self.lanes,
            slice_lanes: self.slice_lanes,
            whole_slices: self.parts == 1,
            view: self.view.clone(),
        };
        body(f, &group);
    }
}

/// One group's place in the launch, as seen by one of its invocations.
pub struct Group {
    /// Invocation id in the workgroup.
    pub lid: E,
    /// Rank in the group (0 is the leader).
    pub r: E,
    /// Group index (`part · slices / slice_lanes + slice / slice_lanes`); past the
    /// end for groups that do not exist.
    pub gamma: E,
    /// The group exists (`gamma` is in range).
    pub valid: E,
    /// The group exists and this is its rank 0: the one invocation that writes the
    /// slice's results.
    pub leader: E,
    /// The (first) slice (clamped into range for groups past the end).
    pub q: E,
    /// Offset of the (first) slice's first element.
    pub base: E,
    /// The group's elements are `j0..j1` (empty for groups past the end).
    pub j0: E,
    pub j1: E,
    g: u32,
    /// Contiguous elements of the slice per step: `j` given to bodies is the first.
    pub lanes: u8,
    /// Adjacent slices of the group, one per lane of every value.
    pub slice_lanes: u8,
    /// One part per slice: the group's elements are the whole slice.
    whole_slices: bool,
    view: View,
}

/// One step of an invocation whose steps are all known at compile time
/// ([`Group::resident_steps`]).
pub struct Step {
    /// The step's first element, clamped into the slice: a load at `j` stays in the
    /// slice even where the step is past its end (it then reads the slice's last step).
    pub j: E,
    /// Whether the step's elements are this group's to write: the group exists and,
    /// for a `ragged` step, `j` is not past the slice's end.
    pub inside: E,
    /// Some invocations' step lies past the slice's end: its values are duplicates of
    /// the last step and must not count in non-idempotent folds (sums).
    pub ragged: bool,
}

impl Group {
    /// Offset of element `j` of the slice (of the first lane's, for vectors).
    pub fn offset(&self, j: &E) -> E {
        let o = self.view.offset(j);
        match self.base.expr() {
            Expr::Lit(s) if s.is_zero() => o,
            _ => self.base.clone() + o,
        }
    }

    /// Lanes of a step's values.
    pub fn step_lanes(&self) -> u8 {
        self.lanes.max(self.slice_lanes)
    }

    /// The numeric context of one step: `ty` with the step's lanes.
    pub fn num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.step_lanes(),
        }
    }

    /// The numeric context of per-slice values (totals): one lane per slice.
    pub fn stat_num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.slice_lanes,
        }
    }

    /// A per-slice value (a total) made to match a step's values.
    pub fn splat(&self, e: E) -> E {
        if self.lanes == 1 {
            e
        } else {
            e.splat(self.lanes)
        }
    }

    /// The positions of a step's lanes: `j`, `(j, j+1, ...)` along one slice, or
    /// `(j, j, ...)` across slices.
    pub fn lane_index(&self, j: &E) -> E {
        if self.slice_lanes > 1 {
            return j.clone().splat(self.slice_lanes);
        }
        if self.lanes == 1 {
            return j.clone();
        }
        let ramp = vector((0..self.lanes as u32).map(E::from));
        j.clone().splat(self.lanes) + ramp
    }

    /// The group's slices, for per-slice values.
    pub fn slices(&self) -> Slices {
        Slices {
            q: self.q.clone(),
            lanes: self.slice_lanes,
        }
    }

    /// Calls `body(f, j)` for this invocation's steps: `j = j0 + r·lanes`, then every
    /// `g·lanes` elements further.
    pub fn for_each(&self, f: &mut Body, body: impl FnOnce(&mut Body, E)) {
        let l = self.lanes as u32;
        let first = if l == 1 {
            self.r.clone()
        } else {
            self.r.clone() * l
        };
        let start = match self.j0.expr() {
            Expr::Lit(s) if s.is_zero() => first,
            _ => self.j0.clone() + first,
        };
        f.for_("j", start, self.j1.clone(), self.g * l, body);
    }

    /// Folds this invocation's elements into accumulators of per-slice shape: `item(f,
    /// j)` gives the values of step `j`; lanes along one slice are combined at the end.
    pub fn fold(
        &self,
        f: &mut Body,
        monoid: &dyn Monoid,
        item: impl Fn(&mut Body, &E) -> Vec<E>,
    ) -> Vec<Var> {
        let lanes = self.step_lanes();
        let first = if monoid.starts_from_first() {
            let zero = E::from(0u32);
            let x = item(f, &zero);
            Some(monoid.lift(f, x, &self.lane_index(&zero), lanes))
        } else {
            None
        };
        let vars: Vec<Var> = monoid
            .start(first, lanes)
            .into_iter()
            .map(|e| f.var("acc", e))
            .collect();
        self.for_each(f, |f, j| {
            let acc: Vec<E> = vars.iter().map(|v| v.get()).collect();
            let x = item(f, &j);
            let at = self.lane_index(&j);
            let next = monoid.update(f, &acc, x, &at, lanes);
            assign_all(f, &vars, next);
        });
        if self.lanes == 1 {
            return vars;
        }
        let state: Vec<E> = vars.iter().map(|v| v.get()).collect();
        self.combine_lanes(f, monoid, state)
            .into_iter()
            .map(|e| f.var("acc", e))
            .collect()
    }

    /// A step's state made per-slice: the lanes along one slice combined pairwise
    /// (lane order kept, so ties of arg-reductions still see the lower position on the
    /// left). Lanes across slices stay apart.
    fn combine_lanes(&self, f: &mut Body, monoid: &dyn Monoid, state: Vec<E>) -> Vec<E> {
        if self.lanes == 1 {
            return state;
        }
        let lanes: Vec<Vec<E>> = (0..self.lanes)
            .map(|l| state.iter().map(|e| e.clone().lane(l)).collect())
            .collect();
        combine_pairwise(f, monoid, lanes, 1)
    }

    /// This invocation's steps, unrolled, when the group covers whole slices and every
    /// invocation has at most `most_elements` elements (so that its values can stay in
    /// registers); `None` otherwise. Step `k` starts at `r·lanes + k·g·lanes`.
    pub fn resident_steps(&self, f: &mut Body, most_elements: u32) -> Option<Vec<Step>> {
        let l = self.lanes as u32;
        let stride = self.g * l;
        let len = self.view.len();
        let count = len.div_ceil(stride);
        if !self.whole_slices || count * self.step_lanes() as u32 > most_elements {
            return None;
        }
        let first = if l == 1 {
            self.r.clone()
        } else {
            self.r.clone() * l
        };
        let steps = (0..count).map(|k| {
            let j = bind(f, "j", first.clone() + k * stride);
            if (k + 1) * stride <= len {
                return Step {
                    j,
                    inside: self.valid.clone(),
                    ragged: false,
                };
            }
            let inside = f.let_("inside", j.clone().lt(self.j1.clone()));
            Step {
                j: f.let_("j_in", j.min(len - l)),
                inside,
                ragged: true,
            }
        });
        Some(steps.collect())
    }

    /// Combines the states of unrolled steps (one per step, of the step's lanes) into
    /// one per-slice state, pairwise: a dependency chain of log₂ steps, not one per
    /// step. Ragged steps must already hold the monoid's identity, or a duplicate for
    /// an idempotent one.
    pub fn combine_steps(&self, f: &mut Body, monoid: &dyn Monoid, states: Vec<Vec<E>>) -> Vec<E> {
        let state = combine_pairwise(f, monoid, states, self.step_lanes());
        self.combine_lanes(f, monoid, state)
    }
}

/// `s₀ ⊕ s₁ ⊕ …` by combining neighbours pairwise (order kept), each partial bound.
fn combine_pairwise(
    f: &mut Body,
    monoid: &dyn Monoid,
    mut states: Vec<Vec<E>>,
    lanes: u8,
) -> Vec<E> {
    while states.len() > 1 {
        let mut next = Vec::new();
        for pair in states.chunks(2) {
            let merged = match pair {
                [a, b] => monoid.combine(f, a, b, lanes),
                _ => pair[0].clone(),
            };
            next.push(merged.into_iter().map(|e| bind(f, "lanes", e)).collect());
        }
        states = next;
    }
    states.into_iter().next().unwrap_or_default()
}

/// The slices of one group: `q`, or `q .. q + lanes` (one per lane).
pub struct Slices {
    pub q: E,
    pub lanes: u8,
}

impl Slices {
    /// A per-slice value, `value(f, slice)` for each of the group's slices, gathered
    /// into one lane per slice.
    pub fn gather(&self, f: &mut Body, value: impl Fn(&mut Body, E) -> E) -> E {
        if self.lanes == 1 {
            return value(f, self.q.clone());
        }
        let lanes: Vec<E> = (0..self.lanes as u32)
            .map(|l| {
                let v = value(f, self.q.clone() + l);
                bind(f, "lane", v)
            })
            .collect();
        vector(lanes)
    }
}

/// Assigns every var at once: the new values are bound first, so that no update
/// reads a var already overwritten.
fn assign_all(f: &mut Body, vars: &[Var], values: Vec<E>) {
    let pending: Vec<(Var, E)> = vars
        .iter()
        .zip(values)
        .filter(|(v, e)| !matches!(e.expr(), Expr::Local(l) if *l == v.0))
        .map(|(v, e)| (*v, e))
        .collect();
    if let [(v, e)] = pending.as_slice() {
        f.assign(*v, e.clone());
        return;
    }
    let bound: Vec<(Var, E)> = pending
        .into_iter()
        .map(|(v, e)| (v, bind(f, "next", e)))
        .collect();
    for (v, e) in bound {
        f.assign(v, e);
    }
}

/// Shared arrays combining per-invocation states across a group.
pub struct Tree {
    shared: Vec<Mem>,
    g: u32,
    /// Distance in invocation ids between ranks `r` and `r + 1` of a group.
    stride: u32,
    /// Lanes of a state (one per slice of the group).
    lanes: u8,
}

impl Tree {
    fn at(&self, mem: Mem, lid: E) -> E {
        if self.lanes == 1 {
            mem.at(lid)
        } else {
            mem.load(lid * self.lanes as u32, self.lanes)
        }
    }

    fn put(&self, f: &mut Body, mem: Mem, lid: E, value: E) {
        if self.lanes == 1 {
            f.store(mem, lid, value);
        } else {
            f.store(mem, lid * self.lanes as u32, value);
        }
    }

    /// Combines `acc` across the group by a tree in shared memory (log₂ g steps, each
    /// ending in a barrier). Returns the total: in every invocation of the group with
    /// `broadcast`, else in the leader only. Must be called in uniform control flow.
    pub fn reduce(
        &self,
        f: &mut Body,
        group: &Group,
        monoid: &dyn Monoid,
        acc: &[Var],
        broadcast: bool,
    ) -> Vec<E> {
        if self.g == 1 {
            return acc.iter().map(|v| v.get()).collect();
        }
        for (mem, v) in self.shared.iter().zip(acc) {
            self.put(f, *mem, group.lid.clone(), v.get());
        }
        f.barrier();
        let mut step = self.g / 2;
        while step >= 1 {
            // Ranks below `step` absorb the state `step` ranks up. Only ranks in
            // [step, 2·step) are read, and they do not write in this step.
            let partner = group.lid.clone() + step * self.stride;
            let last = step == 1;
            f.if_(group.r.clone().lt(step), |f| {
                let mine: Vec<E> = acc.iter().map(|v| v.get()).collect();
                let other: Vec<E> = self
                    .shared
                    .iter()
                    .map(|m| f.let_("other", self.at(*m, partner.clone())))
                    .collect();
                let next = monoid.combine(f, &mine, &other, self.lanes);
                assign_all(f, acc, next);
                if !last || broadcast {
                    for (mem, v) in self.shared.iter().zip(acc) {
                        self.put(f, *mem, group.lid.clone(), v.get());
                    }
                }
            });
            f.barrier();
            step /= 2;
        }
        if !broadcast {
            return acc.iter().map(|v| v.get()).collect();
        }
        let leader = group.lid.clone() - group.r.clone() * self.stride;
        let leader = f.let_("leader_id", leader);
        let total: Vec<E> = self
            .shared
            .iter()
            .map(|m| f.let_("total", self.at(*m, leader.clone())))
            .collect();
        // The arrays are reused by the next reduction: everyone must have read first.
        f.barrier();
        total
    }
}

// ---- launches and plans ----

/// One buffer parameter of a launch and what it binds to.
#[derive(Clone, Debug)]
pub struct Buf {
    pub name: String,
    pub dtype: ScalarType,
    pub len: u64,
    pub access: Access,
    pub binding: Binding,
}

impl Buf {
    pub fn new(sig: &TensorSig, access: Access, binding: Binding) -> Buf {
        Buf {
            name: sig.name.clone(),
            dtype: sig.dtype,
            len: sig.numel() as u64,
            access,
            binding,
        }
    }

    /// Input `i` of `sigs` (an op's inputs), read-only.
    pub fn input(sigs: &[TensorSig], i: usize) -> Buf {
        Buf::new(&sigs[i], Access::Read, Binding::Input(i))
    }

    /// Output `i` of `sigs` (an op's outputs), write-only.
    pub fn output(sigs: &[TensorSig], i: usize) -> Buf {
        Buf::new(&sigs[i], Access::Write, Binding::Output(i))
    }

    /// The same binding, read-only (an earlier launch's output read by a later one).
    pub fn reading(mut self) -> Buf {
        self.access = Access::Read;
        self
    }
}

/// Declares `bufs` as the kernel's parameters, in order: a read-only buffer listed
/// again (same binding) is declared once, and an output updating an input in place
/// (same name) is declared as `name_out`. Returns one memory per entry of `bufs` and
/// the parameters declared (whose bindings the launch takes).
pub fn declare(k: &mut KernelBuilder, bufs: &[Buf]) -> (Vec<Mem>, Vec<Buf>) {
    let mut params: Vec<Buf> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut declared: Vec<Mem> = Vec::new();
    let mems = bufs
        .iter()
        .map(|b| {
            let again = params.iter().position(|p| {
                p.binding == b.binding && p.access == Access::Read && b.access == Access::Read
            });
            if let Some(i) = again {
                return declared[i];
            }
            let mut name = b.name.clone();
            while names.contains(&name) {
                name.push_str("_out");
            }
            names.push(name.clone());
            let mem = k.buffer(name, b.dtype, b.len, b.access);
            params.push(b.clone());
            declared.push(mem);
            mem
        })
        .collect();
    (mems, params)
}

/// Reduction launches on the one [`PlanBuilder`]: temporaries described as [`Buf`]s,
/// and launches whose buffer parameters are `Buf`s.
impl PlanBuilder {
    /// A new temporary of `len` elements, as a buffer parameter named `name`.
    pub fn temp_buf(&mut self, name: &str, dtype: ScalarType, len: u32, access: Access) -> Buf {
        let binding = self.temp(dtype, len as u64);
        Buf {
            name: name.to_string(),
            dtype,
            len: len as u64,
            access,
            binding,
        }
    }

    /// A launch whose parameters are `bufs`, then scalar parameters.
    pub fn push(
        &mut self,
        kernel: kernelc_ir::Kernel,
        grid: [u32; 3],
        bufs: &[Buf],
        uniforms: &[ScalarParam],
    ) {
        let scalars = uniforms.iter().map(|u| u.binding.clone());
        self.launches.push(Launch {
            kernel,
            grid,
            bindings: bufs
                .iter()
                .map(|b| b.binding.clone())
                .chain(scalars)
                .collect(),
        });
    }
}

/// How many parts to cut each slice of `view` into: enough to keep the device busy
/// when slices are few, never so many that a part stops paying for its partial state.
pub fn split_parts(view: &View, caps: &TargetCaps, elem_bytes: u32) -> Result<u32, LowerError> {
    let base = Schedule::new(view.clone(), caps, 1, elem_bytes)?;
    let (target, min_per) = if caps.is_serial() {
        (CPU_TARGET_INVOCATIONS, CPU_MIN_PER_INVOCATION)
    } else {
        (GPU_TARGET_INVOCATIONS, GPU_MIN_PER_INVOCATION)
    };
    let len = view.len() as u64;
    let work = view.slices() as u64 * len;
    let by_parallelism = target.min(work / min_per) / base.invocations().max(1);
    let by_work = len / (base.g as u64 * min_per);
    Ok(by_parallelism.min(by_work).clamp(1, u32::MAX as u64) as u32)
}

/// A pure reduction: fold each slice of `view` with `monoid` and hand the total to an
/// epilogue that writes the slice's results.
pub struct Fold<'a> {
    pub name: String,
    pub view: View,
    /// The widest type the items load (sizes vector loads).
    pub elem: ScalarType,
    pub monoid: &'a dyn Monoid,
    /// Buffers the items read (given to `prologue` and `item`).
    pub items: Vec<Buf>,
    /// Buffers the epilogue reads or writes.
    pub finals: Vec<Buf>,
    /// Scalar parameters the epilogue reads (per-call values, kept out of the
    /// kernel so that its cache key does not change).
    pub uniforms: Vec<ScalarParam>,
}

/// Declares `uniforms` as scalar parameters (after the buffers).
fn declare_uniforms(k: &mut KernelBuilder, uniforms: &[ScalarParam]) -> Vec<E> {
    uniforms.iter().map(|u| u.declare(k)).collect()
}

/// What an item closure sees: the items' buffers, the prologue's values (one lane
/// per slice of the group), and the step's first element `j` at `off`.
pub struct Item<'a> {
    pub mems: &'a [Mem],
    pub pre: &'a [E],
    pub off: E,
    pub j: E,
    /// Contiguous elements of one slice in the step.
    pub lanes: u8,
    /// Adjacent slices in the step, one per lane.
    pub slice_lanes: u8,
}

impl Item<'_> {
    /// The numeric context of the step: `ty` with its lanes.
    pub fn num(&self, ty: ScalarType) -> Num {
        Num {
            ty,
            lanes: self.lanes.max(self.slice_lanes),
        }
    }

    /// A per-slice value (a prologue value) made to match the step's values.
    pub fn splat(&self, e: E) -> E {
        if self.lanes == 1 {
            e
        } else {
            e.splat(self.lanes)
        }
    }

    /// Per-position values that are not contiguous: `value(f, position)` for each
    /// lane's element position, as the step's lanes.
    pub fn gather(&self, f: &mut Body, value: impl Fn(&mut Body, E) -> E) -> E {
        if self.slice_lanes > 1 {
            // Every lane is at position j (of its own slice).
            let v = value(f, self.j.clone());
            return v.splat(self.slice_lanes);
        }
        if self.lanes == 1 {
            return value(f, self.j.clone());
        }
        let lanes: Vec<E> = (0..self.lanes as u32)
            .map(|l| {
                let v = value(f, self.j.clone() + l);
                bind(f, "lane", v)
            })
            .collect();
        vector(lanes)
    }
}

/// Per-slice values computed before the fold (`prologue(f, items, slices)`, one lane
/// per slice of the group), the values of one step (`item(f, &Item)`), and the
/// leader's epilogue for one slice (`epilogue(f, finals, uniforms, q, total)`, scalars;
/// called once per slice of the group).
pub struct FoldFns<P, I, Ep> {
    pub prologue: P,
    pub item: I,
    pub epilogue: Ep,
}

/// Runs `epilogue` for each slice of `group` with that slice's lane of `total`.
fn per_slice<Ep>(f: &mut Body, group: &Group, total: &[E], epilogue: Ep)
where
    Ep: Fn(&mut Body, &E, &[E]),
{
    if group.slice_lanes == 1 {
        epilogue(f, &group.q, total);
        return;
    }
    for l in 0..group.slice_lanes {
        let q = f.let_("slice", group.q.clone() + l as u32);
        let lane: Vec<E> = total
            .iter()
            .map(|t| f.let_("total", t.clone().lane(l)))
            .collect();
        epilogue(f, &q, &lane);
    }
}

/// Lowers a [`Fold`]: one launch, or two when [`split_parts`] cuts the slices
/// (partial states in temporaries, then a column reduction of the partials that runs
/// the epilogue).
pub fn fold_plan<P, I, Ep>(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    fold: Fold,
    fns: FoldFns<P, I, Ep>,
) -> Result<(), LowerError>
where
    P: FnOnce(&mut Body, &[Mem], &Slices) -> Vec<E>,
    I: Fn(&mut Body, &Item) -> Vec<E>,
    Ep: Fn(&mut Body, &[Mem], &[E], &E, &[E]),
{
    let elem_bytes = fold.elem.size_bytes();
    let parts = split_parts(&fold.view, caps, elem_bytes)?;
    let types = fold.monoid.types();
    let n_items = fold.items.len();
    let sched = Schedule::new(fold.view.clone(), caps, parts, elem_bytes)?;
    let split = sched.parts > 1;
    let FoldFns {
        prologue,
        item,
        epilogue,
    } = fns;

    // Launch 1: fold each group's elements; finish, or leave partial states (slice q
    // of part k at k·slices + q).
    let partials: Vec<Buf> = if split {
        let len = sched.slices * sched.parts;
        types
            .iter()
            .enumerate()
            .map(|(c, &ty)| plan.temp_buf(&format!("partial{c}"), ty, len, Access::Write))
            .collect()
    } else {
        Vec::new()
    };
    let mut bufs = fold.items.clone();
    bufs.extend(if split {
        partials.iter().cloned()
    } else {
        fold.finals.iter().cloned()
    });
    let name = if split {
        format!("{}_partial", fold.name)
    } else {
        fold.name.clone()
    };
    let uniforms = if split {
        Vec::new()
    } else {
        fold.uniforms.clone()
    };
    let mut k = KernelBuilder::new(name.clone(), sched.workgroup_size());
    let (mems, params) = declare(&mut k, &bufs);
    let uni = declare_uniforms(&mut k, &uniforms);
    let tree = sched.tree(&mut k, &types, caps, &name)?;
    let kernel = k.build(|f| {
        sched.for_each_group(f, |f, g| {
            let items = &mems[..n_items];
            let pre = prologue(f, items, &g.slices());
            let acc = g.fold(f, fold.monoid, |f, j| {
                let off = bind(f, "off", g.offset(j));
                let step = Item {
                    mems: items,
                    pre: &pre,
                    off,
                    j: j.clone(),
                    lanes: g.lanes,
                    slice_lanes: g.slice_lanes,
                };
                item(f, &step)
            });
            let total = tree.reduce(f, g, fold.monoid, &acc, false);
            let outs = &mems[n_items..];
            f.if_(g.leader.clone(), |f| {
                if split {
                    let sl = g.slice_lanes as u32;
                    let at = if sl == 1 {
                        g.gamma.clone()
                    } else {
                        g.gamma.clone() * sl
                    };
                    for (m, v) in outs.iter().zip(&total) {
                        f.store(*m, at.clone(), v.clone());
                    }
                } else {
                    per_slice(f, g, &total, |f, q, t| epilogue(f, outs, &uni, q, t));
                }
            });
        });
    })?;
    plan.push(kernel, sched.grid, &params, &uniforms);
    if !split {
        return Ok(());
    }

    // Launch 2: the partials of slice q sit at k·slices + q: a column reduction.
    let (slices, parts) = (sched.slices, sched.parts);
    let view = View::strided(&[(slices, 1)], &[(parts, slices)]);
    let widest = types.iter().map(|t| t.size_bytes()).max().unwrap_or(4);
    let sched = Schedule::new(view, caps, 1, widest)?;
    let monoid = Partials(fold.monoid);
    let mut bufs: Vec<Buf> = partials.into_iter().map(Buf::reading).collect();
    let n_partials = bufs.len();
    bufs.extend(fold.finals.iter().cloned());
    let name = format!("{}_combine", fold.name);
    let mut k = KernelBuilder::new(name.clone(), sched.workgroup_size());
    let (mems, params) = declare(&mut k, &bufs);
    let uni = declare_uniforms(&mut k, &fold.uniforms);
    let tree = sched.tree(&mut k, &types, caps, &name)?;
    let kernel = k.build(|f| {
        sched.for_each_group(f, |f, g| {
            let (parts, outs) = mems.split_at(n_partials);
            let acc = g.fold(f, &monoid, |f, j| {
                let off = bind(f, "off", g.offset(j));
                parts
                    .iter()
                    .map(|m| m.load(off.clone(), g.step_lanes()))
                    .collect()
            });
            let total = tree.reduce(f, g, &monoid, &acc, false);
            f.if_(g.leader.clone(), |f| {
                per_slice(f, g, &total, |f, q, t| epilogue(f, outs, &uni, q, t));
            });
        });
    })?;
    plan.push(kernel, sched.grid, &params, &fold.uniforms);
    Ok(())
}

/// One launch of a row op (softmax, norms, ...): each group folds its slice, combines
/// with `tree` (states of `types`), and makes a second pass over the slice with the
/// totals; `body(f, mems, params, group, tree)` writes that, with `bufs` declared in
/// order, then the scalar parameters `params`.
/// Vector steps are sized for the widest buffer. Unless the view has
/// [`View::whole_slices`], a group may take adjacent slices as the lanes of its
/// values: the body then treats totals as one lane per slice ([`Group::stat_num`]).
pub fn row_kernel(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    name: &str,
    view: View,
    types: &[ScalarType],
    bufs: &[Buf],
    scalars: &[ScalarParam],
    body: impl FnOnce(&mut Body, &[Mem], &[E], &Group, &Tree),
) -> Result<(), LowerError> {
    let widest = bufs.iter().map(|b| b.dtype.size_bytes()).max().unwrap_or(4);
    let sched = Schedule::new(view, caps, 1, widest)?;
    let mut k = KernelBuilder::new(name, sched.workgroup_size());
    let (mems, params) = declare(&mut k, bufs);
    let uni = declare_uniforms(&mut k, scalars);
    let tree = sched.tree(&mut k, types, caps, name)?;
    let kernel = k.build(|f| sched.for_each_group(f, |f, g| body(f, &mems, &uni, g, &tree)))?;
    plan.push(kernel, sched.grid, &params, scalars);
    Ok(())
}

/// The most negative finite value of a float type, as a literal of `num`'s lanes:
/// `x < −MAX` tests for `−∞` without an infinite literal.
pub fn lowest_finite(num: &Num) -> E {
    let v = match num.ty {
        ScalarType::F64 => -f64::MAX,
        _ => -(f32::MAX as f64),
    };
    num.lit(v)
}
