#!/usr/bin/env python3
"""PyTorch RMSNorm baseline for the rmsnorm workload, in repro's BenchFile schema.

torch-rmsnorm: torch.nn.functional.rms_norm(x, (hidden,), weight, eps) on the fp16 inputs
repro draws for every shape, recipe and seed of the workload. The inputs come from
`repro exec --dump-inputs FOLDER --workload rmsnorm` (FOLDER/index.json lists the cases, each
a folder in the layout of src/workload/case.rs), so they are byte-identical to what the
kernels see. Timing, statistics and the accuracy metrics are torch_sdpa.py's (the same
definitions as repro exec and src/gpu/check.rs); only each shape's first recipe is timed.
Results carry the workload's dimensions as `dims`.

No python3/torch/CUDA: the file is written with status `skipped` and the reason; exit 0.

Profiling mode (the profile stage's `baselines:`): `--profile torch-rmsnorm SHAPE RANGE`,
repeated, runs each shape's timed case (first recipe, seed 0), warm-up calls, then exactly one
call inside the NVTX range RANGE, and writes no file (torch_sdpa.py's `profile_calls`);
`repro-profile: skipped: <reason>` when it cannot.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa import (CallSkipped, ShapeInputs, accuracy, dump_cases, output_gates,  # noqa: E402
                        profile_calls, profile_skip, rounded, summarize, time_fn, write_file)

NAME = "torch-rmsnorm"
WORKLOAD = "rmsnorm"


def case_inputs(np, case_dir):
    """x [rows, hidden], weight [hidden] (float16 numpy arrays) and eps of one case folder."""
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    args = {a["name"]: a for a in case["args"]}

    def load(name):
        a = args[name]
        return np.fromfile(os.path.join(case_dir, a["file"]), dtype="<f2").reshape(a["extents"])

    return case, load("x"), load("weight"), args["eps"]["value"]


def import_torch():
    """(numpy, torch, torch.nn.functional) and None, or (None, None, None) and why they
    cannot run this baseline."""
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as err:
        return (None, None, None), f"PyTorch is not installed ({err}); install torch with CUDA to get baselines"
    if not torch.cuda.is_available():
        return (None, None, None), "PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)"
    if not hasattr(F, "rms_norm"):
        return (None, None, None), f"torch {torch.__version__} has no torch.nn.functional.rms_norm (2.4 or later)"
    return (np, torch, F), None


def profile_main(args):
    """Profiling mode: the calls `args.profile` lists."""
    (np, torch, F), why = import_torch()
    if why:
        return profile_skip(why)

    def load(folder, entry):
        _, x, w, eps = case_inputs(np, os.path.join(folder, entry["dir"]))
        return torch.from_numpy(x.copy()).cuda(), torch.from_numpy(w.copy()).cuda(), eps

    inputs = ShapeInputs(args.pipeline, WORKLOAD, load)

    def prepare(baseline, shape):
        if baseline != NAME:
            raise CallSkipped(f"`{baseline}` is not this script's baseline ({NAME})")
        x, w, eps = inputs(shape)
        return lambda: F.rms_norm(x, (x.shape[-1],), w, eps)

    return profile_calls(torch, args.profile, prepare, args.warmup)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="artifacts/bench/baselines")
    ap.add_argument("--pipeline", "-f", default="pipeline.yaml")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--l2", choices=("warm", "flush"), default="warm")
    ap.add_argument("--method", choices=("isolated", "graph"), default="isolated")
    ap.add_argument("--max-cv", type=float, default=0.01)
    ap.add_argument("--max-time", type=float, default=5.0)
    ap.add_argument("--profile", nargs=3, action="append", metavar=("BASELINE", "SHAPE", "RANGE"),
                    help="profiling mode (repeatable): one call of BASELINE on SHAPE inside the NVTX range RANGE")
    args = ap.parse_args()
    if args.profile:
        return profile_main(args)

    def skip(reason):
        write_file(args.out, NAME, "skipped", reason, workload=WORKLOAD)
        print(f"baseline skipped: {reason}", file=sys.stderr)
        return 0

    (np, torch, F), why = import_torch()
    if why:
        return skip(why)

    folder = tempfile.mkdtemp(prefix="repro-rmsnorm-inputs-")
    try:
        index = dump_cases(args.pipeline, WORKLOAD, folder)
        if index is None:
            return 2
        cases = [(e, case_inputs(np, os.path.join(folder, e["dir"]))) for e in index["entries"]]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    gates = output_gates(index, "y")
    device = torch.cuda.get_device_name(0)

    results = []
    for e, (case, x_np, w_np, eps) in sorted(cases, key=lambda c: (c[0]["shape"], c[0]["inputs"], c[0]["seed"])):
        record = {"shape": e["shape"], "dims": case["dims"], "seed": e["seed"], "inputs": e["inputs"],
                  "warmup": args.warmup, "iters": args.iters, "device_index": 0, "device_name": device}
        try:
            x = torch.from_numpy(x_np.copy()).cuda()
            w = torch.from_numpy(w_np.copy()).cuda()
            hidden = x.shape[-1]

            def call():
                return F.rms_norm(x, (hidden,), w, eps)

            out = call()
            torch.cuda.synchronize()
            xd = x.double()
            ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()
            rows = x.shape[0]
            acc = accuracy(np, out.double().cpu().numpy().reshape(1, 1, rows, hidden),
                           ref.cpu().numpy().reshape(1, 1, rows, hidden), gates,
                           absolute=e.get("absolute_gates", True))
            record["status"] = "ok"
            if e["timed"]:
                samples, mode = time_fn(torch, call, args.method, args.warmup, args.iters, args.l2,
                                        args.max_cv, args.max_time)
                record["timing_mode"] = mode
                record.update(summarize(samples))
            record.update(acc)
        except Exception as err:  # one case failing is recorded, the others still run
            record["status"] = "failed"
            record["error"] = str(err).splitlines()[0] if str(err) else type(err).__name__
        results.append(rounded(record))
    status = "failed" if any(r["status"] == "failed" for r in results) else "ok"
    write_file(args.out, NAME, status, results=results, defines={"torch": torch.__version__},
               workload=WORKLOAD)
    print(f"{NAME}: {len(results)} results -> {args.out}/{NAME}.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
