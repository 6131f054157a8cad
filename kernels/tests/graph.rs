//! The graph layer: validation names the node and what is wrong; elementwise fusion
//! merges exactly the chains whose intermediates nothing else reads, and the fused
//! graph computes what the node-by-node graph does.

use kernelc_ir::ScalarType::F32;
use kernelc_kernels::graph::{
    fold_output_permutes, fold_permutes, fuse, fuse_elementwise, fuse_epilogues,
    fuse_reduce_epilogues, Graph, GraphError, Node, ValueId,
};
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::spec::*;

fn input(i: usize) -> ValueId {
    ValueId::Input(i)
}

fn out(node: usize) -> ValueId {
    ValueId::Node { node, output: 0 }
}

fn binary(func: BinaryFn, lhs: &[usize], rhs: &[usize]) -> OpSpec {
    OpSpec::Binary(BinarySpec {
        func,
        dtype: F32,
        lhs: lhs.to_vec(),
        rhs: rhs.to_vec(),
        out_dtype: None,
    })
}

fn unary(func: UnaryFn, shape: &[usize]) -> OpSpec {
    OpSpec::Unary(UnarySpec {
        func,
        dtype: F32,
        shape: shape.to_vec(),
    })
}

fn scalar(func: BinaryFn, shape: &[usize], s: f64) -> OpSpec {
    OpSpec::Scalar(ScalarSpec {
        func,
        dtype: F32,
        shape: shape.to_vec(),
        scalar: s,
        reversed: false,
        out_dtype: None,
    })
}

fn node(spec: OpSpec, inputs: &[ValueId]) -> Node {
    Node {
        spec,
        inputs: inputs.to_vec(),
    }
}

/// An MLP block: `h = gelu(x·W1 + b1)·0.5`, `y = h·W2 + x` — two GEMMs, an
/// elementwise chain between them (3 nodes) and a residual add after.
fn mlp() -> Graph {
    let (m, d, f) = (5, 8, 16);
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    Graph {
        inputs: vec![
            sig("x", &[m, d]),
            sig("w1", &[d, f]),
            sig("b1", &[f]),
            sig("w2", &[f, d]),
        ],
        nodes: vec![
            node(
                OpSpec::Gemm(GemmSpec::new(F32, m, f, d)),
                &[input(0), input(1)],
            ),
            node(binary(BinaryFn::Add, &[m, f], &[f]), &[out(0), input(2)]),
            node(unary(UnaryFn::GeluErf, &[m, f]), &[out(1)]),
            node(scalar(BinaryFn::Mul, &[m, f], 0.5), &[out(2)]),
            node(
                OpSpec::Gemm(GemmSpec::new(F32, m, d, f)),
                &[out(3), input(3)],
            ),
            node(binary(BinaryFn::Add, &[m, d], &[m, d]), &[out(4), input(0)]),
        ],
        outputs: vec![out(5)],
    }
}

fn data(graph: &Graph) -> Vec<Vec<f64>> {
    graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (0..s.numel())
                .map(|j| ((j * 7 + i * 3) % 11) as f64 / 8.0 - 0.6)
                .collect()
        })
        .collect()
}

fn reference(graph: &Graph) -> Vec<Vec<f64>> {
    let data = data(graph);
    let refs: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
    graph.reference(&refs).expect("reference")
}

#[test]
fn the_chain_between_the_gemms_fuses_into_one_node() {
    let g = mlp();
    let fused = fuse_elementwise(&g).expect("fuses");
    // gemm, fused(add, gelu, mul), gemm, add.
    assert_eq!(fused.nodes.len(), 4, "{fused:#?}");
    let OpSpec::Fused(f) = &fused.nodes[1].spec else {
        panic!("node 1 is {:?}", fused.nodes[1].spec);
    };
    assert_eq!(f.inputs, vec![vec![5, 16], vec![16]]);
    assert_eq!(fused.nodes[1].inputs, vec![out(0), input(2)]);
    assert_eq!(reference(&fused), reference(&g), "fusion changes no value");
}

fn assert_close(a: &[Vec<f64>], b: &[Vec<f64>]) {
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "{p} vs {q}");
        }
    }
}

/// The MLP's bias add and GELU go into the first GEMM (its bias and activation), its
/// residual add into the second (`beta = 1`, C the residual); the scaling between
/// them stays a kernel of its own.
#[test]
fn additions_and_activations_fold_into_the_gemms_around_them() {
    let g = mlp();
    let folded = fuse_epilogues(&g).expect("folds");
    let specs: Vec<&OpSpec> = folded.nodes.iter().map(|n| &n.spec).collect();
    assert_eq!(specs.len(), 3, "{specs:#?}");
    let (OpSpec::Gemm(first), OpSpec::Gemm(second)) = (specs[0], specs[2]) else {
        panic!("{specs:#?}");
    };
    assert!(first.bias && first.beta == 0.0, "{first:?}");
    assert_eq!(first.activation, Some(Activation::GeluErf));
    assert!(!second.bias && second.beta == 1.0 && second.activation.is_none());
    assert_eq!(folded.nodes[0].inputs, vec![input(0), input(1), input(2)]);
    assert_eq!(folded.nodes[1].inputs, vec![out(0)]);
    assert_eq!(folded.nodes[2].inputs[2], input(0));
    let both = fuse_elementwise(&folded).expect("fuses");
    assert_eq!(both.nodes.len(), 3, "{both:#?}");
    // One rounding fewer per folded addition: equal within f32 rounding.
    assert_close(&reference(&both), &reference(&g));
}

