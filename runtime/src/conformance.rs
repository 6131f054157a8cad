//! The runtime as an executor of the conformance harness
//! ([`kernelc_kernels::conformance`]): the same table every target is held to.

use crate::error::Result;
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::conformance::Executor;
use kernelc_kernels::spec::OpSpec;

/// Little-endian device bytes of host scalars (bool as a u32 word).
fn scalars_to_bytes(data: &[Scalar]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 8);
    for s in data {
        match *s {
            Scalar::Bool(b) => out.extend_from_slice(&(b as u32).to_le_bytes()),
            Scalar::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Scalar::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Scalar::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Scalar::F16(b) | Scalar::Bf16(b) => out.extend_from_slice(&b.to_le_bytes()),
            Scalar::F32(b) => out.extend_from_slice(&b.to_le_bytes()),
            Scalar::F64(b) => out.extend_from_slice(&b.to_le_bytes()),
        }
    }
    out
}

/// Host scalars of device bytes.
fn bytes_to_scalars(dtype: ScalarType, bytes: &[u8]) -> Vec<Scalar> {
    let size = dtype.size_bytes() as usize;
    bytes
        .chunks_exact(size)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..size].copy_from_slice(c);
            let v = u64::from_le_bytes(w);
            match dtype {
                ScalarType::Bool => Scalar::Bool(v != 0),
                ScalarType::I32 => Scalar::I32(v as u32 as i32),
                ScalarType::U32 => Scalar::U32(v as u32),
                ScalarType::I64 => Scalar::I64(v as i64),
                ScalarType::F16 => Scalar::F16(v as u16),
                ScalarType::Bf16 => Scalar::Bf16(v as u16),
                ScalarType::F32 => Scalar::F32(v as u32),
                ScalarType::F64 => Scalar::F64(v),
            }
        })
        .collect()
}

impl Runtime {
    /// Uploads a host buffer as a tensor of `shape`.
    pub fn tensor_from_host(&self, shape: &[usize], buffer: &HostBuffer) -> Result<Tensor> {
        self.tensor_from_bytes(shape, buffer.elem, &scalars_to_bytes(&buffer.data))
    }

    /// Downloads a tensor as a host buffer.
    pub fn tensor_to_host(&self, tensor: &Tensor) -> Result<HostBuffer> {
        let bytes = tensor.storage.read_bytes()?;
        Ok(HostBuffer {
            elem: tensor.dtype(),
            data: bytes_to_scalars(tensor.dtype(), &bytes),
        })
    }
}

impl Executor for Runtime {
    fn name(&self) -> String {
        format!("{} [{}]", self.device_name(), self.target_name())
    }

    fn run(
        &self,
        spec: &OpSpec,
        inputs: &[HostBuffer],
    ) -> std::result::Result<Vec<HostBuffer>, String> {
        let tensors = spec
            .inputs()
            .iter()
            .zip(inputs)
            .map(|(sig, b)| self.tensor_from_host(&sig.shape, b))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.to_string())?;
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let outputs = Runtime::run(self, spec, &refs).map_err(|e| e.to_string())?;
        outputs
            .iter()
            .map(|t| self.tensor_to_host(t).map_err(|e| e.to_string()))
            .collect()
    }
}
