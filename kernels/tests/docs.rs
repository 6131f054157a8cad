//! The JSON in the docs is JSON the library takes: every `{"op": …}` example in
//! docs/ops.md and the README deserializes to a valid `OpSpec`, and docs/ops.md shows
//! every op kind of the catalogue at least once.

use kernelc_kernels::spec::{OpKind, OpSpec};
use std::collections::BTreeSet;

/// Every inline-code span of `markdown` that holds an op spec.
fn op_examples(markdown: &str) -> Vec<&str> {
    markdown
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.trim_start().starts_with("{\"op\""))
        .collect()
}

fn check(file: &str, markdown: &str) -> BTreeSet<OpKind> {
    let mut kinds = BTreeSet::new();
    for json in op_examples(markdown) {
        let spec: OpSpec = serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("{file}: `{json}` does not deserialize: {e}"));
        if let Err(e) = spec.validate() {
            panic!("{file}: `{json}` is invalid: {e}");
        }
        kinds.insert(spec.kind());
    }
    kinds
}

#[test]
fn every_op_example_in_the_docs_deserializes_and_validates() {
    let ops = include_str!("../../docs/ops.md");
    let shown = check("docs/ops.md", ops);
    let missing: Vec<&str> = OpKind::ALL
        .iter()
        .filter(|k| !shown.contains(k))
        .map(|k| k.name())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ops.md shows no JSON for {missing:?}"
    );
    check("README.md", include_str!("../../README.md"));
}

/// The GPU benchmark case lists (`bench/gpu/*.json`, `{name, spec, bytes|flops}`) hold
/// valid specs: a list that stopped parsing would only fail on the GPU machine.
#[test]
fn every_benchmark_case_list_holds_valid_specs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/gpu");
    let mut lists = 0;
    for entry in std::fs::read_dir(&dir).expect("bench/gpu exists") {
        let path = entry.expect("readable").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for case in cases {
            let spec: OpSpec = serde_json::from_value(case["spec"].clone())
                .unwrap_or_else(|e| panic!("{}: {case}: {e}", path.display()));
            spec.validate()
                .unwrap_or_else(|e| panic!("{}: {case}: {e}", path.display()));
        }
        lists += 1;
    }
    assert!(lists >= 4, "{lists} case lists in {}", dir.display());
}

#[test]
fn the_example_finder_finds_examples() {
    let md = "text `{\"op\":\"softmax\"}` and `code` and `{\"op\":\"gemm\"}`";
    assert_eq!(op_examples(md).len(), 2);
}
