#!/usr/bin/env python3
"""The PyTorch baselines of every workload, in one process that imports torch once, in
repro's BenchFile schema:

  sdpa_fp8  torch-sdpa-default, torch-sdpa-best  (torch_sdpa.py)
  rmsnorm   torch-rmsnorm                        (torch_rmsnorm.py)

`--out OUT` gets OUT/<baseline>.json for each; `--workload NAME` (repeatable) runs only those
workloads' baselines (default: all of them; a pipeline that declares only some workloads
names them). Each workload reads its cases from `repro exec --dump-inputs` (it never draws
inputs itself), checks every case against an fp64 computation on the same inputs with the
workload's gates, and times each shape's first recipe (as the bench stage does).

Timing follows repro exec (`--method`, default isolated): warm-up calls, then
  isolated  one call per sample between two events, queued behind a GPU sleep that outlasts
            the host's enqueueing (checked per sample: once the host has queued the end
            event, the start event must not have completed yet, else the sample is dropped
            and retaken behind a sleep twice as long; `host_late_retakes` counts them); the
            median of empty timed regions (the events' own cost) is subtracted and recorded
            as `timer_overhead_us`
  graph     a batch of calls sized so a sample lasts >= 100 us, captured into a CUDA graph
            (falling back to batched calls between events), samples = elapsed / batch
and the same statistics (type-7 percentiles, sample std, the order-statistic 95% CI of the
median); baselines_common.py holds them, and the accuracy metrics of repro's check.

No numpy, torch or CUDA GPU: every baseline's file is written with status `skipped` and the
reason; exit 0. A workload this torch cannot run (too old for the API it calls) gets the
same for its baselines, and the others still run.

Profiling mode (the profile stage's `baselines:`, under `ncu --nvtx --nvtx-include RANGE/ ...`):
`--profile BASELINE SHAPE RANGE`, repeated, runs each call in the order given, each by the
workload that owns BASELINE: that baseline on the shape's timed case (first recipe, seed 0),
warm-up calls, then exactly one call inside the NVTX push/pop range RANGE; the same call
listed several times in a row is warmed up once, and its profiled calls follow one another.
It writes no file. Under the profile stage's gate (REPRO_PROFILE_GATE) it imports torch,
reads every call's inputs and creates its CUDA context first, and puts nothing on the GPU
until the gate opens.
One process thus serves every baseline the profile stage lists on this command. When it can
run no call it prints `repro-profile: skipped: <reason>` and exits 0; a call it cannot run
(an unknown baseline, no kernel of the backend for the shape, a workload this torch cannot
run) prints `repro-profile: call RANGE skipped: <reason>` and the others still run; a call
that would repeat another baseline's on the same shape, which the stage also asked for,
prints `repro-profile: call RANGE same as BASELINE: <reason>` and does not run.
"""

import argparse
import os
import sys
import traceback

sys.dont_write_bytecode = True  # no __pycache__ beside these scripts (import_torch turns it back)

import torch_rmsnorm  # noqa: E402
import torch_sdpa  # noqa: E402
from baselines_common import (CallSkipped, honour_gate, import_torch, no_gpu,  # noqa: E402
                              profile_calls, profile_skip, start_cuda, wait_for_gate,
                              write_file)

WORKLOADS = {m.WORKLOAD: m for m in (torch_sdpa, torch_rmsnorm)}
OWNERS = {name: m for m in WORKLOADS.values() for name in m.BASELINES}


def skip(out_dir, workload, reason):
    for name in workload.BASELINES:
        write_file(out_dir, name, "skipped", reason, workload=workload.WORKLOAD)
    print(f"{', '.join(workload.BASELINES)} skipped: {reason}", file=sys.stderr)


def measure(args):
    """Every selected workload's baselines, each file written: 2 when repro cannot be found,
    1 when a workload failed (the others still ran), else 0."""
    workloads = [WORKLOADS[w] for w in dict.fromkeys(args.workload or WORKLOADS)]
    t, why = import_torch()
    why = why or no_gpu(t)
    if why:
        for w in workloads:
            skip(args.out, w, why)
        return 0
    code = 0
    for w in workloads:
        why = w.unavailable(t)
        if why:
            skip(args.out, w, why)
            continue
        try:
            rc = w.run(t, args)
        except Exception:  # one workload failing still lets the others measure
            traceback.print_exc()
            print(f"error: the {w.WORKLOAD} baselines failed", file=sys.stderr)
            code = 1
            continue
        if rc:
            return rc
    return code


def profile(args):
    """Profiling mode: the calls `args.profile` lists, each by its baseline's workload. Torch
    is imported, every call's inputs are read on the host and the CUDA context is created
    before the profile stage's gate opens; the first copy or launch comes after."""
    honour_gate()
    t, why = import_torch()
    if why:
        return profile_skip(why)
    # workload -> (prefetch(shape), prepare(baseline, shape)), or why it cannot run
    preparers = {}
    for baseline, shape in dict.fromkeys((b, s) for b, s, _ in args.profile):
        w = OWNERS.get(baseline)
        if w is None:
            continue
        if w.WORKLOAD not in preparers:
            preparers[w.WORKLOAD] = w.unavailable(t) or w.profiler(t, args)
        if not isinstance(preparers[w.WORKLOAD], str):
            preparers[w.WORKLOAD][0](shape)
    start_cuda(t)
    wait_for_gate()
    why = no_gpu(t)
    if why:
        return profile_skip(why)

    def prepare(baseline, shape):
        w = OWNERS.get(baseline)
        if w is None:
            raise CallSkipped(f"`{baseline}` is not a baseline of this script ({', '.join(OWNERS)})")
        p = preparers[w.WORKLOAD]
        if isinstance(p, str):
            raise CallSkipped(p)
        return p[1](baseline, shape)

    return profile_calls(t.torch, args.profile, prepare, args.warmup)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="artifacts/bench/baselines")
    ap.add_argument("--pipeline", "-f", default="pipeline.yaml")
    ap.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                    help="run only this workload's baselines (repeatable; default: all)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--l2", choices=("warm", "flush"), default="warm")
    ap.add_argument("--method", choices=("isolated", "graph"), default="isolated",
                    help="as repro exec --method; the bench stage compares only like with like")
    ap.add_argument("--max-cv", type=float, default=0.01)
    ap.add_argument("--max-time", type=float, default=5.0)
    ap.add_argument("--profile", nargs=3, action="append", metavar=("BASELINE", "SHAPE", "RANGE"),
                    help="profiling mode (repeatable): one call of BASELINE on SHAPE inside the NVTX range RANGE")
    args = ap.parse_args()
    if args.profile:
        return profile(args)
    return measure(args)


if __name__ == "__main__":
    code = main() or 0
    # Every file this script writes is closed by now. Ending here skips torch's own teardown
    # (its allocator, library handles, the CUDA context, the module graph), about 0.8 s on an
    # H200 after the last call, with or without ncu, which the stages would wait for; the
    # driver releases the context when the process ends.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
