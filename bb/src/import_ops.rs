//! ONNX node types as catalogue ops, with ONNX's semantics (opset 13 and later:
//! axes, shapes and split sizes as inputs, or as attributes where older opsets and
//! bb's contract keep them): the 30 primitives of bb's contract and the extensions a
//! model needs (activations, softmax, layer and batch norm, Gemm, Conv, pooling,
//! Shape, Flatten, Expand, ...).

use kernelc_ir::ScalarType;
use kernelc_kernels::ops::{
    AdaptivePool2dSpec, AsStridedSpec, BatchNormSpec, Conv2dSpec, FillSpec, FillValue,
    LayerNormSpec, Nchw, Pool2dSpec, PoolKind, PoolPass, ScalarSpec, SoftmaxSpec, Window2d,
};
use kernelc_kernels::spec::{
    BinaryFn, BinarySpec, CastSpec, ConcatSpec, GatherSpec, GemmSpec, OpSpec, PermuteSpec,
    ReduceFn, ReduceSpec, UnaryFn, UnarySpec, WhereSpec,
};

use kernelc_kernels::shape::{broadcast_shapes, broadcast_strides};

use crate::import::{At, HostTensor, Importer, Value};
use crate::{onnx, BbError};

type Args<'a> = &'a [Option<Value>];

/// Input `i` of the node, which it must have.
fn arg<'a>(at: &At<'_>, args: Args<'a>, i: usize) -> Result<&'a Value, BbError> {
    args.get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| at.invalid(format!("input {i} is missing")))
}

/// Input `i` as integers known when the graph is compiled.
fn host_ints(
    at: &At<'_>,
    args: Args<'_>,
    i: usize,
    what: &str,
) -> Result<Option<Vec<i64>>, BbError> {
    match args.get(i).and_then(Option::as_ref) {
        None => Ok(None),
        Some(Value::Host(h)) => Ok(Some(h.ints())),
        Some(Value::Device { .. }) => Err(at.invalid(format!(
            "its {what} (input {i}) must be known when the graph is compiled (a constant, an initializer or computed from shapes)"
        ))),
    }
}

/// A list given as input `i` (opset 13+) or as attribute `name` (earlier opsets and
/// bb's contract).
fn ints_from(
    at: &At<'_>,
    args: Args<'_>,
    i: usize,
    name: &str,
) -> Result<Option<Vec<i64>>, BbError> {
    match host_ints(at, args, i, name)? {
        Some(v) => Ok(Some(v)),
        None => Ok(at.ints(name)),
    }
}

fn same_dtype(at: &At<'_>, a: &Value, b: &Value) -> Result<ScalarType, BbError> {
    if a.dtype() != b.dtype() {
        return Err(at.invalid(format!("dtypes {} and {} differ", a.dtype(), b.dtype())));
    }
    Ok(a.dtype())
}

fn binary(
    im: &mut Importer,
    at: &At<'_>,
    func: BinaryFn,
    a: &Value,
    b: &Value,
    out_dtype: Option<ScalarType>,
) -> Result<Value, BbError> {
    let dtype = same_dtype(at, a, b)?;
    let spec = BinarySpec {
        func,
        dtype,
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
        out_dtype,
    };
    if let Some(folded) = with_constant_operand(im, at, &spec, a, b)? {
        return Ok(folded);
    }
    im.op1(at, spec, &[a, b])
}

