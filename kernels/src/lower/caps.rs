//! What a device allows. Lowering reads it and never emits past it.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

/// The limits and preferences of one device, as lowering needs them.
///
/// Schedules take their tile sizes and workgroup shapes from here: the CPU runs the
/// same kernel definitions as a GPU, with one invocation per workgroup looping over
/// the workgroup's elements, where a GPU uses 128-256 invocations.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TargetCaps {
    /// Most invocations one workgroup may have.
    pub max_invocations_per_workgroup: u32,
    /// Most invocations along each workgroup axis.
    pub max_workgroup_size: [u32; 3],
    /// Most workgroups along one grid axis (65,535 on wgpu).
    pub max_workgroups_per_dimension: u32,
    /// Bytes of workgroup-shared memory one workgroup may declare.
    pub shared_memory_bytes: u32,
    /// Invocations per workgroup the schedules aim for (1 on a CPU).
    pub preferred_invocations: u32,
    /// Subgroup (warp, SIMD group) width, when the target exposes subgroups.
    pub subgroup_size: Option<u32>,
    /// Whether f16 arithmetic and storage are available.
    pub f16: bool,
    /// Whether bf16 storage is available (compute is always widened to f32).
    pub bf16: bool,
    /// Whether f64 is available.
    pub f64: bool,
    /// Whether i64 is available.
    pub i64: bool,
    /// Preferred vector width of loads and stores, in lanes (1, 2 or 4).
    pub vector_width: u8,
}

impl TargetCaps {
    /// A CPU: one invocation per workgroup, everything available, 4-lane f32 vectors.
    pub fn cpu() -> TargetCaps {
        TargetCaps {
            max_invocations_per_workgroup: 1,
            max_workgroup_size: [1, 1, 1],
            max_workgroups_per_dimension: u32::MAX,
            shared_memory_bytes: 256 * 1024,
            preferred_invocations: 1,
            subgroup_size: None,
            f16: true,
            bf16: true,
            f64: true,
            i64: true,
            vector_width: 4,
        }
    }

    /// A typical discrete GPU under WebGPU's default limits (256 invocations, 16 KiB
    /// of shared memory, 65,535 workgroups per axis), no f16 or f64.
    pub fn gpu_baseline() -> TargetCaps {
        TargetCaps {
            max_invocations_per_workgroup: 256,
            max_workgroup_size: [256, 256, 64],
            max_workgroups_per_dimension: 65_535,
            shared_memory_bytes: 16 * 1024,
            preferred_invocations: 256,
            subgroup_size: None,
            f16: false,
            bf16: false,
            f64: false,
            i64: false,
            vector_width: 4,
        }
    }

    /// A CUDA device of compute capability 9.0 (H100/H200).
    pub fn cuda_sm90() -> TargetCaps {
        TargetCaps {
            max_invocations_per_workgroup: 1024,
            max_workgroup_size: [1024, 1024, 64],
            max_workgroups_per_dimension: 65_535,
            shared_memory_bytes: 48 * 1024,
            preferred_invocations: 256,
            subgroup_size: Some(32),
            f16: true,
            bf16: true,
            f64: true,
            i64: true,
            vector_width: 4,
        }
    }

    /// Whether values of `dtype` may be stored and computed on this target.
    pub fn supports(&self, dtype: ScalarType) -> bool {
        match dtype {
            ScalarType::F16 => self.f16,
            ScalarType::Bf16 => self.bf16,
            ScalarType::F64 => self.f64,
            ScalarType::I64 => self.i64,
            ScalarType::Bool | ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => true,
        }
    }

    /// Invocations for a 1-D workgroup: the preference, within the limits.
    pub fn invocations_1d(&self) -> u32 {
        self.preferred_invocations
            .min(self.max_invocations_per_workgroup)
            .min(self.max_workgroup_size[0])
            .max(1)
    }

    /// Whether this is a one-invocation-per-workgroup target (a CPU).
    pub fn is_serial(&self) -> bool {
        self.invocations_1d() == 1
    }
}
