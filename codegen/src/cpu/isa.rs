//! The Cranelift target: the host, with every ISA extension it has.

use crate::CodegenError;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

use super::TARGET;

/// What the emitter may use on the chosen ISA.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Features {
    /// 128-bit SIMD with the rounding and integer ops the packed paths need (SSE4.1 on
    /// x86-64; always on aarch64 and riscv with V). Without it every vector is lane-wise.
    pub simd: bool,
    /// Fused multiply-add on vectors (FMA3 on x86-64). Scalar `fma` works either way
    /// (Cranelift calls `fma`/`fmaf` without it).
    pub fma: bool,
}

fn backend(message: impl ToString) -> CodegenError {
    CodegenError::Backend {
        target: TARGET,
        message: message.to_string(),
    }
}

/// The host ISA, with the host's extensions enabled (`cranelift-native`: without them
/// `fma` would be a libcall and vector rounding unavailable), `opt_level=speed`.
/// `pic` selects position-independent code (object files) or not (the JIT needs
/// `is_pic=false`).
pub(crate) fn host_isa(pic: bool) -> Result<(OwnedTargetIsa, Features), CodegenError> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, name: &str, value: &str| {
        flags
            .set(name, value)
            .map_err(|e| backend(format!("setting `{name}={value}`: {e}")))
    };
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "is_pic", if pic { "true" } else { "false" })?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    let isa_builder =
        cranelift_native::builder().map_err(|e| backend(format!("unsupported host: {e}")))?;
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| backend(format!("building the host ISA: {e}")))?;
    let features = features_of(&isa);
    Ok((isa, features))
}

/// The ISA of `triple` (an ahead-of-time target), with its baseline extensions only
/// (the host's are not assumed), `opt_level=speed`, position-independent code.
pub(crate) fn isa_for(triple: &str) -> Result<(OwnedTargetIsa, Features), CodegenError> {
    let mut flags = settings::builder();
    for (name, value) in [
        ("opt_level", "speed"),
        ("is_pic", "true"),
        ("use_colocated_libcalls", "false"),
    ] {
        flags
            .set(name, value)
            .map_err(|e| backend(format!("setting `{name}={value}`: {e}")))?;
    }
    let parsed: target_lexicon::Triple = triple
        .parse()
        .map_err(|e| backend(format!("the target triple `{triple}`: {e}")))?;
    let isa = cranelift_codegen::isa::lookup(parsed)
        .map_err(|e| backend(format!("the target `{triple}`: {e} (this build has Cranelift's backend for the host's architecture)")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| backend(format!("building the ISA of `{triple}`: {e}")))?;
    let features = features_of(&isa);
    Ok((isa, features))
}

fn features_of(isa: &OwnedTargetIsa) -> Features {
    // The ISA is the host's, so the host's architecture decides.
    let flag = |name: &str| {
        isa.isa_flags()
            .iter()
            .any(|v| v.name == name && v.as_bool() == Some(true))
    };
    if cfg!(target_arch = "x86_64") {
        let simd = flag("has_sse41");
        Features {
            simd,
            fma: simd && flag("has_fma"),
        }
    } else {
        let simd = cfg!(target_arch = "aarch64");
        Features { simd, fma: simd }
    }
}
