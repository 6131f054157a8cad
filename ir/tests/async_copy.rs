//! Asynchronous copies and shared arrays that reuse another's bytes: a pipelined
//! kernel in the interpreter and expanded, the rules the interpreter enforces, the
//! validator's errors, printing and JSON.

use kernelc_ir::builder::*;
use kernelc_ir::interp::{HostBuffer, InterpError};
use kernelc_ir::passes::{expand_async_copies, for_target, MathExpansion};
use kernelc_ir::{Access, Kernel, ScalarType, ValidationErrorKind};

const THREADS: u32 = 32;
/// Elements of one tile: four per invocation.
const TILE: u32 = 4 * THREADS;
const TILES: u32 = 5;
/// Elements of `a` that exist (the last tile is partly past them: zeros).
const VALID: u32 = 600;

mod common;
use common::run_kernel;

fn inputs() -> Vec<HostBuffer> {
    let a: Vec<f32> = (0..TILE * TILES).map(|i| 1.0 + i as f32).collect();
    vec![
        HostBuffer::from_f32(&a),
        HostBuffer::zeros(ScalarType::F32, (THREADS * TILES) as usize),
    ]
}

/// Which mistake a test kernel makes.
#[derive(Clone, Copy, PartialEq)]
enum Mistake {
    None,
    /// Reads the tile before waiting for its copies.
    NoWait,
    /// Reads another invocation's copy without a barrier after the wait.
    NoBarrier,
    /// Leaves the last copies unwaited.
    NoFinalWait,
    /// Starts a copy at an index that is no multiple of its length.
    Misaligned,
}

/// Two stages: tile `t + 1` is copied while tile `t` is read; each invocation reads
/// an element of its neighbour's chunk, so the tile must be whole and visible.
fn pipeline(mistake: Mistake) -> Kernel {
    let mut kb = KernelBuilder::new("pipeline", [THREADS, 1, 1]);
    let a = kb.buffer("a", ScalarType::F32, (TILE * TILES) as u64, Access::Read);
    let out = kb.buffer(
        "out",
        ScalarType::F32,
        (THREADS * TILES) as u64,
        Access::Write,
    );
    let stages = kb.shared("stages", ScalarType::F32, 2 * TILE);
    kb.build(|f| {
        let i = f.let_("i", local_id(0));
        let copy = |f: &mut Body, t: E| {
            let stage = (t.clone() % 2u32) * TILE;
            let at = f.let_("at", t * TILE + i.clone() * 4u32);
            let dst = match mistake {
                Mistake::Misaligned => stage + i.clone() * 4u32 + 2u32,
                _ => stage + i.clone() * 4u32,
            };
            f.copy_start((stages, dst), (a, at.clone()), 4, at.lt(VALID));
            f.copy_commit();
        };
        copy(f, E::from(0u32));
        f.for_("t", 0u32, TILES, 1, |f, t| {
            if mistake != Mistake::NoWait {
                f.copy_wait(0);
            }
            if mistake != Mistake::NoBarrier {
                f.barrier();
            }
            let next = t.clone() + 1u32;
            // With the mistake, the last iteration copies a tile past the end (all
            // zeros) and nothing waits for it.
            let last = if mistake == Mistake::NoFinalWait {
                TILES
            } else {
                TILES - 1
            };
            f.if_(t.clone().lt(last), |f| copy(f, next));
            let neighbour = (i.clone() + 1u32) % THREADS;
            let read = (t.clone() % 2u32) * TILE + neighbour * 4u32 + 1u32;
            f.store(out, t * THREADS + i.clone(), stages.at(read));
        });
    })
    .unwrap()
}

fn expected() -> Vec<f64> {
    let mut want = Vec::new();
    for t in 0..TILES {
        for i in 0..THREADS {
            let e = t * TILE + ((i + 1) % THREADS) * 4 + 1;
            want.push(if e < VALID { 1.0 + e as f64 } else { 0.0 });
        }
    }
    want
}

#[test]
fn a_pipeline_reads_each_tile_whole_with_zeros_where_invalid() {
    let kernel = pipeline(Mistake::None);
    let got = run_kernel(&kernel, &inputs()).unwrap();
    assert_eq!(got[1].to_f64(), expected());
}

