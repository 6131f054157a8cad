//! ferrum-interfaces' `ComputeBackend` served by kernelc ([`FerrumBackend`]).
//!
//! Every method `kernels::seeds` maps to a catalogue op runs through the conformance
//! harness: an [`Executor`] that uploads the inputs as ferrum tensors, calls the trait
//! method a spec describes and reads the result back, checked against the f64
//! reference under docs/semantics.md, on the cpu and every wgpu path (lavapipe in
//! CI), CUDA where present. The host-side methods (memory manager, kernel executor,
//! tensor metadata and transfers, sampling, the backend's lifecycle) have their own
//! tests below, with the typed refusals of bad input.

mod common;

use ferrum_interfaces::backend::{KernelArg, ScalarValue};
use ferrum_interfaces::kernel_ops::{AttentionParams, SamplingParams};
use ferrum_interfaces::memory::{MemoryPoolConfig, MemoryPressure};
use ferrum_interfaces::tensor::{TensorLike, TensorRef};
use ferrum_interfaces::ComputeBackend;
use ferrum_types::{DataType, Device, FerrumError};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::conformance::Executor;
use kernelc_kernels::seeds;
use kernelc_kernels::spec::*;
use kernelc_runtime::adapters::ferrum::{self as adapter, FerrumBackend};
use kernelc_runtime::View;
use std::sync::Arc;

use ScalarType::{Bf16, Bool, F16, F32, I32, U32, U8};

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

fn err(e: FerrumError) -> String {
    e.to_string()
}

/// Calls the ferrum method `method` for the spec each case describes.
struct Through<'a> {
    backend: &'a FerrumBackend,
    method: &'static str,
    label: String,
}

