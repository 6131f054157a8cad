//! Float `%` (C `fmod`), exactly, as helper functions of the module.
//!
//! Vulkan only promises `OpFRem` the precision of `x - y * trunc(x / y)`, which is
//! wrong whenever `x / y` rounds (an NVIDIA H100 fails the conformance case
//! `binary_mod` with it); the IR's `%` is C `fmod`, which is exact (docs/semantics.md).
//! So kernelc computes it as musl's `fmodf`/`fmod` do, by an integer long division of
//! the significands (the same algorithm as the WGSL and PTX emitters' `fmod`):
//!
//! 1. `y == 0`, `y` NaN, `x` infinite or NaN: NaN. `|x| < |y|`: `x`. `|x| == |y|`:
//!    zero with the sign of `x`.
//! 2. Both significands are normalised to `[2^M, 2^(M+1))` (`M` = 23 or 52;
//!    subnormals shifted up, their exponents going below 1); for each exponent step
//!    from `ex` down to `ey` the divisor is subtracted when it fits and the remainder
//!    is doubled; a last subtraction at `ey` leaves the remainder `< my`.
//! 3. A zero remainder is a zero with the sign of `x`; otherwise it is renormalised
//!    and packed (as a subnormal when its exponent is below 1: the shift loses no
//!    bits, as the result is representable), with the sign of `x`.
//!
//! Everything is integer arithmetic on the bit patterns (`u32` for f32, `u64` for f64,
//! which needs `Int64`; exponents in `i32`/`i64`): no float operation that could be
//! rounded, flushed or contracted. The loop runs `ex - ey` times (at most 277 for f32,
//! 2100 for f64).
//!
//! The helpers are `OpFunction`s `(float, float) -> float`, defined only for the widths
//! the kernel's `%` uses: a call reserves the function's id ([`Emitter::fmod_call`]),
//! and [`define_reserved`] builds the bodies after the entry point and moves them in
//! front of it, so every `OpFunctionCall` refers back to a defined function. f16 and
//! bf16 values (f32 registers on their grid) use the f32 helper: the exact remainder
//! of two values of a grid is on that grid. Vectors call the helper per lane.
//!
//! Structured control flow only: early returns are selection constructs, the loop
//! keeps its state in `Function` variables (no phis), as in [`super::stmt`].

use super::emitter::{build_error, Emitter, Glsl, R};
use super::internal;
use rspirv::spirv::{FunctionControl, LoopControl, Op, SelectionControl, Word};

/// A float width with an `fmod` helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    F32,
    F64,
}

impl Width {
    const ALL: [Width; 2] = [Width::F32, Width::F64];

    fn slot(self) -> usize {
        match self {
            Width::F32 => 0,
            Width::F64 => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Width::F32 => "kernelc_fmod_f32",
            Width::F64 => "kernelc_fmod_f64",
        }
    }

    /// Total bits.
    fn bits(self) -> u32 {
        match self {
            Width::F32 => 32,
            Width::F64 => 64,
        }
    }

    /// Explicit significand bits (`M`).
    fn mantissa(self) -> u32 {
        match self {
            Width::F32 => 23,
            Width::F64 => 52,
        }
    }

    fn sign(self) -> u64 {
        1 << (self.bits() - 1)
    }

    fn abs_mask(self) -> u64 {
        self.sign() - 1
    }

    /// The bits of +infinity: anything above (in magnitude) is a NaN.
    fn infinity(self) -> u64 {
        self.abs_mask() & !self.significand_mask()
    }

    fn significand_mask(self) -> u64 {
        (1 << self.mantissa()) - 1
    }

    fn implicit_one(self) -> u64 {
        1 << self.mantissa()
    }

    fn quiet_nan(self) -> u64 {
        self.infinity() | (1 << (self.mantissa() - 1))
    }
}

/// The register types of one helper.
#[derive(Clone, Copy)]
struct Types {
    width: Width,
    float: Word,
    /// Unsigned integer of the float's width (the bit pattern).
    bits: Word,
    /// Signed integer of the float's width (exponents, which go below zero).
    exp: Word,
    u32: Word,
    bool: Word,
}

