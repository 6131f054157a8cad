//! ferrum's `KernelExecutor` ([`FerrumExecutor`]): kernels in kernelc's IR (JSON,
//! `kernelc ir`'s format), validated and compiled for the device, launched on
//! tensors and memory-manager buffers. PTX is refused: it is arbitrary device code,
//! which only [`Runtime::launch_ptx`](crate::Runtime::launch_ptx) (an `unsafe` call)
//! runs.

use super::{error, Context};
use crate::lock;
use crate::memory::View;
use crate::raw::{KernelArg as RawArg, LoadedKernel};
use ferrum_interfaces::backend::{
    KernelArg, KernelExecutor, KernelHandle, KernelInfo, ScalarValue,
};
use ferrum_interfaces::tensor::TensorRef;
use ferrum_types::{Device, FerrumError, Result};
use kernelc_ir::{Kernel, Param, Scalar, ScalarType};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

struct Loaded {
    kernel: Kernel,
    compiled: LoadedKernel,
}

/// ferrum's `KernelExecutor`.
pub struct FerrumExecutor {
    ctx: Arc<Context>,
    kernels: Mutex<HashMap<u64, Arc<Loaded>>>,
    next: AtomicU64,
}

impl FerrumExecutor {
    pub(super) fn new(ctx: Arc<Context>) -> FerrumExecutor {
        FerrumExecutor {
            ctx,
            kernels: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    fn load(&self, source: &str, name: &str, device: &Device) -> Result<KernelHandle> {
        if *device != self.ctx.device {
            return Err(FerrumError::invalid_parameter(format!(
                "load_kernel: this executor runs on {}, not {device}",
                self.ctx.device
            )));
        }
        if source.contains(".entry") && source.contains(".version") {
            return Err(FerrumError::unsupported(format!(
                "load_kernel `{name}`: PTX is arbitrary device code, which ferrum's safe \
                 execute_kernel cannot run; give the kernel in kernelc's IR (JSON), or use \
                 Runtime::load_ptx and the unsafe Runtime::launch_ptx"
            )));
        }
        let kernel = kernelc_ir::from_json(source).map_err(|e| {
            FerrumError::invalid_format(format!(
                "load_kernel `{name}`: not a kernel in kernelc's IR JSON: {e}"
            ))
        })?;
        if kernel.name != name {
            return Err(FerrumError::invalid_parameter(format!(
                "load_kernel: the source's kernel is `{}`, not `{name}`",
                kernel.name
            )));
        }
        let compiled = self.ctx.settle(self.ctx.rt.load_kernel(&kernel))?;
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.kernels).insert(handle, Arc::new(Loaded { kernel, compiled }));
        Ok(KernelHandle(handle))
    }

    fn loaded(&self, handle: KernelHandle) -> Result<Arc<Loaded>> {
        lock(&self.kernels).get(&handle.0).cloned().ok_or_else(|| {
            FerrumError::invalid_parameter(format!(
                "kernel handle {} is not loaded (never, or unloaded)",
                handle.0
            ))
        })
    }

    /// Queues the launch (checked first: the block is the kernel's workgroup, one
    /// argument per parameter of its kind, buffers as long as their parameters).
    fn execute(
        &self,
        handle: KernelHandle,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        let loaded = self.loaded(handle)?;
        let k = &loaded.kernel;
        let [x, y, z] = k.workgroup_size;
        if block != (x, y, z) {
            return Err(FerrumError::invalid_parameter(format!(
                "execute_kernel `{}`: block {block:?}, but the kernel's workgroup is ({x}, {y}, {z})",
                k.name
            )));
        }
        if args.len() != k.params.len() {
            return Err(FerrumError::invalid_parameter(format!(
                "execute_kernel `{}`: {} arguments for {} parameters",
                k.name,
                args.len(),
                k.params.len()
            )));
        }
        let views = k
            .params
            .iter()
            .zip(args)
            .enumerate()
            .map(|(i, (p, a))| self.argument(&k.name, i, p, a))
            .collect::<Result<Vec<_>>>()?;
        let raw: Vec<RawArg<'_>> = views
            .iter()
            .map(|v| match v {
                Bound::View(view) => RawArg::View(view),
                Bound::Scalar(s) => RawArg::Scalar(*s),
            })
            .collect();
        let result = self
            .ctx
            .rt
            .launch(&loaded.compiled, [grid.0, grid.1, grid.2], &raw);
        self.ctx.settle(result)
    }

    /// Argument `i` of kernel `name` for parameter `p`.
    fn argument(&self, name: &str, i: usize, p: &Param, arg: &Arg) -> Result<Bound> {
        let bad = |why: String| {
            FerrumError::invalid_parameter(format!("execute_kernel `{name}`: argument {i}: {why}"))
        };
        match (p, arg) {
            (Param::Buffer { elem, len, .. }, Arg::Tensor(t)) => {
                let t = self.ctx.ours(t, "execute_kernel")?;
                let v = t.view_ref();
                let flat = v.reshaped(&[v.numel()]).map_err(error)?;
                if v.dtype() != *elem || v.numel() as u64 != *len {
                    return Err(bad(format!(
                        "a {} tensor of {} elements for a buffer of {len} {elem}",
                        v.dtype(),
                        v.numel()
                    )));
                }
                Ok(Bound::View(flat))
            }
            (Param::Buffer { elem, len, .. }, Arg::Buffer { address, size }) => {
                let bytes = len * elem.size_bytes() as u64;
                if *size as u64 != bytes {
                    return Err(bad(format!(
                        "{size} bytes for a buffer of {len} {elem} ({bytes} bytes)"
                    )));
                }
                let view = self.ctx.rt.view_at(*address, *elem, &[*len as usize]);
                self.ctx.settle(view).map(Bound::View)
            }
            (Param::Scalar { ty, .. }, Arg::Scalar(value)) => {
                scalar(value, *ty).map(Bound::Scalar).map_err(bad)
            }
            (_, Arg::LocalMemory(bytes)) => Err(bad(format!(
                "local memory ({bytes} bytes) is declared in a kernelc kernel, not passed"
            ))),
            (Param::Buffer { .. }, Arg::Scalar(_)) => Err(bad("a scalar for a buffer".into())),
            (Param::Scalar { ty, .. }, _) => Err(bad(format!("a buffer for a {ty} scalar"))),
        }
    }
}

/// An argument read out of ferrum's `KernelArg` (which holds a raw pointer, so the
/// future may not keep it).
enum Arg {
    Tensor(TensorRef),
    Buffer { address: u64, size: usize },
    Scalar(ScalarValue),
    LocalMemory(usize),
}

enum Bound {
    View(View),
    Scalar(Scalar),
}

/// `value` as a scalar of `ty`: a number of the same kind (integer, float, bool) that
/// `ty` holds exactly.
fn scalar(value: &ScalarValue, ty: ScalarType) -> std::result::Result<Scalar, String> {
    let (number, kind) = match *value {
        ScalarValue::I8(v) => (v as f64, "integer"),
        ScalarValue::I16(v) => (v as f64, "integer"),
        ScalarValue::I32(v) => (v as f64, "integer"),
        ScalarValue::I64(v) => {
            if ty == ScalarType::I64 {
                return Ok(Scalar::I64(v));
            }
            (v as f64, "integer")
        }
        ScalarValue::U8(v) => (v as f64, "integer"),
        ScalarValue::U16(v) => (v as f64, "integer"),
        ScalarValue::U32(v) => (v as f64, "integer"),
        ScalarValue::U64(v) => (v as f64, "integer"),
        ScalarValue::F32(v) => (v as f64, "float"),
        ScalarValue::F64(v) => (v, "float"),
        ScalarValue::Bool(v) => {
            return match ty {
                ScalarType::Bool => Ok(Scalar::Bool(v)),
                _ => Err(format!("a bool for a {ty} scalar")),
            }
        }
    };
    let fits = match ty {
        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => kind == "float",
        ScalarType::Bool => false,
        ScalarType::I64 => false,
        int => {
            let (lo, hi): (f64, f64) = match int {
                ScalarType::I8 => (i8::MIN.into(), i8::MAX.into()),
                ScalarType::I16 => (i16::MIN.into(), i16::MAX.into()),
                ScalarType::I32 => (i32::MIN.into(), i32::MAX.into()),
                ScalarType::U8 => (0.0, u8::MAX.into()),
                ScalarType::U16 => (0.0, u16::MAX.into()),
                _ => (0.0, u32::MAX.into()),
            };
            kind == "integer" && (lo..=hi).contains(&number)
        }
    };
    if !fits {
        return Err(format!("{value:?} is not a {ty} scalar"));
    }
    Ok(Scalar::from_f64(ty.value_type(), number))
}

impl KernelExecutor for FerrumExecutor {
    fn load_kernel<'a, 'b, 'c, 'd, 't>(
        &'a self,
        source: &'b str,
        name: &'c str,
        device: &'d Device,
    ) -> Pin<Box<dyn Future<Output = Result<KernelHandle>> + Send + 't>>
    where
        'a: 't,
        'b: 't,
        'c: 't,
        'd: 't,
        Self: 't,
    {
        let result = self.load(source, name, device);
        Box::pin(async move { result })
    }

