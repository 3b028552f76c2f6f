//! Installing nvcc from NVIDIA's PyPI wheels into the toolchain cache: `python3 -m venv`
//! in a temporary folder beside the slot, `pip install` of the wheel set [`wheels`] names,
//! a check that the nvcc it brought reports the pinned version, the [`MARKER`] file, then a
//! rename into place. A half-finished install (interrupted, failed, or racing another
//! `repro`) never occupies the slot; the next install removes what a dead one left.

use super::cache::{self, Installed, MARKER};
use super::version::NvccVersion;
use super::wheels;
use anyhow::Context;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// How to install: the cache folder and the python that creates the virtual environment.
#[derive(Debug, Clone)]
pub struct Installer {
    pub dir: PathBuf,
    /// `python3` unless `REPRO_PYTHON` names another.
    pub python: PathBuf,
}

impl Installer {
    /// The per-user cache and `$REPRO_PYTHON` (default `python3`).
    pub fn from_env() -> anyhow::Result<Installer> {
        Ok(Installer {
            dir: cache::default_dir().context(
                "cannot place the toolchain cache: neither XDG_CACHE_HOME nor HOME is set",
            )?,
            python: std::env::var_os("REPRO_PYTHON")
                .map_or_else(|| PathBuf::from("python3"), PathBuf::from),
        })
    }

    /// Install nvcc `v` unless a finished install is there; return its nvcc. `say` gets
    /// one line per step (what pip is downloading and installing).
    pub fn install(&self, v: &NvccVersion, say: &dyn Fn(&str)) -> anyhow::Result<PathBuf> {
        if let Some(nvcc) = cache::installed_nvcc(&self.dir, v) {
            return Ok(nvcc);
        }
        let Some(reqs) = wheels::requirements(v) else {
            anyhow::bail!(
                "repro knows no NVIDIA wheel set for nvcc {v}; it can install {}\n  help: pin one \
                 of those in pipeline.yaml (`toolchain: {{nvcc: ...}}`), or install the CUDA \
                 toolkit with nvcc {v} and set CUDA_HOME to it",
                wheels::known().join(", ")
            );
        };
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        remove_abandoned(&self.dir, v);
        let tmp = self
            .dir
            .join(format!(".nvcc-{v}.tmp-{}", std::process::id()));
        let result = self.fill(&tmp, v, &reqs, say);
        let nvcc = match result {
            Ok(nvcc) => nvcc,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let slot = cache::slot(&self.dir, v);
        if slot.exists() && cache::installed_nvcc(&self.dir, v).is_none() {
            // Not ours: a slot is only ever made by a rename of a finished install.
            let _ = std::fs::remove_dir_all(&slot);
        }
        match std::fs::rename(&tmp, &slot) {
            Ok(()) => Ok(slot.join(nvcc)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                // Another repro finished first: use its install.
                cache::installed_nvcc(&self.dir, v).with_context(|| {
                    format!("cannot move the install into {}: {e}", slot.display())
                })
            }
        }
    }

    /// Build a finished install of `v` in `tmp`; returns nvcc's path relative to it.
    fn fill(
        &self,
        tmp: &Path,
        v: &NvccVersion,
        reqs: &[String],
        say: &dyn Fn(&str),
    ) -> anyhow::Result<PathBuf> {
        if tmp.exists() {
            std::fs::remove_dir_all(tmp)
                .with_context(|| format!("cannot remove {}", tmp.display()))?;
        }
        say(&format!(
            "installing nvcc {v} (NVIDIA's CUDA {} wheels) into {}",
            wheels::cuda_release(v).unwrap_or("?"),
            cache::slot(&self.dir, v).display()
        ));
        let venv = std::process::Command::new(&self.python)
            .args(["-m", "venv"])
            .arg(tmp)
            .output()
            .with_context(|| {
                format!(
                    "cannot run {}: installing nvcc needs python3 with pip (or set CUDA_HOME to a CUDA toolkit)",
                    self.python.display()
                )
            })?;
        anyhow::ensure!(
            venv.status.success(),
            "`{} -m venv` failed: {}\n  help: install python3's venv module (Debian/Ubuntu: \
             `apt install python3-venv`), or set CUDA_HOME to a CUDA toolkit with nvcc {v}",
            self.python.display(),
            String::from_utf8_lossy(&venv.stderr).trim()
        );
        let mut args: Vec<String> = [
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
        ]
        .map(String::from)
        .into();
        args.extend(reqs.iter().cloned());
        let reader = duct::cmd(tmp.join("bin/python"), &args)
            .stderr_to_stdout()
            .unchecked()
            .reader()
            .context("cannot start pip in the new virtual environment")?;
        let mut output = Vec::new();
        for line in std::io::BufReader::new(&reader).lines() {
            let line = line.context("cannot read pip's output")?;
            if let Some(step) = progress_step(&line) {
                say(&step);
            }
            output.push(line);
        }
        let status = reader
            .try_wait()
            .context("pip did not finish")?
            .map(|o| o.status.success());
        if status != Some(true) {
            let tail = output[output.len().saturating_sub(15)..].join("\n");
            anyhow::bail!(
                "pip could not install nvcc {v} ({}):\n{tail}\n  help: pip needs to reach \
                 PyPI (or the index in PIP_INDEX_URL); run `repro toolchain install` again once \
                 it can, or set CUDA_HOME to a CUDA toolkit with nvcc {v}",
                reqs.join(" ")
            );
        }
        let nvcc = find_nvcc(tmp).with_context(|| {
            format!(
                "pip installed {} but no nvcc is among the files",
                reqs.join(" ")
            )
        })?;
        let rel = nvcc.strip_prefix(tmp).unwrap_or(&nvcc).to_path_buf();
        let out = std::process::Command::new(&nvcc)
            .arg("--version")
            .output()
            .with_context(|| format!("cannot run the installed {}", nvcc.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let got = text.lines().find_map(NvccVersion::from_release_line);
        anyhow::ensure!(
            out.status.success() && got == Some(*v),
            "the installed nvcc reports {} instead of {v}:\n{}",
            got.map_or("no version".into(), |g| g.to_string()),
            text.trim()
        );
        let marker = Installed {
            nvcc_version: *v,
            nvcc: rel.clone(),
            wheels: reqs.to_vec(),
            installed_utc: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        };
        std::fs::write(
            tmp.join(MARKER),
            serde_json::to_string_pretty(&marker)? + "\n",
        )
        .with_context(|| format!("cannot write {}", tmp.join(MARKER).display()))?;
        Ok(rel)
    }
}

/// The line to show for one line of pip's output, if it marks a step.
fn progress_step(line: &str) -> Option<String> {
    let line = line.trim();
    [
        "Collecting ",
        "Downloading ",
        "Using cached ",
        "Installing collected packages",
    ]
    .iter()
    .any(|p| line.starts_with(p))
    .then(|| format!("pip: {line}"))
}

/// `lib/python3.*/site-packages/nvidia/cu13/bin/nvcc` inside the environment.
fn find_nvcc(venv: &Path) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
}

/// Remove temporary folders of installs of `v` whose process is gone.
fn remove_abandoned(dir: &Path, v: &NvccVersion) {
    let prefix = format!(".nvcc-{v}.tmp-");
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: kill takes integers only and touches no memory; signal 0 sends nothing,
        // it only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fake_nvcc_version;

    /// An installer whose python "installs" an nvcc reporting `nvcc_version`.
    fn installer(dir: &Path, nvcc_version: &str) -> Installer {
        let template = dir.join("template");
        std::fs::create_dir_all(&template).unwrap();
        let nvcc = fake_nvcc_version(&template, nvcc_version);
        Installer {
            dir: dir.join("toolchains"),
            python: crate::test_fake_python::fake_python(dir, &nvcc),
        }
    }

    fn pin() -> NvccVersion {
        "13.0.88".parse().unwrap()
    }

    #[test]
    fn installs_once_with_progress_and_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let inst = installer(dir.path(), "13.0.88");
        let lines = std::sync::Mutex::new(Vec::new());
        let say = |l: &str| lines.lock().unwrap().push(l.to_string());
        let nvcc = inst.install(&pin(), &say).unwrap();
        assert_eq!(
            nvcc,
            dir.path()
                .join("toolchains/nvcc-13.0.88/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc")
        );
        let lines = lines.into_inner().unwrap();
        assert!(
            lines[0].starts_with("installing nvcc 13.0.88 (NVIDIA's CUDA 13.0.2 wheels) into "),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"pip: Collecting nvidia-cuda-runtime==13.0.96".to_string()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("pip: Downloading nvidia_cuda_nvcc")),
            "{lines:?}"
        );
        let marker: Installed = serde_json::from_slice(
            &std::fs::read(dir.path().join("toolchains/nvcc-13.0.88").join(MARKER)).unwrap(),
        )
        .unwrap();
        assert_eq!(marker.wheels.len(), 5);
        assert_eq!(cache::installed_nvcc(&inst.dir, &pin()), Some(nvcc.clone()));
        // Nothing temporary is left, and a second install does nothing.
        let names: Vec<_> = std::fs::read_dir(&inst.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["nvcc-13.0.88"]);
        let silent = |l: &str| panic!("nothing to install, yet: {l}");
        assert_eq!(inst.install(&pin(), &silent).unwrap(), nvcc);
    }

