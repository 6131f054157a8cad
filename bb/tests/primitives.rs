//! bb's Contract `Backend` served by kernelc ([`KernelcBb`]): every primitive that
//! is device math against the f64 reference (docs/semantics.md) on the cpu and every
//! wgpu path (lavapipe in CI), CUDA where present; the host primitives (reshape,
//! squeeze, unsqueeze, identity, constant), `execute` on a graph of primitives, and
//! the typed refusals of bad input.

#[path = "../../runtime/tests/common/mod.rs"]
mod common;

use bb_ir::proto::onnx::{GraphProto, NodeProto, TensorProto, ValueInfoProto};
use bb_runtime::contracts::backend::{Backend, BackendAttrs};
use kernelc_bb::{BbError, BbTensor, KernelcBb};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::ScalarType;
use kernelc_kernels::conformance::Executor;
use kernelc_kernels::seeds;
use kernelc_kernels::spec::*;
use std::collections::HashMap;

/// Calls the primitive `method` for the spec each case describes.
struct Through<'a> {
    bb: &'a KernelcBb,
    method: &'static str,
    label: String,
}

/// An ONNX `TensorProto.DataType` code.
fn onnx_code(t: ScalarType) -> i32 {
    match t {
        ScalarType::F32 => 1,
        ScalarType::U8 => 2,
        ScalarType::I8 => 3,
        ScalarType::U16 => 4,
        ScalarType::I16 => 5,
        ScalarType::I32 => 6,
        ScalarType::I64 => 7,
        ScalarType::Bool => 9,
        ScalarType::F16 => 10,
        ScalarType::F64 => 11,
        ScalarType::U32 => 12,
        ScalarType::Bf16 => 16,
    }
}

