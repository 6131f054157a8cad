//! The module around the body: header, bindings, builtins, the entry point, and the
//! function prologue (locals, status accumulator, scalar parameters).

use super::emitter::{build_error, BufferVar, Emitter, SharedVar, Val, R};
use super::{internal, stmt::Flow};
use crate::abi::{ParamSlot, ShaderLayout, ENTRY_POINT};
use crate::shader::{for_each_expr, Packing};
use kernelc_ir::analysis::uniform_vector_widths;
use kernelc_ir::{Builtin, Expr, Param, ScalarType, Type};
use rspirv::dr::Operand;
use rspirv::spirv::{
    AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel,
    FunctionControl, MemoryModel, Op, StorageClass, Word,
};

/// The builtins in the order of [`Emitter::builtins`].
const BUILTINS: [(Builtin, BuiltIn); 4] = [
    (Builtin::GlobalId, BuiltIn::GlobalInvocationId),
    (Builtin::LocalId, BuiltIn::LocalInvocationId),
    (Builtin::WorkgroupId, BuiltIn::WorkgroupId),
    (Builtin::NumWorkgroups, BuiltIn::NumWorkgroups),
];

pub(crate) fn builtin_slot(b: Builtin) -> usize {
    match b {
        Builtin::GlobalId => 0,
        Builtin::LocalId => 1,
        Builtin::WorkgroupId => 2,
        Builtin::NumWorkgroups => 3,
    }
}

/// Builds the whole module into `e.b`.
pub(crate) fn declare_module(e: &mut Emitter, options: &super::SpirvOptions) -> R<()> {
    e.b.memory_model(AddressingModel::Logical, MemoryModel::GLSL450);
    let layout = ShaderLayout::of(e.kernel);
    declare_buffers(e, &layout)?;
    let scalar_block = declare_scalar_block(e, &layout);
    declare_status(e, &layout);
    declare_shared(e)?;
    let builtin_vars = declare_builtins(e);

    let void = e.void_ty();
    let fn_ty = e.b.type_function(void, []);
    let main =
        e.b.begin_function(void, None, FunctionControl::NONE, fn_ty)
            .map_err(build_error)?;
    e.b.name(main, ENTRY_POINT);
    e.b.begin_block(None).map_err(build_error)?;
    prologue(e, &builtin_vars, scalar_block, &layout)?;
    let body = &e.kernel.body;
    if super::stmt::block(e, body)? == Flow::Continue {
        e.flush_status()?;
        e.b.ret().map_err(build_error)?;
    }
    e.b.end_function().map_err(build_error)?;

    let interface: Vec<Word> = builtin_vars.iter().flatten().copied().collect();
    e.b.entry_point(ExecutionModel::GLCompute, main, ENTRY_POINT, interface);
    e.b.execution_mode(main, ExecutionMode::LocalSize, e.kernel.workgroup_size);
    let computes_f64 = e.capabilities().contains(&Capability::Float64);
    let preserve = [
        (options.preserve_f32_specials, 32),
        (options.preserve_f64_specials && computes_f64, 64),
    ];
    for (_, width) in preserve.iter().filter(|(on, _)| *on) {
        e.b.execution_mode(main, ExecutionMode::SignedZeroInfNanPreserve, [*width]);
        e.require(Capability::SignedZeroInfNanPreserve);
    }
    // Denormal modes for every float width the module computes in, or none: a device
    // whose modes are not independent per width takes one mode for all of them. f16
    // arithmetic (a module with `Float16`) gets none.
    let computes_f16 = e.capabilities().contains(&Capability::Float16);
    let denormals = options.preserve_f32_denormals
        && (!computes_f64 || options.preserve_f64_denormals)
        && !computes_f16;
    if denormals {
        let widths: &[u32] = if computes_f64 { &[32, 64] } else { &[32] };
        for &width in widths {
            e.b.execution_mode(main, ExecutionMode::DenormPreserve, [width]);
        }
        e.require(Capability::DenormPreserve);
    }
    e.b.capability(Capability::Shader);
    for cap in e.capabilities() {
        e.b.capability(cap);
    }
    if denormals || preserve.iter().any(|(on, _)| *on) {
        e.b.extension("SPV_KHR_float_controls");
    }
    Ok(())
}

