//! Pooling on NCHW tensors: max/average pooling over a window, its backward, and
//! adaptive pooling (forward, and backward for average).
//!
//! **Forward** ops are one map launch: one output element per item, items spread over
//! workgroups and invocations with [`plan_1d`] (neighbouring invocations on neighbouring
//! output columns, so reads and writes are coalesced). Each item loops over its window
//! clipped to the image: no per-tap bounds tests, and the taps are visited row-major,
//! which is what makes "first maximum wins" (strict `>`) match the reference.
//!
//! **Backward** ops are a *gather* per input pixel: the pixel loops over the output
//! windows that contain it (a closed-form range of rows and columns) and sums their
//! contributions, so every `dx` element is written once by one invocation, with no
//! atomics and no races, and `accumulate` adds the prior value in the same store.
//!
//! * average: `dy[o] / count(o)` for every window `o` containing the pixel;
//! * max with a window: `dy[o]` for every window `o` containing the pixel whose recorded
//!   index is the pixel. This assumes the indices come from the forward with this
//!   window (every index inside its own window, as the forward writes them); an index
//!   outside its window is not routed;
//! * max without a window: no closed form says which outputs may point at a pixel, so
//!   the plan has two launches: `dx = prior` (or 0) as a coalesced map, then one
//!   invocation per channel plane routes the plane's `dy` to its indices serially (a
//!   plane is never shared, so there are no races). Pass the window for the parallel
//!   gather.
//!
//! Adaptive windows are PyTorch's `[⌊o·in/out⌋, ⌈(o+1)·in/out⌉)`; the outputs whose
//! window contains input `i` are `⌊i·out/in⌋ ≤ o < ⌈(i+1)·out/in⌉`.
//!
//! Values are widened to the compute type (f32 for f16/bf16) for sums; max pooling
//! compares in the compute type, which is exact. Index math is u32; the products it
//! forms are bounded by the tensor sizes (< 2^31), and adaptive pooling, whose
//! `in·out` products are not, checks them at lowering time.

use crate::lower::index::resolve_index;
use crate::lower::math::{compute_type, Num};
use crate::lower::schedule::plan_1d;
use crate::lower::{declare_tensor, Binding, Launch, LowerError, Plan, TargetCaps, TempBuffer};
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// One buffer parameter of a launch: its signature, access and binding.
struct Param {
    sig: TensorSig,
    access: Access,
    binding: Binding,
}

fn param(sig: &TensorSig, access: Access, binding: Binding) -> Param {
    Param {
        sig: sig.clone(),
        access,
        binding,
    }
}

/// A launch of `items` independent items, one per invocation step, over `params` (bound
/// in order). `body(f, mems, item)` writes the item's results.
fn map_launch(
    name: &str,
    caps: &TargetCaps,
    items: u64,
    params: &[Param],
    body: impl FnOnce(&mut Body, &[Mem], E),
) -> Result<Launch, LowerError> {
    let grid = plan_1d(items, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let mems: Vec<Mem> = params
        .iter()
        .map(|p| declare_tensor(&mut k, &p.sig, p.access))
        .collect();
    let kernel = k.build(|f| grid.for_each_item(f, |f, item| body(f, &mems, item)))?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings: params.iter().map(|p| p.binding.clone()).collect(),
    })
}

/// A size as u32; valid specs keep every size below 2^31.
fn dim(v: usize, what: &str) -> Result<u32, LowerError> {
    u32::try_from(v).map_err(|_| LowerError::TooLarge {
        what: what.into(),
        value: v as u64,
        limit: u32::MAX as u64,
    })
}

fn nth(sigs: &[TensorSig], i: usize, what: &'static str) -> Result<TensorSig, LowerError> {
    sigs.get(i).cloned().ok_or(LowerError::Internal(what))
}

