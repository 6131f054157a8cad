//! `kernelc::fuzz::entry::graph_json` under libFuzzer: no input may panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kernelc::fuzz::entry::graph_json(data));
