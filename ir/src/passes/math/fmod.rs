//! Float `%` (C `fmod`), exactly, in IR: for targets whose own float remainder rounds
//! (SPIR-V's `OpFRem` and WGSL's `%` are `x − y·trunc(x/y)`; NVPTX lowers LLVM's `frem`
//! the same way), selected by [`MathExpansion::float_rem`](super::MathExpansion::float_rem).
//!
//! `fmod` is always exact (its result is representable), so it is computed like musl's
//! `fmod`, in integer arithmetic on the bits, with no float operation a target could
//! round, contract or flush:
//!
//! 1. `y == 0`, `y` NaN, `x` infinite or NaN: NaN. `|x| < |y|`: `x`. `|x| == |y|`: zero
//!    with the sign of `x`.
//! 2. Otherwise both significands are normalised to `[2^M, 2^(M+1))` (a subnormal's
//!    shifted up, its exponent going below 1), and for each step of exponent difference
//!    the divisor is subtracted where it fits and the remainder doubled (a counted loop
//!    of `ex − ey` steps: at most 276 for f32, 2 097 for f64); a last subtraction leaves
//!    the remainder below `my`. A remainder of zero stays zero through the remaining
//!    steps, and gives a zero with the sign of `x`.
//! 3. The remainder is renormalised and packed (as a subnormal when its exponent is
//!    below 1; that shift loses no bits, as the result is representable), with the sign
//!    of `x`.
//!
//! Shifts by a variable amount are written as a short sequence of selects between
//! constant shifts (a binary decomposition of the amount), so no shift can reach the
//! width of its type. Vectors are expanded lane by lane (each lane's loop has its own
//! trip count); f16 and bf16 operands are widened to f32 and the exact result narrowed
//! back, which is exact too.

use super::emit::Emitter;
use super::expander::Expander;
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};

/// The bit layout of one float width, with integers of the same width (signed: every
/// value the algorithm keeps is non-negative and below `2^(N−2)`).
struct Layout {
    float: ScalarType,
    int: ScalarType,
    /// Explicit significand bits (23, 52).
    mant: u32,
    /// The bits of +∞ (also the largest finite magnitude's successor).
    infinity: i64,
    /// Shift steps, largest first, that add up to at least `mant` (and stay below the
    /// width): the binary decomposition of a shift amount.
    steps: &'static [u32],
    /// The largest exponent difference of two finite values with normalised
    /// significands (largest exponent less the smallest subnormal's): the most steps
    /// the long division takes. Stated in the loop bound, so that analyses see it.
    max_steps: u32,
}

const F32: Layout = Layout {
    float: ScalarType::F32,
    int: ScalarType::I32,
    mant: 23,
    infinity: 0x7f80_0000,
    steps: &[16, 8, 4, 2, 1],
    max_steps: 276,
};

const F64: Layout = Layout {
    float: ScalarType::F64,
    int: ScalarType::I64,
    mant: 52,
    infinity: 0x7ff0_0000_0000_0000,
    steps: &[32, 16, 8, 4, 2, 1],
    max_steps: 2097,
};

impl Layout {
    fn int_lit(&self, v: i64) -> Expr {
        Expr::Lit(match self.int {
            ScalarType::I32 => Scalar::I32(v as i32),
            _ => Scalar::I64(v),
        })
    }

    fn width(&self) -> u32 {
        self.int.size_bytes() * 8
    }
}

impl Expander<'_> {
    /// The expansion of `lhs % rhs` when both are floats (of one type, as the validator
    /// requires); `None` for integer operands, which every target divides exactly.
    pub(super) fn expand_float_rem(
        &mut self,
        lhs: &Expr,
        rhs: &Expr,
        out: &mut Block,
    ) -> Option<Expr> {
        let ty = crate::passes::expr_type(&self.kernel, lhs)?;
        let (layout, narrow_to) = match ty.scalar {
            ScalarType::F32 => (&F32, None),
            ScalarType::F64 => (&F64, None),
            ScalarType::F16 | ScalarType::Bf16 => (&F32, Some(ty.scalar)),
            _ => return None,
        };
        let mut em = Emitter {
            x: self,
            out,
            lanes: ty.lanes,
            prefix: "fmod",
        };
        let widen = |e: &Expr| match narrow_to {
            Some(_) => Expr::Cast {
                to: ScalarType::F32,
                arg: Box::new(e.clone()),
            },
            None => e.clone(),
        };
        let (x, y) = (
            em.bind_as(widen(lhs), layout.float),
            em.bind_as(widen(rhs), layout.float),
        );
        // The operands are bound whole; the algorithm runs on one lane at a time.
        em.lanes = 1;
        let result = if ty.lanes == 1 {
            em.fmod(layout, &x, &y)
        } else {
            let lanes = (0..ty.lanes)
                .map(|lane| {
                    let extract = |v: &Expr| Expr::Extract {
                        arg: Box::new(v.clone()),
                        lane,
                    };
                    let (xl, yl) = (
                        em.bind_as(extract(&x), layout.float),
                        em.bind_as(extract(&y), layout.float),
                    );
                    em.fmod(layout, &xl, &yl)
                })
                .collect();
            Expr::Vector(lanes)
        };
        Some(match narrow_to {
            Some(to) => Expr::Cast {
                to,
                arg: Box::new(result),
            },
            None => result,
        })
    }
}