/// `(plane, row, col)` of a flat NCHW index into planes of `rows × cols`.
fn split(f: &mut Body, index: E, rows: u32, cols: u32) -> (E, E, E) {
    let col = f.let_("col", index.clone() % cols);
    let rest = f.let_("rest", index / cols);
    let row = f.let_("row", rest.clone() % rows);
    let plane = f.let_("plane", rest / rows);
    (plane, row, col)
}

/// One dimension of a pooling window, sizes as u32.
#[derive(Clone, Copy)]
struct Axis {
    /// Input extent.
    size: u32,
    /// Output extent.
    out: u32,
    kernel: u32,
    stride: u32,
    pad: u32,
}

impl Axis {
    fn new(w: &Window2d, d: usize, size: usize, out: usize) -> Result<Axis, LowerError> {
        Ok(Axis {
            size: dim(size, "pooling input size")?,
            out: dim(out, "pooling output size")?,
            kernel: dim(w.kernel[d], "pooling kernel")?,
            stride: dim(w.stride[d], "pooling stride")?,
            pad: dim(w.padding[d], "pooling padding")?,
        })
    }

    /// The window of output `o` clipped to the image: input range `[lo, hi)`. In padded
    /// coordinates the window is `[o·stride, o·stride + kernel)`, never past
    /// `size + 2·pad`, and it always holds an in-image element (padding ≤ kernel / 2).
    fn window(&self, f: &mut Body, o: &E, name: &str) -> (E, E) {
        let start = f.let_(&format!("{name}_start"), o.clone() * self.stride);
        if self.pad == 0 {
            let lo = start;
            let hi = lo.clone() + self.kernel;
            return (lo, hi);
        }
        let lo = f.let_(
            &format!("{name}_lo"),
            start.clone().max(self.pad) - self.pad,
        );
        let hi = f.let_(
            &format!("{name}_hi"),
            (start + self.kernel).min(self.size + self.pad) - self.pad,
        );
        (lo, hi)
    }

    /// The outputs whose window contains input `i`: `[lo, hi)` with
    /// `o·stride ≤ i + pad < o·stride + kernel` and `o < out`.
    fn outputs_containing(&self, f: &mut Body, i: &E, name: &str) -> (E, E) {
        let pos = f.let_(&format!("{name}_pos"), i.clone() + self.pad);
        let (k, s) = (self.kernel, self.stride);
        // ⌈(pos + 1 − kernel) / stride⌉, or 0 while pos + 1 ≤ kernel.
        let lo = f.let_(
            &format!("{name}_first"),
            ((pos.clone() + 1u32).max(k) - k + (s - 1)) / s,
        );
        let hi = f.let_(&format!("{name}_end"), (pos / s + 1u32).min(self.out));
        (lo, hi)
    }

    /// In-image elements of output `o`'s window (its clipped length).
    fn clipped_len(&self, o: &E) -> E {
        let start = o.clone() * self.stride;
        if self.pad == 0 {
            return E::from(self.kernel);
        }
        (start.clone() + self.kernel).min(self.size + self.pad) - start.max(self.pad)
    }
}

/// `for i in lo..hi` over one window axis. Without padding the window is never
/// clipped, so the loop counts `0..kernel` instead: a constant trip count that unrolls.
fn for_window(
    f: &mut Body,
    axis: &Axis,
    name: &str,
    (lo, hi): (E, E),
    body: impl FnOnce(&mut Body, E),
) {
    if axis.pad == 0 {
        f.for_(&format!("{name}_tap"), 0u32, axis.kernel, 1, |f, t| {
            let i = f.let_(name, lo + t);
            body(f, i);
        });
    } else {
        f.for_(name, lo, hi, 1, body);
    }
}

