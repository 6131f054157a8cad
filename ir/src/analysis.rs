//! Value ranges of integer index expressions.
//!
//! [`Ranges::of`] computes, once per kernel, a conservative [`Interval`] for every
//! immutable `u32`/`i32` local, and [`Ranges::range`] extends that to any expression:
//! every value the expression can take at run time lies in the interval and is a
//! multiple of its `align`. Backends use it to drop bounds and alignment checks that
//! can never fail.
//!
//! Soundness is the point; precision is secondary. Anything the analysis cannot bound
//! (loads, parameters, workgroup and global ids, mutable locals, values that may wrap,
//! negative `i32` values, floats, vectors) is `None`.
//!
//! Facts used:
//! * literals (non-negative `i32` literals too);
//! * `local_id(axis)` lies in `0..workgroup_size[axis]`; with a grid limit
//!   ([`Ranges::within_grid`]) `workgroup_id(axis)` lies below it, `global_id(axis)`
//!   below it times the workgroup size and `num_workgroups(axis)` in `1..=` it;
//! * a loop counter lies in `[min start, max end - 1]`, a multiple of
//!   `gcd(align(start), step)`: counters run in 64 bits and a loop ends instead of
//!   wrapping (interpreter and backends agree), so no value is at or past `end`;
//! * an immutable local lies in the hull of all its definitions (every `Let`, and
//!   every loop whose counter it is). This holds for validated kernels, where a local
//!   is read only after one of its definitions ran. Definitions are evaluated in
//!   dependency order; a local whose definitions depend on it (directly or through
//!   other locals) is unknown;
//! * `+ - * / % << >> & | ^`, `min`, `max` (a `u32` sum that wraps exactly once
//!   for every operand value, as `x + 0xFFFF_FFFF` for `x >= 1` does, is known too), (`x % b`, `x & b`, `x >> b` and
//!   `min(x, b)` also for an unknown `u32` `x`), `abs`, `select` (hull of the arms) and
//!   casts/bitcasts between `u32` and `i32`, each `None` as soon as the result could
//!   wrap (pass the type's maximum, or go below zero) or divide by zero, or shift by
//!   the bit width or more.
//!
//! `i32` values are tracked only while provably non-negative, so both types share one
//! unsigned representation.

use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use std::collections::VecDeque;

/// The `align` of the interval `{0}`: zero is a multiple of everything, and every
/// `u32`-range value that is a multiple of 2^32 is zero.
pub const ZERO_ALIGN: u64 = 1 << 32;

/// A set of non-negative integers: `lo..=hi`, all multiples of `align`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    /// Smallest possible value (a multiple of `align`, unless the interval is `{0}`).
    pub lo: u64,
    /// Largest possible value, inclusive.
    pub hi: u64,
    /// Every value is a multiple of `align` (at least 1).
    pub align: u64,
}

impl Interval {
    /// `{v}`.
    pub fn constant(v: u64) -> Interval {
        Interval {
            lo: v,
            hi: v,
            align: if v == 0 { ZERO_ALIGN } else { v },
        }
    }

    /// `lo..=hi` with multiples of `align`, tightened (bounds rounded inwards to
    /// multiples of `align`); `None` when no value is left.
    pub fn new(lo: u64, hi: u64, align: u64) -> Option<Interval> {
        let align = align.max(1);
        let lo = lo.checked_next_multiple_of(align)?;
        let hi = hi - hi % align;
        if lo > hi {
            return None;
        }
        if lo == hi {
            return Some(Interval::constant(lo));
        }
        Some(Interval { lo, hi, align })
    }

    /// Whether `v` is one of the interval's values (`lo <= v <= hi`, a multiple of
    /// `align`).
    pub fn contains(&self, v: u64) -> bool {
        self.lo <= v && v <= self.hi && v % self.align.max(1) == 0
    }

    /// Whether the interval is exactly `{0}`.
    pub fn is_zero(&self) -> bool {
        self.hi == 0
    }

    /// The smallest interval holding both.
    pub fn hull(self, other: Interval) -> Interval {
        Interval {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
            align: join_align(self, other),
        }
    }
}

