//! The mutable memory model: untyped device [`Buffer`]s, typed [`View`]s onto them,
//! partial copies and fills, and ops run into caller-given outputs
//! ([`Runtime::run_into`]).
//!
//! Invariants:
//! - A view lies inside its buffer and starts at a multiple of its element size
//!   ([`View::new`] checks: a `u8` view may start at any byte); its elements are dense
//!   and row-major.
//! - Every call that touches a buffer's bytes (reads, writes, copies, fills, ops run
//!   into views) holds the runtime's memory lock, so calls on buffers are serialised
//!   and a launch never races a host access.
//! - An output view overlaps no other view of the call, except the input that the
//!   spec's `aliases()` updates in place, which it must equal exactly; that input is
//!   read through a copy, so no kernel reads memory it is writing.
//! - Offsets never reach a kernel or a cache key: devices bind a view's range (a device
//!   pointer plus offset on cpu and CUDA, a binding range on wgpu; a range wgpu cannot
//!   bind is staged through a copy). Only whether every view is 16-byte aligned
//!   selects the plan (whole vectors, or one-word vectors), since vector loads rely on
//!   it.

use crate::device::{BindingRef, Slice, Storage};
use crate::element::{bytes_to_f64, device_bytes, read_elements, Element};
use crate::error::{Result, RuntimeError};
use crate::runtime::{check_operands, Role, Runtime};
use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{OpSpec, TensorSig};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// An untyped allocation on a runtime's device. Clones share the allocation; it is
/// freed when the last clone (and every view of it) is dropped.
#[derive(Clone)]
pub struct Buffer {
    pub(crate) storage: Arc<Storage>,
}

impl Buffer {
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `other` is the same allocation.
    pub fn same(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// A view of `shape` elements of `dtype` from byte `offset` (see [`View::new`]).
    pub fn view(&self, offset: usize, dtype: ScalarType, shape: &[usize]) -> Result<View> {
        View::new(self, offset, dtype, shape)
    }

    /// The device this buffer lives on.
    pub fn device_name(&self) -> String {
        self.storage.device_name()
    }

    /// `len` bytes from `offset`, or the typed error saying how they miss the buffer.
    pub(crate) fn check_range(&self, what: &str, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(RuntimeError::OutOfRange {
                what: what.to_string(),
                offset: offset as u64,
                bytes: len as u64,
                buffer_bytes: self.len() as u64,
            }),
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({} bytes, {})", self.len(), self.device_name())
    }
}

/// Dense row-major elements of one dtype inside a [`Buffer`], from a byte offset.
#[derive(Clone)]
pub struct View {
    buffer: Buffer,
    offset: usize,
    dtype: ScalarType,
    shape: Vec<usize>,
}

impl View {
    /// A view of `shape` elements of `dtype` starting `offset` bytes into `buffer`.
    /// Errors: [`RuntimeError::Misaligned`] unless `offset` is a multiple of the
    /// element size (what every device's loads of one element need; a device that
    /// binds only aligned ranges, wgpu, stages other views through a copy),
    /// [`RuntimeError::OutOfRange`] unless the elements fit inside the buffer.
    pub fn new(buffer: &Buffer, offset: usize, dtype: ScalarType, shape: &[usize]) -> Result<View> {
        let alignment = dtype.size_bytes() as usize;
        if offset % alignment != 0 {
            return Err(RuntimeError::Misaligned {
                what: format!("a {dtype} view"),
                offset: offset as u64,
                alignment: alignment as u64,
            });
        }
        let bytes = shape
            .iter()
            .try_fold(dtype.size_bytes() as usize, |acc, &d| acc.checked_mul(d));
        let what = format!("a {dtype} view of shape {shape:?}");
        let bytes = bytes.ok_or_else(|| RuntimeError::OutOfRange {
            what: what.clone(),
            offset: offset as u64,
            bytes: u64::MAX,
            buffer_bytes: buffer.len() as u64,
        })?;
        buffer.check_range(&what, offset, bytes)?;
        Ok(View {
            buffer: buffer.clone(),
            offset,
            dtype,
            shape: shape.to_vec(),
        })
    }

    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Where the view starts, in bytes from the buffer's start.
    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn dtype(&self) -> ScalarType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Its size in bytes.
    pub fn byte_len(&self) -> usize {
        self.numel() * self.dtype.size_bytes() as usize
    }

    fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.byte_len()
    }

    /// Whether the two views share a byte (empty views share none).
    pub fn overlaps(&self, other: &View) -> bool {
        let (a, b) = (self.range(), other.range());
        self.buffer.same(&other.buffer) && a.start < b.end && b.start < a.end
    }

    /// The same elements of the same buffer.
    fn same_range(&self, other: &View) -> bool {
        self.buffer.same(&other.buffer) && self.range() == other.range()
    }

    pub(crate) fn slice(&self) -> Slice<'_> {
        Slice {
            storage: &self.buffer.storage,
            offset: self.offset,
            bytes: self.byte_len(),
        }
    }
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "View({:?}, {}, +{} of {:?})",
            self.shape, self.dtype, self.offset, self.buffer
        )
    }
}

/// The largest power of two up to [`FULL_ALIGNMENT`] dividing `offset` (a byte offset
/// or an address): what a plan's vector accesses may rely on.
pub(crate) fn alignment_class(offset: usize) -> usize {
    if offset == 0 {
        FULL_ALIGNMENT
    } else {
        (1usize << offset.trailing_zeros()).min(FULL_ALIGNMENT)
    }
}

/// The alignment of an allocation's start, which plans assume unless told less (the
/// widest vector access: 4 f32 lanes).
pub(crate) const FULL_ALIGNMENT: usize = 16;

/// A buffer argument of one op call, and how it reaches the kernels: the view itself,
/// or a temporary copy of it (staged) when the device cannot bind the view's range or
/// the view is also written by the call.
pub(crate) struct Bound<'v> {
    view: &'v View,
    pub(crate) staged: Option<Storage>,
}

impl Bound<'_> {
    /// Copies a staged output back into its view (nothing when it was bound in place).
    pub(crate) fn write_back(&self) -> Result<()> {
        match &self.staged {
            Some(staged) => {
                let v = self.view;
                Storage::copy_range(staged, 0, &v.buffer.storage, v.offset, v.byte_len())
            }
            None => Ok(()),
        }
    }

    pub(crate) fn binding(&self) -> BindingRef<'_> {
        BindingRef::Buffer(match &self.staged {
            Some(storage) => Slice::whole(storage),
            None => self.view.slice(),
        })
    }
}

impl Runtime {
    /// A zeroed buffer of `bytes` bytes on this runtime's device.
    pub fn alloc_buffer(&self, bytes: usize) -> Result<Buffer> {
        self.check_buffer_size(bytes)?;
        let storage = self.device.alloc(bytes)?;
        storage.fill_zero()?;
        Ok(Buffer {
            storage: Arc::new(storage),
        })
    }

    /// Writes `data` into `buffer` from byte `offset`.
    pub fn write_buffer(&self, buffer: &Buffer, offset: usize, data: &[u8]) -> Result<()> {
        self.check_owned(buffer)?;
        buffer.check_range("write", offset, data.len())?;
        let _memory = self.lock_memory();
        buffer.storage.write_range(offset, data)
    }

    /// `len` bytes of `buffer` from byte `offset`, once every earlier op is done.
    pub fn read_buffer(&self, buffer: &Buffer, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.check_owned(buffer)?;
        buffer.check_range("read", offset, len)?;
        let _memory = self.lock_memory();
        buffer.storage.read_range(offset, len)
    }

