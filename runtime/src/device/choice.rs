//! Naming a device: [`DeviceChoice`] (parsed from `KERNELC_DEVICE` or a CLI flag) and
//! the options of a wgpu device. These live with the devices, so the devices depend on
//! nothing of the [`Runtime`](crate::Runtime) that uses them.

use crate::error::{Result, RuntimeError};

/// Which device a [`Runtime`](crate::Runtime) runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The host CPU, through Cranelift. Always available.
    Cpu,
    /// A wgpu adapter (Vulkan, Metal, DX12; Mesa lavapipe with no GPU), feature `wgpu`.
    Wgpu(WgpuOptions),
    /// A CUDA GPU by ordinal, through the driver API (feature `cuda`).
    Cuda { ordinal: usize },
    /// The best device present: CUDA, then a wgpu hardware adapter, then the CPU.
    BestAvailable,
}

impl DeviceChoice {
    /// `KERNELC_DEVICE` parsed (see [`std::str::FromStr`] below), or `BestAvailable`
    /// when it is unset.
    pub fn from_env() -> Result<DeviceChoice> {
        match std::env::var("KERNELC_DEVICE") {
            Ok(text) if !text.trim().is_empty() => text.trim().parse(),
            _ => Ok(DeviceChoice::BestAvailable),
        }
    }
}

impl std::str::FromStr for DeviceChoice {
    type Err = RuntimeError;

    /// `cpu`, `cuda`, `cuda:N`, `wgpu` (WGSL), `wgpu:wgsl|naga|spirv|spirv-naga`, or
    /// `best`.
    fn from_str(text: &str) -> Result<DeviceChoice> {
        let (kind, detail) = text.split_once(':').unwrap_or((text, ""));
        let bad = || {
            RuntimeError::BadArgument(format!(
                "unknown device `{text}`: expected cpu, cuda[:N], wgpu[:wgsl|naga|spirv|spirv-naga] or best"
            ))
        };
        match (kind, detail) {
            ("cpu", "") => Ok(DeviceChoice::Cpu),
            ("best", "") => Ok(DeviceChoice::BestAvailable),
            ("cuda", "") => Ok(DeviceChoice::Cuda { ordinal: 0 }),
            ("cuda", n) => n
                .parse()
                .map(|ordinal| DeviceChoice::Cuda { ordinal })
                .map_err(|_| bad()),
            ("wgpu", path) => {
                let shader = if path.is_empty() {
                    ShaderPath::default()
                } else {
                    *ShaderPath::ALL
                        .iter()
                        .find(|p| p.name() == path)
                        .ok_or_else(bad)?
                };
                Ok(DeviceChoice::Wgpu(WgpuOptions {
                    shader,
                    allow_software: true,
                }))
            }
            _ => Err(bad()),
        }
    }
}

/// How a wgpu device is chosen and fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Which emitted form of a kernel wgpu receives.
    pub shader: ShaderPath,
    /// Accept a software adapter (lavapipe, WARP) when no hardware one exists (the
    /// default `true`; `BestAvailable` never picks one).
    pub allow_software: bool,
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            shader: ShaderPath::default(),
            allow_software: true,
        }
    }
}

/// The form in which kernels reach wgpu.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ShaderPath {
    /// WGSL text from naga's WGSL backend, parsed again by wgpu.
    #[default]
    Wgsl,
    /// The naga module itself (`ShaderSource::Naga`): no text round trip.
    NagaIr,
    /// SPIR-V from kernelc's rspirv emitter, read by naga's SPIR-V front end.
    SpirvViaNaga,
    /// SPIR-V from kernelc's rspirv emitter handed to the Vulkan driver as is
    /// (`PASSTHROUGH_SHADERS`; Vulkan only).
    SpirvPassthrough,
}

impl ShaderPath {
    pub const ALL: [ShaderPath; 4] = [
        ShaderPath::Wgsl,
        ShaderPath::NagaIr,
        ShaderPath::SpirvViaNaga,
        ShaderPath::SpirvPassthrough,
    ];

    /// Whether kernels reach wgpu as kernelc's SPIR-V.
    pub fn is_spirv(self) -> bool {
        matches!(
            self,
            ShaderPath::SpirvViaNaga | ShaderPath::SpirvPassthrough
        )
    }

    /// The target name in cache keys and reports.
    pub fn name(self) -> &'static str {
        match self {
            ShaderPath::Wgsl => "wgsl",
            ShaderPath::NagaIr => "naga",
            ShaderPath::SpirvViaNaga => "spirv-naga",
            ShaderPath::SpirvPassthrough => "spirv",
        }
    }
}

#[cfg(test)]
mod device_choice_tests {
    use super::*;

    #[test]
    fn device_choices_parse() {
        assert_eq!("cpu".parse::<DeviceChoice>().ok(), Some(DeviceChoice::Cpu));
        assert_eq!(
            "cuda:1".parse::<DeviceChoice>().ok(),
            Some(DeviceChoice::Cuda { ordinal: 1 })
        );
        assert_eq!(
            "wgpu:spirv".parse::<DeviceChoice>().ok(),
            Some(DeviceChoice::Wgpu(WgpuOptions {
                shader: ShaderPath::SpirvPassthrough,
                allow_software: true
            }))
        );
        assert_eq!(
            "wgpu".parse::<DeviceChoice>().ok(),
            Some(DeviceChoice::Wgpu(WgpuOptions::default()))
        );
        for bad in ["gpu", "cuda:x", "wgpu:hlsl", "cpu:0", ""] {
            assert!(
                matches!(
                    bad.parse::<DeviceChoice>(),
                    Err(RuntimeError::BadArgument(_))
                ),
                "{bad:?} must be refused"
            );
        }
    }
}
