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
//! single rounding would cost accuracy; error-free products use `fma` (`fma` calls
//! appear in the output), or on a target whose `fma` rounds twice
//! ([`MathExpansion::fused_fma`] off) an emulation from Dekker's product and TwoSum,
//! which gives the same bounds (`accuracy_random_samples_with_emulated_fma`). Divisions: one
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

use super::with_body;
use crate::kernel::*;
use crate::ScalarType;
use expander::Expander;
use std::collections::HashSet;

mod double;
mod emit;
mod expander;
mod fmod;
#[cfg(test)]
mod native;
mod shared;
mod single;
mod width;

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
    /// Whether the target's `fma` rounds once. When not (llvmpipe computes it as a
    /// multiply and an add), the f64 algorithms, which need exact products, compute
    /// their `fma`s from Dekker's product and TwoSum instead (module `double`). An
    /// op's own `fma` calls are left to the target.
    pub fused_fma: bool,
    /// Whether the target's compiler may apply inexact algebra to float arithmetic
    /// (reassociate, fold `(a + b) − a` to `b`): WGSL and naga's SPIR-V cannot mark
    /// an operation exact. The error-free sums (TwoSum, Fast2Sum) then read their sum
    /// through an opaque value, `bits(s) | z` with `z = (num_workgroups.x == 0)`,
    /// always 0 but unknown to the compiler, so no algebra reaches across it; so do
    /// f64 `log1p`'s exact `2 + f` split and the emulated `fma`'s rounded product.
    pub opaque_sums: bool,
    /// Whether f32 `exp2` stays the target's own, which must be within 2 ULP
    /// (NVPTX's `ex2.approx.f32`, CUDA's `exp2f`: one special-function instruction
    /// against some 30 of the expansion). f16, bf16 and f64 calls follow the rest.
    pub native_exp2_f32: bool,
    /// Whether the target runs matrix fragments itself (tensor cores). When not,
    /// [`for_target`](crate::passes::for_target) expands them into plain code
    /// ([`expand_fragments`](crate::passes::expand_fragments)) first.
    pub native_fragments: bool,
    /// Whether it also runs warpgroup fragments (the `m64` shapes: Hopper's `wgmma`).
    /// A kernel with them on a target that runs only warp fragments is expanded
    /// whole.
    pub native_warpgroup_fragments: bool,
    /// Whether it also runs f64 fragments of m16n8k16 (Hopper's DMMA shape). A
    /// kernel with them on a target that lacks it is expanded whole.
    pub native_f64_m16_fragments: bool,
    /// Whether the target runs asynchronous copies itself (`cp.async`). When not,
    /// [`for_target`](crate::passes::for_target) expands them into loads and stores
    /// ([`expand_async_copies`](crate::passes::expand_async_copies)) first.
    pub native_async_copies: bool,
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
            fused_fma: true,
            opaque_sums: false,
            native_exp2_f32: false,
            native_fragments: false,
            native_warpgroup_fragments: false,
            native_f64_m16_fragments: false,
            native_async_copies: false,
        }
    }

    /// The same selection, for a target that runs asynchronous copies itself (`true`)
    /// or needs them expanded.
    pub fn with_native_async_copies(self, native_async_copies: bool) -> Self {
        MathExpansion {
            native_async_copies,
            ..self
        }
    }

    /// The same selection, for a target that runs matrix fragments itself (`true`)
    /// or needs them expanded.
    pub fn with_native_fragments(self, native_fragments: bool) -> Self {
        MathExpansion {
            native_fragments,
            ..self
        }
    }

    /// The same selection, for a target that runs warpgroup fragments itself (with
    /// [`MathExpansion::with_native_fragments`]).
    pub fn with_native_warpgroup_fragments(self, native_warpgroup_fragments: bool) -> Self {
        MathExpansion {
            native_warpgroup_fragments,
            ..self
        }
    }

    /// The same selection, for a target that runs f64 fragments of m16n8k16 itself
    /// (with [`MathExpansion::with_native_fragments`]).
    pub fn with_native_f64_m16_fragments(self, native_f64_m16_fragments: bool) -> Self {
        MathExpansion {
            native_f64_m16_fragments,
            ..self
        }
    }

    /// Whether `kernel`'s fragments (if any) stay for the target to run.
    pub fn runs_fragments_of(&self, kernel: &crate::Kernel) -> bool {
        let warpgroups = kernel.fragments.iter().any(|f| f.shape.is_warpgroup());
        let f64_m16 = kernel.fragments.iter().any(|f| f.is_f64_m16());
        self.native_fragments
            && (self.native_warpgroup_fragments || !warpgroups)
            && (self.native_f64_m16_fragments || !f64_m16)
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

    /// The same selection, for a target whose `fma` rounds once (`true`) or twice.
    pub fn with_fused_fma(self, fused_fma: bool) -> Self {
        MathExpansion { fused_fma, ..self }
    }

    /// The same selection, for a target whose compiler may (`true`) or may not
    /// reassociate float arithmetic.
    pub fn with_opaque_sums(self, opaque_sums: bool) -> Self {
        MathExpansion {
            opaque_sums,
            ..self
        }
    }

    /// Keeps f32 `exp2` native ([`MathExpansion::native_exp2_f32`]).
    pub fn with_native_exp2_f32(self, native_exp2_f32: bool) -> Self {
        MathExpansion {
            native_exp2_f32,
            ..self
        }
    }

    /// Whether the pass would leave every kernel as it is.
    pub fn expands_nothing(&self) -> bool {
        !self.float_rem && !Self::SUPPORTED.iter().any(|&f| self.expands(f))
    }

    /// Whether calls of `func` are expanded (of some type).
    pub fn expands(&self, func: MathFn) -> bool {
        self.funcs.contains(&func) && Self::SUPPORTED.contains(&func)
    }

    /// Whether a call of `func` on `scalar` values is expanded: f32, f16 and bf16
    /// calls of the selected functions (but f32 `exp2` with
    /// [`native_exp2_f32`](MathExpansion::native_exp2_f32)), f64 ones with
    /// [`f64`](MathExpansion::f64). What an emitter refuses to see unexpanded.
    pub fn expands_call(&self, func: MathFn, scalar: ScalarType) -> bool {
        self.expands(func)
            && match scalar {
                ScalarType::F32 => !(func == MathFn::Exp2 && self.native_exp2_f32),
                ScalarType::F16 | ScalarType::Bf16 => true,
                ScalarType::F64 => self.f64,
                ScalarType::I32
                | ScalarType::U32
                | ScalarType::I64
                | ScalarType::Bool
                | ScalarType::U8
                | ScalarType::I8
                | ScalarType::U16
                | ScalarType::I16 => false,
            }
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
        expanded: Vec::new(),
    };
    let body = x.block(&kernel.body);
    let mut out = x.kernel;
    out.body = body;
    out
}
