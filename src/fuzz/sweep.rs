//! The exhaustive unary sweep: an f32 unary function of the catalogue run by a device
//! on every f32 bit pattern (or every `stride`-th one, for a sampled sweep), each
//! result against the f64 reference: the worst error as a share of the tolerance
//! table's bound (at most 1 meets it), the largest error in f32 ULPs of the exact
//! value, and NaN/∞ mismatches. The op runs as `Runtime::run` runs it (the catalogue's
//! own kernel, after the device's math expansion); the reference and comparison run
//! on `threads` host threads, a chunk at a time.

use kernelc_ir::ScalarType;
use kernelc_kernels::conformance::error_scales;
use kernelc_kernels::ops::elementwise::{UnaryFn, UnarySpec};
use kernelc_kernels::reference::{reference, round_to};
use kernelc_kernels::spec::OpSpec;
use kernelc_kernels::tolerance::{error_units, tolerance, ulp, OVERFLOWS};
use kernelc_runtime::Runtime;

/// What to sweep: the f32 bit patterns `start, start + stride, …` (`count` of them,
/// wrapping at 2³²), `chunk` per launch.
#[derive(Clone, Copy, Debug)]
pub struct SweepRange {
    pub start: u64,
    pub count: u64,
    pub stride: u64,
    pub chunk: usize,
    pub threads: usize,
}

impl SweepRange {
    /// Every f32 bit pattern.
    pub fn exhaustive(threads: usize) -> SweepRange {
        SweepRange {
            start: 0,
            count: 1 << 32,
            stride: 1,
            chunk: 1 << 24,
            threads,
        }
    }
}

/// One function's sweep on one device.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SweepRow {
    pub func: String,
    pub inputs: u64,
    /// The tolerance table's bound for the row, in ULPs of its unit.
    pub bound_ulps: f64,
    /// The worst error as a share of the bound (≤ 1 meets the table), and its input.
    pub worst: f64,
    pub worst_input: u32,
    /// The largest `|got − exact| / ulp_f32(exact)` over finite results, and its input.
    pub max_ulp: f64,
    pub max_ulp_input: u32,
    /// Inputs past the bound (NaN/∞ mismatches included).
    pub failures: u64,
    /// Inputs where one side is NaN or ±∞ and the other differs.
    pub nonfinite_mismatches: u64,
    /// Inputs where the table accepts any result (outside the range an argument
    /// reduction is exact for, an overflowing intermediate): not in `max_ulp`.
    pub unspecified: u64,
    /// On a device that may flush subnormals (`TargetCaps::keeps_subnormals` false),
    /// subnormal inputs past the bound whose result is within `f(±0)`'s: the input
    /// read as zero. Not in the other columns. (A subnormal result given as 0 is
    /// already within every row's bound.)
    pub flushed: u64,
}

/// The f32 unary functions with an error bound (the exact ones — neg, abs, floor,
/// ceil, round, relu — are held to 0 ULP by the conformance table).
pub const SWEPT: [UnaryFn; 12] = [
    UnaryFn::Sqrt,
    UnaryFn::Rsqrt,
    UnaryFn::Exp,
    UnaryFn::Log,
    UnaryFn::Sin,
    UnaryFn::Cos,
    UnaryFn::Tan,
    UnaryFn::Sigmoid,
    UnaryFn::Tanh,
    UnaryFn::GeluErf,
    UnaryFn::GeluTanh,
    UnaryFn::Silu,
];

fn unary(func: UnaryFn, n: usize) -> OpSpec {
    OpSpec::Unary(UnarySpec {
        func,
        dtype: ScalarType::F32,
        shape: vec![n],
    })
}

/// Sweeps `func` on `rt` over `range`; `tick(done)` after each chunk.
pub fn sweep(
    rt: &Runtime,
    func: UnaryFn,
    range: SweepRange,
    tick: impl Fn(u64),
) -> Result<SweepRow, String> {
    let mut row = SweepRow {
        func: func.name().to_string(),
        bound_ulps: tolerance(&unary(func, 1)).ulps,
        ..SweepRow::default()
    };
    let chunk = range.chunk.max(1) as u64;
    let flushes = !rt.caps().keeps_subnormals;
    let mut done = 0u64;
    while done < range.count {
        let n = (range.count - done).min(chunk) as usize;
        let xs = chunk_inputs(&range, done, n);
        let got = run_chunk(rt, func, &xs)?;
        if got.len() != xs.len() {
            return Err(format!("{} results for {} inputs", got.len(), xs.len()));
        }
        merge(
            &mut row,
            check_chunk(func, &xs, &got, flushes, range.threads)?,
        );
        done += n as u64;
        tick(done);
    }
    row.inputs = done;
    Ok(row)
}

