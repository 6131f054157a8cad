//! Helpers shared by the device tests of the runtime.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{BinaryFn, BinarySpec, OpSpec};
use kernelc_runtime::Runtime;

/// A xorshift generator: seeded, reproducible inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Zeros, subnormals, normals of every size, infinities and NaN, with both signs.
fn special_values() -> Vec<f64> {
    let base = [
        0.0,
        f32::from_bits(1) as f64,
        f32::from_bits(0x007f_ffff) as f64,
        f32::MIN_POSITIVE as f64,
        1e-30,
        0.1,
        0.75,
        1.0,
        1.5,
        3.0,
        std::f64::consts::PI,
        16_777_217.0,
        1e10,
        f32::MAX as f64,
        f64::INFINITY,
        f64::NAN,
    ];
    base.iter().flat_map(|&v| [v, -v]).collect()
}

/// Every pair of special values, `random` pairs of random bit patterns (every exponent
/// difference) and `random` pairs of nearby magnitudes, as `(a, b)` of one float type.
fn pairs<T: Copy>(
    random: usize,
    from_f64: impl Fn(f64) -> T,
    from_bits: impl Fn(u64) -> T,
    near: impl Fn(u64, u64) -> (T, T),
) -> (Vec<T>, Vec<T>) {
    let special: Vec<T> = special_values().into_iter().map(from_f64).collect();
    let mut a: Vec<T> = special
        .iter()
        .flat_map(|&x| special.iter().map(move |_| x))
        .collect();
    let mut b: Vec<T> = special
        .iter()
        .flat_map(|_| special.iter().copied())
        .collect();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..random {
        a.push(from_bits(rng.next()));
        b.push(from_bits(rng.next()));
        let (x, y) = near(rng.next(), rng.next());
        a.push(x);
        b.push(y);
    }
    (a, b)
}

fn rem_spec(dtype: ScalarType, n: usize) -> OpSpec {
    OpSpec::Binary(BinarySpec {
        func: BinaryFn::Mod,
        dtype,
        lhs: vec![n],
        rhs: vec![n],
        out_dtype: None,
    })
}

/// Runs `a % b` on `rt` and asserts every result has the bits of Rust's `%` (C `fmod`),
/// or is NaN where that is.
fn assert_rem_matches<T>(rt: &Runtime, what: &str, a: &[T], b: &[T], bits: impl Fn(T) -> u64)
where
    T: kernelc_runtime::Element + std::ops::Rem<Output = T> + std::fmt::LowerExp,
{
    let dtype = T::DTYPE;
    let spec = rem_spec(dtype, a.len());
    let inputs = [
        rt.tensor(&[a.len()], a).unwrap(),
        rt.tensor(&[b.len()], b).unwrap(),
    ];
    let out = rt.run(&spec, &[&inputs[0], &inputs[1]]).unwrap();
    let got = out[0].to_vec::<T>().unwrap();
    for i in 0..a.len() {
        let want = a[i] % b[i];
        let both_nan = got[i].to_f64().is_nan() && want.to_f64().is_nan();
        assert!(
            bits(got[i]) == bits(want) || both_nan,
            "{what}: {dtype} {:e} % {:e} = {:e}, want {want:e}",
            a[i],
            b[i],
            got[i]
        );
    }
}

/// Float `%` on `rt`'s device is C `fmod` bit for bit (any NaN for a NaN), for f32 and,
/// where the device has it, f64: special values and random pairs of every magnitude.
/// GPU targets compute it with kernelc's integer long division (their own remainders
/// round), so this checks that expansion on the real device and driver.
pub fn assert_float_rem_is_exact(rt: &Runtime, what: &str) {
    let (a, b) = pairs(
        4096,
        |v| v as f32,
        |r| f32::from_bits(r as u32),
        |r, s| {
            let y = f32::from_bits(r as u32 & 0xbfff_ffff);
            (y * (1.0 + (s % 100_000) as f32 / 7.0), y)
        },
    );
    assert_rem_matches(rt, what, &a, &b, |v: f32| v.to_bits().into());
    if !rt.caps().f64 {
        println!("NOT RUN: f64 `%` on {what} (the device has no f64)");
        return;
    }
    let (a, b) = pairs(
        2048,
        |v| v,
        f64::from_bits,
        |r, s| {
            let y = f64::from_bits(r & 0xbfff_ffff_ffff_ffff);
            (y * (1.0 + (s % 10_000_000) as f64 / 3.0), y)
        },
    );
    assert_rem_matches(rt, what, &a, &b, f64::to_bits);
}

