//! No panic on any input: the entry points of `kernelc::fuzz::entry` (IR JSON, op-spec
//! JSON, graph JSON, random programs through every emitter) on arbitrary bytes and
//! on valid inputs changed byte by byte, at a CI budget. The same functions are the
//! cargo-fuzz targets of `fuzz/` (docs/fuzzing.md: how to run them for millions of
//! inputs). `PROPTEST_CASES` raises the budget.

use kernelc::fuzz::entry;
use kernelc::fuzz::no_panic::{ir_seed, mutate, spec_seeds, Edit, GRAPH_SEED as GRAPH};
use kernelc::ir::testing::proptest_config;
use proptest::prelude::*;

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)
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

/// Found by `kernelc fuzz --no-panic ir_json` (seed 20261128, input 73707): a valid
/// kernel testing a bf16 for zero through an f16 bitcast
/// (`cast<bool>(bitcast<f16>(cast<bf16>(v)))`) made LLVM's NVPTX back end abort
/// ("Cannot select: bf16 = and"), killing the process. Every target now emits it.
/// (The kernel is written out here: the fuzzer's inputs follow the random-program
/// generator, which has changed since.)
#[test]
fn the_bf16_bitcast_that_aborted_llvm_emits() {
    use kernelc::ir::builder::KernelBuilder;
    use kernelc::ir::{Access, ScalarType};
    let mut k = KernelBuilder::new("bf16_zero_test", [4, 1, 1]);
    let input = k.buffer("in", ScalarType::F32, 16, Access::Read);
    let out = k.buffer("out", ScalarType::U32, 16, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", kernelc::ir::builder::global_id(0));
            let v = input.at(i.clone());
            let zero_test = v
                .cast(ScalarType::Bf16)
                .bitcast(ScalarType::F16)
                .cast(ScalarType::Bool);
            f.store(out, i, zero_test.cast(ScalarType::U32));
        })
        .expect("a valid kernel");
    for (target, artifact) in entry::emit_everywhere(&kernel) {
        if let Err(e) = artifact {
            // A typed refusal (a type the target lacks) is an answer; PTX must emit.
            assert_ne!(target, kernelc::aot::Target::Ptx, "{e}");
        }
    }
}
