//! Race and initialisation tracking: the access history of one memory element.

use super::error::RaceKind;

/// No invocation (a local index no workgroup reaches).
const NONE: u32 = u32::MAX;

/// Marks an access by a warp (a fragment load or store). Such an identity differs
/// from every single invocation's local index (below 2^16, the interpreter's
/// workgroup limit), so a warp's access conflicts with any single invocation's.
pub(super) const WARP_ACCESS: u32 = 1 << 31;
/// With [`WARP_ACCESS`]: an accumulator element, bits 11 to 26 naming the element
/// `(r, c)` and bits 27 to 29 the multiply shape. On every target one invocation
/// holds the element `(r, c)` of every accumulator of a shape, so a warp's loads and
/// stores of it at those coordinates are that invocation's and never race with each
/// other (a warp may update C in place); any other fragment access is the whole
/// warp's. (A warpgroup's accesses are named by its first warp.)
const ACCUMULATOR: u32 = 1 << 30;

/// The identity of `warp`'s access to an element of an `A` or `B` fragment.
pub(super) fn warp_access(warp: u32) -> u32 {
    WARP_ACCESS | (warp & 0x7FF)
}

/// The identity of `warp`'s access to element `element` (`r·n + c`, below 2^16) of
/// an accumulator of the multiply shape numbered `shape` (below 8).
pub(super) fn accumulator_access(warp: u32, shape: u32, element: u32) -> u32 {
    WARP_ACCESS | ACCUMULATOR | ((shape & 7) << 27) | ((element & 0xFFFF) << 11) | (warp & 0x7FF)
}

/// The invocation an access-history identity names (a warp's first invocation).
pub(super) fn invocation_of(who: u32) -> u32 {
    if who & WARP_ACCESS != 0 {
        (who & 0x7FF) * crate::fragment::WARP
    } else {
        who
    }
}

/// Access history of one element. Epochs are numbered across the whole dispatch (each
/// workgroup starts a new one, and so does each barrier), so an epoch identifies its
/// workgroup too, and "earlier workgroup" is `epoch < current workgroup's first epoch`.
/// Epoch 0 means "never".
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Track {
    /// Last write: epoch and local index of the writer.
    pub(super) write_epoch: u64,
    writer: u32,
    /// First read in the dispatch (only used for buffers).
    first_read_epoch: u64,
    first_reader: u32,
    /// Readers in the last epoch in which the element was read: the first one and
    /// another, different one (or `NONE`).
    read_epoch: u64,
    reader: u32,
    other_reader: u32,
}

/// A conflict found by the tracker: kind, and epoch + local index of the earlier access.
pub(super) type Conflict = (RaceKind, u64, u32);

impl Track {
    pub(super) fn new() -> Track {
        Track {
            writer: NONE,
            first_reader: NONE,
            reader: NONE,
            other_reader: NONE,
            ..Track::default()
        }
    }

    /// Records a read; `Some(conflict)` if it races with an earlier write.
    #[inline]
    fn read(&mut self, local: u32, epoch: u64, conflicts_with_write: bool) -> Option<Conflict> {
        if conflicts_with_write {
            return Some((RaceKind::ReadWrite, self.write_epoch, self.writer));
        }
        if self.first_read_epoch == 0 {
            self.first_read_epoch = epoch;
            self.first_reader = local;
        }
        if self.read_epoch != epoch {
            self.read_epoch = epoch;
            self.reader = local;
            self.other_reader = NONE;
        } else if self.reader != local && self.other_reader == NONE {
            self.other_reader = local;
        }
        None
    }

    /// A different reader than `local` in this epoch, if any.
    #[inline]
    fn other_reader_in(&self, local: u32, epoch: u64) -> Option<u32> {
        if self.read_epoch != epoch {
            None
        } else if self.reader != local {
            Some(self.reader)
        } else if self.other_reader != NONE {
            Some(self.other_reader)
        } else {
            None
        }
    }

    /// Buffer read by `local` in `epoch` of the workgroup starting at `wg_start`.
    #[inline]
    pub(super) fn buffer_read(
        &mut self,
        local: u32,
        epoch: u64,
        wg_start: u64,
    ) -> Option<Conflict> {
        let conflict = self.write_epoch != 0
            && (self.write_epoch < wg_start || (self.write_epoch == epoch && self.writer != local));
        self.read(local, epoch, conflict)
    }

    /// Buffer write: races with any write or read from an earlier workgroup, and with a
    /// write or read by another invocation of this epoch.
    #[inline]
    pub(super) fn buffer_write(
        &mut self,
        local: u32,
        epoch: u64,
        wg_start: u64,
    ) -> Option<Conflict> {
        if self.write_epoch != 0
            && (self.write_epoch < wg_start || (self.write_epoch == epoch && self.writer != local))
        {
            return Some((RaceKind::WriteWrite, self.write_epoch, self.writer));
        }
        if self.first_read_epoch != 0 && self.first_read_epoch < wg_start {
            return Some((
                RaceKind::ReadWrite,
                self.first_read_epoch,
                self.first_reader,
            ));
        }
        if let Some(r) = self.other_reader_in(local, epoch) {
            return Some((RaceKind::ReadWrite, epoch, r));
        }
        self.write_epoch = epoch;
        self.writer = local;
        None
    }

    /// Shared read (initialisation is checked by the caller).
    #[inline]
    pub(super) fn shared_read(&mut self, local: u32, epoch: u64) -> Option<Conflict> {
        let conflict = self.write_epoch == epoch && self.writer != local;
        self.read(local, epoch, conflict)
    }

    /// Shared write: races with a write or read by another invocation of this epoch.
    #[inline]
    pub(super) fn shared_write(&mut self, local: u32, epoch: u64) -> Option<Conflict> {
        if self.write_epoch == epoch && self.writer != local {
            return Some((RaceKind::WriteWrite, epoch, self.writer));
        }
        if let Some(r) = self.other_reader_in(local, epoch) {
            return Some((RaceKind::ReadWrite, epoch, r));
        }
        self.write_epoch = epoch;
        self.writer = local;
        None
    }
}
