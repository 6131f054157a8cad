//! The `kernelc` command line, run as a user runs it: every input form, the outputs a
//! host program reads, and a clear error (non-zero exit, a message naming the problem)
//! for each kind of bad input.

use kernelc::ir::{hash, json};
use kernelc::kernels::lower::{lower, TargetCaps};
use kernelc::kernels::spec::OpSpec;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const SOFTMAX: &str = r#"{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1,"log":false}"#;

fn kernelc(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kernelc"))
        .args(args)
        .env("KERNELC_CACHE", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kernelc starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("stdin is written");
    drop(input);
    child.wait_with_output().expect("kernelc ends")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kernelc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8 output")
}

/// The command failed and its message names `expected`.
fn assert_error(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "kernelc succeeded on bad input");
    assert!(
        stderr.starts_with("kernelc: error: ") && stderr.contains(expected),
        "message {stderr:?} should name {expected:?}"
    );
}

/// The command was refused as a usage error (exit code 2) naming `expected`.
fn assert_usage_error(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(expected),
        "{stderr:?} should name {expected:?}"
    );
}

#[test]
fn lower_reads_inline_json_a_file_and_stdin_alike() {
    let inline = stdout(&kernelc(&["lower", SOFTMAX], None));
    assert!(inline.starts_with("// launch 0: grid "), "{inline}");
    assert!(inline.contains("kernel softmax"), "{inline}");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("spec.json");
    std::fs::write(&path, SOFTMAX).expect("spec written");
    let from_file = stdout(&kernelc(
        &["lower", path.to_str().expect("utf-8 path")],
        None,
    ));
    let from_stdin = stdout(&kernelc(&["lower", "-"], Some(SOFTMAX)));
    assert_eq!(inline, from_file);
    assert_eq!(inline, from_stdin);
}

#[test]
fn lower_prints_the_kernels_the_library_lowers() {
    let spec: OpSpec = serde_json::from_str(SOFTMAX).expect("spec parses");
    let plan = lower(&spec, &TargetCaps::cuda_sm90()).expect("spec lowers");
    let text = stdout(&kernelc(&["lower", "--caps", "gpu", SOFTMAX], None));
    for launch in &plan.launches {
        assert!(text.contains(&kernelc::ir::print::print(&launch.kernel)));
    }
}

/// `--target` prints each kernel as that target's device compiles it: lowered for its
/// caps and put through its passes and math expansion (the exp here is expanded on
/// every target), and `--emit` the code its emitter makes.
#[test]
fn lower_for_a_target_prints_what_its_device_compiles() {
    use kernelc::ir::passes::for_target;
    const EXP: &str = r#"{"op":"unary","func":"exp","dtype":"f32","shape":[100]}"#;
    let spec: OpSpec = serde_json::from_str(EXP).expect("spec parses");
    let targets = [
        (
            "cpu",
            TargetCaps::cpu(),
            kernelc::ir::passes::MathExpansion::all_transcendental(),
            "function",
        ),
        (
            "cpu-llvm",
            TargetCaps::cpu(),
            kernelc::codegen::cpu::llvm::required_expansion(),
            "@kernel(ptr noalias readonly",
        ),
        (
            "ptx",
            TargetCaps::cuda_sm90(),
            kernelc::codegen::ptx::required_expansion(),
            ".entry main",
        ),
        (
            "wgsl",
            TargetCaps::gpu_baseline(),
            kernelc::codegen::wgsl::required_expansion(),
            "@compute",
        ),
        (
            "spirv",
            TargetCaps::gpu_baseline(),
            kernelc::codegen::spirv::required_expansion(false),
            "OpEntryPoint GLCompute",
        ),
    ];
    for (target, caps, expansion, marker) in targets {
        let plan = lower(&spec, &caps).expect("spec lowers");
        let text = stdout(&kernelc(&["lower", "--target", target, EXP], None));
        for launch in &plan.launches {
            let compiled = for_target(&launch.kernel, &expansion);
            assert!(
                text.contains(&kernelc::ir::print::print(&compiled)),
                "{target}: {text}"
            );
            assert!(!text.contains("exp("), "{target}: exp is expanded");
        }
        assert!(
            !text.contains(marker),
            "{target}: no emitted code without --emit"
        );
        let emitted = stdout(&kernelc(
            &["lower", "--target", target, "--emit", EXP],
            None,
        ));
        assert!(emitted.contains(marker), "{target} --emit: {emitted}");
    }
    // The CPU device present here compiles exactly what `--target cpu` shows.
    let device = stdout(&kernelc(&["lower", "--device", "cpu", EXP], None));
    assert_eq!(
        device,
        stdout(&kernelc(&["lower", "--target", "cpu", EXP], None))
    );
}