/// An align that divides every value of both intervals.
fn join_align(a: Interval, b: Interval) -> u64 {
    if a.is_zero() {
        b.align
    } else if b.is_zero() {
        a.align
    } else {
        gcd(a.align, b.align)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// `2^(trailing zeros of align)`: a power of two dividing every value.
fn pow2_part(align: u64) -> u64 {
    1u64 << align.max(1).trailing_zeros().min(32)
}

/// The integer types tracked (i32 only while non-negative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    U32,
    I32,
}

impl Kind {
    fn of(ty: ScalarType) -> Option<Kind> {
        match ty {
            ScalarType::U32 => Some(Kind::U32),
            ScalarType::I32 => Some(Kind::I32),
            _ => None,
        }
    }

    fn of_type(ty: Type) -> Option<Kind> {
        if ty.lanes == 1 {
            Kind::of(ty.scalar)
        } else {
            None
        }
    }

    /// Largest value tracked: results above it may have wrapped.
    fn max(self) -> u64 {
        match self {
            Kind::U32 => u32::MAX as u64,
            Kind::I32 => i32::MAX as u64,
        }
    }
}

/// A range with the type it was computed in.
type Ranged = (Kind, Interval);

/// `lo..=hi` (multiples of `align`) in `kind`, or `None` if `hi` may have wrapped.
fn fit(kind: Kind, lo: u64, hi: u64, align: u64) -> Option<Ranged> {
    if hi > kind.max() {
        return None;
    }
    Interval::new(lo, hi, align).map(|i| (kind, i))
}

/// One definition of a local.
enum Def<'k> {
    Let(&'k Expr),
    Loop {
        start: &'k Expr,
        end: &'k Expr,
        step: u32,
    },
}

/// The largest power of two dividing the u32 bit pattern `v` ([`ZERO_ALIGN`] for 0).
fn pow2_factor(v: u64) -> u64 {
    if v == 0 {
        ZERO_ALIGN
    } else {
        pow2_part(v)
    }
}

/// The checks of one memory access that cannot fail (see [`Ranges::access`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessProof {
    /// `index + lanes <= len` for every possible index.
    pub in_bounds: bool,
    /// Every possible index is a multiple of `lanes` (always so for scalars).
    pub aligned: bool,
}

impl AccessProof {
    /// Whether no check is needed at all.
    pub fn all(self) -> bool {
        self.in_bounds && self.aligned
    }
}

/// The value ranges of a kernel's integer locals; see the module documentation.
#[derive(Clone, Debug)]
pub struct Ranges {
    workgroup_size: [u32; 3],
    /// Most workgroups per grid axis, when the caller knows it.
    grid: Option<[u32; 3]>,
    /// Per local: its type and range, `None` when unknown.
    locals: Vec<Option<Ranged>>,
    /// Per local: its tracked type, if `u32` or `i32`.
    local_kinds: Vec<Option<Kind>>,
    /// Per parameter: its tracked type, if a `u32` or `i32` scalar.
    param_kinds: Vec<Option<Kind>>,
    /// Per local: a power of two its value is always a multiple of (1 when unknown).
    /// Tracked apart from the ranges: `i * 4` is a multiple of 4 even when `i` has no
    /// known range, and stays one when u32 arithmetic wraps (2³² is a multiple).
    local_align: Vec<u64>,
}

impl Ranges {
    /// Analyses `kernel` (meant for validated kernels; on others it never panics, but
    /// the ranges of locals read before any definition are meaningless).
    pub fn of(kernel: &Kernel) -> Ranges {
        Ranges::analyse(kernel, None)
    }

    /// As [`Ranges::of`], for a kernel launched with at most `max_workgroups` workgroups
    /// along each axis (a device limit), which bounds the workgroup and global ids.
    pub fn within_grid(kernel: &Kernel, max_workgroups: [u32; 3]) -> Ranges {
        Ranges::analyse(kernel, Some(max_workgroups))
    }

