//! Every method of the five seed traits maps to an op of the catalogue (or is
//! explicitly host-side). The method lists are copied from the seed files
//! (`/work/shared/seeds/*.txt`, `traits/*.md`), so a method missing from
//! `seeds::SEED_METHODS` fails here.

use std::collections::{BTreeMap, BTreeSet};

use kernelc_kernels::seeds::{self, Mapping, SEED_METHODS};
use kernelc_kernels::{OpKind, OpSpec};

const RUSTD: &[&str] = &[
    "abi_fingerprint",
    "name",
    "is_available",
    "alloc_tensor",
    "free_tensor",
    "tensor_meta",
    "write_tensor",
    "read_tensor",
    "scalar_add",
    "scalar_sub",
    "scalar_mul",
    "scalar_div",
    "scalar_mod",
    "scalar_sqrt",
    "scalar_pow",
    "scalar_sin",
    "scalar_cos",
    "scalar_tan",
    "scalar_log",
    "scalar_exp",
    "scalar_floor",
    "scalar_ceil",
    "scalar_round",
    "scalar_abs",
    "scalar_eq",
    "scalar_ne",
    "scalar_lt",
    "scalar_le",
    "scalar_gt",
    "scalar_ge",
    "pointwise_add",
    "matmul",
    "matmul_bias",
    "layer_norm",
    "softmax",
    "gelu",
    "relu",
    "attention",
    "cross_entropy",
    "reduce_sum",
    "embedding",
    "adam_update",
    "gaussian_blur",
    "sobel_edges",
    "grayscale",
    "threshold",
    "brightness",
    "contrast",
    "invert_colors",
    "sharpen",
    "dispatch_compute",
    "sync",
];

const OXICUDA: &[&str] = &[
    "name",
    "init",
    "is_initialized",
    "gemm",
    "conv2d_forward",
    "attention",
    "reduce",
    "unary",
    "binary",
    "batched_gemm",
    "synchronize",
    "alloc",
    "free",
    "copy_htod",
    "copy_dtoh",
];

const OXICUDA_V2: &[&str] = &[
    "capabilities",
    "available_devices",
    "recommended_tile_for",
    "gemm_mixed_precision",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "softmax",
    "gather",
    "scatter",
];

const FERRUM: &[&str] = &[
    "name",
    "capabilities",
    "tensor_ops",
    "tensor_factory",
    "memory_manager",
    "kernel_executor",
    "kernel_ops",
    "initialize",
    "supports_device",
    "version",
    "synchronize",
    "status",
    "shutdown",
];

const FERRUM_TENSOR_LIKE: &[&str] = &[
    "as_any",
    "shape",
    "dtype",
    "device",
    "numel",
    "ndim",
    "is_scalar",
    "is_contiguous",
    "size_bytes",
    "view",
    "reshape",
    "to_cpu",
    "to_device",
    "to_dtype",
    "to_vec_f32",
    "to_vec_u32",
    "argmax_last_dim_u32",
];

const FERRUM_TENSOR_FACTORY: &[&str] = &[
    "empty",
    "zeros_like",
    "from_slice",
    "to_device",
    "narrow",
    "reshape",
    "zeros",
    "ones",
    "uniform",
    "normal",
    "from_tensor",
];

const FERRUM_TENSOR_OPS: &[&str] = &[
    "matmul",
    "add",
    "sub",
    "mul",
    "div",
    "softmax",
    "layer_norm",
    "rms_norm",
    "relu",
    "gelu",
    "silu",
    "concat",
    "split",
    "transpose",
    "permute",
];

const FERRUM_MEMORY: &[&str] = &[
    "allocate",
    "allocate_aligned",
    "deallocate",
    "copy",
    "copy_async",
    "memory_info",
    "handle_info",
    "configure_pool",
    "defragment",
    "set_pressure_callback",
];

const FERRUM_EXECUTOR: &[&str] = &[
    "load_kernel",
    "execute_kernel",
    "get_kernel_info",
    "unload_kernel",
];

const FERRUM_KERNEL_OPS: &[&str] = &[
    "norm_ops",
    "position_ops",
    "attention_ops",
    "activation_ops",
    "linear_ops",
    "sampling_ops",
    "backend_name",
];

const FERRUM_NORM: &[&str] = &["rms_norm", "rms_norm_residual"];
const FERRUM_POSITION: &[&str] = &["rotary_embedding"];
const FERRUM_ATTENTION: &[&str] = &["attention", "paged_attention"];
const FERRUM_ACTIVATION: &[&str] = &["silu_mul", "gelu"];
const FERRUM_LINEAR: &[&str] = &["linear", "quantized_linear"];
const FERRUM_SAMPLING: &[&str] = &["sample_token", "argmax"];

const RUMUS: &[&str] = &[
    "zeros",
    "full",
    "add",
    "sub",
    "mul",
    "scale",
    "relu",
    "relu_backward",
    "matmul",
    "add_bias",
    "sum_rows",
    "im2col",
    "col2im",
    "add_channel_bias",
    "sum_channel_bias_grad",
    "max_pool2d",
    "max_pool2d_backward",
    "dropout",
    "sigmoid",
    "sigmoid_backward",
    "tanh_act",
    "tanh_backward",
    "gelu",
    "gelu_backward",
    "leaky_relu",
    "leaky_relu_backward",
    "batch_norm_forward",
    "batch_norm_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "bmm",
    "softmax_forward",
    "softmax_backward",
    "layer_norm_forward",
    "layer_norm_backward",
    "embedding_forward",
    "embedding_backward",
    "cross_entropy_forward",
];

