//! The state of emitting one kernel, and the small helpers everything else is built
//! from: register types, cached constants, one-instruction emission (with
//! `NoContraction` on float arithmetic), GLSL.std.450 calls and the status word.
//!
//! # Register representation
//!
//! Every IR value is one SPIR-V id: a scalar, or an `OpTypeVector` of 2 or 4 lanes.
//! `bool` is `OpTypeBool`, `i32`/`i64` are signed `OpTypeInt`, `u32` is unsigned. `f16`
//! values are held as `f32` values that lie exactly on the f16 grid (every f16 result
//! is rounded to it, see [`super::convert`]), so f16 arithmetic needs no `Float16`
//! capability and the conversions at loads and stores are exact. `bf16` values
//! (casts, locals, scalar parameters) are f32 registers on the bf16 grid the same way;
//! bf16 memory (buffers, shared arrays) is refused. Bool and the narrow integers are
//! packed into `u32` words in buffers ([`crate::shader::Packing`]); a bool in shared
//! memory is a `u32` word.

use super::{internal, unsupported};
use crate::shader::Packing;
use crate::CodegenError;
use kernelc_ir::analysis::Ranges;
use kernelc_ir::{Kernel, Scalar, ScalarType, Type};
use rspirv::dr::{self, Builder, InsertPoint, Operand};
use rspirv::spirv::{self, Capability, Decoration, Op, StorageClass, Word};
use std::collections::{BTreeSet, HashMap};

pub(crate) type R<T> = Result<T, CodegenError>;

/// An IR value in a register: its id and its IR type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Val {
    pub id: Word,
    pub ty: Type,
}

/// A storage-buffer parameter: its variable and shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferVar {
    pub var: Word,
    pub elem: ScalarType,
    /// Length in elements (scalars), whatever the view.
    pub len: u64,
    /// Lanes of the array's element type: 1 for a `T[]`, `L` for a `vecL<T>[]` view
    /// (see [`kernelc_ir::analysis::uniform_vector_widths`]).
    pub view_lanes: u8,
    /// How sub-word elements are packed into the `u32[]` the buffer is declared as.
    pub packing: Option<Packing>,
    /// Whether the words are accessed atomically (a packed buffer the kernel writes).
    pub atomic: bool,
}

/// A workgroup-shared array.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedVar {
    pub var: Word,
    pub elem: ScalarType,
    pub len: u64,
}

/// GLSL.std.450 instruction numbers used here (from the extended instruction set's
/// specification).
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
pub(crate) enum Glsl {
    RoundEven = 2,
    FAbs = 4,
    Floor = 8,
    Ceil = 9,
    Sqrt = 31,
    InverseSqrt = 32,
    UMin = 38,
    SMin = 39,
    UMax = 41,
    SMax = 42,
    Fma = 50,
    FindUMsb = 75,
}

pub(crate) struct Emitter<'k> {
    pub b: Builder,
    pub kernel: &'k Kernel,
    pub ranges: Ranges,
    glsl: Word,
    /// Capabilities beyond `Shader` the emitted code needs (as raw numbers, ordered).
    caps: BTreeSet<u32>,
    /// Scalar constants by (type id, bits).
    consts: HashMap<(Word, u64), Word>,
    /// Composite constants by (type id, constituents).
    composites: HashMap<(Word, Vec<Word>), Word>,
    /// Types whose layout decorations were emitted.
    decorated: BTreeSet<Word>,
    /// Per parameter: its storage buffer, if it is one.
    pub buffers: Vec<Option<BufferVar>>,
    /// Per parameter: its value, if it is a scalar (decoded in the entry block).
    pub scalars: Vec<Option<Val>>,
    pub shared: Vec<SharedVar>,
    /// Loaded builtins (vec3<u32>): global id, local id, workgroup id, workgroup count.
    pub builtins: [Option<Word>; 4],
    /// The `Function` variable of each IR local.
    pub locals: Vec<Word>,
    /// The `Function` variable accumulating this invocation's status bits.
    pub status_acc: Word,
    /// The status word's variable (struct { u32 }).
    pub status_var: Word,
}

