//! An ONNX `GraphProto` as a kernelc [`Graph`] (whole-graph compilation's front end).
//!
//! Each value is either known on the host (an initializer, a `Constant`, a shape, and
//! whatever is computed from those alone: exporters' int64 shape arithmetic) or
//! computed on the device. A node whose inputs are all known on the host and small
//! is folded: its catalogue op's f64 reference computes it here, so `Shape → Gather →
//! Concat → Reshape` chains become the constant shapes they are. Every other node
//! becomes catalogue ops of the graph; a host value one of them reads becomes a
//! constant input of the graph (uploaded once per compiled plan). Reshapes, squeezes,
//! flattens and identities make no node: a value is read under any shape of its
//! element count.
//!
//! Errors name the node (its index, name and op type) and what was wrong; nothing
//! runs for a graph that does not import.

use std::collections::HashMap;

use bb_ir::proto::onnx::{AttributeProto, GraphProto, NodeProto, TensorProto};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::ScalarType;
use kernelc_kernels::graph::{Graph, Node, ValueId};
use kernelc_kernels::spec::{OpSpec, TensorSig};

use crate::{onnx, BbError};

/// Host values up to this many elements are folded when every input of a node is one.
const FOLD_LIMIT: usize = 1 << 16;

/// A tensor known at import time.
#[derive(Clone, Debug)]
pub(crate) struct HostTensor {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    /// The elements (exact for every dtype but i64 past 2^53).
    pub values: Vec<f64>,
    /// The exact device image, where it came from the model (initializers,
    /// constants).
    pub bytes: Option<Vec<u8>>,
}

impl HostTensor {
    pub(crate) fn from_proto(t: &TensorProto) -> Result<HostTensor, BbError> {
        let (dtype, shape, bytes) = onnx::decode(t)?;
        let values = HostBuffer::from_bytes(dtype, &bytes).to_f64();
        Ok(HostTensor {
            dtype,
            shape,
            values,
            bytes: Some(bytes),
        })
    }

    /// A host tensor of `values` (converted to `dtype` as a store would).
    pub(crate) fn new(dtype: ScalarType, shape: Vec<usize>, values: Vec<f64>) -> HostTensor {
        let values = values
            .into_iter()
            .map(|v| kernelc_kernels::reference::round_to(dtype, v))
            .collect();
        HostTensor {
            dtype,
            shape,
            values,
            bytes: None,
        }
    }

    /// The elements as integers (shapes, axes, indices).
    pub(crate) fn ints(&self) -> Vec<i64> {
        self.values.iter().map(|&v| v as i64).collect()
    }
}

/// A value of the ONNX graph during import.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Host(HostTensor),
    /// A value of the kernelc graph, read under `shape`.
    Device {
        id: ValueId,
        dtype: ScalarType,
        shape: Vec<usize>,
    },
}

impl Value {
    pub fn dtype(&self) -> ScalarType {
        match self {
            Value::Host(h) => h.dtype,
            Value::Device { dtype, .. } => *dtype,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Value::Host(h) => &h.shape,
            Value::Device { shape, .. } => shape,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// The same elements under `shape` (as many of them).
    pub fn reshaped(&self, shape: Vec<usize>) -> Value {
        match self {
            Value::Host(h) => Value::Host(HostTensor { shape, ..h.clone() }),
            Value::Device { id, dtype, .. } => Value::Device {
                id: *id,
                dtype: *dtype,
                shape,
            },
        }
    }
}

/// An imported graph: the kernelc graph, whose inputs are the ONNX graph's runtime
/// inputs (`inputs`, in order) followed by `constants`; its outputs in the ONNX
/// graph's order, each with its ONNX name and shape.
#[derive(Debug)]
pub(crate) struct Imported {
    pub graph: Graph,
    pub inputs: Vec<String>,
    pub constants: Vec<HostTensor>,
    pub outputs: Vec<(String, Vec<usize>)>,
}

/// One node being translated: where errors point.
pub(crate) struct At<'n> {
    pub index: usize,
    pub node: &'n NodeProto,
}

impl At<'_> {
    /// An error about this node.
    pub fn invalid(&self, why: impl std::fmt::Display) -> BbError {
        BbError::Node {
            index: self.index,
            name: self.node.name.clone(),
            op_type: self.node.op_type.clone(),
            why: why.to_string(),
        }
    }

    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| a.f)
    }

    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    pub fn string(&self, name: &str) -> Option<String> {
        self.attr(name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }
}

/// The import in progress.
pub(crate) struct Importer {
    inputs: Vec<TensorSig>,
    nodes: Vec<Node>,
    constants: Vec<HostTensor>,
    values: HashMap<String, Value>,
}

