//! Where a generated kernel's memories are, and its arguments.

use super::{IN_LEN, PREFERENCE, SHARED_SLOTS, SLOTS};
use crate::interp::{Arg, HostBuffer};
use crate::kernel::*;
use crate::testing::values::value_from_words;
use crate::testing::GenConfig;
use crate::types::ScalarType;

/// Where a kernel's memories are, from a normalised config: for the `i`-th memory type
/// `T`, parameter `i` is the input buffer `in_T`, parameter `n + i` the scalar `p_T`,
/// parameter `2n + i` the output buffer `out_T`, and shared array `i` is `sh_T`. For
/// the `j`-th narrow storage type `N` (of `m`), parameter `3n + j` is the input
/// `in_N` and `3n + m + j` the output `out_N` (narrow types have no scalars or shared
/// arrays: only buffers hold them).
pub(in crate::testing) struct Layout {
    /// Value types, in preference order (always with u32, i32 and bool).
    pub(in crate::testing) types: Vec<ScalarType>,
    /// Memory types, in preference order (never empty).
    pub(in crate::testing) memory: Vec<ScalarType>,
    /// Narrow storage types (u8, i8, u16, i16) of the config.
    pub(in crate::testing) narrow: Vec<ScalarType>,
    pub(in crate::testing) workgroup: u32,
    pub(in crate::testing) grid: u32,
}

impl Layout {
    pub(in crate::testing) fn new(config: &GenConfig) -> Layout {
        let always = [ScalarType::U32, ScalarType::I32, ScalarType::Bool];
        let types: Vec<ScalarType> = PREFERENCE
            .into_iter()
            .filter(|t| config.types.contains(t) || always.contains(t))
            .collect();
        let mut memory: Vec<ScalarType> = PREFERENCE
            .into_iter()
            .filter(|t| config.memory_types.contains(t) && types.contains(t))
            .collect();
        if memory.is_empty() {
            memory.push(ScalarType::U32);
        }
        let narrow = ScalarType::NARROW
            .into_iter()
            .filter(|t| config.memory_types.contains(t))
            .collect();
        Layout {
            types,
            memory,
            narrow,
            workgroup: config.workgroup_size.clamp(1, 64).next_power_of_two(),
            grid: config.grid.clamp(1, 8),
        }
    }

    pub(in crate::testing) fn grid(&self) -> [u32; 3] {
        [self.grid, 1, 1]
    }

    pub(in crate::testing) fn invocations(&self) -> u32 {
        self.workgroup * self.grid
    }

    /// Output elements per invocation.
    pub(in crate::testing) fn stride(&self) -> u32 {
        SLOTS + (self.memory.len() as u32).next_multiple_of(4)
    }

    pub(in crate::testing) fn out_len(&self) -> u32 {
        self.invocations() * self.stride()
    }

    /// Elements of a narrow output: `SLOTS` per invocation interleaved (scalar slot
    /// `s` of invocation `g` at `s * invocations + g`, so that neighbouring
    /// invocations write neighbouring elements, which share a packed word on targets
    /// without byte stores), then `SLOTS` per invocation in a region of its own
    /// (2-lane accesses, at `SLOTS * invocations + g * SLOTS + slot`).
    pub(in crate::testing) fn narrow_out_len(&self) -> u32 {
        2 * SLOTS * self.invocations()
    }

    /// The narrow types whose loads yield values of `value`.
    pub(in crate::testing) fn narrow_of(&self, value: ScalarType) -> Vec<ScalarType> {
        self.narrow
            .iter()
            .copied()
            .filter(|n| n.value_type() == value)
            .collect()
    }

    fn narrow_index(&self, s: ScalarType) -> u32 {
        self.narrow.iter().position(|&t| t == s).unwrap_or(0) as u32
    }

    pub(in crate::testing) fn narrow_input(&self, s: ScalarType) -> Memory {
        Memory::Buffer(ParamId(3 * self.memory.len() as u32 + self.narrow_index(s)))
    }

    pub(in crate::testing) fn narrow_output(&self, s: ScalarType) -> Memory {
        let first = 3 * self.memory.len() + self.narrow.len();
        Memory::Buffer(ParamId(first as u32 + self.narrow_index(s)))
    }

    pub(in crate::testing) fn shared_len(&self) -> u32 {
        self.workgroup * SHARED_SLOTS
    }

    pub(in crate::testing) fn memory_index(&self, s: ScalarType) -> u32 {
        self.memory.iter().position(|&t| t == s).unwrap_or(0) as u32
    }

    pub(in crate::testing) fn input(&self, s: ScalarType) -> Memory {
        Memory::Buffer(ParamId(self.memory_index(s)))
    }

    pub(in crate::testing) fn param(&self, s: ScalarType) -> ParamId {
        ParamId(self.memory.len() as u32 + self.memory_index(s))
    }

    pub(in crate::testing) fn output(&self, s: ScalarType) -> Memory {
        Memory::Buffer(ParamId(2 * self.memory.len() as u32 + self.memory_index(s)))
    }

    pub(in crate::testing) fn shared(&self, s: ScalarType) -> Memory {
        Memory::Shared(SharedId(self.memory_index(s)))
    }

    pub(in crate::testing) fn params(&self) -> Vec<Param> {
        let mut params = Vec::new();
        for &s in &self.memory {
            params.push(Param::Buffer {
                name: format!("in_{s}"),
                elem: s,
                len: IN_LEN as u64,
                access: Access::Read,
            });
        }
        for &s in &self.memory {
            params.push(Param::Scalar {
                name: format!("p_{s}"),
                ty: s,
            });
        }
        for &s in &self.memory {
            params.push(Param::Buffer {
                name: format!("out_{s}"),
                elem: s,
                len: self.out_len() as u64,
                // Read back too: an invocation may load what it stored.
                access: Access::ReadWrite,
            });
        }
        for &s in &self.narrow {
            params.push(Param::Buffer {
                name: format!("in_{s}"),
                elem: s,
                len: IN_LEN as u64,
                access: Access::Read,
            });
        }
        for &s in &self.narrow {
            params.push(Param::Buffer {
                name: format!("out_{s}"),
                elem: s,
                len: self.narrow_out_len() as u64,
                access: Access::ReadWrite,
            });
        }
        params
    }

    /// Arguments for [`Self::params`]: inputs and scalars from `words` (cycled, then
    /// zeros), poisoned outputs.
    pub(in crate::testing) fn arguments(&self, words: &[u32]) -> Vec<Arg> {
        let mut words = words.iter().copied().cycle().chain(std::iter::repeat(0));
        let mut next = || words.next().unwrap_or(0);
        let mut args = Vec::new();
        for &s in &self.memory {
            let values = (0..IN_LEN)
                .map(|_| value_from_words(s, next(), next()))
                .collect();
            args.push(Arg::Buffer(HostBuffer::new(s, values)));
        }
        for &s in &self.memory {
            args.push(Arg::Scalar(value_from_words(s, next(), next())));
        }
        for &s in &self.memory {
            let len = self.out_len() as usize;
            args.push(Arg::Buffer(HostBuffer::filled(
                s,
                len,
                crate::testing::poison(s),
            )));
        }
        for &s in &self.narrow {
            let values = (0..IN_LEN)
                .map(|_| value_from_words(s, next(), next()))
                .collect();
            args.push(Arg::Buffer(HostBuffer::new(s, values)));
        }
        for &s in &self.narrow {
            let len = self.narrow_out_len() as usize;
            args.push(Arg::Buffer(HostBuffer::filled(
                s,
                len,
                crate::testing::poison(s),
            )));
        }
        args
    }
}