    fn analyse(kernel: &Kernel, grid: Option<[u32; 3]>) -> Ranges {
        let n = kernel.locals.len();
        let mut ranges = Ranges {
            workgroup_size: kernel.workgroup_size,
            grid,
            locals: vec![None; n],
            local_kinds: kernel.locals.iter().map(|l| Kind::of_type(l.ty)).collect(),
            param_kinds: kernel
                .params
                .iter()
                .map(|p| match p {
                    Param::Scalar { ty, .. } => Kind::of(*ty),
                    Param::Buffer { .. } => None,
                })
                .collect(),
            local_align: vec![1; n],
        };
        let mut defs: Vec<Vec<Def<'_>>> = (0..n).map(|_| Vec::new()).collect();
        // A local with a write we cannot describe (an `Assign`, an unknown id).
        let mut opaque = vec![false; n];
        collect_defs(&kernel.body, &mut defs, &mut opaque);

        let candidate: Vec<bool> = (0..n)
            .map(|i| {
                let decl = &kernel.locals[i];
                !decl.mutable
                    && !opaque[i]
                    && !defs[i].is_empty()
                    && Kind::of_type(decl.ty).is_some()
            })
            .collect();

        // Dependencies between candidates: `deps[i]` are the candidates that
        // definitions of `i` read; `users[j]` the candidates reading `j`.
        let mut pending = vec![0usize; n];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        for i in 0..n {
            if !candidate[i] {
                continue;
            }
            let mut read = Vec::new();
            for d in &defs[i] {
                match d {
                    Def::Let(e) => locals_read(e, &mut read),
                    Def::Loop { start, end, .. } => {
                        locals_read(start, &mut read);
                        locals_read(end, &mut read);
                    }
                }
            }
            read.sort_unstable();
            read.dedup();
            for j in read {
                if candidate.get(j).copied().unwrap_or(false) {
                    pending[i] += 1;
                    users[j].push(i);
                }
            }
        }
        // Kahn's order: a local is evaluated once everything it reads is; locals on
        // (or behind) a dependency cycle are never reached and stay unknown.
        let mut ready: VecDeque<usize> = (0..n)
            .filter(|&i| candidate[i] && pending[i] == 0)
            .collect();
        while let Some(i) = ready.pop_front() {
            let kind = Kind::of_type(kernel.locals[i].ty);
            let mut acc: Option<Interval> = None;
            let mut known = kind.is_some();
            for d in &defs[i] {
                let r = match d {
                    Def::Let(e) => ranges.eval(e).filter(|(k, _)| Some(*k) == kind),
                    Def::Loop { start, end, step } => ranges.counter(kind, start, end, *step),
                };
                match r {
                    Some((_, r)) => acc = Some(acc.map_or(r, |a| a.hull(r))),
                    None => {
                        known = false;
                        break;
                    }
                }
            }
            if known {
                ranges.locals[i] = kind.zip(acc);
            }
            ranges.local_align[i] = defs[i]
                .iter()
                .map(|d| match d {
                    Def::Let(e) => ranges.alignment(e),
                    Def::Loop { start, step, .. } => {
                        ranges.alignment(start).min(pow2_factor(*step as u64))
                    }
                })
                .min()
                .unwrap_or(1);
            for &u in &users[i] {
                pending[u] -= 1;
                if pending[u] == 0 {
                    ready.push_back(u);
                }
            }
        }
        ranges
    }

    /// A conservative range of `e`'s values, if `e` is a `u32` or non-negative `i32`
    /// scalar the analysis can bound.
    pub fn range(&self, e: &Expr) -> Option<Interval> {
        self.eval(e).map(|(_, i)| i)
    }

    /// Which run-time checks of a `lanes`-wide access at `index` into a memory of `len`
    /// elements cannot fail, so an emitter may leave them out.
    pub fn access(&self, index: &Expr, lanes: u8, len: u64) -> AccessProof {
        let lanes = lanes as u64;
        AccessProof {
            in_bounds: self
                .range(index)
                .is_some_and(|r| r.hi.checked_add(lanes).is_some_and(|end| end <= len)),
            aligned: lanes <= 1 || self.alignment(index) % lanes == 0,
        }
    }

