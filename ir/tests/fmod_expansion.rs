//! Float `%` expanded to kernelc's exact integer long division
//! (`MathExpansion::float_rem`): bit for bit what the interpreter computes for the
//! unexpanded `%` (C `fmod`, Rust's `%`), on every pair of special values and on
//! random pairs of every magnitude, for f32 scalars and vectors, f16 and f64.
//! (`codegen/tests/cpu.rs` runs the expansion JIT-compiled on millions of pairs.)

use half::f16;
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer};
use kernelc_ir::passes::{expand_math, for_target, MathExpansion};
use kernelc_ir::ScalarType::{self, F32};
use kernelc_ir::{validate, Access, Kernel};

mod common;
use common::Rng;

const WG: u32 = 64;

/// `out[i] = a[i] % b[i]` over `n` elements of `ty`, `lanes` per invocation.
fn rem_kernel(ty: ScalarType, n: usize, lanes: u8) -> Kernel {
    let mut k = KernelBuilder::new("rem", [WG, 1, 1]);
    let a = k.buffer("a", ty, n as u64, Access::Read);
    let b = k.buffer("b", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, n as u64, Access::Write);
    k.build(|body| {
        let i = body.let_("i", global_id(0) * lanes as u32);
        body.if_(i.clone().lt(n as u32), |body| {
            // Loads as operands (not locals): the pass must bind them whole.
            body.store(
                out,
                i.clone(),
                a.load(i.clone(), lanes) % b.load(i.clone(), lanes),
            );
        });
    })
    .expect("test kernel must validate")
}

fn expanded(kernel: &Kernel) -> Kernel {
    let opts = MathExpansion::none().with_float_rem(true);
    let out = expand_math(kernel, &opts);
    if let Err(e) = validate(&out) {
        panic!("expanded kernel does not validate: {e}\n{out}");
    }
    out
}

fn run_rem(kernel: &Kernel, a: &HostBuffer, b: &HostBuffer, lanes: u8) -> HostBuffer {
    let groups = a.len().div_ceil(WG as usize * lanes as usize) as u32;
    let mut args = vec![
        Arg::Buffer(a.clone()),
        Arg::Buffer(b.clone()),
        Arg::Buffer(HostBuffer::zeros(a.elem, a.len())),
    ];
    run(kernel, [groups, 1, 1], &mut args).expect("kernel must run");
    args.pop()
        .and_then(Arg::into_buffer)
        .expect("output buffer")
}

/// The expanded kernel gives the unexpanded kernel's bits (any NaN for a NaN).
fn assert_same_as_native(a: HostBuffer, b: HostBuffer, lanes: u8) {
    let kernel = rem_kernel(a.elem, a.len(), lanes);
    let want = run_rem(&kernel, &a, &b, lanes);
    let got = run_rem(&expanded(&kernel), &a, &b, lanes);
    for i in 0..a.len() {
        let (g, w) = (got.data[i], want.data[i]);
        let both_nan = g.to_f64().is_nan() && w.to_f64().is_nan();
        assert!(
            g == w || both_nan,
            "{:?} % {:?}: expanded {g:?}, native {w:?}",
            a.data[i],
            b.data[i]
        );
    }
}

fn special_f32() -> Vec<f32> {
    let base = [
        0.0,
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::from_bits(0x0040_0001),
        f32::MIN_POSITIVE,
        1e-30,
        0.1,
        0.75,
        1.0,
        1.5,
        3.0,
        std::f32::consts::PI,
        7.0,
        1e10,
        16_777_217.0,
        f32::MAX,
        f32::INFINITY,
        f32::NAN,
    ];
    base.iter().flat_map(|&v| [v, -v]).collect()
}

/// Every ordered pair of `values`, as the two operand lists.
fn all_pairs<T: Copy>(values: &[T]) -> (Vec<T>, Vec<T>) {
    let a = values.iter().flat_map(|&x| values.iter().map(move |_| x));
    let b = values.iter().flat_map(|_| values.iter().copied());
    (a.collect(), b.collect())
}

