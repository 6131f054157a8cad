//! The device's measured roofline for `kernelc bench`: streaming probes (the memory
//! roof, GB/s) and an FMA probe (the f32 compute roof, GFLOP/s), all IR kernels run
//! through the same runtime and device path as the cases, so a case's rate reads as a
//! share of what this device reaches on this path, not of a data-sheet number.
//!
//! Each probe is timed like a case: one warm-up launch, then the median of `runs`
//! synchronised launches. The memory roof is the better of two STREAM-style probes in
//! 16-byte vectors: copy (`b = a`, one read per write) and add (`c = a + b`, two reads
//! per write; many memory systems read faster than they write, so a read-heavy op
//! could otherwise beat a copy-only roof), and the catalogue's own tuned `binary
//! add` over the same buffers (a roof must not sit below what an op reaches). The
//! FMA probe runs eight independent 4-lane
//! FMA chains per invocation (enough to cover the FMA latency of a GPU lane or a CPU
//! core), with its grid grown until one launch takes ≥ 20 ms.

use super::CliError;
use kernelc::ir::builder::*;
use kernelc::ir::{Access, Kernel, Scalar, ScalarType::F32};
use kernelc::runtime::{KernelArg, LoadedKernel, Runtime, View};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The two roofs of one device.
#[derive(Serialize, Debug, Clone, Copy)]
pub struct Roofline {
    /// The memory roof: the better of the two streaming probes, GB/s.
    pub memory_gb_per_s: f64,
    /// The FMA probe's f32 rate (an FMA counts as two FLOPs), over 1e9.
    pub fma_gflop_per_s: f64,
    /// The copy probe's rate: bytes read plus bytes written per second, over 1e9.
    pub copy_gb_per_s: f64,
    /// The add probe's rate, likewise.
    pub add_gb_per_s: f64,
    /// The catalogue's own f32 `binary add` over the same buffers, likewise: the
    /// tuned elementwise kernel every op of its family runs.
    pub catalogue_add_gb_per_s: f64,
    /// Bytes of each of the streaming probes' buffers.
    pub probe_buffer_bytes: u64,
}

/// Where a case stands against the roofline.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// FLOPs per byte, when the case gives both.
    pub intensity: Option<f64>,
    /// The roof at the case's intensity, GFLOP/s (both given) or GB/s (bytes only)
    /// or GFLOP/s (FLOPs only).
    pub attainable: f64,
    /// The case's rate over `attainable`.
    pub share: f64,
    /// Which roof bounds the case.
    pub bound: Bound,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Memory,
    Compute,
}

impl Roofline {
    /// The ridge point: the intensity (FLOP/byte) where the two roofs meet.
    pub fn ridge(&self) -> f64 {
        self.fma_gflop_per_s / self.memory_gb_per_s
    }

    /// The roof at `intensity` FLOP/byte, in GFLOP/s.
    pub fn attainable_gflop_per_s(&self, intensity: f64) -> f64 {
        self.fma_gflop_per_s.min(intensity * self.memory_gb_per_s)
    }

    /// A case's share of the roof: against `min(peak, intensity × bandwidth)` when it
    /// gives both bytes and FLOPs, else against the one roof its rate is measured in.
    /// `None` when it gives neither.
    pub fn share(&self, bytes: Option<f64>, flops: Option<f64>, seconds: f64) -> Option<Share> {
        let memory_or_compute = |intensity: f64| {
            if intensity < self.ridge() {
                Bound::Memory
            } else {
                Bound::Compute
            }
        };
        match (bytes, flops) {
            (Some(b), Some(f)) if b > 0.0 => {
                let intensity = f / b;
                let attainable = self.attainable_gflop_per_s(intensity);
                Some(Share {
                    intensity: Some(intensity),
                    attainable,
                    share: f / seconds / 1e9 / attainable,
                    bound: memory_or_compute(intensity),
                })
            }
            (Some(b), _) => Some(Share {
                intensity: None,
                attainable: self.memory_gb_per_s,
                share: b / seconds / 1e9 / self.memory_gb_per_s,
                bound: Bound::Memory,
            }),
            (None, Some(f)) => Some(Share {
                intensity: None,
                attainable: self.fma_gflop_per_s,
                share: f / seconds / 1e9 / self.fma_gflop_per_s,
                bound: Bound::Compute,
            }),
            (None, None) => None,
        }
    }
}

