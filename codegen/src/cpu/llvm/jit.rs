//! Loading LLVM-compiled object code into this process: one ORC `LLJIT` for the
//! process (thread-safe), each kernel's object added under its own resource tracker
//! (removed, and its memory freed, when the kernel is dropped). Symbols the object
//! imports resolve against the process (`memset`, `memcpy`, which LLVM may call for
//! loops it recognises) or against kernelc's own bf16 roundings (compiler-rt's names).

use super::backend;
use crate::CodegenError;
use inkwell::llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy;
use inkwell::llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use inkwell::llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcCreateLLJITBuilder, LLVMOrcLLJITAddObjectFileWithRT,
    LLVMOrcLLJITGetGlobalPrefix, LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup,
    LLVMOrcLLJITMangleAndIntern, LLVMOrcLLJITRef,
};
use inkwell::llvm_sys::orc2::{
    LLVMJITEvaluatedSymbol, LLVMJITSymbolFlags, LLVMJITSymbolGenericFlags, LLVMOrcAbsoluteSymbols,
    LLVMOrcCSymbolMapPair, LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess,
    LLVMOrcJITDylibAddGenerator, LLVMOrcJITDylibCreateResourceTracker, LLVMOrcJITDylibDefine,
    LLVMOrcReleaseResourceTracker, LLVMOrcResourceTrackerRef, LLVMOrcResourceTrackerRemove,
};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

/// The process's JIT. `LLJIT` is thread-safe; the pointer is never freed (it lives as
/// long as the process, as the code it holds may).
struct Jit(LLVMOrcLLJITRef);

// SAFETY: ORC's `LLJIT` may be used from any thread and from several at once (its
// execution session serialises what needs it); the pointer is never freed.
unsafe impl Send for Jit {}
// SAFETY: as above.
unsafe impl Sync for Jit {}

static JIT: OnceLock<Result<Jit, String>> = OnceLock::new();

/// The message of an LLVM error (consumed), or `None` for success.
fn take_error(err: LLVMErrorRef) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: `err` is a live error LLVM handed us; getting its message consumes it,
    // and the message is a NUL-terminated string we free exactly once after copying.
    unsafe {
        let msg = LLVMGetErrorMessage(err);
        let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(msg);
        Some(text)
    }
}

fn create() -> Result<Jit, String> {
    let mut jit: LLVMOrcLLJITRef = std::ptr::null_mut();
    // SAFETY: the builder is consumed by `LLVMOrcCreateLLJIT`; `jit` is written on
    // success. The generator is handed to the main JITDylib, which owns it after.
    unsafe {
        let builder = LLVMOrcCreateLLJITBuilder();
        if let Some(e) = take_error(LLVMOrcCreateLLJIT(&mut jit, builder)) {
            return Err(format!("creating the JIT: {e}"));
        }
        let mut generator = std::ptr::null_mut();
        let prefix = LLVMOrcLLJITGetGlobalPrefix(jit);
        let err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
            &mut generator,
            prefix,
            None,
            std::ptr::null_mut(),
        );
        if let Some(e) = take_error(err) {
            return Err(format!("resolving the process's symbols: {e}"));
        }
        LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit), generator);
        define_runtime_symbols(jit)?;
    }
    Ok(Jit(jit))
}

/// compiler-rt's f32/f64 → bf16 roundings (`__truncsfbf2`, `__truncdfbf2`), which
/// LLVM calls on a host without bf16 instructions (or with only flushing ones, which
/// this tier leaves out). Its ABI returns the `__bf16` in the low 16 bits of the
/// first SSE register, where an `f32` result goes.
extern "C" fn trunc_sf_bf2(x: f32) -> f32 {
    trunc_df_bf2(f64::from(x))
}

/// See [`trunc_sf_bf2`]; one rounding to nearest even, as the interpreter's.
extern "C" fn trunc_df_bf2(x: f64) -> f32 {
    let bits = kernelc_ir::Scalar::from_f64(kernelc_ir::ScalarType::Bf16, x).to_bits();
    f32::from_bits(bits as u32)
}

