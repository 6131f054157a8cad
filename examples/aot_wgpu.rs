//! Runs kernels that `kernelc emit` wrote (WGSL or SPIR-V, plus `manifest.json`) with
//! plain `wgpu`: this program does not link kernelc. It reads the manifest, allocates
//! the op's buffers, packs the scalar block, binds and dispatches each launch in order,
//! checks the status word and reads the outputs back.
//!
//! ```text
//! kernelc emit '{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1}' \
//!     --target wgsl,spirv --out /tmp/kernels
//! cargo run --example aot_wgpu -- /tmp/kernels softmax wgsl
//! ```
//!
//! Inputs are filled with `0.1·((7·i) mod 11) − 0.5` (f32 ops only in this example);
//! each output's first values are printed, and with `SAVE_DIR` its bytes are saved as
//! `{name}.{output}.bin` (what `aot_cuda` compares with). `tests/aot.rs` runs the same code against
//! kernelc's reference.

use std::borrow::Cow;
use std::path::Path;

use serde_json::Value;

/// A wgpu device and queue.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: String,
}

/// The first adapter wgpu offers (software ones too: lavapipe in CI), with the
/// features `needs` names (`shader-f16`, `shader-f64`, `shader-int64`).
pub fn open_gpu(needs: &[String]) -> Result<Gpu, String> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("no wgpu adapter: {e}"))?;
    let mut features = wgpu::Features::empty();
    for need in needs {
        features |= match need.as_str() {
            "shader-f16" => wgpu::Features::SHADER_F16,
            "shader-f64" => wgpu::Features::SHADER_F64,
            "shader-int64" => wgpu::Features::SHADER_INT64,
            other => return Err(format!("unknown feature `{other}` in the manifest")),
        };
    }
    if !adapter.features().contains(features) {
        return Err(format!(
            "the adapter lacks {:?}",
            features - adapter.features()
        ));
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("aot"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| format!("cannot open the device: {e}"))?;
    Ok(Gpu {
        device,
        queue,
        adapter: adapter.get_info().name,
    })
}

/// The manifest in `dir`, checked to be one this loader reads.
pub fn read_manifest(dir: &Path) -> Result<Value, String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if manifest["schema"] != "kernelc-manifest" || manifest["version"] != 1 {
        return Err(format!(
            "{}: not a version-1 kernelc manifest",
            path.display()
        ));
    }
    Ok(manifest)
}

/// The entry of op `name` for `target` (`wgsl` or `spirv`).
pub fn find<'m>(manifest: &'m Value, name: &str, target: &str) -> Result<&'m Value, String> {
    manifest["kernels"]
        .as_array()
        .and_then(|k| {
            k.iter()
                .find(|e| e["name"] == name && e["target"] == target)
        })
        .ok_or_else(|| format!("no `{name}` for {target} in the manifest"))
}

fn num(v: &Value, what: &str) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("the manifest's {what} is not a number: {v}"))
}

