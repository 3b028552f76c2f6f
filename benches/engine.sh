#!/usr/bin/env bash
# Engine overhead on pipelines of `cmd` stages, before and after a change on the same machine:
#   (a) 5 stages, all up to date: `repro run` and `repro status`;
#   (b) 200 stages with 2,000 dep files (10 per stage), all up to date;
#   (c) 2,000 stages, each needing the 10 before it and reading their outputs (20k deps):
#       no-op `repro run`, `repro status`, `repro dag`, `repro run --dry-run`;
#   (d) the first run of N chained `true` stages, N in $ENGINE_CHAIN (each in a fresh folder),
#       with -q, and once on a terminal (through `script`) where progress is drawn.
# Targets (issue 2, issue 28): (a) <= 10 ms; (b) < 100 ms; (c) <= 60 ms, with margin, for the
# no-op run and status (100 ms until the fourth round of docs/PERFORMANCE.md); (d) <= 15 s at
# 2,000 stages, growing linearly.
#
# Usage: benches/engine.sh [REPRO [BEFORE]]
#   REPRO   the binary measured (default target/release/repro, built if missing)
#   BEFORE  a binary built from the commit before the change (optional): every benchmark then
#           runs with both, one after the other, and each table has both columns. Name its
#           commit in BEFORE_COMMIT.
# Environment: ENGINE_SCALE (stages in (c), default 2000), ENGINE_CHAIN (default
# "500 1000 2000 4000"), ENGINE_CHAIN_RUNS (runs per size, default 3; one at the largest size),
# ENGINE_OUT (default benches/results/engine.md).
# Needs hyperfine (`apt-get install -y hyperfine`) and python3. Run it on a quiet machine: the
# header records the load average before and after.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/benches/results_header.sh"
repro=${1:-$here/target/release/repro}
before=${2:-}
if [ ! -x "$repro" ]; then
  (cd "$here" && cargo build --release --quiet)
fi
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
repro=$(abs "$repro")
[ -z "$before" ] || before=$(abs "$before")
command -v hyperfine >/dev/null || { echo "hyperfine not found: apt-get install -y hyperfine" >&2; exit 2; }
command -v script >/dev/null || { echo "script (util-linux) not found" >&2; exit 2; }
scale=${ENGINE_SCALE:-2000}
chain_sizes=${ENGINE_CHAIN:-500 1000 2000 4000}
chain_runs=${ENGINE_CHAIN_RUNS:-3}
out=${ENGINE_OUT:-$here/benches/results/engine.md}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The binaries, as "label path" lines: after first.
binaries=("after $repro")
[ -z "$before" ] || binaries+=("before $before")

# (a) a chain of 5 cmd stages, each with one dep and one output.
gen_small() {
  mkdir -p "$1/data"
  {
    echo "version: 1"
    echo "stages:"
    for i in 1 2 3 4 5; do
      echo "data-$i" > "$1/data/in$i.txt"
      echo "  s$i:"
      echo "    uses: cmd"
      echo "    run: [cp, data/in$i.txt, out/s$i.txt]"
      echo "    deps: [data/in$i.txt]"
      echo "    outs: [out/s$i.txt]"
      [ "$i" -gt 1 ] && echo "    needs: [s$((i - 1))]"
    done
  } > "$1/pipeline.yaml"
}

# (b) 200 stages in 20 chains of 10; each stage has 10 dep files of 4 KiB.
gen_big() {
  mkdir -p "$1/src"
  python3 - "$1" <<'PY'
import os, sys
root = sys.argv[1]
rng = __import__("random").Random(0)
lines = ["version: 1", "stages:"]
for i in range(200):
    deps = []
    for j in range(10):
        f = f"src/f{i}-{j}.txt"
        with open(os.path.join(root, f), "w") as fh:
            fh.write("".join(rng.choice("abcdefgh\n") for _ in range(4096)))
        deps.append(f)
    lines += [f"  s{i}:", "    uses: cmd", f"    run: [cp, src/f{i}-0.txt, out/s{i}.txt]",
              f"    deps: [{', '.join(deps)}]", f"    outs: [out/s{i}.txt]", f"    params: {{i: {i}}}"]
    if i % 10:
        lines.append(f"    needs: [s{i - 1}]")
open(os.path.join(root, "pipeline.yaml"), "w").write("\n".join(lines) + "\n")
PY
}

# (c) N stages, each needing the 10 before it and reading their outputs.
gen_scale() {
  mkdir -p "$1"
  python3 - "$2" > "$1/pipeline.yaml" <<'PY'
import sys
n = int(sys.argv[1]); print("version: 1\nstages:")
for i in range(n):
    r = range(max(0, i - 10), i)
    print(f"  s{i}: {{uses: cmd, run: [sh, -c, \"mkdir -p o; echo {i} > o/s{i}.txt\"], "
          f"deps: [{', '.join(f'o/s{j}.txt' for j in r)}], needs: [{', '.join(f's{j}' for j in r)}], outs: [o/s{i}.txt]}}")
PY
}

# (d) N stages in one chain, each running `true`.
gen_chain() {
  mkdir -p "$1"
  python3 - "$2" > "$1/pipeline.yaml" <<'PY'
import sys
n = int(sys.argv[1]); print("version: 1\nstages:")
for i in range(n):
    need = f", needs: [s{i - 1}]" if i else ""
    print(f"  s{i}: {{uses: cmd, run: [\"true\"]{need}}}")
PY
}

