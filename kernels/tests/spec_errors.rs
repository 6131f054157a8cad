//! Every kind of invalid spec gives its typed error.

use kernelc_ir::ScalarType::{self, *};
use kernelc_kernels::shape::normalize_axis;
use kernelc_kernels::*;

fn err(spec: OpSpec) -> SpecError {
    match spec.validate() {
        Err(e) => {
            // The message must say something (and never panic to format).
            assert!(!e.to_string().is_empty());
            e
        }
        Ok(()) => panic!("expected {spec:?} to be invalid"),
    }
}

fn unary(func: UnaryFn, dtype: ScalarType, shape: Vec<usize>) -> OpSpec {
    OpSpec::Unary(UnarySpec { func, dtype, shape })
}

#[test]
fn every_example_is_valid() {
    for &k in OpKind::ALL {
        let spec = k.example();
        spec.validate()
            .unwrap_or_else(|e| panic!("example of {k:?} is invalid: {e}"));
    }
}

#[test]
fn shape_mismatch() {
    let e = err(OpSpec::Concat(ConcatSpec {
        dtype: F32,
        shapes: vec![vec![2, 3], vec![3, 3]],
        axis: 1,
    }));
    assert!(
        matches!(e, SpecError::ShapeMismatch { ref expected, ref found, .. }
        if *expected == vec![2, 3] && *found == vec![3, 3]),
        "{e:?}"
    );

    let e = err(OpSpec::Slice(SliceSpec {
        dtype: F32,
        shape: vec![4, 4],
        starts: vec![0],
        sizes: vec![1, 1],
        steps: vec![1, 1],
    }));
    assert!(matches!(e, SpecError::ShapeMismatch { .. }), "{e:?}");

    let mut g = GemmSpec::new(F32, 2, 2, 2);
    g.batch = vec![3];
    g.stride_a = Some(vec![4, 4]);
    assert!(matches!(
        err(OpSpec::Gemm(g)),
        SpecError::ShapeMismatch { .. }
    ));

    let e = err(OpSpec::Pool2dBackward(Pool2dBackwardSpec {
        kind: PoolKind::Avg,
        dtype: F32,
        image: Nchw::new([1, 1, 4, 4]),
        out_height: 3,
        out_width: 2,
        window: Some(Window2d::square(2, 2, 0)),
        count_include_pad: false,
        index_dtype: None,
        accumulate: false,
    }));
    assert!(matches!(e, SpecError::ShapeMismatch { .. }), "{e:?}");
}

#[test]
fn zero_sized() {
    // Empty tensors are valid (NumPy/ONNX): lowering computes nothing for them.
    unary(UnaryFn::Exp, F32, vec![3, 0]).validate().unwrap();
    OpSpec::Gemm(GemmSpec::new(F32, 2, 0, 2))
        .validate()
        .unwrap();
    OpSpec::Gemm(GemmSpec::new(F32, 2, 3, 0))
        .validate()
        .unwrap();
    let mut a = match OpKind::Attention.example() {
        OpSpec::Attention(a) => a,
        _ => unreachable!(),
    };
    a.seq_k = 0;
    a.mask = None;
    OpSpec::Attention(a.clone()).validate().unwrap();
    // Structure that cannot be zero is refused: no concat inputs, no heads.
    assert!(matches!(
        err(OpSpec::Concat(ConcatSpec {
            dtype: F32,
            shapes: vec![],
            axis: 0
        })),
        SpecError::ZeroSized { .. }
    ));
    a.heads = 0;
    assert!(matches!(
        err(OpSpec::Attention(a)),
        SpecError::ZeroSized { .. }
    ));
    // What has no answer over nothing is refused, saying why: the argmax of an empty
    // axis, batch statistics of no values, adaptive pooling of an empty image.
    let e = err(OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::ArgMax,
        dtype: F32,
        shape: vec![2, 0],
        axes: vec![1],
        keepdim: false,
        index_dtype: Some(I64),
        accumulate: false,
    }));
    assert!(e.to_string().contains("empty axis"), "{e}");
    let e = err(OpSpec::BatchNorm(BatchNormSpec {
        dtype: F32,
        shape: vec![0, 3, 4],
        eps: 1e-5,
        momentum: 0.1,
        training: true,
    }));
    assert!(
        e.to_string().contains("at least one value per channel"),
        "{e}"
    );
    let e = err(OpSpec::AdaptivePool2d(AdaptivePool2dSpec {
        kind: PoolKind::Max,
        pass: PoolPass::Forward,
        dtype: F32,
        batch: 1,
        channels: 2,
        in_size: [0, 4],
        out_size: [2, 2],
    }));
    assert!(e.to_string().contains("every window is empty"), "{e}");
}

