//! kernelc's ferrum adapter against ferrum-runtime 0.7.0's `CandleBackend`, the only
//! other implementation of ferrum's `ComputeBackend`: every op both serve, on the
//! same data through `&dyn ComputeBackend`, agrees within f32 rounding. Where candle's
//! reference differs by design, a test shows it on purpose: `to_vec_f32` returns one
//! row of a 2-D tensor, `rotary_embedding` rotates every step by `position_ids[0]`,
//! `sample_token` is greedy whatever its parameters.

use ferrum_interfaces::kernel_ops::{AttentionParams, SamplingParams};
use ferrum_interfaces::tensor::TensorRef;
use ferrum_interfaces::ComputeBackend;
use ferrum_runtime::CandleBackend;
use ferrum_types::{DataType, Device};
use kernelc_kernels::conformance::inputs::{drawn, Domain};
use kernelc_runtime::adapters::ferrum::FerrumBackend;

struct Both {
    kernelc: FerrumBackend,
    candle: CandleBackend,
}

fn both() -> Both {
    Both {
        kernelc: FerrumBackend::new(&Device::CPU).expect("kernelc on the cpu"),
        candle: pollster::block_on(CandleBackend::new(Device::CPU)).expect("candle"),
    }
}

/// Reproducible values in `[-2, 2)`: the conformance harness's seeded draws.
fn data(n: usize, seed: u64) -> Vec<f32> {
    drawn(Domain::Real(-2.0, 2.0), seed, 0, n)
        .into_iter()
        .map(|v| v as f32)
        .collect()
}

/// Every element, row-major (candle's `to_vec_f32` gives one row of a 2-D tensor:
/// flatten first).
fn all(t: &TensorRef) -> Vec<f32> {
    let n: usize = t.shape().iter().product();
    t.reshape(&[n])
        .expect("flatten")
        .to_vec_f32()
        .expect("read")
}

fn close(what: &str, a: &TensorRef, b: &TensorRef) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    for (i, (x, y)) in all(a).iter().zip(all(b)).enumerate() {
        assert!(
            (x - y).abs() <= 2e-5 * y.abs().max(1.0),
            "{what}: element {i}: kernelc {x}, candle {y}"
        );
    }
}

impl Both {
    /// The same data as a tensor of each backend.
    fn tensor(&self, shape: &[usize], seed: u64) -> (TensorRef, TensorRef) {
        let n = shape.iter().product();
        let v = data(n, seed);
        let make = |b: &dyn ComputeBackend| {
            b.tensor_factory()
                .from_slice(&v, shape, DataType::FP32, Device::CPU)
                .expect("a tensor")
        };
        (make(&self.kernelc), make(&self.candle))
    }
}

