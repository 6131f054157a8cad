//! Bad input becomes a typed error, raised before anything is compiled or launched,
//! and the runtime keeps working afterwards.

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{BinaryFn, BinarySpec, GemmSpec, OpSpec};
use kernelc_kernels::SpecError;
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, Runtime, RuntimeError};

fn runtime() -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::off())
}

fn add_spec(shape: &[usize]) -> OpSpec {
    OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: ScalarType::F32,
        lhs: shape.to_vec(),
        rhs: shape.to_vec(),
        out_dtype: None,
    })
}

/// Nothing was compiled or launched.
fn assert_nothing_ran(rt: &Runtime) {
    let s = rt.stats();
    assert_eq!((s.compiles, s.disk_hits, s.launches), (0, 0, 0), "{s:?}");
}

/// After the errors, a valid op still runs and gives the right answer.
fn assert_still_works(rt: &Runtime) {
    let a = rt.tensor(&[3], &[1.0f32, 2.0, 3.0]).unwrap();
    let b = rt.tensor(&[3], &[10.0f32, 20.0, 30.0]).unwrap();
    let y = rt.add(&a, &b).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);
}

#[test]
fn wrong_input_count() {
    let rt = runtime();
    let a = rt.tensor(&[2, 3], &[0.0f32; 6]).unwrap();
    let spec = add_spec(&[2, 3]);
    for inputs in [vec![], vec![&a], vec![&a, &a, &a]] {
        let err = rt.run(&spec, &inputs).unwrap_err();
        assert!(
            matches!(err, RuntimeError::InputCount { expected: 2, found, .. } if found == inputs.len()),
            "{err:?}"
        );
        assert!(err.to_string().contains("takes 2 input tensors"), "{err}");
    }
    assert_nothing_ran(&rt);
    assert_still_works(&rt);
}

#[test]
fn wrong_shape() {
    let rt = runtime();
    let spec = add_spec(&[2, 3]);
    let good = rt.tensor(&[2, 3], &[0.0f32; 6]).unwrap();
    for shape in [vec![3, 2], vec![6], vec![2, 4], vec![1, 3, 2]] {
        let n: usize = shape.iter().product();
        let bad = rt.tensor(&shape, &vec![0.0f32; n]).unwrap();
        let err = rt.run(&spec, &[&good, &bad]).unwrap_err();
        assert!(
            matches!(&err, RuntimeError::InputShape { input, expected, found, .. }
                if input == "b" && expected == &[2, 3] && found == &shape),
            "{shape:?}: {err:?}"
        );
    }
    // Through the convenience API: k disagrees.
    let a = rt.tensor(&[2, 3], &[0.0f32; 6]).unwrap();
    let b = rt.tensor(&[4, 2], &[0.0f32; 8]).unwrap();
    let err = rt.matmul(&a, &b).unwrap_err();
    assert!(matches!(err, RuntimeError::InputShape { .. }), "{err:?}");
    // Not matrices at all.
    let v = rt.tensor(&[3], &[0.0f32; 3]).unwrap();
    let err = rt.matmul(&v, &a).unwrap_err();
    assert!(matches!(err, RuntimeError::BadArgument(_)), "{err:?}");
    assert_nothing_ran(&rt);

    // Leading 1s do not change the elements' order, so they are accepted.
    let a = rt.tensor(&[1, 2, 3], &[1.0f32; 6]).unwrap();
    let y = rt.run(&spec, &[&a, &good]).unwrap();
    assert_eq!(y[0].shape(), &[2, 3]);
    assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![1.0; 6]);
}

#[test]
fn wrong_dtype() {
    let rt = runtime();
    let spec = add_spec(&[4]);
    let a = rt.tensor(&[4], &[1.0f32; 4]).unwrap();
    let b = rt.tensor(&[4], &[1.0f64; 4]).unwrap();
    let err = rt.run(&spec, &[&a, &b]).unwrap_err();
    assert!(
        matches!(
            &err,
            RuntimeError::InputDtype {
                input,
                expected: ScalarType::F32,
                found: ScalarType::F64,
                ..
            } if input == "b"
        ),
        "{err:?}"
    );
    // The convenience ops take the dtype from the first operand.
    let err = rt.add(&b, &a).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::InputDtype {
                expected: ScalarType::F64,
                found: ScalarType::F32,
                ..
            }
        ),
        "{err:?}"
    );
    let i = rt.tensor(&[4], &[1i32; 4]).unwrap();
    let err = rt.run(&spec, &[&i, &a]).unwrap_err();
    assert!(matches!(err, RuntimeError::InputDtype { .. }), "{err:?}");
    assert_nothing_ran(&rt);
    assert_still_works(&rt);
}

