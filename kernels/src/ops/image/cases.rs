//! Conformance cases of the image filters (fused and two-pass gaussian blur among them).

use super::spec::*;
use kernelc_ir::ScalarType::*;

pub(super) fn image() -> Vec<ImageFilterSpec> {
    use ImageFilter::*;
    let case = |filter, dtype, [height, width, channels]: [usize; 3]| ImageFilterSpec {
        filter,
        dtype,
        height,
        width,
        channels,
    };
    let blur = |sigma, radius| GaussianBlur { sigma, radius };
    vec![
        case(Sobel { threshold: 0.5 }, F32, [6, 5, 3]),
        case(Sobel { threshold: 0.3 }, F16, [1, 1, 1]),
        case(Sobel { threshold: 1.2 }, F64, [13, 11, 4]),
        case(Sobel { threshold: 0.8 }, Bf16, [37, 41, 1]),
        case(Sobel { threshold: -1.0 }, F32, [3, 2, 3]),
        // Fused (staged, separable in shared memory) blurs; radius 0 is the identity.
        case(blur(1.0, 1), F32, [7, 9, 3]),
        case(blur(2.0, 3), F16, [17, 33, 4]),
        case(blur(0.5, 0), F32, [5, 5, 1]),
        case(blur(1.5, 2), F64, [1, 1, 4]),
        case(blur(3.0, 5), Bf16, [40, 70, 1]),
        // A wide blur: two direct passes through a temporary.
        case(blur(8.0, 20), F32, [9, 23, 3]),
        case(Grayscale, F32, [5, 7, 3]),
        case(Grayscale, F16, [1, 1, 4]),
        case(Grayscale, F64, [9, 4, 4]),
        case(Grayscale, Bf16, [3, 3, 3]),
        case(Threshold { value: 0.3 }, F32, [6, 7, 3]),
        case(Threshold { value: 0.5 }, F16, [1, 1, 1]),
        case(Threshold { value: 0.7 }, Bf16, [5, 5, 4]),
        case(Threshold { value: 0.1 }, F64, [3, 11, 4]),
        case(Brightness { factor: 1.5 }, F32, [9, 9, 3]),
        case(Brightness { factor: 0.5 }, F16, [1, 3, 4]),
        case(Brightness { factor: 2.0 }, F64, [7, 1, 1]),
        case(Contrast { factor: 1.8 }, F32, [5, 6, 4]),
        case(Contrast { factor: 0.5 }, Bf16, [1, 1, 3]),
        case(Contrast { factor: 3.0 }, F16, [11, 13, 1]),
        case(Invert, F32, [4, 4, 4]),
        case(Invert, F64, [1, 1, 1]),
        case(Invert, F16, [7, 5, 3]),
        case(Sharpen, F32, [7, 9, 3]),
        case(Sharpen, F16, [1, 1, 1]),
        case(Sharpen, F64, [11, 40, 4]),
        case(Sharpen, Bf16, [37, 3, 1]),
        case(Sobel { threshold: 0.6 }, F32, [67, 101, 4]),
        case(blur(1.2, 2), F32, [45, 130, 3]),
        case(Sobel { threshold: 0.5 }, F32, [0, 5, 3]),
        case(blur(1.0, 1), F32, [4, 0, 1]),
    ]
}
