//! Numeric building blocks in IR: the compute type of a storage type, typed literals
//! that follow the lane count, and the activation functions with their derivatives.
//! Op families call these so that each formula is written once.

use crate::spec::UnaryFn;
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// The type arithmetic happens in for values stored as `storage`: f16 and bf16 widen
/// to f32 (one rounding on store), everything else computes in its own type.
pub fn compute_type(storage: ScalarType) -> ScalarType {
    match storage {
        ScalarType::F16 | ScalarType::Bf16 => ScalarType::F32,
        other => other,
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

    /// A stored value in the compute type.
    pub fn widen(&self, v: E, storage: ScalarType) -> E {
        if storage == self.ty {
            v
        } else {
            v.cast(self.ty)
        }
    }

    /// A computed value converted for storage as `storage`.
    pub fn narrow(&self, v: E, storage: ScalarType) -> E {
        if storage == self.ty {
            v
        } else {
            v.cast(storage)
        }
    }

    /// 1 where `cond` holds, 0 elsewhere, in the compute type.
    pub fn indicator(&self, cond: E) -> E {
        cond.select(self.lit(1.0), self.lit(0.0))
    }

    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(&self, x: E) -> E {
        self.lit(1.0) / (self.lit(1.0) + (-x).exp())
    }

    /// `Φ(x) = ½(1 + erf(x/√2))`, the standard normal CDF.
    fn normal_cdf(&self, x: E) -> E {
        self.lit(0.5) * (self.lit(1.0) + (x * self.lit(std::f64::consts::FRAC_1_SQRT_2)).erf())
    }

    /// The tanh-GELU inner argument `√(2/π)(x + 0.044715x³)`.
    fn gelu_tanh_arg(&self, x: &E) -> E {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        self.lit(k) * (x + self.lit(0.044715) * x * x * x)
    }

    /// `f(x)` for a unary function. Subexpressions used twice are bound to locals.
    pub fn unary(&self, f: &mut Body, func: UnaryFn, x: E) -> E {
        let x = bind(f, "x", x);
        match func {
            UnaryFn::Neg => -x,
            UnaryFn::Abs => x.abs(),
            UnaryFn::Sqrt => x.sqrt(),
            UnaryFn::Rsqrt => x.rsqrt(),
            UnaryFn::Exp => x.exp(),
            UnaryFn::Log => x.log(),
            UnaryFn::Sin => x.sin(),
            UnaryFn::Cos => x.cos(),
            UnaryFn::Tan => x.clone().sin() / x.cos(),
            UnaryFn::Floor => x.floor(),
            UnaryFn::Ceil => x.ceil(),
            UnaryFn::Round => x.round(),
            // NaN stays NaN: only a number greater than zero passes through.
            UnaryFn::Relu => x.clone().lt(self.lit(0.0)).select(self.lit(0.0), x),
            UnaryFn::LeakyRelu { slope } => x
                .clone()
                .gt(self.lit(0.0))
                .select(x.clone(), self.lit(slope) * x),
            UnaryFn::Sigmoid => self.sigmoid(x),
            UnaryFn::Tanh => x.tanh(),
            UnaryFn::GeluErf => x.clone() * self.normal_cdf(x),
            UnaryFn::GeluTanh => {
                let t = f.let_("t", self.gelu_tanh_arg(&x).tanh());
                self.lit(0.5) * x * (self.lit(1.0) + t)
            }
            UnaryFn::Silu => x.clone() * self.sigmoid(x),
        }
    }

    /// `dx = f'(·) dy` for an activation, from its saved tensor (`x` or `y`).
    pub fn activation_backward(&self, f: &mut Body, func: UnaryFn, saved: E, dy: E) -> E {
        let saved = bind(f, "saved", saved);
        let one = || self.lit(1.0);
        let grad = match func {
            UnaryFn::Relu => self.indicator(saved.gt(self.lit(0.0))),
            UnaryFn::LeakyRelu { slope } => saved.gt(self.lit(0.0)).select(one(), self.lit(slope)),
            // Saved output y: σ' = y(1 - y), tanh' = 1 - y².
            UnaryFn::Sigmoid => saved.clone() * (one() - saved),
            UnaryFn::Tanh => one() - saved.clone() * saved,
            UnaryFn::GeluErf => {
                let pdf = (self.lit(-0.5) * &saved * &saved).exp()
                    * self.lit(1.0 / (2.0 * std::f64::consts::PI).sqrt());
                self.normal_cdf(saved.clone()) + saved * pdf
            }
            UnaryFn::GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                let t = f.let_("t", self.gelu_tanh_arg(&saved).tanh());
                let du = self.lit(k) * (one() + self.lit(3.0 * 0.044715) * &saved * &saved);
                self.lit(0.5) * (one() + &t) + self.lit(0.5) * saved * (one() - &t * &t) * du
            }
            UnaryFn::Silu => {
                let s = f.let_("s", self.sigmoid(saved.clone()));
                s.clone() * (one() + saved * (one() - s))
            }
            // Not activations: the spec validator rejects them before lowering.
            _ => one(),
        };
        grad * dy
    }
}

/// `e` itself if it is a local or a literal, else a new local holding it, so that a
/// formula can use it several times without computing it several times.
pub fn bind(f: &mut Body, name: &str, e: E) -> E {
    match e.expr() {
        kernelc_ir::Expr::Local(_) | kernelc_ir::Expr::Lit(_) => e,
        _ => f.let_(name, e),
    }
}
