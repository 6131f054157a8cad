//! The CPU tests' harness, shared by both tiers' test files (tests/cpu.rs for
//! Cranelift, tests/cpu_llvm.rs for LLVM): each defines `compile` at its root, which
//! everything here calls. The conversion tests take whether NaNs must agree bit for
//! bit (Cranelift's do; LLVM's keep a signalling NaN signalling, which is allowed).
#![allow(dead_code)] // Each tier's file uses part of it.

use half::{bf16, f16};
use kernelc_codegen::cpu::{AlignedBytes, CpuArg, CpuKernel, LaunchError};
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer};
use kernelc_ir::testing::{self, same_value};
use kernelc_ir::{Access, Kernel, Scalar, ScalarType, Type};
use ScalarType::{Bf16, F16, F32, F64};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

/// A small deterministic generator.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58476d1ce4e5b9) ^ (x >> 32)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 16) as u32
    }
    pub fn f32(&mut self) -> f32 {
        (self.next_u32() as f32 / (1u64 << 31) as f32) - 1.0
    }
}

/// Runs `kernel` on the interpreter and (with 1 and with 2 threads) on the JIT, and
/// checks that every buffer agrees. Returns the interpreter's arguments after the run.
pub fn check(kernel: &Kernel, grid: [u32; 3], args: &[Arg]) -> Vec<Arg> {
    let mut want = args.to_vec();
    if let Err(e) = run(kernel, grid, &mut want) {
        panic!("interpreter failed: {e}\n{kernel}");
    }
    let compiled = crate::compile(kernel);
    for threads in [1, 2] {
        let mut got = args.to_vec();
        if let Err(e) = launch_host_threads(&compiled, grid, &mut got, threads) {
            panic!("JIT launch failed: {e}\n{kernel}");
        }
        compare(kernel, &want, &got, args);
    }
    want
}

pub fn launch_host_threads(
    k: &CpuKernel,
    grid: [u32; 3],
    args: &mut [Arg],
    threads: usize,
) -> Result<(), LaunchError> {
    if threads == 0 {
        return k.launch_host(grid, args);
    }
    let mut storage: Vec<Option<AlignedBytes>> = args
        .iter()
        .map(|a| a.as_buffer().map(AlignedBytes::from_host))
        .collect();
    let mut cpu_args: Vec<CpuArg<'_>> = storage
        .iter_mut()
        .zip(args.iter())
        .map(|(st, a)| match (st, a) {
            (Some(bytes), Arg::Buffer(b)) => CpuArg::buffer(b.elem, bytes.as_mut_bytes()),
            (_, Arg::Scalar(s)) => CpuArg::Scalar(*s),
            _ => unreachable!(),
        })
        .collect();
    let r = k.launch_with_threads(grid, &mut cpu_args, threads);
    drop(cpu_args);
    for (st, a) in storage.iter().zip(args.iter_mut()) {
        if let (Some(bytes), Arg::Buffer(b)) = (st, a) {
            *b = bytes.to_host(b.elem);
        }
    }
    r
}

pub fn compare(kernel: &Kernel, want: &[Arg], got: &[Arg], inputs: &[Arg]) {
    for (p, (w, g)) in want.iter().zip(got).enumerate() {
        let (Some(w), Some(g)) = (w.as_buffer(), g.as_buffer()) else {
            continue;
        };
        assert_eq!(w.len(), g.len());
        for (i, (&a, &b)) in w.data.iter().zip(&g.data).enumerate() {
            if !same_value(a, b) {
                let shown: Vec<String> = inputs
                    .iter()
                    .filter_map(|a| a.as_buffer())
                    .map(|buf| format!("{:?}", buf.data.get(i)))
                    .collect();
                panic!(
                    "kernel `{}`: buffer {p} element {i}: interpreter {a:?}, JIT {b:?} \
                     (inputs at {i}: {})\n{kernel}",
                    kernel.name,
                    shown.join(", ")
                );
            }
        }
    }
}

/// Interesting values of a type first (`testing::special_values`), then random ones, `n`
/// in all.
pub fn values(ty: ScalarType, n: usize, rng: &mut Lcg) -> Vec<Scalar> {
    let mut out: Vec<Scalar> = testing::special_values(ty).into_iter().take(n).collect();
    while out.len() < n {
        let bits = rng.next_u64();
        // The low two bits of the first word pick how `value_from_words` draws: here
        // only any bit pattern (0) or an ordinary magnitude (3), half and half; the
        // special values came first.
        let how = if bits & 1 == 0 { 0 } else { 3 };
        let a = ((bits >> 32) as u32 & !3) | how;
        out.push(testing::value_from_words(ty, a, bits as u32));
    }
    out
}

