//! Ops on host slices ([`Runtime::run_host`]): the caller's `&[T]` inputs and
//! `&mut [T]` outputs. On the CPU device the kernels read and write the slices
//! themselves (no copy); on a GPU each input is uploaded once and each output
//! downloaded once, straight into the caller's slice.

use crate::device::{BindingRef, HostRange, Slice, Storage};
use crate::element::Element;
use crate::error::{Result, RuntimeError};
use crate::memory::FULL_ALIGNMENT;
use crate::runtime::Runtime;
use kernelc_ir::ScalarType;
use kernelc_kernels::spec::OpSpec;

/// A borrowed host slice of one dtype with a shape.
pub struct HostSlice<'a> {
    bytes: &'a [u8],
    dtype: ScalarType,
    shape: Vec<usize>,
}

/// A mutably borrowed host slice of one dtype with a shape, written by an op.
pub struct HostSliceMut<'a> {
    bytes: &'a mut [u8],
    dtype: ScalarType,
    shape: Vec<usize>,
}

/// `data`'s bytes, which are the device's little-endian element encoding on a
/// little-endian host.
fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` is sealed to plain numeric types (f32, f64, i32, u32, i64,
    // f16, bf16) without padding, so every byte of `data` is initialised; `u8` has
    // alignment 1 and the length covers exactly `data`'s bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; also every bit pattern written through the bytes is a
    // valid value of those types, so no invalid `T` can result.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
    }
}

/// Host slices are the device's byte image only on little-endian hosts.
fn check_host_endian() -> Result<()> {
    if cfg!(target_endian = "little") {
        Ok(())
    } else {
        Err(RuntimeError::BadArgument(
            "host slices need a little-endian host (devices store little-endian); use tensors"
                .into(),
        ))
    }
}

fn check_len(shape: &[usize], found: usize) -> Result<()> {
    let expected = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if expected == Some(found) {
        Ok(())
    } else {
        Err(RuntimeError::DataLength {
            shape: shape.to_vec(),
            expected: expected.unwrap_or(usize::MAX),
            found,
        })
    }
}

impl<'a> HostSlice<'a> {
    /// `data` as a tensor of `shape` (its length must be the shape's element count).
    pub fn new<T: Element>(data: &'a [T], shape: &[usize]) -> Result<HostSlice<'a>> {
        check_host_endian()?;
        check_len(shape, data.len())?;
        Ok(HostSlice {
            bytes: as_bytes(data),
            dtype: T::DTYPE,
            shape: shape.to_vec(),
        })
    }
}

impl<'a> HostSliceMut<'a> {
    /// `data` as an output tensor of `shape` (its length must be the shape's count).
    pub fn new<T: Element>(data: &'a mut [T], shape: &[usize]) -> Result<HostSliceMut<'a>> {
        check_host_endian()?;
        check_len(shape, data.len())?;
        Ok(HostSliceMut {
            bytes: as_bytes_mut(data),
            dtype: T::DTYPE,
            shape: shape.to_vec(),
        })
    }
}

fn whole(storage: &Storage) -> BindingRef<'_> {
    BindingRef::Buffer(Slice::whole(storage))
}

/// The alignment class of host memory at `ptr` (as `View`'s of an offset).
fn alignment_class(ptr: *const u8) -> usize {
    let addr = ptr as usize;
    if addr == 0 {
        FULL_ALIGNMENT
    } else {
        (1usize << addr.trailing_zeros()).min(FULL_ALIGNMENT)
    }
}

impl Runtime {
    /// Runs one op on host slices: reads `inputs`, writes its results into
    /// `outputs` (in `spec.outputs()` order). Operands are checked against the spec as
    /// [`Runtime::run`] checks tensors. On the CPU device the kernels work on the
    /// slices directly; elsewhere through one upload and one download per slice. A
    /// synchronising call: it returns once the results are in `outputs`.
    pub fn run_host(
        &self,
        spec: &OpSpec,
        inputs: &[HostSlice<'_>],
        outputs: &mut [HostSliceMut<'_>],
    ) -> Result<()> {
        spec.validate()?;
        let name = spec.name();
        let described = |d: ScalarType, s: &[usize]| (d, s.to_vec());
        let ins: Vec<_> = inputs
            .iter()
            .map(|h| described(h.dtype, &h.shape))
            .collect();
        let outs: Vec<_> = outputs
            .iter()
            .map(|h| described(h.dtype, &h.shape))
            .collect();
        self.check_operands(&name, true, &spec.inputs(), &ins)?;
        self.check_operands(&name, false, &spec.outputs(), &outs)?;
        if self.device.is_cpu() {
            let alignment = inputs
                .iter()
                .map(|h| alignment_class(h.bytes.as_ptr()))
                .chain(outputs.iter().map(|h| alignment_class(h.bytes.as_ptr())))
                .min()
                .unwrap_or(FULL_ALIGNMENT);
            let prepared = self.prepared(spec, alignment, || Ok(()))?;
            let in_args: Vec<BindingRef<'_>> = inputs
                .iter()
                .map(|h| BindingRef::Host(HostRange::read_only(h.bytes)))
                .collect();
            let out_args: Vec<BindingRef<'_>> = outputs
                .iter_mut()
                .map(|h| BindingRef::Host(HostRange::writable(h.bytes)))
                .collect();
            self.launch_prepared(spec, &prepared, &in_args, &out_args)?;
            // The results are the caller's now: like a read, this is a synchronising
            // call (a failed op is reported here, not at some later read).
            return self.device.synchronize();
        }
        let prepared = self.prepared(spec, FULL_ALIGNMENT, || Ok(()))?;
        let uploaded = inputs
            .iter()
            .map(|h| {
                let storage = self.device.alloc(h.bytes.len())?;
                storage.write_range(0, h.bytes)?;
                Ok(storage)
            })
            .collect::<Result<Vec<Storage>>>()?;
        let results = outputs
            .iter()
            .map(|h| self.device.alloc(h.bytes.len()))
            .collect::<Result<Vec<Storage>>>()?;
        let in_args: Vec<_> = uploaded.iter().map(whole).collect();
        let out_args: Vec<_> = results.iter().map(whole).collect();
        self.launch_prepared(spec, &prepared, &in_args, &out_args)?;
        for (host, storage) in outputs.iter_mut().zip(&results) {
            storage.read_range_into(0, host.bytes)?;
        }
        Ok(())
    }
}
