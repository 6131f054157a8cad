//! Integration tests of the reference interpreter: real kernels against plain Rust, and
//! planted bugs each caught with its exact error.

use half::{bf16, f16};
use kernelc_ir::args::ArgError;
use kernelc_ir::builder::*;
use kernelc_ir::eval::EvalError;
use kernelc_ir::interp::{
    self, run, Arg, HostBuffer, InterpError, Invocation, MemorySpace, RaceKind, Site,
};
use kernelc_ir::{Access, Kernel, Scalar, ScalarType, ValidationErrorKind};
use ScalarType::{F32, U32};

const SIZES: [u32; 4] = [1, 7, 255, 1000];

/// A small deterministic generator (inputs are never all zeros).
struct Lcg(u64);

impl Lcg {
    fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    /// Uniform in [-1, 1).
    fn f32(&mut self) -> f32 {
        (self.next_u32() as f32 / (1u64 << 31) as f32) - 1.0
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

fn poison_f32(n: usize) -> HostBuffer {
    HostBuffer::filled(F32, n, Scalar::f32(f32::NAN))
}

fn buf(args: &[Arg], i: usize) -> &HostBuffer {
    args[i].as_buffer().expect("argument is a buffer")
}

fn ceil_div(a: u32, b: u32) -> u32 {
    a.div_ceil(b)
}

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

fn vec_add(n: u32, guarded: bool) -> Kernel {
    let mut k = KernelBuilder::new("vec_add", [64, 1, 1]);
    let a = k.buffer("a", F32, n as u64, Access::Read);
    let b = k.buffer("b", F32, n as u64, Access::Read);
    let c = k.buffer("c", F32, n as u64, Access::Write);
    k.build(|f| {
        let i = f.let_("i", global_id(0));
        if guarded {
            f.if_(i.clone().lt(n), |f| {
                f.store(c, i.clone(), a.at(i.clone()) + b.at(i.clone()))
            });
        } else {
            f.store(c, i.clone(), a.at(i.clone()) + b.at(i.clone()));
        }
    })
    .expect("vec_add is valid")
}

/// Sum per workgroup of `ty` values with a shared-memory tree reduction.
/// `skip_first_barrier` plants the classic missing-barrier bug.
fn reduce_sum(n: u32, wg: u32, ty: ScalarType, skip_first_barrier: bool) -> Kernel {
    let groups = ceil_div(n, wg);
    let mut k = KernelBuilder::new("reduce_sum", [wg, 1, 1]);
    let input = k.buffer("input", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, groups as u64, Access::Write);
    let sh = k.shared("sh", ty, wg);
    k.build(|f| {
        let lid = f.let_("lid", local_id(0));
        let gid = f.let_("gid", global_id(0));
        f.if_else(
            gid.clone().lt(n),
            |f| f.store(sh, lid.clone(), input.at(gid.clone())),
            |f| f.store(sh, lid.clone(), lit(ty, 0.0)),
        );
        if !skip_first_barrier {
            f.barrier();
        }
        let mut s = wg / 2;
        while s > 0 {
            f.if_(lid.clone().lt(s), |f| {
                f.store(sh, lid.clone(), sh.at(lid.clone()) + sh.at(lid.clone() + s))
            });
            f.barrier();
            s /= 2;
        }
        f.if_(lid.clone().eq(0u32), |f| {
            f.store(out, workgroup_id(0), sh.at(0u32))
        });
    })
    .expect("reduce_sum is valid")
}

const TILE: u32 = 8;

/// C[m x n] = A[m x k] * B[k x n], row-major, 8x8 shared tiles, two barriers per k-tile.
fn matmul(m: u32, kd: u32, n: u32) -> Kernel {
    let mut kb = KernelBuilder::new("matmul", [TILE, TILE, 1]);
    let a = kb.buffer("a", F32, (m * kd) as u64, Access::Read);
    let b = kb.buffer("b", F32, (kd * n) as u64, Access::Read);
    let c = kb.buffer("c", F32, (m * n) as u64, Access::Write);
    let a_tile = kb.shared("a_tile", F32, TILE * TILE);
    let b_tile = kb.shared("b_tile", F32, TILE * TILE);
    kb.build(|f| {
        let lx = f.let_("lx", local_id(0));
        let ly = f.let_("ly", local_id(1));
        let col = f.let_("col", global_id(0));
        let row = f.let_("row", global_id(1));
        let slot = f.let_("slot", ly.clone() * TILE + lx.clone());
        let acc = f.var("acc", 0.0f32);
        f.for_("t", 0u32, ceil_div(kd, TILE), 1, |f, t| {
            let ak = f.let_("ak", t.clone() * TILE + lx.clone());
            f.if_else(
                row.clone().lt(m) & ak.clone().lt(kd),
                |f| f.store(a_tile, slot.clone(), a.at(row.clone() * kd + ak.clone())),
                |f| f.store(a_tile, slot.clone(), 0.0f32),
            );
            let bk = f.let_("bk", t.clone() * TILE + ly.clone());
            f.if_else(
                bk.clone().lt(kd) & col.clone().lt(n),
                |f| f.store(b_tile, slot.clone(), b.at(bk.clone() * n + col.clone())),
                |f| f.store(b_tile, slot.clone(), 0.0f32),
            );
            f.barrier();
            f.for_("kk", 0u32, TILE, 1, |f, kk| {
                let prod = a_tile.at(ly.clone() * TILE + kk.clone())
                    * b_tile.at(kk.clone() * TILE + lx.clone());
                f.assign(acc, acc.get() + prod);
            });
            f.barrier();
        });
        f.if_(row.clone().lt(m) & col.clone().lt(n), |f| {
            f.store(c, row.clone() * n + col.clone(), acc.get())
        });
    })
    .expect("matmul is valid")
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc += a[i * k + p] * b[p * n + j];
            }
            c[i * n + j] = acc;
        }
    }
    c
}

