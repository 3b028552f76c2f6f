//! The files a CUDA source's compile depends on: the source and the local headers it
//! `#include "..."`s, transitively. Toolkit headers (`<cuda_fp16.h>`) are covered by the
//! nvcc version instead.

use anyhow::Context;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `source` (as given) followed by every local header it includes, transitively, as paths
/// relative to `root` where they lie under it. A quoted include is looked up next to the
/// including file, then in each `-I` folder of `flags` (relative to `root`); one found in
/// neither is a toolkit or system header and is skipped.
pub fn closure(root: &Path, source: &Path, flags: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let include_dirs = include_dirs(root, flags);
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    let mut todo = vec![root.join(source)];
    while let Some(file) = todo.pop() {
        let file = normalize(&file);
        if !seen.insert(file.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let here = file.parent().unwrap_or(root).to_path_buf();
        for name in quoted_includes(&text) {
            let found = std::iter::once(&here)
                .chain(include_dirs.iter())
                .map(|dir| dir.join(name))
                .find(|p| p.is_file());
            if let Some(p) = found {
                todo.push(p);
            }
        }
        order.push(file);
    }
    let root = normalize(root);
    Ok(order
        .into_iter()
        .map(|p| p.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(p))
        .collect())
}

/// The names in `#include "name"` lines.
fn quoted_includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest
            .strip_prefix("include")?
            .trim_start()
            .strip_prefix('"')?;
        rest.split_once('"').map(|(name, _)| name)
    })
}

/// The `-I dir` / `-Idir` / `--include-path dir` folders of nvcc flags, under `root`.
fn include_dirs(root: &Path, flags: &[String]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let dir = match flag.as_str() {
            "-I" | "--include-path" => it.next().cloned(),
            f => f
                .strip_prefix("-I")
                .or_else(|| f.strip_prefix("--include-path="))
                .map(str::to_string),
        };
        if let Some(dir) = dir {
            dirs.push(root.join(dir));
        }
    }
    dirs
}

/// Resolve `.` and `..` components lexically (no symlink resolution).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_local_includes_transitively_and_skips_toolkit_headers() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("kernels/common")).unwrap();
        std::fs::create_dir_all(root.join("inc")).unwrap();
        std::fs::write(
            root.join("kernels/k.cu"),
            "#include <cuda_fp16.h>\n#include \"cuda_fp16.h\"\n  # include \"common/a.cuh\"\n#include \"b.cuh\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("kernels/common/a.cuh"),
            "#include \"../common/a.cuh\"\n",
        )
        .unwrap();
        std::fs::write(root.join("inc/b.cuh"), "// leaf\n").unwrap();
        let files = closure(root, Path::new("kernels/k.cu"), &["-Iinc".to_string()]).unwrap();
        assert_eq!(
            files,
            [
                PathBuf::from("kernels/k.cu"),
                PathBuf::from("inc/b.cuh"),
                PathBuf::from("kernels/common/a.cuh"),
            ]
        );
    }

    #[test]
    fn missing_source_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = closure(dir.path(), Path::new("kernels/nope.cu"), &[]).unwrap_err();
        assert!(format!("{err:#}").contains("kernels/nope.cu"), "{err:#}");
    }

    #[test]
    fn include_dir_flag_forms() {
        let flags: Vec<String> = [
            "-I",
            "a",
            "-Ib",
            "--include-path=c",
            "--include-path",
            "d",
            "-O3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let dirs = include_dirs(Path::new("/r"), &flags);
        assert_eq!(dirs, ["/r/a", "/r/b", "/r/c", "/r/d"].map(PathBuf::from));
    }
}