    /// A power of two the value of the u32/i32 expression `e` is always a multiple of
    /// (as a bit pattern), whether or not its range is known; 1 when nothing is known.
    pub fn alignment(&self, e: &Expr) -> u64 {
        // Only the power-of-two part: `min` below is a common divisor only of powers of
        // two (a range's `align` may be 6, and `min(4, 6)` does not divide 6).
        let from_range = self.range(e).map_or(1, |r| pow2_part(r.align));
        let structural = match e {
            Expr::Lit(Scalar::U32(v)) => pow2_factor(*v as u64),
            Expr::Lit(Scalar::I32(v)) => pow2_factor(*v as u32 as u64),
            Expr::Local(id) => self.local_align.get(id.0 as usize).copied().unwrap_or(1),
            Expr::Binary { op, lhs, rhs } => match op {
                BinaryOp::Add | BinaryOp::Sub => self.alignment(lhs).min(self.alignment(rhs)),
                BinaryOp::Mul => self
                    .alignment(lhs)
                    .saturating_mul(self.alignment(rhs))
                    .min(ZERO_ALIGN),
                BinaryOp::Shl => match rhs.as_lit() {
                    Some(Scalar::U32(k)) if k < 32 => (self.alignment(lhs) << k).min(ZERO_ALIGN),
                    _ => 1,
                },
                _ => 1,
            },
            Expr::Select {
                on_true, on_false, ..
            } => self.alignment(on_true).min(self.alignment(on_false)),
            Expr::Math {
                func: MathFn::Min | MathFn::Max,
                args,
            } => args.iter().map(|a| self.alignment(a)).min().unwrap_or(1),
            _ => 1,
        };
        structural.max(from_range)
    }

    /// The range of a local (immutable `u32`/`i32` locals only).
    pub fn local(&self, id: LocalId) -> Option<Interval> {
        self.locals
            .get(id.0 as usize)
            .copied()
            .flatten()
            .map(|(_, i)| i)
    }

    /// The values a loop counter of `kind` takes in `start..end` by `step`.
    fn counter(&self, kind: Option<Kind>, start: &Expr, end: &Expr, step: u32) -> Option<Ranged> {
        let kind = kind?;
        let (ek, e) = self.eval(end)?;
        // A u32 counter runs `start <= i < end`: with `start` unknown (a workgroup's
        // first item, the grid not known), it is still in `0..end`.
        let (sk, s) = match self.eval(start) {
            Some(known) => known,
            None if kind == Kind::U32 && e.hi > 0 => (Kind::U32, Interval::new(0, e.hi - 1, 1)?),
            None => return None,
        };
        if sk != kind || ek != kind || step == 0 || e.hi == 0 {
            return None;
        }
        let align = if s.is_zero() {
            step as u64
        } else {
            gcd(s.align, step as u64)
        };
        fit(kind, s.lo, e.hi - 1, align)
    }