const BB: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "abs",
    "sqrt",
    "pow",
    "exp",
    "log",
    "matmul",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reshape",
    "transpose",
    "concat",
    "slice",
    "split",
    "squeeze",
    "unsqueeze",
    "identity",
    "cast",
    "equal",
    "greater",
    "less",
    "where",
    "constant",
    "gather",
    "execute",
    "dispatch",
    "materialize_from_wire",
];

fn expected() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        (seeds::RUSTD, RUSTD),
        (seeds::OXICUDA, OXICUDA),
        (seeds::OXICUDA_V2, OXICUDA_V2),
        (seeds::FERRUM, FERRUM),
        (seeds::FERRUM_TENSOR_LIKE, FERRUM_TENSOR_LIKE),
        (seeds::FERRUM_TENSOR_FACTORY, FERRUM_TENSOR_FACTORY),
        (seeds::FERRUM_TENSOR_OPS, FERRUM_TENSOR_OPS),
        (seeds::FERRUM_MEMORY, FERRUM_MEMORY),
        (seeds::FERRUM_EXECUTOR, FERRUM_EXECUTOR),
        (seeds::FERRUM_KERNEL_OPS, FERRUM_KERNEL_OPS),
        (seeds::FERRUM_NORM, FERRUM_NORM),
        (seeds::FERRUM_POSITION, FERRUM_POSITION),
        (seeds::FERRUM_ATTENTION, FERRUM_ATTENTION),
        (seeds::FERRUM_ACTIVATION, FERRUM_ACTIVATION),
        (seeds::FERRUM_LINEAR, FERRUM_LINEAR),
        (seeds::FERRUM_SAMPLING, FERRUM_SAMPLING),
        (seeds::RUMUS, RUMUS),
        (seeds::BB, BB),
    ]
}

#[test]
fn trait_method_counts_match_the_seed_files() {
    assert_eq!(RUSTD.len(), 52, "rustd Backend: 50 required + 2 provided");
    assert_eq!(
        OXICUDA.len(),
        15,
        "oxicuda 0.1.6 ComputeBackend: 14 required + batched_gemm"
    );
    assert_eq!(
        OXICUDA_V2.len(),
        9,
        "oxicuda 0.2.1+ adds 9 defaulted methods"
    );
    assert_eq!(FERRUM.len(), 13, "ferrum ComputeBackend");
    assert_eq!(RUMUS.len(), 38, "rumus Backend: 38 associated functions");
    assert_eq!(
        BB.len(),
        33,
        "bb contract: 30 primitives + execute, dispatch, materialize_from_wire"
    );
}

#[test]
fn every_seed_method_is_listed_exactly_once() {
    let mut listed: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for m in SEED_METHODS {
        *listed.entry((m.trait_name, m.method)).or_default() += 1;
    }
    for ((t, m), n) in &listed {
        assert_eq!(*n, 1, "{t}::{m} is listed {n} times");
    }
    let mut wanted = BTreeSet::new();
    for (t, methods) in expected() {
        for m in methods {
            assert!(
                listed.contains_key(&(t, *m)),
                "seed method {t}::{m} is missing from SEED_METHODS"
            );
            wanted.insert((t, *m));
        }
    }
    for key in listed.keys() {
        assert!(
            wanted.contains(key),
            "SEED_METHODS lists {}::{}, which no seed trait has",
            key.0,
            key.1
        );
    }
}

#[test]
fn every_op_mapping_names_a_real_kind() {
    let kinds: BTreeSet<&str> = OpSpec::all_kind_names().iter().copied().collect();
    for m in SEED_METHODS {
        match m.maps_to {
            Mapping::Op(kind) => assert!(
                kinds.contains(kind),
                "{}::{} maps to `{kind}`, which is not an OpSpec kind",
                m.trait_name,
                m.method
            ),
            Mapping::Host(why) | Mapping::Unsupported(why) => assert!(
                !why.is_empty(),
                "{}::{} needs a reason",
                m.trait_name,
                m.method
            ),
        }
    }
}

#[test]
fn kind_names_are_consistent_with_the_enum_and_json_tags() {
    assert_eq!(OpKind::ALL.len(), OpKind::NAMES.len());
    let unique: BTreeSet<&str> = OpKind::NAMES.iter().copied().collect();
    assert_eq!(unique.len(), OpKind::NAMES.len(), "duplicate kind names");
    for &k in OpKind::ALL {
        let spec = k.example();
        assert_eq!(spec.kind(), k);
        assert_eq!(OpKind::from_name(k.name()), Some(k));
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["op"], k.name(), "serde tag of {k:?}");
    }
}

#[test]
fn coverage_summary() {
    let (mut ops, mut host, mut unsupported) = (0, 0, 0);
    for m in SEED_METHODS {
        match m.maps_to {
            Mapping::Op(_) => ops += 1,
            Mapping::Host(_) => host += 1,
            Mapping::Unsupported(_) => unsupported += 1,
        }
    }
    let total: usize = expected().iter().map(|(_, m)| m.len()).sum();
    assert_eq!(ops + host + unsupported, total);
    assert_eq!(
        unsupported, 2,
        "only ferrum paged_attention and quantized_linear"
    );
    eprintln!(
        "seed methods: {total} total, {ops} ops, {host} host-side, {unsupported} unsupported"
    );
    // Every kind that a seed needs is used; report the ones only the catalogue has.
    let used: BTreeSet<&str> = SEED_METHODS
        .iter()
        .filter_map(|m| match m.maps_to {
            Mapping::Op(k) => Some(k),
            _ => None,
        })
        .collect();
    let unused: Vec<&str> = OpSpec::all_kind_names()
        .iter()
        .copied()
        .filter(|k| !used.contains(k))
        .collect();
    eprintln!("kinds no seed method uses: {unused:?}");
}
