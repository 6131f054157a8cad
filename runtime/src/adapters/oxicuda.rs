//! oxicuda-backend's `ComputeBackend` on kernelc: [`OxicudaBackend`].
//!
//! Feature `oxicuda` implements the trait of `oxicuda-backend =0.1.6` (15 methods);
//! feature `oxicuda-0-5` implements the one of `=0.5.5` (24 methods: the 9 it adds are
//! served too, not left at their "unsupported" defaults). Both may be on at once: the
//! same struct then implements both traits.
//!
//! Semantics (the crate's `CpuBackend`, its "numerical reference", where its doc is
//! silent or contradicts it):
//! - Pointers are [`Runtime::malloc`] addresses (on CUDA the real device pointers); an
//!   interior address `base + offset` resolves to that allocation, and every access is
//!   checked to lie inside it.
//! - `gemm` and `batched_gemm` are f64 column-major BLAS with leading dimensions;
//!   `ConjTrans` is `Trans` on real data; `beta = 0` does not read C (BLAS: a NaN in C
//!   does not propagate, where `CpuBackend` computes `0·NaN`).
//! - `batched_gemm`'s strides count f64 elements (the trait's doc: "element strides";
//!   the trait's default loop advances pointers by 4 bytes an element, which splits
//!   f64 matrices; this override is one batched launch).
//! - Everything else is f32 row-major. `attention` multiplies the scores by `scale`
//!   and aligns a causal mask bottom-right when `seq_q != seq_kv`.

/// The trait crates, re-exported so a user names the trait kernelc implements.
#[cfg(feature = "oxicuda")]
pub use oxicuda_backend;
#[cfg(feature = "oxicuda-0-5")]
pub use oxicuda_backend_0_5;

use super::{run_staged, ErrorClass};
use crate::device::DeviceChoice;
use crate::error::RuntimeError;
use crate::memory::View;
use crate::runtime::Runtime;
use kernelc_ir::ScalarType;
use kernelc_kernels::op::Op;
use kernelc_kernels::ops::conv::{ConvPass, Window2d};
use kernelc_kernels::ops::gemm::Layout;
use kernelc_kernels::{
    ops::gemm::InputRounding, AttentionLayout, AttentionSpec, BinaryFn, BinarySpec, Conv2dSpec,
    GemmSpec, OpSpec, ReduceFn, ReduceSpec, UnaryFn, UnarySpec,
};
use std::fmt;

/// kernelc as an oxicuda `ComputeBackend`: every op a generated kernel on the device
/// chosen at [`init`](OxicudaBackend::initialize).
pub struct OxicudaBackend {
    /// The device `init` opens; `None`: the one `KERNELC_DEVICE` names, else the best.
    choice: Option<DeviceChoice>,
    runtime: Option<Runtime>,
}

/// Why a call failed, before it becomes the trait's `BackendError`.
#[derive(Debug)]
pub(crate) enum Failure {
    NotInitialized,
    Runtime(RuntimeError),
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Failure {
        Failure::Runtime(e)
    }
}

type Outcome<T = ()> = Result<T, Failure>;

fn invalid(message: String) -> Failure {
    Failure::Runtime(RuntimeError::BadArgument(message))
}

impl Default for OxicudaBackend {
    fn default() -> Self {
        OxicudaBackend::new()
    }
}

impl fmt::Debug for OxicudaBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OxicudaBackend")
            .field("choice", &self.choice)
            .field("device", &self.runtime.as_ref().map(|r| r.device_name()))
            .finish()
    }
}

impl OxicudaBackend {
    /// A backend that `init` opens on the best device present (CUDA, else a wgpu GPU,
    /// else the CPU), or on the one `KERNELC_DEVICE` names.
    pub fn new() -> OxicudaBackend {
        OxicudaBackend {
            choice: None,
            runtime: None,
        }
    }

    /// A backend that `init` opens on `choice`.
    pub fn with_device(choice: DeviceChoice) -> OxicudaBackend {
        OxicudaBackend {
            choice: Some(choice),
            runtime: None,
        }
    }

