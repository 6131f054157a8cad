//! f64 references of the pooling family (formulas in [`super`]).

use super::spec::{AdaptivePool2dSpec, Pool2dBackwardSpec, Pool2dSpec, PoolKind, PoolPass};
use crate::reference::resolve_index;
use crate::spec::Window2d;

/// In-image window taps of output `(oy, ox)`: `(iy, ix)` pairs, and the divisor count.
fn window_taps(
    win: &Window2d,
    oy: usize,
    ox: usize,
    h: usize,
    w: usize,
    include_pad: bool,
) -> (Vec<(usize, usize)>, usize) {
    let mut taps = Vec::new();
    for ty in 0..win.kernel[0] {
        for tx in 0..win.kernel[1] {
            if let (Some(iy), Some(ix)) = (win.tap(0, oy, ty, h), win.tap(1, ox, tx, w)) {
                taps.push((iy, ix));
            }
        }
    }
    let count = if include_pad {
        win.kernel[0] * win.kernel[1]
    } else {
        taps.len()
    };
    (taps, count)
}

pub(super) fn pool2d(s: &Pool2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let [oh, ow] = s.out_size();
    let (h, w) = (s.image.height, s.image.width);
    let planes = s.image.batch * s.image.channels;
    let mut y = vec![0.0; planes * oh * ow];
    let mut idx = vec![0.0; planes * oh * ow];
    for p in 0..planes {
        let plane = &x[p * h * w..(p + 1) * h * w];
        for oy in 0..oh {
            for ox in 0..ow {
                let o = (p * oh + oy) * ow + ox;
                let (taps, count) = window_taps(&s.window, oy, ox, h, w, s.count_include_pad);
                match s.kind {
                    PoolKind::Max => {
                        let mut best = f64::NEG_INFINITY;
                        let mut arg = 0usize;
                        let mut first = true;
                        for &(iy, ix) in &taps {
                            let v = plane[iy * w + ix];
                            if first || v > best {
                                best = v;
                                arg = iy * w + ix;
                                first = false;
                            }
                        }
                        y[o] = best;
                        idx[o] = arg as f64;
                    }
                    PoolKind::Avg => {
                        let sum: f64 = taps.iter().map(|&(iy, ix)| plane[iy * w + ix]).sum();
                        y[o] = sum / count as f64;
                    }
                }
            }
        }
    }
    if s.indices.is_some() {
        vec![y, idx]
    } else {
        vec![y]
    }
}

pub(super) fn pool2d_backward(s: &Pool2dBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let dy = i[0];
    let (h, w, oh, ow) = (s.image.height, s.image.width, s.out_height, s.out_width);
    let planes = s.image.batch * s.image.channels;
    let mut dx = if s.accumulate {
        i[if s.kind == PoolKind::Max { 2 } else { 1 }].to_vec()
    } else {
        vec![0.0; planes * h * w]
    };
    for p in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let o = (p * oh + oy) * ow + ox;
                match s.kind {
                    // With a window, an index routes only into its own output's window
                    // (where the forward can have put it); others are skipped.
                    PoolKind::Max => {
                        let Some(r) = resolve_index(i[1][o], h * w, false) else {
                            continue;
                        };
                        let in_window = s.window.as_ref().is_none_or(|win| {
                            window_taps(win, oy, ox, h, w, true)
                                .0
                                .contains(&(r / w, r % w))
                        });
                        if in_window {
                            dx[p * h * w + r] += dy[o];
                        }
                    }
                    PoolKind::Avg => {
                        let Some(win) = &s.window else { continue };
                        let (taps, count) = window_taps(win, oy, ox, h, w, s.count_include_pad);
                        for (iy, ix) in taps {
                            dx[p * h * w + iy * w + ix] += dy[o] / count as f64;
                        }
                    }
                }
            }
        }
    }
    vec![dx]
}

/// The adaptive window `[⌊o·in/out⌋, ⌈(o+1)·in/out⌉)` along one dimension.
pub fn adaptive_range(o: usize, input: usize, output: usize) -> std::ops::Range<usize> {
    let start = o * input / output;
    let end = ((o + 1) * input).div_ceil(output);
    start..end
}

pub(super) fn adaptive_pool2d(s: &AdaptivePool2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let [h, w] = s.in_size;
    let [oh, ow] = s.out_size;
    let planes = s.batch * s.channels;
    let mut out = match s.pass {
        PoolPass::Forward => vec![0.0; planes * oh * ow],
        PoolPass::Backward => vec![0.0; planes * h * w],
    };
    for p in 0..planes {
        for oy in 0..oh {
            let rows = adaptive_range(oy, h, oh);
            for ox in 0..ow {
                let cols = adaptive_range(ox, w, ow);
                let o = (p * oh + oy) * ow + ox;
                let count = (rows.len() * cols.len()) as f64;
                match (s.pass, s.kind) {
                    (PoolPass::Forward, PoolKind::Avg) => {
                        let mut sum = 0.0;
                        for iy in rows.clone() {
                            for ix in cols.clone() {
                                sum += i[0][(p * h + iy) * w + ix];
                            }
                        }
                        out[o] = sum / count;
                    }
                    (PoolPass::Forward, PoolKind::Max) => {
                        let mut best = f64::NEG_INFINITY;
                        let mut first = true;
                        for iy in rows.clone() {
                            for ix in cols.clone() {
                                let v = i[0][(p * h + iy) * w + ix];
                                if first || v > best {
                                    best = v;
                                    first = false;
                                }
                            }
                        }
                        out[o] = best;
                    }
                    (PoolPass::Backward, _) => {
                        for iy in rows.clone() {
                            for ix in cols.clone() {
                                out[(p * h + iy) * w + ix] += i[0][o] / count;
                            }
                        }
                    }
                }
            }
        }
    }
    vec![out]
}
