//! The shipped proposers through the real binary, without a GPU: `repro propose openai`
//! against a stub chat-completions server on 127.0.0.1 (canned patches, one malformed), a
//! tune driven by it (a fake objective stands in for nvcc and the GPU), the report made
//! from its artifacts, and a grep of every file written and every line printed for the key;
//! `repro propose patches` over the shipped kernels/proposals; and `repro promote`.

use repro::executor::local::LocalExecutor;
use repro::executor::CancelFlag;
use repro::schema::TrialStatus;
use repro::stages::tune::{tune_and_write, Backend, Reporter, Sources};
use repro::tune::memo::{Evaluation, Memo};
use repro::tune::options::TuneOptions;
use repro::tune::proposer::brief::KernelBrief;
use repro::tune::proposer::run::{CommandProposer, Host};
use repro::tune::proposer::store::SourceStore;
use repro::tune::search::{Candidate, Objective, Settings};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-0123456789-do-not-leak";
const KERNEL: &str = "// kernel\nextern \"C\" __global__ void f() {}\n";

/// What the model "answers": a fenced JSON block with a good patch and a malformed one.
const CONTENT: &str = "Here are two ideas.\n```json\n{\"candidates\": [\n {\"patch\": \"--- a/kernels/k.cu\\n+++ b/kernels/k.cu\\n@@ -1,2 +1,2 @@\\n-// kernel\\n+// kernel: fast\\n extern \\\"C\\\" __global__ void f() {}\\n\", \"note\": \"make it fast\"},\n {\"patch\": \"this is not a diff\", \"note\": \"broken\"}\n]}\n```\n";

const PIPELINE: &str = r#"version: 1
workload:
  op: sdpa_fp8
  shapes:
    small:   {B: 1, H: 1, S: 32, D: 64}
    mission: {B: 2, H: 8, S: 512, D: 64}
  primary: mission
kernels:
  k: {source: kernels/k.cu, entry: f}
variants:
  base: {kernel: k, defines: {A: 1}}
stages:
  evo-tune:
    uses: tune
    base: base
    budget: 8
    population: 4
    space: {A: [1, 2, 3], B: [1, 2]}
    proposer:
      run: [repro, propose, openai]
      candidates: 2
  summarize:
    uses: summarize
"#;

/// A chat-completions stub on 127.0.0.1: `/v1/…` answers CONTENT once, then no candidates;
/// `/deny/…` answers 401 echoing the Authorization header. Records the headers it saw.
struct Stub {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Stub {
    fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut answered = 0;
            while !st.load(Ordering::SeqCst) && Instant::now() < deadline && answered < 50 {
                match listener.accept() {
                    Ok((stream, _)) => {
                        answered += 1;
                        serve(stream, &s);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Stub { url, seen, stop }
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(stream: std::net::TcpStream, seen: &Mutex<Vec<String>>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut length = 0;
    let mut auth = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if lower.starts_with("authorization:") {
            auth = line.trim().to_string();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let first = {
        let mut s = seen.lock().unwrap();
        s.push(auth.clone());
        s.len() == 1
    };
    let (status, reply) = if request_line.contains("/deny/") {
        (
            "401 Unauthorized",
            format!("{{\"error\": \"bad credentials: {auth}\"}}"),
        )
    } else {
        let content = if first {
            CONTENT
        } else {
            "{\"candidates\": []}"
        };
        let reply = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]});
        ("200 OK", reply.to_string())
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    )
    .unwrap();
}

/// Stands in for nvcc and the GPU: 10 µs, 7 µs for a source that says `fast`.
struct Fake(PathBuf);

impl Objective for Fake {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        for (i, c) in batch.iter().enumerate() {
            let fast = c.source.as_ref().is_some_and(|s| {
                std::fs::read_to_string(self.0.join(&s.path))
                    .unwrap()
                    .contains("fast")
            });
            let score = if fast { 7.0 } else { 10.0 } + c.config["B"] as f64 * 0.1;
            done(i, Evaluation::ok(score));
        }
        Ok(())
    }
}

impl Backend for Fake {
    fn cubins(&mut self, elite: &[Candidate]) -> anyhow::Result<Vec<PathBuf>> {
        elite
            .iter()
            .map(|c| {
                let p = self.0.join(format!("fake-{}.cubin", c.trial));
                std::fs::write(&p, "cubin")?;
                Ok(p)
            })
            .collect()
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn repro(root: &Path, url: &str) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("repro").unwrap();
    cmd.current_dir(root)
        .env("NO_COLOR", "1")
        .env("REPRO_PROPOSER_URL", url)
        .env("REPRO_PROPOSER_MODEL", "stub-model")
        .env("REPRO_PROPOSER_KEY", KEY);
    cmd
}

#[test]
fn the_openai_proposer_against_a_stub_never_leaks_the_key() {
    let stub = Stub::start();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("kernels")).unwrap();
    std::fs::write(root.join("kernels/k.cu"), KERNEL).unwrap();
    std::fs::write(root.join("pipeline.yaml"), PIPELINE).unwrap();
    let url = format!("{}/v1", stub.url);
    // The proposer child inherits the environment; this test binary has no other test.
    std::env::set_var("REPRO_PROPOSER_URL", &url);
    std::env::set_var("REPRO_PROPOSER_MODEL", "stub-model");
    std::env::set_var("REPRO_PROPOSER_KEY", KEY);