pub fn buffer(ty: ScalarType, data: Vec<Scalar>) -> Arg {
    Arg::Buffer(HostBuffer::new(ty, data))
}

/// A poisoned output buffer (`testing::poison`: never zero, NaN for floats).
pub fn poison(ty: ScalarType, n: usize) -> Arg {
    Arg::Buffer(HostBuffer::filled(ty, n, testing::poison(ty)))
}

/// `out[k] = f(ins[0][k], ins[1][k], ...)` over `n` values of type `ty` (vectors of
/// `ty.lanes`), one workgroup of one invocation looping over the values.
pub fn elementwise(
    name: &str,
    ins: &[Type],
    out_scalar: ScalarType,
    n: u32,
    f: impl FnOnce(Vec<E>) -> E,
) -> Kernel {
    let lanes = ins[0].lanes;
    let len = (n * lanes as u32) as u64;
    let mut k = KernelBuilder::new(name, [1, 1, 1]);
    let bufs: Vec<Mem> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| k.buffer(format!("in{i}"), t.scalar, len, Access::Read))
        .collect();
    let out = k.buffer("out", out_scalar, len, Access::Write);
    k.build(|b| {
        b.for_("i", 0u32, n, 1, |b, i| {
            let idx = b.let_("idx", i * lanes as u32);
            let args = bufs.iter().map(|m| m.load(idx.clone(), lanes)).collect();
            b.store(out, idx, f(args));
        });
    })
    .unwrap_or_else(|e| panic!("kernel `{name}` is invalid: {e}"))
}

/// Runs an elementwise kernel on `n` (vectors of) values per input, drawn by `values`.
pub fn check_elementwise(
    name: &str,
    ins: &[Type],
    out: ScalarType,
    n: u32,
    rng: &mut Lcg,
    f: impl FnOnce(Vec<E>) -> E,
) {
    let kernel = elementwise(name, ins, out, n, f);
    let lanes = ins[0].lanes as usize;
    let count = n as usize * lanes;
    let mut args: Vec<Arg> = ins
        .iter()
        .map(|t| buffer(t.scalar, values(t.scalar, count, rng)))
        .collect();
    // Pair every special value with every other across inputs: rotate the second input.
    if ins.len() > 1 {
        if let Some(b) = args[1].as_buffer_mut() {
            b.data.rotate_left(3);
        }
    }
    args.push(poison(out, count));
    check(&kernel, [1, 1, 1], &args);
}

// ---------------------------------------------------------------------------------------
// f16 / bf16 conversions against the `half` crate
// ---------------------------------------------------------------------------------------

/// `got` is `want`, bit for bit; NaNs only as NaNs where `exact_nans` is off (a target
/// that leaves a NaN's payload and quiet bit open, as LLVM's code does).
fn agree(got: Scalar, want: Scalar, exact_nans: bool, what: std::fmt::Arguments) {
    if exact_nans {
        assert_eq!(got, want, "{what}");
    } else {
        assert!(same_value(got, want), "{what}: {got:?} vs {want:?}");
    }
}

pub fn run_cast(from: ScalarType, to: ScalarType, data: Vec<Scalar>) -> HostBuffer {
    let n = data.len() as u32;
    let kernel = elementwise("conv", &[Type::scalar(from)], to, n, |a| {
        a[0].clone().cast(to)
    });
    let k = crate::compile(&kernel);
    let mut args = vec![buffer(from, data), poison(to, n as usize)];
    k.launch_host([1, 1, 1], &mut args).expect("launch");
    args[1].as_buffer().expect("buffer").clone()
}

pub fn all_f16_patterns_round_trip_like_half(exact_nans: bool) {
    let all: Vec<Scalar> = (0..=u16::MAX).map(Scalar::F16).collect();
    let wide = run_cast(F16, F32, all);
    for (bits, s) in (0..=u16::MAX).zip(&wide.data) {
        let want = f16::from_bits(bits).to_f32().to_bits();
        agree(
            *s,
            Scalar::F32(want),
            exact_nans,
            format_args!("f16 {bits:#06x} -> f32"),
        );
    }
    let back = run_cast(F32, F16, wide.data.clone());
    for (bits, s) in (0..=u16::MAX).zip(&back.data) {
        let want = f16::from_f32(f16::from_bits(bits).to_f32()).to_bits();
        agree(
            *s,
            Scalar::F16(want),
            exact_nans,
            format_args!("f16 {bits:#06x} -> f32 -> f16"),
        );
    }
    let wide = run_cast(F16, F64, (0..=u16::MAX).map(Scalar::F16).collect());
    for (bits, s) in (0..=u16::MAX).zip(&wide.data) {
        let want = f16::from_bits(bits).to_f64().to_bits();
        agree(
            *s,
            Scalar::F64(want),
            exact_nans,
            format_args!("f16 {bits:#06x} -> f64"),
        );
    }
}