/// Defines the [`trunc_sf_bf2`] symbols in the main JITDylib.
///
/// # Safety
/// `jit` is a live LLJIT.
unsafe fn define_runtime_symbols(jit: LLVMOrcLLJITRef) -> Result<(), String> {
    let symbols: [(&CStr, usize); 2] = [
        (
            c"__truncsfbf2",
            trunc_sf_bf2 as extern "C" fn(f32) -> f32 as usize,
        ),
        (
            c"__truncdfbf2",
            trunc_df_bf2 as extern "C" fn(f64) -> f32 as usize,
        ),
    ];
    // SAFETY: the caller's `jit` is live; the names are NUL-terminated literals, the
    // addresses those of functions with the C ABI that live as long as the process.
    // `LLVMOrcAbsoluteSymbols` takes the interned names, and the JITDylib takes the
    // materialization unit.
    unsafe {
        let mut pairs: Vec<LLVMOrcCSymbolMapPair> = symbols
            .iter()
            .map(|(name, address)| LLVMOrcCSymbolMapPair {
                Name: LLVMOrcLLJITMangleAndIntern(jit, name.as_ptr()),
                Sym: LLVMJITEvaluatedSymbol {
                    Address: *address as u64,
                    Flags: LLVMJITSymbolFlags {
                        GenericFlags: LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported
                            as u8,
                        TargetFlags: 0,
                    },
                },
            })
            .collect();
        let unit = LLVMOrcAbsoluteSymbols(pairs.as_mut_ptr(), pairs.len());
        let err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(jit), unit);
        match take_error(err) {
            Some(e) => Err(format!("defining the bf16 roundings: {e}")),
            None => Ok(()),
        }
    }
}

fn jit() -> Result<&'static Jit, CodegenError> {
    JIT.get_or_init(create).as_ref().map_err(backend)
}

/// A resource tracker: the handle of one object's code in the JIT.
struct Tracker(LLVMOrcResourceTrackerRef);

// SAFETY: a resource tracker is a handle the JIT's session synchronises; it is used
// (removed) only under `LOADED`'s lock, from whichever thread drops the last user.
unsafe impl Send for Tracker {}

/// The objects loaded now, by symbol: their tracker, entry address and users. One
/// symbol is loaded once however many kernels use it (the JIT has one namespace), and
/// every load and unload happens under this lock.
static LOADED: Mutex<BTreeMap<String, (Tracker, usize, usize)>> = Mutex::new(BTreeMap::new());

/// One user of a loaded object; the object is unloaded (its memory freed) when the
/// last user drops.
pub(crate) struct Loaded {
    symbol: String,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = loaded.get_mut(&self.symbol) else {
            return;
        };
        entry.2 -= 1;
        if entry.2 > 0 {
            return;
        }
        if let Some((tracker, _, _)) = loaded.remove(&self.symbol) {
            // SAFETY: the tracker was created by `load` and is removed and released
            // once, here; no kernel calls its code any more (this was the last user,
            // and launches borrow their kernel).
            unsafe {
                // A failure to free leaks the code's memory; nothing else can go wrong.
                let _ = take_error(LLVMOrcResourceTrackerRemove(tracker.0));
                LLVMOrcReleaseResourceTracker(tracker.0);
            }
        }
    }
}

/// Loads `object` (a relocatable object for the host exporting `entry`) unless an
/// object exporting `entry` is loaded already (equal symbols name equal code: the
/// caller derives them from the kernel and the host), and returns the address of
/// `entry` with a handle that keeps it loaded.
pub(crate) fn load(object: &[u8], entry: &str) -> Result<(Loaded, usize), CodegenError> {
    let jit = jit()?;
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = loaded.get_mut(entry) {
        existing.2 += 1;
        let addr = existing.1;
        return Ok((
            Loaded {
                symbol: entry.to_string(),
            },
            addr,
        ));
    }
    let name = CString::new(entry).map_err(|_| backend("a symbol name holds a NUL byte"))?;
    let buffer_name = c"kernelc-kernel";
    // SAFETY: the main JITDylib lives as long as the JIT (forever); the tracker is
    // released when its last user drops (or here, on failure). The memory buffer is a
    // copy of `object`, owned by the JIT once added. `addr` is written on success.
    unsafe {
        let dylib = LLVMOrcLLJITGetMainJITDylib(jit.0);
        let tracker = LLVMOrcJITDylibCreateResourceTracker(dylib);
        let unload = |why: String| {
            let _ = take_error(LLVMOrcResourceTrackerRemove(tracker));
            LLVMOrcReleaseResourceTracker(tracker);
            backend(why)
        };
        let buffer = LLVMCreateMemoryBufferWithMemoryRangeCopy(
            object.as_ptr().cast(),
            object.len(),
            buffer_name.as_ptr(),
        );
        if let Some(e) = take_error(LLVMOrcLLJITAddObjectFileWithRT(jit.0, tracker, buffer)) {
            return Err(unload(format!("loading the object: {e}")));
        }
        let mut addr = 0u64;
        if let Some(e) = take_error(LLVMOrcLLJITLookup(jit.0, &mut addr, name.as_ptr())) {
            return Err(unload(format!("linking `{entry}`: {e}")));
        }
        if addr == 0 {
            return Err(unload(format!("`{entry}` has no address")));
        }
        let addr = addr as usize;
        loaded.insert(entry.to_string(), (Tracker(tracker), addr, 1));
        Ok((
            Loaded {
                symbol: entry.to_string(),
            },
            addr,
        ))
    }
}