    /// Hand-desugared: `args` (which holds raw pointers, so is not `Sync`) is read
    /// before the future is made, and the launch is queued then.
    fn execute_kernel<'a, 'b, 't>(
        &'a self,
        handle: KernelHandle,
        grid_size: (u32, u32, u32),
        block_size: (u32, u32, u32),
        args: &'b [KernelArg],
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 't>>
    where
        'a: 't,
        'b: 't,
        Self: 't,
    {
        let owned: Vec<Arg> = args
            .iter()
            .map(|a| match a {
                KernelArg::Tensor(t) => Arg::Tensor(t.clone()),
                KernelArg::Buffer { ptr, size } => Arg::Buffer {
                    address: *ptr as u64,
                    size: *size,
                },
                KernelArg::Scalar(s) => Arg::Scalar(s.clone()),
                KernelArg::LocalMemory(n) => Arg::LocalMemory(*n),
            })
            .collect();
        let result = self.execute(handle, grid_size, block_size, &owned);
        Box::pin(async move { result })
    }

    fn get_kernel_info(&self, handle: KernelHandle) -> Option<KernelInfo> {
        let loaded = self.loaded(handle).ok()?;
        let k = &loaded.kernel;
        let [x, y, z] = k.workgroup_size;
        Some(KernelInfo {
            name: k.name.clone(),
            max_threads_per_block: u32::try_from(k.invocations_per_workgroup()).unwrap_or(u32::MAX),
            shared_memory_size: k.shared_bytes() as usize,
            registers_per_thread: 0,
            preferred_block_size: (x, y, z),
        })
    }

    fn unload_kernel<'a, 't>(
        &'a self,
        handle: KernelHandle,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 't>>
    where
        'a: 't,
        Self: 't,
    {
        let result = match lock(&self.kernels).remove(&handle.0) {
            Some(_) => Ok(()),
            None => Err(FerrumError::invalid_parameter(format!(
                "unload_kernel: handle {} is not loaded",
                handle.0
            ))),
        };
        Box::pin(async move { result })
    }
}
