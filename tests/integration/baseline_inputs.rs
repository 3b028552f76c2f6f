//! The PyTorch baselines see exactly the kernels' inputs and judge them by the same
//! metrics. `kernels/baselines/torch_sdpa.py` and `torch_rmsnorm.py` (the workloads'
//! modules `torch_baselines.py` runs) never draw inputs: they read the files
//! `repro exec --dump-inputs` writes. Checked here without a GPU or torch (python3 with
//! numpy): for every input recipe, the arrays the script's own loader returns hash equal
//! to the ones the workload's `Case::generate` makes in process, the dequantized K/V files
//! equal an independent numpy decoding of the E4M3 codes times the scales, and the script's
//! `accuracy()` (`baselines_common.py`) gives the numbers `workload::accuracy::Accuracy` gives.

use crate::common;

use repro::workload::accuracy::Accuracy;
use repro::workload::exprs::Compiled;
use repro::workload::generators::attention::Recipe;
use repro::workload::inputs::{ArgData, Case};
use repro::workload::{Declaration, Workloads};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

const PIPELINE: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    tiny: {B: 1, H: 2, S: 40, D: 64}
  primary: tiny
  seeds: [0, 3]
  inputs:
    tiny: [gaussian, outliers, sharp, sink, e4m3-edge]
stages:
  noop: {uses: cmd, run: ["true"]}
"#;

/// The built-in attention workload of [`PIPELINE`].
fn declaration() -> Declaration {
    let p: repro::pipeline::Pipeline = serde_yaml::from_str(PIPELINE).unwrap();
    Workloads::of(&p).get("sdpa_fp8").unwrap().clone()
}

fn python_with_numpy() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sha(bytes: impl IntoIterator<Item = u8>) -> String {
    let v: Vec<u8> = bytes.into_iter().collect();
    repro::tools::hex(&Sha256::digest(&v))
}

/// Run `code` with the baselines' modules importable (`torch_sdpa`, `baselines_common`, ...);
/// its stdout as JSON.
fn python(code: &str, args: &[&Path]) -> serde_json::Value {
    let script_dir = common::source_root().join("kernels/baselines");
    common::stdout_json(
        Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import sys; sys.path.insert(0, {:?})\n{code}",
                script_dir.display().to_string()
            ))
            .args(args),
    )
}

const LOAD_AND_HASH: &str = r#"
import hashlib, json, os
import numpy as np
import torch_sdpa
folder = sys.argv[1]
index = json.load(open(os.path.join(folder, "index.json")))

def e4m3(codes):
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 0xF, c & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (8 + m) * np.exp2(e - 10.0))
    mag = np.where((e == 0xF) & (m == 7), np.nan, mag)
    return np.where(c & 0x80, -mag, mag)

out = {}
for e in index["entries"]:
    dims, (q, k, v), _ = torch_sdpa.load_case(np, folder, e)
    d = os.path.join(folder, e["dir"])
    heads = dims["B"] * dims["H"]
    mismatches = 0
    for name, deq in (("k", k), ("v", v)):
        codes = np.fromfile(os.path.join(d, name + ".e4m3"), dtype=np.uint8)
        scale = np.fromfile(os.path.join(d, name + "_scale.fp32"), dtype="<f4")
        mine = (e4m3(codes).astype(np.float32).reshape(heads, -1) * scale[:, None]).astype(np.float32)
        mismatches += int((mine.reshape(-1).view(np.uint32) != deq.reshape(-1).view(np.uint32)).sum())
    out[e["dir"]] = {"inputs": e["inputs"], "seed": e["seed"], "timed": e["timed"],
                     "q": hashlib.sha256(q.astype("<f2").tobytes()).hexdigest(),
                     "k": hashlib.sha256(k.astype("<f4").tobytes()).hexdigest(),
                     "v": hashlib.sha256(v.astype("<f4").tobytes()).hexdigest(),
                     "mismatches": mismatches}
