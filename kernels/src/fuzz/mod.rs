//! Random op specs and inputs for the op fuzzer, made from the catalogue alone.
//!
//! A case starts from one of an op kind's own conformance cases
//! ([`Op::cases`](crate::op::Op::cases)) and changes it through its JSON form, which
//! every kind has: integers (shapes, sizes, axes, windows) become 1, small primes,
//! sizes just past a tile, or their neighbours; arrays gain or lose a dimension (ranks
//! 1 to 4); float attributes become zeros of both signs, extremes of every dtype,
//! subnormals, ±∞ and NaN; strings (dtypes, functions, modes) become any value the
//! kind's cases use at the same place, or any dtype. A change that makes the spec
//! invalid ([`OpSpec::validate`]) or too large is dropped, so every case is a valid
//! spec, and a new op kind is fuzzed with no code here.
//!
//! A case is built from a stream of choices ([`case_from_choices`]): a choice stream
//! that runs out chooses 0, the smallest option, so a fuzzer that shrinks the stream
//! (proptest) shrinks the case towards its unchanged origin, small sizes and plain
//! inputs. Inputs come in four [`InputMode`]s over each input's conformance domain:
//! as drawn, scaled over a wide range of magnitudes, rounded to a few values (ties),
//! and sprinkled with special values.

#[cfg(feature = "fuzz")]
pub mod driver;
mod mutate;

use crate::conformance::inputs::{generate, is_index};
use crate::conformance::CaseData;
use crate::spec::{OpKind, OpSpec};
use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

pub use mutate::Choices;

/// How a case's inputs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputMode {
    /// From each input's conformance domain, as the conformance table draws them.
    Domain,
    /// The same values times `2^e`, `e` uniform over a range that keeps products of
    /// a few within the dtype (±4 for f16/bf16, ±20 for f32, ±100 for f64).
    Wide,
    /// Rounded to multiples of ½ (away from zero where the domain excludes it): many
    /// equal values, for maxima, ties and sorting.
    Ties,
    /// One float value in eight replaced by a special value: NaN, ±∞, ±0 or the
    /// smallest subnormal of the dtype (the extremes of the finite range come in as
    /// attributes: as inputs, any sum or product of two overflows).
    Specials,
}

impl InputMode {
    pub const ALL: [InputMode; 4] = [
        InputMode::Domain,
        InputMode::Wide,
        InputMode::Ties,
        InputMode::Specials,
    ];
}

/// One fuzz case: a valid spec, and how its inputs are drawn. Serialised as the
/// replayable JSON a failure is saved as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FuzzCase {
    pub spec: OpSpec,
    pub seed: u64,
    pub mode: InputMode,
}

impl FuzzCase {
    /// Whether NaN or ±∞ may arise in the case: special input values, or a float
    /// attribute that is one, or large enough (`≥ 10³⁰`) for the op's products to
    /// overflow f32.
    pub fn may_meet_specials(&self) -> bool {
        self.mode == InputMode::Specials
            || float_attributes(&self.spec)
                .iter()
                .any(|v| !v.is_finite() || v.abs() >= 1e30)
    }

    /// Whether subnormals may arise: wide or special inputs, or a float attribute
    /// below f32's smallest normal (other than 0).
    pub fn may_meet_subnormals(&self) -> bool {
        matches!(self.mode, InputMode::Wide | InputMode::Specials)
            || float_attributes(&self.spec)
                .iter()
                .any(|v| *v != 0.0 && v.abs() < f32::MIN_POSITIVE as f64)
    }
}

/// Every float attribute of `spec` (the non-integer numbers of its JSON, and the
/// spellings of ±∞ and NaN).
fn float_attributes(spec: &OpSpec) -> Vec<f64> {
    fn walk(v: &serde_json::Value, out: &mut Vec<f64>) {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => out.extend(n.as_f64()),
            serde_json::Value::String(s) => match s.as_str() {
                "inf" => out.push(f64::INFINITY),
                "-inf" => out.push(f64::NEG_INFINITY),
                "nan" => out.push(f64::NAN),
                _ => {}
            },
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            serde_json::Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) | serde_json::Value::Null => {
            }
        }
    }
    let mut out = Vec::new();
    if let Ok(value) = serde_json::to_value(spec) {
        walk(&value, &mut out);
    }
    out
}

/// How large a case may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuzzLimits {
    /// Most elements of all inputs and outputs together.
    pub max_elements: usize,
}

