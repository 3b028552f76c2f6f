#!/usr/bin/env bash
# Source-level evolution on one GPU machine (where there is no Rust: the repro binary is
# built elsewhere and copied in).
#
#   benches/evolve_gpu.sh REPRO_BINARY OUT_DIR
#
# Makes a project in $EVOLVE_PROJECT (default /tmp/repro-evolve-project): this tree's
# kernels/ (with kernels/proposals/) and benches/evolve/pipeline.yaml. Builds, runs the tune
# with the scripted proposer (`repro tune`, timed), then the same tune again with --force
# (every trial must come from the memo and every answer from the cache: nothing measured
# twice), then the summarize stage. Leaves in OUT_DIR: tune.log, rerun.log (what repro
# printed), evo-tune.log (the stage's log: every trial, the proposer's lines, the summaries),
# tune_log.csv, topk.json, summary.md, the elite's proposals/*.patch, and
# benches/results/tune_evolve.md (header naming the command, device, date and commit; the
# trials and the best trial's lineage). Exit 1 when a step fails or the rerun measured
# anything.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
results=$here/results/tune_evolve.md
header=$(cd "$here/.." && results_header "bash benches/evolve_gpu.sh REPRO_BINARY OUT_DIR")
repro=$(realpath "$1")
out=$(realpath -m "$2")
mkdir -p "$out"
proj=${EVOLVE_PROJECT:-/tmp/repro-evolve-project}
mkdir -p "$proj"
rm -rf "$proj/kernels"
cp -r "$here/../kernels" "$proj/kernels"
cp "$here/evolve/pipeline.yaml" "$proj/pipeline.yaml"
cd "$proj"

