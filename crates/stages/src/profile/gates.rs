//! `gates.profile` of pipeline.yaml: rules on what the profile measured, judged by the
//! profile stage on each profiled variant's medians and recorded as `GateResult`s in
//! `artifacts/ncu/summary.json` (docs/guide/pipeline-yaml.md, "Profile gates").
//!
//! A rule holds one check, or several under `any_of` (it passes when one does). A check
//! names a metric (a summary field such as `tensor_core_util_pct`, or a raw ncu metric the
//! profile reads) and either a bound (`min`, `max`: inclusive) or a relation to the same
//! metric of another profiled variant (`vs: control` or a variant; `expect: up`, `down`, or
//! `equal` within `tolerance_pct`).

use repro_ncu::metrics;
use repro_ncu::metrics::Arch;
use repro_ncu::metrics::Field;
use repro_ncu::options::ProfileOptions;
use repro_pipeline::kind::Configs;
pub use repro_pipeline::profile_rules::Check;
pub use repro_pipeline::profile_rules::Expect;
pub use repro_pipeline::profile_rules::ProfileRule;
use repro_pipeline::Pipeline;
use repro_schema::verdict::Bound;
use repro_schema::verdict::Limit;
use repro_schema::GateResult;
use repro_schema::NcuTarget;
use std::collections::{BTreeMap, BTreeSet};

/// A problem with a rule: the key path under `gates.profile.<rule>`, the message, the fix.
pub type Problem = (Vec<String>, String, String);

/// Every problem of `gates.profile`: a rule's shape, unknown metrics, variants and targets.
pub fn problems(pipeline: &Pipeline, configs: &Configs) -> Vec<(String, Problem)> {
    let rules = &pipeline.gates.profile;
    if rules.is_empty() {
        return Vec::new();
    }
    let profiles: Vec<&ProfileOptions> = configs.of::<ProfileOptions>().map(|(_, o)| o).collect();
    let known = known_metrics(&profiles);
    let mut out = Vec::new();
    for (name, rule) in rules {
        let mut push = |p: Problem| out.push((name.clone(), p));
        if !rule.any_of.is_empty() && rule.has_own_check() {
            push((
                vec!["any_of".into()],
                "a rule has either its own check or `any_of`, not both".into(),
                "move the rule's `metric:` and its bound into the `any_of` list".into(),
            ));
        }
        for (path, check) in rule.checks() {
            if !path.is_empty() && (!check.any_of.is_empty() || !check.targets.is_empty()) {
                push((
                    path.clone(),
                    "a check inside `any_of` takes neither `any_of` nor `targets`".into(),
                    "give the rule itself its `targets:`, and nest no `any_of`".into(),
                ));
            }
            for (key, message, help) in check_problems(check, &known, pipeline, &profiles) {
                let mut at = path.clone();
                at.extend(key);
                push((at, message, help));
            }
        }
        for (i, t) in rule.targets.iter().enumerate() {
            if let Some((message, help)) = unknown_variant(t, pipeline, &profiles) {
                push((vec!["targets".into(), i.to_string()], message, help));
            }
        }
    }
    out
}

/// The problems of one check; key paths under the check.
fn check_problems(
    check: &Check,
    known: &BTreeSet<String>,
    p: &Pipeline,
    profiles: &[&ProfileOptions],
) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::new();
    let mut push = |key: &str, message: String, help: &str| {
        let at = if key.is_empty() {
            vec![]
        } else {
            vec![key.to_string()]
        };
        out.push((at, message, help.to_string()));
    };
    match &check.metric {
        None => push(
            "",
            "the check names no `metric:`".into(),
            "e.g. `{metric: tensor_core_util_pct, min: 50}`",
        ),
        Some(m) if !known.contains(m) => push(
            "metric",
            format!("unknown metric `{m}`: neither a field of artifacts/ncu/summary.json nor a raw metric the profile reads"),
            &format!(
                "name a field ({}) or a raw ncu metric; add a raw metric to the profile stage's `metrics:` to read it",
                Field::ALL.map(Field::key).join(", ")
            ),
        ),
        Some(_) => {}
    }
    let bound = check.min.is_some() || check.max.is_some();
    let relation = check.vs.is_some() || check.expect.is_some();
    if bound == relation || (check.min.is_some() && check.max.is_some()) {
        push(
            "",
            "a check has one bound (`min:` or `max:`) or one relation (`vs:` with `expect:`)".into(),
            "e.g. `{metric: dram_bw_pct_peak, max: 50}` or `{metric: tensor_core_util_pct, vs: control, expect: up}`; a band is two rules",
        );
    }
    if relation && (check.vs.is_none() || check.expect.is_none()) {
        push(
            "",
            "a relation names both `vs:` (control or a variant) and `expect:` (up, down or equal)"
                .into(),
            "e.g. `{metric: sm_util_pct, vs: control, expect: up}`",
        );
    }
    if let Some((message, help)) = check
        .vs
        .as_deref()
        .and_then(|v| unknown_variant(v, p, profiles))
    {
        push("vs", message, &help);
    }
    let equal = check.expect == Some(Expect::Equal);
    if equal != check.tolerance_pct.is_some() {
        push(
            "tolerance_pct",
            "`expect: equal` needs a `tolerance_pct:`, and only it takes one".into(),
            "e.g. `{metric: smem_bank_conflicts, vs: control, expect: equal, tolerance_pct: 5}`",
        );
    }
    out
}