/// A storage buffer of at least `bytes` (rounded up to whole words).
fn storage(gpu: &Gpu, bytes: u64, label: &str) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(4).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Runs `entry` (one op of the manifest in `dir`) on `inputs` (each input's bytes,
/// little-endian) and returns each output's bytes.
pub fn run_op(
    gpu: &Gpu,
    dir: &Path,
    entry: &Value,
    inputs: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, String> {
    let list = |key: &str| entry[key].as_array().cloned().unwrap_or_default();
    let (ins, outs, temps) = (list("inputs"), list("outputs"), list("temps"));
    if inputs.len() != ins.len() {
        return Err(format!(
            "{} inputs given, the op takes {}",
            inputs.len(),
            ins.len()
        ));
    }
    if !list("prefills").is_empty() {
        return Err("this example does not run ops with prefilled outputs".into());
    }
    let mut in_bufs = Vec::new();
    for (data, sig) in inputs.iter().zip(&ins) {
        if data.len() as u64 != num(&sig["bytes"], "input bytes")? {
            return Err(format!(
                "input `{}` needs {} bytes",
                sig["name"], sig["bytes"]
            ));
        }
        let buf = storage(gpu, data.len() as u64, "input");
        let mut padded = data.clone();
        padded.resize(data.len().max(4).next_multiple_of(4), 0);
        gpu.queue.write_buffer(&buf, 0, &padded);
        in_bufs.push(buf);
    }
    let out_bufs = outs
        .iter()
        .map(|o| Ok(storage(gpu, num(&o["bytes"], "output bytes")?, "output")))
        .collect::<Result<Vec<_>, String>>()?;
    let temp_bufs = temps
        .iter()
        .map(|t| Ok(storage(gpu, num(&t["bytes"], "temp bytes")?, "temp")))
        .collect::<Result<Vec<_>, String>>()?;
    let status = storage(gpu, 4, "status");
    gpu.queue.write_buffer(&status, 0, &[0; 4]);
    let tensor = |src: &Value| -> Result<&wgpu::Buffer, String> {
        let pick = |bufs: &'_ [wgpu::Buffer], key: &str| -> Option<usize> {
            src[key]
                .as_u64()
                .map(|i| i as usize)
                .filter(|&i| i < bufs.len())
        };
        if let Some(i) = pick(&in_bufs, "input") {
            return Ok(&in_bufs[i]);
        }
        if let Some(i) = pick(&out_bufs, "output") {
            return Ok(&out_bufs[i]);
        }
        if let Some(i) = pick(&temp_bufs, "temp") {
            return Ok(&temp_bufs[i]);
        }
        Err(format!("a buffer source the op lacks: {src}"))
    };
    let uniforms = list("uniforms");
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    let mut keep = Vec::new();
    for launch in list("launches") {
        let file = dir.join(launch["file"].as_str().ok_or("a launch without a file")?);
        let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let source = if entry["target"] == "spirv" {
            let words = bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect();
            wgpu::ShaderSource::SpirV(Cow::Owned(words))
        } else {
            wgpu::ShaderSource::Wgsl(Cow::Owned(
                String::from_utf8(bytes).map_err(|e| e.to_string())?,
            ))
        };
        let module = gpu
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source,
            });
        // Bind group 0: buffers at their bindings, the scalar block, the status word.
        let mut layout = Vec::new();
        let mut binds: Vec<(u32, &wgpu::Buffer, u64, u64)> = Vec::new();
        let scalar_words = num(&launch["scalar_block"]["words"], "scalar words").unwrap_or(0);
        let mut words = vec![0u32; scalar_words as usize];
        for p in launch["params"]
            .as_array()
            .ok_or("a launch without params")?
        {
            if p["kind"] == "buffer" {
                let binding = num(&p["binding"], "binding")? as u32;
                let bytes = num(&p["bytes"], "param bytes")?.max(4).next_multiple_of(4);
                let (buf, offset) = match p["source"].get("part") {
                    Some(part) => {
                        let elem =
                            num(&p["bytes"], "bytes")? / num(&p["elements"], "elements")?.max(1);
                        (tensor(&part["of"])?, num(&part["start"], "start")? * elem)
                    }
                    None => (tensor(&p["source"])?, 0),
                };
                layout.push((binding, p["access"] == "read"));
                binds.push((binding, buf, offset, bytes));
            } else {
                let bits = match p["source"].get("uniform") {
                    Some(i) => num(&uniforms[num(i, "uniform")? as usize]["bits"], "bits")?,
                    None => num(&p["source"]["constant"]["bits"], "constant bits")?,
                };
                let word = num(&p["word"], "word")? as usize;
                let wide = matches!(p["dtype"].as_str(), Some("f64" | "i64"));
                *words.get_mut(word).ok_or("a scalar past its block")? = bits as u32;
                if wide {
                    *words.get_mut(word + 1).ok_or("a scalar past its block")? =
                        (bits >> 32) as u32;
                }
            }
        }
        if let Some(b) = launch["scalar_block"]["binding"].as_u64() {
            let block = storage(gpu, words.len() as u64 * 4, "scalars");
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            gpu.queue.write_buffer(&block, 0, &bytes);
            layout.push((b as u32, true));
            keep.push((b as u32, block, bytes.len() as u64));
        }
        let status_binding = num(&launch["status_binding"], "status binding")? as u32;
        layout.push((status_binding, false));
        let entries: Vec<wgpu::BindGroupLayoutEntry> = layout
            .iter()
            .map(|&(binding, read_only)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let bgl = gpu
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &entries,
            });
        let pl = gpu
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&bgl)],
                immediate_size: 0,
            });
        let pipeline = gpu
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: launch["kernel"].as_str(),
                layout: Some(&pl),
                module: &module,
                entry_point: launch["entry_point"].as_str(),
                compilation_options: Default::default(),
                cache: None,
            });
        let block = keep
            .last()
            .filter(|k| Some(k.0 as u64) == launch["scalar_block"]["binding"].as_u64());
        let mut group: Vec<wgpu::BindGroupEntry> = binds
            .iter()
            .map(|&(binding, buf, offset, size)| wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: buf,
                    offset,
                    size: wgpu::BufferSize::new(size),
                }),
            })
            .collect();
        if let Some((binding, buf, _)) = block {
            group.push(wgpu::BindGroupEntry {
                binding: *binding,
                resource: buf.as_entire_binding(),
            });
        }
        group.push(wgpu::BindGroupEntry {
            binding: status_binding,
            resource: status.as_entire_binding(),
        });
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &bgl,
            entries: &group,
        });
        let grid: Vec<u32> = launch["grid"]
            .as_array()
            .ok_or("a launch without a grid")?
            .iter()
            .map(|g| g.as_u64().unwrap_or(1) as u32)
            .collect();
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
    // Read the outputs and the status word back.
    let mut reads = Vec::new();
    for (buf, bytes) in out_bufs
        .iter()
        .zip(outs.iter().map(|o| num(&o["bytes"], "bytes")))
        .chain(std::iter::once((&status, Ok(4))))
    {
        let bytes = bytes?;
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read"),
            size: bytes.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(buf, 0, &staging, 0, bytes.max(4).next_multiple_of(4));
        reads.push((staging, bytes));
    }
    gpu.queue.submit([encoder.finish()]);
    let mut results = Vec::new();
    for (staging, bytes) in reads {
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        gpu.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
        let mapped = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| format!("cannot read back: {e}"))?;
        let data = mapped
            .get(..bytes as usize)
            .ok_or("a short readback")?
            .to_vec();
        results.push(data);
    }
    let status_word = results.pop().ok_or("no status")?;
    let status = u32::from_le_bytes([
        status_word[0],
        status_word[1],
        status_word[2],
        status_word[3],
    ]);
    if status != 0 {
        return Err(format!(
            "a kernel reported run-time errors (status {status:#x})"
        ));
    }
    Ok(results)
}

