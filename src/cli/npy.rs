//! NumPy `.npy` files as the runtime's host buffers (`npyz` reads and writes them):
//! C order only, each dtype its own NumPy type (no silent conversion); bf16, which
//! NumPy lacks, is written as float32 (exact) and not read.

use std::io::{BufReader, BufWriter};
use std::path::Path;

use half::f16;
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::{Scalar, ScalarType};
use npyz::{NpyFile, Order, WriterBuilder};

use super::CliError;

/// The NumPy type string of `dtype` without its byte-order mark (`f4`, `i8`, `b1`).
fn numpy_type(dtype: ScalarType) -> Option<&'static str> {
    Some(match dtype {
        ScalarType::F16 => "f2",
        ScalarType::F32 => "f4",
        ScalarType::F64 => "f8",
        ScalarType::I8 => "i1",
        ScalarType::U8 => "u1",
        ScalarType::I16 => "i2",
        ScalarType::U16 => "u2",
        ScalarType::I32 => "i4",
        ScalarType::U32 => "u4",
        ScalarType::I64 => "i8",
        ScalarType::Bool => "b1",
        ScalarType::Bf16 => return None,
    })
}

/// Reads `path` as input `name` of `dtype` and `shape`.
pub fn read(
    path: &Path,
    name: &str,
    dtype: ScalarType,
    shape: &[usize],
) -> Result<HostBuffer, CliError> {
    let at =
        |why: String| -> CliError { format!("{} (input `{name}`): {why}", path.display()).into() };
    let file = std::fs::File::open(path).map_err(|e| at(format!("cannot open: {e}")))?;
    let npy =
        NpyFile::new(BufReader::new(file)).map_err(|e| at(format!("not a .npy file: {e}")))?;
    if npy.order() == Order::Fortran {
        return Err(at(
            "Fortran order; save it in C order (np.ascontiguousarray)".into(),
        ));
    }
    // `descr` is the header's Python literal: `'<f4'`.
    let descr = npy.dtype().descr();
    let found = descr.trim_matches(|c| c == '\'' || c == '"');
    let want = numpy_type(dtype)
        .ok_or_else(|| at(format!("{dtype} has no NumPy dtype; use --inputs random")))?;
    if found.get(1..) != Some(want) {
        return Err(at(format!(
            "dtype {found}, the op takes {dtype} (`{want}`)"
        )));
    }
    let got: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    if got != shape {
        return Err(at(format!("shape {got:?}, the op takes {shape:?}")));
    }
    let truncated = |e: std::io::Error| at(format!("cannot read its data: {e}"));
    let data: Vec<Scalar> = match dtype {
        ScalarType::F16 => npy
            .into_vec::<f16>()
            .map_err(truncated)?
            .into_iter()
            .map(|v| Scalar::F16(v.to_bits()))
            .collect(),
        ScalarType::F32 => npy
            .into_vec::<f32>()
            .map_err(truncated)?
            .into_iter()
            .map(Scalar::f32)
            .collect(),
        ScalarType::F64 => npy
            .into_vec::<f64>()
            .map_err(truncated)?
            .into_iter()
            .map(Scalar::f64)
            .collect(),
        ScalarType::I64 => npy
            .into_vec::<i64>()
            .map_err(truncated)?
            .into_iter()
            .map(Scalar::I64)
            .collect(),
        ScalarType::Bool => npy
            .into_vec::<bool>()
            .map_err(truncated)?
            .into_iter()
            .map(Scalar::Bool)
            .collect(),
        ScalarType::I8 => ints(npy.into_vec::<i8>().map_err(truncated)?, dtype),
        ScalarType::U8 => ints(npy.into_vec::<u8>().map_err(truncated)?, dtype),
        ScalarType::I16 => ints(npy.into_vec::<i16>().map_err(truncated)?, dtype),
        ScalarType::U16 => ints(npy.into_vec::<u16>().map_err(truncated)?, dtype),
        ScalarType::I32 => ints(npy.into_vec::<i32>().map_err(truncated)?, dtype),
        ScalarType::U32 => ints(npy.into_vec::<u32>().map_err(truncated)?, dtype),
        ScalarType::Bf16 => unreachable!("refused above"),
    };
    Ok(HostBuffer::new(dtype, data))
}

fn ints<T: Into<f64>>(values: Vec<T>, dtype: ScalarType) -> Vec<Scalar> {
    values
        .into_iter()
        .map(|v| Scalar::from_f64(dtype, v.into()))
        .collect()
}

/// Writes `buffer` (of `shape`) to `path` through a temporary file renamed into place.
/// Returns the NumPy dtype written.
pub fn write(path: &Path, buffer: &HostBuffer, shape: &[usize]) -> Result<&'static str, CliError> {
    let tmp = path.with_extension(format!("npy.tmp{}", std::process::id()));
    let written = write_to(&tmp, buffer, shape);
    let renamed = written.and_then(|t| {
        std::fs::rename(&tmp, path)
            .map_err(|e| -> CliError { format!("cannot write {}: {e}", path.display()).into() })?;
        Ok(t)
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

fn write_to(path: &Path, buffer: &HostBuffer, shape: &[usize]) -> Result<&'static str, CliError> {
    let fail =
        |e: std::io::Error| -> CliError { format!("cannot write {}: {e}", path.display()).into() };
    let file = std::fs::File::create(path).map_err(fail)?;
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut out = BufWriter::new(file);
    macro_rules! put {
        ($t:ty, $conv:expr, $name:literal) => {{
            let mut w = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&dims)
                .writer(&mut out)
                .begin_nd()
                .map_err(fail)?;
            w.extend(buffer.data.iter().map($conv)).map_err(fail)?;
            w.finish().map_err(fail)?;
            $name
        }};
    }
    let written = match buffer.elem {
        ScalarType::F16 => put!(f16, |s: &Scalar| f16::from_f64(s.to_f64()), "float16"),
        ScalarType::F32 | ScalarType::Bf16 => put!(f32, |s: &Scalar| s.to_f64() as f32, "float32"),
        ScalarType::F64 => put!(f64, |s: &Scalar| s.to_f64(), "float64"),
        ScalarType::I64 => put!(
            i64,
            |s: &Scalar| match *s {
                Scalar::I64(v) => v,
                other => other.to_f64() as i64,
            },
            "int64"
        ),
        ScalarType::Bool => put!(bool, |s: &Scalar| s.to_f64() != 0.0, "bool"),
        ScalarType::I8 => put!(i8, |s: &Scalar| s.to_f64() as i8, "int8"),
        ScalarType::U8 => put!(u8, |s: &Scalar| s.to_f64() as u8, "uint8"),
        ScalarType::I16 => put!(i16, |s: &Scalar| s.to_f64() as i16, "int16"),
        ScalarType::U16 => put!(u16, |s: &Scalar| s.to_f64() as u16, "uint16"),
        ScalarType::I32 => put!(i32, |s: &Scalar| s.to_f64() as i32, "int32"),
        ScalarType::U32 => put!(u32, |s: &Scalar| s.to_f64() as u32, "uint32"),
    };
    use std::io::Write;
    out.flush().map_err(fail)?;
    Ok(written)
}