fn bind(e: &mut Emitter, var: Word, binding: u32) {
    e.b.decorate(var, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
    e.b.decorate(var, Decoration::Binding, [Operand::LiteralBit32(binding)]);
}

/// One `Block` variable per buffer parameter. A buffer that every access reads or
/// writes as an aligned `L`-lane vector is declared as an array of `vecL<T>` (stride
/// `L` elements): one vector `OpLoad`/`OpStore` per access instead of `L` scalar
/// ones, which drivers turn into one wide memory transaction. The bytes, and so the
/// binding's size, are those of the scalar array. A buffer of sub-word elements is a
/// `u32[]` of packed words ([`Packing`]).
fn declare_buffers(e: &mut Emitter, layout: &ShaderLayout) -> R<()> {
    let kernel = e.kernel;
    let views = uniform_vector_widths(kernel, &e.ranges);
    for (i, (param, slot)) in kernel.params.iter().zip(&layout.params).enumerate() {
        let (
            Param::Buffer {
                name,
                elem,
                len,
                access,
            },
            ParamSlot::Buffer { binding },
        ) = (param, slot)
        else {
            e.buffers.push(None);
            continue;
        };
        let packing = Packing::of(*elem);
        let view_lanes = match packing {
            Some(_) => 1,
            None => views.get(i).copied().flatten().unwrap_or(1),
        };
        let scalar_ty = e.storage_scalar(*elem, true)?;
        let elem_ty = e.vector_of(scalar_ty, view_lanes);
        let stride = match packing {
            Some(_) => 4,
            None => elem.size_bytes() * view_lanes as u32,
        };
        let block = e.runtime_block(elem_ty, stride);
        let ptr = e.pointer(StorageClass::StorageBuffer, block);
        let var = e.b.variable(ptr, None, StorageClass::StorageBuffer, None);
        e.b.name(var, name.as_str());
        bind(e, var, *binding);
        if !access.can_write() {
            e.b.decorate(var, Decoration::NonWritable, []);
        }
        e.buffers.push(Some(BufferVar {
            var,
            elem: *elem,
            len: *len,
            view_lanes,
            packing,
            atomic: packing.is_some() && access.can_write(),
        }));
    }
    Ok(())
}

/// The read-only `u32[]` of packed scalar parameters, if the kernel has any.
fn declare_scalar_block(e: &mut Emitter, layout: &ShaderLayout) -> Option<Word> {
    let binding = layout.scalar_binding?;
    let u = e.u32_ty();
    let block = e.runtime_block(u, 4);
    let ptr = e.pointer(StorageClass::StorageBuffer, block);
    let var = e.b.variable(ptr, None, StorageClass::StorageBuffer, None);
    e.b.name(var, "kernelc_scalars");
    bind(e, var, binding);
    e.b.decorate(var, Decoration::NonWritable, []);
    Some(var)
}

fn declare_status(e: &mut Emitter, layout: &ShaderLayout) {
    let u = e.u32_ty();
    let block = e.b.type_struct([u]);
    e.b.decorate(block, Decoration::Block, []);
    e.b.member_decorate(block, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
    let ptr = e.pointer(StorageClass::StorageBuffer, block);
    let var = e.b.variable(ptr, None, StorageClass::StorageBuffer, None);
    e.b.name(var, "kernelc_status");
    bind(e, var, layout.status_binding);
    e.status_var = var;
}

fn declare_shared(e: &mut Emitter) -> R<()> {
    let kernel = e.kernel;
    for decl in &kernel.shared {
        let elem_ty = e.storage_scalar(decl.elem, false)?;
        // A zero-length array cannot be declared; every access to it fails its check.
        let len = e.const_u32(decl.len.max(1));
        let array = e.b.type_array(elem_ty, len);
        let ptr = e.pointer(StorageClass::Workgroup, array);
        let var = e.b.variable(ptr, None, StorageClass::Workgroup, None);
        e.b.name(var, decl.name.as_str());
        e.shared.push(SharedVar {
            var,
            elem: decl.elem,
            len: decl.len as u64,
        });
    }
    Ok(())
}

/// `Input` variables for the builtins the body reads.
fn declare_builtins(e: &mut Emitter) -> [Option<Word>; 4] {
    let mut used = [false; 4];
    for_each_expr(&e.kernel.body, &mut |x| {
        if let Expr::Builtin { builtin, .. } = x {
            used[builtin_slot(*builtin)] = true;
        }
    });
    let u = e.u32_ty();
    let uvec3 = e.b.type_vector(u, 3);
    let ptr = e.pointer(StorageClass::Input, uvec3);
    let mut vars = [None; 4];
    for (i, (ir, spv)) in BUILTINS.iter().enumerate() {
        if used[i] {
            let var = e.b.variable(ptr, None, StorageClass::Input, None);
            e.b.name(var, ir.name());
            e.b.decorate(var, Decoration::BuiltIn, [Operand::BuiltIn(*spv)]);
            vars[i] = Some(var);
        }
    }
    vars
}

/// Entry block: the locals' variables, the status accumulator (zeroed), the builtins
/// loaded once, and the scalar parameters decoded once.
fn prologue(
    e: &mut Emitter,
    builtin_vars: &[Option<Word>; 4],
    scalar_block: Option<Word>,
    layout: &ShaderLayout,
) -> R<()> {
    let kernel = e.kernel;
    for decl in &kernel.locals {
        let ty = e.reg_type(decl.ty)?;
        let var = e.function_var(ty)?;
        e.b.name(var, decl.name.as_str());
        e.locals.push(var);
    }
    let u = e.u32_ty();
    e.status_acc = e.function_var(u)?;
    let zero = e.const_u32(0);
    e.store(e.status_acc, zero)?;
    let uvec3 = e.b.type_vector(u, 3);
    for (slot, var) in builtin_vars.iter().enumerate() {
        if let Some(var) = var {
            e.builtins[slot] = Some(e.load(uvec3, *var)?);
        }
    }
    for (param, slot) in kernel.params.iter().zip(&layout.params) {
        let value = match (param, slot, scalar_block) {
            (Param::Scalar { ty, .. }, ParamSlot::Scalar { word }, Some(block)) => {
                Some(decode_scalar(e, block, *word, *ty)?)
            }
            (Param::Scalar { name, .. }, _, _) => {
                return Err(internal(format!("scalar `{name}` has no word")))
            }
            _ => None,
        };
        e.scalars.push(value);
    }
    Ok(())
}

/// Reads word `word` of the scalar block.
fn scalar_word(e: &mut Emitter, block: Word, word: u32) -> R<Word> {
    let u = e.u32_ty();
    let ptr_ty = e.pointer(StorageClass::StorageBuffer, u);
    let member = e.const_u32(0);
    let index = e.const_u32(word);
    let ptr =
        e.b.access_chain(ptr_ty, None, block, [member, index])
            .map_err(build_error)?;
    e.load(u, ptr)
}

/// A scalar parameter from its words (see [`crate::abi`] for the encoding).
fn decode_scalar(e: &mut Emitter, block: Word, word: u32, ty: ScalarType) -> R<Val> {
    let lo = scalar_word(e, block, word)?;
    let reg = e.reg_scalar(ty)?;
    let id = match ty {
        ScalarType::U32 => lo,
        ScalarType::I32 | ScalarType::F32 => e.ins(Op::Bitcast, reg, &[lo])?,
        ScalarType::Bool => {
            let zero = e.const_u32(0);
            e.ins(Op::INotEqual, reg, &[lo, zero])?
        }
        ScalarType::F16 => super::convert::f16_bits_to_f32(e, lo)?,
        ScalarType::I64 | ScalarType::F64 => {
            let hi = scalar_word(e, block, word + 1)?;
            let u64_ty = e.u64_ty();
            let lo64 = e.ins(Op::UConvert, u64_ty, &[lo])?;
            let hi64 = e.ins(Op::UConvert, u64_ty, &[hi])?;
            let thirty_two = e.const_u32(32);
            let hi_shifted = e.ins(Op::ShiftLeftLogical, u64_ty, &[hi64, thirty_two])?;
            let bits = e.ins(Op::BitwiseOr, u64_ty, &[hi_shifted, lo64])?;
            e.ins(Op::Bitcast, reg, &[bits])?
        }
        ScalarType::Bf16 => {
            // The 16 bits are the upper half of the f32 with the same value.
            let u = e.u32_ty();
            let sixteen = e.const_u32(16);
            let bits = e.ins(Op::ShiftLeftLogical, u, &[lo, sixteen])?;
            e.ins(Op::Bitcast, reg, &[bits])?
        }
        ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
            return Err(internal(format!("a scalar parameter of {ty}")))
        }
    };
    Ok(Val {
        id,
        ty: Type::scalar(ty),
    })
}
