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
    /// Bytes of shared memory a workgroup may have by opting in (CUDA's dynamic
    /// shared memory past 48 KiB, up to 227 KiB on sm_90), which only the
    /// schedules written for it use (the warpgroup GEMM tile, attention on
    /// fragments); at most `shared_memory_bytes` elsewhere.
    #[serde(default)]
    pub opt_in_shared_memory_bytes: u32,
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
    /// Most loop iterations one invocation runs faithfully, all loops together, on a
    /// driver that cuts longer ones short (Mesa's llvmpipe: 65,535). A device with a
    /// budget fits each kernel under it ([`kernelc_ir::passes::fit_loop_budget`]) or
    /// refuses it; `None` for devices that run loops to the end.
    pub max_loop_iterations: Option<u64>,
    /// Whether NaN, ±∞ and −0 follow IEEE 754 through every operation: the compiler
    /// and driver never fold `x·0` to 0, `x − x` to 0 and the like. False on the wgpu
    /// paths through naga (WGSL cannot ask for it) and where a Vulkan driver does not
    /// declare `SignedZeroInfNanPreserve` for a float type the device computes in;
    /// the op fuzzer holds only such targets to the special-value semantics
    /// (docs/semantics.md, "NaN, ±∞ and −0 on Vulkan").
    pub ieee_specials: bool,
    /// Whether the driver may contract `a·b + c`, written as two operations, into one
    /// fused operation, and apply other inexact algebra such as `(a + b) − a → b`
    /// (WGSL cannot forbid either, and naga's SPIR-V drops `NoContraction`). Such a
    /// target expands kernelc's math with opaque error-free sums
    /// (`MathExpansion::opaque_sums`), which keeps `pow` within its row
    /// (docs/semantics.md).
    pub may_contract: bool,
    /// Whether subnormal operands and results survive every operation (no flush to
    /// zero). Vulkan lets a driver flush them unless the shader declares
    /// `DenormPreserve` (NVIDIA's driver does flush); the op fuzzer holds a target that
    /// may flush to its domain and tie cases only, whose values stay far from the
    /// subnormal range.
    pub keeps_subnormals: bool,
    /// Most elements one kernel indexes ([`i32::MAX`]: kernels index with 32 bits,
    /// all that WGSL has). A larger tensor is split into pieces of at most this many
    /// elements at lowering ([`split`](super::split)), or refused by an op that does
    /// not split. Lower values exercise the splitting with small tensors.
    #[serde(default = "TargetCaps::default_max_kernel_elements")]
    pub max_kernel_elements: u64,
    /// Bytes a buffer binding's start must be a multiple of (WebGPU's
    /// `min_storage_buffer_offset_alignment`, at most 256; 1 where kernels take plain
    /// pointers). A piece of a split tensor starting elsewhere is bound from the
    /// multiple below and indexed from there (`lower::rebase`).
    #[serde(default = "TargetCaps::default_binding_alignment")]
    pub binding_alignment: u32,
    /// Whether the device runs matrix fragments itself (tensor cores: CUDA sm_80 and
    /// later). GEMMs of f16 and bf16 then lower onto fragments (`tile::mma`); the
    /// expansion makes such kernels run on any device, but slowly, so other devices
    /// keep the SIMT tiles.
    #[serde(default)]
    pub matrix_fragments: bool,
    /// Whether warpgroup fragments (the `m64` shapes, Hopper's `wgmma`) run natively:
    /// CUDA devices of compute capability 9.0 exactly.
    #[serde(default)]
    pub warpgroup_fragments: bool,
    /// Whether the device copies into shared memory asynchronously (`cp.async`: CUDA
    /// sm_80 and later). The warpgroup GEMM tile then stages its operands through
    /// a deeper pipeline of copies in flight; elsewhere copies are expanded into
    /// loads and stores.
    #[serde(default)]
    pub async_copies: bool,
    /// Whether f64 fragments of m16n8k16 run natively (DMMA's Hopper shape: CUDA
    /// sm_90 and later); f64 GEMMs then multiply on it rather than on m8n8k4.
    #[serde(default)]
    pub f64_m16_fragments: bool,
    /// A preference rather than a limit: the schedule to take where lowering offers
    /// it (one of a plan's [`Tunable::choices`](super::Tunable), the fastest found
    /// by autotuning); `None`, or a name a problem is not offered, leaves the choice
    /// to the heuristics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

impl TargetCaps {
    /// The default and greatest [`TargetCaps::max_kernel_elements`].
    pub const MAX_KERNEL_ELEMENTS: u64 = i32::MAX as u64;

    fn default_max_kernel_elements() -> u64 {
        TargetCaps::MAX_KERNEL_ELEMENTS
    }

    fn default_binding_alignment() -> u32 {
        256
    }

    /// The elements one kernel may index here: `max_kernel_elements`, never past
    /// [`TargetCaps::MAX_KERNEL_ELEMENTS`].
    pub fn kernel_limit(&self) -> u64 {
        self.max_kernel_elements
            .min(TargetCaps::MAX_KERNEL_ELEMENTS)
    }

