//! Native modules: compute code written in a device's own language, outside kernelc,
//! launched on views — a WGSL or SPIR-V shader on a wgpu device (rustd's
//! `dispatch_compute`), a PTX kernel on a CUDA device (ferrum's `KernelExecutor`).
//! For kernels in kernelc's IR, which run on every device, see [`Runtime::load_kernel`].
//!
//! A shader module is created checked (naga validates it; wgpu keeps its bounds checks),
//! so dispatching it is safe. A PTX kernel is arbitrary device code: launching it is
//! `unsafe`, with the contract that it touches only the views it is given. Either way
//! the runtime checks what it can before anything runs: the module belongs to this
//! runtime's device, one argument per declared parameter of the declared kind, views
//! on this device, and that a writable buffer overlaps no other argument; launches
//! are queued in order with every op, and views the device cannot bind where they are
//! (wgpu's offset alignment) are staged through a copy.

#[cfg(feature = "wgpu")]
use crate::device::BindingRef;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use crate::device::Device;
use crate::error::{Result, RuntimeError};
use crate::memory::View;
use crate::runtime::Runtime;
use kernelc_ir::{Scalar, ScalarType};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use std::sync::Arc;

/// The code of a shader module.
#[derive(Clone, Copy, Debug)]
pub enum ShaderSource<'a> {
    /// WGSL text.
    Wgsl(&'a str),
    /// A SPIR-V binary (little-endian words, starting with the magic number).
    SpirV(&'a [u8]),
}

/// How a shader module binds storage buffer `i` (binding `i` of group 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaderBinding {
    ReadOnly,
    ReadWrite,
}

/// A shader module loaded on one runtime's wgpu device.
#[derive(Clone)]
pub struct ShaderModule {
    entry: String,
    bindings: Vec<ShaderBinding>,
    device_id: u64,
    #[cfg(feature = "wgpu")]
    inner: Arc<crate::device::WgpuShaderModule>,
}

impl std::fmt::Debug for ShaderModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShaderModule(`{}`, {:?})", self.entry, self.bindings)
    }
}

impl ShaderModule {
    pub fn entry(&self) -> &str {
        &self.entry
    }

    pub fn bindings(&self) -> &[ShaderBinding] {
        &self.bindings
    }
}

/// A parameter of a PTX kernel, as its `.entry` declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxParam {
    /// A global address (`.param .u64`, a pointer): bound to a view, read and written.
    Pointer,
    /// A scalar of this type (`.param .f32`, `.param .s32`, ...), passed in its own
    /// bytes (a narrow integer type in its 1 or 2).
    Scalar(ScalarType),
}

/// One argument of a PTX launch, for the parameter in the same position.
#[derive(Clone, Copy, Debug)]
pub enum PtxArg<'a> {
    /// The view's device address (its first element).
    View(&'a View),
    /// A scalar of the parameter's type (a narrow integer as its `u32`/`i32` value).
    Scalar(Scalar),
}

/// A PTX kernel loaded on one runtime's CUDA device.
#[derive(Clone)]
pub struct PtxModule {
    entry: String,
    params: Vec<PtxParam>,
    device_id: u64,
    #[cfg(feature = "cuda")]
    inner: Arc<crate::device::CudaPtxModule>,
}

impl std::fmt::Debug for PtxModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PtxModule(`{}`, {:?})", self.entry, self.params)
    }
}

impl PtxModule {
    pub fn entry(&self) -> &str {
        &self.entry
    }

    pub fn params(&self) -> &[PtxParam] {
        &self.params
    }
}

impl Runtime {
    fn unsupported(&self, what: &str, why: &str) -> RuntimeError {
        RuntimeError::Unsupported {
            what: what.to_string(),
            device: self.device_name(),
            why: why.to_string(),
        }
    }

    fn foreign_module(&self, entry: &str) -> RuntimeError {
        RuntimeError::WrongDevice {
            tensor_device: format!("another runtime's module `{entry}`"),
            runtime_device: self.device_name(),
        }
    }

