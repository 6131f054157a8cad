//! Graphs on the runtime ([`kernelc_kernels::graph`]): [`Runtime::compile_graph`]
//! validates a graph, fuses its elementwise chains and compiles every kernel once;
//! [`CompiledGraph::run`] then runs it on tensors any number of times, compiling
//! nothing, each intermediate value dropped (its buffer back in the pool) after its
//! last reader.

use kernelc_kernels::graph::{fuse_elementwise, Graph, GraphError, ValueId};

use crate::memory::FULL_ALIGNMENT;
use crate::{Result, Runtime, RuntimeError, Tensor};

/// A validated, fused graph whose kernels are compiled for one runtime's device.
#[derive(Clone, Debug)]
pub struct CompiledGraph {
    graph: Graph,
    /// Per node: the nodes whose values are last read by it (dropped after it runs).
    frees: Vec<Vec<usize>>,
}

impl Runtime {
    /// `graph` validated, its elementwise chains fused ([`fuse_elementwise`]) and every
    /// kernel of every node compiled (cached as any op's kernels are).
    pub fn compile_graph(&self, graph: &Graph) -> Result<CompiledGraph> {
        let graph = fuse_elementwise(graph)?;
        for node in &graph.nodes {
            // What `run` prepares for tensors (whole, aligned buffers).
            self.prepared(&node.spec, FULL_ALIGNMENT, || Ok(()))?;
        }
        let mut last_reader: Vec<Option<usize>> = vec![None; graph.nodes.len()];
        for (k, node) in graph.nodes.iter().enumerate() {
            for &v in &node.inputs {
                if let ValueId::Node { node: p, .. } = v {
                    last_reader[p] = Some(k);
                }
            }
        }
        let returned = |p: usize| {
            graph
                .outputs
                .iter()
                .any(|&v| matches!(v, ValueId::Node { node, .. } if node == p))
        };
        let mut frees = vec![Vec::new(); graph.nodes.len()];
        for (p, reader) in last_reader.iter().enumerate() {
            if let (Some(k), false) = (*reader, returned(p)) {
                frees[k].push(p);
            }
        }
        Ok(CompiledGraph { graph, frees })
    }
}

impl CompiledGraph {
    /// The graph as it runs (fused).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph's outputs for `inputs` (in the graph's input order, each of its
    /// input's dtype and shape), on `rt`, the runtime that compiled it.
    pub fn run(&self, rt: &Runtime, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let graph = &self.graph;
        if inputs.len() != graph.inputs.len() {
            return Err(GraphError::InputData {
                expected: graph.inputs.len(),
                found: inputs.len(),
            }
            .into());
        }
        for (i, (sig, t)) in graph.inputs.iter().zip(inputs).enumerate() {
            if t.dtype() != sig.dtype || t.shape() != sig.shape.as_slice() {
                return Err(RuntimeError::InputShape {
                    op: format!("graph input {i}"),
                    input: sig.name.clone(),
                    expected: sig.shape.clone(),
                    found: t.shape().to_vec(),
                });
            }
        }
        let mut values: Vec<Option<Vec<Tensor>>> = vec![None; graph.nodes.len()];
        let value = |values: &[Option<Vec<Tensor>>], v: ValueId| -> Result<Tensor> {
            let t = match v {
                ValueId::Input(i) => inputs.get(i).map(|t| (*t).clone()),
                ValueId::Node { node, output } => values
                    .get(node)
                    .and_then(Option::as_ref)
                    .and_then(|outs| outs.get(output).cloned()),
            };
            t.ok_or_else(|| GraphError::Internal("a value read after it was dropped").into())
        };
        for (k, node) in graph.nodes.iter().enumerate() {
            let args = node
                .inputs
                .iter()
                .map(|&v| value(&values, v))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = args.iter().collect();
            values[k] = Some(rt.run(&node.spec, &refs)?);
            for &p in &self.frees[k] {
                values[p] = None;
            }
        }
        graph.outputs.iter().map(|&v| value(&values, v)).collect()
    }
}
