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

use std::fmt;
use std::io::Write;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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

/// A map that keeps at most `capacity` entries, dropping the least recently used one
/// when a new key needs room, and counting what it dropped.
pub struct Lru<K, V> {
    map: Mutex<lru::LruCache<K, V>>,
    evictions: AtomicU64,
}

impl<K: std::hash::Hash + Eq, V: Clone> Lru<K, V> {
    pub fn new(capacity: NonZeroUsize) -> Lru<K, V> {
        Lru {
            map: Mutex::new(lru::LruCache::new(capacity)),
            evictions: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, lru::LruCache<K, V>> {
        crate::lock(&self.map)
    }

    /// The value for `key`, now the most recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().get(key).cloned()
    }

    /// The value for `key`, inserting `make()` first if there is none.
    pub fn get_or_insert(&self, key: K, make: impl FnOnce() -> V) -> V {
        let mut map = self.lock();
        if let Some(v) = map.get(&key) {
            return v.clone();
        }
        let v = make();
        if map.push(key, v.clone()).is_some() {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        v
    }

    /// Inserts `value` for `key`, dropping the least recently used entry if full.
    pub fn insert(&self, key: K, value: V) {
        let mut map = self.lock();
        let replaces = map.contains(&key);
        if map.push(key, value).is_some() && !replaces {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes `key` if `pred` holds for its value.
    pub fn remove_if(&self, key: &K, pred: impl FnOnce(&V) -> bool) {
        let mut map = self.lock();
        if map.peek(key).is_some_and(pred) {
            map.pop(key);
        }
    }

    /// Every value, most recently used first (does not touch the order).
    pub fn values(&self) -> Vec<V> {
        self.lock().iter().map(|(_, v)| v.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.lock().cap().get()
    }

    /// Entries dropped to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Drops every entry (not counted as evictions).
    pub fn clear(&self) {
        self.lock().clear();
    }
}

type Slot<V, E> = Arc<OnceLock<Result<Arc<V>, E>>>;

/// Level 1: compiled values by key, compiled at most once per key at a time, at most
/// `capacity` kept (least recently used dropped first).
pub struct MemoryCache<V, E> {
    slots: Lru<CacheKey, Slot<V, E>>,
}

impl<V, E: Clone> MemoryCache<V, E> {
    pub fn new(capacity: NonZeroUsize) -> Self {
        MemoryCache {
            slots: Lru::new(capacity),
        }
    }

    /// The value for `key`, compiling it with `compile` if no one has. Concurrent callers
    /// with the same key wait for the first one's result. A failed compile is returned
    /// to every waiter and then forgotten, so a later call tries again. An entry
    /// evicted while it compiles still reaches its waiters; it is only not kept.
    pub fn get_or_compile(
        &self,
        key: CacheKey,
        compile: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        let slot = self.slots.get_or_insert(key, || Arc::new(OnceLock::new()));
        let result = slot.get_or_init(|| compile().map(Arc::new)).clone();
        if result.is_err() {
            self.slots.remove_if(&key, |s| Arc::ptr_eq(s, &slot));
        }
        result
    }

    /// The value for `key` if it is compiled.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<V>> {
        self.slots.get(key)?.get()?.as_ref().ok().cloned()
    }

    /// Number of compiled entries.
    pub fn len(&self) -> usize {
        self.slots
            .values()
            .iter()
            .filter(|s| matches!(s.get(), Some(Ok(_))))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Entries dropped to make room so far.
    pub fn evictions(&self) -> u64 {
        self.slots.evictions()
    }

    /// Drops every entry.
    pub fn clear(&self) {
        self.slots.clear();
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

/// The disk cache's default size bound: 1 GiB.
pub const DEFAULT_DISK_CACHE_BYTES: u64 = 1 << 30;

/// Level 2: artifacts on disk, at most `max_bytes` of them: past the bound, the least
/// recently used files (by modification time, which a hit refreshes) are deleted until
/// three quarters of it remain.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: Option<PathBuf>,
    max_bytes: u64,
    state: Arc<DiskState>,
}

/// What the copies of one [`DiskCache`] share.
#[derive(Debug, Default)]
struct DiskState {
    /// Bytes of cache files in the directory, measured on the first store.
    bytes: OnceLock<AtomicU64>,
    evictions: AtomicU64,
}

/// One artifact of a disk cache, as [`DiskCache::entries`] lists it.
#[derive(Clone, Debug)]
pub struct CacheEntry {
    /// The cache key: 64 hex digits (the kernel's hash, target and options).
    pub key: String,
    /// What the artifact is (`ptx`, `spv`, `cubin`, ...: the file's extension).
    pub kind: String,
    pub bytes: u64,
    /// Last use (a hit refreshes it).
    pub used: std::time::SystemTime,
}

/// One cache file: its path, size and last use.
struct CacheFile {
    path: PathBuf,
    len: u64,
    used: std::time::SystemTime,
}

impl DiskCache {
    /// The cache at `dir`, bounded to [`DEFAULT_DISK_CACHE_BYTES`].
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache {
            dir: Some(dir.into()),
            max_bytes: DEFAULT_DISK_CACHE_BYTES,
            state: Arc::default(),
        }
    }

    /// No disk cache: every lookup misses, every store is dropped.
    pub fn off() -> DiskCache {
        DiskCache {
            dir: None,
            max_bytes: DEFAULT_DISK_CACHE_BYTES,
            state: Arc::default(),
        }
    }

    /// This cache with a size bound of `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> DiskCache {
        self.max_bytes = max_bytes;
        self
    }

    /// From the environment: `KERNELC_CACHE=off` disables it, `KERNELC_CACHE_DIR` sets
    /// the directory, otherwise the user cache dir (`~/.cache/kernelc` on Linux);
    /// `KERNELC_CACHE_MAX_BYTES` (a byte count, or with a `K`, `M` or `G` suffix) sets
    /// the size bound. A malformed bound is an error naming the variable.
    pub fn from_env() -> Result<DiskCache, String> {
        let cache = DiskCache::from_env_dir_only();
        match std::env::var("KERNELC_CACHE_MAX_BYTES") {
            Ok(text) => parse_bytes(&text)
                .map(|max| cache.with_max_bytes(max))
                .ok_or_else(|| {
                    format!("KERNELC_CACHE_MAX_BYTES=`{text}`: expected a byte count such as 500M or 2G")
                }),
            Err(_) => Ok(cache),
        }
    }

    /// As [`DiskCache::from_env`] with the default size bound.
    pub(crate) fn from_env_dir_only() -> DiskCache {
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

    /// The size bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Files deleted to keep under the bound so far (by this cache and its copies).
    pub fn evictions(&self) -> u64 {
        self.state.evictions.load(Ordering::Relaxed)
    }

    /// Bytes of cache files in the directory now.
    pub fn size_bytes(&self) -> u64 {
        self.files().iter().map(|f| f.len).sum()
    }

    /// Deletes every cache file (files of other names in the directory are left
    /// alone); returns how many were deleted.
    pub fn clear(&self) -> std::io::Result<usize> {
        let mut removed = 0;
        for f in self.files() {
            match std::fs::remove_file(&f.path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(bytes) = self.state.bytes.get() {
            bytes.store(self.size_bytes(), Ordering::Relaxed);
        }
        Ok(removed)
    }

    /// The cache files in the directory, most recently used first.
    pub fn entries(&self) -> Vec<CacheEntry> {
        let mut files = self.files();
        files.sort_by_key(|f| std::cmp::Reverse(f.used));
        files
            .into_iter()
            .filter_map(|f| {
                let name = f.path.file_name()?.to_str()?.to_string();
                let (key, kind) = name.split_once('.')?;
                Some(CacheEntry {
                    key: key.to_string(),
                    kind: kind.to_string(),
                    bytes: f.len,
                    used: f.used,
                })
            })
            .collect()
    }

    /// The cache files in the directory: `<64 hex digits>.<kind>`.
    fn files(&self) -> Vec<CacheFile> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name();
                let (key, kind) = name.to_str()?.split_once('.')?;
                let ours = key.len() == 64
                    && key.bytes().all(|b| b.is_ascii_hexdigit())
                    && !kind.is_empty()
                    && kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                let meta = e.metadata().ok()?;
                (ours && meta.is_file()).then(|| CacheFile {
                    path: e.path(),
                    len: meta.len(),
                    used: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                })
            })
            .collect()
    }

    /// Counts `added` bytes and deletes the least recently used files if the cache is
    /// now over its bound.
    fn account(&self, added: u64) {
        let bytes = self
            .state
            .bytes
            .get_or_init(|| AtomicU64::new(self.size_bytes().saturating_sub(added)));
        let total = bytes.fetch_add(added, Ordering::Relaxed) + added;
        if total <= self.max_bytes {
            return;
        }
        let mut files = self.files();
        files.sort_by_key(|f| f.used);
        let mut size: u64 = files.iter().map(|f| f.len).sum();
        let target = self.max_bytes / 4 * 3;
        for f in files {
            if size <= target {
                break;
            }
            if std::fs::remove_file(&f.path).is_ok() {
                size -= f.len;
                self.state.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        bytes.store(size, Ordering::Relaxed);
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
            Ok(payload) => {
                dump_file(key, kind, payload);
                // A hit makes the file the most recently used (eviction goes by mtime).
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Some(payload.to_vec())
            }
            Err(why) => {
                tracing::warn!(path = %path.display(), ?why, "corrupt kernel cache file; recompiling");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `payload` for `key` atomically (temporary file, then rename).
    pub fn store(&self, key: &CacheKey, kind: &str, payload: &[u8]) -> std::io::Result<()> {
        dump_file(key, kind, payload);
        let Some(path) = self.path(key, kind) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        let file = encode(payload);
        tmp.write_all(&file)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| e.error)?;
        self.account(file.len() as u64);
        Ok(())
    }
}

/// `KERNELC_DUMP`: the directory every kernel a run compiles (or loads from the disk
/// cache) is written to, as Triton's dump variables do: `<key>.<kernel>.ir` (the
/// kernel IR as the runtime compiles it, printed) and `<key>.<kind>` (the target's
/// artifact: `wgsl`, `spv`, `ptx`, or the CPU's machine code), `<key>` the first 16
/// hex digits of the cache key, so a kernel's files sort together. Read per compile
/// (compiles are rare), so a program may set it at any time.
pub fn dump_dir() -> Option<PathBuf> {
    std::env::var_os("KERNELC_DUMP")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Writes `bytes` as dump file `<key>.<suffix>` when `KERNELC_DUMP` is set; a failure
/// is a warning, never an error of the run.
pub(crate) fn dump_file(key: &CacheKey, suffix: &str, bytes: &[u8]) {
    let Some(dir) = dump_dir() else {
        return;
    };
    let hex = key.to_hex();
    let path = dir.join(format!("{}.{suffix}", &hex[..16]));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        tracing::warn!(path = %path.display(), error = %e, "cannot write KERNELC_DUMP file");
    }
}

/// A byte count: digits with an optional `K`, `M` or `G` suffix (binary: 2^10, 2^20,
/// 2^30), as in `KERNELC_CACHE_MAX_BYTES`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => return None,
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(1u64 << shift)
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
    use std::sync::atomic::AtomicUsize;
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
        let cache: MemoryCache<u64, String> = MemoryCache::new(NonZeroUsize::MIN.saturating_add(7));
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
    fn lru_drops_the_least_recently_used_and_counts_it() {
        let lru: Lru<u32, u32> = Lru::new(NonZeroUsize::new(2).unwrap());
        lru.insert(1, 10);
        lru.insert(2, 20);
        assert_eq!(lru.get(&1), Some(10)); // 1 is now the most recent
        lru.insert(3, 30); // drops 2
        assert_eq!(lru.get(&2), None);
        assert_eq!((lru.get(&1), lru.get(&3)), (Some(10), Some(30)));
        assert_eq!(lru.evictions(), 1);
        lru.insert(3, 31); // a replacement is no eviction
        assert_eq!(lru.evictions(), 1);
        assert_eq!(lru.get_or_insert(4, || 40), 40); // drops 1
        assert_eq!(lru.get_or_insert(4, || unreachable!()), 40);
        assert_eq!((lru.len(), lru.capacity(), lru.evictions()), (2, 2, 2));
        lru.clear();
        assert!(lru.is_empty());
        assert_eq!(lru.evictions(), 2, "clearing is not evicting");
    }

    #[test]
    fn memory_cache_keeps_at_most_its_capacity() {
        let cache: MemoryCache<u64, String> = MemoryCache::new(NonZeroUsize::new(3).unwrap());
        for n in 0..10u8 {
            cache.get_or_compile(key(n), || Ok(n as u64)).unwrap();
        }
        assert_eq!(
            (cache.len(), cache.capacity(), cache.evictions()),
            (3, 3, 7)
        );
        assert_eq!(cache.get(&key(9)).as_deref(), Some(&9));
        assert_eq!(cache.get(&key(0)), None);
    }

    #[test]
    fn byte_counts_parse_with_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes(" 2k "), Some(2048));
        assert_eq!(parse_bytes("500M"), Some(500 << 20));
        assert_eq!(parse_bytes("3G"), Some(3 << 30));
        for bad in ["", "M", "12Q", "-1", "1.5G", "99999999999999999999G"] {
            assert_eq!(parse_bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn memory_cache_forgets_failures() {
        let cache: MemoryCache<u64, String> = MemoryCache::new(NonZeroUsize::MIN.saturating_add(7));
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
