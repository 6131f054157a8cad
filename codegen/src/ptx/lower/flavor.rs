//! What differs between the two machines this lowering serves: a CUDA kernel (the
//! PTX target) and a host CPU function with the ABI of [`crate::cpu`] (the CPU
//! target's LLVM tier, `crate::cpu::llvm`).
//!
//! The CPU form runs one workgroup of **one invocation** per call, so local ids are
//! 0 and a barrier is nothing; its buffer pointers and scalar bits come from the two
//! argument arrays, its workgroup id and grid from two `u32[3]`, its shared arrays
//! from the caller's scratch (each at a 16-byte-aligned offset, in declaration
//! order: [`crate::abi::cpu_shared_layout`]), and it returns its status bits instead of ORing them
//! into a status word.

use super::value::int;
use super::{internal, unsupported, IntoPointerChecked, Lower, OrInternal};
use crate::CodegenError;
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;
use kernelc_ir::{Kernel, Param};

/// The machine a module is lowered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// A CUDA kernel (`crate::ptx`'s ABI).
    Ptx,
    /// A host function with `crate::cpu`'s ABI, named by its entry.
    Cpu,
}

impl Flavor {
    /// What kernels must have expanded before this machine's lowering takes them.
    pub(crate) fn required_expansion(self) -> kernelc_ir::passes::MathExpansion {
        match self {
            Flavor::Ptx => crate::ptx::required_expansion(),
            Flavor::Cpu => crate::cpu::llvm::required_expansion(),
        }
    }
}

/// The arguments of a CPU-form function (`crate::cpu`'s ABI, in order).
const CPU_ARGS: [&str; 5] = [
    "buffers",
    "scalars",
    "workgroup_id",
    "num_workgroups",
    "shared",
];

/// What a valid kernel may still ask for that the CPU form cannot give: it runs one
/// invocation per workgroup (the CPU caps lower every op that way; a kernel of more
/// stays with the Cranelift tier, which runs them one after the other).
pub(crate) fn check_cpu_supported(kernel: &Kernel) -> Result<(), CodegenError> {
    if kernel.uses_fragments() {
        return Err(CodegenError::unexpanded_fragments(crate::cpu::llvm::TARGET));
    }
    if kernel.invocations_per_workgroup() != 1 {
        let [x, y, z] = kernel.workgroup_size;
        return Err(unsupported(format!(
            "a workgroup of {x}x{y}x{z} invocations (the LLVM CPU tier runs one per workgroup)"
        )));
    }
    let (_, shared) = crate::abi::cpu_shared_layout(kernel);
    if shared > MAX_CPU_SHARED_BYTES {
        return Err(unsupported(format!(
            "{shared} bytes of shared memory (at most {MAX_CPU_SHARED_BYTES})"
        )));
    }
    Ok(())
}

/// Largest shared scratch a CPU-form kernel may declare (bytes), as Cranelift's.
const MAX_CPU_SHARED_BYTES: u64 = 1 << 30;

/// The CPU-form function: `i32 entry(ptr buffers, ptr scalars, ptr workgroup_id, ptr
/// num_workgroups, ptr shared)`, C calling convention, exported, for the host CPU and
/// features of `cpu` / `features`.
pub(super) fn declare_cpu_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    entry: &str,
    (cpu, features): (&str, &str),
) -> FunctionValue<'ctx> {
    let ptr = ctx.ptr_type(AddressSpace::default());
    let params: Vec<BasicMetadataTypeEnum<'ctx>> = CPU_ARGS.iter().map(|_| ptr.into()).collect();
    let fn_type = ctx.i32_type().fn_type(&params, false);
    let func = module.add_function(entry, fn_type, Some(Linkage::External));
    for (attribute, value) in [
        ("target-cpu", cpu),
        ("target-features", features),
        // A leaf function: no frame pointer to keep (one more register).
        ("frame-pointer", "none"),
    ] {
        func.add_attribute(
            AttributeLoc::Function,
            ctx.create_string_attribute(attribute, value),
        );
    }
    // LLVM answers kind 0 for a name it does not know (an attribute of another
    // version); one of those in the IR crashes its verifier, so it is left out.
    let attribute = |name: &str| {
        let kind = inkwell::attributes::Attribute::get_named_enum_kind_id(name);
        (kind != 0).then(|| ctx.create_enum_attribute(kind, 0))
    };
    if let Some(nounwind) = attribute("nounwind") {
        func.add_attribute(AttributeLoc::Function, nounwind);
    }
    // The four argument arrays are only read, and nothing else the kernel touches
    // overlaps them: their values (ids, buffer bases) load once, whatever the kernel
    // stores.
    for arg in 0..4 {
        for name in ["noalias", "readonly"] {
            if let Some(a) = attribute(name) {
                func.add_attribute(AttributeLoc::Param(arg), a);
            }
        }
    }
    for (i, name) in CPU_ARGS.iter().enumerate() {
        if let Some(v) = func.get_nth_param(i as u32) {
            v.set_name(name);
        }
    }
    func
}

