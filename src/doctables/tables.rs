//! The generated tables: each renders one markdown table from the committed artifacts
//! (read by the report's own loader) or from a committed result file under
//! `benches/results/`. Every table says where its numbers come from.

use repro_pipeline::{kind::Configs, Pipeline};
use repro_report::artifacts::Artifacts;
use repro_report::{
    context::num, context::scopes, context::shape_p50, context::shapes_in_order, context::Scoped,
    context::NA,
};
use repro_schema::{BenchFile, BenchResult};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// What a table is rendered from.
pub struct Sources<'a> {
    pub root: &'a Path,
    pub pipeline: &'a Pipeline,
    pub configs: &'a Configs,
    pub artifacts: &'a Artifacts,
    pub control: Option<&'a str>,
    pub primary: Option<&'a str>,
}

/// The names `<!-- repro:table NAME -->` accepts, besides `results/FILE` and
/// `report:SECTION;SECTION…`.
pub const NAMES: &[&str] = &[
    "variants",
    "perf-gates",
    "resources",
    "ncu",
    "tune",
    "exec-example",
    "crates",
    "dispatch",
];

/// Render table `name`; `Err` names what is wrong with the marker.
pub fn render(name: &str, s: &Sources) -> Result<String, String> {
    if let Some(file) = name.strip_prefix("results/") {
        return Ok(results_file(s.root, file));
    }
    if let Some(sections) = name.strip_prefix("report:") {
        return report_excerpt(s.root, sections);
    }
    Ok(match name {
        "variants" => variants(s),
        "perf-gates" => perf_gates(s.artifacts),
        "resources" => resources(s.artifacts),
        "ncu" => ncu(s.artifacts),
        "tune" => tune(s.artifacts, s.primary),
        "exec-example" => exec_example(s),
        "crates" => super::crates::render(s.root)?,
        "dispatch" => super::dispatch::render(s),
        _ => {
            return Err(format!(
            "unknown table {name:?}: expected one of {}, results/FILE or report:SECTION;SECTION",
            NAMES.join(", ")
        ))
        }
    })
}

fn not_committed(what: &str) -> String {
    format!("*No committed {what} (`artifacts/` holds none): run the pipeline on a GPU and `repro commit`.*\n")
}

fn ratio(x: Option<f64>) -> String {
    x.map_or(NA.to_string(), |v| format!("{}×", num(Some(v), 3)))
}

fn div(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn worst(
    results: &[BenchResult],
    shape: &str,
    field: fn(&BenchResult) -> Option<f64>,
) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.shape == shape && r.status.is_ok())
        .filter_map(field)
        .filter(|x| x.is_finite())
        .reduce(f64::max)
}

/// Device, timing method and sample counts of the records, for the caption.
fn provenance<'a>(files: impl IntoIterator<Item = &'a BenchFile>) -> String {
    let mut devices = BTreeSet::new();
    let mut methods = BTreeSet::new();
    let mut seeds = BTreeSet::new();
    for f in files {
        for r in f.results.iter().filter(|r| r.status.is_ok()) {
            if let Some(d) = &r.device_name {
                devices.insert(d.clone());
            }
            if let Some(m) = &r.timing_mode {
                methods.insert(format!("{}, L2 {}", m.method, m.l2));
            }
            seeds.insert(r.seed);
        }
    }
    let list = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>().join("; ");
    format!(
        "Device: {}. Timing: {}. Seeds: {}.",
        list(devices),
        list(methods),
        seeds.len()
    )
}

/// Variant × shape from `artifacts/bench/`, one table per workload: each part holds the
/// workload's own variants, shapes and baselines and its own control, as the report scopes
/// them (`report::context::scopes`), so no ratio divides one workload's kernel by
/// another's. p50 is the median over seeds of the per-seed p50s; every "vs" column is the
/// other's p50 / this p50, both medians over seeds (a ratio of medians, as the performance
/// gate computes it).
fn variants(s: &Sources) -> String {
    let parts: Vec<String> = scopes(s.pipeline, s.configs, s.artifacts)
        .iter()
        .filter_map(workload_variants)
        .collect();
    if parts.is_empty() {
        return not_committed("bench results");
    }
    format!(
        "{}
p50 = median over seeds of each record's p50; \"vs X\" = X's p50 / this p50 \
         (a ratio of medians, as the performance gate computes it), X being the row's own \
         workload's baseline or control. Source: `artifacts/bench/*.json`.\n",
        parts.join("\n")
    )
}

