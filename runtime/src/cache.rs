//! The kernel cache.
//!
//! * **Key**: blake3 of (the lowered kernel's stable hash, the target name, the target
//!   options, the kernelc version): any change to what would be compiled changes it.
//! * **Level 1** ([`MemoryCache`]): compiled executables in memory, per device. A key
//!   asked for by many threads at once is compiled once (single flight); the others
//!   wait for that result.
//! * **Level 2** ([`DiskCache`]): emitted artifacts on disk, in the user cache dir
//!   (`KERNELC_CACHE_DIR` overrides it, `KERNELC_CACHE=off` turns it off). Files are
//!   written to a temporary name and renamed into place, so a reader never sees half a
//!   file; each carries a header with a checksum, and a file that fails the check is
//!   deleted and recompiled, never trusted.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A cache key: 32 bytes of blake3.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of `kernel_hash` compiled for `target` with `options` by this kernelc.
    pub fn new(kernel_hash: &[u8; 32], target: &str, options: &str) -> CacheKey {
        let mut h = blake3::Hasher::new();
        h.update(b"kernelc cache key v1\0");
        // Artifacts depend on the targets' shared ABI (binding numbers, parameters).
        h.update(&kernelc_codegen::abi::ABI_VERSION.to_le_bytes());
        h.update(kernel_hash);
        for part in [target, options, env!("CARGO_PKG_VERSION")] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        CacheKey(*h.finalize().as_bytes())
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({})", self.to_hex())
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

type Slot<V, E> = Arc<OnceLock<Result<Arc<V>, E>>>;

/// Level 1: compiled values by key, compiled at most once per key at a time.
pub struct MemoryCache<V, E> {
    slots: Mutex<HashMap<CacheKey, Slot<V, E>>>,
}

impl<V, E: Clone> Default for MemoryCache<V, E> {
    fn default() -> Self {
        MemoryCache {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<V, E: Clone> MemoryCache<V, E> {
    /// The value for `key`, compiling it with `compile` if no one has. Concurrent callers
    /// with the same key wait for the first one's result. A failed compile is returned
    /// to every waiter and then forgotten, so a later call tries again.
    pub fn get_or_compile(
        &self,
        key: CacheKey,
        compile: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        let slot = {
            // A poisoned lock only means another thread panicked while holding the map;
            // the map itself is always consistent (inserts and removes are single calls).
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .entry(key)
                .or_insert_with(|| Arc::new(OnceLock::new()))
                .clone()
        };
        let result = slot.get_or_init(|| compile().map(Arc::new)).clone();
        if result.is_err() {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if slots.get(&key).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                slots.remove(&key);
            }
        }
        result
    }

    /// The value for `key` if it is compiled.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<V>> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(key)?.get()?.as_ref().ok().cloned()
    }

    /// Number of compiled entries.
    pub fn len(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .filter(|s| matches!(s.get(), Some(Ok(_))))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The header every disk cache file starts with.
const MAGIC: &[u8; 8] = b"KERNELC1";
/// MAGIC, payload length (u64 LE), blake3 of the payload.
const HEADER_LEN: usize = 8 + 8 + 32;

/// Why a disk cache file was rejected.
#[derive(Debug, PartialEq, Eq)]
pub enum Corruption {
    TooShort,
    BadMagic,
    LengthMismatch { header: u64, actual: u64 },
    ChecksumMismatch,
}

/// Level 2: artifacts on disk.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: Option<PathBuf>,
}

impl DiskCache {
    /// The cache at `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache {
            dir: Some(dir.into()),
        }
    }

    /// No disk cache: every lookup misses, every store is dropped.
    pub fn off() -> DiskCache {
        DiskCache { dir: None }
    }

    /// From the environment: `KERNELC_CACHE=off` disables it, `KERNELC_CACHE_DIR` sets
    /// the directory, otherwise the user cache dir (`~/.cache/kernelc` on Linux).
    pub fn from_env() -> DiskCache {
        if std::env::var("KERNELC_CACHE").is_ok_and(|v| v.eq_ignore_ascii_case("off") || v == "0") {
            return DiskCache::off();
        }
        if let Some(dir) = std::env::var_os("KERNELC_CACHE_DIR") {
            return DiskCache::at(dir);
        }
        match directories::ProjectDirs::from("", "", "kernelc") {
            Some(dirs) => DiskCache::at(dirs.cache_dir()),
            None => DiskCache::off(),
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, key: &CacheKey, kind: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{key}.{kind}")))
    }

    /// The artifact stored for `key`, if present and intact. A damaged file is deleted.
    pub fn load(&self, key: &CacheKey, kind: &str) -> Option<Vec<u8>> {
        let path = self.path(key, kind)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode(&bytes) {
            Ok(payload) => Some(payload.to_vec()),
            Err(why) => {
                tracing::warn!(path = %path.display(), ?why, "corrupt kernel cache file; recompiling");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `payload` for `key` atomically (temporary file, then rename).
    pub fn store(&self, key: &CacheKey, kind: &str, payload: &[u8]) -> std::io::Result<()> {
        let Some(path) = self.path(key, kind) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(&encode(payload))?;
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Header + payload.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(payload).as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an encoded file, or why it is not one.
pub fn decode(bytes: &[u8]) -> Result<&[u8], Corruption> {
    if bytes.len() < HEADER_LEN {
        return Err(Corruption::TooShort);
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    if &header[..8] != MAGIC {
        return Err(Corruption::BadMagic);
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[8..16]);
    let declared = u64::from_le_bytes(len);
    if declared != payload.len() as u64 {
        return Err(Corruption::LengthMismatch {
            header: declared,
            actual: payload.len() as u64,
        });
    }
    if blake3::hash(payload).as_bytes() != &header[16..48] {
        return Err(Corruption::ChecksumMismatch);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn key(n: u8) -> CacheKey {
        CacheKey::new(&[n; 32], "cpu", "test")
    }

    #[test]
    fn key_depends_on_every_part() {
        let base = CacheKey::new(&[1; 32], "cpu", "x86_64 has_avx");
        assert_eq!(base, CacheKey::new(&[1; 32], "cpu", "x86_64 has_avx"));
        assert_ne!(base, CacheKey::new(&[2; 32], "cpu", "x86_64 has_avx"));
        assert_ne!(base, CacheKey::new(&[1; 32], "wgsl", "x86_64 has_avx"));
        assert_ne!(base, CacheKey::new(&[1; 32], "cpu", "x86_64"));
        // Parts are length-prefixed: moving a boundary changes the key.
        assert_ne!(
            CacheKey::new(&[1; 32], "cpu", "x"),
            CacheKey::new(&[1; 32], "cpux", "")
        );
        assert_eq!(base.to_hex().len(), 64);
        assert_eq!(base.to_string(), base.to_hex());
        assert!(format!("{base:?}").contains(&base.to_hex()));
    }

    #[test]
    fn encode_decode_round_trip() {
        for payload in [&b""[..], b"x", b"some compiled code \x00\xff"] {
            let file = encode(payload);
            assert_eq!(file.len(), HEADER_LEN + payload.len());
            assert_eq!(decode(&file), Ok(payload));
        }
    }

    #[test]
    fn decode_reports_each_corruption() {
        let good = encode(b"hello, cache");
        assert_eq!(decode(&good[..HEADER_LEN - 1]), Err(Corruption::TooShort));
        assert_eq!(decode(&[]), Err(Corruption::TooShort));

        let mut bad_magic = good.clone();
        bad_magic[0] ^= 0xFF;
        assert_eq!(decode(&bad_magic), Err(Corruption::BadMagic));

        // Truncated payload.
        assert_eq!(
            decode(&good[..good.len() - 3]),
            Err(Corruption::LengthMismatch {
                header: 12,
                actual: 9
            })
        );
        // Trailing garbage.
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(
            decode(&longer),
            Err(Corruption::LengthMismatch {
                header: 12,
                actual: 13
            })
        );

        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(decode(&flipped), Err(Corruption::ChecksumMismatch));

        let mut bad_sum = good;
        bad_sum[20] ^= 1;
        assert_eq!(decode(&bad_sum), Err(Corruption::ChecksumMismatch));
    }

    #[test]
    fn disk_cache_stores_loads_and_deletes_damaged_files() {
        let dir = tempfile::tempdir().unwrap();
        let disk = DiskCache::at(dir.path().join("nested"));
        let k = key(7);
        assert_eq!(disk.load(&k, "art"), None);
        disk.store(&k, "art", b"payload").unwrap();
        assert_eq!(disk.load(&k, "art").as_deref(), Some(&b"payload"[..]));
        // Another kind under the same key is another file.
        assert_eq!(disk.load(&k, "other"), None);

        let path = dir.path().join("nested").join(format!("{k}.art"));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(disk.load(&k, "art"), None);
        assert!(!path.exists(), "a damaged file is deleted");

        // Overwriting is atomic and leaves no temporary files behind.
        disk.store(&k, "art", b"one").unwrap();
        disk.store(&k, "art", b"two").unwrap();
        assert_eq!(disk.load(&k, "art").as_deref(), Some(&b"two"[..]));
        let files = std::fs::read_dir(dir.path().join("nested"))
            .unwrap()
            .count();
        assert_eq!(files, 1);
    }

    #[test]
    fn disk_cache_off_stores_nothing() {
        let disk = DiskCache::off();
        assert!(disk.dir().is_none());
        disk.store(&key(1), "art", b"x").unwrap();
        assert_eq!(disk.load(&key(1), "art"), None);
    }

    #[test]
    fn memory_cache_compiles_once_under_contention() {
        let cache: MemoryCache<u64, String> = MemoryCache::default();
        let compiles = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(16);
        let values: Vec<Arc<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        cache
                            .get_or_compile(key(3), || {
                                compiles.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(20));
                                Ok(42)
                            })
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(compiles.load(Ordering::SeqCst), 1);
        assert!(values.iter().all(|v| **v == 42));
        assert!(values.iter().all(|v| Arc::ptr_eq(v, &values[0])));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&key(3)).as_deref(), Some(&42));
        assert_eq!(cache.get(&key(4)), None);
    }

    #[test]
    fn memory_cache_forgets_failures() {
        let cache: MemoryCache<u64, String> = MemoryCache::default();
        assert!(cache.is_empty());
        let err = cache.get_or_compile(key(5), || Err("boom".to_string()));
        assert_eq!(err, Err("boom".to_string()));
        assert_eq!(cache.get(&key(5)), None);
        assert!(cache.is_empty());
        let ok = cache.get_or_compile(key(5), || Ok(7)).unwrap();
        assert_eq!(*ok, 7);
        // A hit does not call the closure.
        let again = cache
            .get_or_compile(key(5), || panic!("compiled twice"))
            .unwrap();
        assert!(Arc::ptr_eq(&ok, &again));
        assert_eq!(cache.len(), 1);
    }
}
