#!/usr/bin/env bash
# A kernel source edit head to head: each named variant as TREE builds it against the same
# variant built from FILE as it was at OLD_REV, by ncu (`gpu__time_duration`, the median of 5
# launches after 5 warm-up ones, clocks and caches as pipeline.yaml's ncu-profile leaves them)
# and by `repro compare` (the harness: interleaved isolated launches, a paired bootstrap CI),
# on each shape. Both builds are checked against the reference first.
#
#   bash benches/kernel_edit.sh REPRO_BINARY TREE OLD_REV FILE SHAPES VARIANT...
#
# TREE: a git clone holding OLD_REV; FILE: the kernel source, relative to TREE; SHAPES: comma
# list. Works in copies of TREE. Prints the results file; exits non-zero if any step fails.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
repro=$(realpath "$1"); tree=$(realpath "$2"); old=$3; file=$4; shapes=$5; shift 5
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "usage: kernel_edit.sh REPRO_BINARY TREE OLD_REV FILE SHAPES VARIANT..."; exit 2; }
header=$(cd "$tree" && results_header "bash benches/kernel_edit.sh REPRO_BINARY TREE $old $file $shapes ${variants[*]}")
work=$(mktemp -d /tmp/kernel-edit.XXXXXX)
for side in new old; do
  cp -a "$tree/." "$work/$side"
  if [ $side = old ]; then git -C "$work/old" show "$old:$file" > "$work/old/$file"; fi
  (cd "$work/$side" && "$repro" -q stage build > "$work/build-$side.log" 2>&1)
done
arch=$(cd "$work/new" && ls .repro/cubins | sed -n "s/^${variants[0]}\.\(sm_[0-9a-z]*\)\.cubin$/\1/p" | sort | tail -1)
ncu_time() { # side variant shape -> the median and range of 5 launches, µs
  local csv="$work/ncu-$1-$2-$3.csv"
  (cd "$work/$1" && ncu --csv --page raw --metrics gpu__time_duration.sum --log-file "$csv" \
    --profile-from-start off --target-processes application-only --clock-control none \
    --cache-control none "$repro" exec --variant "$2" --shape "$3" --warmup 5 \
    --profile-launches 5 > "$work/ncu-$1-$2-$3.out" 2>&1)
  python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if not l.startswith("==")))
col = rows[0].index("gpu__time_duration.sum")
t = [float(r[col].replace(",", "")) / 1000 for r in rows[2:]]
if len(t) != 5:
    sys.exit(f"{sys.argv[1]}: {len(t)} launches, not 5")
print(f"{statistics.median(t):.2f} ({min(t):.2f}–{max(t):.2f})")
PY
}
rows=()
for v in "${variants[@]}"; do
  # the old cubin's defines, as the build stage recorded the variant's (its entry point and
  # workload are the variant's: `repro compare` takes them from the other side)
  defines=$(python3 - "$work/new/artifacts/build/$v.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
print(" ".join(f"--define {k}={v}" for k, v in b["defines"].items()))
PY
)
  for shape in ${shapes//,/ }; do
    new_t=$(ncu_time new "$v" "$shape"); old_t=$(ncu_time old "$v" "$shape")
    # shellcheck disable=SC2086 # the defines are words
    (cd "$work/new" && "$repro" compare "$v" "$work/old/.repro/cubins/$v.$arch.cubin" \
      $defines --shape "$shape" > "$work/compare-$v-$shape.txt" 2>&1)
    p50() { sed -n "s/^  $1 .* p50 *\([0-9.]*\) µs.*/\1/p" "$work/compare-$v-$shape.txt"; }
    verdict=$(grep -E " ran .* than " "$work/compare-$v-$shape.txt" | sed "s|$work/old/.repro/cubins/$v.$arch.cubin|old|; s|$v ran|new ran|")
    rows+=("| \`$v\` | $shape | $new_t | $old_t | $(p50 A) | $(p50 B) | $verdict |")
  done
done
echo "$header"
echo
echo "Each row: \`$file\` as this commit has it (new) against the same variant built from its text at $old (old), $arch. ncu: \`gpu__time_duration\`, µs, the median of 5 profiled launches after 5 warm-up ones (min–max). Harness: \`repro compare VARIANT OLD.cubin --define … --shape S\` (A new, B old): each side's p50, µs, and its verdict."
echo
echo "| variant | shape | ncu new | ncu old | harness new | harness old | repro compare |"
echo "|---|---|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