#[test]
fn tensor_from_another_runtime() {
    let rt = runtime();
    let other = runtime();
    let mine = rt.tensor(&[4], &[1.0f32; 4]).unwrap();
    let theirs = other.tensor(&[4], &[1.0f32; 4]).unwrap();
    for inputs in [[&mine, &theirs], [&theirs, &mine]] {
        let err = rt.run(&add_spec(&[4]), &inputs).unwrap_err();
        assert!(matches!(err, RuntimeError::WrongDevice { .. }), "{err:?}");
    }
    let err = rt.add(&theirs, &theirs).unwrap_err();
    assert!(matches!(err, RuntimeError::WrongDevice { .. }), "{err:?}");
    assert_nothing_ran(&rt);
    // Each runtime accepts its own tensors.
    assert!(other.add(&theirs, &theirs).is_ok());
    assert!(rt.add(&mine, &mine).is_ok());
}

#[test]
fn impossible_sizes_are_too_large() {
    let rt = runtime();
    let err = rt.zeros(&[1 << 40, 1 << 40], ScalarType::F32).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::TooLarge { bytes, dtype: ScalarType::F32, .. } if bytes == 1u128 << 82
        ),
        "{err:?}"
    );
    // The element count overflows even u128 arithmetic.
    let err = rt
        .zeros(&[usize::MAX, usize::MAX, 4], ScalarType::F64)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::TooLarge {
                bytes: u128::MAX,
                ..
            }
        ),
        "{err:?}"
    );
    // Uploads check the size before looking at the data.
    let err = rt.tensor(&[1 << 40, 1 << 40], &[1.0f32]).unwrap_err();
    assert!(matches!(err, RuntimeError::TooLarge { .. }), "{err:?}");
    let err = rt
        .tensor_from_f64(&[1 << 40, 1 << 40], ScalarType::F16, &[1.0])
        .unwrap_err();
    assert!(matches!(err, RuntimeError::TooLarge { .. }), "{err:?}");
    assert_still_works(&rt);
}

#[test]
fn max_buffer_bytes_is_enforced() {
    let mut rt = runtime();
    rt.set_max_buffer_bytes(1024);
    assert!(rt.zeros(&[256], ScalarType::F32).is_ok());
    let err = rt.zeros(&[257], ScalarType::F32).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::TooLarge {
                bytes: 1028,
                limit: 1024,
                ..
            }
        ),
        "{err:?}"
    );
    let err = rt.tensor(&[129], &[0.0f64; 129]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::TooLarge { limit: 1024, .. }),
        "{err:?}"
    );

    // An op whose output would exceed the limit is refused before it runs.
    let a = rt.tensor(&[16, 16], &[1.0f32; 256]).unwrap();
    rt.set_max_buffer_bytes(512);
    let err = rt.add(&a, &a).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::TooLarge {
                bytes: 1024,
                limit: 512,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(rt.stats().launches, 0);
    rt.set_max_buffer_bytes(1024);
    assert_eq!(
        rt.add(&a, &a).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0; 256]
    );
}

/// A request within the limits that the allocator cannot satisfy is `OutOfMemory`, not
/// an abort: 2^62 bytes is more address space than any 64-bit host maps, so the
/// allocation fails up front (no page is touched).
#[cfg(target_pointer_width = "64")]
#[test]
fn failed_allocation_is_out_of_memory() {
    let mut rt = runtime();
    rt.set_max_buffer_bytes(u64::MAX);
    let err = rt.zeros(&[1 << 60], ScalarType::F32).unwrap_err();
    assert!(
        matches!(err, RuntimeError::OutOfMemory { bytes, .. } if bytes == 1u64 << 62),
        "{err:?}"
    );
    let err = rt.tensor(&[1 << 60], &[0.0f32; 4]).unwrap_err();
    assert!(matches!(err, RuntimeError::OutOfMemory { .. }), "{err:?}");
    // Past isize::MAX no allocator can be asked at all: too large, whatever the limit.
    let err = rt.zeros(&[1 << 61], ScalarType::F32).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::TooLarge {
                limit: u64::MAX,
                ..
            }
        ),
        "{err:?}"
    );
    assert_still_works(&rt);
}

