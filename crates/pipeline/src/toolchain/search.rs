//! Finding nvcc on this machine: `PATH`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`,
//! `/usr/local/cuda/bin`, then repro's cache of installed toolchains. Unpinned, the first
//! nvcc found is used (the cache only when nothing else is there); pinned, the first of
//! the pinned version.

use super::cache;
use super::version::NvccVersion;
use super::{Source, Toolchain};
use repro_base::tools;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where to look for nvcc.
#[derive(Debug, Clone, Default)]
pub struct NvccSearch {
    pub path_var: Option<OsString>,
    pub cuda_home: Option<PathBuf>,
    pub cuda_path: Option<PathBuf>,
    pub fallbacks: Vec<PathBuf>,
    /// repro's toolchain cache (see [`cache`]).
    pub cache: Option<PathBuf>,
}

/// An nvcc found and asked for its version.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub nvcc: PathBuf,
    pub source: Source,
    /// Its `release` line, or why `nvcc --version` failed.
    pub version: Result<String, String>,
}

impl NvccSearch {
    /// This process's environment, with `/usr/local/cuda/bin/nvcc` and the per-user cache.
    pub fn from_env() -> Self {
        NvccSearch {
            path_var: std::env::var_os("PATH"),
            cuda_home: std::env::var_os("CUDA_HOME").map(PathBuf::from),
            cuda_path: std::env::var_os("CUDA_PATH").map(PathBuf::from),
            fallbacks: vec![PathBuf::from("/usr/local/cuda/bin/nvcc")],
            cache: cache::default_dir(),
        }
    }

    /// Every nvcc outside the cache, in search order, each path once.
    fn system(&self, cwd: &Path) -> Vec<(Source, PathBuf)> {
        let mut out: Vec<(Source, PathBuf)> = Vec::new();
        if let Ok(p) = which::which_in("nvcc", self.path_var.as_ref(), cwd) {
            out.push((Source::Path, p));
        }
        for (source, home) in [
            (Source::CudaHome, &self.cuda_home),
            (Source::CudaPath, &self.cuda_path),
        ] {
            if let Some(home) = home {
                out.push((source, home.join("bin/nvcc")));
            }
        }
        out.extend(self.fallbacks.iter().map(|p| (Source::Fixed, p.clone())));
        let mut seen = Vec::new();
        out.retain(|(_, p)| {
            let same = p.canonicalize().unwrap_or_else(|_| p.clone());
            p.is_file() && !seen.contains(&same) && {
                seen.push(same);
                true
            }
        });
        out
    }

    /// Every nvcc this search sees, asked for its version: the system's in search order,
    /// then the cache's, newest first.
    pub fn all(&self, root: &Path) -> Vec<Found> {
        let cached = self
            .cache
            .as_deref()
            .map(cache::installed)
            .unwrap_or_default()
            .into_iter()
            .map(|(_, p)| (Source::Cache, p));
        self.system(root)
            .into_iter()
            .chain(cached)
            .map(|(source, nvcc)| Found {
                version: release_line(root, &nvcc),
                nvcc,
                source,
            })
            .collect()
    }

    /// The nvcc to use: with a pin, the first of that version (a cached install of it
    /// is found without asking it); without, the first found.
    pub fn find(&self, root: &Path, pin: Option<&NvccVersion>) -> Result<Toolchain, NotFound> {
        if let Some(pin) = pin {
            let mut others = Vec::new();
            for (source, nvcc) in self.system(root) {
                let found = Found {
                    version: release_line(root, &nvcc),
                    nvcc,
                    source,
                };
                match &found.version {
                    Ok(line) if NvccVersion::from_release_line(line) == Some(*pin) => {
                        return Ok(Toolchain::new(found.nvcc, line.clone(), found.source))
                    }
                    _ => others.push(found),
                }
            }
            if let Some(nvcc) = self
                .cache
                .as_deref()
                .and_then(|c| cache::installed_nvcc(c, pin))
            {
                let line = release_line(root, &nvcc).map_err(|why| NotFound {
                    pin: Some(*pin),
                    looked: self.looked(),
                    found: vec![Found {
                        nvcc: nvcc.clone(),
                        source: Source::Cache,
                        version: Err(why),
                    }],
                })?;
                return Ok(Toolchain::new(nvcc, line, Source::Cache));
            }
            return Err(NotFound {
                pin: Some(*pin),
                looked: self.looked(),
                found: others,
            });
        }
        let newest_cached = self
            .cache
            .as_deref()
            .and_then(|c| cache::installed(c).into_iter().next())
            .map(|(_, p)| (Source::Cache, p));
        let first = self.system(root).into_iter().next().or(newest_cached);
        match first.map(|(source, nvcc)| (release_line(root, &nvcc), source, nvcc)) {
            Some((Ok(line), source, nvcc)) => Ok(Toolchain::new(nvcc, line, source)),
            other => Err(NotFound {
                pin: None,
                looked: self.looked(),
                found: other
                    .map(|(version, source, nvcc)| Found {
                        nvcc,
                        source,
                        version,
                    })
                    .into_iter()
                    .collect(),
            }),
        }
    }

