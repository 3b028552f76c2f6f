//! The memo of finished trials, so a tune never evaluates a configuration twice: not within
//! a run, not after an interruption, not when rerun with a larger budget.
//!
//! One file per evaluation context under `.repro/cache/tune/`: the context (kernel source
//! hash, base defines, arch, GPU, harness settings, gates) is hashed into the file name and
//! written in clear on the first line. Each finished trial appends one JSON line and is
//! fsynced, so a kill loses at most the trial that was running; a torn last line is cut
//! off when the file is opened again. A trial is keyed by its configuration and, for a
//! source a proposer wrote (`source` on its line), that source's digest.
//!
//! An elite member's confirmation (its untimed correctness runs on every shape, recipe and
//! seed) is kept the same way, on a line marked `"confirmation": true`: a rerun whose elite
//! is the same, in the same context, confirms nothing again.

use super::space::show;
use super::space::Config;
use anyhow::bail;
use anyhow::Context;
use repro_schema::BenchResult;
use repro_schema::TrialStatus;
use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;
use std::collections::HashMap;
use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

/// The result of evaluating one configuration: what the search needs (`status`, `score`)
/// and what the tune log and the elite report (`registers`, ..., `bench`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// `ok`, or the first gate that failed: `compile_error`, `ptxas_gate`, `incorrect`,
    /// `failed` (crash, timeout).
    pub status: TrialStatus,
    /// Lower is better (µs); `Some` exactly when `status` is `ok`. Stored as text so it
    /// reads back bit for bit and a resumed search replays exactly.
    #[serde(with = "exact")]
    pub score: Option<f64>,
    /// Why it failed, or what was measured.
    pub note: String,
    pub registers: Option<u32>,
    pub spill_bytes: Option<u64>,
    pub max_abs_err: Option<f64>,
    /// The worst `max_err_over_ref_std` of its correctness runs.
    #[serde(default)]
    pub max_err_over_ref_std: Option<f64>,
    pub correctness_pass: Option<bool>,
    /// The bench records behind the score (timed runs), empty for rejected trials.
    #[serde(default)]
    pub bench: Vec<BenchResult>,
}

impl Evaluation {
    /// A passing trial with this score and nothing else recorded.
    pub fn ok(score: f64) -> Self {
        Evaluation {
            status: TrialStatus::Ok,
            score: Some(score),
            note: String::new(),
            registers: None,
            spill_bytes: None,
            max_abs_err: None,
            max_err_over_ref_std: None,
            correctness_pass: None,
            bench: Vec::new(),
        }
    }

    /// A rejected trial.
    pub fn rejected(status: TrialStatus, note: impl Into<String>) -> Self {
        Evaluation {
            status,
            score: None,
            note: note.into(),
            ..Evaluation::ok(0.0)
        }
    }
}

