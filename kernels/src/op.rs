//! [`Op`]: the one interface every op kind of the catalogue implements, and the
//! `catalogue!` macro that turns the list of kinds (`ops/mod.rs`) into [`OpSpec`],
//! [`OpKind`] and their dispatch.
//!
//! An op kind is a plain-data spec type (`GemmSpec`, `SoftmaxSpec`, ...) that knows
//! everything kernelc needs of it: what makes it valid, its buffers, the values a
//! caller changes from call to call, its f64 reference, its lowering, its tolerance and
//! its conformance cases. Everything else (the runtime, the conformance harness, the
//! CLI, the fuzzer) reaches ops only through this trait, so a new op is one spec type
//! and one catalogue line, and no list elsewhere can forget it.
//!
//! [`OpSpec`]: crate::OpSpec
//! [`OpKind`]: crate::OpKind

use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::spec::{Alias, TensorSig};
use crate::tolerance::Tolerance;

/// One op kind of the catalogue.
///
/// **Per-call values.** Attributes a caller changes from call to call in a real loop
/// (a learning rate, a step counter, a seed, a scalar operand, `eps`) reach kernels as
/// uniform parameters, never as literals: [`Op::uniforms`] lists their values, in the
/// order the lowering binds them to kernel parameters,
/// refer to, and [`Op::structural`] is the spec with each of them replaced by a
/// canonical value of the same *structural class*. Plans and kernels are cached by the
/// structural spec, so a training loop compiles once. Where a value changes the
/// kernel's structure (GEMM's `beta == 0` skips reading `C`, a blur radius sizes the
/// stencil), the class keeps that part of it: `beta` maps to 0 or 1.
///
/// The invariant the conformance tests check for every case: lowering `spec` and
/// lowering `spec.structural()` give the same plan, and both specs list uniforms of
/// the same types.
pub trait Op: Clone + std::fmt::Debug + PartialEq + Sized {
    /// Checks that the spec is possible: shapes agree, dtypes are supported, attributes
    /// are in range.
    fn validate(&self) -> Result<(), SpecError>;

    /// The input buffers, in order. Meaningful for a valid spec; never panics.
    fn inputs(&self) -> Vec<TensorSig>;

    /// The output buffers, in order. Meaningful for a valid spec; never panics.
    fn outputs(&self) -> Vec<TensorSig>;

    /// Outputs that update an input in place.
    fn aliases(&self) -> Vec<Alias> {
        Vec::new()
    }

    /// The kind plus the sub-function where there is one (`unary_gelu_erf`); `None`
    /// for the plain kind name. Only `[a-z0-9_]`.
    fn detail(&self) -> Option<String> {
        None
    }

    /// The per-call values, in the order the lowering binds them (see the trait doc).
    fn uniforms(&self) -> Vec<Uniform> {
        Vec::new()
    }

    /// This spec with every per-call value replaced by the canonical value of its
    /// structural class: the key plans and kernels are cached under.
    fn structural(&self) -> Self {
        self.clone()
    }

    /// The f64 reference, on inputs already checked against [`Op::inputs`] (count and
    /// lengths) by [`crate::reference()`]; outputs in [`Op::outputs`] order.
    fn reference(&self, inputs: &[&[f64]]) -> Vec<Vec<f64>>;

    /// The kernels and launches of this op for a target with `caps`. Called on a
    /// validated spec whose dtypes `caps` supports and none of whose tensors is empty
    /// (zero-sized tensors go to [`Op::lower_empty`]).
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError>;

