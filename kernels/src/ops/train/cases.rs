//! Conformance cases of the training family.

use super::spec::*;
use crate::rng::RngScheme;
use kernelc_ir::ScalarType::*;

pub(super) fn dropout() -> Vec<DropoutSpec> {
    let case = |dtype, shape: &[usize], p, seed, step, mask, rng| DropoutSpec {
        dtype,
        shape: shape.to_vec(),
        p,
        seed,
        step,
        mask,
        rng,
        offset: 0,
    };
    use RngScheme::{Counter, Rumus};
    vec![
        case(F32, &[64], 0.1, 42, 1, true, Counter),
        case(F64, &[7, 13], 0.5, 7, 3, false, Rumus),
        case(F16, &[1], 0.3, 1, 0, true, Counter),
        case(Bf16, &[257], 0.9, 0, 12, true, Rumus),
        case(F32, &[3, 5], 0.25, u64::MAX - 5, 1 << 40, false, Counter),
        // p = 0 keeps everything (no random bits); p within 2^-24 of 1 drops everything.
        case(F32, &[1000], 0.0, 9, 9, true, Counter),
        case(F32, &[33], 1.0 - 1e-9, 9, 9, true, Rumus),
        case(F32, &[0, 8], 0.5, 1, 1, true, Counter),
    ]
}

pub(super) fn adam() -> Vec<AdamSpec> {
    let case =
        |dtype, len, lr, [beta1, beta2, eps]: [f64; 3], weight_decay, decoupled, step| AdamSpec {
            dtype,
            len,
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            step,
        };
    let betas = [0.9, 0.999, 1e-8];
    vec![
        case(F32, 16, 1e-3, betas, 0.0, false, 1),
        case(F64, 7, 1e-2, betas, 0.01, false, 3),
        case(F16, 1, 1e-3, betas, 0.1, true, 1000),
        case(Bf16, 257, 3e-3, betas, 0.05, true, 10),
        case(F32, 1000, 1e-3, betas, 0.01, false, 5),
        case(F32, 13, 0.1, [0.0, 0.5, 1e-6], 0.2, true, 2),
        case(F32, 0, 1e-3, betas, 0.0, false, 1),
    ]
}
