//! A transformer block as an ONNX graph (as PyTorch exports it) through kernelc's
//! `bb::Backend::execute`: compiled and fused on the first call, run from the kept
//! plan after. `KERNELC_DEVICE=cpu|wgpu|cuda` picks the device.
//!
//! `cargo run -p kernelc-bb --example transformer`

use bb_runtime::contracts::backend::{Backend, BackendAttrs};
use kernelc_bb::models::{self, TransformerDims};
use kernelc_bb::{BbError, BbTensor, KernelcBb};
use kernelc_ir::ScalarType;
use kernelc_runtime::DeviceChoice;
use std::collections::HashMap;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = KernelcBb::new(DeviceChoice::from_env()?)?;
    let dims = TransformerDims {
        batch: 2,
        seq: 64,
        dim: 128,
        heads: 4,
    };
    let model = models::transformer_block(dims);
    let (name, shape) = &model.input;
    let x = backend.tensor(
        ScalarType::F32,
        shape,
        &models::data(1, shape.iter().product()),
    )?;
    let run = |x: &BbTensor| -> Result<BbTensor, BbError> {
        let inputs = HashMap::from([(name.clone(), x.clone())]);
        let attrs = BackendAttrs {
            current_node_attributes: &[],
            current_node_metadata: &[],
        };
        let mut outputs = backend.execute(&model.graph, inputs, attrs)?;
        Ok(outputs.remove("y").expect("the graph's output"))
    };
    for call in ["first (compiles)", "second (kept plan)"] {
        let t = Instant::now();
        let y = run(&x)?;
        let values = y.to_f64()?;
        println!(
            "{call}: y {:?}, y[0..4] = {:.4?}, {:.1} ms",
            y.shape(),
            &values[..4],
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let sig = [(name.as_str(), ScalarType::F32, shape.clone())];
    let plan = backend.fused_graph(&model.graph, &sig)?;
    let ops: Vec<String> = plan.nodes.iter().map(|n| n.spec.name()).collect();
    println!(
        "{} ONNX nodes ran as {} kernels on {}: {}",
        model.graph.node.len(),
        ops.len(),
        backend.runtime().device_name(),
        ops.join(", ")
    );
    Ok(())
}
