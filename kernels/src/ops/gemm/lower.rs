//! Lowering of GEMM onto the tiled matrix-multiply engine of [`crate::lower::tile`].

use crate::lower::schedule::fill_launch;
use crate::lower::tile::{
    emit_gemm, to_u32, BiasAxis, Gather, GemmBias, GemmCore, GemmOperand, GemmOutput, Prior,
};
use crate::lower::{Binding, LowerError, Plan, PlanBuilder, TargetCaps, Uniforms};
use crate::spec::{GemmSpec, Layout, MatrixPlacement, OpSpec};
use kernelc_ir::Scalar;

// ---------------------------------------------------------------------------------------
// The gemm op
// ---------------------------------------------------------------------------------------

/// `(row stride, column stride)` of a stored matrix.
fn strides_of(p: &MatrixPlacement) -> (usize, usize) {
    match p.layout {
        Layout::RowMajor => (p.ld, 1),
        Layout::ColMajor => (1, p.ld),
    }
}

fn u32s(what: &str, v: &[usize]) -> Result<Vec<u32>, LowerError> {
    v.iter().map(|&x| to_u32(what, x)).collect()
}

pub(super) fn gemm(spec: &GemmSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let core = gemm_core(spec)?;
    let mut plan = PlanBuilder::default();
    emit_gemm(&core, caps, &mut plan)?;
    Ok(plan.finish())
}

/// [`gemm`] writing only C's matrix elements: a block of a larger C, whose window's
/// gaps are other blocks' elements (`large.rs` fills the whole C's gaps first).
pub(super) fn gemm_leaving_gaps(spec: &GemmSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let core = GemmCore {
        fill_gaps: false,
        ..gemm_core(spec)?
    };
    let mut plan = PlanBuilder::default();
    emit_gemm(&core, caps, &mut plan)?;
    Ok(plan.finish())
}

/// A GEMM with `k = 0` (and a non-empty C): its epilogue alone, `α·0 + β·C + bias`
/// with C's gaps kept or zeroed as always. The engine runs the same problem with
/// `k = 1` over zeroed one-column temporaries in place of A and B (shared by every
/// batch entry: batch stride 0), so the epilogue, the layouts and the gaps are the
/// engine's own.
pub(super) fn gemm_without_k(spec: &GemmSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let zeros = |b: &[usize]| (!b.is_empty()).then(|| vec![0; b.len()]);
    let one = GemmSpec {
        k: 1,
        lda: None,
        ldb: None,
        stride_a: zeros(&spec.batch),
        stride_b: zeros(&spec.batch),
        input_rounding: None,
        ..spec.clone()
    };
    let mut core = gemm_core(&one)?;
    let mut plan = PlanBuilder::default();
    for operand in [&mut core.a, &mut core.b] {
        let temp = plan.temp(operand.dtype, operand.len);
        plan.launches.push(fill_launch(
            &format!("{}_zero_{}", core.name, operand.name),
            caps,
            temp.clone(),
            operand.dtype,
            operand.len,
            Scalar::zero(operand.dtype),
        )?);
        operand.binding = temp;
    }
    emit_gemm(&core, caps, &mut plan)?;
    Ok(plan.finish())
}

/// The engine's problem for a GEMM spec.
fn gemm_core(spec: &GemmSpec) -> Result<GemmCore, LowerError> {
    let op = OpSpec::Gemm(spec.clone());
    let inputs = op.inputs();
    let outputs = op.outputs();
    let spec_uniforms = op.uniforms();
    let uniforms = Uniforms::new(&spec_uniforms);
    let (pa, pb, pc) = (spec.a(), spec.b(), spec.c());
    let len = |i: usize| inputs.get(i).map_or(0, |s| s.numel() as u64);
    // op(A)(i, p) and op(B)(p, j) as (outer, reduction) strides.
    let (ar, ac) = strides_of(&pa);
    let (a_i, a_p) = if spec.trans_a { (ac, ar) } else { (ar, ac) };
    let (br, bc) = strides_of(&pb);
    let (b_j, b_p) = if spec.trans_b { (br, bc) } else { (bc, br) };
    let operand = |name: &str,
                   index: usize,
                   outer: usize,
                   reduction: usize,
                   p: &MatrixPlacement|
     -> Result<GemmOperand, LowerError> {
        Ok(GemmOperand {
            name: name.to_string(),
            binding: Binding::Input(index),
            dtype: spec.dtype,
            len: len(index),
            base: 0,
            batch_strides: u32s("batch stride", &p.batch_strides)?,
            gather: Gather::Strided {
                outer: to_u32("leading dimension", outer)?,
                reduction: to_u32("leading dimension", reduction)?,
            },
        })
    };
    let a = operand("a", 0, a_i, a_p, &pa)?;
    let b = operand("b", 1, b_j, b_p, &pb)?;
    let c_len = outputs.first().map_or(0, |s| s.numel() as u64);
    let c = GemmOutput {
        name: "c".into(),
        binding: Binding::Output(0),
        dtype: spec.dtype,
        len: c_len,
        base: 0,
        ld: to_u32("ldc", pc.ld)?,
        batch_strides: u32s("stride_c", &pc.batch_strides)?,
    };
    let bias_index = 2;
    let c_in_index = if spec.bias { 3 } else { 2 };
    // Column-major C is the row-major problem Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands
    // (and the bias axis), so that C always has unit column stride.
    let col_major = spec.layout == Layout::ColMajor;
    let (m, n, first, second) = if col_major {
        (spec.n, spec.m, b, a)
    } else {
        (spec.m, spec.n, a, b)
    };
    let core = GemmCore {
        name: op.name(),
        m: to_u32("m", m)?,
        n: to_u32("n", n)?,
        k: to_u32("k", spec.k)?,
        batch: u32s("batch", &spec.batch)?,
        a: first,
        b: second,
        c,
        alpha: uniforms.param("alpha")?.binding,
        prior: match (spec.beta != 0.0, uniforms.param("beta")) {
            (true, Ok(beta)) => Some(Prior {
                c_in: Binding::Input(c_in_index),
                beta: beta.binding,
            }),
            (true, Err(e)) => return Err(e),
            (false, _) => None,
        },
        bias: spec.bias.then_some(GemmBias {
            binding: Binding::Input(bias_index),
            dtype: spec.dtype,
            along: if col_major {
                BiasAxis::Rows
            } else {
                BiasAxis::Cols
            },
        }),
        input_rounding: spec.input_rounding,
        tf32_operands: false,
        packed_from: None,
        fill_gaps: true,
        activation: spec.activation,
    };
    Ok(core)
}

