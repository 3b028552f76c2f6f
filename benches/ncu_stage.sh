#!/usr/bin/env bash
# The profile stage alone, every target profiled again (`repro stage ncu-profile --force`), by
# two binaries taking turns on one GPU (issue 41): the stage's wall time and its log's line
# per pass and process, RUNS times each (default 3), alternating before/after, in one copy of
# TREE whose pipeline ran first (`repro run`, with AFTER): the same targets, inputs and GPU for
# both. Less noisy than a whole run (benches/run_times.sh), whose evo-tune picks the elites.
#
#   bash benches/ncu_stage.sh BEFORE_REPRO AFTER_REPRO TREE OUT_DIR [RUNS]
#
# TREE: a checkout of the commit AFTER_REPRO was built from. Name the binaries' commits in
# BEFORE_COMMIT and AFTER_COMMIT. Writes OUT_DIR/ncu_stage.md and prints it; exits non-zero
# if the first run ends 2 or more, or any profile stage does not pass.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
before=$(realpath "$1"); after=$(realpath "$2"); tree=$(realpath "$3"); out=$(realpath -m "$4")
runs=${5:-3}
mkdir -p "$out"
rm -f "$out"/*.ncu "$out/walls.tsv"
header=$(cd "$here/.." && results_header "bash benches/ncu_stage.sh BEFORE_REPRO AFTER_REPRO TREE OUT_DIR $runs, for ${BEFORE_COMMIT:-unnamed} (before) and ${AFTER_COMMIT:-unnamed} (after)")
work=$(tree_copy "$tree" ncu-stage)
cd "$work"
rc=0
"$after" run -q > "$out/setup.txt" 2>&1 || rc=$?
[ "$rc" -le 1 ] || { tail -20 "$out/setup.txt"; exit 1; }
for ((k = 1; k <= runs; k++)); do
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    t0=$(date +%s%N)
    "$bin" stage ncu-profile --force -q > "$out/$side-$k.txt" 2>&1 \
      || { echo "$side run $k failed:" >&2; tail -20 "$out/$side-$k.txt" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$side" "$k" $(( ($(date +%s%N) - t0) / 1000000 )) >> "$out/walls.tsv"
    grep -h '^ncu: ' .repro/logs/ncu-profile.log > "$out/$side-$k.ncu"
  done
done
{
  echo "$header"
  echo
  python3 - "$out" "$runs" <<'PY'
import re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
walls = {}
for line in open(f"{out}/walls.tsv"):
    side, k, ms = line.split()
    walls.setdefault(side, []).append(int(ms) / 1000)
def spread(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"
print(f"`repro stage ncu-profile --force -q`, {runs} runs of each binary, alternating (before, after, before, ...): wall time, s, median (min–max), and each run's.")
print()
print("| binary | median (min–max) | runs |")
print("|---|---:|---|")
for side in ("before", "after"):
    print(f"| {side} | {spread(walls[side])} | {', '.join(f'{x:.1f}' for x in walls[side])} |")
print()
print("The stage log's line per pass and process (`ncu: … in X s`), X in s, median (min–max) over the runs:")
print()
rows = {}
pattern = re.compile(r"^ncu: (\d+) (kernel targets|baseline calls) (.+?) in ([0-9.]+) s")
for side in ("before", "after"):
    for k in range(1, runs + 1):
        for line in open(f"{out}/{side}-{k}.ncu"):
            m = pattern.match(line)
            if m:
                key = f"{m.group(1)} {m.group(2)} {m.group(3)}"
                rows.setdefault(key, {}).setdefault(side, []).append(float(m.group(4)))
print("| pass | before | after |")
print("|---|---:|---:|")
for key, sides in rows.items():
    cells = [spread(sides[s]) if s in sides else "–" for s in ("before", "after")]
    print(f"| {key} | {cells[0]} | {cells[1]} |")
print()
print("The last run's log lines of each binary:")
print()
for side in ("before", "after"):
    print(f"```text\n# {side}")
    print(open(f"{out}/{side}-{runs}.ncu").read().rstrip())
    print("```")
PY
} > "$out/ncu_stage.md"
cat "$out/ncu_stage.md"
