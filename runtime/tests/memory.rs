//! The mutable memory model on every device present: buffers and views, partial
//! copies and fills at any offset, ops run into views (in place, at offsets, two views
//! of one buffer), the aliasing rules, the pointer registry, and the typed errors that
//! leave every buffer unchanged. wgpu runs on every shader path (lavapipe on CI,
//! required there); CUDA where present (required with `KERNELC_REQUIRE_CUDA`).

mod common;

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::{Buffer, Runtime, RuntimeError, View};

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("memory model", common::ALL_PATHS)
}

fn name(rt: &Runtime) -> String {
    format!("{} ({})", rt.device_name(), rt.target_name())
}

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).expect("a valid spec")
}

/// A small deterministic generator (the same sequence on every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// A buffer of `bytes` bytes on `rt`, every byte `byte`.
fn filled(rt: &Runtime, bytes: usize, byte: u8) -> Buffer {
    let b = rt.alloc_buffer(bytes).unwrap();
    rt.fill_buffer(&b, 0, bytes, byte).unwrap();
    b
}

fn contents(rt: &Runtime, b: &Buffer) -> Vec<u8> {
    rt.read_buffer(b, 0, b.len()).unwrap()
}

#[test]
fn writes_reads_fills_and_copies_at_any_offset_match_a_host_model() {
    for rt in &runtimes() {
        let n = 203; // not a multiple of 4: edges of every kind
        let (a, b) = (rt.alloc_buffer(n).unwrap(), rt.alloc_buffer(n).unwrap());
        assert_eq!(
            contents(rt, &a),
            vec![0; n],
            "{}: fresh buffers are zeroed",
            name(rt)
        );
        let mut model = [vec![0u8; n], vec![0u8; n]];
        let mut rng = Lcg(7);
        for step in 0..200 {
            let (off, len) = (rng.below(n), rng.below(40));
            let len = len.min(n - off);
            let (i, j) = (rng.below(2), rng.below(2));
            let buf = |k: usize| if k == 0 { &a } else { &b };
            match rng.below(3) {
                0 => {
                    let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                    rt.write_buffer(buf(i), off, &data).unwrap();
                    model[i][off..off + len].copy_from_slice(&data);
                }
                1 => {
                    let byte = rng.below(256) as u8;
                    rt.fill_buffer(buf(i), off, len, byte).unwrap();
                    model[i][off..off + len].fill(byte);
                }
                _ => {
                    let to = rng.below(n - len + 1);
                    rt.copy_buffer(buf(i), off, buf(j), to, len).unwrap();
                    let moved = model[i][off..off + len].to_vec();
                    model[j][to..to + len].copy_from_slice(&moved);
                }
            }
            if step % 25 == 0 {
                let (off, len) = (rng.below(n), rng.below(n));
                let len = len.min(n - off);
                let got = rt.read_buffer(&a, off, len).unwrap();
                assert_eq!(got, model[0][off..off + len], "{}: step {step}", name(rt));
            }
        }
        assert_eq!(contents(rt, &a), model[0], "{}", name(rt));
        assert_eq!(contents(rt, &b), model[1], "{}", name(rt));
    }
}

/// `add` of `n` f32 elements from views at `offsets` (x, y, out) of one buffer of
/// `bytes` bytes prefilled with 0xCD; checks the sum and that no other byte changed.
fn add_at_offsets(rt: &Runtime, n: usize, offsets: [usize; 3], separate_output: bool) {
    let bytes = 4096;
    let buf = filled(rt, bytes, 0xCD);
    let out_buf = if separate_output {
        filled(rt, bytes, 0xCD)
    } else {
        buf.clone()
    };
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 100.0 - i as f32).collect();
    let xv = buf.view(offsets[0], ScalarType::F32, &[n]).unwrap();
    let yv = buf.view(offsets[1], ScalarType::F32, &[n]).unwrap();
    let ov = out_buf.view(offsets[2], ScalarType::F32, &[n]).unwrap();
    rt.write_view(&xv, &x).unwrap();
    rt.write_view(&yv, &y).unwrap();
    let before = contents(rt, &out_buf);
    let add = spec(&format!(
        r#"{{"op":"binary","func":"add","dtype":"f32","lhs":[{n}],"rhs":[{n}]}}"#
    ));
    rt.run_into(&add, &[&xv, &yv], &[&ov])
        .unwrap_or_else(|e| panic!("{}: add at {offsets:?}: {e}", name(rt)));
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(
        rt.read_view::<f32>(&ov).unwrap(),
        want,
        "{}: {offsets:?}",
        name(rt)
    );
    let after = contents(rt, &out_buf);
    let range = offsets[2]..offsets[2] + 4 * n;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if !range.contains(&i) {
            assert_eq!(
                b,
                a,
                "{}: byte {i} outside the output changed ({offsets:?})",
                name(rt)
            );
        }
    }
}

