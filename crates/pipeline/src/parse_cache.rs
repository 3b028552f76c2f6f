//! The typed [`Pipeline`] of the one text that last parsed, remembered as JSON, which reads
//! several times faster than the YAML. It is reused only for a text whose SHA-256 is the
//! remembered one, parsed by this very `repro` binary (its size, modification time and
//! inode: a rebuild with another `Pipeline` type is another binary), and only when the JSON
//! gave back a value equal to the YAML's when it was stored: a pipeline JSON cannot hold (a
//! number as a mapping key, a YAML tag) is parsed from its YAML every time. Like the
//! scan's cache ([`super::scan_cache`]), it lives in `.repro/cache` and only where that is a
//! real folder of the project. See docs/PERFORMANCE.md.

use super::spec::Pipeline;
use serde::{Deserialize, Serialize};
use std::path::Path;

const FILE: &str = ".repro/cache/pipeline.json";

/// `P`: [`Pipeline`] when read, `&Pipeline` when written.
#[derive(Serialize, Deserialize)]
struct Remembered<P> {
    /// The text's SHA-256 and the parsing binary's identity.
    key: String,
    pipeline: P,
}

/// `None` where the binary's identity cannot be read: then nothing is remembered.
fn key(sha256: &str) -> Option<String> {
    Some(format!("{sha256} {}", repro_base::fsio::binary_identity()?))
}

/// The pipeline remembered for the text whose SHA-256 is `sha256`, if this binary parsed it.
pub fn read(root: &Path, sha256: &str) -> Option<Pipeline> {
    if !super::scan_cache::cache_folder_is_real(root) {
        return None;
    }
    let key = key(sha256)?;
    // Read as text: checked as UTF-8 once, not string by string as from bytes.
    let text = std::fs::read_to_string(root.join(FILE)).ok()?;
    let remembered: Remembered<Pipeline> = serde_json::from_str(&text).ok()?;
    (remembered.key == key).then_some(remembered.pipeline)
}

/// Remember `pipeline`, parsed from the text whose SHA-256 is `sha256`, if its JSON gives
/// it back exactly (best effort: a cache that cannot be written costs the next load a parse).
pub fn remember(root: &Path, sha256: &str, pipeline: &Pipeline) {
    if !super::scan_cache::cache_folder_is_real(root) {
        return;
    }
    let Some(key) = key(sha256) else { return };
    let Ok(json) = serde_json::to_vec(&Remembered { key, pipeline }) else {
        return;
    };
    let back = serde_json::from_slice::<Remembered<Pipeline>>(&json);
    if back.is_ok_and(|back| back.pipeline == *pipeline) {
        let _ = repro_base::fsio::write_atomic(&root.join(FILE), &json);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".repro/cache")).unwrap();
        dir
    }

    fn parse(text: &str) -> Pipeline {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn the_shipped_pipeline_comes_back_as_parsed_for_its_text_only() {
        let dir = project();
        let text = include_str!("../../../pipeline.yaml");
        let pipeline = parse(text);
        remember(dir.path(), "aa", &pipeline);
        assert_eq!(read(dir.path(), "aa"), Some(pipeline));
        assert!(read(dir.path(), "ab").is_none(), "another text's hash");
    }

    #[test]
    fn a_value_json_cannot_hold_is_not_remembered() {
        let dir = project();
        // A define's value is kept as YAML: its key 1 would come back from JSON as "1".
        let text = "version: 1\nkernels:\n  k: {source: k.cu, entry: e}\nvariants:\n  v: {kernel: k, defines: {A: {1: one}}}\nstages: {}\n";
        remember(dir.path(), "aa", &parse(text));
        assert!(!dir.path().join(FILE).exists());
        assert!(read(dir.path(), "aa").is_none());
    }

    #[test]
    fn another_binarys_pipeline_is_not_read() {
        let dir = project();
        let text = "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"]}\n";
        let planted = Remembered::<Pipeline> {
            key: "aa 1 2.3 4".into(),
            pipeline: parse(text),
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&planted).unwrap()).unwrap();
        assert!(read(dir.path(), "aa").is_none());
    }

    #[test]
    fn nothing_is_written_without_a_real_cache_folder() {
        let dir = tempfile::tempdir().unwrap();
        let text = "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"]}\n";
        remember(dir.path(), "aa", &parse(text));
        assert!(!dir.path().join(".repro").exists());
    }
}
