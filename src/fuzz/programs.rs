//! The program fuzzer: random valid kernels ([`kernelc_ir::testing`]) compiled for a
//! runtime's device, run there, and compared with the reference interpreter running
//! the same kernel after the same target passes (`passes::for_target` with the
//! device's math expansion), by the one rule of [`testing::compare`]: the same buffers
//! bit for bit (NaN payloads aside), or the same run-time faults.
//!
//! What a device is held to follows its [`TargetCaps`]: float programs where the
//! target promises IEEE arithmetic to the bit (NaN, ±∞ and −0 kept, subnormals kept,
//! no contraction of `a·b + c`), with the math functions it computes exactly (those the
//! expansion rewrites into IR, and `sqrt`, `floor`, `ceil`, `round`, `abs`, `min`,
//! `max`, and `fma` where it rounds once); integer and bool programs everywhere else,
//! where the op fuzzer's tolerance table holds the floats instead
//! (docs/fuzzing.md).
//!
//! Failures shrink (proptest) to a small kernel, printed as IR text with its
//! arguments; a run is reproduced by its seed.

use kernelc_ir::interp::{Arg, HostBuffer};
use kernelc_ir::testing::{self, Case, FaultKind, Faults, GenConfig, InterpRun, Outcome, Shape};
use kernelc_ir::{MathFn, ScalarType};
use kernelc_kernels::lower::TargetCaps;
use kernelc_runtime::{KernelArg, Runtime, RuntimeError, View};
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use super::seeded_rng;

/// One generator configuration a device is fuzzed under.
#[derive(Clone, Debug)]
pub struct Program {
    /// `floats`, `floats+barriers`, `integers` or `integers+barriers`.
    pub name: String,
    pub config: GenConfig,
    pub shape: Shape,
}

/// What the program fuzzer holds `rt`'s device to: one or two configurations per
/// body shape (with and without shared memory and barriers).
pub fn programs_for(rt: &Runtime) -> Vec<Program> {
    let caps = rt.caps();
    let exact_floats = caps.ieee_specials && caps.keeps_subnormals && !caps.may_contract;
    let base = if exact_floats {
        float_config(rt)
    } else {
        integer_config()
    };
    let kind = if exact_floats { "floats" } else { "integers" };
    // A CPU runs a workgroup's invocations one after another: barriers only in
    // workgroups of one invocation there. Its LLVM tier takes only workgroups of one
    // invocation (it leaves others to Cranelift): every program has them there.
    let one_at_a_time = caps.preferred_invocations <= 1;
    let llvm = rt.cpu_tier() == Some(kernelc_runtime::CpuTier::Llvm);
    let plain = GenConfig {
        shared: !one_at_a_time,
        barriers: !one_at_a_time,
        workgroup_size: if llvm { 1 } else { base.workgroup_size },
        grid: if llvm { 8 } else { base.grid },
        ..base.clone()
    };
    let barriers = GenConfig {
        shared: true,
        barriers: true,
        workgroup_size: if one_at_a_time {
            1
        } else {
            base.workgroup_size
        },
        grid: if one_at_a_time { 4 } else { base.grid },
        ..base
    };
    vec![
        Program {
            name: kind.to_string(),
            config: plain.clone(),
            shape: Shape::Statements,
        },
        Program {
            name: kind.to_string(),
            config: plain,
            shape: Shape::Expression,
        },
        Program {
            name: format!("{kind}+barriers"),
            config: barriers,
            shape: Shape::Statements,
        },
    ]
}

/// Every type the device has, the math it computes exactly.
fn float_config(rt: &Runtime) -> GenConfig {
    let caps = rt.caps();
    let types: Vec<ScalarType> = ScalarType::ALL
        .into_iter()
        .filter(|t| caps.supports(*t))
        .collect();
    let cpu = caps.preferred_invocations <= 1;
    let llvm = rt.cpu_tier() == Some(kernelc_runtime::CpuTier::Llvm);
    GenConfig {
        math: exact_math(rt, caps, &types),
        // A NaN's sign and payload are unspecified: only the CPU's Cranelift tier forms
        // them as the interpreter does (LLVM folds `-x` of a widened f16 to a bare sign
        // flip, which keeps a signalling NaN signalling; docs/fuzzing.md).
        float_bitcasts: cpu && !llvm,
        memory_types: types.clone(),
        types,
        workgroup_size: 4,
        grid: 2,
        ..GenConfig::full()
    }
}

