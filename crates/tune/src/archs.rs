//! A tune stage's `archs:`: the build architectures it tunes. One source may be two kernel
//! families (`sdpa_fp8_ws.cu` is the warp-specialized kernel on sm_90a and the
//! register-resident one everywhere else), so the fastest family, and the space worth
//! searching, depend on the GPU. The pipeline says which tune stage searches which family
//! on which architecture; on a GPU whose cubins are of an architecture a stage does not
//! list, the stage is skipped and says which stage tunes there.

use super::options::TuneOptions;
use repro_expr::suggest;
use repro_pipeline::kind::{Configs, OptionError};

/// `archs:` as written, checked against the pipeline's `arch:` (`declared`): a non-empty
/// list of declared architectures, none twice. `None` (the key absent): every architecture.
pub fn parse(
    list: Option<Vec<String>>,
    declared: &[String],
) -> Result<Option<Vec<String>>, OptionError> {
    let Some(list) = list else {
        return Ok(None);
    };
    let at = |path: Vec<String>, message: String| OptionError { path, message };
    if declared.is_empty() {
        return Err(at(
            vec!["archs".into()],
            "`archs:` picks among the pipeline's `arch:`, which declares none; declare the architectures the build compiles, e.g. `arch: [sm_89, sm_90a]`".into(),
        ));
    }
    if list.is_empty() {
        return Err(at(
            vec!["archs".into()],
            format!(
                "expected the architectures this stage tunes, from the pipeline's `arch:` ({}), e.g. `archs: [{}]`",
                declared.join(", "),
                declared[0]
            ),
        ));
    }
    for (i, arch) in list.iter().enumerate() {
        let path = vec!["archs".to_string(), i.to_string()];
        if list[..i].contains(arch) {
            return Err(at(path, format!("`{arch}` is listed twice")));
        }
        if !declared.contains(arch) {
            let names: Vec<&str> = declared.iter().map(String::as_str).collect();
            let hint = suggest(arch, &names)
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err(at(
                path,
                format!(
                    "`{arch}` is not in the pipeline's `arch:` ({}): no cubin is built for it, so no GPU stage runs it{hint}",
                    declared.join(", ")
                ),
            ));
        }
    }
    Ok(Some(list))
}

/// Why tune stage `name` does not tune on a GPU that runs `arch` cubins; `None` when it
/// does (its `archs:` lists `arch`, or it has none).
pub fn not_tuned(name: &str, o: &TuneOptions, arch: &str) -> Option<String> {
    let archs = o.archs.as_ref()?;
    if archs.iter().any(|a| a == arch) {
        return None;
    }
    Some(format!(
        "`{name}` tunes kernel `{}` on {} only (its `archs:`), and this GPU runs {arch} cubins",
        o.kernel,
        archs.join(", ")
    ))
}

/// Why a tune stage's run skips on `arch`, and what to do instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Skip {
    /// [`not_tuned`], and which stages of its workload tune on `arch`.
    pub reason: String,
    pub fix: String,
}