#[test]
fn the_expansion_stores_what_the_copies_do() {
    let kernel = pipeline(Mistake::None);
    let expanded = expand_async_copies(&kernel);
    assert!(!expanded.uses_async_copies());
    kernelc_ir::validate(&expanded).unwrap();
    let got = run_kernel(&expanded, &inputs()).unwrap();
    assert_eq!(got[1].to_f64(), expected());
    // `for_target` expands them unless the target runs them.
    let plain = MathExpansion::none();
    assert!(!for_target(&kernel, &plain).uses_async_copies());
    let native = MathExpansion::none().with_native_async_copies(true);
    assert!(for_target(&kernel, &native).uses_async_copies());
}

#[test]
fn the_interpreter_reports_each_broken_rule() {
    let error = |m| run_kernel(&pipeline(m), &inputs()).unwrap_err();
    let e = error(Mistake::NoWait);
    assert!(
        matches!(&e, InterpError::AsyncCopy { what, .. } if what.contains("in flight")),
        "{e}"
    );
    let e = error(Mistake::NoBarrier);
    assert!(matches!(&e, InterpError::Race { .. }), "{e}");
    let e = error(Mistake::NoFinalWait);
    assert!(
        matches!(&e, InterpError::AsyncCopy { what, .. } if what.contains("workgroup ends")),
        "{e}"
    );
    let e = error(Mistake::Misaligned);
    assert!(
        matches!(&e, InterpError::AsyncCopy { what, .. } if what.contains("not a multiple")),
        "{e}"
    );
}

fn validation_error(build: impl FnOnce(&mut Body, [Mem; 3])) -> ValidationErrorKind {
    let mut kb = KernelBuilder::new("bad", [1, 1, 1]);
    let a = kb.buffer("a", ScalarType::F32, 64, Access::Read);
    let w = kb.buffer("w", ScalarType::F32, 64, Access::ReadWrite);
    let sh = kb.shared("sh", ScalarType::F32, 64);
    kb.build(|f| build(f, [a, w, sh])).unwrap_err().kind
}

/// A kernel body over `[a (read-only), w (writable), sh (shared)]`.
type BadBody = Box<dyn FnOnce(&mut Body, [Mem; 3])>;

#[test]
fn the_validator_names_what_is_wrong_with_a_copy() {
    use ValidationErrorKind as K;
    let cases: [(&str, BadBody); 4] = [
        (
            "writable",
            Box::new(|f, [_, w, sh]| f.copy_start((sh, 0u32), (w, 0u32), 4, true)),
        ),
        (
            "12 bytes",
            Box::new(|f, [a, _, sh]| f.copy_start((sh, 0u32), (a, 0u32), 3, true)),
        ),
        (
            "a shared array",
            Box::new(|f, [a, _, sh]| f.copy_start((a, 0u32), (sh, 0u32), 4, true)),
        ),
        (
            "condition",
            Box::new(|f, [a, _, sh]| f.copy_start((sh, 0u32), (a, 0u32), 4, 1u32)),
        ),
    ];
    for (what, build) in cases {
        let e = validation_error(build);
        match &e {
            K::BadAsyncCopy(why) => assert!(why.contains(what), "{what}: {e}"),
            K::TypeMismatch { context, .. } => assert!(context.contains(what), "{what}: {e}"),
            _ => panic!("{what}: {e}"),
        }
    }
    // A constant index past the array, and one that is no multiple of the length.
    let e = validation_error(|f, [a, _, sh]| f.copy_start((sh, 62u32), (a, 0u32), 4, true));
    assert!(matches!(e, K::UnalignedVectorAccess { .. }), "{e}");
    let e = validation_error(|f, [a, _, sh]| f.copy_start((sh, 64u32), (a, 0u32), 4, true));
    assert!(matches!(e, K::IndexOutOfBounds { .. }), "{e}");
}

#[test]
fn copies_print_and_round_trip_through_json() {
    let kernel = pipeline(Mistake::None);
    let text = kernelc_ir::print::print(&kernel);
    assert!(text.contains("copy stages["), "{text}");
    assert!(
        text.contains("copy_commit") && text.contains("copy_wait 0"),
        "{text}"
    );
    let back = kernelc_ir::from_json(&kernelc_ir::to_json(&kernel)).unwrap();
    assert_eq!(back, kernel);
}

