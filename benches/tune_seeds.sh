#!/usr/bin/env bash
# The tuner against the exhaustive sweep of a shipped tune space, over several search seeds
# (issue 28): how many trials each seeded search takes to reach a configuration within 3 % of
# the exhaustive best.
#
#   bash benches/tune_seeds.sh REPRO_BINARY TREE OUT_DIR [SEEDS] [BUDGET] [STAGE]
#
# TREE: a checkout (or unpacked `git archive`) of the commit REPRO_BINARY was built from.
# STAGE: the tune stage of its pipeline.yaml to measure, default `evo-tune` (the ws family,
# which tunes on sm_90a only: run it on an H100/H200; `evo-tune-mma` tunes on sm_89 only).
# SEEDS: default "0 1 2 3 4 5". BUDGET: each search's trial budget, default 20 % of the valid
# space (so a search that needs more than the target of 10 % still shows how many it needed);
# pass "" to keep the default and name a STAGE.
#
# In a copy of TREE: the stage's `proposer:` removed (the sweep measures the define space
# only, and a proposed source is no configuration of it), build, `repro tune STAGE
# --exhaustive` (every valid configuration measured once, into the tune memo), then per seed
# the stage's `seed:` set and `repro tune STAGE --budget BUDGET`: the search's trials come
# from the memo, so every seed searches the same measured landscape. A trial counts whatever
# its status (failed gates too). Writes OUT_DIR/exhaustive.csv, seed-N.csv, *.log and
# benches/results/tune_seeds_STAGE.md (the header naming the command, device, date and
# commit, then the table). Exits non-zero if any step fails.
#
# TUNE_PRIMARY=WORKLOAD=SHAPE (optional) makes SHAPE that workload's primary shape in the
# copy, so every trial is timed there, and also runs the baselines stage there: the table then
# ends with the fastest baseline's p50 on SHAPE from the same run, and the file is
# tune_seeds_STAGE_SHAPE.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
repro=$(realpath "$1"); tree=$(realpath "$2"); out=$(realpath -m "$3")
seeds=${4:-0 1 2 3 4 5}; budget=${5:-}; stage=${6:-evo-tune}
mkdir -p "$out"
primary=${TUNE_PRIMARY:-}
header=$(cd "$here/.." && results_header "${primary:+TUNE_PRIMARY=$primary }bash benches/tune_seeds.sh REPRO_BINARY TREE OUT_DIR \"$seeds\" \"${budget}\" $stage")
proj=$(mktemp -d /tmp/tune-seeds.XXXXXX)
cp -a "$tree/." "$proj/"
cd "$proj"

# edit_stage [SEED]: without SEED, drop the stage's `proposer:` block and print its `dir:`;
# with SEED, set its `seed:`.
edit_stage() {
  python3 - "$stage" "$@" <<'PY'
import re, sys
stage, seed = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
text = open("pipeline.yaml").read()
m = re.search(rf"^  {re.escape(stage)}:[^\n]*\n(?:    [^\n]*\n|[ \t]*\n)*", text, re.M)
assert m and re.search(r"^    uses: tune\b", m.group(0), re.M), f"no tune stage `{stage}` in pipeline.yaml"
block = m.group(0)
if seed is None:
    block = re.sub(r"^    proposer:[^\n]*\n(?:      [^\n]*\n)*", "", block, flags=re.M)
    d = re.search(r"^    dir: (\S+)", block, re.M)
    print(d.group(1) if d else "artifacts/tune")
else:
    block, n = re.subn(r"^    seed: \d+", f"    seed: {seed}", block, count=1, flags=re.M)
    assert n == 1, f"the stage `{stage}` has no `seed:` line"
open("pipeline.yaml", "w").write(text[:m.start()] + block + text[m.end():])
PY
}
dir=$(edit_stage)
rm -rf .repro "$dir"
if [ -n "$primary" ]; then
  python3 - "${primary%%=*}" "${primary#*=}" <<'PY'
import re, sys
workload, shape = sys.argv[1], sys.argv[2]
text = open("pipeline.yaml").read()
m = re.search(rf"^  {re.escape(workload)}:[^\n]*\n(?:    [^\n]*\n|      [^\n]*\n|[ \t]*\n)*", text, re.M)
assert m, f"no workload `{workload}` in pipeline.yaml"
block, n = re.subn(r"^    primary: \S+", f"    primary: {shape}", m.group(0), count=1, flags=re.M)
assert n == 1 and re.search(rf"^      {re.escape(shape)}:", block, re.M), f"`{workload}` has no primary line or no shape `{shape}`"
open("pipeline.yaml", "w").write(text[:m.start()] + block + text[m.end():])
PY
fi

