//! f64 references of the convolution family (formulas in [`super`]).

use super::spec::{Col2imSpec, Conv2dSpec, ConvPass, Im2colSpec, Window2d};

pub(super) fn conv2d(s: &Conv2dSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
                                let Some(iy) = s.window.tap(0, oy, ty, h) else {
                                    continue;
                                };
                                for tx in 0..kw {
                                    let Some(ix) = s.window.tap(1, ox, tx, w) else {
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
                                (win.tap(0, oy, ty, h), win.tap(1, ox, tx, w))
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

pub(super) fn im2col(s: &Im2colSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let len = s
        .window
        .out_size([s.image.height, s.image.width])
        .map_or(0, |[a, b]| a * b)
        * s.image.batch
        * s.image.channels
        * s.window.kernel[0]
        * s.window.kernel[1];
    let mut cols = vec![0.0; len];
    patches(
        s.image.batch,
        s.image.channels,
        s.image.height,
        s.image.width,
        &s.window,
        |img, col| cols[col] = x[img], // padding entries stay 0
    );
    vec![cols]
}

pub(super) fn col2im(s: &Col2imSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let cols = i[0];
    let mut x = if s.accumulate {
        i[1].to_vec()
    } else {
        vec![0.0; s.image.batch * s.image.channels * s.image.height * s.image.width]
    };
    patches(
        s.image.batch,
        s.image.channels,
        s.image.height,
        s.image.width,
        &s.window,
        |img, col| x[img] += cols[col],
    );
    vec![x]
}