/// `spec` of a float device tensor and a constant of one element (`x / √d`,
/// `x + 1e-5`) as a scalar op: the constant is a per-call value of the kernel, not a tensor to
/// upload and read, and the graph's rewrites see a constant (a GEMM takes a factor
/// into its `alpha`). `None` where the operands are not so, or the scalar op does
/// not exist for the function.
fn with_constant_operand(
    im: &mut Importer,
    at: &At<'_>,
    spec: &BinarySpec,
    a: &Value,
    b: &Value,
) -> Result<Option<Value>, BbError> {
    let (device, constant, reversed) = match (a, b) {
        (Value::Device { .. }, Value::Host(h)) => (a, h, false),
        (Value::Host(h), Value::Device { .. }) => (b, h, true),
        _ => return Ok(None),
    };
    let ([value], Ok(out)) = (
        constant.values.as_slice(),
        broadcast_shapes(&spec.lhs, &spec.rhs),
    ) else {
        return Ok(None);
    };
    if !spec.dtype.is_float() {
        // Integer arithmetic is shape arithmetic, folded on the host; an i64 constant
        // past 2^53 would not survive a float per-call value.
        return Ok(None);
    }
    let scalar = OpSpec::Scalar(ScalarSpec {
        func: spec.func,
        dtype: spec.dtype,
        shape: device.shape().to_vec(),
        scalar: *value,
        reversed,
        out_dtype: spec.out_dtype,
    });
    if scalar.validate().is_err() {
        return Ok(None);
    }
    Ok(Some(im.op1(at, scalar, &[device])?.reshaped(out)))
}

fn unary(im: &mut Importer, at: &At<'_>, func: UnaryFn, a: &Value) -> Result<Value, BbError> {
    let spec = UnarySpec {
        func,
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
    };
    im.op1(at, spec, &[a])
}

fn scalar(
    im: &mut Importer,
    at: &At<'_>,
    func: BinaryFn,
    a: &Value,
    value: f64,
    reversed: bool,
) -> Result<Value, BbError> {
    let spec = ScalarSpec {
        func,
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
        scalar: value,
        reversed,
        out_dtype: None,
    };
    im.op1(at, spec, &[a])
}

fn cast(im: &mut Importer, at: &At<'_>, a: &Value, to: ScalarType) -> Result<Value, BbError> {
    if a.dtype() == to {
        return Ok(a.clone());
    }
    let spec = CastSpec {
        from: a.dtype(),
        to,
        shape: a.shape().to_vec(),
    };
    im.op1(at, spec, &[a])
}