    /// A CPU: one invocation per workgroup, everything available, 4-lane f32 vectors.
    pub fn cpu() -> TargetCaps {
        TargetCaps {
            max_invocations_per_workgroup: 1,
            max_workgroup_size: [1, 1, 1],
            max_workgroups_per_dimension: u32::MAX,
            shared_memory_bytes: 256 * 1024,
            opt_in_shared_memory_bytes: 256 * 1024,
            preferred_invocations: 1,
            subgroup_size: None,
            f16: true,
            bf16: true,
            f64: true,
            i64: true,
            vector_width: 4,
            max_loop_iterations: None,
            ieee_specials: true,
            may_contract: false,
            keeps_subnormals: true,
            max_kernel_elements: TargetCaps::MAX_KERNEL_ELEMENTS,
            binding_alignment: 1,
            matrix_fragments: false,
            warpgroup_fragments: false,
            async_copies: false,
            f64_m16_fragments: false,
            schedule: None,
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
            opt_in_shared_memory_bytes: 16 * 1024,
            preferred_invocations: 256,
            subgroup_size: None,
            f16: false,
            bf16: false,
            f64: false,
            i64: false,
            vector_width: 4,
            max_loop_iterations: None,
            ieee_specials: true,
            may_contract: false,
            keeps_subnormals: true,
            max_kernel_elements: TargetCaps::MAX_KERNEL_ELEMENTS,
            binding_alignment: 256,
            matrix_fragments: false,
            warpgroup_fragments: false,
            async_copies: false,
            f64_m16_fragments: false,
            schedule: None,
        }
    }

    /// A CUDA device of compute capability 9.0 (H100/H200).
    pub fn cuda_sm90() -> TargetCaps {
        TargetCaps {
            max_invocations_per_workgroup: 1024,
            max_workgroup_size: [1024, 1024, 64],
            max_workgroups_per_dimension: 65_535,
            shared_memory_bytes: 48 * 1024,
            opt_in_shared_memory_bytes: 227 * 1024,
            preferred_invocations: 256,
            subgroup_size: Some(32),
            f16: true,
            bf16: true,
            f64: true,
            i64: true,
            vector_width: 4,
            max_loop_iterations: None,
            ieee_specials: true,
            may_contract: false,
            keeps_subnormals: true,
            max_kernel_elements: TargetCaps::MAX_KERNEL_ELEMENTS,
            binding_alignment: 1,
            matrix_fragments: true,
            warpgroup_fragments: true,
            async_copies: true,
            f64_m16_fragments: true,
            schedule: None,
        }
    }

    /// The most shared memory a workgroup may have, opting in where it can.
    pub fn opt_in_shared_memory_limit(&self) -> u32 {
        self.opt_in_shared_memory_bytes
            .max(self.shared_memory_bytes)
    }

    /// Whether values of `dtype` may be stored and computed on this target.
    pub fn supports(&self, dtype: ScalarType) -> bool {
        match dtype {
            ScalarType::F16 => self.f16,
            ScalarType::Bf16 => self.bf16,
            ScalarType::F64 => self.f64,
            ScalarType::I64 => self.i64,
            // Narrow integers and bool are bytes or half-words where the target has
            // them, packed into words where it has not (the shader targets).
            ScalarType::Bool
            | ScalarType::I32
            | ScalarType::U32
            | ScalarType::F32
            | ScalarType::U8
            | ScalarType::I8
            | ScalarType::U16
            | ScalarType::I16 => true,
        }
    }

    /// Why `kernel` cannot run on this target as declared, if it cannot: a workgroup
    /// size (per axis or in all) or shared memory over the limits. Devices check this
    /// before handing a kernel to a driver, which may fail in any way when given more
    /// than it has; lowered kernels fit by construction.
    pub fn check_workgroup(&self, kernel: &kernelc_ir::Kernel) -> Result<(), String> {
        let size = kernel.workgroup_size;
        if size.contains(&0)
            || size
                .iter()
                .zip(self.max_workgroup_size)
                .any(|(&n, max)| n > max)
            || kernel.invocations_per_workgroup() > u64::from(self.max_invocations_per_workgroup)
        {
            return Err(format!(
                "workgroup size {size:?} exceeds this target's {:?} ({} invocations in all)",
                self.max_workgroup_size, self.max_invocations_per_workgroup
            ));
        }
        // A lower bound on what a target declares (no padding between arrays), so that
        // anything lowering planned within the cap passes.
        // (A kernel may take what a workgroup gets by opting in.)
        let shared = kernel.shared_bytes();
        let allowed = self.opt_in_shared_memory_limit();
        if shared > u64::from(allowed) {
            return Err(format!(
                "the kernel's workgroup memory is {shared} bytes; this target allows {allowed}"
            ));
        }
        Ok(())
    }

    /// Why `grid` cannot be launched on this target, if it cannot.
    pub fn check_grid(&self, grid: [u32; 3]) -> Result<(), String> {
        let max = self.max_workgroups_per_dimension;
        if grid.iter().any(|&g| g > max) {
            return Err(format!(
                "grid {grid:?} exceeds {max} workgroups per dimension"
            ));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use kernelc_ir::builder::KernelBuilder;

    fn kernel(size: [u32; 3], shared: u32) -> kernelc_ir::Kernel {
        let mut k = KernelBuilder::new("k", size);
        if shared > 0 {
            k.shared("s", ScalarType::F32, shared);
        }
        k.build(|_| {}).expect("valid")
    }

    #[test]
    fn workgroups_and_grids_are_checked_against_the_limits() {
        let caps = TargetCaps::gpu_baseline();
        assert!(caps.check_workgroup(&kernel([256, 1, 1], 4096)).is_ok());
        assert!(caps.check_workgroup(&kernel([512, 1, 1], 0)).is_err());
        assert!(caps.check_workgroup(&kernel([16, 16, 2], 0)).is_err());
        let over = caps.shared_memory_bytes / 4 + 1;
        let e = caps.check_workgroup(&kernel([64, 1, 1], over)).unwrap_err();
        assert!(e.contains("workgroup memory"), "{e}");
        assert!(caps.check_grid([65_535, 1, 1]).is_ok());
        assert!(caps.check_grid([1, 65_536, 1]).is_err());
    }
}
