//! kernelc's `bb::Backend` against bb-ops 0.3.8's `CpuBackend` (bb's own reference,
//! f32 ndarray): the same primitives on the same data agree where `CpuBackend`
//! implements the contract, and its known faults (no broadcasting, 2-D matmul only,
//! reductions ignoring their axes, gather clamping negative indices, comparisons as
//! f32, `Cast` ignoring its type, `Slice` ignoring steps, `reshape` failing through the contract's method)
//! are shown here on purpose, with the contract's ONNX semantics on kernelc's
//! side.

use bb_ops::backends::cpu::{CpuBackend, CpuTensor};
use bb_runtime::contracts::backend::Backend;
use kernelc_bb::{BbTensor, KernelcBb};
use kernelc_ir::ScalarType::{self, F32, I64};
use kernelc_kernels::conformance::inputs::{drawn, Domain};

fn kernelc() -> KernelcBb {
    KernelcBb::with_runtime(kernelc_runtime::Runtime::cpu())
}

/// Reproducible values in `[-2, 2)`, in `[0.1, 2.1)` where `positive` (for
/// sqrt/log/pow): the conformance harness's seeded draws.
fn data(n: usize, seed: u64, positive: bool) -> Vec<f32> {
    let domain = if positive {
        Domain::Real(0.1, 2.1)
    } else {
        Domain::Real(-2.0, 2.0)
    };
    drawn(domain, seed, 0, n)
        .into_iter()
        .map(|v| v as f32)
        .collect()
}

struct Pair {
    ours: BbTensor,
    theirs: CpuTensor,
}

fn pair(k: &KernelcBb, shape: &[usize], values: &[f32]) -> Pair {
    let v64: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    Pair {
        ours: k.tensor(F32, shape, &v64).expect("upload"),
        theirs: CpuTensor::new_checked(shape.iter().map(|&d| d as i64).collect(), values.to_vec())
            .expect("a CpuTensor"),
    }
}

/// Shapes and values equal within `rel` relative error (NaN matching NaN).
fn assert_same(what: &str, ours: &BbTensor, theirs: &CpuTensor, rel: f64) {
    let shape: Vec<i64> = ours.shape().iter().map(|&d| d as i64).collect();
    assert_eq!(shape, theirs.dims_vec(), "{what}: shapes");
    let (a, b) = (ours.to_f64().expect("read"), theirs.flat_data());
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let y = y as f64;
        let close =
            (x.is_nan() && y.is_nan()) || (x - y).abs() <= rel * y.abs().max(1e-30) || x == y;
        assert!(close, "{what}: element {i}: kernelc {x}, CpuBackend {y}");
    }
}

#[test]
fn elementwise_primitives_agree_on_equal_shapes() {
    let (k, c) = (kernelc(), CpuBackend::new());
    let shape = [3, 5];
    let (a, b) = (
        pair(&k, &shape, &data(15, 1, false)),
        pair(&k, &shape, &data(15, 2, false)),
    );
    let p = pair(&k, &shape, &data(15, 3, true));
    let q = pair(&k, &shape, &data(15, 4, true));
    for name in ["add", "sub", "mul", "div"] {
        let (ours, theirs) = match name {
            "add" => (k.add(&a.ours, &b.ours), c.add(&a.theirs, &b.theirs)),
            "sub" => (k.sub(&a.ours, &b.ours), c.sub(&a.theirs, &b.theirs)),
            "mul" => (k.mul(&a.ours, &b.ours), c.mul(&a.theirs, &b.theirs)),
            _ => (k.div(&a.ours, &b.ours), c.div(&a.theirs, &b.theirs)),
        };
        assert_same(
            name,
            &ours.expect("kernelc"),
            &theirs.expect("CpuBackend"),
            1e-6,
        );
    }
    assert_same(
        "pow",
        &k.pow(&p.ours, &q.ours).unwrap(),
        &c.pow(&p.theirs, &q.theirs).unwrap(),
        1e-5,
    );
    assert_same(
        "neg",
        &k.neg(&a.ours).unwrap(),
        &c.neg(&a.theirs).unwrap(),
        0.0,
    );
    assert_same(
        "abs",
        &k.abs(&a.ours).unwrap(),
        &c.abs(&a.theirs).unwrap(),
        0.0,
    );
    assert_same(
        "sqrt",
        &k.sqrt(&p.ours).unwrap(),
        &c.sqrt(&p.theirs).unwrap(),
        1e-6,
    );
    assert_same(
        "exp",
        &k.exp(&a.ours).unwrap(),
        &c.exp(&a.theirs).unwrap(),
        1e-6,
    );
    assert_same(
        "log",
        &k.log(&p.ours).unwrap(),
        &c.log(&p.theirs).unwrap(),
        1e-5,
    );
}

