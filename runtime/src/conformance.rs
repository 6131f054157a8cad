//! The runtime as an executor of the conformance harness
//! ([`kernelc_kernels::conformance`]): the same table every target is held to.

use crate::error::Result;
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use kernelc_ir::interp::HostBuffer;
use kernelc_kernels::conformance::Executor;
use kernelc_kernels::spec::OpSpec;

impl Runtime {
    /// Uploads a host buffer as a tensor of `shape`.
    pub fn tensor_from_host(&self, shape: &[usize], buffer: &HostBuffer) -> Result<Tensor> {
        self.tensor_from_bytes(shape, buffer.elem, &buffer.to_bytes())
    }

    /// Downloads a tensor as a host buffer.
    pub fn tensor_to_host(&self, tensor: &Tensor) -> Result<HostBuffer> {
        let bytes = tensor.storage.read_bytes()?;
        Ok(HostBuffer::from_bytes(tensor.dtype(), &bytes))
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
