//! Fusion pays on a model: the transformer block of `models::transformer_block` (an
//! ONNX graph as PyTorch exports it) through `Backend::execute`, its fused plan
//! against the same graph node by node (`KernelcBb::with_fusion(false)`), on the
//! same device in the same run: the CPU always (a small block), CUDA too where a
//! CUDA device is present (GPT-2-small sized: batch 8, 512 positions, 768 wide, 12
//! heads). `bench/gpu/torch_transformer.py` times the same block in torch eager and
//! `torch.compile` on the GPU machine.
//!
//! `cargo bench -p kernelc-bb --bench transformer` (add `-- quick` for smaller
//! blocks, `-- profile` to also time each kernel of the fused plan alone). Both plans
//! are checked equal before timing.

use bb_runtime::contracts::backend::{Backend, BackendAttrs};
use kernelc_bb::models::{self, TransformerDims};
use kernelc_bb::{BbTensor, KernelcBb};
use kernelc_ir::ScalarType;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, DeviceChoice, Runtime};
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn execute(b: &KernelcBb, model: &models::Model, x: &BbTensor) -> BbTensor {
    let inputs: HashMap<String, BbTensor> = [(model.input.0.clone(), x.clone())].into();
    let attrs = BackendAttrs {
        current_node_attributes: &[],
        current_node_metadata: &[],
    };
    let mut out = b.execute(&model.graph, inputs, attrs).expect("execute");
    out.remove("y").expect("the output y")
}

/// Median wall time of `runs` executes after a warm-up, each synchronised.
fn time(b: &KernelcBb, runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    b.runtime().synchronize().expect("synchronize");
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            b.runtime().synchronize().expect("synchronize");
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// With `profiling`, each kernel of the fused plan is then timed alone.
fn bench(device: &str, make: &dyn Fn() -> Runtime, dims: TransformerDims, profiling: bool) {
    let model = models::transformer_block(dims);
    let fused = KernelcBb::with_runtime(make());
    let nodes = KernelcBb::with_runtime(make()).with_fusion(false);
    let n = dims.batch * dims.seq * dims.dim;
    let xs = models::data(7, n);
    let shape = [dims.batch, dims.seq, dims.dim];
    let x_fused = fused.tensor(ScalarType::F32, &shape, &xs).expect("upload");
    let x_nodes = nodes.tensor(ScalarType::F32, &shape, &xs).expect("upload");
    let a = execute(&fused, &model, &x_fused).to_f64().expect("read");
    let b = execute(&nodes, &model, &x_nodes).to_f64().expect("read");
    let worst = a
        .iter()
        .zip(&b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-3, "fused and node-by-node differ by {worst}");
    let sig = [("x", ScalarType::F32, shape.to_vec())];
    let count = |b: &KernelcBb| b.fused_graph(&model.graph, &sig).expect("plan").nodes.len();
    let kernels = (count(&fused), count(&nodes));
    let runs = 9;
    let t_fused = time(&fused, runs, || {
        execute(&fused, &model, &x_fused);
    });
    let t_nodes = time(&nodes, runs, || {
        execute(&nodes, &model, &x_nodes);
    });
    println!(
        "| {device} | {}×{}×{}, {} heads | {:.3} ms ({} kernels) | {:.3} ms ({} kernels) | {:.2}x |",
        dims.batch,
        dims.seq,
        dims.dim,
        dims.heads,
        t_fused.as_secs_f64() * 1e3,
        kernels.0,
        t_nodes.as_secs_f64() * 1e3,
        kernels.1,
        t_nodes.as_secs_f64() / t_fused.as_secs_f64(),
    );
    if profiling {
        profile(&fused, &model, &shape);
    }
}

/// Each kernel of the fused plan alone (random inputs, each launch synchronised):
/// where the block's time goes.
fn profile(b: &KernelcBb, model: &models::Model, shape: &[usize]) {
    let sig = [("x", ScalarType::F32, shape.to_vec())];
    let graph = b.fused_graph(&model.graph, &sig).expect("plan");
    let rt = b.runtime();
    for node in &graph.nodes {
        let inputs: Vec<kernelc_runtime::Tensor> = node
            .spec
            .inputs()
            .iter()
            .map(|s| {
                let v: Vec<f64> = models::data(3, s.numel());
                let t = rt.tensor(&s.shape, &v.iter().map(|&x| x as f32).collect::<Vec<_>>());
                t.expect("upload")
            })
            .collect();
        let refs: Vec<&kernelc_runtime::Tensor> = inputs.iter().collect();
        let mut samples: Vec<Duration> = (0..5)
            .map(|_| {
                rt.synchronize().expect("sync");
                let t = Instant::now();
                rt.run(&node.spec, &refs).expect("run");
                rt.synchronize().expect("sync");
                t.elapsed()
            })
            .collect();
        samples.sort();
        println!(
            "  {:>9.3} ms  {}",
            samples[2].as_secs_f64() * 1e3,
            node.spec.name()
        );
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let profiling = std::env::args().any(|a| a == "profile");
    println!("Transformer block (ONNX graph through bb's execute): fused plan vs node by node");
    println!("| device | batch×seq×dim | fused | node by node | speed-up |");
    println!("| --- | --- | --- | --- | --- |");
    let cpu_dims = TransformerDims {
        batch: 1,
        seq: if quick { 32 } else { 128 },
        dim: if quick { 64 } else { 256 },
        heads: 4,
    };
    let cpu = || Runtime::with_device(Device::cpu(), DiskCache::off());
    bench(&cpu().device_name(), &cpu, cpu_dims, profiling);
    match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(cuda) => {
            let name = Runtime::with_device(cuda, DiskCache::off()).device_name();
            let make = || {
                let d = Device::open(DeviceChoice::Cuda { ordinal: 0 }).expect("cuda");
                Runtime::with_device(d, DiskCache::off())
            };
            let dims = TransformerDims {
                batch: if quick { 1 } else { 8 },
                seq: if quick { 64 } else { 512 },
                dim: 768,
                heads: 12,
            };
            bench(&name, &make, dims, profiling);
        }
        Err(e) => println!("CUDA: NOT RUN ({e})"),
    }
}