impl Default for FuzzLimits {
    /// Small enough that a case runs on the interpreter in milliseconds.
    fn default() -> Self {
        FuzzLimits {
            max_elements: 6_000,
        }
    }
}

/// The case `choices` make (see the module documentation): kind, base case, input
/// mode, seed, then up to four changes to the spec. Deterministic.
pub fn case_from_choices(choices: &[u32], limits: &FuzzLimits) -> FuzzCase {
    case_among(OpKind::ALL, choices, limits)
}

/// [`case_from_choices`] with the kind drawn from `kinds` (all of them when empty).
pub fn case_among(kinds: &[OpKind], choices: &[u32], limits: &FuzzLimits) -> FuzzCase {
    let kinds = if kinds.is_empty() { OpKind::ALL } else { kinds };
    let mut c = Choices::new(choices);
    let kind = kinds[c.below(kinds.len())];
    let cases = kind.cases();
    let base = cases[c.below(cases.len())].clone();
    let mode = InputMode::ALL[c.below(InputMode::ALL.len())];
    let seed = u64::from(c.next_word());
    let spec = mutate::mutate(&base, &cases, &mut c, limits);
    FuzzCase { spec, seed, mode }
}

/// Whether `spec` fits `limits`.
pub fn within(spec: &OpSpec, limits: &FuzzLimits) -> bool {
    let elements: usize = spec
        .inputs()
        .iter()
        .chain(spec.outputs().iter())
        .map(|s| s.numel())
        .fold(0usize, usize::saturating_add);
    elements <= limits.max_elements
}

/// The inputs of `case`: the conformance draw for its seed, changed by its mode.
/// Index inputs and inputs an op draws itself ([`Op::special_input`]) are left as
/// drawn; so are integer and bool inputs, but for ties.
///
/// [`Op::special_input`]: crate::op::Op::special_input
pub fn case_data(case: &FuzzCase) -> CaseData {
    let spec = &case.spec;
    let mut values = generate(spec, case.seed);
    for (k, (sig, v)) in spec.inputs().iter().zip(values.iter_mut()).enumerate() {
        let drawn_by_op = spec.special_input(k, case.seed).is_some();
        if drawn_by_op || is_index(spec, &sig.name) || !sig.dtype.is_float() {
            continue;
        }
        let domain = spec.domain(sig);
        for (i, x) in v.iter_mut().enumerate() {
            let r = crate::rng::bits(
                crate::rng::RngScheme::Counter,
                case.seed ^ FUZZ_SALT,
                k as u64,
                i as u32,
            );
            *x = reshape(case.mode, sig.dtype, domain, *x, u64::from(r));
        }
    }
    crate::conformance::case_data_from_values(spec, values)
}

/// Keeps the mode's draws apart from the conformance draw of the same seed.
const FUZZ_SALT: u64 = 0xf022_5eed;

/// One value `x` (drawn from `domain`) as `mode` wants it; `r` is this element's random
/// bits.
fn reshape(
    mode: InputMode,
    dtype: ScalarType,
    domain: crate::conformance::inputs::Domain,
    x: f64,
    r: u64,
) -> f64 {
    use crate::conformance::inputs::Domain;
    match mode {
        InputMode::Domain => x,
        InputMode::Wide => {
            let span: i64 = match dtype {
                ScalarType::F16 | ScalarType::Bf16 => 4,
                ScalarType::F64 => 100,
                _ => 20,
            };
            let e = (r % (2 * span as u64 + 1)) as i64 - span;
            x * 2f64.powi(e as i32)
        }
        InputMode::Ties => {
            let t = (x * 2.0).round() / 2.0;
            match domain {
                Domain::AwayFromZero(..) if t == 0.0 => 0.5f64.copysign(x),
                _ => t,
            }
        }
        InputMode::Specials => {
            if r % 8 != 0 {
                return x;
            }
            let specials = special_values(dtype);
            specials[((r >> 3) % specials.len() as u64) as usize]
        }
    }
}

/// NaN, ±∞, ±0 and the smallest subnormals of `dtype`.
pub fn special_values(dtype: ScalarType) -> Vec<f64> {
    let tiny = match dtype {
        ScalarType::F16 => Scalar::F16(1).to_f64(),
        ScalarType::Bf16 => Scalar::Bf16(1).to_f64(),
        ScalarType::F64 => f64::from_bits(1),
        _ => f32::from_bits(1) as f64,
    };
    vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        tiny,
        -tiny,
    ]
}