/// Runtimes on the cpu and on each of `choices` (`"wgpu:wgsl"`, `"cuda"`, ...) that
/// opens here, without a disk cache. wgpu choices are required when `CI` is set
/// (lavapipe), CUDA when `KERNELC_REQUIRE_CUDA` is; an absent optional device prints a
/// `NOT RUN` line naming `what` the test checks.
pub fn runtimes_on(what: &str, choices: &[&str]) -> Vec<Runtime> {
    use kernelc_runtime::cache::DiskCache;
    use kernelc_runtime::{Device, DeviceChoice};
    let mut v = vec![Runtime::with_device(Device::cpu(), DiskCache::off())];
    for choice in choices {
        let required = if choice.starts_with("cuda") {
            std::env::var_os("KERNELC_REQUIRE_CUDA").is_some()
        } else {
            std::env::var_os("CI").is_some()
        };
        let parsed: DeviceChoice = choice.parse().expect("a device choice");
        match Device::open(parsed) {
            Ok(d) => v.push(Runtime::with_device(d, DiskCache::off())),
            Err(e) if !required => println!("NOT RUN: {what} on {choice}: {e}"),
            Err(e) => panic!("{choice} is required here: {e}"),
        }
    }
    v
}

/// Every wgpu shader path and CUDA.
pub const ALL_PATHS: &[&str] = &[
    "wgpu:wgsl",
    "wgpu:naga",
    "wgpu:spirv-naga",
    "wgpu:spirv",
    "cuda",
];

/// The methods of the seed traits `traits` that `kernels::seeds` serves with a catalogue
/// op, each with that op's kind: what an adapter's conformance cases must cover.
pub fn seed_op_methods(traits: &[&str]) -> Vec<(&'static str, &'static str)> {
    use kernelc_kernels::seeds::{methods_of, Mapping};
    traits
        .iter()
        .flat_map(|t| methods_of(t))
        .filter_map(|m| match m.maps_to {
            Mapping::Op(kind) => Some((m.method, kind)),
            Mapping::Host(_) | Mapping::Unsupported(_) => None,
        })
        .collect()
}

/// Checks that `cases` (method, spec) cover every method of `traits` that is device
/// math, each case with the op kind `kernels::seeds` names for its method.
pub fn assert_cases_cover(traits: &[&str], cases: &[(&str, OpSpec)]) {
    let methods = seed_op_methods(traits);
    for (method, kind) in &methods {
        assert!(
            cases.iter().any(|(m, _)| m == method),
            "no case for {method}"
        );
        for (_, spec) in cases.iter().filter(|(m, _)| m == method) {
            assert_eq!(spec.kind_name(), *kind, "{method}'s case");
        }
    }
    for (m, _) in cases {
        assert!(
            methods.iter().any(|(method, _)| method == m),
            "{m} is not a method of {traits:?}"
        );
    }
}

/// Seeded inputs for `spec`, with its lookup indices (gather and scatter rows, class
/// targets, pooling argmax positions) drawn in range: the seed traits index with them
/// unchecked, or refuse them.
pub fn in_range_case(spec: &OpSpec, seed: u64) -> kernelc_kernels::conformance::CaseData {
    use kernelc_kernels::conformance::inputs::{drawn, generate, Domain};
    let mut values = generate(spec, seed);
    let rows = match spec {
        OpSpec::Gather(g) => Some(g.data[g.axis]),
        OpSpec::Scatter(s) => Some(s.data[s.axis]),
        OpSpec::CrossEntropy(c) => Some(c.classes),
        OpSpec::Pool2dBackward(p) => Some(p.image.height * p.image.width),
        _ => None,
    };
    if let Some(rows) = rows {
        let len = values[1].len();
        values[1] = drawn(Domain::Int(0, rows as i64 - 1), seed, 1, len);
    }
    kernelc_kernels::conformance::case_data_from_values(spec, values)
}

/// Checks every `(method, spec)` case of an adapter through the executor `exec` makes
/// for it (with the spec it runs, which may differ: a random factory's stream), on
/// seeded in-range inputs against the f64 reference. A case of a dtype `caps` lacks
/// must fail with an error `refused` accepts (the trait's own "unsupported") and is
/// counted as refused. Prints the counts under `name`; panics listing every failure.
pub fn check_adapter_cases<E: kernelc_kernels::conformance::Executor>(
    name: &str,
    caps: &kernelc_kernels::lower::TargetCaps,
    cases: &[(&'static str, OpSpec)],
    mut exec: impl FnMut(&'static str, &OpSpec) -> (E, OpSpec),
    refused: impl Fn(&str) -> bool,
) {
    let (mut passed, mut unsupported, mut failures) = (0, 0, Vec::new());
    for (seed, (method, spec)) in cases.iter().enumerate() {
        let missing = spec
            .inputs()
            .iter()
            .chain(&spec.outputs())
            .find(|s| !caps.supports(s.dtype))
            .map(|s| s.dtype);
        let (executor, spec) = exec(method, spec);
        let data = in_range_case(&spec, seed as u64);
        match (
            kernelc_kernels::conformance::check_data(&executor, &spec, &data),
            missing,
        ) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(d)) => failures.push(format!("{method}: ran without {d}?")),
            (Err(e), Some(_)) if refused(&e.to_string()) => unsupported += 1,
            (Err(e), _) => failures.push(format!(
                "{method} {}: {e}",
                serde_json::to_string(&spec).unwrap_or_default()
            )),
        }
    }
    println!("{name}: {passed} cases pass, {unsupported} refused (dtype absent)");
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}
