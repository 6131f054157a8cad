//! Which op of the catalogue serves each method of the five seed backend traits
//! (`/work/shared/seeds/`): rustd_runtime `Backend`, oxicuda-backend
//! `ComputeBackend`, ferrum-interfaces `ComputeBackend` (with the sub-traits it hands
//! out), rumus `Backend`, and bb-runtime's contract `Backend`.
//!
//! Every method is listed once in [`SEED_METHODS`]: as an [`Mapping::Op`] naming the
//! [`OpSpec`](crate::OpSpec) kind that computes it (with a note on the attributes the
//! adapter sets), as [`Mapping::Host`] when it is not device math (allocation,
//! metadata, transfers, sync, host scalars), or as [`Mapping::Unsupported`] for the
//! two ferrum methods whose provided default is "unsupported" and whose semantics no
//! seed defines.

/// How a seed-trait method is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Computed by the op of this kind (an [`OpKind`](crate::OpKind) name).
    Op(&'static str),
    /// Not device math; why (allocation, metadata, transfer, sync, host scalar, ...).
    Host(&'static str),
    /// The trait's provided default (an "unsupported" error) is kept; why.
    Unsupported(&'static str),
}

/// One method of a seed trait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedMethod {
    /// The trait, as `crate::path::Trait`.
    pub trait_name: &'static str,
    pub method: &'static str,
    pub maps_to: Mapping,
    /// For ops: which attributes the adapter sets (empty when obvious).
    pub note: &'static str,
}

/// rustd_runtime 0.1.1 `backend::Backend` (52 methods).
pub const RUSTD: &str = "rustd_runtime::backend::Backend";
/// oxicuda-backend 0.1.6 `ComputeBackend` (15 methods).
pub const OXICUDA: &str = "oxicuda_backend::ComputeBackend";
/// The 9 methods oxicuda-backend 0.2.1+ adds to `ComputeBackend`, all with defaults.
pub const OXICUDA_V2: &str = "oxicuda_backend::ComputeBackend (0.2.1+ additions)";
/// ferrum-interfaces 0.7.0 `backend::ComputeBackend` (13 methods).
pub const FERRUM: &str = "ferrum_interfaces::backend::ComputeBackend";
pub const FERRUM_TENSOR_LIKE: &str = "ferrum_interfaces::tensor::TensorLike";
pub const FERRUM_TENSOR_FACTORY: &str = "ferrum_interfaces::tensor::TensorFactory";
pub const FERRUM_TENSOR_OPS: &str = "ferrum_interfaces::tensor::TensorOps";
pub const FERRUM_MEMORY: &str = "ferrum_interfaces::memory::DeviceMemoryManager";
pub const FERRUM_EXECUTOR: &str = "ferrum_interfaces::backend::KernelExecutor";
pub const FERRUM_KERNEL_OPS: &str = "ferrum_interfaces::kernel_ops::KernelOps";
pub const FERRUM_NORM: &str = "ferrum_interfaces::kernel_ops::NormOps";
pub const FERRUM_POSITION: &str = "ferrum_interfaces::kernel_ops::PositionOps";
pub const FERRUM_ATTENTION: &str = "ferrum_interfaces::kernel_ops::AttentionOps";
pub const FERRUM_ACTIVATION: &str = "ferrum_interfaces::kernel_ops::ActivationOps";
pub const FERRUM_LINEAR: &str = "ferrum_interfaces::kernel_ops::LinearOps";
pub const FERRUM_SAMPLING: &str = "ferrum_interfaces::kernel_ops::SamplingOps";
/// rumus 0.3.1 `backend::Backend` (38 associated functions).
pub const RUMUS: &str = "rumus::backend::Backend";
/// bb-runtime 0.3.8 `contracts::backend::Backend` (33 methods).
pub const BB: &str = "bb_runtime::contracts::backend::Backend";

const fn op(
    trait_name: &'static str,
    method: &'static str,
    kind: &'static str,
    note: &'static str,
) -> SeedMethod {
    SeedMethod {
        trait_name,
        method,
        maps_to: Mapping::Op(kind),
        note,
    }
}

const fn host(trait_name: &'static str, method: &'static str, why: &'static str) -> SeedMethod {
    SeedMethod {
        trait_name,
        method,
        maps_to: Mapping::Host(why),
        note: "",
    }
}

const fn unsupported(
    trait_name: &'static str,
    method: &'static str,
    why: &'static str,
) -> SeedMethod {
    SeedMethod {
        trait_name,
        method,
        maps_to: Mapping::Unsupported(why),
        note: "",
    }
}

const META: &str = "metadata: answered by the adapter without a kernel";
const ALLOC: &str = "allocation: device buffer management in the runtime";
const XFER: &str = "transfer: host<->device copy in the runtime";
const SYNC: &str = "synchronisation: waits for queued launches";
const LIFE: &str = "lifecycle: device selection / context setup in the runtime";
const VIEW: &str = "metadata: a contiguous buffer reinterpreted with a new shape, no kernel";
const VALUE: &str = "host scalar: one rustd Value (Integer/Float promotion, Integer results for floor/ceil/round, structural ==) evaluated in Rust; no tensor, no kernel";
const RAW: &str = "passthrough: runs caller-supplied shader/kernel code, not a catalogue op";
const GETTER: &str = "accessor: returns one of the adapter's sub-trait objects";

/// Every method of the five seed traits (and of the sub-traits ferrum's
/// `ComputeBackend` hands out), with how it is served.
pub const SEED_METHODS: &[SeedMethod] = &[
    // ---------------- rustd_runtime::backend::Backend (52) ----------------
    host(RUSTD, "abi_fingerprint", "constant BACKEND_ABI_FINGERPRINT; keep the provided default"),
    host(RUSTD, "name", META),
    host(RUSTD, "is_available", META),
    host(RUSTD, "alloc_tensor", ALLOC),
    host(RUSTD, "free_tensor", ALLOC),
    host(RUSTD, "tensor_meta", META),
    host(RUSTD, "write_tensor", XFER),
    host(RUSTD, "read_tensor", XFER),
    host(RUSTD, "scalar_add", VALUE),
    host(RUSTD, "scalar_sub", VALUE),
    host(RUSTD, "scalar_mul", VALUE),
    host(RUSTD, "scalar_div", VALUE),
    host(RUSTD, "scalar_mod", VALUE),
    host(RUSTD, "scalar_sqrt", VALUE),
    host(RUSTD, "scalar_pow", VALUE),
    host(RUSTD, "scalar_sin", VALUE),
    host(RUSTD, "scalar_cos", VALUE),
    host(RUSTD, "scalar_tan", VALUE),
    host(RUSTD, "scalar_log", VALUE),
    host(RUSTD, "scalar_exp", VALUE),
    host(RUSTD, "scalar_floor", VALUE),
    host(RUSTD, "scalar_ceil", VALUE),
    host(RUSTD, "scalar_round", VALUE),
    host(RUSTD, "scalar_abs", VALUE),
    host(RUSTD, "scalar_eq", VALUE),
    host(RUSTD, "scalar_ne", VALUE),
    host(RUSTD, "scalar_lt", VALUE),
    host(RUSTD, "scalar_le", VALUE),
    host(RUSTD, "scalar_gt", VALUE),
    host(RUSTD, "scalar_ge", VALUE),
    op(RUSTD, "pointwise_add", "binary", "func=add, equal shapes"),
    op(RUSTD, "matmul", "gemm", "2-D row-major, f32"),
    op(RUSTD, "matmul_bias", "gemm", "bias=true (bias[j] added to every row)"),
    op(RUSTD, "layer_norm", "layer_norm", "last dim, weight+bias, eps from the call"),
    op(RUSTD, "softmax", "softmax", "dim normalised with shape::normalize_axis"),
    op(RUSTD, "gelu", "unary", "func=gelu_tanh (rustd's CPU and GLSL use the tanh form)"),
    op(RUSTD, "relu", "unary", "func=relu"),
    op(RUSTD, "attention", "attention", "2-D [seq, d]: batch=heads=kv_heads=1, scale multiplied, mask additive"),
    op(RUSTD, "cross_entropy", "cross_entropy", "probs=true, divide_by_batch=false (loss per row)"),
    op(RUSTD, "reduce_sum", "reduce", "func=sum over dim, or over every axis when dim is None"),
    op(RUSTD, "embedding", "gather", "axis=0 on weight [vocab, dim]"),
    op(RUSTD, "adam_update", "adam", "weight_decay=0"),
    op(RUSTD, "gaussian_blur", "image_filter", "gaussian_blur{sigma from the Value, radius=ceil(3 sigma)}"),
    op(RUSTD, "sobel_edges", "image_filter", "sobel{threshold}"),
    op(RUSTD, "grayscale", "image_filter", "grayscale"),
    op(RUSTD, "threshold", "image_filter", "threshold{value}"),
    op(RUSTD, "brightness", "image_filter", "brightness{factor}"),
    op(RUSTD, "contrast", "image_filter", "contrast{factor}"),
    op(RUSTD, "invert_colors", "image_filter", "invert"),
    op(RUSTD, "sharpen", "image_filter", "sharpen"),
    host(RUSTD, "dispatch_compute", RAW),
    host(RUSTD, "sync", SYNC),
    // ---------------- oxicuda_backend::ComputeBackend 0.1.6 (15) ----------------
    host(OXICUDA, "name", META),
    host(OXICUDA, "init", LIFE),
    host(OXICUDA, "is_initialized", META),
    op(OXICUDA, "gemm", "gemm", "layout=col_major, dtype=f64, lda/ldb/ldc from the call"),
    op(OXICUDA, "conv2d_forward", "conv2d", "pass=forward, f32 NCHW/KCHW"),
    op(OXICUDA, "attention", "attention", "layout=bhsd, kv_heads=heads, scale multiplied (as CpuBackend)"),
    op(OXICUDA, "reduce", "reduce", "axes=[axis], keepdim=false; ReduceOp -> sum/max/min/mean"),
    op(OXICUDA, "unary", "unary", "UnaryOp -> relu/sigmoid/tanh/exp/log/sqrt/abs/neg"),
    op(OXICUDA, "binary", "binary", "BinaryOp -> add/sub/mul/div/max/min, equal shapes"),
    op(OXICUDA, "batched_gemm", "gemm", "batch=[batch_count], stride_a/b/c=[stride] in elements"),
    host(OXICUDA, "synchronize", SYNC),
    host(OXICUDA, "alloc", ALLOC),
    host(OXICUDA, "free", ALLOC),
    host(OXICUDA, "copy_htod", XFER),
    host(OXICUDA, "copy_dtoh", XFER),
    // ---------------- oxicuda_backend 0.2.1+ additions (9, all defaulted) ----------------
    host(OXICUDA_V2, "capabilities", META),
    host(OXICUDA_V2, "available_devices", META),
    host(OXICUDA_V2, "recommended_tile_for", META),
    op(OXICUDA_V2, "gemm_mixed_precision", "gemm", "layout=col_major, dtype=f32, input_rounding=f16|bf16"),
    op(OXICUDA_V2, "conv2d_backward_data", "conv2d", "pass=backward_data"),
    op(OXICUDA_V2, "conv2d_backward_filter", "conv2d", "pass=backward_filter"),
    op(OXICUDA_V2, "softmax", "softmax", "axis from the call"),
    op(OXICUDA_V2, "gather", "gather", "axis=0 on [rows, cols]; host indices uploaded as u32"),
    op(OXICUDA_V2, "scatter", "scatter", "axis=0, combine=last, init=prior (unreferenced rows preserved)"),
    // ---------------- ferrum ComputeBackend (13) ----------------
    host(FERRUM, "name", META),
    host(FERRUM, "capabilities", META),
    host(FERRUM, "tensor_ops", GETTER),
    host(FERRUM, "tensor_factory", GETTER),
    host(FERRUM, "memory_manager", GETTER),
    host(FERRUM, "kernel_executor", GETTER),
    host(FERRUM, "kernel_ops", GETTER),
    host(FERRUM, "initialize", LIFE),
    host(FERRUM, "supports_device", META),
    host(FERRUM, "version", META),
    host(FERRUM, "synchronize", SYNC),
    host(FERRUM, "status", META),
    host(FERRUM, "shutdown", LIFE),
    // ---------------- ferrum TensorLike (17) ----------------
    host(FERRUM_TENSOR_LIKE, "as_any", META),
    host(FERRUM_TENSOR_LIKE, "shape", META),
    host(FERRUM_TENSOR_LIKE, "dtype", META),
    host(FERRUM_TENSOR_LIKE, "device", META),
    host(FERRUM_TENSOR_LIKE, "numel", META),
    host(FERRUM_TENSOR_LIKE, "ndim", META),
    host(FERRUM_TENSOR_LIKE, "is_scalar", META),
    host(FERRUM_TENSOR_LIKE, "is_contiguous", META),
    host(FERRUM_TENSOR_LIKE, "size_bytes", META),
    op(FERRUM_TENSOR_LIKE, "view", "slice", "starts=start, sizes=end-start, steps=1"),
    host(FERRUM_TENSOR_LIKE, "reshape", VIEW),
    host(FERRUM_TENSOR_LIKE, "to_cpu", XFER),
    host(FERRUM_TENSOR_LIKE, "to_device", XFER),
    op(FERRUM_TENSOR_LIKE, "to_dtype", "cast", ""),
    host(FERRUM_TENSOR_LIKE, "to_vec_f32", XFER),
    host(FERRUM_TENSOR_LIKE, "to_vec_u32", XFER),
    op(FERRUM_TENSOR_LIKE, "argmax_last_dim_u32", "reduce", "func=argmax over the last axis, index_dtype=u32"),
    // ---------------- ferrum TensorFactory (11) ----------------
    host(FERRUM_TENSOR_FACTORY, "empty", ALLOC),
    op(FERRUM_TENSOR_FACTORY, "zeros_like", "fill", "constant 0"),
    host(FERRUM_TENSOR_FACTORY, "from_slice", "transfer: upload of f32 data (a narrower dtype is converted on the host)"),
    host(FERRUM_TENSOR_FACTORY, "to_device", XFER),
    op(FERRUM_TENSOR_FACTORY, "narrow", "slice", "one axis: starts[dim]=start, sizes[dim]=length"),
    host(FERRUM_TENSOR_FACTORY, "reshape", VIEW),
    op(FERRUM_TENSOR_FACTORY, "zeros", "fill", "constant 0"),
    op(FERRUM_TENSOR_FACTORY, "ones", "fill", "constant 1"),
    op(FERRUM_TENSOR_FACTORY, "uniform", "fill", "uniform{low, high, seed, step: the adapter's counter}"),
    op(FERRUM_TENSOR_FACTORY, "normal", "fill", "normal{mean, std, seed, step: the adapter's counter}"),
    host(FERRUM_TENSOR_FACTORY, "from_tensor", XFER),
    // ---------------- ferrum TensorOps (15) ----------------
    op(FERRUM_TENSOR_OPS, "matmul", "gemm", "row-major; batch dims as batch (stride 0 broadcasts)"),
    op(FERRUM_TENSOR_OPS, "add", "binary", "func=add"),
    op(FERRUM_TENSOR_OPS, "sub", "binary", "func=sub"),
    op(FERRUM_TENSOR_OPS, "mul", "binary", "func=mul"),
    op(FERRUM_TENSOR_OPS, "div", "binary", "func=div"),
    op(FERRUM_TENSOR_OPS, "softmax", "softmax", "dim normalised (negative counts from the end)"),
    op(FERRUM_TENSOR_OPS, "layer_norm", "layer_norm", "last dim, weight, bias optional"),
    op(FERRUM_TENSOR_OPS, "rms_norm", "layer_norm", "rms=true, weight"),
    op(FERRUM_TENSOR_OPS, "relu", "unary", "func=relu"),
    op(FERRUM_TENSOR_OPS, "gelu", "unary", "func=gelu_tanh (candle's gelu is the tanh form)"),
    op(FERRUM_TENSOR_OPS, "silu", "unary", "func=silu"),
    op(FERRUM_TENSOR_OPS, "concat", "concat", ""),
    op(FERRUM_TENSOR_OPS, "split", "slice", "one slice per part"),
    op(FERRUM_TENSOR_OPS, "transpose", "permute", "perm swaps dim0 and dim1"),
    op(FERRUM_TENSOR_OPS, "permute", "permute", ""),
    // ---------------- ferrum DeviceMemoryManager (10) ----------------
    host(FERRUM_MEMORY, "allocate", ALLOC),
    host(FERRUM_MEMORY, "allocate_aligned", ALLOC),
    host(FERRUM_MEMORY, "deallocate", ALLOC),
    host(FERRUM_MEMORY, "copy", "transfer: device-to-device buffer copy through the device API"),
    host(FERRUM_MEMORY, "copy_async", "transfer: device-to-device buffer copy through the device API"),
    host(FERRUM_MEMORY, "memory_info", META),
    host(FERRUM_MEMORY, "handle_info", META),
    host(FERRUM_MEMORY, "configure_pool", ALLOC),
    host(FERRUM_MEMORY, "defragment", ALLOC),
    host(FERRUM_MEMORY, "set_pressure_callback", ALLOC),
    // ---------------- ferrum KernelExecutor (4) ----------------
    host(FERRUM_EXECUTOR, "load_kernel", RAW),
    host(FERRUM_EXECUTOR, "execute_kernel", RAW),
    host(FERRUM_EXECUTOR, "get_kernel_info", RAW),
    host(FERRUM_EXECUTOR, "unload_kernel", RAW),
    // ---------------- ferrum KernelOps (7) ----------------
    host(FERRUM_KERNEL_OPS, "norm_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "position_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "attention_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "activation_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "linear_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "sampling_ops", GETTER),
    host(FERRUM_KERNEL_OPS, "backend_name", META),
    // ---------------- ferrum kernel_ops sub-traits (11) ----------------
    op(FERRUM_NORM, "rms_norm", "layer_norm", "rms=true, weight"),
    op(FERRUM_NORM, "rms_norm_residual", "layer_norm", "rms=true, weight, residual=true (outputs y, sum)"),
    op(FERRUM_POSITION, "rotary_embedding", "rope", "positions uploaded as u32: one per step, one per batch item and step (batch_positions), or one start position (ferrum's reference uses position_ids[0] only)"),
    op(FERRUM_ATTENTION, "attention", "attention", "layout=bshd, kv_heads=num_kv_heads, scale=softmax_scale, causal"),
    unsupported(FERRUM_ATTENTION, "paged_attention", "the provided default returns unsupported; no seed defines the block-table layout"),
    op(FERRUM_ACTIVATION, "silu_mul", "binary", "func=silu_mul"),
    op(FERRUM_ACTIVATION, "gelu", "unary", "func=gelu_tanh"),
    op(FERRUM_LINEAR, "linear", "gemm", "trans_b=true (weight [out, in]), rows = product of leading dims"),
    unsupported(FERRUM_LINEAR, "quantized_linear", "the provided default returns unsupported; Q4_0/Q8_0 packing is not defined by any seed"),
    host(FERRUM_SAMPLING, "sample_token", "host: temperature/top-k/top-p/repetition sampling of one vocab row on the host after reading the logits"),
    op(FERRUM_SAMPLING, "argmax", "reduce", "func=argmax over every axis, index_dtype=u32"),
    // ---------------- rumus::backend::Backend (38) ----------------
    op(RUMUS, "zeros", "fill", "constant 0"),
    op(RUMUS, "full", "fill", "constant value"),
    op(RUMUS, "add", "binary", "func=add, equal shapes"),
    op(RUMUS, "sub", "binary", "func=sub, equal shapes"),
    op(RUMUS, "mul", "binary", "func=mul, equal shapes"),
    op(RUMUS, "scale", "scalar", "func=mul, scalar"),
    op(RUMUS, "relu", "unary", "func=relu"),
    op(RUMUS, "relu_backward", "activation_backward", "func=relu (saved input)"),
    op(RUMUS, "matmul", "gemm", "row-major, beta=1 (rumus accumulates into dst)"),
    op(RUMUS, "add_bias", "binary", "func=add, lhs=[m, n], rhs=[n]"),
    op(RUMUS, "sum_rows", "reduce", "func=sum, axes=[0] of [m, n], accumulate=true"),
    op(RUMUS, "im2col", "im2col", "batch=1, square window"),
    op(RUMUS, "col2im", "col2im", "batch=1, square window, accumulate=true"),
    op(RUMUS, "add_channel_bias", "binary", "func=add, lhs=[C, S], rhs=[C, 1]"),
    op(RUMUS, "sum_channel_bias_grad", "reduce", "func=sum, axes=[1] of [C, S], accumulate=true"),
    op(RUMUS, "max_pool2d", "pool2d", "kind=max, batch=1, no padding, indices=f32"),
    op(RUMUS, "max_pool2d_backward", "pool2d_backward", "kind=max, index_dtype=f32, accumulate=true"),
    op(RUMUS, "dropout", "dropout", "rng=rumus, step, mask=true"),
    op(RUMUS, "sigmoid", "unary", "func=sigmoid"),
    op(RUMUS, "sigmoid_backward", "activation_backward", "func=sigmoid (saved output)"),
    op(RUMUS, "tanh_act", "unary", "func=tanh"),
    op(RUMUS, "tanh_backward", "activation_backward", "func=tanh (saved output)"),
    op(RUMUS, "gelu", "unary", "func=gelu_tanh (rumus' CPU and WGSL use the tanh form)"),
    op(RUMUS, "gelu_backward", "activation_backward", "func=gelu_tanh (saved input)"),
    op(RUMUS, "leaky_relu", "unary", "func=leaky_relu{slope: alpha}"),
    op(RUMUS, "leaky_relu_backward", "activation_backward", "func=leaky_relu{slope: alpha} (saved input)"),
    op(RUMUS, "batch_norm_forward", "batch_norm", "training=is_training; save=[C, 2] mean/invstd"),
    op(RUMUS, "batch_norm_backward", "batch_norm_backward", "param_grads=false"),
    op(RUMUS, "adaptive_avg_pool2d", "adaptive_pool2d", "kind=avg, pass=forward"),
    op(RUMUS, "adaptive_avg_pool2d_backward", "adaptive_pool2d", "kind=avg, pass=backward"),
    op(RUMUS, "bmm", "gemm", "batch=[batch], beta=1 (accumulates)"),
    op(RUMUS, "softmax_forward", "softmax", "shape=[num_rows, row_size], axis=1"),
    op(RUMUS, "softmax_backward", "softmax_backward", "shape=[num_rows, row_size], axis=1"),
    op(RUMUS, "layer_norm_forward", "layer_norm", "weight, bias, save_stats=true"),
    op(RUMUS, "layer_norm_backward", "layer_norm_backward", "weight=true, param_grads=false"),
    op(RUMUS, "embedding_forward", "gather", "axis=0, index_dtype=f32"),
    op(RUMUS, "embedding_backward", "scatter", "axis=0, combine=sum, init=prior, index_dtype=f32"),
    op(RUMUS, "cross_entropy_forward", "cross_entropy", "divide_by_batch=true, grad=true, index_dtype=f32"),
    // ---------------- bb_runtime contracts::Backend (33) ----------------
    op(BB, "add", "binary", "func=add, NumPy broadcasting"),
    op(BB, "sub", "binary", "func=sub"),
    op(BB, "mul", "binary", "func=mul"),
    op(BB, "div", "binary", "func=div"),
    op(BB, "neg", "unary", "func=neg"),
    op(BB, "abs", "unary", "func=abs"),
    op(BB, "sqrt", "unary", "func=sqrt"),
    op(BB, "pow", "binary", "func=pow, broadcasting"),
    op(BB, "exp", "unary", "func=exp"),
    op(BB, "log", "unary", "func=log"),
    op(BB, "matmul", "gemm", "NumPy matmul: batch = broadcast batch dims, stride 0 on broadcast dims"),
    op(BB, "reduce_sum", "reduce", "func=sum, axes normalised and sorted (empty = all), keepdim"),
    op(BB, "reduce_mean", "reduce", "func=mean"),
    op(BB, "reduce_max", "reduce", "func=max_nan on floats (NaN propagates, as ONNX), max on integers"),
    op(BB, "reduce_min", "reduce", "func=min_nan on floats, min on integers"),
    host(BB, "reshape", VIEW),
    op(BB, "transpose", "permute", "empty perm = reversed dims"),
    op(BB, "concat", "concat", "axis normalised"),
    op(BB, "slice", "slice", "ONNX starts/ends/axes/steps clamped and normalised on the host"),
    op(BB, "split", "slice", "one slice per output"),
    host(BB, "squeeze", VIEW),
    host(BB, "unsqueeze", VIEW),
    host(BB, "identity", "metadata: the tensor handle is cloned, no kernel"),
    op(BB, "cast", "cast", "ONNX TensorProto.DataType -> ScalarType"),
    op(BB, "equal", "binary", "func=eq, out_dtype=bool"),
    op(BB, "greater", "binary", "func=gt, out_dtype=bool"),
    op(BB, "less", "binary", "func=lt, out_dtype=bool"),
    op(BB, "where", "where", ""),
    host(BB, "constant", "transfer: upload of the TensorProto's data"),
    op(BB, "gather", "gather", "ONNX Gather, negative indices count from the end"),
    host(BB, "execute", "graph walker: runs each node through the per-op methods above"),
    host(BB, "dispatch", "graph walker: execute now, or later through the completion handle"),
    host(BB, "materialize_from_wire", "deserialisation of a wire tensor into a device buffer"),
];

/// The seed methods of one trait.
pub fn methods_of(trait_name: &str) -> impl Iterator<Item = &'static SeedMethod> + '_ {
    SEED_METHODS
        .iter()
        .filter(move |m| m.trait_name == trait_name)
}

/// The seed methods served by op kind `kind`.
pub fn methods_for_kind(kind: &str) -> impl Iterator<Item = &'static SeedMethod> + '_ {
    SEED_METHODS
        .iter()
        .filter(move |m| matches!(m.maps_to, Mapping::Op(k) if k == kind))
}
