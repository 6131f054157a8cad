//! Running a [`Plan`] on the reference interpreter: the executable meaning of a
//! lowered op, and the first executor of the conformance harness.

use super::{Binding, Plan, PrefillSource, Whole};
use kernelc_ir::interp::{self, Arg, HostBuffer, InterpError};
use kernelc_ir::Scalar;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlanRunError {
    #[error("launch {launch} (`{kernel}`): {source}")]
    Launch {
        launch: usize,
        kernel: String,
        #[source]
        source: Box<InterpError>,
    },
    #[error("launch {launch} binds {binding:?}, which the caller did not provide")]
    MissingBuffer { launch: usize, binding: Binding },
    #[error("a prefill of output {output} names a buffer the caller did not provide, or one of another length")]
    MissingPrefill { output: usize },
}

/// Runs every launch of `plan` in order, with `uniforms` the per-call values of the
/// spec it was lowered from ([`crate::OpSpec::uniforms`]). `outputs` should be poisoned
/// by the caller so that an element no kernel writes is caught; temporaries start
/// poisoned here (NaN for floats, `0xDEADBEEF` for integers).
pub fn run_plan(
    plan: &Plan,
    uniforms: &[super::Uniform],
    inputs: &[HostBuffer],
    outputs: &mut [HostBuffer],
) -> Result<(), PlanRunError> {
    let mut temps: Vec<HostBuffer> = plan
        .temps
        .iter()
        .map(|t| HostBuffer::filled(t.dtype, t.len as usize, poison(t.dtype)))
        .collect();
    for fill in &plan.prefills {
        let missing = || PlanRunError::MissingPrefill {
            output: fill.output,
        };
        let len = outputs.get(fill.output).ok_or_else(missing)?.len();
        let data = match &fill.source {
            PrefillSource::Value(v) => vec![*v; len],
            PrefillSource::Input(i) => inputs.get(*i).ok_or_else(missing)?.data.clone(),
        };
        let out = outputs.get_mut(fill.output).ok_or_else(missing)?;
        if data.len() != len {
            return Err(missing());
        }
        out.data = data;
    }
    for (index, launch) in plan.launches.iter().enumerate() {
        let missing = |binding: &Binding| PlanRunError::MissingBuffer {
            launch: index,
            binding: binding.clone(),
        };
        let mut args = Vec::with_capacity(launch.bindings.len());
        for binding in &launch.bindings {
            let arg = match binding {
                Binding::Input(i) => {
                    Arg::Buffer(inputs.get(*i).ok_or_else(|| missing(binding))?.clone())
                }
                Binding::Output(i) => {
                    Arg::Buffer(outputs.get(*i).ok_or_else(|| missing(binding))?.clone())
                }
                Binding::Temp(i) => {
                    Arg::Buffer(temps.get(*i).ok_or_else(|| missing(binding))?.clone())
                }
                Binding::Scalar(s) => Arg::Scalar(*s),
                Binding::Uniform(i) => {
                    Arg::Scalar(uniforms.get(*i).ok_or_else(|| missing(binding))?.value)
                }
                Binding::Part { of, start } => {
                    let whole = match of {
                        Whole::Input(i) => inputs.get(*i),
                        Whole::Output(i) => outputs.get(*i),
                        Whole::Temp(i) => temps.get(*i),
                    };
                    let len = part_len(&launch.kernel, args.len());
                    let part = whole
                        .zip(len)
                        .and_then(|(w, len)| w.data.get(*start as usize..*start as usize + len))
                        .ok_or_else(|| missing(binding))?;
                    Arg::Buffer(HostBuffer {
                        elem: whole.map_or(kernelc_ir::ScalarType::F32, |w| w.elem),
                        data: part.to_vec(),
                    })
                }
            };
            args.push(arg);
        }
        interp::run(&launch.kernel, launch.grid, &mut args).map_err(|e| PlanRunError::Launch {
            launch: index,
            kernel: launch.kernel.name.clone(),
            source: Box::new(e),
        })?;
        for (binding, arg) in launch.bindings.iter().zip(args) {
            let Arg::Buffer(buffer) = arg else { continue };
            match binding {
                Binding::Output(i) => outputs[*i] = buffer,
                Binding::Temp(i) => temps[*i] = buffer,
                Binding::Part { of, start } => {
                    let whole = match of {
                        Whole::Output(i) => &mut outputs[*i],
                        Whole::Temp(i) => &mut temps[*i],
                        Whole::Input(_) => continue,
                    };
                    let start = *start as usize;
                    whole.data[start..start + buffer.data.len()].copy_from_slice(&buffer.data);
                }
                Binding::Input(_) | Binding::Scalar(_) | Binding::Uniform(_) => {}
            }
        }
    }
    Ok(())
}

/// The elements kernel parameter `param` declares, if it is a buffer.
fn part_len(kernel: &kernelc_ir::Kernel, param: usize) -> Option<usize> {
    match kernel.params.get(param)? {
        kernelc_ir::Param::Buffer { len, .. } => Some(*len as usize),
        kernelc_ir::Param::Scalar { .. } => None,
    }
}

/// A value no correct kernel leaves in an output: NaN, or `0xDEADBEEF` (its low
/// bits for the narrow integers) for integers.
pub fn poison(dtype: kernelc_ir::ScalarType) -> Scalar {
    use kernelc_ir::ScalarType as T;
    match dtype {
        T::Bool => Scalar::Bool(true),
        T::I32 | T::U32 | T::I64 | T::U8 | T::I8 | T::U16 | T::I16 => {
            Scalar::int_wrapping(dtype, 0xDEAD_BEEF).unwrap_or(Scalar::zero(dtype))
        }
        T::F16 | T::Bf16 | T::F32 | T::F64 => Scalar::from_f64(dtype, f64::NAN),
    }
}