    #[test]
    fn a_failed_install_leaves_no_slot_and_says_what_pip_said() {
        let dir = tempfile::tempdir().unwrap();
        let inst = installer(dir.path(), "13.0.88");
        // Left by a process that no longer exists (pid 0x7ffffffe is never a live one here).
        let abandoned = inst.dir.join(".nvcc-13.0.88.tmp-2147483646");
        std::fs::create_dir_all(&abandoned).unwrap();
        std::fs::write(dir.path().join("FAIL_PIP"), "").unwrap();
        let err = inst.install(&pin(), &|_| {}).unwrap_err().to_string();
        assert!(
            err.starts_with("pip could not install nvcc 13.0.88"),
            "{err}"
        );
        assert!(err.contains("No matching distribution"), "{err}");
        assert!(err.contains("run `repro toolchain install` again"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&inst.dir).unwrap().flatten().collect();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(cache::installed_nvcc(&inst.dir, &pin()), None);
    }

    #[test]
    fn an_nvcc_of_another_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = installer(dir.path(), "13.0.48")
            .install(&pin(), &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("reports 13.0.48 instead of 13.0.88"), "{err}");
        assert!(!dir.path().join("toolchains/nvcc-13.0.88").exists());
    }

    #[test]
    fn unknown_versions_and_a_missing_python_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let err = installer(dir.path(), "12.4.131")
            .install(&"12.4.131".parse().unwrap(), &|_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no NVIDIA wheel set for nvcc 12.4.131; it can install 13.0.48, 13.0.88"),
            "{err}"
        );
        let inst = Installer {
            dir: dir.path().join("toolchains"),
            python: dir.path().join("no-python3-here"),
        };
        let err = format!("{:#}", inst.install(&pin(), &|_| {}).unwrap_err());
        assert!(
            err.contains("installing nvcc needs python3 with pip"),
            "{err}"
        );
    }
}
