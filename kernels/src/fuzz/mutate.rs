//! Changing a spec through its JSON form (see the parent module).

use super::{within, FuzzLimits};
use crate::spec::OpSpec;
use serde_json::{Number, Value};

/// A stream of choices; once it runs out, every choice is 0.
pub struct Choices<'a> {
    words: &'a [u32],
    at: usize,
}

impl<'a> Choices<'a> {
    pub fn new(words: &'a [u32]) -> Choices<'a> {
        Choices { words, at: 0 }
    }

    /// The next word (0 past the end).
    pub fn next_word(&mut self) -> u32 {
        let w = self.words.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        w
    }

    /// A choice in `0..n` (`n > 0`), 0 for a word of 0.
    pub fn below(&mut self, n: usize) -> usize {
        self.next_word() as usize % n.max(1)
    }
}

/// Most changes one case gets.
const MAX_CHANGES: usize = 4;

/// Sizes a dimension or count is changed to: 1, small primes, powers of two and their
/// neighbours (just under and past a tile).
const SIZES: [u64; 18] = [
    1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 63, 64, 65, 129,
];

/// `base` with up to [`MAX_CHANGES`] changes that keep it valid and within `limits`.
/// `cases` are the kind's conformance cases: strings are changed to values they use
/// at the same place.
pub fn mutate(base: &OpSpec, cases: &[OpSpec], c: &mut Choices, limits: &FuzzLimits) -> OpSpec {
    let Ok(mut json) = serde_json::to_value(base) else {
        return base.clone();
    };
    let others: Vec<Value> = cases
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .collect();
    let mut spec = base.clone();
    for _ in 0..c.below(MAX_CHANGES + 1) {
        let leaves = leaves(&json);
        if leaves.is_empty() {
            break;
        }
        let path = &leaves[c.below(leaves.len())];
        let mut changed = json.clone();
        let Some(slot) = at_mut(&mut changed, path) else {
            continue;
        };
        let key = path.iter().rev().find_map(|p| match p {
            Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        });
        *slot = new_value(slot, key, path, &others, c);
        let Ok(candidate) = serde_json::from_value::<OpSpec>(changed.clone()) else {
            continue;
        };
        if candidate.validate().is_ok() && within(&candidate, limits) {
            json = changed;
            spec = candidate;
        }
    }
    spec
}

/// One step of a path into a JSON value.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every changeable place of `json`: each number, string and bool (but the `"op"` tag),
/// and each array (whose length may change).
fn leaves(json: &Value) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    walk(json, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if path.is_empty() && k == "op" {
                    continue;
                }
                path.push(Step::Key(k.clone()));
                walk(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            out.push(path.clone());
            for (i, child) in items.iter().enumerate() {
                path.push(Step::Index(i));
                walk(child, path, out);
                path.pop();
            }
        }
        Value::Number(_) | Value::String(_) | Value::Bool(_) => out.push(path.clone()),
        Value::Null => {}
    }
}

fn at_mut<'v>(v: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

fn at<'v>(v: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get(k.as_str()),
        Step::Index(i) => v.get(*i),
    })
}

/// A new value for `old` (at `path`, under object key `key`).
fn new_value(
    old: &Value,
    key: Option<&str>,
    path: &[Step],
    others: &[Value],
    c: &mut Choices,
) -> Value {
    match old {
        Value::Number(n) if n.is_u64() || n.is_i64() => {
            let v = n.as_i64().unwrap_or(0);
            let mut options: Vec<i64> = SIZES.iter().map(|&s| s as i64).collect();
            options.extend([
                0,
                v.saturating_sub(1),
                v.saturating_add(1),
                v.saturating_mul(2),
                -1,
            ]);
            Value::from(options[c.below(options.len())])
        }
        Value::Number(n) => float_value(n.as_f64().unwrap_or(0.0), c),
        Value::String(s) if is_float_spelling(s) => float_value(0.0, c),
        Value::String(_) => {
            let mut options: Vec<Value> = others
                .iter()
                .filter_map(|o| at(o, path).cloned())
                .filter(Value::is_string)
                .collect();
            if key.is_some_and(|k| k.ends_with("dtype")) {
                options.extend(
                    ["f16", "bf16", "f32", "f64", "i32", "u32", "i64", "bool"].map(Value::from),
                );
            }
            match options.len() {
                0 => old.clone(),
                n => options[c.below(n)].clone(),
            }
        }
        Value::Bool(b) => Value::Bool(!b),
        Value::Array(items) => {
            let mut items = items.clone();
            match (c.below(2), items.last().cloned()) {
                (0, Some(_)) if items.len() > 1 => {
                    items.pop();
                }
                (_, Some(last)) if items.len() < 4 => items.push(if c.below(2) == 0 {
                    Value::from(1)
                } else {
                    last
                }),
                _ => {}
            }
            Value::Array(items)
        }
        Value::Null | Value::Object(_) => old.clone(),
    }
}

fn is_float_spelling(s: &str) -> bool {
    matches!(s, "inf" | "-inf" | "nan")
}

/// A float attribute: zeros of both signs, ±1, small and large, the extremes of
/// every dtype, the smallest subnormals, ±∞, NaN, or the old value halved or negated.
fn float_value(old: f64, c: &mut Choices) -> Value {
    let options = [
        0.0,
        1.0,
        -0.0,
        -1.0,
        0.5,
        2.0,
        1e-3,
        10.0,
        1e-30,
        1e30,
        -1e30,
        65504.0,
        f32::MAX as f64,
        -(f32::MAX as f64),
        f32::from_bits(1) as f64,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        old * 0.5,
        -old,
    ];
    let v = options[c.below(options.len())];
    match Number::from_f64(v) {
        Some(n) => Value::Number(n),
        None if v.is_nan() => Value::from("nan"),
        None if v > 0.0 => Value::from("inf"),
        None => Value::from("-inf"),
    }
}
