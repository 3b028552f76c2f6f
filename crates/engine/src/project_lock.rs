//! One `repro run` per project at a time. `.repro/lock` is held with an OS file lock
//! (`File::try_lock`, released by the kernel when the holder dies, so a killed run never
//! leaves a lock that blocks forever) and holds who has it: pid, host, command, since.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Who holds (or held) the lock, as written in the lock file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Holder {
    pub pid: String,
    pub host: String,
    pub command: String,
    pub since: String,
    /// The run id its processes carry (`REPRO_RUN_ID`); empty in locks of older versions.
    pub run: String,
}

impl Holder {
    fn me() -> Holder {
        Holder {
            pid: std::process::id().to_string(),
            host: repro_executor::local::hostname(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            since: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            run: repro_executor::orphans::begin_run().to_string(),
        }
    }

    fn render(&self) -> String {
        format!(
            "pid: {}\nhost: {}\ncommand: {}\nsince: {}\nrun: {}\n",
            self.pid, self.host, self.command, self.since, self.run
        )
    }

    fn parse(text: &str) -> Option<Holder> {
        let mut h = Holder::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(": ") else {
                continue;
            };
            let v = v.to_string();
            match k {
                "pid" => h.pid = v,
                "host" => h.host = v,
                "command" => h.command = v,
                "since" => h.since = v,
                "run" => h.run = v,
                _ => {}
            }
        }
        (!h.pid.is_empty()).then_some(h)
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {}, running `{}` since {}",
            self.pid, self.host, self.command, self.since
        )
    }
}

/// Another repro is running in this project.
#[derive(Debug, thiserror::Error)]
#[error("another repro is running in this project ({holder})\n  help: wait for it to finish, or rerun with `--wait` to start when it is done (lock file: {})", file.display())]
pub struct Held {
    pub holder: Holder,
    pub file: PathBuf,
}

/// This repro was started by a stage of the run that holds the lock (`$REPRO_BIN stage a
/// --wait` in a `cmd` stage): waiting would wait forever, for a run that waits for it.
#[derive(Debug, thiserror::Error)]
#[error("this repro runs inside stage `{stage}` of run {run}, which holds the project lock ({holder}); it would wait for itself\n  help: a stage may read the project (`repro status`, `repro dag`) but not run stages: list what it needs in its `needs` instead")]
pub struct Nested {
    pub stage: String,
    pub run: String,
    pub holder: Holder,
}

impl Nested {
    /// When this process carries (`REPRO_RUN_ID`) the run id of `holder`.
    fn of(holder: &Holder) -> Option<Nested> {
        let ours = std::env::var(repro_executor::orphans::RUN_ID_ENV).ok()?;
        (!ours.is_empty() && ours == holder.run).then(|| Nested {
            stage: std::env::var("REPRO_STAGE").unwrap_or_else(|_| "?".into()),
            run: ours,
            holder: holder.clone(),
        })
    }
}

/// The held project lock; released (and its holder info cleared) on drop.
#[derive(Debug)]
pub struct ProjectLock {
    file: File,
    /// The holder of a lock left behind by a process that died, taken over.
    pub taken_over: Option<Holder>,
}

impl Drop for ProjectLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        // Closing the file releases the OS lock.
    }
}

/// The user interrupted `--wait`.
#[derive(Debug, thiserror::Error)]
#[error("interrupted while waiting for the project lock")]
pub struct WaitInterrupted;

