//! What the shader emitters (WGSL, SPIR-V) decide alike about a kernel before either
//! builds code: the walk over its expressions, and which memory holds which element
//! type.

use kernelc_ir::{Expr, Kernel, Param, ScalarType, Stmt};

/// Calls `f` on every expression of `block`, nested blocks and sub-expressions
/// included, in pre-order (statements in order, an expression before its operands).
pub(crate) fn for_each_expr(block: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
        f(e);
        for c in e.children() {
            walk(c, f);
        }
    }
    for s in block {
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => walk(value, f),
            Stmt::Store { index, value, .. } => {
                walk(index, f);
                walk(value, f);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                walk(cond, f);
                for_each_expr(then_body, f);
                for_each_expr(else_body, f);
            }
            Stmt::For {
                start, end, body, ..
            } => {
                walk(start, f);
                walk(end, f);
                for_each_expr(body, f);
            }
            Stmt::Fragment(op) => op.exprs().into_iter().for_each(|(_, e)| walk(e, f)),
            Stmt::AsyncCopy(op) => op.exprs().into_iter().for_each(|(_, e)| walk(e, f)),
            Stmt::Return | Stmt::Barrier => {}
        }
    }
}

/// The first memory (buffer parameters, then shared arrays) whose elements are of
/// type `elem`, named as an error names it (``parameter `x` `` or
/// ``shared array `s` ``); `None` if the kernel has no such memory. Shader targets
/// store f16 and bf16 differently from how they compute with them, so the element
/// types of memory, not of values, decide what a module needs or cannot have.
pub(crate) fn first_memory_of(kernel: &Kernel, elem: ScalarType) -> Option<String> {
    let buffer = kernel.params.iter().find_map(|p| match p {
        Param::Buffer { name, elem: e, .. } if *e == elem => Some(format!("parameter `{name}`")),
        _ => None,
    });
    buffer.or_else(|| {
        kernel
            .shared
            .iter()
            .find(|s| s.elem == elem)
            .map(|s| format!("shared array `{}`", s.name))
    })
}

/// How a buffer of sub-word elements lives in a shader's `u32` words: WGSL has no
/// storage type narrower than 32 bits, and SPIR-V has one only with optional
/// capabilities, so bool (1 byte) and the narrow integers (1 and 2 bytes) are packed,
/// little-endian, `32 / bits` to a word. Element `i` is bits `shift(i) .. +bits` of word
/// `i / per_word`.
///
/// A buffer the kernel writes is declared atomic: a store of fewer than 32 bits is an
/// atomic AND that clears the element's bits and an atomic OR that sets them, so two
/// invocations writing neighbouring elements of one word never lose each other's
/// bytes; a vector store that covers whole words (4 × u8, 2 × u16 at an aligned index,
/// the only place vector accesses execute) is one atomic store per word. Its loads are
/// atomic loads (WGSL allows nothing else on an atomic). Bounds checks stay in
/// elements, so they are the checks of an unpacked buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packing {
    /// Bits per element: 8 or 16.
    pub bits: u32,
    /// What a load makes of the bits.
    pub kind: PackedKind,
}

/// What a load makes of a packed element's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PackedKind {
    /// `bits != 0` (bool; stored as 0 or 1).
    Bool,
    /// Zero-extended to `u32` (u8, u16).
    Unsigned,
    /// Sign-extended to `i32` (i8, i16).
    Signed,
}

impl Packing {
    /// The packing of a buffer of `elem`, or `None` for types stored as themselves.
    pub(crate) fn of(elem: ScalarType) -> Option<Packing> {
        let kind = match elem {
            ScalarType::Bool => PackedKind::Bool,
            ScalarType::U8 | ScalarType::U16 => PackedKind::Unsigned,
            ScalarType::I8 | ScalarType::I16 => PackedKind::Signed,
            ScalarType::I32
            | ScalarType::U32
            | ScalarType::I64
            | ScalarType::F16
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::F64 => return None,
        };
        Some(Packing {
            bits: elem.size_bytes() * 8,
            kind,
        })
    }

    /// Elements per word.
    pub(crate) fn per_word(self) -> u32 {
        32 / self.bits
    }

    /// `log2(per_word)`: element index to word index is a right shift by this.
    pub(crate) fn word_shift(self) -> u32 {
        self.per_word().trailing_zeros()
    }

    /// `log2(bits)`: an element's position in its word times this is its bit offset.
    pub(crate) fn bit_shift(self) -> u32 {
        self.bits.trailing_zeros()
    }

    /// The element's bits at offset 0.
    pub(crate) fn mask(self) -> u32 {
        if self.bits == 32 {
            u32::MAX
        } else {
            (1u32 << self.bits) - 1
        }
    }

    /// Words a `lanes`-element access at an aligned index covers whole, or `None`
    /// when it covers part of one word (and is done element by element).
    pub(crate) fn whole_words(self, lanes: u8) -> Option<u32> {
        let bits = lanes as u32 * self.bits;
        (bits % 32 == 0).then_some(bits / 32)
    }
}
