#!/usr/bin/env bash
# Make the committed results on a GPU machine, the way a user does: a clean checkout of a
# commit, the shipped pipeline from nothing, `repro verify`, then `repro commit` there, on
# the machine that measured. The new commit comes back as a git bundle.
#
#   bash benches/gpu_commit.sh REPRO_BINARY REPO_BUNDLE OUTDIR [BRANCH]
#
# REPO_BUNDLE: `git bundle create FILE BRANCH` of the repository (the commit to measure is
# BRANCH's tip, default main). Set GIT_USER_NAME / GIT_USER_EMAIL for the commit's author, and
# REPRO_COMMIT_FLAGS for more `repro commit` flags (e.g. `--allow-lost` when the best variant
# changed, so the old best's off-primary profiles are no longer made).
# Writes OUTDIR/results.bundle (the new commit), OUTDIR/results.tgz (the run's artifacts,
# reports and logs, whatever the verdict), OUTDIR/run.log, OUTDIR/summary.md.
# Exits non-zero if any step fails (a failed gate is not a failed step: it is reported).
set -euo pipefail
REPRO=$(realpath "$1"); BUNDLE=$(realpath "$2"); OUT=$(realpath "$3"); BRANCH=${4:-main}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PATH=$PATH:/usr/local/cuda/bin

W=$(mktemp -d /tmp/results.XXXXXX)
git clone -q --branch "$BRANCH" "$BUNDLE" "$W"
cd "$W"
git config user.name "${GIT_USER_NAME:?set GIT_USER_NAME}"
git config user.email "${GIT_USER_EMAIL:?set GIT_USER_EMAIL}"
base=$(git rev-parse HEAD)
echo "== measuring $(git log -1 --format='%h %s') on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
test -z "$(git status --porcelain)" || { echo "the checkout is not clean"; exit 1; }

# From nothing: the committed results stay in git history, `repro commit` compares with them.
rm -rf .repro artifacts reports
t0=$SECONDS
rc=0; "$REPRO" run -q || rc=$?
echo "== repro run: exit $rc in $((SECONDS - t0)) s"
[ "$rc" -le 1 ] || exit "$rc"
t0=$SECONDS
rc=0; "$REPRO" run -q || rc=$?
echo "== repro run again (nothing to do): exit $rc in $((SECONDS - t0)) s"
"$REPRO" status
# Whatever happens next, the run's results come back to be looked at.
tar czf "$OUT/results.tgz" artifacts reports .repro/logs .repro/state
cp reports/summary.md "$OUT/summary.md"
echo "== repro verify (before the commit)"
"$REPRO" verify
# shellcheck disable=SC2086  # flags are words
"$REPRO" commit --allow-failed ${REPRO_COMMIT_FLAGS:-} -m "results: the shipped pipeline on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), from a clean checkout of $(git rev-parse --short "$base")"
echo "== repro verify (after the commit)"
"$REPRO" verify
git bundle create "$OUT/results.bundle" "$BRANCH" "^$base"
echo "== done: $(git log -1 --format='%h %s')"
