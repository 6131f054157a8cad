//! A pool of device allocations, reused by size so that a loop of same-shaped ops does
//! not pay for allocation each call (host `Vec`s on the CPU, buffers on GPUs, where an
//! allocation costs far more than a kernel launch).

use std::collections::HashMap;
use std::sync::Mutex;

/// Free blocks by size in bytes, with a cap on what is kept.
pub struct Pool<B> {
    free: Mutex<PoolState<B>>,
    max_kept_bytes: usize,
}

struct PoolState<B> {
    blocks: HashMap<usize, Vec<B>>,
    kept_bytes: usize,
    hits: u64,
    misses: u64,
}

/// Most memory a pool keeps for reuse by default (256 MiB).
pub const DEFAULT_MAX_KEPT_BYTES: usize = 256 << 20;

impl<B> Default for Pool<B> {
    fn default() -> Self {
        Pool::with_cap(DEFAULT_MAX_KEPT_BYTES)
    }
}

impl<B> Pool<B> {
    /// A pool that keeps at most `max_kept_bytes` of free blocks.
    pub fn with_cap(max_kept_bytes: usize) -> Self {
        Pool {
            free: Mutex::new(PoolState {
                blocks: HashMap::new(),
                kept_bytes: 0,
                hits: 0,
                misses: 0,
            }),
            max_kept_bytes,
        }
    }

    /// A free block of exactly `size` bytes (callers round sizes up to their
    /// granularity first), or a new one from `alloc`. If `alloc` fails, every free
    /// block is released (memory the pool holds may be what stands in the way) and
    /// `alloc` runs once more; its second error is returned. A reused block holds
    /// whatever its previous user left.
    pub fn take<E>(&self, size: usize, mut alloc: impl FnMut() -> Result<B, E>) -> Result<B, E> {
        {
            let mut state = self.lock();
            if let Some(block) = state.blocks.get_mut(&size).and_then(Vec::pop) {
                state.kept_bytes -= size;
                state.hits += 1;
                return Ok(block);
            }
            state.misses += 1;
        }
        alloc().or_else(|_| {
            self.clear();
            alloc()
        })
    }

    /// Returns a block of `size` bytes for reuse (dropped if the pool is full).
    pub fn give(&self, size: usize, block: B) {
        let mut state = self.lock();
        if state.kept_bytes + size <= self.max_kept_bytes {
            state.kept_bytes += size;
            state.blocks.entry(size).or_default().push(block);
        }
    }

    /// Drops every free block.
    fn clear(&self) {
        let mut state = self.lock();
        state.blocks.clear();
        state.kept_bytes = 0;
    }

    /// (reuses, fresh allocations) so far.
    pub fn stats(&self) -> (u64, u64) {
        let state = self.lock();
        (state.hits, state.misses)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState<B>> {
        crate::lock(&self.free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_reused_by_size_and_the_cap_holds() {
        let pool: Pool<Vec<u8>> = Pool::with_cap(100);
        let a = pool.take(64, || Ok::<_, ()>(vec![1; 64])).unwrap();
        pool.give(64, a);
        let b = pool.take(64, || Ok::<_, ()>(vec![2; 64])).unwrap();
        assert_eq!(b[0], 1, "the freed block is handed out again");
        pool.give(64, b);
        pool.give(64, vec![3; 64]); // over the cap of 100 bytes: dropped
        assert_eq!(pool.take(32, || Err(())), Err(()), "no block of that size");
        assert_eq!(pool.stats(), (1, 2));
    }

    #[test]
    fn a_failed_allocation_releases_the_free_blocks_and_tries_again() {
        let pool: Pool<Vec<u8>> = Pool::with_cap(1000);
        pool.give(64, vec![0; 64]);
        let mut tries = 0;
        let got = pool.take(32, || {
            tries += 1;
            if tries == 1 {
                Err("out of memory")
            } else {
                Ok(vec![0; 32])
            }
        });
        assert_eq!(got.map(|b| b.len()), Ok(32));
        assert_eq!(tries, 2);
        // The 64-byte block was released before the second try.
        assert_eq!(pool.take(64, || Err("none")), Err("none"));
    }
}
