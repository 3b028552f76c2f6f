//! One case on disk, for a reference command (`reference: {run: [...]}`) or a baseline
//! script: what `repro` writes, and what it reads back.
//!
//! The command is run as `run... --case CASE --out OUT`. `CASE/case.json` names the
//! workload, shape, recipe, seed and dimensions, and lists the arguments in ABI order
//! (name, dtype, role, extents; a scalar's `value` as the kernel receives it; an input's `file`, its raw
//! little-endian bytes in `CASE`; a quantized input's `values`, the dequantized values as
//! f32). The command writes each output's expected values to `OUT/<name>.f64` (or `.f32`),
//! little-endian, row-major.

use super::dtype::Dtype;
use super::inputs::{ArgData, Case};
use super::spec::{Declaration, Role};
use serde::Serialize;
use std::path::Path;

#[derive(Serialize)]
struct CaseFile<'a> {
    workload: &'a str,
    shape: &'a str,
    recipe: &'a str,
    seed: u64,
    dims: &'a super::exprs::Bindings,
    args: Vec<ArgEntry<'a>>,
}

#[derive(Serialize)]
struct ArgEntry<'a> {
    name: &'a str,
    dtype: &'static str,
    role: &'static str,
    #[serde(skip_serializing_if = "<[usize]>::is_empty")]
    extents: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
}

/// Write `case` of workload `name` into the folder `dir` (created).
pub fn write(dir: &Path, name: &str, decl: &Declaration, case: &Case) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let put = |file: &str, bytes: &[u8]| {
        let path = dir.join(file);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    let mut args = Vec::new();
    for (i, (a, data)) in decl.args.iter().zip(&case.args).enumerate() {
        let mut entry = ArgEntry {
            name: &a.name,
            dtype: a.dtype.name(),
            role: a.role.name(),
            extents: data.extents(),
            file: None,
            values: None,
            value: None,
        };
        match data {
            ArgData::Input {
                bytes, quantized, ..
            } => {
                let file = format!("{}.{}", a.name, a.dtype);
                put(&file, bytes)?;
                entry.file = Some(file);
                if quantized.is_some() {
                    let values = format!("{}.f32", a.name);
                    put(&values, &Dtype::Fp32.encode(&case.values(decl, i)))?;
                    entry.values = Some(values);
                }
            }
            ArgData::Output { .. } => {}
            // The value as the kernel receives it (eps 1e-6 as an fp32 is 9.99999997e-7).
            ArgData::Scalar { bytes, .. } => entry.value = Some(a.dtype.decode(bytes)[0]),
        }
        args.push(entry);
    }
    let file = CaseFile {
        workload: name,
        shape: &case.shape,
        recipe: &case.recipe,
        seed: case.seed,
        dims: &case.dims,
        args,
    };
    put("case.json", repro_schema::to_json_pretty(&file).as_bytes())
}

