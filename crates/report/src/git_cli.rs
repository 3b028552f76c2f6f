//! The commit `repro commit` makes, made by the `git` command line as `git add` and `git
//! commit` would make it by hand: clean filters (Git LFS), hooks, `commit.gpgsign` and
//! git's environment variables (`GIT_AUTHOR_NAME`, `GIT_COMMITTER_DATE`, `GIT_INDEX_FILE`,
//! ...) all apply. libgit2 (`git2`) stays for reading.
//!
//! `git add -A -- <folders>` stages the folders' new, changed and deleted files, then `git
//! commit --only -- <folders>` commits them alone: other changes already staged stay staged.
//! The index is saved first and put back byte for byte whenever no commit comes of it: a
//! hook, a filter or signing refuses, or the folders are as HEAD has them.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// `git` run in the project root, with repro's environment.
struct GitCli<'a> {
    root: &'a Path,
}

/// What one `git` call printed (stdout and stderr, in order) and whether it succeeded.
struct Said {
    success: bool,
    code: Option<i32>,
    text: String,
}

impl GitCli<'_> {
    /// Run `git ARGS`, with `stdin` as its input.
    fn call(&self, args: &[&str], stdin: &str) -> anyhow::Result<Said> {
        let out = duct::cmd("git", args)
            .dir(self.root)
            .stdin_bytes(stdin.as_bytes())
            .stderr_to_stdout()
            .stdout_capture()
            .unchecked()
            .run()
            .context("cannot run `git`: install git, or put it on PATH")?;
        Ok(Said {
            success: out.status.success(),
            code: out.status.code(),
            text: String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        })
    }

    /// Run `git ARGS` and return what it printed; an error with its output when it fails.
    fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let said = self.call(args, "")?;
        anyhow::ensure!(
            said.success,
            "`git {}` failed{}:\n{}",
            args.join(" "),
            said.code
                .map(|c| format!(" (exit {c})"))
                .unwrap_or_default(),
            indented(&said.text)
        );
        Ok(said.text)
    }
}

/// Each line of `text`, indented under an error.
fn indented(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The index as `repro commit` found it: its bytes, `None` when there was none.
struct SavedIndex {
    path: PathBuf,
    bytes: Option<Vec<u8>>,
}

impl SavedIndex {
    /// Read the index git uses here (`GIT_INDEX_FILE` honoured).
    fn take(git: &GitCli) -> anyhow::Result<SavedIndex> {
        let path = git
            .root
            .join(git.ok(&["rev-parse", "--git-path", "index"])?);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(SavedIndex { path, bytes })
    }

    /// Put the index back as it was.
    fn restore(&self) -> anyhow::Result<()> {
        let restored = match &self.bytes {
            Some(bytes) => repro_base::fsio::write_atomic(&self.path, bytes),
            None => std::fs::remove_file(&self.path).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }),
        };
        restored.with_context(|| {
            format!(
                "cannot put the git index back as it was ({}): `git status` shows what is staged",
                self.path.display()
            )
        })
    }
}

/// Commit the working tree's `folders` (relative to `root`) alone, with `message`, as the
/// user's git would. `Ok(false)`: they are as HEAD has them, nothing was committed. On
/// any refusal or error, and when there is nothing to commit, the index is as it was.
pub fn commit_folders(root: &Path, folders: &[&str], message: &str) -> anyhow::Result<bool> {
    let git = GitCli { root };
    check_identity(&git)?;
    let saved = SavedIndex::take(&git)?;
    let made = stage_and_commit(&git, folders, message);
    if matches!(made, Ok(true)) {
        return made;
    }
    let restored = saved.restore();
    match (made, restored) {
        (Ok(nothing), Ok(())) => Ok(nothing),
        (Ok(_), Err(e)) => Err(e),
        (Err(refused), Ok(())) => Err(anyhow::anyhow!(
            "refusing to commit: {refused:#}\n  help: fix what git says and rerun `repro commit`; the git index is as it was"
        )),
        (Err(refused), Err(e)) => Err(anyhow::anyhow!("refusing to commit: {refused:#}\n{e:#}")),
    }
}

/// git's own identity check (`GIT_AUTHOR_*`/`GIT_COMMITTER_*`, `user.*`), before anything
/// is staged.
fn check_identity(git: &GitCli) -> anyhow::Result<()> {
    for who in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
        if !git.call(&["var", who], "")?.success {
            anyhow::bail!(
                "git has no author identity; set it with `git config user.name NAME` and `git config user.email EMAIL`"
            );
        }
    }
    Ok(())
}

/// Stage `folders`, and commit them when they differ from HEAD.
fn stage_and_commit(git: &GitCli, folders: &[&str], message: &str) -> anyhow::Result<bool> {
    let indexed = git.ok(&[&["ls-files", "-z", "--"], folders].concat())?;
    // A folder neither on disk nor in the index has nothing to stage (and `git add` would
    // refuse its name).
    let add: Vec<&str> = folders
        .iter()
        .copied()
        .filter(|d| git.root.join(d).exists() || under(&indexed, d))
        .collect();
    if !add.is_empty() {
        git.ok(&[&["add", "-A", "--"], add.as_slice()].concat())?;
    }
    let head = git.call(&["rev-parse", "--verify", "--quiet", "HEAD"], "")?;
    let against: &[&str] = if head.success { &["HEAD"] } else { &[] };
    let list = ["diff", "--cached", "--name-only", "--relative", "-z"];
    let changed = git.ok(&[&list[..], against, &["--"], folders].concat())?;
    let commit: Vec<&str> = folders
        .iter()
        .copied()
        .filter(|d| under(&changed, d))
        .collect();
    if commit.is_empty() {
        return Ok(false);
    }
    let args = [
        &["commit", "--only", "--cleanup=verbatim", "--file=-", "--"],
        commit.as_slice(),
    ]
    .concat();
    let said = git.call(&args, message)?;
    anyhow::ensure!(
        said.success,
        "`git commit` refused the results{} (a hook, commit signing or another git setting); git said:\n{}",
        said.code.map(|c| format!(" (exit {c})")).unwrap_or_default(),
        indented(&said.text)
    );
    Ok(true)
}

/// Whether one of the paths `git` listed (`-z`: NUL-separated, relative to the root) is
/// under `folder`.
fn under(listed: &str, folder: &str) -> bool {
    listed
        .split('\0')
        .any(|p| p == folder || p.starts_with(&format!("{folder}/")))
}
