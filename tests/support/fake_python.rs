//! A stand-in for python3 in toolchain install tests (no network): `-m venv DIR` copies
//! itself to `DIR/bin/python`; `-m pip install REQ...` prints pip's step lines and puts a
//! copy of a given nvcc where NVIDIA's wheels put it (`lib/python3.11/site-packages/
//! nvidia/cu13/bin/nvcc`), or fails as pip does when a file `FAIL_PIP` exists in `dir`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Write the stand-in as `dir/python3`; `nvcc` is the file its pip "installs".
pub fn fake_python(dir: &Path, nvcc: &Path) -> PathBuf {
    let path = dir.join("python3");
    let script = r#"#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0; fi
for r in "$@"; do case "$r" in nvidia-*) echo "Collecting $r";; esac; done
echo "  Downloading nvidia_cuda_nvcc-13.0.88-py3-none-manylinux.whl (40.1 MB)"
[ -e "DIR/FAIL_PIP" ] && { echo "ERROR: No matching distribution found"; exit 1; }
echo "Installing collected packages: nvidia-cuda-nvcc"
bin="$(dirname "$0")/../lib/python3.11/site-packages/nvidia/cu13/bin"
mkdir -p "$bin" && cp "NVCC" "$bin/nvcc"
echo "Successfully installed"
"#
    .replace("DIR", &dir.display().to_string())
    .replace("NVCC", &nvcc.display().to_string());
    std::fs::write(&path, script).unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    path
}