impl<'ctx> Lower<'_, 'ctx> {
    /// CPU argument `i` ([`CPU_ARGS`]).
    fn cpu_arg(&self, i: u32) -> Result<PointerValue<'ctx>, CodegenError> {
        self.func
            .get_nth_param(i)
            .ok_or_else(|| internal(format!("the CPU function lacks argument {i}")))?
            .into_pointer_value_checked()
    }

    /// Element `i` of the `ty` array at argument `arg`, loaded (the arrays are the
    /// caller's and do not change during the call).
    fn cpu_slot(
        &self,
        arg: u32,
        ty: inkwell::types::BasicTypeEnum<'ctx>,
        i: u64,
    ) -> Result<inkwell::values::BasicValueEnum<'ctx>, CodegenError> {
        let base = self.cpu_arg(arg)?;
        let index = self.ctx.i64_type().const_int(i, false);
        // SAFETY (of the generated code, not of this call): the ABI gives one slot per
        // parameter, and axes are 0..3; `i` is one of those.
        let at = unsafe { self.b.build_in_bounds_gep(ty, base, &[index], "") }.or_internal()?;
        self.b.build_load(ty, at, "").or_internal()
    }

    /// Buffer pointers and scalar parameters from the CPU form's argument arrays.
    pub(super) fn bind_cpu_params(&mut self) -> Result<(), CodegenError> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        for (i, param) in self.kernel.params.iter().enumerate() {
            match param {
                Param::Buffer { .. } => {
                    let p = self.cpu_slot(0, ptr.into(), i as u64)?;
                    self.buffers.push(Some(p.into_pointer_value_checked()?));
                    self.scalars.push(None);
                }
                Param::Scalar { ty, .. } => {
                    let bits = int(self.cpu_slot(1, self.ctx.i64_type().into(), i as u64)?)?;
                    let v = self.scalar_from_bits(*ty, bits)?;
                    self.buffers.push(None);
                    self.scalars.push(Some(super::value::Val::scalar(*ty, v)));
                }
            }
        }
        Ok(())
    }

    /// Each shared array's pointer into the CPU form's scratch.
    pub(super) fn bind_cpu_shared(&mut self) -> Result<(), CodegenError> {
        let scratch = self.cpu_arg(4)?;
        let (offsets, _) = crate::abi::cpu_shared_layout(self.kernel);
        for offset in offsets {
            let i8t = self.ctx.i8_type();
            let at = self.ctx.i64_type().const_int(offset, false);
            // SAFETY (of the generated code): the offset lies inside the scratch the ABI
            // requires (`abi::cpu_shared_layout`'s total).
            let p = unsafe { self.b.build_in_bounds_gep(i8t, scratch, &[at], "") }.or_internal()?;
            self.shared.push(p);
        }
        Ok(())
    }

    /// A CPU-form id register: `tid` (0: one invocation), `ctaid` and `nctaid` from the
    /// argument arrays.
    pub(super) fn cpu_id(&self, name: &str, axis: u8) -> Result<IntValue<'ctx>, CodegenError> {
        let arg = match name {
            "tid" => return Ok(self.ctx.i32_type().const_zero()),
            "ctaid" => 2,
            "nctaid" => 3,
            other => return Err(internal(format!("id register {other}"))),
        };
        int(self.cpu_slot(arg, self.ctx.i32_type().into(), axis as u64)?)
    }
}