fn run_matmul(m: u32, k: u32, n: u32, rng: &mut Lcg) -> (Vec<f32>, Vec<f32>) {
    let kernel = matmul(m, k, n);
    let a = rng.f32s((m * k) as usize);
    let b = rng.f32s((k * n) as usize);
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&a)),
        Arg::Buffer(HostBuffer::from_f32(&b)),
        Arg::Buffer(poison_f32((m * n) as usize)),
    ];
    let grid = [ceil_div(n, TILE), ceil_div(m, TILE), 1];
    run(&kernel, grid, &mut args).unwrap_or_else(|e| panic!("matmul {m}x{k}x{n}: {e}"));
    let got = buf(&args, 2).to_f32();
    (got, matmul_ref(&a, &b, m as usize, k as usize, n as usize))
}

// ---------------------------------------------------------------------------------------
// 1-3: correct kernels against plain Rust
// ---------------------------------------------------------------------------------------

#[test]
fn vector_add_matches_rust() {
    let mut rng = Lcg(1);
    for n in SIZES {
        let kernel = vec_add(n, true);
        let a = rng.f32s(n as usize);
        let b = rng.f32s(n as usize);
        let mut args = vec![
            Arg::Buffer(HostBuffer::from_f32(&a)),
            Arg::Buffer(HostBuffer::from_f32(&b)),
            Arg::Buffer(poison_f32(n as usize)),
        ];
        run(&kernel, [ceil_div(n, 64), 1, 1], &mut args).expect("vec_add runs");
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let got = buf(&args, 2).to_f32();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "n = {n}"
        );
    }
}

#[test]
fn tree_reduction_u32_is_exact() {
    let mut rng = Lcg(2);
    for wg in [64, 128] {
        for n in SIZES {
            let kernel = reduce_sum(n, wg, U32, false);
            let data: Vec<u32> = (0..n).map(|_| rng.next_u32() % 1000 + 1).collect();
            let groups = ceil_div(n, wg);
            let mut args = vec![
                Arg::Buffer(HostBuffer::from_u32(&data)),
                Arg::Buffer(HostBuffer::filled(
                    U32,
                    groups as usize,
                    Scalar::U32(u32::MAX),
                )),
            ];
            run(&kernel, [groups, 1, 1], &mut args).expect("reduction runs");
            let want: Vec<u32> = data
                .chunks(wg as usize)
                .map(|c| c.iter().sum::<u32>())
                .collect();
            assert_eq!(buf(&args, 1).to_u32(), want, "n = {n}, wg = {wg}");
            let total: u32 = buf(&args, 1).to_u32().iter().sum();
            assert_eq!(total, data.iter().sum::<u32>());
        }
    }
}

#[test]
fn tree_reduction_f32_within_tolerance() {
    let mut rng = Lcg(3);
    for n in SIZES {
        let wg = 64;
        let kernel = reduce_sum(n, wg, F32, false);
        let data = rng.f32s(n as usize);
        let groups = ceil_div(n, wg);
        let mut args = vec![
            Arg::Buffer(HostBuffer::from_f32(&data)),
            Arg::Buffer(poison_f32(groups as usize)),
        ];
        run(&kernel, [groups, 1, 1], &mut args).expect("reduction runs");
        let got = buf(&args, 1).to_f32();
        for (g, chunk) in data.chunks(wg as usize).enumerate() {
            let want: f64 = chunk.iter().map(|&x| x as f64).sum();
            let mag: f64 = chunk.iter().map(|&x| x.abs() as f64).sum();
            let err = (got[g] as f64 - want).abs();
            assert!(
                err <= mag * 8.0 * f32::EPSILON as f64,
                "n = {n}, group {g}: got {}, want {want}",
                got[g]
            );
        }
    }
}

#[test]
fn tiled_matmul_matches_rust() {
    let mut rng = Lcg(4);
    for (m, k, n) in [
        (1, 1, 1),
        (7, 7, 7),
        (255, 7, 33),
        (1000, 3, 7),
        (1, 255, 7),
    ] {
        let (got, want) = run_matmul(m, k, n, &mut rng);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{m}x{k}x{n} element {i}: got {g}, want {w}"
            );
        }
    }
}

