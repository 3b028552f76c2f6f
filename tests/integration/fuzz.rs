//! Property tests over the three parsers that read what users and tools hand repro:
//! `pipeline.yaml` (the loader, through validation), `ncu --csv` exports, and `ptxas -v`
//! reports. Inputs are real files (the shipped pipeline, the bad-pipeline cases, the ncu
//! and ptxas fixtures) cut, spliced and salted with the tokens each format is made of, and
//! plain random bytes. Every input must give a result or an error — never a panic, never
//! a hang (a watchdog aborts the test if one input takes longer than [`HANG_LIMIT`]) — and
//! errors must point inside the input.
//!
//! Budget: `REPRO_FUZZ_CASES` inputs (default 2000) or `REPRO_FUZZ_SECONDS` seconds
//! (default 5) per parser, whichever ends first; `REPRO_FUZZ_SEED` repeats a run (each run
//! prints its seed). A longer run's result is in docs/RELIABILITY.md.

use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One input may take this long before the test is declared hung.
const HANG_LIMIT: Duration = Duration::from_secs(10);

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A change to an input.
#[derive(Debug, Clone)]
enum Edit {
    Delete(Index, usize),
    Insert(Index, &'static str),
    Bytes(Index, Vec<u8>),
    DuplicateLine(Index),
    Truncate(Index),
}

fn edit(tokens: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), 1usize..40).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<Index>(), select(tokens)).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(i, b)| Edit::Bytes(i, b)),
        any::<Index>().prop_map(Edit::DuplicateLine),
        any::<Index>().prop_map(Edit::Truncate),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
        match e {
            Edit::Delete(i, n) => {
                let from = at(i, bytes.len());
                let to = (from + n).min(bytes.len());
                bytes.drain(from..to);
            }
            Edit::Insert(i, t) => {
                let p = at(i, bytes.len());
                bytes.splice(p..p, t.bytes());
            }
            Edit::Bytes(i, b) => {
                let p = at(i, bytes.len());
                bytes.splice(p..p, b.iter().copied());
            }
            Edit::DuplicateLine(i) => {
                let p = at(i, bytes.len()).min(bytes.len());
                let start = bytes[..p]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |x| x + 1);
                let end = bytes[p..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(bytes.len(), |x| p + x + 1);
                let line = bytes[start..end].to_vec();
                bytes.splice(end..end, line);
            }
            Edit::Truncate(i) => {
                let p = at(i, bytes.len());
                bytes.truncate(p);
            }
        }
    }
    bytes
}

/// Real inputs from `dir` (files ending in one of `exts`), plus `extra` files.
fn seeds(dir: &str, exts: &[&str], extra: &[&str]) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x)))
        .collect();
    files.extend(extra.iter().map(|f| root.join(f)));
    files.sort();
    assert!(!files.is_empty(), "no seeds under {dir}");
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Seeds, edited; or random bytes.
fn inputs(seeds: Vec<Vec<u8>>, tokens: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        9 => (select(seeds), proptest::collection::vec(edit(tokens), 1..8))
            .prop_map(|(s, e)| apply(s, &e)),
        1 => proptest::collection::vec(any::<u8>(), 0..400),
    ]
}

/// When the current input started (ms since the watchdog began), 0 when none runs.
static CASE_STARTED: AtomicU64 = AtomicU64::new(0);
static CURRENT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Abort the whole test binary if one input runs past [`HANG_LIMIT`], printing it.
fn watchdog() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let epoch = Instant::now();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let started = CASE_STARTED.load(Ordering::SeqCst);
            let now = epoch.elapsed().as_millis() as u64;
            if started != 0 && now - started > HANG_LIMIT.as_millis() as u64 {
                let input = CURRENT.lock().map(|i| i.clone()).unwrap_or_default();
                eprintln!(
                    "HANG: one input ran for more than {HANG_LIMIT:?}:\n{}",
                    String::from_utf8_lossy(&input)
                );
                std::process::abort();
            }
        });
        epoch
    })
}

/// Run `check` on inputs from `strategy` within the budget; print what ran. A failing
/// input is shrunk to a small one before the test fails with it.
fn fuzz(
    name: &str,
    strategy: impl Strategy<Value = Vec<u8>>,
    check: impl Fn(&[u8]) -> Result<(), TestCaseError>,
) {
    let epoch = watchdog();
    let cases = env_number("REPRO_FUZZ_CASES", 2000);
    let budget = Duration::from_secs(env_number("REPRO_FUZZ_SECONDS", 5));
    let seed = env_number("REPRO_FUZZ_SEED", rand::random());
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let run = |input: &[u8]| {
        *CURRENT.lock().unwrap() = input.to_vec();
        CASE_STARTED.store(epoch.elapsed().as_millis().max(1) as u64, Ordering::SeqCst);
        let outcome = check(input);
        CASE_STARTED.store(0, Ordering::SeqCst);
        outcome
    };
    let started = Instant::now();
    let mut ran = 0;
    while ran < cases && started.elapsed() < budget {
        let mut tree = strategy.new_tree(&mut runner).unwrap();
        ran += 1;
        let Err(first) = run(&tree.current()) else {
            continue;
        };
        let mut smallest = (tree.current(), first);
        loop {
            let step = match run(&tree.current()) {
                Err(e) => {
                    smallest = (tree.current(), e);
                    tree.simplify()
                }
                Ok(()) => tree.complicate(),
            };
            if !step {
                break;
            }
        }
        panic!(
            "fuzz {name} (REPRO_FUZZ_SEED={seed}): {}\n--- smallest failing input ({} bytes)\n{:?}",
            smallest.1,
            smallest.0.len(),
            String::from_utf8_lossy(&smallest.0)
        );
    }
    println!(
        "fuzz {name}: {ran} inputs in {:.1}s (REPRO_FUZZ_SEED={seed})",
        started.elapsed().as_secs_f64()
    );
}

