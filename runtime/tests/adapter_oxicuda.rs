//! oxicuda-backend's `ComputeBackend` served by kernelc ([`OxicudaBackend`]).
//!
//! Every method of the 0.5.5 trait runs through the one conformance harness: an
//! [`Executor`] that allocates, copies, calls the trait method a spec describes and
//! copies back, checked against the f64 reference under docs/semantics.md. The same
//! cases run on the crate's own `CpuBackend` (its "numerical reference"), so both sides
//! are held to one table; where `CpuBackend` is known to differ, a test shows the
//! difference on purpose and says which side is right. Devices: cpu, every wgpu path
//! (lavapipe in CI), CUDA where present. The 0.1.6 trait (feature `oxicuda`) is checked
//! to give the same bytes as 0.5.5's for each of its methods.

mod common;

use kernelc_ir::interp::HostBuffer;
use kernelc_ir::ScalarType::{self, F32, F64};
use kernelc_kernels::conformance::{check_data, Executor};
use kernelc_kernels::ops::conv::{ConvPass, Window2d};
use kernelc_kernels::ops::gemm::Layout;
use kernelc_kernels::seeds;
use kernelc_kernels::spec::*;
use kernelc_runtime::adapters::oxicuda::OxicudaBackend;
use kernelc_runtime::Runtime;
use ox::{BackendError, BackendTranspose, ComputeBackend};
use oxicuda_backend_0_5 as ox;

/// Runs catalogue specs through the oxicuda trait methods they describe.
/// Outputs are poisoned with NaN before each call, or zeroed for a backend that reads
/// its outputs (`CpuBackend`'s gemm reads C even with `beta = 0`, tested below).
struct Through<'a, B: ?Sized>(&'a B, String, Poison);

#[derive(Clone, Copy, PartialEq)]
enum Poison {
    Nan,
    Zero,
}

fn err(e: BackendError) -> String {
    e.to_string()
}