/// The math functions `rt` computes exactly as the interpreter does.
fn exact_math(rt: &Runtime, caps: &TargetCaps, types: &[ScalarType]) -> Vec<MathFn> {
    let expansion = rt.math_expansion();
    // Native transcendental calls are the driver's (approximate) ones: only expanded
    // functions, and for f64 only where the expansion covers f64 too (or no f64).
    let f64_covered = expansion.f64 || !types.contains(&ScalarType::F64);
    let cpu = caps.preferred_invocations <= 1;
    MathFn::ALL
        .into_iter()
        .filter(|f| match f {
            MathFn::Sqrt
            | MathFn::Floor
            | MathFn::Ceil
            | MathFn::Round
            | MathFn::Abs
            | MathFn::Min
            | MathFn::Max => true,
            MathFn::Fma => expansion.fused_fma,
            // The CPU target calls a correctly rounded libm the interpreter shares.
            MathFn::Rsqrt => cpu,
            MathFn::Exp
            | MathFn::Exp2
            | MathFn::Log
            | MathFn::Log2
            | MathFn::Tanh
            | MathFn::Erf
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Pow => cpu || (expansion.funcs.contains(f) && f64_covered),
        })
        .collect()
}

/// Integers and bools, buffers of every integer width the device stores: exact on any
/// driver.
fn integer_config() -> GenConfig {
    let types = vec![ScalarType::U32, ScalarType::I32, ScalarType::Bool];
    let mut memory = types.clone();
    memory.extend(ScalarType::NARROW);
    GenConfig {
        types,
        memory_types: memory,
        math: vec![MathFn::Abs, MathFn::Min, MathFn::Max],
        float_rem: false,
        workgroup_size: 8,
        grid: 3,
        ..GenConfig::full()
    }
}

/// What became of one case on the device.
pub enum Ran {
    /// It ran; here is what it left.
    Done(Outcome),
    /// The device refused the kernel with a typed error that is not a bug: more loop
    /// iterations than its driver runs faithfully (llvmpipe's budget).
    Refused,
}

/// The faults of a status word (`abi::status` bits).
fn faults(bits: u32) -> Faults {
    use kernelc_codegen::abi::status;
    [
        (status::OUT_OF_BOUNDS, FaultKind::OutOfBounds),
        (status::UNALIGNED, FaultKind::Unaligned),
        (status::DIVISION_BY_ZERO, FaultKind::DivisionByZero),
        (status::SHIFT_OVERFLOW, FaultKind::ShiftOverflow),
    ]
    .into_iter()
    .filter(|(bit, _)| bits & bit != 0)
    .map(|(_, kind)| kind)
    .collect()
}

