//! No panic on any input: the entry points of `kernelc::fuzz::entry` (IR JSON, op-spec
//! JSON, graph JSON, random programs through every emitter) on arbitrary bytes and
//! on valid inputs changed byte by byte, at a CI budget. The same functions are the
//! cargo-fuzz targets of `fuzz/` (docs/fuzzing.md: how to run them for millions of
//! inputs). `PROPTEST_CASES` raises the budget.

use kernelc::fuzz::entry;
use kernelc::ir::testing::{proptest_config, Case, GenConfig, Shape};
use proptest::prelude::*;

/// Valid inputs to mutate: a random kernel's JSON, an op spec of every kind, a graph.
fn ir_seed(words: &[u32]) -> Vec<u8> {
    let split = words.len() / 2;
    let case = Case::from_words(
        &GenConfig::full(),
        Shape::Statements,
        &words[..split],
        &words[split..],
    );
    kernelc::ir::json::to_json(&case.kernel).into_bytes()
}

fn spec_seeds() -> Vec<Vec<u8>> {
    kernelc::kernels::spec::OpKind::ALL
        .iter()
        .flat_map(|k| k.cases())
        .map(|s| serde_json::to_vec(&s).expect("a spec serialises"))
        .collect()
}

const GRAPH: &str = r#"{
  "inputs": [
    {"name": "x", "dtype": "f32", "shape": [4, 8]},
    {"name": "b", "dtype": "f32", "shape": [8]}
  ],
  "nodes": [
    {"spec": {"op": "binary", "func": "add", "dtype": "f32", "lhs": [4, 8], "rhs": [8]},
     "inputs": [{"input": 0}, {"input": 1}]},
    {"spec": {"op": "softmax", "dtype": "f32", "shape": [4, 8], "axis": 1, "log": false},
     "inputs": [{"node": {"node": 0, "output": 0}}]}
  ],
  "outputs": [{"node": {"node": 1, "output": 0}}]
}"#;

/// `bytes` with `edits` applied: a byte replaced, inserted or removed, or a JSON
/// punctuation mark or digit swapped in (which reaches deeper than noise).
fn mutate(mut bytes: Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    const PUNCTUATION: &[u8] = b"{}[]\":,-.0123456789e";
    for (at, byte, how) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = at.index(bytes.len());
        match how % 4 {
            0 => bytes[i] = *byte,
            1 => bytes.insert(i, *byte),
            2 => {
                bytes.remove(i);
            }
            _ => bytes[i] = PUNCTUATION[*byte as usize % PUNCTUATION.len()],
        }
    }
    bytes
}

fn edits() -> impl Strategy<Value = Vec<(prop::sample::Index, u8, u8)>> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<u8>(), any::<u8>()),
        1..6,
    )
}

#[test]
fn the_graph_seed_is_valid() {
    let graph: kernelc::kernels::graph::Graph = serde_json::from_str(GRAPH).expect("parses");
    graph.validate().expect("valid");
}

proptest! {
    #![proptest_config(proptest_config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        entry::ir_json(&bytes);
        entry::op_spec_json(&bytes);
        entry::graph_json(&bytes);
    }

    #[test]
    fn mutated_ir_json_never_panics(
        words in prop::collection::vec(any::<u32>(), 2..300),
        edits in edits(),
    ) {
        entry::ir_json(&mutate(ir_seed(&words), &edits));
    }

    #[test]
    fn mutated_op_specs_never_panic(which in any::<prop::sample::Index>(), edits in edits()) {
        let seeds = spec_seeds();
        let seed = seeds[which.index(seeds.len())].clone();
        entry::op_spec_json(&mutate(seed, &edits));
    }

    #[test]
    fn mutated_graphs_never_panic(edits in edits()) {
        entry::graph_json(&mutate(GRAPH.as_bytes().to_vec(), &edits));
    }
}

proptest! {
    // Each case emits for four targets (LLVM's PTX among them): fewer cases.
    #![proptest_config(proptest_config(48))]

    #[test]
    fn random_programs_emit_for_every_target_without_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2400)
    ) {
        entry::random_program(&bytes);
    }
}
