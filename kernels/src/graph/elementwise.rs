//! [`fuse_elementwise`]: chains of elementwise nodes into one [`FusedSpec`] node.

use kernelc_ir::ScalarType;

use super::splice::{read_once, readers, splice, Replacement};
use super::{Graph, GraphError, Node, ValueId};
use crate::ops::{FusedNode, FusedSpec};
use crate::spec::OpSpec;

/// The dtype of a node `fused` takes: `unary`, `binary` or `scalar` with a result of
/// its own dtype.
pub(super) fn fusable(spec: &OpSpec) -> Option<ScalarType> {
    match spec {
        OpSpec::Unary(u) => Some(u.dtype),
        OpSpec::Binary(b) if b.out_dtype.is_none_or(|d| d == b.dtype) => Some(b.dtype),
        OpSpec::Scalar(s) if s.out_dtype.is_none_or(|d| d == s.dtype) => Some(s.dtype),
        _ => None,
    }
}

/// A [`fusable`] node as a [`FusedNode`] over its operands' places `at` in the fused
/// node list.
pub(super) fn as_fused(spec: &OpSpec, at: &[usize]) -> Option<FusedNode> {
    match spec {
        OpSpec::Unary(u) => Some(FusedNode::Unary {
            func: u.func,
            x: *at.first()?,
        }),
        OpSpec::Binary(b) => Some(FusedNode::Binary {
            func: b.func,
            a: *at.first()?,
            b: *at.get(1)?,
        }),
        OpSpec::Scalar(s) => Some(FusedNode::Scalar {
            func: s.func,
            x: *at.first()?,
            scalar: s.scalar,
            reversed: s.reversed,
        }),
        _ => None,
    }
}

/// `graph` with every chain of elementwise nodes (`unary`, `binary`, `scalar` of one
/// dtype) whose intermediate values have no other reader and are not returned merged
/// into one [`FusedSpec`] node. The result computes the same values (see the module
/// doc); it has as many outputs, in the same order.
pub fn fuse_elementwise(graph: &Graph) -> Result<Graph, GraphError> {
    graph.validate()?;
    let readers = readers(graph);
    let dtypes: Vec<Option<ScalarType>> = graph.nodes.iter().map(|n| fusable(&n.spec)).collect();
    // Union-find over nodes: `parent[k]` leads to the root naming k's group.
    let mut parent: Vec<usize> = (0..graph.nodes.len()).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for (k, node) in graph.nodes.iter().enumerate() {
        let Some(dtype) = dtypes[k] else {
            continue;
        };
        let shape = node.spec.outputs().first().map(|s| s.shape.clone());
        let wants = node.spec.inputs();
        for (&value, want) in node.inputs.iter().zip(&wants) {
            let ValueId::Node { node: p, output: 0 } = value else {
                continue;
            };
            // The producer's value lives only in registers: one reader (once), not
            // returned, same dtype, and produced and read in the shape this node
            // computes (not reshaped, not broadcast).
            let private = read_once(graph, &readers, value);
            let same_shape =
                graph.sig(value).map(|s| s.shape) == shape && Some(&want.shape) == shape.as_ref();
            if private && dtypes[p] == Some(dtype) && same_shape {
                let (from, to) = (root(&mut parent, p), root(&mut parent, k));
                parent[from] = to;
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
    for k in 0..graph.nodes.len() {
        let g = root(&mut parent, k);
        groups[g].push(k);
    }
    let mut removed = vec![false; graph.nodes.len()];
    let mut replacements = Vec::new();
    for members in groups.into_iter().filter(|g| g.len() > 1) {
        let last = *members
            .last()
            .ok_or(GraphError::Internal("an empty fused group"))?;
        let (spec, reads) = fused_group(graph, &members)?;
        for &m in &members {
            removed[m] = true;
        }
        replacements.push(Replacement {
            at: last,
            node: Node {
                spec: OpSpec::Fused(spec),
                inputs: reads,
            },
            gives: vec![(
                ValueId::Node {
                    node: last,
                    output: 0,
                },
                0,
            )],
        });
    }
    splice(graph, &removed, replacements)
}

/// The fused spec of a group and the outside values it reads, in input order (a
/// value read under two shapes is two inputs).
fn fused_group(graph: &Graph, members: &[usize]) -> Result<(FusedSpec, Vec<ValueId>), GraphError> {
    let mut reads: Vec<(ValueId, Vec<usize>)> = Vec::new();
    let mut fnodes: Vec<FusedNode> = Vec::new();
    // Place in `fnodes` of each member's value.
    let mut place: Vec<(usize, usize)> = Vec::new();
    let mut dtype = ScalarType::F32;
    for &m in members {
        let node = &graph.nodes[m];
        let wants = node.spec.inputs();
        let mut at = Vec::new();
        for (&v, want) in node.inputs.iter().zip(&wants) {
            let inner = match v {
                ValueId::Node { node: p, output: 0 } => {
                    place.iter().find(|e| e.0 == p).map(|e| e.1)
                }
                _ => None,
            };
            at.push(match inner {
                Some(i) => i,
                None => {
                    let read = (v, want.shape.clone());
                    let i = match reads.iter().position(|r| *r == read) {
                        Some(i) => i,
                        None => {
                            reads.push(read);
                            reads.len() - 1
                        }
                    };
                    fnodes.push(FusedNode::Input(i));
                    fnodes.len() - 1
                }
            });
        }
        let (d, fnode) =
            fusable(&node.spec)
                .zip(as_fused(&node.spec, &at))
                .ok_or(GraphError::Internal(
                    "a fused group holds a node fused cannot take",
                ))?;
        dtype = d;
        fnodes.push(fnode);
        place.push((m, fnodes.len() - 1));
    }
    let (values, shapes) = reads.into_iter().unzip();
    Ok((
        FusedSpec {
            dtype,
            inputs: shapes,
            nodes: fnodes,
        },
        values,
    ))
}
