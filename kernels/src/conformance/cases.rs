//! The case table: every op kind's own cases ([`Op::cases`](crate::op::Op::cases)),
//! in catalogue order.
//!
//! Shapes include 1, primes and sizes that are no multiple of any tile, and stay small
//! enough that the whole table runs on the interpreter in a few minutes on two cores.

use crate::spec::{OpKind, OpSpec};
use kernelc_ir::ScalarType;

/// Every case of the table, for every kind.
pub fn all() -> Vec<OpSpec> {
    OpKind::ALL.iter().flat_map(|&k| for_kind(k)).collect()
}

/// The cases of one kind (at least three shapes each).
pub fn for_kind(kind: OpKind) -> Vec<OpSpec> {
    kind.cases()
}

/// The dtypes the table uses, for reporting.
pub fn dtypes_of(spec: &OpSpec) -> Vec<ScalarType> {
    spec.inputs()
        .iter()
        .chain(spec.outputs().iter())
        .map(|s| s.dtype)
        .collect()
}

/// The most elements per kernel the split cases are run with
/// ([`TargetCaps::max_kernel_elements`](crate::lower::TargetCaps::max_kernel_elements)):
/// small enough that every case of [`split`] is lowered in pieces.
pub const SPLIT_LIMIT: u64 = 1024;

