//! What this machine lacks to run a stage the way its results were made: a GPU where they
//! were measured on one, a declared tool (`ncu`, a `cmd` stage's `tools:`) that was there
//! and is missing here. Judged from the stage's inputs now against those its lock entry
//! recorded, so it needs no run: `repro verify` uses it never to suggest rerunning a stage
//! where rerunning would only keep the old results.

use repro_engine::fingerprint::Inputs;
use repro_gpu::names_a_gpu;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The versions a stage kind records for a tool this machine does not have. (A pinned
/// nvcc that is missing is not among them: `repro run` installs it.)
const ABSENT_TOOL: [&str; 2] = [repro_base::tools::MISSING_TOOL, repro_ncu::NCU_NOT_FOUND];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lack {
    /// A GPU is needed; the recorded identities of those that measured.
    gpu: Option<BTreeSet<String>>,
    /// Tool name → the version the results were made with, when one was recorded.
    tools: BTreeMap<String, Option<String>>,
}

/// What this machine lacks to run a stage whose recorded inputs are `was` (`None`: it never
/// ran) and whose inputs here are `now`.
pub fn lack(was: Option<&Inputs>, now: &Inputs) -> Lack {
    let has_gpu = now.hardware.as_deref().is_some_and(names_a_gpu);
    let measured_on = was
        .and_then(|w| w.hardware.as_deref())
        .filter(|h| names_a_gpu(h));
    // A stage that never ran and asks for the GPU here (finding none) needs one too.
    let wants_gpu = measured_on.is_some() || (was.is_none() && now.hardware.is_some());
    let gpu =
        (wants_gpu && !has_gpu).then(|| measured_on.map(str::to_string).into_iter().collect());
    let tools = now
        .tools
        .iter()
        .filter(|(_, version)| ABSENT_TOOL.contains(&version.as_str()))
        .filter_map(|(name, _)| {
            match was.map(|w| w.tools.get(name)) {
                // It never had it: the stage recorded its skip, and keeps it.
                Some(Some(v)) if ABSENT_TOOL.contains(&v.as_str()) => None,
                recorded => Some((name.clone(), recorded.flatten().cloned())),
            }
        })
        .collect();
    Lack { gpu, tools }
}

impl Lack {
    pub fn is_empty(&self) -> bool {
        self.gpu.is_none() && self.tools.is_empty()
    }

    /// What both lack.
    pub fn merge(&mut self, other: &Lack) {
        if let Some(g) = &other.gpu {
            self.gpu
                .get_or_insert_with(BTreeSet::new)
                .extend(g.iter().cloned());
        }
        for (name, version) in &other.tools {
            let v = self.tools.entry(name.clone()).or_default();
            if v.is_none() {
                v.clone_from(version);
            }
        }
    }
}

/// `a GPU (the results were measured on …) and `ncu` (2025.3.1.0)`.
impl fmt::Display for Lack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(gpus) = &self.gpu {
            let mut text = "a GPU".to_string();
            if !gpus.is_empty() {
                let list: Vec<&str> = gpus.iter().map(String::as_str).collect();
                text.push_str(&format!(
                    " (the results were measured on {})",
                    list.join("; ")
                ));
            }
            parts.push(text);
        }
        for (name, version) in &self.tools {
            parts.push(match version {
                Some(v) => format!("`{name}` ({v})"),
                None => format!("`{name}`"),
            });
        }
        match parts.split_last() {
            Some((last, rest)) if !rest.is_empty() => write!(f, "{} and {last}", rest.join(", ")),
            _ => f.write_str(&parts.concat()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(hardware: Option<&str>, tools: &[(&str, &str)]) -> Inputs {
        Inputs {
            hardware: hardware.map(String::from),
            tools: tools
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Inputs::default()
        }
    }

    const H100: &str = "NVIDIA H100 80GB HBM3 sm_90 driver 580.159.04";

    #[test]
    fn a_machine_without_the_gpu_that_measured_lacks_one() {
        let was = inputs(Some(H100), &[]);
        let here = inputs(Some("no GPU: no CUDA driver (libcuda.so.1) found"), &[]);
        let l = lack(Some(&was), &here);
        assert_eq!(
            l.to_string(),
            format!("a GPU (the results were measured on {H100})")
        );
        // The profile stage records no hardware where there is no GPU.
        assert_eq!(lack(Some(&was), &inputs(None, &[])), l);
        // Another GPU model can rerun it (its results then say where they were measured).
        assert!(lack(Some(&was), &inputs(Some("NVIDIA L4 sm_89 driver 580"), &[])).is_empty());
        // A stage that never ran and finds no GPU here needs one.
        assert_eq!(lack(None, &here).to_string(), "a GPU");
        // A skip recorded where there was no GPU stays what it is.
        assert!(lack(Some(&here), &here).is_empty());
    }

    #[test]
    fn a_declared_tool_that_is_missing_here_is_lacked_with_the_version_that_was_used() {
        let was = inputs(None, &[("ncu", "2025.3.1.0"), ("probe", "probe 1.0")]);
        let here = inputs(None, &[("ncu", "not found"), ("probe", "missing")]);
        let l = lack(Some(&was), &here);
        assert_eq!(l.to_string(), "`ncu` (2025.3.1.0) and `probe` (probe 1.0)");
        assert!(lack(Some(&here), &here).is_empty(), "never had them");
        // A pinned nvcc that is missing is installed by `repro run`: not lacked.
        let nvcc = inputs(
            None,
            &[(
                "nvcc",
                "not found (pipeline.yaml pins nvcc 13.0.88: run `repro toolchain install`)",
            )],
        );
        assert!(lack(Some(&inputs(None, &[("nvcc", "13.0.88")])), &nvcc).is_empty());
        let mut both = lack(Some(&was), &here);
        both.merge(&lack(
            None,
            &inputs(Some("no GPU: none"), &[("torch", "missing")]),
        ));
        assert_eq!(
            both.to_string(),
            "a GPU, `ncu` (2025.3.1.0), `probe` (probe 1.0) and `torch`"
        );
    }
}