"$repro" --quiet stage build > "$out/build.log" 2>&1
t0=$SECONDS
"$repro" tune "$stage" --exhaustive > "$out/exhaustive.log" 2>&1
echo "exhaustive: $((SECONDS - t0)) s" | tee "$out/wall.txt"
cp "$dir/exhaustive.csv" "$out/exhaustive.csv"
valid=$(python3 -c 'import csv,sys; print(sum(1 for _ in csv.DictReader(open(sys.argv[1]))))' "$out/exhaustive.csv")
[ -n "$budget" ] || budget=$(( (valid + 4) / 5 ))

for seed in $seeds; do
  edit_stage "$seed"
  t0=$SECONDS
  "$repro" tune "$stage" --budget "$budget" > "$out/seed-$seed.log" 2>&1
  echo "seed $seed: $((SECONDS - t0)) s" | tee -a "$out/wall.txt"
  cp "$dir/tune_log.csv" "$out/seed-$seed.csv"
done

python3 - "$out" "$budget" "$seeds" > "$out/table.md" <<'PY'
import csv, json, os, statistics, sys
out, budget, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def scored(row):
    return row["status"] == "ok" and row["correctness_pass"] == "true" and row["p50_us"]
sweep = list(csv.DictReader(open(os.path.join(out, "exhaustive.csv"))))
best = min((r for r in sweep if scored(r)), key=lambda r: float(r["p50_us"]))
target = float(best["p50_us"]) * 1.03
cfg = lambda r: " ".join(f"{k}={v}" for k, v in sorted(json.loads(r["config"]).items()))
per_seed, gaps = [], []
for s in seeds:
    rows = list(csv.DictReader(open(os.path.join(out, f"seed-{s}.csv"))))
    hit = next((i + 1 for i, r in enumerate(rows) if scored(r) and float(r["p50_us"]) <= target), None)
    found = min((float(r["p50_us"]) for r in rows if scored(r)), default=None)
    per_seed.append((s, len(rows), hit, found))
trials = [h if h is not None else budget + 1 for _, _, h, _ in per_seed]
median = statistics.median(trials)
valid = len(sweep)
print(f"Space: {valid} valid configurations, all measured by `repro tune --exhaustive` "
      f"({sum(1 for r in sweep if scored(r))} pass every gate); best {float(best['p50_us']):.2f} µs: `{cfg(best)}`. "
      f"Target: a trial within 3 % ({target:.2f} µs). Budget per search: {budget} trials; a search that never gets there counts as {budget + 1}.")
print()
print("| seed | trials run | trials to within 3 % | best found (µs) | gap to the exhaustive best |")
print("|---:|---:|---:|---:|---:|")
for s, n, hit, found in per_seed:
    gap = "n/a" if found is None else f"{(found / float(best['p50_us']) - 1) * 100:+.1f} %"
    print(f"| {s} | {n} | {hit if hit is not None else 'not reached'} | {'n/a' if found is None else f'{found:.2f}'} | {gap} |")
print()
print(f"Median trials to within 3 %: {median:g} = {median / valid * 100:.1f} % of the space (target ≤ 10 %).")
PY
if [ -n "$primary" ]; then
  "$repro" --quiet stage baselines --force > "$out/baselines.log" 2>&1
  python3 - "${primary#*=}" >> "$out/table.md" <<'PY'
import glob, json, sys
shape = sys.argv[1]
best = None
for path in sorted(glob.glob("artifacts/bench/baselines/*.json")):
    rec = json.load(open(path))
    for r in rec.get("results", []):
        if r.get("shape") == shape and r.get("p50_us") is not None and (best is None or r["p50_us"] < best[1]):
            best = (rec["name"], r["p50_us"])
if best is None:
    sys.exit(f"no baseline measured {shape}")
print()
print(f"The fastest baseline on `{shape}` in the same run: {best[0]}, p50 {best[1]:.2f} µs (the baselines stage).")
PY
  result="$here/results/tune_seeds_${stage}_${primary#*=}.md"
else
  result="$here/results/tune_seeds_$stage.md"
fi
{ echo "$header"; cat "$out/wall.txt" | sed 's/^/- wall: /'; echo; cat "$out/table.md"; } > "$result"
cat "$result"