/// The node's outputs.
pub(crate) fn translate(
    im: &mut Importer,
    at: &At<'_>,
    args: Args<'_>,
) -> Result<Vec<Value>, BbError> {
    let op = at.node.op_type.as_str();
    let one = |v: Value| Ok(vec![v]);
    if let Some(func) = binary_fn(op) {
        let (a, b) = (arg(at, args, 0)?, arg(at, args, 1)?);
        let out = matches!(
            op,
            "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual"
        )
        .then_some(ScalarType::Bool);
        return one(binary(im, at, func, a, b, out)?);
    }
    if let Some(func) = unary_fn(at, op) {
        return one(unary(im, at, func, arg(at, args, 0)?)?);
    }
    match op {
        "Pow" => {
            let (a, b) = (arg(at, args, 0)?, arg(at, args, 1)?);
            let b = cast(im, at, b, a.dtype())?;
            one(binary(im, at, BinaryFn::Pow, a, &b, None)?)
        }
        "Mod" => {
            let func = if at.int("fmod", 0) == 1 {
                BinaryFn::Mod
            } else {
                BinaryFn::FloorMod
            };
            one(binary(
                im,
                at,
                func,
                arg(at, args, 0)?,
                arg(at, args, 1)?,
                None,
            )?)
        }
        "Max" | "Min" | "Sum" => {
            let first = arg(at, args, 0)?;
            let func = match op {
                "Sum" => BinaryFn::Add,
                _ => onnx::max_or_min(first.dtype(), op == "Max"),
            };
            let mut acc = first.clone();
            for i in 1..args.len() {
                acc = binary(im, at, func, &acc, arg(at, args, i)?, None)?;
            }
            one(acc)
        }
        "Reciprocal" => one(scalar(im, at, BinaryFn::Div, arg(at, args, 0)?, 1.0, true)?),
        "Identity" | "Dropout" => {
            // Dropout at inference is the identity (its mask output is not served).
            if at.node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(at.invalid("a dropout mask output (inference only)"));
            }
            one(arg(at, args, 0)?.clone())
        }
        "Cast" => {
            let to = onnx::dtype(at.int("to", 1) as i32).map_err(|e| at.invalid(e))?;
            one(cast(im, at, arg(at, args, 0)?, to)?)
        }
        "Constant" => one(Value::Host(constant(at)?)),
        "Shape" => one(Value::Host(shape_of(at, arg(at, args, 0)?))),
        "ConstantOfShape" => {
            let shape = to_dims(at, &host_ints(at, args, 0, "shape")?.unwrap_or_default())?;
            let fill = match at.attr("value").and_then(|a| a.t.as_ref()) {
                Some(t) => HostTensor::from_proto(t).map_err(|e| at.invalid(e))?,
                None => HostTensor::new(ScalarType::F32, vec![1], vec![0.0]),
            };
            let v = fill.values.first().copied().unwrap_or(0.0);
            one(filled(im, at, fill.dtype, shape, v)?)
        }
        "Reshape" => {
            let a = arg(at, args, 0)?;
            let target = ints_from(at, args, 1, "shape")?.ok_or_else(|| at.invalid("no shape"))?;
            let shape = onnx::reshape(a.shape(), &target).map_err(|e| at.invalid(e))?;
            one(a.reshaped(shape))
        }
        "Flatten" => {
            let a = arg(at, args, 0)?;
            let rank = a.shape().len();
            let axis =
                onnx::axis("Flatten", at.int("axis", 1), rank + 1).map_err(|e| at.invalid(e))?;
            let rows = a.shape()[..axis].iter().product();
            one(a.reshaped(vec![rows, a.shape()[axis..].iter().product()]))
        }
        "Squeeze" => one(squeeze(at, args)?),
        "Unsqueeze" => one(unsqueeze(at, args)?),
        "Transpose" => one(transpose(im, at, arg(at, args, 0)?)?),
        "Concat" => one(concat(im, at, args)?),
        "Slice" => one(slice(im, at, args)?),
        "Split" => split(im, at, args),
        "Gather" => one(gather(im, at, args)?),
        "Where" => one(where_(im, at, args)?),
        "Expand" => one(expand(im, at, args)?),
        "MatMul" => one(matmul(im, at, arg(at, args, 0)?, arg(at, args, 1)?)?),
        "Gemm" => one(gemm(im, at, args)?),
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" => one(reduce(im, at, args)?),
        "Softmax" | "LogSoftmax" => one(softmax(im, at, args, op == "LogSoftmax")?),
        "LayerNormalization" => one(layer_norm(im, at, args)?),
        "BatchNormalization" => one(batch_norm(im, at, args)?),
        "Conv" => one(conv(im, at, args)?),
        "MaxPool" | "AveragePool" => one(pool(im, at, args, op == "MaxPool")?),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            one(global_pool(im, at, args, op == "GlobalMaxPool")?)
        }
        _ => Err(BbError::Node {
            index: at.index,
            name: at.node.name.clone(),
            op_type: at.node.op_type.clone(),
            why: "an op type kernelc does not serve".into(),
        }),
    }
}

fn binary_fn(op: &str) -> Option<BinaryFn> {
    Some(match op {
        "Add" => BinaryFn::Add,
        "Sub" => BinaryFn::Sub,
        "Mul" => BinaryFn::Mul,
        "Div" => BinaryFn::Div,
        "Equal" => BinaryFn::Eq,
        "Greater" => BinaryFn::Gt,
        "Less" => BinaryFn::Lt,
        "GreaterOrEqual" => BinaryFn::Ge,
        "LessOrEqual" => BinaryFn::Le,
        _ => return None,
    })
}

