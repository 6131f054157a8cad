//! Math expansion: replaces calls of transcendental functions by kernelc's own
//! implementations, written in the IR itself.
//!
//! Native GPU math is looser than the tolerance table of `docs/semantics.md` (Vulkan and
//! WGSL promise `3 + 2|x|` ULP for `exp` and only 2⁻¹¹ absolute for `sin`/`cos`; LLVM's
//! NVPTX back end has no accurate `expf`/`logf` at all), and the CPU target would
//! otherwise call scalar libm per lane. [`expand_math`] rewrites every selected
//! [`Expr::Math`] call on f32 values (scalars or vectors) into straight-line IR — `+ - *`,
//! comparisons, selects, bitcasts and integer bit manipulation, one division in `tanh`
//! and two in `pow`, no tables, no branches — so every target meets the table with the
//! same bits, and a CPU emitter gets code it can vectorise.
//!
//! # What is rewritten
//!
//! * Functions: `exp`, `exp2`, `log`, `log2`, `tanh`, `erf`, `sin`, `cos`, `pow`
//!   ([`MathExpansion::SUPPORTED`]), each only if listed in [`MathExpansion::funcs`];
//!   other functions (`sqrt`, `rsqrt`, `floor`, ... which every target has exactly or
//!   within the table) are never touched, even if listed.
//! * Types: f32 scalars and vectors (lane-wise: constants are splatted). f16 and bf16
//!   arguments (lowering normally widens them first) are cast to f32, expanded, and the
//!   result cast back. f64 scalars and vectors only when [`MathExpansion::f64`] is set
//!   ([`MathExpansion::all_transcendental_with_f64`]): a target without accurate native
//!   f64 math (NVPTX has none without libdevice) sets it; the CPU target, whose libm is
//!   accurate, uses [`MathExpansion::all_transcendental`], which leaves f64 calls alone.
//! * Float `%` (C `fmod`, every float type) when [`MathExpansion::float_rem`] is set:
//!   an exact integer long division on the bits with one counted loop per lane (the
//!   private module `fmod`; the only expansion with a loop). The GPU targets set it,
//!   as their own remainders round; the CPU calls an exact `fmod`.
//!
//! # How
//!
//! Expressions are trees, so the implementation binds intermediate values to new
//! immutable locals: each call's arguments are bound first (unless already a local,
//! literal or parameter), then the algorithm is emitted as a sequence of `Let`s inserted
//! just before the statement that contained the call (inside a loop body or `if` branch
//! when the call is there), and the call is replaced by the final value. Every
//! expression of a statement is evaluated whenever the statement runs (`select`
//! evaluates both arms, `for` bounds and `if` conditions are evaluated at the
//! statement), and expressions are pure, so this changes no result. Only the order in
//! which two failing loads of one statement are reached may differ (the error reported
//! then names the other one).
//!
//! The pass is idempotent (its output contains no call it would expand), keeps every
//! declaration of the input, and maps a valid kernel to a valid kernel.
//!
//! # Algorithms and accuracy
//!
//! ## f32
//!
//! All are the classic Cephes/SLEEF-style f32 designs with minimax-like polynomials
//! (Chebyshev fits, coefficients rounded to f32), range reduction through exact
//! (Cody–Waite, Sterbenz) steps and error-free transformations (TwoSum, Dekker's
//! product with 12-bit splits by masking), and exponent-field bit manipulation. Errors
//! below are measured against the interpreter's reference (the function evaluated in
//! f64 and rounded once to f32), in ULPs of that reference; "exhaustive" means every f32
//! input of the range.
//!
//! | function | method | max error |
//! | --- | --- | --- |
//! | `exp` | `k = round(x·log2 e)`, `r = x − k·ln2` (two constants, exact first step), `e^r = 1 + r + r²·P₄(r)`, scaled by `2^k` in two exact steps so subnormal results are rounded once; `x > 89 → +∞`, `x < −104 → 0` | 1 ulp (exhaustive) |
//! | `exp2` | `k = round(x)`, `r = x − k` (exact), `2^r = 1 + r·P₆(r)`, scaled as `exp` | 1 ulp (exhaustive) |
//! | `log` | exponent/mantissa split on the bits (`m ∈ [√½, √2)`, subnormals scaled by 2²³ first), `log(1+f) = f − f²/2 + f³·P₈(f)`, `k·ln2` added as two constants | 1 ulp (exhaustive) |
//! | `log2` | as `log`, then `(f + y)·log2 e` evaluated as `y·(log2e−1) + f·(log2e−1) + y + f + k` | 1 ulp (exhaustive) |
//! | `tanh` | `|x| < 0.625`: `x + x·z·P₅(z)`, `z = x²`; else `1 − 2/(e^{2|x|} + 1)` (argument clamped at 10, where the result is 1) with the sign of `x` | 1 ulp (exhaustive) |
//! | `erf` | `|x| < 1`: `x + x·((2/√π − 1) + z·Q₅(z))`; else `1 − e^{−x²}·R₁₂(x − 2.5)` (argument clamped at 4, where the result is 1) with the sign of `x` | 1 ulp (exhaustive) |
//! | `sin`, `cos` | `k = round(x·2/π)`, `r = x − k·π/2` with π/2 as five 8-bit constants (exact products for `|k| < 2¹⁶`; the first two subtractions exact, the next three TwoSums) and a sixth rounded one, giving `r` as a double-f32 `rh + rl` accurate to ~2⁻⁵⁵ absolute (the closest f32 to a multiple of π/2 below 10⁵ is 2⁻²⁷·⁸ away); `sin r = r + r³·S₃(r²)`, `cos r = 1 − r²/2 + r⁴·C₃(r²) − rh·rl`, chosen and negated by the quadrant `k mod 4` | 1 ulp for `|x| ≤ 102 000` (exhaustive) |
//! | `pow` | `pow(x, y) = 2^(y·log2|x|)` with `log2|x| = k + log2(1+f)` as a double-f32 (`log(1+f) = 2·atanh(s)`, `s = f/(2+f)` with its rounding error recovered, `2s + s³·C₃(s²)`), the product with `y` by Dekker's algorithm, and `exp2` of the double-f32 result | measured (random, millions of pairs): 1 ulp for `x ∈ (0, 10⁶]`, `|y| ≤ 30`; 4 ulp where `|y|` reaches ~250 (`x` near 1, results near the range limits, `|y·log2 x| ≈ 128`), from the f32 evaluation of the `s³` term |
//!
//! ## f64
//!
//! The f64 implementations (module `double`) follow the same designs with f64
//! polynomials (Chebyshev fits in 60-digit arithmetic) and double-double arithmetic where a
//! single rounding would cost accuracy; error-free products use `fma`, which every target
//! has exact (`fma` calls appear in the output; they are never expanded). Divisions: one
//! in `tanh`, two in `log`, `log2` and `pow` (`s = f/(2+f)` and its correction), none in
//! the others; they must be correctly rounded (as f64 division is on every target).
//! Errors are measured against the interpreter's reference, Rust's `f64` functions
//! (`libm::erf` for `erf`), which are themselves not always correctly rounded, over 20
//! million random inputs per range (`accuracy_wide_sweep`, ignored by default; the
//! default test, `accuracy_random_samples`, runs 100 000 per range):
//!
//! | function | method | max error (ranges) |
//! | --- | --- | --- |
//! | `exp` | `k = round(x·log2 e)`, `r = x − k·ln2` with ln 2 in two parts (42 + 53 bits; the first step exact) as a double-double `rh + rl`, `e^r = (1 + rh) + (rl(1 + rh) + rh²·Q₁₀(rh))` with `1 + rh` as a Fast2Sum, scaled by `2^k` in two steps (subnormal results rounded once); `x > 709.79 → +∞`, `x < −746 → 0` | 1 ulp (`x ∈ [−746, 710]`, `|x| ∈ [2⁻⁶⁰, 4]`) |
//! | `exp2` | `k = round(x)`, `(x − k)·ln 2` as a double-double (fma), then as `exp` | 1 ulp (`x ∈ [−1080, 1025]`, `|x| ∈ [2⁻⁶⁰, 4]`) |
//! | `log` | exponent/mantissa split (`m ∈ [√½, √2)`, subnormals scaled by 2⁵²), `log m = 2 atanh s`, `s = f/(2+f)` as a double-double from the division's exact residual, `2s + (2/3)s³` in double-double plus `s⁵·T₈(s²)`, `k·ln2` in two parts: `log x` as a double-double accurate to ~2⁻⁶⁷ | 1 ulp (positive doubles by random bits, `[0.5, 2]`; `1 ± 2⁻²⁰`: 0 ulp) |
//! | `log2` | `k + log(m)·log2 e`, the product in double-double, `k` added by Fast2Sum (powers of two exact) | 1 ulp (same ranges) |
//! | `tanh` | `|x| < 0.625`: `x + x·z·P₁₁(z)`, `z = x²` (one fma); else `1 − 2/(e^{2|x|} + 1)` (argument clamped at 22, where the result is 1) with the sign of `x` | 2 ulp (`|x| ∈ [2⁻⁴⁰, 0.625]`, `[0.625, 23]`); std's `tanh` is itself 1 ulp off at such points |
//! | `erf` | `|x| < 1`: `x + x·E₁₁(x²)`; else `1 − e^{−x²}·R₁₉(x − c)` with `x²` as a double-double into `exp`, two fits (`c = 1.75` on `[1, 2.5]`, `c = 4.25` on `[2.5, 6]`, the coefficients chosen by select), argument clamped at 6 (result 1) | 1 ulp (`|x| ∈ [2⁻⁴⁰, 1]`, `[−6.5, 6.5]`) |
//! | `sin`, `cos` | `k = round(x·2/π)`, `r = x − k·π/2` with π/2 as three 33-bit constants (exact products for `|k| < 2²⁰`; the first subtraction exact, the next two TwoSums) and a fourth, `r` as a double-double; `sin r = rh + (rl + rh³·S₆(rh²))`, `cos r = (1 − rh²/2) + (rh⁴·C₅(rh²) − rh·rl)` with `rh²` and `1 − rh²/2` exact as double-doubles; quadrant by `k mod 4` | 1 ulp for `|x| ≤ 1.6·10⁶` (`[−10, 10]`, log-uniform to 10⁵, `[10⁵, 1.6·10⁶]`) |
//! | `pow` | `e^(y·log|x|)`: the double-double `log` above, the product with `y` by fma, the low part fed into the `exp` reduction; special cases as in the f32 version, with every `|y| ≥ 2⁵³` even | 1 ulp (`x ∈ (0, 10⁶]` × `y ∈ [−30, 30]`; any `x > 0` with `y·log x ∈ [−745, 709.7]`, subnormal results included; `x` within `2⁻⁴⁰..0.4` of 1 with `|y|` up to 10¹⁴; negative `x` with integer `y`) |
//!
//! Limits (f64): `sin`/`cos` are accurate for `|x| < 2²⁰·π/2 ≈ 1.6·10⁶`; up to `2⁵¹` the
//! absolute error grows like `|x|·2⁻⁵⁴` (the table's `8·u·max|x|` allows `|x|·2⁻⁵⁰`), and
//! from `2⁵¹` on the argument is taken as 0 (result 0 or 1; the table allows any value in
//! `[−1, 1]` there). The rare arguments whose reduced `r` cancels to below ~2⁻⁵⁰ lose
//! relative accuracy in `r`'s low part (absolute error ~2⁻¹⁰⁶), none of which the random
//! sweeps met. Subnormal inputs and results are handled as in f32, unless the target
//! flushes f64 subnormals (CUDA does not).
//!
//! ## Special values
//!
//! Special values (f32 and f64) follow IEEE 754/C, as the interpreter's reference (`std`):
//! NaN in, NaN out; `exp(±∞) = +∞, 0`; `log(0) = −∞`, `log(x < 0) = NaN`,
//! `log(+∞) = +∞`; `tanh(±∞) = erf(±∞) = ±1`; `sin/cos(±∞) = NaN`; zeros keep their
//! sign where the function is odd; overflow and underflow thresholds are those of `std`
//! (the final scaling rounds once). `pow` implements the C99 table: `pow(x, ±0) = 1`
//! and `pow(1, y) = 1` even for NaN, `pow(±0, y)` (±∞ or ±0 by the sign and oddness of
//! `y`), `pow(±∞, y)`, `pow(x, ±∞)` (`pow(−1, ±∞) = 1`), negative `x` with an integer
//! `y` (the sign from the parity of `y`; every `|y| ≥ 2²⁴` (f32) or `2⁵³` (f64) is even)
//! and NaN for negative finite `x` with a non-integer `y`.
//!
//! # Limits (f32)
//!
//! * `sin`/`cos` are accurate for `|x| < 65536·π/2 ≈ 102 943` (`|k| < 2¹⁶`). Beyond, the
//!   products `k·Pᵢ` round and the absolute error grows like `|x|·2⁻²⁴` (about 0.02 at
//!   `|x| = 10⁶`, still within the table's `8·u·max|x|` allowance); beyond `|x| ≈ 6.6·10⁶`
//!   the reduction is meaningless and the result is some value in `[−1, 1]` (no
//!   Payne–Hanek reduction).
//! * Subnormals: inputs are handled (log family normalises them, `exp` family produces
//!   correctly scaled subnormal results) as long as the target does not flush them; on a
//!   target that flushes f32 subnormals to zero (allowed by Vulkan without
//!   `shaderDenormPreserveFloat32`) those results become zero, as native code would.
//! * The error-free transformations (TwoSum, Dekker) assume what `docs/semantics.md`
//!   requires: f32 `+ − *` correctly rounded and never contracted into an fma.
//! * `tanh` and `pow` divide. With a looser division than IEEE (Vulkan allows 2.5 ULP;
//!   simulated with ±2 ULP), `tanh` gets up to 1 ulp worse for `|x| ≥ 0.625`; `pow` is
//!   unaffected, since it recovers the quotient's error (`s = sh + sl` from the exact
//!   residual).