    fn eval(&self, e: &Expr) -> Option<Ranged> {
        match e {
            Expr::Lit(Scalar::U32(v)) => Some((Kind::U32, Interval::constant(*v as u64))),
            Expr::Lit(Scalar::I32(v)) if *v >= 0 => {
                Some((Kind::I32, Interval::constant(*v as u64)))
            }
            Expr::Local(id) => self.locals.get(id.0 as usize).copied().flatten(),
            Expr::Builtin { builtin, axis } => {
                let size = u64::from(*self.workgroup_size.get(*axis as usize)?);
                let groups = self.grid.and_then(|g| g.get(*axis as usize).copied());
                let (lo, hi) = match (builtin, groups.map(u64::from)) {
                    (Builtin::LocalId, _) => (0, size.checked_sub(1)?),
                    (Builtin::WorkgroupId, Some(g)) => (0, g.checked_sub(1)?),
                    (Builtin::GlobalId, Some(g)) => (0, (g * size).checked_sub(1)?),
                    (Builtin::NumWorkgroups, Some(g)) => (1, g),
                    (Builtin::WorkgroupId | Builtin::GlobalId | Builtin::NumWorkgroups, None) => {
                        return None
                    }
                };
                fit(Kind::U32, lo, hi, 1)
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
            Expr::Math { func, args } => match (func, args.as_slice()) {
                (MathFn::Abs, [a]) => self.eval(a),
                (MathFn::Min | MathFn::Max, [a, b]) => {
                    let (a, b) = match (self.eval(a), self.eval(b)) {
                        (Some(a), Some(b)) => (a, b),
                        // An unknown u32 clamped from above: `min(x, b) <= b`.
                        (None, Some((Kind::U32, b))) | (Some((Kind::U32, b)), None)
                            if *func == MathFn::Min =>
                        {
                            return fit(Kind::U32, 0, b.hi, 1);
                        }
                        _ => return None,
                    };
                    let ((ka, a), (kb, b)) = (a, b);
                    if ka != kb {
                        return None;
                    }
                    let (lo, hi) = if *func == MathFn::Min {
                        (a.lo.min(b.lo), a.hi.min(b.hi))
                    } else {
                        (a.lo.max(b.lo), a.hi.max(b.hi))
                    };
                    fit(ka, lo, hi, join_align(a, b))
                }
                _ => None,
            },
            Expr::Select {
                on_true, on_false, ..
            } => {
                let (kt, t) = self.eval(on_true)?;
                let (kf, f) = self.eval(on_false)?;
                if kt != kf {
                    return None;
                }
                Some((kt, t.hull(f)))
            }
            Expr::Cast { to, arg } | Expr::Bitcast { to, arg } => {
                let to = Kind::of(*to)?;
                let (_, a) = self.eval(arg)?;
                // Non-negative values at most the target's maximum convert unchanged.
                fit(to, a.lo, a.hi, a.align)
            }
            _ => None,
        }
    }

    /// The tracked type of a scalar expression when it is cheap to see (for the left
    /// side of a shift whose range is unknown); `None` when unsure.
    fn kind_hint(&self, e: &Expr) -> Option<Kind> {
        match e {
            Expr::Lit(s) => Kind::of(s.ty()),
            Expr::Builtin { .. } => Some(Kind::U32),
            Expr::Local(id) => self.local_kinds.get(id.0 as usize).copied().flatten(),
            Expr::Param(p) => self.param_kinds.get(p.0 as usize).copied().flatten(),
            Expr::Cast { to, .. } | Expr::Bitcast { to, .. } => Kind::of(*to),
            Expr::Binary { lhs, .. } | Expr::Unary { arg: lhs, .. } => self.kind_hint(lhs),
            _ => None,
        }
    }

    fn binary(&self, op: BinaryOp, lhs: &Expr, rhs: &Expr) -> Option<Ranged> {
        let l = self.eval(lhs);
        let r = self.eval(rhs);
        // Operators that bound their result with one side unknown (u32 only: an
        // unknown i32 may be negative).
        match (op, l, r) {
            (BinaryOp::Rem, None, Some((Kind::U32, b))) if b.lo >= 1 => {
                return fit(Kind::U32, 0, b.hi - 1, 1);
            }
            (BinaryOp::And, None, Some((k, b))) | (BinaryOp::And, Some((k, b)), None) => {
                // `x & m` with `m >= 0` lies in `0..=m` whatever `x` is (an i32 `m` is
                // non-negative here, so its sign bit clears the result's).
                return fit(k, 0, b.hi, pow2_part(b.align));
            }
            (BinaryOp::Shr, None, Some((_, b))) if b.hi < 32 => {
                if self.kind_hint(lhs)? != Kind::U32 {
                    return None;
                }
                return fit(Kind::U32, 0, Kind::U32.max() >> b.lo, 1);
            }
            _ => {}
        }
        let (ka, a) = l?;
        let (kb, b) = r?;
        let shift = matches!(op, BinaryOp::Shl | BinaryOp::Shr);
        if shift {
            if kb != Kind::U32 || b.hi >= 32 {
                return None;
            }
        } else if ka != kb {
            return None;
        }
        let k = ka;
        match op {
            BinaryOp::Add => {
                if a.is_zero() {
                    return Some((k, b));
                }
                if b.is_zero() {
                    return Some((k, a));
                }
                let wrap = 1u64 << 32;
                if k == Kind::U32 && a.lo + b.lo >= wrap && a.hi + b.hi < 2 * wrap {
                    // Every sum wraps exactly once (`x + 0xFFFF_FFFF` is `x − 1` for
                    // `x >= 1`): the result is the sum less 2³², whose multiples of
                    // a power of two stay multiples of it.
                    let align = pow2_part(gcd(a.align, b.align));
                    return fit(k, a.lo + b.lo - wrap, a.hi + b.hi - wrap, align);
                }
                fit(k, a.lo + b.lo, a.hi + b.hi, gcd(a.align, b.align))
            }
            BinaryOp::Sub => {
                if b.is_zero() {
                    return Some((k, a));
                }
                // `a - b` never goes below zero only if `a.lo >= b.hi`.
                let lo = a.lo.checked_sub(b.hi)?;
                fit(k, lo, a.hi - b.lo, join_align(a, b))
            }
            BinaryOp::Mul => {
                if a.is_zero() || b.is_zero() {
                    return Some((k, Interval::constant(0)));
                }
                let hi = a.hi.checked_mul(b.hi)?;
                // Non-zero intervals have `align <= hi`, so this cannot overflow
                // where `hi` did not; stay careful anyway.
                let align = a.align.checked_mul(b.align).unwrap_or(1);
                fit(k, a.lo * b.lo, hi, align)
            }
            BinaryOp::Div => {
                if b.lo == 0 {
                    return None;
                }
                let align = if b.lo == b.hi && a.align % b.lo == 0 && !a.is_zero() {
                    a.align / b.lo
                } else {
                    1
                };
                if a.is_zero() {
                    return Some((k, a));
                }
                fit(k, a.lo / b.hi, a.hi / b.lo, align)
            }
            BinaryOp::Rem => {
                if b.lo == 0 {
                    return None;
                }
                if a.hi < b.lo {
                    return Some((k, a));
                }
                // `a - q*b`: a multiple of whatever divides both.
                fit(k, 0, a.hi.min(b.hi - 1), join_align(a, b))
            }
            BinaryOp::Shl => {
                if a.is_zero() {
                    return Some((k, a));
                }
                // `a.hi < 2^32` and `b.hi < 32`: no u64 overflow.
                let hi = a.hi << b.hi;
                let align = a.align.checked_shl(b.lo as u32).unwrap_or(1);
                fit(k, a.lo << b.lo, hi, align)
            }
            BinaryOp::Shr => {
                let align = if b.lo == b.hi && !a.is_zero() && a.align % (1u64 << b.lo) == 0 {
                    a.align >> b.lo
                } else {
                    1
                };
                if a.is_zero() {
                    return Some((k, a));
                }
                fit(k, a.lo >> b.hi, a.hi >> b.lo, align)
            }
            BinaryOp::And => fit(
                k,
                0,
                a.hi.min(b.hi),
                pow2_part(a.align).max(pow2_part(b.align)),
            ),
            BinaryOp::Or | BinaryOp::Xor => {
                // Both below the next power of two, so is the result.
                let m = a.hi.max(b.hi);
                let bits = 64 - m.leading_zeros();
                let hi = (1u64 << bits.min(63)) - 1;
                let lo = if op == BinaryOp::Or {
                    a.lo.max(b.lo)
                } else {
                    0
                };
                fit(k, lo, hi, pow2_part(a.align).min(pow2_part(b.align)))
            }
        }
    }
}

fn collect_defs<'k>(block: &'k [Stmt], defs: &mut [Vec<Def<'k>>], opaque: &mut [bool]) {
    for s in block {
        match s {
            Stmt::Let { local, value } => {
                if let Some(d) = defs.get_mut(local.0 as usize) {
                    d.push(Def::Let(value));
                }
            }
            Stmt::Assign { local, .. } => {
                if let Some(o) = opaque.get_mut(local.0 as usize) {
                    *o = true;
                }
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_defs(then_body, defs, opaque);
                collect_defs(else_body, defs, opaque);
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                if let Some(d) = defs.get_mut(var.0 as usize) {
                    d.push(Def::Loop {
                        start,
                        end,
                        step: *step,
                    });
                }
                collect_defs(body, defs, opaque);
            }
            Stmt::Fragment(crate::FragmentOp::Map(m)) => {
                // Bound per element: no range known.
                let bound = [m.row, m.col]
                    .into_iter()
                    .chain(m.args.iter().map(|a| a.local));
                for local in bound {
                    if let Some(o) = opaque.get_mut(local.0 as usize) {
                        *o = true;
                    }
                }
                collect_defs(&m.body, defs, opaque);
            }
            Stmt::Store { .. }
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::Fragment(_)
            | Stmt::AsyncCopy(_) => {}
        }
    }
}

fn locals_read(e: &Expr, out: &mut Vec<usize>) {
    if let Expr::Local(id) = e {
        out.push(id.0 as usize);
    }
    for c in e.children() {
        locals_read(c, out);
    }
}

/// For each parameter, the vector width `L` (2 or 4) at which a target may view the
/// buffer as an array of `L`-lane vectors instead of scalars: every load and store of
/// it is `L` lanes wide, its index is proven a multiple of `L`, its length is a
/// multiple of `L`, and its elements are 32-bit numbers (f32, i32, u32). `None` for
/// scalar parameters and for buffers accessed any other way. Shader targets use it to
/// turn four scalar accesses into one vector access (WGSL and SPIR-V index a storage
/// buffer only by whole elements of its declared type).
pub fn uniform_vector_widths(kernel: &Kernel, ranges: &Ranges) -> Vec<Option<u8>> {
    let mut widths: Vec<Width> = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Buffer {
                elem: ScalarType::F32 | ScalarType::I32 | ScalarType::U32,
                len,
                ..
            } => Width::Unseen { len: *len },
            _ => Width::No,
        })
        .collect();
    visit_accesses(kernel, &kernel.body, &mut |mem, index, lanes| {
        if let Memory::Buffer(p) = mem {
            if let Some(w) = widths.get_mut(p.0 as usize) {
                w.see(index, lanes, ranges);
            }
        }
    });
    widths.into_iter().map(Width::result).collect()
}

