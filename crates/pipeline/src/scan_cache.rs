//! The load's scan ([`SpanIndex::scan`]: keys written twice, nesting, alias bombs)
//! remembered for the one text that last passed it. The scan's verdict is a function of
//! the text's bytes and of the scan's rules alone, so a pipeline whose SHA-256 is the
//! remembered one, under the same rules, passed it before and is not scanned again; any
//! other text, one changed byte included, is scanned. Only a text that passed is
//! remembered, in `.repro/cache/scan`, and it is read and written only where
//! `.repro/cache` already is a folder of the project (never through a symlink). See
//! docs/PERFORMANCE.md.

use super::spans::{Scan, SpanIndex, ALIAS_FACTOR, MAX_DEPTH};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

const FILE: &str = ".repro/cache/scan";

/// Bump with any change to what the scan refuses: a verdict of other rules is not reused.
const RULES_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, PartialEq)]
struct Verdict {
    rules: String,
    sha256: String,
    /// The scan's [`Scan::top_keys`] (validation reads them).
    top_keys: Vec<String>,
}

fn rules() -> String {
    format!(
        "repro {} scan {RULES_VERSION} depth {MAX_DEPTH} aliases {ALIAS_FACTOR}",
        env!("CARGO_PKG_VERSION")
    )
}

/// The hex SHA-256 of a pipeline's text: the key of its remembered scan and parse.
pub fn sha256_of(text: &str) -> String {
    repro_base::tools::hex(&Sha256::digest(text.as_bytes()))
}

/// [`SpanIndex::scan`] of `text` (whose [`sha256_of`] is `sha256`), the pipeline of project
/// `root`, or its remembered verdict when this very text passed it before.
pub fn scan(text: &str, sha256: &str, root: &Path) -> Scan {
    if !cache_folder_is_real(root) {
        return SpanIndex::scan(text);
    }
    let rules = rules();
    let file = root.join(FILE);
    let remembered = std::fs::read(&file)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Verdict>(&bytes).ok())
        .filter(|v| v.rules == rules && v.sha256 == sha256);
    if let Some(v) = remembered {
        return Scan {
            top_keys: v.top_keys,
            ..Scan::default()
        };
    }
    let scan = SpanIndex::scan(text);
    if scan.passed() {
        let verdict = Verdict {
            rules,
            sha256: sha256.to_string(),
            top_keys: scan.top_keys.clone(),
        };
        let json = serde_json::to_vec(&verdict).expect("a verdict serializes");
        // A cache that cannot be written only costs the next load a scan.
        let _ = repro_base::fsio::write_atomic(&file, &json);
    }
    scan
}

/// Make `.repro/cache` where it is missing (never through a symlink), so that the next load
/// of this project reads its scan and parse from there. For the read-only commands (`dag`,
/// `status`) once they loaded a valid pipeline: in a project where nothing has run yet there
/// is no cache folder, and each of them would parse the YAML again (at 2,000 stages, most of
/// their time). Best effort: where it cannot be made, loads parse.
pub fn make_cache_folder(root: &Path) {
    let symlink = |rel: &str| {
        std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.file_type().is_symlink())
    };
    if !symlink(".repro") && !symlink(".repro/cache") {
        let _ = std::fs::create_dir_all(root.join(".repro/cache"));
    }
}

/// `.repro` and `.repro/cache` are folders, not symlinks.
pub(super) fn cache_folder_is_real(root: &Path) -> bool {
    [".repro", ".repro/cache"]
        .iter()
        .all(|p| std::fs::symlink_metadata(root.join(p)).is_ok_and(|m| m.file_type().is_dir()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"]}\n  b: {}\n";
    /// CLEAN with one byte changed: `b` becomes a second `a`.
    const TWICE: &str = "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"]}\n  a: {}\n";

    fn scan(text: &str, root: &Path) -> Scan {
        super::scan(text, &sha256_of(text), root)
    }

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".repro/cache")).unwrap();
        dir
    }

    #[test]
    fn a_text_that_passed_is_remembered_with_its_top_level_keys() {
        let dir = project();
        assert!(scan(CLEAN, dir.path()).passed());
        let v: Verdict =
            serde_json::from_slice(&std::fs::read(dir.path().join(FILE)).unwrap()).unwrap();
        assert_eq!(v.top_keys, ["version", "stages"]);
        assert_eq!(v.sha256, repro_base::tools::hex(&Sha256::digest(CLEAN)));
        assert_eq!(scan(CLEAN, dir.path()).top_keys, ["version", "stages"]);
    }

    #[test]
    fn a_changed_text_is_scanned_again_and_a_failed_one_not_remembered() {
        let dir = project();
        scan(CLEAN, dir.path());
        let before = std::fs::read(dir.path().join(FILE)).unwrap();
        let again = scan(TWICE, dir.path());
        assert_eq!(again.duplicates.len(), 1, "the second `a` is found");
        assert_eq!(std::fs::read(dir.path().join(FILE)).unwrap(), before);
    }

    #[test]
    fn a_verdict_of_other_rules_is_not_reused() {
        let dir = project();
        let planted = Verdict {
            rules: "repro 0.0.0 scan 0".into(),
            sha256: repro_base::tools::hex(&Sha256::digest(TWICE)),
            top_keys: vec![],
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&planted).unwrap()).unwrap();
        assert_eq!(scan(TWICE, dir.path()).duplicates.len(), 1);
    }

    #[test]
    fn nothing_is_written_or_read_without_a_real_cache_folder() {
        let dir = tempfile::tempdir().unwrap();
        assert!(scan(CLEAN, dir.path()).passed());
        assert!(!dir.path().join(".repro").exists());
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".repro")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".repro/cache")).unwrap();
        scan(CLEAN, dir.path());
        assert!(!outside.path().join("scan").exists());
        // A verdict planted through the link, even one for this very text, is not read.
        let planted = Verdict {
            rules: rules(),
            sha256: repro_base::tools::hex(&Sha256::digest(TWICE)),
            top_keys: vec![],
        };
        std::fs::write(
            outside.path().join("scan"),
            serde_json::to_vec(&planted).unwrap(),
        )
        .unwrap();
        assert_eq!(scan(TWICE, dir.path()).duplicates.len(), 1);
    }
}