use super::{expr_type, map_children, with_body};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::types::{ScalarType, Type};
use std::collections::HashSet;

mod double;
mod fmod;

/// Which math calls [`expand_math`] replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MathExpansion {
    /// The functions to expand. Only those in [`MathExpansion::SUPPORTED`] are acted on;
    /// others are ignored.
    pub funcs: Vec<MathFn>,
    /// Whether f64 calls of those functions are expanded too (f32, f16 and bf16 calls
    /// always are). A target sets it when its native f64 math is missing or inaccurate
    /// (NVPTX without libdevice); a target with a good libm (the CPU) leaves it off.
    pub f64: bool,
    /// Whether float `%` (C `fmod`, of every float type) is replaced by kernelc's exact
    /// integer long division (module `fmod`). A target whose own float remainder rounds
    /// sets it (SPIR-V, WGSL and NVPTX all compute `x − y·trunc(x/y)`); the CPU target,
    /// which calls an exact `fmod`, leaves it off.
    pub float_rem: bool,
}

impl MathExpansion {
    /// Every function the pass has an implementation for.
    pub const SUPPORTED: [MathFn; 9] = [
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Tanh,
        MathFn::Erf,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Pow,
    ];

    /// Expand every supported function (exp, exp2, log, log2, tanh, erf, sin, cos, pow)
    /// on f32, f16 and bf16 values; f64 calls stay native.
    pub fn all_transcendental() -> Self {
        Self::only(&Self::SUPPORTED)
    }

    /// Expand every supported function on every float type, f64 included.
    pub fn all_transcendental_with_f64() -> Self {
        Self::all_transcendental().with_f64(true)
    }

    /// Expand exactly `funcs` (those of them that are supported), f64 calls excluded.
    pub fn only(funcs: &[MathFn]) -> Self {
        MathExpansion {
            funcs: funcs.to_vec(),
            f64: false,
            float_rem: false,
        }
    }

    /// Expand nothing (the pass is then the identity).
    pub fn none() -> Self {
        Self::only(&[])
    }

    /// The same selection, with f64 calls expanded or not.
    pub fn with_f64(self, f64: bool) -> Self {
        MathExpansion { f64, ..self }
    }

    /// The same selection, with float `%` expanded or not.
    pub fn with_float_rem(self, float_rem: bool) -> Self {
        MathExpansion { float_rem, ..self }
    }

    /// Whether the pass would leave every kernel as it is.
    pub fn expands_nothing(&self) -> bool {
        !self.float_rem && !Self::SUPPORTED.iter().any(|&f| self.expands(f))
    }

    /// Whether calls of `func` are expanded.
    pub fn expands(&self, func: MathFn) -> bool {
        self.funcs.contains(&func) && Self::SUPPORTED.contains(&func)
    }
}

impl Default for MathExpansion {
    /// [`MathExpansion::all_transcendental`]: f64 calls stay native.
    fn default() -> Self {
        Self::all_transcendental()
    }
}

/// Replaces the selected f32 (and f16/bf16, and f64 if [`MathExpansion::f64`]) math calls
/// of `kernel` by IR implementing them (see the [module documentation](self)). Other
/// calls are left as they are.
pub fn expand_math(kernel: &Kernel, opts: &MathExpansion) -> Kernel {
    let mut names: HashSet<String> = kernel.params.iter().map(|p| p.name().to_string()).collect();
    names.extend(kernel.shared.iter().map(|s| s.name.clone()));
    names.extend(kernel.locals.iter().map(|l| l.name.clone()));
    let mut x = Expander {
        kernel: with_body(kernel, Vec::new()),
        opts,
        names,
        counter: 0,
    };
    let body = x.block(&kernel.body);
    let mut out = x.kernel;
    out.body = body;
    out
}

// ---------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------

struct Expander<'a> {
    /// The output kernel's declarations (locals grow as the pass binds values).
    kernel: Kernel,
    opts: &'a MathExpansion,
    /// Every declared name, so new locals get fresh ones.
    names: HashSet<String>,
    counter: u32,
}