/// An activation before the bias add, or of a GEMM value read twice, is not the
/// GEMM's epilogue: nothing folds.
#[test]
fn an_activation_folds_only_as_the_last_step_of_a_gemm_read_once() {
    let (m, n, k) = (4, 6, 3);
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    let inputs = vec![sig("a", &[m, k]), sig("b", &[k, n]), sig("bias", &[n])];
    let gemm = || {
        node(
            OpSpec::Gemm(GemmSpec::new(F32, m, n, k)),
            &[input(0), input(1)],
        )
    };
    // relu(gemm) + bias: the activation folds, the later bias must not.
    let g = Graph {
        inputs: inputs.clone(),
        nodes: vec![
            gemm(),
            node(unary(UnaryFn::Relu, &[m, n]), &[out(0)]),
            node(binary(BinaryFn::Add, &[m, n], &[n]), &[out(1), input(2)]),
        ],
        outputs: vec![out(2)],
    };
    let folded = fuse_epilogues(&g).expect("folds");
    assert_eq!(folded.nodes.len(), 2, "{folded:#?}");
    let OpSpec::Gemm(fused) = &folded.nodes[0].spec else {
        panic!("{folded:#?}");
    };
    assert!(fused.activation == Some(Activation::Relu) && !fused.bias);
    assert_close(&reference(&folded), &reference(&g));
    // The GEMM's value is also an output: it stays as it is.
    let g = Graph {
        inputs,
        nodes: vec![gemm(), node(unary(UnaryFn::Silu, &[m, n]), &[out(0)])],
        outputs: vec![out(0), out(1)],
    };
    assert_eq!(fuse_epilogues(&g).expect("folds"), g);
}

/// Attention as an exporter writes it: heads split out of `[b, s, h·d]` projections
/// by permutes, `softmax(Q·Kᵀ/√d + mask)·V`, the heads merged back by a permute.
fn exported_attention((b, s, h, d): (usize, usize, usize, usize), mask_out: bool) -> Graph {
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    let permute = |shape: [usize; 4], perm: &[usize]| {
        OpSpec::Permute(PermuteSpec {
            dtype: F32,
            shape: shape.to_vec(),
            perm: perm.to_vec(),
        })
    };
    let (bshd, bhsd) = ([b, s, h, d], [b, h, s, d]);
    let batched = |m, n, k| {
        let mut g = GemmSpec::new(F32, m, n, k);
        g.batch = vec![b, h];
        OpSpec::Gemm(g)
    };
    let scores = [b, h, s, s];
    let softmax = OpSpec::Softmax(SoftmaxSpec {
        dtype: F32,
        shape: scores.to_vec(),
        axis: 3,
        log: false,
    });
    Graph {
        inputs: vec![
            sig("q", &[b, s, h * d]),
            sig("k", &[b, s, h * d]),
            sig("v", &[b, s, h * d]),
            sig("mask", &[s, s]),
        ],
        nodes: vec![
            node(permute(bshd, &[0, 2, 1, 3]), &[input(0)]),
            node(permute(bshd, &[0, 2, 3, 1]), &[input(1)]),
            node(permute(bshd, &[0, 2, 1, 3]), &[input(2)]),
            node(batched(s, s, d), &[out(0), out(1)]),
            node(scalar(BinaryFn::Div, &scores, (d as f64).sqrt()), &[out(3)]),
            node(binary(BinaryFn::Add, &scores, &[s, s]), &[out(4), input(3)]),
            node(softmax, &[out(5)]),
            node(batched(s, d, s), &[out(6), out(2)]),
            node(permute(bhsd, &[0, 2, 1, 3]), &[out(7)]),
        ],
        outputs: if mask_out {
            vec![out(8), out(6)]
        } else {
            vec![out(8)]
        },
    }
}

