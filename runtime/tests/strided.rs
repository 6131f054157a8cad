//! Strided views on every device present: host reads and writes of the positions
//! (gaps kept), ops reading a transposed input and writing a column-major output with
//! a leading dimension (through dense temporaries and the `as_strided` op), narrow
//! element types, and the refusals that leave every buffer as it was.

mod common;

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::{Buffer, Runtime, RuntimeError};

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("strided views", common::ALL_PATHS)
}

fn name(rt: &Runtime) -> String {
    format!("{} ({})", rt.device_name(), rt.target_name())
}

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
}

fn filled(rt: &Runtime, bytes: usize, byte: u8) -> Buffer {
    let b = rt.alloc_buffer(bytes).unwrap();
    rt.fill_buffer(&b, 0, bytes, byte).unwrap();
    b
}

fn contents(rt: &Runtime, b: &Buffer) -> Vec<u8> {
    rt.read_buffer(b, 0, b.len()).unwrap()
}

/// The byte offsets of the elements of a strided view.
fn element_bytes(offset: usize, size: usize, shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let mut at = vec![offset];
    for (&n, &s) in shape.iter().zip(strides) {
        at = at
            .iter()
            .flat_map(|&a| (0..n).map(move |i| a + i * s * size))
            .collect();
    }
    at
}

/// Every byte not in `written` is the same in `before` and `after`.
fn assert_only_written(rt: &Runtime, before: &[u8], after: &[u8], written: &[usize], size: usize) {
    let mut touched = vec![false; before.len()];
    for &w in written {
        touched[w..w + size].fill(true);
    }
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        assert!(
            touched[i] || b == a,
            "{}: byte {i} outside the view changed",
            name(rt)
        );
    }
}

#[test]
fn host_writes_and_reads_touch_the_positions_only() {
    for rt in &runtimes() {
        let buf = filled(rt, 1024, 0x5A);
        // A 3×4 f32 matrix stored column-major with leading dimension 5, at byte 8.
        let (shape, strides) = ([3, 4], [1, 5]);
        let v = buf
            .view_strided(8, ScalarType::F32, &shape, &strides)
            .unwrap();
        assert!(!v.is_dense());
        assert_eq!(v.byte_len(), 4 * (1 + 2 + 3 * 5), "span, gaps included");
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 1.5 - 4.0).collect();
        let before = contents(rt, &buf);
        rt.write_view(&v, &values).unwrap();
        let after = contents(rt, &buf);
        let at = element_bytes(8, 4, &shape, &strides);
        assert_only_written(rt, &before, &after, &at, 4);
        for (k, &a) in at.iter().enumerate() {
            let stored = f32::from_le_bytes(after[a..a + 4].try_into().unwrap());
            assert_eq!(stored, values[k], "{}: element {k} at byte {a}", name(rt));
        }
        assert_eq!(rt.read_view::<f32>(&v).unwrap(), values, "{}", name(rt));
        let as_f64: Vec<f64> = values.iter().map(|&x| x as f64).collect();
        assert_eq!(rt.read_view_f64(&v).unwrap(), as_f64, "{}", name(rt));
        // Row-major strides make a dense view.
        let dense = buf
            .view_strided(0, ScalarType::F32, &[3, 4], &[4, 1])
            .unwrap();
        assert!(dense.is_dense());
        // A broadcast (stride 0) reads the same positions twice: column 0, stored
        // contiguously.
        let row = buf
            .view_strided(8, ScalarType::F32, &[2, 3], &[0, 1])
            .unwrap();
        assert_eq!(
            rt.read_view::<f32>(&row).unwrap(),
            [-4.0, 2.0, 8.0, -4.0, 2.0, 8.0],
            "{}",
            name(rt)
        );
    }
}

