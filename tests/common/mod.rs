//! What the command-line tests share: running `kernelc` and checking its failures.

use std::process::{Command, Output};

/// `kernelc args…` with the disk cache off.
pub fn kernelc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelc"))
        .args(args)
        .env("KERNELC_CACHE", "off")
        .output()
        .expect("kernelc runs")
}

/// The command failed with exit code `code` and a message naming `expected`.
pub fn assert_fails(out: &Output, code: i32, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains(expected),
        "{stderr:?} should name {expected:?}"
    );
}
