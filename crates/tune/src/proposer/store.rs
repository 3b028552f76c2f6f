//! Proposed kernel sources on disk, keyed by digest, and the text operations on them:
//! applying a proposer's unified diff (`diffy`, GNU patch's algorithm without fuzz) and
//! writing a source's diff against the kernel's own.
//!
//! A proposed source lives at `.repro/cache/tune/sources/<digest16>/<file name of the
//! kernel>`. Only the kernel's main file is proposed; its local headers are the kernel's
//! own, found through `-I <the kernel's folder>` ([`include_flags`]).

use crate::search::SourceRef;
use anyhow::Context;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where proposed sources are kept, relative to the project root.
pub const SOURCES_DIR: &str = ".repro/cache/tune/sources";

/// SHA-256 of a text, hex: the digest of sources and patches alike.
pub fn digest(text: &str) -> String {
    repro_base::tools::hex(&Sha256::digest(text.as_bytes()))
}

/// The first 16 hex digits of a digest: how artifacts and file names show it.
pub fn short(digest: &str) -> &str {
    &digest[..digest.len().min(16)]
}

/// Apply a unified diff to `base`. The error says which hunk or what in the patch text was
/// wrong, for the next brief.
pub fn apply(base: &str, patch: &str) -> Result<String, String> {
    let parsed =
        diffy::Patch::from_str(patch).map_err(|e| format!("the patch does not parse: {e}"))?;
    if parsed.hunks().is_empty() {
        return Err("the patch does not parse: it has no hunks (expected a unified diff: `---`, `+++` and `@@` lines)".into());
    }
    diffy::apply(base, &parsed).map_err(|e| format!("the patch does not apply: {e}"))
}

/// `new` as a unified diff against `base`, both named `label` (`a/label`, `b/label`).
pub fn diff(base: &str, new: &str, label: &str) -> String {
    diffy::DiffOptions::new()
        .set_original_filename(format!("a/{label}"))
        .set_modified_filename(format!("b/{label}"))
        .create_patch(base, new)
        .to_string()
}

/// The kernel's own source and the proposed ones of one tune.
#[derive(Debug, Clone)]
pub struct SourceStore {
    root: PathBuf,
    /// The kernel's source, relative to the root.
    kernel: PathBuf,
    base: String,
}

impl SourceStore {
    /// The store for the kernel whose source is `kernel` (relative to `root`).
    pub fn open(root: &Path, kernel: &Path) -> anyhow::Result<SourceStore> {
        let base = std::fs::read_to_string(root.join(kernel))
            .with_context(|| format!("cannot read {}", kernel.display()))?;
        Ok(SourceStore {
            root: root.to_path_buf(),
            kernel: kernel.to_path_buf(),
            base,
        })
    }

    /// The kernel's own source text.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The kernel's source path, relative to the root (how diffs name it).
    pub fn kernel_path(&self) -> &Path {
        &self.kernel
    }

    /// Where a source of this digest is kept, relative to the root.
    pub fn path_of(&self, digest: &str) -> PathBuf {
        let name = self.kernel.file_name().unwrap_or_default();
        Path::new(SOURCES_DIR).join(short(digest)).join(name)
    }

    /// Keep `text` (written once; the same text is the same file).
    pub fn put(&self, text: &str) -> anyhow::Result<SourceRef> {
        let digest = digest(text);
        let path = self.path_of(&digest);
        let abs = self.root.join(&path);
        if std::fs::read_to_string(&abs).ok().as_deref() != Some(text) {
            let dir = abs.parent().context("a source path has a folder")?;
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let tmp = abs.with_extension("tmp");
            std::fs::write(&tmp, text)
                .and_then(|_| std::fs::rename(&tmp, &abs))
                .with_context(|| format!("cannot write {}", abs.display()))?;
        }
        Ok(SourceRef { digest, path })
    }

    /// The text a trial compiled: the proposed source, or the kernel's own (`None`).
    pub fn text(&self, source: Option<&SourceRef>) -> anyhow::Result<String> {
        match source {
            None => Ok(self.base.clone()),
            Some(s) => std::fs::read_to_string(self.root.join(&s.path)).with_context(|| {
                format!(
                    "cannot read the proposed source {}; delete .repro/cache/tune to start the tune afresh",
                    s.path.display()
                )
            }),
        }
    }

    /// A proposed source's diff against the kernel's own, named by the kernel's path.
    pub fn diff_from_base(&self, text: &str) -> String {
        diff(&self.base, text, &self.kernel.to_string_lossy())
    }
}

/// nvcc flags that let a proposed copy of `kernel` (relative to the root) include the
/// kernel's local headers.
pub fn include_flags(kernel: &Path) -> Vec<String> {
    let dir = kernel.parent().filter(|d| !d.as_os_str().is_empty());
    vec![
        "-I".into(),
        dir.map_or_else(|| ".".into(), |d| d.to_string_lossy().into_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "a\nb\nc\nd\ne\nf\ng\nh\n";

    #[test]
    fn a_diff_applies_back_and_a_stale_one_fails_with_the_hunk() {
        let new = BASE.replace("c\n", "c2\n").replace("g\n", "g\ng2\n");
        let patch = diff(BASE, &new, "kernels/k.cu");
        assert!(patch.starts_with("--- a/kernels/k.cu\n+++ b/kernels/k.cu\n"));
        assert_eq!(apply(BASE, &patch).unwrap(), new);
        // Applied after another change elsewhere: the hunks move with it.
        let shifted = format!("x\ny\n{BASE}");
        assert_eq!(apply(&shifted, &patch).unwrap(), format!("x\ny\n{new}"));
        let e = apply(&BASE.replace("c\n", "C\n"), &patch).unwrap_err();
        assert_eq!(e, "the patch does not apply: error applying hunk #1");
        for junk in ["@@ nonsense @@\n+x\n", "junk"] {
            let e = apply(BASE, junk).unwrap_err();
            assert!(e.starts_with("the patch does not parse: "), "{e}");
        }
    }

    #[test]
    fn sources_are_kept_by_digest_beside_no_headers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
        std::fs::write(dir.path().join("kernels/k.cu"), BASE).unwrap();
        let store = SourceStore::open(dir.path(), Path::new("kernels/k.cu")).unwrap();
        let s = store.put("new\n").unwrap();
        assert_eq!(s.digest, digest("new\n"));
        assert_eq!(
            s.path,
            Path::new(SOURCES_DIR).join(short(&s.digest)).join("k.cu")
        );
        assert_eq!(store.text(Some(&s)).unwrap(), "new\n");
        assert_eq!(store.put("new\n").unwrap(), s);
        assert_eq!(store.text(None).unwrap(), BASE);
        assert_eq!(include_flags(store.kernel_path()), ["-I", "kernels"]);
        assert_eq!(include_flags(Path::new("k.cu")), ["-I", "."]);
        assert!(store.diff_from_base("new\n").contains("+new\n"));
    }
}
