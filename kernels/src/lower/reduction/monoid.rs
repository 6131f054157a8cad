//! Monoids: what a reduction folds (sums, extrema, arg-extrema, online softmax
//! statistics, Welford), and the partial states of a split reduction.

use crate::lower::math::{bind, Num};
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// A literal of `ty`, splat across `lanes`.
fn konst(ty: ScalarType, v: f64, lanes: u8) -> E {
    Num { ty, lanes }.lit(v)
}

/// What a reduction folds: a tuple of typed values with an associative combine.
///
/// Every method works on scalars (`lanes = 1`) or lane-wise on vectors of `lanes`
/// (an invocation folding 2 or 4 contiguous elements per step keeps one state per
/// lane; [`Group::fold`](super::Group::fold) combines the lanes before the tree).
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
    /// Whether a NaN wins (NaN-propagating `max_nan`), or is ignored (maxNum).
    pub nan_wins: bool,
}

impl Extremum {
    /// IEEE maxNum / minNum: a NaN is ignored unless every item is NaN.
    pub fn ignoring_nan(ty: ScalarType, max: bool) -> Extremum {
        Extremum {
            ty,
            max,
            nan_wins: false,
        }
    }

    /// NaN if any item is NaN (NumPy's `max`, ONNX's `ReduceMax`).
    pub fn propagating_nan(ty: ScalarType, max: bool) -> Extremum {
        Extremum {
            ty,
            max,
            nan_wins: ty.is_float(),
        }
    }
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
        let best = if self.max {
            a.clone().max(b.clone())
        } else {
            a.clone().min(b.clone())
        };
        if !self.nan_wins {
            return vec![best];
        }
        // A NaN operand is the result (`x ≠ x` only for NaN).
        let nan_a = a.clone().ne(a.clone());
        let nan_b = b.clone().ne(b.clone());
        vec![nan_a.select(a, nan_b.select(b, best))]
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

/// Log-sum-exp statistics `(m, s)`: the running maximum and `Σ e^{x − m}` (online
/// softmax, cross-entropy).
///
/// Combining rescales the smaller side by `e^{−|m₁ − m₂|}`; two `−∞` maxima add
/// without rescaling, so a fully masked slice never computes `−∞ − (−∞)`. A `+∞`
/// element makes the sum NaN, as `e^{∞−∞}` does in the reference. One `exp` per
/// element.
pub struct LogSumExp {
    pub ty: ScalarType,
}

impl Monoid for LogSumExp {
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

impl LogSumExp {
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
pub(super) struct Partials<'a>(pub(super) &'a dyn Monoid);

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

/// The most negative finite value of a float type, as a literal of `num`'s lanes:
/// `x < −MAX` tests for `−∞` without an infinite literal.
pub fn lowest_finite(num: &Num) -> E {
    let v = match num.ty {
        ScalarType::F64 => -f64::MAX,
        _ => -(f32::MAX as f64),
    };
    num.lit(v)
}