/// `y = xᵀ · w` with `x` read through a transposed view and `y` written column-major
/// with a leading dimension: what a BLAS caller passes.
#[test]
fn gemm_reads_a_transposed_view_and_writes_a_column_major_output() {
    for rt in &runtimes() {
        let (m, n, k, ld) = (5usize, 3usize, 4usize, 7usize);
        let gemm = spec(&format!(
            r#"{{"op":"gemm","dtype":"f32","m":{m},"n":{n},"k":{k},"alpha":1.0,"beta":0.0}}"#
        ));
        let buf = filled(rt, 4096, 0x11);
        // x is stored k×m row-major; its transpose is the m×k operand.
        let xt: Vec<f32> = (0..k * m).map(|i| (i % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
        let x_store = buf.view(0, ScalarType::F32, &[k, m]).unwrap();
        rt.write_view(&x_store, &xt).unwrap();
        let a = buf
            .view_strided(0, ScalarType::F32, &[m, k], &[1, m])
            .unwrap();
        let b = buf.view(256, ScalarType::F32, &[k, n]).unwrap();
        rt.write_view(&b, &w).unwrap();
        let y = buf
            .view_strided(1024, ScalarType::F32, &[m, n], &[1, ld])
            .unwrap();
        let before = contents(rt, &buf);
        rt.run_into(&gemm, &[&a, &b], &[&y])
            .unwrap_or_else(|e| panic!("{}: {e}", name(rt)));
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| xt[p * m + i] * w[p * n + j]).sum();
            }
        }
        assert_eq!(rt.read_view::<f32>(&y).unwrap(), want, "{}", name(rt));
        let after = contents(rt, &buf);
        let at = element_bytes(1024, 4, &[m, n], &[1, ld]);
        assert_only_written(rt, &before, &after, &at, 4);
    }
}

/// A wrapping u8 add from a strided view into one at odd byte offsets: on wgpu the
/// positions share packed words with the gaps.
#[test]
fn narrow_strided_views_keep_their_neighbours() {
    for rt in &runtimes() {
        let buf = filled(rt, 512, 0xA5);
        let add = spec(r#"{"op":"binary","func":"add","dtype":"u8","lhs":[4,3],"rhs":[4,3]}"#);
        let x = buf
            .view_strided(1, ScalarType::U8, &[4, 3], &[1, 5])
            .unwrap();
        let y = buf.view(101, ScalarType::U8, &[4, 3]).unwrap();
        let out = buf
            .view_strided(203, ScalarType::U8, &[4, 3], &[7, 2])
            .unwrap();
        let xs: Vec<u8> = (0..12).map(|i| 200 + i as u8 * 3).collect();
        let ys: Vec<u8> = (0..12).map(|i| 50 + i as u8).collect();
        rt.write_view(&x, &xs).unwrap();
        rt.write_view(&y, &ys).unwrap();
        let before = contents(rt, &buf);
        rt.run_into(&add, &[&x, &y], &[&out])
            .unwrap_or_else(|e| panic!("{}: {e}", name(rt)));
        let want: Vec<u8> = xs
            .iter()
            .zip(&ys)
            .map(|(a, b)| a.wrapping_add(*b))
            .collect();
        assert_eq!(rt.read_view::<u8>(&out).unwrap(), want, "{}", name(rt));
        let after = contents(rt, &buf);
        assert_only_written(
            rt,
            &before,
            &after,
            &element_bytes(203, 1, &[4, 3], &[7, 2]),
            1,
        );
    }
}

#[test]
fn bad_strided_views_are_typed_errors_that_change_nothing() {
    for rt in &runtimes() {
        let buf = filled(rt, 256, 0x33);
        assert!(matches!(
            buf.view_strided(0, ScalarType::F32, &[4, 4], &[1]),
            Err(RuntimeError::BadArgument(_))
        ));
        assert!(matches!(
            buf.view_strided(0, ScalarType::F32, &[4, 4], &[1, 21]),
            Err(RuntimeError::OutOfRange { .. })
        ));
        assert!(matches!(
            buf.view_strided(
                0,
                ScalarType::F32,
                &[2, usize::MAX / 2],
                &[usize::MAX / 2, 2]
            ),
            Err(RuntimeError::OutOfRange { .. })
        ));
        let neg = spec(r#"{"op":"unary","func":"neg","dtype":"f32","shape":[4,4]}"#);
        let x = buf.view(0, ScalarType::F32, &[4, 4]).unwrap();
        let broadcast = buf
            .view_strided(128, ScalarType::F32, &[4, 4], &[1, 0])
            .unwrap();
        let before = contents(rt, &buf);
        let e = rt.run_into(&neg, &[&x], &[&broadcast]);
        assert!(
            matches!(e, Err(RuntimeError::Spec(_))),
            "{}: an output whose positions repeat: {e:?}",
            name(rt)
        );
        // A transposed output over the input's bytes overlaps it.
        let transposed = buf
            .view_strided(0, ScalarType::F32, &[4, 4], &[1, 4])
            .unwrap();
        let e = rt.run_into(&neg, &[&x], &[&transposed]);
        assert!(
            matches!(e, Err(RuntimeError::Overlap { .. })),
            "{}: {e:?}",
            name(rt)
        );
        assert_eq!(
            before,
            contents(rt, &buf),
            "{}: a refused call changed bytes",
            name(rt)
        );
    }
}
