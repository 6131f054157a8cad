//! The emitters (issues #4-#6): not built yet. See docs/ARCHITECTURE.md.