impl Emitter<'_, '_> {
    /// `fmod(x, y)` of two scalars of `layout`'s float type (both bound).
    fn fmod(&mut self, layout: &Layout, x: &Expr, y: &Expr) -> Expr {
        let int = layout.int;
        let lit = |v: i64| layout.int_lit(v);
        let bits = |e: &Expr| Expr::Bitcast {
            to: int,
            arg: Box::new(e.clone()),
        };
        let magnitude = lit(i64::MAX >> (64 - layout.width()));
        let bx = self.bind_as(bits(x), int);
        let ax = self.bind_as(Self::bin(BinaryOp::And, &bx, &magnitude), int);
        let ay = self.bind_as(Self::bin(BinaryOp::And, &bits(y), &magnitude), int);
        let sign = self.bind_as(Self::bin(BinaryOp::Xor, &bx, &ax), int);
        let inf = lit(layout.infinity);
        let zero = lit(0);
        let y_zero = Self::cmp(CmpOp::Eq, &ay, &zero);
        let y_nan = Self::cmp(CmpOp::Gt, &ay, &inf);
        let x_special = Self::cmp(CmpOp::Ge, &ax, &inf);
        let bad = Self::bin(
            BinaryOp::Or,
            &Self::bin(BinaryOp::Or, &y_zero, &y_nan),
            &x_special,
        );
        let bad = self.bind_as(bad, ScalarType::Bool);
        let not_above = self.bind_as(Self::cmp(CmpOp::Le, &ax, &ay), ScalarType::Bool);
        let active = Self::bin(BinaryOp::Or, &bad, &not_above);
        let active = Expr::Unary {
            op: UnaryOp::Not,
            arg: Box::new(active),
        };
        let active = self.bind_as(active, ScalarType::Bool);

        let (mx, ex) = self.normalise(layout, &ax);
        let (my, ey) = self.normalise(layout, &ay);
        let rem = self.long_division(layout, &mx, &my, &ex, &ey, &active);

        let packed = self.pack(layout, &rem, &ey, &sign);
        let to_float = |e: &Expr| Expr::Bitcast {
            to: layout.float,
            arg: Box::new(e.clone()),
        };
        let signed_zero = to_float(&sign);
        let exact_multiple = Self::cmp(CmpOp::Eq, &rem, &zero);
        let quotient_part = Self::select(&exact_multiple, &signed_zero, &to_float(&packed));
        let equal = Self::cmp(CmpOp::Eq, &ax, &ay);
        let small = Self::select(&equal, &signed_zero, x);
        let nan = Expr::Lit(match layout.float {
            ScalarType::F32 => Scalar::f32(f32::NAN),
            _ => Scalar::f64(f64::NAN),
        });
        let value = Self::select(&not_above, &small, &quotient_part);
        self.bind_as(Self::select(&bad, &nan, &value), layout.float)
    }

    /// The float bits of the remainder `rem` (nonzero, below `2^(M+1)`) at exponent
    /// `ey`, with the sign bit `sign`: renormalised, and packed as a subnormal when its
    /// exponent is below 1 (the shift then loses no bits: the result is representable).
    fn pack(&mut self, layout: &Layout, rem: &Expr, ey: &Expr, sign: &Expr) -> Expr {
        let int = layout.int;
        let lit = |v: i64| layout.int_lit(v);
        let (m, shift) = self.raise_to_bit(layout, rem);
        let e = self.bind_as(Self::bin(BinaryOp::Sub, ey, &shift), int);
        let mant = Self::bin(BinaryOp::Sub, &m, &lit(1 << layout.mant));
        let exponent = Self::bin(BinaryOp::Shl, &e, &Expr::Lit(Scalar::U32(layout.mant)));
        let normal = Self::bin(BinaryOp::Or, &mant, &exponent);
        let down = Self::bin(BinaryOp::Sub, &lit(1), &e);
        let most = lit(layout.mant as i64 + 1);
        let down = Self::select(&Self::cmp(CmpOp::Gt, &down, &most), &most, &down);
        let down = self.bind_as(down, int);
        let subnormal = self.shift_right_by(layout, &m, &down);
        let packed = Self::select(&Self::cmp(CmpOp::Gt, &e, &lit(0)), &normal, &subnormal);
        Self::bin(BinaryOp::Or, &packed, sign)
    }

