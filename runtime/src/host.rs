//! Ops on host slices ([`Runtime::run_host`]): the caller's `&[T]` inputs and
//! `&mut [T]` outputs. On the CPU device the kernels read and write the slices
//! themselves (no copy); on a GPU each input is uploaded once and each output
//! downloaded once, straight into the caller's slice.

use crate::device::{BindingRef, HostRange};
use crate::element::{as_bytes, as_bytes_mut, AnyBitsElement, Element};
use crate::error::{Result, RuntimeError};
use crate::memory::{alignment_class, FULL_ALIGNMENT};
use crate::runtime::{check_operands, Role, Runtime};
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
    /// Not for `bool` (a kernel or a device copy could leave a byte other than 0 or 1
    /// in it): write a bool result to a tensor and read it with `to_vec::<bool>`.
    pub fn new<T: AnyBitsElement>(data: &'a mut [T], shape: &[usize]) -> Result<HostSliceMut<'a>> {
        check_host_endian()?;
        check_len(shape, data.len())?;
        Ok(HostSliceMut {
            bytes: as_bytes_mut(data),
            dtype: T::DTYPE,
            shape: shape.to_vec(),
        })
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
        if !self.device.is_cpu() {
            // One upload per input (a tensor), the op, and one download per output
            // straight into the caller's slice.
            let tensors = inputs
                .iter()
                .map(|h| self.tensor_from_bytes(&h.shape, h.dtype, h.bytes))
                .collect::<Result<Vec<_>>>()?;
            let results = self.run(spec, &tensors.iter().collect::<Vec<_>>())?;
            let outs: Vec<_> = outputs
                .iter()
                .map(|h| (h.dtype, h.shape.as_slice()))
                .collect();
            check_operands(&spec.name(), Role::Output, &spec.outputs(), &outs)?;
            for (host, tensor) in outputs.iter_mut().zip(&results) {
                tensor.storage.read_range_into(0, host.bytes)?;
            }
            return Ok(());
        }
        let name = spec.name();
        let ins: Vec<_> = inputs
            .iter()
            .map(|h| (h.dtype, h.shape.as_slice()))
            .collect();
        let outs: Vec<_> = outputs
            .iter()
            .map(|h| (h.dtype, h.shape.as_slice()))
            .collect();
        check_operands(&name, Role::Input, &spec.inputs(), &ins)?;
        check_operands(&name, Role::Output, &spec.outputs(), &outs)?;
        let alignment = inputs
            .iter()
            .map(|h| h.bytes.as_ptr())
            .chain(outputs.iter().map(|h| h.bytes.as_ptr()))
            .map(|ptr| alignment_class(ptr as usize))
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
        // The results are the caller's now: like a read, this is a synchronising call
        // (a failed op is reported here, not at some later read).
        self.device.synchronize()
    }
}