/// Per-call values print as uniform bindings with the spec's values.
#[test]
fn lower_lists_the_per_call_uniforms() {
    let scalar = r#"{"op":"scalar","func":"mul","dtype":"f32","shape":[10],"scalar":0.25}"#;
    let text = stdout(&kernelc(&["lower", "--target", "cpu", scalar], None));
    assert!(text.contains("Uniform(0)"), "{text}");
    assert!(text.contains("// uniform 0: scalar = F32("), "{text}");
}

#[test]
fn lower_names_what_is_wrong_with_its_input() {
    assert_error(&kernelc(&["lower", "{\"op\":"], None), "invalid op spec");
    assert_error(
        &kernelc(&["lower", r#"{"op":"softmax","dtype":"f32"}"#], None),
        "missing field",
    );
    assert_error(
        &kernelc(&["lower", "--emit", SOFTMAX], None),
        "--emit needs --target or --device",
    );
    assert_error(
        &kernelc(&["lower", "--device", "tpu", SOFTMAX], None),
        "unknown device `tpu`",
    );
    assert_error(
        &kernelc(&["lower", "/no/such/spec.json"], None),
        "cannot read /no/such/spec.json",
    );
    // Well-formed JSON for an op that cannot exist: the axis is past the rank.
    let bad_axis = r#"{"op":"softmax","dtype":"f32","shape":[4,8],"axis":2,"log":false}"#;
    assert_error(
        &kernelc(&["lower", bad_axis], None),
        "axis 2 is out of range for a tensor of rank 2",
    );
}

#[test]
fn ir_round_trips_a_kernel_and_prints_its_stable_hash() {
    let spec: OpSpec = serde_json::from_str(SOFTMAX).expect("spec parses");
    let kernel = &lower(&spec, &TargetCaps::cpu())
        .expect("spec lowers")
        .launches[0]
        .kernel;
    let text = json::to_json(kernel);
    let out = stdout(&kernelc(&["ir", "-", "--json", "--hash"], Some(&text)));
    let (printed_json, hash_line) = out.trim_end().rsplit_once('\n').expect("two parts");
    assert_eq!(json::from_json(printed_json).expect("valid JSON"), *kernel);
    assert_eq!(hash_line, format!("hash: {}", hash::stable_hash(kernel)));
}

#[test]
fn ir_rejects_malformed_and_invalid_kernels() {
    assert_error(
        &kernelc(&["ir", "-"], Some("not json")),
        "malformed JSON at line 1",
    );
    assert_error(
        &kernelc(&["ir", "-"], Some("{\"name\": 3}")),
        "JSON is not a kernel",
    );
    let spec: OpSpec = serde_json::from_str(SOFTMAX).expect("spec parses");
    let kernel = &lower(&spec, &TargetCaps::cpu())
        .expect("spec lowers")
        .launches[0]
        .kernel;
    // A kernel that parses but does not validate: a workgroup of no invocations.
    let mut broken = kernel.clone();
    broken.workgroup_size = [0, 1, 1];
    let out = kernelc(&["ir", "-"], Some(&json::to_json(&broken)));
    assert_error(&out, "zero dimension");
}

#[test]
fn bench_times_cases_on_the_cpu_and_writes_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let specs = dir.path().join("cases.json");
    let cases = format!(
        r#"[{{"name":"softmax small","spec":{SOFTMAX},"bytes":256}},
            {{"name":"add","spec":{{"op":"binary","func":"add","dtype":"f32","lhs":[1000],"rhs":[1000]}}}},
            {{"name":"gemm 64","spec":{{"op":"gemm","dtype":"f32","layout":"row_major","m":64,"n":64,"k":64,"trans_a":false,"trans_b":false,"batch":[],"alpha":1.0,"beta":0.0,"bias":false}},"flops":524288}}]"#
    );
    std::fs::write(&specs, cases).expect("cases written");
    let json_path = dir.path().join("out.json");
    let plot_path = dir.path().join("roofline.svg");
    let args = [
        "bench",
        "--device",
        "cpu",
        "--runs",
        "3",
        "--probe-mib",
        "8",
        "--specs",
        specs.to_str().expect("utf-8 path"),
        "--json",
        json_path.to_str().expect("utf-8 path"),
        "--plot",
        plot_path.to_str().expect("utf-8 path"),
    ];
    let text = stdout(&kernelc(&args, None));
    assert!(text.contains("| softmax small |"), "{text}");
    assert!(text.contains("roofline: memory "), "{text}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("json written"))
            .expect("valid JSON");
    let roof = &results["roofline"];
    let copy = roof["memory_gb_per_s"].as_f64().expect("memory roof");
    let probes = [
        &roof["copy_gb_per_s"],
        &roof["add_gb_per_s"],
        &roof["catalogue_add_gb_per_s"],
    ]
    .map(|p| p.as_f64());
    assert_eq!(
        Some(copy),
        probes.into_iter().flatten().reduce(f64::max),
        "{roof}"
    );
    let fma = roof["fma_gflop_per_s"].as_f64().expect("FMA roof");
    assert!(copy > 0.0 && fma > 0.0, "{roof}");
    let cases = results["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3);
    for case in cases {
        let seconds = case["seconds"].as_f64().expect("seconds");
        let rate = case["gb_per_s"].as_f64().expect("rate");
        assert!(seconds > 0.0 && rate > 0.0, "{case}");
        let share = case["roofline"]["share"].as_f64().expect("share");
        assert!(share > 0.0, "{case}");
    }
    // The add's bytes were not given: its compulsory traffic, 3 × 1000 f32.
    assert_eq!(cases[1]["bytes"].as_f64(), Some(12000.0));
    // The GEMM gives both: its share is of the roof at its intensity.
    let gemm = &cases[2]["roofline"];
    let intensity = gemm["intensity"].as_f64().expect("intensity");
    assert!((intensity - 2.0 * 64f64.powi(3) / (3.0 * 64.0 * 64.0 * 4.0)).abs() < 1e-9);
    assert_eq!(
        gemm["attainable"].as_f64(),
        Some(fma.min(intensity * copy)),
        "{gemm}"
    );
    assert_eq!(results["failures"].as_array().map(Vec::len), Some(0));
    let svg = std::fs::read_to_string(&plot_path).expect("plot written");
    assert!(
        svg.starts_with("<svg") && svg.contains("measured roofline"),
        "{svg}"
    );
    assert!(svg.contains("gemm 64"), "the GEMM is drawn: {svg}");
    assert!(
        !svg.contains("\nadd\n"),
        "a case without FLOPs is not drawn"
    );
}

#[test]
fn bench_without_roofline_skips_the_probes_and_refuses_a_plot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let specs = dir.path().join("cases.json");
    let add = r#"{"op":"binary","func":"add","dtype":"f32","lhs":[64],"rhs":[64]}"#;
    std::fs::write(&specs, format!(r#"[{{"name":"add","spec":{add}}}]"#)).expect("written");
    let specs = specs.to_str().expect("utf-8 path");
    let json_path = dir.path().join("out.json");
    let json = json_path.to_str().expect("utf-8 path");
    let base = ["bench", "--device", "cpu", "--runs", "1", "--specs", specs];
    let text = stdout(&kernelc(
        &[&base[..], &["--no-roofline", "--json", json]].concat(),
        None,
    ));
    assert!(!text.contains("roofline: memory"), "{text}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("json written"))
            .expect("valid JSON");
    assert!(results["roofline"].is_null(), "{results}");
    assert!(results["cases"][0]["roofline"].is_null(), "{results}");
    let both = [&base[..], &["--no-roofline", "--plot", "x.svg"]].concat();
    assert_usage_error(&kernelc(&both, None), "--plot");
    let empty = [&base[..], &["--probe-mib", "0"]].concat();
    assert_usage_error(&kernelc(&empty, None), "--probe-mib");
}

/// `kernelc bench --device cpu` over a case list written to a temporary file.
fn bench_on_cpu(cases: &str) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let specs = dir.path().join("cases.json");
    std::fs::write(&specs, cases).expect("cases written");
    let specs = specs.to_str().expect("utf-8 path");
    kernelc(&["bench", "--device", "cpu", "--specs", specs], None)
}

#[test]
fn bench_reports_a_case_it_cannot_run_and_fails() {
    let bad = r#"[{"name":"mismatched add","spec":{"op":"binary","func":"add","dtype":"f32","lhs":[3],"rhs":[4]}}]"#;
    let out = bench_on_cpu(bad);
    assert_error(&out, "1 cases failed");
    assert!(String::from_utf8_lossy(&out.stdout).contains("| mismatched add | failed: "));
    assert_error(&bench_on_cpu("{}"), "not a list of bench cases");
}

/// `kernelc ops` lists every kind of the catalogue; `ops OP --json` gives one op's
/// parameters (optional ones included), the dtypes its validation accepts, its
/// tensors and its per-call values; an unknown op is a usage error (exit code 2)
/// naming the catalogue.
#[test]
fn ops_lists_the_catalogue_from_the_op_trait() {
    let table = stdout(&kernelc(&["ops"], None));
    for name in kernelc::kernels::spec::OpKind::NAMES {
        assert!(
            table.contains(&format!("| {name} |")),
            "{name} missing:\n{table}"
        );
    }
    let gemm: serde_json::Value =
        serde_json::from_str(&stdout(&kernelc(&["ops", "gemm", "--json"], None)))
            .expect("JSON out");
    assert_eq!(gemm["op"], "gemm");
    let per_call: Vec<&str> = gemm["per_call"]
        .as_array()
        .expect("per_call")
        .iter()
        .map(|u| u["name"].as_str().expect("name"))
        .collect();
    assert_eq!(per_call, ["alpha", "beta"]);
    let dtype = &gemm["dtypes"]
        .as_array()
        .expect("dtypes")
        .iter()
        .find(|d| d["parameter"] == "dtype")
        .expect("the dtype parameter")["accepted"];
    assert_eq!(dtype, &serde_json::json!(["f16", "bf16", "f32", "f64"]));
    for key in ["m", "n", "k", "activation", "lda"] {
        assert!(
            gemm["parameters"].get(key).is_some(),
            "{key} missing: {gemm}"
        );
    }
    assert!(gemm["optional"]
        .as_array()
        .expect("optional")
        .contains(&serde_json::json!("activation")));
    let softmax = stdout(&kernelc(&["ops", "softmax"], None));
    assert!(
        softmax.contains("axis = ") && softmax.contains("example: {"),
        "{softmax}"
    );
    let out = kernelc(&["ops", "softmx"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_error(&out, "no op named `softmx`; the catalogue has: unary");
}

fn kernelc_with_cache(args: &[&str], cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelc"))
        .args(args)
        .env_remove("KERNELC_CACHE")
        .env("KERNELC_CACHE_DIR", cache)
        .output()
        .expect("kernelc runs")
}

/// `kernelc info` lists the CPU with its caps (and every device choice that did not
/// open, with the reason); `kernelc cache` counts, lists and clears the artifacts a
/// run stored, and leaves other files of the directory alone.
#[test]
fn info_and_cache_report_devices_and_the_disk_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path();
    let info: serde_json::Value =
        serde_json::from_str(&stdout(&kernelc_with_cache(&["info", "--json"], cache)))
            .expect("JSON out");
    let cpu = info["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["choice"] == "cpu")
        .expect("the CPU is always present");
    assert_eq!(cpu["caps"]["max_invocations_per_workgroup"], 1);
    let choices = info["devices"].as_array().expect("devices").len()
        + info["absent"].as_array().expect("absent").len();
    assert_eq!(choices, 6, "cpu, cuda:0 and four wgpu paths: {info}");
    assert_eq!(info["cache"]["dir"], cache.display().to_string());
    assert_eq!(info["cache"]["artifacts"], 0);
    // A program using kernelc stores its compiled kernels in the cache.
    {
        use kernelc::runtime::{cache::DiskCache, Device, Runtime};
        let rt = Runtime::with_device(Device::cpu(), DiskCache::at(cache));
        let spec: OpSpec = serde_json::from_str(SOFTMAX).expect("a spec");
        let x = rt.tensor(&[4, 8], &[0.5f32; 32]).expect("upload");
        rt.run(&spec, &[&x]).expect("runs");
    }
    std::fs::write(cache.join("notes.txt"), "not kernelc's").expect("written");
    let stats: serde_json::Value = serde_json::from_str(&stdout(&kernelc_with_cache(
        &["cache", "stats", "--json"],
        cache,
    )))
    .expect("JSON out");
    let stored = stats["artifacts"].as_u64().expect("a count");
    assert!(stored >= 1 && stats["bytes"].as_u64() > Some(0), "{stats}");
    let listed: serde_json::Value = serde_json::from_str(&stdout(&kernelc_with_cache(
        &["cache", "ls", "--json"],
        cache,
    )))
    .expect("JSON out");
    let listed = listed.as_array().expect("a list");
    assert_eq!(listed.len() as u64, stored);
    assert!(listed
        .iter()
        .all(|e| e["key"].as_str().is_some_and(|k| k.len() == 64)));
    let cleared = stdout(&kernelc_with_cache(&["cache", "clear"], cache));
    assert_eq!(cleared.trim(), format!("removed {stored} cached artifacts"));
    assert!(cache.join("notes.txt").exists(), "other files stay");
    let out = kernelc_with_cache(&["cache", "stats"], cache);
    assert!(stdout(&out).contains(": 0 artifacts"));
    // A subcommand clap does not know is a usage error.
    assert_eq!(
        kernelc_with_cache(&["cache", "prune"], cache).status.code(),
        Some(2)
    );
}

/// `-v` shows each compile on standard error, `-vv` also the launches; with
/// `KERNELC_DUMP=DIR` every kernel compiled lands in DIR as its IR and its artifact,
/// the two files sharing their key prefix.
#[test]
fn verbosity_shows_runtime_events_and_kernelc_dump_writes_each_kernel() {
    let dir = tempfile::tempdir().expect("temp dir");
    let specs = dir.path().join("specs.json");
    std::fs::write(
        &specs,
        format!(r#"[{{"name":"softmax","spec":{SOFTMAX}}}]"#),
    )
    .expect("specs written");
    let dump = dir.path().join("dump");
    let run = |verbosity: &str| {
        Command::new(env!("CARGO_BIN_EXE_kernelc"))
            .args([
                verbosity, "bench", "--device", "cpu", "--runs", "1", "--specs",
            ])
            .arg(&specs)
            .env("KERNELC_DUMP", &dump)
            .env_remove("RUST_LOG")
            .output()
            .expect("kernelc runs")
    };
    let out = run("-v");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kernel ready") && stderr.contains("kernel=softmax"),
        "{stderr}"
    );
    assert!(!stderr.contains("launch"), "launches are -vv: {stderr}");
    let out = run("-vv");
    assert!(String::from_utf8_lossy(&out.stderr).contains("launch"));
    let names: Vec<String> = std::fs::read_dir(&dump)
        .expect("the dump directory exists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let ir = names
        .iter()
        .find(|n| n.ends_with(".softmax.ir"))
        .unwrap_or_else(|| panic!("no IR dumped: {names:?}"));
    let key = &ir[..16];
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(key) && !n.ends_with(".ir")),
        "no artifact beside {ir}: {names:?}"
    );
    let text = std::fs::read_to_string(dump.join(ir)).expect("IR text");
    assert!(text.starts_with("kernel softmax"), "{text}");
}

/// `kernelc ops | head -1`: a reader that closes the pipe early ends the tool as it
/// ends any Unix filter (SIGPIPE), with no panic message.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    // Over 64 KiB, more than a pipe holds.
    let spec = r#"{"op":"softmax","dtype":"f32","shape":[64,1000],"axis":1}"#;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kernelc"))
        .args(["lower", "--target", "spirv", "--emit", spec])
        .env("KERNELC_CACHE", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kernelc starts");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).expect("some output");
    drop(stdout);
    let out = child.wait_with_output().expect("kernelc ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

/// `KERNELC_THREADS` sets the CPU launches' threads (the device's name says how many);
/// a value that names no positive count is an error naming it, not a silent default.
#[test]
fn kernelc_threads_sets_the_cpu_threads_or_is_refused() {
    let with_threads = |threads: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kernelc"))
            .args(args)
            .env("KERNELC_CACHE", "off")
            .env("KERNELC_THREADS", threads)
            .output()
            .expect("kernelc runs")
    };
    let info: serde_json::Value =
        serde_json::from_str(&stdout(&with_threads("3", &["info", "--json"]))).expect("JSON");
    let cpu = &info["devices"][0];
    assert_eq!(cpu["choice"], "cpu");
    assert!(
        cpu["name"]
            .as_str()
            .is_some_and(|n| n.contains("3 threads")),
        "{cpu}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().to_str().expect("utf-8 path");
    let run = |threads| {
        with_threads(
            threads,
            &[
                "run", SOFTMAX, "--inputs", "random", "--out", out, "--check",
            ],
        )
    };
    stdout(&run("1"));
    for bad in ["0", "many"] {
        assert_error(&run(bad), "KERNELC_THREADS");
    }
}
