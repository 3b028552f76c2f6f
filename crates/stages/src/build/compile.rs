//! Compiling CUDA sources to cubins with nvcc, memoized in a content-addressed cache.
//!
//! This is the compile API the build stage and the tuner share; which nvcc runs is the
//! [`repro_pipeline::toolchain`]'s choice. Each nvcc runs as an executor [`Job`]; the compiler's output (the `ptxas -v` report or its errors) goes to a
//! log next to the cubin, from which [`ptxas::parse`](super::ptxas::parse) reads the
//! per-entry resources.
//!
//! Cache layout: `.repro/cache/build/<key>/` holds `<stem>.cubin`, `nvcc.log` and a `done`
//! marker written last. The key hashes the nvcc version, the arguments (arch, defines,
//! flags, source path) and the contents of the source and every local header it includes,
//! so an unchanged request never starts nvcc again. Failed compiles are not cached.

use super::{ptxas, sources};
use crate::slots::run_on_slots;
use anyhow::Context;
use repro_base::tools;
use repro_executor::{CancelFlag, Executor, ExitKind, Job};
use repro_pipeline::toolchain::Toolchain;
use repro_schema::EntryResources;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where compiled cubins are memoized, relative to the project root.
pub const CACHE_DIR: &str = ".repro/cache/build";

/// How long one nvcc may run.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(600);

/// Most lines of compiler output kept in an error message.
const ERROR_LINES: usize = 60;

/// One cubin to build.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileRequest {
    /// The `.cu` file, relative to the project root (or absolute).
    pub source: PathBuf,
    /// The `extern "C"` entry the cubin must contain.
    pub entry: String,
    /// `-DNAME=VALUE` each; an empty value gives `-DNAME`.
    pub defines: BTreeMap<String, String>,
    /// e.g. `sm_90`.
    pub arch: String,
    /// Extra nvcc flags, after the defines.
    pub flags: Vec<String>,
}

/// What became of one [`CompileRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct CompileOutput {
    pub ok: bool,
    /// The nvcc command line (argv), run with the project root as working folder. It
    /// starts with plain `nvcc`, not the machine's path to it: records stay the same
    /// wherever the toolchain lives (its version is recorded beside it).
    pub command: Vec<String>,
    /// The cubin in the cache (absolute).
    pub cubin: Option<PathBuf>,
    pub cubin_sha256: Option<String>,
    /// Every entry function's resources from the ptxas report.
    pub entries: Vec<EntryResources>,
    /// Why it failed: the compiler's errors, or what else went wrong.
    pub error: Option<String>,
    /// Served from the cache: no nvcc ran for it.
    pub cached: bool,
}

impl CompileOutput {
    fn failed(command: Vec<String>, error: String) -> Self {
        CompileOutput {
            ok: false,
            command,
            cubin: None,
            cubin_sha256: None,
            entries: Vec::new(),
            error: Some(error),
            cached: false,
        }
    }
}

/// A request resolved to its command line and cache slot.
struct Prepared {
    /// As recorded: `nvcc` first, and the cubin by its file name — where the cache slot
    /// is (a digest of the source) would make a comment-only edit change the record.
    command: Vec<String>,
    /// As run: writes into the cache slot.
    argv: Vec<String>,
    /// The nvcc to run.
    nvcc: PathBuf,
    key: String,
    /// The cache folder and the cubin in it, absolute.
    dir: PathBuf,
    cubin: PathBuf,
}

/// Compile every request, up to `jobs` nvcc processes at once, and return one output per
/// request, in order. Requests that share a cache key compile once. A failure affects only
/// its own request; after `cancel` is set, requests not yet started fail as cancelled.
pub fn compile_many(
    executor: &dyn Executor,
    cancel: &CancelFlag,
    tc: &Toolchain,
    root: &Path,
    reqs: &[CompileRequest],
    jobs: usize,
) -> Vec<CompileOutput> {
    let prepared: Vec<Result<Prepared, String>> = reqs
        .iter()
        .map(|r| prepare(tc, root, r).map_err(|e| format!("{e:#}")))
        .collect();

    // One compile per distinct key; the first request with a key owns it.
    let mut owner_of: HashMap<&str, usize> = HashMap::new();
    let mut unique: Vec<usize> = Vec::new();
    for (i, p) in prepared.iter().enumerate() {
        if let Ok(p) = p {
            owner_of.entry(p.key.as_str()).or_insert_with(|| {
                unique.push(i);
                i
            });
        }
    }

    // Requests that did not prepare have no key and are never owners.
    let mut owned: Vec<Option<CompileOutput>> = vec![None; reqs.len()];
    let workers = jobs.clamp(1, unique.len().max(1));
    run_on_slots(
        workers as u32,
        &unique,
        cancel,
        |_, &i| match &prepared[i] {
            Ok(p) => Some(compile_prepared(executor, cancel, root, &reqs[i], p)),
            Err(_) => None,
        },
        |j, out| owned[unique[j]] = out,
    );
    prepared
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Err(e) => CompileOutput::failed(Vec::new(), e.clone()),
            Ok(p) => {
                let owner = owner_of[p.key.as_str()];
                // The pool starts nothing once `cancel` is set.
                let mut out = owned[owner].clone().unwrap_or_else(|| {
                    CompileOutput::failed(p.command.clone(), "cancelled before it started".into())
                });
                if owner != i {
                    out.cached = true;
                }
                out
            }
        })
        .collect()
}