/// Runs the probes on `rt`'s device: the streaming ones over buffers of about
/// `buffer_bytes` each, `runs` timed launches per probe.
pub fn measure(rt: &Runtime, buffer_bytes: u64, runs: usize) -> Result<Roofline, CliError> {
    let (copy_gb_per_s, probe_buffer_bytes) = stream_probe(rt, Stream::Copy, buffer_bytes, runs)?;
    let (add_gb_per_s, _) = stream_probe(rt, Stream::Add, buffer_bytes, runs)?;
    let catalogue_add_gb_per_s = catalogue_add_probe(rt, probe_buffer_bytes, runs)?;
    let fma_gflop_per_s = fma_probe(rt, runs)?;
    Ok(Roofline {
        memory_gb_per_s: copy_gb_per_s.max(add_gb_per_s).max(catalogue_add_gb_per_s),
        fma_gflop_per_s,
        copy_gb_per_s,
        add_gb_per_s,
        catalogue_add_gb_per_s,
        probe_buffer_bytes,
    })
}

/// A streaming probe: what it computes per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// `b = a`.
    Copy,
    /// `c = a + b`.
    Add,
}

impl Stream {
    fn inputs(self) -> usize {
        match self {
            Stream::Copy => 1,
            Stream::Add => 2,
        }
    }
}

/// Invocations per probe workgroup: the device's preferred count (one on a CPU, whose
/// workgroups are its units of parallel work), at most 256.
fn probe_workgroup(rt: &Runtime) -> u32 {
    rt.caps().preferred_invocations.clamp(1, 256)
}

/// Workgroups one launch may have along x.
fn max_workgroups(rt: &Runtime) -> u32 {
    rt.caps().max_workgroups_per_dimension.min(65_535)
}

/// Vectors one loop trip of a streaming probe moves: all its loads are issued before
/// its stores, so each invocation keeps several loads in flight.
const UNROLL: u32 = 4;

/// How a streaming probe's invocations walk the buffers: GPUs interleave invocations
/// (neighbouring lanes touch neighbouring vectors), a CPU gives each invocation one
/// contiguous chunk.
struct CopyShape {
    workgroup: u32,
    groups: u32,
    /// Loop trips per invocation, each of `UNROLL` vectors.
    iterations: u32,
    interleaved: bool,
}

impl CopyShape {
    fn of(rt: &Runtime, buffer_bytes: u64) -> Result<CopyShape, CliError> {
        let vectors = buffer_bytes / 16;
        let workgroup = probe_workgroup(rt);
        let interleaved = workgroup > 1;
        // A CPU needs a few chunks per core; a GPU many resident workgroups.
        let wanted_groups: u64 = if interleaved { 16_384 } else { 256 };
        let groups = (vectors / u64::from(workgroup * UNROLL))
            .min(wanted_groups)
            .min(u64::from(max_workgroups(rt)));
        if groups == 0 {
            return Err(format!(
                "--probe-mib: {buffer_bytes} bytes are too few for a memory probe"
            )
            .into());
        }
        let iterations = vectors / (groups * u64::from(workgroup * UNROLL));
        let budget = rt.caps().max_loop_iterations.unwrap_or(u64::MAX);
        if iterations > budget {
            return Err(format!(
                "--probe-mib: {iterations} probe iterations per invocation exceed this device's loop budget ({budget}); use a smaller probe"
            )
            .into());
        }
        Ok(CopyShape {
            workgroup,
            groups: groups as u32,
            iterations: iterations as u32,
            interleaved,
        })
    }