/// Max or average pooling forward (with the argmax indices for max if asked).
pub(super) fn pool2d(spec: &Pool2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Pool2d(spec.clone());
    let (inputs, outputs) = (op.inputs(), op.outputs());
    let [oh, ow] = spec.out_size();
    let ay = Axis::new(&spec.window, 0, spec.image.height, oh)?;
    let ax = Axis::new(&spec.window, 1, spec.image.width, ow)?;
    let mut params = vec![
        param(
            &nth(&inputs, 0, "pool2d input")?,
            Access::Read,
            Binding::Input(0),
        ),
        param(
            &nth(&outputs, 0, "pool2d output")?,
            Access::Write,
            Binding::Output(0),
        ),
    ];
    if spec.indices.is_some() {
        let sig = nth(&outputs, 1, "pool2d indices")?;
        params.push(param(&sig, Access::Write, Binding::Output(1)));
    }
    let items = params[1].sig.numel() as u64;
    let n = Num::scalar(compute_type(spec.dtype));
    let launch = map_launch(&op.name(), caps, items, &params, |f, mems, o| {
        let (plane, oy, ox) = split(f, o.clone(), ay.out, ax.out);
        let (y0, y1) = ay.window(f, &oy, "y");
        let (x0, x1) = ax.window(f, &ox, "x");
        let base = f.let_("base", plane * (ay.size * ax.size));
        let x = mems[0];
        let at = |p: E| n.load(x, spec.dtype, base.clone() + p);
        match spec.kind {
            PoolKind::Max => {
                let first = f.let_("first", y0.clone() * ax.size + x0.clone());
                let best = f.var("best", at(first.clone()));
                let arg = f.var("arg", first);
                for_window(f, &ay, "iy", (y0, y1), |f, iy| {
                    let row = f.let_("row_at", iy * ax.size);
                    for_window(f, &ax, "ix", (x0, x1), |f, ix| {
                        let p = f.let_("p", row.clone() + ix);
                        let v = f.let_("v", at(p.clone()));
                        // Strict `>`: the first maximum in row-major order wins.
                        let better = f.let_("better", v.clone().gt(best.get()));
                        f.assign(best, better.clone().select(v, best.get()));
                        f.assign(arg, better.select(p, arg.get()));
                    });
                });
                f.store(mems[1], o.clone(), n.narrow(best.get(), spec.dtype));
                if let Some(t) = spec.indices {
                    f.store(mems[2], o, index_value(arg.get(), t));
                }
            }
            PoolKind::Avg => {
                let sum = f.var("sum", n.lit(0.0));
                let (ry, rx) = (y0.clone(), x0.clone());
                for_window(f, &ay, "iy", (y0, y1.clone()), |f, iy| {
                    let row = f.let_("row_at", iy * ax.size);
                    for_window(f, &ax, "ix", (x0, x1.clone()), |f, ix| {
                        f.assign(sum, sum.get() + at(row.clone() + ix));
                    });
                });
                let len = |a: &Axis, hi: E, lo: E| {
                    if a.pad == 0 {
                        E::from(a.kernel)
                    } else {
                        hi - lo
                    }
                };
                let count = if spec.count_include_pad {
                    E::from(ay.kernel * ax.kernel)
                } else {
                    len(&ay, y1, ry) * len(&ax, x1, rx)
                };
                let mean = sum.get() / count.cast(n.ty);
                f.store(mems[1], o, n.narrow(mean, spec.dtype));
            }
        }
    })?;
    Ok(Plan::single(launch))
}

/// A plane-local u32 index stored as an index dtype (`f32` holds it exactly below 2^24).
fn index_value(i: E, dtype: ScalarType) -> E {
    match dtype {
        ScalarType::U32 => i,
        other => i.cast(other),
    }
}

/// Backward of max or average pooling (see the module docs for the schedules).
pub(super) fn pool2d_backward(
    spec: &Pool2dBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    match (spec.kind, spec.window) {
        (_, Some(window)) => pool_backward_gather(spec, &window, caps),
        (PoolKind::Max, None) => max_backward_scatter(spec, caps),
        // The spec validator rejects average pooling without a window.
        (PoolKind::Avg, None) => Err(LowerError::Internal("average pooling without a window")),
    }
}

/// Inputs of a pooling backward as params: `dy`, then `indices` (max), then `prior`.
fn backward_params(op: &OpSpec) -> Vec<Param> {
    op.inputs()
        .iter()
        .enumerate()
        .map(|(i, sig)| param(sig, Access::Read, Binding::Input(i)))
        .collect()
}