/// Why `name` cannot be a rule's variant, if it cannot: `control` or a variant, one the
/// profile stages profile when the pipeline has any (without one no rule is judged).
fn unknown_variant(
    name: &str,
    p: &Pipeline,
    profiles: &[&ProfileOptions],
) -> Option<(String, String)> {
    let profiled = profiled_variants(p, profiles);
    let staged = !profiles.is_empty();
    let variant = p.variants.contains_key(name);
    if name == "control" || (variant && (!staged || profiled.contains(name))) {
        return None;
    }
    let why = if variant {
        "is not a target of the profile stage"
    } else {
        "is not a variant"
    };
    let list: Vec<&str> = profiled.iter().map(String::as_str).collect();
    Some((
        format!("`{name}` {why}"),
        format!(
            "name `control` or a profiled variant ({}); add a variant to the profile stage's `targets:` to profile it",
            list.join(", ")
        ),
    ))
}

/// The variants the profile stages profile on their primary shapes (`control` resolved).
fn profiled_variants(p: &Pipeline, profiles: &[&ProfileOptions]) -> BTreeSet<String> {
    profiles
        .iter()
        .flat_map(|o| &o.targets)
        .filter_map(|t| match t.as_str() {
            "control" => p.control.clone(),
            _ => Some(t.clone()),
        })
        .collect()
}

/// The names a check may use: every field, and every raw metric a profile stage reads on
/// any architecture (its fallbacks and the stages' own `metrics:` included).
fn known_metrics(profiles: &[&ProfileOptions]) -> BTreeSet<String> {
    let extra: Vec<String> = profiles.iter().flat_map(|o| o.metrics.clone()).collect();
    let mut known: BTreeSet<String> = metrics::request_list(None, &extra).into_iter().collect();
    for field in Field::ALL {
        known.insert(field.key().to_string());
        for arch in Arch::ALL {
            known.extend(
                metrics::fallback_aliases(field, arch)
                    .iter()
                    .map(|m| m.to_string()),
            );
        }
    }
    known
}

/// A profiled target a rule may judge: its record, its variant and its workload's control.
pub struct Subject<'a> {
    pub record: &'a NcuTarget,
    pub workload: &'a str,
    pub control: Option<String>,
}

/// Every rule on every subject it applies to, in rule order. Only variants and tune elites
/// on their primary shape that were profiled are judged.
pub fn evaluate(rules: &BTreeMap<String, ProfileRule>, subjects: &[Subject]) -> Vec<GateResult> {
    let mut out = Vec::new();
    for (name, rule) in rules {
        for s in subjects.iter().filter(|s| applies(rule, s)) {
            let judged: Vec<Judged> = rule
                .checks()
                .into_iter()
                .filter_map(|(_, c)| judge(c, s, subjects))
                .collect();
            if let Some(result) = combine(&format!("profile.{name}"), &s.record.target, judged) {
                out.push(result);
            }
        }
    }
    out
}

/// Whether `rule` judges subject `s`: its `targets:` (by label or variant) or, when it
/// names none, every subject.
fn applies(rule: &ProfileRule, s: &Subject) -> bool {
    rule.targets.is_empty()
        || rule
            .targets
            .iter()
            .any(|t| *t == s.record.target || *t == s.record.variant)
}

/// One check judged on one subject.
struct Judged {
    measured: f64,
    threshold: f64,
    op: &'static str,
    pass: bool,
    text: String,
}

