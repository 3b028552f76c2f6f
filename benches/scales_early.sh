#!/usr/bin/env bash
# The per-head scales read at the mma kernel's start (issue 42, the adopted proposal 04),
# head to head: each named variant of `kernels/sdpa_fp8_mma.cu` as TREE has it against the
# same variant built from the kernel of OLD_REV (before the adoption), by `repro compare`
# (interleaved, isolated launches, a paired bootstrap CI), on mission and ragged.
#
#   bash benches/scales_early.sh REPRO_BINARY TREE [OLD_REV]
#
# TREE: a git clone holding OLD_REV (default 4d799a0). Works in a copy. Prints the results
# file (header, then each comparison's last lines); exits non-zero if any step fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
repro=$(realpath "$1"); tree=$(realpath "$2"); old=${3:-4d799a0}
header=$(cd "$tree" && results_header "bash benches/scales_early.sh REPRO_BINARY TREE $old")
work=$(mktemp -d /tmp/scales-early.XXXXXX)
cp -a "$tree/." "$work/proj"
cd "$work/proj"
declare -A defines=(
  [mma-wg-ring-gs]="TILE_M=64 TILE_N=32 KV_SPLIT=2 NUM_STAGES=2 DEQUANT_INT=0 USE_WGMMA=1 KV_GROUP_SYNC=1"
  [mma-m64-kv2]="TILE_M=64 TILE_N=32 KV_SPLIT=2 NUM_STAGES=2 DEQUANT_INT=0"
)
"$repro" -q stage build > "$work/build-new.log" 2>&1
for v in "${!defines[@]}"; do cp ".repro/cubins/$v.sm_90a.cubin" "$work/$v.new.cubin"; done
git show "$old:kernels/sdpa_fp8_mma.cu" > kernels/sdpa_fp8_mma.cu
"$repro" -q stage build > "$work/build-old.log" 2>&1
for v in "${!defines[@]}"; do cp ".repro/cubins/$v.sm_90a.cubin" "$work/$v.old.cubin"; done
echo "$header"
echo
echo "Each line: \`repro compare NEW.cubin OLD.cubin --entry sdpa_fp8_fwd --workload sdpa_fp8 --define … --shape S\`, NEW the variant's cubin with the scales read at the start, OLD the same variant built from the kernel of $old."
for v in $(printf '%s\n' "${!defines[@]}" | sort); do
  args=()
  for d in ${defines[$v]}; do args+=(--define "$d"); done
  for shape in mission ragged; do
    echo
    echo "$v, $shape:"
    echo
    echo '```text'
    "$repro" compare "$work/$v.new.cubin" "$work/$v.old.cubin" --entry sdpa_fp8_fwd \
      --workload sdpa_fp8 "${args[@]}" --shape "$shape" 2>&1 | tail -4 | sed '/^$/d'
    echo '```'
  done
done