impl Expander<'_> {
    fn block(&mut self, block: &[Stmt]) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for s in block {
            self.stmt(s, &mut out);
        }
        out
    }

    /// Rewrites `s` into `out`, preceded by the `Let`s its expansions need.
    fn stmt(&mut self, s: &Stmt, out: &mut Block) {
        let rewritten = match s {
            Stmt::Let { local, value } => Stmt::Let {
                local: *local,
                value: self.expr(value, out),
            },
            Stmt::Assign { local, value } => Stmt::Assign {
                local: *local,
                value: self.expr(value, out),
            },
            Stmt::Store { mem, index, value } => {
                let index = self.expr(index, out);
                Stmt::Store {
                    mem: *mem,
                    index,
                    value: self.expr(value, out),
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => Stmt::If {
                cond: self.expr(cond, out),
                then_body: self.block(then_body),
                else_body: self.block(else_body),
            },
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let start = self.expr(start, out);
                let end = self.expr(end, out);
                Stmt::For {
                    var: *var,
                    start,
                    end,
                    step: *step,
                    body: self.block(body),
                }
            }
            Stmt::Return | Stmt::Barrier => s.clone(),
        };
        out.push(rewritten);
    }

    /// Rewrites `e` bottom-up; the `Let`s of its expansions go to `out`.
    fn expr(&mut self, e: &Expr, out: &mut Block) -> Expr {
        let rebuilt = map_children(e, |c| self.expr(c, out));
        let expanded = match &rebuilt {
            Expr::Math { func, args } if self.opts.expands(*func) => {
                self.expand_call(*func, args, out)
            }
            Expr::Binary {
                op: BinaryOp::Rem,
                lhs,
                rhs,
            } if self.opts.float_rem => self.expand_float_rem(lhs, rhs, out),
            _ => None,
        };
        expanded.unwrap_or(rebuilt)
    }

    /// The expansion of `func(args)`, or `None` to keep the call (f64 when not selected,
    /// or an argument that does not type, which a valid kernel never has).
    fn expand_call(&mut self, func: MathFn, args: &[Expr], out: &mut Block) -> Option<Expr> {
        let ty = expr_type(&self.kernel, args.first()?)?;
        if args.len() != func.arity() {
            return None;
        }
        let back_to = match ty.scalar {
            ScalarType::F32 => None,
            ScalarType::F16 | ScalarType::Bf16 => Some(ty.scalar),
            ScalarType::F64 if self.opts.f64 => return self.expand_f64_call(func, args, ty, out),
            _ => return None,
        };
        let mut em = Emitter {
            x: self,
            out,
            lanes: ty.lanes,
            prefix: func.name(),
        };
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            let a = match back_to {
                Some(_) => Expr::Cast {
                    to: ScalarType::F32,
                    arg: Box::new(a.clone()),
                },
                None => a.clone(),
            };
            vals.push(Ops::<W32>::bind(&mut em, a));
        }
        let result = expand_f32(&mut em, func, &vals)?;
        Some(match back_to {
            Some(to) => Expr::Cast {
                to,
                arg: Box::new(result),
            },
            None => result,
        })
    }

    /// The expansion of the f64 call `func(args)` (arguments of type `ty`).
    fn expand_f64_call(
        &mut self,
        func: MathFn,
        args: &[Expr],
        ty: Type,
        out: &mut Block,
    ) -> Option<Expr> {
        let mut em = Emitter {
            x: self,
            out,
            lanes: ty.lanes,
            prefix: func.name(),
        };
        let vals: Vec<Expr> = args
            .iter()
            .map(|a| Ops::<W64>::bind(&mut em, a.clone()))
            .collect();
        double::expand(&mut em, func, &vals)
    }

    /// Declares a new immutable local of type `ty` named after `prefix`.
    fn new_local(&mut self, prefix: &str, ty: Type) -> LocalId {
        self.declare(prefix, ty, false)
    }

    /// Declares a new mutable local of type `ty` named after `prefix`.
    fn new_var(&mut self, prefix: &str, ty: Type) -> LocalId {
        self.declare(prefix, ty, true)
    }

    fn declare(&mut self, prefix: &str, ty: Type, mutable: bool) -> LocalId {
        let name = loop {
            self.counter += 1;
            let candidate = format!("{prefix}_t{}", self.counter);
            if self.names.insert(candidate.clone()) {
                break candidate;
            }
        };
        let id = LocalId(self.kernel.locals.len() as u32);
        self.kernel.locals.push(LocalDecl { name, ty, mutable });
        id
    }
}

/// Emits IR for one call: values are expressions of `lanes` lanes; `bind` adds a `Let`.
struct Emitter<'a, 'b> {
    x: &'a mut Expander<'b>,
    out: &'a mut Block,
    lanes: u8,
    prefix: &'static str,
}

impl Emitter<'_, '_> {
    fn lit(&self, s: Scalar) -> Expr {
        let lit = Expr::Lit(s);
        if self.lanes > 1 {
            Expr::Splat {
                lanes: self.lanes,
                arg: Box::new(lit),
            }
        } else {
            lit
        }
    }

    /// Binds `e` to a new local of scalar type `scalar` unless it is already trivial.
    fn bind_as(&mut self, e: Expr, scalar: ScalarType) -> Expr {
        let trivial = match &e {
            Expr::Local(_) | Expr::Lit(_) | Expr::Param(_) => true,
            Expr::Splat { arg, .. } => matches!(**arg, Expr::Lit(_)),
            _ => false,
        };
        if trivial {
            return e;
        }
        let id = self
            .x
            .new_local(self.prefix, Type::vector(scalar, self.lanes));
        self.out.push(Stmt::Let {
            local: id,
            value: e,
        });
        Expr::Local(id)
    }

    fn bin(op: BinaryOp, a: &Expr, b: &Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(a.clone()),
            rhs: Box::new(b.clone()),
        }
    }

    fn cmp(op: CmpOp, a: &Expr, b: &Expr) -> Expr {
        Expr::Cmp {
            op,
            lhs: Box::new(a.clone()),
            rhs: Box::new(b.clone()),
        }
    }

    fn select(c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Expr::Select {
            cond: Box::new(c.clone()),
            on_true: Box::new(t.clone()),
            on_false: Box::new(f.clone()),
        }
    }

    fn shift(&self, op: BinaryOp, a: &Expr, n: u32) -> Expr {
        let amount = self.lit(Scalar::U32(n));
        Self::bin(op, a, &amount)
    }

    fn math(func: MathFn, args: &[&Expr]) -> Expr {
        Expr::Math {
            func,
            args: args.iter().map(|&a| a.clone()).collect(),
        }
    }

    fn convert(e: &Expr, to: ScalarType, bitwise: bool) -> Expr {
        let arg = Box::new(e.clone());
        if bitwise {
            Expr::Bitcast { to, arg }
        } else {
            Expr::Cast { to, arg }
        }
    }
}

impl<W: Width> Ops<W> for Emitter<'_, '_> {
    type F = Expr;
    type I = Expr;
    type B = Expr;
    fn cf(&mut self, v: W::Float) -> Expr {
        self.lit(W::float_lit(v))
    }
    fn ci(&mut self, v: W::Int) -> Expr {
        self.lit(W::int_lit(v))
    }
    fn add(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Sub, a, b)
    }
    fn mul(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Mul, a, b)
    }
    fn div(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Div, a, b)
    }
    fn neg(&mut self, a: &Expr) -> Expr {
        Expr::Unary {
            op: UnaryOp::Neg,
            arg: Box::new(a.clone()),
        }
    }
    fn abs(&mut self, a: &Expr) -> Expr {
        Self::math(MathFn::Abs, &[a])
    }
    fn round(&mut self, a: &Expr) -> Expr {
        Self::math(MathFn::Round, &[a])
    }
    fn lt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Lt, a, b)
    }
    fn gt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Gt, a, b)
    }
    fn ge(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Ge, a, b)
    }
    fn feq(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Eq, a, b)
    }
    fn fne(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Ne, a, b)
    }
    fn and(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::And, a, b)
    }
    fn or(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Or, a, b)
    }
    fn not(&mut self, a: &Expr) -> Expr {
        Expr::Unary {
            op: UnaryOp::Not,
            arg: Box::new(a.clone()),
        }
    }
    fn sel(&mut self, c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Self::select(c, t, f)
    }
    fn iadd(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Add, a, b)
    }
    fn isub(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::Sub, a, b)
    }
    fn iand(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::bin(BinaryOp::And, a, b)
    }
    fn shl(&mut self, a: &Expr, n: u32) -> Expr {
        self.shift(BinaryOp::Shl, a, n)
    }
    fn shr(&mut self, a: &Expr, n: u32) -> Expr {
        self.shift(BinaryOp::Shr, a, n)
    }
    fn ieq(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Eq, a, b)
    }
    fn ilt(&mut self, a: &Expr, b: &Expr) -> Expr {
        Self::cmp(CmpOp::Lt, a, b)
    }
    fn isel(&mut self, c: &Expr, t: &Expr, f: &Expr) -> Expr {
        Self::select(c, t, f)
    }
    fn bits_of(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::INT, true)
    }
    fn float_of_bits(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::FLOAT, true)
    }
    fn ftoi(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::INT, false)
    }
    fn itof(&mut self, a: &Expr) -> Expr {
        Self::convert(a, W::FLOAT, false)
    }
    fn bind(&mut self, a: Expr) -> Expr {
        self.bind_as(a, W::FLOAT)
    }
    fn bindi(&mut self, a: Expr) -> Expr {
        self.bind_as(a, W::INT)
    }
    fn bindb(&mut self, a: Expr) -> Expr {
        self.bind_as(a, ScalarType::Bool)
    }
}

// ---- algorithms begin ----
//
// The algorithms are written once against `Ops` (f32: `Ops<W32>`; f64: `Ops<W64>` and
// `double::Ops64`): the pass instantiates them with IR expressions (`Emitter`), the unit
// tests with native arithmetic, which is bit for bit what the interpreter computes on the
// emitted IR (`+ - * /` correctly rounded, casts saturating, integer arithmetic wrapping).