/// The expected values of every output of `case`, in ABI order, from the folder `out` a
/// reference command wrote. `Err` names the file and what is wrong with it.
pub fn read_expected(out: &Path, decl: &Declaration, case: &Case) -> Result<Vec<Vec<f64>>, String> {
    decl.args
        .iter()
        .zip(&case.args)
        .filter(|(a, _)| a.role == Role::Output)
        .map(|(a, data)| {
            let n = data.numel();
            let f64_path = out.join(format!("{}.f64", a.name));
            let f32_path = out.join(format!("{}.f32", a.name));
            let (path, width) = if f64_path.exists() {
                (f64_path, 8)
            } else {
                (f32_path, 4)
            };
            let bytes = std::fs::read(&path).map_err(|e| {
                format!(
                    "the reference command wrote no {} ({e}); it must write `{}.f64` or `{}.f32` into its --out folder",
                    path.display(),
                    a.name,
                    a.name
                )
            })?;
            if bytes.len() != n * width {
                return Err(format!(
                    "{} holds {} bytes; output `{}` has {n} elements of {width} bytes",
                    path.display(),
                    bytes.len(),
                    a.name
                ));
            }
            Ok(bytes
                .chunks_exact(width)
                .map(|b| match width {
                    8 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
                    _ => f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
                })
                .collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::compare::check_case;
    use crate::workload::exprs::Compiled;
    use crate::{
        workload::testing::attention, workload::testing::rmsnorm, workload::testing::source_root,
    };

    #[test]
    fn writes_the_case_a_command_reads() {
        let decl = attention();
        let c = Compiled::new("attention", &decl, &[]).unwrap();
        let case = Case::generate(&c, "small", "sharp", 1).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "attention", &decl, &case).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("case.json")).unwrap()).unwrap();
        assert_eq!(json["recipe"], "sharp");
        assert_eq!(json["dims"]["S"], 40);
        assert_eq!(json["args"][1]["file"], "k.e4m3");
        assert_eq!(json["args"][1]["values"], "k.f32");
        assert_eq!(json["args"][5]["role"], "output");
        assert!(json["args"][5].get("file").is_none());
        assert_eq!(json["args"][9]["value"], 0.125);
        let size = |f: &str| std::fs::metadata(dir.path().join(f)).unwrap().len();
        assert_eq!(
            (size("q.fp16"), size("k.e4m3"), size("k.f32")),
            (30720, 15360, 61440)
        );
        assert_eq!(size("k_scale.fp32"), 24);
    }

    #[test]
    fn reading_expected_outputs_names_the_missing_or_short_file() {
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let case = Case::generate(&c, "small", "gaussian", 0).unwrap();
        let out = tempfile::tempdir().unwrap();
        let err = read_expected(out.path(), &decl, &case).unwrap_err();
        assert!(
            err.contains("y.f32") && err.contains("`y.f64` or `y.f32`"),
            "{err}"
        );
        std::fs::write(out.path().join("y.f32"), [0u8; 12]).unwrap();
        let err = read_expected(out.path(), &decl, &case).unwrap_err();
        assert!(
            err.ends_with("holds 12 bytes; output `y` has 4096 elements of 4 bytes"),
            "{err}"
        );
        std::fs::write(out.path().join("y.f64"), 1.5f64.to_le_bytes().repeat(4096)).unwrap();
        assert_eq!(
            read_expected(out.path(), &decl, &case).unwrap()[0][4095],
            1.5
        );
    }

    /// kernels/rmsnorm/reference.py, the command form of the RMSNorm reference, run on a
    /// case: its outputs pass the gates against repro's own f64 computation.
    #[test]
    fn the_rmsnorm_reference_script_agrees_with_the_cpu() {
        if !crate::workload::testing::python3_or_skip(
            "the_rmsnorm_reference_script_agrees_with_the_cpu",
        ) {
            return;
        }
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let case = Case::generate(&c, "ragged", "offset", 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (case_dir, out_dir) = (dir.path().join("case"), dir.path().join("out"));
        write(&case_dir, "rmsnorm", &decl, &case).unwrap();
        let status = std::process::Command::new("python3")
            .arg(source_root().join("kernels/rmsnorm/reference.py"))
            .arg("--case")
            .arg(&case_dir)
            .arg("--out")
            .arg(&out_dir)
            .status()
            .unwrap();
        assert!(status.success());
        let expected = read_expected(&out_dir, &decl, &case).unwrap();
        let (x, w) = (case.values(&decl, 0), case.values(&decl, 1));
        let mine: Vec<f64> = x
            .chunks(1001)
            .flat_map(|row| {
                let inv =
                    1.0 / (row.iter().map(|v| v * v).sum::<f64>() / 1001.0 + 1e-6f32 as f64).sqrt();
                row.iter()
                    .zip(&w)
                    .map(move |(v, w)| v * inv * w)
                    .collect::<Vec<_>>()
            })
            .collect();
        let max = expected[0]
            .iter()
            .zip(&mine)
            .map(|(a, b)| (a - b).abs())
            .fold(0f64, f64::max);
        assert!(max < 1e-12, "script vs CPU: {max}");
        let checks = check_case(&decl, &case, &[mine], &expected, None);
        assert!(checks[0].pass() && checks[0].accuracy.max_abs_err < 1e-12);
    }
}
