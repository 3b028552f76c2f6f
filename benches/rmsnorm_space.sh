#!/usr/bin/env bash
# Compile every configuration of the RMSNorm tune space (the `evo-tune-rmsnorm` stage of
# pipeline.yaml) for sm_89 and sm_90a and check each against the PTXAS gates of
# pipeline.yaml (at most 128 registers, no spills): the space's constraints must keep every
# point buildable. Writes benches/results/rmsnorm_space.md; exits non-zero when any point fails.
# Needs nvcc (`repro toolchain` finds it) and python3 with PyYAML; no GPU.
#   usage: benches/rmsnorm_space.sh [ARCH...]        (default: sm_89 sm_90a)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/results_header.sh
NVCC=$(cargo run -q --locked -- toolchain 2>/dev/null | sed -n 's/^in use: *nvcc [^ ]* from .*: //p')
[ -x "$NVCC" ] || { echo "error: no nvcc (run \`repro toolchain install\`)" >&2; exit 1; }
ARCHS=("$@")
[ ${#ARCHS[@]} -gt 0 ] || ARCHS=(sm_89 sm_90a)
OUT=benches/results/rmsnorm_space.md
status=0
{
  echo "# RMSNorm tune space: registers and spills of every configuration"
  echo
  results_header "benches/rmsnorm_space.sh ${ARCHS[*]}"
  NVCC="$NVCC" python3 - "${ARCHS[@]}" <<'PY'
import concurrent.futures as cf, itertools, os, re, subprocess, sys, tempfile
import yaml
archs = sys.argv[1:]
spec = yaml.safe_load(open("pipeline.yaml"))["stages"]["evo-tune-rmsnorm"]
names = list(spec["space"])
def holds(expr, c):
    py = expr.replace("&&", " and ").replace("||", " or ")
    return bool(eval(py, {}, dict(c)))
configs = [dict(zip(names, vals)) for vals in itertools.product(*spec["space"].values())]
configs = [c for c in configs if all(holds(e, c) for e in spec.get("constraints", []))]
scratch = tempfile.TemporaryDirectory()
tmp = scratch.name
def build(job):
    arch, i, c = job
    out = os.path.join(tmp, f"{arch}-{i}.cubin")
    cmd = [os.environ["NVCC"], "-cubin", "-O3", f"-arch={arch}", "-Xptxas", "-v", "-o", out]
    cmd += [f"-D{k}={v}" for k, v in c.items()] + ["kernels/rmsnorm/rmsnorm.cu"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return arch, c, None, None, r.stderr.strip().splitlines()[-1]
    regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
    spill = sum(int(n) for n in re.findall(r"(\d+) bytes spill", r.stderr))
    return arch, c, regs, spill, None
jobs = [(a, i, c) for a in archs for i, c in enumerate(configs)]
with cf.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    results = list(pool.map(build, jobs))
scratch.cleanup()
failed = [r for r in results if r[4] or r[2] > 128 or r[3] > 0]
print(f"{len(configs)} configurations x {len(archs)} architectures: {len(failed)} fail the gates.\n")
print("| arch | configurations | registers min..max | the most registers at | spill bytes |")
print("|---|---|---|---|---|")
for a in archs:
    rows = [r for r in results if r[0] == a and r[2] is not None]
    worst = max(rows, key=lambda r: r[2])
    at = ", ".join(f"{k}={v}" for k, v in worst[1].items())
    spills = sum(r[3] for r in rows)
    print(f"| {a} | {len(rows)} | {min(r[2] for r in rows)}..{worst[2]} | {at} | {spills} |")
for a, c, regs, spill, err in failed:
    print(f"\nFAIL {a} {c}: " + (err or f"{regs} registers, {spill} spill bytes"))
sys.exit(1 if failed else 0)
PY
} > "$OUT.tmp" || status=$?
mv "$OUT.tmp" "$OUT"
cat "$OUT"
exit "$status"