    /// The significand of the magnitude bits `a` with its implicit one, in
    /// `[2^M, 2^(M+1))` (a subnormal's shifted up), and its exponent (below 1 for a
    /// subnormal). Meaningless for zero, infinities and NaN, which the caller masks.
    fn normalise(&mut self, layout: &Layout, a: &Expr) -> (Expr, Expr) {
        let int = layout.int;
        let lit = |v: i64| layout.int_lit(v);
        let field = Self::bin(BinaryOp::Shr, a, &Expr::Lit(Scalar::U32(layout.mant)));
        let biased = self.bind_as(field, int);
        let mant = self.bind_as(
            Self::bin(BinaryOp::And, a, &lit((1 << layout.mant) - 1)),
            int,
        );
        let (raised, shift) = self.raise_to_bit(layout, &mant);
        let is_subnormal = self.bind_as(Self::cmp(CmpOp::Eq, &biased, &lit(0)), ScalarType::Bool);
        let normal_m = Self::bin(BinaryOp::Or, &mant, &lit(1 << layout.mant));
        let m = Self::select(&is_subnormal, &raised, &normal_m);
        let e = Self::select(
            &is_subnormal,
            &Self::bin(BinaryOp::Sub, &lit(1), &shift),
            &biased,
        );
        (self.bind_as(m, int), self.bind_as(e, int))
    }

    /// `m` (nonzero, below `2^(M+1)`) shifted left until its leading one is bit `M`,
    /// and the shift: a binary search of constant shifts.
    fn raise_to_bit(&mut self, layout: &Layout, m: &Expr) -> (Expr, Expr) {
        let int = layout.int;
        let mut m = m.clone();
        let mut shift = layout.int_lit(0);
        for &step in layout.steps {
            // The leading one is at most bit M − step: shifting by `step` keeps it ≤ M.
            let room = Self::cmp(
                CmpOp::Lt,
                &m,
                &layout.int_lit(1 << (layout.mant + 1 - step)),
            );
            let room = self.bind_as(room, ScalarType::Bool);
            let shifted = Self::bin(BinaryOp::Shl, &m, &Expr::Lit(Scalar::U32(step)));
            m = self.bind_as(Self::select(&room, &shifted, &m), int);
            let more = Self::bin(BinaryOp::Add, &shift, &layout.int_lit(step as i64));
            shift = self.bind_as(Self::select(&room, &more, &shift), int);
        }
        (m, shift)
    }

    /// `m >> amount` for `0 ≤ amount < width`, as selects between constant shifts (one
    /// per bit of `amount`).
    fn shift_right_by(&mut self, layout: &Layout, m: &Expr, amount: &Expr) -> Expr {
        let int = layout.int;
        let mut m = m.clone();
        for &step in layout.steps {
            let bit = Self::bin(BinaryOp::And, amount, &layout.int_lit(step as i64));
            let set = Self::cmp(CmpOp::Ne, &bit, &layout.int_lit(0));
            let shifted = Self::bin(BinaryOp::Shr, &m, &Expr::Lit(Scalar::U32(step)));
            m = self.bind_as(Self::select(&set, &shifted, &m), int);
        }
        m
    }

    /// The remainder of `mx·2^(ex−ey)` divided by `my`, one bit per step: a counted loop
    /// of `ex − ey` steps where `active` (none elsewhere), then one last subtraction.
    fn long_division(
        &mut self,
        layout: &Layout,
        mx: &Expr,
        my: &Expr,
        ex: &Expr,
        ey: &Expr,
        active: &Expr,
    ) -> Expr {
        let int = layout.int;
        let ty = Type::scalar(int);
        let steps = Expr::Cast {
            to: ScalarType::U32,
            arg: Box::new(Self::bin(BinaryOp::Sub, ex, ey)),
        };
        let steps = Self::select(active, &steps, &Expr::Lit(Scalar::U32(0)));
        // Never more than `max_steps`: the clamp changes nothing and bounds the loop.
        let steps = Expr::Math {
            func: MathFn::Min,
            args: vec![steps, Expr::Lit(Scalar::U32(layout.max_steps))],
        };
        let steps = self.bind_as(steps, ScalarType::U32);
        let rem = self.x.new_var(self.prefix, ty);
        self.out.push(Stmt::Let {
            local: rem,
            value: mx.clone(),
        });
        let counter = self.x.new_local(self.prefix, Type::scalar(ScalarType::U32));
        let diff = self.x.new_local(self.prefix, ty);
        let subtract = |rem: LocalId, diff: LocalId| {
            Self::select(
                &Self::cmp(CmpOp::Ge, &Expr::Local(diff), &layout.int_lit(0)),
                &Expr::Local(diff),
                &Expr::Local(rem),
            )
        };
        let difference = Self::bin(BinaryOp::Sub, &Expr::Local(rem), my);
        let body = vec![
            Stmt::Let {
                local: diff,
                value: difference.clone(),
            },
            Stmt::Assign {
                local: rem,
                value: Self::bin(
                    BinaryOp::Shl,
                    &subtract(rem, diff),
                    &Expr::Lit(Scalar::U32(1)),
                ),
            },
        ];
        self.out.push(Stmt::For {
            var: counter,
            start: Expr::Lit(Scalar::U32(0)),
            end: steps,
            step: 1,
            body,
        });
        let last = self.x.new_local(self.prefix, ty);
        self.out.push(Stmt::Let {
            local: last,
            value: difference,
        });
        self.bind_as(subtract(rem, last), int)
    }
}