impl<'k> Emitter<'k> {
    pub fn new(kernel: &'k Kernel) -> Emitter<'k> {
        let mut b = Builder::new();
        b.set_version(1, 3);
        let glsl = b.ext_inst_import("GLSL.std.450");
        Emitter {
            b,
            kernel,
            ranges: Ranges::of(kernel),
            glsl,
            caps: BTreeSet::new(),
            consts: HashMap::new(),
            composites: HashMap::new(),
            decorated: BTreeSet::new(),
            buffers: Vec::new(),
            scalars: Vec::new(),
            shared: Vec::new(),
            builtins: [None; 4],
            locals: Vec::new(),
            status_acc: 0,
            status_var: 0,
        }
    }

    pub fn require(&mut self, cap: Capability) {
        self.caps.insert(cap as u32);
    }

    /// The capabilities the code needs beyond `Shader`.
    pub fn capabilities(&self) -> Vec<Capability> {
        self.caps
            .iter()
            .filter_map(|&c| Capability::from_u32(c))
            .collect()
    }

    // -- types --------------------------------------------------------------------------

    pub fn void_ty(&mut self) -> Word {
        self.b.type_void()
    }

    pub fn bool_ty(&mut self) -> Word {
        self.b.type_bool()
    }

    pub fn u32_ty(&mut self) -> Word {
        self.b.type_int(32, 0)
    }

    pub fn i32_ty(&mut self) -> Word {
        self.b.type_int(32, 1)
    }

    pub fn u64_ty(&mut self) -> Word {
        self.require(Capability::Int64);
        self.b.type_int(64, 0)
    }

    pub fn f32_ty(&mut self) -> Word {
        self.b.type_float(32, None)
    }

    /// The register type of a scalar (see the module documentation); of a narrow
    /// storage type, that of the value a load of it yields.
    pub fn reg_scalar(&mut self, s: ScalarType) -> R<Word> {
        Ok(match s {
            ScalarType::Bool => self.bool_ty(),
            ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => self.i32_ty(),
            ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => self.u32_ty(),
            ScalarType::I64 => {
                self.require(Capability::Int64);
                self.b.type_int(64, 1)
            }
            ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 => self.f32_ty(),
            ScalarType::F64 => {
                self.require(Capability::Float64);
                self.b.type_float(64, None)
            }
        })
    }

    /// The register type of an IR type (vectors as `OpTypeVector`).
    pub fn reg_type(&mut self, t: Type) -> R<Word> {
        let s = self.reg_scalar(t.scalar)?;
        Ok(self.vector_of(s, t.lanes))
    }

    /// `component` as a vector of `lanes` (itself for one lane).
    pub fn vector_of(&mut self, component: Word, lanes: u8) -> Word {
        if lanes <= 1 {
            component
        } else {
            self.b.type_vector(component, lanes as u32)
        }
    }

    /// The type an element of `elem` has in memory: a packed element's `u32` word
    /// in buffers (bool, narrow integers), a `u32` word for a bool in shared memory, f16
    /// as a real 16-bit float (`in_buffer` selects the capability: 16-bit
    /// storage-buffer access, or `Float16` for workgroup memory), everything else its
    /// register type.
    pub fn storage_scalar(&mut self, elem: ScalarType, in_buffer: bool) -> R<Word> {
        if in_buffer && Packing::of(elem).is_some() {
            return Ok(self.u32_ty());
        }
        Ok(match elem {
            ScalarType::Bool => self.u32_ty(),
            ScalarType::F16 => {
                self.require(if in_buffer {
                    Capability::StorageBuffer16BitAccess
                } else {
                    Capability::Float16
                });
                self.b.type_float(16, None)
            }
            ScalarType::Bf16 => return Err(bf16_unsupported()),
            ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
                return Err(internal(format!("shared memory of {elem}")))
            }
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::I64
            | ScalarType::F32
            | ScalarType::F64 => self.reg_scalar(elem)?,
        })
    }

    pub fn pointer(&mut self, class: StorageClass, pointee: Word) -> Word {
        self.b.type_pointer(None, class, pointee)
    }