/// Not a timed test (speed lives in benchmarks): it only has to finish; run with
/// `--nocapture` to see how long it took.
#[test]
fn larger_matmul_and_vector_add_run() {
    let mut rng = Lcg(5);
    let t0 = std::time::Instant::now();
    let (got, want) = run_matmul(255, 33, 65, &mut rng);
    let t_matmul = t0.elapsed();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()));
    }
    let t1 = std::time::Instant::now();
    let kernel = vec_add(1000, true);
    let a = rng.f32s(1000);
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&a)),
        Arg::Buffer(HostBuffer::from_f32(&a)),
        Arg::Buffer(poison_f32(1000)),
    ];
    run(&kernel, [16, 1, 1], &mut args).expect("vec_add runs");
    eprintln!(
        "interpreter: matmul 255x33x65 {:?}, vec_add 1000 {:?}",
        t_matmul,
        t1.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// Semantics details
// ---------------------------------------------------------------------------------------

#[test]
fn builtins_scalar_params_and_2d_grid() {
    // out[y * W + x] = x * 1000 + y + bias + num_workgroups(0) * 100000
    let (w, h) = (10u32, 6u32);
    let mut k = KernelBuilder::new("ids", [4, 2, 1]);
    let out = k.buffer("out", U32, (w * h) as u64, Access::Write);
    let bias = k.scalar("bias", U32);
    let kernel = k
        .build(|f| {
            let x = f.let_("x", global_id(0));
            let y = f.let_("y", global_id(1));
            f.if_(x.clone().lt(w) & y.clone().lt(h), |f| {
                f.store(
                    out,
                    y.clone() * w + x.clone(),
                    x.clone() * 1000u32 + y.clone() + bias.clone() + num_workgroups(0) * 100000u32,
                )
            });
        })
        .unwrap();
    let grid = [ceil_div(w, 4), ceil_div(h, 2), 1];
    let mut args = vec![
        Arg::Buffer(HostBuffer::zeros(U32, (w * h) as usize)),
        Arg::Scalar(Scalar::U32(7)),
    ];
    run(&kernel, grid, &mut args).unwrap();
    let got = buf(&args, 0).to_u32();
    for y in 0..h {
        for x in 0..w {
            assert_eq!(
                got[(y * w + x) as usize],
                x * 1000 + y + 7 + grid[0] * 100000
            );
        }
    }
}

#[test]
fn early_return_guards_ragged_tail() {
    let n = 100u32;
    let mut k = KernelBuilder::new("scale", [64, 1, 1]);
    let x = k.buffer("x", F32, n as u64, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.if_(i.clone().ge(n), |f| f.ret());
            f.store(x, i.clone(), x.at(i.clone()) * 2.0f32);
        })
        .unwrap();
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&data))];
    run(&kernel, [2, 1, 1], &mut args).unwrap();
    let want: Vec<f32> = data.iter().map(|v| v * 2.0).collect();
    assert_eq!(buf(&args, 0).to_f32(), want);
}

#[test]
fn loop_counter_never_wraps() {
    // for i in (MAX-5)..MAX step 4: i = MAX-5, MAX-1; MAX+3 would wrap, so it stops.
    let mut k = KernelBuilder::new("wrap", [1, 1, 1]);
    let out = k.buffer("out", U32, 2, Access::Write);
    let kernel = k
        .build(|f| {
            let count = f.var("count", 0u32);
            let last = f.var("last", 0u32);
            f.for_("i", u32::MAX - 5, u32::MAX, 4, |f, i| {
                f.assign(count, count.get() + 1u32);
                f.assign(last, i);
            });
            f.store(out, 0u32, count.get());
            f.store(out, 1u32, last.get());
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 2))];
    run(&kernel, [1, 1, 1], &mut args).unwrap();
    assert_eq!(buf(&args, 0).to_u32(), vec![2, u32::MAX - 1]);
}

#[test]
fn divergent_loop_trip_counts_run_in_lockstep() {
    // Each invocation loops lid times; the sum of 0..lid is stored.
    let mut k = KernelBuilder::new("tri", [16, 1, 1]);
    let out = k.buffer("out", ScalarType::I32, 16, Access::Write);
    let kernel = k
        .build(|f| {
            let lid = f.let_("lid", local_id(0).cast(ScalarType::I32));
            let acc = f.var("acc", 0i32);
            f.for_("j", 0i32, lid.clone(), 1, |f, j| {
                f.assign(acc, acc.get() + j)
            });
            f.store(out, local_id(0), acc.get());
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(ScalarType::I32, 16))];
    run(&kernel, [1, 1, 1], &mut args).unwrap();
    let want: Vec<i32> = (0..16).map(|l| (0..l).sum()).collect();
    assert_eq!(buf(&args, 0).to_i32(), want);
}

#[test]
fn vector_loads_and_stores() {
    let n = 64u32;
    let mut k = KernelBuilder::new("vcopy", [4, 1, 1]);
    let src = k.buffer("src", F32, n as u64, Access::Read);
    let dst = k.buffer("dst", F32, n as u64, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0) * 4u32);
            let v = f.let_("v", src.load(i.clone(), 4));
            f.store(dst, i.clone(), v.clone() + E::from(1.0f32).splat(4));
        })
        .unwrap();
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&data)),
        Arg::Buffer(poison_f32(n as usize)),
    ];
    run(&kernel, [n / 16, 1, 1], &mut args).unwrap();
    let want: Vec<f32> = data.iter().map(|v| v + 1.0).collect();
    assert_eq!(buf(&args, 1).to_f32(), want);
}