#[test]
fn unsupported_dtype() {
    let e = err(OpSpec::Gemm(GemmSpec::new(I32, 2, 2, 2)));
    assert!(
        matches!(e, SpecError::UnsupportedDtype { dtype: I32, ref allowed, .. }
        if allowed.contains(&F32) && allowed.contains(&F16)),
        "{e:?}"
    );
    assert!(matches!(
        err(unary(UnaryFn::Exp, I32, vec![4])),
        SpecError::UnsupportedDtype { .. }
    ));
    // Index tensors must be u32, i32 or f32.
    assert!(matches!(
        err(OpSpec::Gather(GatherSpec {
            dtype: F32,
            index_dtype: F64,
            data: vec![4, 2],
            indices: vec![3],
            axis: 0,
            rows_of: None,
        })),
        SpecError::UnsupportedDtype { dtype: F64, .. }
    ));
    assert!(matches!(
        err(OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::Mean,
            dtype: U32,
            shape: vec![4],
            axes: vec![0],
            keepdim: false,
            index_dtype: None,
            accumulate: false
        })),
        SpecError::UnsupportedDtype { .. }
    ));
    // Rounding applies to f32 GEMMs only; a rounding that is none of f16, bf16 and
    // tf32 does not parse.
    let mut g = GemmSpec::new(F64, 2, 2, 2);
    g.input_rounding = Some(InputRounding::Tf32);
    assert!(matches!(
        err(OpSpec::Gemm(g)),
        SpecError::BadAttribute { .. }
    ));
    let json = r#"{"op":"gemm","dtype":"f32","m":2,"n":2,"k":2,"alpha":1.0,"beta":0.0,"input_rounding":"f64"}"#;
    assert!(serde_json::from_str::<OpSpec>(json).is_err());
}

#[test]
fn bad_attribute() {
    let drop = |p: f64| {
        OpSpec::Dropout(DropoutSpec {
            dtype: F32,
            shape: vec![8],
            p,
            seed: 0,
            step: 0,
            mask: false,
            rng: Default::default(),
            offset: 0,
        })
    };
    let e = err(drop(1.0));
    assert!(
        matches!(e, SpecError::BadAttribute { ref name, .. } if name == "p"),
        "{e:?}"
    );
    assert!(matches!(err(drop(-0.1)), SpecError::BadAttribute { .. }));

    let mut adam = match OpKind::Adam.example() {
        OpSpec::Adam(a) => a,
        _ => unreachable!(),
    };
    adam.step = 0;
    assert!(matches!(err(OpSpec::Adam(adam)),
        SpecError::BadAttribute { ref name, .. } if name == "step"));

    let e = err(OpSpec::Permute(PermuteSpec {
        dtype: F32,
        shape: vec![2, 3],
        perm: vec![0, 0],
    }));
    assert!(
        matches!(e, SpecError::BadAttribute { ref name, .. } if name == "perm"),
        "{e:?}"
    );

    let mut g = GemmSpec::new(F64, 3, 3, 3);
    g.layout = Layout::ColMajor;
    g.lda = Some(2);
    assert!(matches!(err(OpSpec::Gemm(g)),
        SpecError::BadAttribute { ref name, .. } if name == "lda"));

    // Overlapping batches of C.
    let mut g = GemmSpec::new(F32, 2, 2, 2);
    g.batch = vec![2];
    g.stride_c = Some(vec![1]);
    assert!(matches!(err(OpSpec::Gemm(g)),
        SpecError::BadAttribute { ref name, .. } if name == "stride_c"));

    let conv = |stride: usize| {
        OpSpec::Conv2d(Conv2dSpec {
            dtype: F32,
            pass: ConvPass::Forward,
            batch: 1,
            in_channels: 1,
            out_channels: 1,
            height: 3,
            width: 3,
            window: Window2d::square(5, stride, 0),
            bias: false,
        })
    };
    // Kernel larger than the (unpadded) input, and zero stride.
    assert!(matches!(err(conv(1)), SpecError::BadAttribute { .. }));
    assert!(matches!(err(conv(0)), SpecError::BadAttribute { .. }));

    let mut a = match OpKind::Attention.example() {
        OpSpec::Attention(a) => a,
        _ => unreachable!(),
    };
    a.kv_heads = 3;
    assert!(matches!(err(OpSpec::Attention(a)),
        SpecError::BadAttribute { ref name, .. } if name == "kv_heads"));

    // A function with no backward op cannot even be written down.
    let e = serde_json::from_str::<OpSpec>(
        r#"{"op":"activation_backward","func":"exp","dtype":"f32","shape":[4]}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown variant `exp`"), "{e}");
    assert!(matches!(
        err(OpSpec::ImageFilter(ImageFilterSpec {
            filter: ImageFilter::Grayscale,
            dtype: F32,
            height: 2,
            width: 2,
            channels: 1
        })),
        SpecError::BadAttribute { .. }
    ));
    assert!(matches!(
        err(OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::ArgMax,
            dtype: F32,
            shape: vec![4],
            axes: vec![0],
            keepdim: false,
            index_dtype: None,
            accumulate: false
        })),
        SpecError::BadAttribute { .. }
    ));
    assert!(matches!(
        err(unary(UnaryFn::LeakyRelu { slope: f64::NAN }, F32, vec![2])),
        SpecError::BadAttribute { .. }
    ));
}

