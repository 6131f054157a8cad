//! Mutated specs never panic: every example spec is perturbed field by field (numbers
//! replaced, arrays shortened or lengthened) and each mutant is validated; valid small
//! mutants also get their signatures and f64 reference run on arbitrary data,
//! including out-of-range and negative indices.

use kernelc_kernels::rng::{pcg_hash, uniform};
use kernelc_kernels::*;
use serde_json::Value;

/// Paths to every number and array in a JSON value.
fn leaves(v: &Value, path: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match v {
        Value::Number(_) => out.push(path.clone()),
        Value::Array(items) => {
            out.push(path.clone());
            for (i, item) in items.iter().enumerate() {
                path.push(PathStep::Index(i));
                leaves(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                path.push(PathStep::Key(k.clone()));
                leaves(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        PathStep::Key(k) => &mut v[k.as_str()],
        PathStep::Index(i) => &mut v[*i],
    })
}

fn mutants(spec: &OpSpec) -> Vec<Value> {
    let base = serde_json::to_value(spec).unwrap();
    let mut paths = Vec::new();
    leaves(&base, &mut Vec::new(), &mut paths);
    let mut out = Vec::new();
    for path in paths {
        let replacements: Vec<Value> = match at(&mut base.clone(), &path) {
            Value::Number(_) => [0.0, 1.0, 2.0, 3.0, 5.0, 64.0, -1.0, 0.5, 1e12, 4294967296.0]
                .iter()
                .map(|&x: &f64| {
                    if x.fract() == 0.0 && x >= 0.0 {
                        Value::from(x as u64)
                    } else {
                        Value::from(x)
                    }
                })
                .collect(),
            Value::Array(items) => {
                let mut shorter = items.clone();
                shorter.pop();
                let mut longer = items.clone();
                longer.push(items.last().cloned().unwrap_or(Value::from(1u64)));
                vec![Value::Array(shorter), Value::Array(longer)]
            }
            _ => Vec::new(),
        };
        for r in replacements {
            let mut m = base.clone();
            *at(&mut m, &path) = r;
            out.push(m);
        }
    }
    out
}

fn data(n: usize, salt: u32, index: bool) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let u = uniform(pcg_hash(i as u32 ^ pcg_hash(salt)));
            if index {
                (u * 12.0).floor() - 3.0 // -3 ..= 8: negative and out-of-range ids too
            } else {
                u * 4.0 - 2.0
            }
        })
        .collect()
}

#[test]
fn mutated_specs_never_panic() {
    let (mut valid, mut invalid, mut ran) = (0, 0, 0);
    for &kind in OpKind::ALL {
        for m in mutants(&kind.example()) {
            let Ok(spec) = serde_json::from_value::<OpSpec>(m) else {
                continue;
            };
            let _ = spec.name();
            let (ins, outs) = (spec.inputs(), spec.outputs());
            let _ = spec.aliases();
            if spec.validate().is_err() {
                invalid += 1;
                continue;
            }
            valid += 1;
            let total: usize = ins.iter().chain(&outs).map(|s| s.numel()).sum();
            if total > 200_000 {
                continue;
            }
            let buffers: Vec<Vec<f64>> = ins
                .iter()
                .enumerate()
                .map(|(k, sig)| {
                    let index = sig.dtype.is_int()
                        || ["indices", "targets", "positions"].contains(&sig.name.as_str());
                    data(sig.numel(), k as u32, index)
                })
                .collect();
            let refs: Vec<&[f64]> = buffers.iter().map(|b| b.as_slice()).collect();
            let out = reference(&spec, &refs).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
            assert_eq!(out.len(), outs.len(), "{spec:?}");
            for (o, sig) in out.iter().zip(&outs) {
                assert_eq!(o.len(), sig.numel(), "{spec:?} output {}", sig.name);
            }
            ran += 1;
        }
    }
    eprintln!("mutants: {valid} valid ({ran} run), {invalid} rejected");
    assert!(valid > 100 && invalid > 100 && ran > 100);
}
