//! The harness against ncu: where a harness p50 and an ncu kernel time measure the same
//! kernel (or the same ratio), how far apart they are, flagged beyond ±3 %; and a gate's
//! comparison by ncu's kernel times beside the harness's verdict.

use super::*;
use repro_schema::verdict::Limit;

/// How far ncu and the harness may differ before the report flags it.
pub const AGREEMENT_PCT: f64 = 3.0;

/// `ncu` against `harness` as a signed percentage, `⚠`-flagged beyond ±[`AGREEMENT_PCT`]:
/// `+1.2%`, `⚠ −8.3%`.
pub(super) fn gap(harness: f64, ncu: f64) -> String {
    let pct = (ncu / harness - 1.0) * 100.0;
    if !pct.is_finite() {
        return NA.into();
    }
    let text = format!("{pct:+.1}%").replace('-', "−");
    if pct.abs() > AGREEMENT_PCT {
        format!("⚠ {text}")
    } else {
        text
    }
}

/// A gate's speedup by ncu's median kernel times, and where its verdict against
/// `threshold` differs from the harness's (`harness_pass`: `None` when the harness's row
/// has none): `1.072× ⚠ fails by ncu, passes by the harness`.
pub(super) fn by_ncu(
    speedup: Option<f64>,
    threshold: Option<f64>,
    harness_pass: Option<bool>,
) -> String {
    let Some(s) = speedup.filter(|s| s.is_finite()) else {
        return NA.into();
    };
    let text = format!("{s:.3}×");
    match (threshold, harness_pass) {
        (Some(t), Some(h)) if Limit::at_least(t).judge(s).pass() != h => {
            let verdict = |pass: bool| if pass { "passes" } else { "fails" };
            format!(
                "{text} ⚠ {} by ncu, {} by the harness",
                verdict(!h),
                verdict(h)
            )
        }
        _ => text,
    }
}

/// The harness's verdict a gate row shows (`✅`/`❌`), if any.
pub(super) fn row_verdict(row: &PerfRow) -> Option<bool> {
    if row.result.starts_with('✅') {
        Some(true)
    } else if row.result.starts_with('❌') {
        Some(false)
    } else {
        None
    }
}

impl Builder<'_> {
    /// The harness p50 of what profile record `t` ran: its variant's or baseline's bench
    /// record on its shape (a record without one ran its workload's primary).
    pub(super) fn harness_p50_of(&self, t: &NcuTarget) -> Option<f64> {
        let shape = match &t.shape {
            Some(shape) => shape.clone(),
            None => repro_pipeline::workload::Workloads::of(self.pipeline)
                .of_variant(self.pipeline, &t.variant)?
                .1
                .primary
                .clone(),
        };
        self.benches()
            .iter()
            .chain(self.baselines())
            .find(|f| f.name == t.variant)
            .and_then(|f| shape_p50(&f.results, &shape))
    }

    /// The median kernel time of `name`'s profile on `shape` (a variant on the primary is
    /// labelled by itself, elsewhere `<name>@<shape>`).
    pub(super) fn ncu_time_of(&self, name: &str, shape: &str) -> Option<f64> {
        let targets = &self.artifacts.ncu.as_ref()?.targets;
        targets
            .iter()
            .filter(|t| t.status.is_ok() && t.variant == name)
            .find(|t| t.shape.as_deref().unwrap_or(&self.scope.primary) == shape)
            .and_then(|t| t.kernel_time_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_beyond_three_percent_are_flagged() {
        assert_eq!(gap(10.0, 10.29), "+2.9%");
        assert_eq!(gap(10.0, 9.71), "−2.9%");
        assert_eq!(gap(10.0, 9.0), "⚠ −10.0%");
        assert_eq!(gap(10.0, 10.5), "⚠ +5.0%");
    }

    #[test]
    fn a_verdict_that_differs_by_ncu_is_said() {
        assert_eq!(by_ncu(Some(1.12), Some(1.1), Some(true)), "1.120×");
        assert_eq!(
            by_ncu(Some(1.07), Some(1.1), Some(true)),
            "1.070× ⚠ fails by ncu, passes by the harness"
        );
        assert_eq!(
            by_ncu(Some(1.2), Some(1.1), Some(false)),
            "1.200× ⚠ passes by ncu, fails by the harness"
        );
        assert_eq!(by_ncu(Some(1.07), None, Some(true)), "1.070×");
        assert_eq!(by_ncu(None, Some(1.1), Some(true)), NA);
    }
}