#[test]
fn same_workgroup_writes_separated_by_barrier_are_not_a_race() {
    let mut k = KernelBuilder::new("handoff", [2, 1, 1]);
    let out = k.buffer("out", U32, 1, Access::ReadWrite);
    let sh = k.shared("sh", U32, 1);
    let kernel = k
        .build(|f| {
            let lid = f.let_("lid", local_id(0));
            f.if_(lid.clone().eq(0u32), |f| {
                f.store(out, 0u32, 1u32);
                f.store(sh, 0u32, 5u32);
            });
            f.barrier();
            f.if_(lid.clone().eq(1u32), |f| {
                f.store(out, 0u32, out.at(0u32) + sh.at(0u32));
                f.store(sh, 0u32, 6u32);
            });
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 1))];
    run(&kernel, [1, 1, 1], &mut args).unwrap();
    assert_eq!(buf(&args, 0).to_u32(), vec![6]);
}

// ---------------------------------------------------------------------------------------
// 4: planted bugs
// ---------------------------------------------------------------------------------------

#[test]
fn missing_barrier_in_reduction_is_a_shared_race() {
    let kernel = reduce_sum(256, 64, U32, true);
    let data: Vec<u32> = (1..=256).collect();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_u32(&data)),
        Arg::Buffer(HostBuffer::zeros(U32, 4)),
    ];
    let err = run(&kernel, [4, 1, 1], &mut args).unwrap_err();
    match &err {
        InterpError::Race {
            site,
            space,
            memory,
            index,
            kind,
            first,
        } => {
            assert_eq!(*space, MemorySpace::Shared);
            assert_eq!(memory, "sh");
            assert_eq!(*kind, RaceKind::ReadWrite);
            // Invocation 0 reads sh[32], which invocation 32 wrote in the same epoch.
            assert_eq!(*index, 32);
            assert_eq!(first.local, [32, 0, 0]);
            assert_eq!(site.invocation, Some([0, 0, 0]));
            assert_eq!(first.workgroup, [0, 0, 0]);
            assert!(site.path.contains("store.value"), "{}", site.path);
        }
        other => panic!("expected a shared race, got {other}"),
    }
    assert!(err.to_string().contains("read-write data race"), "{err}");
}

#[test]
fn shared_write_write_race() {
    let mut k = KernelBuilder::new("ww_shared", [8, 1, 1]);
    let out = k.buffer("out", U32, 8, Access::Write);
    let sh = k.shared("sh", U32, 1);
    let kernel = k
        .build(|f| {
            f.store(sh, 0u32, local_id(0));
            f.barrier();
            f.store(out, local_id(0), sh.at(0u32));
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 8))];
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::Race { space: MemorySpace::Shared, kind: RaceKind::WriteWrite, index: 0, first, site, .. }
                if first.local == [0, 0, 0] && site.invocation == Some([1, 0, 0])
        ),
        "{err}"
    );
}

#[test]
fn every_invocation_writing_out0_is_a_global_write_write_race() {
    let mut k = KernelBuilder::new("ww_global", [64, 1, 1]);
    let out = k.buffer("out", U32, 4, Access::Write);
    let kernel = k.build(|f| f.store(out, 0u32, global_id(0))).unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 4))];
    let err = run(&kernel, [2, 1, 1], &mut args).unwrap_err();
    assert_eq!(
        err,
        InterpError::Race {
            site: Site {
                kernel: "ww_global".into(),
                path: "kernel.body[0].store".into(),
                workgroup: [0, 0, 0],
                invocation: Some([1, 0, 0]),
            },
            space: MemorySpace::Buffer,
            memory: "out".into(),
            index: 0,
            kind: RaceKind::WriteWrite,
            first: Invocation {
                workgroup: [0, 0, 0],
                local: [0, 0, 0]
            },
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `ww_global` at kernel.body[0].store, invocation (1, 0, 0) of workgroup \
         (0, 0, 0): write-write data race on element 0 of buffer `out` with invocation \
         (0, 0, 0) of workgroup (0, 0, 0), which accessed it earlier (no barrier orders them)"
    );
}

#[test]
fn writes_from_two_workgroups_race_even_across_barriers() {
    // Only local 0 of each workgroup writes out[0]: no race inside a workgroup, but the
    // two workgroups race. A barrier does not order different workgroups.
    let mut k = KernelBuilder::new("ww_groups", [4, 1, 1]);
    let out = k.buffer("out", U32, 1, Access::Write);
    let kernel = k
        .build(|f| {
            f.barrier();
            f.if_(local_id(0).eq(0u32), |f| {
                f.store(out, 0u32, workgroup_id(0))
            });
            f.barrier();
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 1))];
    let err = run(&kernel, [3, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::Race { space: MemorySpace::Buffer, kind: RaceKind::WriteWrite, first, site, .. }
                if first.workgroup == [0, 0, 0] && site.workgroup == [1, 0, 0]
        ),
        "{err}"
    );
}

