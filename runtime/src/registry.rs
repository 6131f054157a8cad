//! The pointer registry: `u64` addresses for APIs that speak in device pointers
//! (oxicuda-backend, ferrum's memory manager). Each registered [`Buffer`] gets a
//! range of addresses; any address inside it resolves to (buffer, byte offset).
//!
//! Invariants:
//! - On CUDA an address is the allocation's real device pointer (so kernels and
//!   libraries outside kernelc may use it); on cpu and wgpu it is a registry address,
//!   unique for the runtime's life (never reused), 256-byte aligned and never 0.
//! - An access resolves only when all of its bytes lie inside one live allocation;
//!   unknown, freed, interior-freed and out-of-range addresses are typed errors
//!   ([`RuntimeError::BadAddress`], [`RuntimeError::OutOfRange`]).
//! - The registry holds its buffers alive until [`Runtime::free`].

use crate::error::{Result, RuntimeError};
use crate::memory::{Buffer, View};
use crate::runtime::Runtime;
use kernelc_ir::ScalarType;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Where registry addresses start (far from 0, so a null or small integer is never
/// a valid address).
const FIRST_ADDRESS: u64 = 0x1000_0000_0000;
/// Registry addresses of successive allocations are this far apart at least.
const ADDRESS_ALIGNMENT: u64 = 256;

/// The live allocations by start address, and the ranges freed (for the error).
#[derive(Default)]
pub(crate) struct Registry {
    live: BTreeMap<u64, Buffer>,
    /// The address of each live allocation, by its storage's identity.
    addresses: HashMap<usize, u64>,
    freed: BTreeMap<u64, u64>,
    next: u64,
}

impl Registry {
    /// Registers `buffer` at `address` (its device pointer), or at the next registry
    /// address.
    fn insert(&mut self, buffer: Buffer, device_address: Option<u64>) -> u64 {
        let address = device_address.unwrap_or_else(|| {
            let start = self.next.max(FIRST_ADDRESS);
            let span = (buffer.len() as u64 + 1).next_multiple_of(ADDRESS_ALIGNMENT);
            self.next = start.saturating_add(span);
            start
        });
        // A device pointer reused by the driver after a free is live again.
        self.freed.remove(&address);
        self.addresses.insert(identity(&buffer), address);
        self.live.insert(address, buffer);
        address
    }

    /// The live allocation holding `address`, with its start.
    fn containing(&self, address: u64) -> Option<(u64, &Buffer)> {
        let (&start, buffer) = self.live.range(..=address).next_back()?;
        let inside = address - start < (buffer.len() as u64).max(1);
        inside.then_some((start, buffer))
    }

    /// Why `address` resolves to no live allocation.
    fn unknown(&self, address: u64) -> RuntimeError {
        let freed = self
            .freed
            .range(..=address)
            .next_back()
            .is_some_and(|(&start, &len)| address - start < len.max(1));
        RuntimeError::BadAddress {
            address,
            problem: if freed {
                "lies in an allocation that was freed".into()
            } else {
                "is not inside any allocation of this runtime".into()
            },
        }
    }
}

/// A buffer's identity: the address of its shared storage.
fn identity(buffer: &Buffer) -> usize {
    Arc::as_ptr(&buffer.storage) as usize
}

impl Runtime {
    /// Allocates a zeroed buffer of `bytes` bytes and returns its address (on CUDA
    /// the device pointer). The registry keeps it alive until [`Runtime::free`].
    pub fn malloc(&self, bytes: usize) -> Result<u64> {
        let buffer = self.alloc_buffer(bytes)?;
        Ok(self.register(&buffer))
    }

    /// The address of `buffer`, registering it (and holding it alive until
    /// [`Runtime::free`]) if it is not registered yet.
    pub fn register(&self, buffer: &Buffer) -> u64 {
        let mut registry = self.lock_registry();
        if let Some(&address) = registry.addresses.get(&identity(buffer)) {
            return address;
        }
        registry.insert(buffer.clone(), buffer.storage.device_address())
    }

    /// Releases the allocation that starts at `address`; the memory is freed once no
    /// other [`Buffer`] or [`View`] holds it. An interior, unknown or already freed
    /// address is a [`RuntimeError::BadAddress`] and frees nothing.
    pub fn free(&self, address: u64) -> Result<()> {
        let mut registry = self.lock_registry();
        match registry.containing(address) {
            Some((start, _)) if start != address => Err(RuntimeError::BadAddress {
                address,
                problem: format!(
                    "is {} bytes inside an allocation, not its start",
                    address - start
                ),
            }),
            Some(_) => {
                if let Some(buffer) = registry.live.remove(&address) {
                    registry.addresses.remove(&identity(&buffer));
                    registry.freed.insert(address, buffer.len() as u64);
                }
                Ok(())
            }
            None => Err(registry.unknown(address)),
        }
    }

    /// The buffer holding `address` and the byte offset of `address` in it, if all
    /// `bytes` bytes from there lie inside that one allocation.
    pub fn resolve(&self, address: u64, bytes: usize) -> Result<(Buffer, usize)> {
        let registry = self.lock_registry();
        let Some((start, buffer)) = registry.containing(address) else {
            return Err(registry.unknown(address));
        };
        let offset = (address - start) as usize;
        buffer.check_range(&format!("an access at {address:#x}"), offset, bytes)?;
        Ok((buffer.clone(), offset))
    }

    /// A view of `shape` elements of `dtype` at `address` (see [`View::new`], which
    /// checks that they fit the allocation).
    pub fn view_at(&self, address: u64, dtype: ScalarType, shape: &[usize]) -> Result<View> {
        let (buffer, offset) = self.resolve(address, 0)?;
        View::new(&buffer, offset, dtype, shape)
    }

    /// How many allocations the registry holds alive.
    pub fn registered(&self) -> usize {
        self.lock_registry().live.len()
    }
}
