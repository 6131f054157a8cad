//! rustd_runtime's `backend::Backend` served by kernelc ([`RustdBackend`]).
//!
//! Every tensor method runs through the one conformance harness: an [`Executor`] that
//! allocates handles, writes the inputs, calls the method a spec describes and reads
//! the outputs back, checked against the f64 reference under docs/semantics.md, on
//! cpu, every wgpu path (lavapipe in CI) and CUDA where present. rustd's own
//! `CpuBackend` runs the cases it can; where it is partial or wrong (mask and `dim`
//! ignored, no blur/sobel/sharpen, unchecked scalars) a test shows the difference and
//! says which side is right.

mod common;

use kernelc_ir::interp::HostBuffer;
use kernelc_ir::ScalarType::{self, F32, I32, I64};
use kernelc_kernels::conformance::{check_data, Executor};
use kernelc_kernels::seeds;
use kernelc_kernels::spec::*;
use kernelc_runtime::adapters::rustd::RustdBackend;
use kernelc_runtime::Runtime;
use rustd_core::{RustDError, Value};
use rustd_runtime::backend::{Backend, DType, TensorHandle};
use rustd_runtime::backends::cpu::CpuBackend;
use std::cell::RefCell;

/// Runs catalogue specs through the rustd methods they describe.
struct Through<'a>(RefCell<&'a mut dyn Backend>, String);

fn dtype(s: ScalarType) -> DType {
    match s {
        ScalarType::F32 => DType::F32,
        ScalarType::F64 => DType::F64,
        ScalarType::I32 => DType::I32,
        ScalarType::I64 => DType::I64,
        ScalarType::Bool => DType::Bool,
        other => panic!("rustd has no {other}"),
    }
}

/// The shape rustd sees: attention's tensors are 2-D `[seq, head_dim]`.
fn rustd_shape(spec: &OpSpec, shape: &[usize]) -> Vec<usize> {
    match spec {
        OpSpec::Attention(_) if shape.len() == 4 => shape[2..].to_vec(),
        _ => shape.to_vec(),
    }
}

fn call(
    b: &mut dyn Backend,
    spec: &OpSpec,
    i: &[TensorHandle],
    o: &[TensorHandle],
) -> Result<(), RustDError> {
    match spec {
        OpSpec::Binary(_) => b.pointwise_add(i[0], i[1], o[0]),
        OpSpec::Gemm(g) if g.bias => b.matmul_bias(i[0], i[1], i[2], o[0]),
        OpSpec::Gemm(_) => b.matmul(i[0], i[1], o[0]),
        OpSpec::LayerNorm(l) => b.layer_norm(i[0], i[1], i[2], o[0], l.eps),
        OpSpec::Softmax(s) => b.softmax(i[0], o[0], s.axis as i32 - s.shape.len() as i32),
        OpSpec::Unary(u) if u.func == UnaryFn::Relu => b.relu(i[0], o[0]),
        OpSpec::Unary(_) => b.gelu(i[0], o[0]),
        OpSpec::Attention(a) => b.attention(i[0], i[1], i[2], o[0], i.get(3).copied(), a.scale),
        OpSpec::CrossEntropy(_) => b.cross_entropy(i[0], i[1], o[0], o[1]),
        OpSpec::Reduce(r) if r.axes.len() == r.shape.len() && r.shape.len() != 1 => {
            b.reduce_sum(i[0], o[0], None)
        }
        OpSpec::Reduce(r) => b.reduce_sum(i[0], o[0], Some(r.axes[0] as i32)),
        OpSpec::Gather(_) => b.embedding(i[1], i[0], o[0]),
        OpSpec::Adam(a) => b.adam_update(
            i[0], i[1], i[2], i[3], a.lr, a.beta1, a.beta2, a.eps, a.step,
        ),
        OpSpec::ImageFilter(f) => match f.filter {
            ImageFilter::GaussianBlur { sigma, .. } => {
                b.gaussian_blur(i[0], o[0], &Value::Float(sigma))
            }
            ImageFilter::Sobel { threshold } => b.sobel_edges(i[0], o[0], &Value::Float(threshold)),
            ImageFilter::Grayscale => b.grayscale(i[0], o[0]),
            ImageFilter::Threshold { value } => b.threshold(i[0], o[0], &Value::Float(value)),
            ImageFilter::Brightness { factor } => b.brightness(i[0], o[0], &Value::Float(factor)),
            ImageFilter::Contrast { factor } => b.contrast(i[0], o[0], &Value::Float(factor)),
            ImageFilter::Invert => b.invert_colors(i[0], o[0]),
            ImageFilter::Sharpen => b.sharpen(i[0], o[0]),
        },
        other => panic!("no rustd method computes {}", other.kind_name()),
    }
}

