//! Specs survive JSON exactly: every case and example round-trips, and attributes JSON
//! has no number for (±∞, NaN) are written as strings and read back bit for bit
//! (serde_json alone wrote them as `null`, which did not read back).

use kernelc_ir::ScalarType;
use kernelc_kernels::conformance::cases;
use kernelc_kernels::spec::*;

fn round_trip(spec: &OpSpec) -> OpSpec {
    let text = serde_json::to_string(spec).expect("serializes");
    let back: OpSpec = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(serde_json::to_string(&back).expect("serializes"), text);
    back
}

#[test]
fn every_case_and_example_round_trips() {
    for spec in cases::all()
        .into_iter()
        .chain(OpKind::ALL.iter().map(|k| k.example()))
    {
        assert_eq!(round_trip(&spec), spec);
    }
}

fn fill(value: f64) -> OpSpec {
    OpSpec::Fill(FillSpec {
        dtype: ScalarType::F32,
        shape: vec![3],
        value: FillValue::Constant { value },
        offset: 0,
    })
}

#[test]
fn infinities_and_signed_zeros_round_trip_bit_for_bit() {
    for value in [
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        1e300,
    ] {
        let OpSpec::Fill(FillSpec {
            value: FillValue::Constant { value: back },
            ..
        }) = round_trip(&fill(value))
        else {
            panic!("not a fill");
        };
        assert_eq!(back.to_bits(), value.to_bits(), "{value}");
    }
    let text = serde_json::to_string(&fill(f64::NEG_INFINITY)).unwrap();
    assert!(text.contains(r#""value":"-inf""#), "{text}");
    // NaN is written too (validation, not JSON, refuses it where an op must).
    let nan = serde_json::to_string(&OpSpec::Scalar(ScalarSpec {
        func: BinaryFn::Add,
        dtype: ScalarType::F32,
        shape: vec![1],
        scalar: f64::NAN,
        reversed: false,
        out_dtype: None,
    }))
    .unwrap();
    assert!(nan.contains(r#""scalar":"nan""#), "{nan}");
}

#[test]
fn other_spellings_are_read_and_garbage_is_named() {
    let read = |v: &str| {
        let text = format!(
            r#"{{"op":"fill","dtype":"f32","shape":[3],"value":{{"constant":{{"value":{v}}}}}}}"#
        );
        serde_json::from_str::<OpSpec>(&text)
    };
    for (text, want) in [
        (r#""Infinity""#, f64::INFINITY),
        (r#""-Infinity""#, f64::NEG_INFINITY),
        ("2", 2.0),
        ("-7", -7.0),
    ] {
        let Ok(OpSpec::Fill(FillSpec {
            value: FillValue::Constant { value },
            ..
        })) = read(text)
        else {
            panic!("{text} did not read");
        };
        assert_eq!(value, want);
    }
    let e = read(r#""lots""#).unwrap_err().to_string();
    assert!(e.contains("\"inf\""), "{e}");
    assert!(read("null").is_err());
}