fn unary_fn(at: &At<'_>, op: &str) -> Option<UnaryFn> {
    Some(match op {
        "Neg" => UnaryFn::Neg,
        "Abs" => UnaryFn::Abs,
        "Sqrt" => UnaryFn::Sqrt,
        "Exp" => UnaryFn::Exp,
        "Log" => UnaryFn::Log,
        "Sin" => UnaryFn::Sin,
        "Cos" => UnaryFn::Cos,
        "Tan" => UnaryFn::Tan,
        "Floor" => UnaryFn::Floor,
        "Ceil" => UnaryFn::Ceil,
        "Round" => UnaryFn::Round,
        "Relu" => UnaryFn::Relu,
        "Sigmoid" => UnaryFn::Sigmoid,
        "Tanh" => UnaryFn::Tanh,
        "LeakyRelu" => UnaryFn::LeakyRelu {
            slope: f64::from(at.float("alpha", 0.01)),
        },
        // ONNX's default is the erf form; `tanh` only when asked.
        "Gelu" => match at.string("approximate").as_deref() {
            Some("tanh") => UnaryFn::GeluTanh,
            _ => UnaryFn::GeluErf,
        },
        _ => return None,
    })
}

/// `Constant`'s value: a tensor, or one of the scalar and list forms.
fn constant(at: &At<'_>) -> Result<HostTensor, BbError> {
    if let Some(t) = at.attr("value").and_then(|a| a.t.as_ref()) {
        return HostTensor::from_proto(t).map_err(|e| at.invalid(e));
    }
    if let Some(a) = at.attr("value_float") {
        return Ok(HostTensor::new(
            ScalarType::F32,
            vec![],
            vec![f64::from(a.f)],
        ));
    }
    if let Some(a) = at.attr("value_int") {
        return Ok(HostTensor::new(ScalarType::I64, vec![], vec![a.i as f64]));
    }
    if let Some(a) = at.attr("value_floats") {
        let v: Vec<f64> = a.floats.iter().map(|&f| f64::from(f)).collect();
        return Ok(HostTensor::new(ScalarType::F32, vec![v.len()], v));
    }
    if let Some(a) = at.attr("value_ints") {
        let v: Vec<f64> = a.ints.iter().map(|&i| i as f64).collect();
        return Ok(HostTensor::new(ScalarType::I64, vec![v.len()], v));
    }
    Err(at.invalid("no value (kernelc takes value, value_float(s), value_int(s))"))
}

/// `Shape`: the dims from `start` to `end` as int64.
fn shape_of(at: &At<'_>, a: &Value) -> HostTensor {
    let rank = a.shape().len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (start, end) = (clamp(at.int("start", 0)), clamp(at.int("end", rank)));
    let dims: Vec<f64> = a.shape()[start..end.max(start)]
        .iter()
        .map(|&d| d as f64)
        .collect();
    HostTensor::new(ScalarType::I64, vec![dims.len()], dims)
}

/// A tensor of `shape` holding `value` everywhere: folded on the host when small,
/// else a fill on the device (the shape is checked before anything is made).
fn filled(
    im: &mut Importer,
    at: &At<'_>,
    dtype: ScalarType,
    shape: Vec<usize>,
    value: f64,
) -> Result<Value, BbError> {
    let spec = FillSpec {
        dtype,
        shape,
        value: FillValue::Constant { value },
        offset: 0,
    };
    im.op1(at, spec, &[])
}

fn to_dims(at: &At<'_>, v: &[i64]) -> Result<Vec<usize>, BbError> {
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| at.invalid(format!("dim {d}"))))
        .collect()
}

fn squeeze(at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let axes = ints_from(at, args, 1, "axes")?.unwrap_or_default();
    let shape = onnx::squeezed(a.shape(), &axes).map_err(|e| at.invalid(e))?;
    Ok(a.reshaped(shape))
}

fn unsqueeze(at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let axes = ints_from(at, args, 1, "axes")?.ok_or_else(|| at.invalid("no axes"))?;
    let shape = onnx::unsqueezed(a.shape(), &axes).map_err(|e| at.invalid(e))?;
    Ok(a.reshaped(shape))
}

