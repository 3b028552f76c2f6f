//! The `srun` command line for one [`Job`]: resources from the executor settings, the
//! job's name, directory and time limit, and a small `sh` wrapper that announces the node
//! (see [`super::report::STARTED_MARKER`]) and refuses to run in the wrong directory.

use super::SlurmSettings;
use crate::Job;
use std::ffi::OsString;
use std::time::Duration;

/// Runs on the node before the job's program. `$1` is the job's directory: Slurm silently
/// falls back to /tmp when `--chdir` does not exist there, which would run the job in the
/// wrong place, so the wrapper checks it itself.
const WRAPPER: &str = r#"printf 'REPRO_SLURM_STEP node=%s job=%s\n' "${SLURMD_NODENAME:-$(hostname)}" "${SLURM_JOB_ID:-}" >&2
cd -- "$1" || { printf 'repro: cannot enter %s on node %s: the project directory must be on a filesystem shared with the compute nodes\n' "$1" "$(hostname)" >&2; exit 127; }
shift
exec "$@""#;

/// `$0` of the wrapper, shown in `ps` on the node.
const WRAPPER_NAME: &str = "repro-slurm-job";

/// Slurm's `--time` for a job: the job's own timeout rounded up to whole minutes plus one
/// minute of grace (repro's own watchdog then ends it first, to the second), else the
/// executor's `time`, else the partition's default.
pub fn time_limit(job: &Job, settings: &SlurmSettings) -> Option<String> {
    match job.timeout {
        Some(t) => Some(minutes_with_grace(t).to_string()),
        None => settings.time.clone(),
    }
}

fn minutes_with_grace(t: Duration) -> u64 {
    t.as_secs().div_ceil(60).max(1) + 1
}

/// Every argument after the program name `srun`.
pub fn srun_args(job: &Job, settings: &SlurmSettings) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        format!("--job-name={}", job.name).into(),
        {
            let mut chdir = OsString::from("--chdir=");
            chdir.push(&job.cwd);
            chdir
        },
        // The job's own variables are set on srun's environment, which ALL forwards: a
        // value may contain commas, which `--export=ALL,K=V` cannot carry.
        "--export=ALL".into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        "--kill-on-bad-exit=1".into(),
    ];
    if let Some(p) = &settings.partition {
        args.push(format!("--partition={p}").into());
    }
    if let Some(a) = &settings.account {
        args.push(format!("--account={a}").into());
    }
    if let (Some(_), Some(gres)) = (job.gpu, &settings.gres) {
        args.push(format!("--gres={gres}").into());
    }
    if let Some(t) = time_limit(job, settings) {
        args.push(format!("--time={t}").into());
    }
    // The user's extra arguments come last so they can override ours.
    args.extend(settings.srun_args.iter().map(OsString::from));
    args.extend(["sh", "-c", WRAPPER, WRAPPER_NAME].map(OsString::from));
    args.push(job.cwd.clone().into_os_string());
    args.extend(job.argv.iter().map(OsString::from));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SlurmSettings {
        SlurmSettings {
            partition: Some("gpu".into()),
            gres: Some("gpu:l4:1".into()),
            time: Some("30".into()),
            account: Some("kernels".into()),
            srun_args: vec!["--exclusive".into()],
            max_jobs: None,
        }
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn gpu_job_with_timeout() {
        let mut job = Job::new(
            "bench:v:mission:0",
            vec!["repro".into(), "exec".into()],
            "/p",
        );
        job.gpu = Some(0);
        job.timeout = Some(Duration::from_secs(90));
        let args = strings(srun_args(&job, &settings()));
        assert_eq!(
            &args[..11],
            [
                "--job-name=bench:v:mission:0",
                "--chdir=/p",
                "--export=ALL",
                "--nodes=1",
                "--ntasks=1",
                "--kill-on-bad-exit=1",
                "--partition=gpu",
                "--account=kernels",
                "--gres=gpu:l4:1",
                "--time=3",
                "--exclusive",
            ]
        );
        assert_eq!(&args[11..13], ["sh", "-c"]);
        assert_eq!(&args[14..], ["repro-slurm-job", "/p", "repro", "exec"]);
    }

    #[test]
    fn cpu_job_gets_no_gres_and_the_settings_time() {
        let job = Job::new("cmd:prep", vec!["make".into()], "/p");
        let args = strings(srun_args(&job, &settings()));
        assert!(!args.iter().any(|a| a.starts_with("--gres")));
        assert!(args.contains(&"--time=30".to_string()));
    }

    #[test]
    fn minimal_settings_add_no_resource_flags() {
        let job = Job::new("j", vec!["true".into()], "/p");
        let args = strings(srun_args(&job, &SlurmSettings::default()));
        assert!(!args.iter().any(|a| a.starts_with("--partition")
            || a.starts_with("--time")
            || a.starts_with("--account")));
    }

    #[test]
    fn timeout_rounds_up_with_a_minute_of_grace() {
        assert_eq!(minutes_with_grace(Duration::from_secs(1)), 2);
        assert_eq!(minutes_with_grace(Duration::from_secs(60)), 2);
        assert_eq!(minutes_with_grace(Duration::from_secs(61)), 3);
        assert_eq!(minutes_with_grace(Duration::ZERO), 2);
    }
}