/// Take the lock of the project at `root`. When it is held: with `wait`, call `waiting`
/// once with the holder and poll until it is free (giving up with [`WaitInterrupted`] when
/// `cancel` is set); without, fail with [`Held`].
pub fn acquire(
    root: &Path,
    wait: bool,
    cancel: &AtomicBool,
    waiting: impl FnOnce(&Holder),
) -> anyhow::Result<ProjectLock> {
    let path = root.join(".repro/lock");
    check_state_dirs(root)?;
    repro_base::fsio::create_dir_all(&root.join(".repro"))?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| repro_base::fsio::at(&path, e))?;
    let mut waiting = Some(waiting);
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                if let Some(tell) = waiting.take() {
                    let holder = Holder::parse(&std::fs::read_to_string(&path).unwrap_or_default())
                        .unwrap_or(Holder {
                            pid: "unknown".into(),
                            host: "?".into(),
                            command: "?".into(),
                            since: "?".into(),
                            run: String::new(),
                        });
                    if let Some(nested) = Nested::of(&holder) {
                        return Err(nested.into());
                    }
                    if !wait {
                        return Err(Held { holder, file: path }.into());
                    }
                    tell(&holder);
                }
                if cancel.load(Ordering::SeqCst) {
                    return Err(WaitInterrupted.into());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
    }
    // We hold it. Anything still written there is from a holder that died without cleanup.
    let taken_over = Holder::parse(&std::fs::read_to_string(&path).unwrap_or_default());
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(Holder::me().render().as_bytes())?;
    file.flush()?;
    Ok(ProjectLock { file, taken_over })
}

/// The repro running in this project now, if one holds the lock (looked at without
/// taking it, so `repro status` and dry runs can say a run is under way).
pub fn running(root: &Path) -> Option<Holder> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = root.join(".repro/lock");
    // Non-blocking: a FIFO put where the lock belongs must not hang a status.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => {
            Holder::parse(&std::fs::read_to_string(&path).unwrap_or_default())
        }
        Err(TryLockError::Error(_)) => None,
    }
}

/// The folders under `.repro/` that repro deletes and moves files in, and its lock file,
/// must be what they seem: a symlink there (to a folder outside the project) would take
/// every delete, move and restore with it.
pub fn check_state_dirs(root: &Path) -> anyhow::Result<()> {
    const STATE: [&str; 8] = [
        ".repro",
        ".repro/backup",
        ".repro/staging",
        ".repro/state",
        ".repro/cache",
        ".repro/logs",
        ".repro/cubins",
        ".repro/lock",
    ];
    for rel in STATE {
        let path = root.join(rel);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            let target = std::fs::read_link(&path).unwrap_or_default();
            anyhow::bail!(
                "`{rel}` is a symlink (to `{}`): repro deletes and moves files there, so it must be a real {} inside the project\n  help: remove the link (`rm {rel}`); repro makes a new one",
                target.display(),
                if rel == ".repro/lock" { "file" } else { "folder" }
            );
        }
    }
    let lock_dir = Path::new(repro_pipeline::paths::LOCK_FILE)
        .parent()
        .unwrap_or(Path::new(""));
    if let Err(problem) = repro_pipeline::paths::Resolver::new(root).resolve(lock_dir) {
        anyhow::bail!(
            "the folder of repro's lock, `{}`, {problem}: the lock would be written there\n  help: make `{}` a folder inside the project",
            lock_dir.display(),
            lock_dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_and_told_who() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), false, &AtomicBool::new(false), |_| {}).unwrap();
        assert!(first.taken_over.is_none());
        let err = acquire(dir.path(), false, &AtomicBool::new(false), |_| {}).unwrap_err();
        let held = err.downcast_ref::<Held>().unwrap();
        assert_eq!(held.holder.pid, std::process::id().to_string());
        drop(first);
        let again = acquire(dir.path(), false, &AtomicBool::new(false), |_| {}).unwrap();
        assert!(
            again.taken_over.is_none(),
            "a cleanly released lock is not a takeover"
        );
    }

    #[test]
    fn leftover_holder_info_is_reported_as_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".repro")).unwrap();
        std::fs::write(
            dir.path().join(".repro/lock"),
            "pid: 999999\nhost: h\ncommand: repro run\nsince: then\n",
        )
        .unwrap();
        let lock = acquire(dir.path(), false, &AtomicBool::new(false), |_| {}).unwrap();
        assert_eq!(lock.taken_over.as_ref().unwrap().pid, "999999");
    }
}