/// `check` on subject `s`; `None` when the check compares `s` with itself.
fn judge(check: &Check, s: &Subject, all: &[Subject]) -> Option<Judged> {
    let metric = check.metric.as_deref().unwrap_or_default();
    let value = metric_value(s.record, metric);
    if let Some(v) = check.vs.as_deref() {
        let other = if v == "control" {
            s.control.clone()?
        } else {
            v.to_string()
        };
        if other == s.record.variant {
            return None;
        }
        let reference = all
            .iter()
            .find(|o| o.record.variant == other && o.workload == s.workload)
            .and_then(|o| metric_value(o.record, metric));
        return Some(relation(metric, value, &other, reference, check));
    }
    let limit = match (check.min, check.max) {
        (Some(min), _) => Limit::at_least(min),
        (_, max) => Limit::at_most(max.unwrap_or(f64::NAN)),
    };
    let measured = value.unwrap_or(f64::NAN);
    let symbol = match limit.bound {
        Bound::AtLeast => "≥",
        Bound::AtMost => "≤",
    };
    Some(Judged {
        measured,
        threshold: limit.value,
        op: limit.bound.op(),
        pass: limit.judge(measured).pass(),
        text: format!("{metric} {} {symbol} {}", shown(value), limit.value),
    })
}

/// `value` against the other variant's `reference` as `check.expect` says.
fn relation(
    metric: &str,
    value: Option<f64>,
    other: &str,
    reference: Option<f64>,
    check: &Check,
) -> Judged {
    let (measured, threshold) = (value.unwrap_or(f64::NAN), reference.unwrap_or(f64::NAN));
    let tolerance = check.tolerance_pct.unwrap_or(0.0);
    let (op, pass, what) = match check.expect.unwrap_or(Expect::Up) {
        Expect::Up => (">", measured > threshold, "above".to_string()),
        Expect::Down => ("<", measured < threshold, "below".to_string()),
        Expect::Equal => (
            "≈",
            (measured - threshold).abs() <= threshold.abs() * tolerance / 100.0,
            format!("within ±{tolerance}% of"),
        ),
    };
    Judged {
        measured,
        threshold,
        op,
        pass,
        text: format!(
            "{metric} {} {what} {other}'s {}",
            shown(value),
            shown(reference)
        ),
    }
}

fn shown(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
}

/// One `GateResult` for a rule's judged checks: it passes when one of them does; its
/// figures are the first passing check's (else the first's), its detail every check's text.
fn combine(gate: &str, subject: &str, judged: Vec<Judged>) -> Option<GateResult> {
    let shown = judged.iter().find(|j| j.pass).or(judged.first())?;
    let detail = judged
        .iter()
        .map(|j| format!("{} {}", j.text, if j.pass { "✅" } else { "❌" }))
        .collect::<Vec<_>>()
        .join(" or ");
    Some(GateResult {
        gate: gate.to_string(),
        subject: subject.to_string(),
        measured: shown.measured,
        threshold: shown.threshold,
        op: shown.op.to_string(),
        pass: judged.iter().any(|j| j.pass),
        detail: Some(detail),
    })
}

/// A metric of a profile record: a field by its key, else a raw metric as printed.
pub fn metric_value(t: &NcuTarget, metric: &str) -> Option<f64> {
    match Field::from_key(metric) {
        Some(field) => repro_ncu::metrics::value(t, field),
        None => {
            let printed = t.raw.get(metric)?;
            let number = printed.split(' ').next().unwrap_or_default();
            repro_ncu::parse::parse_number(number)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(label: &str, variant: &str, tensor: f64, dram: f64) -> NcuTarget {
        let mut t = crate::profile::targets::status_target(
            label,
            variant,
            "k",
            repro_schema::RunStatus::Ok,
            String::new(),
        );
        t.reason = None;
        t.tensor_core_util_pct = Some(tensor);
        t.dram_bw_pct_peak = Some(dram);
        t.raw.insert(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum".into(),
            format!("{}", tensor * 10.0),
        );
        t
    }

    fn rules(yaml: &str) -> BTreeMap<String, ProfileRule> {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn subjects(records: &[NcuTarget]) -> Vec<Subject<'_>> {
        records
            .iter()
            .map(|record| Subject {
                record,
                workload: "w",
                control: Some("base".into()),
            })
            .collect()
    }

    #[test]
    fn an_any_of_rule_passes_when_one_check_does_and_shows_each() {
        let records = [
            record("control", "base", 12.0, 80.0),
            record("fast", "fast", 61.5, 80.0),
            record("lean", "lean", 10.0, 20.0),
        ];
        let r = rules(
            "bound: {any_of: [{metric: tensor_core_util_pct, min: 50}, {metric: dram_bw_pct_peak, max: 50}]}",
        );
        let got = evaluate(&r, &subjects(&records));
        let verdicts: Vec<(&str, bool)> =
            got.iter().map(|g| (g.subject.as_str(), g.pass)).collect();
        assert_eq!(
            verdicts,
            [("control", false), ("fast", true), ("lean", true)]
        );
        assert_eq!(got[0].gate, "profile.bound");
        assert_eq!(
            got[0].detail.as_deref(),
            Some("tensor_core_util_pct 12.00 ≥ 50 ❌ or dram_bw_pct_peak 80.00 ≤ 50 ❌")
        );
        // The figures are the passing check's.
        assert_eq!(
            (got[2].measured, got[2].op.as_str(), got[2].threshold),
            (20.0, "<=", 50.0)
        );
    }

    #[test]
    fn relations_compare_with_the_control_or_a_named_variant() {
        let records = [
            record("control", "base", 12.0, 80.0),
            record("fast", "fast", 61.5, 80.0),
            record("lean", "lean", 10.0, 20.0),
        ];
        let r = rules("tc-up: {metric: tensor_core_util_pct, vs: control, expect: up}");
        let got = evaluate(&r, &subjects(&records));
        // The control is not compared with itself.
        let verdicts: Vec<(&str, bool)> =
            got.iter().map(|g| (g.subject.as_str(), g.pass)).collect();
        assert_eq!(verdicts, [("fast", true), ("lean", false)]);
        assert_eq!(
            got[1].detail.as_deref(),
            Some("tensor_core_util_pct 10.00 above base's 12.00 ❌")
        );
        // A raw metric, about equal within a tolerance, on the targets named only.
        let r = rules(
            "same: {metric: l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum, vs: control, \
             expect: equal, tolerance_pct: 20, targets: [lean]}",
        );
        let got = evaluate(&r, &subjects(&records));
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].subject.as_str(), got[0].pass), ("lean", true));
        assert_eq!((got[0].measured, got[0].threshold), (100.0, 120.0));
    }

    #[test]
    fn a_metric_the_record_lacks_fails_the_check() {
        let mut records = [record("fast", "fast", 61.5, 80.0)];
        records[0].tensor_core_util_pct = None;
        let r = rules("tc: {metric: tensor_core_util_pct, min: 50}");
        let got = evaluate(&r, &subjects(&records));
        assert!(!got[0].pass);
        assert_eq!(
            got[0].detail.as_deref(),
            Some("tensor_core_util_pct n/a ≥ 50 ❌")
        );
    }
}

