//! kernelc where rumus's `Backend` goes: one training step of a two-layer MLP written
//! the way rumus's own tensor code calls its backend (`B::matmul(..)` on host slices,
//! `dst` pre-zeroed, the cross-entropy gradient already divided by the batch), run on
//! kernelc and on rumus's `CpuBackend` side by side.
//!
//! `cargo run --example rumus_mlp --features rumus`
//! (`KERNELC_DEVICE=cpu|wgpu|cuda` picks the device; the best one present by default).

use kernelc::runtime::adapters::rumus::rumus::backend::{Backend, CpuBackend};
use kernelc::runtime::adapters::rumus::{GlobalDevice, RumusBackend};

const BATCH: usize = 64;
const IN: usize = 32;
const HIDDEN: usize = 64;
const CLASSES: usize = 10;

/// Loss of one forward pass, and the weights after one SGD step on its gradients.
fn step<B: Backend>(
    x: &[f32],
    targets: &[f32],
    w1: &[f32],
    w2: &[f32],
    lr: f32,
) -> (f32, Vec<f32>, Vec<f32>) {
    let mut pre = B::zeros(BATCH * HIDDEN);
    B::matmul(x, w1, &mut pre, BATCH, IN, HIDDEN);
    let mut h = B::zeros(BATCH * HIDDEN);
    B::gelu(&pre, &mut h);
    let mut logits = B::zeros(BATCH * CLASSES);
    B::matmul(&h, w2, &mut logits, BATCH, HIDDEN, CLASSES);
    let (mut grad, mut loss) = (B::zeros(BATCH * CLASSES), B::zeros(BATCH));
    B::cross_entropy_forward(&logits, targets, &mut grad, &mut loss, BATCH, CLASSES);

    let t = |m: &[f32], r: usize, c: usize| -> Vec<f32> {
        (0..c)
            .flat_map(|j| (0..r).map(move |i| m[i * c + j]))
            .collect()
    };
    let mut dw2 = B::zeros(HIDDEN * CLASSES);
    B::matmul(
        &t(&h, BATCH, HIDDEN),
        &grad,
        &mut dw2,
        HIDDEN,
        BATCH,
        CLASSES,
    );
    let mut dh = B::zeros(BATCH * HIDDEN);
    B::matmul(
        &grad,
        &t(w2, HIDDEN, CLASSES),
        &mut dh,
        BATCH,
        CLASSES,
        HIDDEN,
    );
    let mut dpre = B::zeros(BATCH * HIDDEN);
    B::gelu_backward(&pre, &dh, &mut dpre);
    let mut dw1 = B::zeros(IN * HIDDEN);
    B::matmul(&t(x, BATCH, IN), &dpre, &mut dw1, IN, BATCH, HIDDEN);

    let sgd = |w: &[f32], g: &[f32]| {
        let (mut scaled, mut next) = (B::zeros(g.len()), B::zeros(g.len()));
        B::scale(g, &mut scaled, lr);
        B::sub(w, &scaled, &mut next);
        next
    };
    (loss.iter().sum(), sgd(w1, &dw1), sgd(w2, &dw2))
}

fn main() {
    let wave =
        |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 0.5).collect() };
    let (x, w1, w2) = (
        wave(BATCH * IN, 0.37),
        wave(IN * HIDDEN, 0.11),
        wave(HIDDEN * CLASSES, 0.23),
    );
    let targets: Vec<f32> = (0..BATCH).map(|i| (i % CLASSES) as f32).collect();

    let (loss, w1_k, _) = step::<RumusBackend>(&x, &targets, &w1, &w2, 0.1);
    if let Some(e) = RumusBackend::<GlobalDevice>::take_error() {
        eprintln!("kernelc refused a call: {e}");
        std::process::exit(1);
    }
    let (loss_cpu, w1_c, _) = step::<CpuBackend>(&x, &targets, &w1, &w2, 0.1);
    let device = RumusBackend::<GlobalDevice>::runtime().map(|rt| rt.device_name());
    let drift = w1_k
        .iter()
        .zip(&w1_c)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "rumus Backend served by kernelc on {}",
        device.unwrap_or_default()
    );
    println!("loss: kernelc {loss:.6}, rumus CpuBackend {loss_cpu:.6}; largest difference in the updated w1: {drift:e}");
}