# Every stage of the project at $2 is up to date for binary $1, or exit 1.
check_up_to_date() {
  if (cd "$2" && "$1" status | grep -v ' up-to-date$'); then
    echo "not every stage is up to date after a run in $2 ($1)" >&2
    exit 1
  fi
}

rows=$work/rows.tsv
: > "$rows"

# One project per binary, so each binary's own lock and caches are measured.
for b in "${binaries[@]}"; do
  label=${b%% *} bin=${b#* }
  gen_small "$work/$label-small"
  gen_big "$work/$label-big"
  gen_scale "$work/$label-scale" "$scale"
  for p in "$work/$label-small" "$work/$label-big" "$work/$label-scale"; do
    (cd "$p" && "$bin" -q run -j 2 >/dev/null)
    check_up_to_date "$bin" "$p"
  done
done

# hyperfine's command strings, per binary (the project folder differs by label).
hf() { # hf LABEL BIN PROJECT ARGS...
  local label=$1 bin=$2 project=$3
  shift 3
  echo "$bin -f $work/$label-$project/pipeline.yaml $*"
}
run_set() { # run_set PREFIX PROJECT OPTS ARGS-LIST...
  local prefix=$1 project=$2 opts=$3
  shift 3
  local args=()
  for b in "${binaries[@]}"; do
    local label=${b%% *} bin=${b#* }
    for a in "$@"; do
      args+=(-n "$label|$prefix: repro $a" "$(hf "$label" "$bin" "$project" "$a")")
    done
  done
  # shellcheck disable=SC2086
  hyperfine -N $opts --export-json "$work/h.json" "${args[@]}" >/dev/null
  python3 - "$work/h.json" >> "$rows" <<'PY'
import json, sys, statistics
for r in json.load(open(sys.argv[1]))["results"]:
    label, name = r["command"].split("|", 1)
    print(f"{name}\t{label}\t{statistics.median(r['times'])}\t{len(r['times'])}")
PY
}
run_set "5 stages" small "--warmup 10 --min-runs 50" "-q run" "status"
run_set "200 stages/2000 deps" big "--warmup 5 --min-runs 20" "-q run" "status"
run_set "$scale stages/$((scale * 10 / 1000))k deps" scale "--warmup 2 --min-runs 10" "-q run" "status" "dag" "-q run --dry-run"

# (d) first runs: wall time of each, a fresh project every time.
first_run() { # first_run BIN N TERMINAL(0|1) -> seconds
  local d=$work/chain-$RANDOM
  gen_chain "$d" "$2"
  local start end
  start=$(date +%s.%N)
  if [ "$3" = 1 ]; then
    (cd "$d" && script -qec "$1 run" /dev/null >/dev/null)
  else
    (cd "$d" && "$1" -q run >/dev/null)
  fi
  end=$(date +%s.%N)
  check_up_to_date "$1" "$d"
  rm -rf "$d"
  python3 -c "print($end - $start)"
}
largest=$(echo "$chain_sizes" | tr ' ' '\n' | sort -n | tail -1)
for b in "${binaries[@]}"; do
  label=${b%% *} bin=${b#* }
  for n in $chain_sizes; do
    runs=$chain_runs
    [ "$n" = "$largest" ] && runs=1
    times=()
    for _ in $(seq "$runs"); do times+=("$(first_run "$bin" "$n" 0)"); done
    med=$(printf '%s\n' "${times[@]}" | sort -g | python3 -c "import sys,statistics; print(statistics.median(float(l) for l in sys.stdin))")
    printf 'first run, %s chained stages (-q)\t%s\t%s\t%s\n' "$n" "$label" "$med" "$runs" >> "$rows"
  done
  t=$(first_run "$bin" "$scale" 1)
  printf 'first run, %s chained stages, on a terminal\t%s\t%s\t1\n' "$scale" "$label" "$t" >> "$rows"
done

{
  if [ -n "$before" ]; then
    results_header "benches/engine.sh $repro $before ($("$repro" --version); before = ${BEFORE_COMMIT:-a second binary})"
  else
    results_header "benches/engine.sh $repro ($("$repro" --version))"
  fi
  echo "Load average before the runs: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  python3 - "$rows" "${BEFORE_COMMIT:-}" <<'PY'
import sys
rows, before_commit = sys.argv[1], sys.argv[2]
table, order = {}, []
for line in open(rows):
    name, label, secs, runs = line.rstrip("\n").split("\t")
    if name not in table:
        order.append(name)
        table[name] = {}
    table[name][label] = (float(secs), int(runs))
has_before = any("before" in v for v in table.values())
def show(v):
    if v is None:
        return "—"
    secs, _ = v
    return f"{secs * 1000:.1f} ms" if secs < 1 else f"{secs:.2f} s"
head = "| benchmark | after (median) |" + (f" before{' (' + before_commit + ')' if before_commit else ''} (median) | before / after |" if has_before else "") + " runs each |"
print(head)
print("|---|---:|" + ("---:|---:|" if has_before else "") + "---:|")
for name in order:
    v = table[name]
    a, b = v.get("after"), v.get("before")
    cells = [name, show(a)]
    if has_before:
        cells += [show(b), f"{b[0] / a[0]:.1f}×" if a and b else "—"]
    cells.append(str((a or b)[1]))
    print("| " + " | ".join(cells) + " |")
chain = [(int(n.split(", ")[1].split()[0]), table[n]["after"][0]) for n in order
         if n.startswith("first run,") and "(-q)" in n and "after" in table[n]]
if len(chain) > 1:
    print()
    print("First run, per stage (after): " + ", ".join(f"{n}: {t / n * 1000:.1f} ms" for n, t in chain) + ".")
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
