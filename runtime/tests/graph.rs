//! Graphs on every device present: compiled once (fused, every kernel built), run
//! twice without compiling, equal to the node-by-node f64 reference; a wrong input
//! tensor is a typed error.

mod common;

use kernelc_ir::ScalarType::F32;
use kernelc_kernels::graph::{Graph, Node, ValueId};
use kernelc_kernels::spec::*;
use kernelc_runtime::RuntimeError;

fn out(node: usize) -> ValueId {
    ValueId::Node { node, output: 0 }
}

/// `y = (sigmoid(x·w + b) − 0.25)·x`, then a row softmax of `y`: a GEMM, an
/// elementwise chain of five nodes (one fused kernel), a softmax.
fn block() -> Graph {
    let (m, k, n) = (6, 10, 10);
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    let node = |spec: OpSpec, inputs: &[ValueId]| Node {
        spec,
        inputs: inputs.to_vec(),
    };
    let ew = |func, lhs: &[usize], rhs: &[usize]| {
        OpSpec::Binary(BinarySpec {
            func,
            dtype: F32,
            lhs: lhs.to_vec(),
            rhs: rhs.to_vec(),
            out_dtype: None,
        })
    };
    Graph {
        inputs: vec![sig("x", &[m, k]), sig("w", &[k, n]), sig("b", &[n])],
        nodes: vec![
            node(
                OpSpec::Gemm(GemmSpec::new(F32, m, n, k)),
                &[ValueId::Input(0), ValueId::Input(1)],
            ),
            node(
                ew(BinaryFn::Add, &[m, n], &[n]),
                &[out(0), ValueId::Input(2)],
            ),
            node(
                OpSpec::Unary(UnarySpec {
                    func: UnaryFn::Sigmoid,
                    dtype: F32,
                    shape: vec![m, n],
                }),
                &[out(1)],
            ),
            node(
                OpSpec::Scalar(ScalarSpec {
                    func: BinaryFn::Sub,
                    dtype: F32,
                    shape: vec![m, n],
                    scalar: 0.25,
                    reversed: false,
                    out_dtype: None,
                }),
                &[out(2)],
            ),
            node(
                ew(BinaryFn::Mul, &[m, n], &[m, k]),
                &[out(3), ValueId::Input(0)],
            ),
            node(
                OpSpec::Softmax(SoftmaxSpec {
                    dtype: F32,
                    shape: vec![m, n],
                    axis: 1,
                    log: false,
                }),
                &[out(4)],
            ),
        ],
        outputs: vec![out(5), out(0)],
    }
}

#[test]
fn a_graph_compiles_once_and_equals_its_reference_on_every_device() {
    let g = block();
    let data: Vec<Vec<f64>> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (0..s.numel())
                .map(|j| ((j * 5 + i) % 13) as f64 / 10.0 - 0.6)
                .collect()
        })
        .collect();
    let refs: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
    let want = g.reference(&refs).expect("reference");
    for rt in common::runtimes_on("graphs", common::ALL_PATHS) {
        let compiled = rt.compile_graph(&g).expect("compiles");
        assert_eq!(compiled.graph().nodes.len(), 3, "gemm, fused, softmax");
        let tensors: Vec<_> = g
            .inputs
            .iter()
            .zip(&data)
            .map(|(s, d)| rt.tensor_from_f64(&s.shape, F32, d).expect("upload"))
            .collect();
        let inputs: Vec<_> = tensors.iter().collect();
        let compiles = rt.stats().compiles;
        for _ in 0..2 {
            let got = compiled.run(&rt, &inputs).expect("runs");
            assert_eq!(got.len(), 2);
            for (t, w) in got.iter().zip(&want) {
                let v = t.to_f64().expect("read");
                for (a, b) in v.iter().zip(w) {
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{} on {}: {a} vs {b}",
                        rt.target_name(),
                        rt.device_name()
                    );
                }
            }
        }
        assert_eq!(
            rt.stats().compiles,
            compiles,
            "running a compiled graph compiles nothing"
        );
        // A tensor of the wrong shape is named, and nothing runs.
        let wrong = rt.tensor_from_f64(&[3], F32, &[0.0; 3]).expect("upload");
        let e = compiled
            .run(&rt, &[&wrong, inputs[1], inputs[2]])
            .unwrap_err();
        assert!(matches!(e, RuntimeError::InputShape { .. }), "{e}");
        let e = compiled.run(&rt, &inputs[..2]).unwrap_err();
        assert!(matches!(e, RuntimeError::Graph(_)), "{e}");
    }
}
