//! Fusion pays: a graph of 8 elementwise ops on 16M f32 elements compiled into its
//! fused plan (`Runtime::compile_graph`: one kernel) against the same graph run node
//! by node (`compile_graph_with(.., false)`: 8 kernels), on the same device in the
//! same run (the CPU on both tiers always; CUDA too where a CUDA device is present).
//!
//! `cargo bench --bench fusion` (add `-- quick` for 1M elements). Prints one table:
//! time per chain, the memory each moves (each op reads its inputs and writes its
//! output once) and the ratios. Both are checked equal before timing.
//!
//! Two chains: `t = x·w`, `t + b`, `relu`, `·0.5`, `sigmoid`, `·x`, `− b`,
//! `max_nan(·, x)` (with an `exp`: on a CPU of 128-bit vectors its fused kernel is
//! bound by arithmetic, not memory), and the same with `sigmoid` replaced by `abs`
//! (bound by memory on every device).

mod common;

use common::random;
use kernelc::kernels::graph::{Graph, Node, ValueId};
use kernelc::kernels::spec::{BinaryFn, BinarySpec, OpSpec, ScalarSpec, TensorSig};
use kernelc::kernels::spec::{UnaryFn, UnarySpec};
use kernelc::runtime::{
    cache::DiskCache, CompiledGraph, CpuTier, Device, DeviceChoice, Runtime, Tensor,
};
use kernelc_ir::ScalarType::F32;
use std::time::{Duration, Instant};