impl Through<'_> {
    /// `data` as a ferrum tensor of `shape` (its dtype's values, uploaded exactly).
    fn upload(&self, data: &HostBuffer, shape: &[usize]) -> Result<TensorRef, String> {
        let rt = self.backend.context().runtime();
        let bytes = shape.iter().product::<usize>() * data.elem.size_bytes() as usize;
        let buffer = rt.alloc_buffer(bytes).map_err(|e| e.to_string())?;
        let view = View::new(&buffer, 0, data.elem, shape).map_err(|e| e.to_string())?;
        rt.write_view_f64(&view, &data.to_f64())
            .map_err(|e| e.to_string())?;
        self.backend.wrap(view).map_err(err)
    }

    fn download(&self, t: &TensorRef, dtype: ScalarType) -> Result<HostBuffer, String> {
        let ours = t
            .as_any()
            .downcast_ref::<adapter::FerrumTensor>()
            .ok_or("not a kernelc tensor")?;
        let rt = self.backend.context().runtime();
        let values = rt
            .read_view_f64(ours.view_ref())
            .map_err(|e| e.to_string())?;
        Ok(HostBuffer::new(
            dtype,
            values.iter().map(|&v| Scalar::from_f64(dtype, v)).collect(),
        ))
    }

    fn u32_out(&self, v: u32) -> HostBuffer {
        HostBuffer::new(U32, vec![Scalar::U32(v)])
    }

    fn call(&self, spec: &OpSpec, data: &[HostBuffer]) -> Result<Vec<HostBuffer>, FerrumError> {
        let b = self.backend;
        let ops = b.tensor_ops();
        let kops = b.kernel_ops().expect("kernel ops");
        let factory = b.tensor_factory();
        let up = |i: usize, shape: &[usize]| {
            self.upload(&data[i], shape)
                .map_err(FerrumError::invalid_parameter)
        };
        let sig_shape = |i: usize| spec.inputs()[i].shape.clone();
        let out = |t: TensorRef| -> Result<HostBuffer, FerrumError> {
            self.download(&t, spec.outputs()[0].dtype)
                .map_err(FerrumError::internal)
        };
        let device = b.context().device().clone();
        let one = |t: Result<TensorRef, FerrumError>| -> Result<Vec<HostBuffer>, FerrumError> {
            Ok(vec![out(t?)?])
        };
        let dtype_of = |t: ScalarType| adapter_dtype(t);
        match (self.method, spec) {
            ("view", OpSpec::Slice(s)) => {
                let x = up(0, &s.shape)?;
                let end: Vec<usize> = s.starts.iter().zip(&s.sizes).map(|(a, n)| a + n).collect();
                one(x.view(&s.starts, &end))
            }
            ("narrow", OpSpec::Slice(s)) => {
                let x = up(0, &s.shape)?;
                let dim = (0..s.shape.len())
                    .find(|&d| s.sizes[d] != s.shape[d])
                    .unwrap_or(0);
                one(factory.narrow(&x, dim, s.starts[dim], s.sizes[dim]))
            }
            ("split", OpSpec::Slice(s)) => {
                let x = up(0, &s.shape)?;
                let dim = (0..s.shape.len())
                    .find(|&d| s.sizes[d] != s.shape[d])
                    .unwrap_or(0);
                let (start, size) = (s.starts[dim], s.sizes[dim]);
                let sizes = [start, size, s.shape[dim] - start - size];
                let mut parts = ops.split(&x, &sizes, dim)?;
                one(Ok(parts.remove(1)))
            }
            ("to_dtype", OpSpec::Cast(c)) => one(up(0, &c.shape)?.to_dtype(dtype_of(c.to))),
            ("argmax_last_dim_u32", OpSpec::Reduce(r)) => {
                Ok(vec![self.u32_out(up(0, &r.shape)?.argmax_last_dim_u32()?)])
            }
            ("argmax", OpSpec::Reduce(r)) => {
                let x = up(0, &r.shape)?;
                Ok(vec![self.u32_out(
                    kops.sampling_ops().expect("sampling").argmax(&x)?,
                )])
            }
            ("zeros_like", OpSpec::Fill(f)) => {
                let like = factory.empty(&f.shape, dtype_of(f.dtype), device)?;
                one(factory.zeros_like(&like))
            }
            ("zeros", OpSpec::Fill(f)) => one(factory.zeros(&f.shape, dtype_of(f.dtype), &device)),
            ("ones", OpSpec::Fill(f)) => one(factory.ones(&f.shape, dtype_of(f.dtype), &device)),
            ("uniform", OpSpec::Fill(f)) => match f.value {
                FillValue::Uniform { low, high, .. } => one(factory.uniform(
                    &f.shape,
                    low as f32,
                    high as f32,
                    dtype_of(f.dtype),
                    &device,
                )),
                _ => Err(FerrumError::internal(
                    "a uniform case without uniform values",
                )),
            },
            ("normal", OpSpec::Fill(f)) => match f.value {
                FillValue::Normal { mean, std, .. } => one(factory.normal(
                    &f.shape,
                    mean as f32,
                    std as f32,
                    dtype_of(f.dtype),
                    &device,
                )),
                _ => Err(FerrumError::internal("a normal case without normal values")),
            },
            ("matmul", OpSpec::Gemm(g)) => {
                let a_shape = [&g.batch[..], &[g.m, g.k]].concat();
                let b_shape = match &g.stride_b {
                    Some(s) if s.iter().all(|&x| x == 0) => vec![g.k, g.n],
                    _ => [&g.batch[..], &[g.k, g.n]].concat(),
                };
                let (x, y) = (up(0, &a_shape)?, up(1, &b_shape)?);
                one(ops.matmul(&x, &y))
            }
            ("linear", OpSpec::Gemm(g)) => one(kops
                .linear_ops()
                .expect("linear")
                .linear(&up(0, &[g.m, g.k])?, &up(1, &[g.n, g.k])?)),
            ("add" | "sub" | "mul" | "div" | "silu_mul", OpSpec::Binary(s)) => {
                let (x, y) = (up(0, &s.lhs)?, up(1, &s.rhs)?);
                one(match self.method {
                    "add" => ops.add(&x, &y),
                    "sub" => ops.sub(&x, &y),
                    "mul" => ops.mul(&x, &y),
                    "div" => ops.div(&x, &y),
                    _ => kops.activation_ops().expect("activation").silu_mul(&x, &y),
                })
            }
            ("relu" | "gelu" | "silu", OpSpec::Unary(u)) => {
                let x = up(0, &u.shape)?;
                one(match (self.method, u.dtype) {
                    ("relu", _) => ops.relu(&x),
                    ("silu", _) => ops.silu(&x),
                    // The activation sub-trait's gelu on half types, TensorOps' else.
                    (_, F16 | Bf16) => kops.activation_ops().expect("activation").gelu(&x),
                    _ => ops.gelu(&x),
                })
            }
            ("softmax", OpSpec::Softmax(s)) => {
                // A negative dim where the axis is the last.
                let rank = s.shape.len() as i32;
                let dim = if s.axis as i32 == rank - 1 {
                    -1
                } else {
                    s.axis as i32
                };
                one(ops.softmax(&up(0, &s.shape)?, dim))
            }
            ("layer_norm" | "rms_norm", OpSpec::LayerNorm(l)) => {
                let cols = *l.shape.last().unwrap_or(&1);
                let x = up(0, &l.shape)?;
                let w = up(1, &[cols])?;
                let eps = l.eps as f32;
                one(match (self.method, l.bias) {
                    ("layer_norm", true) => ops.layer_norm(&x, &w, Some(&up(2, &[cols])?), eps),
                    ("layer_norm", false) => ops.layer_norm(&x, &w, None, eps),
                    // NormOps' on half types, TensorOps' else.
                    _ if matches!(l.dtype, F16 | Bf16) => {
                        kops.norm_ops().expect("norm").rms_norm(&x, &w, eps)
                    }
                    _ => ops.rms_norm(&x, &w, eps),
                })
            }
            ("rms_norm_residual", OpSpec::LayerNorm(l)) => {
                let cols = *l.shape.last().unwrap_or(&1);
                let (x, r, w) = (up(0, &l.shape)?, up(1, &l.shape)?, up(2, &[cols])?);
                let (y, sum) =
                    kops.norm_ops()
                        .expect("norm")
                        .rms_norm_residual(&x, &r, &w, l.eps as f32)?;
                Ok(vec![out(y)?, out(sum)?])
            }
            ("concat", OpSpec::Concat(c)) => {
                let parts = c
                    .shapes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| up(i, s))
                    .collect::<Result<Vec<_>, _>>()?;
                one(ops.concat(&parts.iter().collect::<Vec<_>>(), c.axis))
            }
            ("transpose", OpSpec::Permute(p)) => {
                let swapped: Vec<usize> = (0..p.perm.len()).filter(|&d| p.perm[d] != d).collect();
                let (d0, d1) = (swapped[0], swapped[1]);
                one(ops.transpose(&up(0, &p.shape)?, d0, d1))
            }
            ("permute", OpSpec::Permute(p)) => one(ops.permute(&up(0, &p.shape)?, &p.perm)),
            ("rotary_embedding", OpSpec::Rope(_)) => {
                let x = up(0, &sig_shape(0))?;
                let (cos, sin) = (up(1, &sig_shape(1))?, up(2, &sig_shape(2))?);
                let positions: Vec<usize> = data[3].to_f64().iter().map(|&p| p as usize).collect();
                one(kops
                    .position_ops()
                    .expect("position")
                    .rotary_embedding(&x, &cos, &sin, &positions))
            }
            ("attention", OpSpec::Attention(a)) => {
                let (q, k, v) = (
                    up(0, &sig_shape(0))?,
                    up(1, &sig_shape(1))?,
                    up(2, &sig_shape(2))?,
                );
                let params = AttentionParams {
                    num_heads: a.heads,
                    num_kv_heads: a.kv_heads,
                    head_dim: a.head_dim,
                    softmax_scale: a.scale as f32,
                    causal: a.causal,
                };
                one(kops
                    .attention_ops()
                    .expect("attention")
                    .attention(&q, &k, &v, &params))
            }
            (m, s) => Err(FerrumError::internal(format!(
                "no call for {m} on {}",
                s.name()
            ))),
        }
    }
}

