//! The catalogue's counter RNG ([`crate::rng`]) written in IR: 32-bit integer
//! operations only, so every target computes the host's bits exactly.

use super::math::Num;
use crate::rng::RngScheme;
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// `pcg_hash(x)` in IR, exactly [`crate::rng::pcg_hash`].
pub(crate) fn pcg_hash(b: &mut Body, x: E) -> E {
    let s = b.let_("s", x * 747_796_405u32 + 2_891_336_453u32);
    let shift = (s.clone() >> 28u32) + 4u32;
    let w = b.let_("w", ((s.clone() >> shift) ^ s) * 277_803_737u32);
    (w.clone() >> 22u32) ^ w
}

/// The 32 random bits of counter `i` of the stream whose word ([`crate::rng::stream`])
/// is `stream` (a uniform parameter: the seed and step change per call).
pub(crate) fn rng_bits(b: &mut Body, scheme: RngScheme, stream: E, i: E) -> E {
    match scheme {
        RngScheme::Counter => {
            let h = pcg_hash(b, i);
            pcg_hash(b, h ^ stream)
        }
        RngScheme::Rumus => pcg_hash(b, i ^ stream),
    }
}

/// A uniform f32 in `[0, 1)` from 24 random bits.
pub(crate) fn rng_uniform(b: &mut Body, scheme: RngScheme, stream: E, i: E) -> E {
    let bits = rng_bits(b, scheme, stream, i);
    (bits >> 8u32).cast(ScalarType::F32) * (1.0f32 / 16_777_216.0)
}

/// A standard normal number in `n`'s type by Box-Muller on counters `2i` and `2i + 1`.
pub(crate) fn rng_normal(b: &mut Body, n: &Num, scheme: RngScheme, stream: E, i: E) -> E {
    let i2 = b.let_("i2", i * 2u32);
    let b1 = rng_bits(b, scheme, stream.clone(), i2.clone());
    let u1 = b.let_(
        "u1",
        ((b1 >> 8u32) + 1u32).cast(n.ty) * n.lit(1.0 / 16_777_216.0),
    );
    let u2 = rng_uniform(b, scheme, stream, i2 + 1u32).cast(n.ty);
    (n.lit(-2.0) * u1.log()).sqrt() * (u2 * n.lit(std::f64::consts::TAU)).cos()
}

/// Whether counter `i` survives a keep test: `(bits >> 8) >= threshold`, the threshold
/// ([`crate::rng::dropout_threshold`]) a uniform parameter.
pub(crate) fn rng_keep(b: &mut Body, scheme: RngScheme, stream: E, threshold: E, i: E) -> E {
    let bits = rng_bits(b, scheme, stream, i);
    (bits >> 8u32).ge(threshold)
}