#[test]
fn ops_write_into_views_at_offsets_and_nothing_else() {
    for rt in &runtimes() {
        // Whole-vector aligned, 256-aligned (wgpu binds directly), and 4-byte aligned
        // views (narrow vectors; wgpu stages them), inputs and output in one buffer.
        for offsets in [
            [0, 512, 1024],
            [256, 768, 2048],
            [4, 260, 1028],
            [12, 600, 3000],
        ] {
            for n in [1, 37, 64] {
                add_at_offsets(rt, n, offsets, false);
                add_at_offsets(rt, n, offsets, true);
            }
        }
    }
}

/// Narrow views at any offset their element size allows: a u8 `add` (wrapping) from
/// and into views at odd byte offsets, a comparison into a bool view next to them, an
/// i16 view at a 2-byte offset; every byte outside the outputs keeps its value (on
/// wgpu the packed words are shared with neighbours and written atomically, or the
/// views are staged).
#[test]
fn narrow_views_at_odd_offsets_write_their_bytes_only() {
    for rt in &runtimes() {
        let buf = filled(rt, 1024, 0xA5);
        let n = 37;
        let (xo, yo, oo, bo) = (1, 101, 203, 307);
        let xv = buf.view(xo, ScalarType::U8, &[n]).unwrap();
        let yv = buf.view(yo, ScalarType::U8, &[n]).unwrap();
        let ov = buf.view(oo, ScalarType::U8, &[n]).unwrap();
        let bv = buf.view(bo, ScalarType::Bool, &[n]).unwrap();
        let x: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        let y: Vec<u8> = (0..n).map(|i| 250 - i as u8).collect();
        rt.write_view(&xv, &x).unwrap();
        rt.write_view(&yv, &y).unwrap();
        let before = contents(rt, &buf);
        let add = spec(&format!(
            r#"{{"op":"binary","func":"add","dtype":"u8","lhs":[{n}],"rhs":[{n}]}}"#
        ));
        rt.run_into(&add, &[&xv, &yv], &[&ov])
            .unwrap_or_else(|e| panic!("{}: u8 add: {e}", name(rt)));
        let lt = spec(&format!(
            r#"{{"op":"binary","func":"lt","dtype":"u8","lhs":[{n}],"rhs":[{n}],"out_dtype":"bool"}}"#
        ));
        rt.run_into(&lt, &[&xv, &yv], &[&bv])
            .unwrap_or_else(|e| panic!("{}: u8 lt: {e}", name(rt)));
        let sum: Vec<u8> = x.iter().zip(&y).map(|(a, b)| a.wrapping_add(*b)).collect();
        let less: Vec<bool> = x.iter().zip(&y).map(|(a, b)| a < b).collect();
        assert_eq!(rt.read_view::<u8>(&ov).unwrap(), sum, "{}", name(rt));
        assert_eq!(rt.read_view::<bool>(&bv).unwrap(), less, "{}", name(rt));
        let after = contents(rt, &buf);
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            let written = (oo..oo + n).contains(&i) || (bo..bo + n).contains(&i);
            if !written {
                assert_eq!(b, a, "{}: byte {i} outside the outputs changed", name(rt));
            }
        }
        // i16 at a 2-byte offset: negation wraps (−(−32768) = −32768).
        let hv = buf.view(502, ScalarType::I16, &[5]).unwrap();
        let hout = buf.view(602, ScalarType::I16, &[5]).unwrap();
        rt.write_view(&hv, &[i16::MIN, -1, 0, 7, i16::MAX]).unwrap();
        let neg = spec(r#"{"op":"unary","func":"neg","dtype":"i16","shape":[5]}"#);
        rt.run_into(&neg, &[&hv], &[&hout]).unwrap();
        assert_eq!(
            rt.read_view::<i16>(&hout).unwrap(),
            vec![i16::MIN, 1, 0, -7, -i16::MAX],
            "{}",
            name(rt)
        );
        // Views misaligned for their element stay refused.
        assert!(matches!(
            buf.view(1, ScalarType::I16, &[2]),
            Err(RuntimeError::Misaligned { .. })
        ));
    }
}