    /// Sets `len` bytes of `buffer` from `offset` to `byte`.
    pub fn fill_buffer(&self, buffer: &Buffer, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check_owned(buffer)?;
        buffer.check_range("fill", offset, len)?;
        let _memory = self.lock_memory();
        buffer.storage.fill_range(offset, len, byte)
    }

    /// Copies `len` bytes from `src` at `src_offset` to `dst` at `dst_offset` on the
    /// device; the ranges may overlap (the result is `memmove`'s).
    pub fn copy_buffer(
        &self,
        src: &Buffer,
        src_offset: usize,
        dst: &Buffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check_owned(src)?;
        self.check_owned(dst)?;
        src.check_range("copy source", src_offset, len)?;
        dst.check_range("copy destination", dst_offset, len)?;
        let _memory = self.lock_memory();
        Storage::copy_range(&src.storage, src_offset, &dst.storage, dst_offset, len)
    }

    /// Writes `data` into `view` (`T` must be the view's dtype and `data` hold its
    /// elements).
    pub fn write_view<T: Element>(&self, view: &View, data: &[T]) -> Result<()> {
        check_element::<T>(view)?;
        if data.len() != view.numel() {
            return Err(RuntimeError::DataLength {
                shape: view.shape.clone(),
                expected: view.numel(),
                found: data.len(),
            });
        }
        self.write_buffer(&view.buffer, view.offset, &device_bytes(data))
    }

    /// The elements of `view` (`T` must be its dtype).
    pub fn read_view<T: Element>(&self, view: &View) -> Result<Vec<T>> {
        check_element::<T>(view)?;
        self.check_owned(&view.buffer)?;
        let _memory = self.lock_memory();
        read_elements(view.numel(), |out| {
            view.buffer.storage.read_range_into(view.offset, out)
        })
    }

    /// The elements of `view` as f64, whatever its dtype.
    pub fn read_view_f64(&self, view: &View) -> Result<Vec<f64>> {
        let bytes = self.read_buffer(&view.buffer, view.offset, view.byte_len())?;
        Ok(bytes_to_f64(view.dtype, &bytes))
    }

    /// Runs one op reading `inputs` and writing its results into `outputs` in place
    /// (in `spec.outputs()` order); nothing else in the output buffers changes. Checked
    /// before anything runs: counts, dtypes and shapes against the spec (as
    /// [`Runtime::run`]), that every view is on this device, and aliasing: an output
    /// may overlap no other output, and an input only when the spec updates that
    /// input in place (`aliases()`) and the two views are the same elements.
    pub fn run_into(&self, spec: &OpSpec, inputs: &[&View], outputs: &[&View]) -> Result<()> {
        spec.validate()?;
        let name = spec.name();
        self.check_views(&name, Role::Input, &spec.inputs(), inputs)?;
        self.check_views(&name, Role::Output, &spec.outputs(), outputs)?;
        check_aliasing(spec, inputs, outputs)?;
        let alignment = inputs
            .iter()
            .chain(outputs)
            .map(|v| alignment_class(v.offset))
            .min()
            .unwrap_or(FULL_ALIGNMENT);
        let prepared = self.prepared(spec, alignment, || Ok(()))?;
        let _memory = self.lock_memory();
        let bound_inputs = inputs
            .iter()
            .map(|v| self.bind_input(v, outputs, 1))
            .collect::<Result<Vec<_>>>()?;
        let bound_outputs = outputs
            .iter()
            .map(|v| self.bind_output(v, 1))
            .collect::<Result<Vec<_>>>()?;
        self.launch_prepared(
            spec,
            &prepared,
            &bound_inputs.iter().map(Bound::binding).collect::<Vec<_>>(),
            &bound_outputs.iter().map(Bound::binding).collect::<Vec<_>>(),
        )?;
        for out in &bound_outputs {
            out.write_back()?;
        }
        Ok(())
    }

