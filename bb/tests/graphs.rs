//! Whole ONNX graphs through `Backend::execute` (whole-graph compilation), built with
//! bb's proto types as exporters write them: an MLP block, a transformer block
//! (attention + MLP with layer norms, its reshapes computed by int64 shape
//! arithmetic), a conv → batch-norm → relu → pool stack. Each equals an independent
//! f64 evaluation of the ONNX semantics, on cpu and every wgpu path (lavapipe in CI),
//! CUDA where present; each compiles once for repeated calls, and its fused plan has
//! fewer kernels than the graph has nodes. Bad graphs are typed errors naming the
//! node, with nothing launched.

#[path = "../../runtime/tests/common/mod.rs"]
mod common;

use bb_ir::proto::onnx::{GraphProto, NodeProto, TensorProto};
use bb_runtime::contracts::backend::{Backend, BackendAttrs};
use kernelc_bb::models::{self, *};
use kernelc_bb::{BbError, BbTensor, KernelcBb};
use kernelc_ir::ScalarType;
use std::collections::HashMap;

fn attrs() -> BackendAttrs<'static> {
    BackendAttrs {
        current_node_attributes: &[],
        current_node_metadata: &[],
    }
}

fn run(
    b: &KernelcBb,
    g: &GraphProto,
    inputs: &[(&str, &[usize], &[f64])],
) -> HashMap<String, BbTensor> {
    let map: HashMap<String, BbTensor> = inputs
        .iter()
        .map(|(n, shape, v)| {
            (
                n.to_string(),
                b.tensor(ScalarType::F32, shape, v).expect("upload"),
            )
        })
        .collect();
    b.execute(g, map, attrs()).expect("execute")
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    assert!(
        worst <= tol * scale,
        "{what}: worst error {worst:.3e} (scale {scale:.3e})"
    );
}

// ---- the f64 evaluation ----

/// `[m, k] · [k, n]`.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

fn add_row(x: &mut [f64], row: &[f64]) {
    for (i, v) in x.iter_mut().enumerate() {
        *v += row[i % row.len()];
    }
}

fn layer_norm(x: &[f64], g: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let n = g.len();
    x.chunks(n)
        .flat_map(|r| {
            let mean = r.iter().sum::<f64>() / n as f64;
            let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let inv = 1.0 / (var + eps).sqrt();
            r.iter()
                .enumerate()
                .map(move |(i, v)| (v - mean) * inv * g[i] + b[i])
                .collect::<Vec<_>>()
        })
        .collect()
}