    /// The plan of this op when an input has no elements but an output has some
    /// (NumPy/ONNX semantics: a sum over an empty axis is 0, a gather from an empty
    /// axis reads nothing, a GEMM with `k = 0` is its epilogue). Called on a validated
    /// spec; an op with no meaning there is refused by its `validate`, so the default
    /// is an internal error: an op whose inputs can be empty while an output is not
    /// must define this. When every output is empty, nothing is lowered at all.
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Err(LowerError::Internal(
            "an op with empty inputs and a non-empty output has no empty-input plan",
        ))
    }

    /// The plan of this op when a tensor has more elements than one kernel indexes
    /// ([`TargetCaps::max_kernel_elements`]): pieces that each fit, one plan each
    /// ([`crate::lower::split`]). `None`, the default, for an op that does not split;
    /// it is refused with [`LowerError::TooLarge`] naming the tensor.
    fn lower_large(&self, _caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        None
    }

    /// How far a target's float outputs may be from the reference (integer and bool
    /// outputs are always exact; see [`crate::tolerance`]).
    fn tolerance(&self) -> Tolerance;

    /// Per output element, the magnitude `Sᵢ` a [`Scale::Conditioned`] bound is
    /// proportional to (`k · u · Sᵢ`, see [`crate::tolerance`]), on inputs checked as
    /// for [`Op::reference`]; outputs in [`Op::outputs`] order. The default is the
    /// magnitude of the result (ULPs of the result, in units of `u`); shift-invariant
    /// and normalising ops give the magnitudes of their operands after the shift and
    /// the sums of magnitudes of their sums.
    ///
    /// [`Scale::Conditioned`]: crate::tolerance::Scale::Conditioned
    fn condition(&self, inputs: &[&[f64]]) -> Vec<Vec<f64>> {
        self.reference(inputs)
            .into_iter()
            .map(|o| o.into_iter().map(f64::abs).collect())
            .collect()
    }

    /// This spec with every attribute that scales terms replaced by its magnitude, for
    /// the sums of magnitudes of [`Scale::Accumulated`](crate::tolerance::Scale)
    /// bounds (GEMM's `alpha` and `beta`).
    fn absolute(&self) -> Self {
        self.clone()
    }

    /// Where conformance inputs for `input` are drawn from. Called for every input;
    /// the default is [`Domain::of_dtype`].
    fn domain(&self, input: &TensorSig) -> Domain {
        Domain::of_dtype(input.dtype)
    }

    /// Conformance inputs that no [`Domain`] describes (max-pool indices that must lie
    /// in their own window): the values of input `k` for `seed`, or `None` to draw
    /// them from [`Op::domain`].
    fn special_input(&self, _k: usize, _seed: u64) -> Option<Vec<f64>> {
        None
    }

    /// The conformance cases of this kind: at least three, at shapes that include 1,
    /// primes and sizes that are no multiple of any tile, over the dtypes it takes.
    fn cases() -> Vec<Self>;

    /// A small valid spec of this kind (for docs, tests and the CLI).
    fn example() -> Self;
}

