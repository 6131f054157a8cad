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
use crate::element::{bytes_to_f64, device_bytes, f64_to_bytes, read_elements, Element};
use crate::error::{Result, RuntimeError};
use crate::runtime::{check_operands, Role, Runtime};
use kernelc_ir::ScalarType;
use kernelc_kernels::ops::AsStridedSpec;
use kernelc_kernels::shape::{for_each_index, offset};
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

    /// A strided view (see [`View::strided`]).
    pub fn view_strided(
        &self,
        offset: usize,
        dtype: ScalarType,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<View> {
        View::strided(self, offset, dtype, shape, strides)
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

/// Elements of one dtype inside a [`Buffer`], from a byte offset: dense and row-major,
/// or (made with [`View::strided`]) at any non-negative element strides.
#[derive(Clone)]
pub struct View {
    buffer: Buffer,
    offset: usize,
    dtype: ScalarType,
    shape: Vec<usize>,
    /// Element strides, for a view that is not dense row-major.
    strides: Option<Vec<usize>>,
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
            strides: None,
        })
    }

    /// A view of `shape` elements of `dtype` from byte `offset`, element `i` at
    /// `offset + Σ_d i_d·strides_d` elements (PyTorch's and NumPy's strided views, in
    /// elements; a transposed or sliced tensor, a matrix with a leading dimension).
    /// Errors as [`View::new`], with every element checked inside the buffer; strides
    /// of another rank are [`RuntimeError::BadArgument`]. Ops read and write strided
    /// views through a dense temporary (the `as_strided` op); raw kernels and shader
    /// modules take dense views only.
    pub fn strided(
        buffer: &Buffer,
        offset: usize,
        dtype: ScalarType,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<View> {
        if strides.len() != shape.len() {
            return Err(RuntimeError::BadArgument(format!(
                "{} strides for a view of rank {} (shape {shape:?})",
                strides.len(),
                shape.len()
            )));
        }
        let span = span_elements(shape, strides).ok_or_else(|| RuntimeError::OutOfRange {
            what: format!("a strided {dtype} view of shape {shape:?}"),
            offset: offset as u64,
            bytes: u64::MAX,
            buffer_bytes: buffer.len() as u64,
        })?;
        let mut view = View::new(buffer, offset, dtype, &[span])?;
        view.shape = shape.to_vec();
        let dense = kernelc_kernels::shape::row_major_strides(shape);
        // Dims of extent 1 never step: their stride does not matter.
        let row_major = (0..shape.len()).all(|d| shape[d] <= 1 || strides[d] == dense[d]);
        if !row_major {
            view.strides = Some(strides.to_vec());
        }
        Ok(view)
    }

    /// The same dense elements under `shape` (as many of them): a contiguous reshape,
    /// sharing the memory. A strided view, or another element count, is
    /// [`RuntimeError::BadArgument`].
    pub fn reshaped(&self, shape: &[usize]) -> Result<View> {
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if self.strides.is_some() || count != Some(self.numel()) {
            return Err(RuntimeError::BadArgument(format!(
                "a {} view of shape {:?}{} cannot be reshaped to {shape:?}",
                self.dtype,
                self.shape,
                if self.strides.is_some() {
                    " (strided)"
                } else {
                    ""
                }
            )));
        }
        View::new(&self.buffer, self.offset, self.dtype, shape)
    }

    /// The element strides, for a view that is not dense row-major.
    pub fn strides(&self) -> Option<&[usize]> {
        self.strides.as_deref()
    }

    /// Whether the elements are dense and row-major (what kernels bind).
    pub fn is_dense(&self) -> bool {
        self.strides.is_none()
    }

    /// Elements from the first to one past the last (the numel of a dense view).
    pub(crate) fn span(&self) -> usize {
        match &self.strides {
            Some(s) => span_elements(&self.shape, s).unwrap_or(0),
            None => self.numel(),
        }
    }

    /// The dense 1-D view of the elements this view spans.
    pub(crate) fn span_view(&self) -> View {
        View {
            shape: vec![self.span()],
            strides: None,
            ..self.clone()
        }
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

    /// Its size in bytes: from its first element to one past its last (of a strided
    /// view, gaps included).
    pub fn byte_len(&self) -> usize {
        self.span() * self.dtype.size_bytes() as usize
    }

    fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.byte_len()
    }

    /// Whether the two views share a byte (empty views share none).
    pub fn overlaps(&self, other: &View) -> bool {
        let (a, b) = (self.range(), other.range());
        self.buffer.same(&other.buffer) && a.start < b.end && b.start < a.end
    }

    /// The same elements of the same buffer, in the same order.
    fn same_range(&self, other: &View) -> bool {
        self.buffer.same(&other.buffer)
            && self.range() == other.range()
            && (self.is_dense() && other.is_dense()
                || self.strides == other.strides && self.shape == other.shape)
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
        write!(f, "View({:?}, {}", self.shape, self.dtype)?;
        if let Some(strides) = &self.strides {
            write!(f, ", strides {strides:?}")?;
        }
        write!(f, ", +{} of {:?})", self.offset, self.buffer)
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

/// Elements a strided view spans (`1 + Σ (n_d − 1)·s_d`, 0 when empty), `None` past
/// `usize`.
fn span_elements(shape: &[usize], strides: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().zip(strides).try_fold(1usize, |acc, (&n, &s)| {
        acc.checked_add((n - 1).checked_mul(s)?)
    })
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
        let buffer = self.alloc_uncleared(bytes)?;
        buffer.storage.fill_zero()?;
        Ok(buffer)
    }

    /// A buffer of `bytes` from the device's pool, not cleared: for a user that
    /// writes it whole before reading it (a compiled graph's slots and outputs).
    pub(crate) fn alloc_uncleared(&self, bytes: usize) -> Result<Buffer> {
        self.check_buffer_size(bytes)?;
        Ok(Buffer {
            storage: Arc::new(self.device.alloc(bytes)?),
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
        if let Some(strides) = &view.strides {
            // The elements into their places of the spanned bytes (gaps kept).
            self.check_owned(&view.buffer)?;
            let _memory = self.lock_memory();
            let mut span = view
                .buffer
                .storage
                .read_range(view.offset, view.byte_len())?;
            let bytes = device_bytes(data);
            let size = view.dtype.size_bytes() as usize;
            let mut k = 0;
            for_each_index(&view.shape, |i| {
                let at = offset(i, strides) * size;
                span[at..at + size].copy_from_slice(&bytes[k * size..(k + 1) * size]);
                k += 1;
            });
            return view.buffer.storage.write_range(view.offset, &span);
        }
        self.write_buffer(&view.buffer, view.offset, &device_bytes(data))
    }

    /// The elements of `view` (`T` must be its dtype).
    pub fn read_view<T: Element>(&self, view: &View) -> Result<Vec<T>> {
        check_element::<T>(view)?;
        self.check_owned(&view.buffer)?;
        let _memory = self.lock_memory();
        read_elements(view.numel(), |out| match &view.strides {
            None => view.buffer.storage.read_range_into(view.offset, out),
            Some(strides) => {
                let span = view
                    .buffer
                    .storage
                    .read_range(view.offset, view.byte_len())?;
                let size = view.dtype.size_bytes() as usize;
                let mut k = 0;
                for_each_index(&view.shape, |i| {
                    let at = offset(i, strides) * size;
                    out[k * size..(k + 1) * size].copy_from_slice(&span[at..at + size]);
                    k += 1;
                });
                Ok(())
            }
        })
    }

    /// The elements of `view` as f64, whatever its dtype.
    pub fn read_view_f64(&self, view: &View) -> Result<Vec<f64>> {
        let bytes = self.read_buffer(&view.buffer, view.offset, view.byte_len())?;
        let Some(strides) = &view.strides else {
            return Ok(bytes_to_f64(view.dtype, &bytes));
        };
        let spanned = bytes_to_f64(view.dtype, &bytes);
        let mut values = Vec::with_capacity(view.numel());
        for_each_index(&view.shape, |i| values.push(spanned[offset(i, strides)]));
        Ok(values)
    }

    /// Writes `data` (as f64, converted to the view's dtype as `cast` converts) into a
    /// dense `view`.
    pub fn write_view_f64(&self, view: &View, data: &[f64]) -> Result<()> {
        if data.len() != view.numel() {
            return Err(RuntimeError::DataLength {
                shape: view.shape.clone(),
                expected: view.numel(),
                found: data.len(),
            });
        }
        if view.strides.is_some() {
            return Err(RuntimeError::BadArgument(
                "write_view_f64 into a strided view (write a dense one)".into(),
            ));
        }
        self.write_buffer(&view.buffer, view.offset, &f64_to_bytes(view.dtype, data))
    }

    /// Runs one op reading `inputs` and writing its results into `outputs` in place
    /// (in `spec.outputs()` order); nothing else in the output buffers changes. Checked
    /// before anything runs: counts, dtypes and shapes against the spec (as
    /// [`Runtime::run`]), that every view is on this device, and aliasing: an output
    /// may overlap no other output, and an input only when the spec updates that
    /// input in place (`aliases()`) and the two views are the same elements.
    ///
    /// Strided views ([`View::strided`]) go through dense temporaries: each strided
    /// input is gathered into one before the op, each strided output written into one
    /// and scattered into its positions after (the `as_strided` op); an output's
    /// positions must be distinct. Aliasing counts the bytes a strided view spans.
    pub fn run_into(&self, spec: &OpSpec, inputs: &[&View], outputs: &[&View]) -> Result<()> {
        spec.validate()?;
        let name = spec.name();
        self.check_views(&name, Role::Input, &spec.inputs(), inputs)?;
        self.check_views(&name, Role::Output, &spec.outputs(), outputs)?;
        check_aliasing(spec, inputs, outputs)?;
        if inputs.iter().chain(outputs).any(|v| !v.is_dense()) {
            return self.run_into_strided(spec, inputs, outputs);
        }
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

    /// [`Runtime::run_into`] with strided views made dense around the op.
    fn run_into_strided(&self, spec: &OpSpec, inputs: &[&View], outputs: &[&View]) -> Result<()> {
        // Every scatter is checked before anything runs, so a refused output leaves
        // every buffer as it was.
        let scatters = outputs
            .iter()
            .map(|v| {
                v.strides
                    .as_ref()
                    .map(|strides| {
                        let scatter = strided_spec(v, strides, true);
                        scatter.validate()?;
                        Ok::<_, RuntimeError>((scatter, self.dense_temporary(v)?))
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let mut gathered = Vec::new();
        for v in inputs {
            if let Some(strides) = &v.strides {
                let dense = self.dense_temporary(v)?;
                self.run_into(
                    &strided_spec(v, strides, false),
                    &[&v.span_view()],
                    &[&dense],
                )?;
                gathered.push(Some(dense));
            } else {
                gathered.push(None);
            }
        }
        let dense_inputs: Vec<&View> = inputs
            .iter()
            .zip(&gathered)
            .map(|(v, g)| g.as_ref().unwrap_or(v))
            .collect();
        let dense_outputs: Vec<&View> = outputs
            .iter()
            .zip(&scatters)
            .map(|(v, s)| s.as_ref().map_or(*v, |(_, dense)| dense))
            .collect();
        self.run_into(spec, &dense_inputs, &dense_outputs)?;
        for (v, scatter) in outputs.iter().zip(&scatters) {
            if let Some((spec, dense)) = scatter {
                let span = v.span_view();
                self.run_into(spec, &[dense, &span], &[&span])?;
            }
        }
        Ok(())
    }

    /// A fresh dense view of `view`'s dtype and shape.
    fn dense_temporary(&self, view: &View) -> Result<View> {
        let buffer = self.alloc_buffer(view.numel() * view.dtype.size_bytes() as usize)?;
        View::new(&buffer, 0, view.dtype, &view.shape)
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

/// The `as_strided` op between a strided view's positions and a dense tensor: a
/// gather from them, or a scatter into them (`scatter`).
fn strided_spec(view: &View, strides: &[usize], scatter: bool) -> OpSpec {
    OpSpec::AsStrided(AsStridedSpec {
        dtype: view.dtype,
        len: view.span(),
        shape: view.shape.clone(),
        strides: strides.to_vec(),
        offset: 0,
        scatter,
    })
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