fn softmax_rows(x: &mut [f64], n: usize) {
    for r in x.chunks_mut(n) {
        let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
        for v in r.iter_mut() {
            *v = (*v - m).exp() / s;
        }
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

// ---- the graphs ----

/// `relu(x·W1 + b1)·W2 + b2`: both GEMMs take their bias, the first its relu after.
#[test]
fn an_mlp_block_equals_the_reference_and_compiles_once() {
    let (m, d, h, o) = (6, 16, 32, 8);
    let mut w = Weights::new();
    let w1 = w.add("w1", &[d, h], 0.3);
    let b1 = w.add("b1", &[h], 0.1);
    let w2 = w.add("w2", &[h, o], 0.3);
    let b2 = w.add("b2", &[o], 0.1);
    let graph = GraphProto {
        node: vec![
            node("MatMul", &["x", "w1"], &["xw1"], vec![]),
            node("Add", &["xw1", "b1"], &["h0"], vec![]),
            node("Relu", &["h0"], &["h"], vec![]),
            node("MatMul", &["h", "w2"], &["hw2"], vec![]),
            node("Add", &["hw2", "b2"], &["y"], vec![]),
        ],
        initializer: w.inits,
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    };
    let x = data(1, m * d);
    let mut hidden = matmul(&x, &w1, m, d, h);
    add_row(&mut hidden, &b1);
    hidden.iter_mut().for_each(|v| *v = v.max(0.0));
    let mut want = matmul(&hidden, &w2, m, h, o);
    add_row(&mut want, &b2);
    for rt in common::runtimes_on("bb graphs (mlp)", common::ALL_PATHS) {
        let b = KernelcBb::with_runtime(rt);
        let inputs: [(&str, &[usize], &[f64]); 1] = [("x", &[m, d], &x)];
        let y = run(&b, &graph, &inputs);
        assert_close("mlp", &y["y"].to_f64().expect("read"), &want, 1e-5);
        assert_eq!(y["y"].shape(), &[m, o]);
        // Again: the kept plan, no kernel compiled.
        let compiles = b.runtime().stats().compiles;
        let again = run(&b, &graph, &inputs);
        assert_close(
            "mlp again",
            &again["y"].to_f64().expect("read"),
            &want,
            1e-5,
        );
        assert_eq!(
            (b.compiled_plans(), b.runtime().stats().compiles),
            (1, compiles)
        );
        // Other weights under the same names: another plan, another result.
        let mut changed = graph.clone();
        changed.initializer[0].float_data[5] += 1.0;
        let other = run(&b, &changed, &inputs);
        assert_eq!(b.compiled_plans(), 2);
        assert_ne!(
            other["y"].to_f64().expect("read"),
            y["y"].to_f64().expect("read")
        );
        let ops = b
            .fused_graph(&graph, &[("x", ScalarType::F32, vec![m, d])])
            .expect("plan")
            .nodes;
        assert!(ops.len() < graph.node.len(), "{ops:?}");
    }
}

/// [`models::transformer_block`]: attention and MLP with layer norms, its head
/// reshapes computed by int64 shape arithmetic.
#[test]
fn a_transformer_block_equals_the_reference() {
    let (bsz, s, d, heads) = (2usize, 8usize, 16usize, 2usize);
    let dh = d / heads;
    let model = models::transformer_block(TransformerDims {
        batch: bsz,
        seq: s,
        dim: d,
        heads,
    });
    let graph = &model.graph;
    let w = |name: &str| model.weights[name].as_slice();
    let (g1, be1, wq, wk, wv, wo, bo) = (
        w("g1"),
        w("be1"),
        w("wq"),
        w("wk"),
        w("wv"),
        w("wo"),
        w("bo"),
    );
    let (g2, be2, w1, b1, w2, b2, mask) = (
        w("g2"),
        w("be2"),
        w("w1"),
        w("b1"),
        w("w2"),
        w("b2"),
        w("mask"),
    );
    // The f64 evaluation.
    let x = data(7, bsz * s * d);
    let rows = bsz * s;
    let n1 = layer_norm(&x, g1, be1, 1e-5);
    let (q, k, v) = (
        matmul(&n1, wq, rows, d, d),
        matmul(&n1, wk, rows, d, d),
        matmul(&n1, wv, rows, d, d),
    );
    let mut ctx = vec![0.0; rows * d];
    for b in 0..bsz {
        for hd in 0..heads {
            let at = |t: usize, e: usize| (b * s + t) * d + hd * dh + e;
            let mut p = vec![0.0; s * s];
            for i in 0..s {
                for j in 0..s {
                    let dot: f64 = (0..dh).map(|e| q[at(i, e)] * k[at(j, e)]).sum();
                    p[i * s + j] = dot / (dh as f64).sqrt() + mask[i * s + j];
                }
            }
            softmax_rows(&mut p, s);
            for i in 0..s {
                for e in 0..dh {
                    ctx[at(i, e)] = (0..s).map(|j| p[i * s + j] * v[at(j, e)]).sum();
                }
            }
        }
    }
    let mut hidden = matmul(&ctx, wo, rows, d, d);
    add_row(&mut hidden, bo);
    hidden.iter_mut().zip(&x).for_each(|(h, x)| *h += x);
    let n2 = layer_norm(&hidden, g2, be2, 1e-5);
    let mut f = matmul(&n2, w1, rows, d, 4 * d);
    add_row(&mut f, b1);
    f.iter_mut().for_each(|v| *v = gelu(*v));
    let mut want = matmul(&f, w2, rows, 4 * d, d);
    add_row(&mut want, b2);
    want.iter_mut().zip(&hidden).for_each(|(y, h)| *y += h);
    for rt in common::runtimes_on("bb graphs (transformer)", common::ALL_PATHS) {
        let b = KernelcBb::with_runtime(rt);
        let inputs: [(&str, &[usize], &[f64]); 1] = [("x", &[bsz, s, d], &x)];
        let y = run(&b, graph, &inputs);
        assert_eq!(y["y"].shape(), &[bsz, s, d]);
        assert_close(
            "transformer block",
            &y["y"].to_f64().expect("read"),
            &want,
            1e-4,
        );
        let launches = b.runtime().stats().launches;
        let again = run(&b, graph, &inputs);
        assert_close(
            "transformer again",
            &again["y"].to_f64().expect("read"),
            &want,
            1e-4,
        );
        assert_eq!(b.compiled_plans(), 1);
        let ops = b
            .fused_graph(graph, &[("x", ScalarType::F32, vec![bsz, s, d])])
            .expect("plan")
            .nodes;
        // The shape arithmetic folded away; biases, residuals and the GELU in their
        // GEMMs, the first residual in the second layer norm, the attention (scores,
        // scale, mask, softmax, product with V, head merge) one kernel reading the
        // projections in place.
        // (A serial target keeps the scores GEMM, the softmax with the mask
        // addition as its prologue, and the product with V, which writes the head
        // merge's layout itself: `kernels::graph::fuse`.)
        let names: Vec<String> = ops.iter().map(|n| n.spec.name()).collect();
        let attention: &[&str] = if b.runtime().caps().is_serial() {
            &["gemm", "fused_softmax", "gemm"]
        } else {
            &["attention"]
        };
        let want: Vec<&str> = [
            &["layer_norm", "gemm", "gemm", "gemm"][..],
            attention,
            &["gemm", "layer_norm", "gemm", "gemm"],
        ]
        .concat();
        assert_eq!(names, want, "{ops:#?}");
        assert!(b.runtime().stats().launches > launches);
    }
}

/// Conv (bias, padding 1) → BatchNormalization (inference) → Relu → MaxPool 2×2.
#[test]
fn a_conv_batchnorm_relu_pool_stack_equals_the_reference() {
    let (n, c, hw, f) = (2usize, 3usize, 8usize, 4usize);
    let mut w = Weights::new();
    let wt = w.add("w", &[f, c, 3, 3], 0.4);
    let bias = w.add("b", &[f], 0.1);
    let gamma = w.add("gamma", &[f], 1.0);
    let beta = w.add("beta", &[f], 0.2);
    let mean = w.add("mean", &[f], 0.2);
    let var: Vec<f64> = w
        .add("var0", &[f], 0.5)
        .iter()
        .map(|v| v.abs() + 0.5)
        .collect();
    w.inits.push(f32_tensor("var", &[f], &var));
    let graph = GraphProto {
        node: vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
            ),
            node(
                "BatchNormalization",
                &["c", "gamma", "beta", "mean", "var"],
                &["bn"],
                vec![float("epsilon", 1e-5)],
            ),
            node("Relu", &["bn"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["y"],
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
        ],
        initializer: w.inits,
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    };
    let x = data(3, n * c * hw * hw);
    let at = |b: usize, ch: usize, i: usize, j: usize, chs: usize, size: usize| {
        ((b * chs + ch) * size + i) * size + j
    };
    let mut act = vec![0.0; n * f * hw * hw];
    for b in 0..n {
        for o in 0..f {
            for i in 0..hw {
                for j in 0..hw {
                    let mut s = bias[o];
                    for ch in 0..c {
                        for (di, dj) in (0..9).map(|t| (t / 3, t % 3)) {
                            let (y, xx) = ((i + di) as isize - 1, (j + dj) as isize - 1);
                            if y >= 0 && xx >= 0 && (y as usize) < hw && (xx as usize) < hw {
                                s += x[at(b, ch, y as usize, xx as usize, c, hw)]
                                    * wt[((o * c + ch) * 3 + di) * 3 + dj];
                            }
                        }
                    }
                    let bn = (s - mean[o]) / (var[o] + 1e-5).sqrt() * gamma[o] + beta[o];
                    act[at(b, o, i, j, f, hw)] = bn.max(0.0);
                }
            }
        }
    }
    let half = hw / 2;
    let mut want = vec![0.0; n * f * half * half];
    for b in 0..n {
        for o in 0..f {
            for i in 0..half {
                for j in 0..half {
                    want[at(b, o, i, j, f, half)] = (0..4)
                        .map(|t| act[at(b, o, 2 * i + t / 2, 2 * j + t % 2, f, hw)])
                        .fold(f64::NEG_INFINITY, f64::max);
                }
            }
        }
    }
    for rt in common::runtimes_on("bb graphs (conv stack)", common::ALL_PATHS) {
        let b = KernelcBb::with_runtime(rt);
        let inputs: [(&str, &[usize], &[f64]); 1] = [("x", &[n, c, hw, hw], &x)];
        let y = run(&b, &graph, &inputs);
        assert_eq!(y["y"].shape(), &[n, f, half, half]);
        assert_close("conv stack", &y["y"].to_f64().expect("read"), &want, 1e-5);
    }
}

/// Bad graphs: typed errors naming the node (or the graph input), nothing launched.
#[test]
fn bad_graphs_are_typed_errors_and_launch_nothing() {
    let b = KernelcBb::with_runtime(kernelc_runtime::Runtime::cpu());
    let x = b.tensor(ScalarType::F32, &[2, 3], &[1.0; 6]).expect("x");
    let inputs: HashMap<String, BbTensor> = [("x".to_string(), x)].into();
    let graph = |nodes: Vec<NodeProto>, inits: Vec<TensorProto>| GraphProto {
        node: nodes,
        initializer: inits,
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    };
    let cases: Vec<(&str, GraphProto, &str)> = vec![
        (
            "a cycle",
            graph(
                vec![
                    node("Add", &["x", "z"], &["y"], vec![]),
                    node("Exp", &["y"], &["z"], vec![]),
                ],
                vec![],
            ),
            "Add_y",
        ),
        (
            "a missing input",
            graph(vec![node("Add", &["x", "nowhere"], &["y"], vec![])], vec![]),
            "nowhere",
        ),
        (
            "a reshape to another element count",
            graph(
                vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
                vec![i64_tensor("shape", &[4, 2])],
            ),
            "Reshape_y",
        ),
        (
            "a conv whose filter does not fit the input's channels",
            graph(
                vec![
                    node("Reshape", &["x", "shape"], &["x4"], vec![]),
                    node(
                        "Conv",
                        &["x4", "w"],
                        &["y"],
                        vec![ints("kernel_shape", &[1, 1])],
                    ),
                ],
                vec![
                    i64_tensor("shape", &[1, 2, 3, 1]),
                    f32_tensor("w", &[1, 5, 1, 1], &[1.0; 5]),
                ],
            ),
            "Conv_y",
        ),
        (
            "an unknown op type",
            graph(vec![node("Frobnicate", &["x"], &["y"], vec![])], vec![]),
            "Frobnicate",
        ),
        (
            "a huge declared shape",
            graph(
                vec![
                    node("ConstantOfShape", &["big"], &["z"], vec![]),
                    node("Add", &["x", "z"], &["y"], vec![]),
                ],
                vec![i64_tensor("big", &[1 << 30, 1 << 30, 1 << 30])],
            ),
            "ConstantOfShape",
        ),
    ];
    for (what, g, names) in cases {
        let before = b.runtime().stats().launches;
        match b.execute(&g, inputs.clone(), attrs()) {
            Err(e @ (BbError::Node { .. } | BbError::Graph { .. })) => {
                let msg = e.to_string();
                assert!(msg.contains(names), "{what}: {msg}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(b.runtime().stats().launches, before, "{what}: launched");
    }
    // A graph input not given.
    let g = graph(vec![node("Exp", &["x"], &["y"], vec![])], vec![]);
    match b.execute(&g, HashMap::new(), attrs()) {
        Err(BbError::Graph { why }) => assert!(why.contains("`x`"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// `Expand` broadcasts both ways (NumPy rules), bool included, as a strided read.
#[test]
fn expand_broadcasts_both_ways() {
    let b = KernelcBb::with_runtime(kernelc_runtime::Runtime::cpu());
    let graph = GraphProto {
        node: vec![node("Expand", &["x", "shape"], &["y"], vec![])],
        initializer: vec![i64_tensor("shape", &[2, 1, 4])],
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    };
    for dtype in [ScalarType::F32, ScalarType::Bool] {
        let x = b.tensor(dtype, &[3, 1], &[1.0, 0.0, 1.0]).expect("x");
        let y = b
            .execute(&graph, [("x".to_string(), x)].into(), attrs())
            .expect("execute");
        assert_eq!(y["y"].shape(), &[2, 3, 4], "{dtype}");
        let want: Vec<f64> = (0..24).map(|e| [1.0, 0.0, 1.0][(e / 4) % 3]).collect();
        assert_eq!(y["y"].to_f64().expect("read"), want, "{dtype}");
    }
}