impl Through<'_> {
    fn call(&self, spec: &OpSpec, data: &[HostBuffer]) -> Result<Vec<BbTensor>, BbError> {
        let b = self.bb;
        let up = |i: usize| {
            let sig = &spec.inputs()[i];
            b.tensor_from_bytes(sig.dtype, &sig.shape, &data[i].to_bytes())
        };
        let one = |t: Result<BbTensor, BbError>| t.map(|t| vec![t]);
        match (self.method, spec) {
            (
                "add" | "sub" | "mul" | "div" | "pow" | "equal" | "greater" | "less",
                OpSpec::Binary(_),
            ) => {
                let (x, y) = (up(0)?, up(1)?);
                one(match self.method {
                    "add" => b.add(&x, &y),
                    "sub" => b.sub(&x, &y),
                    "mul" => b.mul(&x, &y),
                    "div" => b.div(&x, &y),
                    "pow" => b.pow(&x, &y),
                    "equal" => b.equal(&x, &y),
                    "greater" => b.greater(&x, &y),
                    _ => b.less(&x, &y),
                })
            }
            ("neg" | "abs" | "sqrt" | "exp" | "log", OpSpec::Unary(_)) => {
                let x = up(0)?;
                one(match self.method {
                    "neg" => b.neg(&x),
                    "abs" => b.abs(&x),
                    "sqrt" => b.sqrt(&x),
                    "exp" => b.exp(&x),
                    _ => b.log(&x),
                })
            }
            ("matmul", OpSpec::Gemm(g)) => {
                // The NumPy shapes this GEMM describes: batch dims of 1 where a stride
                // is 0 (a broadcast operand), `[m, k]` / `[k, n]` matrices.
                let shape = |strides: &Option<Vec<usize>>, rows, cols| -> Vec<usize> {
                    let mut s: Vec<usize> = match strides {
                        Some(st) => g
                            .batch
                            .iter()
                            .zip(st)
                            .map(|(&b, &x)| if x == 0 { 1 } else { b })
                            .collect(),
                        None => g.batch.clone(),
                    };
                    s.extend([rows, cols]);
                    s
                };
                let (sa, sb) = (shape(&g.stride_a, g.m, g.k), shape(&g.stride_b, g.k, g.n));
                let x = b.tensor_from_bytes(g.dtype, &sa, &data[0].to_bytes())?;
                let y = b.tensor_from_bytes(g.dtype, &sb, &data[1].to_bytes())?;
                let out = b.matmul(&x, &y)?;
                let n = out.shape().iter().product::<usize>() as i64;
                one(b.reshape(&out, &[n]))
            }
            ("reduce_sum" | "reduce_mean" | "reduce_max" | "reduce_min", OpSpec::Reduce(r)) => {
                let x = up(0)?;
                // All axes as an empty list where every dim is reduced; negative else.
                let rank = r.shape.len() as i64;
                let axes: Vec<i64> = if r.axes.len() == r.shape.len() {
                    Vec::new()
                } else {
                    r.axes.iter().map(|&a| a as i64 - rank).collect()
                };
                one(match self.method {
                    "reduce_sum" => b.reduce_sum(&x, &axes, r.keepdim),
                    "reduce_mean" => b.reduce_mean(&x, &axes, r.keepdim),
                    "reduce_max" => b.reduce_max(&x, &axes, r.keepdim),
                    _ => b.reduce_min(&x, &axes, r.keepdim),
                })
            }
            ("transpose", OpSpec::Permute(p)) => {
                let reversed = p.perm.iter().rev().enumerate().all(|(i, &d)| i == d);
                let perm: Vec<i64> = if reversed {
                    Vec::new()
                } else {
                    p.perm.iter().map(|&d| d as i64).collect()
                };
                one(b.transpose(&up(0)?, &perm))
            }
            ("concat", OpSpec::Concat(c)) => {
                let parts = (0..c.shapes.len()).map(up).collect::<Result<Vec<_>, _>>()?;
                one(b.concat(
                    &parts.iter().collect::<Vec<_>>(),
                    c.axis as i64 - c.shapes[0].len() as i64,
                ))
            }
            ("slice", OpSpec::Slice(s)) => {
                // Every axis, ends one step past the last element (i64::MIN when that
                // is before element 0 of a reversed axis: ONNX clamps it to -1).
                let starts: Vec<i64> = s.starts.iter().map(|&v| v as i64).collect();
                let ends: Vec<i64> = (0..s.shape.len())
                    .map(|d| {
                        let end = s.starts[d] as i64 + s.sizes[d] as i64 * s.steps[d];
                        if end < 0 {
                            i64::MIN
                        } else {
                            end
                        }
                    })
                    .collect();
                let axes: Vec<i64> = (0..s.shape.len() as i64).collect();
                one(b.slice(&up(0)?, &starts, &ends, &axes, &s.steps))
            }
            ("split", OpSpec::Slice(s)) => {
                let d = (0..s.shape.len())
                    .find(|&d| s.sizes[d] != s.shape[d])
                    .unwrap_or(0);
                let (start, size) = (s.starts[d] as i64, s.sizes[d] as i64);
                let sizes = [start, size, s.shape[d] as i64 - start - size];
                let mut parts = b.split(&up(0)?, d as i64, &sizes)?;
                Ok(vec![parts.remove(1)])
            }
            ("cast", OpSpec::Cast(c)) => one(b.cast(&up(0)?, onnx_code(c.to))),
            ("where", OpSpec::Where(_)) => one(b.r#where(&up(0)?, &up(1)?, &up(2)?)),
            ("gather", OpSpec::Gather(g)) => {
                one(b.gather(&up(0)?, &up(1)?, g.axis as i64 - g.data.len() as i64))
            }
            (m, s) => Err(BbError::Invalid {
                op: "test",
                why: format!("no call for {m} on {}", s.name()),
            }),
        }
    }
}

impl Executor for Through<'_> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        let outs = self.call(spec, inputs).map_err(|e| e.to_string())?;
        outs.iter()
            .map(|t| {
                let bytes = t.to_bytes().map_err(|e| e.to_string())?;
                Ok(HostBuffer::from_bytes(t.dtype(), &bytes))
            })
            .collect()
    }
}