/// Cases past [`SPLIT_LIMIT`] elements, for the splitting of tensors past one
/// kernel's indices: map-like ops flat and along rows (broadcast operands whole),
/// reductions along kept rows and over a split axis (sum, mean, max, min, argmax on
/// kept rows, with a prior), row-wise ops in pieces of rows or batch items (softmax,
/// norms, attention, GEMM, convolution, pooling, gather, cross-entropy, Adam, a
/// pointwise image filter), most with pieces of unequal sizes.
pub fn split() -> Vec<OpSpec> {
    let json = [
        r#"{"op":"unary","func":"exp","dtype":"f32","shape":[3001]}"#,
        r#"{"op":"unary","func":{"leaky_relu":{"slope":0.25}},"dtype":"f16","shape":[7,433]}"#,
        r#"{"op":"binary","func":"add","dtype":"f32","lhs":[2600],"rhs":[2600]}"#,
        r#"{"op":"fused","dtype":"f32","inputs":[[9,256],[256]],"nodes":[{"input":0},{"input":1},{"binary":{"func":"add","a":0,"b":1}},{"unary":{"func":"tanh","x":2}}]}"#,
        r#"{"op":"binary","func":"mul","dtype":"i32","lhs":[41,64],"rhs":[64]}"#,
        r#"{"op":"binary","func":"lt","dtype":"u8","lhs":[1,37,128],"rhs":[128],"out_dtype":"bool"}"#,
        r#"{"op":"scalar","func":"sub","dtype":"f64","shape":[2049],"scalar":0.5,"reversed":true}"#,
        r#"{"op":"where","dtype":"f32","cond_dtype":"bool","cond":[33,64],"a":[33,64],"b":[64]}"#,
        r#"{"op":"cast","from":"f32","to":"i8","shape":[1500]}"#,
        r#"{"op":"fill","dtype":"bf16","shape":[1999],"value":{"constant":{"value":2.5}}}"#,
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[3000],"axes":[0]}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f64","shape":[3,1000],"axes":[0,1],"keepdim":true}"#,
        r#"{"op":"reduce","func":"max","dtype":"i64","shape":[2,1,1300],"axes":[0,2]}"#,
        r#"{"op":"reduce","func":"min","dtype":"f32","shape":[1000,4],"axes":[0]}"#,
        r#"{"op":"reduce","func":"sum","dtype":"u8","shape":[1800],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f32","shape":[1100,2],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[700,2],"axes":[1],"accumulate":true}"#,
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[600,4],"axes":[1],"index_dtype":"i64"}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f16","shape":[700,2],"axes":[0]}"#,
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[2000],"axes":[0],"index_dtype":"i32"}"#,
        r#"{"op":"reduce","func":"arg_min","dtype":"i32","shape":[700,2],"axes":[0],"keepdim":true,"index_dtype":"u32"}"#,
        r#"{"op":"reduce","func":"mean","dtype":"bf16","shape":[3,700],"axes":[0,1],"keepdim":true,"accumulate":true}"#,
        // Few rows a piece, many outputs: partials combined as they come.
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[5,512],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f64","shape":[5,512],"axes":[0],"keepdim":true}"#,
        r#"{"op":"reduce","func":"max_nan","dtype":"f32","shape":[3,2,512],"axes":[0]}"#,
        r#"{"op":"reduce","func":"min","dtype":"i32","shape":[5,512],"axes":[0]}"#,
        // Row-wise ops: pieces of independent rows (batch items), weights whole.
        r#"{"op":"softmax","dtype":"f32","shape":[5,256],"axis":1}"#,
        // Fused prologues: the prologue into a temporary, then the row op split.
        r#"{"op":"fused_softmax","prologue":{"dtype":"f32","inputs":[[5,256],[5,256]],"nodes":[{"input":0},{"input":1},{"scalar":{"func":"mul","x":0,"scalar":0.5}},{"binary":{"func":"add","a":2,"b":1}}]},"softmax":{"dtype":"f32","shape":[5,256],"axis":1}}"#,
        r#"{"op":"fused_reduce","prologue":{"dtype":"f32","inputs":[[3,1000]],"nodes":[{"input":0},{"scalar":{"func":"mul","x":0,"scalar":1.5}}]},"reduce":{"func":"sum","dtype":"f32","shape":[3,1000],"axes":[1]},"epilogue":{"dtype":"f32","inputs":[[3],[3]],"nodes":[{"input":0},{"input":1},{"scalar":{"func":"mul","x":0,"scalar":0.25}},{"binary":{"func":"add","a":2,"b":1}}]}}"#,
        r#"{"op":"fused_reduce","prologue":{"dtype":"f32","inputs":[[3000]],"nodes":[{"input":0},{"scalar":{"func":"mul","x":0,"scalar":1.5}},{"binary":{"func":"mul","a":1,"b":0}}]},"reduce":{"func":"sum","dtype":"f32","shape":[3000],"axes":[0]}}"#,
        r#"{"op":"softmax_backward","dtype":"f32","shape":[9,256,1],"axis":1,"log":true}"#,
        r#"{"op":"layer_norm","dtype":"f32","shape":[5,256],"eps":0.00001,"weight":true,"bias":true}"#,
        r#"{"op":"layer_norm","dtype":"f32","shape":[300,8],"eps":0.00001,"rms":true,"weight":true,"save_stats":true}"#,
        // A layer norm with an epilogue: y into a temporary, then the epilogue; its
        // other outputs (sum, stats) straight from the norm.
        r#"{"op":"layer_norm","dtype":"f32","shape":[6,256],"eps":0.00001,"weight":true,"residual":true,"save_stats":true,"epilogue":{"dtype":"f32","inputs":[[6,256],[256]],"nodes":[{"input":0},{"input":1},{"scalar":{"func":"add","x":1,"scalar":1.0}},{"binary":{"func":"mul","a":0,"b":2}}]}}"#,
        r#"{"op":"layer_norm_backward","dtype":"f32","shape":[300,8],"weight":true}"#,
        r#"{"op":"attention","dtype":"f32","batch":5,"heads":2,"kv_heads":1,"seq_q":16,"seq_k":16,"head_dim":8,"scale":0.35,"causal":true,"mask":[5,1,16,16]}"#,
        r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":3,"heads":2,"kv_heads":2,"seq_q":16,"seq_k":32,"head_dim":8,"scale":0.35,"mask":[16,32]}"#,
        r#"{"op":"gemm","dtype":"f32","m":16,"n":16,"k":16,"batch":[5],"alpha":1.5,"beta":0.5}"#,
        r#"{"op":"gemm","dtype":"f32","m":100,"n":16,"k":32,"trans_b":true,"alpha":1.0,"beta":1.0,"bias":true}"#,
        // GEMM: batches with strides (a broadcast B), one item at a time when one
        // matrix is past the limit, and blocks of one matrix along m, n and k (blocks
        // after the first along k add into C), windows with the whole leading dimension.
        r#"{"op":"gemm","dtype":"f32","m":16,"n":16,"k":16,"batch":[6],"stride_a":[256],"stride_b":[0],"stride_c":[512],"alpha":1.0,"beta":0.5}"#,
        r#"{"op":"gemm","dtype":"f32","m":40,"n":16,"k":32,"batch":[2],"lda":64,"ldc":32,"alpha":1.0,"beta":0.0}"#,
        r#"{"op":"gemm","dtype":"f32","m":40,"n":16,"k":32,"lda":64,"ldc":32,"alpha":2.0,"beta":-1.0,"bias":true}"#,
        r#"{"op":"gemm","dtype":"f32","m":1,"n":1,"k":1536,"trans_b":true,"alpha":0.5,"beta":0.75,"bias":true}"#,
        r#"{"op":"gemm","dtype":"f16","m":1,"n":1,"k":1536,"trans_b":true,"alpha":1.0,"beta":0.0}"#,
        // An activation applies once, on the last block along k.
        r#"{"op":"gemm","dtype":"f32","m":1,"n":1,"k":1536,"trans_b":true,"alpha":0.5,"beta":0.75,"bias":true,"activation":"gelu_erf"}"#,
        r#"{"op":"gemm","dtype":"f32","m":40,"n":16,"k":32,"lda":64,"ldc":32,"alpha":1.0,"beta":0.0,"activation":"tanh"}"#,
        r#"{"op":"gemm","dtype":"f32","m":768,"n":2,"k":2,"trans_a":true,"alpha":1.0,"beta":0.5}"#,
        r#"{"op":"gemm","dtype":"f32","layout":"col_major","m":64,"n":16,"k":32,"trans_b":true,"alpha":1.0,"beta":1.0}"#,
        r#"{"op":"conv2d","dtype":"f32","batch":3,"in_channels":2,"out_channels":4,"height":16,"width":16,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]},"bias":true}"#,
        r#"{"op":"conv2d","dtype":"f32","pass":"backward_data","batch":3,"in_channels":2,"out_channels":4,"height":16,"width":16,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        r#"{"op":"im2col","dtype":"f32","batch":20,"channels":1,"height":8,"width":8,"window":{"kernel":[2,2],"stride":[2,2],"padding":[0,0]}}"#,
        r#"{"op":"col2im","dtype":"f32","batch":20,"channels":1,"height":8,"width":8,"window":{"kernel":[2,2],"stride":[2,2],"padding":[0,0]},"accumulate":true}"#,
        r#"{"op":"pool2d","kind":"max","dtype":"f32","batch":3,"channels":1,"height":32,"width":32,"window":{"kernel":[2,2],"stride":[2,2],"padding":[0,0]},"indices":"u32"}"#,
        r#"{"op":"pool2d_backward","kind":"max","dtype":"f32","batch":3,"channels":1,"height":32,"width":32,"out_height":16,"out_width":16,"index_dtype":"u32","accumulate":true}"#,
        r#"{"op":"adaptive_pool2d","kind":"avg","pass":"backward","dtype":"f32","batch":3,"channels":1,"in_size":[32,32],"out_size":[16,16]}"#,
        r#"{"op":"gather","dtype":"f32","index_dtype":"i32","data":[50,4],"indices":[700],"axis":0}"#,
        r#"{"op":"gather","dtype":"f32","index_dtype":"i64","data":[300,4,2],"indices":[2],"axis":1}"#,
        // A table past the limit: pieces of its rows, each gathering the indices in
        // them (the output whole, or itself split along the indices).
        r#"{"op":"gather","dtype":"f32","index_dtype":"i64","data":[600,4],"indices":[50],"axis":0}"#,
        r#"{"op":"gather","dtype":"i32","index_dtype":"i32","data":[1100],"indices":[2100],"axis":0}"#,
        r#"{"op":"cross_entropy","dtype":"f32","index_dtype":"i32","batch":600,"classes":4,"grad":true,"probs":true}"#,
        r#"{"op":"adam","dtype":"f32","len":3000,"lr":0.01,"beta1":0.9,"beta2":0.999,"eps":1e-8,"weight_decay":0.01,"decoupled":true,"step":3}"#,
        r#"{"op":"image_filter","filter":"grayscale","dtype":"f32","height":10,"width":64,"channels":4}"#,
        r#"{"op":"batch_norm","dtype":"f32","shape":[5,2,16,8],"eps":0.00001,"momentum":0.1,"training":false}"#,
        // Dropout pieces draw the whole op's random bits (their `offset`).
        r#"{"op":"dropout","dtype":"f32","shape":[3000],"p":0.5,"seed":3,"step":2,"mask":true,"rng":"counter"}"#,
        r#"{"op":"dropout","dtype":"f32","shape":[7,433],"p":0.3,"seed":0,"step":9,"mask":true,"rng":"rumus"}"#,
        r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":5,"seq":16,"heads":2,"head_dim":8,"max_positions":20}"#,
        // Movement ops that keep the first dimension in place: pieces of its rows.
        r#"{"op":"permute","dtype":"f32","shape":[10,16,16],"perm":[0,2,1]}"#,
        r#"{"op":"slice","dtype":"f32","shape":[9,512],"starts":[0,100],"sizes":[9,256],"steps":[1,1]}"#,
        r#"{"op":"concat","dtype":"f32","shapes":[[6,256],[6,512]],"axis":1}"#,
        r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[300,4,2],"indices":[2],"axis":1,"combine":"sum","init":"prior"}"#,
        // Along axis 0: every piece reads all the updates, keeps those in its rows.
        r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[600,4],"indices":[40],"axis":0,"combine":"sum","init":"prior"}"#,
        r#"{"op":"scatter","dtype":"i32","index_dtype":"i64","data":[1500],"indices":[9],"axis":0,"combine":"last","init":"zero"}"#,
        r#"{"op":"fill","dtype":"f32","shape":[2500],"value":{"uniform":{"low":-1.0,"high":2.0,"seed":7,"step":1}}}"#,
        r#"{"op":"fill","dtype":"bf16","shape":[3,900],"value":{"normal":{"mean":0.5,"std":2.0,"seed":3,"step":0}}}"#,
        // Movement ops whose rows do not split: blocks of the strided map.
        r#"{"op":"permute","dtype":"f32","shape":[40,60],"perm":[1,0]}"#,
        r#"{"op":"permute","dtype":"u8","shape":[6,20,30],"perm":[2,0,1]}"#,
        r#"{"op":"slice","dtype":"f32","shape":[50,60],"starts":[49,5],"sizes":[40,50],"steps":[-1,1]}"#,
        r#"{"op":"concat","dtype":"i32","shapes":[[3,300],[5,300]],"axis":0}"#,
        r#"{"op":"as_strided","dtype":"f32","len":3000,"shape":[50,30],"strides":[1,60],"offset":7}"#,
        r#"{"op":"as_strided","dtype":"f32","len":3000,"shape":[50,30],"strides":[1,60],"offset":7,"scatter":true}"#,
        // Neighbourhood filters: windows of rows with their halo.
        r#"{"op":"image_filter","filter":"sharpen","dtype":"f32","height":40,"width":32,"channels":1}"#,
        r#"{"op":"image_filter","filter":{"sobel":{"threshold":0.3}},"dtype":"f32","height":30,"width":16,"channels":4}"#,
        r#"{"op":"image_filter","filter":{"gaussian_blur":{"sigma":1.5,"radius":3}},"dtype":"f32","height":50,"width":8,"channels":3}"#,
        r#"{"op":"hardswish","dtype":"f32","shape":[2100],"backward":true}"#,
        r#"{"op":"softplus","dtype":"f32","shape":[3,700]}"#,
        r#"{"op":"cross_entropy","dtype":"f32","index_dtype":"i32","batch":600,"classes":4,"divide_by_batch":true,"grad":true}"#,
        // Sums over the whole batch: each piece's partials, then their sum (or, for
        // batch norm's statistics, their combination) and a second pass.
        r#"{"op":"layer_norm_backward","dtype":"f32","shape":[300,8],"weight":true,"bias":true,"param_grads":true}"#,
        r#"{"op":"conv2d","dtype":"f32","pass":"backward_filter","batch":3,"in_channels":2,"out_channels":4,"height":16,"width":16,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        r#"{"op":"batch_norm","dtype":"f32","shape":[5,2,16,8],"eps":0.00001,"momentum":0.1,"training":true}"#,
        r#"{"op":"batch_norm","dtype":"f16","shape":[9,2,64],"eps":0.001,"momentum":0.3,"training":true}"#,
        r#"{"op":"batch_norm_backward","dtype":"f32","shape":[5,2,16,8],"param_grads":true}"#,
        r#"{"op":"batch_norm_backward","dtype":"f64","shape":[6,4,64]}"#,
        r#"{"op":"batch_norm_backward","dtype":"f32","shape":[5,2,16,8],"given_grads":1000}"#,
        // Rows too long for pieces at aligned starts: pieces at any row, bound from
        // the alignment below (`lower::rebase`) with one-word vectors.
        r#"{"op":"softmax","dtype":"f32","shape":[300,7],"axis":1}"#,
        r#"{"op":"layer_norm","dtype":"f32","shape":[300,7],"eps":0.00001,"rms":true,"save_stats":true}"#,
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[500,3],"axes":[1]}"#,
        r#"{"op":"binary","func":"add","dtype":"u8","lhs":[9,333],"rhs":[333]}"#,
        r#"{"op":"conv2d","dtype":"f32","batch":3,"in_channels":1,"out_channels":3,"height":15,"width":13,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]},"bias":true}"#,
        r#"{"op":"gemm","dtype":"f32","m":300,"n":5,"k":7,"alpha":1.0,"beta":0.5}"#,
        r#"{"op":"gemm","dtype":"f32","m":4,"n":8,"k":1536,"alpha":1.0,"beta":0.0}"#,
        // One row past the limit: a reduction's row is a piece of its own; softmax and
        // norms by catalogue ops over the row (each split on its own); a map op's row
        // by pieces of the dimensions after it.
        r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[2,1100,2],"axes":[1]}"#,
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[2,1100],"axes":[1],"index_dtype":"i32"}"#,
        // A row of the reduced leading dimension past the limit: a piece per row, the
        // partials combined as they come (f16/bf16 means in f32).
        r#"{"op":"reduce","func":"max","dtype":"f32","shape":[3,1100],"axes":[0],"keepdim":true}"#,
        r#"{"op":"reduce","func":"sum","dtype":"i32","shape":[3,1100],"axes":[0],"accumulate":true}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f32","shape":[3,700,2],"axes":[0,2]}"#,
        r#"{"op":"reduce","func":"mean","dtype":"f16","shape":[3,1100],"axes":[0]}"#,
        r#"{"op":"reduce","func":"arg_max","dtype":"f32","shape":[3,1100],"axes":[0],"index_dtype":"i32"}"#,
        r#"{"op":"reduce","func":"arg_min","dtype":"i32","shape":[3000,2],"axes":[0],"keepdim":true,"index_dtype":"i64"}"#,
        r#"{"op":"softmax","dtype":"f32","shape":[2,1100],"axis":0}"#,
        r#"{"op":"softmax","dtype":"f32","shape":[2,1100,3],"axis":1,"log":true}"#,
        r#"{"op":"softmax","dtype":"f16","shape":[2,1100],"axis":1}"#,
        r#"{"op":"softmax_backward","dtype":"f32","shape":[2,1100],"axis":1}"#,
        r#"{"op":"softmax_backward","dtype":"bf16","shape":[1,600,2],"axis":1,"log":true}"#,
        r#"{"op":"layer_norm","dtype":"f32","shape":[2,1100],"eps":0.00001,"weight":true,"bias":true,"save_stats":true}"#,
        r#"{"op":"layer_norm","dtype":"f16","shape":[2,1100],"eps":0.001,"weight":true,"bias":true,"residual":true,"save_stats":true}"#,
        r#"{"op":"layer_norm","dtype":"f32","shape":[1,2000],"eps":0.00001,"rms":true,"weight":true,"residual":true}"#,
        r#"{"op":"layer_norm_backward","dtype":"f32","shape":[2,1100],"weight":true,"bias":true,"param_grads":true}"#,
        r#"{"op":"layer_norm_backward","dtype":"f16","shape":[2,1100],"rms":true,"weight":true,"param_grads":true}"#,
        r#"{"op":"layer_norm_backward","dtype":"f32","shape":[1,1500]}"#,
        r#"{"op":"fused","dtype":"f32","inputs":[[2,1100],[1100]],"nodes":[{"input":0},{"input":1},{"binary":{"func":"add","a":0,"b":1}},{"unary":{"func":"tanh","x":2}}]}"#,
        // Attention items past the limit: pieces of heads and blocks of queries, each
        // block keeping the whole sequence's causal diagonal and its mask rows.
        r#"{"op":"attention","dtype":"f32","batch":2,"heads":4,"kv_heads":2,"seq_q":40,"seq_k":24,"head_dim":8,"scale":0.35,"causal":true,"mask":[2,4,40,24]}"#,
        r#"{"op":"attention","dtype":"f32","batch":1,"heads":1,"kv_heads":1,"seq_q":200,"seq_k":16,"head_dim":8,"scale":0.35,"causal":true,"causal_align":"top_left","mask":[200,16]}"#,
        r#"{"op":"attention","dtype":"f32","batch":1,"heads":1,"kv_heads":1,"seq_q":150,"seq_k":100,"head_dim":8,"scale":0.35,"causal":true}"#,
        r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":2,"heads":2,"kv_heads":1,"seq_q":100,"seq_k":30,"head_dim":8,"scale":0.35,"causal":true,"mask":[2,1,100,30]}"#,
        r#"{"op":"attention","dtype":"f32","batch":1,"heads":8,"kv_heads":2,"seq_q":20,"seq_k":20,"head_dim":8,"scale":0.35}"#,
        // Keys of one head past the limit: blocks of keys combined by their
        // log-sum-exp (causal blocks no query sees skipped; a mask per query and key
        // one query row at a time; a narrow dtype widened to combine).
        r#"{"op":"attention","dtype":"f32","batch":2,"heads":2,"kv_heads":1,"seq_q":5,"seq_k":300,"head_dim":8,"scale":0.35,"causal":true,"mask":[2,1,5,300],"lse":true}"#,
        r#"{"op":"attention","dtype":"f32","batch":1,"heads":1,"kv_heads":1,"seq_q":160,"seq_k":150,"head_dim":8,"scale":0.35,"causal":true,"lse":true}"#,
        r#"{"op":"attention","dtype":"f16","batch":1,"heads":2,"kv_heads":2,"seq_q":6,"seq_k":200,"head_dim":8,"scale":0.35}"#,
        r#"{"op":"attention","dtype":"f32","layout":"bshd","batch":1,"heads":2,"kv_heads":1,"seq_q":20,"seq_k":300,"head_dim":4,"scale":0.5,"causal":true,"mask":[300],"lse":true}"#,
        r#"{"op":"attention","dtype":"f64","layout":"bshd","batch":2,"heads":2,"kv_heads":2,"seq_q":3,"seq_k":70,"head_dim":8,"scale":0.35,"mask":[1,1,3,70]}"#,
        // Items past the limit of ops computing each channel plane on their own:
        // pieces of planes; a convolution in blocks of output channels.
        r#"{"op":"pool2d","kind":"max","dtype":"f32","batch":2,"channels":3,"height":20,"width":20,"window":{"kernel":[2,2],"stride":[2,2],"padding":[0,0]},"indices":"u32"}"#,
        r#"{"op":"pool2d_backward","kind":"max","dtype":"f32","batch":1,"channels":3,"height":20,"width":20,"out_height":10,"out_width":10,"index_dtype":"u32"}"#,
        r#"{"op":"adaptive_pool2d","kind":"avg","dtype":"f32","batch":1,"channels":3,"in_size":[20,20],"out_size":[7,7]}"#,
        r#"{"op":"im2col","dtype":"f32","batch":1,"channels":3,"height":10,"width":10,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        r#"{"op":"col2im","dtype":"f32","batch":1,"channels":3,"height":10,"width":10,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]},"accumulate":true}"#,
        r#"{"op":"conv2d","dtype":"f32","batch":2,"in_channels":2,"out_channels":5,"height":15,"width":13,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]},"bias":true}"#,
        // Scatters whose updates pass the limit: blocks of updates in order (the
        // output itself split along its rows in the last).
        r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[50,4],"indices":[300],"axis":0,"combine":"sum","init":"prior"}"#,
        r#"{"op":"scatter","dtype":"i32","index_dtype":"i64","data":[1500],"indices":[2,700],"axis":0,"combine":"last","init":"zero"}"#,
        r#"{"op":"rope","dtype":"f32","index_dtype":"u32","batch":2,"seq":70,"heads":2,"head_dim":8,"max_positions":80}"#,
        r#"{"op":"rope","dtype":"f32","index_dtype":"i64","batch":2,"seq":70,"heads":2,"head_dim":8,"max_positions":80,"batch_positions":true,"interleaved":true}"#,
        r#"{"op":"concat","dtype":"f32","shapes":[[2,600],[2,500]],"axis":1}"#,
        r#"{"op":"slice","dtype":"f32","shape":[2,1100],"starts":[0,10],"sizes":[2,1050],"steps":[1,1]}"#,
        r#"{"op":"image_filter","filter":{"contrast":{"factor":1.5}},"dtype":"f32","height":2,"width":700,"channels":3}"#,
        r#"{"op":"batch_norm","dtype":"f32","shape":[2,5,15,13],"eps":0.00001,"momentum":0.1,"training":false}"#,
        r#"{"op":"batch_norm","dtype":"f32","shape":[2,5,15,13],"eps":0.00001,"momentum":0.1,"training":true}"#,
        r#"{"op":"batch_norm_backward","dtype":"f32","shape":[2,5,15,13],"param_grads":true}"#,
        r#"{"op":"batch_norm_backward","dtype":"f32","shape":[1,3,40,10]}"#,
        r#"{"op":"conv2d","dtype":"f32","pass":"backward_data","batch":2,"in_channels":5,"out_channels":2,"height":15,"width":13,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        r#"{"op":"conv2d","dtype":"f32","pass":"backward_filter","batch":2,"in_channels":2,"out_channels":5,"height":15,"width":13,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        r#"{"op":"conv2d","dtype":"f16","pass":"backward_filter","batch":3,"in_channels":2,"out_channels":5,"height":15,"width":13,"window":{"kernel":[3,3],"stride":[1,1],"padding":[1,1]}}"#,
        // Along a later axis, one row past the limit: a piece per row.
        r#"{"op":"gather","dtype":"f32","index_dtype":"i32","data":[2,1100],"indices":[3],"axis":1}"#,
        r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[2,1100],"indices":[5],"axis":1,"combine":"sum","init":"prior"}"#,
    ];
    json.iter()
        .map(|j| serde_json::from_str(j).unwrap_or_else(|e| panic!("split case {j}: {e}")))
        .collect()
}
