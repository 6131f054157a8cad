//! The result of lowering: kernels, their grids, and what each parameter binds to.

use kernelc_ir::{Kernel, Scalar, ScalarType};
use serde::{Deserialize, Serialize};

/// What one kernel parameter is bound to at launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// Input tensor `i` of the op (in `OpSpec::inputs` order).
    Input(usize),
    /// Output tensor `i` of the op (in `OpSpec::outputs` order).
    Output(usize),
    /// Temporary buffer `i` of the plan.
    Temp(usize),
    /// A uniform scalar value.
    Scalar(Scalar),
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub kernel: Kernel,
    /// Workgroups along x, y, z.
    pub grid: [u32; 3],
    /// One binding per kernel parameter, in parameter order.
    pub bindings: Vec<Binding>,
}

/// A device buffer the plan needs between launches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TempBuffer {
    pub dtype: ScalarType,
    pub len: u64,
}

/// An op lowered for one target: launches run in order, each seeing the writes of the
/// ones before it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub launches: Vec<Launch>,
    pub temps: Vec<TempBuffer>,
}

impl Plan {
    /// A plan of one launch and no temporaries.
    pub fn single(launch: Launch) -> Plan {
        Plan {
            launches: vec![launch],
            temps: Vec::new(),
        }
    }
}

/// A uniform scalar parameter of a kernel and the value bound to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Uniform {
    pub name: String,
    pub value: Scalar,
}