const CASES: &[(&str, &str)] = &[
    (
        "add",
        r#"{"op":"binary","func":"add","dtype":"f32","lhs":[4,1,6],"rhs":[5,1]}"#,
    ),
    (
        "add",
        r#"{"op":"binary","func":"add","dtype":"i64","lhs":[37],"rhs":[37]}"#,
    ),
    (
        "sub",
        r#"{"op":"binary","func":"sub","dtype":"i32","lhs":[3,8],"rhs":[8]}"#,
    ),
    (
        "mul",
        r#"{"op":"binary","func":"mul","dtype":"f16","lhs":[2,3,4],"rhs":[2,3,4]}"#,
    ),
    (
        "mul",
        r#"{"op":"binary","func":"mul","dtype":"u8","lhs":[50],"rhs":[1]}"#,
    ),
    (
        "div",
        r#"{"op":"binary","func":"div","dtype":"f32","lhs":[6,7],"rhs":[6,7]}"#,
    ),
    (
        "div",
        r#"{"op":"binary","func":"div","dtype":"f64","lhs":[9],"rhs":[9]}"#,
    ),
    (
        "pow",
        r#"{"op":"binary","func":"pow","dtype":"f32","lhs":[20],"rhs":[20]}"#,
    ),
    (
        "neg",
        r#"{"op":"unary","func":"neg","dtype":"i64","shape":[15]}"#,
    ),
    (
        "abs",
        r#"{"op":"unary","func":"abs","dtype":"i8","shape":[40]}"#,
    ),
    (
        "abs",
        r#"{"op":"unary","func":"abs","dtype":"f32","shape":[3,9]}"#,
    ),
    (
        "sqrt",
        r#"{"op":"unary","func":"sqrt","dtype":"f32","shape":[33]}"#,
    ),
    (
        "exp",
        r#"{"op":"unary","func":"exp","dtype":"f64","shape":[12]}"#,
    ),
    (
        "log",
        r#"{"op":"unary","func":"log","dtype":"f32","shape":[4,4]}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f32","m":5,"n":7,"k":6,"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f64","m":3,"n":4,"k":5,"batch":[2],"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "matmul",
        r#"{"op":"gemm","dtype":"f32","m":3,"n":4,"k":5,"batch":[2,3],"stride_a":[0,15],"stride_b":[60,20],"stride_c":[36,12],"alpha":1.0,"beta":0.0}"#,
    ),
    (
        "reduce_sum",
        r#"{"op":"reduce","func":"sum","dtype":"i64","shape":[3,4,5],"axes":[1],"keepdim":true}"#,
    ),
    (
        "reduce_sum",
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[6,7],"axes":[0,1]}"#,
    ),
    (
        "reduce_mean",
        r#"{"op":"reduce","func":"mean","dtype":"f32","shape":[4,3,5],"axes":[0,2]}"#,
    ),
    (
        "reduce_max",
        r#"{"op":"reduce","func":"max_nan","dtype":"f32","shape":[5,9],"axes":[1]}"#,
    ),
    (
        "reduce_max",
        r#"{"op":"reduce","func":"max","dtype":"i32","shape":[8,3],"axes":[0,1],"keepdim":true}"#,
    ),
    (
        "reduce_min",
        r#"{"op":"reduce","func":"min_nan","dtype":"f64","shape":[4,6],"axes":[0]}"#,
    ),
    (
        "transpose",
        r#"{"op":"permute","dtype":"f32","shape":[2,3,4],"perm":[2,1,0]}"#,
    ),
    (
        "transpose",
        r#"{"op":"permute","dtype":"i64","shape":[3,5],"perm":[1,0]}"#,
    ),
    (
        "transpose",
        r#"{"op":"permute","dtype":"bool","shape":[2,3,4],"perm":[0,2,1]}"#,
    ),
    (
        "concat",
        r#"{"op":"concat","dtype":"i64","shapes":[[2,3],[2,1],[2,4]],"axis":1}"#,
    ),
    (
        "concat",
        r#"{"op":"concat","dtype":"f32","shapes":[[1,5],[3,5]],"axis":0}"#,
    ),
    (
        "slice",
        r#"{"op":"slice","dtype":"f32","shape":[6,8],"starts":[1,2],"sizes":[3,3],"steps":[2,2]}"#,
    ),
    (
        "slice",
        r#"{"op":"slice","dtype":"i64","shape":[9],"starts":[8],"sizes":[9],"steps":[-1]}"#,
    ),
    (
        "slice",
        r#"{"op":"slice","dtype":"f32","shape":[4,10],"starts":[3,7],"sizes":[2,3],"steps":[-2,-3]}"#,
    ),
    (
        "split",
        r#"{"op":"slice","dtype":"f32","shape":[5,6],"starts":[0,1],"sizes":[5,3],"steps":[1,1]}"#,
    ),
    (
        "split",
        r#"{"op":"slice","dtype":"i64","shape":[7,2],"starts":[2,0],"sizes":[4,2],"steps":[1,1]}"#,
    ),
    (
        "cast",
        r#"{"op":"cast","from":"f32","to":"i64","shape":[30]}"#,
    ),
    (
        "cast",
        r#"{"op":"cast","from":"i64","to":"f32","shape":[30]}"#,
    ),
    (
        "cast",
        r#"{"op":"cast","from":"bool","to":"f32","shape":[10]}"#,
    ),
    (
        "cast",
        r#"{"op":"cast","from":"f32","to":"bool","shape":[10]}"#,
    ),
    (
        "equal",
        r#"{"op":"binary","func":"eq","dtype":"i64","lhs":[20],"rhs":[20],"out_dtype":"bool"}"#,
    ),
    (
        "greater",
        r#"{"op":"binary","func":"gt","dtype":"f32","lhs":[3,5],"rhs":[5],"out_dtype":"bool"}"#,
    ),
    (
        "less",
        r#"{"op":"binary","func":"lt","dtype":"i32","lhs":[4,1],"rhs":[1,6],"out_dtype":"bool"}"#,
    ),
    (
        "where",
        r#"{"op":"where","dtype":"f32","cond_dtype":"bool","cond":[3,1],"a":[3,4],"b":[4]}"#,
    ),
    (
        "where",
        r#"{"op":"where","dtype":"i64","cond_dtype":"bool","cond":[6],"a":[6],"b":[6]}"#,
    ),
    (
        "gather",
        r#"{"op":"gather","dtype":"f32","index_dtype":"i64","data":[5,4],"indices":[3,2],"axis":0}"#,
    ),
    (
        "gather",
        r#"{"op":"gather","dtype":"i64","index_dtype":"i32","data":[3,6,2],"indices":[4],"axis":1}"#,
    ),
];

