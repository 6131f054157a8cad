//! Tests of the wgpu device on every shader path (lavapipe on CI).

//! The device below the runtime: kernels built with the IR builder, compiled and
//! launched directly, so that run-time errors (status bits), launch checks and the
//! scalar block can be aimed at exactly. Without an adapter each test prints a
//! `NOT RUN` line and returns (and fails when `CI` is set).

use super::*;
use crate::device::Slice;
use abi::status;
use kernelc_ir::builder::{global_id, KernelBuilder, E};
use kernelc_ir::ScalarType;

/// A device on `shader`'s path, or `None` (with a NOT RUN line) without an adapter.
pub(super) fn device(test: &str, shader: ShaderPath) -> Option<WgpuDevice> {
    match WgpuDevice::open(WgpuOptions {
        shader,
        allow_software: true,
    }) {
        Ok(d) => Some(d),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("no wgpu adapter on CI ({test}, {}): {e}", shader.name())
        }
        Err(e) => {
            println!("NOT RUN: no wgpu adapter ({test}, {}): {e}", shader.name());
            None
        }
    }
}

/// `kernel` as the runtime would compile it (after the target passes), no disk.
pub(super) fn compile(dev: &WgpuDevice, kernel: &Kernel) -> Executable {
    let kernel = kernelc_ir::passes::for_target(kernel, &dev.math_expansion());
    let key = CacheKey::new(
        kernelc_ir::stable_hash(&kernel).as_bytes(),
        dev.target_name(),
        dev.target_options(),
    );
    let (exe, from_disk) = dev
        .compile(&kernel, &key, &DiskCache::off())
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", kernel.name));
    assert!(!from_disk);
    Executable::Wgpu(exe)
}

/// A buffer of `dev` holding `bytes`.
pub(super) fn upload(dev: &WgpuDevice, bytes: &[u8]) -> Arc<Storage> {
    let storage = Storage::Wgpu(dev.alloc(bytes.len()).expect("allocates"));
    storage.write_bytes(bytes).expect("uploads");
    Arc::new(storage)
}

/// A buffer of `dev` of `words` u32 words, every byte `POISON`.
fn poisoned(dev: &WgpuDevice, words: usize) -> Arc<Storage> {
    let storage = Storage::Wgpu(dev.alloc(words * 4).expect("allocates"));
    storage.fill(POISON).expect("fills");
    Arc::new(storage)
}

/// What a buffer holds where no kernel wrote.
const POISON: u8 = 0xAB;
const POISON_WORD: u32 = 0xABAB_ABAB;

fn words(storage: &Storage) -> Vec<u32> {
    storage
        .read_bytes()
        .expect("downloads")
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn i32_bytes(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

fn launch_message(result: Result<()>) -> String {
    match result {
        Err(RuntimeError::Launch { message, .. }) => message,
        other => panic!("expected a launch error, got {other:?}"),
    }
}

/// `out[i + shift] = a[i]` for `i` in 0..64 (one workgroup of 64): the store index
/// depends on a scalar, so the range analysis cannot prove it and it is checked.
fn shifted_copy_kernel() -> Kernel {
    let mut k = KernelBuilder::new("shifted_copy", [64, 1, 1]);
    let a = k.buffer("a", ScalarType::I32, 64, Access::Read);
    let out = k.buffer("out", ScalarType::I32, 64, Access::Write);
    let shift = k.scalar("shift", ScalarType::U32);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.store(out, i.clone() + shift, a.at(i));
    })
    .expect("valid kernel")
}

/// `out[i] = a[i] / d` for `i` in 0..64 (one workgroup of 64).
fn divide_kernel() -> Kernel {
    let mut k = KernelBuilder::new("divide", [64, 1, 1]);
    let a = k.buffer("a", ScalarType::I32, 64, Access::Read);
    let out = k.buffer("out", ScalarType::I32, 64, Access::Write);
    let d = k.scalar("d", ScalarType::I32);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        f.store(out, i.clone(), a.at(i) / d);
    })
    .expect("valid kernel")
}

/// Runs a kernel of parameters (`a`: 64 i32, `out`: 64 i32, one scalar) once on
/// `grid` with `a[i] = 6 i` and `out` poisoned; returns the result and `out`.
fn run_a_out_scalar(
    dev: &WgpuDevice,
    exe: &Executable,
    scalar: Scalar,
    grid: [u32; 3],
) -> (Result<()>, Vec<u32>) {
    let a = upload(dev, &i32_bytes((0..64).map(|v| v * 6)));
    let out = poisoned(dev, 64);
    let launch = LaunchRef {
        exe,
        grid,
        args: vec![
            BindingRef::Buffer(Slice::whole(&a)),
            BindingRef::Buffer(Slice::whole(&out)),
            BindingRef::Scalar(scalar),
        ],
    };
    // Launches are asynchronous: the status is reported by the next synchronising call.
    let result = dev.execute(&[launch]).and_then(|()| dev.synchronize());
    (result, words(&out))
}