fn transpose(t: bool) -> BackendTranspose {
    if t {
        BackendTranspose::Trans
    } else {
        BackendTranspose::NoTrans
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl<B: ComputeBackend + ?Sized> Through<'_, B> {
    fn upload(&self, bytes: &[u8]) -> Result<u64, String> {
        let p = self.0.alloc(bytes.len().max(1)).map_err(err)?;
        self.0.copy_htod(p, bytes).map_err(err)?;
        Ok(p)
    }

    /// The trait call `spec` describes, on inputs at `i` and outputs at `o`.
    fn call(
        &self,
        spec: &OpSpec,
        i: &[u64],
        o: &[u64],
        data: &[HostBuffer],
    ) -> Result<(), BackendError> {
        let b = self.0;
        let host_indices =
            |k: usize| -> Vec<usize> { data[k].to_f64().iter().map(|&v| v as usize).collect() };
        match spec {
            OpSpec::Gemm(g) if g.dtype == F64 && g.batch.is_empty() => b.gemm(
                transpose(g.trans_a),
                transpose(g.trans_b),
                g.m,
                g.n,
                g.k,
                g.alpha,
                i[0],
                g.lda.unwrap_or(0),
                i[1],
                g.ldb.unwrap_or(0),
                g.beta,
                o[0],
                g.ldc.unwrap_or(0),
            ),
            OpSpec::Gemm(g) if g.dtype == F64 => {
                let s = |v: &Option<Vec<usize>>| v.as_ref().map_or(0, |s| s[0]);
                b.batched_gemm(
                    transpose(g.trans_a),
                    transpose(g.trans_b),
                    g.m,
                    g.n,
                    g.k,
                    g.alpha,
                    i[0],
                    g.lda.unwrap_or(0),
                    s(&g.stride_a),
                    i[1],
                    g.ldb.unwrap_or(0),
                    s(&g.stride_b),
                    g.beta,
                    o[0],
                    g.ldc.unwrap_or(0),
                    s(&g.stride_c),
                    g.batch[0],
                )
            }
            OpSpec::Gemm(g) => b.gemm_mixed_precision(
                match g.input_rounding {
                    Some(InputRounding::Bf16) => ox::MixedPrecision::Bf16,
                    _ => ox::MixedPrecision::F16,
                },
                transpose(g.trans_a),
                transpose(g.trans_b),
                g.m,
                g.n,
                g.k,
                g.alpha as f32,
                i[0],
                g.lda.unwrap_or(0),
                i[1],
                g.ldb.unwrap_or(0),
                g.beta as f32,
                o[0],
                g.ldc.unwrap_or(0),
            ),
            OpSpec::Conv2d(c) => {
                let [oh, ow] = c.out_size();
                let x = [c.batch, c.in_channels, c.height, c.width];
                let w = [
                    c.out_channels,
                    c.in_channels,
                    c.window.kernel[0],
                    c.window.kernel[1],
                ];
                let y = [c.batch, c.out_channels, oh, ow];
                let (s, p) = (&c.window.stride, &c.window.padding);
                match c.pass {
                    ConvPass::Forward => b.conv2d_forward(i[0], &x, i[1], &w, o[0], &y, s, p),
                    ConvPass::BackwardData => {
                        b.conv2d_backward_data(i[0], &y, i[1], &w, o[0], &x, s, p)
                    }
                    ConvPass::BackwardFilter => {
                        b.conv2d_backward_filter(i[0], &x, i[1], &y, o[0], &w, s, p)
                    }
                }
            }
            OpSpec::Attention(a) => b.attention(
                i[0], i[1], i[2], o[0], a.batch, a.heads, a.seq_q, a.seq_k, a.head_dim, a.scale,
                a.causal,
            ),
            OpSpec::Reduce(r) => {
                let op = match r.func {
                    ReduceFn::Sum => ox::ReduceOp::Sum,
                    ReduceFn::Mean => ox::ReduceOp::Mean,
                    ReduceFn::Max => ox::ReduceOp::Max,
                    ReduceFn::Min => ox::ReduceOp::Min,
                    ReduceFn::ArgMax | ReduceFn::ArgMin | ReduceFn::MaxNan | ReduceFn::MinNan => {
                        unreachable!("not an oxicuda reduction")
                    }
                };
                b.reduce(op, i[0], o[0], &r.shape, r.axes[0])
            }
            OpSpec::Unary(u) => b.unary(unary_op(u.func), i[0], o[0], numel(&u.shape)),
            OpSpec::Binary(x) => b.binary(binary_op(x.func), i[0], i[1], o[0], numel(&x.lhs)),
            OpSpec::Softmax(s) => b.softmax(i[0], o[0], &s.shape, s.axis),
            OpSpec::Gather(g) => b.gather(i[0], &host_indices(1), o[0], g.data[0], g.data[1]),
            OpSpec::Scatter(s) => b.scatter(i[0], &host_indices(1), o[0], s.data[0], s.data[1]),
            other => panic!("no oxicuda method computes {}", other.kind_name()),
        }
    }
}

impl<B: ComputeBackend + ?Sized> Executor for Through<'_, B> {
    fn name(&self) -> String {
        self.1.clone()
    }

    fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        let ins = inputs
            .iter()
            .map(|b| self.upload(&b.to_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let aliases = spec.aliases();
        let outputs = spec.outputs();
        let mut outs = Vec::new();
        for (o, sig) in outputs.iter().enumerate() {
            match aliases.iter().find(|a| a.output == o) {
                Some(a) => outs.push(ins[a.input]),
                None => {
                    // 0xff bytes are NaN in every float type.
                    let byte = if self.2 == Poison::Nan { 0xff } else { 0 };
                    let len = numel(&sig.shape) * sig.dtype.size_bytes() as usize;
                    outs.push(self.upload(&vec![byte; len])?)
                }
            }
        }
        self.call(spec, &ins, &outs, inputs).map_err(err)?;
        self.0.synchronize().map_err(err)?;
        let mut results = Vec::new();
        for (sig, &p) in outputs.iter().zip(&outs) {
            let mut bytes = vec![0u8; numel(&sig.shape) * sig.dtype.size_bytes() as usize];
            self.0.copy_dtoh(&mut bytes, p).map_err(err)?;
            results.push(HostBuffer::from_bytes(sig.dtype, &bytes));
        }
        for p in ins.iter().chain(&outs) {
            // An aliased output is an input: freed once.
            let _ = self.0.free(*p);
        }
        Ok(results)
    }
}

fn unary_op(f: UnaryFn) -> ox::UnaryOp {
    match f {
        UnaryFn::Relu => ox::UnaryOp::Relu,
        UnaryFn::Sigmoid => ox::UnaryOp::Sigmoid,
        UnaryFn::Tanh => ox::UnaryOp::Tanh,
        UnaryFn::Exp => ox::UnaryOp::Exp,
        UnaryFn::Log => ox::UnaryOp::Log,
        UnaryFn::Sqrt => ox::UnaryOp::Sqrt,
        UnaryFn::Abs => ox::UnaryOp::Abs,
        UnaryFn::Neg => ox::UnaryOp::Neg,
        other => panic!("{other:?} is not an oxicuda unary op"),
    }
}

fn binary_op(f: BinaryFn) -> ox::BinaryOp {
    match f {
        BinaryFn::Add => ox::BinaryOp::Add,
        BinaryFn::Sub => ox::BinaryOp::Sub,
        BinaryFn::Mul => ox::BinaryOp::Mul,
        BinaryFn::Div => ox::BinaryOp::Div,
        BinaryFn::Max => ox::BinaryOp::Max,
        BinaryFn::Min => ox::BinaryOp::Min,
        other => panic!("{other:?} is not an oxicuda binary op"),
    }
}

fn gemm(
    dtype: ScalarType,
    [m, n, k]: [usize; 3],
    trans: [bool; 2],
    alpha: f64,
    beta: f64,
) -> GemmSpec {
    GemmSpec {
        dtype,
        layout: Layout::ColMajor,
        m,
        n,
        k,
        trans_a: trans[0],
        trans_b: trans[1],
        batch: vec![],
        alpha,
        beta,
        bias: false,
        lda: Some(if trans[0] { k } else { m }),
        ldb: Some(if trans[1] { n } else { k }),
        ldc: Some(m),
        stride_a: None,
        stride_b: None,
        stride_c: None,
        input_rounding: None,
        activation: None,
    }
}

/// The cases of each method: shapes of 1, ragged sizes, every transpose, padded
/// leading dimensions, accumulation, causal attention with `seq_q != seq_kv`.
fn cases() -> Vec<(&'static str, OpSpec)> {
    let mut v: Vec<(&'static str, OpSpec)> = Vec::new();
    let sizes = [[1, 1, 1], [7, 5, 3], [33, 17, 65]];
    for mnk in sizes {
        for trans in [[false, false], [true, false], [false, true], [true, true]] {
            v.push(("gemm", gemm(F64, mnk, trans, 1.0, 0.0).into()));
        }
        v.push(("gemm", gemm(F64, mnk, [true, false], -0.75, 1.5).into()));
    }
    let mut padded = gemm(F64, [9, 4, 6], [false, true], 2.0, 0.5);
    padded.lda = Some(13);
    padded.ldb = Some(5);
    padded.ldc = Some(10);
    v.push(("gemm", padded.into()));
    v.push((
        "gemm",
        gemm(F64, [5, 3, 0], [false, false], 1.0, 2.0).into(),
    ));
    for (count, [m, n, k], strides) in [
        (1, [1, 1, 1], [1, 1, 1]),
        (3, [5, 7, 4], [20, 28, 35]),
        (4, [6, 3, 9], [60, 0, 19]),
    ] {
        let mut g = gemm(F64, [m, n, k], [false, true], 1.25, 0.0);
        g.batch = vec![count];
        g.stride_a = Some(vec![strides[0]]);
        g.stride_b = Some(vec![strides[1]]);
        g.stride_c = Some(vec![strides[2]]);
        v.push(("batched_gemm", g.into()));
    }
    for rounding in [InputRounding::F16, InputRounding::Bf16] {
        for mnk in sizes {
            let mut g = gemm(F32, mnk, [false, true], 1.0, 0.5);
            g.input_rounding = Some(rounding);
            v.push(("gemm_mixed_precision", g.into()));
        }
    }
    for pass in [
        ConvPass::Forward,
        ConvPass::BackwardData,
        ConvPass::BackwardFilter,
    ] {
        let name = match pass {
            ConvPass::Forward => "conv2d_forward",
            ConvPass::BackwardData => "conv2d_backward_data",
            ConvPass::BackwardFilter => "conv2d_backward_filter",
        };
        for (n, c, k, h, w, win) in [
            (1, 1, 1, 1, 1, Window2d::new([1, 1], [1, 1], [0, 0])),
            (2, 3, 4, 7, 5, Window2d::new([3, 3], [2, 2], [1, 1])),
            (1, 5, 2, 9, 11, Window2d::new([2, 3], [1, 2], [0, 1])),
        ] {
            let spec = Conv2dSpec {
                dtype: F32,
                pass,
                batch: n,
                in_channels: c,
                out_channels: k,
                height: h,
                width: w,
                window: win,
                bias: false,
            };
            v.push((name, spec.into()));
        }
    }
    for (b, h, sq, sk, d, causal) in [
        (1, 1, 1, 1, 1, false),
        (2, 3, 5, 7, 8, true),
        (1, 2, 9, 4, 16, true),
        (1, 1, 17, 17, 5, false),
    ] {
        let spec = AttentionSpec {
            dtype: F32,
            layout: AttentionLayout::Bhsd,
            batch: b,
            heads: h,
            kv_heads: h,
            seq_q: sq,
            seq_k: sk,
            head_dim: d,
            scale: 1.0 / (d as f64).sqrt(),
            causal,
            mask: None,
            causal_align: Default::default(),
            lse: false,
        };
        v.push(("attention", spec.into()));
    }
    for func in [ReduceFn::Sum, ReduceFn::Max, ReduceFn::Min, ReduceFn::Mean] {
        for (shape, axis) in [
            (vec![1], 0),
            (vec![3, 5, 7], 0),
            (vec![3, 5, 7], 1),
            (vec![3, 5, 7], 2),
            (vec![1000], 0),
        ] {
            let spec = ReduceSpec {
                func,
                dtype: F32,
                shape,
                axes: vec![axis],
                keepdim: false,
                index_dtype: None,
                accumulate: false,
            };
            v.push(("reduce", spec.into()));
        }
    }
    for func in [
        UnaryFn::Relu,
        UnaryFn::Sigmoid,
        UnaryFn::Tanh,
        UnaryFn::Exp,
        UnaryFn::Log,
        UnaryFn::Sqrt,
        UnaryFn::Abs,
        UnaryFn::Neg,
    ] {
        for n in [1, 1000, 4099] {
            v.push((
                "unary",
                UnarySpec {
                    func,
                    dtype: F32,
                    shape: vec![n],
                }
                .into(),
            ));
        }
    }
    for func in [
        BinaryFn::Add,
        BinaryFn::Sub,
        BinaryFn::Mul,
        BinaryFn::Div,
        BinaryFn::Max,
        BinaryFn::Min,
    ] {
        for n in [1, 1023] {
            let spec = BinarySpec {
                func,
                dtype: F32,
                lhs: vec![n],
                rhs: vec![n],
                out_dtype: None,
            };
            v.push(("binary", spec.into()));
        }
    }
    for (shape, axis) in [
        (vec![1], 0),
        (vec![4, 33], 1),
        (vec![6, 5, 3], 1),
        (vec![2, 1000], 1),
    ] {
        v.push((
            "softmax",
            SoftmaxSpec {
                dtype: F32,
                shape,
                axis,
                log: false,
            }
            .into(),
        ));
    }
    for (rows, cols, count) in [(1, 1, 1), (10, 7, 13), (5, 64, 3)] {
        let gather = GatherSpec {
            dtype: F32,
            index_dtype: ScalarType::U32,
            data: vec![rows, cols],
            indices: vec![count],
            axis: 0,
            rows_of: None,
        };
        v.push(("gather", gather.into()));
        let scatter = ScatterSpec {
            dtype: F32,
            index_dtype: ScalarType::U32,
            data: vec![rows, cols],
            indices: vec![count],
            axis: 0,
            combine: ScatterCombine::Last,
            init: ScatterInit::Prior,
            rows_of: None,
        };
        v.push(("scatter", scatter.into()));
    }
    v
}

fn backend(rt: Runtime) -> OxicudaBackend {
    OxicudaBackend::with_runtime(rt)
}

fn label(b: &OxicudaBackend) -> String {
    let rt = b.runtime().expect("initialised");
    format!(
        "oxicuda adapter on {} ({})",
        rt.device_name(),
        rt.target_name()
    )
}

#[test]
fn every_method_conforms_on_every_device() {
    let cases = cases();
    common::assert_cases_cover(&[seeds::OXICUDA, seeds::OXICUDA_V2], &cases);
    for rt in common::runtimes_on("oxicuda adapter", common::ALL_PATHS) {
        let b = backend(rt);
        let caps = b.runtime().expect("initialised").caps().clone();
        // A dtype the device lacks: the trait's own Unsupported.
        common::check_adapter_cases(
            &label(&b),
            &caps,
            &cases,
            |_, spec| (Through(&b, label(&b), Poison::Nan), spec.clone()),
            |e| e.contains("unsupported operation"),
        );
    }
}

/// The crate's own `CpuBackend` on the same cases and the same tolerance table, except
/// the places it is known to differ (tested below, each saying which side is right).
#[test]
fn the_crates_cpu_backend_meets_the_same_table() {
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    let exec = Through(&cpu, "oxicuda CpuBackend".into(), Poison::Zero);
    let mut failures = Vec::new();
    for (seed, (method, spec)) in cases().iter().enumerate() {
        let known_broken = cpu_backend_differs(spec);
        match check_data(&exec, spec, &common::in_range_case(spec, seed as u64)) {
            Ok(()) if known_broken => failures.push(format!("{method}: now works on CpuBackend")),
            Err(_) if known_broken => {}
            Ok(()) => {}
            Err(e) => failures.push(format!("{method}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where `CpuBackend` is known to differ, each shown by a test below: its default
/// `batched_gemm` (batch > 1), its over-long reads of padded column-major operands, and
/// causal attention with more queries than keys.
fn cpu_backend_differs(spec: &OpSpec) -> bool {
    match spec {
        OpSpec::Gemm(g) if g.batch.first().is_some_and(|&b| b > 1) => true,
        OpSpec::Gemm(g) => {
            let rows = |t: bool, r: usize, c: usize| if t { c } else { r };
            g.lda.is_some_and(|l| l > rows(g.trans_a, g.m, g.k))
                || g.ldb.is_some_and(|l| l > rows(g.trans_b, g.k, g.n))
                || g.ldc.is_some_and(|l| l > g.m)
        }
        OpSpec::Attention(a) => a.causal && a.seq_q > a.seq_k,
        _ => false,
    }
}

/// A padded column-major operand spans `ld·(cols−1) + rows` elements (BLAS; what
/// cuBLAS reads); `CpuBackend` reads `ld·cols` and refuses a buffer of the BLAS size.
/// kernelc follows BLAS.
#[test]
fn padded_operands_need_only_the_blas_extent() {
    let (m, n, k, ld) = (2, 2, 2, 5);
    let run = |b: &dyn ComputeBackend| {
        let extent = ld * (k - 1) + m;
        let a = upload_f64(b, &vec![1.0; extent]);
        let bb = upload_f64(b, &vec![1.0; ld * (n - 1) + k]);
        let c = upload_f64(b, &vec![0.0; ld * (n - 1) + m]);
        let nt = BackendTranspose::NoTrans;
        b.gemm(nt, nt, m, n, k, 1.0, a, ld, bb, ld, 0.0, c, ld)
    };
    assert_eq!(run(&cpu_adapter()), Ok(()));
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    assert!(matches!(run(&cpu), Err(BackendError::InvalidArgument(_))));
}

/// Causal attention with `seq_q > seq_kv`, aligned bottom-right (both sides' doc):
/// query `i` sees keys `j <= i + seq_kv - seq_q`, so the first `seq_q - seq_kv` queries
/// see none and output zeros (kernelc; FlashAttention's bottom-right mask does the
/// same). `CpuBackend` clamps their count to 1, so they attend to key 0. kernelc is
/// right by the alignment both document.
#[test]
fn causal_attention_with_more_queries_than_keys() {
    let (seq_q, seq_kv, d) = (3, 1, 2);
    let run = |b: &dyn ComputeBackend| {
        let up = |v: &[f32]| {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
            let p = b.alloc(bytes.len()).unwrap();
            b.copy_htod(p, &bytes).unwrap();
            p
        };
        let q = up(&[1.0; 6]);
        let kv = up(&[2.0, 3.0]);
        let o = up(&[9.0; 6]);
        b.attention(q, kv, kv, o, 1, 1, seq_q, seq_kv, d, 0.5, true)
            .unwrap();
        let mut bytes = vec![0u8; 24];
        b.copy_dtoh(&mut bytes, o).unwrap();
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(&cpu_adapter()), vec![0.0, 0.0, 0.0, 0.0, 2.0, 3.0]);
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    assert_eq!(run(&cpu), vec![2.0, 3.0, 2.0, 3.0, 2.0, 3.0]);
}

fn upload_f64(b: &dyn ComputeBackend, v: &[f64]) -> u64 {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let p = b.alloc(bytes.len()).unwrap();
    b.copy_htod(p, &bytes).unwrap();
    p
}

fn download_f64(b: &dyn ComputeBackend, p: u64, n: usize) -> Vec<f64> {
    let mut bytes = vec![0u8; n * 8];
    b.copy_dtoh(&mut bytes, p).unwrap();
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn cpu_adapter() -> OxicudaBackend {
    backend(Runtime::cpu())
}

/// batched_gemm: kernelc's strides count f64 elements (one launch); the trait's
/// default loop advances 4 bytes a stride element, which on f64 data starts batch 1
/// half-way into batch 0's matrix, and on `CpuBackend` cannot resolve the interior
/// pointer at all. kernelc is right: the doc calls them "element strides" and gemm's
/// elements are f64. Shown on purpose: per-batch `gemm` calls agree with kernelc's
/// batched call, the default loop does not, and `CpuBackend` refuses.
#[test]
fn batched_gemm_counts_f64_elements_where_the_default_loop_does_not() {
    /// kernelc with the trait's default `batched_gemm`.
    #[derive(Debug)]
    struct DefaultLoop(OxicudaBackend);
    impl ComputeBackend for DefaultLoop {
        fn name(&self) -> &str {
            "default loop"
        }
        fn init(&mut self) -> ox::BackendResult<()> {
            self.0.init()
        }
        fn is_initialized(&self) -> bool {
            self.0.is_initialized()
        }
        fn gemm(
            &self,
            ta: BackendTranspose,
            tb: BackendTranspose,
            m: usize,
            n: usize,
            k: usize,
            alpha: f64,
            a: u64,
            lda: usize,
            b: u64,
            ldb: usize,
            beta: f64,
            c: u64,
            ldc: usize,
        ) -> ox::BackendResult<()> {
            self.0
                .gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        }
        fn conv2d_forward(
            &self,
            _: u64,
            _: &[usize],
            _: u64,
            _: &[usize],
            _: u64,
            _: &[usize],
            _: &[usize],
            _: &[usize],
        ) -> ox::BackendResult<()> {
            unreachable!()
        }
        fn attention(
            &self,
            _: u64,
            _: u64,
            _: u64,
            _: u64,
            _: usize,
            _: usize,
            _: usize,
            _: usize,
            _: usize,
            _: f64,
            _: bool,
        ) -> ox::BackendResult<()> {
            unreachable!()
        }
        fn reduce(
            &self,
            _: ox::ReduceOp,
            _: u64,
            _: u64,
            _: &[usize],
            _: usize,
        ) -> ox::BackendResult<()> {
            unreachable!()
        }
        fn unary(&self, _: ox::UnaryOp, _: u64, _: u64, _: usize) -> ox::BackendResult<()> {
            unreachable!()
        }
        fn binary(
            &self,
            _: ox::BinaryOp,
            _: u64,
            _: u64,
            _: u64,
            _: usize,
        ) -> ox::BackendResult<()> {
            unreachable!()
        }
        fn synchronize(&self) -> ox::BackendResult<()> {
            self.0.synchronize()
        }
        fn alloc(&self, bytes: usize) -> ox::BackendResult<u64> {
            self.0.alloc(bytes)
        }
        fn free(&self, p: u64) -> ox::BackendResult<()> {
            self.0.free(p)
        }
        fn copy_htod(&self, d: u64, s: &[u8]) -> ox::BackendResult<()> {
            self.0.copy_htod(d, s)
        }
        fn copy_dtoh(&self, d: &mut [u8], s: u64) -> ox::BackendResult<()> {
            self.0.copy_dtoh(d, s)
        }
    }
    let (m, n, k, batch) = (3, 2, 4, 3);
    let a: Vec<f64> = (0..m * k * batch).map(|i| (i % 7) as f64 - 3.0).collect();
    let b: Vec<f64> = (0..k * n * batch).map(|i| (i % 5) as f64 * 0.5).collect();
    let run = |backend: &dyn ComputeBackend, batched: bool| -> ox::BackendResult<Vec<f64>> {
        let (pa, pb) = (upload_f64(backend, &a), upload_f64(backend, &b));
        let pc = upload_f64(backend, &vec![0.0; m * n * batch]);
        let nt = BackendTranspose::NoTrans;
        if batched {
            backend.batched_gemm(
                nt,
                nt,
                m,
                n,
                k,
                1.0,
                pa,
                m,
                m * k,
                pb,
                k,
                k * n,
                0.0,
                pc,
                m,
                m * n,
                batch,
            )?;
        } else {
            for i in 0..batch as u64 {
                let at = |p: u64, stride: usize| p + i * (stride * 8) as u64;
                backend.gemm(
                    nt,
                    nt,
                    m,
                    n,
                    k,
                    1.0,
                    at(pa, m * k),
                    m,
                    at(pb, k * n),
                    k,
                    0.0,
                    at(pc, m * n),
                    m,
                )?;
            }
        }
        Ok(download_f64(backend, pc, m * n * batch))
    };
    let kernelc = cpu_adapter();
    let per_batch = run(&kernelc, false).unwrap();
    assert_eq!(
        run(&kernelc, true).unwrap(),
        per_batch,
        "one batched launch = per-batch gemm"
    );
    let mut default_loop = DefaultLoop(OxicudaBackend::with_device(
        kernelc_runtime::DeviceChoice::Cpu,
    ));
    default_loop.init().unwrap();
    let looped = run(&default_loop, true).unwrap();
    assert_ne!(
        looped, per_batch,
        "the default loop reads f64 matrices at 4-byte steps"
    );
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    assert!(
        matches!(run(&cpu, true), Err(BackendError::InvalidArgument(_))),
        "CpuBackend's default batched_gemm cannot resolve interior pointers"
    );
}

/// `beta = 0`: kernelc does not read C (BLAS: a NaN in C stays out), `CpuBackend`
/// computes `0·C` and propagates NaN. BLAS (and cuBLAS, which oxicuda wraps) is right.
#[test]
fn gemm_with_beta_zero_does_not_read_c() {
    let run = |b: &dyn ComputeBackend| {
        let pa = upload_f64(b, &[2.0]);
        let pb = upload_f64(b, &[3.0]);
        let pc = upload_f64(b, &[f64::NAN]);
        let nt = BackendTranspose::NoTrans;
        b.gemm(nt, nt, 1, 1, 1, 1.0, pa, 1, pb, 1, 0.0, pc, 1)
            .unwrap();
        download_f64(b, pc, 1)[0]
    };
    assert_eq!(run(&cpu_adapter()), 6.0);
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    assert!(run(&cpu).is_nan(), "CpuBackend reads C even with beta = 0");
}

/// NaN in `relu` and in `max`: kernelc propagates it (IEEE / PyTorch), `CpuBackend`
/// uses `f32::max`, which drops it (`relu(NaN) = 0`). kernelc's is the documented
/// semantics of docs/semantics.md (NaN propagates through elementwise ops).
#[test]
fn relu_of_nan_differs_from_cpu_backend_on_purpose() {
    let run = |b: &dyn ComputeBackend| {
        let bytes = f32::NAN.to_ne_bytes();
        let (pi, po) = (b.alloc(4).unwrap(), b.alloc(4).unwrap());
        b.copy_htod(pi, &bytes).unwrap();
        b.unary(ox::UnaryOp::Relu, pi, po, 1).unwrap();
        let mut out = [0u8; 4];
        b.copy_dtoh(&mut out, po).unwrap();
        f32::from_ne_bytes(out)
    };
    assert!(run(&cpu_adapter()).is_nan());
    let mut cpu = ox::CpuBackend::new();
    cpu.init().unwrap();
    assert_eq!(run(&cpu), 0.0);
}

/// Bad input: the trait's error, and nothing written.
#[test]
fn bad_input_is_the_traits_error_and_writes_nothing() {
    let uninit = OxicudaBackend::with_device(kernelc_runtime::DeviceChoice::Cpu);
    assert_eq!(uninit.alloc(16), Err(BackendError::NotInitialized));
    assert_eq!(
        uninit.unary(ox::UnaryOp::Abs, 1, 2, 1),
        Err(BackendError::NotInitialized)
    );
    assert!(!uninit.is_initialized());

    let b = cpu_adapter();
    assert!(matches!(b.alloc(0), Err(BackendError::InvalidArgument(_))));
    let input = b.alloc(16).unwrap();
    let output = b.alloc(16).unwrap();
    let poison = [0xabu8; 16];
    b.copy_htod(output, &poison).unwrap();
    let unchanged = |what: &str| {
        let mut got = [0u8; 16];
        b.copy_dtoh(&mut got, output).unwrap();
        assert_eq!(got, poison, "{what} wrote into the output");
    };
    let invalid = |r: ox::BackendResult<()>, what: &str| {
        assert!(
            matches!(r, Err(BackendError::InvalidArgument(_))),
            "{what}: {r:?}"
        );
        unchanged(what);
    };
    // 5 f32 are 20 bytes: past the 16-byte allocations.
    invalid(b.unary(ox::UnaryOp::Abs, input, output, 5), "out of range");
    invalid(
        b.unary(ox::UnaryOp::Abs, 0x10, output, 1),
        "unknown pointer",
    );
    invalid(
        b.unary(ox::UnaryOp::Abs, input + 8, output, 4),
        "interior pointer past the end",
    );
    invalid(
        b.binary(ox::BinaryOp::Add, input, input, output + 2, 1),
        "misaligned output",
    );
    invalid(
        b.reduce(ox::ReduceOp::Sum, input, output, &[2, 2], 2),
        "reduce axis",
    );
    invalid(
        b.conv2d_forward(
            input,
            &[1, 1, 2, 2],
            input,
            &[1, 1, 1, 1],
            output,
            &[1, 1, 3, 3],
            &[1, 1],
            &[0, 0],
        ),
        "conv2d output shape",
    );
    invalid(
        b.conv2d_forward(
            input,
            &[1, 1, 2],
            input,
            &[1, 1, 1, 1],
            output,
            &[1, 1, 2, 2],
            &[1, 1],
            &[0, 0],
        ),
        "conv2d rank",
    );
    invalid(b.gather(input, &[5], output, 2, 2), "gather index");
    invalid(b.copy_htod(output + 8, &[0u8; 9]), "copy past the end");
    let freed = b.alloc(8).unwrap();
    b.free(freed).unwrap();
    invalid(b.unary(ox::UnaryOp::Abs, freed, output, 1), "freed pointer");
    assert!(matches!(
        b.free(freed),
        Err(BackendError::InvalidArgument(_))
    ));
    assert!(matches!(
        b.free(input + 4),
        Err(BackendError::InvalidArgument(_))
    ));
    // Interior pointers resolve: the second half of `input` is a valid operand.
    b.copy_htod(
        input,
        &[1.0f32, -2.0, 3.0, -4.0].map(f32::to_ne_bytes).concat(),
    )
    .unwrap();
    b.unary(ox::UnaryOp::Abs, input + 8, output + 4, 2).unwrap();
    let mut got = [0u8; 16];
    b.copy_dtoh(&mut got, output).unwrap();
    assert_eq!(
        &got[4..12],
        &[3.0f32, 4.0].map(f32::to_ne_bytes).concat()[..]
    );
    assert_eq!(&got[..4], &poison[..4]);
    assert_eq!(&got[12..], &poison[12..]);
}

/// `init` opens a device once; a second call keeps it.
#[test]
fn init_picks_a_device_once() {
    let mut b = OxicudaBackend::with_device(kernelc_runtime::DeviceChoice::Cpu);
    assert_eq!(b.name(), "kernelc");
    b.init().unwrap();
    let first = b.alloc(8).unwrap();
    b.init().unwrap();
    assert!(b.is_initialized());
    assert_eq!(b.name(), "cpu");
    b.free(first)
        .expect("the allocation survives a second init");
    let devices = b.available_devices().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].memory_kind, ox::MemoryKind::Host);
}

/// The 0.1.6 trait (feature `oxicuda`): each of its methods gives the bytes 0.5.5's
/// does, through `dyn` (the trait is object-safe).
#[test]
fn the_0_1_trait_gives_the_same_results() {
    use oxicuda_backend as v01;
    let b = cpu_adapter();
    let old: &dyn v01::ComputeBackend = &b;
    let new: &dyn ComputeBackend = &b;
    assert_eq!(old.name(), new.name());
    assert!(old.is_initialized());
    let data: Vec<u8> = (0..64)
        .map(|i| ((i as f32) * 0.37 - 9.0).to_ne_bytes())
        .collect::<Vec<_>>()
        .concat();
    let x = old.alloc(256).unwrap();
    old.copy_htod(x, &data).unwrap();
    let read = |p: u64, n: usize| {
        let mut out = vec![0u8; n];
        old.copy_dtoh(&mut out, p).unwrap();
        out
    };
    let (y_old, y_new) = (old.alloc(256).unwrap(), new.alloc(256).unwrap());
    old.unary(v01::UnaryOp::Tanh, x, y_old, 64).unwrap();
    new.unary(ox::UnaryOp::Tanh, x, y_new, 64).unwrap();
    assert_eq!(read(y_old, 256), read(y_new, 256));
    old.binary(v01::BinaryOp::Max, x, y_old, y_old, 64).unwrap();
    new.binary(ox::BinaryOp::Max, x, y_new, y_new, 64).unwrap();
    assert_eq!(read(y_old, 256), read(y_new, 256));
    old.reduce(v01::ReduceOp::Mean, x, y_old, &[8, 8], 1)
        .unwrap();
    new.reduce(ox::ReduceOp::Mean, x, y_new, &[8, 8], 1)
        .unwrap();
    assert_eq!(read(y_old, 32), read(y_new, 32));
    old.attention(x, x, x, y_old, 1, 2, 4, 4, 4, 0.5, true)
        .unwrap();
    new.attention(x, x, x, y_new, 1, 2, 4, 4, 4, 0.5, true)
        .unwrap();
    assert_eq!(read(y_old, 128), read(y_new, 128));
    old.conv2d_forward(
        x,
        &[1, 1, 4, 4],
        x,
        &[2, 1, 3, 3],
        y_old,
        &[1, 2, 2, 2],
        &[1, 1],
        &[0, 0],
    )
    .unwrap();
    new.conv2d_forward(
        x,
        &[1, 1, 4, 4],
        x,
        &[2, 1, 3, 3],
        y_new,
        &[1, 2, 2, 2],
        &[1, 1],
        &[0, 0],
    )
    .unwrap();
    assert_eq!(read(y_old, 32), read(y_new, 32));
    let (t, n) = (v01::BackendTranspose::Trans, v01::BackendTranspose::NoTrans);
    old.gemm(t, n, 2, 2, 3, 1.0, x, 3, x, 3, 0.0, y_old, 2)
        .unwrap();
    new.gemm(
        BackendTranspose::Trans,
        BackendTranspose::NoTrans,
        2,
        2,
        3,
        1.0,
        x,
        3,
        x,
        3,
        0.0,
        y_new,
        2,
    )
    .unwrap();
    assert_eq!(read(y_old, 32), read(y_new, 32));
    old.batched_gemm(n, n, 2, 2, 2, 1.0, x, 2, 4, x, 2, 4, 0.0, y_old, 2, 4, 2)
        .unwrap();
    new.batched_gemm(
        BackendTranspose::NoTrans,
        BackendTranspose::NoTrans,
        2,
        2,
        2,
        1.0,
        x,
        2,
        4,
        x,
        2,
        4,
        0.0,
        y_new,
        2,
        4,
        2,
    )
    .unwrap();
    assert_eq!(read(y_old, 64), read(y_new, 64));
    old.synchronize().unwrap();
    old.free(y_old).unwrap();
    assert_eq!(
        old.free(y_old),
        Err(v01::BackendError::InvalidArgument(format!(
            "address {y_old:#x} lies in an allocation that was freed"
        )))
    );
}