/// The `n` inputs of `range` from its `done`-th on, filled on `range.threads`
/// threads (with the device's time, building them on one thread dominated a sweep).
fn chunk_inputs(range: &SweepRange, done: u64, n: usize) -> Vec<f32> {
    let mut xs = vec![0.0f32; n];
    let piece = n.div_ceil(range.threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (p, part) in xs.chunks_mut(piece).enumerate() {
            let first = done + (p * piece) as u64;
            s.spawn(move || {
                for (i, x) in part.iter_mut().enumerate() {
                    let index = first + i as u64;
                    *x = f32::from_bits((range.start + index * range.stride) as u32);
                }
            });
        }
    });
    xs
}

/// The device's results for the inputs `xs`.
fn run_chunk(rt: &Runtime, func: UnaryFn, xs: &[f32]) -> Result<Vec<f32>, String> {
    let x = rt.tensor(&[xs.len()], xs).map_err(|e| e.to_string())?;
    let out = rt
        .run(&unary(func, xs.len()), &[&x])
        .map_err(|e| e.to_string())?;
    let y = out.first().ok_or("no output")?;
    y.to_vec::<f32>().map_err(|e| e.to_string())
}

/// Checks a chunk on `threads` threads, each a contiguous piece.
fn check_chunk(
    func: UnaryFn,
    xs: &[f32],
    got: &[f32],
    flushes: bool,
    threads: usize,
) -> Result<SweepRow, String> {
    let piece = xs.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = xs
            .chunks(piece)
            .zip(got.chunks(piece))
            .map(|(b, g)| s.spawn(move || check_piece(func, b, g, flushes)))
            .collect();
        let mut row = SweepRow::default();
        for h in handles {
            let piece = h.join().map_err(|_| "a checking thread panicked")??;
            merge(&mut row, piece);
        }
        Ok(row)
    })
}

/// Per input: the exact value and the error scale of the row's bound.
fn exact_and_scales(func: UnaryFn, xs: &[f32]) -> Result<(Vec<f64>, Vec<f64>), String> {
    let spec = unary(func, xs.len());
    let values: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
    let exact = reference(&spec, &[&values])
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no reference output")?;
    let scales = error_scales(&spec, std::slice::from_ref(&values))
        .map_err(|e| e.to_string())?
        .and_then(|s| s.into_iter().next())
        .unwrap_or_else(|| vec![0.0; xs.len()]);
    Ok((exact, scales))
}

fn check_piece(func: UnaryFn, xs: &[f32], got: &[f32], flushes: bool) -> Result<SweepRow, String> {
    let (exact, scales) = exact_and_scales(func, xs)?;
    let (zero_exact, zero_scales) = exact_and_scales(func, &[0.0, -0.0])?;
    let tol = tolerance(&unary(func, 1));
    // `error_units` counts the row's units past the output rounding; the row allows
    // `ulps` of them.
    let bound = tol.ulps.max(1.0);
    let share_of = |g: f64, w: f64, s: f64| {
        error_units(&tol, ScalarType::F32, g, round_to(ScalarType::F32, w), s) / bound
    };
    // Within the bound once the input is read as zero (see `SweepRow::flushed`).
    let flushed = |x: f32, g: f64| {
        x.is_subnormal() && (0..2).any(|z| share_of(g, zero_exact[z], zero_scales[z]) <= 1.0)
    };
    let mut row = SweepRow::default();
    for (i, (&g, &w)) in got.iter().zip(&exact).enumerate() {
        let g = f64::from(g);
        let s = scales[i];
        if s == OVERFLOWS {
            row.unspecified += 1;
            continue;
        }
        let share = share_of(g, w, s);
        if share > 1.0 && flushes && flushed(xs[i], g) {
            row.flushed += 1;
            continue;
        }
        if share > row.worst {
            row.worst = share;
            row.worst_input = xs[i].to_bits();
        }
        if share > 1.0 {
            row.failures += 1;
        }
        if g.is_finite() && w.is_finite() {
            let e = (g - w).abs() / ulp(ScalarType::F32, w);
            if e > row.max_ulp {
                row.max_ulp = e;
                row.max_ulp_input = xs[i].to_bits();
            }
        } else if !(g.is_nan() && w.is_nan()) && g != round_to(ScalarType::F32, w) {
            row.nonfinite_mismatches += 1;
        }
    }
    Ok(row)
}

