//! The tests that need no GPU of their own, as one test binary: one link instead of one per
//! file, a fraction of the disk. Each file is a module named after what it tests.
//!
//! Tests that change the process's environment (`ncu_profile_stage`, `tune_proposer`), the
//! GPU and Slurm suites, and the skip summary stay separate binaries under `tests/`: libtest
//! runs a binary's tests on parallel threads, and binaries one after another.

#[path = "../common/mod.rs"]
mod common;
use common::skip;
#[path = "../support/fake_python.rs"]
mod fake_python;
#[path = "../support/git.rs"]
mod git;
#[path = "../support/lock.rs"]
mod lock;
#[path = "../support/project.rs"]
mod project;
#[path = "../support/shipped.rs"]
mod shipped;
#[path = "../support/table.rs"]
mod table;

mod bad_pipelines;
mod baseline_inputs;
mod baseline_script;
mod baseline_timing;
mod bench_reuse;
mod bench_stage;
mod build_list;
mod compare_cli;
mod diff_commit;
mod doc_links;
mod docs_tables;
mod engine;
mod exec_cli;
mod fuzz;
mod hostile;
mod kill_random;
mod ncu_cli;
mod ncu_parse;
mod promote_cli;
mod results_trust;
mod shell_cli;
mod shipped_kernels;
mod status_cli;
mod toolchain;
mod tune_cli;
mod unmeasured;
mod workload_rmsnorm;