/// Backward as a gather over the windows containing each input pixel.
fn pool_backward_gather(
    spec: &Pool2dBackwardSpec,
    window: &Window2d,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::Pool2dBackward(spec.clone());
    let ay = Axis::new(window, 0, spec.image.height, spec.out_height)?;
    let ax = Axis::new(window, 1, spec.image.width, spec.out_width)?;
    let mut params = backward_params(&op);
    let dx = nth(&op.outputs(), 0, "pool2d_backward output")?;
    let items = dx.numel() as u64;
    params.push(param(&dx, Access::Write, Binding::Output(0)));
    let is_max = spec.kind == PoolKind::Max;
    let prior = spec.accumulate.then_some(if is_max { 2 } else { 1 });
    let n = Num::scalar(compute_type(spec.dtype));
    let plane_len = ay.size * ax.size;
    let launch = map_launch(&op.name(), caps, items, &params, |f, mems, p| {
        let (plane, iy, ix) = split(f, p.clone(), ay.size, ax.size);
        let (oy0, oy1) = ay.outputs_containing(f, &iy, "oy");
        let (ox0, ox1) = ax.outputs_containing(f, &ix, "ox");
        let pixel = f.let_("pixel", iy * ax.size + ix);
        let out_base = f.let_("out_base", plane * (ay.out * ax.out));
        let acc = f.var("acc", n.lit(0.0));
        f.for_("oy", oy0, oy1, 1, |f, oy| {
            let row = f.let_("o_row", out_base.clone() + oy.clone() * ax.out);
            let rows =
                (!is_max && !spec.count_include_pad).then(|| f.let_("rows", ay.clipped_len(&oy)));
            f.for_("ox", ox0, ox1, 1, |f, ox| {
                let o = f.let_("o", row.clone() + ox.clone());
                let g = n.load(mems[0], spec.dtype, o.clone());
                let term = if is_max {
                    let t = spec.index_dtype.unwrap_or(ScalarType::U32);
                    let (ok, i) = resolve_index(f, mems[1].at(o), t, plane_len as usize, false);
                    (ok & i.eq(pixel.clone())).select(g, n.lit(0.0))
                } else {
                    let count = match &rows {
                        Some(r) => r.clone() * ax.clipped_len(&ox),
                        None => E::from(ay.kernel * ax.kernel),
                    };
                    g / count.cast(n.ty)
                };
                f.assign(acc, acc.get() + term);
            });
        });
        let value = match prior {
            Some(k) => n.load(mems[k], spec.dtype, p.clone()) + acc.get(),
            None => acc.get(),
        };
        f.store(mems[mems.len() - 1], p, n.narrow(value, spec.dtype));
    })?;
    Ok(Plan::single(launch))
}