#[test]
fn linear_algebra_reductions_and_shapes_agree_where_cpu_backend_implements_them() {
    let (k, c) = (kernelc(), CpuBackend::new());
    let a = pair(&k, &[4, 6], &data(24, 5, false));
    let b = pair(&k, &[6, 3], &data(18, 6, false));
    assert_same(
        "matmul 2-D",
        &k.matmul(&a.ours, &b.ours).unwrap(),
        &c.matmul(&a.theirs, &b.theirs).unwrap(),
        1e-5,
    );
    // Full reductions (the only kind CpuBackend has).
    assert_same(
        "reduce_sum",
        &k.reduce_sum(&a.ours, &[], false).unwrap(),
        &c.reduce_sum(&a.theirs, &[], false).unwrap(),
        1e-5,
    );
    assert_same(
        "reduce_mean",
        &k.reduce_mean(&a.ours, &[], false).unwrap(),
        &c.reduce_mean(&a.theirs, &[], false).unwrap(),
        1e-5,
    );
    assert_same(
        "reduce_max",
        &k.reduce_max(&a.ours, &[], false).unwrap(),
        &c.reduce_max(&a.theirs, &[], false).unwrap(),
        0.0,
    );
    assert_same(
        "reduce_min",
        &k.reduce_min(&a.ours, &[], false).unwrap(),
        &c.reduce_min(&a.theirs, &[], false).unwrap(),
        0.0,
    );
    assert_same(
        "transpose",
        &k.transpose(&a.ours, &[1, 0]).unwrap(),
        &c.transpose(&a.theirs, &[1, 0]).unwrap(),
        0.0,
    );
    let a2 = pair(&k, &[2, 6], &data(12, 7, false));
    assert_same(
        "concat",
        &k.concat(&[&a.ours, &a2.ours], 0).unwrap(),
        &c.concat(&[&a.theirs, &a2.theirs], 0).unwrap(),
        0.0,
    );
    assert_same(
        "slice",
        &k.slice(&a.ours, &[1, 2], &[3, 6], &[0, 1], &[1, 1])
            .unwrap(),
        &c.slice(&a.theirs, &[1, 2], &[3, 6], &[0, 1], &[1, 1])
            .unwrap(),
        0.0,
    );
    let (ours, theirs) = (
        k.split(&a.ours, 1, &[2, 4]).unwrap(),
        c.split(&a.theirs, 1, &[2, 4]).unwrap(),
    );
    for (o, t) in ours.iter().zip(&theirs) {
        assert_same("split", o, t, 0.0);
    }
    let u = (
        k.unsqueeze(&a.ours, &[0]).unwrap(),
        c.unsqueeze(&a.theirs, &[0]).unwrap(),
    );
    assert_same("unsqueeze", &u.0, &u.1, 0.0);
    assert_same(
        "squeeze",
        &k.squeeze(&u.0, &[0]).unwrap(),
        &c.squeeze(&u.1, &[0]).unwrap(),
        0.0,
    );
    // Gather with non-negative indices (CpuBackend reads them as f32).
    let idx = k.tensor(I64, &[3], &[2.0, 0.0, 3.0]).unwrap();
    let idx_f = CpuTensor::new_checked(vec![3], vec![2.0, 0.0, 3.0]).unwrap();
    assert_same(
        "gather",
        &k.gather(&a.ours, &idx, 0).unwrap(),
        &c.gather(&a.theirs, &idx_f, 0).unwrap(),
        0.0,
    );
}

