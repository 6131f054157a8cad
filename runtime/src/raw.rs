//! Raw kernels: a user-written IR kernel (built with `kernelc_ir::builder` or read
//! from its JSON form) compiled for the runtime's device and launched on views with a
//! grid, for APIs that dispatch their own compute (rustd's `dispatch_compute`,
//! ferrum's `KernelExecutor`).
//!
//! The kernel goes through the validator and the device's target passes like every
//! catalogue kernel, and through the same kernel cache. A launch checks each argument
//! against its parameter (kind, dtype, exact length, device) and the aliasing rule of
//! kernels (a writable buffer overlaps no other argument) before anything runs, and
//! holds the memory lock like every call on buffers.

use crate::device::{BindingRef, Executable, LaunchRef};
use crate::error::{Result, RuntimeError};
use crate::memory::{View, FULL_ALIGNMENT};
use crate::runtime::Runtime;
use kernelc_ir::{Kernel, Param, Scalar};
use std::sync::Arc;

/// A kernel compiled for one runtime's device.
#[derive(Clone)]
pub struct LoadedKernel {
    name: String,
    params: Vec<Param>,
    exe: Arc<Executable>,
    device_id: u64,
}

impl LoadedKernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameters a launch binds, in order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }
}

/// One argument of a raw launch, for the parameter in the same position.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// A buffer parameter: the view's elements (dtype and length as the parameter's).
    View(&'a View),
    /// A scalar parameter (of the parameter's type).
    Scalar(Scalar),
}

impl Runtime {
    /// Validates `kernel` and compiles it for this device (or takes it from the kernel
    /// cache). An invalid kernel is [`RuntimeError::InvalidKernel`]; one the device
    /// cannot run (workgroup or shared memory past its limits, a dtype it lacks) is
    /// [`RuntimeError::Compile`].
    pub fn load_kernel(&self, kernel: &Kernel) -> Result<LoadedKernel> {
        kernelc_ir::validate(kernel).map_err(|e| RuntimeError::InvalidKernel(e.to_string()))?;
        let exe = self.executable(&self.target_ir(kernel))?;
        Ok(LoadedKernel {
            name: kernel.name.clone(),
            params: kernel.params.clone(),
            exe,
            device_id: self.device_id(),
        })
    }

    /// [`Runtime::load_kernel`] of a kernel in kernelc's IR JSON (`kernelc ir`'s
    /// format); a syntax or validation error is [`RuntimeError::InvalidKernel`].
    pub fn load_kernel_json(&self, json: &str) -> Result<LoadedKernel> {
        let kernel =
            kernelc_ir::from_json(json).map_err(|e| RuntimeError::InvalidKernel(e.to_string()))?;
        self.load_kernel(&kernel)
    }

    /// Queues `kernel` on `grid` workgroups with `args`, one per parameter. A
    /// run-time error the kernel reports (out-of-bounds access, division by zero) is
    /// a [`RuntimeError::Launch`] naming it from the next synchronising call
    /// ([`Runtime::synchronize`], or a read).
    pub fn launch(
        &self,
        kernel: &LoadedKernel,
        grid: [u32; 3],
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        if kernel.device_id != self.device_id() {
            return Err(RuntimeError::WrongDevice {
                tensor_device: format!("another runtime's kernel `{}`", kernel.name),
                runtime_device: self.device_name(),
            });
        }
        self.check_kernel_args(kernel, args)?;
        let writes = |p: &Param| matches!(p, Param::Buffer { access, .. } if access.can_write());
        let written: Vec<&View> = kernel
            .params
            .iter()
            .zip(args)
            .filter_map(|(p, a)| match a {
                KernelArg::View(v) if writes(p) => Some(*v),
                _ => None,
            })
            .collect();
        let _memory = self.lock_memory();
        // A user kernel may load whole vectors, which every target assumes 16-byte
        // aligned: a view at another offset is staged (copied in, and back when
        // written), as are read-only views sharing a buffer with a written one on wgpu.
        let bound = kernel
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| match a {
                KernelArg::View(v) if writes(p) => self.bind_output(v, FULL_ALIGNMENT).map(Some),
                KernelArg::View(v) => self.bind_input(v, &written, FULL_ALIGNMENT).map(Some),
                KernelArg::Scalar(_) => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let bindings = args
            .iter()
            .zip(&bound)
            .map(|(a, b)| match (a, b) {
                (_, Some(b)) => b.binding(),
                (KernelArg::Scalar(s), None) => BindingRef::Scalar(*s),
                (KernelArg::View(v), None) => BindingRef::Buffer(v.slice()),
            })
            .collect();
        self.device.execute(&[LaunchRef {
            exe: &kernel.exe,
            grid,
            args: bindings,
        }])?;
        self.count_launches(1);
        for (p, b) in kernel.params.iter().zip(&bound) {
            if let (true, Some(b)) = (writes(p), b) {
                b.write_back()?;
            }
        }
        Ok(())
    }

    /// Each argument against its parameter, and the aliasing rule.
    fn check_kernel_args(&self, kernel: &LoadedKernel, args: &[KernelArg<'_>]) -> Result<()> {
        let bad = |message: String| RuntimeError::Launch {
            device: self.device_name(),
            kernel: kernel.name.clone(),
            message,
            status: 0,
        };
        if args.len() != kernel.params.len() {
            return Err(bad(format!(
                "{} arguments for {} parameters",
                args.len(),
                kernel.params.len()
            )));
        }
        for (p, a) in kernel.params.iter().zip(args) {
            match (p, a) {
                (
                    Param::Buffer {
                        name, elem, len, ..
                    },
                    KernelArg::View(v),
                ) => {
                    self.check_owned(v.buffer())?;
                    if !v.is_dense() {
                        return Err(bad(format!(
                            "`{name}` takes dense elements, got a strided view ({v:?}); \
                             copy it dense with the as_strided op first"
                        )));
                    }
                    if v.dtype() != *elem || v.numel() as u64 != *len {
                        return Err(bad(format!(
                            "`{name}` takes {len} × {elem}, got {} × {}",
                            v.numel(),
                            v.dtype()
                        )));
                    }
                }
                (Param::Scalar { name, ty }, KernelArg::Scalar(s)) if s.ty() != *ty => {
                    return Err(bad(format!("`{name}` takes a {ty}, got a {}", s.ty())));
                }
                (Param::Scalar { .. }, KernelArg::Scalar(_)) => {}
                (p, _) => {
                    return Err(bad(format!(
                        "`{}` takes the other kind of argument",
                        p.name()
                    )))
                }
            }
        }
        for (i, (p, a)) in kernel.params.iter().zip(args).enumerate() {
            let (Param::Buffer { name, access, .. }, KernelArg::View(v)) = (p, a) else {
                continue;
            };
            if !access.can_write() {
                continue;
            }
            for (j, (q, b)) in kernel.params.iter().zip(args).enumerate() {
                if let KernelArg::View(w) = b {
                    if i != j && v.overlaps(w) {
                        return Err(RuntimeError::Overlap {
                            op: kernel.name.clone(),
                            output: name.clone(),
                            other: format!("argument `{}`", q.name()),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