fn adapter_dtype(t: ScalarType) -> DataType {
    match t {
        F32 => DataType::FP32,
        F16 => DataType::FP16,
        Bf16 => DataType::BF16,
        I32 => DataType::INT32,
        U32 => DataType::UINT32,
        U8 => DataType::UINT8,
        Bool => DataType::BOOL,
        ScalarType::I8 => DataType::INT8,
        ScalarType::I16 => DataType::INT16,
        ScalarType::U16 => DataType::UINT16,
        other => panic!("no ferrum dtype for {other}"),
    }
}

impl Executor for Through<'_> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        self.call(spec, inputs).map_err(err)
    }
}

fn json(s: &str) -> OpSpec {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// A random fill of the factory's seed (its stream is set per call: `with_step`).
fn fill(value: &str) -> String {
    value.replace("SEED", &adapter::RANDOM_SEED.to_string())
}

/// (method, spec JSON); `SEED` in a random fill is the factory's seed.
const CASES: &[(&str, &str)] = &[
    (
        "view",
        r#"{"op":"slice","dtype":"f32","shape":[4,6,5],"starts":[1,2,0],"sizes":[2,3,5],"steps":[1,1,1]}"#,
    ),
    (
        "view",
        r#"{"op":"slice","dtype":"u8","shape":[9,7],"starts":[0,3],"sizes":[9,4],"steps":[1,1]}"#,
    ),
    (
        "narrow",
        r#"{"op":"slice","dtype":"bf16","shape":[5,8],"starts":[0,2],"sizes":[5,5],"steps":[1,1]}"#,
    ),
    (
        "split",
        r#"{"op":"slice","dtype":"i32","shape":[6,3],"starts":[2,0],"sizes":[3,3],"steps":[1,1]}"#,
    ),
    (
        "to_dtype",
        r#"{"op":"cast","from":"f32","to":"f16","shape":[37]}"#,
    ),
    (
        "to_dtype",
        r#"{"op":"cast","from":"f32","to":"i32","shape":[3,11]}"#,
    ),
    (
        "to_dtype",
        r#"{"op":"cast","from":"u8","to":"bool","shape":[20]}"#,
    ),
    (
        "argmax_last_dim_u32",
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[151],"axes":[0],"index_dtype":"u32"}"#,
    ),
    (
        "argmax",
        r#"{"op":"reduce","func":"arg_max","dtype":"f16","shape":[3,40],"axes":[0,1],"index_dtype":"u32"}"#,
    ),
    (
        "zeros_like",
        r#"{"op":"fill","dtype":"f16","shape":[3,5],"value":{"constant":{"value":0.0}}}"#,
    ),
    (
        "zeros",
        r#"{"op":"fill","dtype":"i32","shape":[17],"value":{"constant":{"value":0.0}}}"#,
    ),
    (
        "ones",
        r#"{"op":"fill","dtype":"bf16","shape":[2,9],"value":{"constant":{"value":1.0}}}"#,
    ),
    (
        "ones",
        r#"{"op":"fill","dtype":"bool","shape":[6],"value":{"constant":{"value":1.0}}}"#,
    ),
    (
        "uniform",
        r#"{"op":"fill","dtype":"f32","shape":[300],"value":{"uniform":{"low":-2.0,"high":3.0,"seed":SEED,"step":0}}}"#,
    ),
    (
        "normal",
        r#"{"op":"fill","dtype":"f32","shape":[2,150],"value":{"normal":{"mean":1.0,"std":0.5,"seed":SEED,"step":0}}}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f32","m":7,"n":5,"k":9,"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f16","m":4,"n":6,"k":8,"batch":[3],"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f32","m":3,"n":4,"k":5,"batch":[2,2],"stride_a":[30,15],"stride_b":[0,0],"stride_c":[24,12],"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "linear",
        r#"{"op":"gemm","dtype":"f32","m":6,"n":10,"k":12,"trans_b":true,"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "linear",
        r#"{"op":"gemm","dtype":"bf16","m":3,"n":8,"k":16,"trans_b":true,"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "add",
        r#"{"op":"binary","func":"add","dtype":"f32","lhs":[4,7],"rhs":[7]}"#,
    ),
    (
        "add",
        r#"{"op":"binary","func":"add","dtype":"i32","lhs":[30],"rhs":[30]}"#,
    ),
    (
        "sub",
        r#"{"op":"binary","func":"sub","dtype":"f16","lhs":[3,1,5],"rhs":[4,1]}"#,
    ),
    (
        "mul",
        r#"{"op":"binary","func":"mul","dtype":"u8","lhs":[25],"rhs":[25]}"#,
    ),
    (
        "div",
        r#"{"op":"binary","func":"div","dtype":"f32","lhs":[6,8],"rhs":[6,8]}"#,
    ),
    (
        "silu_mul",
        r#"{"op":"binary","func":"silu_mul","dtype":"f32","lhs":[5,16],"rhs":[5,16]}"#,
    ),
    (
        "silu_mul",
        r#"{"op":"binary","func":"silu_mul","dtype":"bf16","lhs":[40],"rhs":[40]}"#,
    ),
    (
        "relu",
        r#"{"op":"unary","func":"relu","dtype":"f32","shape":[50]}"#,
    ),
    (
        "gelu",
        r#"{"op":"unary","func":"gelu_tanh","dtype":"f32","shape":[8,9]}"#,
    ),
    (
        "gelu",
        r#"{"op":"unary","func":"gelu_tanh","dtype":"f16","shape":[33]}"#,
    ),
    (
        "silu",
        r#"{"op":"unary","func":"silu","dtype":"bf16","shape":[64]}"#,
    ),
    (
        "softmax",
        r#"{"op":"softmax","dtype":"f32","shape":[6,33],"axis":1}"#,
    ),
    (
        "softmax",
        r#"{"op":"softmax","dtype":"f16","shape":[5,4,3],"axis":0}"#,
    ),
    (
        "layer_norm",
        r#"{"op":"layer_norm","dtype":"f32","shape":[5,48],"eps":0.00001,"weight":true,"bias":true}"#,
    ),
    (
        "layer_norm",
        r#"{"op":"layer_norm","dtype":"f32","shape":[2,3,20],"eps":0.001,"weight":true}"#,
    ),
    (
        "rms_norm",
        r#"{"op":"layer_norm","dtype":"f32","shape":[7,64],"eps":0.000001,"rms":true,"weight":true}"#,
    ),
    (
        "rms_norm",
        r#"{"op":"layer_norm","dtype":"f16","shape":[3,32],"eps":0.00001,"rms":true,"weight":true}"#,
    ),
    (
        "rms_norm_residual",
        r#"{"op":"layer_norm","dtype":"f32","shape":[4,40],"eps":0.00001,"rms":true,"weight":true,"residual":true}"#,
    ),
    (
        "concat",
        r#"{"op":"concat","dtype":"f32","shapes":[[2,3],[2,5],[2,1]],"axis":1}"#,
    ),
    (
        "concat",
        r#"{"op":"concat","dtype":"i32","shapes":[[1,4],[3,4]],"axis":0}"#,
    ),
    (
        "transpose",
        r#"{"op":"permute","dtype":"f32","shape":[3,4,5],"perm":[2,1,0]}"#,
    ),
    (
        "permute",
        r#"{"op":"permute","dtype":"f16","shape":[2,3,4,5],"perm":[0,2,1,3]}"#,
    ),
    (
        "rotary_embedding",
        r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":2,"seq":5,"heads":3,"head_dim":8,"max_positions":12}"#,
    ),
    (
        "rotary_embedding",
        r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":2,"seq":3,"heads":1,"head_dim":8,"max_positions":10,"batch_positions":true}"#,
    ),
    (
        "attention",
        r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":2,"heads":4,"kv_heads":2,"seq_q":5,"seq_k":9,"head_dim":16,"scale":0.25,"causal":true}"#,
    ),
    (
        "attention",
        r#"{"op":"attention","dtype":"f16","layout":"bshd","batch":1,"heads":2,"kv_heads":2,"seq_q":7,"seq_k":7,"head_dim":8,"scale":0.35,"causal":false}"#,
    ),
];

