//! The tune stage with a `proposer:` command, without a GPU: proposed sources join the
//! search and its lineage, a candidate that cannot become a source fails alone with its
//! reason, a broken, hanging or garbage-printing proposer loses no finished trial, and a
//! rerun replays the kept answers and the memo without measuring or asking again.

use super::tests::{options, read_csv, settings, Fake};
use super::*;
use repro_executor::local::LocalExecutor;
use repro_executor::CancelFlag;
use repro_schema::EliteEntry;
use repro_schema::TrialStatus;
use repro_tune::proposer::brief::Brief;
use repro_tune::proposer::brief::KernelBrief;
use repro_tune::proposer::run::CommandProposer;
use repro_tune::proposer::run::Host;
use repro_tune::proposer::store;
use repro_tune::proposer::store::SourceStore;
use repro_tune::proposer::ProposerSpec;
use std::time::Duration;

const KERNEL: &str = "// kernel\nint x;\n";

/// A proposer answering only for generation 1: a patch that helps, one that does not
/// apply, one whose configuration is outside the space, and one too many.
const PROPOSER: &str = r#"#!/bin/sh
echo call >> "$(dirname "$0")/calls.txt"
cp "$REPRO_BRIEF" "$(dirname "$0")/last-brief.json"
cat > "$(dirname "$0")/stdin-brief.json"
grep -m1 '"generation"' "$REPRO_BRIEF" | grep -q ': 1,' || { echo '{"candidates": []}'; exit 0; }
cat <<'JSON'
{"candidates": [
 {"patch": "--- a/kernels/attn_fp8.cu\n+++ b/kernels/attn_fp8.cu\n@@ -1,2 +1,2 @@\n-// kernel\n+// kernel FAST\n int x;\n", "note": "make it fast\nsecond line"},
 {"patch": "--- a/kernels/attn_fp8.cu\n+++ b/kernels/attn_fp8.cu\n@@ -1,1 +1,1 @@\n-// no such line\n+// x\n", "note": "stale"},
 {"source": "// other\n", "config": {"TILE_M": 4096}},
 {"pach": "one too many"}
]}
JSON
"#;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(proposer: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
        std::fs::write(dir.path().join("kernels/attn_fp8.cu"), KERNEL).unwrap();
        let exe = dir.path().join("proposer.sh");
        std::fs::write(&exe, proposer).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Project { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn calls(&self) -> usize {
        std::fs::read_to_string(self.root().join("calls.txt")).map_or(0, |t| t.lines().count())
    }

    /// One tune into `staging` (under the root) with the memo `memo`; returns the stage's
    /// outcome, its progress lines and the proposer's summary.
    fn tune(
        &self,
        staging: &str,
        memo: &mut Memo,
        timeout: Duration,
    ) -> (StageOutcome, Vec<String>, Fake) {
        let (_, o) = options();
        let root = self.root();
        let store = SourceStore::open(root, Path::new("kernels/attn_fp8.cu")).unwrap();
        let lines = std::cell::RefCell::new(Vec::new());
        let say = |l: &str| lines.borrow_mut().push(l.to_string());
        let executor = LocalExecutor::new();
        let cancel = CancelFlag::default();
        let spec = ProposerSpec {
            run: vec![root.join("proposer.sh").display().to_string()],
            candidates: Some(3),
            timeout,
        };
        let host = Host {
            executor: &executor,
            cancel: &cancel,
            root,
            repro_exe: Path::new("repro"),
            say: &say,
        };
        let kernel = KernelBrief {
            name: "attn_fp8".into(),
            path: "kernels/attn_fp8.cu".into(),
            entry: "attn_fp8_fwd".into(),
            base_defines: o.base_defines.clone(),
            source: KERNEL.into(),
        };
        let mut proposer = CommandProposer::new(
            &spec,
            o.population,
            host,
            Default::default(),
            store.clone(),
            kernel,
            "lower is better".into(),
        );
        let mut fake = Fake {
            dir: root.to_path_buf(),
            evaluated: 0,
            all_fail: false,
        };
        let mut log = Vec::new();
        let outcome = tune_and_write(
            &o,
            &settings(&o),
            false,
            &mut fake,
            memo,
            &root.join(staging),
            Reporter {
                progress: &say,
                log: &mut log,
            },
            Some(Sources {
                proposer: &mut proposer,
                store: &store,
            }),
        )
        .unwrap();
        drop(proposer);
        (outcome, lines.into_inner(), fake)
    }
}

