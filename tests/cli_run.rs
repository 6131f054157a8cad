//! `kernelc run` as a NumPy user runs it: `.npy` in, `.npy` out, equal to the
//! reference; random inputs with `--check`; and a message naming the problem for each
//! kind of bad `.npy` (wrong dtype, truncated, Fortran order, wrong shape), a wrong
//! number of inputs and an unwritable `--out`.

mod common;

use common::{assert_fails, kernelc};
use std::path::Path;

use kernelc::kernels::reference::reference;
use kernelc::kernels::spec::OpSpec;

const SOFTMAX: &str = r#"{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1}"#;

/// A version-1.0 `.npy` file: the header dict padded to a multiple of 64 bytes.
fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend(data);
    out
}

/// The f32 data of a `.npy` file kernelc wrote.
fn npy_f32(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let dict = String::from_utf8_lossy(&bytes[10..10 + header]);
    assert!(dict.contains("'<f4'") && dict.contains("False"), "{dict}");
    bytes[10 + header..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn x_values() -> Vec<f32> {
    (0..32).map(|i| ((i * 7) % 11) as f32 / 4.0 - 1.0).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn npy_in_npy_out_equals_the_reference() {
    let dir = tempfile::tempdir().expect("temp dir");
    let x = dir.path().join("x.npy");
    std::fs::write(&x, npy("<f4", false, &[4, 8], &f32_bytes(&x_values()))).expect("written");
    let out = dir.path().join("out");
    let run = kernelc(&[
        "run",
        SOFTMAX,
        "--inputs",
        path(&x),
        "--out",
        path(&out),
        "--check",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("check: every output"));
    let got = npy_f32(&std::fs::read(out.join("y.npy")).expect("y.npy written"));
    let spec: OpSpec = serde_json::from_str(SOFTMAX).expect("spec");
    let xs: Vec<f64> = x_values().iter().map(|&v| v as f64).collect();
    let want = reference(&spec, &[&xs]).expect("reference").remove(0);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() <= 1e-6, "{g} vs {w}");
    }
}

#[test]
fn random_inputs_are_written_and_checked_on_each_device() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gemm = r#"{"op":"gemm","dtype":"f32","m":6,"n":5,"k":7,"alpha":0.5,"beta":1.0}"#;
    let mut devices = vec!["cpu"];
    if std::env::var_os("CI").is_some() {
        devices.push("wgpu"); // lavapipe
    }
    for device in devices {
        let out = dir.path().join(device);
        let run = kernelc(&[
            "run",
            gemm,
            "--inputs",
            "random",
            "--seed",
            "5",
            "--device",
            device,
            "--out",
            path(&out),
            "--check",
        ]);
        assert!(
            run.status.success(),
            "{device}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        for file in ["input_a.npy", "input_b.npy", "input_c.npy", "c.npy"] {
            assert!(out.join(file).exists(), "{device}: {file}");
        }
    }
}

#[test]
fn bad_npy_inputs_name_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let data = f32_bytes(&x_values());
    let case = |name: &str, bytes: Vec<u8>| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).expect("written");
        kernelc(&["run", SOFTMAX, "--inputs", path(&p), "--out", path(&out)])
    };
    let f64_data: Vec<u8> = x_values()
        .iter()
        .flat_map(|&v| (v as f64).to_le_bytes())
        .collect();
    assert_fails(
        &case("f64.npy", npy("<f8", false, &[4, 8], &f64_data)),
        1,
        "dtype <f8",
    );
    let whole = npy("<f4", false, &[4, 8], &data);
    assert_fails(
        &case("short.npy", whole[..whole.len() - 8].to_vec()),
        1,
        "cannot read its data",
    );
    assert_fails(
        &case("head.npy", whole[..20].to_vec()),
        1,
        "not a .npy file",
    );
    assert_fails(
        &case("fortran.npy", npy("<f4", true, &[4, 8], &data)),
        1,
        "Fortran order",
    );
    assert_fails(
        &case("shape.npy", npy("<f4", false, &[8, 4], &data)),
        1,
        "shape [8, 4]",
    );
    let good = dir.path().join("good.npy");
    std::fs::write(&good, &whole).expect("written");
    let two = kernelc(&[
        "run",
        SOFTMAX,
        "--inputs",
        path(&good),
        path(&good),
        "--out",
        path(&out),
    ]);
    assert_fails(&two, 2, "takes 1 inputs (x), 2 given");
    let missing = dir.path().join("missing.npy");
    let run = kernelc(&[
        "run",
        SOFTMAX,
        "--inputs",
        path(&missing),
        "--out",
        path(&out),
    ]);
    assert_fails(&run, 1, "cannot open");
    let file = dir.path().join("file");
    std::fs::write(&file, "x").expect("written");
    let under = file.join("sub");
    let run = kernelc(&[
        "run",
        SOFTMAX,
        "--inputs",
        path(&good),
        "--out",
        path(&under),
    ]);
    assert_fails(&run, 1, "cannot create");
    assert!(
        !out.join("y.npy").exists(),
        "nothing written by the failed runs"
    );
}
