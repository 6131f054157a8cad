//! `kernelc info` (the devices present and what each can do, the disk cache) and
//! `kernelc cache ls|clear|stats`.

use super::CliError;
use clap::{Args, Subcommand};
use kernelc::kernels::lower::TargetCaps;
use kernelc::runtime::cache::{CacheEntry, DiskCache};
use kernelc::runtime::{Device, DeviceChoice};
use serde::Serialize;

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  kernelc info\n  kernelc info --json")]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc cache stats\n  kernelc cache ls --json\n  kernelc cache clear\n\nThe cache is the one kernelc uses: KERNELC_CACHE_DIR, else the user cache directory; KERNELC_CACHE=off disables it."
)]
pub struct CacheArgs {
    #[command(subcommand)]
    command: CacheCommand,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// List the cached artifacts, most recently used first.
    Ls,
    /// Delete every cached artifact (other files in the directory are left alone).
    Clear,
    /// The directory, its size, its bound and the artifact count.
    Stats,
}

/// A device that opened, with its caps.
#[derive(Serialize, Debug)]
struct DeviceInfo {
    /// The choice that opens it (`cpu`, `cuda:0`, `wgpu:spirv`, ...).
    choice: String,
    name: String,
    target: &'static str,
    caps: TargetCaps,
}

/// A device choice that did not open here, and why.
#[derive(Serialize, Debug)]
struct Absent {
    choice: String,
    reason: String,
}

#[derive(Serialize, Debug)]
struct CacheStats {
    /// `None` when the disk cache is off.
    dir: Option<String>,
    bytes: u64,
    max_bytes: u64,
    artifacts: usize,
}

#[derive(Serialize, Debug)]
struct Info {
    devices: Vec<DeviceInfo>,
    absent: Vec<Absent>,
    cache: CacheStats,
}

/// The device choices `info` tries: the CPU, CUDA's first device and each wgpu
/// shader path.
fn choices() -> Vec<String> {
    let mut v = vec!["cpu".to_string(), "cuda:0".to_string()];
    v.extend(
        kernelc::runtime::ShaderPath::ALL
            .iter()
            .map(|p| format!("wgpu:{}", p.name())),
    );
    v
}

pub fn info(args: InfoArgs) -> Result<(), CliError> {
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    for choice in choices() {
        match choice.parse::<DeviceChoice>().and_then(Device::open) {
            Ok(d) => devices.push(DeviceInfo {
                name: d.name(),
                target: d.target_name(),
                caps: d.caps(),
                choice,
            }),
            Err(e) => absent.push(Absent {
                choice,
                reason: e.to_string(),
            }),
        }
    }
    let info = Info {
        devices,
        absent,
        cache: stats(&DiskCache::from_env()?),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    for d in &info.devices {
        let c = &d.caps;
        let types: Vec<&str> = [
            ("f16", c.f16),
            ("bf16", c.bf16),
            ("f64", c.f64),
            ("i64", c.i64),
        ]
        .iter()
        .filter(|(_, has)| *has)
        .map(|(t, _)| *t)
        .collect();
        println!("{} ({}): {}", d.choice, d.target, d.name);
        println!(
            "  workgroup ≤ {} invocations, {} KiB shared memory, subgroup {}, vectors of {}",
            c.max_invocations_per_workgroup,
            c.shared_memory_bytes / 1024,
            c.subgroup_size.map_or("-".to_string(), |s| s.to_string()),
            c.vector_width
        );
        println!(
            "  types beyond f32/i32/u32: {}; IEEE specials: {}; subnormals kept: {}",
            if types.is_empty() {
                "-".to_string()
            } else {
                types.join(", ")
            },
            yes(c.ieee_specials),
            yes(c.keeps_subnormals)
        );
        let units = match (c.matrix_fragments, c.warpgroup_fragments) {
            (false, _) => "none (fragments expanded)",
            (true, false) => "warp fragments (mma.sync)",
            (true, true) => "warp and warpgroup fragments (mma.sync, wgmma)",
        };
        println!(
            "  matrix units: {units}; shared memory by opting in: {} KiB",
            c.opt_in_shared_memory_limit() / 1024
        );
    }
    for a in &info.absent {
        println!("{}: not here ({})", a.choice, a.reason);
    }
    print_stats(&info.cache);
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn stats(cache: &DiskCache) -> CacheStats {
    CacheStats {
        dir: cache.dir().map(|d| d.display().to_string()),
        bytes: cache.size_bytes(),
        max_bytes: cache.max_bytes(),
        artifacts: cache.entries().len(),
    }
}

fn print_stats(s: &CacheStats) {
    match &s.dir {
        Some(dir) => println!(
            "disk cache: {dir}: {} artifacts, {} of {} bytes",
            s.artifacts, s.bytes, s.max_bytes
        ),
        None => println!("disk cache: off"),
    }
}

pub fn cache(args: CacheArgs) -> Result<(), CliError> {
    let cache = DiskCache::from_env()?;
    match args.command {
        CacheCommand::Stats if args.json => {
            println!("{}", serde_json::to_string_pretty(&stats(&cache))?)
        }
        CacheCommand::Stats => print_stats(&stats(&cache)),
        CacheCommand::Ls => {
            let entries = cache.entries();
            let age = |e: &CacheEntry| e.used.elapsed().map_or(0, |d| d.as_secs());
            if args.json {
                let list: Vec<serde_json::Value> = entries
                    .iter()
                    .map(|e| {
                        serde_json::json!({
                            "key": e.key, "kind": e.kind, "bytes": e.bytes,
                            "seconds_since_use": age(e)
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for e in &entries {
                    println!(
                        "{}.{}  {} bytes  used {} s ago",
                        e.key,
                        e.kind,
                        e.bytes,
                        age(e)
                    );
                }
            }
        }
        CacheCommand::Clear => {
            let removed = cache
                .clear()
                .map_err(|e| format!("clearing the disk cache: {e}"))?;
            if args.json {
                println!("{}", serde_json::json!({ "removed": removed }));
            } else {
                println!("removed {removed} cached artifacts");
            }
        }
    }
    Ok(())
}