#[test]
fn tensor_ops_agree() {
    let b = both();
    let (k, c): (&dyn ComputeBackend, &dyn ComputeBackend) = (&b.kernelc, &b.candle);
    let (x, xc) = b.tensor(&[4, 6], 1);
    let (y, yc) = b.tensor(&[4, 6], 2);
    let (w, wc) = b.tensor(&[6, 3], 3);
    let (ko, co) = (k.tensor_ops(), c.tensor_ops());
    close("add", &ko.add(&x, &y).unwrap(), &co.add(&xc, &yc).unwrap());
    close("sub", &ko.sub(&x, &y).unwrap(), &co.sub(&xc, &yc).unwrap());
    close("mul", &ko.mul(&x, &y).unwrap(), &co.mul(&xc, &yc).unwrap());
    close("div", &ko.div(&x, &y).unwrap(), &co.div(&xc, &yc).unwrap());
    close(
        "matmul",
        &ko.matmul(&x, &w).unwrap(),
        &co.matmul(&xc, &wc).unwrap(),
    );
    close(
        "softmax -1",
        &ko.softmax(&x, -1).unwrap(),
        &co.softmax(&xc, -1).unwrap(),
    );
    close(
        "softmax 0",
        &ko.softmax(&x, 0).unwrap(),
        &co.softmax(&xc, 0).unwrap(),
    );
    let (g, gc) = b.tensor(&[6], 4);
    let (h, hc) = b.tensor(&[6], 5);
    close(
        "layer_norm",
        &ko.layer_norm(&x, &g, Some(&h), 1e-5).unwrap(),
        &co.layer_norm(&xc, &gc, Some(&hc), 1e-5).unwrap(),
    );
    close(
        "layer_norm without bias",
        &ko.layer_norm(&x, &g, None, 1e-5).unwrap(),
        &co.layer_norm(&xc, &gc, None, 1e-5).unwrap(),
    );
    close(
        "rms_norm",
        &ko.rms_norm(&x, &g, 1e-6).unwrap(),
        &co.rms_norm(&xc, &gc, 1e-6).unwrap(),
    );
    close("relu", &ko.relu(&x).unwrap(), &co.relu(&xc).unwrap());
    close(
        "gelu (tanh form)",
        &ko.gelu(&x).unwrap(),
        &co.gelu(&xc).unwrap(),
    );
    close("silu", &ko.silu(&x).unwrap(), &co.silu(&xc).unwrap());
    close(
        "concat",
        &ko.concat(&[&x, &y], 0).unwrap(),
        &co.concat(&[&xc, &yc], 0).unwrap(),
    );
    close(
        "transpose",
        &ko.transpose(&x, 0, 1).unwrap(),
        &co.transpose(&xc, 0, 1).unwrap(),
    );
    let (t, tc) = b.tensor(&[2, 3, 4], 6);
    close(
        "permute",
        &ko.permute(&t, &[2, 0, 1]).unwrap(),
        &co.permute(&tc, &[2, 0, 1]).unwrap(),
    );
    let (ks, cs) = (
        ko.split(&x, &[2, 4], 1).unwrap(),
        co.split(&xc, &[2, 4], 1).unwrap(),
    );
    for (p, q) in ks.iter().zip(&cs) {
        close("split", p, q);
    }
}

#[test]
fn kernel_ops_agree() {
    let b = both();
    let (k, c) = (
        b.kernelc.kernel_ops().unwrap(),
        b.candle.kernel_ops().unwrap(),
    );
    let (x, xc) = b.tensor(&[3, 16], 7);
    let (r, rc) = b.tensor(&[3, 16], 8);
    let (g, gc) = b.tensor(&[16], 9);
    let (kn, cn) = (k.norm_ops().unwrap(), c.norm_ops().unwrap());
    close(
        "rms_norm",
        &kn.rms_norm(&x, &g, 1e-6).unwrap(),
        &cn.rms_norm(&xc, &gc, 1e-6).unwrap(),
    );
    let (ky, ks) = kn.rms_norm_residual(&x, &r, &g, 1e-6).unwrap();
    let (cy, cs) = cn.rms_norm_residual(&xc, &rc, &gc, 1e-6).unwrap();
    close("rms_norm_residual (normed)", &ky, &cy);
    close("rms_norm_residual (sum)", &ks, &cs);
    let (ka, ca) = (k.activation_ops().unwrap(), c.activation_ops().unwrap());
    close(
        "silu_mul",
        &ka.silu_mul(&x, &r).unwrap(),
        &ca.silu_mul(&xc, &rc).unwrap(),
    );
    close("gelu", &ka.gelu(&x).unwrap(), &ca.gelu(&xc).unwrap());
    let (w, wc) = b.tensor(&[5, 16], 10);
    let (kl, cl) = (k.linear_ops().unwrap(), c.linear_ops().unwrap());
    close(
        "linear",
        &kl.linear(&x, &w).unwrap(),
        &cl.linear(&xc, &wc).unwrap(),
    );
    // GQA attention, causal bottom-right with fewer queries than keys.
    let (q, qc) = b.tensor(&[2, 3, 4, 8], 11);
    let (kk, kc) = b.tensor(&[2, 7, 2, 8], 12);
    let (v, vc) = b.tensor(&[2, 7, 2, 8], 13);
    let params = AttentionParams {
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 8,
        softmax_scale: 0.35,
        causal: true,
    };
    let (kt, ct) = (k.attention_ops().unwrap(), c.attention_ops().unwrap());
    close(
        "attention",
        &kt.attention(&q, &kk, &v, &params).unwrap(),
        &ct.attention(&qc, &kc, &vc, &params).unwrap(),
    );
    let (l, lc) = b.tensor(&[40], 14);
    let (ks, cs) = (k.sampling_ops().unwrap(), c.sampling_ops().unwrap());
    assert_eq!(ks.argmax(&l).unwrap(), cs.argmax(&lc).unwrap(), "argmax");
    // Decoding one step: rotary embedding at one position agrees.
    let (e, ec) = b.tensor(&[1, 1, 2, 8], 15);
    let (cos, cosc) = b.tensor(&[10, 4], 16);
    let (sin, sinc) = b.tensor(&[10, 4], 17);
    let (kp, cp) = (k.position_ops().unwrap(), c.position_ops().unwrap());
    close(
        "rotary_embedding (decode)",
        &kp.rotary_embedding(&e, &cos, &sin, &[6]).unwrap(),
        &cp.rotary_embedding(&ec, &cosc, &sinc, &[6]).unwrap(),
    );
}

