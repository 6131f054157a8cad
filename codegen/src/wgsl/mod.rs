//! WGSL target (in progress).