/// The whole pattern becomes one attention node reading the projections in place
/// (`bshd`), the scale `1/√d` taken from the division, the mask from the addition.
#[test]
fn softmax_of_scaled_scores_times_v_becomes_one_attention_node() {
    let (b, s, h, d) = (2, 8, 3, 4);
    let g = exported_attention((b, s, h, d), false);
    let fused = fuse(&g, &TargetCaps::cuda_sm90()).expect("fuses");
    assert_eq!(fused.nodes.len(), 1, "{fused:#?}");
    let OpSpec::Attention(a) = &fused.nodes[0].spec else {
        panic!("{fused:#?}");
    };
    assert_eq!(
        (a.layout, a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_k, a.head_dim),
        (AttentionLayout::Bshd, b, h, h, s, s, d)
    );
    assert!((a.scale - 0.5).abs() < 1e-15 && !a.causal && !a.lse);
    assert_eq!(a.mask, Some(vec![s, s]));
    assert_eq!(
        fused.nodes[0].inputs,
        vec![input(0), input(1), input(2), input(3)]
    );
    assert_close(&reference(&fused), &reference(&g));
    // A serial target (the CPU) keeps the two GEMMs and the softmax, the mask's
    // addition (broadcast over batch and heads) its prologue, and the head merge in
    // the strides the second GEMM writes C with.
    let serial = fuse(&g, &TargetCaps::cpu()).expect("fuses");
    let names: Vec<String> = serial.nodes.iter().map(|n| n.spec.name()).collect();
    assert_eq!(names, ["gemm", "fused_softmax", "gemm"]);
    assert_close(&reference(&serial), &reference(&g));
}

/// The probabilities are also returned: they must be stored, so nothing fuses into
/// attention (the permutes still fold into the GEMMs).
#[test]
fn attention_whose_probabilities_are_read_elsewhere_stays_as_written() {
    let g = exported_attention((1, 4, 2, 2), true);
    let fused = fuse(&g, &TargetCaps::cuda_sm90()).expect("fuses");
    let names: Vec<String> = fused.nodes.iter().map(|n| n.spec.name()).collect();
    assert!(!names.iter().any(|n| n == "attention"), "{names:?}");
    assert!(names.iter().any(|n| n == "fused_softmax"), "{names:?}");
    assert_close(&reference(&fused), &reference(&g));
}

/// `layer_norm(x + r)` takes `r` as its residual input; the sum's other reader (a
/// later node, and the graph's output) reads the norm's `sum` output instead.
#[test]
fn an_addition_before_a_layer_norm_becomes_its_residual() {
    let shape = [4, 8];
    let sig = |name: &str| TensorSig::new(name, F32, shape.to_vec());
    let norm = OpSpec::LayerNorm(LayerNormSpec::new(F32, &shape, 1e-5));
    let g = Graph {
        inputs: vec![sig("x"), sig("r")],
        nodes: vec![
            node(binary(BinaryFn::Add, &shape, &shape), &[input(0), input(1)]),
            node(norm, &[out(0)]),
            node(binary(BinaryFn::Mul, &shape, &shape), &[out(1), out(0)]),
        ],
        outputs: vec![out(2), out(0)],
    };
    let folded = fuse_epilogues(&g).expect("folds");
    assert_eq!(folded.nodes.len(), 2, "{folded:#?}");
    let OpSpec::LayerNorm(n) = &folded.nodes[0].spec else {
        panic!("{folded:#?}");
    };
    assert!(n.residual);
    let sum = ValueId::Node { node: 0, output: 1 };
    assert_eq!(folded.nodes[1].inputs, vec![out(0), sum]);
    assert_eq!(folded.outputs, vec![out(1), sum]);
    assert_close(&reference(&folded), &reference(&g));
    // Read before the norm, the sum stays an addition.
    let mut early = g.clone();
    early.nodes.swap(1, 2);
    early.nodes[1].inputs = vec![out(0), out(0)];
    early.nodes[2].inputs = vec![out(0)];
    early.outputs = vec![out(1), out(2)];
    assert_eq!(fuse_epilogues(&early).expect("valid").nodes.len(), 3);
}

/// Attention's `q·kᵀ` as exported: both operands permuted from `[b, s, h, d]`; the
/// permutes fold into the batched GEMM's strides (k's as a transposed operand) and
/// the result is bit for bit the same. A permute read twice stays.
/// `Σ (x₀·x₁)·0.5` along rows, `softmax(x₀ + x₁)` and `softmax(x₀ + b)` (`b`
/// broadcast) become one fused reduction and two fused softmaxes; a reduction of a
/// value also returned stays as written.
#[test]
fn elementwise_nodes_before_a_reduction_or_softmax_become_its_prologue() {
    let s = [4, 8];
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    let sum_rows = OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::Sum,
        dtype: F32,
        shape: s.to_vec(),
        axes: vec![1],
        keepdim: false,
        index_dtype: None,
        accumulate: false,
    });
    let softmax = OpSpec::Softmax(SoftmaxSpec {
        dtype: F32,
        shape: s.to_vec(),
        axis: 1,
        log: false,
    });
    let g = Graph {
        inputs: vec![sig("x0", &s), sig("x1", &s), sig("b", &[8])],
        nodes: vec![
            node(binary(BinaryFn::Mul, &s, &s), &[input(0), input(1)]),
            node(scalar(BinaryFn::Mul, &s, 0.5), &[out(0)]),
            node(sum_rows.clone(), &[out(1)]),
            node(binary(BinaryFn::Add, &s, &s), &[input(0), input(1)]),
            node(softmax.clone(), &[out(3)]),
            node(binary(BinaryFn::Add, &s, &[8]), &[input(0), input(2)]),
            node(softmax, &[out(5)]),
            node(unary(UnaryFn::Tanh, &s), &[input(1)]),
            node(sum_rows, &[out(7)]),
        ],
        outputs: vec![out(2), out(4), out(6), out(7), out(8)],
    };
    let fused = fuse(&g, &TargetCaps::cpu()).expect("fuses");
    let kinds: Vec<&str> = fused.nodes.iter().map(|n| n.spec.kind_name()).collect();
    assert_eq!(
        kinds,
        [
            "fused_reduce",
            "fused_softmax",
            "fused_softmax",
            "unary",
            "reduce"
        ],
        "{fused:#?}"
    );
    let OpSpec::FusedReduce(r) = &fused.nodes[0].spec else {
        unreachable!()
    };
    assert_eq!(r.prologue.nodes.len(), 4, "x0, x1, their product, ·0.5");
    assert_eq!(fused.nodes[0].inputs, vec![input(0), input(1)]);
    assert_close(&reference(&fused), &reference(&g));
}

