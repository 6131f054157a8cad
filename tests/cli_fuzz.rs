//! `kernelc fuzz` run as a user runs it: the op table and JSON, the same cases for
//! the same seed, the program fuzzer's table, a replayed case, and usage errors.

mod common;

use common::{assert_fails, kernelc};
use kernelc::kernels::fuzz::{FuzzCase, InputMode};
use kernelc::kernels::spec::OpKind;

fn json_of(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json written")).expect("JSON")
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two runs of one seed draw the same cases; the table and JSON cover only the ops
/// asked for.
#[test]
fn op_fuzzing_is_seeded_and_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = |name: &str| {
        let json = dir.path().join(name);
        let args = [
            "fuzz",
            "--targets",
            "cpu",
            "--ops",
            "softmax,binary",
            "--cases",
            "24",
            "--seed",
            "3",
            "--json",
        ];
        let out = kernelc(&[&args[..], &[json.to_str().expect("utf-8")]].concat());
        (ok(&out), json_of(&json))
    };
    let (text, first) = run("a.json");
    assert!(text.contains("kernelc fuzz --seed 3"), "{text}");
    assert!(text.contains("| op | target | cases |"), "{text}");
    assert_eq!(first["seed"], 3);
    assert_eq!(first["op_cases"], 24);
    let rows = first["ops"].as_array().expect("rows");
    let total: u64 = rows
        .iter()
        .map(|r| r["cases"].as_u64().expect("cases"))
        .sum();
    assert_eq!(total, 24, "every case ran on the cpu: {rows:?}");
    for row in rows {
        assert!(["softmax", "binary"].contains(&row["op"].as_str().expect("op")));
        assert_eq!(row["failures"], 0, "{row}");
        let worst = row["worst"].as_f64().expect("worst");
        assert!((0.0..=1.0).contains(&worst), "{row}");
    }
    let (_, second) = run("b.json");
    assert_eq!(
        first["ops"], second["ops"],
        "the same seed draws the same cases"
    );
}

#[test]
fn program_fuzzing_reports_each_configuration() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("p.json");
    let out = kernelc(&[
        "fuzz",
        "--targets",
        "cpu",
        "--ops",
        "unary",
        "--cases",
        "8",
        "--seed",
        "11",
        "--programs",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    let text = ok(&out);
    assert!(text.contains("| target | programs | shape |"), "{text}");
    let programs = json_of(&json)["programs"].clone();
    let programs = programs.as_array().expect("programs");
    assert_eq!(programs.len(), 3, "{programs:?}");
    for p in programs {
        assert_eq!(p["target"], "cpu");
        assert_eq!(
            p["program"].as_str().map(|s| s.starts_with("floats")),
            Some(true)
        );
        assert_eq!(p["cases"], 8, "{p}");
        assert!(p["failure"].is_null(), "{p}");
    }
}

#[test]
fn a_saved_case_replays() {
    let dir = tempfile::tempdir().expect("temp dir");
    let case = FuzzCase {
        spec: OpKind::from_name("softmax").expect("softmax").cases()[0].clone(),
        seed: 9,
        mode: InputMode::Specials,
    };
    let file = dir.path().join("case.json");
    std::fs::write(&file, serde_json::to_string(&case).expect("serialises")).expect("written");
    let file = file.to_str().expect("utf-8");
    let text = ok(&kernelc(&["fuzz", "--targets", "cpu", "--replay", file]));
    assert!(text.contains("| softmax | cpu | 1 |"), "{text}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"spec\": 1}").expect("written");
    let bad = bad.to_str().expect("utf-8");
    assert_fails(
        &kernelc(&["fuzz", "--targets", "cpu", "--replay", bad]),
        1,
        "not a saved fuzz case",
    );
}

#[test]
fn bad_fuzz_arguments_are_usage_errors() {
    assert_fails(&kernelc(&["fuzz", "--ops", "nope"]), 2, "unknown op `nope`");
    assert_fails(&kernelc(&["fuzz", "--targets", "tpu"]), 2, "--targets tpu");
    assert_fails(&kernelc(&["fuzz", "--time", "soon"]), 2, "--time");
    assert_fails(
        &kernelc(&["fuzz", "--cases", "3", "--time", "1s"]),
        2,
        "cannot be used with",
    );
}

/// A time budget ends the run on time, with cases done.
#[test]
fn a_time_budget_ends_the_run() {
    let started = std::time::Instant::now();
    let text = ok(&kernelc(&[
        "fuzz",
        "--targets",
        "cpu",
        "--time",
        "2s",
        "--seed",
        "5",
    ]));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert!(text.contains("| cpu |"), "{text}");
}

/// `--no-panic ENTRY` feeds many inputs to one entry point on several threads.
#[test]
fn no_panic_runs_an_entry_point() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("n.json");
    let json = json.to_str().expect("utf-8");
    for entry in ["ir_json", "op_spec_json", "graph_json"] {
        let args = [
            "fuzz",
            "--no-panic",
            entry,
            "--cases",
            "300",
            "--seed",
            "2",
            "--jobs",
            "2",
        ];
        let text = ok(&kernelc(&[&args[..], &["--json", json]].concat()));
        assert!(text.contains(&format!("{entry}: 300 inputs")), "{text}");
        let report = json_of(std::path::Path::new(json));
        assert_eq!(report["inputs"], 300);
        assert_eq!(report["panic_count"], 0, "{report}");
    }
    assert_fails(
        &kernelc(&["fuzz", "--no-panic", "nope"]),
        2,
        "unknown entry point `nope`",
    );
}

/// `kernelc sweep` on a sample of f32 inputs: a row per function, within its bound.
#[test]
fn a_sampled_sweep_reports_each_function() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("s.json");
    let args = [
        "sweep",
        "--device",
        "cpu",
        "--stride",
        "1048573",
        "--funcs",
        "exp,sin,tanh",
        "--json",
    ];
    let text = ok(&kernelc(
        &[&args[..], &[json.to_str().expect("utf-8")]].concat(),
    ));
    assert!(
        text.contains("| function | inputs | bound (ULP) |"),
        "{text}"
    );
    let rows = json_of(&json)["rows"].clone();
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(row["inputs"], 4097, "{row}");
        assert_eq!(row["failures"], 0, "{row}");
        assert!(row["max_ulp"].as_f64().expect("max ulp") < 2.0, "{row}");
    }
    // sin beyond the range its reduction is exact for is unspecified, and counted so.
    assert!(rows[1]["unspecified"].as_u64().expect("count") > 0);
    assert_fails(
        &kernelc(&["sweep", "--funcs", "cbrt"]),
        2,
        "unknown function `cbrt`",
    );
    assert_fails(&kernelc(&["sweep", "--stride", "0"]), 2, "--stride");
}
