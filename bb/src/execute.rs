//! `Backend::execute` as whole-graph compilation: an ONNX graph is imported
//! (`import`), fused and compiled once per (graph, input dtypes and shapes) into a
//! plan kept by the backend; every later `execute` of the same graph on inputs of
//! the same signatures runs the plan, compiling nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bb_ir::proto::onnx::GraphProto;
use kernelc_ir::ScalarType;
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

impl KernelcBb {
    /// How many graph plans this backend has compiled (one per graph and input
    /// signatures).
    pub fn compiled_plans(&self) -> usize {
        self.plans.len()
    }

    /// The ops of `graph`'s fused plan for runtime inputs of these names, dtypes and
    /// shapes (what `execute` would run, in order; a plan of its own, not kept).
    pub fn fused_ops(
        &self,
        graph: &GraphProto,
        inputs: &[(&str, ScalarType, Vec<usize>)],
    ) -> Result<Vec<String>, BbError> {
        let signature: Signature = inputs
            .iter()
            .map(|(n, d, s)| (n.to_string(), *d, s.clone()))
            .collect();
        let imported = Importer::import(graph, &signature)?;
        let compiled = self
            .runtime()
            .compile_graph_with(&imported.graph, self.fuse)?;
        Ok(compiled
            .graph()
            .nodes
            .iter()
            .map(|n| n.spec.name())
            .collect())
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
            graph: *blake3::hash(&graph.encode_to_vec()).as_bytes(),
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