/// The nvcc command line for `req`, writing to `out` (both relative to the root), as
/// recorded: with `nvcc` in place of its path.
fn command_line(req: &CompileRequest, out: &Path) -> Vec<String> {
    let mut argv = vec![
        "nvcc".to_string(),
        "-cubin".into(),
        "-O3".into(),
        format!("-arch={}", req.arch),
        "-Xptxas".into(),
        "-v".into(),
    ];
    argv.extend(req.defines.iter().map(|(k, v)| {
        if v.is_empty() {
            format!("-D{k}")
        } else {
            format!("-D{k}={v}")
        }
    }));
    argv.extend(req.flags.iter().cloned());
    argv.push("-o".into());
    argv.push(out.to_string_lossy().into_owned());
    argv.push(req.source.to_string_lossy().into_owned());
    argv
}

/// Resolve the request's sources and cache key.
fn prepare(tc: &Toolchain, root: &Path, req: &CompileRequest) -> anyhow::Result<Prepared> {
    let files = sources::closure(root, &req.source, &req.flags)
        .with_context(|| format!("cannot compile {}", req.source.display()))?;
    let mut h = Sha256::new();
    h.update(b"repro build cache v1\0");
    h.update(tc.version.as_bytes());
    // Everything but the nvcc path and the output: those do not change the cubin.
    for arg in &command_line(req, Path::new(""))[1..] {
        h.update(arg.as_bytes());
        h.update(b"\0");
    }
    for file in &files {
        let bytes = std::fs::read(root.join(file))
            .with_context(|| format!("cannot read {}", file.display()))?;
        h.update(file.to_string_lossy().as_bytes());
        h.update(b"\0");
        h.update(Sha256::digest(&bytes));
    }
    let key = tools::hex(&h.finalize());
    let stem = req
        .source
        .file_stem()
        .map_or("kernel".into(), |s| s.to_string_lossy().into_owned());
    let rel_dir = Path::new(CACHE_DIR).join(&key);
    let rel_cubin = rel_dir.join(format!("{stem}.cubin"));
    Ok(Prepared {
        command: command_line(req, Path::new(&format!("{stem}.cubin"))),
        argv: command_line(req, &rel_cubin),
        nvcc: tc.nvcc.clone(),
        key,
        dir: root.join(&rel_dir),
        cubin: root.join(&rel_cubin),
    })
}

/// Serve from the cache, or run nvcc and fill the cache.
fn compile_prepared(
    executor: &dyn Executor,
    cancel: &CancelFlag,
    root: &Path,
    req: &CompileRequest,
    p: &Prepared,
) -> CompileOutput {
    let log = p.dir.join("nvcc.log");
    let marker = p.dir.join("done");
    // A slot missing any of its files (someone cleaned part of it) is compiled again.
    let cached = marker.is_file() && p.cubin.is_file() && log.is_file();
    if !cached {
        if let Err(e) = run_nvcc(executor, cancel, root, p, &log) {
            return CompileOutput::failed(p.command.clone(), e);
        }
    }
    match finish(req, p, &log) {
        Ok(mut out) => {
            out.cached = cached;
            if !cached {
                if let Err(e) = std::fs::write(&marker, "") {
                    return CompileOutput::failed(
                        p.command.clone(),
                        format!("cannot write {}: {e}", marker.display()),
                    );
                }
            }
            out
        }
        Err(e) => CompileOutput::failed(p.command.clone(), format!("{e:#}")),
    }
}

