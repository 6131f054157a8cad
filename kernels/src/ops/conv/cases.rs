//! Conformance cases of the convolution family: stride > 1, padding, non-square
//! windows and images, 1×1 kernels, batch > 1, bias on and off, all three passes.

use super::spec::*;
use kernelc_ir::ScalarType::{self, *};

/// `(dtype, batch, in_channels, out_channels, [height, width], window, bias)`.
type ConvCase = (ScalarType, usize, usize, usize, [usize; 2], Window2d, bool);

pub(super) fn conv_cases() -> Vec<Conv2dSpec> {
    let sq = Window2d::square;
    let forward: [ConvCase; 10] = [
        (F32, 1, 2, 3, [5, 5], sq(3, 1, 1), true),
        (
            F32,
            2,
            3,
            5,
            [7, 9],
            Window2d::new([3, 2], [2, 1], [1, 0]),
            true,
        ),
        // 1×1, stride 1, no padding: the image is a plain matrix (30 pixels: scalar
        // loads; 16 pixels: vector loads).
        (F32, 2, 4, 6, [6, 5], sq(1, 1, 0), false),
        (F32, 2, 5, 7, [4, 4], sq(1, 1, 0), true),
        (F64, 1, 3, 2, [5, 5], sq(1, 2, 1), true),
        (F16, 1, 3, 4, [6, 6], sq(3, 2, 1), true),
        (
            Bf16,
            2,
            2,
            3,
            [8, 5],
            Window2d::new([2, 3], [1, 2], [0, 1]),
            false,
        ),
        // 16-bit with channels in whole 16-byte runs: also offered channels-last
        // where the multiplies run on matrix fragments (ragged pixels and filters;
        // strided, padded and not).
        (
            Bf16,
            2,
            16,
            24,
            [9, 11],
            Window2d::new([3, 2], [2, 1], [1, 0]),
            true,
        ),
        (F16, 1, 8, 20, [7, 7], sq(3, 1, 1), false),
        (Bf16, 2, 8, 5, [5, 6], sq(3, 1, 0), false),
    ];
    let backward_data: [ConvCase; 6] = [
        // Stride 1: implicit GEMM through the transposed window.
        (F32, 2, 3, 4, [6, 7], sq(3, 1, 1), false),
        (F32, 1, 2, 2, [5, 7], sq(5, 1, 2), false),
        (F32, 2, 4, 5, [4, 4], sq(1, 1, 0), false),
        // Stride > 1: a GEMM into a column buffer, then col2im.
        (
            F32,
            2,
            2,
            3,
            [7, 6],
            Window2d::new([3, 2], [2, 1], [1, 0]),
            false,
        ),
        (F64, 1, 3, 2, [5, 5], sq(1, 2, 0), false),
        (F16, 1, 2, 3, [6, 6], sq(3, 2, 1), false),
    ];
    let backward_filter: [ConvCase; 6] = [
        (F32, 2, 3, 4, [6, 7], sq(3, 1, 1), false),
        (
            F32,
            3,
            2,
            3,
            [7, 6],
            Window2d::new([3, 2], [2, 1], [1, 0]),
            false,
        ),
        (F32, 2, 4, 5, [4, 4], sq(1, 1, 0), false),
        (F64, 1, 3, 2, [5, 5], sq(1, 1, 0), false),
        // 512 output positions per filter element: split-K on GPU caps.
        (F32, 2, 2, 3, [16, 16], sq(3, 1, 1), false),
        (Bf16, 2, 2, 2, [6, 6], sq(3, 2, 1), false),
    ];
    // Zero-sized: no input channels (the output is the bias, or zeros), no output
    // channels, no batch (the filter gradient is a sum of nothing: zeros).
    let empty: [(ConvPass, ConvCase); 5] = [
        (ConvPass::Forward, (F32, 2, 0, 3, [4, 4], sq(3, 1, 1), true)),
        (
            ConvPass::Forward,
            (F32, 1, 2, 0, [4, 4], sq(1, 1, 0), false),
        ),
        (
            ConvPass::BackwardData,
            (F32, 1, 2, 0, [5, 5], sq(3, 1, 1), false),
        ),
        (
            ConvPass::BackwardFilter,
            (F32, 0, 2, 3, [5, 5], sq(3, 1, 1), false),
        ),
        (ConvPass::Forward, (F32, 0, 2, 3, [5, 5], sq(3, 1, 1), true)),
    ];
    let mut v = Vec::new();
    for (pass, case) in empty {
        let (dtype, batch, in_channels, out_channels, [height, width], window, bias) = case;
        v.push(Conv2dSpec {
            dtype,
            pass,
            batch,
            in_channels,
            out_channels,
            height,
            width,
            window,
            bias,
        });
    }
    for (pass, list) in [
        (ConvPass::Forward, &forward[..]),
        (ConvPass::BackwardData, &backward_data[..]),
        (ConvPass::BackwardFilter, &backward_filter[..]),
    ] {
        for &(dtype, batch, in_channels, out_channels, [height, width], window, bias) in list {
            v.push(Conv2dSpec {
                dtype,
                pass,
                batch,
                in_channels,
                out_channels,
                height,
                width,
                window,
                bias,
            });
        }
    }
    v
}

/// `(dtype, batch, channels, [height, width], window)`.
type PatchCase = (ScalarType, usize, usize, [usize; 2], Window2d);

fn patch_cases() -> [PatchCase; 6] {
    let sq = Window2d::square;
    [
        // No channels: empty patches (and, backward, zeros... of an empty image).
        (F32, 2, 0, [4, 4], sq(3, 1, 1)),
        (F32, 1, 2, [4, 4], sq(3, 1, 1)),
        (F16, 2, 3, [7, 5], Window2d::new([3, 2], [2, 1], [1, 0])),
        (F32, 1, 1, [1, 1], sq(1, 1, 0)),
        (F64, 2, 2, [6, 6], sq(1, 2, 1)),
        // Stride larger than the window: pixels no window reads.
        (Bf16, 1, 2, [5, 4], sq(2, 3, 0)),
    ]
}

pub(super) fn im2col_cases() -> Vec<Im2colSpec> {
    patch_cases()
        .into_iter()
        .map(
            |(dtype, batch, channels, [height, width], window)| Im2colSpec {
                dtype,
                image: Nchw::new([batch, channels, height, width]),
                window,
            },
        )
        .collect()
}

pub(super) fn col2im_cases() -> Vec<Col2imSpec> {
    let mut v: Vec<Col2imSpec> = patch_cases()
        .into_iter()
        .enumerate()
        .map(
            |(i, (dtype, batch, channels, [height, width], window))| Col2imSpec {
                dtype,
                image: Nchw::new([batch, channels, height, width]),
                window,
                accumulate: i % 2 == 1,
            },
        )
        .collect();
    v.push(Col2imSpec {
        dtype: F32,
        image: Nchw::new([2, 2, 6, 6]),
        window: Window2d::square(3, 2, 2),
        accumulate: false,
    });
    v
}
