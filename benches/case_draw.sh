#!/usr/bin/env bash
# How long drawing one case's inputs takes (issue 41: every first use of a case in the bench,
# tune and profile stages draws it), and that two builds draw the same bytes.
#
#   bash benches/case_draw.sh PROJECT RUNS REPRO_BINARY...
#
# For each workload and shape below, each binary runs
#   repro exec -f PROJECT/pipeline.yaml --workload W --shape S --inputs gaussian --seed 1
#       --dump-inputs DIR
# RUNS times (needs no GPU), and the table gives the median wall time and the range. The
# dumped files of every binary must be byte-identical to the first binary's; the script
# stops and exits non-zero if they are not, or if a run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
proj=$(realpath "$1"); runs=$2; shift 2
bins=(); for b in "$@"; do bins+=("$(realpath "$b")"); done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cases=("sdpa_fp8 mission" "sdpa_fp8 long" "rmsnorm mission")
(cd "$here/.." && results_header "bash benches/case_draw.sh PROJECT $runs REPRO_BINARY...")
echo "Wall time of one \`repro exec --dump-inputs\` (draw one case, write its files), median of $runs runs (min–max), per binary; the files are byte-identical across binaries."
echo
printf '| workload | shape |'; for b in "${bins[@]}"; do printf ' %s: ms |' "$(basename "$(dirname "$b")")/$(basename "$b")"; done; echo
printf '|---|---|'; for _ in "${bins[@]}"; do printf -- '---:|'; done; echo
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
for c in "${cases[@]}"; do
  read -r workload shape <<< "$c"
  printf '| %s | %s |' "$workload" "$shape"
  for i in "${!bins[@]}"; do
    times=()
    for _ in $(seq "$runs"); do
      rm -rf "$work/$i"
      t0=$(date +%s%N)
      "${bins[$i]}" exec -q -f "$proj/pipeline.yaml" --workload "$workload" --shape "$shape" \
        --inputs gaussian --seed 1 --dump-inputs "$work/$i" > /dev/null 2> "$work/stderr" ||
        { cat "$work/stderr" >&2; exit 1; }
      times+=("$(ms "$t0" "$(date +%s%N)")")
    done
    if [ "$i" -gt 0 ] && ! diff -r "$work/0" "$work/$i" > /dev/null; then
      echo >&2 "case_draw: ${bins[$i]} drew other bytes than ${bins[0]} for $workload $shape"
      exit 1
    fi
    printf '%s\n' "${times[@]}" | sort -g | awk '{v[NR] = $1} END {
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf " %.1f (%.1f–%.1f) |", m, v[1], v[NR]}'
  done
  echo
done