fn transpose(im: &mut Importer, at: &At<'_>, a: &Value) -> Result<Value, BbError> {
    let rank = a.shape().len();
    let perm: Vec<usize> = match at.ints("perm") {
        Some(p) if !p.is_empty() => p
            .iter()
            .map(|&d| onnx::axis("Transpose", d, rank))
            .collect::<Result<_, _>>()
            .map_err(|e| at.invalid(e))?,
        _ => (0..rank).rev().collect(),
    };
    let spec = PermuteSpec {
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
        perm,
    };
    im.op1(at, spec, &[a])
}

fn concat(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let parts: Vec<&Value> = args.iter().flatten().collect();
    let first = *parts.first().ok_or_else(|| at.invalid("no inputs"))?;
    for p in &parts {
        same_dtype(at, first, p)?;
    }
    let spec = ConcatSpec {
        dtype: first.dtype(),
        shapes: parts.iter().map(|p| p.shape().to_vec()).collect(),
        axis: onnx::axis("Concat", at.int("axis", 0), first.shape().len())
            .map_err(|e| at.invalid(e))?,
    };
    im.op1(at, spec, &parts)
}

fn slice(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let starts = ints_from(at, args, 1, "starts")?.ok_or_else(|| at.invalid("no starts"))?;
    let ends = ints_from(at, args, 2, "ends")?.ok_or_else(|| at.invalid("no ends"))?;
    let axes = ints_from(at, args, 3, "axes")?.unwrap_or_default();
    let steps = ints_from(at, args, 4, "steps")?.unwrap_or_default();
    let spec = onnx::slice_spec(a.dtype(), a.shape(), &starts, &ends, &axes, &steps)
        .map_err(|e| at.invalid(e))?;
    im.op1(at, spec, &[a])
}