/// Run nvcc for `p` with its output in `log`; `Err` is the message for the record.
fn run_nvcc(
    executor: &dyn Executor,
    cancel: &CancelFlag,
    root: &Path,
    p: &Prepared,
    log: &Path,
) -> Result<(), String> {
    std::fs::create_dir_all(&p.dir)
        .map_err(|e| format!("cannot create {}: {e}", p.dir.display()))?;
    for stale in [log, p.cubin.as_path()] {
        match std::fs::remove_file(stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", stale.display())),
        }
    }
    let mut argv = p.argv.clone();
    argv[0] = p.nvcc.to_string_lossy().into_owned();
    let mut job = Job::new(
        format!("build:{}", p.key.get(..12).unwrap_or(&p.key)),
        argv,
        root,
    );
    job.timeout = Some(COMPILE_TIMEOUT);
    job.log = Some(log.to_path_buf());
    let outcome = executor
        .run(&job, cancel)
        .map_err(|e| format!("could not start nvcc: {e:#}"))?;
    if outcome.success() {
        return Ok(());
    }
    let output = std::fs::read_to_string(log).unwrap_or_else(|_| outcome.tail.clone());
    let how = match &outcome.exit {
        ExitKind::Code(c) => format!("nvcc failed (exit status {c})"),
        ExitKind::Signal(s) => format!("nvcc was killed by signal {s}"),
        ExitKind::TimedOut => format!("nvcc timed out after {}s", COMPILE_TIMEOUT.as_secs()),
        ExitKind::Cancelled => "nvcc was cancelled (interrupted)".to_string(),
        ExitKind::Scheduler(why) => format!("the scheduler ended nvcc: {why}"),
    };
    Err(format!("{how}:\n{}", last_lines(&output, ERROR_LINES)))
}

/// Read the ptxas report and the cubin of a successful compile.
fn finish(req: &CompileRequest, p: &Prepared, log: &Path) -> anyhow::Result<CompileOutput> {
    let report = std::fs::read_to_string(log)
        .with_context(|| format!("cannot read the compiler log {}", log.display()))?;
    let entries = ptxas::parse(&report);
    if !entries.iter().any(|e| e.name == req.entry) {
        let found: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        anyhow::bail!(
            "{} has no entry function `{}` (ptxas compiled: {}); declare the `extern \"C\" __global__` \
             function's name as the kernel's `entry`",
            req.source.display(),
            req.entry,
            if found.is_empty() { "none".to_string() } else { found.join(", ") }
        );
    }
    let bytes = std::fs::read(&p.cubin)
        .with_context(|| format!("nvcc succeeded but wrote no {}", p.cubin.display()))?;
    Ok(CompileOutput {
        ok: true,
        command: p.command.clone(),
        cubin: Some(p.cubin.clone()),
        cubin_sha256: Some(tools::hex(&Sha256::digest(&bytes))),
        entries,
        error: None,
        cached: false,
    })
}

