//! Running a compiled kernel: argument checks, then all workgroups on all cores.

use super::bytes::AlignedBytes;
use super::{encode_scalar, status, KernelFn};
use cranelift_jit::JITModule;
use half::{bf16, f16};
use kernelc_ir::args::{check_args, ArgShape};
use kernelc_ir::{Arg, Kernel, Param, Scalar, ScalarType};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use thiserror::Error;

/// One argument of a launch; `args[i]` binds parameter `i`.
#[derive(Debug)]
pub enum CpuArg<'a> {
    /// A storage buffer: `len * size_bytes(elem)` bytes in the kernel ABI's layout
    /// (see [`crate::cpu`]), aligned to the element size.
    Buffer {
        elem: ScalarType,
        data: &'a mut [u8],
    },
    /// A uniform scalar.
    Scalar(Scalar),
}

/// Element types with a typed view ([`CpuArg::from_slice`]): plain data whose every
/// bit pattern is valid, laid out as the kernel ABI wants.
pub trait Element: sealed::Sealed + Copy {
    /// The IR type of the element.
    const TYPE: ScalarType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $s:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TYPE: ScalarType = ScalarType::$s;
        }
    )*};
}
element!(f32 => F32, f64 => F64, i32 => I32, u32 => U32, i64 => I64, f16 => F16, bf16 => Bf16);

impl<'a> CpuArg<'a> {
    /// A buffer of `elem` elements given as bytes.
    pub fn buffer(elem: ScalarType, data: &'a mut [u8]) -> Self {
        CpuArg::Buffer { elem, data }
    }

    /// A typed buffer (for bool buffers, use [`CpuArg::buffer`] over `u32` words).
    pub fn from_slice<T: Element>(data: &'a mut [T]) -> Self {
        let len = std::mem::size_of_val(data);
        // SAFETY: `T` is one of the plain numeric types above: no padding, and every
        // bit pattern is a valid `T` and a valid `[u8]`. The byte slice covers exactly
        // the memory of `data` and inherits its exclusive borrow for `'a`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), len) };
        CpuArg::Buffer {
            elem: T::TYPE,
            data: bytes,
        }
    }
}

/// A launch argument as a raw pointer, for callers whose buffers are not `&mut [u8]`
/// (e.g. pooled device storage); see [`CpuKernel::launch_raw`].
#[derive(Clone, Copy, Debug)]
pub enum RawArg {
    /// `bytes` bytes at `ptr`, in the kernel ABI's layout for the parameter's element
    /// type.
    Buffer { ptr: *mut u8, bytes: usize },
    /// A uniform scalar.
    Scalar(Scalar),
}

/// An argument after binding: a buffer (with its element type when the caller said
/// it) or a scalar.
#[derive(Clone, Copy)]
enum Bound {
    Buffer {
        elem: Option<ScalarType>,
        ptr: *mut u8,
        bytes: usize,
    },
    Scalar(Scalar),
}

/// Why a launch did not run, or what went wrong while it ran.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LaunchError {
    /// An argument does not fit its parameter (count, kind, type, byte length).
    #[error(transparent)]
    Arg(#[from] kernelc_ir::args::ArgError),
    #[error(
        "kernel `{kernel}`: buffer argument {index} (`{param}`) is not aligned to {align} bytes"
    )]
    ArgMisaligned {
        kernel: String,
        index: usize,
        param: String,
        align: usize,
    },
    #[error("kernel `{kernel}`: grid {grid:?} of workgroups of size {workgroup_size:?} has global ids beyond u32")]
    GridTooLarge {
        kernel: String,
        grid: [u32; 3],
        workgroup_size: [u32; 3],
    },
    // The four run-time errors. `workgroup` is the failing workgroup of lowest linear
    // index and `status` every status bit it raised: a kernel carries on after an
    // error, so there may be several, and the variant names the first of them in this
    // order (out of bounds, unaligned, division by zero, shift).
    /// An access was out of bounds (it was skipped).
    #[error(
        "kernel `{kernel}`, workgroup {workgroup:?}: an access was out of bounds (it was skipped)"
    )]
    OutOfBounds {
        kernel: String,
        workgroup: [u32; 3],
        status: u32,
    },
    /// A vector access at an unaligned index (it was skipped).
    #[error("kernel `{kernel}`, workgroup {workgroup:?}: a vector access at an index that is not a multiple of its lanes (it was skipped)")]
    UnalignedAccess {
        kernel: String,
        workgroup: [u32; 3],
        status: u32,
    },
    /// Integer division or remainder by zero (the result was 0).
    #[error("kernel `{kernel}`, workgroup {workgroup:?}: integer division by zero")]
    DivisionByZero {
        kernel: String,
        workgroup: [u32; 3],
        status: u32,
    },
    /// A shift by the bit width or more.
    #[error("kernel `{kernel}`, workgroup {workgroup:?}: shift by the bit width or more")]
    ShiftOverflow {
        kernel: String,
        workgroup: [u32; 3],
        status: u32,
    },
}