/// What the accesses of one buffer allow so far.
#[derive(Clone, Copy)]
enum Width {
    Unseen { len: u64 },
    Lanes(u8),
    No,
}

impl Width {
    fn see(&mut self, index: &Expr, lanes: u8, ranges: &Ranges) {
        // `lanes > 1` first: an untypable store is seen with 0 lanes.
        let aligned = || lanes > 1 && ranges.alignment(index) % u64::from(lanes) == 0;
        *self = match *self {
            Width::Unseen { len } if aligned() && len % u64::from(lanes) == 0 => {
                Width::Lanes(lanes)
            }
            Width::Lanes(l) if l == lanes && aligned() => Width::Lanes(l),
            _ => Width::No,
        };
    }

    fn result(self) -> Option<u8> {
        match self {
            Width::Lanes(l) => Some(l),
            // A buffer never accessed gains nothing from a vector view.
            Width::Unseen { .. } | Width::No => None,
        }
    }
}

/// Calls `f(memory, index, lanes)` for every load and store in `block`.
fn visit_accesses(kernel: &Kernel, block: &[Stmt], f: &mut impl FnMut(Memory, &Expr, u8)) {
    fn expr(e: &Expr, f: &mut impl FnMut(Memory, &Expr, u8)) {
        if let Expr::Load { mem, index, lanes } = e {
            f(*mem, index, *lanes);
        }
        for c in e.children() {
            expr(c, f);
        }
    }
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr(value, f),
            Stmt::Store { mem, index, value } => {
                // An untypable value (invalid IR) counts as a width no view has.
                let lanes = crate::passes::expr_type(kernel, value).map_or(0, |t| t.lanes);
                f(*mem, index, lanes);
                expr(index, f);
                expr(value, f);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                expr(cond, f);
                visit_accesses(kernel, then_body, f);
                visit_accesses(kernel, else_body, f);
            }
            Stmt::For {
                start, end, body, ..
            } => {
                expr(start, f);
                expr(end, f);
                visit_accesses(kernel, body, f);
            }
            Stmt::Fragment(op) => {
                // Element by element: no vector view of the memory covers it.
                if let Some(mem) = op.memory() {
                    for (_, e) in op.exprs() {
                        f(mem, e, 1);
                    }
                }
                for (_, e) in op.exprs() {
                    expr(e, f);
                }
                if let Some(body) = op.body() {
                    visit_accesses(kernel, body, f);
                }
            }
            Stmt::AsyncCopy(op) => {
                // Element by element, as a fragment's: targets with vector views of
                // buffers expand copies first.
                if let crate::AsyncCopyOp::Start(c) = op {
                    let (dst, src) = c.memories();
                    f(dst, &c.dst_index, 1);
                    f(src, &c.src_index, 1);
                }
                for (_, e) in op.exprs() {
                    expr(e, f);
                }
            }
            Stmt::Return | Stmt::Barrier => {}
        }
    }
}

