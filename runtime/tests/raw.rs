//! Raw kernels: user IR (builder or JSON) loaded, launched on views with a grid, on
//! every device present (lavapipe required on CI), with their typed refusals.

mod common;

use kernelc_ir::builder::{global_id, KernelBuilder};
use kernelc_ir::{Access, Kernel, Scalar, ScalarType};
use kernelc_runtime::{KernelArg, Runtime, RuntimeError};

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("raw kernels", &["wgpu:wgsl", "wgpu:spirv", "cuda"])
}

/// `y[i] = a · x[i] + y[i]` for `i < 64` (one workgroup of 64 invocations).
fn axpy() -> Kernel {
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    let x = k.buffer("x", ScalarType::F32, 64, Access::Read);
    let y = k.buffer("y", ScalarType::F32, 64, Access::ReadWrite);
    let a = k.scalar("a", ScalarType::F32);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.store(y, i.clone(), a * x.at(i.clone()) + y.at(i));
    })
    .expect("valid kernel")
}

#[test]
fn a_user_kernel_runs_on_views_at_offsets() {
    for rt in &runtimes() {
        let name = format!("{} ({})", rt.device_name(), rt.target_name());
        let kernel = rt
            .load_kernel(&axpy())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let from_json = rt
            .load_kernel_json(&kernelc_ir::to_json(&axpy()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let buf = rt.alloc_buffer(2048).unwrap();
        rt.fill_buffer(&buf, 0, 2048, 0x77).unwrap();
        // x at a 256-byte offset, y at a 4-byte one: wgpu binds x and stages y, and
        // y shares x's buffer (read-only and writable bindings of one buffer).
        let x = buf.view(256, ScalarType::F32, &[64]).unwrap();
        let y = buf.view(1028, ScalarType::F32, &[64]).unwrap();
        rt.write_view(&x, &(0..64).map(|i| i as f32).collect::<Vec<_>>())
            .unwrap();
        rt.write_view(&y, &vec![1.0f32; 64]).unwrap();
        let before = rt.read_buffer(&buf, 0, 2048).unwrap();
        for k in [&kernel, &from_json] {
            let args = [
                KernelArg::View(&x),
                KernelArg::View(&y),
                KernelArg::Scalar(Scalar::f32(2.0)),
            ];
            rt.launch(k, [1, 1, 1], &args)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let want: Vec<f32> = (0..64).map(|i| 1.0 + 4.0 * i as f32).collect();
        assert_eq!(rt.read_view::<f32>(&y).unwrap(), want, "{name}");
        let after = rt.read_buffer(&buf, 0, 2048).unwrap();
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            assert!(
                (1028..1028 + 256).contains(&i) || b == a,
                "{name}: byte {i} changed"
            );
        }
    }
}

#[test]
fn bad_kernels_and_arguments_are_typed_errors() {
    for rt in &runtimes() {
        let bad_json = rt.load_kernel_json("{\"name\": 3}");
        assert!(matches!(bad_json, Err(RuntimeError::InvalidKernel(_))));
        let kernel = rt.load_kernel(&axpy()).unwrap();
        let buf = rt.alloc_buffer(1024).unwrap();
        let x = buf.view(0, ScalarType::F32, &[64]).unwrap();
        let y = buf.view(512, ScalarType::F32, &[64]).unwrap();
        let short = buf.view(512, ScalarType::F32, &[63]).unwrap();
        let ints = buf.view(512, ScalarType::I32, &[64]).unwrap();
        let overlapping = buf.view(128, ScalarType::F32, &[64]).unwrap();
        let strided = buf
            .view_strided(512, ScalarType::F32, &[8, 8], &[1, 8])
            .unwrap();
        let two = Scalar::f32(2.0);
        let cases: Vec<(&str, Vec<KernelArg<'_>>)> = vec![
            ("too few", vec![KernelArg::View(&x), KernelArg::View(&y)]),
            (
                "short",
                vec![
                    KernelArg::View(&x),
                    KernelArg::View(&short),
                    KernelArg::Scalar(two),
                ],
            ),
            (
                "dtype",
                vec![
                    KernelArg::View(&x),
                    KernelArg::View(&ints),
                    KernelArg::Scalar(two),
                ],
            ),
            (
                "scalar type",
                vec![
                    KernelArg::View(&x),
                    KernelArg::View(&y),
                    KernelArg::Scalar(Scalar::I32(2)),
                ],
            ),
            (
                "strided",
                vec![
                    KernelArg::View(&x),
                    KernelArg::View(&strided),
                    KernelArg::Scalar(two),
                ],
            ),
            (
                "kind",
                vec![
                    KernelArg::View(&x),
                    KernelArg::Scalar(two),
                    KernelArg::View(&y),
                ],
            ),
        ];
        for (what, args) in cases {
            let e = rt.launch(&kernel, [1, 1, 1], &args);
            assert!(
                matches!(e, Err(RuntimeError::Launch { .. })),
                "{what}: {e:?}"
            );
        }
        let e = rt.launch(
            &kernel,
            [1, 1, 1],
            &[
                KernelArg::View(&x),
                KernelArg::View(&overlapping),
                KernelArg::Scalar(two),
            ],
        );
        assert!(matches!(e, Err(RuntimeError::Overlap { .. })), "{e:?}");
        // A kernel loaded by another runtime.
        let other = Runtime::cpu();
        let foreign = other.load_kernel(&axpy()).unwrap();
        let e = rt.launch(
            &foreign,
            [1, 1, 1],
            &[
                KernelArg::View(&x),
                KernelArg::View(&y),
                KernelArg::Scalar(two),
            ],
        );
        assert!(matches!(e, Err(RuntimeError::WrongDevice { .. })), "{e:?}");
        // An out-of-bounds store is reported by the kernel's status word at the next
        // synchronising call (launches are asynchronous), naming the kernel; the
        // report is made once.
        let args = [
            KernelArg::View(&x),
            KernelArg::View(&y),
            KernelArg::Scalar(two),
        ];
        rt.launch(&kernel, [2, 1, 1], &args).expect("queued");
        let e = rt.synchronize();
        assert!(
            matches!(&e, Err(RuntimeError::Launch { kernel, .. }) if kernel.contains("axpy")),
            "{e:?}"
        );
        rt.synchronize().expect("reported once");
        // The runtime's own copies are no synchronising calls: an overlapping copy
        // (through the host on wgpu and CUDA) succeeds, and the failure waits.
        rt.launch(&kernel, [2, 1, 1], &args).expect("queued");
        rt.copy_buffer(&buf, 0, &buf, 4, 64)
            .expect("a copy reports no other op");
        assert!(matches!(rt.synchronize(), Err(RuntimeError::Launch { .. })));
        // A grid whose workgroup count overflows is refused, not a panic.
        let e = rt.launch(&kernel, [u32::MAX; 3], &args);
        assert!(matches!(e, Err(RuntimeError::Launch { .. })), "{e:?}");
        rt.synchronize().expect("nothing ran");
        // A read is a synchronising call too.
        rt.launch(&kernel, [2, 1, 1], &args).expect("queued");
        assert!(matches!(
            rt.read_view::<f32>(&x),
            Err(RuntimeError::Launch { .. })
        ));
        rt.read_view::<f32>(&x).expect("reported once");
    }
}

/// f32 `exp2` is within 2 ULP of the correctly rounded value on every device (CUDA's
/// native `ex2.approx.f32`, the others kernelc's IR implementation), across the
/// normal and subnormal results, overflow and the special values.
#[test]
fn exp2_is_within_two_ulp_everywhere() {
    const N: usize = 4096;
    let mut k = KernelBuilder::new("exp2", [64, 1, 1]);
    let x = k.buffer("x", ScalarType::F32, N as u64, Access::Read);
    let y = k.buffer("y", ScalarType::F32, N as u64, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(y, i.clone(), x.at(i).exp2());
        })
        .expect("valid kernel");
    let mut xs: Vec<f32> = (0..N - 8)
        .map(|i| -152.0 + 282.0 * i as f32 / (N - 8) as f32 + (i % 7) as f32 * 1e-3)
        .collect();
    xs.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-30,
        127.99,
        -149.5,
    ]);
    // The distance in representable f32 values (subnormals count as any others).
    let ordinal = |v: f32| {
        let b = v.to_bits() as i64;
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    for rt in &runtimes() {
        let name = format!("{} ({})", rt.device_name(), rt.target_name());
        let loaded = rt
            .load_kernel(&kernel)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let buf = rt.alloc_buffer(2 * N * 4).unwrap();
        let xv = buf.view(0, ScalarType::F32, &[N]).unwrap();
        let yv = buf.view(N * 4, ScalarType::F32, &[N]).unwrap();
        rt.write_view(&xv, &xs).unwrap();
        let args = [KernelArg::View(&xv), KernelArg::View(&yv)];
        rt.launch(&loaded, [(N / 64) as u32, 1, 1], &args)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = rt.read_view::<f32>(&yv).unwrap();
        let caps = rt.caps();
        for (&x, &g) in xs.iter().zip(&got) {
            let want = (x as f64).exp2() as f32;
            // Only where the caps promise them (NVIDIA's Vulkan driver flushes).
            let promised = (caps.keeps_subnormals || !want.is_subnormal())
                && (caps.ieee_specials || want.is_finite() && x.is_finite());
            if !promised {
                continue;
            }
            let ok = if want.is_nan() {
                g.is_nan()
            } else {
                (ordinal(g) - ordinal(want)).abs() <= 2
            };
            assert!(ok, "{name}: exp2({x:e}) = {g:e}, want {want:e}");
        }
    }
}
