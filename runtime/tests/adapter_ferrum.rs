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
use kernelc_kernels::conformance::{check_data, Executor};
use kernelc_kernels::seeds;
use kernelc_kernels::spec::*;
use kernelc_runtime::adapters::ferrum::{self as adapter, FerrumBackend};
use kernelc_runtime::{Runtime, View};

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

fn cases() -> Vec<(&'static str, OpSpec)> {
    let mut v = vec![
        (
            "view",
            json(
                r#"{"op":"slice","dtype":"f32","shape":[4,6,5],"starts":[1,2,0],"sizes":[2,3,5],"steps":[1,1,1]}"#,
            ),
        ),
        (
            "view",
            json(
                r#"{"op":"slice","dtype":"u8","shape":[9,7],"starts":[0,3],"sizes":[9,4],"steps":[1,1]}"#,
            ),
        ),
        (
            "narrow",
            json(
                r#"{"op":"slice","dtype":"bf16","shape":[5,8],"starts":[0,2],"sizes":[5,5],"steps":[1,1]}"#,
            ),
        ),
        (
            "split",
            json(
                r#"{"op":"slice","dtype":"i32","shape":[6,3],"starts":[2,0],"sizes":[3,3],"steps":[1,1]}"#,
            ),
        ),
        (
            "to_dtype",
            json(r#"{"op":"cast","from":"f32","to":"f16","shape":[37]}"#),
        ),
        (
            "to_dtype",
            json(r#"{"op":"cast","from":"f32","to":"i32","shape":[3,11]}"#),
        ),
        (
            "to_dtype",
            json(r#"{"op":"cast","from":"u8","to":"bool","shape":[20]}"#),
        ),
        (
            "argmax_last_dim_u32",
            json(
                r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[151],"axes":[0],"index_dtype":"u32"}"#,
            ),
        ),
        (
            "argmax",
            json(
                r#"{"op":"reduce","func":"arg_max","dtype":"f16","shape":[3,40],"axes":[0,1],"index_dtype":"u32"}"#,
            ),
        ),
        (
            "zeros_like",
            json(r#"{"op":"fill","dtype":"f16","shape":[3,5],"value":{"constant":{"value":0.0}}}"#),
        ),
        (
            "zeros",
            json(r#"{"op":"fill","dtype":"i32","shape":[17],"value":{"constant":{"value":0.0}}}"#),
        ),
        (
            "ones",
            json(
                r#"{"op":"fill","dtype":"bf16","shape":[2,9],"value":{"constant":{"value":1.0}}}"#,
            ),
        ),
        (
            "ones",
            json(r#"{"op":"fill","dtype":"bool","shape":[6],"value":{"constant":{"value":1.0}}}"#),
        ),
        (
            "uniform",
            json(&fill(
                r#"{"op":"fill","dtype":"f32","shape":[300],"value":{"uniform":{"low":-2.0,"high":3.0,"seed":SEED,"step":0}}}"#,
            )),
        ),
        (
            "normal",
            json(&fill(
                r#"{"op":"fill","dtype":"f32","shape":[2,150],"value":{"normal":{"mean":1.0,"std":0.5,"seed":SEED,"step":0}}}"#,
            )),
        ),
        (
            "matmul",
            json(r#"{"op":"gemm","dtype":"f32","m":7,"n":5,"k":9,"alpha":1.0,"beta":0.0}"#),
        ),
        (
            "matmul",
            json(
                r#"{"op":"gemm","dtype":"f16","m":4,"n":6,"k":8,"batch":[3],"alpha":1.0,"beta":0.0}"#,
            ),
        ),
        (
            "matmul",
            json(
                r#"{"op":"gemm","dtype":"f32","m":3,"n":4,"k":5,"batch":[2,2],"stride_a":[30,15],"stride_b":[0,0],"stride_c":[24,12],"alpha":1.0,"beta":0.0}"#,
            ),
        ),
        (
            "linear",
            json(
                r#"{"op":"gemm","dtype":"f32","m":6,"n":10,"k":12,"trans_b":true,"alpha":1.0,"beta":0.0}"#,
            ),
        ),
        (
            "linear",
            json(
                r#"{"op":"gemm","dtype":"bf16","m":3,"n":8,"k":16,"trans_b":true,"alpha":1.0,"beta":0.0}"#,
            ),
        ),
        (
            "add",
            json(r#"{"op":"binary","func":"add","dtype":"f32","lhs":[4,7],"rhs":[7]}"#),
        ),
        (
            "add",
            json(r#"{"op":"binary","func":"add","dtype":"i32","lhs":[30],"rhs":[30]}"#),
        ),
        (
            "sub",
            json(r#"{"op":"binary","func":"sub","dtype":"f16","lhs":[3,1,5],"rhs":[4,1]}"#),
        ),
        (
            "mul",
            json(r#"{"op":"binary","func":"mul","dtype":"u8","lhs":[25],"rhs":[25]}"#),
        ),
        (
            "div",
            json(r#"{"op":"binary","func":"div","dtype":"f32","lhs":[6,8],"rhs":[6,8]}"#),
        ),
        (
            "silu_mul",
            json(r#"{"op":"binary","func":"silu_mul","dtype":"f32","lhs":[5,16],"rhs":[5,16]}"#),
        ),
        (
            "silu_mul",
            json(r#"{"op":"binary","func":"silu_mul","dtype":"bf16","lhs":[40],"rhs":[40]}"#),
        ),
        (
            "relu",
            json(r#"{"op":"unary","func":"relu","dtype":"f32","shape":[50]}"#),
        ),
        (
            "gelu",
            json(r#"{"op":"unary","func":"gelu_tanh","dtype":"f32","shape":[8,9]}"#),
        ),
        (
            "gelu",
            json(r#"{"op":"unary","func":"gelu_tanh","dtype":"f16","shape":[33]}"#),
        ),
        (
            "silu",
            json(r#"{"op":"unary","func":"silu","dtype":"bf16","shape":[64]}"#),
        ),
        (
            "softmax",
            json(r#"{"op":"softmax","dtype":"f32","shape":[6,33],"axis":1}"#),
        ),
        (
            "softmax",
            json(r#"{"op":"softmax","dtype":"f16","shape":[5,4,3],"axis":0}"#),
        ),
        (
            "layer_norm",
            json(
                r#"{"op":"layer_norm","dtype":"f32","shape":[5,48],"eps":0.00001,"weight":true,"bias":true}"#,
            ),
        ),
        (
            "layer_norm",
            json(r#"{"op":"layer_norm","dtype":"f32","shape":[2,3,20],"eps":0.001,"weight":true}"#),
        ),
        (
            "rms_norm",
            json(
                r#"{"op":"layer_norm","dtype":"f32","shape":[7,64],"eps":0.000001,"rms":true,"weight":true}"#,
            ),
        ),
        (
            "rms_norm",
            json(
                r#"{"op":"layer_norm","dtype":"f16","shape":[3,32],"eps":0.00001,"rms":true,"weight":true}"#,
            ),
        ),
        (
            "rms_norm_residual",
            json(
                r#"{"op":"layer_norm","dtype":"f32","shape":[4,40],"eps":0.00001,"rms":true,"weight":true,"residual":true}"#,
            ),
        ),
        (
            "concat",
            json(r#"{"op":"concat","dtype":"f32","shapes":[[2,3],[2,5],[2,1]],"axis":1}"#),
        ),
        (
            "concat",
            json(r#"{"op":"concat","dtype":"i32","shapes":[[1,4],[3,4]],"axis":0}"#),
        ),
        (
            "transpose",
            json(r#"{"op":"permute","dtype":"f32","shape":[3,4,5],"perm":[2,1,0]}"#),
        ),
        (
            "permute",
            json(r#"{"op":"permute","dtype":"f16","shape":[2,3,4,5],"perm":[0,2,1,3]}"#),
        ),
        (
            "rotary_embedding",
            json(
                r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":2,"seq":5,"heads":3,"head_dim":8,"max_positions":12}"#,
            ),
        ),
        (
            "rotary_embedding",
            json(
                r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":2,"seq":3,"heads":1,"head_dim":8,"max_positions":10,"batch_positions":true}"#,
            ),
        ),
        (
            "attention",
            json(
                r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":2,"heads":4,"kv_heads":2,"seq_q":5,"seq_k":9,"head_dim":16,"scale":0.25,"causal":true}"#,
            ),
        ),
        (
            "attention",
            json(
                r#"{"op":"attention","dtype":"f16","layout":"bshd","batch":1,"heads":2,"kv_heads":2,"seq_q":7,"seq_k":7,"head_dim":8,"scale":0.35,"causal":false}"#,
            ),
        ),
    ];
    v.shrink_to_fit();
    v
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
        let (mut ran, mut unsupported, mut failures) = (0, 0, Vec::new());
        for (seed, (method, spec)) in cases.iter().enumerate() {
            let missing = spec
                .inputs()
                .iter()
                .chain(&spec.outputs())
                .find(|s| !caps.supports(s.dtype))
                .map(|s| s.dtype);
            // A random factory draws the context's next stream.
            let spec = &with_step(spec, backend.context().next_draw());
            let exec = Through {
                backend: &backend,
                method,
                label: name.clone(),
            };
            match (
                check_data(&exec, spec, &common::in_range_case(spec, seed as u64)),
                missing,
            ) {
                (Ok(()), None) => ran += 1,
                (Ok(()), Some(d)) => failures.push(format!("{method}: ran without {d}?")),
                (Err(e), Some(_)) if e.to_string().contains("Unsupported operation") => {
                    unsupported += 1
                }
                (Err(e), _) => failures.push(format!(
                    "{method} {}: {e}",
                    serde_json::to_string(spec).unwrap()
                )),
            }
        }
        println!("{name}: {ran} cases pass, {unsupported} refused (dtype absent)");
        assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
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
