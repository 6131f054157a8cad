//! `Cast`: value conversion with the interpreter's rounding and saturation.
//!
//! Float -> int truncates and saturates, NaN -> 0 (Cranelift's `fcvt_to_*_sat`);
//! int -> float and float -> narrower float round to nearest even; -> bool is `!= 0`
//! (NaN -> true). Every route matches `kernelc_ir::eval::cast_scalar` exactly; the
//! conversions to f16/bf16 from anything but f32 and themselves go through f64 and the
//! `half` crate, as there.

use super::value::Val;
use super::Lower;
use crate::cpu::repr::scalar_clif;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_module::Module;
use kernelc_ir::ScalarType::{self, *};

impl<M: Module> Lower<'_, '_, M> {
    pub(crate) fn cast(&mut self, to: ScalarType, a: &Val) -> Result<Val, CodegenError> {
        let from = a.ty.scalar;
        let ty = a.ty.with_scalar(to);
        if from == to {
            return Ok(Val {
                ty,
                repr: a.repr.clone(),
            });
        }
        if scalar_clif(from) == scalar_clif(to) && from.is_int() && to.is_int() {
            // i32 <-> u32: the same bits.
            let values = self.canonical(a);
            return Ok(self.rebuild(ty, values));
        }
        if let Some(v) = self.packed_cast(from, to, a) {
            return Ok(Val { ty, repr: v.repr });
        }
        let lanes = self.lanes_of(a);
        let mut out = Vec::with_capacity(lanes.len());
        for x in lanes {
            out.push(self.cast_scalar(from, to, x)?);
        }
        Ok(Val::lanes(ty, out))
    }

    /// f32x4 <-> i32x4 on SIMD chunks.
    fn packed_cast(&mut self, from: ScalarType, to: ScalarType, a: &Val) -> Option<Val> {
        let chunk = match (from, to) {
            (I32, F32) => types::F32X4,
            (F32, I32) => types::I32X4,
            _ => return None,
        };
        self.layout(a.ty.with_scalar(to))?;
        let chunks = self.packed_of(a)?;
        let out = chunks
            .into_iter()
            .map(|c| {
                if to == F32 {
                    self.b.ins().fcvt_from_sint(chunk, c)
                } else {
                    self.b.ins().fcvt_to_sint_sat(chunk, c)
                }
            })
            .collect();
        Some(Val::packed(a.ty, out))
    }

    /// One lane from `from` to `to` (different types).
    fn cast_scalar(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: Value,
    ) -> Result<Value, CodegenError> {
        if to == Bool {
            return Ok(self.cast_to_bool(from, x));
        }
        if from == Bool {
            return self.cast_from_bool(to, x);
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => Ok(self.int_to_int(from, to, x)),
            (false, true) => self.int_to_float(from, to, x),
            (true, false) => Ok(self.float_to_int(from, to, x)),
            (true, true) => self.float_to_float(from, to, x),
        }
    }

    fn cast_to_bool(&mut self, from: ScalarType, x: Value) -> Value {
        match from {
            F32 | F64 | F16 | Bf16 => {
                let v = self.widen_float(from, x);
                let zero = if from == F64 {
                    self.b.ins().f64const(0.0)
                } else {
                    self.b.ins().f32const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, v, zero)
            }
            _ => self.b.ins().icmp_imm_u(IntCC::NotEqual, x, 0),
        }
    }

    fn cast_from_bool(&mut self, to: ScalarType, x: Value) -> Result<Value, CodegenError> {
        Ok(match to {
            I32 | U32 => self.b.ins().uextend(types::I32, x),
            I64 => self.b.ins().uextend(types::I64, x),
            F32 | F64 => {
                let w = self.b.ins().uextend(types::I32, x);
                self.b.ins().fcvt_from_sint(scalar_clif(to), w)
            }
            F16 | Bf16 => {
                let one = if to == F16 { 0x3C00 } else { 0x3F80 };
                let one = self.iconst(types::I16, one);
                let zero = self.iconst(types::I16, 0);
                self.b.ins().select(x, one, zero)
            }
            Bool => x,
            // The validator refuses casts to storage types.
            U8 | I8 | U16 | I16 => return Err(super::internal(format!("a cast to {to}"))),
        })
    }

    fn int_to_int(&mut self, from: ScalarType, to: ScalarType, x: Value) -> Value {
        match (from, to) {
            (I64, _) => self.b.ins().ireduce(types::I32, x),
            (I32, I64) => self.b.ins().sextend(types::I64, x),
            (_, I64) => self.b.ins().uextend(types::I64, x),
            // i32 <-> u32
            _ => x,
        }
    }

    fn int_to_float(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: Value,
    ) -> Result<Value, CodegenError> {
        let convert = |l: &mut Self, t| {
            if from == U32 {
                l.b.ins().fcvt_from_uint(t, x)
            } else {
                l.b.ins().fcvt_from_sint(t, x)
            }
        };
        Ok(match to {
            F32 => convert(self, types::F32),
            F64 => convert(self, types::F64),
            // Via f64, as the interpreter (exact for i32/u32, rounded for i64).
            _ => {
                let wide = convert(self, types::F64);
                return self.f64_to_narrow(to, wide);
            }
        })
    }

    fn float_to_int(&mut self, from: ScalarType, to: ScalarType, x: Value) -> Value {
        let v = self.widen_float(from, x);
        match to {
            U32 => self.b.ins().fcvt_to_uint_sat(types::I32, v),
            I64 => self.b.ins().fcvt_to_sint_sat(types::I64, v),
            _ => self.b.ins().fcvt_to_sint_sat(types::I32, v),
        }
    }

    fn float_to_float(
        &mut self,
        from: ScalarType,
        to: ScalarType,
        x: Value,
    ) -> Result<Value, CodegenError> {
        if from == F64 {
            return Ok(match to {
                F32 => self.b.ins().fdemote(types::F32, x),
                _ => return self.f64_to_narrow(to, x),
            });
        }
        // f32, f16 and bf16 all widen exactly to f32.
        let v = self.widen_float(from, x);
        Ok(match to {
            F64 => self.b.ins().fpromote(types::F64, v),
            F32 => v,
            _ => self.narrow_float(to, v),
        })
    }
}
