//! Drawing one token from a row of logits (ferrum's `SamplingOps::sample_token`), on
//! the host: the repetition penalty, temperature, top-k, top-p, then one draw.

use ferrum_interfaces::kernel_ops::SamplingParams;
use ferrum_types::{FerrumError, Result};

/// The token `params` choose from `logits` (one vocabulary row).
pub(super) fn sample(mut logits: Vec<f32>, params: &SamplingParams) -> Result<u32> {
    penalise(&mut logits, params);
    if params.temperature <= 0.0 || params.top_k == 1 {
        return greedy(&logits);
    }
    let kept = nucleus(&logits, params);
    let total: f64 = kept.iter().map(|&(_, p)| p).sum();
    if kept.is_empty() || total.is_nan() || total <= 0.0 {
        // Every logit −∞ or NaN: nothing to sample from.
        return greedy(&logits);
    }
    let mut draw = unit(params.rng_seed) * total;
    for &(token, p) in &kept {
        if draw < p {
            return Ok(token);
        }
        draw -= p;
    }
    Ok(kept[kept.len() - 1].0)
}

/// HF's repetition penalty on every distinct token seen (its count does not matter).
fn penalise(logits: &mut [f32], params: &SamplingParams) {
    let penalty = params.repetition_penalty;
    if penalty == 1.0 || penalty.is_nan() || penalty <= 0.0 {
        return;
    }
    let mut seen = params.repetition_token_ids.clone();
    seen.sort_unstable();
    seen.dedup();
    for id in seen {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

/// The first maximum (NaN ignored).
fn greedy(logits: &[f32]) -> Result<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_nan() && best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    let (i, _) = best
        .or(logits.first().map(|&l| (0, l)))
        .ok_or_else(|| FerrumError::invalid_parameter("sample_token: an empty logits row"))?;
    u32::try_from(i).map_err(|_| FerrumError::invalid_parameter("a token id past u32"))
}

/// The tokens top-k and top-p keep, with their (unnormalised) probabilities,
/// most likely first (ties: the lower id first).
fn nucleus(logits: &[f32], params: &SamplingParams) -> Vec<(u32, f64)> {
    let t = params.temperature as f64;
    let max = logits
        .iter()
        .filter(|l| !l.is_nan())
        .fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64 / t));
    let mut probs: Vec<(u32, f64)> = logits
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_nan())
        .map(|(i, &l)| (i as u32, (l as f64 / t - max).exp()))
        .filter(|&(_, p)| p > 0.0)
        .collect();
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if params.top_k > 0 {
        probs.truncate(params.top_k);
    }
    if params.top_p < 1.0 {
        let total: f64 = probs.iter().map(|&(_, p)| p).sum();
        let mut cumulative = 0.0;
        let keep = probs
            .iter()
            .position(|&(_, p)| {
                cumulative += p;
                cumulative >= params.top_p as f64 * total
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep.max(1));
    }
    probs
}

/// A number in `[0, 1)` from `seed` (SplitMix64's finaliser, 53 bits).
fn unit(seed: u32) -> f64 {
    let mut z = (seed as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, top_k: usize, top_p: f32) -> SamplingParams {
        SamplingParams {
            temperature,
            top_k,
            top_p,
            repetition_penalty: 1.0,
            repetition_token_ids: Vec::new(),
            repetition_token_freqs: Vec::new(),
            rng_seed: 7,
        }
    }

    #[test]
    fn greedy_takes_the_first_maximum_and_ignores_nan() {
        let logits = vec![1.0, f32::NAN, 3.0, 3.0, -1.0];
        assert_eq!(sample(logits, &params(0.0, 0, 1.0)).ok(), Some(2));
    }

    #[test]
    fn top_k_one_and_a_tiny_top_p_are_greedy() {
        let logits = vec![0.5, 2.0, 1.9, -3.0];
        for seed in 0..50 {
            let mut p = params(1.0, 1, 1.0);
            p.rng_seed = seed;
            assert_eq!(sample(logits.clone(), &p).ok(), Some(1));
            let mut p = params(1.0, 0, 1e-6);
            p.rng_seed = seed;
            assert_eq!(sample(logits.clone(), &p).ok(), Some(1));
        }
    }

    #[test]
    fn top_k_keeps_only_the_k_most_likely() {
        let logits = vec![0.0, 5.0, 4.9, 4.8, -2.0];
        for seed in 0..200 {
            let mut p = params(1.0, 2, 1.0);
            p.rng_seed = seed;
            let t = sample(logits.clone(), &p).unwrap_or(u32::MAX);
            assert!(t == 1 || t == 2, "{t}");
        }
    }

    #[test]
    fn draws_follow_the_distribution() {
        // p(1) = e / (1 + e) ≈ 0.731 at temperature 1.
        let logits = vec![0.0, 1.0];
        let hits = (0..4000)
            .filter(|&seed| {
                let mut p = params(1.0, 0, 1.0);
                p.rng_seed = seed;
                sample(logits.clone(), &p).ok() == Some(1)
            })
            .count();
        let share = hits as f64 / 4000.0;
        assert!((share - 0.731).abs() < 0.03, "{share}");
    }

    #[test]
    fn the_repetition_penalty_demotes_seen_tokens() {
        let mut p = params(0.0, 0, 1.0);
        p.repetition_penalty = 2.0;
        p.repetition_token_ids = vec![0, 0];
        // 3.0 / 2 = 1.5 < 2.0: token 1 wins once token 0 is penalised.
        assert_eq!(sample(vec![3.0, 2.0, -1.0], &p).ok(), Some(1));
        p.repetition_token_ids = vec![2];
        assert_eq!(sample(vec![3.0, 2.0, -1.0], &p).ok(), Some(0));
    }

    #[test]
    fn an_empty_row_is_an_error() {
        assert!(sample(Vec::new(), &params(0.0, 0, 1.0)).is_err());
    }
}
