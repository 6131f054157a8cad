//! The convenience ops give the right numbers (against plain Rust), and the buffer
//! pool reuses allocations.

use kernelc_ir::ScalarType;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, Runtime};

fn runtime() -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::off())
}

/// Deterministic test data in [-2, 2).
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h =
                (i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503)).wrapping_mul(2246822519);
            (h >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(err <= tol * (1.0 + w.abs()), "element {i}: {g} vs {w}");
    }
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
        }
    }
    c
}

#[test]
fn matmul() {
    let rt = runtime();
    for (m, k, n) in [(1, 1, 1), (3, 4, 5), (7, 13, 9), (33, 17, 31)] {
        let (a, b) = (data(m * k, 1), data(k * n, 2));
        let ta = rt.tensor(&[m, k], &a).unwrap();
        let tb = rt.tensor(&[k, n], &b).unwrap();
        let c = rt.matmul(&ta, &tb).unwrap();
        assert_eq!(c.shape(), &[m, n]);
        assert_close(
            &c.to_vec::<f32>().unwrap(),
            &matmul_ref(&a, &b, m, k, n),
            1e-5,
        );
    }
    // Batched: [2, 3, 4] x [2, 4, 5].
    let (a, b) = (data(24, 3), data(40, 4));
    let c = rt
        .matmul(
            &rt.tensor(&[2, 3, 4], &a).unwrap(),
            &rt.tensor(&[2, 4, 5], &b).unwrap(),
        )
        .unwrap();
    assert_eq!(c.shape(), &[2, 3, 5]);
    let mut want = matmul_ref(&a[..12], &b[..20], 3, 4, 5);
    want.extend(matmul_ref(&a[12..], &b[20..], 3, 4, 5));
    assert_close(&c.to_vec::<f32>().unwrap(), &want, 1e-5);
    // f64 is exact on small integers.
    let a = rt.tensor(&[2, 2], &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let b = rt.tensor(&[2, 2], &[5.0f64, 6.0, 7.0, 8.0]).unwrap();
    assert_eq!(
        rt.matmul(&a, &b).unwrap().to_vec::<f64>().unwrap(),
        vec![19.0, 22.0, 43.0, 50.0]
    );
}

#[test]
fn softmax() {
    let rt = runtime();
    let (rows, cols) = (5, 11);
    let x = data(rows * cols, 5);
    let t = rt.tensor(&[rows, cols], &x).unwrap();
    let want: Vec<f64> = x
        .chunks(cols)
        .flat_map(|row| {
            let max = row
                .iter()
                .map(|&v| v as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            row.iter()
                .map(move |&v| (v as f64 - max).exp() / sum)
                .collect::<Vec<_>>()
        })
        .collect();
    let y = rt.softmax(&t, -1).unwrap();
    assert_eq!(y.shape(), &[rows, cols]);
    assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
    let y = rt.softmax(&t, 1).unwrap().to_vec::<f32>().unwrap();
    assert_close(&y, &want, 1e-6);

    // Along the first axis: columns sum to one.
    let y = rt.softmax(&t, 0).unwrap().to_vec::<f32>().unwrap();
    for j in 0..cols {
        let s: f32 = (0..rows).map(|i| y[i * cols + j]).sum();
        assert!((s - 1.0).abs() < 1e-5, "column {j} sums to {s}");
    }
    // Large values do not overflow.
    let big = rt.tensor(&[1, 3], &[1000.0f32, 1000.0, 1000.0]).unwrap();
    assert_close(
        &rt.softmax(&big, -1).unwrap().to_vec::<f32>().unwrap(),
        &[1.0 / 3.0; 3],
        1e-6,
    );
}

#[test]
fn layer_norm() {
    let rt = runtime();
    let (rows, cols, eps) = (4, 10, 1e-5);
    let (x, w, b) = (data(rows * cols, 6), data(cols, 7), data(cols, 8));
    let y = rt
        .layer_norm(
            &rt.tensor(&[rows, cols], &x).unwrap(),
            &rt.tensor(&[cols], &w).unwrap(),
            &rt.tensor(&[cols], &b).unwrap(),
            eps,
        )
        .unwrap();
    assert_eq!(y.shape(), &[rows, cols]);
    let want: Vec<f64> = x
        .chunks(cols)
        .flat_map(|row| {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            let inv = 1.0 / (var + eps).sqrt();
            row.iter()
                .zip(w.iter().zip(&b))
                .map(|(&v, (&w, &b))| (v as f64 - mean) * inv * w as f64 + b as f64)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-5);
}

#[test]
fn add() {
    let rt = runtime();
    let (a, b) = (data(12, 9), data(12, 10));
    let y = rt
        .add(
            &rt.tensor(&[3, 4], &a).unwrap(),
            &rt.tensor(&[3, 4], &b).unwrap(),
        )
        .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want, "f32 addition is exact");

    // Broadcasting a row over a matrix.
    let row = data(4, 11);
    let y = rt
        .add(
            &rt.tensor(&[3, 4], &a).unwrap(),
            &rt.tensor(&[4], &row).unwrap(),
        )
        .unwrap();
    assert_eq!(y.shape(), &[3, 4]);
    let want: Vec<f32> = a.iter().enumerate().map(|(i, x)| x + row[i % 4]).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);

    // Integers.
    let y = rt
        .add(
            &rt.tensor(&[3], &[1i32, -2, i32::MAX]).unwrap(),
            &rt.tensor(&[3], &[10i32, 20, 1]).unwrap(),
        )
        .unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![11, 18, i32::MIN]);
}