    /// A backend on an existing runtime, initialised already.
    pub fn with_runtime(runtime: Runtime) -> OxicudaBackend {
        OxicudaBackend {
            choice: None,
            runtime: Some(runtime),
        }
    }

    /// The runtime, once initialised (for its [`Runtime::stats`], say).
    pub fn runtime(&self) -> Option<&Runtime> {
        self.runtime.as_ref()
    }

    /// Opens the device (the trait's `init`); a second call does nothing. Without a
    /// device given, `KERNELC_DEVICE` is read here: a value it cannot parse is an
    /// error, not the best device.
    pub fn initialize(&mut self) -> Result<(), RuntimeError> {
        if self.runtime.is_none() {
            let choice = match self.choice {
                Some(choice) => choice,
                None => DeviceChoice::from_env()?,
            };
            self.runtime = Some(Runtime::new(choice)?);
        }
        Ok(())
    }

    fn rt(&self) -> Outcome<&Runtime> {
        self.runtime.as_ref().ok_or(Failure::NotInitialized)
    }

    fn label(&self) -> &str {
        match &self.runtime {
            Some(rt) => rt.target_name(),
            None => "kernelc",
        }
    }

    /// A view of `shape` elements of `dtype` at `address`; an empty one needs no
    /// address (a BLAS call with `k = 0` never reads A or B).
    fn view(&self, address: u64, dtype: ScalarType, shape: &[usize]) -> Outcome<View> {
        let rt = self.rt()?;
        if kernelc_kernels::shape::numel(shape) == 0 {
            let empty = rt.alloc_buffer(0)?;
            return Ok(View::new(&empty, 0, dtype, shape)?);
        }
        Ok(rt.view_at(address, dtype, shape)?)
    }

    /// Runs `spec` with its inputs and outputs at these addresses, in the spec's order
    /// (an output may overlap the inputs: see `adapters::run_staged`).
    fn run(&self, spec: OpSpec, inputs: &[u64], outputs: &[u64]) -> Outcome {
        let rt = self.rt()?;
        spec.validate().map_err(RuntimeError::from)?;
        let views = |sigs: Vec<kernelc_kernels::TensorSig>, addresses: &[u64]| {
            sigs.iter()
                .zip(addresses)
                .map(|(sig, &a)| self.view(a, sig.dtype, &sig.shape))
                .collect::<Outcome<Vec<View>>>()
        };
        let ins = views(spec.inputs(), inputs)?;
        let outs = views(spec.outputs(), outputs)?;
        Ok(run_staged(rt, &spec, ins, outs)?)
    }

    /// Column-major BLAS GEMM: f64, or, with `rounding` (0.5's `gemm_mixed_precision`),
    /// f32 with A and B rounded to f16/bf16 first; `batch` is (strides in elements,
    /// count) of `batched_gemm`.
    #[allow(clippy::too_many_arguments)]
    fn col_major_gemm(
        &self,
        rounding: Option<InputRounding>,
        trans: [bool; 2],
        [m, n, k]: [usize; 3],
        alpha: f64,
        (a, lda): (u64, usize),
        (b, ldb): (u64, usize),
        beta: f64,
        (c, ldc): (u64, usize),
        batch: Option<([usize; 3], usize)>,
    ) -> Outcome {
        self.rt()?;
        if m == 0 || n == 0 || batch.is_some_and(|(_, count)| count == 0) {
            return Ok(());
        }
        let (batch, strides) = match batch {
            Some((strides, count)) => (vec![count], Some(strides)),
            None => (vec![], None),
        };
        let spec = GemmSpec {
            dtype: rounding.map_or(ScalarType::F64, |_| ScalarType::F32),
            layout: Layout::ColMajor,
            m,
            n,
            k,
            trans_a: trans[0],
            trans_b: trans[1],
            batch,
            alpha,
            beta,
            bias: false,
            lda: Some(lda),
            ldb: Some(ldb),
            ldc: Some(ldc),
            stride_a: strides.map(|s| vec![s[0]]),
            stride_b: strides.map(|s| vec![s[1]]),
            stride_c: strides.map(|s| vec![s[2]]),
            input_rounding: rounding,
            activation: None,
        };
        let inputs: &[u64] = if beta == 0.0 { &[a, b] } else { &[a, b, c] };
        self.run(spec.into(), inputs, &[c])
    }

