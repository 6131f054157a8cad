//! Convolution, im2col/col2im and pooling on NCHW tensors.
//!
//! With window `(kh, kw)`, stride `(sh, sw)`, padding `(ph, pw)`, output position
//! `(oy, ox)` reads input `(iy, ix) = (oy·sh − ph + ky, ox·sw − pw + kx)`; positions
//! outside the image are zero (convolution, im2col) or skipped (pooling, col2im).
//!
//! ```text
//! conv2d:          out[n,k,oy,ox] = Σ_{c,ky,kx} x[n,c,iy,ix]·w[k,c,ky,kx] + bias[k]
//! backward_data:   dx[n,c,iy,ix]  = Σ_{k,oy,ox,ky,kx: iy,ix as above} dy[n,k,oy,ox]·w[k,c,ky,kx]
//! backward_filter: dw[k,c,ky,kx]  = Σ_{n,oy,ox} dy[n,k,oy,ox]·x[n,c,iy,ix]
//! im2col:          cols[n, (c·kh + ky)·kw + kx, oy·OW + ox] = x[n,c,iy,ix]
//! col2im:          x[n,c,iy,ix] (+)= Σ cols[…] over every (ky,kx,oy,ox) that reads (iy,ix)
//! max pool:        y = max_{window ∩ image} x (first maximum wins), index = iy·W + ix
//! avg pool:        y = Σ_{window ∩ image} x / (count_include_pad ? kh·kw : |window ∩ image|)
//! adaptive:        rows [⌊o·H_in/H_out⌋, ⌈(o+1)·H_in/H_out⌉), columns likewise; avg or max
//! ```
//!
//! Pooling backward: max routes `dy` to the recorded index; average spreads `dy/count`
//! over the window. Both add up overlaps.

use super::resolve_index;
use crate::spec::{
    AdaptivePool2dSpec, Col2imSpec, Conv2dSpec, ConvPass, Im2colSpec, Pool2dBackwardSpec,
    Pool2dSpec, PoolKind, PoolPass, Window2d,
};

/// The input coordinate read by output `o` at kernel tap `t` along dimension `d`, or
/// `None` in the padding.
fn tap(w: &Window2d, d: usize, o: usize, t: usize, size: usize) -> Option<usize> {
    let pos = (o * w.stride[d] + t) as i64 - w.padding[d] as i64;
    if pos >= 0 && (pos as usize) < size {
        Some(pos as usize)
    } else {
        None
    }
}

pub(crate) fn conv2d(s: &Conv2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let [oh, ow] = s.out_size();
    let [kh, kw] = s.window.kernel;
    let (n, c, k, h, w) = (s.batch, s.in_channels, s.out_channels, s.height, s.width);
    let xi = |ni: usize, ci: usize, y: usize, x: usize| ((ni * c + ci) * h + y) * w + x;
    let yi = |ni: usize, ki: usize, y: usize, x: usize| ((ni * k + ki) * oh + y) * ow + x;
    let wi = |ki: usize, ci: usize, y: usize, x: usize| ((ki * c + ci) * kh + y) * kw + x;
    // Visits every (input, output, weight) index triple connected by the convolution.
    let visit = |f: &mut dyn FnMut(usize, usize, usize)| {
        for ni in 0..n {
            for ki in 0..k {
                for oy in 0..oh {
                    for ox in 0..ow {
                        for ci in 0..c {
                            for ty in 0..kh {
                                let Some(iy) = tap(&s.window, 0, oy, ty, h) else {
                                    continue;
                                };
                                for tx in 0..kw {
                                    let Some(ix) = tap(&s.window, 1, ox, tx, w) else {
                                        continue;
                                    };
                                    f(xi(ni, ci, iy, ix), yi(ni, ki, oy, ox), wi(ki, ci, ty, tx));
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    match s.pass {
        ConvPass::Forward => {
            let (x, wt) = (i[0], i[1]);
            let mut out = vec![0.0; n * k * oh * ow];
            visit(&mut |a, o, b| out[o] += x[a] * wt[b]);
            if s.bias {
                let bias = i[2];
                for (idx, v) in out.iter_mut().enumerate() {
                    *v += bias[(idx / (oh * ow)) % k];
                }
            }
            vec![out]
        }
        ConvPass::BackwardData => {
            let (dy, wt) = (i[0], i[1]);
            let mut dx = vec![0.0; n * c * h * w];
            visit(&mut |a, o, b| dx[a] += dy[o] * wt[b]);
            vec![dx]
        }
        ConvPass::BackwardFilter => {
            let (x, dy) = (i[0], i[1]);
            let mut dw = vec![0.0; k * c * kh * kw];
            visit(&mut |a, o, b| dw[b] += dy[o] * x[a]);
            vec![dw]
        }
    }
}

/// Calls `f(image_index, column_index)` for every im2col entry that lies inside the
/// image (entries in the padding are skipped).
fn patches(
    batch: usize,
    channels: usize,
    h: usize,
    w: usize,
    win: &Window2d,
    mut f: impl FnMut(usize, usize),
) {
    let Some([oh, ow]) = win.out_size([h, w]) else {
        return;
    };
    let [kh, kw] = win.kernel;
    let rows = channels * kh * kw;
    for n in 0..batch {
        for c in 0..channels {
            for ty in 0..kh {
                for tx in 0..kw {
                    let row = (c * kh + ty) * kw + tx;
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let col = ((n * rows + row) * oh + oy) * ow + ox;
                            if let (Some(iy), Some(ix)) =
                                (tap(win, 0, oy, ty, h), tap(win, 1, ox, tx, w))
                            {
                                f(((n * channels + c) * h + iy) * w + ix, col);
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn im2col(s: &Im2colSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let len = s
        .window
        .out_size([s.height, s.width])
        .map_or(0, |[a, b]| a * b)
        * s.batch
        * s.channels
        * s.window.kernel[0]
        * s.window.kernel[1];
    let mut cols = vec![0.0; len];
    patches(
        s.batch,
        s.channels,
        s.height,
        s.width,
        &s.window,
        |img, col| cols[col] = x[img], // padding entries stay 0
    );
    vec![cols]
}

pub(crate) fn col2im(s: &Col2imSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let cols = i[0];
    let mut x = if s.accumulate {
        i[1].to_vec()
    } else {
        vec![0.0; s.batch * s.channels * s.height * s.width]
    };
    patches(
        s.batch,
        s.channels,
        s.height,
        s.width,
        &s.window,
        |img, col| x[img] += cols[col],
    );
    vec![x]
}

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
            if let (Some(iy), Some(ix)) = (tap(win, 0, oy, ty, h), tap(win, 1, ox, tx, w)) {
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

pub(crate) fn pool2d(s: &Pool2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let [oh, ow] = s.out_size();
    let (h, w) = (s.height, s.width);
    let planes = s.batch * s.channels;
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

pub(crate) fn pool2d_backward(s: &Pool2dBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let dy = i[0];
    let (h, w, oh, ow) = (s.height, s.width, s.out_height, s.out_width);
    let planes = s.batch * s.channels;
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

pub(crate) fn adaptive_pool2d(s: &AdaptivePool2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