/// An RMS as exporters write it, `√(mean(x·x) + ε)` read with the kept axis
/// (`[6, 1]`), becomes one fused reduction: the product its prologue, the rest its
/// epilogue, `keepdim` set to the shape the epilogue reads.
#[test]
fn elementwise_nodes_after_a_reduction_become_its_epilogue() {
    let s = [6, 64];
    let mean = OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::Mean,
        dtype: F32,
        shape: s.to_vec(),
        axes: vec![1],
        keepdim: false,
        index_dtype: None,
        accumulate: false,
    });
    let g = Graph {
        inputs: vec![TensorSig::new("x", F32, s.to_vec())],
        nodes: vec![
            node(binary(BinaryFn::Mul, &s, &s), &[input(0), input(0)]),
            node(mean, &[out(0)]),
            node(scalar(BinaryFn::Add, &[6, 1], 1e-5), &[out(1)]),
            node(unary(UnaryFn::Sqrt, &[6, 1]), &[out(2)]),
        ],
        outputs: vec![out(3)],
    };
    let fused = fuse(&g, &TargetCaps::cuda_sm90()).expect("fuses");
    assert_eq!(fused.nodes.len(), 1, "{fused:#?}");
    let OpSpec::FusedReduce(r) = &fused.nodes[0].spec else {
        panic!("{fused:#?}")
    };
    assert!(r.reduce.keepdim);
    assert_eq!(r.epilogue.as_ref().map(|e| e.nodes.len()), Some(3));
    assert_eq!(fused.nodes[0].inputs, vec![input(0)]);
    assert_close(&reference(&fused), &reference(&g));
}

/// Attention probabilities with dropout as exporters write it,
/// `softmax(x·0.125 + mask)·keep·1.25`: one fused softmax, the scaled sum its
/// prologue and the two products its epilogue, reading `keep` after the prologue's
/// inputs. A second reader of the probabilities keeps them stored.
#[test]
fn elementwise_nodes_after_a_softmax_become_its_epilogue() {
    let s = [4, 3, 24];
    let softmax = OpSpec::Softmax(SoftmaxSpec {
        dtype: F32,
        shape: s.to_vec(),
        axis: 2,
        log: false,
    });
    let g = Graph {
        inputs: vec![
            TensorSig::new("x", F32, s.to_vec()),
            TensorSig::new("mask", F32, vec![3, 24]),
            TensorSig::new("keep", F32, s.to_vec()),
        ],
        nodes: vec![
            node(scalar(BinaryFn::Mul, &s, 0.125), &[input(0)]),
            node(binary(BinaryFn::Add, &s, &[3, 24]), &[out(0), input(1)]),
            node(softmax, &[out(1)]),
            node(binary(BinaryFn::Mul, &s, &s), &[out(2), input(2)]),
            node(scalar(BinaryFn::Mul, &s, 1.25), &[out(3)]),
        ],
        outputs: vec![out(4)],
    };
    for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
        let fused = fuse(&g, &caps).expect("fuses");
        assert_eq!(fused.nodes.len(), 1, "{fused:#?}");
        let OpSpec::FusedSoftmax(f) = &fused.nodes[0].spec else {
            panic!("{fused:#?}")
        };
        assert_eq!(f.prologue.inputs, vec![s.to_vec(), vec![3, 24]]);
        let epilogue = f.epilogue.as_ref().expect("an epilogue");
        assert_eq!(epilogue.inputs, vec![s.to_vec(), s.to_vec()]);
        assert_eq!(fused.nodes[0].inputs, vec![input(0), input(1), input(2)]);
        assert_close(&reference(&fused), &reference(&g));
    }
    // The probabilities also an output: the softmax stays unfused with its epilogue.
    let both = Graph {
        outputs: vec![out(2), out(4)],
        ..g.clone()
    };
    let fused = fuse(&both, &TargetCaps::cpu()).expect("fuses");
    assert!(
        fused
            .nodes
            .iter()
            .all(|n| !matches!(&n.spec, OpSpec::FusedSoftmax(f) if f.epilogue.is_some())),
        "{fused:#?}"
    );
    assert_close(&reference(&fused), &reference(&both));
}