/// A float width the algorithms are written for: its constants' Rust types, its IR
/// scalar types and its exponent-field layout.
trait Width {
    /// The Rust type of a float constant (`f32`, `f64`).
    type Float: Copy;
    /// The Rust type of an integer of the float's width (`i32`, `i64`).
    type Int: Copy + std::ops::Sub<Output = Self::Int>;
    const FLOAT: ScalarType;
    const INT: ScalarType;
    /// The exponent bias (127, 1023).
    const EXP_BIAS: i32;
    /// The number of explicit significand bits (23, 52): the exponent field's shift.
    const MANT_BITS: u32;
    /// `2^MANT_BITS`, which scales a subnormal to a normal number.
    const TWO_POW_MANT: Self::Float;
    /// The bits of 1.
    const ONE_BITS: Self::Int;
    /// The bits of √½ (rounded).
    const SQRT_HALF_BITS: Self::Int;
    /// The significand field.
    const MANT_MASK: Self::Int;
    const MIN_POSITIVE: Self::Float;
    /// The smallest magnitude from which every float is an integer (2^24, 2^53).
    const INTEGRAL_FROM: Self::Float;
    const INFINITY: Self::Float;
    const NEG_INFINITY: Self::Float;
    const NAN: Self::Float;
    fn float_lit(v: Self::Float) -> Scalar;
    fn int_lit(v: Self::Int) -> Scalar;
    /// An `i32` as an integer of this width.
    fn int(v: i32) -> Self::Int;
    /// An `f32` as a float of this width (exact).
    fn float(v: f32) -> Self::Float;
}

/// f32 (with i32 integers).
struct W32;

/// f64 (with i64 integers).
struct W64;

impl Width for W32 {
    type Float = f32;
    type Int = i32;
    const FLOAT: ScalarType = ScalarType::F32;
    const INT: ScalarType = ScalarType::I32;
    const EXP_BIAS: i32 = 127;
    const MANT_BITS: u32 = 23;
    const TWO_POW_MANT: f32 = 8_388_608.0;
    const ONE_BITS: i32 = 0x3f80_0000;
    const SQRT_HALF_BITS: i32 = 0x3f35_04f3;
    const MANT_MASK: i32 = 0x007f_ffff;
    const MIN_POSITIVE: f32 = f32::MIN_POSITIVE;
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const NAN: f32 = f32::NAN;
    const INTEGRAL_FROM: f32 = 16_777_216.0;
    fn float_lit(v: f32) -> Scalar {
        Scalar::f32(v)
    }
    fn int_lit(v: i32) -> Scalar {
        Scalar::I32(v)
    }
    fn int(v: i32) -> i32 {
        v
    }
    fn float(v: f32) -> f32 {
        v
    }
}

impl Width for W64 {
    type Float = f64;
    type Int = i64;
    const FLOAT: ScalarType = ScalarType::F64;
    const INT: ScalarType = ScalarType::I64;
    const EXP_BIAS: i32 = 1023;
    const MANT_BITS: u32 = 52;
    const TWO_POW_MANT: f64 = 4_503_599_627_370_496.0;
    const ONE_BITS: i64 = 0x3ff0_0000_0000_0000;
    const SQRT_HALF_BITS: i64 = 0x3fe6_a09e_667f_3bcd;
    const MANT_MASK: i64 = 0x000f_ffff_ffff_ffff;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const NAN: f64 = f64::NAN;
    const INTEGRAL_FROM: f64 = 9_007_199_254_740_992.0;
    fn float_lit(v: f64) -> Scalar {
        Scalar::f64(v)
    }
    fn int_lit(v: i64) -> Scalar {
        Scalar::I64(v)
    }
    fn int(v: i32) -> i64 {
        v.into()
    }
    fn float(v: f32) -> f64 {
        v.into()
    }
}

