//! The 30 primitives of bb's Contract (`bb_ir::tensor_primitives`), each a catalogue
//! op with ONNX's semantics.

use crate::onnx;
use crate::{BbError, BbTensor, KernelcBb};
use bb_ir::proto::onnx::{GraphProto, TensorProto};
use bb_runtime::contracts::backend::{Backend, BackendAttrs};
use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{
    BinaryFn, BinarySpec, CastSpec, ConcatSpec, GatherSpec, GemmSpec, PermuteSpec, ReduceFn,
    ReduceSpec, UnaryFn, UnarySpec, WhereSpec,
};
use kernelc_runtime::View;
use std::collections::HashMap;

impl KernelcBb {
    fn binary(
        &self,
        op: &'static str,
        func: BinaryFn,
        a: &BbTensor,
        b: &BbTensor,
        out: Option<ScalarType>,
    ) -> Result<BbTensor, BbError> {
        let (x, y) = (self.ours(a, op)?, self.ours(b, op)?);
        if x.dtype() != y.dtype() {
            return Err(BbError::invalid(
                op,
                format!("dtypes {} and {} differ", x.dtype(), y.dtype()),
            ));
        }
        let spec = BinarySpec {
            func,
            dtype: x.dtype(),
            lhs: x.shape().to_vec(),
            rhs: y.shape().to_vec(),
            out_dtype: out,
        };
        self.run1(spec, &[x, y])
    }

    fn unary(&self, op: &'static str, func: UnaryFn, a: &BbTensor) -> Result<BbTensor, BbError> {
        let x = self.ours(a, op)?;
        let spec = UnarySpec {
            func,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
        };
        self.run1(spec, &[x])
    }

    /// ONNX `Reduce*`: empty `axes` reduce every dim.
    fn reduce(
        &self,
        op: &'static str,
        func: ReduceFn,
        a: &BbTensor,
        axes: &[i64],
        keepdims: bool,
    ) -> Result<BbTensor, BbError> {
        let x = self.ours(a, op)?;
        let rank = x.shape().len();
        let axes = if axes.is_empty() {
            (0..rank).collect()
        } else {
            onnx::axes(op, axes, rank)?
        };
        let spec = ReduceSpec {
            func,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            axes,
            keepdim: keepdims,
            index_dtype: None,
            accumulate: false,
        };
        self.run1(spec, &[x])
    }

    fn cast_to(&self, x: &View, to: ScalarType) -> Result<BbTensor, BbError> {
        let spec = CastSpec {
            from: x.dtype(),
            to,
            shape: x.shape().to_vec(),
        };
        self.run1(spec, &[x])
    }
}

impl Backend for KernelcBb {
    type Error = BbError;
    type Tensor = BbTensor;

    /// The whole graph compiled once per input signatures (see the crate doc), then
    /// run: typed errors naming the node for a graph that does not import, nothing
    /// launched.
    fn execute(
        &self,
        graph: &GraphProto,
        inputs: HashMap<String, BbTensor>,
        _attrs: BackendAttrs<'_>,
    ) -> Result<HashMap<String, BbTensor>, BbError> {
        let plan = self.plan_for(graph, &inputs)?;
        self.run_plan(&plan, &inputs)
    }

    fn add(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Add", BinaryFn::Add, a, b, None)
    }

    fn sub(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Sub", BinaryFn::Sub, a, b, None)
    }

    fn mul(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Mul", BinaryFn::Mul, a, b, None)
    }

    /// Integers truncate toward zero (onnxruntime's); division by zero is an error
    /// the next read reports.
    fn div(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Div", BinaryFn::Div, a, b, None)
    }

    fn neg(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.unary("Neg", UnaryFn::Neg, a)
    }

    fn abs(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.unary("Abs", UnaryFn::Abs, a)
    }

    fn sqrt(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.unary("Sqrt", UnaryFn::Sqrt, a)
    }

    /// A float base; an exponent of another type is cast to the base's first (ONNX
    /// lets `Y` differ from `X`).
    fn pow(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        let (x, y) = (self.ours(a, "Pow")?, self.ours(b, "Pow")?);
        if x.dtype() == y.dtype() {
            return self.binary("Pow", BinaryFn::Pow, a, b, None);
        }
        let exponent = self.cast_to(y, x.dtype())?;
        self.binary("Pow", BinaryFn::Pow, a, &exponent, None)
    }