#[test]
fn an_out_of_bounds_store_is_skipped_and_reported() {
    let Some(dev) = device(
        "an_out_of_bounds_store_is_skipped_and_reported",
        ShaderPath::Wgsl,
    ) else {
        return;
    };
    let exe = compile(&dev, &shifted_copy_kernel());
    let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::U32(32), [1, 1, 1]);
    let message = launch_message(result);
    assert_eq!(message, status::describe(status::OUT_OF_BOUNDS));
    assert!(message.contains("out-of-bounds"), "{message}");
    // Invocations 0..32 stored in bounds (at 32..64); 32..64 were skipped and
    // wrote nowhere else (`out[0..32]` still holds the poison).
    let want: Vec<u32> = (0..64)
        .map(|i| {
            if i < 32 {
                POISON_WORD
            } else {
                ((i - 32) * 6) as u32
            }
        })
        .collect();
    assert_eq!(out, want);
    // The same executable in bounds, and the device keeps working.
    let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::U32(0), [1, 1, 1]);
    result.unwrap();
    assert_eq!(out, (0..64).map(|i| (i * 6) as u32).collect::<Vec<_>>());
}

#[test]
fn an_integer_division_by_zero_yields_zero_and_is_reported() {
    let Some(dev) = device(
        "an_integer_division_by_zero_yields_zero_and_is_reported",
        ShaderPath::Wgsl,
    ) else {
        return;
    };
    let exe = compile(&dev, &divide_kernel());
    let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::I32(0), [1, 1, 1]);
    assert_eq!(
        launch_message(result),
        status::describe(status::DIVISION_BY_ZERO)
    );
    assert_eq!(
        out,
        vec![0; 64],
        "a division by zero yields 0 (and is stored)"
    );
    let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::I32(-3), [1, 1, 1]);
    result.unwrap();
    assert_eq!(out, (0..64).map(|i| (i * -2) as u32).collect::<Vec<_>>());
}

#[test]
fn a_grid_past_the_device_limit_is_refused_before_launch() {
    let Some(dev) = device(
        "a_grid_past_the_device_limit_is_refused_before_launch",
        ShaderPath::Wgsl,
    ) else {
        return;
    };
    let exe = compile(&dev, &divide_kernel());
    let over = dev
        .limits
        .max_compute_workgroups_per_dimension
        .saturating_add(1);
    for grid in [[over, 1, 1], [1, over, 1], [1, 1, over]] {
        // A divisor of 0 would set a status bit had anything run.
        let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::I32(0), grid);
        let message = launch_message(result);
        assert!(
            message.contains("grid") && message.contains("exceeds"),
            "{message}"
        );
        assert_eq!(out, vec![POISON_WORD; 64], "nothing ran for {grid:?}");
    }
    // An empty grid runs nothing and succeeds.
    let (result, out) = run_a_out_scalar(&dev, &exe, Scalar::I32(0), [0, 1, 1]);
    result.unwrap();
    assert_eq!(out, vec![POISON_WORD; 64]);
}

#[test]
fn arguments_that_do_not_fit_the_kernel_are_refused_before_launch() {
    let test = "arguments_that_do_not_fit_the_kernel_are_refused_before_launch";
    let Some(dev) = device(test, ShaderPath::Wgsl) else {
        return;
    };
    let exe = compile(&dev, &divide_kernel());
    let full = upload(&dev, &i32_bytes(0..64));
    // 16 bytes, in a 256-byte allocation: the shader would be free to write all 256.
    let short = poisoned(&dev, 4);
    let refused = |args: Vec<BindingRef<'_>>| {
        dev.execute(&[LaunchRef {
            exe: &exe,
            grid: [1, 1, 1],
            args,
        }])
    };
    let message = launch_message(refused(vec![
        BindingRef::Buffer(Slice::whole(&full)),
        BindingRef::Buffer(Slice::whole(&short)),
        BindingRef::Scalar(Scalar::I32(1)),
    ]));
    assert!(
        message.contains("must have 256 bytes, found 16"),
        "{message}"
    );
    assert_eq!(words(&short), vec![POISON_WORD; 4]);
    let message = launch_message(refused(vec![
        BindingRef::Buffer(Slice::whole(&full)),
        BindingRef::Buffer(Slice::whole(&full)),
        BindingRef::Scalar(Scalar::f32(1.0)),
    ]));
    assert!(message.contains("must be of type i32"), "{message}");
    let message = launch_message(refused(vec![BindingRef::Buffer(Slice::whole(&full))]));
    assert!(message.contains("takes 3 arguments"), "{message}");
    // A buffer of another wgpu device is refused, not bound.
    let other = WgpuDevice::open(WgpuOptions {
        shader: ShaderPath::Wgsl,
        allow_software: true,
    })
    .expect("a second device on the same adapter");
    let foreign = upload(&other, &i32_bytes(0..64));
    let result = refused(vec![
        BindingRef::Buffer(Slice::whole(&foreign)),
        BindingRef::Buffer(Slice::whole(&full)),
        BindingRef::Scalar(Scalar::I32(1)),
    ]);
    assert!(
        matches!(result, Err(RuntimeError::WrongDevice { .. })),
        "{result:?}"
    );
}

