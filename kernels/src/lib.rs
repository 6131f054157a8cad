//! The op catalogue (issue #3): not built yet. See docs/ARCHITECTURE.md.
