//! Run-time helper functions that compiled kernels call.
//!
//! Transcendental math, float remainders and the f64 -> f16/bf16 conversions are not
//! emitted inline: the kernel calls these `extern "C"` functions, which compute exactly
//! what `kernelc_ir::eval` (the interpreter) computes, by the same Rust code:
//!
//! * f32 functions evaluate in f64 and round once (`f64::exp(x as f64) as f32`), f64
//!   functions call the f64 function directly; `erf` is `libm::erf`.
//! * `fmod` is Rust's `%` on floats (C `fmod`).
//! * `f64 -> f16` and `f64 -> bf16` call the `half` crate, because its result depends
//!   on the host (with F16C it rounds through f32, without it truncates the low
//!   mantissa bits first), and the interpreter uses `half`.
//!
//! The JIT binds them by address. In an object file they are undefined symbols (see
//! [`HELPERS`] for names and C signatures); the functions are also exported under the
//! same names (`#[no_mangle]`), so a binary that links this crate provides them.

use cranelift_codegen::ir::types;
use cranelift_codegen::ir::Type as ClifType;

/// One helper: its symbol, its address, and its C signature (parameter and return
/// types; all are passed by value in registers).
#[derive(Clone, Copy, Debug)]
pub struct Helper {
    /// The symbol name.
    pub name: &'static str,
    pub(crate) ptr: *const u8,
    pub params: &'static [ClifType],
    pub ret: ClifType,
}

// SAFETY: `ptr` is the address of a plain `extern "C"` function with no state; sharing
// or sending the address between threads is harmless.
unsafe impl Send for Helper {}
// SAFETY: as above; `Helper` is immutable.
unsafe impl Sync for Helper {}

/// The helpers a kernel may call, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum HelperId {
    Unary32(UnaryFn),
    Unary64(UnaryFn),
    Pow32,
    Pow64,
    Fmod32,
    Fmod64,
    F64ToF16,
    F64ToBf16,
}

/// The transcendental functions computed by helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum UnaryFn {
    Exp,
    Exp2,
    Log,
    Log2,
    Tanh,
    Erf,
    Sin,
    Cos,
}

const F32_1: &[ClifType] = &[types::F32];
const F64_1: &[ClifType] = &[types::F64];
const F32_2: &[ClifType] = &[types::F32, types::F32];
const F64_2: &[ClifType] = &[types::F64, types::F64];

macro_rules! unary_helpers {
    ($($name32:ident, $name64:ident => $f:expr;)*) => {$(
        /// Helper for compiled kernels (see the module documentation).
        #[no_mangle]
        pub extern "C" fn $name32(x: f32) -> f32 {
            let f: fn(f64) -> f64 = $f;
            f(x as f64) as f32
        }
        /// Helper for compiled kernels (see the module documentation).
        #[no_mangle]
        pub extern "C" fn $name64(x: f64) -> f64 {
            let f: fn(f64) -> f64 = $f;
            f(x)
        }
    )*};
}

unary_helpers! {
    kernelc_cpu_exp_f32, kernelc_cpu_exp_f64 => f64::exp;
    kernelc_cpu_exp2_f32, kernelc_cpu_exp2_f64 => f64::exp2;
    kernelc_cpu_log_f32, kernelc_cpu_log_f64 => f64::ln;
    kernelc_cpu_log2_f32, kernelc_cpu_log2_f64 => f64::log2;
    kernelc_cpu_tanh_f32, kernelc_cpu_tanh_f64 => f64::tanh;
    kernelc_cpu_erf_f32, kernelc_cpu_erf_f64 => libm::erf;
    kernelc_cpu_sin_f32, kernelc_cpu_sin_f64 => f64::sin;
    kernelc_cpu_cos_f32, kernelc_cpu_cos_f64 => f64::cos;
}

/// `pow` for f32, evaluated in f64 and rounded once.
#[no_mangle]
pub extern "C" fn kernelc_cpu_pow_f32(x: f32, y: f32) -> f32 {
    (x as f64).powf(y as f64) as f32
}

