//! Lowered values and the conversions between their representations.

use super::Lower;
use crate::cpu::repr::{packed_layout, scalar_clif};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_module::Module;
use kernelc_ir::{ScalarType, Type};

/// How the lanes of a lowered value are held (see [`crate::cpu::repr`]).
#[derive(Clone, Debug)]
pub(crate) enum Repr {
    /// One CLIF scalar per lane.
    Lanes(Vec<Value>),
    /// SIMD chunks of the type's packed layout.
    Packed(Vec<Value>),
    /// A bool vector as comparison masks: integer SIMD chunks whose lanes are all ones
    /// (true) or zero (false), shaped like the compared operands.
    Mask(Vec<Value>),
}

/// A lowered IR value: its IR type and its CLIF values.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub ty: Type,
    pub repr: Repr,
}

impl Val {
    pub fn scalar(ty: ScalarType, v: Value) -> Val {
        Val {
            ty: Type::scalar(ty),
            repr: Repr::Lanes(vec![v]),
        }
    }

    pub fn lanes(ty: Type, lanes: Vec<Value>) -> Val {
        Val {
            ty,
            repr: Repr::Lanes(lanes),
        }
    }

    pub fn packed(ty: Type, chunks: Vec<Value>) -> Val {
        Val {
            ty,
            repr: Repr::Packed(chunks),
        }
    }
}

impl<M: Module> Lower<'_, '_, M> {
    /// The packed layout of `ty` on this target, if it has one.
    pub(crate) fn layout(&self, ty: Type) -> Option<(cranelift_codegen::ir::Type, usize)> {
        if ty.lanes == 1 {
            return None;
        }
        packed_layout(ty, self.features.simd)
    }

    /// The lanes of `v` as CLIF scalars.
    pub(crate) fn lanes_of(&mut self, v: &Val) -> Vec<Value> {
        match &v.repr {
            Repr::Lanes(l) => l.clone(),
            Repr::Packed(chunks) => {
                let mut out = Vec::with_capacity(v.ty.lanes as usize);
                for &c in chunks {
                    let n = self.b.func.dfg.value_type(c).lane_count();
                    for i in 0..n {
                        out.push(self.b.ins().extractlane(c, i as u8));
                    }
                }
                out
            }
            Repr::Mask(chunks) => {
                let mut out = Vec::with_capacity(v.ty.lanes as usize);
                for &c in chunks {
                    let n = self.b.func.dfg.value_type(c).lane_count();
                    for i in 0..n {
                        let lane = self.b.ins().extractlane(c, i as u8);
                        out.push(self.b.ins().icmp_imm_u(
                            cranelift_codegen::ir::condcodes::IntCC::NotEqual,
                            lane,
                            0,
                        ));
                    }
                }
                out
            }
        }
    }

    /// The one lane of a scalar value.
    pub(crate) fn scalar_of(&mut self, v: &Val) -> Value {
        match &v.repr {
            Repr::Lanes(l) if !l.is_empty() => l[0],
            _ => self.lanes_of(v)[0],
        }
    }

    /// The SIMD chunks of `v`, if its type has a packed layout.
    pub(crate) fn packed_of(&mut self, v: &Val) -> Option<Vec<Value>> {
        let (chunk, n) = self.layout(v.ty)?;
        match &v.repr {
            Repr::Packed(c) => Some(c.clone()),
            Repr::Mask(_) => None,
            Repr::Lanes(lanes) => {
                let per = chunk.lane_count() as usize;
                let mut out = Vec::with_capacity(n);
                for part in lanes.chunks(per) {
                    let mut vec = self.b.ins().scalar_to_vector(chunk, part[0]);
                    for (i, &lane) in part.iter().enumerate().skip(1) {
                        vec = self.b.ins().insertlane(vec, lane, i as u8);
                    }
                    out.push(vec);
                }
                Some(out)
            }
        }
    }

    /// `v` in the canonical representation of its type: packed where the type has a
    /// layout, lane-wise otherwise (locals hold this form).
    pub(crate) fn canonical(&mut self, v: &Val) -> Vec<Value> {
        match self.packed_of(v) {
            Some(c) => c,
            None => self.lanes_of(v),
        }
    }

    /// The CLIF types of the canonical representation of `ty`.
    pub(crate) fn canonical_types(&self, ty: Type) -> Vec<cranelift_codegen::ir::Type> {
        match self.layout(ty) {
            Some((chunk, n)) => vec![chunk; n],
            None => vec![scalar_clif(ty.scalar); ty.lanes as usize],
        }
    }

    /// Rebuilds a value of type `ty` from its canonical CLIF values.
    pub(crate) fn rebuild(&self, ty: Type, values: Vec<Value>) -> Val {
        match self.layout(ty) {
            Some(_) => Val::packed(ty, values),
            None => Val::lanes(ty, values),
        }
    }

    /// The zero of one CLIF type (scalar or vector).
    pub(crate) fn zero_of(&mut self, ty: cranelift_codegen::ir::Type) -> Value {
        if ty.is_vector() {
            let lane = self.zero_of(ty.lane_type());
            return self.b.ins().splat(ty, lane);
        }
        match ty {
            types::F32 => self.b.ins().f32const(0.0),
            types::F64 => self.b.ins().f64const(0.0),
            int => self.b.ins().iconst(int, 0),
        }
    }
}