/// The operations the algorithms use, on float (`F`), integer (`I`, of the float's width)
/// and bool (`B`) values of one lane count, for the width `W`. Integer arithmetic wraps;
/// `ftoi` truncates and saturates (NaN → 0).
trait Ops<W: Width> {
    type F: Clone;
    type I: Clone;
    type B: Clone;
    fn cf(&mut self, v: W::Float) -> Self::F;
    fn ci(&mut self, v: W::Int) -> Self::I;
    fn add(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn sub(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn mul(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn div(&mut self, a: &Self::F, b: &Self::F) -> Self::F;
    fn neg(&mut self, a: &Self::F) -> Self::F;
    fn abs(&mut self, a: &Self::F) -> Self::F;
    /// To the nearest integer, ties to even (every target has it natively).
    fn round(&mut self, a: &Self::F) -> Self::F;
    fn lt(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn gt(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn ge(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn feq(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn fne(&mut self, a: &Self::F, b: &Self::F) -> Self::B;
    fn and(&mut self, a: &Self::B, b: &Self::B) -> Self::B;
    fn or(&mut self, a: &Self::B, b: &Self::B) -> Self::B;
    fn not(&mut self, a: &Self::B) -> Self::B;
    fn sel(&mut self, c: &Self::B, t: &Self::F, f: &Self::F) -> Self::F;
    fn iadd(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn isub(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn iand(&mut self, a: &Self::I, b: &Self::I) -> Self::I;
    fn shl(&mut self, a: &Self::I, n: u32) -> Self::I;
    /// Arithmetic shift right.
    fn shr(&mut self, a: &Self::I, n: u32) -> Self::I;
    fn ieq(&mut self, a: &Self::I, b: &Self::I) -> Self::B;
    fn ilt(&mut self, a: &Self::I, b: &Self::I) -> Self::B;
    fn isel(&mut self, c: &Self::B, t: &Self::I, f: &Self::I) -> Self::I;
    /// The bits of a float as an integer of its width.
    fn bits_of(&mut self, a: &Self::F) -> Self::I;
    fn float_of_bits(&mut self, a: &Self::I) -> Self::F;
    fn ftoi(&mut self, a: &Self::F) -> Self::I;
    fn itof(&mut self, a: &Self::I) -> Self::F;
    /// Names a value that is used more than once (IR: a `Let`).
    fn bind(&mut self, a: Self::F) -> Self::F;
    fn bindi(&mut self, a: Self::I) -> Self::I;
    fn bindb(&mut self, a: Self::B) -> Self::B;
}

// ---- helpers (both widths) ----

fn addc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::F {
    let k = o.cf(c);
    o.add(a, &k)
}

fn mulc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::F {
    let k = o.cf(c);
    o.mul(a, &k)
}

fn ltc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.lt(a, &k)
}

fn gtc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.gt(a, &k)
}

fn eqc<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, c: W::Float) -> O::B {
    let k = o.cf(c);
    o.feq(a, &k)
}

/// `c ? t : f` with a constant `t`.
fn selc<W: Width, O: Ops<W>>(o: &mut O, c: &O::B, t: W::Float, f: &O::F) -> O::F {
    let k = o.cf(t);
    o.sel(c, &k, f)
}

/// `min(a, hi)` that keeps a NaN `a`.
fn min_c<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, hi: W::Float) -> O::F {
    let c = gtc(o, a, hi);
    selc(o, &c, hi, a)
}

/// `max(a, lo)` that keeps a NaN `a`.
fn max_c<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, lo: W::Float) -> O::F {
    let c = ltc(o, a, lo);
    selc(o, &c, lo, a)
}

fn iaddc<W: Width, O: Ops<W>>(o: &mut O, a: &O::I, c: W::Int) -> O::I {
    let k = o.ci(c);
    o.iadd(a, &k)
}

fn iandc<W: Width, O: Ops<W>>(o: &mut O, a: &O::I, c: W::Int) -> O::I {
    let k = o.ci(c);
    o.iand(a, &k)
}

/// `v` rounded to the nearest integer (ties to even), as a float and as an integer;
/// valid for `|v| < 2³¹` (f32) or `2⁶³` (f64). A native `round`, not the
/// `(v + 1.5·2²³) − 1.5·2²³` trick (`1.5·2⁵²` for f64): shader compilers that may
/// reassociate float arithmetic (WGSL cannot forbid it; Mesa folds `(a + c) − c` to `a`)
/// would turn that trick into the identity.
fn round_nearest<W: Width, O: Ops<W>>(o: &mut O, v: &O::F) -> (O::F, O::I) {
    let kf = o.round(v);
    let kf = o.bind(kf);
    let ki = o.ftoi(&kf);
    let ki = o.bindi(ki);
    (kf, ki)
}

/// `2^k` for an integer `k` in the normal exponent range (`[-126, 127]` for f32,
/// `[-1022, 1023]` for f64), built in the exponent field.
fn pow2i<W: Width, O: Ops<W>>(o: &mut O, k: &O::I) -> O::F {
    let e = iaddc(o, k, W::int(W::EXP_BIAS));
    let s = o.shl(&e, W::MANT_BITS);
    o.float_of_bits(&s)
}

/// `p · 2^k` for `p` near 1 and `k` in twice the normal exponent range (`[-252, 254]`
/// for f32, `[-2044, 2046]` for f64), in two steps of which only the second rounds (so a
/// subnormal result is rounded once, and overflow gives +∞).
fn scale<W: Width, O: Ops<W>>(o: &mut O, p: &O::F, k: &O::I) -> O::F {
    let k1 = o.shr(k, 1);
    let k1 = o.bindi(k1);
    let k2 = o.isub(k, &k1);
    let s1 = pow2i(o, &k1);
    let s2 = pow2i(o, &k2);
    let t = o.mul(p, &s1);
    o.mul(&t, &s2)
}

/// Knuth's TwoSum: `s + e = a + b` exactly, `s = fl(a + b)`.
fn two_sum<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let s = o.add(a, b);
    let s = o.bind(s);
    let bb = o.sub(&s, a);
    let bb = o.bind(bb);
    let sa = o.sub(&s, &bb);
    let ea = o.sub(a, &sa);
    let eb = o.sub(b, &bb);
    let e = o.add(&ea, &eb);
    let e = o.bind(e);
    (s, e)
}

/// Fast2Sum: `s + e = a + b` exactly when `|a| ≥ |b|` (or `a = 0`, or the sum is exact).
fn fast_two_sum<W: Width, O: Ops<W>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let s = o.add(a, b);
    let s = o.bind(s);
    let d = o.sub(&s, a);
    let e = o.sub(b, &d);
    let e = o.bind(e);
    (s, e)
}

/// `x = 2^k · m` with `m ∈ [√½, √2)`, for positive finite `x` (subnormals are scaled by
/// `2^MANT_BITS` first). Returns `k` (as a float) and `f = m − 1` (exact).
fn log_reduce<W: Width, O: Ops<W>>(o: &mut O, x: &O::F) -> (O::F, O::F) {
    let sub = ltc(o, x, W::MIN_POSITIVE);
    let sub = o.bindb(sub);
    let xs = mulc(o, x, W::TWO_POW_MANT);
    let xs = o.sel(&sub, &xs, x);
    // Offsetting the bits by 1 - √½ moves the mantissa range [√½, √2) onto one exponent.
    let ix = o.bits_of(&xs);
    let ix = iaddc(o, &ix, W::ONE_BITS - W::SQRT_HALF_BITS);
    let ix = o.bindi(ix);
    let e = o.shr(&ix, W::MANT_BITS);
    let sub_adj = o.ci(W::int(-W::EXP_BIAS - W::MANT_BITS as i32));
    let adj = o.ci(W::int(-W::EXP_BIAS));
    let adj = o.isel(&sub, &sub_adj, &adj);
    let k = o.iadd(&e, &adj);
    let k = o.itof(&k);
    let k = o.bind(k);
    let mb = iandc(o, &ix, W::MANT_MASK);
    let mb = iaddc(o, &mb, W::SQRT_HALF_BITS);
    let m = o.float_of_bits(&mb);
    let f = addc(o, &m, W::float(-1.0));
    let f = o.bind(f);
    (k, f)
}

/// `log` special cases: +∞ → +∞, ±0 → −∞, negative or NaN → NaN.
fn log_specials<W: Width, O: Ops<W>>(o: &mut O, x: &O::F, r: &O::F) -> O::F {
    let is_inf = eqc(o, x, W::INFINITY);
    let r = selc(o, &is_inf, W::INFINITY, r);
    let is_zero = eqc(o, x, W::float(0.0));
    let r = selc(o, &is_zero, W::NEG_INFINITY, &r);
    let zero = o.cf(W::float(0.0));
    let ok = o.ge(x, &zero);
    let bad = o.not(&ok);
    selc(o, &bad, W::NAN, &r)
}

// ---- f32 ----

/// The expansion of the f32 call `func(args)` (arguments already bound), or `None` for a
/// function without an f32 implementation.
fn expand_f32<O: Ops<W32>>(o: &mut O, func: MathFn, args: &[O::F]) -> Option<O::F> {
    let x = args.first()?;
    Some(match func {
        MathFn::Exp => exp(o, x),
        MathFn::Exp2 => exp2(o, x),
        MathFn::Log => log(o, x),
        MathFn::Log2 => log2(o, x),
        MathFn::Tanh => tanh(o, x),
        MathFn::Erf => erf(o, x),
        MathFn::Sin => sin(o, x),
        MathFn::Cos => cos(o, x),
        MathFn::Pow => pow(o, x, args.get(1)?),
        _ => return None,
    })
}

/// Horner's scheme; coefficients from the highest degree down (no fma: f32 `+ − *`
/// only).
fn poly<O: Ops<W32>>(o: &mut O, x: &O::F, c: &[f32]) -> O::F {
    let mut acc = o.cf(c.first().copied().unwrap_or(0.0));
    for &ci in c.iter().skip(1) {
        let m = o.mul(&acc, x);
        let k = o.cf(ci);
        acc = o.add(&m, &k);
    }
    acc
}

/// `a = hi + lo` with `hi` the top 12 significand bits (by masking) and `lo` the rest,
/// both exact; any finite `a` (no overflow, unlike Veltkamp's split).
fn split<O: Ops<W32>>(o: &mut O, a: &O::F) -> (O::F, O::F) {
    let b = o.bits_of(a);
    let m = iandc(o, &b, 0xFFFF_F000_u32 as i32);
    let hi = o.float_of_bits(&m);
    let hi = o.bind(hi);
    let lo = o.sub(a, &hi);
    let lo = o.bind(lo);
    (hi, lo)
}

/// Dekker's product: `p + e = a · b` exactly (barring overflow and underflow).
fn two_prod<O: Ops<W32>>(o: &mut O, a: &O::F, b: &O::F) -> (O::F, O::F) {
    let p = o.mul(a, b);
    let p = o.bind(p);
    let (ah, al) = split(o, a);
    let (bh, bl) = split(o, b);
    let hh = o.mul(&ah, &bh);
    let t = o.sub(&hh, &p);
    let hl = o.mul(&ah, &bl);
    let t = o.add(&t, &hl);
    let lh = o.mul(&al, &bh);
    let t = o.add(&t, &lh);
    let ll = o.mul(&al, &bl);
    let e = o.add(&t, &ll);
    let e = o.bind(e);
    (p, e)
}

// ---- exp, exp2 ----

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts: the first has 15 significant bits, so `k · LN2_HI` is exact for
/// `|k| ≤ 256`.
const LN2_HI: f32 = 0.69314575;
const LN2_LO: f32 = 1.4286068e-6;
/// `e^r ≈ 1 + r + r² · EXP_P(r)` on `|r| ≤ 0.3467`.
const EXP_P: [f32; 5] = [0.0013926204, 0.008363195, 0.041666556, 0.16666576, 0.5];
/// `2^r ≈ 1 + r · EXP2_P(r)` on `|r| ≤ 0.5`.
const EXP2_P: [f32; 7] = [
    1.5297324e-5,
    0.00015461445,
    0.0013333502,
    0.009618057,
    0.05550411,
    0.2402265,
    std::f32::consts::LN_2,
];

/// `e^x` for `x` in `[-104, 89]` (or NaN).
fn exp_core<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let v = mulc(o, x, LOG2E);
    let (kf, ki) = round_nearest(o, &v);
    // x - k·LN2_HI is exact (Sterbenz), then one rounding.
    let h = mulc(o, &kf, LN2_HI);
    let r = o.sub(x, &h);
    let l = mulc(o, &kf, LN2_LO);
    let r = o.sub(&r, &l);
    let r = o.bind(r);
    let z = o.mul(&r, &r);
    let p = poly(o, &r, &EXP_P);
    let q = o.mul(&z, &p);
    let q = o.add(&q, &r);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
}

/// `e^x`: `x > 89` gives +∞ (e^89 overflows), `x < -104` gives 0 (e^-104 < 2^-150).
fn exp<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let xc = min_c(o, x, 89.0);
    let xc = max_c(o, &xc, -104.0);
    let xc = o.bind(xc);
    exp_core(o, &xc)
}

/// `2^(h + l)` for a small correction `l` (|l| well below 1); `h` is clamped to
/// `[-152, 129]`, beyond which the result is 0 or +∞ anyway.
fn exp2_hl<O: Ops<W32>>(o: &mut O, h: &O::F, l: Option<&O::F>) -> O::F {
    let hc = min_c(o, h, 129.0);
    let hc = max_c(o, &hc, -152.0);
    let hc = o.bind(hc);
    let (kf, ki) = round_nearest(o, &hc);
    let mut r = o.sub(&hc, &kf);
    if let Some(l) = l {
        r = o.add(&r, l);
    }
    let r = o.bind(r);
    let p = poly(o, &r, &EXP2_P);
    let q = o.mul(&r, &p);
    let p = addc(o, &q, 1.0);
    let p = o.bind(p);
    scale(o, &p, &ki)
}

fn exp2<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    exp2_hl(o, x, None)
}

// ---- pow special cases (both widths) ----

/// Properties of `y` that `pow` needs: whether it is an integer, an odd integer.
fn integer_parity<W: Width, O: Ops<W>>(o: &mut O, y: &O::F) -> (O::B, O::B) {
    let ay = o.abs(y);
    let yi = o.ftoi(y);
    let yi = o.bindi(yi);
    let yr = o.itof(&yi);
    let exact = o.feq(&yr, y);
    let big = o.cf(W::INTEGRAL_FROM);
    let y_big = o.ge(&ay, &big);
    let y_big = o.bindb(y_big);
    let y_int = o.or(&exact, &y_big);
    let y_int = o.bindb(y_int);
    let odd_bit = iandc(o, &yi, W::int(1));
    let one = o.ci(W::int(1));
    let odd = o.ieq(&odd_bit, &one);
    let small = o.not(&y_big);
    let odd = o.and(&odd, &small);
    let odd = o.and(&odd, &y_int);
    let odd = o.bindb(odd);
    (y_int, odd)
}

