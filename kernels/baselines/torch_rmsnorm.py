"""PyTorch RMSNorm baseline of the rmsnorm workload (torch_baselines.py runs it).

torch-rmsnorm: torch.nn.functional.rms_norm(x, (hidden,), weight, eps) on the fp16 inputs
repro draws for every shape, recipe and seed of the workload. The inputs come from
`repro exec --dump-inputs FOLDER --workload rmsnorm` (FOLDER/index.json lists the cases, each
a folder in the layout of crates/pipeline/src/workload/case.rs), so they are byte-identical to
what the kernels see. Timing, statistics and the accuracy metrics are baselines_common's (the
same definitions as repro exec and its correctness check); only each shape's first recipe is
timed. Results carry the workload's dimensions as `dims`. Profiling runs the shape's timed
case (first recipe, seed 0).
"""

import json
import os
import sys

from baselines_common import (ShapeInputs, accuracy, first_line, load_cases, output_gates,
                              rounded, summarize, time_fn, write_file)

WORKLOAD = "rmsnorm"
NAME = "torch-rmsnorm"
BASELINES = (NAME,)


def unavailable(t):
    """Why this torch cannot run this baseline, or None."""
    if not hasattr(t.F, "rms_norm"):
        return f"torch {t.torch.__version__} has no torch.nn.functional.rms_norm (2.4 or later)"
    return None


def case_inputs(np, case_dir):
    """x [rows, hidden], weight [hidden] (float16 numpy arrays) and eps of one case folder."""
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    args = {a["name"]: a for a in case["args"]}

    def load(name):
        a = args[name]
        return np.fromfile(os.path.join(case_dir, a["file"]), dtype="<f2").reshape(a["extents"])

    return case, load("x"), load("weight"), args["eps"]["value"]


def profiler(t, args):
    """(prefetch(shape), prepare(baseline, shape)) for the profiling mode: a shape's inputs
    read on the host, and the call."""
    torch, F = t.torch, t.F

    def read(folder, entry):
        _, x, w, eps = case_inputs(t.np, os.path.join(folder, entry["dir"]))
        return x, w, eps

    def upload(host):
        x, w, eps = host
        return torch.from_numpy(x.copy()).cuda(), torch.from_numpy(w.copy()).cuda(), eps

    inputs = ShapeInputs(args.pipeline, WORKLOAD, read, upload)

    def prepare(baseline, shape):
        x, w, eps = inputs(shape)
        return lambda: F.rms_norm(x, (x.shape[-1],), w, eps)

    return inputs.prefetch, prepare


def run(t, args):
    """Measure the baseline on every case and write its file; 2 when repro cannot be found,
    else 0."""
    np, torch, F = t.np, t.torch, t.F
    dumped = load_cases(args.pipeline, WORKLOAD,
                        lambda folder, e: case_inputs(np, os.path.join(folder, e["dir"])))
    if dumped is None:
        return 2
    index, cases = dumped
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
            record["error"] = first_line(err)
        results.append(rounded(record))
    status = "failed" if any(r["status"] == "failed" for r in results) else "ok"
    write_file(args.out, NAME, status, results=results, defines={"torch": torch.__version__},
               workload=WORKLOAD)
    print(f"{NAME}: {len(results)} results -> {args.out}/{NAME}.json", file=sys.stderr)
    return 0
