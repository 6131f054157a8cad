//! Runs the PTX that `kernelc emit --target ptx` wrote, with `manifest.json`, through
//! plain `cudarc` (the CUDA driver API): this program does not link kernelc. It loads
//! each launch's module, passes one 8-byte word per kernel parameter (device pointers,
//! scalar bits) plus the status pointer, launches `grid` blocks of `workgroup_size`
//! threads, checks the status word and reads the outputs back.
//!
//! ```text
//! kernelc emit '{"op":"softmax","dtype":"f32","shape":[4,8],"axis":1}' --target ptx --out /tmp/kernels
//! cargo run --example aot_cuda --features cuda -- /tmp/kernels softmax [EXPECTED_DIR]
//! ```
//!
//! Inputs are `0.1·((7·i) mod 11) − 0.5` (f32 ops only), as in `aot_wgpu`; with
//! `EXPECTED_DIR` (outputs another loader saved as `{name}.{output}.bin`, raw
//! little-endian) each output is compared with it (relative 1e-5).

use std::path::Path;

use cudarc::driver::{CudaContext, DevicePtr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use serde_json::Value;

fn num(v: &Value, what: &str) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("the manifest's {what} is not a number: {v}"))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, name, expected) = match args.as_slice() {
        [_, dir, name] => (dir, name, None),
        [_, dir, name, expected] => (dir, name, Some(Path::new(expected))),
        _ => return Err("usage: aot_cuda DIR NAME [EXPECTED_DIR]".into()),
    };
    let dir = Path::new(dir);
    let text = std::fs::read_to_string(dir.join("manifest.json")).map_err(|e| e.to_string())?;
    let manifest: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if manifest["schema"] != "kernelc-manifest" || manifest["version"] != 1 {
        return Err("not a version-1 kernelc manifest".into());
    }
    let entry = manifest["kernels"]
        .as_array()
        .and_then(|k| {
            k.iter()
                .find(|e| e["name"] == name.as_str() && e["target"] == "ptx")
        })
        .ok_or_else(|| format!("no `{name}` for ptx in the manifest"))?;
    let list = |key: &str| entry[key].as_array().cloned().unwrap_or_default();
    let err = |e: cudarc::driver::DriverError| e.to_string();

    let ctx = CudaContext::new(0).map_err(err)?;
    let stream = ctx.default_stream();
    let alloc = |bytes: u64| stream.alloc_zeros::<u8>(bytes.max(4) as usize).map_err(err);
    let mut inputs = Vec::new();
    for sig in list("inputs") {
        if sig["dtype"] != "f32" {
            return Err(format!(
                "input `{}` is {}: this example fills f32 only",
                sig["name"], sig["dtype"]
            ));
        }
        let n = num(&sig["elements"], "elements")? as usize;
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| (0.1 * ((7 * i) % 11) as f32 - 0.5).to_le_bytes())
            .collect();
        inputs.push(stream.clone_htod(&bytes).map_err(err)?);
    }
    let outputs = list("outputs")
        .iter()
        .map(|o| alloc(num(&o["bytes"], "bytes")?))
        .collect::<Result<Vec<_>, String>>()?;
    let temps = list("temps")
        .iter()
        .map(|t| alloc(num(&t["bytes"], "bytes")?))
        .collect::<Result<Vec<_>, String>>()?;
    let status = alloc(4)?;
    let uniforms = list("uniforms");
    let base = |src: &Value| -> Result<u64, String> {
        let pick = |key: &str, bufs: &[cudarc::driver::CudaSlice<u8>]| {
            src[key]
                .as_u64()
                .and_then(|i| bufs.get(i as usize))
                .map(|b| b.device_ptr(&stream).0)
        };
        pick("input", &inputs)
            .or_else(|| pick("output", &outputs))
            .or_else(|| pick("temp", &temps))
            .ok_or_else(|| format!("a buffer source the op lacks: {src}"))
    };
    let mut modules = Vec::new();
    for launch in list("launches") {
        let file = dir.join(launch["file"].as_str().ok_or("a launch without a file")?);
        let ptx = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let module = ctx.load_module(Ptx::from_src(ptx)).map_err(err)?;
        let function = module.load_function("main").map_err(err)?;
        let mut words = Vec::new();
        for p in launch["params"]
            .as_array()
            .ok_or("a launch without params")?
        {
            words.push(if p["kind"] == "buffer" {
                match p["source"].get("part") {
                    Some(part) => {
                        let elem =
                            num(&p["bytes"], "bytes")? / num(&p["elements"], "elements")?.max(1);
                        base(&part["of"])? + num(&part["start"], "start")? * elem
                    }
                    None => base(&p["source"])?,
                }
            } else {
                match p["source"].get("uniform") {
                    Some(i) => num(&uniforms[num(i, "uniform")? as usize]["bits"], "bits")?,
                    None => num(&p["source"]["constant"]["bits"], "bits")?,
                }
            });
        }
        words.push(status.device_ptr(&stream).0);
        let grid = |k: usize| launch["grid"][k].as_u64().unwrap_or(1) as u32;
        let block = |k: usize| launch["workgroup_size"][k].as_u64().unwrap_or(1) as u32;
        let mut builder = stream.launch_builder(&function);
        for w in &words {
            builder.arg(w);
        }
        let config = LaunchConfig {
            grid_dim: (grid(0), grid(1), grid(2)),
            block_dim: (block(0), block(1), block(2)),
            shared_mem_bytes: 0,
        };
        // SAFETY: the manifest's ABI (docs/manifest.md): `main` takes one 8-byte
        // word per parameter in order, then the status pointer, which `words` holds;
        // every pointer is a live allocation of this context at least as large as the
        // manifest's byte count for it, and the kernel bounds-checks its accesses.
        unsafe { builder.launch(config) }.map_err(err)?;
        modules.push(module);
    }
    let status_word = stream.clone_dtoh(&status).map_err(err)?;
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
    println!("{name} (ptx) on {}", ctx.name().map_err(err)?);
    for (sig, out) in list("outputs").iter().zip(&outputs) {
        let bytes = stream.clone_dtoh(out).map_err(err)?;
        let n = num(&sig["elements"], "elements")? as usize;
        let values: Vec<f32> = bytes[..4 * n]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        println!("{}: {:?}", sig["name"], &values[..values.len().min(8)]);
        if let Some(expected) = expected {
            let path = expected.join(format!(
                "{name}.{}.bin",
                sig["name"].as_str().unwrap_or("out")
            ));
            let want = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let worst = values
                .iter()
                .zip(want.chunks_exact(4))
                .map(|(g, w)| {
                    let w = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    (g - w).abs() / (1.0 + w.abs())
                })
                .fold(0.0f32, f32::max);
            if worst > 1e-5 || want.len() != 4 * n {
                return Err(format!(
                    "{}: off by {worst} (relative) from {}",
                    sig["name"],
                    path.display()
                ));
            }
            println!(
                "{}: equal to {} (worst relative difference {worst:e})",
                sig["name"],
                path.display()
            );
        }
    }
    Ok(())
}