#[test]
fn f64_views_at_eight_byte_offsets_use_narrow_vectors() {
    for rt in &runtimes() {
        if !rt.caps().supports(ScalarType::F64) {
            println!("NOT RUN: f64 views on {} (no f64)", name(rt));
            continue;
        }
        let n = 64;
        let op = spec(&format!(
            r#"{{"op":"binary","func":"mul","dtype":"f64","lhs":[{n}],"rhs":[{n}]}}"#
        ));
        let buf = rt.alloc_buffer(4096).unwrap();
        let v = |o: usize| buf.view(o, ScalarType::F64, &[n]).unwrap();
        let (x, y, out) = (v(8), v(1032), v(2056));
        let xs: Vec<f64> = (0..n).map(|i| i as f64 + 0.25).collect();
        rt.write_view(&x, &xs).unwrap();
        rt.write_view(&y, &vec![-2.0f64; n]).unwrap();
        rt.run_into(&op, &[&x, &y], &[&out])
            .unwrap_or_else(|e| panic!("{}: {e}", name(rt)));
        let want: Vec<f64> = xs.iter().map(|a| -2.0 * a).collect();
        assert_eq!(rt.read_view::<f64>(&out).unwrap(), want, "{}", name(rt));
    }
}

#[test]
fn threads_running_into_views_at_once_each_get_their_results() {
    for rt in &runtimes() {
        let n = 256;
        let op = spec(&format!(
            r#"{{"op":"binary","func":"add","dtype":"f32","lhs":[{n}],"rhs":[{n}]}}"#
        ));
        std::thread::scope(|s| {
            for t in 0..4 {
                let op = &op;
                s.spawn(move || {
                    let buf = rt.alloc_buffer(3 * 4 * n + 64).unwrap();
                    let v = |o: usize| buf.view(o, ScalarType::F32, &[n]).unwrap();
                    let (x, y, out) = (v(0), v(4 * n + 4), v(8 * n + 16));
                    for round in 0..25 {
                        let base = (t * 1000 + round) as f32;
                        rt.write_view(&x, &vec![base; n]).unwrap();
                        rt.write_view(&y, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
                            .unwrap();
                        rt.run_into(op, &[&x, &y], &[&out]).unwrap();
                        let got = rt.read_view::<f32>(&out).unwrap();
                        let want: Vec<f32> = (0..n).map(|i| base + i as f32).collect();
                        assert_eq!(got, want, "{}: thread {t} round {round}", name(rt));
                    }
                });
            }
        });
    }
}

#[test]
fn an_in_place_update_reads_the_prior_values_and_writes_the_same_view() {
    for rt in &runtimes() {
        // y = prior + Σ_axis x, with y and prior the same view (the spec's alias).
        let op = spec(
            r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[3,5],"axes":[1],"keepdim":false,"accumulate":true}"#,
        );
        let buf = filled(rt, 512, 0xEE);
        let x = buf.view(20, ScalarType::F32, &[3, 5]).unwrap();
        let y = buf.view(260, ScalarType::F32, &[3]).unwrap();
        rt.write_view(&x, &(1..=15).map(|v| v as f32).collect::<Vec<_>>())
            .unwrap();
        rt.write_view(&y, &[1000.0f32, 2000.0, 3000.0]).unwrap();
        for round in 1..=2 {
            rt.run_into(&op, &[&x, &y], &[&y])
                .unwrap_or_else(|e| panic!("{}: {e}", name(rt)));
            let got = rt.read_view::<f32>(&y).unwrap();
            let sums = [15.0, 40.0, 65.0];
            let want: Vec<f32> = [1000.0, 2000.0, 3000.0]
                .iter()
                .zip(sums)
                .map(|(p, s)| p + round as f32 * s)
                .collect();
            assert_eq!(got, want, "{}: round {round}", name(rt));
        }
    }
}

