//! Models as ONNX graphs, built with bb's proto types as exporters write them: what
//! the tests, the benchmark and the example run through `Backend::execute`.

use bb_ir::proto::onnx::{AttributeProto, GraphProto, NodeProto, TensorProto, ValueInfoProto};
use kernelc_kernels::conformance::inputs::{drawn, Domain};
use std::collections::HashMap;

/// A graph with its weights' values (by initializer name) and its one input.
pub struct Model {
    pub graph: GraphProto,
    pub weights: HashMap<String, Vec<f64>>,
    /// The input's name and shape.
    pub input: (String, Vec<usize>),
}

/// The sizes of [`transformer_block`].
#[derive(Clone, Copy, Debug)]
pub struct TransformerDims {
    pub batch: usize,
    pub seq: usize,
    pub dim: usize,
    pub heads: usize,
}

/// A pre-norm transformer block as exported from PyTorch: layer norm, Q/K/V
/// projections, heads split by a Reshape whose shape is computed from `Shape`
/// (Shape → Gather → Concat, int64), causal attention with a mask added before the
/// softmax, the heads merged back, the output projection, a residual; then layer
/// norm, an MLP (4× wide) with the erf GELU and a second residual. Input `x`
/// `[batch, seq, dim]`, output `y` of its shape; weights `g1 be1 wq wk wv wo bo g2
/// be2 w1 b1 w2 b2` and the causal `mask` (`−∞` above the diagonal).
pub fn transformer_block(dims: TransformerDims) -> Model {
    let TransformerDims {
        batch: bsz,
        seq: s,
        dim: d,
        heads,
    } = dims;
    let mut w = Weights::new();
    let dh = d / heads.max(1);
    w.add("g1", &[d], 1.0);
    w.add("be1", &[d], 0.1);
    w.add("wq", &[d, d], 0.3);
    w.add("wk", &[d, d], 0.3);
    w.add("wv", &[d, d], 0.3);
    w.add("wo", &[d, d], 0.3);
    w.add("bo", &[d], 0.1);
    w.add("g2", &[d], 1.0);
    w.add("be2", &[d], 0.1);
    w.add("w1", &[d, 4 * d], 0.3);
    w.add("b1", &[4 * d], 0.1);
    w.add("w2", &[4 * d, d], 0.2);
    w.add("b2", &[d], 0.1);
    let mask: Vec<f64> = (0..s * s)
        .map(|e| {
            if e % s > e / s {
                f64::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let mut inits = w.inits;
    inits.push(f32_tensor("mask", &[s, s], &mask));
    inits.push(f32_tensor("scale", &[], &[(dh as f64).sqrt()]));
    inits.push(i64_tensor("i0", &[0]));
    inits.push(i64_tensor("i1", &[1]));
    inits.push(i64_tensor("heads", &[heads as i64]));
    inits.push(i64_tensor("dh", &[dh as i64]));
    inits.push(i64_tensor("minus1", &[-1]));
    let ln = |x: &str, g: &str, b: &str, y: &str| {
        node(
            "LayerNormalization",
            &[x, g, b],
            &[y],
            vec![int("axis", -1), float("epsilon", 1e-5)],
        )
    };
    let mut nodes = vec![
        ln("x", "g1", "be1", "n1"),
        node("MatMul", &["n1", "wq"], &["q0"], vec![]),
        node("MatMul", &["n1", "wk"], &["k0"], vec![]),
        node("MatMul", &["n1", "wv"], &["v0"], vec![]),
        // [B, S, H, dh] from the input's own shape.
        node("Shape", &["x"], &["sh"], vec![]),
        node("Gather", &["sh", "i0"], &["bsz"], vec![int("axis", 0)]),
        node("Gather", &["sh", "i1"], &["seq"], vec![int("axis", 0)]),
        node(
            "Concat",
            &["bsz", "seq", "heads", "dh"],
            &["split_shape"],
            vec![int("axis", 0)],
        ),
        node(
            "Concat",
            &["bsz", "seq", "minus1"],
            &["merge_shape"],
            vec![int("axis", 0)],
        ),
    ];
    for t in ["q", "k", "v"] {
        let (a, b) = (format!("{t}0"), format!("{t}1"));
        nodes.push(node("Reshape", &[&a, "split_shape"], &[&b], vec![]));
        let perm: &[i64] = if t == "k" {
            &[0, 2, 3, 1]
        } else {
            &[0, 2, 1, 3]
        };
        nodes.push(node("Transpose", &[&b], &[t], vec![ints("perm", perm)]));
    }
    nodes.extend([
        node("MatMul", &["q", "k"], &["qk"], vec![]),
        node("Div", &["qk", "scale"], &["scores0"], vec![]),
        node("Add", &["scores0", "mask"], &["scores"], vec![]),
        node("Softmax", &["scores"], &["p"], vec![int("axis", -1)]),
        node("MatMul", &["p", "v"], &["ctx0"], vec![]),
        node(
            "Transpose",
            &["ctx0"],
            &["ctx1"],
            vec![ints("perm", &[0, 2, 1, 3])],
        ),
        node("Reshape", &["ctx1", "merge_shape"], &["ctx"], vec![]),
        node("MatMul", &["ctx", "wo"], &["attn0"], vec![]),
        node("Add", &["attn0", "bo"], &["attn"], vec![]),
        node("Add", &["x", "attn"], &["h"], vec![]),
        ln("h", "g2", "be2", "n2"),
        node("MatMul", &["n2", "w1"], &["f0"], vec![]),
        node("Add", &["f0", "b1"], &["f1"], vec![]),
        node("Gelu", &["f1"], &["f2"], vec![]),
        node("MatMul", &["f2", "w2"], &["f3"], vec![]),
        node("Add", &["f3", "b2"], &["f4"], vec![]),
        node("Add", &["h", "f4"], &["y"], vec![]),
    ]);
    let mut weights = w.values;
    weights.insert("mask".into(), mask);
    Model {
        graph: GraphProto {
            node: nodes,
            initializer: inits,
            input: vec![info("x")],
            output: vec![info("y")],
            ..Default::default()
        },
        weights,
        input: ("x".into(), vec![bsz, s, d]),
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_{}", outputs.first().copied().unwrap_or("")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: 7,
        ..Default::default()
    }
}

pub fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: 2,
        ..Default::default()
    }
}

pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f: v,
        r#type: 1,
        ..Default::default()
    }
}

