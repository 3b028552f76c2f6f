//! Source-level evolution (EvoEngineer's loop with the tune stage's gates): a proposer —
//! a command named by the tune stage's `proposer:` — reads a [`brief::Brief`] (the elite
//! with their diffs, timings and profiles; the failures of recent children) and answers
//! with new kernel sources or patches ([`answer`]). [`run::CommandProposer`] runs it
//! between generations of the search and turns its answer into candidates; each is then
//! compiled, gated, checked and timed like any trial. Proposed sources are kept by digest
//! ([`store`]); a trial's ancestry is its [`lineage`].
//!
//! Two proposers ship as subcommands of `repro` itself: [`patches`] (`repro propose
//! patches --dir DIR`, scripted and deterministic) and [`openai`] (`repro propose openai`,
//! an OpenAI-compatible chat-completions endpoint). The schemas are in docs/guide/tune.md.

pub mod answer;
pub mod brief;
pub mod lineage;
pub mod openai;
pub mod patches;
pub mod run;
pub mod store;

use serde::Deserialize;
use std::time::Duration;

/// The environment variable that names the file holding the brief.
pub const BRIEF_ENV: &str = "REPRO_BRIEF";
/// The environment variable with the model's name: part of the tune's fingerprint.
pub const MODEL_ENV: &str = "REPRO_PROPOSER_MODEL";
/// The environment variable with the endpoint's key: never written anywhere by repro.
pub const KEY_ENV: &str = "REPRO_PROPOSER_KEY";
/// The environment variable with the endpoint's base URL.
pub const URL_ENV: &str = "REPRO_PROPOSER_URL";

/// The `proposer:` option of a tune stage, as written:
///
/// ```yaml
/// proposer:
///   run: [repro, propose, patches, --dir, kernels/proposals]   # `repro` is this binary
///   candidates: 4      # most candidates per generation (default: half the population)
///   timeout: 2m        # the command is killed after this (default 120 s)
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposerSpec {
    /// The command: program and arguments.
    pub run: Vec<String>,
    #[serde(default)]
    pub candidates: Option<u32>,
    #[serde(
        default = "default_timeout",
        deserialize_with = "repro_pipeline::options::duration"
    )]
    pub timeout: Duration,
}

fn default_timeout() -> Duration {
    Duration::from_secs(120)
}

impl ProposerSpec {
    /// Candidates per generation: as written, else half the population (at least 1); never
    /// more than the population.
    pub fn candidates(&self, population: u32) -> u32 {
        self.candidates
            .unwrap_or(population.div_ceil(2))
            .clamp(1, population.max(1))
    }

    /// The command line to run: a leading `repro` is the running binary.
    pub fn argv(&self, repro_exe: &std::path::Path) -> Vec<String> {
        let mut argv = self.run.clone();
        if argv.first().is_some_and(|p| p == "repro") {
            argv[0] = repro_exe.display().to_string();
        }
        argv
    }
}

/// The model named in the environment ([`MODEL_ENV`]), for the fingerprint.
pub fn model_from_env() -> Option<String> {
    std::env::var(MODEL_ENV).ok().filter(|m| !m.is_empty())
}

/// Values of environment variables that look like secrets (`*KEY*`, `*TOKEN*`,
/// `*SECRET*`, `*PASSWORD*`, at least 8 characters): what repro strips from anything a
/// proposer printed before logging it, and refuses in a proposed source.
pub fn secrets_from_env() -> Vec<(String, String)> {
    secrets_in(std::env::vars())
}

fn secrets_in(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = vars
        .filter(|(k, v)| {
            let k = k.to_ascii_uppercase();
            v.len() >= 8
                && ["KEY", "TOKEN", "SECRET", "PASSWORD"]
                    .iter()
                    .any(|w| k.contains(w))
        })
        .collect();
    found.sort();
    found
}

/// `text` with every secret value replaced by `***`.
pub fn redact(text: &str, secrets: &[(String, String)]) -> String {
    secrets
        .iter()
        .fold(text.to_string(), |t, (_, v)| t.replace(v.as_str(), "***"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_has_defaults_and_resolves_repro() {
        let s: ProposerSpec = serde_yaml::from_str("{run: [repro, propose, openai]}").unwrap();
        assert_eq!(s.timeout, Duration::from_secs(120));
        assert_eq!(
            (s.candidates(8), s.candidates(1), s.candidates(3)),
            (4, 1, 2)
        );
        assert_eq!(
            s.argv(std::path::Path::new("/bin/repro")),
            ["/bin/repro", "propose", "openai"]
        );
        let s: ProposerSpec =
            serde_yaml::from_str("{run: [./p.sh], candidates: 20, timeout: 5s}").unwrap();
        assert_eq!(s.candidates(8), 8);
        assert_eq!(s.timeout, Duration::from_secs(5));
        assert_eq!(s.argv(std::path::Path::new("/bin/repro")), ["./p.sh"]);
        assert!(serde_yaml::from_str::<ProposerSpec>("{run: [x], cmd: 1}").is_err());
    }

    #[test]
    fn secrets_are_found_by_name_and_redacted() {
        let vars = [
            ("REPRO_PROPOSER_KEY", "sk-test-1234567890"),
            ("GITHUB_TOKEN", "short"),
            ("HOME", "/root/with-a-long-path"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let s = secrets_in(vars.into_iter());
        assert_eq!(s.len(), 1);
        assert_eq!(
            redact("auth sk-test-1234567890 failed", &s),
            "auth *** failed"
        );
    }
}
