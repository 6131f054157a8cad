//! Views: the slices of a row-major tensor a reduction folds, by index arithmetic.

use crate::lower::LowerError;
use kernelc_ir::builder::*;

/// Slices of a row-major tensor: `(extent, stride)` of the kept and of the reduced
/// axes, outermost first; axes of extent 1 dropped, neighbours merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub(super) kept: Vec<(u32, u32)>,
    pub(super) reduced: Vec<(u32, u32)>,
    /// Whether a group may take adjacent slices as the lanes of its values.
    pub(super) across: bool,
}

pub(super) fn too_large(what: &str, value: u64) -> LowerError {
    LowerError::TooLarge {
        what: what.into(),
        value,
        limit: u32::MAX as u64,
    }
}

/// Appends an axis, merging it into the previous one when they are contiguous.
fn push_axis(dims: &mut Vec<(u32, u32)>, extent: u32, stride: u32) {
    if extent == 1 {
        return;
    }
    if let Some(last) = dims.last_mut() {
        if last.1 as u64 == stride as u64 * extent as u64 {
            last.0 *= extent;
            last.1 = stride;
            return;
        }
    }
    dims.push((extent, stride));
}

impl View {
    /// The view of a row-major `shape` reducing the axes for which `reduced(axis)`.
    pub fn of_shape(shape: &[usize], reduced: impl Fn(usize) -> bool) -> Result<View, LowerError> {
        let numel = crate::shape::numel(shape) as u64;
        if numel > u32::MAX as u64 {
            return Err(too_large("element count", numel));
        }
        let mut view = View {
            kept: Vec::new(),
            reduced: Vec::new(),
            across: true,
        };
        let mut stride = 1u32;
        let mut axes: Vec<(usize, u32, u32)> = Vec::new();
        for (axis, &extent) in shape.iter().enumerate().rev() {
            axes.push((axis, extent as u32, stride));
            stride = stride.saturating_mul(extent as u32);
        }
        for (axis, extent, stride) in axes.into_iter().rev() {
            let dims = if reduced(axis) {
                &mut view.reduced
            } else {
                &mut view.kept
            };
            push_axis(dims, extent, stride);
        }
        Ok(view)
    }

    /// A view from explicit `(extent, stride)` lists (outermost first).
    pub fn strided(kept: &[(u32, u32)], reduced: &[(u32, u32)]) -> View {
        let mut view = View {
            kept: Vec::new(),
            reduced: Vec::new(),
            across: true,
        };
        for &(e, s) in kept {
            push_axis(&mut view.kept, e, s);
        }
        for &(e, s) in reduced {
            push_axis(&mut view.reduced, e, s);
        }
        view
    }

    /// The same view, with every group on one slice: per-slice values stay scalars
    /// (ops that index per-slice data, such as saved statistics or targets).
    pub fn whole_slices(mut self) -> View {
        self.across = false;
        self
    }

    /// Number of slices (output positions).
    pub fn slices(&self) -> u32 {
        self.kept.iter().map(|d| d.0).product()
    }

    /// Elements per slice.
    pub fn len(&self) -> u32 {
        self.reduced.iter().map(|d| d.0).product()
    }

    /// Whether consecutive elements of a slice are consecutive in memory.
    pub fn contiguous(&self) -> bool {
        self.reduced.last().is_some_and(|d| d.1 == 1)
    }

    /// Offset of slice `q`'s first element.
    pub fn base(&self, q: &E) -> E {
        offset_of(&self.kept, q)
    }

    /// Offset of element `j` from its slice's base.
    pub fn offset(&self, j: &E) -> E {
        offset_of(&self.reduced, j)
    }
}

/// `Σ coord_d · stride_d` of the row-major `index` over `dims`.
fn offset_of(dims: &[(u32, u32)], index: &E) -> E {
    let mut inner = 1u32;
    let mut terms: Vec<E> = Vec::new();
    for (d, &(extent, stride)) in dims.iter().enumerate().rev() {
        let mut coord = index.clone();
        if inner != 1 {
            coord = coord / inner;
        }
        if d != 0 {
            coord = coord % extent;
        }
        terms.push(if stride == 1 { coord } else { coord * stride });
        inner = inner.saturating_mul(extent);
    }
    terms
        .into_iter()
        .rev()
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| E::from(0u32))
}
