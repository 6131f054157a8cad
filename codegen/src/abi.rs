//! What every target agrees on about a compiled kernel's interface: the status bits a
//! kernel reports run-time errors with, the entry point's name, and how the shader
//! targets (WGSL, SPIR-V) bind parameters. The runtime binds arguments by these rules;
//! the emitters follow them.
//!
//! # Run-time errors
//!
//! Valid IR can still fail at run time (an index out of bounds, a division by zero,
//! see docs/semantics.md). No target may let that become undefined behaviour: each
//! emitted access is checked against the buffer's static length unless
//! [`kernelc_ir::analysis`] proves it in bounds, a failing access is skipped (a load
//! yields zero), and the kernel ORs the matching [`status`] bit into its status word
//! and carries on. The runtime turns a nonzero status into a typed error.
//!
//! # Shader binding layout (WGSL and SPIR-V, bind group 0)
//!
//! The bindings are dense, `0..n` without gaps: wgpu's Vulkan backend numbers the
//! descriptors of a bind group layout `0, 1, 2, ...` in the order of their wgpu binding
//! numbers and remaps only the shaders naga generates, so a SPIR-V module handed to
//! wgpu as passthrough must already use those dense numbers (gfx-rs/wgpu#9326). With a
//! gap, every later resource of a passthrough module reads another descriptor.
//!
//! * The `j`-th buffer parameter (counting buffers only, in declaration order) is
//!   binding `j`: a storage buffer of a runtime-sized array of its element type (bool
//!   elements as `u32` words, nonzero is true). Read-only when the parameter's access
//!   is `read`.
//! * Scalar parameters have no binding of their own. They are packed, in declaration
//!   order, into one read-only storage buffer of `u32` words at binding
//!   [`ShaderLayout::scalar_binding`] (the number of buffers), present only if the
//!   kernel has a scalar: 4-byte types and bool (0/1) take one word, f16/bf16 one word
//!   holding their 16 bits in the low half, 8-byte types two words (low word first) at
//!   an even word offset. [`ShaderLayout::encode_scalars`] builds the words.
//! * The status word is the last binding, [`ShaderLayout::status_binding`] (the number
//!   of buffers, plus one with a scalar block): a read-write storage buffer holding one
//!   `atomic<u32>`, which the kernel only `atomicOr`s into. The runtime zeroes it
//!   before a launch and reads it after.
//!
//! The PTX target takes the same information as kernel parameters (see its module).

use kernelc_ir::{Kernel, Param, Scalar, ScalarType};

/// The version of this ABI. Changing any rule here changes emitted artifacts, so it is
/// part of every kernel-cache key (version 2: dense shader bindings).
pub const ABI_VERSION: u32 = 2;

/// The name of the entry point (WGSL, SPIR-V) or kernel function (PTX) of every
/// emitted module.
pub const ENTRY_POINT: &str = "main";

/// The bits of a kernel's status word.
pub mod status {
    /// A load or store was out of bounds (it was skipped).
    pub const OUT_OF_BOUNDS: u32 = 1;
    /// A vector access at an index that is not a multiple of its lanes (skipped).
    pub const UNALIGNED: u32 = 2;
    /// Integer division or remainder by zero (the result was 0).
    pub const DIVISION_BY_ZERO: u32 = 4;
    /// A shift by the bit width or more.
    pub const SHIFT_OVERFLOW: u32 = 8;

    /// The errors named by `bits`, in words (for error messages).
    pub fn describe(bits: u32) -> String {
        let names = [
            (OUT_OF_BOUNDS, "an out-of-bounds access"),
            (UNALIGNED, "an unaligned vector access"),
            (DIVISION_BY_ZERO, "an integer division by zero"),
            (SHIFT_OVERFLOW, "a shift by the bit width or more"),
        ];
        let found: Vec<&str> = names
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        if found.is_empty() {
            format!("unknown status {bits:#x}")
        } else {
            found.join(", ")
        }
    }
}

/// Where each parameter of a kernel lives in a shader target's bind group 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShaderLayout {
    /// One slot per kernel parameter, in declaration order.
    pub params: Vec<ParamSlot>,
    /// Binding of the packed scalar words, if the kernel has a scalar parameter.
    pub scalar_binding: Option<u32>,
    /// Number of `u32` words of the scalar block (0 without scalars).
    pub scalar_words: u32,
    /// Binding of the status word.
    pub status_binding: u32,
}

/// Where one parameter lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamSlot {
    /// A storage buffer at this binding.
    Buffer { binding: u32 },
    /// A scalar at this word offset of the scalar block.
    Scalar { word: u32 },
}

