//! Graphs on the runtime ([`kernelc_kernels::graph`]): [`Runtime::compile_graph`]
//! validates a graph, fuses it ([`graph::fuse`]: permutes folded into GEMM operands,
//! epilogues into GEMMs and norms, attention patterns into attention nodes,
//! elementwise chains into single kernels, prologues into reductions and softmaxes,
//! epilogues onto reductions), compiles every kernel once and plans its
//! memory; [`CompiledGraph::run`] (tensors) and [`CompiledGraph::run_views`] (views)
//! then run it any number of times, compiling nothing.
//!
//! **Memory plan.** Every intermediate value lives in a slot: values whose lifetimes
//! (from the node writing them to their last reader) do not overlap share one, so a
//! chain of `n` ops needs two slots, not `n` buffers. A run allocates its slots once
//! (from the device's pool) and its outputs fresh; nothing is zeroed, since every
//! op writes all of its outputs. Launches run in queue order on one device, so a
//! slot written by a later node never races an earlier reader. A reshape is free: a
//! node reads a value under its own input shape (values are dense).

use kernelc_kernels::graph::{self, Graph, GraphError, ValueId};
use kernelc_kernels::spec::TensorSig;

use crate::memory::{Buffer, View, FULL_ALIGNMENT};
use crate::{Result, Runtime, RuntimeError, Tensor};

/// Where a node's output lives during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Home {
    /// Slot `i` of the run's scratch memory.
    Slot(usize),
    /// A buffer of its own: a value the graph returns.
    Fresh,
}

/// A validated, fused graph whose kernels are compiled for one runtime's device, with
/// its memory plan.
#[derive(Clone, Debug)]
pub struct CompiledGraph {
    graph: Graph,
    /// Per node, per output: where it lives.
    homes: Vec<Vec<Home>>,
    /// Bytes of each slot.
    slots: Vec<usize>,
}

impl Runtime {
    /// `graph` validated, fused ([`graph::fuse`]), every kernel of every node
    /// compiled (cached as any op's kernels are) and its memory planned.
    pub fn compile_graph(&self, graph: &Graph) -> Result<CompiledGraph> {
        self.compile_graph_with(graph, true)
    }

    /// [`Runtime::compile_graph`], fused or (`fuse` false) node by node: one kernel
    /// per node, the baseline fusion is measured against.
    pub fn compile_graph_with(&self, graph: &Graph, fuse: bool) -> Result<CompiledGraph> {
        let graph = if fuse {
            graph::fuse(graph, self.caps())?
        } else {
            graph.validate()?;
            graph.clone()
        };
        for node in &graph.nodes {
            // What `run` prepares for tensors (whole, aligned buffers).
            self.prepared(&node.spec, FULL_ALIGNMENT, || Ok(()))?;
        }
        let (homes, slots) = plan_memory(&graph)?;
        Ok(CompiledGraph {
            graph,
            homes,
            slots,
        })
    }
}

/// Per node output its home, and the slots' sizes: each intermediate takes the
/// smallest free slot that holds it (growing the largest free one, else a new slot),
/// freed after its last reader runs.
fn plan_memory(graph: &Graph) -> Result<(Vec<Vec<Home>>, Vec<usize>)> {
    let mut last_read: Vec<Vec<usize>> = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(k, n)| vec![k; n.spec.outputs().len()])
        .collect();
    for (k, node) in graph.nodes.iter().enumerate() {
        for &v in &node.inputs {
            if let ValueId::Node { node, output } = v {
                let slot = last_read
                    .get_mut(node)
                    .and_then(|outs| outs.get_mut(output))
                    .ok_or(GraphError::Internal(
                        "a read of a value that does not exist",
                    ))?;
                *slot = k;
            }
        }
    }
    let mut homes: Vec<Vec<Home>> = Vec::with_capacity(graph.nodes.len());
    let mut slots: Vec<usize> = Vec::new();
    // Slots free for the next node, and the slots to free after node k.
    let mut free: Vec<usize> = Vec::new();
    let mut release: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
    for (k, node) in graph.nodes.iter().enumerate() {
        let mut outs = Vec::new();
        for (output, sig) in node.spec.outputs().iter().enumerate() {
            let value = ValueId::Node { node: k, output };
            if graph.outputs.contains(&value) {
                outs.push(Home::Fresh);
                continue;
            }
            let bytes = byte_len(sig)?;
            let fitting = free
                .iter()
                .enumerate()
                .filter(|(_, &s)| slots[s] >= bytes)
                .min_by_key(|(_, &s)| slots[s])
                .map(|(i, _)| i);
            let largest = free
                .iter()
                .enumerate()
                .max_by_key(|(_, &s)| slots[s])
                .map(|(i, _)| i);
            let slot = match fitting.or(largest) {
                Some(i) => free.swap_remove(i),
                None => {
                    slots.push(0);
                    slots.len() - 1
                }
            };
            slots[slot] = slots[slot].max(bytes);
            release[last_read[k][output]].push(slot);
            outs.push(Home::Slot(slot));
        }
        homes.push(outs);
        free.append(&mut release[k]);
    }
    Ok((homes, slots))
}