    /// The places searched, for messages.
    fn looked(&self) -> Vec<String> {
        let mut looked = vec!["PATH".to_string()];
        for (var, val) in [
            ("CUDA_HOME", &self.cuda_home),
            ("CUDA_PATH", &self.cuda_path),
        ] {
            if let Some(v) = val {
                looked.push(format!("${var}/bin ({})", v.join("bin").display()));
            }
        }
        looked.extend(self.fallbacks.iter().map(|p| p.display().to_string()));
        if let Some(c) = &self.cache {
            looked.push(format!("repro's toolchain cache ({})", c.display()));
        }
        looked
    }
}

/// `nvcc --version`'s `release` line (cached under `.repro/cache/tools/`).
fn release_line(root: &Path, nvcc: &Path) -> Result<String, String> {
    tools::probe(root, &nvcc.to_string_lossy(), &["--version"], |l| {
        l.contains("release")
    })
    .map(|t| t.version)
    .ok_or_else(|| format!("`{} --version` failed", nvcc.display()))
}

/// No usable nvcc (of the pinned version, when pinned).
#[derive(Debug, Clone, PartialEq)]
pub struct NotFound {
    pub pin: Option<NvccVersion>,
    pub looked: Vec<String>,
    /// What was found instead (other versions, or an nvcc that would not run).
    pub found: Vec<Found>,
}

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let found: Vec<String> = self
            .found
            .iter()
            .map(|x| match &x.version {
                Ok(line) => format!(
                    "nvcc {} from {} ({})",
                    NvccVersion::from_release_line(line)
                        .map_or_else(|| line.clone(), |v| v.to_string()),
                    x.source,
                    x.nvcc.display()
                ),
                Err(why) => format!("{} from {}: {why}", x.nvcc.display(), x.source),
            })
            .collect();
        match self.pin {
            Some(pin) => write!(
                f,
                "pipeline.yaml pins nvcc {pin} (`toolchain: {{nvcc: {pin}}}`) and none of that \
                 version was found; looked in: {}{}\n  help: run `repro toolchain install` \
                 (installs NVIDIA's nvcc {pin} wheels into repro's per-user cache with pip; \
                 `repro run` does it by itself), or set CUDA_HOME to a CUDA toolkit with nvcc {pin}",
                self.looked.join(", "),
                if found.is_empty() {
                    String::new()
                } else {
                    format!("; found instead: {}", found.join("; "))
                }
            ),
            None => write!(
                f,
                "nvcc (the CUDA compiler) was not found{}; looked in: {}\n  help: run `repro \
                 toolchain install {}` (NVIDIA's nvcc wheels, installed with pip into repro's \
                 per-user cache, no root needed) and pin it in pipeline.yaml with `toolchain: \
                 {{nvcc: {}}}`; or install the CUDA toolkit and set CUDA_HOME to it",
                if found.is_empty() {
                    String::new()
                } else {
                    format!(" in working order ({})", found.join("; "))
                },
                self.looked.join(", "),
                super::RECOMMENDED_NVCC,
                super::RECOMMENDED_NVCC
            ),
        }
    }
}

impl std::error::Error for NotFound {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{fake_nvcc, fake_nvcc_version};