#[cfg(test)]
mod vector_width_tests {
    use super::*;
    use crate::builder::*;
    use crate::types::ScalarType::{F32, F64};

    fn widths(build: impl FnOnce(KernelBuilder) -> Kernel) -> Vec<Option<u8>> {
        let kernel = build(KernelBuilder::new("k", [64, 1, 1]));
        uniform_vector_widths(&kernel, &Ranges::of(&kernel))
    }

    #[test]
    fn aligned_vec4_accesses_allow_a_vector_view_and_mixed_ones_do_not() {
        let w = widths(|mut k| {
            let a = k.buffer("a", F32, 256, Access::Read);
            let b = k.buffer("b", F32, 256, Access::Read);
            let out = k.buffer("out", F32, 256, Access::Write);
            let d = k.buffer("d", F64, 256, Access::Read);
            let s = k.scalar("s", F32);
            k.build(|f| {
                let i = f.let_("i", local_id(0) * 4u32);
                // `b` is read both as a vector and as a scalar: no view.
                let v = a.load(i.clone(), 4)
                    + b.load(i.clone(), 4)
                    + (b.at(i.clone()) + s.clone()).splat(4)
                    + d.at(i.clone()).cast(F32).splat(4);
                f.store(out, i.clone(), v);
            })
            .unwrap()
        });
        assert_eq!(w, vec![Some(4), None, Some(4), None, None]);
    }