    fn elements(&self) -> u64 {
        let vectors = u64::from(self.workgroup * UNROLL) * u64::from(self.groups);
        4 * vectors * u64::from(self.iterations)
    }

    fn kernel(&self, stream: Stream) -> Result<Kernel, CliError> {
        let n = self.elements();
        let invocations = self.workgroup * self.groups;
        // Vector `u` of trip `j`: `gid·per_invocation + j·per_trip + u·per_unroll`.
        let (per_invocation, per_trip, per_unroll) = if self.interleaved {
            (1, invocations * UNROLL, invocations)
        } else {
            (self.iterations * UNROLL, UNROLL, 1)
        };
        let mut k = KernelBuilder::new("roofline_stream", [self.workgroup, 1, 1]);
        let a = k.buffer("a", F32, n, Access::Read);
        let b = (stream == Stream::Add).then(|| k.buffer("b", F32, n, Access::Read));
        let out = k.buffer("out", F32, n, Access::Write);
        Ok(k.build(|f| {
            let gid = f.let_("gid", global_id(0));
            let first = f.let_("first", gid.clone() * per_invocation);
            f.for_("j", 0u32, self.iterations, 1, |f, j| {
                let trip = f.let_("trip", first.clone() + j * per_trip);
                let mut moved = Vec::with_capacity(UNROLL as usize);
                for u in 0..UNROLL {
                    let i = f.let_(&format!("i{u}"), (trip.clone() + u * per_unroll) * 4u32);
                    let value = match b {
                        Some(b) => a.load(i.clone(), 4) + b.load(i.clone(), 4),
                        None => a.load(i.clone(), 4),
                    };
                    moved.push((i, f.let_(&format!("v{u}"), value)));
                }
                for (i, value) in moved {
                    f.store(out, i, value);
                }
            });
        })?)
    }
}

/// The catalogue's f32 `binary add` over buffers of `buffer_bytes`, in GB/s (two
/// reads and a write per element), timed as a case is.
fn catalogue_add_probe(rt: &Runtime, buffer_bytes: u64, runs: usize) -> Result<f64, CliError> {
    let n = usize::try_from(buffer_bytes / 4).map_err(|_| "probe too large")?;
    let spec: kernelc::kernels::spec::OpSpec = serde_json::from_value(serde_json::json!({
        "op": "binary", "func": "add", "dtype": "f32", "lhs": [n], "rhs": [n]
    }))?;
    let a = rt.zeros(&[n], F32)?;
    let b = rt.zeros(&[n], F32)?;
    let time_one = || -> Result<Duration, CliError> {
        let started = Instant::now();
        let out = rt.run(&spec, &[&a, &b])?;
        rt.synchronize()?;
        drop(out);
        Ok(started.elapsed())
    };
    time_one()?;
    let mut samples = (0..runs.max(1))
        .map(|_| time_one())
        .collect::<Result<Vec<Duration>, CliError>>()?;
    samples.sort();
    let seconds = samples[samples.len() / 2].as_secs_f64();
    Ok(3.0 * buffer_bytes as f64 / seconds / 1e9)
}

/// A streaming probe's GB/s and the bytes of each buffer it used.
fn stream_probe(
    rt: &Runtime,
    stream: Stream,
    buffer_bytes: u64,
    runs: usize,
) -> Result<(f64, u64), CliError> {
    let shape = CopyShape::of(rt, buffer_bytes)?;
    let kernel = rt.load_kernel(&shape.kernel(stream)?)?;
    let n = shape.elements();
    let bytes = n * 4;
    let view = || -> Result<View, CliError> {
        let len = usize::try_from(bytes).map_err(|_| format!("probe of {bytes} bytes"))?;
        let buffer = rt
            .alloc_buffer(len)
            .map_err(|e| format!("memory probe: cannot allocate a buffer of {bytes} bytes: {e}"))?;
        Ok(buffer.view(0, F32, &[n as usize])?)
    };
    let views = (0..=stream.inputs())
        .map(|_| view())
        .collect::<Result<Vec<View>, CliError>>()?;
    let args: Vec<KernelArg<'_>> = views.iter().map(KernelArg::View).collect();
    let grid = [shape.groups, 1, 1];
    let seconds = median_launch(rt, &kernel, grid, &args, runs)?.as_secs_f64();
    let moved = (stream.inputs() + 1) as f64 * bytes as f64;
    Ok((moved / seconds / 1e9, bytes))
}