#[test]
fn data_length_mismatch() {
    let rt = runtime();
    for data in [&[1.0f32; 5][..], &[1.0f32; 7][..], &[][..]] {
        let err = rt.tensor(&[2, 3], data).unwrap_err();
        assert!(
            matches!(&err, RuntimeError::DataLength { shape, expected: 6, found }
                if shape == &[2, 3] && *found == data.len()),
            "{err:?}"
        );
    }
    let err = rt
        .tensor_from_f64(&[4], ScalarType::Bf16, &[1.0; 3])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::DataLength {
                expected: 4,
                found: 3,
                ..
            }
        ),
        "{err:?}"
    );
    // 7 bytes are one whole f32 and change: the count is wrong first.
    let err = rt
        .tensor_from_bytes(&[2], ScalarType::F32, &[0; 7])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::DataLength {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{err:?}"
    );
    // 9 bytes: two whole f32 and a stray byte.
    let err = rt
        .tensor_from_bytes(&[2], ScalarType::F32, &[0; 9])
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BadArgument(_)), "{err:?}");
    // A rank-0 tensor holds one element.
    assert!(rt.tensor::<f32>(&[], &[]).is_err());
    assert_eq!(
        rt.tensor(&[], &[5.0f32]).unwrap().to_vec::<f32>().unwrap(),
        vec![5.0]
    );
}

#[test]
fn to_vec_with_the_wrong_element_type() {
    let rt = runtime();
    let t = rt.tensor(&[2], &[1.0f32, 2.0]).unwrap();
    let err = t.to_vec::<f64>().unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Dtype {
                expected: ScalarType::F32,
                found: ScalarType::F64
            }
        ),
        "{err:?}"
    );
    assert!(matches!(t.to_vec::<i32>(), Err(RuntimeError::Dtype { .. })));
    assert!(matches!(
        t.to_vec::<half::f16>(),
        Err(RuntimeError::Dtype { .. })
    ));
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(t.to_f64().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn invalid_spec() {
    let rt = runtime();
    let a = rt.tensor(&[2, 1], &[0.0f32; 2]).unwrap();
    let b = rt.tensor(&[1, 2], &[0.0f32; 2]).unwrap();
    let int_gemm = OpSpec::Gemm(GemmSpec::new(ScalarType::I32, 2, 2, 1));
    let err = rt.run(&int_gemm, &[&a, &b]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::Spec(SpecError::UnsupportedDtype { .. })),
        "{err:?}"
    );
    // Validation comes before the input checks: no inputs at all gives the same error.
    let err = rt.run(&int_gemm, &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::Spec(_)), "{err:?}");
    // Broadcasting shapes that do not broadcast.
    let spec = OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: ScalarType::F32,
        lhs: vec![2, 3],
        rhs: vec![4],
        out_dtype: None,
    });
    let err = rt.run(&spec, &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::Spec(_)), "{err:?}");
    // An axis out of range through the convenience API.
    let x = rt.tensor(&[2, 3], &[0.0f32; 6]).unwrap();
    let err = rt.softmax(&x, 2).unwrap_err();
    assert!(
        matches!(err, RuntimeError::Spec(SpecError::BadAxis { .. })),
        "{err:?}"
    );
    assert!(matches!(rt.softmax(&x, -3), Err(RuntimeError::Spec(_))));
    // A zero-sized tensor is a valid operand: a sum over its empty axis is 0, written
    // without compiling or launching anything.
    let empty = rt.zeros(&[0, 3], ScalarType::F32).unwrap();
    let sum = rt.sum(&empty, &[0]).unwrap();
    assert_eq!(sum.to_vec::<f32>().unwrap(), vec![0.0; 3]);
    assert_nothing_ran(&rt);
    assert_still_works(&rt);
}

#[test]
fn reshape_with_the_wrong_element_count() {
    let rt = runtime();
    let t = rt
        .tensor(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    for shape in [&[4, 2][..], &[7][..], &[2, 3, 2][..], &[0, 6][..]] {
        let err = t.reshape(shape).unwrap_err();
        assert!(
            matches!(err, RuntimeError::BadArgument(_)),
            "{shape:?}: {err:?}"
        );
    }
    let r = t.reshape(&[3, 2]).unwrap();
    assert_eq!(r.shape(), &[3, 2]);
    assert_eq!(r.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    let r = t.reshape(&[6, 1]).unwrap();
    assert_eq!(r.strides(), vec![1, 1]);
}
