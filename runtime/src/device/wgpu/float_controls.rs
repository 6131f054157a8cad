//! What a Vulkan device promises about NaN, ±∞, signed zero and subnormals in shaders
//! (`VK_KHR_shader_float_controls`, core in Vulkan 1.2), read through wgpu-hal. Without
//! `SignedZeroInfNanPreserve` a driver may assume no float special occurs (fold `x · 0`
//! to 0, `x − x` to 0), and without `DenormPreserve` it may flush subnormals to zero;
//! kernelc's own SPIR-V declares them wherever the device says it honours them. WGSL has no way to ask, and naga's SPIR-V declares nothing
//! (docs/semantics.md).

use ash::vk;
use kernelc_codegen::spirv::SpirvOptions;

/// The float controls kernelc's SPIR-V may declare on `adapter`: none unless it is a
/// Vulkan 1.2 device that reports them.
pub(crate) fn spirv_options(adapter: &wgpu::Adapter) -> SpirvOptions {
    // SAFETY: the hal adapter is only read (its physical device's properties) while
    // the wgpu adapter that owns it is borrowed; nothing is created or destroyed.
    let Some(hal) = (unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return SpirvOptions::default();
    };
    let instance = hal.shared_instance().raw_instance();
    let device = hal.raw_physical_device();
    // SAFETY: `device` is a physical device of `instance`: both come from one adapter.
    let properties = unsafe { instance.get_physical_device_properties(device) };
    if properties.api_version < vk::API_VERSION_1_2 {
        return SpirvOptions::default();
    }
    let mut controls = vk::PhysicalDeviceFloatControlsProperties::default();
    let mut query = vk::PhysicalDeviceProperties2::default().push_next(&mut controls);
    // SAFETY: as above; the device is Vulkan 1.2, whose properties2 chain takes the
    // float-controls structure, which outlives the call.
    unsafe { instance.get_physical_device_properties2(device, &mut query) };
    SpirvOptions {
        preserve_f32_specials: controls.shader_signed_zero_inf_nan_preserve_float32 == vk::TRUE,
        preserve_f64_specials: controls.shader_signed_zero_inf_nan_preserve_float64 == vk::TRUE,
        preserve_f32_denormals: controls.shader_denorm_preserve_float32 == vk::TRUE,
        preserve_f64_denormals: controls.shader_denorm_preserve_float64 == vk::TRUE,
    }
}