mod exact {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match x {
            Some(v) => s.serialize_some(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| s.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    repro_tune_memo: u32,
    key: serde_json::Value,
}

#[derive(Serialize, Deserialize)]
struct Line {
    /// The digest of a proposed source; absent for the kernel's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    config: Config,
    /// A confirmation (its runs in `evaluation.bench`), not a trial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    confirmation: bool,
    /// When the trial finished (RFC 3339, UTC).
    finished: String,
    evaluation: Evaluation,
}

/// A memoized trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub evaluation: Evaluation,
    /// When it finished (RFC 3339, UTC).
    pub finished: String,
}

/// What identifies a trial: the proposed source's digest (`None`: the kernel's own source)
/// and the configuration.
type Key = (Option<String>, Config);

/// Finished trials by source and configuration, optionally backed by an append-only file.
#[derive(Debug, Default)]
pub struct Memo {
    file: Option<(PathBuf, File)>,
    entries: HashMap<Key, Entry>,
    confirmations: HashMap<Key, Entry>,
}

/// Now, as the memo records when something finished (RFC 3339, UTC, whole seconds).
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Memo {
    /// A memo that lives only as long as the search (tests, `--no-cache` style runs).
    pub fn in_memory() -> Memo {
        Memo::default()
    }

    /// Open (or create) the memo for the context `key` under `dir`, loading what earlier
    /// runs finished.
    pub fn open(dir: &Path, key: &serde_json::Value) -> anyhow::Result<Memo> {
        let canonical = serde_json::to_string(key)?;
        let name = repro_base::tools::hex(&Sha256::digest(canonical.as_bytes()));
        let path = dir.join(format!("{}.jsonl", &name[..32]));
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the tune memo folder {}", dir.display()))?;
        let mut entries = HashMap::new();
        let mut confirmations = HashMap::new();
        let existing = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let fresh = existing.as_deref().is_none_or(|t| !t.contains('\n'));
        if let Some(text) = existing.as_deref().filter(|_| !fresh) {
            // A kill during an append leaves a torn last line: drop it.
            let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            if complete.len() != text.len() {
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(complete.len() as u64)?;
                f.sync_all()?;
            }
            for (n, line) in complete.lines().enumerate().skip(1) {
                let parsed: Line = serde_json::from_str(line).with_context(|| {
                    format!(
                        "{}:{}: not a tune memo line; delete the file to start the tune afresh",
                        path.display(),
                        n + 1
                    )
                })?;
                let entry = Entry {
                    evaluation: parsed.evaluation,
                    finished: parsed.finished,
                };
                let kind = match parsed.confirmation {
                    true => &mut confirmations,
                    false => &mut entries,
                };
                kind.insert((parsed.source, parsed.config), entry);
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if fresh {
            file.set_len(0)?;
            let header = Header {
                repro_tune_memo: 1,
                key: key.clone(),
            };
            writeln!(file, "{}", serde_json::to_string(&header)?)?;
            file.sync_all()?;
        }
        Ok(Memo {
            file: Some((path, file)),
            entries,
            confirmations,
        })
    }

    /// The memo file, if the memo is backed by one.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(p, _)| p.as_path())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The trial of `config` on the proposed source `source` (`None`: the kernel's own).
    pub fn get(&self, source: Option<&str>, config: &Config) -> Option<&Entry> {
        self.entries
            .get(&(source.map(str::to_string), config.clone()))
    }

    /// Record a trial that finished at `finished`: one line appended and synced to disk
    /// before returning.
    pub fn record(
        &mut self,
        source: Option<&str>,
        config: &Config,
        evaluation: &Evaluation,
        finished: &str,
    ) -> anyhow::Result<()> {
        let key = (source.map(str::to_string), config.clone());
        if self.entries.contains_key(&key) {
            bail!(
                "configuration {}{} was evaluated twice; this is a bug in the tune search",
                show(config),
                source
                    .map(|s| format!(" of source {s}"))
                    .unwrap_or_default()
            );
        }
        self.append(&Line {
            source: key.0.clone(),
            config: config.clone(),
            confirmation: false,
            finished: finished.to_string(),
            evaluation: evaluation.clone(),
        })?;
        let entry = Entry {
            evaluation: evaluation.clone(),
            finished: finished.to_string(),
        };
        self.entries.insert(key, entry);
        Ok(())
    }

    /// The confirmation runs recorded for `config` on `source` (`None`: the kernel's own).
    pub fn confirmation(&self, source: Option<&str>, config: &Config) -> Option<&[BenchResult]> {
        self.confirmations
            .get(&(source.map(str::to_string), config.clone()))
            .map(|e| e.evaluation.bench.as_slice())
    }

    /// Record the confirmation `runs` of `config` on `source`, finished at `finished`.
    pub fn record_confirmation(
        &mut self,
        source: Option<&str>,
        config: &Config,
        runs: &[BenchResult],
        finished: &str,
    ) -> anyhow::Result<()> {
        let evaluation = Evaluation {
            bench: runs.to_vec(),
            ..Evaluation::rejected(TrialStatus::Ok, "confirmation")
        };
        self.append(&Line {
            source: source.map(str::to_string),
            config: config.clone(),
            confirmation: true,
            finished: finished.to_string(),
            evaluation: evaluation.clone(),
        })?;
        let entry = Entry {
            evaluation,
            finished: finished.to_string(),
        };
        self.confirmations
            .insert((source.map(str::to_string), config.clone()), entry);
        Ok(())
    }

    /// Append `line` to the file behind the memo (if any), synced before returning.
    fn append(&mut self, line: &Line) -> anyhow::Result<()> {
        if let Some((path, file)) = &mut self.file {
            let text = serde_json::to_string(line)?;
            file.write_all(format!("{text}\n").as_bytes())
                .and_then(|_| file.sync_data())
                .with_context(|| format!("cannot append to {}", path.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(m: i64) -> Config {
        [("TILE_M".to_string(), m)].into_iter().collect()
    }

    #[test]
    fn confirmations_are_kept_apart_from_trials_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let key = json!({"kernel": "abc"});
        let mut run = BenchResult::blank(
            "mission",
            Default::default(),
            1,
            (0, 0),
            repro_schema::RunStatus::Ok,
        );
        run.max_abs_err = Some(0.125);
        {
            let mut memo = Memo::open(dir.path(), &key).unwrap();
            memo.record(None, &cfg(32), &Evaluation::ok(1.0), "t1")
                .unwrap();
            memo.record_confirmation(None, &cfg(32), std::slice::from_ref(&run), "t2")
                .unwrap();
            memo.record_confirmation(Some("d1"), &cfg(64), &[], "t3")
                .unwrap();
        }
        let memo = Memo::open(dir.path(), &key).unwrap();
        assert_eq!(memo.len(), 1, "a confirmation is not a trial");
        assert_eq!(memo.confirmation(None, &cfg(32)), Some(&[run][..]));
        assert_eq!(memo.confirmation(Some("d1"), &cfg(64)), Some(&[][..]));
        assert_eq!(memo.confirmation(None, &cfg(64)), None);
        assert!(memo.get(Some("d1"), &cfg(64)).is_none());
    }

    #[test]
    fn survives_reopening_and_reads_scores_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let key = json!({"kernel": "abc", "arch": "sm_90"});
        let score = 0.1 + 0.2; // not representable in few digits
        {
            let mut memo = Memo::open(dir.path(), &key).unwrap();
            memo.record(None, &cfg(32), &Evaluation::ok(score), "t1")
                .unwrap();
            memo.record(
                None,
                &cfg(64),
                &Evaluation::rejected(TrialStatus::CompileError, "boom"),
                "t2",
            )
            .unwrap();
            assert!(memo
                .record(None, &cfg(64), &Evaluation::ok(1.0), "t3")
                .is_err());
        }
        let memo = Memo::open(dir.path(), &key).unwrap();
        assert_eq!(memo.len(), 2);
        let first = memo.get(None, &cfg(32)).unwrap();
        assert_eq!(first.evaluation.score.unwrap().to_bits(), score.to_bits());
        assert_eq!(first.finished, "t1");
        assert_eq!(
            memo.get(None, &cfg(64)).unwrap().evaluation.status,
            TrialStatus::CompileError
        );
        // Another context is another file.
        let other = Memo::open(dir.path(), &json!({"kernel": "def"})).unwrap();
        assert!(other.is_empty());
        assert_ne!(other.path(), memo.path());
        let header = std::fs::read_to_string(memo.path().unwrap()).unwrap();
        assert!(
            header.starts_with(r#"{"repro_tune_memo":1,"key":{"kernel":"abc","arch":"sm_90"}}"#)
        );
    }

    #[test]
    fn a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let key = json!({"k": 1});
        let path = {
            let mut memo = Memo::open(dir.path(), &key).unwrap();
            memo.record(None, &cfg(32), &Evaluation::ok(1.5), "t")
                .unwrap();
            memo.path().unwrap().to_path_buf()
        };
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"config":{"TILE_M":64},"evalu"#).unwrap();
        drop(f);
        let mut memo = Memo::open(dir.path(), &key).unwrap();
        assert_eq!(memo.len(), 1);
        memo.record(None, &cfg(64), &Evaluation::ok(2.5), "t")
            .unwrap();
        assert_eq!(Memo::open(dir.path(), &key).unwrap().len(), 2);
    }

    #[test]
    fn a_corrupt_line_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let key = json!({"k": 2});
        let path = Memo::open(dir.path(), &key)
            .unwrap()
            .path()
            .unwrap()
            .to_path_buf();
        std::fs::write(&path, "{\"repro_tune_memo\":1,\"key\":{}}\nnot json\n").unwrap();
        let e = Memo::open(dir.path(), &key).unwrap_err();
        assert!(
            format!("{e:#}").contains(".jsonl:2: not a tune memo line"),
            "{e:#}"
        );
    }
}
