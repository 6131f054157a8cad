//! The runtime (issue #4): not built yet. See docs/ARCHITECTURE.md.