    fn exp(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.unary("Exp", UnaryFn::Exp, a)
    }

    fn log(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.unary("Log", UnaryFn::Log, a)
    }

    /// NumPy's `matmul` (1-D operands promoted, batch dims broadcast).
    fn matmul(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        let (x, y) = (self.ours(a, "MatMul")?, self.ours(b, "MatMul")?);
        if x.dtype() != y.dtype() {
            return Err(BbError::invalid(
                "MatMul",
                format!("dtypes {} and {} differ", x.dtype(), y.dtype()),
            ));
        }
        let (spec, shape) = GemmSpec::matmul(x.dtype(), x.shape(), y.shape())
            .map_err(|e| BbError::invalid("MatMul", e.to_string()))?;
        let flat = |v: &View| v.reshaped(&[v.numel()]);
        let out = self.run1(spec, &[&flat(x)?, &flat(y)?])?;
        self.reshaped(&out, "MatMul", &shape)
    }

    fn reduce_sum(&self, a: &BbTensor, axes: &[i64], keepdims: bool) -> Result<BbTensor, BbError> {
        self.reduce("ReduceSum", ReduceFn::Sum, a, axes, keepdims)
    }

    fn reduce_mean(&self, a: &BbTensor, axes: &[i64], keepdims: bool) -> Result<BbTensor, BbError> {
        self.reduce("ReduceMean", ReduceFn::Mean, a, axes, keepdims)
    }

    /// NaN propagates (ONNX and NumPy `max`).
    fn reduce_max(&self, a: &BbTensor, axes: &[i64], keepdims: bool) -> Result<BbTensor, BbError> {
        let func = onnx::reduce_max_or_min(a.dtype(), true);
        self.reduce("ReduceMax", func, a, axes, keepdims)
    }

    fn reduce_min(&self, a: &BbTensor, axes: &[i64], keepdims: bool) -> Result<BbTensor, BbError> {
        let func = onnx::reduce_max_or_min(a.dtype(), false);
        self.reduce("ReduceMin", func, a, axes, keepdims)
    }

    fn reshape(&self, a: &BbTensor, shape: &[i64]) -> Result<BbTensor, BbError> {
        let target = onnx::reshape(self.ours(a, "Reshape")?.shape(), shape)?;
        self.reshaped(a, "Reshape", &target)
    }

    /// An empty `perm` reverses the dims.
    fn transpose(&self, a: &BbTensor, perm: &[i64]) -> Result<BbTensor, BbError> {
        let x = self.ours(a, "Transpose")?;
        let rank = x.shape().len();
        let perm: Vec<usize> = if perm.is_empty() {
            (0..rank).rev().collect()
        } else {
            perm.iter()
                .map(|&p| onnx::axis("Transpose", p, rank))
                .collect::<Result<_, _>>()?
        };
        let spec = PermuteSpec {
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            perm,
        };
        self.run1(spec, &[x])
    }

    fn concat(&self, inputs: &[&BbTensor], axis: i64) -> Result<BbTensor, BbError> {
        let views = inputs
            .iter()
            .map(|t| self.ours(t, "Concat"))
            .collect::<Result<Vec<_>, _>>()?;
        let first = views
            .first()
            .ok_or_else(|| BbError::invalid("Concat", "no inputs".into()))?;
        if let Some(v) = views.iter().find(|v| v.dtype() != first.dtype()) {
            return Err(BbError::invalid(
                "Concat",
                format!("dtypes {} and {} differ", first.dtype(), v.dtype()),
            ));
        }
        let spec = ConcatSpec {
            dtype: first.dtype(),
            shapes: views.iter().map(|v| v.shape().to_vec()).collect(),
            axis: onnx::axis("Concat", axis, first.shape().len())?,
        };
        self.run1(spec, &views)
    }

    /// ONNX `Slice`: empty `axes` are `0..starts.len()`, empty `steps` all 1; starts
    /// and ends count from the end when negative and clamp to the dim.
    fn slice(
        &self,
        a: &BbTensor,
        starts: &[i64],
        ends: &[i64],
        axes: &[i64],
        steps: &[i64],
    ) -> Result<BbTensor, BbError> {
        let x = self.ours(a, "Slice")?;
        let spec = onnx::slice_spec(x.dtype(), x.shape(), starts, ends, axes, steps)?;
        self.run1(spec, &[x])
    }