    /// An input as the kernels see it: staged through a copy when the device cannot
    /// bind its range or its offset is not a multiple of `alignment`, when the op also
    /// writes it (in place), or when the device forbids binding one buffer read-only
    /// and writable together.
    pub(crate) fn bind_input<'v>(
        &self,
        view: &'v View,
        outputs: &[&View],
        alignment: usize,
    ) -> Result<Bound<'v>> {
        let written = outputs.iter().any(|o| o.overlaps(view));
        let conflicting = self.device.exclusive_writable_bindings()
            && outputs.iter().any(|o| o.buffer.same(&view.buffer));
        let unbindable = !self.bindable(view, alignment);
        if !(written || conflicting || unbindable) {
            return Ok(Bound { view, staged: None });
        }
        Ok(Bound {
            view,
            staged: Some(self.staged_copy(view)?),
        })
    }

    /// Whether the device binds `view` where it is, at an offset that is a multiple
    /// of `alignment` too.
    fn bindable(&self, view: &View, alignment: usize) -> bool {
        view.offset % self.device.binding_alignment().max(alignment) == 0
    }

    /// An output as the kernels see it: staged (copied in, and back after the
    /// launches) when the device cannot bind its range or its offset is not a
    /// multiple of `alignment`.
    pub(crate) fn bind_output<'v>(&self, view: &'v View, alignment: usize) -> Result<Bound<'v>> {
        if self.bindable(view, alignment) {
            return Ok(Bound { view, staged: None });
        }
        Ok(Bound {
            view,
            staged: Some(self.staged_copy(view)?),
        })
    }

    /// A fresh device buffer holding a copy of `view`'s bytes.
    fn staged_copy(&self, view: &View) -> Result<Storage> {
        let storage = self.device.alloc(view.byte_len())?;
        Storage::copy_range(
            &view.buffer.storage,
            view.offset,
            &storage,
            0,
            view.byte_len(),
        )?;
        Ok(storage)
    }

    pub(crate) fn check_owned(&self, buffer: &Buffer) -> Result<()> {
        if self.device.owns(&buffer.storage) {
            Ok(())
        } else {
            Err(RuntimeError::WrongDevice {
                tensor_device: buffer.device_name(),
                runtime_device: self.device_name(),
            })
        }
    }

    /// Views against the spec's signatures of one role.
    fn check_views(&self, op: &str, role: Role, sigs: &[TensorSig], views: &[&View]) -> Result<()> {
        for view in views {
            self.check_owned(&view.buffer)?;
        }
        let described: Vec<_> = views.iter().map(|v| (v.dtype, v.shape())).collect();
        check_operands(op, role, sigs, &described)
    }
}

/// The aliasing rule of [`Runtime::run_into`].
fn check_aliasing(spec: &OpSpec, inputs: &[&View], outputs: &[&View]) -> Result<()> {
    let (in_sigs, out_sigs) = (spec.inputs(), spec.outputs());
    let aliases = spec.aliases();
    for (o, out) in outputs.iter().enumerate() {
        let overlap = |other: String| RuntimeError::Overlap {
            op: spec.name(),
            output: out_sigs[o].name.clone(),
            other,
        };
        for (p, other) in outputs.iter().enumerate().skip(o + 1) {
            if out.overlaps(other) {
                return Err(overlap(format!("output `{}`", out_sigs[p].name)));
            }
        }
        for (i, input) in inputs.iter().enumerate() {
            let in_place = aliases.iter().any(|a| a.input == i && a.output == o);
            if out.overlaps(input) && !(in_place && out.same_range(input)) {
                return Err(overlap(format!("input `{}`", in_sigs[i].name)));
            }
        }
    }
    Ok(())
}

fn check_element<T: Element>(view: &View) -> Result<()> {
    if T::DTYPE == view.dtype {
        Ok(())
    } else {
        Err(RuntimeError::Dtype {
            expected: view.dtype,
            found: T::DTYPE,
        })
    }
}
