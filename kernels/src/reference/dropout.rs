//! Dropout with a deterministic counter-based mask.
//!
//! Element `i` (flat index) is kept iff `(bits(i) >> 8) ≥ ⌈p·2²⁴⌉`, with `bits` the
//! stream of [`crate::rng`] for the spec's `rng`, `seed` and `step` (so
//! `P(keep) = 1 − p` up to 2⁻²⁴):
//!
//! ```text
//! y_i = keep_i ? x_i / (1 − p) : 0,    mask_i = keep_i ? 1/(1 − p) : 0
//! ```

use crate::rng;
use crate::spec::DropoutSpec;

pub(crate) fn dropout(s: &DropoutSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let scale = 1.0 / (1.0 - s.p);
    let mask: Vec<f64> = (0..x.len())
        .map(|k| {
            if rng::dropout_keep(s.rng, s.seed, s.step, s.p, k as u32) {
                scale
            } else {
                0.0
            }
        })
        .collect();
    let y = x
        .iter()
        .zip(&mask)
        .map(|(&v, &m)| if m != 0.0 { v / (1.0 - s.p) } else { 0.0 })
        .collect();
    if s.mask {
        vec![y, mask]
    } else {
        vec![y]
    }
}