#[test]
fn candle_differences_shown_on_purpose() {
    let b = both();
    let (x, xc) = b.tensor(&[3, 4], 20);
    // 1. candle's to_vec_f32 returns the first row of a 2-D tensor; kernelc's every element.
    assert_eq!(xc.to_vec_f32().unwrap().len(), 4);
    assert_eq!(x.to_vec_f32().unwrap().len(), 12);
    // 2. Prefill: one position per step. candle rotates every step by position_ids[0];
    //    kernelc by each step's own position (step 0 agrees, the others differ).
    let (k, c) = (
        b.kernelc.kernel_ops().unwrap(),
        b.candle.kernel_ops().unwrap(),
    );
    let (e, ec) = b.tensor(&[1, 3, 1, 8], 21);
    let (cos, cosc) = b.tensor(&[10, 4], 22);
    let (sin, sinc) = b.tensor(&[10, 4], 23);
    let ours = all(&k
        .position_ops()
        .unwrap()
        .rotary_embedding(&e, &cos, &sin, &[2, 3, 4])
        .unwrap());
    let theirs = all(&c
        .position_ops()
        .unwrap()
        .rotary_embedding(&ec, &cosc, &sinc, &[2, 3, 4])
        .unwrap());
    assert!(
        ours[..8]
            .iter()
            .zip(&theirs[..8])
            .all(|(a, b)| (a - b).abs() < 1e-5),
        "step 0"
    );
    assert!(
        ours[8..]
            .iter()
            .zip(&theirs[8..])
            .any(|(a, b)| (a - b).abs() > 1e-3),
        "later steps"
    );
    // 3. sample_token: candle is greedy whatever the parameters; kernelc samples.
    let (l, lc) = b.tensor(&[40], 24);
    let greedy = SamplingParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        repetition_penalty: 1.0,
        repetition_token_ids: Vec::new(),
        repetition_token_freqs: Vec::new(),
        rng_seed: 0,
    };
    let (ks, cs) = (k.sampling_ops().unwrap(), c.sampling_ops().unwrap());
    assert_eq!(
        ks.sample_token(&l, &greedy).unwrap(),
        cs.sample_token(&lc, &greedy).unwrap()
    );
    let hot = SamplingParams {
        temperature: 5.0,
        ..greedy
    };
    let argmax = cs.argmax(&lc).unwrap();
    let draws: Vec<u32> = (0..32)
        .map(|seed| {
            ks.sample_token(
                &l,
                &SamplingParams {
                    rng_seed: seed,
                    ..hot.clone()
                },
            )
            .unwrap()
        })
        .collect();
    assert!(
        draws.iter().any(|&t| t != argmax),
        "kernelc samples at temperature 5"
    );
    assert!((0..32).all(|seed| cs
        .sample_token(
            &lc,
            &SamplingParams {
                rng_seed: seed,
                ..hot.clone()
            }
        )
        .unwrap()
        == argmax));
}