/// Loop trips of the FMA probe; each runs `CHAINS` 4-lane FMAs.
const FMA_ITERATIONS: u32 = 1024;
const CHAINS: usize = 8;

fn fma_kernel(workgroup: u32, groups: u32) -> Result<Kernel, CliError> {
    let invocations = u64::from(workgroup) * u64::from(groups);
    let mut k = KernelBuilder::new("roofline_fma", [workgroup, 1, 1]);
    let out = k.buffer("out", F32, invocations, Access::Write);
    let a = k.scalar("a", F32);
    let b = k.scalar("b", F32);
    Ok(k.build(|f| {
        let gid = f.let_("gid", global_id(0));
        let a4 = f.let_("a4", a.splat(4));
        let b4 = f.let_("b4", b.splat(4));
        let seed = f.let_("seed", gid.clone().cast(F32) * 1e-9f32);
        let chains: Vec<Var> = (0..CHAINS)
            .map(|c| f.var(&format!("c{c}"), (seed.clone() + c as f32).splat(4)))
            .collect();
        f.for_("j", 0u32, FMA_ITERATIONS, 1, |f, _| {
            for &c in &chains {
                f.assign(c, c.get().fma(a4.clone(), b4.clone()));
            }
        });
        let total = chains
            .iter()
            .map(|c| c.get())
            .reduce(|x, y| x + y)
            .unwrap_or_else(|| seed.clone().splat(4));
        let lanes = (0..4u8).map(|l| total.clone().lane(l)).reduce(|x, y| x + y);
        f.store(out, gid, lanes.unwrap_or(seed));
    })?)
}

/// The FMA probe's GFLOP/s: the grid grows (×4) until one launch takes ≥ 20 ms or
/// reaches the device's grid limit, then `runs` launches are timed.
fn fma_probe(rt: &Runtime, runs: usize) -> Result<f64, CliError> {
    let workgroup = probe_workgroup(rt);
    let mut groups = if workgroup > 1 { 256 } else { 16 };
    // a·x + b with |a| < 1 keeps every chain bounded (no overflow, no subnormals).
    let scalars = [
        KernelArg::Scalar(Scalar::f32(0.999_9)),
        KernelArg::Scalar(Scalar::f32(1e-4)),
    ];
    loop {
        let kernel = rt.load_kernel(&fma_kernel(workgroup, groups)?)?;
        let out = rt
            .alloc_buffer(4 * (workgroup * groups) as usize)
            .map_err(|e| format!("FMA probe: {e}"))?
            .view(0, F32, &[(workgroup * groups) as usize])?;
        let args = [KernelArg::View(&out), scalars[0], scalars[1]];
        let grid = [groups, 1, 1];
        let trial = median_launch(rt, &kernel, grid, &args, 1)?;
        let bigger = groups.saturating_mul(4);
        if trial >= Duration::from_millis(20) || bigger > max_workgroups(rt) {
            let seconds = median_launch(rt, &kernel, grid, &args, runs)?.as_secs_f64();
            let flops = f64::from(workgroup)
                * f64::from(groups)
                * f64::from(FMA_ITERATIONS)
                * (CHAINS * 4 * 2) as f64;
            return Ok(flops / seconds / 1e9);
        }
        groups = bigger;
    }
}

