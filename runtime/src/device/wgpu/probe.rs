//! What a driver does, measured at open rather than assumed: whether its f64 `fma`
//! rounds once. llvmpipe computes `fma` as a multiply and an add, which breaks the exact
//! products of kernelc's f64 math (`pow` off by 165 ulp); the math expansion then
//! emulates them (`MathExpansion::fused_fma`).

use super::WgpuDevice;
use crate::cache::{CacheKey, DiskCache};
use crate::device::{BindingRef, Executable, LaunchRef, Storage};
use kernelc_ir::builder::{KernelBuilder, E};
use kernelc_ir::{Access, Expr, MathFn, ScalarType};
use std::sync::Arc;

impl WgpuDevice {
    /// Whether f64 `fma` rounds once here: `fma(1 + ε, 1 − ε, −1)` is `−ε²` fused and 0
    /// as a multiply and an add. A device without f64 needs no answer (`true`), nor
    /// does one where the probe cannot run, which is logged.
    pub(super) fn probe_fused_fma(&self) -> bool {
        if !self.caps.f64 {
            return true;
        }
        match self.fma_of(1.0 + f64::EPSILON, 1.0 - f64::EPSILON, -1.0) {
            Ok(r) => r == -(f64::EPSILON * f64::EPSILON),
            Err(e) => {
                tracing::warn!(error = %e, "cannot probe the device's fma; taking it as fused");
                true
            }
        }
    }

    /// `fma(a, b, c)` in f64 on the device.
    fn fma_of(&self, a: f64, b: f64, c: f64) -> Result<f64, String> {
        let mut k = KernelBuilder::new("probe_fma", [1, 1, 1]);
        let input = k.buffer("abc", ScalarType::F64, 3, Access::Read);
        let out = k.buffer("out", ScalarType::F64, 1, Access::Write);
        let kernel = k
            .build(|body| {
                let args = (0..3u32).map(|i| input.at(i).0).collect();
                body.store(
                    out,
                    0u32,
                    E(Expr::Math {
                        func: MathFn::Fma,
                        args,
                    }),
                );
            })
            .map_err(|e| e.to_string())?;
        let key = CacheKey::new(
            kernelc_ir::stable_hash(&kernel).as_bytes(),
            self.target_name(),
            self.target_options(),
        );
        let (exe, _) = self.compile(&kernel, &key, &DiskCache::off())?;
        let exe = Executable::Wgpu(exe);
        let bytes: Vec<u8> = [a, b, c].iter().flat_map(|v| v.to_le_bytes()).collect();
        let input = Arc::new(Storage::Wgpu(self.alloc(24).map_err(|e| e.to_string())?));
        input.write_bytes(&bytes).map_err(|e| e.to_string())?;
        let output = Arc::new(Storage::Wgpu(self.alloc(8).map_err(|e| e.to_string())?));
        let launch = LaunchRef {
            exe: &exe,
            grid: [1, 1, 1],
            args: vec![
                BindingRef::Buffer(super::super::Slice::whole(&input)),
                BindingRef::Buffer(super::super::Slice::whole(&output)),
            ],
        };
        self.execute(&[launch]).map_err(|e| e.to_string())?;
        let got = output.read_bytes().map_err(|e| e.to_string())?;
        let word: [u8; 8] = got
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or("short read")?;
        Ok(f64::from_le_bytes(word))
    }
}