    fn search_in(path_dir: &Path) -> NvccSearch {
        NvccSearch {
            path_var: Some(path_dir.as_os_str().to_owned()),
            ..NvccSearch::default()
        }
    }

    #[test]
    fn missing_nvcc_says_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let search = NvccSearch {
            cuda_home: Some(dir.path().join("no-cuda-here")),
            fallbacks: vec![dir.path().join("also/missing/nvcc")],
            ..search_in(dir.path())
        };
        let err = search.find(dir.path(), None).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "nvcc (the CUDA compiler) was not found; looked in: PATH, $CUDA_HOME/bin"
            ),
            "{err}"
        );
        assert!(
            err.contains("help: run `repro toolchain install 13.0.88`"),
            "{err}"
        );
        assert!(err.contains("set CUDA_HOME"), "{err}");
    }

    #[test]
    fn finds_nvcc_in_cuda_home_and_prefers_path() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("cuda");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let in_home = fake_nvcc(&home.join("bin"));
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let search = NvccSearch {
            cuda_home: Some(home.clone()),
            ..search_in(&empty)
        };
        let tc = search.find(dir.path(), None).unwrap();
        assert_eq!((tc.nvcc, tc.source), (in_home, Source::CudaHome));
        assert_eq!(tc.version, "Cuda compilation tools, release 99.9, V99.9.1");

        let on_path = dir.path().join("path");
        std::fs::create_dir_all(&on_path).unwrap();
        let first = fake_nvcc(&on_path);
        let search = NvccSearch {
            cuda_home: Some(home),
            ..search_in(&on_path)
        };
        let tc = search.find(dir.path(), None).unwrap();
        assert_eq!((tc.nvcc, tc.source), (first, Source::Path));
    }

    #[test]
    fn a_pin_skips_other_versions_and_falls_back_to_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let on_path = dir.path().join("path");
        std::fs::create_dir_all(&on_path).unwrap();
        fake_nvcc_version(&on_path, "12.4.131");
        let home = dir.path().join("cuda");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let cache_dir = dir.path().join("cache");
        let search = NvccSearch {
            cuda_home: Some(home.clone()),
            cache: Some(cache_dir.clone()),
            ..search_in(&on_path)
        };
        let pin: NvccVersion = "13.0.88".parse().unwrap();

        let err = search.find(dir.path(), Some(&pin)).unwrap_err();
        assert_eq!(err.found.len(), 1);
        let msg = err.to_string();
        assert!(msg.contains("pins nvcc 13.0.88"), "{msg}");
        assert!(
            msg.contains("found instead: nvcc 12.4.131 from PATH"),
            "{msg}"
        );
        assert!(msg.contains("help: run `repro toolchain install`"), "{msg}");

        // A finished install in the cache is used ...
        let slot = cache::slot(&cache_dir, &pin).join("bin");
        std::fs::create_dir_all(&slot).unwrap();
        let cached = fake_nvcc_version(&slot, "13.0.88");
        let marker = cache::Installed {
            nvcc_version: pin,
            nvcc: PathBuf::from("bin/nvcc"),
            wheels: vec![],
            installed_utc: String::new(),
        };
        std::fs::write(
            cache::slot(&cache_dir, &pin).join(cache::MARKER),
            serde_json::to_string(&marker).unwrap(),
        )
        .unwrap();
        let tc = search.find(dir.path(), Some(&pin)).unwrap();
        assert_eq!((&tc.nvcc, tc.source), (&cached, Source::Cache));
        assert_eq!(tc.release(), Some(pin));

        // ... unless the system has the pinned version, which is used as it is.
        let system = fake_nvcc_version(&home.join("bin"), "13.0.88");
        let tc = search.find(dir.path(), Some(&pin)).unwrap();
        assert_eq!((tc.nvcc, tc.source), (system, Source::CudaHome));
        // Unpinned, the first found wins whatever its version.
        assert_eq!(search.find(dir.path(), None).unwrap().source, Source::Path);
        let all = search.all(dir.path());
        let sources: Vec<Source> = all.iter().map(|f| f.source).collect();
        assert_eq!(sources, [Source::Path, Source::CudaHome, Source::Cache]);
    }
}