pub fn f32_tensor(name: &str, dims: &[usize], values: &[f64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: 1,
        float_data: values.iter().map(|&v| v as f32).collect(),
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![values.len() as i64],
        data_type: 7,
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

pub fn info(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

/// Values drawn in `[-1, 1]`, rounded to f32 (as the model holds them).
pub fn data(seed: u64, len: usize) -> Vec<f64> {
    drawn(Domain::Real(-1.0, 1.0), seed, 0, len)
        .into_iter()
        .map(|v| v as f32 as f64)
        .collect()
}

/// A weight initializer and its values.
pub struct Weights {
    /// The initializers, in order.
    pub inits: Vec<TensorProto>,
    /// Each initializer's values by name.
    pub values: HashMap<String, Vec<f64>>,
    seed: u64,
}

impl Default for Weights {
    fn default() -> Self {
        Self::new()
    }
}

impl Weights {
    pub fn new() -> Weights {
        Weights {
            inits: Vec::new(),
            values: HashMap::new(),
            seed: 100,
        }
    }

    /// A weight of `dims` drawn in `[-scale, scale]` (f32 values), its values.
    pub fn add(&mut self, name: &str, dims: &[usize], scale: f64) -> Vec<f64> {
        self.seed += 1;
        let v: Vec<f64> = data(self.seed, dims.iter().product())
            .into_iter()
            .map(|x| (x * scale) as f32 as f64)
            .collect();
        self.inits.push(f32_tensor(name, dims, &v));
        self.values.insert(name.into(), v.clone());
        v
    }
}