failures=0
"$repro" --quiet stage build > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log" >&2; exit 1; }
t0=$(date +%s.%N)
stage_log=.repro/logs/evo-tune.log
"$repro" tune > "$out/tune.log" 2>&1 || { echo "repro tune failed: see $out/tune.log" >&2; failures=$((failures + 1)); }
t1=$(date +%s.%N)
# The summary lines of the run just made: the stage log's last `tune:` and `proposer:` lines.
summary() { grep -E "^(tune:|proposer: [0-9]|warning: proposer)" "$stage_log" | tail -n "$1"; }
first=$(summary 2)
"$repro" tune --force > "$out/rerun.log" 2>&1 || { echo "repro tune --force failed: see $out/rerun.log" >&2; failures=$((failures + 1)); }
rerun=$(summary 2)
cp "$stage_log" "$out/evo-tune.log"
"$repro" --quiet stage summarize > "$out/summarize.log" 2>&1 || { echo "summarize failed: see $out/summarize.log" >&2; failures=$((failures + 1)); }
cp artifacts/tune/tune_log.csv artifacts/tune/topk.json "$out/"
cp reports/summary.md "$out/" 2>/dev/null || true
if [ -d artifacts/tune/proposals ]; then cp artifacts/tune/proposals/*.patch "$out/"; fi
# Head to head: the tune's best, when it is a proposed source, against the base variant
# (the shipped best), interleaved on one GPU (`repro compare`), on each timed shape.
best_defines=$(python3 -c '
import json
b = json.load(open("artifacts/tune/topk.json"))[0]
if b.get("source"):
    print(" ".join(f"--define {k}={v}" for k, v in sorted(b["config"].items())))')
compare=""
if [ -n "$best_defines" ]; then
    for shape in mission ragged; do
        # shellcheck disable=SC2086
        line=$("$repro" compare -q .repro/cubins/tune-top1.cubin mma-wg-ring-gs $best_defines --shape "$shape" --pairs 2000 2>&1 | tee "$out/compare-$shape.txt" | grep -E "faster|slower|same" | head -1) \
            || { echo "repro compare failed on $shape: see $out/compare-$shape.txt" >&2; failures=$((failures + 1)); }
        compare+="- $shape: ${line:-see compare-$shape.txt}"$'\n'
    done
fi
if ! grep -q "(0 evaluated, " <<< "$rerun" || ! grep -q "proposer: 0 call(s)" <<< "$rerun"; then
    echo "the rerun measured trials or asked the proposer again (see $out/evo-tune.log)" >&2
    failures=$((failures + 1))
fi

{
    echo "# Source-level evolution on sdpa_fp8_mma (scripted proposer, kernels/proposals/)"
    echo
    echo "$header"
    echo "Pipeline: benches/evolve/pipeline.yaml (base mma-wg-ring-gs; define space USE_WGMMA × KV_GROUP_SYNC × Q_IN_REGS, 8 configurations; budget 32, population 6, up to 5 proposals a generation; score = geometric mean of the mission and ragged p50, µs, isolated launches, 20 warm-up, 100 samples, seed 0; every trial checked on small, mission and ragged, all input recipes)."
    echo
    echo "Wall time of \`repro tune\`: $(awk "BEGIN{printf \"%.0f\", $t1 - $t0}") s."
    echo
    echo '```text'
    echo "$first"
    echo "rerun (--force):"
    echo "$rerun"
    echo '```'
    echo
    echo "Trials (artifacts/tune/tune_log.csv):"
    echo
    echo "| trial | gen | status | p50 µs | config | parents | source | patch | note |"
    echo "|---:|---:|---|---:|---|---|---|---|---|"
    python3 - "$out/tune_log.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    note = r["note"].replace("|", "/")[:140]
    print(f"| {r['trial']} | {r['generation']} | {r['status']} | {r['p50_us']} | `{r['config']}` | {r['parents']} | {r['source']} | {r['patch']} | {note} |")
PY
    echo
    echo "Best trial's lineage (artifacts/tune/topk.json):"
    echo
    python3 - "$out/topk.json" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
if top:
    b = top[0]
    print(f"rank 1: trial {b['trial']}, p50 {b['p50_us']} µs, source {b.get('source') or 'the kernel s own'}, config {json.dumps(b['config'], sort_keys=True)}")
    print()
    for s in b.get("lineage", []):
        print(f"- trial {s['trial']} (gen {s['generation']}, {s['status']}, p50 {s.get('p50_us')} µs): source {s.get('source') or 'own'}, patch {s.get('patch') or '-'} {s.get('note', '')}")
PY
    echo
    echo "## Reading (computed from tune_log.csv)"
    echo
    python3 - "$out/tune_log.csv" <<'PY'
import csv, sys
ok = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["p50_us"]]
own = [r for r in ok if not r["source"]]
proposed = [r for r in ok if r["source"]]
if not own or not proposed:
    print("- Not enough passing trials to compare: define-only %d, proposed %d." % (len(own), len(proposed)))
else:
    b_own = min(own, key=lambda r: float(r["p50_us"]))
    b_pro = min(proposed, key=lambda r: float(r["p50_us"]))
    gain = float(b_own["p50_us"]) / float(b_pro["p50_us"]) - 1
    print(f"- Best define-only trial: {b_own['trial']} ({b_own['p50_us']} µs); best proposed source: trial {b_pro['trial']} ({b_pro['p50_us']} µs, patch {b_pro['patch']}).")
    print(f"- The proposed source is {100 * gain:+.1f} % faster than the define space's best; "
          + ("beyond the 3 % this bench calls a win (identical cubins measured ~1 % apart before)." if gain > 0.03
             else "not beyond the 3 % this bench calls a win (identical cubins measured ~1 % apart before)."))
PY
    if [ -n "$compare" ]; then
        echo
        echo "Head to head (\`repro compare -q .repro/cubins/tune-top1.cubin mma-wg-ring-gs --define … --shape S --pairs 2000\`: A = the tune's best, B = the base variant; interleaved isolated launches, paired-bootstrap 95 % CI):"
        echo
        printf '%s' "$compare"
    fi
} > "$results"
cp "$results" "$out/"
cat "$results"
[ "$failures" -eq 0 ] || exit 1
