//! `kernelc run SPEC --inputs a.npy b.npy --out DIR`: runs an op on a device with
//! NumPy `.npy` inputs and outputs, so any NumPy user can check a result; `--inputs
//! random --seed S` draws the conformance harness's inputs (and writes them too);
//! `--check` compares the outputs with the f64 reference under docs/semantics.md's
//! tolerance table.

use std::path::PathBuf;

use clap::Args;
use kernelc_ir::interp::HostBuffer;
use kernelc_kernels::conformance::{case_data, check_data, CaseData, Executor};
use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::{DeviceChoice, Runtime};

use super::{npy, CliError, UsageError};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kernelc run '{\"op\":\"softmax\",\"dtype\":\"f32\",\"shape\":[4,8],\"axis\":1}' --inputs x.npy --out result/\n  kernelc run spec.json --inputs random --seed 7 --device wgpu --check --out result/"
)]
pub struct RunArgs {
    /// The op as OpSpec JSON, inline, a file holding it, or `-` for standard input.
    spec: String,
    /// One .npy file per input, in the op's order (`kernelc ops OP` lists them), or
    /// `random`.
    #[arg(long, num_args = 1.., required = true)]
    inputs: Vec<String>,
    /// The seed of `--inputs random`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The directory the outputs (`{name}.npy`) are written into.
    #[arg(long)]
    out: PathBuf,
    /// cpu, wgpu[:path], cuda[:N] or best.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Compare the outputs with the f64 reference (exit 1 naming the first element
    /// outside its tolerance).
    #[arg(long)]
    check: bool,
}

/// The outputs a run already produced, as a conformance executor (for `--check`).
struct Recorded {
    device: String,
    outputs: Vec<HostBuffer>,
}

impl Executor for Recorded {
    fn name(&self) -> String {
        self.device.clone()
    }
    fn run(&self, _spec: &OpSpec, _inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
        Ok(self.outputs.clone())
    }
}

pub fn run(args: RunArgs) -> Result<(), CliError> {
    let text = super::read_json_arg(&args.spec)?;
    let spec: OpSpec = serde_json::from_str(&text).map_err(|e| format!("invalid op spec: {e}"))?;
    spec.validate()?;
    let sigs = spec.inputs();
    let random = args.inputs.len() == 1 && args.inputs[0] == "random";
    let buffers: Vec<HostBuffer> = if random {
        case_data(&spec, args.seed).buffers
    } else {
        if args.inputs.len() != sigs.len() {
            let names: Vec<&str> = sigs.iter().map(|s| s.name.as_str()).collect();
            return Err(UsageError(format!(
                "{} takes {} inputs ({}), {} given",
                spec.name(),
                sigs.len(),
                names.join(", "),
                args.inputs.len()
            ))
            .into());
        }
        sigs.iter()
            .zip(&args.inputs)
            .map(|(sig, path)| npy::read(path.as_ref(), &sig.name, sig.dtype, &sig.shape))
            .collect::<Result<_, _>>()?
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let rt = Runtime::new(args.device.parse::<DeviceChoice>()?)?;
    let tensors = sigs
        .iter()
        .zip(&buffers)
        .map(|(sig, b)| rt.tensor_from_host(&sig.shape, b))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<_> = tensors.iter().collect();
    let outputs = rt.run(&spec, &refs)?;
    let hosts = outputs
        .iter()
        .map(|t| rt.tensor_to_host(t))
        .collect::<Result<Vec<_>, _>>()?;
    if random {
        for (sig, b) in sigs.iter().zip(&buffers) {
            let path = args.out.join(format!("input_{}.npy", sig.name));
            npy::write(&path, b, &sig.shape)?;
            println!("{} (input)", path.display());
        }
    }
    for (sig, host) in spec.outputs().iter().zip(&hosts) {
        let path = args.out.join(format!("{}.npy", sig.name));
        let dtype = npy::write(&path, host, &sig.shape)?;
        println!("{} ({dtype}, shape {:?})", path.display(), sig.shape);
    }
    if args.check {
        let data = CaseData {
            values: buffers.iter().map(HostBuffer::to_f64).collect(),
            buffers,
        };
        let recorded = Recorded {
            device: rt.device_name(),
            outputs: hosts,
        };
        check_data(&recorded, &spec, &data)
            .map_err(|f| format!("check on {}: {f}", rt.device_name()))?;
        println!(
            "check: every output within its tolerance of the f64 reference (docs/semantics.md)"
        );
    }
    Ok(())
}
