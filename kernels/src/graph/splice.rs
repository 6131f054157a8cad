//! Rebuilding a graph with some nodes replaced: the one mechanism both fusion passes
//! use.

use std::collections::HashMap;

use super::{Graph, GraphError, Node, ValueId};

/// A node that takes the place of old node `at`. Its inputs name values of the old
/// graph (each defined before `at`); `gives[i] = (old, output)` says that old value
/// `old` is now its output `output`.
pub(super) struct Replacement {
    pub at: usize,
    pub node: Node,
    pub gives: Vec<(ValueId, usize)>,
}

/// `graph` without the `removed` nodes, with each replacement placed where its `at`
/// node was; every read of an old value goes to the node that now gives it.
pub(super) fn splice(
    graph: &Graph,
    removed: &[bool],
    replacements: Vec<Replacement>,
) -> Result<Graph, GraphError> {
    let mut at: HashMap<usize, Vec<Replacement>> = HashMap::new();
    for r in replacements {
        at.entry(r.at).or_default().push(r);
    }
    let mut new_value: HashMap<ValueId, ValueId> = HashMap::new();
    let remap = |v: ValueId, new_value: &HashMap<ValueId, ValueId>| match v {
        ValueId::Input(_) => Ok(v),
        ValueId::Node { .. } => new_value
            .get(&v)
            .copied()
            .ok_or(GraphError::Internal("a node reads a value not yet placed")),
    };
    let mut nodes: Vec<Node> = Vec::new();
    for (k, node) in graph.nodes.iter().enumerate() {
        for r in at.remove(&k).unwrap_or_default() {
            let inputs = r
                .node
                .inputs
                .iter()
                .map(|&v| remap(v, &new_value))
                .collect::<Result<Vec<_>, _>>()?;
            let index = nodes.len();
            for (old, output) in r.gives {
                new_value.insert(
                    old,
                    ValueId::Node {
                        node: index,
                        output,
                    },
                );
            }
            nodes.push(Node {
                spec: r.node.spec,
                inputs,
            });
        }
        if removed.get(k).copied().unwrap_or(false) {
            continue;
        }
        let inputs = node
            .inputs
            .iter()
            .map(|&v| remap(v, &new_value))
            .collect::<Result<Vec<_>, _>>()?;
        let index = nodes.len();
        for output in 0..node.spec.outputs().len() {
            new_value.insert(
                ValueId::Node { node: k, output },
                ValueId::Node {
                    node: index,
                    output,
                },
            );
        }
        nodes.push(Node {
            spec: node.spec.clone(),
            inputs,
        });
    }
    let outputs = graph
        .outputs
        .iter()
        .map(|&v| remap(v, &new_value).map_err(|_| GraphError::UnknownOutput { value: v }))
        .collect::<Result<Vec<_>, _>>()?;
    let spliced = Graph {
        inputs: graph.inputs.clone(),
        nodes,
        outputs,
    };
    spliced.validate()?;
    Ok(spliced)
}

/// How many times each value is read by a node (a node reading it twice counts twice).
pub(super) fn readers(graph: &Graph) -> HashMap<ValueId, usize> {
    let mut readers: HashMap<ValueId, usize> = HashMap::new();
    for &v in graph.nodes.iter().flat_map(|n| &n.inputs) {
        *readers.entry(v).or_default() += 1;
    }
    readers
}

/// Whether `value` is read by exactly one node and is not an output of the graph:
/// a value a rewrite may fold into its reader (nothing else sees it).
pub(super) fn read_once(graph: &Graph, readers: &HashMap<ValueId, usize>, value: ValueId) -> bool {
    readers.get(&value) == Some(&1) && !graph.outputs.contains(&value)
}

/// The node whose output 0 `value` is, where that value is [`read_once`]: a producer
/// its one reader may absorb.
pub(super) fn producer_read_once(
    graph: &Graph,
    readers: &HashMap<ValueId, usize>,
    value: ValueId,
) -> Option<usize> {
    match value {
        ValueId::Node { node, output: 0 } if read_once(graph, readers, value) => Some(node),
        ValueId::Node { .. } | ValueId::Input(_) => None,
    }
}

/// A rewrite found at one node: the old nodes it removes and the node replacing them.
pub(super) type Found = (Vec<usize>, Replacement);

/// The rewrite removing node `p` and node `k` after it: one node of `spec` reading
/// `inputs` takes `k`'s place and gives its value.
pub(super) fn pair_replaced(
    p: usize,
    k: usize,
    spec: crate::spec::OpSpec,
    inputs: Vec<ValueId>,
) -> Found {
    (
        vec![p, k],
        Replacement {
            at: k,
            node: Node { spec, inputs },
            gives: vec![(ValueId::Node { node: k, output: 0 }, 0)],
        },
    )
}

/// `graph` validated, then rewritten one `find` at a time (tried at each node `k`,
/// given the value readers) until none is found.
pub(super) fn rewrite_all(
    graph: &Graph,
    find: impl Fn(&Graph, &HashMap<ValueId, usize>, usize) -> Option<Found>,
) -> Result<Graph, GraphError> {
    graph.validate()?;
    let mut graph = graph.clone();
    'again: loop {
        let readers = readers(&graph);
        for k in 0..graph.nodes.len() {
            if let Some((removed, replacement)) = find(&graph, &readers, k) {
                let mut gone = vec![false; graph.nodes.len()];
                for r in removed {
                    gone[r] = true;
                }
                graph = splice(&graph, &gone, vec![replacement])?;
                continue 'again;
            }
        }
        return Ok(graph);
    }
}