/// f32 values as little-endian bytes, and back.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_values(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[allow(dead_code)]
fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, name, target, save) = match args.as_slice() {
        [_, dir, name, target] => (dir, name, target, None),
        [_, dir, name, target, save] => (dir, name, target, Some(Path::new(save))),
        _ => return Err("usage: aot_wgpu DIR NAME wgsl|spirv [SAVE_DIR]".into()),
    };
    let dir = Path::new(dir);
    let manifest = read_manifest(dir)?;
    let entry = find(&manifest, name, target)?;
    let features: Vec<String> =
        serde_json::from_value(entry["features"].clone()).map_err(|e| e.to_string())?;
    let gpu = open_gpu(&features)?;
    let inputs: Vec<Vec<u8>> = entry["inputs"]
        .as_array()
        .ok_or("no inputs")?
        .iter()
        .map(|sig| {
            if sig["dtype"] != "f32" {
                return Err(format!(
                    "input `{}` is {}: this example fills f32 only",
                    sig["name"], sig["dtype"]
                ));
            }
            let n = num(&sig["elements"], "elements")? as usize;
            Ok(f32_bytes(
                &(0..n)
                    .map(|i| 0.1 * ((7 * i) % 11) as f32 - 0.5)
                    .collect::<Vec<_>>(),
            ))
        })
        .collect::<Result<_, String>>()?;
    let outputs = run_op(&gpu, dir, entry, &inputs)?;
    println!("{name} ({target}) on {}", gpu.adapter);
    for (sig, out) in entry["outputs"]
        .as_array()
        .ok_or("no outputs")?
        .iter()
        .zip(&outputs)
    {
        let values = f32_values(out);
        println!("{}: {:?}", sig["name"], &values[..values.len().min(8)]);
        if let Some(save) = save {
            let path = save.join(format!(
                "{name}.{}.bin",
                sig["name"].as_str().unwrap_or("out")
            ));
            std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}
