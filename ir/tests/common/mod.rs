//! Helpers shared by the integration tests of `kernelc-ir`.

// Each test binary uses a part of this module.
#![allow(dead_code)]

/// A xorshift generator: seeded, reproducible inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * self.unit()) as f32
    }
    /// Log-uniform magnitude in [2^lo, 2^hi).
    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * self.unit()).exp2() as f32
    }
}

/// Runs `kernel` on one workgroup over buffers `inputs` (in parameter order); the
/// buffers after the run.
#[allow(clippy::result_large_err)]
pub fn run_kernel(
    kernel: &kernelc_ir::Kernel,
    inputs: &[kernelc_ir::HostBuffer],
) -> Result<Vec<kernelc_ir::HostBuffer>, kernelc_ir::InterpError> {
    use kernelc_ir::Arg;
    let mut args: Vec<Arg> = inputs.iter().cloned().map(Arg::Buffer).collect();
    kernelc_ir::interp::run(kernel, [1, 1, 1], &mut args)?;
    Ok(args
        .into_iter()
        .filter_map(|a| match a {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        })
        .collect())
}