/// Max backward without a window: `dx = prior | 0`, then per-plane routing.
fn max_backward_scatter(spec: &Pool2dBackwardSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Pool2dBackward(spec.clone());
    let inputs = op.inputs();
    let dx = nth(&op.outputs(), 0, "pool2d_backward output")?;
    let ty = compute_type(spec.dtype);
    let n = Num::scalar(ty);
    let plane_len = dim(spec.image.height * spec.image.width, "pooling plane")?;
    let out_len = dim(spec.out_height * spec.out_width, "pooling output plane")?;
    // The sums: in `dx` itself where it holds the compute type, else in a temporary of
    // the compute type, narrowed once at the end (an f16 running sum would round at
    // every one of up to `out_height·out_width` additions).
    let widened = ty != spec.dtype;
    let (sums, sums_binding, temps) = if widened {
        let sig = TensorSig::new("dx_sums", ty, dx.shape.clone());
        let temp = TempBuffer {
            dtype: ty,
            len: dx.numel() as u64,
        };
        (sig, Binding::Temp(0), vec![temp])
    } else {
        (dx.clone(), Binding::Output(0), Vec::new())
    };

    let mut init_params = Vec::new();
    if spec.accumulate {
        init_params.push(param(
            &nth(&inputs, 2, "pool prior")?,
            Access::Read,
            Binding::Input(2),
        ));
    }
    init_params.push(param(&sums, Access::Write, sums_binding.clone()));
    let init_name = format!("{}_init", op.name());
    let init = map_launch(
        &init_name,
        caps,
        dx.numel() as u64,
        &init_params,
        |f, mems, i| {
            let value = if spec.accumulate {
                n.load(mems[0], spec.dtype, i.clone())
            } else {
                n.lit(0.0)
            };
            f.store(mems[mems.len() - 1], i, n.narrow(value, sums.dtype));
        },
    )?;

    let index_dtype = spec.index_dtype.unwrap_or(ScalarType::U32);
    let route_params = [
        param(
            &nth(&inputs, 0, "pool dy")?,
            Access::Read,
            Binding::Input(0),
        ),
        param(
            &nth(&inputs, 1, "pool indices")?,
            Access::Read,
            Binding::Input(1),
        ),
        // Read-modify-write: each plane is owned by one invocation.
        param(&sums, Access::ReadWrite, sums_binding.clone()),
    ];
    let planes = (spec.image.batch * spec.image.channels) as u64;
    let route = map_launch(&op.name(), caps, planes, &route_params, |f, mems, plane| {
        let out_base = f.let_("out_base", plane.clone() * out_len);
        let in_base = f.let_("in_base", plane * plane_len);
        f.for_("o", 0u32, out_len, 1, |f, o| {
            let at = f.let_("at", out_base.clone() + o);
            let (ok, i) = resolve_index(
                f,
                mems[1].at(at.clone()),
                index_dtype,
                plane_len as usize,
                false,
            );
            f.if_(ok, |f| {
                let dst = f.let_("dst", in_base.clone() + i);
                let sum =
                    n.load(mems[2], sums.dtype, dst.clone()) + n.load(mems[0], spec.dtype, at);
                f.store(mems[2], dst, n.narrow(sum, sums.dtype));
            });
        });
    })?;
    let mut launches = vec![init, route];
    if widened {
        let narrow_params = [
            param(&sums, Access::Read, sums_binding),
            param(&dx, Access::Write, Binding::Output(0)),
        ];
        let name = format!("{}_narrow", op.name());
        launches.push(map_launch(
            &name,
            caps,
            dx.numel() as u64,
            &narrow_params,
            |f, mems, i| {
                let sum = n.load(mems[0], sums.dtype, i.clone());
                f.store(mems[1], i, n.narrow(sum, spec.dtype));
            },
        )?);
    }
    Ok(Plan {
        launches,
        temps,
        ..Plan::default()
    })
}

/// One dimension of adaptive pooling.
#[derive(Clone, Copy)]
struct Adaptive {
    size: u32,
    out: u32,
}

impl Adaptive {
    /// Checks that `in·out + in + out` fits u32, which bounds every product formed.
    fn new(size: usize, out: usize) -> Result<Adaptive, LowerError> {
        let bound = size as u64 * out as u64 + size as u64 + out as u64;
        if bound > u32::MAX as u64 {
            return Err(LowerError::TooLarge {
                what: "adaptive pooling in·out product".into(),
                value: bound,
                limit: u32::MAX as u64,
            });
        }
        Ok(Adaptive {
            size: size as u32,
            out: out as u32,
        })
    }

    /// The window of output `o`: `[⌊o·in/out⌋, ⌈(o+1)·in/out⌉)`.
    fn window(&self, f: &mut Body, o: &E, name: &str) -> (E, E) {
        let lo = f.let_(&format!("{name}_lo"), o.clone() * self.size / self.out);
        let hi = f.let_(
            &format!("{name}_hi"),
            ((o.clone() + 1u32) * self.size + (self.out - 1)) / self.out,
        );
        (lo, hi)
    }