#[test]
fn read_in_one_workgroup_then_write_in_another_is_a_race() {
    // x[gid] = x[(gid + 4) % 8]: workgroup 0 reads elements that workgroup 1 writes.
    let mut k = KernelBuilder::new("rotate", [4, 1, 1]);
    let x = k.buffer("x", U32, 8, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            let gid = f.let_("gid", global_id(0));
            let v = f.let_("v", x.at((gid.clone() + 4u32) % 8u32));
            f.store(x, gid.clone(), v);
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::from_u32(&[1, 2, 3, 4, 5, 6, 7, 8]))];
    let err = run(&kernel, [2, 1, 1], &mut args).unwrap_err();
    match &err {
        InterpError::Race {
            kind: RaceKind::ReadWrite,
            index,
            first,
            site,
            memory,
            ..
        } => {
            assert_eq!(memory, "x");
            // Workgroup 1's reads of x[0..4] hit workgroup 0's writes.
            assert_eq!(*index, 0);
            assert_eq!(first.workgroup, [0, 0, 0]);
            assert_eq!(site.workgroup, [1, 0, 0]);
        }
        other => panic!("expected a read-write race, got {other}"),
    }

    // Reversed: workgroup 0 reads elements 4..8, workgroup 1 then writes them.
    let mut k = KernelBuilder::new("read_then_write", [4, 1, 1]);
    let x = k.buffer("x", U32, 8, Access::ReadWrite);
    let out = k.buffer("out", U32, 8, Access::Write);
    let kernel = k
        .build(|f| {
            let gid = f.let_("gid", global_id(0));
            f.if_(workgroup_id(0).eq(0u32), |f| {
                f.store(out, gid.clone(), x.at(gid.clone() + 4u32))
            });
            f.if_(workgroup_id(0).eq(1u32), |f| f.store(x, gid.clone(), 0u32));
        })
        .unwrap();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_u32(&[1, 2, 3, 4, 5, 6, 7, 8])),
        Arg::Buffer(HostBuffer::zeros(U32, 8)),
    ];
    let err = run(&kernel, [2, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::Race { kind: RaceKind::ReadWrite, index: 4, first, site, .. }
                if first.workgroup == [0, 0, 0] && first.local == [0, 0, 0]
                    && site.workgroup == [1, 0, 0] && site.invocation == Some([0, 0, 0])
        ),
        "{err}"
    );
}

#[test]
fn unguarded_load_is_out_of_bounds() {
    let n = 1000u32;
    let kernel = vec_add(n, false);
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&vec![1.0; n as usize])),
        Arg::Buffer(HostBuffer::from_f32(&vec![2.0; n as usize])),
        Arg::Buffer(poison_f32(n as usize)),
    ];
    let err = run(&kernel, [16, 1, 1], &mut args).unwrap_err();
    assert_eq!(
        err,
        InterpError::OutOfBounds {
            site: Site {
                kernel: "vec_add".into(),
                path: "kernel.body[1].store.value.binary.lhs.load".into(),
                workgroup: [15, 0, 0],
                invocation: Some([40, 0, 0]),
            },
            space: MemorySpace::Buffer,
            memory: "a".into(),
            index: 1000,
            lanes: 1,
            len: 1000,
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `vec_add` at kernel.body[1].store.value.binary.lhs.load, invocation \
         (40, 0, 0) of workgroup (15, 0, 0): 1-lane access at index 1000 is out of bounds \
         of buffer `a` (length 1000)"
    );
    // Everything before the fault was computed.
    assert_eq!(buf(&args, 2).to_f32()[999], 3.0);
}