pub fn all_bf16_patterns_round_trip_like_half(exact_nans: bool) {
    let all: Vec<Scalar> = (0..=u16::MAX).map(Scalar::Bf16).collect();
    let wide = run_cast(Bf16, F32, all);
    for (bits, s) in (0..=u16::MAX).zip(&wide.data) {
        let want = bf16::from_bits(bits).to_f32().to_bits();
        agree(
            *s,
            Scalar::F32(want),
            exact_nans,
            format_args!("bf16 {bits:#06x} -> f32"),
        );
    }
    let back = run_cast(F32, Bf16, wide.data.clone());
    for (bits, s) in (0..=u16::MAX).zip(&back.data) {
        let want = bf16::from_f32(bf16::from_bits(bits).to_f32()).to_bits();
        agree(
            *s,
            Scalar::Bf16(want),
            exact_nans,
            format_args!("bf16 {bits:#06x} -> f32 -> bf16"),
        );
    }
}

/// f32 → f16/bf16 against `half`'s `from_f32` (exact); f64 → f16/bf16 against the
/// IR's conversion (`kernelc_ir::scalar`), rounded once. `half`'s `from_f64` is no
/// oracle: it drops the low 32 bits of the f64 before rounding, so a value just above a
/// tie rounds down.
pub fn f32_and_f64_to_half_types_round_once_bit_for_bit(exact_nans: bool) {
    let mut rng = Lcg(12);
    // Random bit patterns, plus every rounding boundary around the f16 range.
    let mut f32s: Vec<u32> = (0..200_000).map(|_| rng.next_u32()).collect();
    for e in 100u32..=145 {
        for m in [
            0u32, 0xFFF, 0x1000, 0x1001, 0x2FFF, 0x3000, 0x7FFFFF, 0x400000,
        ] {
            f32s.push((e << 23) | m);
            f32s.push(0x8000_0000 | (e << 23) | m);
        }
    }
    f32s.extend([
        0x477F_EFFF,
        0x477F_F000,
        0x3880_0000,
        0x387F_FFFF,
        0x3300_0000,
        0x3300_0001,
    ]);
    let data: Vec<Scalar> = f32s.iter().map(|&b| Scalar::F32(b)).collect();
    let h = run_cast(F32, F16, data.clone());
    let b = run_cast(F32, Bf16, data);
    for (i, &bits) in f32s.iter().enumerate() {
        let x = f32::from_bits(bits);
        agree(
            h.data[i],
            Scalar::F16(f16::from_f32(x).to_bits()),
            exact_nans,
            format_args!("f32 {bits:#010x} -> f16"),
        );
        agree(
            b.data[i],
            Scalar::Bf16(bf16::from_f32(x).to_bits()),
            exact_nans,
            format_args!("f32 {bits:#010x} -> bf16"),
        );
    }
    // Random bit patterns, plus every f16 and bf16 tie and the f64 values just beside
    // it (where a conversion that rounds twice goes wrong).
    let mut f64s: Vec<u64> = (0..50_000).map(|_| rng.next_u64()).collect();
    for bits in (0..0x7c00u16).step_by(7) {
        for mid in [
            (f16::from_bits(bits).to_f64() + f16::from_bits(bits + 1).to_f64()) / 2.0,
            (bf16::from_bits(bits).to_f64() + bf16::from_bits(bits + 1).to_f64()) / 2.0,
        ] {
            let m = mid.to_bits();
            f64s.extend([m, m + 1, m.wrapping_sub(1), m | 1 << 63, (m + 1) | 1 << 63]);
        }
    }
    let data: Vec<Scalar> = f64s.iter().map(|&b| Scalar::F64(b)).collect();
    let h = run_cast(F64, F16, data.clone());
    let b = run_cast(F64, Bf16, data);
    for (i, &bits) in f64s.iter().enumerate() {
        let x = f64::from_bits(bits);
        agree(
            h.data[i],
            Scalar::F16(kernelc_ir::scalar::f64_to_f16_bits(x)),
            exact_nans,
            format_args!("f64 {bits:#018x} -> f16"),
        );
        agree(
            b.data[i],
            Scalar::Bf16(kernelc_ir::scalar::f64_to_bf16_bits(x)),
            exact_nans,
            format_args!("f64 {bits:#018x} -> bf16"),
        );
    }
}