impl LaunchError {
    /// The status bits of a run-time error (every one the failing workgroup raised);
    /// 0 for an error found before the launch ran.
    pub fn status(&self) -> u32 {
        match self {
            LaunchError::Arg(_)
            | LaunchError::ArgMisaligned { .. }
            | LaunchError::GridTooLarge { .. } => 0,
            LaunchError::OutOfBounds { status, .. }
            | LaunchError::UnalignedAccess { status, .. }
            | LaunchError::DivisionByZero { status, .. }
            | LaunchError::ShiftOverflow { status, .. } => *status,
        }
    }
}

/// A JIT-compiled kernel, ready to launch. `Send + Sync`: launches may run
/// concurrently from several threads.
pub struct CpuKernel {
    /// Owns the executable memory of `func`; freed on drop.
    module: Option<Code>,
    func: KernelFn,
    name: String,
    params: Vec<Param>,
    workgroup_size: [u32; 3],
    shared_bytes: usize,
}

impl std::fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuKernel")
            .field("name", &self.name)
            .field("workgroup_size", &self.workgroup_size)
            .field("shared_bytes", &self.shared_bytes)
            .finish_non_exhaustive()
    }
}

/// Whose memory a kernel's function is in: a tier's loaded code.
enum Code {
    Cranelift(Box<Mutex<JITModule>>),
    /// Freed by its own drop.
    #[cfg(feature = "ptx")]
    #[allow(dead_code)] // Held for its drop.
    Llvm(super::llvm::Loaded),
}

impl Drop for CpuKernel {
    fn drop(&mut self) {
        if let Some(Code::Cranelift(module)) = self.module.take() {
            let module = (*module).into_inner().unwrap_or_else(|e| e.into_inner());
            // SAFETY: `func` points into this module's memory and is only called by
            // `launch`, which borrows `self` and joins its threads before returning;
            // `raw_function` documents that its result dies with `self`. Nothing can
            // call into the module after this point.
            unsafe { module.free_memory() };
        }
    }
}

impl CpuKernel {
    /// A kernel of the LLVM tier: `func` lives in `loaded`, its shared arrays take
    /// `shared_bytes`.
    #[cfg(feature = "ptx")]
    pub(crate) fn from_llvm(
        loaded: super::llvm::Loaded,
        func: KernelFn,
        kernel: &Kernel,
        shared_bytes: usize,
    ) -> Self {
        CpuKernel {
            module: Some(Code::Llvm(loaded)),
            func,
            name: kernel.name.clone(),
            params: kernel.params.clone(),
            workgroup_size: kernel.workgroup_size,
            shared_bytes,
        }
    }