impl Executor for Through<'_> {
    fn name(&self) -> String {
        self.1.clone()
    }

    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        let mut b = self.0.borrow_mut();
        let e = |e: RustDError| e.to_string();
        let mut ins = Vec::new();
        for (sig, data) in spec.inputs().iter().zip(inputs) {
            let h = b
                .alloc_tensor(&rustd_shape(spec, &sig.shape), dtype(sig.dtype))
                .map_err(e)?;
            b.write_tensor(h, &data.to_bytes()).map_err(e)?;
            ins.push(h);
        }
        let aliases = spec.aliases();
        let mut outs = Vec::new();
        for (o, sig) in spec.outputs().iter().enumerate() {
            if let Some(a) = aliases.iter().find(|a| a.output == o) {
                outs.push(ins[a.input]);
                continue;
            }
            let h = b
                .alloc_tensor(&rustd_shape(spec, &sig.shape), dtype(sig.dtype))
                .map_err(e)?;
            let len = sig.shape.iter().product::<usize>() * sig.dtype.size_bytes() as usize;
            b.write_tensor(h, &vec![0xff; len]).map_err(e)?;
            outs.push(h);
        }
        call(&mut **b, spec, &ins, &outs).map_err(e)?;
        b.sync().map_err(e)?;
        let results = spec
            .outputs()
            .iter()
            .zip(&outs)
            .map(|(sig, &h)| {
                b.read_tensor(h)
                    .map(|bytes| HostBuffer::from_bytes(sig.dtype, &bytes))
                    .map_err(e)
            })
            .collect();
        for h in ins.iter().chain(&outs) {
            b.free_tensor(*h).map_err(e)?;
        }
        results
    }
}

