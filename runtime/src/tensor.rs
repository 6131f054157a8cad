//! Tensors: a shape, a dtype and a device buffer.
//!
//! Tensors are immutable once made: ops allocate fresh outputs, so a launch never
//! writes a buffer anyone else can see. Cloning a tensor shares its buffer.

use crate::device::{BindingRef, Slice, Storage};
use crate::element::{bytes_to_f64, read_elements, Element};
use crate::error::{Result, RuntimeError};
use kernelc_ir::ScalarType;
use std::fmt;
use std::sync::Arc;

/// A dense row-major tensor on one device.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: ScalarType,
    pub(crate) storage: Arc<Storage>,
}

impl Tensor {
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> ScalarType {
        self.dtype
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.shape.len()];
        for d in (0..self.shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * self.shape[d + 1];
        }
        strides
    }

    /// The whole tensor as a kernel argument.
    pub(crate) fn binding(&self) -> BindingRef<'_> {
        BindingRef::Buffer(Slice::whole(&self.storage))
    }

    /// The device this tensor lives on.
    pub fn device_name(&self) -> String {
        self.storage.device_name()
    }

    /// The elements, downloaded; `T` must be the tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(RuntimeError::Dtype {
                expected: self.dtype,
                found: T::DTYPE,
            });
        }
        read_elements(self.numel(), |out| self.storage.read_range_into(0, out))
    }

    /// The elements as f64, whatever the dtype.
    pub fn to_f64(&self) -> Result<Vec<f64>> {
        Ok(bytes_to_f64(self.dtype, &self.storage.read_bytes()?))
    }

    /// A tensor sharing this buffer with another shape of the same element count.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != self.numel() {
            return Err(RuntimeError::BadArgument(format!(
                "cannot reshape {:?} ({} elements) to {:?} ({n} elements)",
                self.shape,
                self.numel(),
                shape
            )));
        }
        Ok(Tensor {
            shape: shape.to_vec(),
            dtype: self.dtype,
            storage: self.storage.clone(),
        })
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({:?}, {}, {})",
            self.shape,
            self.dtype,
            self.storage.device_name()
        )
    }
}