#[test]
fn misaligned_vector_load() {
    let mut k = KernelBuilder::new("misaligned", [1, 1, 1]);
    let src = k.buffer("src", F32, 16, Access::Read);
    let dst = k.buffer("dst", F32, 16, Access::Write);
    let off = k.scalar("off", U32);
    let kernel = k
        .build(|f| f.store(dst, 0u32, src.load(off.clone(), 4)))
        .unwrap();
    let mut args = vec![
        Arg::Buffer(HostBuffer::zeros(F32, 16)),
        Arg::Buffer(HostBuffer::zeros(F32, 16)),
        Arg::Scalar(Scalar::U32(2)),
    ];
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(&err, InterpError::UnalignedAccess { index: 2, lanes: 4, memory, .. } if memory == "src"),
        "{err}"
    );
    // Both unaligned and out of bounds (14..18 of 16): out of bounds, as the targets'
    // status words say.
    args[2] = Arg::Scalar(Scalar::U32(14));
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::OutOfBounds {
                index: 14,
                lanes: 4,
                len: 16,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn reading_unwritten_shared_memory() {
    // Only half of the tile is written.
    let mut k = KernelBuilder::new("half_tile", [64, 1, 1]);
    let out = k.buffer("out", U32, 64, Access::Write);
    let sh = k.shared("sh", U32, 64);
    let kernel = k
        .build(|f| {
            let lid = f.let_("lid", local_id(0));
            f.if_(lid.clone().lt(32u32), |f| {
                f.store(sh, lid.clone(), lid.clone())
            });
            f.barrier();
            f.store(out, lid.clone(), sh.at(lid.clone()));
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 64))];
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert_eq!(
        err,
        InterpError::UninitializedSharedRead {
            site: Site {
                kernel: "half_tile".into(),
                path: "kernel.body[3].store.value.load".into(),
                workgroup: [0, 0, 0],
                invocation: Some([32, 0, 0]),
            },
            memory: "sh".into(),
            index: 32,
        }
    );

    // Shared memory starts unwritten in every workgroup: what workgroup 0 wrote is gone.
    let mut k = KernelBuilder::new("stale", [4, 1, 1]);
    let out = k.buffer("out", U32, 8, Access::Write);
    let sh = k.shared("sh", U32, 4);
    let kernel = k
        .build(|f| {
            let lid = f.let_("lid", local_id(0));
            f.if_(workgroup_id(0).eq(0u32), |f| f.store(sh, lid.clone(), 1u32));
            f.barrier();
            f.store(out, global_id(0), sh.at(lid.clone()));
        })
        .unwrap();
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 8))];
    let err = run(&kernel, [2, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::UninitializedSharedRead { site, index: 0, .. } if site.workgroup == [1, 0, 0]
        ),
        "{err}"
    );
}

#[test]
fn divergent_barriers() {
    use kernelc_ir::{Builtin, CmpOp, Expr, Stmt};
    let lid_lt = |v: u32| Expr::Cmp {
        op: CmpOp::Lt,
        lhs: Box::new(Expr::Builtin {
            builtin: Builtin::LocalId,
            axis: 0,
        }),
        rhs: Box::new(Expr::Lit(Scalar::U32(v))),
    };
    let kernel_with = |name: &str, body: Vec<Stmt>| Kernel {
        name: name.into(),
        workgroup_size: [64, 1, 1],
        params: vec![],
        shared: vec![],
        locals: vec![],
        fragments: vec![],
        body,
    };

    // 1. A barrier under a condition on the local id.
    let k1 = kernel_with(
        "barrier_in_if",
        vec![Stmt::If {
            cond: lid_lt(32),
            then_body: vec![Stmt::Barrier],
            else_body: vec![],
        }],
    );
    // 2. A barrier after some invocations returned.
    let k2 = kernel_with(
        "barrier_after_return",
        vec![
            Stmt::If {
                cond: lid_lt(1),
                then_body: vec![Stmt::Return],
                else_body: vec![],
            },
            Stmt::Barrier,
        ],
    );
    for k in [&k1, &k2] {
        // The validator sees both statically, so `run` never gets to execute them...
        match run(k, [1, 1, 1], &mut []) {
            Err(InterpError::Invalid(e)) => {
                assert!(
                    matches!(e.kind, ValidationErrorKind::NonUniformBarrier(_)),
                    "{e}"
                )
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
    // ...and the interpreter's own check catches them when asked to run them anyway.
    let err = interp::run_unvalidated(&k1, [1, 1, 1], &mut []).unwrap_err();
    assert_eq!(
        err,
        InterpError::DivergentBarrier {
            site: Site {
                kernel: "barrier_in_if".into(),
                path: "kernel.body[0].if.then[0]".into(),
                workgroup: [0, 0, 0],
                invocation: None,
            },
            arrived: 32,
            returned: 0,
            total: 64,
            missing: [32, 0, 0],
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `barrier_in_if` at kernel.body[0].if.then[0], workgroup (0, 0, 0): barrier \
         reached by 32 of 64 invocations (0 returned; e.g. invocation (32, 0, 0) did not \
         arrive)"
    );
    let err = interp::run_unvalidated(&k2, [2, 1, 1], &mut []).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::DivergentBarrier {
                arrived: 63,
                returned: 1,
                total: 64,
                missing: [0, 0, 0],
                ..
            }
        ),
        "{err}"
    );
    // A barrier no invocation reaches, and one all reach, are fine.
    let k3 = kernel_with(
        "barrier_nobody_reaches",
        vec![Stmt::If {
            cond: lid_lt(0),
            then_body: vec![Stmt::Barrier],
            else_body: vec![Stmt::Barrier],
        }],
    );
    interp::run_unvalidated(&k3, [1, 1, 1], &mut []).unwrap();
}

#[test]
fn unvalidated_ir_gives_typed_errors_not_panics() {
    use kernelc_ir::{Expr, LocalDecl, LocalId, Memory, Param, ParamId, Stmt, Type};
    let out_param = Param::Buffer {
        name: "out".into(),
        elem: U32,
        len: 4,
        access: Access::Write,
    };
    let store = |value: Expr| Stmt::Store {
        mem: Memory::Buffer(ParamId(0)),
        index: Expr::Lit(Scalar::U32(0)),
        value,
    };
    let kernel = |body: Vec<Stmt>| Kernel {
        name: "raw".into(),
        workgroup_size: [2, 1, 1],
        params: vec![out_param.clone()],
        shared: vec![],
        locals: vec![LocalDecl {
            name: "x".into(),
            ty: Type::U32,
            mutable: true,
        }],
        fragments: vec![],
        body,
    };
    let args = || vec![Arg::Buffer(HostBuffer::zeros(U32, 4))];

    // A local read before any assignment.
    let k = kernel(vec![store(Expr::Local(LocalId(0)))]);
    assert!(run(&k, [1, 1, 1], &mut args()).is_err());
    let err = interp::run_unvalidated(&k, [1, 1, 1], &mut args()).unwrap_err();
    assert_eq!(
        err,
        InterpError::UnsetLocal {
            site: Site {
                kernel: "raw".into(),
                path: "kernel.body[0].store.value".into(),
                workgroup: [0, 0, 0],
                invocation: Some([0, 0, 0]),
            },
            local: "x".into(),
        }
    );

    // Ill-typed IR: an f32 stored into a u32 buffer, an unknown local, a bad vector.
    for body in [
        vec![store(Expr::Lit(Scalar::f32(1.0)))],
        vec![store(Expr::Local(LocalId(7)))],
        vec![store(Expr::Vector(vec![Expr::Lit(Scalar::U32(1)); 3]))],
        vec![store(Expr::Splat {
            lanes: 9,
            arg: Box::new(Expr::Lit(Scalar::U32(1))),
        })],
        vec![Stmt::If {
            cond: Expr::Lit(Scalar::U32(1)),
            then_body: vec![],
            else_body: vec![],
        }],
        vec![Stmt::For {
            var: LocalId(0),
            start: Expr::Lit(Scalar::U32(0)),
            end: Expr::Lit(Scalar::U32(4)),
            step: 0,
            body: vec![],
        }],
    ] {
        let k = kernel(body);
        assert!(matches!(
            run(&k, [1, 1, 1], &mut args()),
            Err(InterpError::Invalid(_))
        ));
        let err = interp::run_unvalidated(&k, [1, 1, 1], &mut args()).unwrap_err();
        assert!(matches!(err, InterpError::Malformed { .. }), "{err}");
    }
}

#[test]
fn integer_division_by_zero() {
    let mut k = KernelBuilder::new("div", [4, 1, 1]);
    let a = k.buffer("a", ScalarType::I32, 4, Access::Read);
    let b = k.buffer("b", ScalarType::I32, 4, Access::Read);
    let c = k.buffer("c", ScalarType::I32, 4, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(c, i.clone(), a.at(i.clone()) / b.at(i.clone()));
        })
        .unwrap();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_i32(&[8, 9, 10, 11])),
        Arg::Buffer(HostBuffer::from_i32(&[2, 3, 0, 1])),
        Arg::Buffer(HostBuffer::zeros(ScalarType::I32, 4)),
    ];
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert_eq!(
        err,
        InterpError::Eval {
            site: Site {
                kernel: "div".into(),
                path: "kernel.body[1].store.value.binary".into(),
                workgroup: [0, 0, 0],
                invocation: Some([2, 0, 0]),
            },
            source: EvalError::DivisionByZero,
        }
    );
    assert!(
        err.to_string().contains("integer division by zero"),
        "{err}"
    );
}