/// A transformer's `x + r → layer_norm → ·(1 + s) + t` (adaLN): the addition becomes
/// the norm's residual and the modulation its epilogue, one node whose `sum` output
/// the next residual reads. An epilogue that would read that sum, or a reader of the
/// sum between the norm and the modulation, keeps the modulation a node of its own.
#[test]
fn elementwise_nodes_after_a_layer_norm_become_its_epilogue() {
    let s = [5, 16];
    let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
    let norm = OpSpec::LayerNorm(LayerNormSpec {
        weight: true,
        ..LayerNormSpec::new(F32, &s, 1e-5)
    });
    let g = Graph {
        inputs: vec![
            sig("x", &s),
            sig("r", &s),
            sig("w", &[16]),
            sig("scale", &[5, 1]),
            sig("shift", &[16]),
        ],
        nodes: vec![
            node(binary(BinaryFn::Add, &s, &s), &[input(0), input(1)]),
            node(norm, &[out(0), input(2)]),
            node(scalar(BinaryFn::Add, &[5, 1], 1.0), &[input(3)]),
            node(binary(BinaryFn::Mul, &s, &[5, 1]), &[out(1), out(2)]),
            node(binary(BinaryFn::Add, &s, &[16]), &[out(3), input(4)]),
            // The next block's residual reads the sum (and the modulated value, also
            // returned).
            node(binary(BinaryFn::Add, &s, &s), &[out(4), out(0)]),
        ],
        outputs: vec![out(5), out(4)],
    };
    for caps in [TargetCaps::cpu(), TargetCaps::cuda_sm90()] {
        let fused = fuse(&g, &caps).expect("fuses");
        let norms: Vec<&LayerNormSpec> = fused
            .nodes
            .iter()
            .filter_map(|n| match &n.spec {
                OpSpec::LayerNorm(n) => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(norms.len(), 1, "{fused:#?}");
        assert!(norms[0].residual, "{fused:#?}");
        let epilogue = norms[0].epilogue.as_ref().expect("an epilogue");
        assert_eq!(epilogue.inputs[0], s.to_vec(), "{fused:#?}");
        // The scale's `+ 1` (of the scale's shape, not y's) stays a node the epilogue
        // reads; the last addition reads the epilogue's value and the norm's sum.
        assert_eq!(epilogue.inputs, vec![s.to_vec(), vec![5, 1], vec![16]]);
        assert_eq!(fused.nodes.len(), 3, "{fused:#?}");
        assert_close(&reference(&fused), &reference(&g));
    }
    // Returned alone, the chain takes in the final addition, which reads the norm's
    // own sum: not an epilogue (the fused node would read itself).
    let chained = Graph {
        outputs: vec![out(5)],
        ..g.clone()
    };
    let fused = fuse(&chained, &TargetCaps::cpu()).expect("fuses");
    assert!(
        fused
            .nodes
            .iter()
            .all(|n| !matches!(&n.spec, OpSpec::LayerNorm(n) if n.epilogue.is_some())),
        "{fused:#?}"
    );
    assert_close(&reference(&fused), &reference(&chained));
    // A norm with its `sum` output: folded where the sum's readers come after the
    // epilogue's node, not where one comes between.
    let residual_norm = OpSpec::LayerNorm(LayerNormSpec {
        residual: true,
        weight: true,
        ..LayerNormSpec::new(F32, &s, 1e-5)
    });
    let sum = ValueId::Node { node: 0, output: 1 };
    let modulate = node(binary(BinaryFn::Mul, &s, &[5, 1]), &[out(0), input(3)]);
    let double = |sum| node(binary(BinaryFn::Add, &s, &s), &[sum, sum]);
    let after = Graph {
        nodes: vec![
            node(residual_norm.clone(), &[input(0), input(1), input(2)]),
            modulate.clone(),
            double(sum),
        ],
        outputs: vec![out(1), out(2)],
        ..g.clone()
    };
    let fused = fuse_reduce_epilogues(&after).expect("valid");
    assert_eq!(fused.nodes.len(), 2, "{fused:#?}");
    assert_eq!(
        fused.nodes[1].inputs,
        vec![ValueId::Node { node: 0, output: 1 }; 2]
    );
    assert_close(&reference(&fused), &reference(&after));
    let between = Graph {
        nodes: vec![
            node(residual_norm, &[input(0), input(1), input(2)]),
            double(sum),
            Node {
                inputs: vec![out(0), input(3)],
                ..modulate
            },
        ],
        outputs: vec![out(2), out(1)],
        ..g.clone()
    };
    let fused = fuse_reduce_epilogues(&between).expect("valid");
    assert_eq!(fused.nodes.len(), 3, "{fused:#?}");
    assert_close(&reference(&fused), &reference(&between));
}

#[test]
fn permutes_read_by_a_gemm_fold_into_its_strides() {
    let (b, s, h, d) = (2, 5, 3, 4);
    let sig = |name: &str| TensorSig::new(name, F32, vec![b, s, h, d]);
    let permute = |perm: &[usize]| {
        OpSpec::Permute(PermuteSpec {
            dtype: F32,
            shape: vec![b, s, h, d],
            perm: perm.to_vec(),
        })
    };
    let (gemm, _) = GemmSpec::matmul(F32, &[b, h, s, d], &[b, h, d, s]).expect("matmul");
    let g = Graph {
        inputs: vec![sig("q"), sig("k")],
        nodes: vec![
            node(permute(&[0, 2, 1, 3]), &[input(0)]),
            node(permute(&[0, 2, 3, 1]), &[input(1)]),
            node(OpSpec::Gemm(gemm), &[out(0), out(1)]),
        ],
        outputs: vec![out(2)],
    };
    let folded = fold_permutes(&g).expect("folds");
    assert_eq!(folded.nodes.len(), 1, "{folded:#?}");
    let OpSpec::Gemm(f) = &folded.nodes[0].spec else {
        panic!("{folded:#?}");
    };
    assert_eq!(
        (f.lda, f.trans_a, f.ldb, f.trans_b),
        (Some(h * d), false, Some(h * d), true)
    );
    assert_eq!(folded.nodes[0].inputs, vec![input(0), input(1)]);
    assert_eq!(
        reference(&folded),
        reference(&g),
        "the same products in the same order"
    );
    // A batch of one (matmul reads its dim of 1 at stride 0): folds the same.
    let one = |perm: &[usize]| {
        OpSpec::Permute(PermuteSpec {
            dtype: F32,
            shape: vec![1, s, h, d],
            perm: perm.to_vec(),
        })
    };
    let (gemm1, _) = GemmSpec::matmul(F32, &[1, h, s, d], &[1, h, d, s]).expect("matmul");
    let single = Graph {
        inputs: vec![
            TensorSig::new("q", F32, vec![1, s, h, d]),
            TensorSig::new("k", F32, vec![1, s, h, d]),
        ],
        nodes: vec![
            node(one(&[0, 2, 1, 3]), &[input(0)]),
            node(one(&[0, 2, 3, 1]), &[input(1)]),
            node(OpSpec::Gemm(gemm1), &[out(0), out(1)]),
        ],
        outputs: vec![out(2)],
    };
    let folded1 = fold_permutes(&single).expect("folds");
    assert_eq!(folded1.nodes.len(), 1, "{folded1:#?}");
    assert_eq!(reference(&folded1), reference(&single));
    // The permuted q also returned: it stays a node.
    let mut kept = g.clone();
    kept.outputs.push(out(0));
    assert_eq!(fold_permutes(&kept).expect("valid").nodes.len(), 2);
}

/// Attention's `[b, h, s, d] → [b, s, h, d]` after `P·V`: the GEMM writes C in the
/// permuted layout itself (`ldc = h·d`, batch strides `[s·h·d, d]`), the copy gone;
/// a permute that moves C's columns, or a GEMM that reads C, keeps its node.
#[test]
fn a_permute_of_a_gemms_result_folds_into_c_strides() {
    let (b, h, s, d) = (2, 3, 5, 4);
    let (gemm, _) = GemmSpec::matmul(F32, &[b, h, s, s], &[b, h, s, d]).expect("matmul");
    let graph_with = |perm: &[usize], gemm: GemmSpec| Graph {
        inputs: vec![
            TensorSig::new("p", F32, vec![b, h, s, s]),
            TensorSig::new("v", F32, vec![b, h, s, d]),
        ],
        nodes: vec![
            node(OpSpec::Gemm(gemm), &[input(0), input(1)]),
            node(
                OpSpec::Permute(PermuteSpec {
                    dtype: F32,
                    shape: vec![b, h, s, d],
                    perm: perm.to_vec(),
                }),
                &[out(0)],
            ),
        ],
        outputs: vec![out(1)],
    };
    let g = graph_with(&[0, 2, 1, 3], gemm.clone());
    let folded = fold_output_permutes(&g).expect("folds");
    assert_eq!(folded.nodes.len(), 1, "{folded:#?}");
    let OpSpec::Gemm(f) = &folded.nodes[0].spec else {
        panic!("{folded:#?}");
    };
    assert_eq!(
        (f.ldc, f.stride_c.clone()),
        (Some(h * d), Some(vec![s * h * d, d]))
    );
    assert_eq!(
        reference(&folded),
        reference(&g),
        "the same values, stored elsewhere"
    );
    // The whole pipeline on a serial target (no attention fusion) folds it too.
    let cpu = fuse(&g, &TargetCaps::cpu()).expect("fuses");
    assert_eq!(cpu.nodes.len(), 1, "{cpu:#?}");
    // The last dim moved: C's columns would not be contiguous.
    let kept = graph_with(&[0, 1, 3, 2], gemm.clone());
    assert_eq!(fold_output_permutes(&kept).expect("valid").nodes.len(), 2);
}

/// A node reads a value under any shape of its element count (a reshape is free);
/// another count is the node's error.
#[test]
fn values_are_read_under_any_shape_of_their_element_count() {
    let g = Graph {
        inputs: vec![TensorSig::new("x", F32, vec![2, 6])],
        nodes: vec![node(unary(UnaryFn::Exp, &[3, 4]), &[input(0)])],
        outputs: vec![out(0)],
    };
    g.validate().expect("12 elements as [3, 4]");
    let bad = Graph {
        nodes: vec![node(unary(UnaryFn::Exp, &[5, 2]), &[input(0)])],
        ..g
    };
    assert!(matches!(
        bad.validate(),
        Err(GraphError::Mismatch { node: 0, .. })
    ));
}

#[test]
fn a_value_read_twice_or_returned_stays_a_boundary() {
    let s = [64];
    let sig = TensorSig::new("x", F32, s.to_vec());
    // relu(x) is read by two nodes; exp(relu) is returned as well as used.
    let g = Graph {
        inputs: vec![sig],
        nodes: vec![
            node(unary(UnaryFn::Relu, &s), &[input(0)]),
            node(unary(UnaryFn::Exp, &s), &[out(0)]),
            node(binary(BinaryFn::Mul, &s, &s), &[out(0), out(1)]),
            node(scalar(BinaryFn::Add, &s, 1.0), &[out(2)]),
            node(unary(UnaryFn::Neg, &s), &[out(3)]),
        ],
        outputs: vec![out(4), out(1)],
    };
    let fused = fuse_elementwise(&g).expect("fuses");
    // relu alone (read twice); exp alone (returned); mul → add → neg fused.
    assert_eq!(fused.nodes.len(), 3, "{fused:#?}");
    assert!(matches!(fused.nodes[2].spec, OpSpec::Fused(_)));
    assert_eq!(fused.outputs.len(), 2);
    assert_eq!(reference(&fused), reference(&g));
}

#[test]
fn bad_graphs_name_the_node_and_the_reason() {
    let g = mlp();
    // A read of a later node (a cycle as a list can write it).
    let mut cycle = g.clone();
    cycle.nodes[1].inputs[0] = out(3);
    assert!(matches!(
        cycle.validate(),
        Err(GraphError::UnknownValue { node: 1, .. })
    ));
    // A missing input.
    let mut missing = g.clone();
    missing.nodes[0].inputs[1] = input(9);
    let e = missing.validate().unwrap_err();
    assert!(matches!(e, GraphError::UnknownValue { node: 0, .. }), "{e}");
    assert!(e.to_string().contains("node 0 (gemm"), "{e}");
    // A shape that does not match what the node's attributes expect.
    let mut shape = g.clone();
    shape.inputs[2].shape = vec![15];
    let e = shape.validate().unwrap_err();
    assert!(
        matches!(&e, GraphError::Mismatch { node: 1, want, .. } if want.name == "b"),
        "{e}"
    );
    // An invalid spec, too few inputs, an unknown output.
    let mut spec = g.clone();
    spec.nodes[2].spec = unary(UnaryFn::Exp, &[1 << 25, 1 << 24]);
    assert!(matches!(
        spec.validate(),
        Err(GraphError::Spec { node: 2, .. })
    ));
    let mut count = g.clone();
    count.nodes[5].inputs.pop();
    assert!(matches!(
        count.validate(),
        Err(GraphError::InputCount {
            node: 5,
            expected: 2,
            found: 1,
            ..
        })
    ));
    let mut output = g.clone();
    output.outputs.push(out(42));
    assert!(matches!(
        output.validate(),
        Err(GraphError::UnknownOutput { .. })
    ));
    // Fusion refuses what validation refuses; the reference checks its data.
    assert!(fuse_elementwise(&cycle).is_err());
    assert!(matches!(
        g.reference(&[&[0.0]]),
        Err(GraphError::InputData {
            expected: 4,
            found: 1
        })
    ));
}

#[test]
fn graphs_round_trip_through_json() {
    let g = mlp();
    let json = serde_json::to_string(&g).expect("serialises");
    let back: Graph = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, g);
}

mod random {
    //! Random elementwise DAGs: fusing never changes a value, every output survives,
    //! and no fused node reads a value another node also reads from inside it.
    use super::*;
    use proptest::prelude::*;

    /// Node `k` from `(kind, a, b)`: its operands are earlier values (inputs first).
    fn build(choices: &[(u8, usize, usize)], outputs: &[usize]) -> Graph {
        let s = [3, 5];
        let sig = |i: usize| TensorSig::new(&format!("x{i}"), F32, s.to_vec());
        let mut nodes = Vec::new();
        let values = |k: usize| 2 + k;
        let id = |v: usize| if v < 2 { input(v) } else { out(v - 2) };
        for (k, &(kind, a, b)) in choices.iter().enumerate() {
            let (a, b) = (id(a % values(k)), id(b % values(k)));
            let spec = match kind % 6 {
                0 => binary(BinaryFn::Add, &s, &s),
                1 => binary(BinaryFn::Mul, &s, &s),
                2 => binary(BinaryFn::MaxNan, &s, &s),
                3 => unary(UnaryFn::Tanh, &s),
                4 => unary(UnaryFn::Relu, &s),
                _ => scalar(BinaryFn::Sub, &s, 0.75),
            };
            let inputs = if spec.inputs().len() == 2 {
                vec![a, b]
            } else {
                vec![a]
            };
            nodes.push(node(spec, &inputs));
        }
        let n = nodes.len();
        Graph {
            inputs: vec![sig(0), sig(1)],
            nodes,
            outputs: outputs.iter().map(|&o| out(o % n)).collect(),
        }
    }

    /// Like [`build`] over `[4, 4]` values with the ops every rewrite of
    /// [`fuse`] folds: GEMMs, a row (bias) addition, activations, constant factors,
    /// layer norms and softmaxes among the elementwise nodes.
    fn build_with_gemms(choices: &[(u8, usize, usize)], outputs: &[usize]) -> Graph {
        let s = [4, 4];
        let sig = |name: &str, shape: &[usize]| TensorSig::new(name, F32, shape.to_vec());
        let mut nodes = Vec::new();
        let values = |k: usize| 2 + k;
        let id = |v: usize| if v < 2 { input(v) } else { out(v - 2) };
        for (k, &(kind, a, b)) in choices.iter().enumerate() {
            let (a, b) = (id(a % values(k)), id(b % values(k)));
            let (spec, inputs) = match kind % 10 {
                0 => (binary(BinaryFn::Add, &s, &s), vec![a, b]),
                1 => (binary(BinaryFn::Mul, &s, &s), vec![a, b]),
                2 => (OpSpec::Gemm(GemmSpec::new(F32, 4, 4, 4)), vec![a, b]),
                3 => (binary(BinaryFn::Add, &s, &[4]), vec![a, input(2)]),
                4 => (unary(UnaryFn::Relu, &s), vec![a]),
                5 => (unary(UnaryFn::GeluErf, &s), vec![a]),
                6 => (scalar(BinaryFn::Mul, &s, 0.5), vec![a]),
                7 => (scalar(BinaryFn::Div, &s, 3.0), vec![a]),
                8 => (
                    OpSpec::LayerNorm(LayerNormSpec::new(F32, &s, 1e-5)),
                    vec![a],
                ),
                _ => (
                    OpSpec::Softmax(SoftmaxSpec {
                        dtype: F32,
                        shape: s.to_vec(),
                        axis: 1,
                        log: false,
                    }),
                    vec![a],
                ),
            };
            nodes.push(node(spec, &inputs));
        }
        let n = nodes.len();
        Graph {
            inputs: vec![sig("x0", &s), sig("x1", &s), sig("bias", &[4])],
            nodes,
            outputs: outputs.iter().map(|&o| out(o % n)).collect(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn fusion_changes_no_value(
            choices in prop::collection::vec((0u8..6, 0usize..64, 0usize..64), 1..12),
            outputs in prop::collection::vec(0usize..64, 1..4),
        ) {
            let g = build(&choices, &outputs);
            prop_assert!(g.validate().is_ok());
            let fused = fuse_elementwise(&g).expect("fuses");
            prop_assert!(fused.nodes.len() <= g.nodes.len());
            prop_assert_eq!(fused.outputs.len(), g.outputs.len());
            prop_assert_eq!(reference(&fused), reference(&g));
        }

        /// The whole pipeline, for a GPU's caps and a CPU's, on graphs of GEMMs,
        /// norms, softmaxes and elementwise ops: the fused graph computes what the
        /// graph does, within f32 rounding (a folded epilogue rounds once where the
        /// nodes rounded twice), and never has more nodes.
        #[test]
        fn the_fusion_pipeline_changes_no_value(
            choices in prop::collection::vec((0u8..10, 0usize..64, 0usize..64), 1..12),
            outputs in prop::collection::vec(0usize..64, 1..4),
        ) {
            let g = build_with_gemms(&choices, &outputs);
            prop_assert!(g.validate().is_ok());
            let want = reference(&g);
            for caps in [TargetCaps::cuda_sm90(), TargetCaps::cpu()] {
                let fused = fuse(&g, &caps).expect("fuses");
                prop_assert!(fused.nodes.len() <= g.nodes.len());
                prop_assert_eq!(fused.outputs.len(), g.outputs.len());
                assert_close(&reference(&fused), &want);
            }
        }
    }
}
