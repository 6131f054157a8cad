//! Cross-entropy loss with its gradient, via log-sum-exp.
//!
//! For row `b` with logits `x` and target class `t`, `s = 1/batch` if
//! `divide_by_batch` else 1:
//!
//! ```text
//! lse   = m + ln Σ_j e^{x_j − m},   m = max_j x_j
//! loss  = (lse − x_t) · s            (= −ln softmax(x)_t · s)
//! probs = e^{x − lse}
//! grad  = (probs − onehot(t)) · s
//! ```
//!
//! A target outside `0..classes` gives `loss = NaN` and `grad = probs · s`.

use super::resolve_index;
use crate::spec::CrossEntropySpec;

pub(crate) fn cross_entropy(s: &CrossEntropySpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (logits, targets) = (i[0], i[1]);
    let c = s.classes;
    let scale = if s.divide_by_batch {
        1.0 / s.batch as f64
    } else {
        1.0
    };
    let mut loss = vec![0.0; s.batch];
    let mut grad = vec![0.0; s.batch * c];
    let mut probs = vec![0.0; s.batch * c];
    for b in 0..s.batch {
        let row = &logits[b * c..(b + 1) * c];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|&v| (v - m).exp()).sum::<f64>().ln();
        let t = resolve_index(targets[b], c, false);
        loss[b] = match t {
            Some(t) => (lse - row[t]) * scale,
            None => f64::NAN,
        };
        for j in 0..c {
            let p = (row[j] - lse).exp();
            probs[b * c + j] = p;
            let hot = if t == Some(j) { 1.0 } else { 0.0 };
            grad[b * c + j] = (p - hot) * scale;
        }
    }
    let mut out = vec![loss];
    if s.grad {
        out.push(grad);
    }
    if s.probs {
        out.push(probs);
    }
    out
}
