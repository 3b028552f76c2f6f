#!/usr/bin/env bash
# The kernel engineer's loop, timed on a GPU machine (issues 28, 41): `repro run --force` in a
# fresh clone (every stage measures again: what an L4 user's first run does, no committed
# result being of their GPU), `repro run` from nothing, and `repro run` after a one-line edit
# to one kernel (torch and nvcc already installed).
#
#   bash benches/run_times.sh run REPRO_BINARY TREE LABEL OUTDIR [STEP...]
#   bash benches/run_times.sh table OUTDIR BEFORE_LABEL AFTER_LABEL > benches/results/FILE.md
#   bash benches/run_times.sh table OUTDIR LABEL > benches/results/FILE.md   (one commit alone)
#
# `run` works in a copy of TREE (a checkout, or an unpacked `git archive`, of the commit
# REPRO_BINARY was built from), made a git repository of one commit as a clone is. STEPs
# (default all, in this order): `force` (repro run --force, the committed results in place),
# `fresh` (rm -rf .repro artifacts reports; repro run), `edit-ws`, `edit-mma` and `edit-fp8`
# (append `__device__ int repro_edit_probe_N = 1;` to that kernel's file: every cubin of the
# kernel changes, its behaviour does not; then repro run). Each
# step's wall time, exit status, the bench variants measured and reused and the profile
# targets reused go to OUTDIR/LABEL.tsv; repro's output (its stage table) to
# OUTDIR/LABEL-STEP.txt, the profile stage's lines on its ncu processes to
# OUTDIR/LABEL-STEP.ncu. A run may end 1 (a failed gate), never 2 or more.
#
# `table` prints the results file: the header (command, device, date, commit; with
# RUN_TIMES_HEADER=FILE, that file's, for a table made away from the machine that measured),
# then both labels' steps side by side and each step's stage table. RUN_TIMES_NOTE says how
# the two sides ran (e.g. side by side on two GPUs).
set -euo pipefail
# shellcheck source=benches/results_header.sh
. "$(dirname "${BASH_SOURCE[0]}")/results_header.sh"

count_reuse() { # bench variants measured, bench variants reused, profile targets reused
  python3 - <<'PY'
import glob, json
measured = reused = 0
for f in glob.glob("artifacts/bench/*.json"):
    m = json.load(open(f)).get("measured") or {}
    if m.get("reused"):
        reused += 1
    else:
        measured += 1
try:
    targets = json.load(open("artifacts/ncu/summary.json"))["targets"]
except (OSError, KeyError, ValueError):
    targets = []
profiled = sum(1 for t in targets if (t.get("measured") or {}).get("reused"))
print(f"{measured}\t{reused}\t{profiled}")
PY
}

run() {
  local repro tree label out
  repro=$(realpath "$1"); tree=$(realpath "$2"); label=$3; out=$(realpath "$4"); shift 4
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(force fresh edit-ws edit-mma edit-fp8)
  mkdir -p "$out"
  local work
  work=$(tree_copy "$tree" "run-times-$label")
  cd "$work"
  local n=0 step file t0 rc secs counts flags
  for step in "${steps[@]}"; do
    n=$((n + 1))
    flags=()
    case "$step" in
      force) flags=(--force) ;;
      fresh) rm -rf .repro artifacts reports ;;
      edit-ws) file=kernels/sdpa_fp8_ws.cu ;;
      edit-mma) file=kernels/sdpa_fp8_mma.cu ;;
      edit-fp8) file=kernels/sdpa_fp8.cu ;;
      *) echo "unknown step $step" >&2; exit 2 ;;
    esac
    if [ "${step#edit-}" != "$step" ]; then
      printf '\n__device__ int repro_edit_probe_%s = 1;\n' "$n" >> "$file"
    fi
    t0=$(date +%s%N)
    rc=0
    "$repro" run -q "${flags[@]}" > "$out/$label-$step.txt" 2>&1 || rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}')
    # The profile stage's own account of its ncu processes, for the table.
    grep -h '^ncu: ' .repro/logs/ncu-profile.log > "$out/$label-$step.ncu" 2>/dev/null || true
    counts=$(count_reuse)
    printf '%s\t%s\t%s\t%s\n' "$step" "$secs" "$rc" "$counts" >> "$out/$label.tsv"
    echo "== $label $step: exit $rc in $(tail -1 "$out/$label.tsv" | cut -f2) s (bench measured/reused, profile reused: $counts)"
    [ "$rc" -le 1 ] || { tail -20 "$out/$label-$step.txt"; exit 1; }
  done
}