#[test]
fn bad_axis() {
    let e = err(OpSpec::Softmax(SoftmaxSpec {
        dtype: F32,
        shape: vec![2, 3],
        axis: 2,
        log: false,
    }));
    assert!(
        matches!(e, SpecError::BadAxis { axis: 2, rank: 2 }),
        "{e:?}"
    );
    assert!(matches!(
        err(OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::Sum,
            dtype: F32,
            shape: vec![2, 3],
            axes: vec![0, 5],
            keepdim: false,
            index_dtype: None,
            accumulate: false
        })),
        SpecError::BadAxis { axis: 5, rank: 2 }
    ));
    assert!(matches!(
        normalize_axis(-3, 2),
        Err(SpecError::BadAxis { axis: -3, rank: 2 })
    ));
}

#[test]
fn not_broadcastable() {
    let e = err(OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: F32,
        lhs: vec![2, 3],
        rhs: vec![4],
        out_dtype: None,
    }));
    assert!(
        matches!(e, SpecError::NotBroadcastable { ref lhs, ref rhs }
        if *lhs == vec![2, 3] && *rhs == vec![4]),
        "{e:?}"
    );
    let mut a = match OpKind::Attention.example() {
        OpSpec::Attention(a) => a,
        _ => unreachable!(),
    };
    a.mask = Some(vec![5, 4]);
    assert!(matches!(
        err(OpSpec::Attention(a)),
        SpecError::NotBroadcastable { .. }
    ));
}