    let project = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let o = TuneOptions::parse(&project.pipeline.stages["evo-tune"], &project.pipeline).unwrap();
    let spec = o.proposer.clone().unwrap();
    let store = SourceStore::open(root, Path::new("kernels/k.cu")).unwrap();
    let executor = LocalExecutor::new();
    let cancel = CancelFlag::default();
    let log_path = root.join(".repro/logs/evo-tune.log");
    std::fs::create_dir_all(log_path.parent().unwrap()).unwrap();
    let printed = Mutex::new(Vec::<String>::new());
    let say = |l: &str| printed.lock().unwrap().push(l.to_string());
    let host = Host {
        executor: &executor,
        cancel: &cancel,
        root,
        repro_exe: Path::new(env!("CARGO_BIN_EXE_repro")),
        say: &say,
    };
    let kernel = KernelBrief {
        name: o.kernel.clone(),
        path: "kernels/k.cu".into(),
        entry: "f".into(),
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
    let mut memo = Memo::open(
        &root.join(".repro/cache/tune"),
        &serde_json::json!({"t": 1}),
    )
    .unwrap();
    let mut log = std::fs::File::create(&log_path).unwrap();
    let settings = Settings {
        budget: o.budget,
        population: o.population,
        elite: o.elite,
        seed: o.seed,
        exhaustive: false,
        start: Vec::new(),
    };
    let outcome = tune_and_write(
        &o,
        &settings,
        false,
        &mut Fake(root.to_path_buf()),
        &mut memo,
        root,
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
    assert_eq!(outcome, repro::engine::StageOutcome::Passed);
    let rows = repro::schema::parse_tune_log(
        &std::fs::read_to_string(root.join("artifacts/tune/tune_log.csv")).unwrap(),
        "tune_log.csv",
    )
    .unwrap();
    let good = rows
        .iter()
        .find(|r| r.note.contains("make it fast"))
        .unwrap();
    assert_eq!(
        (&good.status, good.p50_us.map(|p| p < 8.0)),
        (&TrialStatus::Ok, Some(true))
    );
    let broken = rows.iter().find(|r| r.note.contains("broken")).unwrap();
    assert_eq!(broken.status, TrialStatus::ProposalError);
    assert!(
        broken.note.contains("the patch does not parse"),
        "{}",
        broken.note
    );
    let seen = stub.seen.lock().unwrap().clone();
    assert!(
        !seen.is_empty()
            && seen
                .iter()
                .all(|a| a.eq_ignore_ascii_case(&format!("Authorization: Bearer {KEY}"))),
        "{seen:?}"
    );

    // The report and the lock, from these artifacts.
    let summarize = repro(root, &url)
        .args(["stage", "summarize"])
        .output()
        .unwrap();
    assert!(
        summarize.status.success(),
        "{}",
        String::from_utf8_lossy(&summarize.stderr)
    );
    let report = std::fs::read_to_string(root.join("reports/summary.md")).unwrap();
    assert!(report.contains("Lineage of the best"), "{report}");
    assert!(report.contains("+// kernel: fast"), "{report}");
    let status = repro(root, &url).arg("status").output().unwrap();

    // The proposer itself, refused by the endpoint that echoes the credentials.
    let brief = std::fs::read_dir(root.join(".repro/cache/tune/briefs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let denied = repro(root, &format!("{}/deny", stub.url))
        .args(["propose", "openai"])
        .env("REPRO_BRIEF", &brief)
        .output()
        .unwrap();
    assert_eq!(denied.status.code(), Some(1));
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(err.contains("401") && err.contains("Bearer ***"), "{err}");

    // The shipped stages' proposer: the model once one is configured, else the patches.
    std::fs::create_dir_all(root.join("kernels/no-patches")).unwrap();
    let patches = ["propose", "patches", "--dir", "kernels/no-patches"];
    let configured = repro(root, &format!("{}/deny", stub.url))
        .args(patches)
        .arg("--model-if-configured")
        .env("REPRO_BRIEF", &brief)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&configured.stderr);
    assert!(
        configured.status.code() == Some(1) && err.contains("401"),
        "a configured model is asked: {err}"
    );
    let scripted = repro(root, "")
        .args(patches)
        .arg("--model-if-configured")
        .env("REPRO_BRIEF", &brief)
        .env_remove("REPRO_PROPOSER_URL")
        .env_remove("REPRO_PROPOSER_MODEL")
        .env_remove("REPRO_PROPOSER_KEY")
        .output()
        .unwrap();
    assert_eq!(
        scripted.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&scripted.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&scripted.stdout).unwrap();
    assert!(answer["candidates"].is_array(), "{answer}");

    let mut printed_text = printed.lock().unwrap().join("\n");
    for out in [&summarize, &status, &denied, &configured, &scripted] {
        printed_text += &String::from_utf8_lossy(&out.stdout);
        printed_text += &String::from_utf8_lossy(&out.stderr);
    }
    assert!(!printed_text.contains(KEY), "the key was printed");
    let mut files = Vec::new();
    files_under(root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("artifacts/repro.lock")));
    assert!(files.iter().any(|f| f.ends_with("reports/summary.md")));
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "the key is in {}",
            f.display()
        );
    }
}