    /// A conv2d pass from the trait's NCHW / KCHW shapes, checked against each other.
    fn conv2d(
        &self,
        pass: ConvPass,
        [x, w, y]: [(&[usize], &str); 3],
        stride: &[usize],
        padding: &[usize],
    ) -> Outcome<Conv2dSpec> {
        for (shape, what) in [x, w, y] {
            if shape.len() != 4 {
                return Err(invalid(format!(
                    "conv2d: {what} shape {shape:?} is not 4-D"
                )));
            }
        }
        let [stride, padding]: [[usize; 2]; 2] = match (stride, padding) {
            (&[sh, sw], &[ph, pw]) => [[sh, sw], [ph, pw]],
            _ => {
                return Err(invalid(format!(
                    "conv2d: stride {stride:?} and padding {padding:?} must have 2 elements each"
                )))
            }
        };
        let (x, w, y) = (x.0, w.0, y.0);
        let spec = Conv2dSpec {
            dtype: ScalarType::F32,
            pass,
            batch: x[0],
            in_channels: x[1],
            out_channels: w[0],
            height: x[2],
            width: x[3],
            window: Window2d::new([w[2], w[3]], stride, padding),
            bias: false,
        };
        spec.validate().map_err(RuntimeError::from)?;
        let [oh, ow] = spec.out_size();
        let expected_y = [x[0], w[0], oh, ow];
        if w[1] != x[1] || y != expected_y {
            return Err(invalid(format!(
                "conv2d: input {x:?} and filter {w:?} (stride {stride:?}, padding \
                 {padding:?}) give output {expected_y:?}, not {y:?}"
            )));
        }
        Ok(spec)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_attention(
        &self,
        [q, k, v, o]: [u64; 4],
        batch: usize,
        heads: usize,
        seq_q: usize,
        seq_kv: usize,
        head_dim: usize,
        scale: f64,
        causal: bool,
    ) -> Outcome {
        let spec = AttentionSpec {
            dtype: ScalarType::F32,
            layout: AttentionLayout::Bhsd,
            batch,
            heads,
            kv_heads: heads,
            seq_q,
            seq_k: seq_kv,
            head_dim,
            scale,
            causal,
            mask: None,
            causal_align: Default::default(),
            lse: false,
        };
        self.run(spec.into(), &[q, k, v], &[o])
    }

    fn run_reduce(
        &self,
        func: ReduceFn,
        input: u64,
        output: u64,
        shape: &[usize],
        axis: usize,
    ) -> Outcome {
        if axis >= shape.len() {
            return Err(invalid(format!(
                "reduce axis {axis} out of bounds for {}-D shape",
                shape.len()
            )));
        }
        let spec = ReduceSpec {
            func,
            dtype: ScalarType::F32,
            shape: shape.to_vec(),
            axes: vec![axis],
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        };
        self.run(spec.into(), &[input], &[output])
    }

    fn run_unary(&self, func: UnaryFn, input: u64, output: u64, n: usize) -> Outcome {
        let spec = UnarySpec {
            func,
            dtype: ScalarType::F32,
            shape: vec![n],
        };
        self.run(spec.into(), &[input], &[output])
    }

    fn run_binary(&self, func: BinaryFn, a: u64, b: u64, output: u64, n: usize) -> Outcome {
        let spec = BinarySpec {
            func,
            dtype: ScalarType::F32,
            lhs: vec![n],
            rhs: vec![n],
            out_dtype: None,
        };
        self.run(spec.into(), &[a, b], &[output])
    }

    /// A device buffer holding `indices` as u32 (0.5's `gather` / `scatter` take host
    /// indices), each checked against `rows` first.
    #[cfg(feature = "oxicuda-0-5")]
    fn upload_indices(&self, op: &str, indices: &[usize], rows: usize) -> Outcome<View> {
        let rt = self.rt()?;
        let mut bytes = Vec::with_capacity(indices.len() * 4);
        for &i in indices {
            let fits = u32::try_from(i).ok().filter(|_| i < rows);
            let i = fits
                .ok_or_else(|| invalid(format!("{op} index {i} out of bounds for {rows} rows")))?;
            bytes.extend_from_slice(&i.to_le_bytes());
        }
        let buffer = rt.alloc_buffer(bytes.len())?;
        rt.write_buffer(&buffer, 0, &bytes)?;
        Ok(View::new(&buffer, 0, ScalarType::U32, &[indices.len()])?)
    }

    /// Rows of a `[rows, cols]` f32 table at `indices` (0.5's `gather`) or written back
    /// there (`scatter`: the last update of a row wins, other rows kept).
    #[cfg(feature = "oxicuda-0-5")]
    fn rows(
        &self,
        scatter: bool,
        table: u64,
        indices: &[usize],
        out: u64,
        [rows, cols]: [usize; 2],
    ) -> Outcome {
        use kernelc_kernels::{GatherSpec, ScatterCombine, ScatterInit, ScatterSpec};
        let op = if scatter { "scatter" } else { "gather" };
        let index_view = self.upload_indices(op, indices, rows)?;
        let rt = self.rt()?;
        let rows_view = |address| self.view(address, ScalarType::F32, &[indices.len(), cols]);
        let table_view = |address| self.view(address, ScalarType::F32, &[rows, cols]);
        if scatter {
            let spec = OpSpec::from(ScatterSpec {
                dtype: ScalarType::F32,
                index_dtype: ScalarType::U32,
                data: vec![rows, cols],
                indices: vec![indices.len()],
                axis: 0,
                combine: ScatterCombine::Last,
                init: ScatterInit::Prior,
                rows_of: None,
            });
            let (updates, prior) = (rows_view(table)?, table_view(out)?);
            run_staged(
                rt,
                &spec,
                vec![updates, index_view, prior.clone()],
                vec![prior],
            )?;
        } else {
            let spec = OpSpec::from(GatherSpec {
                dtype: ScalarType::F32,
                index_dtype: ScalarType::U32,
                data: vec![rows, cols],
                indices: vec![indices.len()],
                axis: 0,
                rows_of: None,
            });
            let (data, result) = (table_view(table)?, rows_view(out)?);
            run_staged(rt, &spec, vec![data, index_view], vec![result])?;
        }
        Ok(())
    }

    fn allocate(&self, bytes: usize) -> Outcome<u64> {
        if bytes == 0 {
            return Err(invalid("cannot allocate 0 bytes".into()));
        }
        Ok(self.rt()?.malloc(bytes)?)
    }

    fn write_at(&self, dst: u64, src: &[u8]) -> Outcome {
        let rt = self.rt()?;
        let (buffer, offset) = rt.resolve(dst, src.len())?;
        Ok(rt.write_buffer(&buffer, offset, src)?)
    }

    fn read_at(&self, dst: &mut [u8], src: u64) -> Outcome {
        let rt = self.rt()?;
        let (buffer, offset) = rt.resolve(src, dst.len())?;
        let bytes = rt.read_buffer(&buffer, offset, dst.len())?;
        dst.copy_from_slice(&bytes);
        Ok(())
    }
}

/// `impl $ox::ComputeBackend for OxicudaBackend`, for one version of the crate; the
/// methods of later versions come in `$extra`.
macro_rules! serve {
    ($module:ident, $ox:ident, { $($extra:tt)* }) => {
        mod $module {
            use super::*;
            use $ox as ox;

            fn error(failure: Failure) -> ox::BackendError {
                match failure {
                    Failure::NotInitialized => ox::BackendError::NotInitialized,
                    Failure::Runtime(e) => match ErrorClass::of(&e) {
                        ErrorClass::InvalidArgument => ox::BackendError::InvalidArgument(e.to_string()),
                        ErrorClass::Unsupported => ox::BackendError::Unsupported(e.to_string()),
                        ErrorClass::OutOfMemory => ox::BackendError::OutOfMemory,
                        ErrorClass::Device => ox::BackendError::DeviceError(e.to_string()),
                    },
                }
            }

            fn transposed(t: ox::BackendTranspose) -> bool {
                match t {
                    ox::BackendTranspose::NoTrans => false,
                    // Real data: the conjugate transpose is the transpose.
                    ox::BackendTranspose::Trans | ox::BackendTranspose::ConjTrans => true,
                }
            }

            impl ox::ComputeBackend for OxicudaBackend {
                fn name(&self) -> &str {
                    OxicudaBackend::label(self)
                }

                fn init(&mut self) -> ox::BackendResult<()> {
                    self.initialize().map_err(|e| error(Failure::Runtime(e)))
                }

                fn is_initialized(&self) -> bool {
                    self.runtime.is_some()
                }

                fn gemm(
                    &self,
                    trans_a: ox::BackendTranspose,
                    trans_b: ox::BackendTranspose,
                    m: usize,
                    n: usize,
                    k: usize,
                    alpha: f64,
                    a_ptr: u64,
                    lda: usize,
                    b_ptr: u64,
                    ldb: usize,
                    beta: f64,
                    c_ptr: u64,
                    ldc: usize,
                ) -> ox::BackendResult<()> {
                    OxicudaBackend::col_major_gemm(
                        self,
                        None,
                        [transposed(trans_a), transposed(trans_b)],
                        [m, n, k],
                        alpha,
                        (a_ptr, lda),
                        (b_ptr, ldb),
                        beta,
                        (c_ptr, ldc),
                        None,
                    )
                    .map_err(error)
                }

                fn batched_gemm(
                    &self,
                    trans_a: ox::BackendTranspose,
                    trans_b: ox::BackendTranspose,
                    m: usize,
                    n: usize,
                    k: usize,
                    alpha: f64,
                    a_ptr: u64,
                    lda: usize,
                    stride_a: usize,
                    b_ptr: u64,
                    ldb: usize,
                    stride_b: usize,
                    beta: f64,
                    c_ptr: u64,
                    ldc: usize,
                    stride_c: usize,
                    batch_count: usize,
                ) -> ox::BackendResult<()> {
                    OxicudaBackend::col_major_gemm(
                        self,
                        None,
                        [transposed(trans_a), transposed(trans_b)],
                        [m, n, k],
                        alpha,
                        (a_ptr, lda),
                        (b_ptr, ldb),
                        beta,
                        (c_ptr, ldc),
                        Some(([stride_a, stride_b, stride_c], batch_count)),
                    )
                    .map_err(error)
                }

                fn conv2d_forward(
                    &self,
                    input_ptr: u64,
                    input_shape: &[usize],
                    filter_ptr: u64,
                    filter_shape: &[usize],
                    output_ptr: u64,
                    output_shape: &[usize],
                    stride: &[usize],
                    padding: &[usize],
                ) -> ox::BackendResult<()> {
                    let shapes = [(input_shape, "input"), (filter_shape, "filter"), (output_shape, "output")];
                    self.conv2d(ConvPass::Forward, shapes, stride, padding)
                        .and_then(|spec| self.run(spec.into(), &[input_ptr, filter_ptr], &[output_ptr]))
                        .map_err(error)
                }

                fn attention(
                    &self,
                    q_ptr: u64,
                    k_ptr: u64,
                    v_ptr: u64,
                    o_ptr: u64,
                    batch: usize,
                    heads: usize,
                    seq_q: usize,
                    seq_kv: usize,
                    head_dim: usize,
                    scale: f64,
                    causal: bool,
                ) -> ox::BackendResult<()> {
                    OxicudaBackend::run_attention(
                        self,
                        [q_ptr, k_ptr, v_ptr, o_ptr],
                        batch,
                        heads,
                        seq_q,
                        seq_kv,
                        head_dim,
                        scale,
                        causal,
                    )
                    .map_err(error)
                }

                fn reduce(
                    &self,
                    op: ox::ReduceOp,
                    input_ptr: u64,
                    output_ptr: u64,
                    shape: &[usize],
                    axis: usize,
                ) -> ox::BackendResult<()> {
                    let func = match op {
                        ox::ReduceOp::Sum => ReduceFn::Sum,
                        ox::ReduceOp::Max => ReduceFn::Max,
                        ox::ReduceOp::Min => ReduceFn::Min,
                        ox::ReduceOp::Mean => ReduceFn::Mean,
                    };
                    OxicudaBackend::run_reduce(self, func, input_ptr, output_ptr, shape, axis).map_err(error)
                }

                fn unary(&self, op: ox::UnaryOp, input_ptr: u64, output_ptr: u64, n: usize) -> ox::BackendResult<()> {
                    let func = match op {
                        ox::UnaryOp::Relu => UnaryFn::Relu,
                        ox::UnaryOp::Sigmoid => UnaryFn::Sigmoid,
                        ox::UnaryOp::Tanh => UnaryFn::Tanh,
                        ox::UnaryOp::Exp => UnaryFn::Exp,
                        ox::UnaryOp::Log => UnaryFn::Log,
                        ox::UnaryOp::Sqrt => UnaryFn::Sqrt,
                        ox::UnaryOp::Abs => UnaryFn::Abs,
                        ox::UnaryOp::Neg => UnaryFn::Neg,
                    };
                    OxicudaBackend::run_unary(self, func, input_ptr, output_ptr, n).map_err(error)
                }

                fn binary(&self, op: ox::BinaryOp, a_ptr: u64, b_ptr: u64, output_ptr: u64, n: usize) -> ox::BackendResult<()> {
                    let func = match op {
                        ox::BinaryOp::Add => BinaryFn::Add,
                        ox::BinaryOp::Sub => BinaryFn::Sub,
                        ox::BinaryOp::Mul => BinaryFn::Mul,
                        ox::BinaryOp::Div => BinaryFn::Div,
                        ox::BinaryOp::Max => BinaryFn::Max,
                        ox::BinaryOp::Min => BinaryFn::Min,
                    };
                    OxicudaBackend::run_binary(self, func, a_ptr, b_ptr, output_ptr, n).map_err(error)
                }

                fn synchronize(&self) -> ox::BackendResult<()> {
                    self.rt()
                        .and_then(|rt| Ok(rt.synchronize()?))
                        .map_err(error)
                }

                fn alloc(&self, bytes: usize) -> ox::BackendResult<u64> {
                    OxicudaBackend::allocate(self, bytes).map_err(error)
                }

                fn free(&self, ptr: u64) -> ox::BackendResult<()> {
                    self.rt().and_then(|rt| Ok(rt.free(ptr)?)).map_err(error)
                }

                fn copy_htod(&self, dst: u64, src: &[u8]) -> ox::BackendResult<()> {
                    OxicudaBackend::write_at(self, dst, src).map_err(error)
                }

                fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> ox::BackendResult<()> {
                    OxicudaBackend::read_at(self, dst, src).map_err(error)
                }

                $($extra)*
            }
        }
    };
}

#[cfg(feature = "oxicuda")]
serve!(v0_1, oxicuda_backend, {});

#[cfg(feature = "oxicuda-0-5")]
serve!(v0_5, oxicuda_backend_0_5, {
    fn capabilities(&self) -> ox::Capabilities {
        let Some(rt) = &self.runtime else {
            return ox::Capabilities::default();
        };
        let caps = rt.caps();
        ox::Capabilities {
            supports_fp16: caps.supports(ScalarType::F16),
            supports_bf16: caps.supports(ScalarType::Bf16),
            max_threads_per_block: caps.max_invocations_per_workgroup,
            ..ox::Capabilities::default()
        }
    }

    fn available_devices(&self) -> ox::BackendResult<Vec<ox::DeviceInfo>> {
        let rt = self.rt().map_err(error)?;
        let memory_kind = if rt.target_name() == "cpu" {
            ox::MemoryKind::Host
        } else {
            ox::MemoryKind::Device
        };
        Ok(vec![ox::DeviceInfo {
            ordinal: 0,
            name: rt.device_name(),
            compute_capability: (0, 0),
            total_memory_bytes: 0,
            memory_kind,
            capabilities: ox::ComputeBackend::capabilities(self),
        }])
    }

    fn gemm_mixed_precision(
        &self,
        prec: ox::MixedPrecision,
        trans_a: ox::BackendTranspose,
        trans_b: ox::BackendTranspose,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a_ptr: u64,
        lda: usize,
        b_ptr: u64,
        ldb: usize,
        beta: f32,
        c_ptr: u64,
        ldc: usize,
    ) -> ox::BackendResult<()> {
        let rounding = match prec {
            ox::MixedPrecision::F16 => InputRounding::F16,
            ox::MixedPrecision::Bf16 => InputRounding::Bf16,
        };
        self.col_major_gemm(
            Some(rounding),
            [transposed(trans_a), transposed(trans_b)],
            [m, n, k],
            alpha.into(),
            (a_ptr, lda),
            (b_ptr, ldb),
            beta.into(),
            (c_ptr, ldc),
            None,
        )
        .map_err(error)
    }

    fn conv2d_backward_data(
        &self,
        grad_output_ptr: u64,
        grad_output_shape: &[usize],
        filter_ptr: u64,
        filter_shape: &[usize],
        grad_input_ptr: u64,
        grad_input_shape: &[usize],
        stride: &[usize],
        padding: &[usize],
    ) -> ox::BackendResult<()> {
        let shapes = [
            (grad_input_shape, "grad_input"),
            (filter_shape, "filter"),
            (grad_output_shape, "grad_output"),
        ];
        self.conv2d(ConvPass::BackwardData, shapes, stride, padding)
            .and_then(|spec| {
                self.run(
                    spec.into(),
                    &[grad_output_ptr, filter_ptr],
                    &[grad_input_ptr],
                )
            })
            .map_err(error)
    }

    fn conv2d_backward_filter(
        &self,
        input_ptr: u64,
        input_shape: &[usize],
        grad_output_ptr: u64,
        grad_output_shape: &[usize],
        grad_filter_ptr: u64,
        grad_filter_shape: &[usize],
        stride: &[usize],
        padding: &[usize],
    ) -> ox::BackendResult<()> {
        let shapes = [
            (input_shape, "input"),
            (grad_filter_shape, "grad_filter"),
            (grad_output_shape, "grad_output"),
        ];
        self.conv2d(ConvPass::BackwardFilter, shapes, stride, padding)
            .and_then(|spec| {
                self.run(
                    spec.into(),
                    &[input_ptr, grad_output_ptr],
                    &[grad_filter_ptr],
                )
            })
            .map_err(error)
    }

    fn softmax(
        &self,
        input_ptr: u64,
        output_ptr: u64,
        shape: &[usize],
        axis: usize,
    ) -> ox::BackendResult<()> {
        if axis >= shape.len() {
            return Err(error(invalid(format!(
                "softmax axis {axis} out of bounds for {}-D shape",
                shape.len()
            ))));
        }
        let spec = kernelc_kernels::SoftmaxSpec {
            dtype: ScalarType::F32,
            shape: shape.to_vec(),
            axis,
            log: false,
        };
        self.run(spec.into(), &[input_ptr], &[output_ptr])
            .map_err(error)
    }

    fn gather(
        &self,
        input_ptr: u64,
        indices: &[usize],
        output_ptr: u64,
        rows: usize,
        cols: usize,
    ) -> ox::BackendResult<()> {
        self.rows(false, input_ptr, indices, output_ptr, [rows, cols])
            .map_err(error)
    }

    fn scatter(
        &self,
        input_ptr: u64,
        indices: &[usize],
        output_ptr: u64,
        rows: usize,
        cols: usize,
    ) -> ox::BackendResult<()> {
        self.rows(true, input_ptr, indices, output_ptr, [rows, cols])
            .map_err(error)
    }
});