fn cases() -> Vec<(&'static str, OpSpec)> {
    CASES
        .iter()
        .map(|&(method, spec)| (method, json(&fill(spec))))
        .collect()
}

fn label(b: &FerrumBackend) -> String {
    let rt = b.context().runtime();
    format!(
        "ferrum adapter on {} ({})",
        rt.device_name(),
        rt.target_name()
    )
}

#[test]
fn every_op_method_conforms_on_every_device() {
    let cases = cases();
    common::assert_cases_cover(
        &[
            seeds::FERRUM_TENSOR_LIKE,
            seeds::FERRUM_TENSOR_FACTORY,
            seeds::FERRUM_TENSOR_OPS,
            seeds::FERRUM_NORM,
            seeds::FERRUM_POSITION,
            seeds::FERRUM_ATTENTION,
            seeds::FERRUM_ACTIVATION,
            seeds::FERRUM_LINEAR,
            seeds::FERRUM_SAMPLING,
        ],
        &cases,
    );
    for rt in common::runtimes_on("ferrum adapter", common::ALL_PATHS) {
        let backend = FerrumBackend::with_runtime(rt, Device::CPU);
        let name = label(&backend);
        let caps = backend.context().runtime().caps().clone();
        common::check_adapter_cases(
            &name,
            &caps,
            &cases,
            |method, spec| {
                // A random factory draws the context's next stream.
                let spec = with_step(spec, backend.context().next_draw());
                let exec = Through {
                    backend: &backend,
                    method,
                    label: name.clone(),
                };
                (exec, spec)
            },
            |e| e.contains("Unsupported operation"),
        );
    }
}