#[cfg(test)]
mod tests {
    //! The tile configurations the conformance table's small shapes never select:
    //! 128 × 128 tiles with 8 × 8 micro-tiles, and several invocations each looping
    //! over several micro-tiles (accumulators in shared memory), run on every GEMM
    //! case against the reference.

    use super::*;
    use crate::conformance::{cases, check, Executor};
    use crate::lower::tile::{emit_gemm_with, vector_lanes, Tile};

    use crate::spec::OpKind;
    use kernelc_ir::interp::HostBuffer;

    struct Forced {
        caps: TargetCaps,
        /// `(ty, tx, tm, tn, bk)`
        shape: (u32, u32, u32, u32, u32),
    }

    impl Executor for Forced {
        fn name(&self) -> String {
            format!("forced tile {:?}", self.shape)
        }
        fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
            let OpSpec::Gemm(g) = spec else {
                return Err("not a gemm".into());
            };
            let core = gemm_core(g).map_err(|e| e.to_string())?;
            let lanes = vector_lanes(core.compute(), &self.caps);
            let (ty, tx, _, _, bk) = self.shape;
            // 256 invocations take one micro-tile each; fewer take 2 × 2, unrolled by half.
            let tile = if ty * tx == 256 {
                Tile::forced(self.shape, 1, lanes)
            } else {
                Tile {
                    unroll: bk / 2,
                    ..Tile::forced(self.shape, 2, lanes)
                }
            };
            let mut plan = PlanBuilder::default();
            emit_gemm_with(&core, &self.caps, tile, &mut plan).map_err(|e| e.to_string())?;
            let plan = plan.finish();
            crate::conformance::interpret(&plan, spec, inputs)
        }
    }

    fn run_all(exec: &Forced) {
        // The engine proper: zero-sized cases lower to no engine problem.
        let failures: Vec<String> = cases::for_kind(OpKind::Gemm)
            .iter()
            .filter(|spec| spec.inputs().iter().all(|s| s.numel() > 0))
            .filter_map(|spec| {
                check(exec, spec, 11)
                    .err()
                    .map(|f| format!("{spec:?}: {f}"))
            })
            .collect();
        assert!(
            failures.is_empty(),
            "{}: {}",
            exec.name(),
            failures.join("\n")
        );
    }

    #[test]
    fn large_tiles_are_correct() {
        run_all(&Forced {
            caps: TargetCaps::cuda_sm90(),
            shape: (16, 16, 8, 8, 8),
        });
    }

    #[test]
    fn several_micro_tiles_per_invocation_are_correct() {
        // 4 × 4 invocations, each owning 2 × 2 micro-tiles of 4 × 4, reduction
        // steps in a loop of two unrolled steps.
        run_all(&Forced {
            caps: TargetCaps::cuda_sm90(),
            shape: (4, 4, 4, 4, 4),
        });
    }

    #[test]
    fn flat_tiles_are_correct() {
        // The skinny-problem tiles: 16 × 256 and 256 × 16.
        for shape in [(4, 64, 4, 4, 16), (64, 4, 4, 4, 16)] {
            run_all(&Forced {
                caps: TargetCaps::cuda_sm90(),
                shape,
            });
        }
    }
}