#[test]
fn sum() {
    let rt = runtime();
    let (d0, d1, d2) = (2, 3, 4);
    let x = data(d0 * d1 * d2, 12);
    let t = rt.tensor(&[d0, d1, d2], &x).unwrap();
    let at = |i: usize, j: usize, k: usize| x[(i * d1 + j) * d2 + k] as f64;

    let y = rt.sum(&t, &[1]).unwrap();
    assert_eq!(y.shape(), &[d0, d2]);
    let want: Vec<f64> = (0..d0)
        .flat_map(|i| (0..d2).map(move |k| (0..d1).map(|j| at(i, j, k)).sum()))
        .collect();
    assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);

    let y = rt.sum(&t, &[0, 2]).unwrap();
    assert_eq!(y.shape(), &[d1]);
    let want: Vec<f64> = (0..d1)
        .map(|j| {
            (0..d0)
                .flat_map(|i| (0..d2).map(move |k| (i, k)))
                .map(|(i, k)| at(i, j, k))
                .sum()
        })
        .collect();
    assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);

    let y = rt.sum(&t, &[0, 1, 2]).unwrap();
    let total: f64 = x.iter().map(|&v| v as f64).sum();
    assert_close(&y.to_vec::<f32>().unwrap(), &[total], 1e-5);
}

#[test]
fn pool_reuses_allocations() {
    let rt = runtime();
    let a = rt.tensor(&[64], &data(64, 13)).unwrap();
    let b = rt.tensor(&[64], &data(64, 14)).unwrap();
    let want: Vec<f32> = a
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(b.to_vec::<f32>().unwrap())
        .map(|(x, y)| x + y)
        .collect();

    assert_eq!(rt.add(&a, &b).unwrap().to_vec::<f32>().unwrap(), want);
    let warm = rt.stats();
    for _ in 0..10 {
        // Each output is dropped at the end of the statement and its block goes back
        // to the pool for the next iteration.
        assert_eq!(rt.add(&a, &b).unwrap().to_vec::<f32>().unwrap(), want);
    }
    let after = rt.stats();
    assert!(
        after.pool_reuses >= warm.pool_reuses + 10,
        "{warm:?} -> {after:?}"
    );
    assert_eq!(
        after.pool_allocations, warm.pool_allocations,
        "a loop of same-shaped ops allocated fresh memory"
    );

    // A reused block is cleared or overwritten, never leaked into a new tensor.
    drop(rt.tensor(&[100], &[7.0f32; 100]).unwrap());
    let before = rt.stats().pool_reuses;
    let z = rt.zeros(&[100], ScalarType::F32).unwrap();
    assert_eq!(rt.stats().pool_reuses, before + 1);
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 100]);

    // A buffer still referenced by a clone is not reused.
    let t = rt.tensor(&[100], &[3.0f32; 100]).unwrap();
    let keep = t.clone();
    drop(t);
    let other = rt.tensor(&[100], &[4.0f32; 100]).unwrap();
    assert_eq!(keep.to_vec::<f32>().unwrap(), vec![3.0; 100]);
    assert_eq!(other.to_vec::<f32>().unwrap(), vec![4.0; 100]);
}