/// Scalars of every 4-byte kind and bool, each between buffers:
/// `(a, si, b, su, out_i, sf, out_u, sb, out_f, out_b)` with
/// `out_i[i] = a[i] * si`, `out_u[i] = su - i`, `out_f[i] = b[i] * sf`,
/// `out_b[i] = sb ? a[i] > 0 : a[i] <= 0`.
fn mixed_parameters_kernel() -> Kernel {
    let mut k = KernelBuilder::new("mixed_parameters", [16, 1, 1]);
    let a = k.buffer("a", ScalarType::I32, 16, Access::Read);
    let si = k.scalar("si", ScalarType::I32);
    let b = k.buffer("b", ScalarType::F32, 16, Access::Read);
    let su = k.scalar("su", ScalarType::U32);
    let out_i = k.buffer("out_i", ScalarType::I32, 16, Access::Write);
    let sf = k.scalar("sf", ScalarType::F32);
    let out_u = k.buffer("out_u", ScalarType::U32, 16, Access::Write);
    let sb = k.scalar("sb", ScalarType::Bool);
    let out_f = k.buffer("out_f", ScalarType::F32, 16, Access::Write);
    let out_b = k.buffer("out_b", ScalarType::Bool, 16, Access::Write);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        let ai = f.let_("ai", a.at(i.clone()));
        f.store(out_i, i.clone(), ai.clone() * si);
        f.store(out_u, i.clone(), su - i.clone());
        f.store(out_f, i.clone(), b.at(i.clone()) * sf);
        f.store(out_b, i, sb.select(ai.clone().gt(0i32), ai.le(0i32)));
    })
    .expect("valid kernel")
}

#[test]
fn packed_scalars_reach_the_kernel_on_every_shader_path() {
    let kernel = mixed_parameters_kernel();
    let layout = ShaderLayout::of(&kernel);
    // Six buffers at 0..6, the scalar block right after, then the status word:
    // dense, as passthrough SPIR-V needs.
    assert_eq!(
        layout
            .params
            .iter()
            .filter_map(|p| match p {
                ParamSlot::Buffer { binding } => Some(*binding),
                ParamSlot::Scalar { .. } => None,
            })
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!((layout.scalar_binding, layout.status_binding), (Some(6), 7));
    assert_eq!(layout.scalar_words, 4);
    let a: Vec<i32> = (0..16).map(|i| i - 7).collect();
    let b: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 1.0).collect();
    for path in ShaderPath::ALL {
        let Some(dev) = device("packed_scalars_reach_the_kernel_on_every_shader_path", path) else {
            continue;
        };
        let exe = compile(&dev, &kernel);
        for (si, su, sf, sb) in [(-3, 4_000_000_000u32, 2.5f32, true), (7, 15, -0.5, false)] {
            let a_buf = upload(&dev, &i32_bytes(a.iter().copied()));
            let b_buf = upload(
                &dev,
                &b.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
            );
            let mut outs: Vec<Arc<Storage>> = (0..3).map(|_| poisoned(&dev, 16)).collect();
            // 16 bools: 16 bytes, four packed words.
            outs.push(poisoned(&dev, 4));
            let launch = LaunchRef {
                exe: &exe,
                grid: [1, 1, 1],
                args: vec![
                    BindingRef::Buffer(Slice::whole(&a_buf)),
                    BindingRef::Scalar(Scalar::I32(si)),
                    BindingRef::Buffer(Slice::whole(&b_buf)),
                    BindingRef::Scalar(Scalar::U32(su)),
                    BindingRef::Buffer(Slice::whole(&outs[0])),
                    BindingRef::Scalar(Scalar::f32(sf)),
                    BindingRef::Buffer(Slice::whole(&outs[1])),
                    BindingRef::Scalar(Scalar::Bool(sb)),
                    BindingRef::Buffer(Slice::whole(&outs[2])),
                    BindingRef::Buffer(Slice::whole(&outs[3])),
                ],
            };
            dev.execute(&[launch])
                .unwrap_or_else(|e| panic!("{}: {e}", path.name()));
            let case = format!("{} with ({si}, {su}, {sf}, {sb})", path.name());
            let want_i: Vec<u32> = a.iter().map(|&v| (v * si) as u32).collect();
            assert_eq!(words(&outs[0]), want_i, "out_i, {case}");
            let want_u: Vec<u32> = (0..16).map(|i| su - i).collect();
            assert_eq!(words(&outs[1]), want_u, "out_u, {case}");
            let want_f: Vec<u32> = b.iter().map(|&v| (v * sf).to_bits()).collect();
            assert_eq!(words(&outs[2]), want_f, "out_f, {case}");
            // Bool elements are bytes, true stored as 1.
            let want_b: Vec<u8> = a
                .iter()
                .map(|&v| u8::from(if sb { v > 0 } else { v <= 0 }))
                .collect();
            assert_eq!(
                outs[3].read_bytes().expect("downloads"),
                want_b,
                "out_b, {case}"
            );
        }
    }
}