/// Runs `case` on `rt`'s device through the raw-kernel API: buffers uploaded, the
/// kernel launched on the case's grid, buffers read back.
pub fn run_on(rt: &Runtime, case: &Case) -> Result<Ran, String> {
    let kernel = match rt.load_kernel(&case.kernel) {
        Ok(k) => k,
        Err(RuntimeError::Compile { message, .. }) if message.contains("loop iterations") => {
            return Ok(Ran::Refused)
        }
        Err(e) => return Err(format!("does not compile: {e}")),
    };
    let bound = case
        .args
        .iter()
        .map(|a| match a {
            Arg::Buffer(b) => upload(rt, b).map(Bound::View),
            Arg::Scalar(s) => Ok(Bound::Scalar(*s)),
        })
        .collect::<Result<Vec<Bound>, String>>()?;
    let args: Vec<KernelArg<'_>> = bound
        .iter()
        .map(|b| match b {
            Bound::View(v) => KernelArg::View(v),
            Bound::Scalar(s) => KernelArg::Scalar(*s),
        })
        .collect();
    let launched = rt
        .launch(&kernel, case.grid, &args)
        .and_then(|()| rt.synchronize());
    let faults = match launched {
        Ok(()) => Faults::NONE,
        Err(RuntimeError::Launch { status, .. }) if status != 0 => faults(status),
        Err(e) => return Err(format!("launch failed: {e}")),
    };
    let mut after = case.args.clone();
    for (arg, bound) in after.iter_mut().zip(&bound) {
        if let (Arg::Buffer(b), Bound::View(v)) = (arg, bound) {
            let bytes = rt
                .read_buffer(v.buffer(), v.offset(), v.byte_len())
                .map_err(|e| format!("read back: {e}"))?;
            *b = HostBuffer::from_bytes(b.elem, &bytes);
        }
    }
    Ok(Ran::Done(Outcome::of_target(faults, &after)))
}

/// A case's argument on the device.
enum Bound {
    View(View),
    Scalar(kernelc_ir::Scalar),
}

fn upload(rt: &Runtime, b: &HostBuffer) -> Result<View, String> {
    let bytes = b.to_bytes();
    let buffer = rt
        .alloc_buffer(bytes.len())
        .map_err(|e| format!("allocate: {e}"))?;
    rt.write_buffer(&buffer, 0, &bytes)
        .map_err(|e| format!("upload: {e}"))?;
    buffer
        .view(0, b.elem, &[b.data.len()])
        .map_err(|e| format!("view: {e}"))
}

/// Checks one case: the interpreter on the target's form of the kernel against the
/// device. `Ok(false)` when the device refused it.
pub fn check(rt: &Runtime, case: &Case) -> Result<bool, String> {
    kernelc_ir::validate(&case.kernel).map_err(|e| format!("generator bug: invalid: {e}"))?;
    let target_form = kernelc_ir::passes::for_target(&case.kernel, &rt.math_expansion());
    let want = InterpRun::new(case, &target_form)
        .outcome()
        .map_err(|e| format!("generator bug: {e}"))?;
    match run_on(rt, case)? {
        Ran::Refused => Ok(false),
        Ran::Done(got) => testing::compare(&want, &got)
            .map(|()| true)
            .map_err(|m| m.to_string()),
    }
}

/// The counts of one program configuration on one device.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ProgramCount {
    pub program: String,
    pub shape: String,
    pub cases: u64,
    /// Refused by the device's loop budget (a typed error).
    pub refused: u64,
    /// The shrunk failing case (IR text and arguments), if any.
    pub failure: Option<String>,
}

/// Fuzzes `program` on `rt` with `cases` cases from `seed`; `tick` is called after
/// each case (shrinking steps included). A failure is shrunk and reported in the
/// count.
pub fn fuzz_program(
    rt: &Runtime,
    program: &Program,
    cases: u32,
    seed: u64,
    tick: impl Fn(),
) -> ProgramCount {
    use std::cell::Cell;
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 1_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, seeded_rng(seed));
    let (ran, refused) = (Cell::new(0u64), Cell::new(0u64));
    let strategy = testing::cases(&program.config, program.shape);
    let result = runner.run(&strategy, |case| {
        match check(rt, &case) {
            Ok(true) => ran.set(ran.get() + 1),
            Ok(false) => refused.set(refused.get() + 1),
            Err(e) => return Err(TestCaseError::fail(e)),
        }
        tick();
        Ok(())
    });
    ProgramCount {
        program: program.name.clone(),
        shape: format!("{:?}", program.shape),
        cases: ran.get(),
        refused: refused.get(),
        failure: match result {
            Ok(()) => None,
            Err(TestError::Fail(reason, case)) => Some(format!("{reason}\n{case:?}")),
            Err(TestError::Abort(reason)) => Some(format!("aborted: {reason}")),
        },
    }
}