#[test]
fn argument_mismatches() {
    let kernel = vec_add(8, true);
    let good = || {
        vec![
            Arg::Buffer(HostBuffer::zeros(F32, 8)),
            Arg::Buffer(HostBuffer::zeros(F32, 8)),
            Arg::Buffer(HostBuffer::zeros(F32, 8)),
        ]
    };
    run(&kernel, [1, 1, 1], &mut good()).unwrap();

    let mut args = good();
    args.pop();
    assert!(matches!(
        run(&kernel, [1, 1, 1], &mut args),
        Err(InterpError::Arg(ArgError::Count {
            expected: 3,
            found: 2,
            ..
        }))
    ));

    let mut args = good();
    args[1] = Arg::Buffer(HostBuffer::zeros(F32, 7));
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(&err, InterpError::Arg(ArgError::Length { index: 1, param, expected: 8, found: 7, .. }) if param == "b"),
        "{err}"
    );

    let mut args = good();
    args[0] = Arg::Buffer(HostBuffer::from_u32(&[0; 8]));
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::Arg(ArgError::Type {
                index: 0,
                expected: ScalarType::F32,
                found: ScalarType::U32,
                ..
            })
        ),
        "{err}"
    );

    let mut args = good();
    args[2] = Arg::Scalar(Scalar::f32(0.0));
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::Arg(ArgError::Kind {
                index: 2,
                expected: "buffer",
                found: "scalar",
                ..
            })
        ),
        "{err}"
    );

    // A buffer whose declared type and contents disagree.
    let mut args = good();
    if let Some(b) = args[0].as_buffer_mut() {
        b.data[5] = Scalar::f64(1.0);
    }
    let err = run(&kernel, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(
            &err,
            InterpError::ArgData {
                index: 0,
                element: 5,
                found: ScalarType::F64,
                ..
            }
        ),
        "{err}"
    );

    // A scalar parameter of the wrong type.
    let mut k = KernelBuilder::new("fill", [1, 1, 1]);
    let out = k.buffer("out", F32, 1, Access::Write);
    let v = k.scalar("v", F32);
    let fill = k.build(|f| f.store(out, 0u32, v.clone())).unwrap();
    let mut args = vec![
        Arg::Buffer(HostBuffer::zeros(F32, 1)),
        Arg::Scalar(Scalar::U32(1)),
    ];
    let err = run(&fill, [1, 1, 1], &mut args).unwrap_err();
    assert!(
        matches!(&err, InterpError::Arg(ArgError::Type { index: 1, param, .. }) if param == "v"),
        "{err}"
    );
    assert!(err.to_string().contains("`v`"), "{err}");
}