fn cases() -> Vec<(&'static str, OpSpec)> {
    CASES
        .iter()
        .map(|&(m, s)| {
            (
                m,
                serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}")),
            )
        })
        .collect()
}

#[test]
fn every_primitive_conforms_on_every_device() {
    let cases = cases();
    common::assert_cases_cover(&[seeds::BB], &cases);
    for rt in common::runtimes_on("bb adapter", common::ALL_PATHS) {
        let caps = rt.caps().clone();
        let name = format!("bb adapter on {} ({})", rt.device_name(), rt.target_name());
        let bb = KernelcBb::with_runtime(rt);
        common::check_adapter_cases(
            &name,
            &caps,
            &cases,
            |method, spec| {
                let exec = Through {
                    bb: &bb,
                    method,
                    label: name.clone(),
                };
                (exec, spec.clone())
            },
            |e| e.contains("does not support"),
        );
    }
}

fn cpu() -> KernelcBb {
    KernelcBb::with_runtime(kernelc_runtime::Runtime::cpu())
}

fn values(t: &BbTensor) -> Vec<f64> {
    t.to_f64().expect("read")
}

#[test]
fn shape_primitives_share_memory_and_follow_onnx() {
    let b = cpu();
    let x = b
        .tensor(
            ScalarType::I64,
            &[2, 3, 4],
            &(0..24).map(|v| v as f64).collect::<Vec<_>>(),
        )
        .unwrap();
    let r = b.reshape(&x, &[0, -1]).unwrap();
    assert_eq!(r.shape(), &[2, 12]);
    assert!(r.view().buffer().same(x.view().buffer()), "no copy");
    assert!(matches!(
        b.reshape(&x, &[5, -1]),
        Err(BbError::Invalid { .. })
    ));
    let u = b.unsqueeze(&x, &[0, -1]).unwrap();
    assert_eq!(u.shape(), &[1, 2, 3, 4, 1]);
    assert_eq!(b.squeeze(&u, &[]).unwrap().shape(), &[2, 3, 4]);
    assert_eq!(b.squeeze(&u, &[-1]).unwrap().shape(), &[1, 2, 3, 4]);
    assert!(
        matches!(b.squeeze(&x, &[1]), Err(BbError::Invalid { .. })),
        "dim 1 is 3"
    );
    assert!(matches!(
        b.unsqueeze(&x, &[0, 0]),
        Err(BbError::Invalid { .. })
    ));
    assert_eq!(values(&b.identity(&x).unwrap()), values(&x));
    // int64 past 2^53 survives a constant and a reshape exactly.
    let big = [i64::MAX, i64::MIN + 1, 1 << 60];
    let c = b
        .constant(TensorProto {
            dims: vec![3],
            data_type: 7,
            int64_data: big.to_vec(),
            ..Default::default()
        })
        .unwrap();
    let bytes = c.to_bytes().unwrap();
    let got: Vec<i64> = bytes
        .chunks(8)
        .map(|w| i64::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(got, big);
    let raw = b
        .constant(TensorProto {
            dims: vec![2, 2],
            data_type: 1,
            raw_data: [1.5f32, -2.0, 0.25, 8.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(values(&raw), vec![1.5, -2.0, 0.25, 8.0]);
    let halves = b
        .constant(TensorProto {
            dims: vec![2],
            data_type: 10,
            int32_data: vec![0x3c00, 0xc000],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (halves.dtype(), values(&halves)),
        (ScalarType::F16, vec![1.0, -2.0])
    );
    // Short data, strings and unknown types are refused.
    let short = TensorProto {
        dims: vec![4],
        data_type: 1,
        float_data: vec![1.0],
        ..Default::default()
    };
    assert!(matches!(b.constant(short), Err(BbError::Invalid { .. })));
    let strings = TensorProto {
        dims: vec![1],
        data_type: 8,
        ..Default::default()
    };
    assert!(matches!(
        b.constant(strings),
        Err(BbError::Unsupported { .. })
    ));
    assert!(matches!(b.cast(&x, 8), Err(BbError::Unsupported { .. })));
}

#[test]
fn bad_arguments_are_typed_errors() {
    let b = cpu();
    let f = b.tensor(ScalarType::F32, &[2, 3], &[1.0; 6]).unwrap();
    let i = b.tensor(ScalarType::I64, &[2, 3], &[1.0; 6]).unwrap();
    let invalid = |r: Result<BbTensor, BbError>, what: &str| match r {
        Err(BbError::Invalid { .. } | BbError::Runtime(_)) => {}
        other => panic!("{what}: {other:?}"),
    };
    invalid(b.add(&f, &i), "mixed dtypes");
    invalid(
        b.add(&f, &b.tensor(ScalarType::F32, &[4], &[0.0; 4]).unwrap()),
        "shapes that do not broadcast",
    );
    invalid(b.matmul(&f, &f), "[2,3]·[2,3]");
    invalid(b.reduce_sum(&f, &[2], false), "axis 2 of 2 dims");
    invalid(b.reduce_sum(&f, &[1, -1], false), "a repeated axis");
    invalid(b.transpose(&f, &[0]), "a short perm");
    invalid(b.slice(&f, &[0], &[1], &[0], &[0]), "a step of 0");
    invalid(b.slice(&f, &[0, 0], &[1, 1], &[0, 0], &[]), "an axis twice");
    invalid(b.gather(&f, &f, 0), "float indices");
    invalid(b.concat(&[], 0), "no inputs");
    assert!(matches!(
        b.split(&f, 1, &[1, 1]),
        Err(BbError::Invalid { .. })
    ));
    let other = cpu();
    invalid(other.add(&f, &f), "another backend's tensors");
}

/// `execute` on a graph of primitives (its inputs left undeclared, as bb's own
/// graphs do); node errors name the node before anything runs. (Whole models are in
/// tests/graphs.rs.)
#[test]
fn execute_runs_a_graph_of_primitives_and_names_bad_nodes() {
    let b = cpu();
    let node = |op: &str, inputs: &[&str], output: &str| NodeProto {
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    };
    // y = (x + x) · w, then reshaped to [-1].
    let graph = GraphProto {
        node: vec![
            node("Add", &["x", "x"], "x2"),
            node("MatMul", &["x2", "w"], "xw"),
            node("Exp", &["xw"], "y"),
        ],
        output: vec![ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let x = b
        .tensor(ScalarType::F32, &[2, 3], &[0.1, 0.2, 0.3, -0.1, -0.2, -0.3])
        .unwrap();
    let w = b
        .tensor(ScalarType::F32, &[3, 1], &[1.0, 1.0, 1.0])
        .unwrap();
    let inputs: HashMap<String, BbTensor> = [("x".to_string(), x), ("w".to_string(), w)].into();
    let attrs = BackendAttrs {
        current_node_attributes: &[],
        current_node_metadata: &[],
    };
    let out = b.execute(&graph, inputs.clone(), attrs).expect("execute");
    let y = values(&out["y"]);
    let want = [(1.2f64).exp(), (-1.2f64).exp()];
    assert!(
        y.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5 * w),
        "{y:?}"
    );
    // Malformed nodes are refused by name before anything runs: an Add with one
    // input, a Reshape whose shape is computed on the device (it must be known when
    // the graph compiles), a Constant without a value, an op type kernelc does not
    // serve.
    for (op, ins) in [
        ("Add", &["x"][..]),
        ("Reshape", &["x", "w"][..]),
        ("Constant", &["x"][..]),
        ("NonMaxSuppression", &["x"][..]),
    ] {
        let bad = GraphProto {
            node: vec![NodeProto {
                name: "n0".into(),
                ..node(op, ins, "y")
            }],
            ..Default::default()
        };
        let attrs = BackendAttrs {
            current_node_attributes: &[],
            current_node_metadata: &[],
        };
        match b.execute(&bad, inputs.clone(), attrs) {
            Err(e @ BbError::Node { .. }) => {
                let why = e.to_string();
                assert!(why.contains("n0") && why.contains(op), "{why}")
            }
            other => panic!("{op} with {ins:?}: {other:?}"),
        }
    }
}

#[test]
fn scalars_stay_scalars() {
    let b = cpu();
    let s = b.tensor(ScalarType::F32, &[], &[2.0]).unwrap();
    let v = b.tensor(ScalarType::F32, &[3], &[1.0, 2.0, 3.0]).unwrap();
    let p = b.mul(&s, &v).unwrap();
    assert_eq!(
        (p.shape(), values(&p)),
        (&[3usize][..], vec![2.0, 4.0, 6.0])
    );
    let total = b.reduce_sum(&v, &[], false).unwrap();
    assert_eq!((total.shape(), values(&total)), (&[][..], vec![6.0]));
}