fn cases() -> Vec<(&'static str, OpSpec)> {
    let mut v: Vec<(&'static str, OpSpec)> = Vec::new();
    for shape in [vec![1], vec![7, 13], vec![2, 3, 129]] {
        v.push((
            "pointwise_add",
            BinarySpec {
                func: BinaryFn::Add,
                dtype: F32,
                lhs: shape.clone(),
                rhs: shape.clone(),
                out_dtype: None,
            }
            .into(),
        ));
        v.push((
            "relu",
            UnarySpec {
                func: UnaryFn::Relu,
                dtype: F32,
                shape: shape.clone(),
            }
            .into(),
        ));
        v.push((
            "gelu",
            UnarySpec {
                func: UnaryFn::GeluTanh,
                dtype: F32,
                shape: shape.clone(),
            }
            .into(),
        ));
        for axis in 0..shape.len() {
            v.push((
                "softmax",
                SoftmaxSpec {
                    dtype: F32,
                    shape: shape.clone(),
                    axis,
                    log: false,
                }
                .into(),
            ));
            let r = ReduceSpec {
                func: ReduceFn::Sum,
                dtype: F32,
                shape: shape.clone(),
                axes: vec![axis],
                keepdim: false,
                index_dtype: None,
                accumulate: false,
            };
            v.push(("reduce_sum", r.into()));
        }
        let all = ReduceSpec {
            func: ReduceFn::Sum,
            dtype: F32,
            shape: shape.clone(),
            axes: (0..shape.len()).collect(),
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        };
        v.push(("reduce_sum", all.into()));
        let cols = *shape.last().unwrap();
        let rows: usize = shape[..shape.len() - 1].iter().product();
        let ln = LayerNormSpec {
            dtype: F32,
            shape: vec![rows, cols],
            eps: 1e-5,
            rms: false,
            weight: true,
            bias: true,
            residual: false,
            save_stats: false,
            epilogue: None,
        };
        v.push(("layer_norm", ln.into()));
        for index_dtype in [I64, I32] {
            let ce = CrossEntropySpec {
                dtype: F32,
                index_dtype,
                batch: rows,
                classes: cols,
                divide_by_batch: false,
                grad: false,
                probs: true,
            };
            v.push(("cross_entropy", ce.into()));
            let emb = GatherSpec {
                dtype: F32,
                index_dtype,
                data: vec![cols, 5],
                indices: shape.clone(),
                axis: 0,
                rows_of: None,
            };
            v.push(("embedding", emb.into()));
        }
        let n: usize = shape.iter().product();
        let adam = AdamSpec {
            dtype: F32,
            len: n,
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: n as u64,
        };
        v.push(("adam_update", adam.into()));
    }
    for [m, k, n] in [[1, 1, 1], [7, 5, 3], [33, 17, 65]] {
        v.push(("matmul", GemmSpec::new(F32, m, n, k).into()));
        v.push((
            "matmul_bias",
            GemmSpec {
                bias: true,
                ..GemmSpec::new(F32, m, n, k)
            }
            .into(),
        ));
    }
    for (sq, sk, d, mask) in [
        (1, 1, 1, false),
        (5, 5, 8, false),
        (9, 4, 16, true),
        (17, 17, 5, true),
    ] {
        let a = AttentionSpec {
            dtype: F32,
            layout: AttentionLayout::Bhsd,
            batch: 1,
            heads: 1,
            kv_heads: 1,
            seq_q: sq,
            seq_k: sk,
            head_dim: d,
            scale: 1.0 / (d as f64).sqrt(),
            causal: false,
            mask: mask.then(|| vec![sq, sk]),
            causal_align: Default::default(),
            lse: false,
        };
        v.push(("attention", a.into()));
    }
    for (h, w) in [(1, 1), (6, 11), (33, 17)] {
        for (name, filter) in [
            (
                "gaussian_blur",
                ImageFilter::GaussianBlur {
                    sigma: 1.5,
                    radius: 5,
                },
            ),
            ("sobel_edges", ImageFilter::Sobel { threshold: 0.3 }),
            ("grayscale", ImageFilter::Grayscale),
            ("threshold", ImageFilter::Threshold { value: 0.5 }),
            ("brightness", ImageFilter::Brightness { factor: 1.3 }),
            ("contrast", ImageFilter::Contrast { factor: 0.7 }),
            ("invert_colors", ImageFilter::Invert),
            ("sharpen", ImageFilter::Sharpen),
        ] {
            v.push((
                name,
                ImageFilterSpec {
                    filter,
                    dtype: F32,
                    height: h,
                    width: w,
                    channels: 3,
                }
                .into(),
            ));
        }
    }
    v
}

/// Runs the cases `skip` leaves; a case whose dtype `lacks` must be refused with the
/// trait's `BackendError` naming that dtype (WGSL has no i64).
fn conform(
    b: &mut dyn Backend,
    label: &str,
    skip: impl Fn(&str, &OpSpec) -> bool,
    lacks: impl Fn(ScalarType) -> bool,
) -> (usize, usize, Vec<String>) {
    let exec = Through(RefCell::new(b), label.to_string());
    let mut failures = Vec::new();
    let (mut ran, mut refused) = (0, 0);
    for (seed, (method, spec)) in cases().iter().enumerate() {
        if skip(method, spec) {
            continue;
        }
        let missing = spec.inputs().iter().map(|s| s.dtype).find(|&d| lacks(d));
        match (
            check_data(&exec, spec, &common::in_range_case(spec, seed as u64)),
            missing,
        ) {
            (Ok(()), None) => ran += 1,
            (Err(e), Some(d))
                if e.to_string().contains("E_BACKEND_ERROR")
                    && e.to_string().contains(&format!("needs {d}")) =>
            {
                refused += 1
            }
            (r, _) => failures.push(format!(
                "{method} {}: {r:?}",
                serde_json::to_string(spec).unwrap()
            )),
        }
    }
    (ran, refused, failures)
}

#[test]
fn every_tensor_method_conforms_on_every_device() {
    let cases = cases();
    common::assert_cases_cover(&[seeds::RUSTD], &cases);
    let mut failures = Vec::new();
    for rt in common::runtimes_on("rustd adapter", common::ALL_PATHS) {
        let label = format!(
            "rustd adapter on {} ({})",
            rt.device_name(),
            rt.target_name()
        );
        let caps = rt.caps().clone();
        let mut b = RustdBackend::with_runtime(rt);
        let (ran, refused, f) = conform(&mut b, &label, |_, _| false, |d| !caps.supports(d));
        println!(
            "{label}: {ran} cases pass, {refused} refused (a dtype the device lacks), {} failures",
            f.len()
        );
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where rustd's `CpuBackend` is partial: shown by the tests below, not run here.
fn cpu_backend_lacks(method: &str, spec: &OpSpec) -> bool {
    match spec {
        // Ignores the mask; assumes seq_kv == seq_q (indexes past k otherwise).
        OpSpec::Attention(a) => a.mask.is_some() || a.seq_q != a.seq_k,
        // Ignores `dim`: writes the total to out[0].
        OpSpec::Reduce(r) => r.axes.len() != r.shape.len(),
        // Only the last dim.
        OpSpec::Softmax(s) => s.axis + 1 != s.shape.len(),
        _ => matches!(method, "gaussian_blur" | "sobel_edges" | "sharpen"),
    }
}

#[test]
fn rustds_cpu_backend_meets_the_same_table_where_it_is_complete() {
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    let (ran, _, failures) = conform(&mut cpu, "rustd CpuBackend", cpu_backend_lacks, |_| false);
    assert!(ran >= 50, "{ran}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn upload(b: &mut dyn Backend, shape: &[usize], values: &[f32]) -> TensorHandle {
    let h = b.alloc_tensor(shape, DType::F32).unwrap();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    b.write_tensor(h, &bytes).unwrap();
    h
}

fn download(b: &dyn Backend, h: TensorHandle) -> Vec<f32> {
    b.read_tensor(h)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn cpu_adapter() -> RustdBackend {
    RustdBackend::with_runtime(Runtime::cpu())
}

/// The attention mask: kernelc adds it to the scores (`-inf` hides a key; bool
/// `false` hides it); `CpuBackend` ignores it. kernelc is right: the trait passes a
/// mask to be applied.
#[test]
fn attention_applies_the_mask_which_cpu_backend_ignores() {
    let run = |b: &mut dyn Backend, bool_mask: bool| {
        let q = upload(b, &[2, 1], &[1.0, 1.0]);
        let k = upload(b, &[2, 1], &[1.0, 1.0]);
        let v = upload(b, &[2, 1], &[10.0, 20.0]);
        let mask = if bool_mask {
            let m = b.alloc_tensor(&[2, 2], DType::Bool).unwrap();
            b.write_tensor(m, &[1, 0, 1, 1]).unwrap();
            m
        } else {
            upload(b, &[2, 2], &[0.0, f32::NEG_INFINITY, 0.0, 0.0])
        };
        let o = upload(b, &[2, 1], &[0.0, 0.0]);
        b.attention(q, k, v, o, Some(mask), 1.0).unwrap();
        download(b, o)
    };
    assert_eq!(run(&mut cpu_adapter(), false), [10.0, 15.0]);
    assert_eq!(run(&mut cpu_adapter(), true), [10.0, 15.0]);
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    assert_eq!(
        run(&mut cpu, false),
        [15.0, 15.0],
        "CpuBackend ignores the mask"
    );
}

/// `reduce_sum(dim)`: kernelc sums over `dim`; `CpuBackend` ignores it and writes the
/// total to `out[0]`. kernelc is right: the trait names the dimension.
#[test]
fn reduce_sum_over_a_dim_which_cpu_backend_ignores() {
    let run = |b: &mut dyn Backend| {
        let x = upload(b, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let out = upload(b, &[3], &[0.0; 3]);
        b.reduce_sum(x, out, Some(0)).unwrap();
        download(b, out)
    };
    assert_eq!(run(&mut cpu_adapter()), [5.0, 7.0, 9.0]);
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    assert_eq!(run(&mut cpu), [21.0, 0.0, 0.0]);
}

/// `softmax` over a dimension other than the last: kernelc computes it; `CpuBackend`
/// refuses ("only softmax along last dimension"). kernelc is right: the trait takes
/// any `dim`.
#[test]
fn softmax_over_the_first_dim_which_cpu_backend_refuses() {
    let run = |b: &mut dyn Backend| {
        let x = upload(b, &[2, 2], &[0.0, 1.0, 0.0, 3.0]);
        let out = upload(b, &[2, 2], &[0.0; 4]);
        b.softmax(x, out, 0).map(|()| download(b, out))
    };
    let y = run(&mut cpu_adapter()).expect("any dim");
    let e2 = 1.0 / (1.0 + (-2.0f32).exp());
    let want = [0.5, 1.0 - e2, 0.5, e2];
    for (a, b) in y.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{y:?} vs {want:?}");
    }
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    assert!(run(&mut cpu).is_err(), "CpuBackend: last dim only");
}

/// `attention` with more keys than queries: kernelc attends over every key;
/// `CpuBackend` takes `seq_kv = seq_q` and reads only the first `seq_q` keys (with
/// fewer keys than queries it indexes past `k`). kernelc is right: the keys' count is
/// k's shape.
#[test]
fn attention_over_more_keys_than_cpu_backend_reads() {
    let run = |b: &mut dyn Backend| {
        let q = upload(b, &[1, 1], &[1.0]);
        let k = upload(b, &[2, 1], &[1.0, 1.0]);
        let v = upload(b, &[2, 1], &[10.0, 20.0]);
        let o = upload(b, &[1, 1], &[0.0]);
        b.attention(q, k, v, o, None, 1.0).unwrap();
        download(b, o)
    };
    assert_eq!(run(&mut cpu_adapter()), [15.0], "both keys, equal weights");
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    assert_eq!(run(&mut cpu), [10.0], "CpuBackend reads the first key only");
}

/// rustd's only blur is its Vulkan shader: fixed 9-tap weights for σ = 2 whatever
/// `sigma` says (`CpuBackend` has none: an error, as for sobel and sharpen). kernelc
/// honours `sigma`. Shown on a unit impulse: its blurred row is the 1-D kernel.
#[test]
fn gaussian_blur_honours_sigma_where_rustds_shader_has_fixed_weights() {
    const GLSL_WEIGHTS: [f32; 9] = [
        0.0162, 0.0540, 0.1216, 0.1945, 0.2270, 0.1945, 0.1216, 0.0540, 0.0162,
    ];
    let mut b = cpu_adapter();
    let (h, w) = (1, 41);
    let mut impulse = vec![0.0f32; h * w];
    impulse[20] = 1.0;
    let row = |b: &mut RustdBackend, sigma: f64| {
        let x = upload(b, &[h, w, 1], &impulse);
        let y = upload(b, &[h, w, 1], &vec![0.0; h * w]);
        b.gaussian_blur(x, y, &Value::Float(sigma)).unwrap();
        download(b, y)
    };
    let (narrow, wide) = (row(&mut b, 1.0), row(&mut b, 2.0));
    assert_ne!(narrow, wide, "sigma changes the blur");
    // σ = 2: e^{-t²/8} normalised over t in [-6, 6].
    let z: f64 = (-6..=6).map(|t: i32| (-(t * t) as f64 / 8.0).exp()).sum();
    for t in -6i32..=6 {
        let want = ((-(t * t) as f64 / 8.0).exp() / z) as f32;
        assert!((wide[(20 + t) as usize] - want).abs() < 1e-6, "tap {t}");
    }
    assert!(
        (wide[20] - GLSL_WEIGHTS[4]).abs() > 0.02,
        "rustd's σ=2 centre weight {} is not a σ=2 Gaussian's {}",
        GLSL_WEIGHTS[4],
        wide[20]
    );
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    let x = upload(&mut cpu, &[1, 1, 3], &[0.5; 3]);
    let y = upload(&mut cpu, &[1, 1, 3], &[0.0; 3]);
    assert!(cpu.gaussian_blur(x, y, &Value::Float(2.0)).is_err());
    assert!(cpu.sobel_edges(x, y, &Value::Float(0.5)).is_err());
    assert!(cpu.sharpen(x, y).is_err());
}

/// Host scalars agree with `CpuBackend` wherever it follows its own `Value` rules;
/// where it breaks them (NaN and infinity as `Value::Float`, integer overflow that
/// panics), kernelc returns the error `Value::float` defines.
#[test]
fn scalars_follow_rustd_value_rules_without_panics() {
    let mut ours = cpu_adapter();
    let mut theirs = CpuBackend::new(&Default::default()).unwrap();
    let values = [
        Value::Integer(7),
        Value::Integer(-3),
        Value::Integer(0),
        Value::Float(2.5),
        Value::Float(-0.5),
        Value::Boolean(true),
        Value::String("a".into()),
    ];
    type Binary = fn(&mut dyn Backend, &Value, &Value) -> Result<Value, RustDError>;
    let binaries: [(&str, Binary); 12] = [
        ("add", |b, x, y| b.scalar_add(x, y)),
        ("sub", |b, x, y| b.scalar_sub(x, y)),
        ("mul", |b, x, y| b.scalar_mul(x, y)),
        ("div", |b, x, y| b.scalar_div(x, y)),
        ("mod", |b, x, y| b.scalar_mod(x, y)),
        ("pow", |b, x, y| b.scalar_pow(x, y)),
        ("eq", |b, x, y| b.scalar_eq(x, y)),
        ("ne", |b, x, y| b.scalar_ne(x, y)),
        ("lt", |b, x, y| b.scalar_lt(x, y)),
        ("le", |b, x, y| b.scalar_le(x, y)),
        ("gt", |b, x, y| b.scalar_gt(x, y)),
        ("ge", |b, x, y| b.scalar_ge(x, y)),
    ];
    for (name, f) in binaries {
        for x in &values {
            for y in &values {
                let (a, b) = (f(&mut ours, x, y), f(&mut theirs, x, y));
                match (&a, &b) {
                    (Ok(a), Ok(Value::Float(f))) if !f.is_finite() => {
                        panic!("{name}: CpuBackend {f}, kernelc {a:?}")
                    }
                    (Err(RustDError::FloatSpecial), Ok(Value::Float(f))) if !f.is_finite() => {}
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}({x:?}, {y:?})"),
                    (Err(_), Err(_)) => {}
                    _ => panic!("{name}({x:?}, {y:?}): kernelc {a:?}, CpuBackend {b:?}"),
                }
            }
        }
    }
    type Unary = fn(&mut dyn Backend, &Value) -> Result<Value, RustDError>;
    let unaries: [(&str, Unary); 10] = [
        ("sqrt", |b, x| b.scalar_sqrt(x)),
        ("sin", |b, x| b.scalar_sin(x)),
        ("cos", |b, x| b.scalar_cos(x)),
        ("tan", |b, x| b.scalar_tan(x)),
        ("log", |b, x| b.scalar_log(x)),
        ("exp", |b, x| b.scalar_exp(x)),
        ("floor", |b, x| b.scalar_floor(x)),
        ("ceil", |b, x| b.scalar_ceil(x)),
        ("round", |b, x| b.scalar_round(x)),
        ("abs", |b, x| b.scalar_abs(x)),
    ];
    for (name, f) in unaries {
        for x in &values {
            let (a, b) = (f(&mut ours, x), f(&mut theirs, x));
            match (&a, &b) {
                (Err(RustDError::FloatSpecial), Ok(Value::Float(f))) if !f.is_finite() => {}
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}({x:?})"),
                (Err(_), Err(_)) => {}
                _ => panic!("{name}({x:?}): kernelc {a:?}, CpuBackend {b:?}"),
            }
        }
    }
    // sqrt(-0.5) and log(0): CpuBackend makes a NaN / -inf Float, which Value forbids.
    assert_eq!(
        ours.scalar_sqrt(&Value::Float(-0.5)),
        Err(RustDError::FloatSpecial)
    );
    assert!(matches!(theirs.scalar_sqrt(&Value::Float(-0.5)), Ok(Value::Float(f)) if f.is_nan()));
    // Overflow: CpuBackend's i64 arithmetic panics in debug builds; kernelc refuses.
    for r in [
        ours.scalar_add(&Value::Integer(i64::MAX), &Value::Integer(1)),
        ours.scalar_mul(&Value::Integer(i64::MIN), &Value::Integer(-1)),
        ours.scalar_pow(&Value::Integer(3), &Value::Integer(64)),
        ours.scalar_abs(&Value::Integer(i64::MIN)),
        ours.scalar_mod(&Value::Integer(i64::MIN), &Value::Integer(-1)),
        ours.scalar_floor(&Value::Float(1e300)),
    ] {
        assert!(matches!(r, Err(RustDError::ValidationFail { .. })), "{r:?}");
    }
}

/// Bad handles, dtypes, shapes and sizes: the trait's error, nothing written.
#[test]
fn bad_input_is_the_traits_error_and_writes_nothing() {
    let mut b = cpu_adapter();
    let x = upload(&mut b, &[2, 3], &[1.0; 6]);
    let out = upload(&mut b, &[2, 3], &[7.0; 6]);
    let ints = b.alloc_tensor(&[2, 3], DType::I32).unwrap();
    let unchanged = |b: &RustdBackend, what: &str| assert_eq!(download(b, out), [7.0; 6], "{what}");
    let missing = TensorHandle(9999);
    assert!(matches!(
        b.relu(missing, out),
        Err(RustDError::HandleNotFound { .. })
    ));
    assert!(matches!(
        b.tensor_meta(missing),
        Err(RustDError::HandleNotFound { .. })
    ));
    assert!(matches!(
        b.relu(ints, out),
        Err(RustDError::TypeError { .. })
    ));
    unchanged(&b, "wrong dtype");
    let small = upload(&mut b, &[3], &[1.0; 3]);
    assert!(matches!(
        b.pointwise_add(x, small, out),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.matmul(x, x, out),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.softmax(x, out, 2),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.reduce_sum(x, out, Some(0)),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.write_tensor(out, &[0u8; 5]),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.attention(x, x, x, out, Some(small), 1.0),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.grayscale(x, out),
        Err(RustDError::TypeError { .. })
    ));
    assert!(matches!(
        b.gaussian_blur(x, out, &Value::Float(-1.0)),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.adam_update(x, small, x, x, 0.1, 0.9, 0.99, 1e-8, 1),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.adam_update(x, x, out, out, 0.1, 0.9, 0.99, 1e-8, 0),
        Err(RustDError::ValidationFail { .. })
    ));
    assert!(matches!(
        b.alloc_tensor(&[usize::MAX, 2], DType::F32),
        Err(RustDError::ValidationFail { .. })
    ));
    unchanged(&b, "refused calls");
    b.free_tensor(out).unwrap();
    assert!(
        matches!(b.relu(x, out), Err(RustDError::HandleNotFound { .. })),
        "freed handle"
    );
    b.free_tensor(out)
        .expect("freeing twice is fine, as in rustd");
    // In place: `out` may be an input.
    b.relu(x, x).unwrap();
    assert_eq!(download(&b, x), [1.0; 6]);
    assert_eq!(
        b.abi_fingerprint(),
        rustd_runtime::backend::BACKEND_ABI_FINGERPRINT
    );
    let meta = b.tensor_meta(ints).unwrap();
    assert_eq!((meta.shape, meta.size_bytes), (vec![2, 3], 24));
}

/// Adam's `lr` and `step` change every call: one compile serves the loop.
#[test]
fn adam_loop_compiles_once() {
    let rt = common::runtimes_on("adam", &[]).remove(0);
    let mut b = RustdBackend::with_runtime(rt);
    let p = upload(&mut b, &[64], &[0.5; 64]);
    let g = upload(&mut b, &[64], &[0.25; 64]);
    let m = upload(&mut b, &[64], &[0.0; 64]);
    let v = upload(&mut b, &[64], &[0.0; 64]);
    b.adam_update(p, g, m, v, 1e-2, 0.9, 0.999, 1e-8, 1)
        .unwrap();
    let after_first = b.runtime().stats().compiles;
    for step in 2..=50 {
        b.adam_update(p, g, m, v, 1e-2 / step as f64, 0.9, 0.999, 1e-8, step)
            .unwrap();
    }
    assert_eq!(b.runtime().stats().compiles, after_first);
    let mut cpu = CpuBackend::new(&Default::default()).unwrap();
    let (cp, cg, cm, cv) = (
        upload(&mut cpu, &[64], &[0.5; 64]),
        upload(&mut cpu, &[64], &[0.25; 64]),
        upload(&mut cpu, &[64], &[0.0; 64]),
        upload(&mut cpu, &[64], &[0.0; 64]),
    );
    for step in 1..=50 {
        cpu.adam_update(cp, cg, cm, cv, 1e-2 / step as f64, 0.9, 0.999, 1e-8, step)
            .unwrap();
    }
    let (ours, theirs) = (download(&b, p), download(&cpu, cp));
    for (a, b) in ours.iter().zip(&theirs) {
        assert!((a - b).abs() <= 1e-6, "kernelc {a}, CpuBackend {b}");
    }
}

/// The caller's SPIR-V runs on wgpu devices through the raw-module API and returns
/// the trait's own "not supported" error elsewhere.
#[test]
fn dispatch_compute_runs_spirv_on_wgpu_only() {
    let wgsl = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] * 3.0; }
}";
    let module = wgpu::naga::front::wgsl::parse_str(wgsl).unwrap();
    let info = wgpu::naga::valid::Validator::new(
        Default::default(),
        wgpu::naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap();
    let words =
        wgpu::naga::back::spv::write_vec(&module, &info, &Default::default(), None).unwrap();
    let spirv: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    for rt in common::runtimes_on("rustd dispatch_compute", &common::ALL_PATHS[..4]) {
        let on_wgpu = rt.target_name() != "cpu";
        let mut b = RustdBackend::with_runtime(rt);
        let x = upload(&mut b, &[100], &[2.0; 100]);
        let r = b.dispatch_compute(&spirv, &[x], &[], [2, 1, 1]);
        if on_wgpu {
            r.unwrap();
            b.dispatch_compute(&spirv, &[x], &[], [2, 1, 1]).unwrap();
            assert_eq!(download(&b, x), [18.0; 100]);
        } else {
            let Err(RustDError::BackendError { message }) = r else {
                panic!("{r:?}")
            };
            assert!(
                message.starts_with("Generic compute dispatch not supported"),
                "{message}"
            );
            assert_eq!(download(&b, x), [2.0; 100]);
        }
    }
}
