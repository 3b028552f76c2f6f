//! `repro verify`: without a GPU, check that the committed results are what the committed
//! sources produced — every output matches the lock; every stage's source-level inputs
//! (pipeline.yaml's spec of it, its dep files, the results of the stages it needs) are
//! those the lock recorded; and the manifest names a clean commit whose sources are the
//! ones the results were made from ([`checks`]). What a stage records of the machine (GPU,
//! driver, tool versions, the arch chosen for the GPU) is not compared: verifying needs no
//! GPU. Every problem comes with the action that fixes it on this machine ([`advice`]).

mod advice;
mod checks;
mod git;
mod machine;
mod results;

use advice::{Advice, Fix};
use checks::Finding;
use repro_pipeline::paths::LOCK_FILE;
use repro_pipeline::Project;
use results::Results;
use std::fmt;

/// What `repro verify` found: the commit the results name, and every problem.
#[derive(Debug, Default)]
pub struct Verdict {
    pub stages: usize,
    pub outputs: usize,
    /// The manifest's git sha, when it names one.
    pub commit: Option<String>,
    pub problems: Vec<Problem>,
}

/// One inconsistency and the action that fixes it here.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub what: String,
    pub action: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.action)
    }
}

/// Check the committed results of `project`.
pub fn verify(project: &Project) -> anyhow::Result<Verdict> {
    let (what, unreadable) = match Results::working(project) {
        Ok(Some(results)) => return verify_results(project, &results),
        Ok(None) => (
            format!("there is no {LOCK_FILE}: no results were made"),
            false,
        ),
        Err(_) => (
            format!("{LOCK_FILE} is not a lock repro can read (`repro status` says why)"),
            true,
        ),
    };
    let none = Finding {
        what,
        fix: Fix::NoLock { unreadable },
    };
    Ok(Verdict {
        problems: advise(project, None, vec![none])?,
        ..Verdict::default()
    })
}

fn verify_results(project: &Project, results: &Results) -> anyhow::Result<Verdict> {
    let found = checks::findings(project, results)?;
    Ok(Verdict {
        stages: results.lock.stages.len(),
        outputs: results.committed_outputs().len(),
        commit: results.manifest_commit(),
        problems: advise(project, Some(results), found)?,
    })
}

/// Each finding with the action that fixes it here.
fn advise(
    project: &Project,
    results: Option<&Results>,
    found: Vec<Finding>,
) -> anyhow::Result<Vec<Problem>> {
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let advice = Advice::new(project, results, &found)?;
    Ok(found
        .into_iter()
        .map(|f| Problem {
            action: advice.action(&f.fix),
            what: f.what,
        })
        .collect())
}