fn byte_len(sig: &TensorSig) -> Result<usize> {
    sig.numel()
        .checked_mul(sig.dtype.size_bytes() as usize)
        .ok_or_else(|| RuntimeError::BadArgument(format!("{} overflows a size", sig.name)))
}

impl CompiledGraph {
    /// The graph as it runs (fused).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// How many scratch slots a run allocates and their total bytes (the memory plan).
    pub fn scratch(&self) -> (usize, usize) {
        (self.slots.len(), self.slots.iter().sum())
    }

    /// The graph's outputs for `inputs` (in the graph's input order, each of its
    /// input's dtype and shape), on `rt`, the runtime that compiled it.
    pub fn run(&self, rt: &Runtime, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        for (i, (sig, t)) in self.graph.inputs.iter().zip(inputs).enumerate() {
            if t.dtype() != sig.dtype || t.shape() != sig.shape.as_slice() {
                return Err(RuntimeError::InputShape {
                    op: format!("graph input {i}"),
                    input: sig.name.clone(),
                    expected: sig.shape.clone(),
                    found: t.shape().to_vec(),
                });
            }
        }
        let views = inputs
            .iter()
            .map(|t| {
                let buffer = Buffer {
                    storage: t.storage.clone(),
                };
                View::new(&buffer, 0, t.dtype(), t.shape())
            })
            .collect::<Result<Vec<_>>>()?;
        let outputs = self.run_views(rt, &views.iter().collect::<Vec<_>>())?;
        Ok(outputs
            .into_iter()
            .map(|v| Tensor {
                shape: v.shape().to_vec(),
                dtype: v.dtype(),
                storage: v.buffer().storage.clone(),
            })
            .collect())
    }

    /// [`CompiledGraph::run`] on dense views (each of its input's dtype and element
    /// count): the outputs are views of fresh buffers, or the input view a graph
    /// returns as it is. Errors before anything is enqueued for inputs that do not
    /// match.
    pub fn run_views(&self, rt: &Runtime, inputs: &[&View]) -> Result<Vec<View>> {
        let graph = &self.graph;
        if inputs.len() != graph.inputs.len() {
            return Err(GraphError::InputData {
                expected: graph.inputs.len(),
                found: inputs.len(),
            }
            .into());
        }
        for (i, (sig, v)) in graph.inputs.iter().zip(inputs).enumerate() {
            if v.dtype() != sig.dtype || v.numel() != sig.numel() || !v.is_dense() {
                return Err(RuntimeError::InputShape {
                    op: format!("graph input {i} ({})", sig.dtype),
                    input: sig.name.clone(),
                    expected: sig.shape.clone(),
                    found: v.shape().to_vec(),
                });
            }
        }
        let slots = self
            .slots
            .iter()
            .map(|&bytes| rt.alloc_uncleared(bytes))
            .collect::<Result<Vec<_>>>()?;
        let mut values: Vec<Vec<View>> = Vec::with_capacity(graph.nodes.len());
        let value = |values: &[Vec<View>], v: ValueId| -> Result<View> {
            let found = match v {
                ValueId::Input(i) => inputs.get(i).map(|v| (*v).clone()),
                ValueId::Node { node, output } => {
                    values.get(node).and_then(|outs| outs.get(output)).cloned()
                }
            };
            found.ok_or_else(|| GraphError::Internal("a read of a value not yet made").into())
        };
        for (k, node) in graph.nodes.iter().enumerate() {
            let args = node
                .inputs
                .iter()
                .zip(node.spec.inputs())
                .map(|(&v, sig)| value(&values, v)?.reshaped(&sig.shape))
                .collect::<Result<Vec<_>>>()?;
            let outs = node
                .spec
                .outputs()
                .iter()
                .zip(&self.homes[k])
                .map(|(sig, home)| match *home {
                    Home::Slot(s) => View::new(&slots[s], 0, sig.dtype, &sig.shape),
                    Home::Fresh => View::new(
                        &rt.alloc_uncleared(byte_len(sig)?)?,
                        0,
                        sig.dtype,
                        &sig.shape,
                    ),
                })
                .collect::<Result<Vec<_>>>()?;
            rt.run_into(
                &node.spec,
                &args.iter().collect::<Vec<_>>(),
                &outs.iter().collect::<Vec<_>>(),
            )?;
            values.push(outs);
        }
        graph.outputs.iter().map(|&v| value(&values, v)).collect()
    }
}