/// One workload's part of [`variants`]: a heading naming it (when the pipeline declares
/// workloads), its variants × its shapes, its baselines' p50s, and the caption; `None` when
/// none of its variants has a bench record.
fn workload_variants(part: &Scoped) -> Option<String> {
    let benches = part.artifacts.benches.as_ref().filter(|b| !b.is_empty())?;
    let baselines = part.artifacts.baselines.clone().unwrap_or_default();
    let control = part.scope.control.as_deref();
    let mut out = String::new();
    if !part.scope.workload.is_empty() {
        let _ = write!(out, "**Workload `{}`**\n\n", part.scope.workload);
    }
    out.push_str(&variant_rows(benches, &baselines, control));
    if !baselines.is_empty() {
        out.push_str(&baseline_rows(benches, &baselines));
    }
    let _ = writeln!(
        out,
        "\n{} Control: `{}`.",
        provenance(benches.iter().chain(baselines.iter())),
        control.unwrap_or(NA)
    );
    Some(out)
}

/// The variant × shape table of `benches` on their shapes, "vs" each of `baselines` and
/// `control`.
fn variant_rows(benches: &[BenchFile], baselines: &[BenchFile], control: Option<&str>) -> String {
    let control = control.and_then(|c| benches.iter().find(|b| b.name == c));
    let shapes = shapes_in_order(benches.iter());
    let mut out = String::from("| variant | shape | p50 µs | worst max_abs_err |");
    for b in baselines {
        let _ = write!(out, " vs {} |", b.name);
    }
    out.push_str(" vs control | worst CV |\n|---|---|---:|---:|");
    out.push_str(&"---:|".repeat(baselines.len() + 2));
    out.push('\n');
    for f in benches {
        for shape in &shapes {
            let mine = shape_p50(&f.results, shape);
            let _ = write!(
                out,
                "| {} | {shape} | {} | {} |",
                f.name,
                num(mine, 2),
                num(worst(&f.results, shape, |r| r.max_abs_err), 6)
            );
            for b in baselines {
                let _ = write!(out, " {} |", ratio(div(shape_p50(&b.results, shape), mine)));
            }
            let vs_control = control.and_then(|c| div(shape_p50(&c.results, shape), mine));
            let _ = writeln!(
                out,
                " {} | {} |",
                ratio(vs_control),
                num(worst(&f.results, shape, |r| r.cv), 3)
            );
        }
    }
    out
}

/// The p50 of each of `baselines` on the shapes of `benches`.
fn baseline_rows(benches: &[BenchFile], baselines: &[BenchFile]) -> String {
    let shapes = shapes_in_order(benches.iter());
    let mut out = String::from("\n| baseline | shape | p50 µs |\n|---|---|---:|\n");
    for b in baselines {
        for shape in &shapes {
            let _ = writeln!(
                out,
                "| {} | {shape} | {} |",
                b.name,
                num(shape_p50(&b.results, shape), 2)
            );
        }
    }
    out
}

/// The gates of `artifacts/bench/*.json` other than correctness (performance gates).
fn perf_gates(a: &Artifacts) -> String {
    let Some(benches) = a.benches.as_ref() else {
        return not_committed("bench results");
    };
    let mut out = String::from(
        "| gate | subject | measured | threshold | verdict |\n|---|---|---:|---:|---|\n",
    );
    let mut any = false;
    for g in benches
        .iter()
        .flat_map(|f| &f.gates)
        .filter(|g| !g.gate.starts_with("correctness."))
    {
        any = true;
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} {} | {} |",
            g.gate,
            g.subject,
            num(Some(g.measured), 3),
            g.op,
            num(Some(g.threshold), 3),
            if g.pass { "pass" } else { "FAIL" }
        );
    }
    if !any {
        return "*The committed bench results carry no performance gate.*\n".into();
    }
    out.push_str("\nSource: the gates recorded in `artifacts/bench/*.json`.\n");
    out
}

/// Resource usage and PTXAS gates from `artifacts/build/*.json`.
fn resources(a: &Artifacts) -> String {
    let Some(builds) = a.builds.as_ref().filter(|b| !b.is_empty()) else {
        return not_committed("build records");
    };
    let mut out = String::from(
        "| variant | arch | registers | static smem | dynamic smem | spill st/ld | PTXAS gates |\n\
         |---|---|---:|---:|---:|---:|---|\n",
    );
    let mut compilers = BTreeSet::new();
    for r in builds {
        compilers.insert(r.nvcc_version.clone());
        for (arch, build) in &r.archs {
            let Some(e) = r.entry_on(arch) else {
                let _ = writeln!(out, "| {} | {arch} | {} | | | | |", r.variant, build.status);
                continue;
            };
            let n = |x: Option<u64>| x.map_or("0".to_string(), |v| v.to_string());
            let failed: Vec<String> = build
                .gates
                .iter()
                .filter(|g| !g.pass)
                .map(|g| format!("{} {} > {}", g.gate, g.measured, g.threshold))
                .collect();
            let verdict = if build.gates.is_empty() {
                "not gated".to_string()
            } else if failed.is_empty() {
                "pass".to_string()
            } else {
                format!("FAIL: {}", failed.join(", "))
            };
            let _ = writeln!(
                out,
                "| {} | {arch} | {} | {} | {} | {}/{} | {verdict} |",
                r.variant,
                e.registers.map_or(NA.to_string(), |v| v.to_string()),
                n(e.smem_bytes),
                n(build.dynamic_smem_bytes),
                n(e.spill_store_bytes),
                n(e.spill_load_bytes),
            );
        }
    }
    let _ = write!(
        out,
        "\nCompiler: {}. Source: `artifacts/build/*.json` (`repro build --list` prints the same).\n",
        compilers.into_iter().collect::<Vec<_>>().join("; ")
    );
    out
}