#[test]
fn the_plan_depends_on_whether_views_are_vector_aligned_not_on_their_offsets() {
    for rt in &runtimes() {
        let n = 64;
        let add = spec(&format!(
            r#"{{"op":"binary","func":"add","dtype":"f32","lhs":[{n}],"rhs":[{n}]}}"#
        ));
        let buf = rt.alloc_buffer(8192).unwrap();
        let run = |offsets: [usize; 3]| {
            let v: Vec<View> = offsets
                .iter()
                .map(|&o| buf.view(o, ScalarType::F32, &[n]).unwrap())
                .collect();
            rt.run_into(&add, &[&v[0], &v[1]], &[&v[2]]).unwrap();
            rt.stats().plans_in_memory
        };
        let aligned = run([0, 1024, 2048]);
        assert_eq!(
            run([16, 1040, 4096]),
            aligned,
            "{}: 16-byte offsets share a plan",
            name(rt)
        );
        let narrow = run([4, 1024, 2048]);
        assert_eq!(
            narrow,
            aligned + 1,
            "{}: a 4-byte offset gets its own plan",
            name(rt)
        );
        assert_eq!(
            run([8, 1032, 2056]),
            narrow,
            "{}: every narrow offset shares it",
            name(rt)
        );
        assert_eq!(run([12, 1028, 3000]), narrow, "{}: and again", name(rt));
    }
}

/// Runs `op` into views and expects `check` to accept the error; every buffer is then
/// exactly as before.
fn refused(
    rt: &Runtime,
    buffers: &[&Buffer],
    run: impl FnOnce() -> Result<(), RuntimeError>,
    check: impl Fn(&RuntimeError) -> bool,
) {
    let before: Vec<Vec<u8>> = buffers.iter().map(|b| contents(rt, b)).collect();
    match run() {
        Ok(()) => panic!("{}: accepted", name(rt)),
        Err(e) => assert!(check(&e), "{}: unexpected error {e}", name(rt)),
    }
    let after: Vec<Vec<u8>> = buffers.iter().map(|b| contents(rt, b)).collect();
    assert!(
        before == after,
        "{}: a refused call changed a buffer",
        name(rt)
    );
}

