//! `kernelc ops [OP]`: the op catalogue, read from the `Op` trait (each kind's
//! example spec, its validation, its inputs, outputs and per-call values), never
//! from a second list.

use super::{CliError, UsageError};
use clap::Args;
use kernelc::ir::ScalarType;
use kernelc::kernels::spec::{OpKind, OpSpec, TensorSig};
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc ops\n  kernelc ops softmax\n  kernelc ops gemm --json"
)]
pub struct OpsArgs {
    /// One op (its JSON `"op"` name, e.g. `softmax`); all of them when left out.
    op: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What the catalogue says of one kind.
#[derive(Serialize, Debug)]
struct OpInfo {
    op: &'static str,
    /// A small valid spec of the kind.
    example: Value,
    /// The spec's attributes (every key but `"op"` of the example and of the
    /// conformance cases), each with a value it may take: the example's, or for an
    /// optional attribute the example leaves out, the first case's.
    parameters: Map<String, Value>,
    /// The attributes the example leaves out (optional, with defaults).
    optional: Vec<String>,
    /// Per dtype attribute of the spec, the dtypes the op accepts there (with the
    /// example's other attributes).
    dtypes: Vec<DtypeParameter>,
    /// The example's tensors, in binding order.
    inputs: Vec<TensorSig>,
    outputs: Vec<TensorSig>,
    /// Values passed per call rather than compiled into the kernel.
    per_call: Vec<PerCall>,
    /// Conformance cases the table holds for the kind.
    cases: usize,
}

#[derive(Serialize, Debug)]
struct DtypeParameter {
    parameter: String,
    accepted: Vec<ScalarType>,
}

#[derive(Serialize, Debug)]
struct PerCall {
    name: String,
    dtype: ScalarType,
}

pub fn run(args: OpsArgs) -> Result<(), CliError> {
    let kinds: Vec<OpKind> = match &args.op {
        None => OpKind::ALL.to_vec(),
        Some(name) => vec![*OpKind::ALL
            .iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                UsageError(format!(
                    "no op named `{name}`; the catalogue has: {}",
                    OpKind::NAMES.join(", ")
                ))
            })?],
    };
    let infos = kinds.into_iter().map(info).collect::<Result<Vec<_>, _>>()?;
    if args.json {
        let text = match (&args.op, infos.as_slice()) {
            (Some(_), [one]) => serde_json::to_string_pretty(one)?,
            _ => serde_json::to_string_pretty(&infos)?,
        };
        println!("{text}");
    } else if args.op.is_some() {
        infos.iter().for_each(print_detail);
    } else {
        print_table(&infos);
    }
    Ok(())
}

fn info(kind: OpKind) -> Result<OpInfo, CliError> {
    let spec = kind.example();
    let example = serde_json::to_value(&spec)?;
    let mut parameters = example
        .as_object()
        .cloned()
        .ok_or("an op spec that is not a JSON object")?;
    parameters.remove("op");
    let mut optional = Vec::new();
    for case in kind.cases() {
        if let Value::Object(fields) = serde_json::to_value(&case)? {
            for (key, value) in fields {
                if key != "op" && !parameters.contains_key(&key) {
                    optional.push(key.clone());
                    parameters.insert(key, value);
                }
            }
        }
    }
    optional.sort();
    let dtypes = parameters
        .iter()
        .filter(|(_, v)| is_dtype(v))
        .map(|(key, _)| DtypeParameter {
            parameter: key.clone(),
            accepted: accepted_dtypes(&example, key),
        })
        .collect();
    Ok(OpInfo {
        op: kind.name(),
        parameters,
        optional,
        dtypes,
        inputs: spec.inputs(),
        outputs: spec.outputs(),
        per_call: spec
            .uniforms()
            .into_iter()
            .map(|u| PerCall {
                dtype: u.value.ty(),
                name: u.name,
            })
            .collect(),
        cases: kind.cases().len(),
        example,
    })
}

/// Whether a JSON value names a dtype (`"f32"`, `"i64"`, ...).
fn is_dtype(v: &Value) -> bool {
    serde_json::from_value::<ScalarType>(v.clone()).is_ok()
}

/// The dtypes `key` of `example` may take, the op's validation deciding.
fn accepted_dtypes(example: &Value, key: &str) -> Vec<ScalarType> {
    ScalarType::ALL
        .into_iter()
        .filter(|&dtype| {
            let mut spec = example.clone();
            let (Some(fields), Ok(value)) = (spec.as_object_mut(), serde_json::to_value(dtype))
            else {
                return false;
            };
            fields.insert(key.to_string(), value);
            serde_json::from_value::<OpSpec>(spec).is_ok_and(|s| s.validate().is_ok())
        })
        .collect()
}

fn names<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        "-".to_string()
    } else {
        items.iter().map(f).collect::<Vec<_>>().join(", ")
    }
}

fn dtype_list(d: &DtypeParameter) -> String {
    let list = names(&d.accepted, |t| t.to_string());
    format!("{}: {list}", d.parameter)
}

fn print_table(infos: &[OpInfo]) {
    println!("| op | dtypes | inputs | outputs | per call |");
    println!("| --- | --- | --- | --- | --- |");
    for i in infos {
        println!(
            "| {} | {} | {} | {} | {} |",
            i.op,
            names(&i.dtypes, dtype_list),
            names(&i.inputs, |t| t.name.clone()),
            names(&i.outputs, |t| t.name.clone()),
            names(&i.per_call, |u| u.name.clone()),
        );
    }
    println!("\n`kernelc ops OP` shows one op's parameters and an example spec.");
}

fn print_detail(i: &OpInfo) {
    println!("{}", i.op);
    println!("  parameters (example values; optional ones from a conformance case):");
    for (key, value) in &i.parameters {
        let optional = if i.optional.contains(key) {
            "  (optional)"
        } else {
            ""
        };
        println!("    {key} = {value}{optional}");
    }
    println!("  dtypes (with the example's other parameters):");
    for d in &i.dtypes {
        println!("    {}", dtype_list(d));
    }
    let tensor = |t: &TensorSig| format!("{} {} {:?}", t.name, t.dtype, t.shape);
    println!("  inputs: {}", names(&i.inputs, tensor));
    println!("  outputs: {}", names(&i.outputs, tensor));
    println!(
        "  per call: {}",
        names(&i.per_call, |u| format!("{} {}", u.name, u.dtype))
    );
    println!("  conformance cases: {}", i.cases);
    println!("  example: {}", i.example);
}
