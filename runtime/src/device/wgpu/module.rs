//! User shader modules (WGSL or SPIR-V written outside kernelc) on a wgpu device: the
//! native-module half of the runtime's raw kernels (`crate::module`).
//!
//! Unlike kernelc's own kernels, a user module is created *checked*: naga validates it
//! and wgpu keeps its run-time bounds checks and loop bounding, so a wrong index
//! cannot reach outside a binding. Its interface is what the caller declares: storage
//! buffers at bindings `0..n` of group 0 (read-only or read-write) and, optionally, a
//! block of immediate data (SPIR-V push constants). It is dispatched in stream order
//! with every op, without a status word (a user module reports no run-time errors).

use super::{lock, WgpuDevice, SUBMIT_BATCH};
use crate::device::Slice;
use crate::error::{Result, RuntimeError};
use std::borrow::Cow;

/// What a user shader is handed to wgpu as.
pub(crate) enum ShaderCode<'a> {
    Wgsl(&'a str),
    SpirV(Vec<u32>),
}

/// A user module compiled into a compute pipeline of a wgpu device.
pub struct WgpuShaderModule {
    name: String,
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    immediate_bytes: u32,
}

impl WgpuDevice {
    /// Creates `code`'s module (validated by naga) with entry point `entry` and the
    /// declared interface: `writable[i]` for storage buffer `i`, `immediate_bytes` of
    /// immediate data.
    pub(crate) fn load_shader(
        &self,
        code: ShaderCode<'_>,
        entry: &str,
        writable: &[bool],
        immediate_bytes: u32,
    ) -> Result<WgpuShaderModule> {
        let failed = |message: String| RuntimeError::Compile {
            device: self.name(),
            kernel: entry.to_string(),
            message,
        };
        if immediate_bytes > 0
            && !self
                .gpu
                .device
                .features()
                .contains(wgpu::Features::IMMEDIATES)
        {
            return Err(failed(
                "this adapter has no immediate data (push constants)".into(),
            ));
        }
        if immediate_bytes > self.limits.max_immediate_size {
            return Err(failed(format!(
                "{immediate_bytes} bytes of immediate data; this adapter allows {}",
                self.limits.max_immediate_size
            )));
        }
        if writable.len() as u64 > u64::from(self.limits.max_storage_buffers_per_shader_stage) {
            return Err(failed(format!(
                "{} storage buffers; this adapter allows {}",
                writable.len(),
                self.limits.max_storage_buffers_per_shader_stage
            )));
        }
        let device = &self.gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let source = match code {
            ShaderCode::Wgsl(text) => wgpu::ShaderSource::Wgsl(Cow::Borrowed(text)),
            ShaderCode::SpirV(words) => wgpu::ShaderSource::SpirV(Cow::Owned(words)),
        };
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(entry),
            source,
        });
        let entries: Vec<wgpu::BindGroupLayoutEntry> = writable
            .iter()
            .enumerate()
            .map(|(i, &w)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: !w },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(entry),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(entry),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: immediate_bytes,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(failed(format!("wgpu rejected the shader: {error}")));
        }
        Ok(WgpuShaderModule {
            name: entry.to_string(),
            pipeline,
            bind_group_layout,
            immediate_bytes,
        })
    }

    /// Queues `module` on `workgroups` with `buffers` bound in order and
    /// `immediates` as its immediate data. Each buffer is bindable where it is
    /// (callers stage others).
    pub(crate) fn dispatch_shader(
        &self,
        module: &WgpuShaderModule,
        buffers: &[Slice<'_>],
        immediates: &[u8],
        workgroups: [u32; 3],
    ) -> Result<()> {
        let failed = |message: String| RuntimeError::Launch {
            device: self.name(),
            kernel: module.name.clone(),
            message,
            status: 0,
        };
        if immediates.len() as u64 != u64::from(module.immediate_bytes) || immediates.len() % 4 != 0
        {
            return Err(failed(format!(
                "{} bytes of immediate data for a module declaring {} (a multiple of 4)",
                immediates.len(),
                module.immediate_bytes
            )));
        }
        let max = self.limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&g| g > max) {
            return Err(failed(format!(
                "workgroups {workgroups:?} exceed this adapter's {max} per dimension"
            )));
        }
        let device = &self.gpu.device;
        let mut entries = Vec::with_capacity(buffers.len());
        for (i, slice) in buffers.iter().enumerate() {
            let buffer = self.own_storage(slice.storage)?.buffer()?;
            // WebGPU binds whole words and no empty range (a zero-byte slice binds the
            // buffer's first word, which a correct shader does not read).
            let words = (slice.bytes as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
            let (offset, size) = match wgpu::BufferSize::new(words) {
                Some(size) if slice.offset as u64 + words <= buffer.size() => {
                    (slice.offset as u64, Some(size))
                }
                Some(_) => (slice.offset as u64, None),
                None => (0, wgpu::BufferSize::new(4)),
            };
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size,
                }),
            });
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&module.name),
            layout: &module.bind_group_layout,
            entries: &entries,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&module.name),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&module.name),
                timestamp_writes: None,
            });
            pass.set_pipeline(&module.pipeline);
            pass.set_bind_group(0, &group, &[]);
            if !immediates.is_empty() {
                pass.set_immediates(0, immediates);
            }
            let [x, y, z] = workgroups;
            pass.dispatch_workgroups(x, y, z);
        }
        let commands = encoder.finish();
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(failed(format!("wgpu rejected the dispatch: {error}")));
        }
        // In order with the ops around it: after the ops recorded so far, before any
        // recorded later.
        let mut ring = lock(&self.gpu.ring);
        self.gpu.close_batch(&mut ring);
        ring.unsubmitted.push(commands);
        if ring.unsubmitted.len() >= SUBMIT_BATCH {
            self.gpu.flush_ring(&mut ring);
        }
        Ok(())
    }
}
