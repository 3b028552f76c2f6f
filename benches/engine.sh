#!/usr/bin/env bash
# Engine overhead on up-to-date pipelines of `cmd` stages, timed with hyperfine:
#   (a) 5 stages, all up to date;  (b) 200 stages with 2,000 dep files (10 per stage).
# Targets: (a) <= 10 ms median for `repro run` and `repro status`; (b) < 100 ms.
# Usage: benches/engine.sh [path/to/repro]   (default: target/release/repro, built if missing)
# Needs hyperfine (`apt-get install -y hyperfine`). Writes benches/results/engine.md (the
# header names the machine and its load average: run it on a quiet machine).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/benches/results_header.sh"
repro=${1:-$here/target/release/repro}
if [ ! -x "$repro" ]; then
  (cd "$here" && cargo build --release --quiet)
fi
repro=$(cd "$(dirname "$repro")" && pwd)/$(basename "$repro")
command -v hyperfine >/dev/null || { echo "hyperfine not found: apt-get install -y hyperfine" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# (a) a chain of 5 cmd stages, each with one dep and one output.
small=$work/small
mkdir -p "$small/data"
{
  echo "version: 1"
  echo "stages:"
  for i in 1 2 3 4 5; do
    echo "data-$i" > "$small/data/in$i.txt"
    echo "  s$i:"
    echo "    uses: cmd"
    echo "    run: [cp, data/in$i.txt, out/s$i.txt]"
    echo "    deps: [data/in$i.txt]"
    echo "    outs: [out/s$i.txt]"
    [ "$i" -gt 1 ] && echo "    needs: [s$((i - 1))]"
  done
} > "$small/pipeline.yaml"

# (b) 200 stages in 20 chains of 10; each stage has 10 dep files of 4 KiB.
big=$work/big
mkdir -p "$big/src"
{
  echo "version: 1"
  echo "stages:"
  for i in $(seq 0 199); do
    deps=""
    for j in $(seq 0 9); do
      f=src/f$i-$j.txt
      head -c 4096 /dev/urandom | base64 > "$big/$f"
      deps="$deps${deps:+, }$f"
    done
    echo "  s$i:"
    echo "    uses: cmd"
    echo "    run: [cp, src/f$i-0.txt, out/s$i.txt]"
    echo "    deps: [$deps]"
    echo "    outs: [out/s$i.txt]"
    echo "    params: {i: $i}"
    [ $((i % 10)) -ne 0 ] && echo "    needs: [s$((i - 1))]"
  done
} > "$big/pipeline.yaml"

for p in "$small" "$big"; do
  (cd "$p" && "$repro" -q run -j 2 >/dev/null)
  if (cd "$p" && "$repro" status | grep -v ' up-to-date$'); then
    echo "not every stage is up to date after a run in $p" >&2
    exit 1
  fi
done

echo "repro: $repro ($("$repro" --version))"
hyperfine -N --warmup 10 --min-runs 50 \
  --export-json "$work/results.json" \
  -n "5 stages: repro run" "$repro -f $small/pipeline.yaml -q run" \
  -n "5 stages: repro status" "$repro -f $small/pipeline.yaml status" \
  -n "200 stages/2000 deps: repro run" "$repro -f $big/pipeline.yaml -q run" \
  -n "200 stages/2000 deps: repro status" "$repro -f $big/pipeline.yaml status"
out=$here/benches/results/engine.md
{
  results_header "benches/engine.sh ($("$repro" --version), hyperfine -N --warmup 10 --min-runs 50)"
  python3 - "$work/results.json" <<'PY'
import json, sys
print("| benchmark | median | mean ± σ | min | max | runs |")
print("|---|---:|---:|---:|---:|---:|")
for r in json.load(open(sys.argv[1]))["results"]:
    ms = lambda x: f"{x * 1000:.1f} ms"
    print(f"| {r['command']} | {ms(r['median'])} | {ms(r['mean'])} ± {ms(r['stddev'])} | {ms(r['min'])} | {ms(r['max'])} | {len(r['times'])} |")
PY
  echo
  echo "Load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