/// The last `n` lines of `text`, trimmed.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_pipeline::test_support::{fake_nvcc, CountingExecutor};

    fn req(defines: &[(&str, &str)]) -> CompileRequest {
        CompileRequest {
            source: PathBuf::from("kernels/k.cu"),
            entry: "k".into(),
            defines: defines
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            arch: "sm_90".into(),
            flags: vec!["-lineinfo".into()],
        }
    }

    /// A project with `kernels/k.cu` including `kernels/k.cuh`, and a fake nvcc.
    fn project() -> (tempfile::TempDir, Toolchain) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("kernels")).unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("kernels/k.cu"), "#include \"k.cuh\"\n").unwrap();
        std::fs::write(root.join("kernels/k.cuh"), "// v1\n").unwrap();
        fake_nvcc(&root.join("bin"));
        let search = repro_pipeline::toolchain::NvccSearch {
            path_var: Some(root.join("bin").into_os_string()),
            ..Default::default()
        };
        let tc = search.find(root, None).unwrap();
        (dir, tc)
    }

    #[test]
    fn command_line_records_everything() {
        let (dir, tc) = project();
        let ex = CountingExecutor::default();
        let outs = compile_many(
            &ex,
            &CancelFlag::default(),
            &tc,
            dir.path(),
            &[req(&[("A", "1"), ("FLAG", "")])],
            1,
        );
        let cmd = &outs[0].command;
        assert_eq!(cmd[0], "nvcc", "no machine path in the record");
        let ran = &ex.jobs.lock().unwrap()[0];
        assert_eq!(ran[0], tc.nvcc.to_string_lossy(), "the found nvcc runs");
        assert_eq!(ran[1..10], cmd[1..10]);
        assert_eq!(cmd[1..6], ["-cubin", "-O3", "-arch=sm_90", "-Xptxas", "-v"]);
        assert_eq!(cmd[6..9], ["-DA=1", "-DFLAG", "-lineinfo"]);
        assert_eq!(cmd[9], "-o");
        // It runs into its cache slot; the record names only the file, so that a new slot
        // (a comment-only edit of the source) leaves the record as it was.
        assert!(ran[10].starts_with(".repro/cache/build/") && ran[10].ends_with("/k.cubin"));
        assert_eq!(cmd[10], "k.cubin");
        assert_eq!(cmd[11], "kernels/k.cu");
        assert!(outs[0].ok, "{:?}", outs[0].error);
        assert_eq!(outs[0].entries[0].registers, Some(10));
    }

    #[test]
    fn unchanged_requests_are_served_from_the_cache() {
        let (dir, tc) = project();
        let root = dir.path();
        let reqs = [req(&[("REGS", "20")]), req(&[("REGS", "30")])];
        let ex = CountingExecutor::default();
        let first = compile_many(&ex, &CancelFlag::default(), &tc, root, &reqs, 2);
        assert_eq!(ex.count(), 2);
        assert!(first.iter().all(|o| o.ok && !o.cached), "{first:?}");
        assert_eq!(first[1].entries[0].registers, Some(30));

        let ex = CountingExecutor::default();
        let again = compile_many(&ex, &CancelFlag::default(), &tc, root, &reqs, 2);
        assert_eq!(ex.count(), 0, "a second build must not start nvcc");
        assert!(again.iter().all(|o| o.cached));
        for (a, b) in first.iter().zip(&again) {
            assert_eq!(a.cubin_sha256, b.cubin_sha256);
            assert_eq!(a.entries, b.entries);
            assert_eq!(a.command, b.command);
        }

        // A slot that lost its log is compiled again rather than failing.
        let slot = first[0].cubin.as_ref().unwrap().parent().unwrap();
        std::fs::remove_file(slot.join("nvcc.log")).unwrap();
        let ex = CountingExecutor::default();
        let healed = compile_many(&ex, &CancelFlag::default(), &tc, root, &reqs, 2);
        assert_eq!(ex.count(), 1);
        assert!(healed[0].ok && !healed[0].cached);

        // Editing an included header invalidates both.
        std::fs::write(root.join("kernels/k.cuh"), "// v2\n").unwrap();
        let ex = CountingExecutor::default();
        let edited = compile_many(&ex, &CancelFlag::default(), &tc, root, &reqs, 2);
        assert_eq!(ex.count(), 2);
        assert_ne!(edited[0].cubin, first[0].cubin, "a new cache slot");
        assert_eq!(
            edited[0].command, first[0].command,
            "the same recorded command"
        );
    }

    #[test]
    fn identical_requests_compile_once() {
        let (dir, tc) = project();
        let ex = CountingExecutor::default();
        let outs = compile_many(
            &ex,
            &CancelFlag::default(),
            &tc,
            dir.path(),
            &[req(&[]), req(&[])],
            4,
        );
        assert_eq!(ex.count(), 1);
        assert!(outs[0].ok && !outs[0].cached);
        assert!(outs[1].ok && outs[1].cached);
        assert_eq!(outs[0].cubin, outs[1].cubin);
    }

    #[test]
    fn a_compile_error_fails_alone_and_is_not_cached() {
        let (dir, tc) = project();
        let reqs = [req(&[("BREAK", "1")]), req(&[])];
        let ex = CountingExecutor::default();
        let outs = compile_many(&ex, &CancelFlag::default(), &tc, dir.path(), &reqs, 2);
        assert!(!outs[0].ok);
        let err = outs[0].error.as_deref().unwrap();
        assert!(err.starts_with("nvcc failed (exit status 2):"), "{err}");
        assert!(err.contains("broken on purpose"), "{err}");
        assert!(outs[0].cubin.is_none() && outs[0].entries.is_empty());
        assert!(
            !outs[0].command.is_empty(),
            "the failing command is still recorded"
        );
        assert!(outs[1].ok);

        let ex = CountingExecutor::default();
        compile_many(&ex, &CancelFlag::default(), &tc, dir.path(), &reqs, 2);
        assert_eq!(ex.count(), 1, "only the failed compile runs again");
    }

    #[test]
    fn a_missing_entry_or_source_is_an_error_for_that_request() {
        let (dir, tc) = project();
        let mut wrong_entry = req(&[]);
        wrong_entry.entry = "attn_fp8_fwd".into();
        let mut no_source = req(&[]);
        no_source.source = PathBuf::from("kernels/missing.cu");
        let outs = compile_many(
            &CountingExecutor::default(),
            &CancelFlag::default(),
            &tc,
            dir.path(),
            &[wrong_entry, no_source],
            2,
        );
        let e0 = outs[0].error.as_deref().unwrap();
        assert!(
            e0.contains("no entry function `attn_fp8_fwd` (ptxas compiled: k)"),
            "{e0}"
        );
        let e1 = outs[1].error.as_deref().unwrap();
        assert!(e1.contains("kernels/missing.cu"), "{e1}");
    }

    #[test]
    fn cancelled_before_start() {
        let (dir, tc) = project();
        let cancel = CancelFlag::default();
        cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        let ex = CountingExecutor::default();
        let outs = compile_many(&ex, &cancel, &tc, dir.path(), &[req(&[])], 1);
        assert_eq!(ex.count(), 0);
        assert_eq!(
            outs[0].error.as_deref(),
            Some("cancelled before it started")
        );
    }
}