impl Importer {
    /// `graph` with its runtime inputs of these dtypes and shapes (by name).
    pub fn import(
        graph: &GraphProto,
        given: &[(String, ScalarType, Vec<usize>)],
    ) -> Result<Imported, BbError> {
        let mut im = Importer {
            inputs: Vec::new(),
            nodes: Vec::new(),
            constants: Vec::new(),
            values: HashMap::new(),
        };
        for (i, (name, dtype, shape)) in given.iter().enumerate() {
            im.inputs.push(TensorSig::new(name, *dtype, shape.clone()));
            im.values.insert(
                name.clone(),
                Value::Device {
                    id: ValueId::Input(i),
                    dtype: *dtype,
                    shape: shape.clone(),
                },
            );
        }
        for init in &graph.initializer {
            // A runtime input of the same name overrides its default (ONNX).
            if !im.values.contains_key(&init.name) {
                let host = HostTensor::from_proto(init).map_err(|e| BbError::Graph {
                    why: format!("initializer `{}`: {e}", init.name),
                })?;
                im.values.insert(init.name.clone(), Value::Host(host));
            }
        }
        for input in &graph.input {
            if !im.values.contains_key(&input.name) {
                return Err(BbError::Graph {
                    why: format!("graph input `{}` was not given", input.name),
                });
            }
        }
        for (index, node) in graph.node.iter().enumerate() {
            let at = At { index, node };
            let args = node
                .input
                .iter()
                .map(|name| {
                    if name.is_empty() {
                        return Ok(None); // an optional input left out
                    }
                    im.values.get(name).cloned().map(Some).ok_or_else(|| {
                        at.invalid(format!(
                            "reads `{name}`, which no earlier node, input or initializer gives (a cycle, or a missing value)"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let outs = crate::import_ops::translate(&mut im, &at, &args)?;
            if outs.len() < node.output.iter().filter(|o| !o.is_empty()).count() {
                return Err(at.invalid(format!(
                    "declares {} outputs; kernelc gives {}",
                    node.output.len(),
                    outs.len()
                )));
            }
            for (name, value) in node.output.iter().zip(outs) {
                if !name.is_empty() {
                    im.values.insert(name.clone(), value);
                }
            }
        }
        let mut outputs = Vec::new();
        let mut graph_outputs = Vec::new();
        for out in &graph.output {
            let value = im
                .values
                .get(&out.name)
                .cloned()
                .ok_or_else(|| BbError::Graph {
                    why: format!("graph output `{}` is not a value of the graph", out.name),
                })?;
            let id = im.device(&value);
            graph_outputs.push(id);
            outputs.push((out.name.clone(), value.shape().to_vec()));
        }
        let graph = Graph {
            inputs: im.inputs,
            nodes: im.nodes,
            outputs: graph_outputs,
        };
        graph
            .validate()
            .map_err(|e| BbError::Graph { why: e.to_string() })?;
        Ok(Imported {
            graph,
            inputs: given.iter().map(|g| g.0.clone()).collect(),
            constants: im.constants,
            outputs,
        })
    }

    /// `value` on the device: its graph value (a host one becomes a constant input,
    /// one per distinct tensor).
    fn device(&mut self, value: &Value) -> ValueId {
        match value {
            Value::Device { id, .. } => *id,
            Value::Host(h) => {
                let first = self.inputs.len() - self.constants.len();
                if let Some(i) = self.constants.iter().position(|c| same(c, h)) {
                    return ValueId::Input(first + i);
                }
                let id = ValueId::Input(self.inputs.len());
                self.inputs.push(TensorSig::new(
                    &format!("constant {}", self.constants.len()),
                    h.dtype,
                    h.shape.clone(),
                ));
                self.constants.push(h.clone());
                id
            }
        }
    }

    /// `spec` applied to `args` (in its input order): folded on the host where every
    /// argument is a small host value, else a node of the graph. Its outputs.
    pub fn op(
        &mut self,
        at: &At<'_>,
        spec: impl Into<OpSpec>,
        args: &[&Value],
    ) -> Result<Vec<Value>, BbError> {
        let spec = spec.into();
        spec.validate().map_err(|e| at.invalid(e))?;
        for (want, have) in spec.inputs().iter().zip(args) {
            if want.dtype != have.dtype() || want.numel() != have.numel() {
                return Err(at.invalid(format!(
                    "{}'s `{}` must be {} {:?}; the node gives {} {:?}",
                    spec.name(),
                    want.name,
                    want.dtype,
                    want.shape,
                    have.dtype(),
                    have.shape()
                )));
            }
        }
        // Validated above: element counts do not overflow.
        let small = args.iter().map(|a| a.numel()).sum::<usize>() <= FOLD_LIMIT
            && spec.outputs().iter().map(|o| o.numel()).sum::<usize>() <= FOLD_LIMIT;
        let hosts: Option<Vec<&HostTensor>> = args
            .iter()
            .map(|a| match a {
                Value::Host(h) => Some(h),
                Value::Device { .. } => None,
            })
            .collect();
        let sigs = spec.outputs();
        if let (Some(hosts), true) = (hosts, small) {
            let inputs: Vec<&[f64]> = hosts.iter().map(|h| h.values.as_slice()).collect();
            let outs = kernelc_kernels::reference(&spec, &inputs).map_err(|e| at.invalid(e))?;
            return Ok(outs
                .into_iter()
                .zip(sigs)
                .map(|(values, sig)| Value::Host(HostTensor::new(sig.dtype, sig.shape, values)))
                .collect());
        }
        let inputs = args.iter().map(|a| self.device(a)).collect();
        let node = self.nodes.len();
        self.nodes.push(Node { spec, inputs });
        Ok(sigs
            .into_iter()
            .enumerate()
            .map(|(output, sig)| Value::Device {
                id: ValueId::Node { node, output },
                dtype: sig.dtype,
                shape: sig.shape,
            })
            .collect())
    }

    /// [`Importer::op`] of a one-output op.
    pub fn op1(
        &mut self,
        at: &At<'_>,
        spec: impl Into<OpSpec>,
        args: &[&Value],
    ) -> Result<Value, BbError> {
        self.op(at, spec, args)?
            .into_iter()
            .next()
            .ok_or_else(|| at.invalid("an op without outputs"))
    }
}

/// Whether two host tensors are the same, bit for bit.
fn same(a: &HostTensor, b: &HostTensor) -> bool {
    a.dtype == b.dtype
        && a.shape == b.shape
        && a.bytes == b.bytes
        && a.values.len() == b.values.len()
        && a.values
            .iter()
            .zip(&b.values)
            .all(|(x, y)| x.to_bits() == y.to_bits())
}
