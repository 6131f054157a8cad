//! Index tensors in IR: resolving a loaded index (u32, i32, i64, or f32 holding an
//! integer) against a length, the way the references do, without any out-of-bounds
//! address.

use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// Resolves index value `v` (loaded from an index buffer of `dtype`: u32, i32, i64, or
/// f32 holding an integer) against `0..len`, as the reference does: truncated toward zero,
/// negative values counted from the end when `from_end`, NaN and out-of-range invalid.
/// Returns `(valid, r)` where `r` is a u32 in `0..len` (0 when invalid), so an address
/// built from it is always in bounds. Branch-free; no arithmetic can overflow.
pub(crate) fn resolve_index(
    f: &mut Body,
    v: E,
    dtype: ScalarType,
    len: usize,
    from_end: bool,
) -> (E, E) {
    let n = len as u32;
    if dtype == ScalarType::U32 {
        let v = crate::lower::math::bind(f, "idx", v);
        let valid = f.let_("valid", v.clone().lt(n));
        let r = f.let_("r", valid.clone().select(v, 0u32));
        return (valid, r);
    }
    if dtype == ScalarType::I64 {
        // Compared in i64 (every i64 value, far past `len`, is told apart); adding `len`
        // only to a negative index stays within i64.
        let v = crate::lower::math::bind(f, "idx", v);
        let n64 = len as i64;
        let i = if from_end {
            f.let_(
                "idx_wrapped",
                v.clone() + v.clone().lt(0i64).select(n64, 0i64),
            )
        } else {
            v
        };
        let valid = f.let_("valid", i.clone().ge(0i64) & i.clone().lt(n64));
        let r = f.let_("r", valid.clone().select(i, 0i64).cast(ScalarType::U32));
        return (valid, r);
    }
    // f32: the saturating cast truncates toward zero and sends ±∞ past every bound;
    // NaN (which casts to 0) is rejected separately.
    let (i, not_nan) = if dtype == ScalarType::F32 {
        let v = crate::lower::math::bind(f, "idx_f", v);
        let not_nan = v.clone().eq(v.clone());
        (f.let_("idx", v.cast(ScalarType::I32)), Some(not_nan))
    } else {
        (crate::lower::math::bind(f, "idx", v), None)
    };
    // Adds len only to a negative index: the sum stays within i32.
    let i = if from_end {
        f.let_(
            "idx_wrapped",
            i.clone() + i.clone().lt(0i32).select(n as i32, 0i32),
        )
    } else {
        i
    };
    let mut valid = i.clone().ge(0i32) & i.clone().lt(n as i32);
    if let Some(ok) = not_nan {
        valid = ok & valid;
    }
    let valid = f.let_("valid", valid);
    let r = f.let_("r", valid.clone().select(i, 0i32).cast(ScalarType::U32));
    (valid, r)
}
