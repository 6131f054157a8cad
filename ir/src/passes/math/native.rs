//! The native evaluator the tests run the algorithms with, and the check that it
//! computes what the interpreter computes on the emitted IR.

use super::width::{Ops, Width, W32, W64};
use super::{expand_math, MathExpansion};
use crate::interp::{run, Arg, HostBuffer};
use crate::kernel::*;

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

/// Checks that the IR [`expand_math`] emits for `func` (f32 or f64, as `W`), run by
/// the interpreter on `xs` (and `ys`, `pow`'s exponents), validates and computes bit
/// for bit (any NaN for a NaN) what `native` computes.
pub(super) fn assert_native_matches_ir<W: Width>(
    expansion: &MathExpansion,
    func: MathFn,
    xs: &[W::Float],
    ys: &[W::Float],
    native: impl Fn(W::Float, W::Float) -> W::Float,
) where
    W::Float: Into<f64>,
{
    let n = xs.len();
    let buffer =
        |v: &[W::Float]| HostBuffer::new(W::FLOAT, v.iter().map(|&x| W::float_lit(x)).collect());
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
    let expanded = expand_math(&kernel, expansion);
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

/// The interpreter's reference for `func(x, y)` (`y` only for `pow`): Rust's `f64`
/// functions (`libm::erf` for `erf`); an f32 call is this rounded once.
pub(super) fn reference(func: MathFn, x: f64, y: f64) -> f64 {
    match func {
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
    }
}