fn merge(into: &mut SweepRow, part: SweepRow) {
    if part.worst > into.worst {
        into.worst = part.worst;
        into.worst_input = part.worst_input;
    }
    if part.max_ulp > into.max_ulp {
        into.max_ulp = part.max_ulp;
        into.max_ulp_input = part.max_ulp_input;
    }
    into.failures += part.failures;
    into.nonfinite_mismatches += part.nonfinite_mismatches;
    into.unspecified += part.unspecified;
    into.flushed += part.flushed;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results within a few ULPs meet `exp`'s bound (4 ULP); results off by 2^-10
    /// relative (thousands of ULPs) are past it, each counted, the worst share far
    /// above 1.
    #[test]
    fn a_result_is_held_to_its_rows_bound() {
        let xs: Vec<f32> = (0..64u32).map(|i| 1.0f32 + i as f32 / 16.0).collect();
        let exact: Vec<f32> = xs.iter().map(|x| x.exp()).collect();
        let close = check_piece(UnaryFn::Exp, &xs, &exact, false).expect("checked");
        assert_eq!(close.failures, 0);
        assert!(close.worst <= 1.0 && close.max_ulp < 2.0, "{close:?}");
        let off: Vec<f32> = exact.iter().map(|&y| y * (1.0 + 1.0 / 1024.0)).collect();
        let wrong = check_piece(UnaryFn::Exp, &xs, &off, false).expect("checked");
        assert_eq!(wrong.failures, 64);
        assert!(wrong.worst > 100.0 && wrong.max_ulp > 1000.0, "{wrong:?}");
        // Three ULPs on a 4-ULP row: within, at a share under 1.
        let three: Vec<f32> = exact
            .iter()
            .map(|&y| f32::from_bits(y.to_bits() + 3))
            .collect();
        let near = check_piece(UnaryFn::Exp, &xs, &three, false).expect("checked");
        assert_eq!(near.failures, 0, "{near:?}");
        assert!(near.worst > 0.0 && near.worst < 1.0, "{near:?}");
    }

    /// On a device that may flush subnormals, a subnormal input read as zero
    /// (`sqrt(−tiny) = −0`, `log(tiny) = −∞`) is counted as flushed, not a failure;
    /// on one that keeps them, it fails. A subnormal result given as 0 is within the
    /// table anyway; a normal one off by far is a failure either way.
    #[test]
    fn flushed_subnormals_are_counted_apart_where_the_device_may_flush() {
        let tiny = f32::from_bits(1);
        let (xs, got) = (vec![-tiny, tiny], vec![-0.0f32, 0.0]);
        for (func, got) in [
            (UnaryFn::Sqrt, got),
            (UnaryFn::Log, vec![f32::NEG_INFINITY; 2]),
        ] {
            let keeps = check_piece(func, &xs, &got, false).expect("checked");
            assert_eq!(
                (keeps.failures, keeps.flushed),
                (2, 0),
                "{func:?} {keeps:?}"
            );
            let flushes = check_piece(func, &xs, &got, true).expect("checked");
            assert_eq!(
                (flushes.failures, flushes.flushed),
                (0, 2),
                "{func:?} {flushes:?}"
            );
        }
        // exp(−100) is subnormal: 0 is within the bound; exp(−80) is normal: 0 is
        // wrong, flushing or not.
        for flushes in [false, true] {
            let row = check_piece(UnaryFn::Exp, &[-100.0, -80.0], &[0.0, 0.0], flushes);
            let row = row.expect("checked");
            assert_eq!((row.failures, row.flushed), (1, 0), "{row:?}");
        }
    }
}