/// `out[i] = i` through a shared array of `shared_len` words, with `invocations`
/// invocations per workgroup.
fn workgroup_kernel(invocations: u32, shared_len: u32) -> Kernel {
    let mut k = KernelBuilder::new("workgroup", [invocations, 1, 1]);
    let out = k.buffer("out", ScalarType::U32, 64, Access::Write);
    let tile = k.shared("tile", ScalarType::U32, shared_len);
    k.build(|f| {
        let i = f.let_("i", kernelc_ir::builder::local_id(0));
        f.store(tile, i.clone(), i.clone());
        f.barrier();
        f.store(out, i.clone(), tile.at(i));
    })
    .expect("valid kernel")
}

#[test]
fn a_workgroup_past_the_device_limits_is_a_compile_error_on_every_path() {
    for path in ShaderPath::ALL {
        let test = "a_workgroup_past_the_device_limits_is_a_compile_error_on_every_path";
        let Some(dev) = device(test, path) else {
            continue;
        };
        let too_many = dev.limits.max_compute_invocations_per_workgroup + 1;
        let too_much_shared = dev.limits.max_compute_workgroup_storage_size / 4 + 1;
        for kernel in [
            workgroup_kernel(too_many, 64),
            workgroup_kernel(64, too_much_shared),
        ] {
            let kernel = kernelc_ir::passes::for_target(&kernel, &dev.math_expansion());
            let key = CacheKey::new(
                kernelc_ir::stable_hash(&kernel).as_bytes(),
                dev.target_name(),
                dev.target_options(),
            );
            match dev.compile(&kernel, &key, &DiskCache::off()) {
                Err(message) => assert!(message.contains("workgroup"), "{message}"),
                Ok(_) => panic!(
                    "{}: a workgroup of {:?} with {:?} compiled",
                    path.name(),
                    kernel.workgroup_size,
                    kernel.shared
                ),
            }
        }
        // The device keeps working.
        let exe = compile(&dev, &workgroup_kernel(64, 64));
        let out = poisoned(&dev, 64);
        let launch = LaunchRef {
            exe: &exe,
            grid: [1, 1, 1],
            args: vec![BindingRef::Buffer(Slice::whole(&out))],
        };
        dev.execute(&[launch]).unwrap();
        assert_eq!(
            words(&out),
            (0..64).collect::<Vec<u32>>(),
            "{}",
            path.name()
        );
    }
}

#[test]
fn every_catalogue_kernel_fits_the_launch_limits_it_is_checked_against() {
    let test = "every_catalogue_kernel_fits_the_launch_limits_it_is_checked_against";
    let Some(dev) = device(test, ShaderPath::Wgsl) else {
        return;
    };
    let kernels =
        kernelc_kernels::conformance::catalogue_kernels(&dev.caps(), &dev.math_expansion())
            .expect("the catalogue lowers");
    assert!(kernels.len() > 100, "{} kernels", kernels.len());
    for k in &kernels {
        let kernel = &k.kernel;
        let layout = ShaderLayout::of(kernel);
        dev.check_binding_count(&layout)
            .and_then(|()| dev.caps.check_workgroup(kernel))
            .unwrap_or_else(|e| panic!("{}: {e}", k.label));
    }
}

