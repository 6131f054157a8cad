//! `kernelc::fuzz::entry::op_spec_json` under libFuzzer: no input may panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kernelc::fuzz::entry::op_spec_json(data));
