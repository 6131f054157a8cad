//! `kernelc check DIR|FILE`: validates emitted artifacts and manifests
//! ([`kernelc::aot::check`]).

use std::path::PathBuf;

use clap::Args;
use kernelc::aot::check::{check_path, Verdict};

use super::CliError;

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  kernelc check kernels/            # the manifest and every file it names\n  kernelc check kernels/softmax.0.spv"
)]
pub struct CheckArgs {
    /// A directory holding manifest.json, a manifest, or a .wgsl, .spv, .ptx or .o file.
    path: PathBuf,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CheckArgs) -> Result<(), CliError> {
    let findings = check_path(&args.path)?;
    let invalid: Vec<String> = findings
        .iter()
        .filter_map(|f| match &f.verdict {
            Verdict::Invalid(why) => Some(format!("{}: {why}", f.path.display())),
            Verdict::Valid(_) | Verdict::Skipped(_) => None,
        })
        .collect();
    if args.json {
        let rows: Vec<serde_json::Value> = findings
            .iter()
            .map(|f| {
                let (status, detail) = match &f.verdict {
                    Verdict::Valid(d) => ("valid", d),
                    Verdict::Invalid(d) => ("invalid", d),
                    Verdict::Skipped(d) => ("skipped", d),
                };
                serde_json::json!({"path": f.path, "status": status, "detail": detail})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        for f in &findings {
            let line = match &f.verdict {
                Verdict::Valid(d) => format!("ok       {} ({d})", f.path.display()),
                Verdict::Invalid(d) => format!("INVALID  {}: {d}", f.path.display()),
                Verdict::Skipped(d) => format!("skipped  {} ({d})", f.path.display()),
            };
            println!("{line}");
        }
    }
    if !invalid.is_empty() {
        return Err(format!(
            "{} of {} files invalid:\n  {}",
            invalid.len(),
            findings.len(),
            invalid.join("\n  ")
        )
        .into());
    }
    Ok(())
}