/// `pow` for f64.
#[no_mangle]
pub extern "C" fn kernelc_cpu_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// Float remainder with the sign of the dividend (C `fmodf`).
#[no_mangle]
pub extern "C" fn kernelc_cpu_fmod_f32(x: f32, y: f32) -> f32 {
    x % y
}

/// Float remainder with the sign of the dividend (C `fmod`).
#[no_mangle]
pub extern "C" fn kernelc_cpu_fmod_f64(x: f64, y: f64) -> f64 {
    x % y
}

/// f64 to f16 bits (in the low 16 bits of the result), rounded once as the IR defines.
#[no_mangle]
pub extern "C" fn kernelc_cpu_f64_to_f16(x: f64) -> u32 {
    kernelc_ir::scalar::f64_to_f16_bits(x) as u32
}

/// f64 to bf16 bits (in the low 16 bits of the result), rounded once as the IR defines.
#[no_mangle]
pub extern "C" fn kernelc_cpu_f64_to_bf16(x: f64) -> u32 {
    kernelc_ir::scalar::f64_to_bf16_bits(x) as u32
}

macro_rules! helper {
    ($name:ident, $params:expr, $ret:expr) => {
        Helper {
            name: stringify!($name),
            ptr: $name as *const u8,
            params: $params,
            ret: $ret,
        }
    };
}

/// Every helper a kernel may import, with its symbol and C signature.
pub static HELPERS: [Helper; 22] = [
    helper!(kernelc_cpu_exp_f32, F32_1, types::F32),
    helper!(kernelc_cpu_exp2_f32, F32_1, types::F32),
    helper!(kernelc_cpu_log_f32, F32_1, types::F32),
    helper!(kernelc_cpu_log2_f32, F32_1, types::F32),
    helper!(kernelc_cpu_tanh_f32, F32_1, types::F32),
    helper!(kernelc_cpu_erf_f32, F32_1, types::F32),
    helper!(kernelc_cpu_sin_f32, F32_1, types::F32),
    helper!(kernelc_cpu_cos_f32, F32_1, types::F32),
    helper!(kernelc_cpu_exp_f64, F64_1, types::F64),
    helper!(kernelc_cpu_exp2_f64, F64_1, types::F64),
    helper!(kernelc_cpu_log_f64, F64_1, types::F64),
    helper!(kernelc_cpu_log2_f64, F64_1, types::F64),
    helper!(kernelc_cpu_tanh_f64, F64_1, types::F64),
    helper!(kernelc_cpu_erf_f64, F64_1, types::F64),
    helper!(kernelc_cpu_sin_f64, F64_1, types::F64),
    helper!(kernelc_cpu_cos_f64, F64_1, types::F64),
    helper!(kernelc_cpu_pow_f32, F32_2, types::F32),
    helper!(kernelc_cpu_pow_f64, F64_2, types::F64),
    helper!(kernelc_cpu_fmod_f32, F32_2, types::F32),
    helper!(kernelc_cpu_fmod_f64, F64_2, types::F64),
    helper!(kernelc_cpu_f64_to_f16, F64_1, types::I32),
    helper!(kernelc_cpu_f64_to_bf16, F64_1, types::I32),
];

impl UnaryFn {
    fn index(self) -> usize {
        match self {
            UnaryFn::Exp => 0,
            UnaryFn::Exp2 => 1,
            UnaryFn::Log => 2,
            UnaryFn::Log2 => 3,
            UnaryFn::Tanh => 4,
            UnaryFn::Erf => 5,
            UnaryFn::Sin => 6,
            UnaryFn::Cos => 7,
        }
    }
}

impl HelperId {
    /// The helper's entry in [`HELPERS`].
    pub(crate) fn helper(self) -> &'static Helper {
        let index = match self {
            HelperId::Unary32(f) => f.index(),
            HelperId::Unary64(f) => 8 + f.index(),
            HelperId::Pow32 => 16,
            HelperId::Pow64 => 17,
            HelperId::Fmod32 => 18,
            HelperId::Fmod64 => 19,
            HelperId::F64ToF16 => 20,
            HelperId::F64ToBf16 => 21,
        };
        &HELPERS[index]
    }
}
