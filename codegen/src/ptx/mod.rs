//! PTX target (in progress).