/// The skip of tune stage `name` on a GPU that runs `arch` cubins, naming the tune stages
/// of the same workload that tune there (`peers`: every stage's options); `None` when it
/// tunes there.
pub fn skip(name: &str, o: &TuneOptions, arch: &str, peers: &Configs) -> Option<Skip> {
    let why = not_tuned(name, o, arch)?;
    let here: Vec<String> = peers
        .of::<TuneOptions>()
        .filter(|(n, p)| *n != name && p.workload == o.workload && not_tuned(n, p, arch).is_none())
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    let instead = match here.as_slice() {
        [] => format!("no tune stage of workload `{}` tunes {arch}", o.workload),
        [one] => format!("{one} tunes workload `{}` there", o.workload),
        many => format!("{} tune workload `{}` there", many.join(", "), o.workload),
    };
    let listed = o.archs.as_deref().unwrap_or_default().join(", ");
    Some(Skip {
        reason: format!("{why}; {instead}"),
        fix: format!(
            "nothing to do on this GPU; `repro tune {name}` on a GPU that runs {listed} tunes it, or add {arch} to its `archs:` in pipeline.yaml"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_pipeline::kind::Config;
    use repro_pipeline::{Pipeline, StageSpec};

    const PIPELINE: &str = "arch: [sm_89, sm_90a]\nkernels:\n  ws: {source: kernels/ws.cu, entry: f}\n  mma: {source: kernels/mma.cu, entry: f}\nstages:\n  build: {uses: build}\n";

    fn pipeline() -> Pipeline {
        repro_pipeline::workload::testing::tiny_pipeline(PIPELINE, &["ws", "mma"])
    }

    fn parse_stage(p: &Pipeline, stage: &str) -> Result<TuneOptions, OptionError> {
        let spec: StageSpec = serde_yaml::from_str(stage).unwrap();
        TuneOptions::parse(&spec, p)
    }

    #[test]
    fn archs_are_the_pipelines_own() {
        let p = pipeline();
        assert_eq!(p.arch, ["sm_89", "sm_90a"]);
        let ok = |s: &str| parse_stage(&p, s).unwrap().archs;
        assert_eq!(
            ok("{uses: tune, kernel: ws, space: {A: [1]}, archs: [sm_90a]}"),
            Some(vec!["sm_90a".to_string()])
        );
        assert_eq!(ok("{uses: tune, kernel: ws, space: {A: [1]}}"), None);
        let cases = [
            ("[sm_90]", vec!["archs", "0"], "`sm_90` is not in the pipeline's `arch:` (sm_89, sm_90a): no cubin is built for it, so no GPU stage runs it; did you mean `sm_90a`?"),
            ("[sm_89, sm_80]", vec!["archs", "1"], "`sm_80` is not in the pipeline's `arch:`"),
            ("[sm_89, sm_89]", vec!["archs", "1"], "`sm_89` is listed twice"),
            ("[]", vec!["archs"], "e.g. `archs: [sm_89]`"),
            ("sm_90a", vec!["archs"], "invalid type"),
        ];
        for (archs, path, message) in cases {
            let stage = format!("{{uses: tune, kernel: ws, space: {{A: [1]}}, archs: {archs}}}");
            let e = parse_stage(&p, &stage).unwrap_err();
            assert_eq!(e.path, path, "{archs}");
            assert!(e.message.contains(message), "{archs}: {}", e.message);
        }
        let mut none = pipeline();
        none.arch.clear();
        let e = parse_stage(
            &none,
            "{uses: tune, kernel: ws, space: {A: [1]}, archs: [sm_90a]}",
        )
        .unwrap_err();
        assert_eq!(e.path, ["archs"]);
        assert!(e.message.contains("which declares none"), "{}", e.message);
    }

    #[test]
    fn a_stage_off_its_archs_names_the_stages_that_tune_there() {
        let p = pipeline();
        let stage = |s: &str| Config::new(parse_stage(&p, s).unwrap());
        let peers = Configs::new(vec![
            (
                "ws-tune".into(),
                stage("{uses: tune, kernel: ws, space: {A: [1]}, archs: [sm_90a]}"),
            ),
            (
                "mma-tune".into(),
                stage("{uses: tune, kernel: mma, space: {A: [1]}, archs: [sm_89]}"),
            ),
        ]);
        let ws: &TuneOptions = peers.get("ws-tune").unwrap().of();
        assert_eq!(not_tuned("ws-tune", ws, "sm_90a"), None);
        assert!(skip("ws-tune", ws, "sm_90a", &peers).is_none());
        let s = skip("ws-tune", ws, "sm_89", &peers).unwrap();
        assert_eq!(
            s.reason,
            "`ws-tune` tunes kernel `ws` on sm_90a only (its `archs:`), and this GPU runs sm_89 cubins; `mma-tune` tunes workload `tiny` there"
        );
        assert!(
            s.fix
                .contains("`repro tune ws-tune` on a GPU that runs sm_90a"),
            "{}",
            s.fix
        );
        let mma: &TuneOptions = peers.get("mma-tune").unwrap().of();
        let s = skip("mma-tune", mma, "sm_90a", &peers).unwrap();
        assert!(
            s.reason
                .ends_with("; `ws-tune` tunes workload `tiny` there"),
            "{}",
            s.reason
        );
        let alone = Configs::new(vec![(
            "mma-tune".into(),
            peers.get("mma-tune").unwrap().clone(),
        )]);
        let s = skip("mma-tune", mma, "sm_90a", &alone).unwrap();
        assert!(
            s.reason
                .ends_with("; no tune stage of workload `tiny` tunes sm_90a"),
            "{}",
            s.reason
        );
    }
}