    /// The outputs whose window contains input `i`: `[⌊i·out/in⌋, ⌈(i+1)·out/in⌉)`.
    fn outputs_containing(&self, f: &mut Body, i: &E, name: &str) -> (E, E) {
        let lo = f.let_(&format!("{name}_first"), i.clone() * self.out / self.size);
        let hi = f.let_(
            &format!("{name}_end"),
            ((i.clone() + 1u32) * self.out + (self.size - 1)) / self.size,
        );
        (lo, hi)
    }
}

/// Adaptive max/average pooling forward, and average backward.
pub(super) fn adaptive_pool2d(
    spec: &AdaptivePool2dSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::AdaptivePool2d(spec.clone());
    let ay = Adaptive::new(spec.in_size[0], spec.out_size[0])?;
    let ax = Adaptive::new(spec.in_size[1], spec.out_size[1])?;
    let input = nth(&op.inputs(), 0, "adaptive_pool2d input")?;
    let output = nth(&op.outputs(), 0, "adaptive_pool2d output")?;
    let items = output.numel() as u64;
    let params = [
        param(&input, Access::Read, Binding::Input(0)),
        param(&output, Access::Write, Binding::Output(0)),
    ];
    let n = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;
    let launch = map_launch(&op.name(), caps, items, &params, |f, mems, item| {
        match (spec.pass, spec.kind) {
            (PoolPass::Forward, kind) => {
                let (plane, oy, ox) = split(f, item.clone(), ay.out, ax.out);
                let (y0, y1) = ay.window(f, &oy, "y");
                let (x0, x1) = ax.window(f, &ox, "x");
                let base = f.let_("base", plane * (ay.size * ax.size));
                let at = |p: E| n.load(mems[0], dtype, base.clone() + p);
                let acc = match kind {
                    // Windows are never empty; start from the first element, strict `>`.
                    PoolKind::Max => f.var("best", at(y0.clone() * ax.size + x0.clone())),
                    PoolKind::Avg => f.var("sum", n.lit(0.0)),
                };
                let (ry, rx) = (y0.clone(), x0.clone());
                f.for_("iy", y0, y1.clone(), 1, |f, iy| {
                    let row = f.let_("row_at", iy * ax.size);
                    f.for_("ix", x0, x1.clone(), 1, |f, ix| {
                        let v = f.let_("v", at(row.clone() + ix));
                        let next = match kind {
                            PoolKind::Max => v.clone().gt(acc.get()).select(v, acc.get()),
                            PoolKind::Avg => acc.get() + v,
                        };
                        f.assign(acc, next);
                    });
                });
                let value = match kind {
                    PoolKind::Max => acc.get(),
                    PoolKind::Avg => acc.get() / ((y1 - ry) * (x1 - rx)).cast(n.ty),
                };
                f.store(mems[1], item, n.narrow(value, dtype));
            }
            (PoolPass::Backward, _) => {
                let (plane, iy, ix) = split(f, item.clone(), ay.size, ax.size);
                let (oy0, oy1) = ay.outputs_containing(f, &iy, "oy");
                let (ox0, ox1) = ax.outputs_containing(f, &ix, "ox");
                let out_base = f.let_("out_base", plane * (ay.out * ax.out));
                let acc = f.var("acc", n.lit(0.0));
                f.for_("oy", oy0, oy1, 1, |f, oy| {
                    let (y0, y1) = ay.window(f, &oy, "y");
                    let rows = f.let_("rows", y1 - y0);
                    let row = f.let_("o_row", out_base.clone() + oy * ax.out);
                    f.for_("ox", ox0, ox1, 1, |f, ox| {
                        let (x0, x1) = ax.window(f, &ox, "x");
                        let count = (rows.clone() * (x1 - x0)).cast(n.ty);
                        let g = n.load(mems[0], dtype, row.clone() + ox);
                        f.assign(acc, acc.get() + g / count);
                    });
                });
                f.store(mems[1], item, n.narrow(acc.get(), dtype));
            }
        }
    })?;
    Ok(Plan::single(launch))
}
