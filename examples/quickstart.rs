//! Quickstart: write a kernel with the builder DSL, validate and optimise it, print
//! its IR, and run it on the reference interpreter.
//!
//! `cargo run --example quickstart` (or `./x demo`).
//!
//! The kernel is a workgroup sum reduction: each workgroup of 64 invocations loads 64
//! elements of `x` into shared memory, halves the active range until one element is
//! left (with a barrier between steps), and writes its partial sum to `partial[wg]`.

use kernelc::ir::builder::*;
use kernelc::ir::interp::{self, Arg, HostBuffer};
use kernelc::ir::{passes, print, Access, ScalarType::F32};

const WG: u32 = 64;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = 1000;
    let groups = n.div_ceil(WG);

    let mut k = KernelBuilder::new("partial_sums", [WG, 1, 1]);
    let x = k.buffer("x", F32, n as u64, Access::Read);
    let partial = k.buffer("partial", F32, groups as u64, Access::Write);
    let tile = k.shared("tile", F32, WG);
    let kernel = k.build(|f| {
        let lid = f.let_("lid", local_id(0));
        let gid = f.let_("gid", global_id(0));
        // Out-of-range invocations contribute 0 so every invocation reaches the barriers.
        f.store(
            tile,
            &lid,
            gid.clone()
                .lt(n)
                .select(x.at(gid.clone().min(n - 1)), 0.0f32),
        );
        f.barrier();
        let mut stride = WG / 2;
        while stride > 0 {
            f.if_(lid.clone().lt(stride), |f| {
                f.store(tile, &lid, tile.at(&lid) + tile.at(&lid + stride));
            });
            f.barrier();
            stride /= 2;
        }
        f.if_(lid.clone().eq(0u32), |f| {
            f.store(partial, workgroup_id(0), tile.at(0u32))
        });
    })?;

    let optimized = passes::optimize(&kernel, &passes::PassOptions::default());
    println!("{}", print::print(&optimized));

    let input: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32) * 0.01 - 0.5)
        .collect();
    let mut args = vec![
        Arg::Buffer(HostBuffer::from_f32(&input)),
        Arg::Buffer(HostBuffer::filled(
            F32,
            groups as usize,
            kernelc::ir::Scalar::f32(f32::NAN),
        )),
    ];
    interp::run(&optimized, [groups, 1, 1], &mut args)?;

    let Arg::Buffer(out) = &args[1] else {
        return Err("output argument is not a buffer".into());
    };
    let total: f64 = out.to_f64().iter().sum();
    let expected: f64 = input.iter().map(|&v| v as f64).sum();
    println!("interpreter: {groups} workgroups x {WG} invocations, n = {n}");
    println!("sum of partial sums = {total:.6}, plain Rust f64 sum = {expected:.6}");
    let tolerance = 1e-4 * input.iter().map(|v| v.abs() as f64).sum::<f64>();
    if (total - expected).abs() > tolerance {
        return Err(format!("mismatch: {total} vs {expected} (tolerance {tolerance})").into());
    }
    println!("ok: within {tolerance:.2e}");
    Ok(())
}
