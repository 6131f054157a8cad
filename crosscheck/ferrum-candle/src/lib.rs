//! Tests only: kernelc's ferrum adapter against ferrum-runtime 0.7.0's candle backend
//! (`tests/candle.rs`), in its own crate so that candle builds only here.