    /// `struct { T data[]; }` decorated `Block`, with its layout, for a storage buffer
    /// of elements of type `elem_ty` (`stride` bytes each).
    pub fn runtime_block(&mut self, elem_ty: Word, stride: u32) -> Word {
        let array = self.b.type_runtime_array(elem_ty);
        if self.decorated.insert(array) {
            self.b.decorate(
                array,
                Decoration::ArrayStride,
                [Operand::LiteralBit32(stride)],
            );
        }
        let block = self.b.type_struct([array]);
        if self.decorated.insert(block) {
            self.b.decorate(block, Decoration::Block, []);
            self.b
                .member_decorate(block, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
        }
        block
    }

    // -- constants ------------------------------------------------------------------

    /// A constant of register scalar type `ty` (an int or float type id) from its bits.
    pub fn const_bits(&mut self, ty: Word, bits: u64, wide: bool) -> Word {
        if let Some(&id) = self.consts.get(&(ty, bits)) {
            return id;
        }
        let id = if wide {
            self.b.constant_bit64(ty, bits)
        } else {
            self.b.constant_bit32(ty, bits as u32)
        };
        self.consts.insert((ty, bits), id);
        id
    }

    pub fn const_bool(&mut self, v: bool) -> Word {
        let ty = self.bool_ty();
        if let Some(&id) = self.consts.get(&(ty, v as u64)) {
            return id;
        }
        let id = if v {
            self.b.constant_true(ty)
        } else {
            self.b.constant_false(ty)
        };
        self.consts.insert((ty, v as u64), id);
        id
    }

    pub fn const_u32(&mut self, v: u32) -> Word {
        let ty = self.u32_ty();
        self.const_bits(ty, v as u64, false)
    }

    pub fn const_f32(&mut self, v: f32) -> Word {
        let ty = self.f32_ty();
        self.const_bits(ty, v.to_bits() as u64, false)
    }

    /// A scalar IR constant in its register representation. Infinities and NaNs are
    /// not constants but instructions (a bitcast of the bits, where the block being
    /// built needs them): naga's SPIR-V front end turns constants into WGSL constant
    /// expressions, which must be finite.
    pub fn scalar_const(&mut self, s: Scalar) -> R<Word> {
        if let Some(v) = non_finite(s) {
            return self.non_finite_value(s.ty(), v);
        }
        let ty = self.reg_scalar(s.ty())?;
        Ok(match s {
            Scalar::Bool(v) => self.const_bool(v),
            Scalar::I32(v) => self.const_bits(ty, v as u32 as u64, false),
            Scalar::U32(v) => self.const_bits(ty, v as u64, false),
            Scalar::I64(v) => self.const_bits(ty, v as u64, true),
            Scalar::F16(b) => {
                let v = half::f16::from_bits(b).to_f32();
                self.const_bits(ty, v.to_bits() as u64, false)
            }
            Scalar::F32(b) => self.const_bits(ty, b as u64, false),
            Scalar::F64(b) => self.const_bits(ty, b, true),
            Scalar::Bf16(b) => {
                let v = half::bf16::from_bits(b).to_f32();
                self.const_bits(ty, v.to_bits() as u64, false)
            }
        })
    }

    /// `s` splatted to `lanes` lanes (a constant composite for vectors; a constructed
    /// vector for infinities and NaNs, see [`Emitter::scalar_const`]).
    pub fn splat_const(&mut self, s: Scalar, lanes: u8) -> R<Word> {
        let c = self.scalar_const(s)?;
        if lanes <= 1 {
            return Ok(c);
        }
        let ty = self.reg_type(Type::vector(s.ty(), lanes))?;
        if non_finite(s).is_some() {
            return self
                .b
                .composite_construct(ty, None, vec![c; lanes as usize])
                .map_err(build_error);
        }
        Ok(self.composite_const(ty, vec![c; lanes as usize]))
    }

    /// An infinity or NaN of float type `ty` as an instruction: the f32 bits
    /// reinterpreted (then widened for f64, which needs no 64-bit integers).
    fn non_finite_value(&mut self, ty: ScalarType, v: f32) -> R<Word> {
        let f = self.f32_ty();
        let bits = self.const_u32(v.to_bits());
        let single = self.ins(Op::Bitcast, f, &[bits])?;
        if ty == ScalarType::F64 {
            let wide = self.reg_scalar(ty)?;
            return self.ins(Op::FConvert, wide, &[single]);
        }
        Ok(single)
    }

    pub fn composite_const(&mut self, ty: Word, parts: Vec<Word>) -> Word {
        if let Some(&id) = self.composites.get(&(ty, parts.clone())) {
            return id;
        }
        let id = self.b.constant_composite(ty, parts.iter().copied());
        self.composites.insert((ty, parts), id);
        id
    }

    /// A u32 constant splatted to `lanes` lanes.
    pub fn u32s(&mut self, v: u32, lanes: u8) -> R<Word> {
        self.splat_const(Scalar::U32(v), lanes)
    }

    /// Whether each lane is a NaN: `x != x` (unordered). naga's SPIR-V front end has no
    /// `OpIsNan`.
    pub fn is_nan(&mut self, bools: Word, x: Word) -> R<Word> {
        self.ins(Op::FUnordNotEqual, bools, &[x, x])
    }

    /// The zero of an IR type.
    pub fn zero(&mut self, t: Type) -> R<Word> {
        self.splat_const(Scalar::zero(t.scalar), t.lanes)
    }

    // -- instructions -----------------------------------------------------------------

    /// Emits `op` with result type `ty` and id operands; returns the result id.
    pub fn ins(&mut self, op: Op, ty: Word, args: &[Word]) -> R<Word> {
        let id = self.b.id();
        let inst = dr::Instruction::new(
            op,
            Some(ty),
            Some(id),
            args.iter().map(|&a| Operand::IdRef(a)).collect(),
        );
        self.b
            .insert_into_block(InsertPoint::End, inst)
            .map_err(build_error)?;
        Ok(id)
    }

    /// A float arithmetic instruction, decorated `NoContraction`: docs/semantics.md
    /// forbids fusing `a * b + c` into an fma, and kernelc's math expansions rely on
    /// every product and sum being rounded on its own.
    pub fn float_op(&mut self, op: Op, ty: Word, args: &[Word]) -> R<Word> {
        let id = self.ins(op, ty, args)?;
        self.b.decorate(id, Decoration::NoContraction, []);
        Ok(id)
    }

    /// A GLSL.std.450 call.
    pub fn glsl(&mut self, f: Glsl, ty: Word, args: &[Word]) -> R<Word> {
        let operands = args.iter().map(|&a| Operand::IdRef(a));
        self.b
            .ext_inst(ty, None, self.glsl, f as u32, operands)
            .map_err(build_error)
    }

    /// `OpCompositeExtract` of one lane.
    pub fn extract(&mut self, ty: Word, v: Word, lane: u32) -> R<Word> {
        self.b
            .composite_extract(ty, None, v, [lane])
            .map_err(build_error)
    }

    /// `a && b` on bools of type `ty`. Vectors use `OpSelect(a, b, false)`: naga's
    /// SPIR-V front end maps `OpLogicalAnd` to WGSL's `&&`, which takes scalars only.
    pub fn and(&mut self, ty: Word, a: Word, b: Word) -> R<Word> {
        if ty == self.bool_ty() {
            return self.ins(Op::LogicalAnd, ty, &[a, b]);
        }
        let f = self.const_bool(false);
        let lanes = self.lanes_of_bool_vector(ty)?;
        let falses = self.composite_const(ty, vec![f; lanes]);
        self.ins(Op::Select, ty, &[a, b, falses])
    }

    /// `a || b` on bools of type `ty` (`OpSelect(a, true, b)` for vectors, see
    /// [`Emitter::and`]).
    pub fn or(&mut self, ty: Word, a: Word, b: Word) -> R<Word> {
        if ty == self.bool_ty() {
            return self.ins(Op::LogicalOr, ty, &[a, b]);
        }
        let t = self.const_bool(true);
        let lanes = self.lanes_of_bool_vector(ty)?;
        let trues = self.composite_const(ty, vec![t; lanes]);
        self.ins(Op::Select, ty, &[a, trues, b])
    }

    fn lanes_of_bool_vector(&mut self, ty: Word) -> R<usize> {
        let b = self.bool_ty();
        for lanes in [2u8, 4] {
            if self.vector_of(b, lanes) == ty {
                return Ok(lanes as usize);
            }
        }
        Err(internal("a logical operation on a non-bool type"))
    }

    /// A bool (vector) reduced to one bool: `any` lane for vectors.
    pub fn any(&mut self, cond: Word, lanes: u8) -> R<Word> {
        if lanes <= 1 {
            return Ok(cond);
        }
        let b = self.bool_ty();
        self.ins(Op::Any, b, &[cond])
    }

    /// A scalar bool splatted to a bool vector of `lanes` (itself for one lane).
    pub fn splat_bool(&mut self, cond: Word, lanes: u8) -> R<Word> {
        if lanes <= 1 {
            return Ok(cond);
        }
        let b = self.bool_ty();
        let ty = self.vector_of(b, lanes);
        self.b
            .composite_construct(ty, None, vec![cond; lanes as usize])
            .map_err(build_error)
    }

    pub fn load(&mut self, ty: Word, ptr: Word) -> R<Word> {
        self.b.load(ty, None, ptr, None, []).map_err(build_error)
    }

    pub fn store(&mut self, ptr: Word, v: Word) -> R<()> {
        self.b.store(ptr, v, None, []).map_err(build_error)
    }

    /// Declares a `Function` variable of type `ty`. Function variables must open the
    /// entry block, so it goes there whatever block is being built.
    pub fn function_var(&mut self, ty: Word) -> R<Word> {
        let ptr = self.pointer(StorageClass::Function, ty);
        let id = self.b.id();
        let inst = dr::Instruction::new(
            Op::Variable,
            Some(ptr),
            Some(id),
            vec![Operand::StorageClass(StorageClass::Function)],
        );
        let f = self
            .b
            .selected_function()
            .ok_or_else(|| internal("a function variable outside the function"))?;
        let entry = self
            .b
            .module_mut()
            .functions
            .get_mut(f)
            .and_then(|f| f.blocks.first_mut())
            .ok_or_else(|| internal("a function variable before the entry block"))?;
        entry.instructions.insert(0, inst);
        Ok(id)
    }

    // -- status -------------------------------------------------------------------------

    /// ORs `bits` (a u32 id) into this invocation's status accumulator.
    pub fn raise(&mut self, bits: Word) -> R<()> {
        let u = self.u32_ty();
        let acc = self.load(u, self.status_acc)?;
        let new = self.ins(Op::BitwiseOr, u, &[acc, bits])?;
        self.store(self.status_acc, new)
    }

    /// ORs `bit` into the accumulator when the bool `cond` holds.
    pub fn raise_if(&mut self, cond: Word, bit: u32) -> R<()> {
        let u = self.u32_ty();
        let on = self.const_u32(bit);
        let off = self.const_u32(0);
        let bits = self.ins(Op::Select, u, &[cond, on, off])?;
        self.raise(bits)
    }

    /// Publishes the accumulated status: one `OpAtomicOr` (device scope, relaxed) into
    /// the status word, only when a bit is set. Called before every `OpReturn`.
    pub fn flush_status(&mut self) -> R<()> {
        let u = self.u32_ty();
        let acc = self.load(u, self.status_acc)?;
        let zero = self.const_u32(0);
        let bool_ty = self.bool_ty();
        let failed = self.ins(Op::INotEqual, bool_ty, &[acc, zero])?;
        let publish = self.b.id();
        let merge = self.b.id();
        self.b
            .selection_merge(merge, spirv::SelectionControl::NONE)
            .map_err(build_error)?;
        self.b
            .branch_conditional(failed, publish, merge, [])
            .map_err(build_error)?;
        self.b.begin_block(Some(publish)).map_err(build_error)?;
        let ptr_ty = self.pointer(StorageClass::StorageBuffer, u);
        let member = self.const_u32(0);
        let ptr = self
            .b
            .access_chain(ptr_ty, None, self.status_var, [member])
            .map_err(build_error)?;
        let device = self.const_u32(spirv::Scope::Device as u32);
        let relaxed = self.const_u32(spirv::MemorySemantics::RELAXED.bits());
        self.b
            .atomic_or(u, None, ptr, device, relaxed, acc)
            .map_err(build_error)?;
        self.b.branch(merge).map_err(build_error)?;
        self.b.begin_block(Some(merge)).map_err(build_error)?;
        Ok(())
    }
}

/// The value of a float scalar as an f32 if it is an infinity or a NaN. Finiteness is
/// judged in the scalar's own type: an f64 beyond f32's range is finite (it once
/// became ±∞ here, so `fill` f64 with 1e300 wrote inf and masked softmax rows NaN).
fn non_finite(s: Scalar) -> Option<f32> {
    let v = match s {
        Scalar::F16(b) => half::f16::from_bits(b).to_f32(),
        Scalar::Bf16(b) => half::bf16::from_bits(b).to_f32(),
        Scalar::F32(b) => f32::from_bits(b),
        Scalar::F64(b) => {
            let v = f64::from_bits(b);
            return (!v.is_finite()).then_some(v as f32);
        }
        Scalar::Bool(_) | Scalar::I32(_) | Scalar::U32(_) | Scalar::I64(_) => return None,
    };
    (!v.is_finite()).then_some(v)
}

/// bf16 values are computed (f32 registers on the bf16 grid), but there is no bf16
/// memory type: Vulkan 1.1 has no bf16, and 16-bit integer storage would need more
/// capabilities than the target promises.
pub(crate) fn bf16_unsupported() -> CodegenError {
    unsupported(
        "bf16 buffers and shared arrays (Vulkan 1.1 SPIR-V has no bf16 memory type; \
         lower for this target with `bf16: false`)",
    )
}

pub(crate) fn build_error(e: dr::Error) -> CodegenError {
    internal(format!("rspirv builder: {e:?}"))
}
