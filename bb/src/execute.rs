//! `Backend::execute` as whole-graph compilation: an ONNX graph is imported
//! (`import`), fused and compiled once per (graph, input dtypes and shapes) into a
//! plan kept by the backend; every later `execute` of the same graph on inputs of
//! the same signatures runs the plan, compiling nothing.
//!
//! A plan is found by a hash of the graph: its nodes, inputs and outputs whole, each
//! initializer by its name, type, dims, payload length and its elements (up to
//! 65,536 of them; of a larger one 4,096 spread over it: hashing a model's weights
//! whole on every call would cost more than running it). A model whose weights are
//! changed in place, keeping their names and sizes, can meet its older plan: call
//! [`KernelcBb::forget_plans`] after such a change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bb_ir::proto::onnx::GraphProto;
use kernelc_ir::ScalarType;
use kernelc_kernels::graph::Graph;
use kernelc_runtime::{CompiledGraph, View};
use prost::Message;

use crate::import::Importer;
use crate::{BbError, BbTensor, KernelcBb};

/// A graph's runtime inputs: name, dtype, shape, in the graph's input order.
type Signature = Vec<(String, ScalarType, Vec<usize>)>;

/// What a plan is compiled for: the graph's encoding's hash and its inputs'
/// signatures.
#[derive(Clone, PartialEq, Eq, Hash)]
struct PlanKey {
    graph: [u8; 32],
    inputs: Signature,
}

/// A compiled graph and what running it needs.
pub(crate) struct Plan {
    compiled: CompiledGraph,
    /// The runtime inputs' names, in the compiled graph's input order.
    inputs: Vec<String>,
    /// The constant inputs that follow them, on the device.
    constants: Vec<View>,
    /// The outputs' names and shapes, in the compiled graph's output order.
    outputs: Vec<(String, Vec<usize>)>,
}

/// The plans of one backend.
#[derive(Default)]
pub(crate) struct Plans {
    plans: Mutex<HashMap<PlanKey, Arc<Plan>>>,
}

