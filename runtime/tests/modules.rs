//! Native modules through the runtime: WGSL and SPIR-V shaders on every wgpu path
//! present (lavapipe on CI), with views at offsets, immediate data, staging and
//! typed refusals; PTX kernels on CUDA (the GPU machine). Every other device refuses
//! both kinds with a typed error.

use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{
    Device, PtxArg, PtxParam, Runtime, RuntimeError, ScalarType, ShaderBinding, ShaderSource,
};

mod common;

/// `out[i] = a[i] * 2 + k` for `i < arrayLength(out)`, `k` an immediate (or 0.5).
fn wgsl(with_immediate: bool) -> String {
    let (decl, k) = if with_immediate {
        ("struct K { k: f32 }\nvar<immediate> imm: K;\n", "imm.k")
    } else {
        ("", "0.5")
    };
    format!(
        "{decl}@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn double_plus(@builtin(global_invocation_id) id: vec3<u32>) {{
    let i = id.x;
    if (i < arrayLength(&out)) {{ out[i] = a[i] * 2.0 + {k}; }}
}}"
    )
}

/// The same shader as a SPIR-V binary (naga's SPIR-V writer).
fn spirv_bytes() -> Vec<u8> {
    use wgpu::naga;
    let module = naga::front::wgsl::parse_str(&wgsl(false)).expect("parses");
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .expect("validates");
    let words = naga::back::spv::write_vec(&module, &info, &Default::default(), None)
        .expect("writes SPIR-V");
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn wgpu_runtimes() -> Vec<Runtime> {
    common::runtimes_on("shader modules", &common::ALL_PATHS[..4])
        .into_iter()
        .filter(|rt| rt.target_name() != "cpu")
        .collect()
}

#[test]
fn wgsl_and_spirv_modules_run_on_views_at_offsets() {
    let spirv = spirv_bytes();
    for rt in &wgpu_runtimes() {
        let name = format!("{} [{}]", rt.device_name(), rt.target_name());
        let rw = [ShaderBinding::ReadOnly, ShaderBinding::ReadWrite];
        let buf = rt.alloc_buffer(4096).unwrap();
        rt.fill_buffer(&buf, 0, 4096, 0xEE).unwrap();
        let n = 100;
        // The input at a binding-aligned offset, the output at one the device must
        // stage (4 bytes past it).
        let a = buf.view(256, ScalarType::F32, &[n]).unwrap();
        let out = buf.view(1028, ScalarType::F32, &[n]).unwrap();
        let x: Vec<f32> = (0..n).map(|i| i as f32 - 7.0).collect();
        rt.write_view(&a, &x).unwrap();
        for (label, source) in [
            ("wgsl", ShaderSource::Wgsl(&wgsl(false))),
            ("spirv", ShaderSource::SpirV(&spirv)),
        ] {
            let module = rt
                .load_shader(source, "double_plus", &rw, 0)
                .unwrap_or_else(|e| panic!("{name} {label}: {e}"));
            let before = rt.read_buffer(&buf, 0, 4096).unwrap();
            rt.dispatch_shader(&module, &[&a, &out], &[], [2, 1, 1])
                .unwrap_or_else(|e| panic!("{name} {label}: {e}"));
            let want: Vec<f32> = x.iter().map(|v| v * 2.0 + 0.5).collect();
            assert_eq!(rt.read_view::<f32>(&out).unwrap(), want, "{name} {label}");
            let after = rt.read_buffer(&buf, 0, 4096).unwrap();
            for (i, (b, a)) in before.iter().zip(&after).enumerate() {
                if !(1028..1028 + 4 * n).contains(&i) {
                    assert_eq!(b, a, "{name} {label}: byte {i} outside the output changed");
                }
            }
            rt.fill_buffer(&buf, 1028, 4 * n, 0).unwrap();
        }
    }
}

#[test]
fn immediate_data_reaches_the_shader_where_the_adapter_has_it() {
    for rt in &wgpu_runtimes() {
        let name = format!("{} [{}]", rt.device_name(), rt.target_name());
        let rw = [ShaderBinding::ReadOnly, ShaderBinding::ReadWrite];
        match rt.load_shader(ShaderSource::Wgsl(&wgsl(true)), "double_plus", &rw, 4) {
            Ok(module) => {
                let a = rt.alloc_buffer(64).unwrap();
                let out = rt.alloc_buffer(64).unwrap();
                let (av, ov) = (
                    a.view(0, ScalarType::F32, &[16]).unwrap(),
                    out.view(0, ScalarType::F32, &[16]).unwrap(),
                );
                rt.write_view(&av, &[1.0f32; 16]).unwrap();
                rt.dispatch_shader(&module, &[&av, &ov], &3.0f32.to_le_bytes(), [1, 1, 1])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(rt.read_view::<f32>(&ov).unwrap(), vec![5.0; 16], "{name}");
                // The wrong amount of immediate data is refused.
                let e = rt
                    .dispatch_shader(&module, &[&av, &ov], &[0; 8], [1, 1, 1])
                    .unwrap_err();
                assert!(matches!(e, RuntimeError::Launch { .. }), "{name}: {e}");
            }
            Err(RuntimeError::Compile { message, .. }) => {
                println!("NOT RUN: immediate data on {name}: {message}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn bad_modules_and_arguments_are_typed_errors() {
    for rt in &wgpu_runtimes() {
        let name = format!("{} [{}]", rt.device_name(), rt.target_name());
        let rw = [ShaderBinding::ReadOnly, ShaderBinding::ReadWrite];
        // Not SPIR-V, not WGSL, no such entry point.
        for (source, entry) in [
            (ShaderSource::SpirV(&[1, 2, 3, 4, 5, 6, 7, 8]), "main"),
            (ShaderSource::SpirV(&[0; 24]), "main"),
            (ShaderSource::Wgsl("fn broken( {"), "main"),
            (ShaderSource::Wgsl(&wgsl(false)), "no_such_entry"),
        ] {
            let e = rt.load_shader(source, entry, &rw, 0).err();
            assert!(
                matches!(e, Some(RuntimeError::Compile { .. })),
                "{name}: {e:?}"
            );
        }
        let module = rt
            .load_shader(ShaderSource::Wgsl(&wgsl(false)), "double_plus", &rw, 0)
            .unwrap();
        let buf = rt.alloc_buffer(512).unwrap();
        let a = buf.view(0, ScalarType::F32, &[16]).unwrap();
        let overlapping = buf.view(32, ScalarType::F32, &[16]).unwrap();
        let e = rt
            .dispatch_shader(&module, &[&a], &[], [1, 1, 1])
            .unwrap_err();
        assert!(matches!(e, RuntimeError::Launch { .. }), "{name}: {e}");
        let e = rt
            .dispatch_shader(&module, &[&a, &overlapping], &[], [1, 1, 1])
            .unwrap_err();
        assert!(matches!(e, RuntimeError::Overlap { .. }), "{name}: {e}");
        // A module of another runtime.
        let other = Runtime::with_device(Device::cpu(), DiskCache::off());
        let cpu_buf = other.alloc_buffer(64).unwrap();
        let v = cpu_buf.view(0, ScalarType::F32, &[16]).unwrap();
        let e = rt
            .dispatch_shader(&module, &[&v, &v], &[], [1, 1, 1])
            .unwrap_err();
        assert!(matches!(e, RuntimeError::WrongDevice { .. }), "{name}: {e}");
    }
}

#[test]
fn other_devices_refuse_native_modules_by_name() {
    let rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    let e = rt
        .load_shader(ShaderSource::Wgsl(&wgsl(false)), "double_plus", &[], 0)
        .unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Unsupported { what, .. } if what.contains("double_plus")),
        "{e}"
    );
    let e = rt.load_ptx(".version 9.0", "k", &[]).unwrap_err();
    assert!(matches!(e, RuntimeError::Unsupported { .. }), "{e}");
}

/// `out[i] = a[i] * s` for `i < n`: hand-written PTX (a user kernel, not kernelc's).
const SCALE_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry scale(.param .u64 a, .param .u64 out, .param .f32 s, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [out];
    ld.param.f32 %f1, [s];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    mul.rn.f32 %f2, %f2, %f1;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}
"#;

#[test]
fn ptx_kernels_run_on_cuda_views() {
    let runtimes = common::runtimes_on("PTX modules", &["cuda"]);
    for rt in runtimes.iter().filter(|rt| rt.target_name() == "ptx") {
        let params = [
            PtxParam::Pointer,
            PtxParam::Pointer,
            PtxParam::Scalar(ScalarType::F32),
            PtxParam::Scalar(ScalarType::U32),
        ];
        let module = rt.load_ptx(SCALE_PTX, "scale", &params).unwrap();
        let buf = rt.alloc_buffer(4096).unwrap();
        let n = 300usize;
        let a = buf.view(0, ScalarType::F32, &[n]).unwrap();
        let out = buf.view(2048, ScalarType::F32, &[n]).unwrap();
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        rt.write_view(&a, &x).unwrap();
        let args = [
            PtxArg::View(&a),
            PtxArg::View(&out),
            PtxArg::Scalar(kernelc_ir::Scalar::f32(1.5)),
            PtxArg::Scalar(kernelc_ir::Scalar::U32(n as u32)),
        ];
        // SAFETY: the parameters are SCALE_PTX's own, and it reads `n` elements of `a`
        // and writes `n` of `out`, both views of `n` elements.
        unsafe { rt.launch_ptx(&module, [3, 1, 1], [128, 1, 1], 0, &args) }.unwrap();
        let want: Vec<f32> = x.iter().map(|v| v * 1.5).collect();
        assert_eq!(rt.read_view::<f32>(&out).unwrap(), want);
        // Typed refusals before anything runs: the wrong scalar type, too few
        // arguments, a block past the device's limits, PTX the JIT rejects.
        let mut bad = args;
        bad[2] = PtxArg::Scalar(kernelc_ir::Scalar::I32(3));
        // SAFETY: refused before launching.
        let e = unsafe { rt.launch_ptx(&module, [1, 1, 1], [1, 1, 1], 0, &bad) }.unwrap_err();
        assert!(matches!(e, RuntimeError::Launch { .. }), "{e}");
        // SAFETY: refused before launching.
        let e = unsafe { rt.launch_ptx(&module, [1, 1, 1], [1, 1, 1], 0, &args[..3]) }.unwrap_err();
        assert!(matches!(e, RuntimeError::Launch { .. }), "{e}");
        // SAFETY: refused before launching.
        let e = unsafe { rt.launch_ptx(&module, [1, 1, 1], [2048, 1, 1], 0, &args) }.unwrap_err();
        assert!(matches!(e, RuntimeError::Launch { .. }), "{e}");
        let e = rt.load_ptx("not ptx", "scale", &params).unwrap_err();
        assert!(matches!(e, RuntimeError::Compile { .. }), "{e}");
        let e = rt.load_ptx(SCALE_PTX, "missing", &params).unwrap_err();
        assert!(matches!(e, RuntimeError::Compile { .. }), "{e}");
    }
}