/// One warm-up launch, then the median of `runs` synchronised launches.
fn median_launch(
    rt: &Runtime,
    kernel: &LoadedKernel,
    grid: [u32; 3],
    args: &[KernelArg<'_>],
    runs: usize,
) -> Result<Duration, CliError> {
    rt.launch(kernel, grid, args)?;
    rt.synchronize()?;
    let mut samples = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            rt.launch(kernel, grid, args)?;
            rt.synchronize()?;
            Ok(started.elapsed())
        })
        .collect::<Result<Vec<Duration>, CliError>>()?;
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// One case on the roofline plot.
pub struct Point<'a> {
    pub name: &'a str,
    /// FLOPs per byte.
    pub intensity: f64,
    pub gflop_per_s: f64,
}

/// Draws the roofline (log-log: FLOP/byte against GFLOP/s) with `points` on it as an
/// SVG file at `path`.
pub fn plot(
    path: &std::path::Path,
    title: &str,
    roof: &Roofline,
    points: &[Point<'_>],
) -> Result<(), CliError> {
    use plotters::prelude::*;
    let failed = |e: &dyn std::fmt::Display| format!("--plot {}: {e}", path.display());
    let intensities = points.iter().map(|p| p.intensity).chain([roof.ridge()]);
    let (lo, hi) = intensities.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x0, x1) = ((lo / 4.0).min(0.05), (hi * 4.0).max(64.0));
    let lowest = points
        .iter()
        .map(|p| p.gflop_per_s)
        .fold(roof.attainable_gflop_per_s(x0), f64::min);
    let (y0, y1) = (lowest / 4.0, roof.fma_gflop_per_s * 3.0);

    let root = SVGBackend::new(path, (960, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("GFLOP/s")
        .draw()
        .map_err(|e| failed(&e))?;
    let roof_line = [x0, roof.ridge(), x1].map(|x| (x, roof.attainable_gflop_per_s(x)));
    let label = format!(
        "measured roofline: memory {:.1} GB/s, f32 FMA {:.1} GFLOP/s",
        roof.memory_gb_per_s, roof.fma_gflop_per_s
    );
    chart
        .draw_series(LineSeries::new(roof_line, BLUE.stroke_width(2)))
        .map_err(|e| failed(&e))?
        .label(label)
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(points.iter().map(|p| {
            EmptyElement::at((p.intensity, p.gflop_per_s))
                + Circle::new((0, 0), 4, RED.filled())
                + Text::new(p.name.to_string(), (6, -14), ("sans-serif", 13))
        }))
        .map_err(|e| failed(&e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOF: Roofline = Roofline {
        memory_gb_per_s: 100.0,
        fma_gflop_per_s: 1000.0,
        copy_gb_per_s: 90.0,
        add_gb_per_s: 100.0,
        catalogue_add_gb_per_s: 95.0,
        probe_buffer_bytes: 0,
    };

    #[test]
    fn a_case_is_measured_against_the_roof_at_its_intensity() {
        assert_eq!(ROOF.ridge(), 10.0);
        // 1 FLOP/byte, 1e9 bytes in 20 ms: 50 GFLOP/s of an attainable 100.
        let low = ROOF.share(Some(1e9), Some(1e9), 0.02).expect("share");
        assert_eq!(low.intensity, Some(1.0));
        assert_eq!((low.attainable, low.bound), (100.0, Bound::Memory));
        assert!((low.share - 0.5).abs() < 1e-12);
        // 100 FLOP/byte: under the compute roof.
        let high = ROOF.share(Some(1e9), Some(1e11), 1.0).expect("share");
        assert_eq!((high.attainable, high.bound), (1000.0, Bound::Compute));
        assert!((high.share - 0.1).abs() < 1e-12);
    }

    #[test]
    fn a_case_with_one_measure_is_held_to_that_roof() {
        let bytes = ROOF.share(Some(50e9), None, 1.0).expect("share");
        assert_eq!((bytes.intensity, bytes.bound), (None, Bound::Memory));
        assert!((bytes.share - 0.5).abs() < 1e-12);
        let flops = ROOF.share(None, Some(250e9), 1.0).expect("share");
        assert_eq!(flops.bound, Bound::Compute);
        assert!((flops.share - 0.25).abs() < 1e-12);
        assert_eq!(ROOF.share(None, None, 1.0), None);
    }
}