/// `spec` with a random fill's stream at `step`.
fn with_step(spec: &OpSpec, step: u64) -> OpSpec {
    let mut spec = spec.clone();
    if let OpSpec::Fill(f) = &mut spec {
        match &mut f.value {
            FillValue::Uniform { step: s, .. } | FillValue::Normal { step: s, .. } => *s = step,
            FillValue::Constant { .. } => {}
        }
    }
    spec
}

/// The CPU backend (its shared context).
fn cpu() -> FerrumBackend {
    FerrumBackend::new(&Device::CPU).expect("the cpu backend")
}

fn from(b: &FerrumBackend, data: &[f32], shape: &[usize], dtype: DataType) -> TensorRef {
    b.tensor_factory()
        .from_slice(data, shape, dtype, Device::CPU)
        .expect("a tensor")
}

fn is_invalid(r: Result<impl std::fmt::Debug, FerrumError>, what: &str) -> String {
    match r {
        Err(e @ FerrumError::InvalidParameter { .. }) => e.to_string(),
        other => panic!("{what}: want InvalidParameter, got {other:?}"),
    }
}

#[test]
fn tensors_report_their_metadata_and_move() {
    let b = cpu();
    let t = from(&b, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], DataType::FP32);
    assert_eq!(
        (t.shape(), t.dtype(), t.device()),
        (&[2usize, 3][..], DataType::FP32, Device::CPU)
    );
    assert_eq!(
        (t.numel(), t.ndim(), t.size_bytes(), t.is_contiguous()),
        (6, 2, 24, true)
    );
    let r = t.reshape(&[3, 2]).unwrap();
    assert_eq!(r.shape(), &[3, 2]);
    assert_eq!(r.to_vec_f32().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    is_invalid(t.reshape(&[4]), "reshape to fewer elements");
    // A box, end-exclusive.
    let v = t.view(&[0, 1], &[2, 3]).unwrap();
    assert_eq!(v.to_vec_f32().unwrap(), vec![2.0, 3.0, 5.0, 6.0]);
    is_invalid(t.view(&[0, 2], &[2, 4]), "a view past the end");
    is_invalid(t.view(&[0], &[2]), "a view of the wrong rank");
    // dtypes.
    let h = t.to_dtype(DataType::FP16).unwrap();
    assert_eq!(h.dtype(), DataType::FP16);
    assert_eq!(h.to_vec_f32().unwrap(), t.to_vec_f32().unwrap());
    is_invalid(t.to_vec_u32(), "to_vec_u32 of floats");
    let ints = from(&b, &[7.0, 0.0, 65535.0], &[3], DataType::UINT16);
    assert_eq!(ints.to_vec_u32().unwrap(), vec![7, 0, 65535]);
    let negative = from(&b, &[-1.0], &[1], DataType::INT32);
    is_invalid(negative.to_vec_u32(), "a negative u32");
    assert!(matches!(
        t.to_dtype(DataType::INT4),
        Err(FerrumError::Unsupported { .. })
    ));
    // The last row's argmax (the next token of [.., seq, vocab]).
    let logits = from(&b, &[9.0, 1.0, 2.0, 0.5, 3.0, 3.0], &[2, 3], DataType::FP32);
    assert_eq!(logits.argmax_last_dim_u32().unwrap(), 1);
    // Devices: its own is itself; ROCm is not served.
    let ours = |t: &TensorRef| {
        t.as_any()
            .downcast_ref::<adapter::FerrumTensor>()
            .expect("ours")
            .view_ref()
            .clone()
    };
    assert!(
        ours(&t.to_cpu().unwrap()).buffer().same(ours(&t).buffer()),
        "no copy"
    );
    assert!(matches!(
        t.to_device(&Device::ROCm(0)),
        Err(FerrumError::Unsupported { .. })
    ));
    let wrong = b
        .tensor_factory()
        .from_slice(&[1.0; 5], &[2, 3], DataType::FP32, Device::CPU);
    is_invalid(wrong, "from_slice with too few values");
}

/// A tensor of another ferrum implementation (it has all the data, as f32).
#[derive(Debug)]
struct Foreign(Vec<f32>, Vec<usize>);

