//! `kernelc::fuzz::entry::random_program` under libFuzzer: no input may panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kernelc::fuzz::entry::random_program(data));