/// Lines as YAML and CSV count them: a line ends at `\n`, `\r\n` or a lone `\r`.
fn lines_of(bytes: &[u8]) -> usize {
    let lone_cr = bytes
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))
        .count();
    bytes.iter().filter(|&&b| b == b'\n').count() + lone_cr + 1
}

const YAML_TOKENS: &[&str] = &[
    ":",
    ": ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "- ",
    "\"",
    "'",
    "\n",
    "\n  ",
    "\n    ",
    "\t",
    "#",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!str ",
    "!!binary ",
    "~",
    "---\n",
    "...\n",
    "? ",
    "|\n  x\n",
    ">\n",
    "\u{feff}",
    "\r\n",
    "99999999999999999999",
    "-1",
    "0",
    "1e999",
    ".nan",
    "true",
    "null",
    "uses: cmd",
    "uses: build",
    "needs: [a]",
    "deps: [.]",
    "outs: [.git]",
    "outs: [..]",
    "outs: [/etc]",
    "run: [sh, -c, x]",
    "shell: true",
    "timeout: 1e30",
    "params: {a: 1, a: 2}",
    "env: {X: 1}",
    "stages:\n",
    "version: 1\n",
    "a: {uses: cmd}",
    "\"\": {uses: cmd}",
    "executor: {kind: slurm}",
    "é",
    "\u{202e}",
    "%",
];

#[test]
fn the_pipeline_loader_never_panics_and_places_its_errors() {
    let seeds = seeds("tests/bad_pipelines", &["yaml"], &["pipeline.yaml"]);
    let project = tempfile::tempdir().unwrap();
    let root = project.path().to_path_buf();
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::write(root.join("data/in.txt"), "x").unwrap();
    let file = root.join("pipeline.yaml");
    fuzz("pipeline.yaml", inputs(seeds, YAML_TOKENS), |bytes| {
        let text = match repro::pipeline::load::decode(bytes, &file) {
            Ok(text) => text,
            Err(d) => {
                prop_assert!(d.line >= 1 && d.line <= lines_of(bytes), "{d}");
                return Ok(());
            }
        };
        if let Err(repro::pipeline::LoadError::Invalid(e)) =
            repro::pipeline::load::load_str(text, &file, &root, &repro::stages::kinds())
        {
            prop_assert!(!e.0.is_empty());
            for d in &e.0 {
                prop_assert!(d.line <= lines_of(bytes) + 1, "{d}\n--- input\n{text}");
            }
        }
        Ok(())
    });
}

const CSV_TOKENS: &[&str] = &[
    "\"",
    ",",
    "\"\"",
    "\n",
    "\r\n",
    "\"ID\",",
    "\"Kernel Name\",",
    "\"Metric Name\",",
    "\"Metric Value\",",
    "\"Section Name\",",
    "==PROF== x\n",
    "==ERROR== y\n",
    "n/a",
    "1,024",
    "-1",
    "1e400",
    "NaN",
    "\"9.0\"",
    "\"\",",
    "(256, 1, 1)",
    "\"ns\"",
    "\"msecond\"",
    "\u{0}",
];

#[test]
fn the_ncu_csv_parser_never_panics_and_names_lines_inside_the_file() {
    let seeds = seeds("tests/fixtures/ncu", &["csv", "txt"], &[]);
    fuzz("ncu csv", inputs(seeds, CSV_TOKENS), |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match repro::ncu::parse::parse(&text) {
            Ok(export) => {
                for (i, launch) in export.launches.iter().enumerate() {
                    let target = format!("#{i}");
                    let t = repro::ncu::metrics::summarize(
                        launch,
                        None,
                        &[],
                        repro::ncu::metrics::TargetId {
                            target: &target,
                            variant: "",
                            kernel: &launch.kernel,
                        },
                    );
                    prop_assert_eq!(t.status, repro::schema::RunStatus::Ok);
                }
            }
            Err(e) => {
                let line = e
                    .to_string()
                    .strip_prefix("line ")
                    .and_then(|r| r.split(':').next()?.parse::<usize>().ok());
                if let Some(line) = line {
                    prop_assert!(line >= 1 && line <= lines_of(bytes), "{e}");
                }
            }
        }
        Ok(())
    });
}

const PTXAS_TOKENS: &[&str] = &[
    "ptxas info    : ",
    "ptxas warning : ",
    "Compiling entry function '",
    "'",
    " for 'sm_90'",
    "Function properties for ",
    "bytes stack frame, ",
    "Used ",
    " registers, ",
    "used 1 barriers, ",
    " bytes smem, ",
    " bytes cmem[0]",
    "18446744073709551616 ",
    "4294967296 registers",
    "-1 ",
    "\n",
    ",",
    ":",
    "\u{feff}",
];

#[test]
fn the_ptxas_report_parser_never_panics_and_invents_no_entry() {
    let seeds = seeds("tests/fixtures/ptxas", &["txt"], &[]);
    fuzz("ptxas", inputs(seeds, PTXAS_TOKENS), |bytes| {
        let text = String::from_utf8_lossy(bytes);
        for entry in repro::stages::build::ptxas::parse(&text) {
            prop_assert!(
                text.contains(&format!("Compiling entry function '{}'", entry.name)),
                "entry {} is not in the report",
                entry.name
            );
        }
        Ok(())
    });
}