impl ShaderLayout {
    /// The layout of `kernel`'s parameters.
    pub fn of(kernel: &Kernel) -> ShaderLayout {
        let mut words = 0u32;
        let mut buffers = 0u32;
        let params = kernel
            .params
            .iter()
            .map(|p| match p {
                Param::Buffer { .. } => {
                    let slot = ParamSlot::Buffer { binding: buffers };
                    buffers += 1;
                    slot
                }
                Param::Scalar { ty, .. } => {
                    let width = scalar_words(*ty);
                    words = words.next_multiple_of(width);
                    let slot = ParamSlot::Scalar { word: words };
                    words += width;
                    slot
                }
            })
            .collect();
        let scalar_binding = (words > 0).then_some(buffers);
        ShaderLayout {
            params,
            scalar_binding,
            scalar_words: words,
            status_binding: buffers + scalar_binding.is_some() as u32,
        }
    }

    /// Storage buffers the shader binds in all: buffers, scalar block, status word
    /// (the bindings are dense, so the status word's is the last).
    pub fn binding_count(&self) -> u32 {
        self.status_binding + 1
    }

    /// The scalar block for `values` (one per parameter; buffer slots are ignored and
    /// may hold anything). A value whose type differs from its parameter's is encoded
    /// by its own type: check arguments first (`kernelc_ir::args::check_args`).
    pub fn encode_scalars(&self, values: &[Option<Scalar>]) -> Vec<u32> {
        let mut out = vec![0u32; self.scalar_words as usize];
        for (slot, value) in self.params.iter().zip(values) {
            if let (ParamSlot::Scalar { word }, Some(v)) = (slot, value) {
                let bits = encode_scalar_bits(*v);
                let w = *word as usize;
                if let Some(lo) = out.get_mut(w) {
                    *lo = bits as u32;
                }
                if scalar_words(v.ty()) == 2 {
                    if let Some(hi) = out.get_mut(w + 1) {
                        *hi = (bits >> 32) as u32;
                    }
                }
            }
        }
        out
    }
}

/// Words a scalar of `ty` takes in the scalar block.
pub fn scalar_words(ty: ScalarType) -> u32 {
    if ty.size_bytes() == 8 {
        2
    } else {
        1
    }
}

/// A scalar's bits, zero-extended to 64: bool as 0/1, 16-bit floats as their 16 bits
/// ([`Scalar::to_bits`]).
pub fn encode_scalar_bits(s: Scalar) -> u64 {
    s.to_bits()
}

/// The CPU ABI's shared scratch (`crate::cpu`, both tiers): the byte offset of each
/// shared array, in declaration order, each at a multiple of 16 bytes (an array that
/// reuses another's bytes at that one's), and the scratch's size
/// ([`kernelc_ir::Kernel::shared_layout`]).
pub fn cpu_shared_layout(kernel: &kernelc_ir::Kernel) -> (Vec<u64>, u64) {
    kernel.shared_layout(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelc_ir::{Access, Kernel};

    fn kernel(params: Vec<Param>) -> Kernel {
        Kernel {
            name: "k".into(),
            workgroup_size: [1, 1, 1],
            params,
            shared: vec![],
            locals: vec![],
            fragments: vec![],
            body: vec![],
        }
    }

    fn scalar(name: &str, ty: ScalarType) -> Param {
        Param::Scalar {
            name: name.into(),
            ty,
        }
    }

    #[test]
    fn buffers_are_numbered_densely_and_scalars_pack_with_8_byte_alignment() {
        let k = kernel(vec![
            Param::Buffer {
                name: "x".into(),
                elem: ScalarType::F32,
                len: 4,
                access: Access::Read,
            },
            scalar("a", ScalarType::F32),
            scalar("b", ScalarType::F64),
            scalar("c", ScalarType::Bool),
        ]);
        let layout = ShaderLayout::of(&k);
        assert_eq!(
            layout.params,
            vec![
                ParamSlot::Buffer { binding: 0 },
                ParamSlot::Scalar { word: 0 },
                ParamSlot::Scalar { word: 2 },
                ParamSlot::Scalar { word: 4 },
            ]
        );
        assert_eq!(layout.scalar_binding, Some(1));
        assert_eq!(layout.status_binding, 2);
        assert_eq!(layout.binding_count(), 3);
        assert_eq!(layout.scalar_words, 5);
        let words = layout.encode_scalars(&[
            None,
            Some(Scalar::f32(1.5)),
            Some(Scalar::f64(-2.0)),
            Some(Scalar::Bool(true)),
        ]);
        let f64_bits = (-2.0f64).to_bits();
        assert_eq!(
            words,
            vec![
                1.5f32.to_bits(),
                0,
                f64_bits as u32,
                (f64_bits >> 32) as u32,
                1
            ]
        );
    }

    #[test]
    fn no_scalars_means_no_scalar_binding() {
        let layout = ShaderLayout::of(&kernel(vec![]));
        assert_eq!(layout.scalar_binding, None);
        assert_eq!(layout.status_binding, 0);
        assert_eq!(layout.binding_count(), 1);
    }

    #[test]
    fn status_bits_are_described() {
        assert_eq!(
            status::describe(status::OUT_OF_BOUNDS | status::DIVISION_BY_ZERO),
            "an out-of-bounds access, an integer division by zero"
        );
        assert_eq!(status::describe(64), "unknown status 0x40");
    }
}