/// Median wall time of `runs` calls after one warm-up call, each synchronised.
fn time(rt: &Runtime, runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    rt.synchronize().expect("synchronize");
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            rt.synchronize().expect("synchronize");
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// One step of the chain: a binary op of two earlier values, a scalar op or a
/// unary op of one (values: 0 = x, 1 = w, 2 = b, then each step's result).
#[derive(Clone, Copy)]
enum Step {
    Binary(BinaryFn, usize, usize),
    Scalar(BinaryFn, usize, f64),
    Unary(UnaryFn, usize),
}

const SIGMOID_CHAIN: [Step; 8] = [
    Step::Binary(BinaryFn::Mul, 0, 1),
    Step::Binary(BinaryFn::Add, 3, 2),
    Step::Unary(UnaryFn::Relu, 4),
    Step::Scalar(BinaryFn::Mul, 5, 0.5),
    Step::Unary(UnaryFn::Sigmoid, 6),
    Step::Binary(BinaryFn::Mul, 7, 0),
    Step::Binary(BinaryFn::Sub, 8, 2),
    Step::Binary(BinaryFn::MaxNan, 9, 0),
];

const ARITHMETIC_CHAIN: [Step; 8] = [
    Step::Binary(BinaryFn::Mul, 0, 1),
    Step::Binary(BinaryFn::Add, 3, 2),
    Step::Unary(UnaryFn::Relu, 4),
    Step::Scalar(BinaryFn::Mul, 5, 0.5),
    Step::Unary(UnaryFn::Abs, 6),
    Step::Binary(BinaryFn::Mul, 7, 0),
    Step::Binary(BinaryFn::Sub, 8, 2),
    Step::Binary(BinaryFn::MaxNan, 9, 0),
];

/// The chain as a graph over inputs `x`, `w`, `b` (values 0-2; step `k` is value
/// `3 + k`).
fn chain_graph(chain: &[Step], n: usize) -> Graph {
    let value = |k: usize| {
        if k < 3 {
            ValueId::Input(k)
        } else {
            ValueId::Node {
                node: k - 3,
                output: 0,
            }
        }
    };
    let nodes = chain
        .iter()
        .map(|&step| {
            let (spec, args) = match step {
                Step::Binary(func, a, b) => (
                    OpSpec::Binary(BinarySpec {
                        func,
                        dtype: F32,
                        lhs: vec![n],
                        rhs: vec![n],
                        out_dtype: None,
                    }),
                    vec![a, b],
                ),
                Step::Scalar(func, x, scalar) => (
                    OpSpec::Scalar(ScalarSpec {
                        func,
                        dtype: F32,
                        shape: vec![n],
                        scalar,
                        reversed: false,
                        out_dtype: None,
                    }),
                    vec![x],
                ),
                Step::Unary(func, x) => (
                    OpSpec::Unary(UnarySpec {
                        func,
                        dtype: F32,
                        shape: vec![n],
                    }),
                    vec![x],
                ),
            };
            Node {
                spec,
                inputs: args.into_iter().map(value).collect(),
            }
        })
        .collect();
    Graph {
        inputs: ["x", "w", "b"]
            .iter()
            .map(|name| TensorSig::new(name, F32, vec![n]))
            .collect(),
        nodes,
        outputs: vec![value(3 + chain.len() - 1)],
    }
}

/// Bytes the node-by-node chain moves: each step reads its operands and writes one.
fn chain_bytes(chain: &[Step], n: usize) -> f64 {
    let streams: usize = chain
        .iter()
        .map(|s| match s {
            Step::Binary(..) => 3,
            Step::Scalar(..) | Step::Unary(..) => 2,
        })
        .sum();
    (streams * n * 4) as f64
}

fn bench(name: &str, chain_name: &str, chain: &[Step], rt: &Runtime, n: usize) {
    let inputs: Vec<Tensor> = (0..3)
        .map(|k| rt.tensor(&[n], &random(n, k + 1)).expect("upload"))
        .collect();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let graph = chain_graph(chain, n);
    let fused = rt.compile_graph(&graph).expect("fused plan");
    let nodes = rt
        .compile_graph_with(&graph, false)
        .expect("node-by-node plan");
    assert_eq!(
        (fused.graph().nodes.len(), nodes.graph().nodes.len()),
        (1, chain.len()),
        "one kernel fused, one per node unfused"
    );
    let run = |plan: &CompiledGraph| plan.run(rt, &refs).expect("run").remove(0);
    let (a, b) = (
        run(&fused).to_vec::<f32>().expect("read"),
        run(&nodes).to_vec::<f32>().expect("read"),
    );
    assert_eq!(
        a, b,
        "the fused chain equals the chain node by node (f32: no rounding between)"
    );
    let runs = 7;
    let t_fused = time(rt, runs, || {
        run(&fused);
    });
    let t_chain = time(rt, runs, || {
        run(&nodes);
    });
    // Fused: reads x, w, b once and writes once.
    let (fused_bytes, unfused_bytes) = ((4 * n * 4) as f64, chain_bytes(chain, n));
    println!(
        "| {name} | {chain_name} | {:.2} ms | {:.2} ms | {:.1}x | {:.0} MB vs {:.0} MB ({:.1}x less) |",
        t_fused.as_secs_f64() * 1e3,
        t_chain.as_secs_f64() * 1e3,
        t_chain.as_secs_f64() / t_fused.as_secs_f64(),
        fused_bytes / 1e6,
        unfused_bytes / 1e6,
        unfused_bytes / fused_bytes,
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let n = if quick { 1 << 20 } else { 16 << 20 };
    println!(
        "Fusion: a chain of 8 elementwise ops on {}M f32 elements",
        n >> 20
    );
    println!("| device | chain | fused | node by node | speed-up | memory moved |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let chains: [(&str, &[Step]); 2] = [
        ("with sigmoid", &SIGMOID_CHAIN),
        ("arithmetic", &ARITHMETIC_CHAIN),
    ];
    // Both CPU tiers (`KERNELC_CPU_TIER`): Cranelift's 128-bit code and LLVM's for
    // the host's full vector width.
    for tier in [CpuTier::Cranelift, CpuTier::Llvm] {
        let cpu = Runtime::with_device(Device::cpu_with_tier(tier), DiskCache::off());
        for (chain_name, chain) in chains {
            bench(&cpu.device_name(), chain_name, chain, &cpu, n);
        }
    }
    match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(cuda) => {
            let rt = Runtime::with_device(cuda, DiskCache::off());
            for (chain_name, chain) in chains {
                bench(&rt.device_name(), chain_name, chain, &rt, n);
            }
        }
        Err(e) => println!("CUDA: NOT RUN ({e})"),
    }
}