/// The special cases of `pow` (`a = |x|`, `r` the general result), as IEEE and
/// `powf`/`pow` define them, for either width.
fn pow_specials<W: Width, O: Ops<W>>(o: &mut O, x: &O::F, y: &O::F, a: &O::F, r: &O::F) -> O::F {
    let (y_int, y_odd) = integer_parity(o, y);
    let y_neg = ltc(o, y, W::float(0.0));
    let y_neg = o.bindb(y_neg);
    let inf = o.cf(W::INFINITY);
    let zero = o.cf(W::float(0.0));
    // |x| = 0: +∞ for y < 0, else 0.
    let a_zero = eqc(o, a, W::float(0.0));
    let zr = o.sel(&y_neg, &inf, &zero);
    let r = o.sel(&a_zero, &zr, r);
    // |x| = ∞: 0 for y < 0, else +∞.
    let a_inf = eqc(o, a, W::INFINITY);
    let ir = o.sel(&y_neg, &zero, &inf);
    let r = o.sel(&a_inf, &ir, &r);
    let r = o.bind(r);
    // Negative x (by the sign bit, so -0 counts) with an odd integer y: negate.
    let xb = o.bits_of(x);
    let zi = o.ci(W::int(0));
    let x_neg = o.ilt(&xb, &zi);
    let x_neg = o.bindb(x_neg);
    let flip = o.and(&x_neg, &y_odd);
    let nr = o.neg(&r);
    let r = o.sel(&flip, &nr, &r);
    // Negative finite nonzero x with a non-integer y: NaN.
    let fin = ltc(o, a, W::INFINITY);
    let nz = gtc(o, a, W::float(0.0));
    let fin = o.and(&fin, &nz);
    let bad = o.and(&x_neg, &fin);
    let not_int = o.not(&y_int);
    let bad = o.and(&bad, &not_int);
    let r = selc(o, &bad, W::NAN, &r);
    // pow(-1, ±∞) = 1.
    let ay = o.abs(y);
    let y_inf = eqc(o, &ay, W::INFINITY);
    let a_one = eqc(o, a, W::float(1.0));
    let c = o.and(&y_inf, &a_one);
    let r = selc(o, &c, W::float(1.0), &r);
    // NaN in, NaN out ...
    let xn = o.fne(x, x);
    let yn = o.fne(y, y);
    let n = o.or(&xn, &yn);
    let r = selc(o, &n, W::NAN, &r);
    // ... except pow(x, ±0) = pow(1, y) = 1.
    let y0 = eqc(o, y, W::float(0.0));
    let x1 = eqc(o, x, W::float(1.0));
    let c = o.or(&y0, &x1);
    selc(o, &c, W::float(1.0), &r)
}

// ---- log, log2 ----

/// `log(1 + f) ≈ f - f²/2 + f³ · LOG_P(f)` on `f ∈ [√½ - 1, √2 - 1]`.
const LOG_P: [f32; 9] = [
    0.06969754,
    -0.11479188,
    0.11685796,
    -0.124257766,
    0.14249033,
    -0.16667798,
    0.20000717,
    -0.24999997,
    0.3333333,
];

/// The pieces of `log x = k·ln 2 + f - z/2 + c`.
struct LogParts<O: Ops<W32>> {
    k: O::F,
    f: O::F,
    /// `f · f`
    z: O::F,
    /// `f³ · LOG_P(f)`
    c: O::F,
}

fn log_parts<O: Ops<W32>>(o: &mut O, x: &O::F) -> LogParts<O> {
    let (k, f) = log_reduce(o, x);
    let z = o.mul(&f, &f);
    let z = o.bind(z);
    let p = poly(o, &f, &LOG_P);
    let fz = o.mul(&f, &z);
    let c = o.mul(&fz, &p);
    let c = o.bind(c);
    LogParts { k, f, z, c }
}

fn log<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let p = log_parts(o, x);
    // ln 2 = 0.693359375 - 2.12194440e-4; the first part has 9 bits, so k times it is exact.
    let y = mulc(o, &p.k, -2.121_944_4e-4);
    let y = o.add(&p.c, &y);
    let hz = mulc(o, &p.z, 0.5);
    let y = o.sub(&y, &hz);
    let r = o.add(&p.f, &y);
    let kh = mulc(o, &p.k, 0.693_359_4); // 0.693359375 exactly
    let r = o.add(&r, &kh);
    let r = o.bind(r);
    log_specials(o, x, &r)
}

/// `log2(e) - 1`.
const LOG2E_M1: f32 = 0.44269505;

fn log2<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let p = log_parts(o, x);
    let hz = mulc(o, &p.z, 0.5);
    let y = o.sub(&p.c, &hz);
    let y = o.bind(y);
    // (f + y) · log2 e with f added last but k: f·(log2e - 1) + f keeps f exact.
    let a = mulc(o, &y, LOG2E_M1);
    let b = mulc(o, &p.f, LOG2E_M1);
    let r = o.add(&a, &b);
    let r = o.add(&r, &y);
    let r = o.add(&r, &p.f);
    let r = o.add(&r, &p.k);
    let r = o.bind(r);
    log_specials(o, x, &r)
}

// ---- pow ----

/// log2(e) as a double-f32.
const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
const LOG2E_LO: f32 = 1.925963e-8;
/// `2 atanh(s) ≈ 2s + s³ · ATANH_C(s²)` on `|s| ≤ 0.1716`.
const ATANH_C: [f32; 4] = [0.23331614, 0.2855078, 0.40000123, 0.6666667];

/// `log2(a)` for positive finite `a` as a double-f32 `(hi, lo)`, accurate to about
/// 2⁻⁴⁰ relative.
fn log2_dd<O: Ops<W32>>(o: &mut O, a: &O::F) -> (O::F, O::F) {
    let (k, f) = log_reduce(o, a);
    // s = f / (2 + f) as sh + sl: 2 + f = dh + dl exactly, then the residual
    // f - sh·(dh + dl) (exact through Dekker) divided by dh.
    let dh = addc(o, &f, 2.0);
    let dh = o.bind(dh);
    let two = o.cf(2.0);
    let d2 = o.sub(&dh, &two);
    let dl = o.sub(&f, &d2);
    let dl = o.bind(dl);
    let sh = o.div(&f, &dh);
    let sh = o.bind(sh);
    let (p1, p1e) = two_prod(o, &sh, &dh);
    let res = o.sub(&f, &p1);
    let res = o.sub(&res, &p1e);
    let sdl = o.mul(&sh, &dl);
    let res = o.sub(&res, &sdl);
    let sl = o.div(&res, &dh);
    let sl = o.bind(sl);
    // log(1 + f) = 2 atanh(s) = 2sh + 2sl + s³ · C(s²), the small term from s rounded
    // again (sh itself when the division is correctly rounded; a looser division's
    // error is recovered here too)
    let s1 = o.add(&sh, &sl);
    let s1 = o.bind(s1);
    let w = o.mul(&s1, &s1);
    let w = o.bind(w);
    let cp = poly(o, &w, &ATANH_C);
    let c = o.mul(&s1, &w);
    let c = o.mul(&c, &cp);
    let sh2 = mulc(o, &sh, 2.0);
    let sl2 = mulc(o, &sl, 2.0);
    let t = o.add(&sl2, &c);
    let (vh, vl) = fast_two_sum(o, &sh2, &t);
    // times log2 e, as double-f32
    let lg = o.cf(LOG2E_HI);
    let (ph, pl) = two_prod(o, &vh, &lg);
    let a1 = mulc(o, &vh, LOG2E_LO);
    let a2 = mulc(o, &vl, LOG2E_HI);
    let a12 = o.add(&a1, &a2);
    let pl = o.add(&pl, &a12);
    // plus k (|k| ≥ 1 > |ph|, or k = 0)
    let (wh, we) = fast_two_sum(o, &k, &ph);
    let wl = o.add(&we, &pl);
    let wl = o.bind(wl);
    (wh, wl)
}

fn pow<O: Ops<W32>>(o: &mut O, x: &O::F, y: &O::F) -> O::F {
    let a = o.abs(x);
    let a = o.bind(a);
    // The general case: 2^(y · log2 a) with the exponent as a double-f32.
    let (wh, wl) = log2_dd(o, &a);
    let (th, te) = two_prod(o, y, &wh);
    let ywl = o.mul(y, &wl);
    let tl = o.add(&te, &ywl);
    // A huge or infinite exponent saturates; its low part may then be NaN: drop it.
    let ath = o.abs(&th);
    let ok = ltc(o, &ath, 256.0);
    let zero = o.cf(0.0);
    let tl = o.sel(&ok, &tl, &zero);
    let tl = o.bind(tl);
    let r = exp2_hl(o, &th, Some(&tl));
    let r = o.bind(r);
    pow_specials(o, x, y, &a, &r)
}

// ---- sin, cos ----

const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
/// π/2 as five constants of at most 8 significant bits (so `k · PIO2[i]` is exact for
/// `|k| < 2¹⁶`) and a 24-bit sixth; the sum is within 2⁻⁷³ of π/2.
const PIO2: [f32; 6] = [
    1.5703125,
    0.00048446655,
    -6.4074993e-7,
    9.895302e-10,
    2.5579538e-12,
    5.390303e-15,
];
/// `sin r ≈ r + r³ · SIN_P(r²)` on `|r| ≤ 0.7916`.
const SIN_P: [f32; 4] = [2.7245078e-6, -0.00019840049, 0.008333332, -0.16666667];
/// `cos r ≈ 1 - r²/2 + r⁴ · COS_P(r²)` on `|r| ≤ 0.7916`.
const COS_P: [f32; 4] = [-2.7296915e-7, 2.4800569e-5, -0.0013888888, 0.041666668];