/// Nsight Compute's named metrics from `artifacts/ncu/summary.json`.
fn ncu(a: &Artifacts) -> String {
    let Some(s) = a.ncu.as_ref() else {
        return not_committed("Nsight Compute summary");
    };
    let mut out = String::from(
        "| target | variant | kernel µs | SM % | tensor % | occupancy % | DRAM % | L2 hit % | regs |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for t in &s.targets {
        if !t.status.is_ok() {
            let _ = writeln!(
                out,
                "| {} | {} | {}: {} | | | | | | |",
                t.target,
                t.variant,
                t.status,
                t.reason.as_deref().unwrap_or("")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.target,
            t.variant,
            num(t.kernel_time_us, 2),
            num(t.sm_util_pct, 1),
            num(t.tensor_core_util_pct, 1),
            num(t.achieved_occupancy_pct, 1),
            num(t.dram_bw_pct_peak, 1),
            num(t.l2_hit_rate_pct, 1),
            num(t.registers_per_thread, 0)
        );
    }
    let _ = write!(
        out,
        "\nncu: {}; clock control: {}; cache control: {}. One profiled launch per target. \
         Source: `artifacts/ncu/summary.json`.\n",
        s.ncu_version.as_deref().unwrap_or(NA),
        s.clock_control,
        if s.cache_control.is_empty() {
            NA
        } else {
            &s.cache_control
        }
    );
    out
}

/// The tune log's outcome and the elite from `artifacts/tune/`.
fn tune(a: &Artifacts, primary: Option<&str>) -> String {
    let Some(t) = a.tune.as_ref() else {
        return not_committed("tune results");
    };
    let mut by_status = std::collections::BTreeMap::<&str, usize>::new();
    for tr in &t.trials {
        *by_status.entry(tr.status.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let mut out = format!(
        "{} trials ({}).\n\n| rank | trial | p50 µs (tune) | config |\n|---:|---:|---:|---|\n",
        t.trials.len(),
        counts.join(", ")
    );
    for e in &t.elite {
        let config: Vec<String> = e.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | `{}` |",
            e.rank,
            e.trial,
            num(Some(e.p50_us), 2),
            config.join(" ")
        );
    }
    let _ = write!(
        out,
        "\np50 as the tuner timed each trial on the primary shape ({}). \
         Source: `artifacts/tune/tune_log.csv`, `artifacts/tune/topk.json`.\n",
        primary.unwrap_or(NA)
    );
    out
}

/// The control's first record on the primary shape, as `repro exec` printed it.
fn exec_example(s: &Sources) -> String {
    let record = s.control.zip(s.primary).and_then(|(control, primary)| {
        let file = s
            .artifacts
            .benches
            .as_ref()?
            .iter()
            .find(|b| b.name == control)?;
        let r = file.results.iter().find(|r| r.shape == primary)?;
        Some((control, primary, r))
    });
    let Some((control, primary, r)) = record else {
        return not_committed("bench record of the control on the primary shape");
    };
    // The speedups are the bench stage's, added after `repro exec` printed the line.
    let mut r = r.clone();
    r.speedups.clear();
    let line = serde_json::to_string(&r).expect("bench records always serialize");
    format!(
        "```console\n$ repro exec --variant {control} --shape {primary} --seed {}\n{line}\n```\n\n\
         (The committed run's record, from `artifacts/bench/{control}.json`.)\n",
        r.seed
    )
}

/// A committed result file under `benches/results/`, inlined (its header names the
/// command, device, date and commit), or a note saying it is not there yet.
fn results_file(root: &Path, file: &str) -> String {
    let rel = format!("benches/results/{file}");
    match std::fs::read_to_string(root.join(&rel)) {
        Ok(text) => format!("From `{rel}`:\n\n{}", text.trim_end().to_string() + "\n"),
        Err(_) => format!(
            "*Not measured in this repository yet: `{rel}` is written by `benches/evidence.sh` \
             on a GPU machine (see its header).*\n"
        ),
    }
}

/// The committed `reports/summary.md`, cut to its title and verdict and the named sections
/// (`;`-separated heading texts, each kept down to the next heading of its level or
/// above), fenced as markdown. A section the report does not have is an error, so a
/// renamed section fails `--check` instead of silently vanishing.
fn report_excerpt(root: &Path, sections: &str) -> Result<String, String> {
    let rel = repro_report::SUMMARY;
    let Ok(text) = std::fs::read_to_string(root.join(rel)) else {
        return Ok(format!(
            "*No committed `{rel}`: run the pipeline and `repro commit`.*\n"
        ));
    };
    let lines: Vec<&str> = text.lines().collect();
    let level = |l: &str| {
        let n = l.chars().take_while(|c| *c == '#').count();
        (n > 0 && l[n..].starts_with(' ')).then_some(n)
    };
    let first = lines
        .iter()
        .position(|l| level(l) == Some(2))
        .unwrap_or(lines.len());
    let mut parts = vec![lines[..first].join("\n").trim_end().to_string()];
    for want in sections.split(';').map(str::trim) {
        let start = lines
            .iter()
            .position(|l| level(l).is_some_and(|n| l[n..].trim() == want))
            .ok_or_else(|| format!("{rel} has no section {want:?}"))?;
        let depth = level(lines[start]).unwrap_or(2);
        let end = lines[start + 1..]
            .iter()
            .position(|l| level(l).is_some_and(|n| n <= depth))
            .map_or(lines.len(), |i| start + 1 + i);
        parts.push(lines[start..end].join("\n").trim_end().to_string());
    }
    Ok(format!("````markdown\n{}\n````\n", parts.join("\n\n…\n\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_pipeline::workload::testing::pipeline;
    use repro_pipeline::workload::testing::SHIPPED_PIPELINE;
    use repro_schema::RunStatus;

    /// A bench file of `name` (of `workload`) with one record on `mission` at `p50` µs.
    fn file(name: &str, kind: &str, workload: &str, p50: f64) -> BenchFile {
        let mut r = BenchResult::blank("mission", Default::default(), 0, (1, 1), RunStatus::Ok);
        r.p50_us = Some(p50);
        BenchFile {
            name: name.into(),
            kind: kind.into(),
            workload: Some(workload.into()),
            status: RunStatus::Ok,
            reason: None,
            defines: Default::default(),
            nvcc_version: None,
            precision: None,
            arch: None,
            driver: None,
            results: vec![r],
            gates: Vec::new(),
            measured: None,
        }
    }

    /// The part of `table` from `from` to the next `**Workload` heading (or the end).
    fn part<'t>(table: &'t str, from: &str) -> &'t str {
        let start = table
            .find(from)
            .unwrap_or_else(|| panic!("{from}:\n{table}"));
        let rest = &table[start + from.len()..];
        &rest[..rest.find("**Workload").unwrap_or(rest.len())]
    }

    /// Both shipped workloads have a `mission` shape: each row's ratios use its own
    /// workload's control and baselines, never the other's.
    #[test]
    fn each_workloads_rows_divide_only_by_its_own_control_and_baselines() {
        let p = pipeline(SHIPPED_PIPELINE);
        let artifacts = Artifacts {
            benches: Some(vec![
                file("mma-m64", "variant", "sdpa_fp8", 8.0),
                file("rms-scalar", "variant", "rmsnorm", 20.0),
                file("rms-warp-row", "variant", "rmsnorm", 10.0),
                file("stage2-baseline", "variant", "sdpa_fp8", 40.0),
            ]),
            baselines: Some(vec![
                file("torch-rmsnorm", "baseline", "rmsnorm", 30.0),
                file("torch-sdpa-best", "baseline", "sdpa_fp8", 16.0),
            ]),
            ..Artifacts::default()
        };
        let s = Sources {
            root: Path::new("."),
            pipeline: &p,
            configs: &Default::default(),
            artifacts: &artifacts,
            control: p.control.as_deref(),
            primary: None,
        };
        let table = render("variants", &s).unwrap();
        let attention = part(&table, "**Workload `sdpa_fp8`**");
        let rmsnorm = part(&table, "**Workload `rmsnorm`**");
        assert!(
            attention.contains("| mma-m64 | mission | 8.00 | n/a | 2.000× | 5.000× |")
                && !attention.contains("rms"),
            "{table}"
        );
        assert!(
            rmsnorm.contains("| rms-warp-row | mission | 10.00 | n/a | 3.000× | 2.000× |")
                && rmsnorm.contains("Control: `rms-scalar`.")
                && !rmsnorm.contains("sdpa")
                && !rmsnorm.contains("stage2-baseline"),
            "{table}"
        );
    }
}
