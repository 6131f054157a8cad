//! SPIR-V target (in progress).