fn split(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Vec<Value>, BbError> {
    let a = arg(at, args, 0)?;
    let shape = a.shape().to_vec();
    let d = onnx::axis("Split", at.int("axis", 0), shape.len()).map_err(|e| at.invalid(e))?;
    let parts = at.node.output.len();
    let sizes: Vec<usize> = match ints_from(at, args, 1, "split")? {
        Some(s) => to_dims(at, &s)?,
        None if parts > 0 => {
            // Equal parts, the last smaller (ONNX 18's `num_outputs` rule).
            let each = shape[d].div_ceil(parts);
            (0..parts)
                .map(|i| each.min(shape[d].saturating_sub(i * each)))
                .collect()
        }
        None => return Err(at.invalid("no split sizes and no outputs")),
    };
    onnx::split_specs(a.dtype(), &shape, d, &sizes)
        .map_err(|e| at.invalid(e))?
        .into_iter()
        .map(|spec| im.op1(at, spec, &[a]))
        .collect()
}

fn gather(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let (x, i) = (arg(at, args, 0)?, arg(at, args, 1)?);
    if !matches!(i.dtype(), ScalarType::I32 | ScalarType::I64) {
        return Err(at.invalid(format!("{} indices (ONNX takes int32 or int64)", i.dtype())));
    }
    let spec = GatherSpec {
        dtype: x.dtype(),
        index_dtype: i.dtype(),
        data: x.shape().to_vec(),
        indices: i.shape().to_vec(),
        axis: onnx::axis("Gather", at.int("axis", 0), x.shape().len())
            .map_err(|e| at.invalid(e))?,
        rows_of: None,
    };
    im.op1(at, spec, &[x, i])
}

fn where_(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let (c, x, y) = (arg(at, args, 0)?, arg(at, args, 1)?, arg(at, args, 2)?);
    let spec = WhereSpec {
        dtype: same_dtype(at, x, y)?,
        cond_dtype: c.dtype(),
        cond: c.shape().to_vec(),
        a: x.shape().to_vec(),
        b: y.shape().to_vec(),
    };
    im.op1(at, spec, &[c, x, y])
}

/// `Expand`: broadcast to `shape` (NumPy rules both ways), as the strided read it
/// is (`as_strided` with stride 0 along the broadcast dims): exact for every dtype.
fn expand(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let target = to_dims(at, &host_ints(at, args, 1, "shape")?.unwrap_or_default())?;
    let shape = broadcast_shapes(a.shape(), &target).map_err(|e| at.invalid(e))?;
    let spec = AsStridedSpec {
        dtype: a.dtype(),
        len: a.numel(),
        strides: broadcast_strides(a.shape(), &shape),
        shape,
        offset: 0,
        scatter: false,
    };
    im.op1(at, spec, &[a])
}

/// NumPy `matmul`; a 2-D right operand takes every leading dim of the left as rows
/// (one GEMM, not a batch of them).
fn matmul(im: &mut Importer, at: &At<'_>, a: &Value, b: &Value) -> Result<Value, BbError> {
    let dtype = same_dtype(at, a, b)?;
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    if sb.len() == 2 && sa.len() > 2 {
        let k = sa[sa.len() - 1];
        let rows = a.numel() / k.max(1);
        let flat = a.reshaped(vec![rows, k]);
        let out = matmul(im, at, &flat, b)?;
        let mut shape = sa[..sa.len() - 1].to_vec();
        shape.push(sb[1]);
        return Ok(out.reshaped(shape));
    }
    let (spec, shape) = GemmSpec::matmul(dtype, &sa, &sb).map_err(|e| at.invalid(e))?;
    let out = im.op1(
        at,
        spec,
        &[&a.reshaped(vec![a.numel()]), &b.reshaped(vec![b.numel()])],
    )?;
    Ok(out.reshaped(shape))
}

/// ONNX `Gemm`: `alpha·A'B' + beta·C`, C a bias row, a whole `[m, n]` or anything
/// broadcasting to it.
fn gemm(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let (a, b) = (arg(at, args, 0)?, arg(at, args, 1)?);
    let dtype = same_dtype(at, a, b)?;
    let (ta, tb) = (at.int("transA", 0) != 0, at.int("transB", 0) != 0);
    let (alpha, beta) = (
        f64::from(at.float("alpha", 1.0)),
        f64::from(at.float("beta", 1.0)),
    );
    let (sa, sb) = (a.shape(), b.shape());
    if sa.len() != 2 || sb.len() != 2 {
        return Err(at.invalid(format!("operands {sa:?} and {sb:?} are not matrices")));
    }
    let (m, k) = if ta { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
    let n = if tb { sb[0] } else { sb[1] };
    let mut spec = GemmSpec {
        trans_a: ta,
        trans_b: tb,
        alpha,
        ..GemmSpec::new(dtype, m, n, k)
    };
    let c = args.get(2).and_then(Option::as_ref);
    let mut inputs: Vec<Value> = vec![a.clone(), b.clone()];
    let mut after = None;
    if let (Some(c), true) = (c, beta != 0.0) {
        if c.numel() == n && c.shape().iter().rev().skip(1).all(|&d| d == 1) {
            spec.bias = true;
            let bias = if beta == 1.0 {
                c.clone()
            } else {
                scalar(im, at, BinaryFn::Mul, c, beta, false)?
            };
            inputs.push(bias.reshaped(vec![n]));
        } else if c.shape() == [m, n] {
            spec.beta = beta;
            inputs.push(c.clone());
        } else {
            after = Some(c.clone());
        }
    }
    let refs: Vec<&Value> = inputs.iter().collect();
    let mut out = im.op1(at, spec, &refs)?;
    if let Some(c) = after {
        let c = if beta == 1.0 {
            c
        } else {
            scalar(im, at, BinaryFn::Mul, &c, beta, false)?
        };
        out = binary(im, at, BinaryFn::Add, &out, &c, None)?;
    }
    Ok(out)
}

fn reduce(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let rank = a.shape().len();
    let func = match at.node.op_type.as_str() {
        "ReduceSum" => ReduceFn::Sum,
        "ReduceMean" => ReduceFn::Mean,
        "ReduceMax" => onnx::reduce_max_or_min(a.dtype(), true),
        _ => onnx::reduce_max_or_min(a.dtype(), false),
    };
    let axes = match ints_from(at, args, 1, "axes")? {
        Some(axes) if !axes.is_empty() => {
            onnx::axes("Reduce", &axes, rank).map_err(|e| at.invalid(e))?
        }
        // No axes: all of them, or none with `noop_with_empty_axes`.
        _ if at.int("noop_with_empty_axes", 0) != 0 => return Ok(a.clone()),
        _ => (0..rank).collect(),
    };
    let spec = ReduceSpec {
        func,
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
        axes,
        keepdim: at.int("keepdims", 1) != 0,
        index_dtype: None,
        accumulate: false,
    };
    im.op1(at, spec, &[a])
}

fn softmax(im: &mut Importer, at: &At<'_>, args: Args<'_>, log: bool) -> Result<Value, BbError> {
    let a = arg(at, args, 0)?;
    let axis =
        onnx::axis("Softmax", at.int("axis", -1), a.shape().len()).map_err(|e| at.invalid(e))?;
    let spec = SoftmaxSpec {
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
        axis,
        log,
    };
    im.op1(at, spec, &[a])
}

/// `LayerNormalization` over the dims from `axis` on, as rows of their product.
fn layer_norm(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    if at.node.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(at.invalid("the Mean and InvStdDev outputs are not served"));
    }
    let x = arg(at, args, 0)?;
    let shape = x.shape().to_vec();
    let axis = onnx::axis("LayerNormalization", at.int("axis", -1), shape.len())
        .map_err(|e| at.invalid(e))?;
    let cols: usize = shape[axis..].iter().product();
    let rows = x.numel() / cols.max(1);
    let scale = arg(at, args, 1)?;
    let bias = args.get(2).and_then(Option::as_ref);
    let mut spec = LayerNormSpec::new(
        x.dtype(),
        &[rows, cols],
        f64::from(at.float("epsilon", 1e-5)),
    );
    spec.weight = true;
    spec.bias = bias.is_some();
    let flat = x.reshaped(vec![rows, cols]);
    let mut inputs = vec![&flat];
    let scale = scale.reshaped(vec![cols]);
    inputs.push(&scale);
    let bias = bias.map(|b| b.reshaped(vec![cols]));
    inputs.extend(bias.as_ref());
    if scale.numel() != cols || bias.as_ref().is_some_and(|b| b.numel() != cols) {
        return Err(at.invalid(format!(
            "scale or bias of another size than the normalised {cols}"
        )));
    }
    Ok(im.op1(at, spec, &inputs)?.reshaped(shape))
}

fn batch_norm(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    if at.int("training_mode", 0) != 0 || at.node.output.len() > 1 {
        return Err(at.invalid("training mode (kernelc serves inference here)"));
    }
    let x = arg(at, args, 0)?;
    let params = (1..5)
        .map(|i| arg(at, args, i))
        .collect::<Result<Vec<_>, _>>()?;
    let spec = BatchNormSpec {
        dtype: x.dtype(),
        shape: x.shape().to_vec(),
        eps: f64::from(at.float("epsilon", 1e-5)),
        momentum: f64::from(at.float("momentum", 0.9)),
        training: false,
    };
    let mut inputs = vec![x];
    inputs.extend(params);
    im.op1(at, spec, &inputs)
}

/// A 2-D window's `(kernel, stride, padding)` from the node's attributes: symmetric
/// pads, no dilation, `auto_pad` NOTSET or VALID.
fn window(at: &At<'_>, kernel: [usize; 2]) -> Result<Window2d, BbError> {
    let two = |name: &str, default: usize| -> Result<[usize; 2], BbError> {
        match at.ints(name) {
            None => Ok([default; 2]),
            Some(v) if v.len() == 2 && v.iter().all(|&d| d >= 0) => {
                Ok([v[0] as usize, v[1] as usize])
            }
            Some(v) => Err(at.invalid(format!("{name} {v:?} (kernelc takes 2-D windows)"))),
        }
    };
    match at.string("auto_pad").as_deref() {
        None | Some("NOTSET") | Some("VALID") => {}
        Some(other) => return Err(at.invalid(format!("auto_pad {other} (give pads)"))),
    }
    if two("dilations", 1)? != [1, 1] {
        return Err(at.invalid("dilations other than 1"));
    }
    if at.int("ceil_mode", 0) != 0 {
        return Err(at.invalid("ceil_mode"));
    }
    let pads = match at.ints("pads") {
        None => [0, 0],
        Some(p) if p.len() == 4 && p[0] == p[2] && p[1] == p[3] && p.iter().all(|&d| d >= 0) => {
            [p[0] as usize, p[1] as usize]
        }
        Some(p) => {
            return Err(at.invalid(format!(
                "pads {p:?} (kernelc takes the same padding at both ends)"
            )))
        }
    };
    Ok(Window2d::new(kernel, two("strides", 1)?, pads))
}

fn nchw(at: &At<'_>, x: &Value) -> Result<Nchw, BbError> {
    match *x.shape() {
        [batch, channels, height, width] => Ok(Nchw {
            batch,
            channels,
            height,
            width,
        }),
        ref s => Err(at.invalid(format!("input {s:?} is not NCHW"))),
    }
}

fn conv(im: &mut Importer, at: &At<'_>, args: Args<'_>) -> Result<Value, BbError> {
    let (x, w) = (arg(at, args, 0)?, arg(at, args, 1)?);
    if at.int("group", 1) != 1 {
        return Err(at.invalid("grouped convolution"));
    }
    let image = nchw(at, x)?;
    let [out_channels, _, kh, kw] = *w.shape() else {
        return Err(at.invalid(format!("filter {:?} is not 4-D", w.shape())));
    };
    let bias = args.get(2).and_then(Option::as_ref);
    let spec = Conv2dSpec {
        dtype: same_dtype(at, x, w)?,
        pass: Default::default(),
        batch: image.batch,
        in_channels: image.channels,
        out_channels,
        height: image.height,
        width: image.width,
        window: window(at, [kh, kw])?,
        bias: bias.is_some(),
    };
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    im.op1(at, spec, &inputs)
}

fn pool(im: &mut Importer, at: &At<'_>, args: Args<'_>, max: bool) -> Result<Value, BbError> {
    let x = arg(at, args, 0)?;
    if at.node.output.len() > 1 {
        return Err(at.invalid("the Indices output is not served"));
    }
    let kernel = match at.ints("kernel_shape").as_deref() {
        Some(&[h, w]) if h > 0 && w > 0 => [h as usize, w as usize],
        other => {
            return Err(at.invalid(format!(
                "kernel_shape {other:?} (kernelc takes 2-D windows)"
            )))
        }
    };
    let spec = Pool2dSpec {
        kind: if max { PoolKind::Max } else { PoolKind::Avg },
        dtype: x.dtype(),
        image: nchw(at, x)?,
        window: window(at, kernel)?,
        count_include_pad: at.int("count_include_pad", 0) != 0,
        indices: None,
    };
    im.op1(at, spec, &[x])
}

fn global_pool(
    im: &mut Importer,
    at: &At<'_>,
    args: Args<'_>,
    max: bool,
) -> Result<Value, BbError> {
    let x = arg(at, args, 0)?;
    let image = nchw(at, x)?;
    let spec = AdaptivePool2dSpec {
        kind: if max { PoolKind::Max } else { PoolKind::Avg },
        pass: PoolPass::Forward,
        dtype: x.dtype(),
        batch: image.batch,
        channels: image.channels,
        in_size: [image.height, image.width],
        out_size: [1, 1],
    };
    im.op1(at, spec, &[x])
}