impl TensorLike for Foreign {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn shape(&self) -> &[usize] {
        &self.1
    }
    fn dtype(&self) -> DataType {
        DataType::FP32
    }
    fn device(&self) -> Device {
        Device::CPU
    }
    fn is_contiguous(&self) -> bool {
        true
    }
    fn view(&self, _: &[usize], _: &[usize]) -> ferrum_types::Result<TensorRef> {
        Err(FerrumError::unsupported("view"))
    }
    fn reshape(&self, _: &[usize]) -> ferrum_types::Result<TensorRef> {
        Err(FerrumError::unsupported("reshape"))
    }
    fn to_cpu(&self) -> ferrum_types::Result<TensorRef> {
        Err(FerrumError::unsupported("to_cpu"))
    }
    fn to_device(&self, _: &Device) -> ferrum_types::Result<TensorRef> {
        Err(FerrumError::unsupported("to_device"))
    }
    fn to_dtype(&self, _: DataType) -> ferrum_types::Result<TensorRef> {
        Err(FerrumError::unsupported("to_dtype"))
    }
    fn to_vec_f32(&self) -> ferrum_types::Result<Vec<f32>> {
        Ok(self.0.clone())
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let b = cpu();
    let ops = b.tensor_ops();
    let x = from(&b, &[1.0; 6], &[2, 3], DataType::FP32);
    let foreign: TensorRef = Arc::new(Foreign(vec![1.0; 6], vec![2, 3]));
    let why = is_invalid(ops.add(&x, &foreign), "a foreign tensor");
    assert!(why.contains("another backend"), "{why}");
    // Imported through from_tensor, it computes.
    let imported = b
        .tensor_factory()
        .from_tensor(&foreign, &Device::CPU)
        .unwrap();
    assert_eq!(
        ops.add(&x, &imported).unwrap().to_vec_f32().unwrap(),
        vec![2.0; 6]
    );
    // Another backend's tensor must be moved first.
    let other = FerrumBackend::with_runtime(kernelc_runtime::Runtime::cpu(), Device::CPU);
    let theirs = from(&other, &[1.0; 6], &[2, 3], DataType::FP32);
    let why = is_invalid(ops.add(&x, &theirs), "another backend's tensor");
    assert!(why.contains("to_device"), "{why}");
    let half = x.to_dtype(DataType::FP16).unwrap();
    is_invalid(ops.mul(&x, &half), "mixed dtypes");
    is_invalid(
        ops.add(&x, &from(&b, &[1.0; 4], &[4], DataType::FP32)),
        "shapes that do not broadcast",
    );
    is_invalid(ops.matmul(&x, &x), "matmul of [2,3]·[2,3]");
    is_invalid(ops.softmax(&x, 2), "softmax over dim 2 of 2 dims");
    is_invalid(ops.softmax(&x, -3), "softmax over dim -3 of 2 dims");
    let w = from(&b, &[1.0; 2], &[2], DataType::FP32);
    is_invalid(
        ops.layer_norm(&x, &w, None, 1e-5),
        "a weight of the wrong length",
    );
    is_invalid(ops.split(&x, &[1, 1], 1), "split sizes short of the dim");
    is_invalid(ops.transpose(&x, 0, 2), "transpose past the rank");
    is_invalid(ops.permute(&x, &[0, 0]), "a permutation repeating a dim");
    is_invalid(ops.concat(&[&x, &half], 0), "concat of mixed dtypes");
    let linear = b.kernel_ops().unwrap().linear_ops().unwrap();
    is_invalid(
        linear.linear(&x, &from(&b, &[1.0; 8], &[4, 2], DataType::FP32)),
        "linear weight [4,2] for rows of 3",
    );
    // The failure is kept for status().
    assert!(b.status().last_error.is_some());
}

#[test]
fn matmul_broadcasts_like_numpy() {
    let b = cpu();
    let ops = b.tensor_ops();
    let a = from(
        &b,
        &(0..24).map(|v| v as f32).collect::<Vec<_>>(),
        &[2, 3, 4],
        DataType::FP32,
    );
    let v = from(&b, &[1.0, 0.0, -1.0, 2.0], &[4], DataType::FP32);
    // [2,3,4]·[4] = [2,3].
    let av = ops.matmul(&a, &v).unwrap();
    assert_eq!(av.shape(), &[2, 3]);
    let rows: Vec<f32> = (0..6)
        .map(|r| {
            let base = 4.0 * r as f32;
            base - (base + 2.0) + 2.0 * (base + 3.0)
        })
        .collect();
    assert_eq!(av.to_vec_f32().unwrap(), rows);
    // [4]·[2,4,3] = [2,3].
    let c = from(
        &b,
        &(0..24).map(|v| v as f32).collect::<Vec<_>>(),
        &[2, 4, 3],
        DataType::FP32,
    );
    assert_eq!(ops.matmul(&v, &c).unwrap().shape(), &[2, 3]);
    is_invalid(
        ops.matmul(&from(&b, &[1.0], &[], DataType::FP32), &v),
        "a 0-dim operand",
    );
}

#[test]
fn memory_manager_allocates_copies_and_refuses_bad_handles() {
    let b = cpu();
    let m = b.memory_manager();
    let rt = b.context().runtime();
    let read = |h: u64, n: usize| {
        let (buf, at) = rt.resolve(h, n).unwrap();
        rt.read_buffer(&buf, at, n).unwrap()
    };
    let src = block(m.allocate(64, &Device::CPU)).unwrap();
    let dst = block(m.allocate(64, &Device::CPU)).unwrap();
    assert!(src.is_valid() && dst.is_valid());
    assert_eq!(read(dst.0, 64), vec![0; 64], "zeroed");
    let (buf, at) = rt.resolve(src.0, 64).unwrap();
    rt.write_buffer(&buf, at, &(0..64).collect::<Vec<u8>>())
        .unwrap();
    block(m.copy(src, dst, 16, 8, 32)).unwrap();
    let got = read(dst.0, 64);
    assert_eq!(&got[32..48], &(8..24).collect::<Vec<u8>>()[..]);
    assert_eq!(&got[..32], &[0; 32][..]);
    let transfer = ferrum_interfaces::memory::MemoryTransfer {
        src,
        dst,
        size: 8,
        src_offset: 0,
        dst_offset: 0,
    };
    block(m.copy_async(transfer, None)).unwrap();
    assert_eq!(&read(dst.0, 8)[..], &(0..8).collect::<Vec<u8>>()[..]);
    // Out of range: refused, nothing written.
    let before = read(dst.0, 64);
    is_invalid(block(m.copy(src, dst, 16, 56, 0)), "a copy past the source");
    is_invalid(
        block(m.copy(src, dst, 16, 0, 60)),
        "a copy past the destination",
    );
    assert_eq!(read(dst.0, 64), before);
    let info = m.handle_info(src).expect("info");
    assert_eq!((info.size, info.device.clone()), (64, Device::CPU));
    let stats = block(m.memory_info(&Device::CPU)).unwrap();
    assert!(stats.used_bytes >= 128 && stats.active_allocations >= 2);
    // Alignment past the registry's: the handle inside a larger allocation.
    let aligned = block(m.allocate_aligned(100, 4096, &Device::CPU)).unwrap();
    assert_eq!(aligned.0 % 4096, 0);
    is_invalid(
        block(m.allocate_aligned(100, 3, &Device::CPU)),
        "alignment 3",
    );
    is_invalid(block(m.allocate(8, &Device::CUDA(3))), "another device");
    block(m.deallocate(aligned)).unwrap();
    block(m.deallocate(src)).unwrap();
    is_invalid(block(m.deallocate(src)), "a double free");
    is_invalid(block(m.copy(src, dst, 1, 0, 0)), "a freed source");
    is_invalid(
        block(m.deallocate(ferrum_interfaces::MemoryHandle(12345))),
        "an unknown handle",
    );
    assert!(m.handle_info(src).is_none());
    block(m.deallocate(dst)).unwrap();
}

#[test]
fn a_bounded_pool_reports_pressure_and_refuses_past_it() {
    // Its own context, so that no other test's allocations count.
    let b = FerrumBackend::with_runtime(kernelc_runtime::Runtime::cpu(), Device::CPU);
    let m = b.memory_manager();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    m.set_pressure_callback(Box::new(move |p| record.lock().unwrap().push(p)));
    let config = MemoryPoolConfig {
        max_size: Some(1000),
        ..Default::default()
    };
    block(m.configure_pool(&Device::CPU, config)).unwrap();
    let a = block(m.allocate(800, &Device::CPU)).unwrap();
    let c = block(m.allocate(160, &Device::CPU)).unwrap();
    assert!(matches!(
        block(m.allocate(100, &Device::CPU)),
        Err(FerrumError::ResourceExhausted { .. })
    ));
    block(m.deallocate(a)).unwrap();
    block(m.deallocate(c)).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            MemoryPressure::Low,
            MemoryPressure::Medium,
            MemoryPressure::Critical,
            MemoryPressure::Low
        ]
    );
    let info = block(m.memory_info(&Device::CPU)).unwrap();
    assert_eq!(
        (info.total_bytes, info.used_bytes, info.active_allocations),
        (1000, 0, 0)
    );
}

