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
    // Cross-entropy targets include one id past each end (-1 where the dtype has it):
    // out-of-range targets give NaN loss and no one-hot term.
    if let OpSpec::CrossEntropy(s) = spec {
        if name == "targets" {
            let lo = if s.index_dtype == ScalarType::U32 {
                0
            } else {
                -1
            };
            return Domain::Int(lo, s.classes as i64);
        }
    }
    if let Some(d) = lookup_index_domain(spec, name, dtype) {
        return d;
    }
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
            if let Some(v) = pool_indices(spec, sig, seed, k) {
                return v;
            }
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

/// Indices of max-pool backward. With a window they are what the forward writes: each
/// output's index is a random in-image element of its own window (`iy·W + ix`).
/// Without one any value is routed by the reference: some reach past both ends of the
/// plane (skipped), and f32 ones are fractional (truncated toward zero).
fn pool_indices(spec: &OpSpec, sig: &TensorSig, seed: u64, k: usize) -> Option<Vec<f64>> {
    let OpSpec::Pool2dBackward(s) = spec else {
        return None;
    };
    if sig.name != "indices" || s.kind != PoolKind::Max {
        return None;
    }
    let Some(w) = s.window else {
        let len = (s.height * s.width) as i64;
        let d = match sig.dtype {
            ScalarType::F32 => Domain::Real(-2.0, len as f64 + 2.0),
            ScalarType::U32 => Domain::Int(0, len + 1),
            _ => Domain::Int(-2, len + 1),
        };
        return Some((0..sig.numel()).map(|i| draw(d, seed, k, i)).collect());
    };
    // The in-image range of output `o`'s window along dimension `d`.
    let range = |d: usize, o: usize, size: usize| {
        let start = o * w.stride[d];
        let lo = start.max(w.padding[d]) - w.padding[d];
        let hi = (start + w.kernel[d]).min(size + w.padding[d]) - w.padding[d];
        (lo, hi.max(lo + 1))
    };
    let planes = s.batch * s.channels;
    let mut out = Vec::with_capacity(planes * s.out_height * s.out_width);
    for i in 0..planes * s.out_height * s.out_width {
        let (oy, ox) = ((i / s.out_width) % s.out_height, i % s.out_width);
        let (y0, y1) = range(0, oy, s.height);
        let (x0, x1) = range(1, ox, s.width);
        let taps = (y1 - y0) * (x1 - x0);
        let r = draw(Domain::Int(0, taps as i64 - 1), seed, k, i) as usize;
        out.push(((y0 + r / (x1 - x0)) * s.width + x0 + r % (x1 - x0)) as f64);
    }
    Some(out)
}

/// Gather/scatter indices and rope positions reach past both ends (negative ones count
/// from the end for gather/scatter and are out of range for rope; out of range reads 0
/// or is skipped), and f32 indices are fractional (truncated toward zero).
fn lookup_index_domain(spec: &OpSpec, name: &str, dtype: ScalarType) -> Option<Domain> {
    let (len, signed_lo) = match spec {
        OpSpec::Gather(s) if name == "indices" => {
            let n = *s.data.get(s.axis)? as i64;
            (n, -n - 2)
        }
        OpSpec::Scatter(s) if name == "indices" => {
            let n = *s.data.get(s.axis)? as i64;
            (n, -n - 2)
        }
        OpSpec::Rope(s) if name == "positions" => (s.max_positions as i64, -2),
        _ => return None,
    };
    Some(match dtype {
        ScalarType::U32 => Domain::Int(0, len + 1),
        ScalarType::F32 => Domain::Real(signed_lo as f64, (len + 2) as f64),
        _ => Domain::Int(signed_lo, len + 1),
    })
}