impl Emitter<'_> {
    /// `fmod(x, y)` of two scalars of `width` (f32 registers for f32/f16/bf16): a
    /// call of the helper, whose id is reserved on first use.
    pub(crate) fn fmod_call(&mut self, width: Width, float: Word, x: Word, y: Word) -> R<Word> {
        let function = match self.fmod_fns[width.slot()] {
            Some(id) => id,
            None => {
                let id = self.b.id();
                self.fmod_fns[width.slot()] = Some(id);
                id
            }
        };
        self.b
            .function_call(float, None, function, [x, y])
            .map_err(build_error)
    }

    fn types(&mut self, width: Width) -> R<Types> {
        let (float, bits, exp) = match width {
            Width::F32 => (self.f32_ty(), self.u32_ty(), self.i32_ty()),
            Width::F64 => {
                let float = self.reg_scalar(kernelc_ir::ScalarType::F64)?;
                let exp = self.reg_scalar(kernelc_ir::ScalarType::I64)?;
                (float, self.u64_ty(), exp)
            }
        };
        Ok(Types {
            width,
            float,
            bits,
            exp,
            u32: self.u32_ty(),
            bool: self.bool_ty(),
        })
    }

    fn bits_const(&mut self, t: Types, v: u64) -> Word {
        self.const_bits(t.bits, v, t.width == Width::F64)
    }

    fn exp_const(&mut self, t: Types, v: u32) -> Word {
        self.const_bits(t.exp, v as u64, t.width == Width::F64)
    }

    /// `if cond { return value; }` as a selection construct; continues in its merge
    /// block.
    fn return_if(&mut self, cond: Word, value: Word) -> R<()> {
        let then_l = self.b.id();
        let merge = self.b.id();
        self.b
            .selection_merge(merge, SelectionControl::NONE)
            .map_err(build_error)?;
        self.b
            .branch_conditional(cond, then_l, merge, [])
            .map_err(build_error)?;
        self.b.begin_block(Some(then_l)).map_err(build_error)?;
        self.b.ret_value(value).map_err(build_error)?;
        self.b.begin_block(Some(merge)).map_err(build_error)?;
        Ok(())
    }

    /// A non-negative u32 (a shift) as an exponent.
    fn u32_to_exp(&mut self, t: Types, v: Word) -> R<Word> {
        let wide = match t.width {
            Width::F32 => v,
            Width::F64 => self.ins(Op::UConvert, t.bits, &[v])?,
        };
        self.ins(Op::Bitcast, t.exp, &[wide])
    }

    /// The index of the highest set bit of a nonzero bit pattern, as a u32.
    /// GLSL.std.450's `FindUMsb` takes 32-bit integers only: a u64 is split.
    fn msb(&mut self, t: Types, v: Word) -> R<Word> {
        if t.width == Width::F32 {
            return self.glsl(Glsl::FindUMsb, t.u32, &[v]);
        }
        let c32 = self.const_u32(32);
        let high64 = self.ins(Op::ShiftRightLogical, t.bits, &[v, c32])?;
        let high = self.ins(Op::UConvert, t.u32, &[high64])?;
        let low = self.ins(Op::UConvert, t.u32, &[v])?;
        let high_msb = self.glsl(Glsl::FindUMsb, t.u32, &[high])?;
        let high_msb = self.ins(Op::IAdd, t.u32, &[high_msb, c32])?;
        let low_msb = self.glsl(Glsl::FindUMsb, t.u32, &[low])?;
        let zero = self.const_u32(0);
        let in_high = self.ins(Op::INotEqual, t.bool, &[high, zero])?;
        self.ins(Op::Select, t.u32, &[in_high, high_msb, low_msb])
    }

    /// `M - msb(m)`: the left shift (u32) that brings the leading one of a nonzero
    /// significand below `2^(M+1)` to bit `M`.
    fn leading_shift(&mut self, t: Types, m: Word) -> R<Word> {
        let msb = self.msb(t, m)?;
        let top = self.const_u32(t.width.mantissa());
        self.ins(Op::ISub, t.u32, &[top, msb])
    }

    /// The normalised significand (implicit one at bit `M`) and exponent of a nonzero
    /// magnitude `a` (subnormals shifted up, their exponents going below 1).
    fn normalise(&mut self, t: Types, a: Word) -> R<(Word, Word)> {
        let m_shift = self.const_u32(t.width.mantissa());
        let field = self.ins(Op::ShiftRightLogical, t.bits, &[a, m_shift])?;
        let mask = self.bits_const(t, t.width.significand_mask());
        let frac = self.ins(Op::BitwiseAnd, t.bits, &[a, mask])?;
        let zero = self.bits_const(t, 0);
        let subnormal = self.ins(Op::IEqual, t.bool, &[field, zero])?;
        let implicit = self.bits_const(t, t.width.implicit_one());
        let with_one = self.ins(Op::BitwiseOr, t.bits, &[frac, implicit])?;
        let m_raw = self.ins(Op::Select, t.bits, &[subnormal, frac, with_one])?;
        let one = self.bits_const(t, 1);
        let e_raw = self.ins(Op::Select, t.bits, &[subnormal, one, field])?;
        let e_raw = self.ins(Op::Bitcast, t.exp, &[e_raw])?;
        let shift = self.leading_shift(t, m_raw)?;
        let m = self.ins(Op::ShiftLeftLogical, t.bits, &[m_raw, shift])?;
        let shift_e = self.u32_to_exp(t, shift)?;
        let e = self.ins(Op::ISub, t.exp, &[e_raw, shift_e])?;
        Ok((m, e))
    }

    /// Builds the body of the helper of `width` under the reserved id `function`.
    fn define_fmod(&mut self, width: Width, function: Word) -> R<()> {
        let t = self.types(width)?;
        let fn_ty = self.b.type_function(t.float, [t.float, t.float]);
        self.b
            .begin_function(t.float, Some(function), FunctionControl::NONE, fn_ty)
            .map_err(build_error)?;
        self.b.name(function, width.name());
        let x = self.b.function_parameter(t.float).map_err(build_error)?;
        let y = self.b.function_parameter(t.float).map_err(build_error)?;
        self.b.begin_block(None).map_err(build_error)?;
        let m_var = self.function_var(t.bits)?;
        let e_var = self.function_var(t.exp)?;

        let ux = self.ins(Op::Bitcast, t.bits, &[x])?;
        let uy = self.ins(Op::Bitcast, t.bits, &[y])?;
        let sign = self.bits_const(t, width.sign());
        let sx = self.ins(Op::BitwiseAnd, t.bits, &[ux, sign])?;
        let abs = self.bits_const(t, width.abs_mask());
        let ax = self.ins(Op::BitwiseAnd, t.bits, &[ux, abs])?;
        let ay = self.ins(Op::BitwiseAnd, t.bits, &[uy, abs])?;
        let signed_zero = self.ins(Op::Bitcast, t.float, &[sx])?;

        // y == 0, y NaN, x infinite or NaN: NaN (from its bits: naga's SPIR-V front
        // end wants finite constants).
        let zero = self.bits_const(t, 0);
        let inf = self.bits_const(t, width.infinity());
        let y_zero = self.ins(Op::IEqual, t.bool, &[ay, zero])?;
        let y_nan = self.ins(Op::UGreaterThan, t.bool, &[ay, inf])?;
        let x_special = self.ins(Op::UGreaterThanEqual, t.bool, &[ax, inf])?;
        let bad = self.ins(Op::LogicalOr, t.bool, &[y_zero, y_nan])?;
        let bad = self.ins(Op::LogicalOr, t.bool, &[bad, x_special])?;
        let nan_bits = self.bits_const(t, width.quiet_nan());
        let nan = self.ins(Op::Bitcast, t.float, &[nan_bits])?;
        self.return_if(bad, nan)?;

        // |x| <= |y|: x itself, or a zero with x's sign when they are equal.
        let small = self.ins(Op::ULessThanEqual, t.bool, &[ax, ay])?;
        let same = self.ins(Op::IEqual, t.bool, &[ax, ay])?;
        let r_small = self.ins(Op::Select, t.float, &[same, signed_zero, x])?;
        self.return_if(small, r_small)?;

        let (mx, ex) = self.normalise(t, ax)?;
        let (my, ey) = self.normalise(t, ay)?;
        self.store(m_var, mx)?;
        self.store(e_var, ex)?;
        self.long_division(t, m_var, e_var, my, ey)?;

        let m = self.load(t.bits, m_var)?;
        let exact = self.ins(Op::IEqual, t.bool, &[m, zero])?;
        self.return_if(exact, signed_zero)?;
        let packed = self.pack(t, m, ey)?;
        let bits = self.ins(Op::BitwiseOr, t.bits, &[packed, sx])?;
        let r = self.ins(Op::Bitcast, t.float, &[bits])?;
        self.b.ret_value(r).map_err(build_error)?;
        self.b.end_function().map_err(build_error)
    }

    /// The loop: `m = m >= my ? m - my : m`, then while `e > ey`: `m <<= 1; e -= 1`
    /// and again. Leaves the remainder (`< my`) in `m_var`.
    fn long_division(&mut self, t: Types, m_var: Word, e_var: Word, my: Word, ey: Word) -> R<()> {
        let header = self.b.id();
        let body = self.b.id();
        let cont = self.b.id();
        let merge = self.b.id();
        self.b.branch(header).map_err(build_error)?;

        self.b.begin_block(Some(header)).map_err(build_error)?;
        let m = self.load(t.bits, m_var)?;
        let fits = self.ins(Op::UGreaterThanEqual, t.bool, &[m, my])?;
        let diff = self.ins(Op::ISub, t.bits, &[m, my])?;
        let reduced = self.ins(Op::Select, t.bits, &[fits, diff, m])?;
        self.store(m_var, reduced)?;
        let e = self.load(t.exp, e_var)?;
        let more = self.ins(Op::SGreaterThan, t.bool, &[e, ey])?;
        self.b
            .loop_merge(merge, cont, LoopControl::NONE, [])
            .map_err(build_error)?;
        self.b
            .branch_conditional(more, body, merge, [])
            .map_err(build_error)?;

        self.b.begin_block(Some(body)).map_err(build_error)?;
        self.b.branch(cont).map_err(build_error)?;

        self.b.begin_block(Some(cont)).map_err(build_error)?;
        let m = self.load(t.bits, m_var)?;
        let one = self.const_u32(1);
        let doubled = self.ins(Op::ShiftLeftLogical, t.bits, &[m, one])?;
        self.store(m_var, doubled)?;
        let e = self.load(t.exp, e_var)?;
        let one_e = self.exp_const(t, 1);
        let lower = self.ins(Op::ISub, t.exp, &[e, one_e])?;
        self.store(e_var, lower)?;
        self.b.branch(header).map_err(build_error)?;

        self.b.begin_block(Some(merge)).map_err(build_error)?;
        Ok(())
    }

    /// The magnitude bits of a nonzero remainder `m` (`< 2^(M+1)`) at exponent `ey`:
    /// renormalised, then a normal number or (exponent below 1) a subnormal.
    fn pack(&mut self, t: Types, m: Word, ey: Word) -> R<Word> {
        let width = t.width;
        let shift = self.leading_shift(t, m)?;
        let m = self.ins(Op::ShiftLeftLogical, t.bits, &[m, shift])?;
        let shift_e = self.u32_to_exp(t, shift)?;
        let e = self.ins(Op::ISub, t.exp, &[ey, shift_e])?;
        // Normal: the significand without its implicit one, the exponent above it.
        let mask = self.bits_const(t, width.significand_mask());
        let frac = self.ins(Op::BitwiseAnd, t.bits, &[m, mask])?;
        let e_bits = self.ins(Op::Bitcast, t.bits, &[e])?;
        let m_shift = self.const_u32(width.mantissa());
        let e_bits = self.ins(Op::ShiftLeftLogical, t.bits, &[e_bits, m_shift])?;
        let normal = self.ins(Op::BitwiseOr, t.bits, &[frac, e_bits])?;
        // Subnormal: shifted down by `1 - e` (clamped to a valid shift; the value is
        // only used when `e <= 0`, where `1 - e` is at most M + 1).
        let one = self.exp_const(t, 1);
        let down = self.ins(Op::ISub, t.exp, &[one, e])?;
        let down = self.ins(Op::Bitcast, t.bits, &[down])?;
        let top = self.bits_const(t, (width.bits() - 1) as u64);
        let in_range = self.ins(Op::ULessThan, t.bool, &[down, top])?;
        let down = self.ins(Op::Select, t.bits, &[in_range, down, top])?;
        let down = match width {
            Width::F32 => down,
            Width::F64 => self.ins(Op::UConvert, t.u32, &[down])?,
        };
        let subnormal = self.ins(Op::ShiftRightLogical, t.bits, &[m, down])?;
        let zero_e = self.exp_const(t, 0);
        let is_normal = self.ins(Op::SGreaterThan, t.bool, &[e, zero_e])?;
        self.ins(Op::Select, t.bits, &[is_normal, normal, subnormal])
    }
}

/// Defines the helpers whose ids calls reserved, after the entry point (no function is
/// being built), then moves them in front of it.
pub(crate) fn define_reserved(e: &mut Emitter) -> R<()> {
    let before = e.b.module_ref().functions.len();
    for width in Width::ALL {
        if let Some(function) = e.fmod_fns[width.slot()] {
            e.define_fmod(width, function)?;
        }
    }
    let functions = &mut e.b.module_mut().functions;
    if before == 0 || functions.len() < before {
        return Err(internal("fmod helpers defined before the entry point"));
    }
    // [entry point, helpers...] -> [helpers..., entry point].
    functions[before - 1..].rotate_left(1);
    Ok(())
}