fn values(t: &BbTensor) -> Vec<f64> {
    t.to_f64().expect("read")
}

#[test]
fn cpu_backend_faults_shown_on_purpose() {
    let (k, c) = (kernelc(), CpuBackend::new());
    let m = pair(&k, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let row = pair(&k, &[3], &[10.0, 20.0, 30.0]);
    // 1. Broadcasting (the contract: NumPy's). CpuBackend refuses it.
    assert!(
        c.add(&m.theirs, &row.theirs).is_err(),
        "CpuBackend broadcasts now?"
    );
    assert_eq!(
        values(&k.add(&m.ours, &row.ours).unwrap()),
        vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
    );
    // 2. Batched matmul (NumPy's). CpuBackend is 2-D only.
    let batch = pair(&k, &[2, 2, 3], &data(12, 8, false));
    let w = pair(&k, &[3, 4], &data(12, 9, false));
    assert!(
        c.matmul(&batch.theirs, &w.theirs).is_err(),
        "CpuBackend batches now?"
    );
    assert_eq!(k.matmul(&batch.ours, &w.ours).unwrap().shape(), &[2, 2, 4]);
    // 3. Reductions honour axes and keepdims; CpuBackend reduces everything.
    let theirs = c.reduce_sum(&m.theirs, &[1], true).unwrap();
    assert_eq!(
        (theirs.dims_vec(), theirs.flat_data()),
        (&[][..], vec![21.0])
    );
    let ours = k.reduce_sum(&m.ours, &[1], true).unwrap();
    assert_eq!(
        (ours.shape(), values(&ours)),
        (&[2usize, 1][..], vec![6.0, 15.0])
    );
    // 4. Gather: a negative index counts from the end; CpuBackend clamps it to 0.
    let idx = k.tensor(I64, &[1], &[-1.0]).unwrap();
    let idx_f = CpuTensor::new_checked(vec![1], vec![-1.0]).unwrap();
    assert_eq!(values(&k.gather(&row.ours, &idx, 0).unwrap()), vec![30.0]);
    assert_eq!(
        c.gather(&row.theirs, &idx_f, 0).unwrap().flat_data(),
        vec![10.0]
    );
    // 5. Comparisons are bool; CpuBackend's are f32 0/1 (same values).
    let eq = k.equal(&m.ours, &m.ours).unwrap();
    assert_eq!((eq.dtype(), values(&eq)), (ScalarType::Bool, vec![1.0; 6]));
    assert_eq!(
        c.equal(&m.theirs, &m.theirs).unwrap().flat_data(),
        vec![1.0; 6]
    );
    // 6. Reshape through the contract's method: CpuBackend's walker wants a `dims`
    //    attribute the contract's default never writes (it passes `shape`).
    assert!(
        c.reshape(&m.theirs, &[3, -1]).is_err(),
        "CpuBackend reshapes now?"
    );
    assert_eq!(k.reshape(&m.ours, &[3, -1]).unwrap().shape(), &[3, 2]);
    // 7. Slice steps: CpuBackend ignores them.
    let (ours, theirs) = (
        k.slice(&m.ours, &[0], &[3], &[1], &[2]).unwrap(),
        c.slice(&m.theirs, &[0], &[3], &[1], &[2]).unwrap(),
    );
    assert_eq!(values(&ours), vec![1.0, 3.0, 4.0, 6.0]);
    assert_eq!(theirs.dims_vec(), &[2, 3], "CpuBackend steps now?");
    // 8. Cast: kernelc converts; CpuBackend keeps f32 whatever `to` says.
    let frac = pair(&k, &[2], &[1.75, -1.75]);
    let ours = k.cast(&frac.ours, 7).unwrap();
    assert_eq!((ours.dtype(), values(&ours)), (I64, vec![1.0, -1.0]));
    assert_eq!(
        c.cast(&frac.theirs, 7).unwrap().flat_data(),
        vec![1.75, -1.75]
    );
}