    #[test]
    fn alignment_survives_an_unknown_range() {
        // A grid-stride index: `i` starts at `workgroup_id * 256 + local_id` (no known
        // range), yet `i * 4` is always a multiple of 4.
        let w = widths(|mut k| {
            let a = k.buffer("a", F32, 1 << 20, Access::Read);
            let out = k.buffer("out", F32, 1 << 20, Access::Write);
            k.build(|f| {
                let base = f.let_("base", workgroup_id(0) * 256u32);
                f.for_("i", base + local_id(0), 1u32 << 18, 256, |f, i| {
                    let index = f.let_("index", i * 4u32);
                    f.store(out, index.clone(), a.load(index, 4));
                });
            })
            .unwrap()
        });
        assert_eq!(w, vec![Some(4), Some(4)]);
    }

    #[test]
    fn a_u32_counter_with_an_unknown_start_stays_below_its_end() {
        // A CPU schedule's chunk: `i` from `workgroup_id * 4096` (the grid unknown) to
        // `min(base + 4096, 250)`: `i * 4` reads 4 lanes in bounds of 1000, aligned.
        let mut k = KernelBuilder::new("k", [1, 1, 1]);
        let a = k.buffer("a", F32, 1000, Access::Read);
        let out = k.buffer("out", F32, 1000, Access::Write);
        let kernel = k
            .build(|f| {
                let base = f.let_("base", workgroup_id(0) * 4096u32);
                let end = f.let_("end", (base.clone() + 4096u32).min(250u32));
                f.for_("i", base, end, 1, |f, i| {
                    let index = f.let_("index", i * 4u32);
                    f.store(out, index.clone(), a.load(index, 4));
                });
            })
            .unwrap();
        let ranges = Ranges::of(&kernel);
        let index = Expr::Local(LocalId(3));
        assert_eq!(kernel.locals[3].name, "index");
        let proof = ranges.access(&index, 4, 1000);
        assert!(proof.in_bounds && proof.aligned, "{proof:?}");
        // One more lane than fits: not proven.
        assert!(!ranges.access(&index, 4, 999).in_bounds);
    }
}