    /// Loads a shader module with entry point `entry`, which binds storage buffers
    /// `0..bindings.len()` of group 0 as `bindings` says and `immediate_bytes` bytes of
    /// immediate data (SPIR-V push constants; 0 for none). On a wgpu device only:
    /// elsewhere [`RuntimeError::Unsupported`]. A module naga or the driver rejects is
    /// [`RuntimeError::Compile`] with their message.
    pub fn load_shader(
        &self,
        source: ShaderSource<'_>,
        entry: &str,
        bindings: &[ShaderBinding],
        immediate_bytes: u32,
    ) -> Result<ShaderModule> {
        #[cfg(feature = "wgpu")]
        if let Device::Wgpu(d) = &self.device {
            use crate::device::ShaderCode;
            let code = match source {
                ShaderSource::Wgsl(text) => ShaderCode::Wgsl(text),
                ShaderSource::SpirV(bytes) => {
                    ShaderCode::SpirV(spirv_words(bytes).map_err(|why| RuntimeError::Compile {
                        device: self.device_name(),
                        kernel: entry.to_string(),
                        message: why,
                    })?)
                }
            };
            let writable: Vec<bool> = bindings
                .iter()
                .map(|b| *b == ShaderBinding::ReadWrite)
                .collect();
            let inner = d.load_shader(code, entry, &writable, immediate_bytes)?;
            return Ok(ShaderModule {
                entry: entry.to_string(),
                bindings: bindings.to_vec(),
                device_id: self.device_id(),
                inner: Arc::new(inner),
            });
        }
        let _ = (source, bindings, immediate_bytes);
        Err(self.unsupported(
            &format!("shader module `{entry}`"),
            "WGSL and SPIR-V modules run on wgpu devices (kernels in kernelc's IR run everywhere: load_kernel)",
        ))
    }