/// Float specials through expressions a driver may fold when it assumes none
/// (`x · 0`, `x − x`, `x + −0`, `0 − x`): kept on the passthrough path, where the
/// module declares `SignedZeroInfNanPreserve` (on a device that reports it) and
/// `NoContraction`. Except on llvmpipe, which simplifies an operation with a
/// literal zero operand while building it (gallivm's `lp_build_mul`/`lp_build_sub`),
/// whatever the module declares: there `x · 0` and `0 − x` are printed, not held to.
/// The paths through naga can declare neither; what they give is printed (and is
/// in docs/semantics.md).
#[test]
fn float_specials_survive_foldable_expressions_where_float_controls_are_declared() {
    let test = "float_specials_survive_foldable_expressions_where_float_controls_are_declared";
    let x = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1.5];
    type Fold = (&'static str, fn(E) -> E, fn(f32) -> f32);
    let folds: [Fold; 4] = [
        ("x * 0", |x| x * E::from(0.0f32), |x| x * 0.0),
        ("x - x", |x| x.clone() - x, |x| x - x),
        ("x + -0", |x| x + E::from(-0.0f32), |x| x + -0.0),
        ("0 - x", |x| E::from(0.0f32) - x, |x| 0.0 - x),
    ];
    let n = x.len() as u64;
    let mut k = KernelBuilder::new("folds", [1, 1, 1]);
    let input = k.buffer("x", ScalarType::F32, n, Access::Read);
    let out = k.buffer(
        "out",
        ScalarType::F32,
        n * folds.len() as u64,
        Access::Write,
    );
    let kernel = k
        .build(|b| {
            b.for_("i", 0u32, n as u32, 1, |b, i| {
                let v = b.let_("v", input.at(i.clone()));
                for (j, (_, ir, _)) in folds.iter().enumerate() {
                    b.store(out, i.clone() + (j as u32 * n as u32), ir(v.clone()));
                }
            });
        })
        .expect("valid kernel");
    for path in ShaderPath::ALL {
        let Some(dev) = device(test, path) else {
            continue;
        };
        let exe = compile(&dev, &kernel);
        let x_buf = upload(
            &dev,
            &x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
        );
        let out_buf = poisoned(&dev, x.len() * folds.len());
        let launch = LaunchRef {
            exe: &exe,
            grid: [1, 1, 1],
            args: vec![
                BindingRef::Buffer(Slice::whole(&x_buf)),
                BindingRef::Buffer(Slice::whole(&out_buf)),
            ],
        };
        dev.execute(&[launch]).expect("runs");
        let got = words(&out_buf);
        let mut lost = Vec::new();
        for (j, (name, _, host)) in folds.iter().enumerate() {
            for (i, &v) in x.iter().enumerate() {
                let want = host(v);
                let g = f32::from_bits(got[j * x.len() + i]);
                let same = (g.is_nan() && want.is_nan()) || g.to_bits() == want.to_bits();
                if !same {
                    lost.push(format!("{name} at {v}: {g} (want {want})"));
                }
            }
        }
        let literal_zero_shortcuts = dev.name.contains("llvmpipe");
        let (held, noted): (Vec<_>, Vec<_>) = lost.into_iter().partition(|l| {
            path == ShaderPath::SpirvPassthrough
                && dev.spirv_options.preserve_f32_specials
                && !(literal_zero_shortcuts && (l.starts_with("x * 0") || l.starts_with("0 - x")))
        });
        assert!(held.is_empty(), "{}: {held:?}", path.name());
        if !noted.is_empty() {
            println!(
                "NOTE: {} on {} loses float specials: {noted:?}",
                path.name(),
                dev.name
            );
        }
    }
}

#[test]
fn stored_spirv_must_start_with_the_magic_number() {
    let module: Vec<u8> = [SPIRV_MAGIC, 0x0001_0300, 0, 8, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    assert_eq!(
        words_from_bytes(&module).map(|w| w.len()),
        Some(5),
        "a SPIR-V header is accepted"
    );
    assert_eq!(words_from_bytes(b"not spir-v!!"), None);
    assert_eq!(words_from_bytes(&module[..7]), None, "not whole words");
    assert_eq!(words_from_bytes(&[]), None);
    // The magic in the wrong byte order (a big-endian module) is not taken.
    let swapped: Vec<u8> = SPIRV_MAGIC.to_be_bytes().to_vec();
    assert_eq!(words_from_bytes(&swapped), None);
}