/// Past 2^48 elements a spec is invalid; past one kernel's 32-bit indices it is
/// valid and lowered in pieces (an op that splits) or refused naming the tensor.
#[test]
fn too_large() {
    use kernelc_kernels::lower::{lower, Binding, TargetCaps};
    let e = err(unary(UnaryFn::Exp, F32, vec![1 << 25, 1 << 24]));
    assert!(
        matches!(e, SpecError::TooLarge { elements, .. } if elements == 1u128 << 49),
        "{e:?}"
    );
    let huge = unary(UnaryFn::Exp, F32, vec![3, 1 << 30]);
    let plan = lower(&huge, &TargetCaps::cuda_sm90()).expect("split into pieces");
    assert_eq!(
        plan.launches.len(),
        2,
        "3·2^30 elements in pieces of < 2^31"
    );
    let mut covered = 0u64;
    for launch in &plan.launches {
        for (b, p) in launch.bindings.iter().zip(&launch.kernel.params) {
            if let (Binding::Part { start, .. }, kernelc_ir::Param::Buffer { len, .. }) = (b, p) {
                assert!(*len <= i32::MAX as u64);
                assert_eq!(start % 256, 0);
                covered = covered.max(start + len);
            }
        }
    }
    assert_eq!(covered, 3 << 30);
    let mut softmax = match OpKind::Softmax.example() {
        OpSpec::Softmax(s) => s,
        _ => unreachable!(),
    };
    softmax.shape = vec![3, 1 << 30];
    let plan = lower(&OpSpec::Softmax(softmax.clone()), &TargetCaps::cpu()).expect("rows split");
    assert!(plan.launches.len() >= 3, "one row of 2^30 a piece at most");
    // A row past the limit: catalogue ops over the row, each in pieces that fit.
    softmax.shape = vec![1, 3 << 30];
    let plan = lower(&OpSpec::Softmax(softmax), &TargetCaps::cpu()).expect("a long row");
    for launch in &plan.launches {
        for p in &launch.kernel.params {
            if let kernelc_ir::Param::Buffer { len, .. } = p {
                assert!(*len <= i32::MAX as u64, "{}", launch.kernel.name);
            }
        }
    }
    // An attention head past the limit: blocks of its queries; keys of one head past
    // it: blocks of keys combined by their log-sum-exp, every buffer within the limit.
    let attention = |seq_q: usize, seq_k: usize| -> OpSpec {
        serde_json::from_str(&format!(
            r#"{{"op":"attention","dtype":"f32","batch":1,"heads":1,"kv_heads":1,"seq_q":{seq_q},"seq_k":{seq_k},"head_dim":16,"scale":0.25,"causal":true}}"#
        ))
        .expect("a valid spec")
    };
    let plan = lower(&attention(1 << 28, 16), &TargetCaps::cpu()).expect("query blocks");
    assert!(plan.launches.len() >= 3, "{} launches", plan.launches.len());
    let plan = lower(&attention(16, 1 << 28), &TargetCaps::cpu()).expect("key blocks");
    // Three blocks of keys: three attentions, two combinations of the outputs, one of
    // the log-sum-exps between them.
    assert_eq!(
        plan.launches.len(),
        6,
        "{:?}",
        plan.launches
            .iter()
            .map(|l| &l.kernel.name)
            .collect::<Vec<_>>()
    );
    for launch in &plan.launches {
        for p in &launch.kernel.params {
            if let kernelc_ir::Param::Buffer { len, .. } = p {
                assert!(*len <= i32::MAX as u64, "{}", launch.kernel.name);
            }
        }
    }
    // A neighbourhood filter splits into windows of rows with their halo, each
    // binding its part from an aligned start.
    let mut sharpen = match OpKind::ImageFilter.example() {
        OpSpec::ImageFilter(f) => f,
        _ => unreachable!(),
    };
    sharpen.filter = kernelc_kernels::ImageFilter::Sharpen;
    (sharpen.height, sharpen.width, sharpen.channels) = (3 << 15, 1 << 15, 1);
    let plan = lower(&OpSpec::ImageFilter(sharpen), &TargetCaps::cpu()).expect("windows");
    assert!(
        plan.launches.len() >= 6,
        "three windows at least, each then copied"
    );
    for launch in &plan.launches {
        for b in &launch.bindings {
            if let Binding::Part { start, .. } = b {
                assert_eq!(start % 256, 0);
            }
        }
    }
    // An arg reduction over a split axis: each piece's extremum and position, then
    // one launch picking the best piece.
    let argmax = OpSpec::Reduce(ReduceSpec {
        func: ReduceFn::ArgMax,
        dtype: F32,
        shape: vec![3 << 30],
        axes: vec![0],
        keepdim: false,
        index_dtype: Some(ScalarType::I64),
        accumulate: false,
    });
    let plan = lower(&argmax, &TargetCaps::cpu()).expect("pieces and a pick");
    assert!(plan.launches.len() >= 5, "{} launches", plan.launches.len());
    // A GEMM with a leading dimension: blocks of A's rows, bound at aligned starts.
    let mut gemm = GemmSpec::new(F32, 1 << 16, 4, 1 << 15);
    gemm.lda = Some((1 << 15) + 1);
    let plan = lower(&OpSpec::Gemm(gemm), &TargetCaps::cpu()).expect("blocks");
    assert!(plan.launches.len() >= 2, "{} launches", plan.launches.len());
    for launch in &plan.launches {
        for b in &launch.bindings {
            if let Binding::Part { start, .. } = b {
                assert_eq!(start % 256, 0);
            }
        }
    }
    // Four rows of A, each past the limit, with an odd leading dimension: no aligned
    // block fits, so blocks start anywhere (bound from the alignment below).
    let thin = GemmSpec::new(F32, 4, 1, (1 << 31) + 1);
    let plan = lower(&OpSpec::Gemm(thin), &TargetCaps::cpu()).expect("unaligned blocks");
    assert!(plan.launches.len() >= 8, "{} launches", plan.launches.len());
    for launch in &plan.launches {
        for p in &launch.kernel.params {
            if let kernelc_ir::Param::Buffer { len, .. } = p {
                assert!(*len <= i32::MAX as u64, "{}", launch.kernel.name);
            }
        }
    }
}

#[test]
fn reference_input_errors() {
    let spec = OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: F32,
        lhs: vec![2],
        rhs: vec![2],
        out_dtype: None,
    });
    let e = reference(&spec, &[&[1.0, 2.0]]).unwrap_err();
    assert!(
        matches!(
            e,
            SpecError::InputCount {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{e:?}"
    );
    let e = reference(&spec, &[&[1.0, 2.0], &[1.0]]).unwrap_err();
    assert!(
        matches!(e, SpecError::InputLength { ref name, expected: 2, found: 1 } if name == "b"),
        "{e:?}"
    );
    // An invalid spec is reported before the inputs are looked at.
    let bad = unary(UnaryFn::Exp, I32, vec![2]);
    assert!(matches!(
        reference(&bad, &[]),
        Err(SpecError::UnsupportedDtype { .. })
    ));
}

#[test]
fn messages_say_what_is_wrong() {
    let e = err(OpSpec::Gemm(GemmSpec::new(I32, 2, 2, 2)));
    let msg = e.to_string();
    assert!(
        msg.contains("gemm") && msg.contains("i32") && msg.contains("f32"),
        "{msg}"
    );
    let e = err(OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: F32,
        lhs: vec![2, 3],
        rhs: vec![4],
        out_dtype: None,
    }));
    assert!(e.to_string().contains("[2, 3]"), "{e}");
}