/// Every pair of special values, then `random` pairs of random bits (every exponent
/// difference, most of them large) and `random` pairs of nearby magnitudes.
fn f32_pairs(random: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut a, mut b) = all_pairs(&special_f32());
    // The longest divisions with a nonzero remainder (the two largest values over
    // the smallest subnormals that are not powers of two): one step fewer than the
    // loop's bound allows gives another remainder.
    for x in [f32::MAX, f32::from_bits(0x7f7f_fffe)] {
        for bits in [3, 11] {
            a.extend([x, -x]);
            b.extend([f32::from_bits(bits), f32::from_bits(bits)]);
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..random {
        a.push(f32::from_bits(rng.next() as u32));
        b.push(f32::from_bits(rng.next() as u32));
        let x = f32::from_bits(rng.next() as u32 & 0x4fff_ffff);
        let scale = 1.0 + (rng.next() % 1000) as f32 / 7.0;
        a.push(x * scale);
        b.push(x);
    }
    (a, b)
}

#[test]
fn f32_scalar_matches_fmod_bit_for_bit() {
    let (a, b) = f32_pairs(4000);
    assert_same_as_native(HostBuffer::from_f32(&a), HostBuffer::from_f32(&b), 1);
}

#[test]
fn f32_vectors_match_lane_by_lane() {
    let (mut a, mut b) = f32_pairs(500);
    while a.len() % 4 != 0 {
        a.push(5.5);
        b.push(2.0);
    }
    assert_same_as_native(HostBuffer::from_f32(&a), HostBuffer::from_f32(&b), 4);
}

#[test]
fn f16_is_computed_in_f32_and_narrowed_exactly() {
    let (a, b) = f32_pairs(500);
    let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    assert_same_as_native(
        HostBuffer::from_f16(&half(&a)),
        HostBuffer::from_f16(&half(&b)),
        1,
    );
}

#[test]
fn f64_matches_fmod_bit_for_bit() {
    let mut special: Vec<f64> = special_f32().iter().map(|&v| v as f64).collect();
    special.extend([
        f64::from_bits(1),
        f64::MIN_POSITIVE,
        f64::MAX,
        -f64::MAX,
        1e300,
        1e-300,
    ]);
    let (mut a, mut b) = all_pairs(&special);
    for x in [f64::MAX, f64::from_bits(0x7fef_ffff_ffff_fffe)] {
        for bits in [3, 11] {
            a.extend([x, -x]);
            b.extend([f64::from_bits(bits), f64::from_bits(bits)]);
        }
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..600 {
        a.push(f64::from_bits(rng.next()));
        b.push(f64::from_bits(rng.next()));
        let x = f64::from_bits(rng.next() & 0x4fff_ffff_ffff_ffff);
        a.push(x * (1.0 + (rng.next() % 100_000) as f64 / 3.0));
        b.push(x);
    }
    assert_same_as_native(HostBuffer::from_f64(&a), HostBuffer::from_f64(&b), 1);
}

/// The expansion leaves no float `%` behind, keeps integer `%`, is idempotent, and
/// does nothing when not selected.
#[test]
fn the_pass_replaces_float_rem_only() {
    fn has_float_rem(kernel: &Kernel) -> bool {
        format!("{kernel}").contains(" % ")
    }
    let float = rem_kernel(F32, 100, 1);
    let once = expanded(&float);
    assert!(has_float_rem(&float) && !has_float_rem(&once), "{once}");
    assert_eq!(expanded(&once), once);
    assert_eq!(
        expand_math(&float, &MathExpansion::all_transcendental()),
        float
    );
    let int = rem_kernel(ScalarType::I32, 100, 1);
    assert_eq!(expanded(&int), int);
}

/// A `%` before a barrier: the expansion's loop runs a different number of steps in
/// each invocation, and the barrier after it must still be in uniform control flow.
#[test]
fn a_barrier_after_an_expanded_rem_stays_valid_and_correct() {
    let n = WG;
    let mut k = KernelBuilder::new("rem_then_barrier", [WG, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let out = k.buffer("out", F32, n as u64, Access::Write);
    let sh = k.shared("sh", F32, WG);
    let kernel = k
        .build(|body| {
            let i = body.let_("i", local_id(0));
            body.store(sh, i.clone(), a.at(i.clone()) % b.at(i.clone()));
            body.barrier();
            // Each invocation reads its neighbour's remainder.
            let j = body.let_("j", (i.clone() + 1u32) % WG);
            body.store(out, i, sh.at(j));
        })
        .expect("test kernel must validate");
    let (x, y) = f32_pairs(WG as usize);
    let (x, y) = (&x[..n as usize], &y[x.len() - n as usize..]);
    let (a, b) = (HostBuffer::from_f32(x), HostBuffer::from_f32(y));
    let want = run_rem(&kernel, &a, &b, 1);
    let got = run_rem(&expanded(&kernel), &a, &b, 1);
    for i in 0..n as usize {
        let (g, w) = (got.data[i].to_f64(), want.data[i].to_f64());
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{i}: {g} vs {w}"
        );
    }
}

/// `for_target` with float `%` as the only expansion expands it (it once returned the
/// kernel unexpanded when no function was selected).
#[test]
fn for_target_expands_float_rem_alone() {
    let kernel = rem_kernel(F32, 100, 1);
    let only_rem = MathExpansion::none().with_float_rem(true);
    assert!(!only_rem.expands_nothing() && MathExpansion::none().expands_nothing());
    let out = for_target(&kernel, &only_rem);
    assert!(!format!("{out}").contains(" % "), "{out}");
    assert_eq!(
        for_target(&kernel, &MathExpansion::none()),
        for_target(&kernel, &MathExpansion::none().with_float_rem(false))
    );
}

/// `%` wherever an expression may stand: a loop body, an `if` condition, a `for` bound,
/// a math call's argument, and nested in another `%`; bf16 and 2-lane vectors.
#[test]
fn rem_in_every_position_and_type_matches_native() {
    let n = 64u32;
    let mut k = KernelBuilder::new("rem_everywhere", [WG, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let out = k.buffer("out", F32, n as u64, Access::Write);
    let kernel = k
        .build(|body| {
            let i = body.let_("i", global_id(0));
            body.if_(i.clone().lt(n), |body| {
                let x = a.at(i.clone());
                let y = b.at(i.clone());
                // Nested, and as a math argument.
                let nested = (x.clone() % y.clone()) % (y.clone() % 0.75f32);
                let acc = body.var("acc", nested.abs());
                // In an `if` condition and a loop bound.
                body.if_((x.clone() % 2.0f32).gt(0.5f32), |body| {
                    body.assign(acc, acc.get() + 1.0f32);
                });
                let trips = (y.clone().abs() % 4.0f32).cast(ScalarType::U32);
                body.for_("t", 0u32, trips, 1, |body, _| {
                    // In a loop body.
                    body.assign(acc, acc.get() + (x.clone() % 1.5f32));
                });
                // bf16 and a 2-lane vector.
                let h =
                    (x.clone().cast(ScalarType::Bf16) % y.clone().cast(ScalarType::Bf16)).cast(F32);
                let v = vector([x.clone(), y.clone()]) % vector([y.clone(), 0.3f32.into()]);
                body.store(
                    out,
                    i.clone(),
                    acc.get() + h + v.clone().lane(0) - v.lane(1),
                );
            });
        })
        .expect("test kernel must validate");
    let (x, y) = f32_pairs(n as usize);
    let (x, y) = (&x[x.len() - n as usize..], &y[y.len() - n as usize..]);
    // Keep the values finite and moderate so the sums compare exactly.
    let tame = |v: &[f32]| {
        v.iter()
            .map(|&z| if z.is_finite() { z % 1000.0 } else { 3.25 })
            .collect::<Vec<_>>()
    };
    let (a, b) = (
        HostBuffer::from_f32(&tame(x)),
        HostBuffer::from_f32(&tame(y)),
    );
    let want = run_rem(&kernel, &a, &b, 1);
    let once = expanded(&kernel);
    assert!(!format!("{once}").contains(" % "), "{once}");
    let got = run_rem(&once, &a, &b, 1);
    for i in 0..n as usize {
        let (g, w) = (got.data[i].to_f64(), want.data[i].to_f64());
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{i}: {g} vs {w}"
        );
    }
}