#[test]
fn invalid_kernel_is_rejected_before_running() {
    let mut kernel = vec_add(8, true);
    kernel.workgroup_size = [0, 1, 1];
    let mut args = vec![
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
    ];
    assert!(matches!(
        run(&kernel, [1, 1, 1], &mut args),
        Err(InterpError::Invalid(_))
    ));
}

#[test]
fn grid_with_global_ids_beyond_u32() {
    let kernel = vec_add(8, true);
    let mut args = vec![
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
        Arg::Buffer(HostBuffer::zeros(F32, 8)),
    ];
    assert!(matches!(
        run(&kernel, [u32::MAX, 1, 1], &mut args),
        Err(InterpError::GridTooLarge { .. })
    ));
    // An empty grid runs nothing.
    run(&kernel, [0, 1, 1], &mut args).unwrap();
}

// ---------------------------------------------------------------------------------------
// 5: f16 / bf16 round after every operation
// ---------------------------------------------------------------------------------------

#[test]
fn half_precision_rounds_per_operation() {
    // out = (a + b) + c, per element.
    fn kernel(ty: ScalarType) -> Kernel {
        let mut k = KernelBuilder::new("add3", [4, 1, 1]);
        let a = k.buffer("a", ty, 4, Access::Read);
        let b = k.buffer("b", ty, 4, Access::Read);
        let c = k.buffer("c", ty, 4, Access::Read);
        let out = k.buffer("out", ty, 4, Access::Write);
        k.build(|f| {
            let i = f.let_("i", global_id(0));
            f.store(
                out,
                i.clone(),
                (a.at(i.clone()) + b.at(i.clone())) + c.at(i.clone()),
            );
        })
        .unwrap()
    }

    // 1 + 2^-11 + 2^-11: each sum ties to even (back to 1) in f16; in f32 with one final
    // rounding it would be 1 + 2^-10.
    let tiny = 2f32.powi(-11);
    let a = [1.0f32, 1.0, 0.1, 1000.0];
    let b = [tiny, 3.0 * tiny, 0.2, 0.3];
    let c = [tiny, tiny, 0.3, 0.7];
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let (ah, bh, ch) = (h(&a), h(&b), h(&c));
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f16(&ah)),
        Arg::Buffer(HostBuffer::from_f16(&bh)),
        Arg::Buffer(HostBuffer::from_f16(&ch)),
        Arg::Buffer(HostBuffer::filled(
            ScalarType::F16,
            4,
            Scalar::f16(f16::NAN),
        )),
    ];
    run(&kernel(ScalarType::F16), [1, 1, 1], &mut args).unwrap();
    let got = buf(&args, 3).to_f16().expect("f16 buffer");
    for i in 0..4 {
        let per_op =
            f16::from_f32(f16::from_f32(ah[i].to_f32() + bh[i].to_f32()).to_f32() + ch[i].to_f32());
        assert_eq!(got[i].to_bits(), per_op.to_bits(), "element {i}");
    }
    assert_eq!(got[0], f16::ONE);
    let once = f16::from_f32(ah[0].to_f32() + bh[0].to_f32() + ch[0].to_f32());
    assert_ne!(got[0], once, "the test must distinguish per-op rounding");

    // bf16: 8 bits of precision; 1 + 2^-8 ties to even.
    let tiny = 2f32.powi(-8);
    let bfs = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    let (ab, bb, cb) = (
        bfs(&[1.0, 3.5, -2.25, 100.0]),
        bfs(&[tiny, 0.01, 1.1, 0.7]),
        bfs(&[tiny, 0.02, 1.3, 0.6]),
    );
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_bf16(&ab)),
        Arg::Buffer(HostBuffer::from_bf16(&bb)),
        Arg::Buffer(HostBuffer::from_bf16(&cb)),
        Arg::Buffer(HostBuffer::zeros(ScalarType::Bf16, 4)),
    ];
    run(&kernel(ScalarType::Bf16), [1, 1, 1], &mut args).unwrap();
    let got = buf(&args, 3).to_bf16().expect("bf16 buffer");
    for i in 0..4 {
        let per_op = bf16::from_f32(
            bf16::from_f32(ab[i].to_f32() + bb[i].to_f32()).to_f32() + cb[i].to_f32(),
        );
        assert_eq!(got[i].to_bits(), per_op.to_bits(), "element {i}");
    }
    assert_eq!(got[0], bf16::ONE);
}
