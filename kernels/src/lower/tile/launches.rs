//! The launches around the tile kernel: the split-K sum, the gap fill, and
//! [`emit_gemm`], which appends a problem's launches to a plan.

use super::choices::Schedule;
use super::schedule::{SplitK, Tile, TileKernel};
use super::{add, div, rem, scale, BiasAxis, GemmCore};
use crate::lower::math::{bind, Num};
use crate::lower::schedule::plan_1d;
use crate::lower::{Binding, Launch, LowerError, PlanBuilder, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::Access;

/// Sums the split partials of every C element and applies the epilogue (a coalesced
/// 1-D map over `batch × M × N`).
fn reduce_launch(
    core: &GemmCore,
    caps: &TargetCaps,
    split: SplitK,
    partial: &Binding,
) -> Result<Launch, LowerError> {
    let compute = core.compute();
    let batch = core.batch_count();
    let items = batch as u64 * core.m as u64 * core.n as u64;
    let grid = plan_1d(items, caps, 1)?;
    let mut k = KernelBuilder::new(format!("{}_split_sum", core.name), grid.workgroup_size());
    let partial_len = split.splits as u64 * batch as u64 * core.m as u64 * split.ld as u64;
    let mut bindings = vec![partial.clone()];
    let part = k.buffer("partial", compute, partial_len, Access::Read);
    // Operands with absent elements: a NaN sum is summed again without them.
    let operands = core.recompute_buffers(&mut k, &mut bindings, None);
    let super::kernel::EpilogueMems {
        bias,
        c_in,
        out,
        alpha,
        beta,
    } = core.epilogue_buffers(&mut k, &mut bindings);
    let num = Num::scalar(compute);
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, e| {
            let j = bind(f, "j", rem(e.clone(), core.n));
            let rows = bind(f, "rows", div(e, core.n));
            let i = bind(f, "i", rem(rows.clone(), core.m));
            let z = bind(f, "z", div(rows.clone(), core.m));
            let first = bind(f, "first", add(scale(rows, split.ld), j.clone()));
            let stride = batch * core.m * split.ld;
            let mut sum: Option<E> = None;
            for s in 0..split.splits {
                let v = part.at(add(first.clone(), E::from(s * stride)));
                sum = Some(match sum {
                    None => v,
                    Some(acc) => acc + v,
                });
            }
            let mut sum = sum.unwrap_or_else(|| num.lit(0.0));
            if let Some(mems) = operands {
                let var = f.var("sum", sum);
                f.if_(var.get().ne(var.get()), |f| {
                    let exact = core.exact_dot(f, mems, &z, &i, &j);
                    f.assign(var, exact);
                });
                sum = var.get();
            }
            let off_c = core.batch_offset(f, "off_c", &z, &core.c.batch_strides, core.c.base);
            let index = bind(
                f,
                "c_at",
                add(off_c, add(scale(i.clone(), core.c.ld), j.clone())),
            );
            let mut v = alpha.clone() * sum;
            if let (Some(c_in), Some(beta)) = (c_in, &beta) {
                v = v + beta.clone() * num.load(c_in, core.c.dtype, index.clone());
            }
            if let (Some(bs), Some(mem)) = (&core.bias, bias) {
                let at = if bs.along == BiasAxis::Rows { i } else { j };
                v = v + num.load(mem, bs.dtype, at);
            }
            let v = core.stored_value(f, &num, v);
            f.store(out, index, v);
        });
    })?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    })
}