    /// Consecutive parts of `sizes` along `axis` (which they must add up to).
    fn split(&self, a: &BbTensor, axis: i64, sizes: &[i64]) -> Result<Vec<BbTensor>, BbError> {
        let x = self.ours(a, "Split")?;
        let d = onnx::axis("Split", axis, x.shape().len())?;
        let sizes = sizes
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| BbError::invalid("Split", format!("negative sizes {sizes:?}")))?;
        onnx::split_specs(x.dtype(), x.shape(), d, &sizes)?
            .into_iter()
            .map(|spec| self.run1(spec, &[x]))
            .collect()
    }

    /// Empty `axes` drop every dim of 1; a named dim must be 1.
    fn squeeze(&self, a: &BbTensor, axes: &[i64]) -> Result<BbTensor, BbError> {
        let shape = onnx::squeezed(self.ours(a, "Squeeze")?.shape(), axes)?;
        self.reshaped(a, "Squeeze", &shape)
    }

    /// New dims of 1 at `axes` of the result (negative ones count from its end).
    fn unsqueeze(&self, a: &BbTensor, axes: &[i64]) -> Result<BbTensor, BbError> {
        let shape = onnx::unsqueezed(self.ours(a, "Unsqueeze")?.shape(), axes)?;
        self.reshaped(a, "Unsqueeze", &shape)
    }

    fn identity(&self, a: &BbTensor) -> Result<BbTensor, BbError> {
        self.ours(a, "Identity")?;
        Ok(a.clone())
    }

    /// `dtype` is an ONNX `TensorProto.DataType`.
    fn cast(&self, a: &BbTensor, dtype: i32) -> Result<BbTensor, BbError> {
        let x = self.ours(a, "Cast")?;
        self.cast_to(x, onnx::dtype(dtype)?)
    }

    fn equal(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Equal", BinaryFn::Eq, a, b, Some(ScalarType::Bool))
    }

    fn greater(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Greater", BinaryFn::Gt, a, b, Some(ScalarType::Bool))
    }

    fn less(&self, a: &BbTensor, b: &BbTensor) -> Result<BbTensor, BbError> {
        self.binary("Less", BinaryFn::Lt, a, b, Some(ScalarType::Bool))
    }

    /// `cond` of bool (or any type: nonzero is true); `t` and `f` of one dtype; all
    /// three broadcast.
    fn r#where(&self, cond: &BbTensor, t: &BbTensor, f: &BbTensor) -> Result<BbTensor, BbError> {
        let (c, x, y) = (
            self.ours(cond, "Where")?,
            self.ours(t, "Where")?,
            self.ours(f, "Where")?,
        );
        if x.dtype() != y.dtype() {
            return Err(BbError::invalid(
                "Where",
                format!("dtypes {} and {} differ", x.dtype(), y.dtype()),
            ));
        }
        let spec = WhereSpec {
            dtype: x.dtype(),
            cond_dtype: c.dtype(),
            cond: c.shape().to_vec(),
            a: x.shape().to_vec(),
            b: y.shape().to_vec(),
        };
        self.run1(spec, &[c, x, y])
    }

    fn constant(&self, value: TensorProto) -> Result<BbTensor, BbError> {
        let (dtype, shape, bytes) = onnx::decode(&value)?;
        self.tensor_from_bytes(dtype, &shape, &bytes)
    }

    /// ONNX `Gather`: negative indices count from the end; indices are i32 or i64.
    fn gather(&self, data: &BbTensor, indices: &BbTensor, axis: i64) -> Result<BbTensor, BbError> {
        let (x, i) = (self.ours(data, "Gather")?, self.ours(indices, "Gather")?);
        if !matches!(i.dtype(), ScalarType::I32 | ScalarType::I64) {
            return Err(BbError::invalid(
                "Gather",
                format!("{} indices (ONNX takes int32 or int64)", i.dtype()),
            ));
        }
        let spec = GatherSpec {
            dtype: x.dtype(),
            index_dtype: i.dtype(),
            data: x.shape().to_vec(),
            indices: i.shape().to_vec(),
            axis: onnx::axis("Gather", axis, x.shape().len())?,
            rows_of: None,
        };
        self.run1(spec, &[x, i])
    }
}