fn sincos<O: Ops<W32>>(o: &mut O, x: &O::F, cos: bool) -> O::F {
    let v = mulc(o, x, TWO_OVER_PI);
    let (kf, ki) = round_nearest(o, &v);
    // r = x - k·π/2: the first two subtractions are exact (Sterbenz and the constants'
    // granularity), the next three are TwoSums whose errors are collected in e.
    let mut a = x.clone();
    for &c in &PIO2[..2] {
        let p = mulc(o, &kf, c);
        a = o.sub(&a, &p);
        a = o.bind(a);
    }
    let mut e: Option<O::F> = None;
    for &c in &PIO2[2..5] {
        let p = mulc(o, &kf, -c);
        let (s, err) = two_sum(o, &a, &p);
        a = s;
        e = Some(match e {
            None => err,
            Some(e0) => {
                let t = o.add(&e0, &err);
                o.bind(t)
            }
        });
    }
    let p6 = mulc(o, &kf, PIO2[5]);
    let e = match e {
        Some(e) => o.sub(&e, &p6),
        None => o.neg(&p6),
    };
    let (rh, rl) = fast_two_sum(o, &a, &e);
    // Far beyond the accurate range r is meaningless: keep it bounded (NaN stays NaN).
    let arh = o.abs(&rh);
    let big = gtc(o, &arh, 1.5);
    let big = o.bindb(big);
    let zero = o.cf(0.0);
    let rh = o.sel(&big, &zero, &rh);
    let rh = o.bind(rh);
    let rl = o.sel(&big, &zero, &rl);
    let rl = o.bind(rl);
    let z = o.mul(&rh, &rh);
    let z = o.bind(z);
    // sin(rh + rl) ≈ rh + (rh · z · S(z) + rl)
    let sp = poly(o, &z, &SIN_P);
    let t = o.mul(&z, &sp);
    let t = o.mul(&rh, &t);
    let t = o.add(&t, &rl);
    let s = o.add(&rh, &t);
    let s = o.bind(s);
    // cos(rh + rl) ≈ 1 + ((z² · C(z) - rh · rl) - z/2)
    let cp = poly(o, &z, &COS_P);
    let zz = o.mul(&z, &z);
    let t = o.mul(&zz, &cp);
    let rr = o.mul(&rh, &rl);
    let t = o.sub(&t, &rr);
    let w = mulc(o, &z, 0.5);
    let t = o.sub(&t, &w);
    let c = addc(o, &t, 1.0);
    let c = o.bind(c);
    // quadrant: sin x = (sin r, cos r, -sin r, -cos r) for k mod 4 = 0..3; cos x = sin(x + π/2)
    let q = if cos { iaddc(o, &ki, 1) } else { ki };
    let q = o.bindi(q);
    let zi = o.ci(0);
    let b1 = iandc(o, &q, 1);
    let use_sin = o.ieq(&b1, &zi);
    let res = o.sel(&use_sin, &s, &c);
    let res = o.bind(res);
    let b2 = iandc(o, &q, 2);
    let keep = o.ieq(&b2, &zi);
    let nres = o.neg(&res);
    let res = o.sel(&keep, &res, &nres);
    if cos {
        res
    } else {
        // sin(-0) = -0
        let res = o.bind(res);
        let z0 = eqc(o, x, 0.0);
        o.sel(&z0, x, &res)
    }
}

fn sin<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    sincos(o, x, false)
}

fn cos<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    sincos(o, x, true)
}

// ---- tanh ----

/// `tanh x ≈ x + x³ · TANH_P(x²)` on `|x| ≤ 0.625`.
const TANH_P: [f32; 6] = [
    0.0022927448,
    -0.008343945,
    0.021768918,
    -0.053959258,
    0.13333304,
    -0.33333334,
];

fn tanh<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let ax = o.abs(x);
    let ax = o.bind(ax);
    // |x| < 0.625
    let z = o.mul(x, x);
    let z = o.bind(z);
    let p = poly(o, &z, &TANH_P);
    let t = o.mul(&z, &p);
    let t = o.mul(x, &t);
    let small = o.add(x, &t);
    let small = o.bind(small);
    // otherwise 1 - 2 / (e^(2|x|) + 1); tanh(10) rounds to 1
    let xc = min_c(o, &ax, 10.0);
    let x2 = mulc(o, &xc, 2.0);
    let x2 = o.bind(x2);
    let e = exp_core(o, &x2);
    let d = addc(o, &e, 1.0);
    let two = o.cf(2.0);
    let q = o.div(&two, &d);
    let one = o.cf(1.0);
    let l = o.sub(&one, &q);
    let l = o.bind(l);
    let neg = ltc(o, x, 0.0);
    let nl = o.neg(&l);
    let l = o.sel(&neg, &nl, &l);
    let is_small = ltc(o, &ax, 0.625);
    let r = o.sel(&is_small, &small, &l);
    let r = o.bind(r);
    // tanh(-0) = -0
    let z0 = eqc(o, x, 0.0);
    o.sel(&z0, x, &r)
}

// ---- erf ----

/// `2/√π - 1`.
const TWO_OVER_SQRT_PI_M1: f32 = 0.12837917;
/// `erf x ≈ x + x · ((2/√π - 1) + z · ERF_Q(z))`, `z = x²`, on `|x| ≤ 1`.
const ERF_Q: [f32; 6] = [
    8.379755e-5,
    -0.00081619865,
    0.005204579,
    -0.0268617,
    0.11283754,
    -0.37612638,
];
/// `erfc x · e^(x²) ≈ ERFC_R(x - 2.5)` on `1 ≤ x ≤ 4`.
const ERFC_R: [f32; 13] = [
    1.0301513e-7,
    -4.2647343e-7,
    9.763902e-7,
    -3.7472737e-6,
    1.6114107e-5,
    -5.9523158e-5,
    0.00021091796,
    -0.00073315296,
    0.0024670658,
    -0.0080016935,
    0.024937995,
    -0.07434734,
    0.21080637,
];

fn erf<O: Ops<W32>>(o: &mut O, x: &O::F) -> O::F {
    let ax = o.abs(x);
    let ax = o.bind(ax);
    // |x| < 1
    let z = o.mul(x, x);
    let z = o.bind(z);
    let q = poly(o, &z, &ERF_Q);
    let t = o.mul(&z, &q);
    let t = addc(o, &t, TWO_OVER_SQRT_PI_M1);
    let t = o.mul(x, &t);
    let small = o.add(x, &t);
    let small = o.bind(small);
    // otherwise 1 - e^(-x²) · R(x - 2.5); erf(4) rounds to 1
    let xc = min_c(o, &ax, 4.0);
    let xc = o.bind(xc);
    let x2 = o.mul(&xc, &xc);
    let nx2 = o.neg(&x2);
    let nx2 = o.bind(nx2);
    let e = exp_core(o, &nx2);
    let e = o.bind(e);
    let u = addc(o, &xc, -2.5);
    let u = o.bind(u);
    let r = poly(o, &u, &ERFC_R);
    let er = o.mul(&e, &r);
    let one = o.cf(1.0);
    let l = o.sub(&one, &er);
    let l = o.bind(l);
    let neg = ltc(o, x, 0.0);
    let nl = o.neg(&l);
    let l = o.sel(&neg, &nl, &l);
    let is_small = ltc(o, &ax, 1.0);
    let r = o.sel(&is_small, &small, &l);
    let r = o.bind(r);
    // erf(-0) = -0
    let z0 = eqc(o, x, 0.0);
    o.sel(&z0, x, &r)
}

// ---- algorithms end ----

#[cfg(test)]
mod tests {
    //! The algorithms run natively (`Native` below, f32 arithmetic; `double`'s tests use
    //! it for f64) compute bit for bit what the interpreter computes on the emitted IR;
    //! `native_matches_ir` checks that, so the exhaustive native sweeps (`#[ignore]`d: run them with
    //! `cargo test -p kernelc-ir --release --lib passes::math -- --ignored --nocapture`)
    //! measure the pass's output.

    use super::*;
    use crate::interp::{run, Arg, HostBuffer};

    /// The native evaluator: runs the algorithms on Rust scalars of either width (one
    /// lane), bit for bit what the interpreter computes on the emitted IR.
    pub(super) struct Native;