impl Plans {
    pub(crate) fn len(&self) -> usize {
        self.plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The hash a plan is found by (see the module doc).
fn graph_key(graph: &GraphProto) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for node in &graph.node {
        field(&node.encode_to_vec());
    }
    for value in graph.input.iter().chain(&graph.output) {
        field(&value.encode_to_vec());
    }
    for t in &graph.initializer {
        field(t.name.as_bytes());
        field(&t.data_type.to_le_bytes());
        for d in &t.dims {
            field(&d.to_le_bytes());
        }
        // Whichever payload field holds the data: its length and a sample.
        field(&sample(&t.raw_data, |b| vec![*b]));
        field(&sample(&t.float_data, |v| v.to_le_bytes().to_vec()));
        field(&sample(&t.double_data, |v| v.to_le_bytes().to_vec()));
        field(&sample(&t.int32_data, |v| v.to_le_bytes().to_vec()));
        field(&sample(&t.int64_data, |v| v.to_le_bytes().to_vec()));
        field(&sample(&t.uint64_data, |v| v.to_le_bytes().to_vec()));
        for e in &t.external_data {
            field(&e.encode_to_vec());
        }
    }
    *h.finalize().as_bytes()
}

/// The length of `data` and its elements: all of them up to 65,536, else 4,096
/// spread over it and the last.
fn sample<T>(data: &[T], bytes: impl Fn(&T) -> Vec<u8>) -> Vec<u8> {
    const WHOLE: usize = 1 << 16;
    const SAMPLES: usize = 1 << 12;
    let mut out = (data.len() as u64).to_le_bytes().to_vec();
    let step = if data.len() <= WHOLE {
        1
    } else {
        data.len().div_ceil(SAMPLES)
    };
    for v in data.iter().step_by(step) {
        out.extend(bytes(v));
    }
    if let Some(last) = data.last() {
        out.extend(bytes(last));
    }
    out
}

impl KernelcBb {
    /// Drops every kept plan: the next `execute` of each graph compiles it again
    /// (after a model's weights were changed in place; see the module doc).
    pub fn forget_plans(&self) {
        self.plans
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many graph plans this backend has compiled (one per graph and input
    /// signatures).
    pub fn compiled_plans(&self) -> usize {
        self.plans.len()
    }

    /// The graph `execute` would run for runtime inputs of these names, dtypes and
    /// shapes: `graph` imported and (unless [`KernelcBb::with_fusion`] turned it off)
    /// fused, one node per kernel, in launch order (a plan of its own, not kept).
    pub fn fused_graph(
        &self,
        graph: &GraphProto,
        inputs: &[(&str, ScalarType, Vec<usize>)],
    ) -> Result<Graph, BbError> {
        let signature: Signature = inputs
            .iter()
            .map(|(n, d, s)| (n.to_string(), *d, s.clone()))
            .collect();
        let imported = Importer::import(graph, &signature)?;
        let compiled = self
            .runtime()
            .compile_graph_with(&imported.graph, self.fuse)?;
        Ok(compiled.graph().clone())
    }

    /// The graph, compiled, for `inputs`: from the backend's plans, or compiled now.
    pub(crate) fn plan_for(
        &self,
        graph: &GraphProto,
        inputs: &HashMap<String, BbTensor>,
    ) -> Result<Arc<Plan>, BbError> {
        let initializers: Vec<&str> = graph.initializer.iter().map(|i| i.name.as_str()).collect();
        let mut signature = Signature::new();
        let mut take = |name: &str| -> Result<(), BbError> {
            if let Some(t) = inputs.get(name) {
                self.ours(t, "execute")?;
                if !signature.iter().any(|s| s.0 == name) {
                    signature.push((name.to_string(), t.dtype(), t.shape().to_vec()));
                }
            }
            Ok(())
        };
        for input in &graph.input {
            if !inputs.contains_key(&input.name) && !initializers.contains(&input.name.as_str()) {
                return Err(BbError::Graph {
                    why: format!("graph input `{}` was not given", input.name),
                });
            }
            take(&input.name)?;
        }
        // bb's own graphs may leave `input` empty: the given tensors their nodes
        // read are inputs too, in the order first read (unread ones are ignored, as
        // the contract's walker ignores them).
        for node in &graph.node {
            for name in &node.input {
                take(name)?;
            }
        }
        let key = PlanKey {
            graph: graph_key(graph),
            inputs: signature,
        };
        let cached = self
            .plans
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(plan) = cached {
            return Ok(plan);
        }
        let plan = Arc::new(self.compile(graph, &key.inputs)?);
        self.plans
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, plan.clone());
        Ok(plan)
    }

    fn compile(&self, graph: &GraphProto, signature: &Signature) -> Result<Plan, BbError> {
        let imported = Importer::import(graph, signature)?;
        let compiled = self
            .runtime()
            .compile_graph_with(&imported.graph, self.fuse)?;
        let constants = imported
            .constants
            .iter()
            .map(|c| {
                let view = self.alloc(c.dtype, &c.shape)?;
                match &c.bytes {
                    Some(bytes) => {
                        self.runtime()
                            .write_buffer(view.buffer(), view.offset(), bytes)?
                    }
                    None => self.runtime().write_view_f64(&view, &c.values)?,
                }
                Ok(view)
            })
            .collect::<Result<Vec<_>, BbError>>()?;
        Ok(Plan {
            compiled,
            inputs: imported.inputs,
            constants,
            outputs: imported.outputs,
        })
    }

    /// Runs `plan` on `inputs` (checked by [`KernelcBb::plan_for`]): the outputs by
    /// name, their launches queued.
    pub(crate) fn run_plan(
        &self,
        plan: &Plan,
        inputs: &HashMap<String, BbTensor>,
    ) -> Result<HashMap<String, BbTensor>, BbError> {
        let mut views: Vec<&View> = Vec::with_capacity(plan.inputs.len() + plan.constants.len());
        for name in &plan.inputs {
            let t = inputs.get(name).ok_or_else(|| BbError::Graph {
                why: format!("graph input `{name}` was not given"),
            })?;
            views.push(t.view());
        }
        views.extend(&plan.constants);
        let outs = plan.compiled.run_views(self.runtime(), &views)?;
        plan.outputs
            .iter()
            .zip(outs)
            .map(|((name, shape), view)| {
                let view = view.reshaped(shape)?;
                Ok((name.clone(), self.wrap_unchecked(view)))
            })
            .collect()
    }
}
