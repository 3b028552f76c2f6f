//! The environment brief: GPU, driver, toolchain and how timings were taken.

use super::*;
use crate::stages::build::arch;

impl Builder<'_> {
    pub(super) fn env_brief(&self) -> EnvBrief {
        let e = self.env;
        let first = self
            .benches()
            .iter()
            .flat_map(|f| f.results.iter())
            .find(|r| r.status == "ok");
        let gpu = match (&e.gpu, first.and_then(|r| r.device_name.clone())) {
            (Some(g), _) => format!(
                "{} (sm {}, {} SMs, {} GiB)",
                g.name,
                g.compute_capability,
                g.sm_count,
                g.memory_bytes / (1 << 30)
            ),
            (None, Some(name)) => format!("{name} (from the bench records)"),
            // The probe's message is usually a skip reason already stated: cite it.
            (None, None) => match e.gpu_note.as_deref().map(|n| self.notes.cite(n)) {
                Some(c) if c.starts_with("[^") => format!("{NA}: no GPU {c}"),
                Some(c) => format!("{NA}: {c}"),
                None => format!("{NA}: no GPU"),
            },
        };
        let driver = e
            .gpu
            .as_ref()
            .map(|g| {
                format!(
                    "{}, CUDA {}",
                    g.driver_version.as_deref().unwrap_or(NA),
                    g.cuda_driver_version
                )
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
            gpu,
            driver,
            nvcc: e.nvcc.clone().unwrap_or_else(|| NA.into()),
            ncu: e.ncu.clone().unwrap_or_else(|| NA.into()),
            torch,
            timing,
            unmeasured_arch: self.unmeasured_arch(),
        }
    }

    /// When the timings were taken on another architecture than the pipeline's own `arch:` (the
    /// card it is written for, built when no GPU is present), one sentence saying that card's
    /// timings are not measured: numbers from an H100 must not pass for an L4's.
    fn unmeasured_arch(&self) -> Option<String> {
        let declared = self.pipeline.arch.as_deref()?;
        let measured = any_timed(self.benches());
        let built: std::collections::BTreeSet<&str> = self
            .artifacts
            .builds
            .iter()
            .flatten()
            .filter(|b| b.status == "ok")
            .map(|b| b.arch.as_str())
            .collect();
        if !measured
            || built.is_empty()
            || built.iter().any(|a| arch::base(a) == arch::base(declared))
        {
            return None;
        }
        let on: Vec<&str> = built.into_iter().collect();
        Some(format!(
            "Timings for `{declared}` (`arch:` in pipeline.yaml, the GPU this pipeline is written for) are not measured: every timing here ran on `{}` builds.",
            on.join("`, `")
        ))
    }
}
