//! Seeded random inputs that stay inside each op's domain and are never all zeros.
//!
//! Numbers come from the catalogue's own counter RNG ([`crate::rng`]), so a case is
//! the same on every machine: input `k` of a spec, element `i`, seed `s` is
//! `bits(Counter, s, k, i)`.

use crate::rng::{bits, uniform, RngScheme};
use crate::spec::*;
use kernelc_ir::ScalarType;

/// Where the values of one input are drawn from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// Uniform reals in `[lo, hi)`.
    Real(f64, f64),
    /// Reals with magnitude in `[lo, hi)` and a random sign (divisors).
    AwayFromZero(f64, f64),
    /// Uniform integers in `[lo, hi]`.
    Int(i64, i64),
    /// 0 or 1.
    Flag,
}

/// Whether input `name` of `spec` holds indices rather than data.
pub fn is_index(_spec: &OpSpec, name: &str) -> bool {
    matches!(name, "indices" | "targets" | "positions")
}

/// The domain of input `name` (of dtype `dtype`) of `spec`.
pub fn domain(spec: &OpSpec, name: &str, dtype: ScalarType) -> Domain {
    if let Some(range) = index_range(spec, name) {
        return Domain::Int(0, range as i64 - 1);
    }
    if !dtype.is_float() {
        return match dtype {
            ScalarType::Bool => Domain::Flag,
            ScalarType::U32 => Domain::Int(0, 60),
            _ => Domain::Int(-30, 30),
        };
    }
    match spec {
        OpSpec::Unary(s) => match s.func {
            UnaryFn::Log | UnaryFn::Sqrt | UnaryFn::Rsqrt => Domain::Real(0.05, 4.0),
            UnaryFn::Tan => Domain::Real(-1.2, 1.2),
            _ => Domain::Real(-3.0, 3.0),
        },
        OpSpec::Binary(BinarySpec { func, .. }) | OpSpec::Scalar(ScalarSpec { func, .. }) => {
            match (func, name) {
                (BinaryFn::Pow, "a" | "x") => Domain::Real(0.1, 3.0),
                (BinaryFn::Div | BinaryFn::Mod, "b") => Domain::AwayFromZero(0.5, 2.0),
                _ => Domain::Real(-2.0, 2.0),
            }
        }
        OpSpec::Where(_) if name == "cond" => Domain::Flag,
        OpSpec::Cast(_) => Domain::Real(-100.0, 100.0),
        OpSpec::Attention(_) if name == "mask" => Domain::Real(-2.0, 0.0),
        OpSpec::BatchNorm(_) if name == "running_var" => Domain::Real(0.5, 2.0),
        // Saved statistics hold [mean, 1/σ] pairs: keep them positive.
        OpSpec::LayerNormBackward(_) | OpSpec::BatchNormBackward(_)
            if name == "stats" || name == "save" =>
        {
            Domain::Real(0.5, 2.0)
        }
        OpSpec::Adam(_) if name == "v" => Domain::Real(0.0, 1.0),
        OpSpec::ImageFilter(_) => Domain::Real(0.0, 1.0),
        _ => Domain::Real(-2.0, 2.0),
    }
}

/// The number of valid values of an index input, or `None` for data inputs.
fn index_range(spec: &OpSpec, name: &str) -> Option<usize> {
    if !is_index(spec, name) {
        return None;
    }
    Some(
        match spec {
            OpSpec::Gather(s) => s.data.get(s.axis).copied(),
            OpSpec::Scatter(s) => s.data.get(s.axis).copied(),
            OpSpec::CrossEntropy(s) => Some(s.classes),
            OpSpec::Rope(s) => Some(s.max_positions),
            OpSpec::Pool2dBackward(s) => Some(s.height * s.width),
            _ => None,
        }
        .unwrap_or(1)
        .max(1),
    )
}

/// Value `i` of input `k` drawn from `domain`.
fn draw(domain: Domain, seed: u64, k: usize, i: usize) -> f64 {
    let r = bits(RngScheme::Counter, seed, k as u64, i as u32);
    let u = uniform(r);
    match domain {
        Domain::Real(lo, hi) => lo + (hi - lo) * u,
        Domain::AwayFromZero(lo, hi) => {
            let m = lo + (hi - lo) * u;
            if r & 1 == 0 {
                m
            } else {
                -m
            }
        }
        Domain::Int(lo, hi) => (lo + ((u * (hi - lo + 1) as f64) as i64).min(hi - lo)) as f64,
        Domain::Flag => (r & 1) as f64,
    }
}

/// Inputs of `spec` (in `inputs()` order) for `seed`.
pub fn generate(spec: &OpSpec, seed: u64) -> Vec<Vec<f64>> {
    spec.inputs()
        .iter()
        .enumerate()
        .map(|(k, sig)| {
            let d = domain(spec, &sig.name, sig.dtype);
            let mut values: Vec<f64> = (0..sig.numel()).map(|i| draw(d, seed, k, i)).collect();
            // Never all zeros: a kernel that ignores an input must not pass by luck.
            if values.iter().all(|&v| v == 0.0) {
                if let (Some(first), Domain::Real(..) | Domain::AwayFromZero(..) | Domain::Flag) =
                    (values.first_mut(), d)
                {
                    *first = 1.0;
                }
            }
            values
        })
        .collect()
}
