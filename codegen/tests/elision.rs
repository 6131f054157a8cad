//! Bounds and alignment checks the value-range analysis proves unnecessary are left
//! out of the CPU target's code, and the ones that can fail stay.

use kernelc_codegen::cpu::{self, LaunchError};
use kernelc_ir::builder::*;
use kernelc_ir::interp::{run, Arg, HostBuffer, InterpError};
use kernelc_ir::{Access, Kernel, ScalarType};
use ScalarType::{F32, U32};

/// Conditional branches in the kernel's CLIF.
fn brifs(kernel: &Kernel) -> usize {
    let clif = cpu::emit_clif(kernel).expect("emit_clif");
    clif.lines().filter(|l| l.contains(" brif ")).count()
}

/// A GEMM-like inner loop: `out[o; 4] += a_tile[kk * 32 + row0 + extra; 4]` over
/// `for kk in 0..128 step 8`, `for mi in 0..8`, `row0 = mi * 4`; `extra` is `0u` (all
/// provable) or a scalar parameter (unknown); `o = row0 + kk / 32 * 4`.
fn gemm_like(extra_param: bool) -> Kernel {
    let mut k = KernelBuilder::new("gemm_like", [1, 1, 1]);
    let a = k.buffer("a", F32, 4096, Access::Read);
    let out = k.buffer("out", F32, 256, Access::ReadWrite);
    let extra = if extra_param {
        k.scalar("extra", U32)
    } else {
        E::from(0u32)
    };
    let tile = k.shared("a_tile", F32, 4096);
    k.build(|f| {
        f.for_("i", 0u32, 1024u32, 1, |f, i| {
            f.store(tile, i.clone() * 4u32, a.load(i * 4u32, 4));
        });
        f.for_("kk", 0u32, 128u32, 8, |f, kk| {
            f.for_("mi", 0u32, 8u32, 1, |f, mi| {
                let row0 = f.let_("row0", mi * 4u32);
                let v = tile.load(kk.clone() * 32u32 + row0.clone() + extra.clone(), 4);
                let o = row0 + kk.clone() / 32u32 * 4u32;
                let cur = out.load(o.clone(), 4);
                f.store(out, o, cur + v);
            });
        });
    })
    .expect("valid")
}

#[test]
fn provable_accesses_lose_their_branches() {
    let proven = brifs(&gemm_like(false));
    let unknown = brifs(&gemm_like(true));
    // The unknown index keeps exactly the tile load's check.
    assert!(
        proven < unknown,
        "{proven} brifs, {unknown} with an unknown index"
    );
    // Only the 3 loop headers branch; the tile and `out` accesses are unchecked.
    assert_eq!(
        proven,
        3,
        "{}",
        cpu::emit_clif(&gemm_like(false)).expect("clif")
    );
    assert_eq!(unknown, proven + 1);
}

#[test]
fn elided_kernel_computes_what_the_interpreter_does() {
    let kernel = gemm_like(false);
    let a: Vec<f32> = (0..4096).map(|i| (i % 97) as f32 * 0.25).collect();
    let mut want = vec![Arg::Buffer(HostBuffer::from_f32(&a)), zeros(256)];
    let mut got = want.clone();
    run(&kernel, [1, 1, 1], &mut want).expect("interpreter runs");
    cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut got)
        .expect("cpu runs");
    assert_eq!(got, want);
    // With the unknown index (0 at run time) the result is the same.
    let kernel = gemm_like(true);
    let mut got2 = vec![
        Arg::Buffer(HostBuffer::from_f32(&a)),
        zeros(256),
        Arg::Scalar(kernelc_ir::Scalar::U32(0)),
    ];
    cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut got2)
        .expect("cpu runs");
    assert_eq!(got2[1], got[1]);
}

fn zeros(n: usize) -> Arg {
    Arg::Buffer(HostBuffer::zeros(F32, n))
}