print(json.dumps(out))
"#;

#[test]
fn the_baseline_loads_exactly_the_inputs_repro_generates_for_every_recipe() {
    if !python_with_numpy() {
        common::say_skipped("python3 with numpy is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    let dump = dir.path().join("dump");
    let status = Command::new(common::repro_bin())
        .arg("-f")
        .arg(dir.path().join("pipeline.yaml"))
        .args(["exec", "--dump-inputs"])
        .arg(&dump)
        .status()
        .unwrap();
    assert!(status.success());
    let seen = python(LOAD_AND_HASH, &[&dump]);
    let seen = seen.as_object().unwrap();
    assert_eq!(seen.len(), Recipe::ALL.len() * 2, "every recipe × seed");
    let decl = declaration();
    let c = Compiled::new("sdpa_fp8", &decl, &[]).unwrap();
    for recipe in Recipe::ALL {
        for seed in [0, 3] {
            let key = format!("tiny-{recipe}-seed{seed}");
            let entry = &seen[&key];
            let x = Case::generate(&c, "tiny", recipe.name(), seed).unwrap();
            let f32s = |v: Vec<f64>| sha(v.into_iter().flat_map(|x| (x as f32).to_le_bytes()));
            let ArgData::Input { bytes: q, .. } = &x.args[0] else {
                panic!("q is an input")
            };
            assert_eq!(entry["inputs"], recipe.name());
            assert_eq!(entry["timed"], recipe == Recipe::Gaussian, "{key}");
            assert_eq!(entry["q"], sha(q.iter().copied()), "{key}: Q");
            assert_eq!(entry["k"], f32s(x.values(&decl, 1)), "{key}: K");
            assert_eq!(entry["v"], f32s(x.values(&decl, 2)), "{key}: V");
            assert_eq!(
                entry["mismatches"], 0,
                "{key}: k.f32/v.f32 ≠ decode(codes)·scale"
            );
        }
    }
}

const ACCURACY: &str = r#"
import json
import numpy as np
import baselines_common
shape = tuple(json.loads(sys.argv[3]))
out = np.fromfile(sys.argv[1], dtype="<f8").reshape(shape)
ref = np.fromfile(sys.argv[2], dtype="<f8").reshape(shape)
gates = {"max_abs_err": 0.06, "mean_abs_err": 0.02, "max_pct_bad": 1.0,
         "max_err_over_ref_std": 0.02, "max_rel_l2_err": 0.002}
print(json.dumps(baselines_common.accuracy(np, out, ref, gates)))
"#;

#[test]
fn the_baselines_metrics_match_repros() {
    if !python_with_numpy() {
        common::say_skipped("python3 with numpy is not installed");
        return;
    }
    // Any values of attention's shape will do as the reference: Q of the outliers recipe.
    let decl = declaration();
    let c = Compiled::new("sdpa_fp8", &decl, &[]).unwrap();
    let reference = Case::generate(&c, "tiny", "outliers", 2)
        .unwrap()
        .values(&decl, 0);
    // A perturbed output: a ramp of small errors, one large one in head 1, a NaN and an Inf.
    let mut out: Vec<f64> = reference
        .iter()
        .enumerate()
        .map(|(i, r)| r + 1e-4 * ((i % 17) as f64 - 8.0))
        .collect();
    let (s, d) = (40, 64);
    let head = s * d;
    out[head + 5] += 0.3;
    out[7] = f64::NAN;
    out[head + 9] = f64::INFINITY;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &[f64]| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        path
    };
    let (o, r) = (write("out.f64", &out), write("ref.f64", &reference));
    let py = python(ACCURACY, &[&o, &r, Path::new("[1, 2, 40, 64]")]);
    let rust = Accuracy::measure(&out, &reference, 0.06, (s, d));
    let close = |key: &str, mine: f64| {
        let theirs = py[key].as_f64().unwrap();
        assert!(
            (theirs - mine).abs() <= 1e-12 * mine.abs().max(1.0),
            "{key}: python {theirs} vs rust {mine}"
        );
    };
    close("max_abs_err", rust.max_abs_err);
    close("mean_abs_err", rust.mean_abs_err);
    close("pct_bad", rust.pct_bad);
    close("rel_l2_err", rust.rel_l2_err);
    close("max_err_over_ref_std", rust.max_err_over_ref_std);
    assert_eq!(py["nan_count"], rust.nan_count);
    assert_eq!(py["inf_count"], rust.inf_count);
    assert_eq!(py["correctness_pass"], false);
    assert!(rust.max_err_over_ref_std > 0.02, "{rust:?}");
}

const LOAD_RMSNORM: &str = r#"
import hashlib, json, os
import numpy as np
import torch_rmsnorm
folder = sys.argv[1]
index = json.load(open(os.path.join(folder, "index.json")))
out = {}
for e in index["entries"]:
    case, x, weight, eps = torch_rmsnorm.case_inputs(np, os.path.join(folder, e["dir"]))
    out[e["dir"]] = {"inputs": e["inputs"], "timed": e["timed"], "shape": list(x.shape),
                     "x": hashlib.sha256(x.astype("<f2").tobytes()).hexdigest(),
                     "weight": hashlib.sha256(weight.astype("<f2").tobytes()).hexdigest(),
                     "eps": eps}
print(json.dumps(out))
"#;

/// `kernels/baselines/torch_rmsnorm.py`'s loader, on the shipped RMSNorm workload's
/// `ragged` cases from `repro exec --dump-inputs --workload rmsnorm`: the same x and weight
/// bytes as `Case::generate`, and the kernel's eps.
#[test]
fn the_rmsnorm_baseline_loads_exactly_the_inputs_repro_generates() {
    if !python_with_numpy() {
        common::say_skipped("python3 with numpy is not installed");
        return;
    }
    let root = common::source_root();
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let status = Command::new(common::repro_bin())
        .arg("-f")
        .arg(root.join("pipeline.yaml"))
        .args([
            "exec",
            "--workload",
            "rmsnorm",
            "--shape",
            "ragged",
            "--seed",
            "1",
        ])
        .arg("--dump-inputs")
        .arg(&dump)
        .status()
        .unwrap();
    assert!(status.success());
    let seen = python(LOAD_RMSNORM, &[&dump]);
    let p: repro::pipeline::Pipeline =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("pipeline.yaml")).unwrap())
            .unwrap();
    let decl = &p.workloads["rmsnorm"];
    let c = Compiled::new("rmsnorm", decl, &[]).unwrap();
    let recipes = decl.recipes_of("ragged");
    let dims = &decl.shapes["ragged"];
    let (rows, hidden) = (dims["rows"], dims["hidden"]);
    assert_eq!(seen.as_object().unwrap().len(), recipes.len());
    for (i, recipe) in recipes.into_iter().enumerate() {
        let key = format!("ragged-{recipe}-seed1");
        let entry = &seen[&key];
        let case = Case::generate(&c, "ragged", recipe, 1).unwrap();
        let bytes = |i: usize| match &case.args[i] {
            ArgData::Input { bytes, .. } => sha(bytes.iter().copied()),
            other => panic!("argument {i} is not an input: {other:?}"),
        };
        assert_eq!(entry["inputs"], recipe, "{key}");
        assert_eq!(entry["timed"], i == 0, "{key}");
        assert_eq!(entry["shape"], serde_json::json!([rows, hidden]), "{key}");
        assert_eq!(entry["x"], bytes(0), "{key}: x");
        assert_eq!(entry["weight"], bytes(1), "{key}: weight");
        assert!(
            (entry["eps"].as_f64().unwrap() - 1e-6).abs() < 1e-12,
            "{key}"
        );
    }
}
