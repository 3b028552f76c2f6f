//! The environment brief: GPU, driver, toolchain and how timings were taken — as recorded
//! by the stages that made the results (`repro_gpu::env`), not as the rendering machine has them.

use super::*;
use repro_gpu::arch;

impl Builder<'_> {
    pub(super) fn env_brief(&self) -> EnvBrief {
        let e = self.env;
        let first = self
            .benches()
            .iter()
            .flat_map(|f| f.results.iter())
            .find(|r| r.status.is_ok());
        let gpu = match (&e.gpu, first.and_then(|r| r.device_name.clone())) {
            (Some(g), _) => {
                let mut facts = vec![format!("sm {}", g.compute_capability)];
                facts.extend(g.sm_count.map(|n| format!("{n} SMs")));
                facts.extend(g.memory_bytes.map(|b| format!("{} GiB", b / (1 << 30))));
                format!("{} ({})", g.name, facts.join(", "))
            }
            (None, Some(name)) => format!("{name} (from the bench records)"),
            (None, None) => format!("{NA}: no result here was measured on a GPU"),
        };
        let driver = e
            .gpu
            .as_ref()
            .map(|g| {
                let cuda = g
                    .cuda_driver_version
                    .as_ref()
                    .map(|c| format!(", CUDA {c}"))
                    .unwrap_or_default();
                format!("{}{cuda}", g.driver_version.as_deref().unwrap_or(NA))
            })
            .unwrap_or_else(|| NA.into());
        // Launches per sample differ by shape (a sample lasts long enough to time): say
        // the range, not the first record's count.
        let per_sample: Vec<u32> = self
            .benches()
            .iter()
            .flat_map(|f| &f.results)
            .filter_map(|r| r.timing_mode.as_ref().map(|t| t.launches_per_sample))
            .collect();
        let launches = match (per_sample.iter().min(), per_sample.iter().max()) {
            (Some(1), Some(1)) => "1 launch per sample".to_string(),
            (Some(lo), Some(hi)) if lo == hi => format!("{lo} launches per sample"),
            (Some(lo), Some(hi)) => format!("{lo}–{hi} launches per sample"),
            _ => NA.to_string(),
        };
        let timing = first
            .and_then(|r| r.timing_mode.as_ref())
            .map(|t| {
                let method = match t.timer_overhead_us {
                    Some(us) => format!("{} (timer's own {us:.2} µs subtracted)", t.method),
                    None => t.method.clone(),
                };
                format!(
                    "{method}, {launches}, L2 {}; warmup {}, iters {}",
                    t.l2,
                    first.map_or(0, |r| r.warmup),
                    first.map_or(0, |r| r.iters)
                )
            })
            .unwrap_or_else(|| NA.into());
        let torch = match (&e.python, &e.torch) {
            (_, Some(t)) => format!(
                "torch {t}{}",
                e.python
                    .as_ref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            ),
            (Some(p), None) => format!("{p}, torch {NA}"),
            (None, None) => "not used (baselines did not run)".into(),
        };
        EnvBrief {
            on_gpu: e.gpu.is_some() || first.is_some(),
            gpu,
            driver,
            nvcc: e.nvcc.clone().unwrap_or_else(|| NA.into()),
            ncu: e.ncu.clone().unwrap_or_else(|| NA.into()),
            torch,
            timing,
            unmeasured_arch: self.unmeasured_arch(),
        }
    }

    /// When the pipeline declares architectures that no timing here ran on (the L4's `sm_89`
    /// beside the H100's `sm_90a`), one sentence saying their timings are not measured:
    /// numbers from an H100 must not pass for an L4's.
    fn unmeasured_arch(&self) -> Option<String> {
        let measured = self.measured_archs();
        let unmeasured: Vec<&str> = self
            .pipeline
            .arch
            .iter()
            .map(String::as_str)
            .filter(|a| !measured.iter().any(|m| arch::base(m) == arch::base(a)))
            .collect();
        if measured.is_empty() || unmeasured.is_empty() {
            return None;
        }
        let list = |l: &[&str]| format!("`{}`", l.join("`, `"));
        let on: Vec<&str> = measured.iter().map(String::as_str).collect();
        Some(format!(
            "Timings for {} (declared in `arch:` in pipeline.yaml; built and gated, see PTXAS below) are not measured: every timing here ran on {} builds.",
            list(&unmeasured),
            list(&on)
        ))
    }

    /// The architectures of the cubins the timings ran on: what the bench records say; for
    /// records written before they said it, the declared one the bench stage's recorded GPU
    /// runs, else the one architecture each build record of that time held.
    fn measured_archs(&self) -> std::collections::BTreeSet<String> {
        let timed: Vec<&BenchFile> = self
            .benches()
            .iter()
            .filter(|f| any_timed(std::slice::from_ref(*f)))
            .collect();
        let recorded: std::collections::BTreeSet<String> =
            timed.iter().filter_map(|f| f.arch.clone()).collect();
        if !recorded.is_empty() || timed.is_empty() {
            return recorded;
        }
        let from_gpu = self
            .stage_of(BuiltinKind::Bench)
            .and_then(|b| self.state.stages.get(b))
            .and_then(|s| s.hardware.as_deref())
            .and_then(|h| h.split_whitespace().find(|w| arch::is_valid(w)))
            .map(|sm| {
                let specific = format!("{sm}a");
                if self.pipeline.arch.contains(&specific) {
                    specific
                } else {
                    sm.to_string()
                }
            });
        if let Some(a) = from_gpu {
            return [a].into();
        }
        let builds = self.artifacts.builds.iter().flatten();
        let single: Option<Vec<&String>> = builds
            .filter(|b| b.status.is_ok())
            .map(|b| {
                (b.archs.len() == 1)
                    .then(|| b.archs.keys().next())
                    .flatten()
            })
            .collect();
        single.unwrap_or_default().into_iter().cloned().collect()
    }
}