#[cfg(test)]
mod load_tests {
    use super::*;

    /// The tiny workload's pipeline with variants `base` (the control), `ws` and `other`,
    /// `gates.profile` as given, and the stages as given.
    fn pipeline(rules: &str, stages: &str) -> Pipeline {
        repro_pipeline::workload::testing::tiny_pipeline(
            &format!(
                "kernels:\n  k: {{source: kernels/k.cu, entry: k_fwd}}\nvariants:\n  base: {{kernel: k}}\n  ws: {{kernel: k}}\n  other: {{kernel: k}}\ncontrol: base\ngates:\n  profile:\n{rules}stages:\n{stages}"
            ),
            &["k"],
        )
    }

    /// The problems of `p`, its profile stages configured as their kind does.
    fn messages(p: &Pipeline) -> Vec<(String, String)> {
        let configs = Configs::new(
            p.stages
                .iter()
                .filter(|(_, s)| s.uses == "profile")
                .filter_map(|(n, s)| {
                    let o = ProfileOptions::from_spec(s, p).ok()?;
                    Some((n.clone(), repro_pipeline::kind::Config::new(o)))
                })
                .collect(),
        );
        problems(p, &configs)
            .into_iter()
            .map(|(rule, (path, message, _))| (format!("{rule}/{}", path.join("/")), message))
            .collect()
    }

    #[test]
    fn names_must_be_variants_the_profile_stage_profiles() {
        let rule = "    up: {metric: sm_util_pct, vs: other, expect: up, targets: [ws, nope]}\n";
        let p = pipeline(rule, "  prof: {uses: profile, targets: [control, ws]}\n");
        assert_eq!(
            messages(&p),
            [
                (
                    "up/vs".into(),
                    "`other` is not a target of the profile stage".into()
                ),
                ("up/targets/1".into(), "`nope` is not a variant".into()),
            ]
        );
        // Without a profile stage no rule is judged: only the names must exist.
        let p = pipeline(rule, "  b: {uses: build}\n");
        assert_eq!(
            messages(&p),
            [(
                "up/targets/1".to_string(),
                "`nope` is not a variant".to_string()
            )]
        );
    }

    #[test]
    fn a_check_inside_any_of_has_no_targets_and_the_rule_no_check_beside_it() {
        let rule = "    r: {metric: sm_util_pct, any_of: [{metric: sm_util_pct, min: 1, targets: [ws]}]}\n";
        let p = pipeline(rule, "  prof: {uses: profile, targets: [control, ws]}\n");
        let got: Vec<String> = messages(&p).into_iter().map(|(at, _)| at).collect();
        assert_eq!(got, ["r/any_of", "r/any_of/0"]);
    }
}