#[test]
fn bad_views_and_overlaps_are_typed_errors_that_change_nothing() {
    let add = spec(r#"{"op":"binary","func":"add","dtype":"f32","lhs":[8],"rhs":[8]}"#);
    for rt in &runtimes() {
        let buf = filled(rt, 256, 0x3C);
        let other = filled(rt, 256, 0x5A);
        let v = |o: usize| buf.view(o, ScalarType::F32, &[8]).unwrap();
        // Views that cannot be made.
        assert!(matches!(
            buf.view(2, ScalarType::F32, &[8]),
            Err(RuntimeError::Misaligned { .. })
        ));
        assert!(matches!(
            buf.view(4, ScalarType::F64, &[8]),
            Err(RuntimeError::Misaligned { .. })
        ));
        assert!(matches!(
            buf.view(240, ScalarType::F32, &[8]),
            Err(RuntimeError::OutOfRange { .. })
        ));
        assert!(matches!(
            buf.view(0, ScalarType::F32, &[usize::MAX, 2]),
            Err(RuntimeError::OutOfRange { .. })
        ));
        // Partial copies past the end.
        refused(
            rt,
            &[&buf],
            || rt.write_buffer(&buf, 250, &[0; 8]),
            |e| matches!(e, RuntimeError::OutOfRange { .. }),
        );
        refused(
            rt,
            &[&buf, &other],
            || rt.copy_buffer(&buf, 0, &other, 200, 64),
            |e| matches!(e, RuntimeError::OutOfRange { .. }),
        );
        assert!(matches!(
            rt.read_buffer(&buf, usize::MAX, 2),
            Err(RuntimeError::OutOfRange { .. })
        ));
        // An output overlapping an input it does not alias, or another output.
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &v(64)], &[&v(16)]),
            |e| matches!(e, RuntimeError::Overlap { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &v(64)], &[&v(0)]),
            |e| matches!(e, RuntimeError::Overlap { .. }),
        );
        // Shapes, dtypes and counts against the spec.
        let short = buf.view(128, ScalarType::F32, &[7]).unwrap();
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &v(32)], &[&short]),
            |e| matches!(e, RuntimeError::OutputShape { .. }),
        );
        let ints = buf.view(128, ScalarType::I32, &[8]).unwrap();
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &v(32)], &[&ints]),
            |e| matches!(e, RuntimeError::OutputDtype { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &ints], &[&v(128)]),
            |e| matches!(e, RuntimeError::InputDtype { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0)], &[&v(128)]),
            |e| matches!(e, RuntimeError::InputCount { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.run_into(&add, &[&v(0), &v(32)], &[]),
            |e| matches!(e, RuntimeError::OutputCount { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.write_view(&v(0), &[1.0f64; 8]),
            |e| matches!(e, RuntimeError::Dtype { .. }),
        );
        refused(
            rt,
            &[&buf],
            || rt.write_view(&v(0), &[1.0f32; 3]),
            |e| matches!(e, RuntimeError::DataLength { .. }),
        );
    }
    // A view from another runtime.
    let (a, b) = (Runtime::cpu(), Runtime::cpu());
    let foreign = a.alloc_buffer(64).unwrap();
    let fv = foreign.view(0, ScalarType::F32, &[8]).unwrap();
    let own = b
        .alloc_buffer(64)
        .unwrap()
        .view(0, ScalarType::F32, &[8])
        .unwrap();
    assert!(matches!(
        b.run_into(&add, &[&fv, &own], &[&own]),
        Err(RuntimeError::WrongDevice { .. })
    ));
    assert!(matches!(
        b.read_buffer(&foreign, 0, 4),
        Err(RuntimeError::WrongDevice { .. })
    ));
}

#[test]
fn registry_addresses_resolve_inside_their_allocation_only() {
    for rt in &runtimes() {
        let base = rt.malloc(1024).unwrap();
        assert_ne!(base, 0);
        let other = rt.malloc(64).unwrap();
        assert_eq!(rt.registered(), 2);
        // Interior addresses resolve to the allocation and offset.
        let (buf, offset) = rt.resolve(base + 100, 24).unwrap();
        assert_eq!((buf.len(), offset), (1024, 100), "{}", name(rt));
        assert_eq!(
            rt.register(&buf),
            base,
            "{}: one address per allocation",
            name(rt)
        );
        // An op on views made from interior addresses.
        let n = 16;
        let x = rt.view_at(base + 64, ScalarType::F32, &[n]).unwrap();
        let y = rt.view_at(base + 320, ScalarType::F32, &[n]).unwrap();
        let out = rt.view_at(base + 644, ScalarType::F32, &[n]).unwrap();
        rt.write_view(&x, &vec![1.5f32; n]).unwrap();
        rt.write_view(&y, &vec![2.0f32; n]).unwrap();
        let add = spec(&format!(
            r#"{{"op":"binary","func":"mul","dtype":"f32","lhs":[{n}],"rhs":[{n}]}}"#
        ));
        rt.run_into(&add, &[&x, &y], &[&out]).unwrap();
        let (buf, _) = rt.resolve(base, 1024).unwrap();
        let got: Vec<f32> = rt
            .read_buffer(&buf, 644, 4 * n)
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, vec![3.0f32; n], "{}", name(rt));
        // Accesses that leave the allocation, and addresses of nothing.
        assert!(matches!(
            rt.resolve(base + 1000, 25),
            Err(RuntimeError::OutOfRange { .. })
        ));
        assert!(matches!(
            rt.view_at(base + 1020, ScalarType::F32, &[2]),
            Err(RuntimeError::OutOfRange { .. })
        ));
        assert!(matches!(
            rt.view_at(base + 2, ScalarType::F32, &[2]),
            Err(RuntimeError::Misaligned { .. })
        ));
        assert!(matches!(
            rt.resolve(0, 4),
            Err(RuntimeError::BadAddress { .. })
        ));
        assert!(matches!(
            rt.resolve(base.wrapping_sub(8), 4),
            Err(RuntimeError::BadAddress { .. })
        ));
        // Frees: only at the start, once.
        assert!(matches!(
            rt.free(base + 4),
            Err(RuntimeError::BadAddress { .. })
        ));
        rt.free(base).unwrap();
        assert_eq!(rt.registered(), 1);
        let freed = rt.resolve(base + 8, 4);
        match rt.target_name() {
            // A CUDA pointer may be handed out again by the pool; elsewhere freed
            // addresses are never reused, and say so.
            "ptx" => assert!(freed.is_err()),
            _ => assert!(
                matches!(&freed, Err(RuntimeError::BadAddress { problem, .. }) if problem.contains("freed")),
                "{}: {:?}",
                name(rt),
                freed.map(|(b, o)| (b.len(), o))
            ),
        }
        assert!(matches!(
            rt.free(base),
            Err(RuntimeError::BadAddress { .. })
        ));
        // The views made before the free keep their memory alive.
        assert_eq!(rt.read_view::<f32>(&out).unwrap(), vec![3.0f32; n]);
        rt.free(other).unwrap();
        assert_eq!(rt.registered(), 0);
    }
}