/// Turns the list of op kinds into [`OpSpec`](crate::OpSpec) (serialised with the kind
/// under `"op"`), [`OpKind`](crate::OpKind) and their dispatch to [`Op`].
macro_rules! catalogue {
    ($( $(#[$doc:meta])* $variant:ident($spec:ty) => $name:literal ),* $(,)?) => {
        /// One op of the catalogue. Serialised with the kind under `"op"`:
        /// `{"op": "gemm", "dtype": "f32", "m": 2, ...}`.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        pub enum OpSpec {
            $( $(#[$doc])* $variant($spec), )*
        }

        /// The kind of an [`OpSpec`], without attributes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
                 serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum OpKind {
            $( $variant, )*
        }

        $(
            impl From<$spec> for OpSpec {
                fn from(spec: $spec) -> OpSpec {
                    OpSpec::$variant(spec)
                }
            }
        )*

        impl OpKind {
            /// Every kind, in catalogue order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$variant),*];
            /// Every kind's name (the `"op"` tag), in catalogue order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The kind's name, equal to its `"op"` tag in JSON.
            pub const fn name(self) -> &'static str {
                match self {
                    $( OpKind::$variant => $name, )*
                }
            }

            /// A small valid spec of this kind (for tests, docs and the CLI).
            pub fn example(self) -> OpSpec {
                match self {
                    $( OpKind::$variant => OpSpec::$variant(<$spec as $crate::op::Op>::example()), )*
                }
            }

            /// The conformance cases of this kind.
            pub fn cases(self) -> Vec<OpSpec> {
                match self {
                    $( OpKind::$variant => <$spec as $crate::op::Op>::cases()
                        .into_iter()
                        .map(OpSpec::$variant)
                        .collect(), )*
                }
            }
        }

        impl OpSpec {
            /// This spec's kind.
            pub fn kind(&self) -> OpKind {
                match self {
                    $( OpSpec::$variant(_) => OpKind::$variant, )*
                }
            }

            /// Checks that the spec is possible: shapes agree, dtypes are supported,
            /// attributes are in range.
            pub fn validate(&self) -> Result<(), $crate::SpecError> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::validate(s), )*
                }
            }

            /// The input buffers, in order. Meaningful for a valid spec; never panics.
            pub fn inputs(&self) -> Vec<$crate::spec::TensorSig> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::inputs(s), )*
                }
            }

            /// The output buffers, in order. Meaningful for a valid spec; never panics.
            pub fn outputs(&self) -> Vec<$crate::spec::TensorSig> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::outputs(s), )*
                }
            }

            /// Outputs that update an input in place.
            pub fn aliases(&self) -> Vec<$crate::spec::Alias> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::aliases(s), )*
                }
            }

            /// A short descriptive name for kernels and logs: the kind plus the
            /// sub-function where there is one (`"unary_gelu_erf"`, `"reduce_sum"`).
            /// Only `[a-z0-9_]`.
            pub fn name(&self) -> String {
                let detail = match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::detail(s), )*
                };
                detail.unwrap_or_else(|| self.kind_name().to_string())
            }

            /// The per-call values of this spec, in the order the plan's
            /// uniform bindings refer to.
            pub fn uniforms(&self) -> Vec<$crate::lower::Uniform> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::uniforms(s), )*
                }
            }

            /// This spec with its per-call values replaced by canonical ones: what
            /// plans and kernels are cached under (see [`Op`]($crate::op::Op)).
            pub fn structural(&self) -> OpSpec {
                match self {
                    $( OpSpec::$variant(s) => OpSpec::$variant($crate::op::Op::structural(s)), )*
                }
            }

            /// This spec with term-scaling attributes replaced by their magnitudes.
            pub fn absolute(&self) -> OpSpec {
                match self {
                    $( OpSpec::$variant(s) => OpSpec::$variant($crate::op::Op::absolute(s)), )*
                }
            }

            pub(crate) fn reference_unchecked(&self, inputs: &[&[f64]]) -> Vec<Vec<f64>> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::reference(s, inputs), )*
                }
            }

            pub(crate) fn lower_unchecked(
                &self,
                caps: &$crate::lower::TargetCaps,
            ) -> Result<$crate::lower::Plan, $crate::lower::LowerError> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::lower(s, caps), )*
                }
            }

            pub(crate) fn lower_large_unchecked(
                &self,
                caps: &$crate::lower::TargetCaps,
            ) -> Option<Result<$crate::lower::Plan, $crate::lower::LowerError>> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::lower_large(s, caps), )*
                }
            }

            pub(crate) fn lower_empty_unchecked(
                &self,
                caps: &$crate::lower::TargetCaps,
            ) -> Result<$crate::lower::Plan, $crate::lower::LowerError> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::lower_empty(s, caps), )*
                }
            }

            /// Per output element, the magnitudes a conditioned tolerance is
            /// proportional to ([`Op::condition`](crate::op::Op::condition)).
            pub fn condition(&self, inputs: &[&[f64]]) -> Vec<Vec<f64>> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::condition(s, inputs), )*
                }
            }

            pub(crate) fn float_tolerance(&self) -> $crate::tolerance::Tolerance {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::tolerance(s), )*
                }
            }

            pub(crate) fn domain(
                &self,
                input: &$crate::spec::TensorSig,
            ) -> $crate::conformance::inputs::Domain {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::domain(s, input), )*
                }
            }

            pub(crate) fn special_input(&self, k: usize, seed: u64) -> Option<Vec<f64>> {
                match self {
                    $( OpSpec::$variant(s) => $crate::op::Op::special_input(s, k, seed), )*
                }
            }
        }
    };
}

pub(crate) use catalogue;
