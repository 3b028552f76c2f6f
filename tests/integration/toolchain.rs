//! The pinned toolchain through the real `repro` binary: `repro toolchain` says which nvcc
//! is in use and where it came from; the lock records it and another nvcc makes the build
//! stale with a `repro status` line that names both; `repro toolchain install` refuses bad
//! versions. With `REPRO_TOOLCHAIN_INSTALL_TESTS=1` (needs PyPI), a pinned `repro run` on a
//! machine without nvcc installs NVIDIA's wheels into a temporary cache and builds with them.

use crate::common;
use crate::fake_python;

use crate::common::{skipped, Need};
use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// An nvcc stand-in in `dir` reporting `version`: it writes a cubin and a one-entry ptxas
/// report for entry `k`.
fn fake_nvcc(dir: &Path, version: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let release = version.rsplit_once('.').unwrap().0;
    let path = dir.join("nvcc");
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release {release}, V{version}"; exit 0; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo cubin > "$out"
echo "ptxas info    : Compiling entry function 'k' for 'sm_90'" >&2
echo "ptxas info    : Used 10 registers, used 0 barriers" >&2
"#
        ),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    path
}

const PINNED: &str = "version: 1
arch: sm_90
toolchain: {nvcc: 13.0.88}
kernels:
  k: {source: k.cu, entry: k}
variants:
  v: {kernel: k}
stages:
  build: {uses: build}
";

/// A project with `k.cu` and `pipeline`, and a private toolchain cache.
fn project(pipeline: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), pipeline).unwrap();
    std::fs::write(
        dir.path().join("k.cu"),
        "extern \"C\" __global__ void k() {}\n",
    )
    .unwrap();
    dir
}

/// `repro` in `dir` with `PATH` = `path` (then the system folders) and no CUDA variables.
fn repro(dir: &Path, path: &[&Path]) -> Command {
    let mut dirs: Vec<PathBuf> = path.iter().map(|p| p.to_path_buf()).collect();
    dirs.extend([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
    repro_with_path(dir, std::env::join_paths(dirs).unwrap())
}

/// `repro` in `dir` with this `PATH`, no CUDA variables, and the toolchain cache in `dir`.
fn repro_with_path(dir: &Path, path: std::ffi::OsString) -> Command {
    let mut cmd = Command::new(common::repro_bin());
    cmd.current_dir(dir)
        .env("PATH", path)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH");
    cmd
}

/// Run `cmd`: its exit code, and its stdout then stderr.
fn output(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// Whether a system toolkit sits at the fixed location, which no variable can hide.
fn fixed_location_has_nvcc() -> bool {
    Path::new("/usr/local/cuda/bin/nvcc").exists()
}

#[test]
fn toolchain_shows_the_pin_what_is_used_and_where_it_came_from() {
    let dir = project(PINNED);
    let old = fake_nvcc(&dir.path().join("old"), "12.4.131");
    let home = dir.path().join("cuda");
    let pinned = fake_nvcc(&home.join("bin"), "13.0.88");
    let (code, t) = output(
        repro(dir.path(), &[&dir.path().join("old")])
            .env("CUDA_HOME", &home)
            .arg("toolchain"),
    );
    assert_eq!(code, Some(0), "{t}");
    assert!(
        t.contains("pinned:     nvcc 13.0.88 (`toolchain:` in pipeline.yaml)"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "in use:     nvcc 13.0.88 from $CUDA_HOME: {}",
            pinned.display()
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "also found: nvcc 12.4.131 from PATH: {} (not the pinned version)",
            old.display()
        )),
        "{t}"
    );

    if fixed_location_has_nvcc() {
        skipped(
            Need::Other,
            "/usr/local/cuda/bin/nvcc exists, so 'no nvcc at all' cannot be staged",
        );
        return;
    }
    let (code, t) = output(repro(dir.path(), &[&dir.path().join("old")]).arg("toolchain"));
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("in use:     none"), "{t}");
    assert!(t.contains("found instead: nvcc 12.4.131 from PATH"), "{t}");
    assert!(t.contains("help: run `repro toolchain install`"), "{t}");
}

#[test]
fn the_lock_records_the_toolchain_and_another_nvcc_makes_the_build_stale() {
    let dir = project(&PINNED.replace("toolchain: {nvcc: 13.0.88}\n", ""));
    let first = dir.path().join("v1");
    let second = dir.path().join("v2");
    fake_nvcc(&first, "13.0.88");
    fake_nvcc(&second, "13.1.80");
    let (code, t) = output(repro(dir.path(), &[&first]).args(["run", "-q"]));
    assert_eq!(code, Some(0), "{t}");
    let lock = std::fs::read_to_string(dir.path().join("artifacts/repro.lock")).unwrap();
    assert!(
        lock.contains("nvcc: Cuda compilation tools, release 13.0, V13.0.88"),
        "{lock}"
    );
    let record = std::fs::read_to_string(dir.path().join("artifacts/build/v.json")).unwrap();
    assert!(
        record.contains("\"nvcc_version\": \"Cuda compilation tools, release 13.0, V13.0.88\""),
        "{record}"
    );
    assert!(
        record.contains("\"command\": [\n        \"nvcc\","),
        "{record}"
    );
    assert!(
        !record.contains(&*dir.path().to_string_lossy()),
        "no machine path: {record}"
    );

    let (_, t) = output(repro(dir.path(), &[&first]).arg("status"));
    assert!(t.starts_with("build  up-to-date"), "{t}");
    let (_, t) = output(repro(dir.path(), &[&second]).arg("status"));
    assert!(t.starts_with("build  stale"), "{t}");
    assert!(
        t.contains("tool `nvcc` changed: Cuda compilation tools, release 13.0, V13.0.88 → Cuda compilation tools, release 13.1, V13.1.80")
            || t.contains("tool `nvcc` changed: …13.0, V13.0.88 → …13.1, V13.1.80"),
        "{t}"
    );
}

#[test]
fn install_refuses_what_it_cannot_install() {
    let dir = project(&PINNED.replace("toolchain: {nvcc: 13.0.88}\n", ""));
    let (code, t) = output(repro(dir.path(), &[]).args(["toolchain", "install"]));
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains("pins no nvcc, so there is nothing to install"),
        "{t}"
    );
    assert!(t.contains("`repro toolchain install 13.0.88`"), "{t}");

    let (code, t) = output(repro(dir.path(), &[]).args(["toolchain", "install", "13.0"]));
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains("`13.0` is not an nvcc version; expected major.minor.patch"),
        "{t}"
    );

    let (code, t) = output(repro(dir.path(), &[]).args(["toolchain", "install", "12.4.131"]));
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("no NVIDIA wheel set for nvcc 12.4.131"), "{t}");
    assert!(!dir
        .path()
        .join("cache/repro/toolchains/nvcc-12.4.131")
        .exists());
}