    pub(crate) fn new(module: JITModule, func: KernelFn, kernel: &Kernel) -> Self {
        let (_, shared) = crate::abi::cpu_shared_layout(kernel);
        CpuKernel {
            module: Some(Code::Cranelift(Box::new(Mutex::new(module)))),
            func,
            name: kernel.name.clone(),
            params: kernel.params.clone(),
            workgroup_size: kernel.workgroup_size,
            // `check_supported` bounds it by 1 GiB.
            shared_bytes: shared as usize,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn workgroup_size(&self) -> [u32; 3] {
        self.workgroup_size
    }

    /// Bytes of shared scratch one call needs.
    pub fn shared_bytes(&self) -> usize {
        self.shared_bytes
    }

    /// The compiled function (see the ABI in [`crate::cpu`]). It is valid only while
    /// `self` is alive; calling it is up to the caller's `unsafe` and the ABI's rules.
    pub fn raw_function(&self) -> KernelFn {
        self.func
    }

    /// Runs the kernel over `grid` workgroups on all cores (see [`Self::launch_with_threads`]).
    pub fn launch(&self, grid: [u32; 3], args: &mut [CpuArg<'_>]) -> Result<(), LaunchError> {
        let threads = launch_threads();
        self.launch_with_threads(grid, args, threads)
    }

    /// Runs the kernel over `grid` workgroups on up to `threads` threads (the calling
    /// thread included). Every argument is checked against the parameters first; then
    /// threads take chunks of workgroups from a shared counter, each with its own
    /// shared-memory scratch. A workgroup that reports an error stops the launch; the
    /// error names that workgroup (with several errors, one of them).
    pub fn launch_with_threads(
        &self,
        grid: [u32; 3],
        args: &mut [CpuArg<'_>],
        threads: usize,
    ) -> Result<(), LaunchError> {
        let bound: Vec<Bound> = args
            .iter_mut()
            .map(|a| match a {
                CpuArg::Buffer { elem, data } => Bound::Buffer {
                    elem: Some(*elem),
                    ptr: data.as_mut_ptr(),
                    bytes: data.len(),
                },
                CpuArg::Scalar(s) => Bound::Scalar(*s),
            })
            .collect();
        self.check_args(&bound)?;
        // SAFETY: every buffer pointer comes from a `&mut [u8]` that `args` borrows
        // exclusively for this call, so it is valid for its length and nothing else
        // touches it until we return; `check_args` verified sizes and alignment.
        unsafe { self.run_checked(grid, &bound, threads) }
    }

    /// [`Self::launch`] with raw buffer pointers. The arguments are checked as in
    /// `launch` (count, kinds, scalar types, byte lengths, alignment), except the
    /// element type of a buffer, which a raw pointer does not carry.
    ///
    /// # Safety
    ///
    /// Every `RawArg::Buffer` pointer must be valid for reads and writes of `bytes`
    /// bytes for the whole call. While the call runs, nothing else may write those
    /// bytes, and nothing else may read the bytes of a buffer the kernel writes
    /// (parameters with write access). Buffers may not overlap unless the kernel only
    /// reads all of them.
    pub unsafe fn launch_raw(&self, grid: [u32; 3], args: &[RawArg]) -> Result<(), LaunchError> {
        let threads = launch_threads();
        let bound: Vec<Bound> = args
            .iter()
            .map(|a| match *a {
                RawArg::Buffer { ptr, bytes } => Bound::Buffer {
                    elem: None,
                    ptr,
                    bytes,
                },
                RawArg::Scalar(s) => Bound::Scalar(s),
            })
            .collect();
        self.check_args(&bound)?;
        // SAFETY: the caller guarantees the pointers' validity and exclusivity (this
        // function's contract); `check_args` verified sizes and alignment.
        unsafe { self.run_checked(grid, &bound, threads) }
    }

    /// Runs checked arguments over the grid.
    ///
    /// # Safety
    ///
    /// `args` passed `check_args`, and every buffer pointer is valid for its bytes and
    /// not accessed by anything else (but reads of read-only buffers) during the call.
    unsafe fn run_checked(
        &self,
        grid: [u32; 3],
        args: &[Bound],
        threads: usize,
    ) -> Result<(), LaunchError> {
        let total = self.check_grid(grid)?;
        if total == 0 {
            return Ok(());
        }
        let buffers: Vec<*mut u8> = args
            .iter()
            .map(|a| match a {
                Bound::Buffer { ptr, .. } => *ptr,
                Bound::Scalar(_) => std::ptr::null_mut(),
            })
            .collect();
        let scalars: Vec<u64> = args
            .iter()
            .map(|a| match a {
                Bound::Scalar(s) => encode_scalar(*s),
                Bound::Buffer { .. } => 0,
            })
            .collect();
        let threads = threads.clamp(1, total.min(1024) as usize);
        let job = Job {
            func: self.func,
            buffers: buffers.as_ptr(),
            scalars: scalars.as_ptr(),
            grid,
            total,
            chunk: (total / (threads as u64 * 8)).max(1),
            shared_words: self.shared_bytes.div_ceil(16),
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
        };
        let pool = launch_pool().filter(|_| threads > 1);
        if let Some(pool) = pool {
            // A pool of persistent workers private to kernel launches, so a launch
            // spawns no threads, and no caller's code ever runs on (or blocks) a thread
            // a launch waits for; the caller takes one share itself.
            pool.in_place_scope(|s| {
                for _ in 1..threads {
                    s.spawn(|_| job.work());
                }
                job.work();
            });
        } else {
            job.work();
        }
        let error = *job.error.lock().unwrap_or_else(|e| e.into_inner());
        match error {
            None => Ok(()),
            Some((_, bits, workgroup)) => Err(self.fault(bits, workgroup)),
        }
    }

    /// Runs the kernel on interpreter-style arguments: buffers are encoded, launched and
    /// decoded back into `args` (also after a run-time error). For tests and for
    /// comparing with `kernelc_ir::interp::run`.
    pub fn launch_host(&self, grid: [u32; 3], args: &mut [Arg]) -> Result<(), LaunchError> {
        let mut storage: Vec<Option<(ScalarType, AlignedBytes)>> = args
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => Some((b.elem, AlignedBytes::from_host(b))),
                Arg::Scalar(_) => None,
            })
            .collect();
        let mut cpu_args: Vec<CpuArg<'_>> = storage
            .iter_mut()
            .zip(args.iter())
            .map(|(st, a)| match (st, a) {
                (Some((elem, bytes)), _) => CpuArg::buffer(*elem, bytes.as_mut_bytes()),
                (None, Arg::Scalar(s)) => CpuArg::Scalar(*s),
                // `storage` has a buffer exactly where `args` has one.
                (None, Arg::Buffer(b)) => CpuArg::Scalar(Scalar::zero(b.elem)),
            })
            .collect();
        let result = self.launch(grid, &mut cpu_args);
        drop(cpu_args);
        for (st, a) in storage.iter().zip(args.iter_mut()) {
            if let (Some((elem, bytes)), Arg::Buffer(b)) = (st, a) {
                *b = bytes.to_host(*elem);
            }
        }
        result
    }

    fn check_args(&self, args: &[Bound]) -> Result<(), LaunchError> {
        let shapes: Vec<ArgShape> = args
            .iter()
            .map(|a| match *a {
                Bound::Buffer { elem, bytes, .. } => ArgShape::Buffer {
                    elem,
                    len: bytes as u64,
                },
                Bound::Scalar(s) => ArgShape::Scalar(s.ty()),
            })
            .collect();
        check_args(&self.name, &self.params, &shapes, "bytes", |e| {
            e.size_bytes() as u64
        })?;
        // Raw memory must also be aligned for its element type.
        for (index, (param, arg)) in self.params.iter().zip(args).enumerate() {
            if let (Param::Buffer { elem, .. }, Bound::Buffer { ptr, .. }) = (param, *arg) {
                let align = elem.size_bytes() as usize;
                if ptr.is_null() || ptr as usize % align != 0 {
                    return Err(LaunchError::ArgMisaligned {
                        kernel: self.name.clone(),
                        index,
                        param: param.name().to_string(),
                        align,
                    });
                }
            }
        }
        Ok(())
    }

    /// Global ids are u32: `grid * workgroup_size` must not pass 2^32 on any axis.
    /// The number of workgroups of `grid`, if every global id fits a u32 and the
    /// count a u64.
    fn check_grid(&self, grid: [u32; 3]) -> Result<u64, LaunchError> {
        let wg = self.workgroup_size;
        let ids_fit = (0..3).all(|a| grid[a] as u64 * wg[a] as u64 <= 1u64 << 32);
        let total = grid
            .iter()
            .try_fold(1u64, |acc, &g| acc.checked_mul(g as u64));
        match total {
            Some(total) if ids_fit => Ok(total),
            _ => Err(LaunchError::GridTooLarge {
                kernel: self.name.clone(),
                grid,
                workgroup_size: wg,
            }),
        }
    }

    fn fault(&self, bits: u32, workgroup: [u32; 3]) -> LaunchError {
        let kernel = self.name.clone();
        if bits & status::OUT_OF_BOUNDS != 0 {
            LaunchError::OutOfBounds {
                kernel,
                workgroup,
                status: bits,
            }
        } else if bits & status::UNALIGNED != 0 {
            LaunchError::UnalignedAccess {
                kernel,
                workgroup,
                status: bits,
            }
        } else if bits & status::DIVISION_BY_ZERO != 0 {
            LaunchError::DivisionByZero {
                kernel,
                workgroup,
                status: bits,
            }
        } else {
            LaunchError::ShiftOverflow {
                kernel,
                workgroup,
                status: bits,
            }
        }
    }
}

/// One launch, shared by its threads.
struct Job {
    func: KernelFn,
    buffers: *const *mut u8,
    scalars: *const u64,
    grid: [u32; 3],
    total: u64,
    chunk: u64,
    shared_words: usize,
    next: AtomicU64,
    stop: AtomicBool,
    /// The failing workgroup with the lowest linear index seen: (index, status, id).
    error: Mutex<Option<(u64, u32, [u32; 3])>>,
}

// SAFETY: the raw pointers point to the argument arrays of `run_checked`,
// which outlive the scoped threads and are only read; the buffer pointers inside are
// handed to the kernel, whose contract (no two invocations write one element, or read
// what another writes) keeps the threads' accesses disjoint. Everything else is
// atomic or behind a mutex.
unsafe impl Sync for Job {}

impl Job {
    fn work(&self) {
        let mut scratch = vec![0u128; self.shared_words];
        let shared = scratch.as_mut_ptr().cast::<u8>();
        let (gx, gy) = (self.grid[0] as u64, self.grid[1] as u64);
        while !self.stop.load(Ordering::Relaxed) {
            let start = self.next.fetch_add(self.chunk, Ordering::Relaxed);
            if start >= self.total {
                return;
            }
            let end = (start + self.chunk).min(self.total);
            for linear in start..end {
                let id = [
                    (linear % gx) as u32,
                    ((linear / gx) % gy) as u32,
                    (linear / (gx * gy)) as u32,
                ];
                // SAFETY: `func` is a live compiled kernel (its `CpuKernel` is borrowed
                // for the launch). `buffers`/`scalars` have one slot per parameter, and
                // `check_args` verified every buffer's size, type and alignment, so the
                // kernel's checked accesses stay inside them. `id` and `grid` are 3
                // u32s. `shared` points to `shared_words * 16 >= shared_bytes`
                // writable, 16-byte-aligned bytes owned by this thread alone.
                let bits = unsafe {
                    (self.func)(
                        self.buffers,
                        self.scalars,
                        id.as_ptr(),
                        self.grid.as_ptr(),
                        shared,
                    )
                };
                if bits != 0 {
                    self.fail(linear, bits, id);
                    return;
                }
            }
        }
    }

    fn fail(&self, linear: u64, bits: u32, id: [u32; 3]) {
        self.stop.store(true, Ordering::Relaxed);
        let mut error = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if error.is_none_or(|(l, _, _)| linear < l) {
            *error = Some((linear, bits, id));
        }
    }
}

/// Threads a launch uses: the count `KERNELC_THREADS` names, else the host's
/// parallelism; read once (the host query reads cgroup and affinity state, which
/// costs microseconds per call). A value that names no positive count leaves the
/// host's here; the runtime reports it ([`threads_from_env`]).
pub fn launch_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        threads_from_env()
            .ok()
            .flatten()
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// The thread count `KERNELC_THREADS` names (`None`: unset), or the error saying
/// what it holds instead of a positive count.
pub fn threads_from_env() -> Result<Option<usize>, String> {
    parse_threads(std::env::var_os("KERNELC_THREADS"))
}

fn parse_threads(value: Option<std::ffi::OsString>) -> Result<Option<usize>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.to_str().map(|v| v.trim().parse::<usize>()) {
        Some(Ok(n)) if n > 0 => Ok(Some(n)),
        _ => Err(format!(
            "KERNELC_THREADS={value:?}: expected a positive number of threads"
        )),
    }
}

/// The workers of kernel launches (one fewer than `launch_threads`: the caller works
/// too). Private, so user code (which may hold runtime locks, or itself run on
/// rayon's global pool) never occupies them. Built once; if the OS refuses the
/// threads, launches run on the caller alone.
fn launch_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let workers = launch_threads().saturating_sub(1).max(1);
        rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("kernelc-cpu-{i}"))
            .build()
            .map_err(|e| report_no_workers(&e))
            .ok()
    })
    .as_ref()
}

/// Reports that the launch workers could not start (launches then run on the caller).
fn report_no_workers(e: &rayon::ThreadPoolBuildError) {
    eprintln!("kernelc: cannot start the CPU launch workers ({e}); launches run on one thread");
}

#[cfg(test)]
mod tests {
    use super::parse_threads;
    use std::ffi::OsString;

    #[test]
    fn kernelc_threads_names_a_positive_count_or_is_refused() {
        let parse = |v: &str| parse_threads(Some(OsString::from(v)));
        assert_eq!(parse_threads(None), Ok(None));
        assert_eq!(parse("3"), Ok(Some(3)));
        assert_eq!(parse(" 16 "), Ok(Some(16)));
        for bad in ["0", "-1", "two", "", "1.5"] {
            let e = parse(bad).expect_err(bad);
            assert!(
                e.contains("KERNELC_THREADS") && e.contains("positive"),
                "{e}"
            );
        }
    }
}