/// A staging array, then an array of another type in its bytes for a second phase.
fn phases(barrier_between: bool) -> Kernel {
    let mut kb = KernelBuilder::new("phases", [16, 1, 1]);
    let out = kb.buffer("out", ScalarType::U32, 32, Access::Write);
    let stage = kb.shared("stage", ScalarType::F32, 16);
    let rows = kb.shared_reusing("rows", ScalarType::U32, 8, stage);
    kb.build(|f| {
        let i = f.let_("i", local_id(0));
        f.store(stage, i.clone(), i.clone().cast(ScalarType::F32));
        f.barrier();
        let v = stage.at((i.clone() + 1u32) % 16u32);
        f.store(out, i.clone(), v.cast(ScalarType::U32));
        if barrier_between {
            f.barrier();
        }
        f.if_(i.clone().lt(8u32), |f| {
            f.store(rows, i.clone(), i.clone() * 2u32)
        });
        f.barrier();
        f.store(out, i.clone() + 16u32, rows.at((i.clone() + 1u32) % 8u32));
    })
    .unwrap()
}

#[test]
fn arrays_that_share_bytes_take_the_largest_and_switch_at_a_barrier() {
    let kernel = phases(true);
    assert_eq!(
        kernel.shared_bytes(),
        64,
        "f32[16] and u32[8] share 64 bytes"
    );
    assert_eq!(kernel.shared_layout(16).0, vec![0, 0]);
    let got = run_kernel(&kernel, &[HostBuffer::zeros(ScalarType::U32, 32)]).unwrap();
    let got = got[0].to_f64();
    for i in 0..16 {
        assert_eq!(got[i], ((i + 1) % 16) as f64);
        assert_eq!(got[16 + i], (2 * ((i + 1) % 8)) as f64);
    }
    let e = run_kernel(&phases(false), &[HostBuffer::zeros(ScalarType::U32, 32)]).unwrap_err();
    assert!(matches!(&e, InterpError::SharedReuse { .. }), "{e}");
}

#[test]
fn a_switch_leaves_the_new_array_undefined() {
    // `stage` written, then `rows` read without being written: its bytes hold
    // `stage`'s values, none of its own.
    let mut kb = KernelBuilder::new("stale", [4, 1, 1]);
    let out = kb.buffer("out", ScalarType::U32, 4, Access::Write);
    let stage = kb.shared("stage", ScalarType::U32, 4);
    let rows = kb.shared_reusing("rows", ScalarType::U32, 4, stage);
    let kernel = kb
        .build(|f| {
            let i = f.let_("i", local_id(0));
            f.store(stage, i.clone(), i.clone());
            f.barrier();
            f.store(out, i.clone(), rows.at(i.clone()));
        })
        .unwrap();
    let e = run_kernel(&kernel, &[HostBuffer::zeros(ScalarType::U32, 4)]).unwrap_err();
    assert!(
        matches!(&e, InterpError::UninitializedSharedRead { memory, .. } if memory == "rows"),
        "{e}"
    );
}

#[test]
fn the_validator_names_a_bad_reuse() {
    let mut kb = KernelBuilder::new("chain", [1, 1, 1]);
    let a = kb.shared("a", ScalarType::F32, 4);
    let b = kb.shared_reusing("b", ScalarType::F32, 4, a);
    let _ = kb.shared_reusing("c", ScalarType::F32, 4, b);
    let e = kb.build(|_| {}).unwrap_err().kind;
    assert!(
        matches!(&e, ValidationErrorKind::BadSharedReuse { why, .. } if why.contains("reuses another")),
        "{e}"
    );
    let mut kb = KernelBuilder::new("buffer", [1, 1, 1]);
    let buf = kb.buffer("buf", ScalarType::F32, 4, Access::Read);
    let _ = kb.shared_reusing("c", ScalarType::F32, 4, buf);
    let e = kb.build(|_| {}).unwrap_err().kind;
    assert!(
        matches!(&e, ValidationErrorKind::BadSharedReuse { why, .. } if why.contains("unknown")),
        "{e}"
    );
}