/// `y[i] = a · x[i] + y[i]` for `i < 64` (one workgroup of 64 invocations).
fn axpy_json() -> String {
    use kernelc_ir::builder::{global_id, KernelBuilder};
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    let x = k.buffer("x", F32, 64, kernelc_ir::Access::Read);
    let y = k.buffer("y", F32, 64, kernelc_ir::Access::ReadWrite);
    let a = k.scalar("a", F32);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(y, i.clone(), a * x.at(i.clone()) + y.at(i));
        })
        .expect("valid kernel");
    kernelc_ir::to_json(&kernel)
}

fn is_send<T: Send>(t: T) -> T {
    t
}

#[test]
fn kernel_executor_runs_ir_kernels_on_tensors_and_buffers() {
    let b = cpu();
    let exec = b.kernel_executor().expect("an executor");
    let m = b.memory_manager();
    let rt = b.context().runtime();
    let handle = block(exec.load_kernel(&axpy_json(), "axpy", &Device::CPU)).unwrap();
    let info = exec.get_kernel_info(handle).unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.max_threads_per_block,
            info.preferred_block_size
        ),
        ("axpy", 64, (64, 1, 1))
    );
    let x = from(
        &b,
        &(0..64).map(|i| i as f32).collect::<Vec<_>>(),
        &[64],
        DataType::FP32,
    );
    let y = block(m.allocate(256, &Device::CPU)).unwrap();
    let (buf, at) = rt.resolve(y.0, 256).unwrap();
    let ones: Vec<u8> = (0..64).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    rt.write_buffer(&buf, at, &ones).unwrap();
    let args = vec![
        KernelArg::Tensor(x.clone()),
        KernelArg::Buffer {
            ptr: y.0 as *const u8,
            size: 256,
        },
        KernelArg::Scalar(ScalarValue::F32(2.0)),
    ];
    // The future is Send though the arguments hold a raw pointer.
    let run = is_send(exec.execute_kernel(handle, (1, 1, 1), (64, 1, 1), &args));
    block(run).unwrap();
    let got: Vec<f32> = rt
        .read_buffer(&buf, at, 256)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(
        got,
        (0..64).map(|i| 1.0 + 2.0 * i as f32).collect::<Vec<_>>()
    );
    let before = rt.read_buffer(&buf, at, 256).unwrap();
    let run = |grid, block_size, args: &[KernelArg]| {
        block(exec.execute_kernel(handle, grid, block_size, args))
    };
    is_invalid(
        run((1, 1, 1), (32, 1, 1), &args),
        "a block that is not the workgroup",
    );
    is_invalid(run((1, 1, 1), (64, 1, 1), &args[..2]), "a missing argument");
    let mut wrong = args.clone();
    wrong[2] = KernelArg::Scalar(ScalarValue::I32(2));
    is_invalid(run((1, 1, 1), (64, 1, 1), &wrong), "an integer for an f32");
    wrong[2] = KernelArg::LocalMemory(128);
    is_invalid(run((1, 1, 1), (64, 1, 1), &wrong), "local memory");
    let mut short = args.clone();
    short[1] = KernelArg::Buffer {
        ptr: y.0 as *const u8,
        size: 128,
    };
    is_invalid(
        run((1, 1, 1), (64, 1, 1), &short),
        "a buffer of the wrong size",
    );
    short[1] = KernelArg::Buffer {
        ptr: 0x10 as *const u8,
        size: 256,
    };
    is_invalid(run((1, 1, 1), (64, 1, 1), &short), "an unknown address");
    short[0] = KernelArg::Tensor(from(&b, &[0.0; 32], &[32], DataType::FP32));
    is_invalid(run((1, 1, 1), (64, 1, 1), &short), "a short tensor");
    assert_eq!(
        rt.read_buffer(&buf, at, 256).unwrap(),
        before,
        "refusals write nothing"
    );
    // Loading: PTX is refused, the name must match, the JSON must parse.
    let ptx = ".version 8.0\n.target sm_90\n.visible .entry axpy() { ret; }";
    assert!(matches!(
        block(exec.load_kernel(ptx, "axpy", &Device::CPU)),
        Err(FerrumError::Unsupported { .. })
    ));
    is_invalid(
        block(exec.load_kernel(&axpy_json(), "saxpy", &Device::CPU)),
        "another name",
    );
    assert!(matches!(
        block(exec.load_kernel("{nonsense", "axpy", &Device::CPU)),
        Err(FerrumError::InvalidFormat { .. })
    ));
    is_invalid(
        block(exec.load_kernel(&axpy_json(), "axpy", &Device::CUDA(1))),
        "another device",
    );
    block(exec.unload_kernel(handle)).unwrap();
    is_invalid(block(exec.unload_kernel(handle)), "unloading twice");
    is_invalid(run((1, 1, 1), (64, 1, 1), &args), "an unloaded kernel");
    assert!(exec.get_kernel_info(handle).is_none());
    block(m.deallocate(y)).unwrap();
}