table() {
  local out=$1 before=$2 after=${3:-}
  if [ -z "$after" ]; then
    # One commit alone: its steps, no before column.
    after=$before
    before=""
  fi
  if [ -n "${RUN_TIMES_HEADER:-}" ]; then
    # Made elsewhere than where it was measured: the header of the call that measured.
    cat "$RUN_TIMES_HEADER"
  else
    if [ -n "$before" ]; then
      results_header "bash benches/run_times.sh run REPRO TREE LABEL OUTDIR, for $before (before) and $after (after); bash benches/run_times.sh table OUTDIR $before $after"
    else
      results_header "bash benches/run_times.sh run REPRO TREE $after OUTDIR; bash benches/run_times.sh table OUTDIR $after"
    fi
  fi
  echo "Wall time of \`repro run -q\` in a clean copy of each commit's tree${RUN_TIMES_NOTE:+ ($RUN_TIMES_NOTE)}. \`force\`: \`repro run --force\` with the committed results in place (everything measured again); \`fresh\`: from nothing (\`rm -rf .repro artifacts reports\`); \`edit-ws\`, \`edit-mma\`, \`edit-fp8\`: then a one-line edit to that kernel (a new \`__device__ int\`: every cubin of the kernel changes, its behaviour does not) and \`repro run\` again. Bench measured / reused: variants whose results the bench stage measured, or copied from the run before (key unchanged). One run of each."
  echo
  local head="| step |" rule="|---|"
  [ -z "$before" ] || { head="$head $before: s (exit) |"; rule="$rule---:|"; }
  echo "$head $after: s (exit) | $after: bench variants measured / reused | $after: profile targets reused |"
  echo "$rule---:|---:|---:|"
  local step
  for step in force fresh edit-ws edit-mma edit-fp8; do
    local b a
    b=$(awk -F'\t' -v s="$step" '$1 == s {printf "%s (%s)", $2, $3}' "$out/$before.tsv" 2>/dev/null || true)
    a=$(awk -F'\t' -v s="$step" '$1 == s {printf "%s (%s)\t%s / %s\t%s", $2, $3, $4, $5, $6}' "$out/$after.tsv" 2>/dev/null || true)
    [ -n "$b$a" ] || continue
    IFS=$'\t' read -r a_time a_bench a_prof <<< "${a:-not measured	-	-}"
    if [ -n "$before" ]; then
      echo "| $step | ${b:-not measured} | $a_time | $a_bench | $a_prof |"
    else
      echo "| $step | $a_time | $a_bench | $a_prof |"
    fi
  done
  for label in $before $after; do
    for step in force fresh edit-ws edit-mma edit-fp8; do
      [ -f "$out/$label-$step.txt" ] || continue
      echo
      echo "Stage times, $label, $step (repro's table):"
      echo
      echo '```text'
      grep -E '^[a-z0-9_-]+ +([0-9.]+s|-) ' "$out/$label-$step.txt" || tail -12 "$out/$label-$step.txt"
      if [ -s "$out/$label-$step.ncu" ]; then
        echo "# the ncu-profile stage's log:"
        cat "$out/$label-$step.ncu"
      fi
      echo '```'
    done
  done
}

case "${1:-}" in
  run) shift; run "$@" ;;
  table) shift; table "$@" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
