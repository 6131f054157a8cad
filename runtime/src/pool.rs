//! A pool of host allocations, reused by size so that a loop of same-shaped ops does
//! not pay for allocation each call.

use std::collections::HashMap;
use std::sync::Mutex;

/// Memory is handed out in 16-byte words: aligned for every element type and for
/// 128-bit vector loads.
pub type Word = u128;

/// Free blocks by word count, with a cap on what is kept.
#[derive(Default)]
pub struct Pool {
    free: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    blocks: HashMap<usize, Vec<Vec<Word>>>,
    kept_words: usize,
    hits: u64,
    misses: u64,
}

/// Most memory the pool keeps for reuse (256 MiB).
const MAX_KEPT_WORDS: usize = (256 << 20) / 16;

impl Pool {
    /// A block of at least `bytes` bytes. A reused block holds whatever its previous
    /// user left (callers overwrite it); `None` when the allocation fails.
    pub fn take(&self, bytes: usize) -> Option<Vec<Word>> {
        let words = bytes.div_ceil(16).max(1);
        {
            let mut state = self.free.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(block) = state.blocks.get_mut(&words).and_then(Vec::pop) {
                state.kept_words -= words;
                state.hits += 1;
                return Some(block);
            }
            state.misses += 1;
        }
        let mut block = Vec::new();
        block.try_reserve_exact(words).ok()?;
        block.resize(words, 0);
        Some(block)
    }

    /// Returns a block for reuse (dropped if the pool is full).
    pub fn give(&self, block: Vec<Word>) {
        let words = block.len();
        let mut state = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if state.kept_words + words <= MAX_KEPT_WORDS {
            state.kept_words += words;
            state.blocks.entry(words).or_default().push(block);
        }
    }

    /// (reuses, fresh allocations) so far.
    pub fn stats(&self) -> (u64, u64) {
        let state = self.free.lock().unwrap_or_else(|p| p.into_inner());
        (state.hits, state.misses)
    }
}