#[test]
fn sampling_through_the_trait() {
    let b = cpu();
    let sampling = b.kernel_ops().unwrap().sampling_ops().unwrap();
    let logits = from(
        &b,
        &[0.0, 0.0, 0.0, 1.0, 5.0, 4.9, -1.0, 0.0],
        &[2, 4],
        DataType::FP32,
    );
    let greedy = SamplingParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        repetition_penalty: 1.0,
        repetition_token_ids: Vec::new(),
        repetition_token_freqs: Vec::new(),
        rng_seed: 1,
    };
    // The last row: [5.0, 4.9, -1.0, 0.0].
    assert_eq!(sampling.sample_token(&logits, &greedy).unwrap(), 0);
    assert_eq!(
        sampling.argmax(&logits).unwrap(),
        4,
        "argmax is over every element"
    );
    let nucleus = SamplingParams {
        temperature: 1.0,
        top_k: 2,
        ..greedy.clone()
    };
    for seed in 0..20 {
        let p = SamplingParams {
            rng_seed: seed,
            ..nucleus.clone()
        };
        let t = sampling.sample_token(&logits, &p).unwrap();
        assert!(t < 2, "{t}");
        assert_eq!(
            sampling.sample_token(&logits, &p).unwrap(),
            t,
            "the same seed, the same token"
        );
    }
}

#[test]
fn the_backend_through_dyn_compute_backend() {
    let mut b: Box<dyn ComputeBackend> = Box::new(cpu());
    assert_eq!(b.name(), "kernelc");
    let caps = b.capabilities();
    assert!(
        caps.supported_dtypes.contains(&DataType::FP32)
            && caps.supports_fp16
            && caps.supports_custom_kernels
    );
    assert!(b.supports_device(&Device::CPU) && !b.supports_device(&Device::ROCm(0)));
    block(b.initialize(&Device::CPU)).unwrap();
    assert!(b.status().is_initialized);
    let x = b
        .tensor_factory()
        .ones(&[4], DataType::FP32, &Device::CPU)
        .unwrap();
    let y = b.tensor_ops().add(&x, &x).unwrap();
    block(b.synchronize(&Device::CPU)).unwrap();
    assert_eq!(y.to_vec_f32().unwrap(), vec![2.0; 4]);
    assert!(b.status().operations_completed > 0);
    is_invalid(
        block(b.synchronize(&Device::CUDA(0))),
        "synchronising another device",
    );
    assert_eq!(b.kernel_ops().unwrap().backend_name(), "kernelc");
    block(b.shutdown()).unwrap();
    assert!(!b.status().is_initialized);
    // Random factories: new values each call, from one compiled kernel.
    let f = b.tensor_factory();
    let u1 = f
        .uniform(&[64], 0.0, 1.0, DataType::FP32, &Device::CPU)
        .unwrap()
        .to_vec_f32()
        .unwrap();
    let u2 = f
        .uniform(&[64], 0.0, 1.0, DataType::FP32, &Device::CPU)
        .unwrap()
        .to_vec_f32()
        .unwrap();
    assert_ne!(u1, u2);
    assert!(u1.iter().all(|v| (0.0..1.0).contains(v)));
}