#[test]
fn a_run_installs_the_pinned_nvcc_before_fingerprinting_and_status_never_installs() {
    if fixed_location_has_nvcc() {
        skipped(
            Need::Other,
            "/usr/local/cuda/bin/nvcc exists, so 'no nvcc here' cannot be staged",
        );
        return;
    }
    let dir = project(PINNED);
    let template = fake_nvcc(&dir.path().join("template"), "13.0.88");
    let python = fake_python::fake_python(dir.path(), &template);
    let slot = dir.path().join("cache/repro/toolchains/nvcc-13.0.88");
    let repro = || {
        let mut cmd = repro(dir.path(), &[]);
        cmd.env("REPRO_PYTHON", &python);
        cmd
    };

    let (_, t) = output(repro().arg("status"));
    assert!(t.starts_with("build  never-run"), "{t}");
    let (code, t) = output(repro().args(["run", "--dry-run"]));
    assert_eq!(code, Some(0), "{t}");
    assert!(!slot.exists(), "status and dry runs never install: {t}");

    let (code, t) = output(repro().arg("run"));
    assert_eq!(code, Some(0), "{t}");
    assert!(
        t.contains("installing nvcc 13.0.88 (NVIDIA's CUDA 13.0.2 wheels) into"),
        "{t}"
    );
    assert!(
        t.contains("pip: Collecting nvidia-cuda-nvcc==13.0.88"),
        "{t}"
    );
    assert!(slot.join("repro-toolchain.json").is_file());
    let lock = std::fs::read_to_string(dir.path().join("artifacts/repro.lock")).unwrap();
    assert!(
        lock.contains("nvcc: Cuda compilation tools, release 13.0, V13.0.88"),
        "{lock}"
    );
    // The fingerprint was taken after the install: nothing is stale now.
    let (_, t) = output(repro().arg("status"));
    assert!(t.starts_with("build  up-to-date"), "{t}");
    let (_, t) = output(repro().arg("toolchain"));
    assert!(
        t.contains("in use:     nvcc 13.0.88 from repro's toolchain cache"),
        "{t}"
    );
}

/// PATH without any folder that holds an nvcc.
fn path_without_nvcc() -> Vec<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|d| !d.join("nvcc").exists())
        .collect()
}

#[test]
fn a_pinned_run_installs_the_wheels_into_the_cache_and_builds_with_them() {
    if std::env::var("REPRO_TOOLCHAIN_INSTALL_TESTS").as_deref() != Ok("1") {
        skipped(
            Need::Network,
            "a_pinned_run_installs_the_wheels_into_the_cache_and_builds_with_them installs from PyPI; set REPRO_TOOLCHAIN_INSTALL_TESTS=1",
        );
        return;
    }
    if fixed_location_has_nvcc() {
        skipped(
            Need::Other,
            "/usr/local/cuda/bin/nvcc exists, so 'no nvcc here' cannot be staged",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fixtures = common::source_root().join("tests/fixtures/cuda");
    std::fs::copy(fixtures.join("multi.cu"), dir.path().join("multi.cu")).unwrap();
    std::fs::write(
        dir.path().join("pipeline.yaml"),
        PINNED
            .replace(
                "{source: k.cu, entry: k}",
                "{source: multi.cu, entry: scale_kernel}",
            )
            .replace("v: {kernel: k}", "v: {kernel: k, defines: {SCALE: 2}}"),
    )
    .unwrap();
    let path = std::env::join_paths(path_without_nvcc()).unwrap();
    let run = |args: &[&str]| output(repro_with_path(dir.path(), path.clone()).args(args));
    let (code, t) = run(&["run"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(
        t.contains("installing nvcc 13.0.88 (NVIDIA's CUDA 13.0.2 wheels)"),
        "{t}"
    );
    let slot = dir.path().join("cache/repro/toolchains/nvcc-13.0.88");
    assert!(slot.join("repro-toolchain.json").is_file());
    let lock = std::fs::read_to_string(dir.path().join("artifacts/repro.lock")).unwrap();
    assert!(
        lock.contains("nvcc: Cuda compilation tools, release 13.0, V13.0.88"),
        "{lock}"
    );
    let cubin = std::fs::read(dir.path().join(".repro/cubins/v.sm_90.cubin")).unwrap();
    assert_eq!(&cubin[..4], b"\x7fELF");

    let (code, t) = run(&["toolchain"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(
        t.contains("in use:     nvcc 13.0.88 from repro's toolchain cache"),
        "{t}"
    );
    let (code, t) = run(&["run"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(!t.contains("installing"), "installed once: {t}");
}
