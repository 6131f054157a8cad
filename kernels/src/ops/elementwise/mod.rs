//! The elementwise family: `unary`, `activation_backward`, `binary`, `scalar`,
//! `where`, `cast`, `fill`.
//!
//! * unary: `y_i = f(x_i)` with `f` one of
//!   `−x, |x|, √x, 1/√x, eˣ, ln x, sin, cos, tan, ⌊x⌋, ⌈x⌉, round-half-even(x)` or an
//!   activation (below).
//! * binary: `out[i] = f(a[bcast(i)], b[bcast(i)])` under NumPy broadcasting (shapes
//!   aligned on the right, size-1 dimensions repeated), with `f` one of
//!   `a+b, a−b, a·b, a/b, fmod(a,b), aᵇ, maxNum, minNum, =, ≠, <, ≤, >, ≥, silu(a)·b`
//!   (`silu(a)` rounded to the compute type before the product, in the kernel and the
//!   reference alike).
//!   Floats: IEEE in f64; `maxNum`/`minNum` ignore a NaN operand unless both are NaN;
//!   comparisons are 1/0, false on NaN except `≠`. Integers (`i32`, `u32`): wrapping
//!   `+ − ·`, `/` truncating toward zero, `%` with the dividend's sign, and `/ 0`,
//!   `% 0` giving 0.
//! * scalar: `y_i = f(x_i, s)` (or `f(s, x_i)` when reversed).
//! * where: `out[i] = cond[i] ≠ 0 ? a[i] : b[i]` (NaN is true), three-way broadcast.
//! * cast: int → int wraps (two's complement truncation: i32 −1 → u32 4294967295);
//!   float → int truncates toward zero and saturates (NaN → 0); → f32/f16/bf16 rounds
//!   once to nearest even; → bool is `x ≠ 0`.
//! * fill: a constant (cast to the dtype), `low + (high − low)·u_i`, or
//!   `mean + std·z_i` with `u_i`, `z_i` from [`crate::rng`].
//!
//! **Activations** and their backward (`activation_backward`):
//!
//! | function | `f(x)` | `f'` as used by the backward (`dx = f' · dy`) |
//! | --- | --- | --- |
//! | ReLU | `max(0, x)` | `x > 0 ? 1 : 0` (from `x`) |
//! | leaky ReLU | `x > 0 ? x : slope·x` | `x > 0 ? 1 : slope` (from `x`) |
//! | sigmoid | `σ(x) = 1/(1 + e^{−x})` | `y(1 − y)` (from `y`) |
//! | tanh | `tanh x` | `1 − y²` (from `y`) |
//! | GELU (erf) | `x·Φ(x) = ½x(1 + erf(x/√2))` | `Φ(x) + x·φ(x)`, `φ(x) = e^{−x²/2}/√(2π)` (from `x`) |
//! | GELU (tanh) | `½x(1 + tanh u)`, `u = √(2/π)(x + 0.044715x³)` | `½(1 + tanh u) + ½x(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²)` (from `x`) |
//! | SiLU | `x·σ(x)` | `σ(x)(1 + x(1 − σ(x)))` (from `x`) |
//!
//! `gelu_erf(1) = 0.8413447460685429`, `gelu_tanh(1) = 0.8411919906082768`.

mod cases;
mod condition;
mod fused;
mod fusion;
mod hardswish;
mod lower;
pub(crate) mod reference;
mod softplus;
mod spec;

pub use fused::{FusedNode, FusedSpec};
pub use hardswish::HardswishSpec;
pub use softplus::SoftplusSpec;
pub use spec::*;

pub(crate) use condition::activation_terms;
pub(crate) use fusion::{
    check_epilogue, check_prologue, epilogue_after, epilogue_inputs, epilogue_uniforms,
    materialized, materialized_with_epilogue, prologue_error, row_op_inputs, row_op_uniforms,
    Epilogue, XSource,
};
pub(crate) use lower::activation_value;
pub(crate) use reference::apply_activation;