/// `out[i] = a[i]` over `for i in 0..n`: in bounds for `n <= 16`.
fn copy_loop(n: u32) -> Kernel {
    let mut k = KernelBuilder::new("copy", [1, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let out = k.buffer("out", F32, 16, Access::Write);
    k.build(|f| {
        f.for_("i", 0u32, n, 1, |f, i| f.store(out, i.clone(), a.at(i)));
    })
    .expect("valid")
}

#[test]
fn in_bounds_loop_is_unchecked_and_correct() {
    let kernel = copy_loop(16);
    assert_eq!(brifs(&kernel), 1, "only the loop header branches");
    let a: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&a)), zeros(16)];
    cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut args)
        .expect("runs");
    assert_eq!(args[1].as_buffer().expect("buffer").to_f32(), a);
}

#[test]
fn out_of_bounds_accesses_keep_their_checks() {
    // One iteration too many: both accesses may be out of bounds.
    let kernel = copy_loop(17);
    assert_eq!(brifs(&kernel), 1 + 2);
    let a: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&a)), zeros(16)];
    assert!(matches!(
        run(&kernel, [1, 1, 1], &mut args.clone()),
        Err(InterpError::OutOfBounds { .. })
    ));
    let e = cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut args);
    assert!(matches!(e, Err(LaunchError::OutOfBounds { .. })), "{e:?}");

    // Off by one inside the range: `a[i * 4 + 1; 4]`, i < 4, len 16: the last vector
    // ends past the buffer and none is aligned.
    let mut k = KernelBuilder::new("vec_oob", [4, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let out = k.buffer("out", F32, 16, Access::Write);
    let kernel = k
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(out, i.clone() * 4u32, a.load(i * 4u32 + 1u32, 4));
        })
        .expect("valid");
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&[1.0; 16])), zeros(16)];
    let e = cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut args);
    assert!(
        matches!(
            e,
            Err(LaunchError::OutOfBounds { .. }) | Err(LaunchError::UnalignedAccess { .. })
        ),
        "{e:?}"
    );
    // The store at `i * 4` is proven; the load keeps its check.
    assert_eq!(brifs(&kernel), 1 + 1);
}

#[test]
fn in_bounds_but_unaligned_vector_keeps_its_alignment_test() {
    // `a[i * 2; 4]` over i < 7, len 16: always in bounds, not always aligned.
    let mut k = KernelBuilder::new("unaligned", [1, 1, 1]);
    let a = k.buffer("a", F32, 16, Access::Read);
    let out = k.buffer("out", F32, 4, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            f.for_("i", 0u32, 7u32, 1, |f, i| {
                f.store(out, 0u32, out.load(0u32, 4) + a.load(i * 2u32, 4));
            });
        })
        .expect("valid");
    assert_eq!(brifs(&kernel), 1 + 1);
    let clif = cpu::emit_clif(&kernel).expect("clif");
    assert!(
        !clif.contains("icmp ule"),
        "the bounds compare should be gone:\n{clif}"
    );
    let mut args = vec![Arg::Buffer(HostBuffer::from_f32(&[1.0; 16])), zeros(4)];
    let e = cpu::compile(&kernel)
        .expect("compile")
        .launch_host([1, 1, 1], &mut args);
    assert!(
        matches!(e, Err(LaunchError::UnalignedAccess { .. })),
        "{e:?}"
    );
}

#[test]
fn unknown_indices_keep_their_checks() {
    // A workgroup id is unbounded: the check stays and catches the overrun.
    let mut k = KernelBuilder::new("wg", [1, 1, 1]);
    let out = k.buffer("out", U32, 4, Access::Write);
    let kernel = k
        .build(|f| f.store(out, workgroup_id(0), 1u32))
        .expect("valid");
    assert_eq!(brifs(&kernel), 1);
    let mut args = vec![Arg::Buffer(HostBuffer::zeros(U32, 4))];
    let e = cpu::compile(&kernel)
        .expect("compile")
        .launch_host([5, 1, 1], &mut args);
    assert!(matches!(e, Err(LaunchError::OutOfBounds { .. })), "{e:?}");
}