#[test]
fn proposed_sources_join_the_search_with_their_lineage_and_failures() {
    let p = Project::new(PROPOSER);
    let mut memo = Memo::in_memory();
    let (outcome, lines, _) = p.tune("s", &mut memo, Duration::from_secs(30));
    assert_eq!(outcome, StageOutcome::Passed);
    let out = p.root().join("s/artifacts/tune");
    let rows = read_csv(&out.join("tune_log.csv"));
    assert_eq!(rows.len(), 24);

    let fast = store::digest("// kernel FAST\nint x;\n");
    let patch_rows: Vec<_> = rows.iter().filter(|r| !r.patch.is_empty()).collect();
    assert_eq!(
        patch_rows.len(),
        2,
        "two patches, the third candidate a source"
    );
    let made = patch_rows.iter().find(|r| r.status.is_ok()).unwrap();
    assert_eq!(made.source, store::short(&fast));
    assert_eq!(made.generation, 1);
    assert!(
        made.note.contains("proposed: make it fast"),
        "{}",
        made.note
    );
    assert!(!made.note.contains("second line"));
    let stale = patch_rows.iter().find(|r| !r.status.is_ok()).unwrap();
    assert_eq!(stale.status, TrialStatus::ProposalError);
    assert!(
        stale
            .note
            .contains("candidate 2: the patch does not apply: error applying hunk #1"),
        "{}",
        stale.note
    );
    assert!(stale.source.is_empty());
    let outside = rows
        .iter()
        .find(|r| r.note.contains("candidate 3"))
        .unwrap();
    assert_eq!(outside.status, TrialStatus::ProposalError);
    assert!(
        outside
            .note
            .contains("is not a valid configuration of the space"),
        "{}",
        outside.note
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("1 more than the 3 asked for were ignored")),
        "{lines:?}"
    );

    // The define-space search goes on from the proposed source.
    assert!(
        rows.iter()
            .filter(|r| r.source == store::short(&fast))
            .count()
            > 1
    );
    let topk: Vec<EliteEntry> =
        serde_json::from_str(&std::fs::read_to_string(out.join("topk.json")).unwrap()).unwrap();
    let best = &topk[0];
    assert_eq!(best.source.as_deref(), Some(store::short(&fast)));
    let step = best.lineage.iter().find(|s| s.patch.is_some()).unwrap();
    assert_eq!(
        (step.trial, step.note.as_str()),
        (made.trial, "make it fast")
    );
    assert_eq!(best.lineage.last().unwrap().trial, best.trial);
    let diff_file = best.diff.as_deref().unwrap();
    assert_eq!(
        diff_file,
        format!("artifacts/tune/proposals/{}.patch", store::short(&fast))
    );
    let diff = std::fs::read_to_string(p.root().join("s").join(diff_file)).unwrap();
    assert_eq!(
        store::apply(KERNEL, &diff).unwrap(),
        "// kernel FAST\nint x;\n"
    );
    // Only the elite's sources are kept in artifacts.
    assert_eq!(std::fs::read_dir(out.join("proposals")).unwrap().count(), 1);

    // Later briefs carry the failures and every proposal with its reason; the proposer
    // reads the same bytes on stdin as in the file.
    let brief_text = std::fs::read_to_string(p.root().join("last-brief.json")).unwrap();
    assert_eq!(
        std::fs::read_to_string(p.root().join("stdin-brief.json")).unwrap(),
        brief_text
    );
    let brief: Brief = serde_json::from_str(&brief_text).unwrap();
    assert_eq!(brief.generation, 3);
    assert_eq!(brief.proposals.len(), 3);
    assert!(brief
        .proposals
        .iter()
        .any(|t| t.reason.contains("does not apply")));
    assert!(brief.elite[0]
        .diff
        .as_deref()
        .unwrap()
        .contains("+// kernel FAST"));
    assert_eq!(p.calls(), 3);
    assert!(lines.iter().any(|l| l.starts_with("proposer: 3 call(s) (0 replayed from the cache), 3 candidate(s), 2 could not become a source")), "{lines:?}");
}

#[test]
fn a_rerun_replays_the_answers_and_the_memo() {
    let p = Project::new(PROPOSER);
    let key = serde_json::json!({"test": "proposer rerun"});
    let mut memo = Memo::open(&p.root().join("memo"), &key).unwrap();
    let (_, _, first) = p.tune("a", &mut memo, Duration::from_secs(30));
    drop(memo);
    assert_eq!(p.calls(), 3);
    let mut memo = Memo::open(&p.root().join("memo"), &key).unwrap();
    let (_, lines, second) = p.tune("b", &mut memo, Duration::from_secs(30));
    assert!(first.evaluated > 0);
    assert_eq!(second.evaluated, 0, "nothing is measured again");
    assert_eq!(p.calls(), 3, "the proposer is not asked again");
    assert!(
        lines.iter().any(|l| l
            .contains("(0 evaluated, 22 from the memo, 2 proposals that never became a source)")),
        "{lines:?}"
    );
    let read = |s: &str| {
        std::fs::read_to_string(p.root().join(s).join("artifacts/tune/topk.json")).unwrap()
    };
    assert_eq!(read("a"), read("b"));
}

#[test]
fn a_broken_hanging_or_garbage_proposer_loses_no_trials() {
    let cases = [
        (
            "#!/bin/sh\necho oops >&2\nexit 3\n",
            "the proposer exited with code 3: oops",
        ),
        ("#!/bin/sh\nsleep 30\n", "the proposer timed out after 1 s"),
        (
            "#!/bin/sh\necho 'Sure! Here is a kernel'\n",
            "its stdout is not {\"candidates\": [...]}",
        ),
        (
            "#!/bin/sh\necho '{\"candidates\": [{\"patch\": \"junk\"}]}'\n",
            "candidate 1: the patch does not parse",
        ),
    ];
    for (script, expected) in cases {
        let p = Project::new(script);
        let mut memo = Memo::in_memory();
        let (outcome, lines, _) = p.tune("s", &mut memo, Duration::from_secs(1));
        assert_eq!(outcome, StageOutcome::Passed, "{script}");
        let failed = lines
            .iter()
            .filter(|l| l.starts_with("trial ") && l.contains(" proposal_error "))
            .count();
        assert_eq!(memo.len() + failed, 24, "{script}");
        assert_eq!(
            read_csv(&p.root().join("s/artifacts/tune/tune_log.csv")).len(),
            24
        );
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "{script}: {lines:?}"
        );
    }
}
