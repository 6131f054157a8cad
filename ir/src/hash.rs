//! A stable content hash of a kernel: the IR part of every cache key.
//!
//! The hash is BLAKE3 over a domain-separation prefix ([`DOMAIN`]) followed by the
//! kernel's compact JSON serialization. Every IR type serializes as structs, enums and
//! sequences only (no maps), in declaration order, so the bytes are a pure function of
//! the kernel: the same kernel hashes the same in every process, on every machine, and
//! any change to it (a literal's bits, an operator, a length, the workgroup size, a
//! name) changes the hash.
//!
//! Changing [`DOMAIN`] or the serialization of any IR type changes every hash, and so
//! every on-disk cache key; do that only for a semantic change of the IR (bump the
//! version in [`DOMAIN`] then).

use crate::kernel::Kernel;
use std::fmt;

/// Prefix hashed before the serialized kernel.
pub const DOMAIN: &[u8] = b"kernelc-ir kernel v1\0";

/// A 256-bit BLAKE3 content hash of a kernel.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelHash(pub [u8; 32]);

impl KernelHash {
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(DIGITS[(b >> 4) as usize] as char);
            s.push(DIGITS[(b & 0xf) as usize] as char);
        }
        s
    }

    /// Parses 64 hex digits (either case); `None` otherwise.
    pub fn from_hex(text: &str) -> Option<KernelHash> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
        }
        Some(KernelHash(out))
    }
}

impl fmt::Display for KernelHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for KernelHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelHash({})", self.to_hex())
    }
}

/// The stable content hash of `kernel` (valid or not).
pub fn stable_hash(kernel: &Kernel) -> KernelHash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(DOMAIN);
    // Writes the same bytes as `serde_json::to_vec(kernel)`, without the buffer.
    crate::json::write_canonical(&mut hasher, kernel);
    KernelHash(*hasher.finalize().as_bytes())
}