    macro_rules! native_ops {
        ($w:ty, $f:ty, $i:ty, $u:ty) => {
            impl Ops<$w> for Native {
                type F = $f;
                type I = $i;
                type B = bool;
                fn cf(&mut self, v: $f) -> $f {
                    v
                }
                fn ci(&mut self, v: $i) -> $i {
                    v
                }
                fn add(&mut self, a: &$f, b: &$f) -> $f {
                    a + b
                }
                fn sub(&mut self, a: &$f, b: &$f) -> $f {
                    a - b
                }
                fn mul(&mut self, a: &$f, b: &$f) -> $f {
                    a * b
                }
                fn div(&mut self, a: &$f, b: &$f) -> $f {
                    a / b
                }
                fn neg(&mut self, a: &$f) -> $f {
                    -a
                }
                fn abs(&mut self, a: &$f) -> $f {
                    a.abs()
                }
                fn round(&mut self, a: &$f) -> $f {
                    a.round_ties_even()
                }
                fn lt(&mut self, a: &$f, b: &$f) -> bool {
                    a < b
                }
                fn gt(&mut self, a: &$f, b: &$f) -> bool {
                    a > b
                }
                fn ge(&mut self, a: &$f, b: &$f) -> bool {
                    a >= b
                }
                fn feq(&mut self, a: &$f, b: &$f) -> bool {
                    a == b
                }
                fn fne(&mut self, a: &$f, b: &$f) -> bool {
                    a != b
                }
                fn and(&mut self, a: &bool, b: &bool) -> bool {
                    *a & *b
                }
                fn or(&mut self, a: &bool, b: &bool) -> bool {
                    *a | *b
                }
                fn not(&mut self, a: &bool) -> bool {
                    !a
                }
                fn sel(&mut self, c: &bool, t: &$f, f: &$f) -> $f {
                    if *c {
                        *t
                    } else {
                        *f
                    }
                }
                fn iadd(&mut self, a: &$i, b: &$i) -> $i {
                    a.wrapping_add(*b)
                }
                fn isub(&mut self, a: &$i, b: &$i) -> $i {
                    a.wrapping_sub(*b)
                }
                fn iand(&mut self, a: &$i, b: &$i) -> $i {
                    a & b
                }
                fn shl(&mut self, a: &$i, n: u32) -> $i {
                    a.wrapping_shl(n)
                }
                fn shr(&mut self, a: &$i, n: u32) -> $i {
                    a.wrapping_shr(n)
                }
                fn ieq(&mut self, a: &$i, b: &$i) -> bool {
                    a == b
                }
                fn ilt(&mut self, a: &$i, b: &$i) -> bool {
                    a < b
                }
                fn isel(&mut self, c: &bool, t: &$i, f: &$i) -> $i {
                    if *c {
                        *t
                    } else {
                        *f
                    }
                }
                fn bits_of(&mut self, a: &$f) -> $i {
                    a.to_bits() as $i
                }
                fn float_of_bits(&mut self, a: &$i) -> $f {
                    <$f>::from_bits(*a as $u)
                }
                fn ftoi(&mut self, a: &$f) -> $i {
                    *a as $i
                }
                fn itof(&mut self, a: &$i) -> $f {
                    *a as $f
                }
                fn bind(&mut self, a: $f) -> $f {
                    a
                }
                fn bindi(&mut self, a: $i) -> $i {
                    a
                }
                fn bindb(&mut self, a: bool) -> bool {
                    a
                }
            }
        };
    }
    native_ops!(W32, f32, i32, u32);
    native_ops!(W64, f64, i64, u64);

    fn native(func: MathFn, x: f32, y: f32) -> f32 {
        expand_f32(&mut Native, func, &[x, y]).unwrap_or(f32::NAN)
    }

    /// The interpreter's reference: f64 evaluation rounded once.
    fn reference(func: MathFn, x: f32, y: f32) -> f32 {
        let (x, y) = (x as f64, y as f64);
        (match func {
            MathFn::Exp => x.exp(),
            MathFn::Exp2 => x.exp2(),
            MathFn::Log => x.ln(),
            MathFn::Log2 => x.log2(),
            MathFn::Tanh => x.tanh(),
            MathFn::Erf => libm::erf(x),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Pow => x.powf(y),
            _ => f64::NAN,
        }) as f32
    }

    /// Error in ULPs of `want` (subnormal ULP below the normal range); NaN and
    /// infinities must match exactly.
    fn ulps(got: f32, want: f32) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if want.is_infinite() || got.is_infinite() || got.is_nan() {
            return if got == want { 0.0 } else { f64::INFINITY };
        }
        let e = ((want.abs().to_bits() >> 23) as i32).max(1) - 127;
        ((got as f64) - (want as f64)).abs() / 2f64.powi(e - 23)
    }

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 32) as u32
        }
    }

    /// Checks that the IR [`expand_math`] emits for `func` (f32 or f64, as `W`), run by
    /// the interpreter on `xs` (and `ys`, `pow`'s exponents), validates and computes bit
    /// for bit (any NaN for a NaN) what `native` computes.
    pub(super) fn assert_native_matches_ir<W: Width>(
        func: MathFn,
        xs: &[W::Float],
        ys: &[W::Float],
        native: impl Fn(W::Float, W::Float) -> W::Float,
    ) where
        W::Float: Into<f64>,
    {
        let n = xs.len();
        let buffer = |v: &[W::Float]| {
            HostBuffer::new(W::FLOAT, v.iter().map(|&x| W::float_lit(x)).collect())
        };
        let mut k = crate::builder::KernelBuilder::new("t", [64, 1, 1]);
        let a = k.buffer("a", W::FLOAT, n as u64, Access::Read);
        let b = k.buffer("b", W::FLOAT, n as u64, Access::Read);
        let out = k.buffer("out", W::FLOAT, n as u64, Access::Write);
        let kernel = k
            .build(|body| {
                let i = body.let_("i", crate::builder::global_id(0));
                let mut args = vec![a.at(i.clone()).0];
                if func == MathFn::Pow {
                    args.push(b.at(i.clone()).0);
                }
                body.store(out, i, crate::builder::E(Expr::Math { func, args }));
            })
            .expect("valid");
        let expanded = expand_math(&kernel, &MathExpansion::all_transcendental_with_f64());
        crate::validate(&expanded).expect("expanded kernel validates");
        let mut args = vec![
            Arg::Buffer(buffer(xs)),
            Arg::Buffer(buffer(ys)),
            Arg::Buffer(HostBuffer::zeros(W::FLOAT, n)),
        ];
        run(&expanded, [(n / 64) as u32, 1, 1], &mut args).expect("runs");
        // Both widths widen to f64 exactly, so comparing f64 bits compares the results'.
        let got = args[2].as_buffer().expect("buffer").to_f64();
        for i in 0..n {
            let (x, y): (f64, f64) = (xs[i].into(), ys[i].into());
            let want: f64 = native(xs[i], ys[i]).into();
            assert!(
                got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan()),
                "{}({x:e}, {y:e}): IR {:e}, native {want:e}",
                func.name(),
                got[i],
            );
        }
    }

    #[test]
    fn native_matches_ir() {
        let n = 4096usize;
        let mut rng = Lcg(7);
        for func in MathExpansion::SUPPORTED {
            let xs: Vec<f32> = (0..n)
                .map(|i| match i % 3 {
                    0 => f32::from_bits(rng.next()),
                    1 => (rng.next() as f32 / u32::MAX as f32 - 0.5) * 40.0,
                    _ => (rng.next() as f32 / u32::MAX as f32) * 4.0,
                })
                .collect();
            let ys: Vec<f32> = (0..n)
                .map(|_| (rng.next() as f32 / u32::MAX as f32 - 0.5) * 60.0)
                .collect();
            assert_native_matches_ir::<W32>(func, &xs, &ys, |x, y| native(func, x, y));
        }
    }

    /// Max error of `func` over every f32 whose bits lie in `[lo, hi]`, both signs.
    fn sweep(func: MathFn, lo: f32, hi: f32) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for bits in lo.to_bits()..=hi.to_bits() {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                let e = ulps(native(func, x, 0.0), reference(func, x, 0.0));
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        }
        eprintln!(
            "{}: every |x| in [{lo:e}, {hi:e}]: max {} ulp at {:e}",
            func.name(),
            worst.0,
            worst.1
        );
        worst
    }

    #[test]
    #[ignore = "exhaustive: ~2^32 inputs per function (tens of minutes in release mode)"]
    fn exhaustive_unary() {
        let all = (0.0, f32::INFINITY);
        for (func, (lo, hi)) in [
            (MathFn::Exp, (0.0, 110.0)),
            (MathFn::Exp2, (0.0, 160.0)),
            (MathFn::Log, all),
            (MathFn::Log2, all),
            (MathFn::Tanh, all),
            (MathFn::Erf, all),
            (MathFn::Sin, (0.0, 102_900.0)),
            (MathFn::Cos, (0.0, 102_900.0)),
        ] {
            let (e, x) = sweep(func, lo, hi);
            assert!(e <= 1.0, "{}: {e} ulp at {x:e}", func.name());
        }
    }

    #[test]
    #[ignore = "slow (tens of millions of random pairs)"]
    fn random_pow() {
        let mut rng = Lcg(11);
        let mut unit = move || rng.next() as f64 / u32::MAX as f64;
        let mut worst = (0.0, 0.0, 0.0);
        for i in 0..20_000_000u32 {
            let (x, y) = if i % 2 == 0 {
                // the brief's range: x in (0, 1e6], y in [-30, 30]
                (
                    (unit() * 168.9 - 149.0).exp2() as f32,
                    (unit() * 60.0 - 30.0) as f32,
                )
            } else {
                // any base, |y·log2 x| up to 128 (|y| up to ~250 near x = 1.4)
                let x = f32::from_bits((unit() * 2_139_095_039.0) as u32);
                let t = unit() * 278.0 - 150.0;
                (x, (t / (x as f64).log2()) as f32)
            };
            let want = reference(MathFn::Pow, x, y);
            if !(want.is_finite() && want.abs() >= f32::MIN_POSITIVE) {
                continue;
            }
            let e = ulps(native(MathFn::Pow, x, y), want);
            if e > worst.0 {
                worst = (e, x, y);
            }
        }
        eprintln!("pow: max {} ulp at ({:e}, {:e})", worst.0, worst.1, worst.2);
        assert!(worst.0 <= 8.0);
    }
}