    /// Queues `module` on `workgroups` workgroups with `views` bound to its storage
    /// buffers in order and `immediates` as its immediate data (exactly as many bytes
    /// as it declares). A writable binding may overlap no other view
    /// ([`RuntimeError::Overlap`]). A strided view binds the bytes it spans, from its
    /// first element: the module does its own indexing.
    pub fn dispatch_shader(
        &self,
        module: &ShaderModule,
        views: &[&View],
        immediates: &[u8],
        workgroups: [u32; 3],
    ) -> Result<()> {
        if module.device_id != self.device_id() {
            return Err(self.foreign_module(&module.entry));
        }
        if views.len() != module.bindings.len() {
            return Err(RuntimeError::Launch {
                device: self.device_name(),
                kernel: module.entry.clone(),
                message: format!(
                    "{} views for {} bindings",
                    views.len(),
                    module.bindings.len()
                ),
                status: 0,
            });
        }
        let writable: Vec<bool> = module
            .bindings
            .iter()
            .map(|b| *b == ShaderBinding::ReadWrite)
            .collect();
        self.check_module_views(&module.entry, views, &writable)?;
        #[cfg(feature = "wgpu")]
        if let Device::Wgpu(d) = &self.device {
            let written: Vec<&View> = views
                .iter()
                .zip(&writable)
                .filter(|(_, &w)| w)
                .map(|(v, _)| *v)
                .collect();
            let _memory = self.lock_memory();
            let bound = views
                .iter()
                .zip(&writable)
                .map(|(v, &w)| {
                    if w {
                        self.bind_output(v, 1)
                    } else {
                        self.bind_input(v, &written, 1)
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            let slices = bound
                .iter()
                .map(|b| match b.binding() {
                    BindingRef::Buffer(s) => Ok(s),
                    BindingRef::Host(_) | BindingRef::Scalar(_) => Err(RuntimeError::Internal(
                        "a shader binding is not a buffer".into(),
                    )),
                })
                .collect::<Result<Vec<_>>>()?;
            d.dispatch_shader(&module.inner, &slices, immediates, workgroups)?;
            self.count_launches(1);
            for (b, &w) in bound.iter().zip(&writable) {
                if w {
                    b.write_back()?;
                }
            }
            return Ok(());
        }
        let _ = (immediates, workgroups);
        Err(self.foreign_module(&module.entry))
    }

    /// Loads `ptx` (PTX text) and finds its kernel `entry`, declared with `params`.
    /// On a CUDA device only: elsewhere [`RuntimeError::Unsupported`]. PTX the
    /// driver's JIT rejects, or without `entry`, is [`RuntimeError::Compile`] with its
    /// log.
    pub fn load_ptx(&self, ptx: &str, entry: &str, params: &[PtxParam]) -> Result<PtxModule> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(d) = &self.device {
            let inner = d.load_ptx(ptx, entry)?;
            return Ok(PtxModule {
                entry: entry.to_string(),
                params: params.to_vec(),
                device_id: self.device_id(),
                inner: Arc::new(inner),
            });
        }
        let _ = (ptx, params);
        Err(self.unsupported(
            &format!("PTX kernel `{entry}`"),
            "PTX runs on CUDA devices (kernels in kernelc's IR run everywhere: load_kernel)",
        ))
    }

    /// Queues `module` on `grid` blocks of `block` threads, with `shared_bytes` of
    /// dynamic shared memory and `args`, one per declared parameter: a view as its
    /// device address (the pointer; of a strided view, its first element's, the bytes
    /// it spans being the kernel's to index), a scalar of the parameter's type. Checked first:
    /// the module is this runtime's, the arguments fit the declared parameters, views
    /// are on this device, a view the kernel may write overlaps no other, and block,
    /// grid and shared memory are within the device's limits.
    ///
    /// # Safety
    /// The parameters declared when loading must be the entry's own, in order, and
    /// the kernel must read and write only inside the views it is given (nothing
    /// checks its addresses: it can corrupt any memory of the CUDA context). A kernel
    /// fault (an illegal address) is reported by the next synchronising call and
    /// leaves the context unusable, as in any CUDA program.
    pub unsafe fn launch_ptx(
        &self,
        module: &PtxModule,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[PtxArg<'_>],
    ) -> Result<()> {
        if module.device_id != self.device_id() {
            return Err(self.foreign_module(&module.entry));
        }
        let bad = |message: String| RuntimeError::Launch {
            device: self.device_name(),
            kernel: module.entry.clone(),
            message,
            status: 0,
        };
        if args.len() != module.params.len() {
            return Err(bad(format!(
                "{} arguments for {} parameters",
                args.len(),
                module.params.len()
            )));
        }
        let mut views = Vec::new();
        for (i, (p, a)) in module.params.iter().zip(args).enumerate() {
            match (p, a) {
                (PtxParam::Pointer, PtxArg::View(v)) => views.push(*v),
                (PtxParam::Scalar(t), PtxArg::Scalar(s)) if s.ty() == t.value_type() => {}
                (PtxParam::Scalar(t), PtxArg::Scalar(s)) => {
                    return Err(bad(format!("parameter {i} takes a {t}, got a {}", s.ty())))
                }
                (p, _) => return Err(bad(format!("parameter {i} ({p:?}) takes the other kind"))),
            }
        }
        // Any pointer may be written.
        self.check_module_views(&module.entry, &views, &vec![true; views.len()])?;
        #[cfg(feature = "cuda")]
        if let Device::Cuda(d) = &self.device {
            let _memory = self.lock_memory();
            let words = args
                .iter()
                .map(|a| match a {
                    PtxArg::View(v) => d.address_of(v.slice()),
                    PtxArg::Scalar(s) => Ok(s.to_bits()),
                })
                .collect::<Result<Vec<u64>>>()?;
            // SAFETY: the caller's contract (this function's) is the device's: the
            // declared parameters are the entry's, matched one argument each above, and
            // the code touches only the given views, which are live buffers of this
            // device (checked) and stay alive for queued work (`CudaStorage`).
            unsafe { d.launch_ptx(&module.inner, grid, block, shared_bytes, &words)? };
            self.count_launches(1);
            return Ok(());
        }
        let _ = (grid, block, shared_bytes);
        Err(self.foreign_module(&module.entry))
    }

    /// The views of a native launch: on this device, and none that is written
    /// (`writable[i]`) overlapping another.
    fn check_module_views(&self, entry: &str, views: &[&View], writable: &[bool]) -> Result<()> {
        for v in views {
            self.check_owned(v.buffer())?;
        }
        for (i, (v, &w)) in views.iter().zip(writable).enumerate() {
            if !w {
                continue;
            }
            for (j, other) in views.iter().enumerate() {
                if i != j && v.overlaps(other) {
                    return Err(RuntimeError::Overlap {
                        op: entry.to_string(),
                        output: format!("argument {i}"),
                        other: format!("argument {j}"),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The words of a SPIR-V binary, or why it is not one.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
fn spirv_words(bytes: &[u8]) -> std::result::Result<Vec<u32>, String> {
    const MAGIC: u32 = 0x0723_0203;
    if bytes.len() % 4 != 0 || bytes.len() < 20 {
        return Err(format!(
            "a SPIR-V binary is whole 4-byte words with a 5-word header; got {} bytes",
            bytes.len()
        ));
    }
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words[0] != MAGIC {
        return Err(format!(
            "not SPIR-V: the first word is {:#010x}, not the magic number {MAGIC:#010x} (little-endian)",
            words[0]
        ));
    }
    Ok(words)
}