/// Writes the elements of C's buffer that belong to no matrix (gaps left by `ldc` or
/// batch strides): the prior C when `beta != 0`, else 0. The tile kernel writes the
/// rest, so every element has exactly one writer.
fn gap_launch(core: &GemmCore, caps: &TargetCaps) -> Result<Launch, LowerError> {
    let c = &core.c;
    let grid = plan_1d(c.len, caps, 1)?;
    let mut k = KernelBuilder::new(format!("{}_gaps", core.name), grid.workgroup_size());
    let mut bindings = Vec::new();
    let c_in = core.prior.as_ref().map(|prior| {
        bindings.push(prior.c_in.clone());
        k.buffer("c_in", c.dtype, c.len, Access::Read)
    });
    bindings.push(c.binding.clone());
    let out = k.buffer(c.name.clone(), c.dtype, c.len, Access::Write);
    // Batches nest without overlap (the spec checks it): peel them off from the
    // largest stride down.
    let mut dims: Vec<(u32, u32)> = core
        .batch
        .iter()
        .zip(&c.batch_strides)
        .filter(|(&count, _)| count > 1)
        .map(|(&count, &stride)| (stride, count))
        .collect();
    dims.sort_unstable_by(|x, y| y.cmp(x));
    let span = (core.m - 1) * c.ld + core.n;
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, e| {
            let mut rest = if c.base == 0 {
                e.clone()
            } else {
                bind(f, "rel", e.clone().max(E::from(c.base)) - c.base)
            };
            for (stride, count) in &dims {
                let b = bind(f, "b", div(rest.clone(), *stride).min(E::from(count - 1)));
                rest = bind(f, "rest", rest.clone() - scale(b, *stride));
            }
            let mut inside = rest.clone().lt(span) & rem(rest, c.ld).lt(core.n);
            if c.base != 0 {
                inside = inside & e.clone().ge(c.base);
            }
            let value = match c_in {
                Some(mem) => mem.at(e.clone()),
                None => lit(c.dtype, 0.0),
            };
            f.if_(!inside, |f| f.store(out, e, value));
        });
    })?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    })
}

/// Appends the launches of `core` to `plan`: the packs of its operands where it takes
/// its packed form (`pack.rs`), the tile kernel, and the split-K sum and the gap fill
/// when they are needed.
pub(crate) fn emit_gemm(
    core: &GemmCore,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    let packed = super::pack::candidate(core, caps, plan.temps.len());
    let (schedule, is_packed, tunable) = super::choices::pick(core, packed.as_ref(), caps);
    crate::lower::plan::offer(&mut plan.tunable, Some(tunable));
    let core = match (&packed, is_packed) {
        (Some(p), true) => {
            p.emit(core, caps, plan)?;
            &p.core
        }
        _ => core,
    };
    match schedule {
        Schedule::Fragments(mt) => {
            let kernel = TileKernel::for_fragments(core, caps, mt);
            push_gap_launch(core, caps, plan)?;
            plan.launches.push(kernel.build_mma(caps, mt)?);
            Ok(())
        }
        Schedule::Simt(tile) => emit_gemm_with(core, caps, tile, plan),
    }
}

/// The gap fill, where C's buffer has elements outside every matrix.
fn push_gap_launch(
    core: &GemmCore,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    if core.fill_gaps {
        let covered = core.batch_count() as u64 * core.m as u64 * core.n as u64;
        if covered < core.c.len {
            plan.launches.push(gap_launch(core, caps)?);
        }
    }
    Ok(())
}

/// [`emit_gemm`] with a given starting tile (tests force the other configurations).
pub(crate) fn emit_gemm_with(
    core: &GemmCore,
    caps: &TargetCaps,
    mut tile: Tile,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    let mut kernel = TileKernel::new(core, caps, tile);
    // Halve the slab until the tiles fit the device's shared memory.
    while kernel.shared_bytes() > caps.shared_memory_bytes as u64 && tile.bk > 4 {
        tile.bk /= 2;
        tile.unroll = tile.unroll.min(tile.bk);
        kernel = TileKernel::new(core, caps, tile);
    }
    if kernel.shared_bytes() > caps.shared_memory_bytes as u64 {
        return Err(LowerError::SharedMemory {
            op: core.name.clone(),
            needed: kernel.shared_bytes(),
            available: caps.shared_memory_bytes as u64,
        });
    }
    kernel.choose_split(caps);
    push_gap_launch(core, caps, plan)?;
    match kernel.split {
        Some(split) => {
            let len =
                split.splits as u64 * core.batch_count() as u64 * core.m as u64 * split.ld as u64;
            let partial = plan.temp(core.compute(), len);
            plan.launches.push(kernel.build(caps, Some(&partial))?);
            plan.launches
                .push(reduce_launch(core, caps, split, &partial)?);
        }
        None => plan.launches.push(kernel.build(caps, None)?),
    }
    Ok(())
}
