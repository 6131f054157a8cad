//! Numeric building blocks in IR: the compute type of a storage type, typed literals
//! that follow the lane count, loads that widen and stores that narrow, and the few
//! functions several families build on (sigmoid, the normal CDF).

use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// The type arithmetic happens in for values stored as `storage`: f16 and bf16 widen
/// to f32 (one rounding on store), the narrow integers to the `u32`/`i32` a load of
/// them yields (a store wraps the result back), everything else computes in its own
/// type.
pub fn compute_type(storage: ScalarType) -> ScalarType {
    match storage {
        ScalarType::F16 | ScalarType::Bf16 => ScalarType::F32,
        other => other.value_type(),
    }
}

/// The numeric context of one kernel body: compute type and lanes per item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Num {
    pub ty: ScalarType,
    pub lanes: u8,
}

impl Num {
    pub fn scalar(ty: ScalarType) -> Num {
        Num { ty, lanes: 1 }
    }

    /// A literal of the compute type, splat across the lanes.
    pub fn lit(&self, v: f64) -> E {
        let l = lit(self.ty, v);
        if self.lanes == 1 {
            l
        } else {
            l.splat(self.lanes)
        }
    }

    /// `lanes` elements of `mem` (stored as `storage`) from `index`, in the compute type.
    pub fn load(&self, mem: Mem, storage: ScalarType, index: impl Into<E>) -> E {
        self.widen(mem.load(index, self.lanes), storage)
    }

    /// A loaded value of memory of `storage` in the compute type.
    pub fn widen(&self, v: E, storage: ScalarType) -> E {
        if storage.value_type() == self.ty {
            v
        } else {
            v.cast(self.ty)
        }
    }

    /// `v` (f32) rounded to TF32, nearest even, as
    /// [`round_to_tf32`](kernelc_ir::fragment::round_to_tf32) does on its bits (a NaN
    /// quieted, its dropped payload bits cleared).
    /// `v` must be simple (a local or a load): it is used twice.
    pub fn round_to_tf32(&self, v: E) -> E {
        let u32s = Num {
            ty: ScalarType::U32,
            lanes: self.lanes,
        };
        let bits = v.clone().bitcast(ScalarType::U32);
        let kept_lsb = (bits.clone() >> u32s.lit(13.0)) & u32s.lit(1.0);
        let kept = u32s.lit(f64::from(!0x1FFFu32));
        let nan = (bits.clone() | u32s.lit(f64::from(1u32 << 22))) & kept.clone();
        let rounded = (bits + u32s.lit(f64::from(0xFFFu32)) + kept_lsb) & kept;
        v.clone()
            .ne(v)
            .select(nan, rounded)
            .bitcast(ScalarType::F32)
    }

    /// A computed value converted for storage as `storage` ([`for_storage`]).
    pub fn narrow(&self, v: E, storage: ScalarType) -> E {
        for_storage(v, self.ty, storage)
    }

    /// `v` as storing it into memory of `storage` and loading it back gives: a float
    /// rounded to a narrower one, an integer wrapped to a narrower width (narrow
    /// integers live in i32/u32 registers; only a store truncates them).
    pub fn round_trip(&self, v: E, storage: ScalarType) -> E {
        let bits: u32 = match storage {
            ScalarType::I8 | ScalarType::U8 => 8,
            ScalarType::I16 | ScalarType::U16 => 16,
            _ => return self.widen(self.narrow(v, storage), storage),
        };
        let u32s = Num {
            ty: ScalarType::U32,
            lanes: self.lanes,
        };
        if storage.is_signed_int() {
            // Two's complement: the low bits, sign-extended (`>>` of i32 is arithmetic).
            let shift = u32s.lit((32 - bits) as f64);
            (v << shift.clone()) >> shift
        } else {
            v & u32s.lit(((1u64 << bits) - 1) as f64)
        }
    }

    /// A scalar (a uniform parameter) made to match the lanes.
    pub fn splat(&self, e: E) -> E {
        if self.lanes == 1 {
            e
        } else {
            e.splat(self.lanes)
        }
    }

    /// 1 where `cond` holds, 0 elsewhere, in the compute type.
    pub fn indicator(&self, cond: E) -> E {
        cond.select(self.lit(1.0), self.lit(0.0))
    }

    /// `1 / (1 + e^-x)`.
    /// `σ(x)` as `1/(1 + e^{−|x|})`, times `e^{−|x|}` for negative `x`: no overflow
    /// (`1/(1 + e^{−x})` gives 0 once `e^{−x}` overflows, where σ is still a subnormal)
    /// and a few ulps relative on both sides.
    pub fn sigmoid(&self, x: E) -> E {
        let e = (-x.clone().abs()).exp();
        let r = self.lit(1.0) / (self.lit(1.0) + e.clone());
        x.ge(self.lit(0.0)).select(r.clone(), e * r)
    }

    /// `ln(1 + t)` for `t ∈ [0, 1]`, accurate to a few ulps relative even for tiny `t`:
    /// `2·atanh(s) = 2s·(1 + s²/3 + s⁴/5 + …)` with `s = t/(2 + t) ≤ 1/3`, every term
    /// positive, summed by Horner to the type's precision (8 terms for f32, 17 for
    /// f64). The IR has no `log1p`, `ln(1 + t)` loses the digits of a small `t`, and
    /// the usual correction `ln(u)·t/(u − 1)` relies on exact rounding that shader
    /// compilers fold away (llvmpipe turns `(1 + t) − 1` into `t`).
    pub fn log1p_unit(&self, f: &mut Body, t: E) -> E {
        let t = bind(f, "t", t);
        let s = f.let_("s", t.clone() / (self.lit(2.0) + t));
        let w = f.let_("s2", s.clone() * s.clone());
        let terms = if self.ty == ScalarType::F64 { 17 } else { 8 };
        let mut p = self.lit(1.0 / (2 * terms - 1) as f64);
        for k in (0..terms - 1).rev() {
            p = p * w.clone() + self.lit(1.0 / (2 * k + 1) as f64);
        }
        self.lit(2.0) * s * p
    }

    /// `Φ(x) = ½(1 + erf(x/√2))`, the standard normal CDF.
    pub fn normal_cdf(&self, x: E) -> E {
        self.lit(0.5) * (self.lit(1.0) + (x * self.lit(std::f64::consts::FRAC_1_SQRT_2)).erf())
    }
}

/// `v`, a value of type `from`, as a store into memory of `storage` takes it: converted
/// with `Cast` semantics to `storage.value_type()`. A float bound for a narrow integer
/// goes through `i32` (truncated toward zero, saturated, NaN → 0; the store then keeps
/// the low bits), which is the conversion `Scalar::from_f64` defines for narrow types
/// and what C's conversion through `int` gives on x86 (ONNX Runtime's `Cast`).
pub fn for_storage(v: E, from: ScalarType, storage: ScalarType) -> E {
    let to = storage.value_type();
    if from == to {
        return v;
    }
    if storage.is_storage_only() && from.is_float() {
        let i = v.cast(ScalarType::I32);
        return if to == ScalarType::I32 { i } else { i.cast(to) };
    }
    v.cast(to)
}

/// `e` itself if it is a local or a literal, else a new local holding it, so that a
/// formula can use it several times without computing it several times.
pub fn bind(f: &mut Body, name: &str, e: E) -> E {
    match e.expr() {
        kernelc_ir::Expr::Local(_) | kernelc_ir::Expr::Lit(_) => e,
        _ => f.let_(name, e),
    }
}
