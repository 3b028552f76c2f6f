#!/usr/bin/env python3
"""Where the PyTorch baselines' stream time goes, per call, against their kernel time.

For each shape (B, H, S, D = 2, 8, 512, 64 'mission' and 1, 8, 2048, 64 'long'; fp16 Q, K, V
from N(0, 1)) and each native SDPA backend that runs (cuDNN, flash, efficient), one call of
F.scaled_dot_product_attention is measured four ways:

  isolated   the baselines' isolated method (kernels/baselines/baselines_common.py: what the bench
             stage records), with the call as torch_sdpa.py makes it (inside `sdpa_kernel([backend])`)
  bare       the same method with the backend chosen once, outside the timed call
  graph      a CUDA-graph replay of 100 calls, per call
  kernels    the CUDA kernels one call launches, from the PyTorch profiler (CUPTI): their
             names, how many, the sum of their durations, and the span from the first
             kernel's start to the last one's end

`--ncu-target SHAPE BACKEND` instead runs 30 bare calls for Nsight Compute to profile (the
shell wrapper benches/baseline_overhead.sh does that and adds ncu's gpu__time_duration).
Prints one JSON object per (shape, backend) on stdout.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "baselines"))
import baselines_common  # noqa: E402

SHAPES = {"mission": (2, 8, 512, 64), "long": (1, 8, 2048, 64)}


def inputs(torch, shape):
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn(*SHAPES[shape], device="cuda", dtype=torch.float16, generator=g) for _ in range(3)]


def backends(SDPBackend):
    return {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def kernels_of_one_call(torch, fn, calls=20):
    """The kernels `calls` calls of fn launch (PyTorch's profiler, i.e. CUPTI), per call."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
    kernels = sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                      if e.device_type == DeviceType.CUDA and not e.name.startswith("Memcpy")),
                     key=lambda k: k[0])
    per_call = len(kernels) // calls
    sums, spans = [], []
    for i in range(calls):
        chunk = kernels[i * per_call:(i + 1) * per_call]
        if chunk:
            sums.append(sum(e - s for s, e, _ in chunk))
            spans.append(chunk[-1][1] - chunk[0][0])
    med = lambda x: round(sorted(x)[len(x) // 2], 3) if x else None
    return {"kernels_per_call": per_call, "kernels_total": len(kernels),
            "kernel_names": sorted({k[2][:100] for k in kernels}),
            "kernel_sum_us": med(sums), "kernel_span_us": med(spans)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ncu-target", nargs=2, metavar=("SHAPE", "BACKEND"))
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if args.ncu_target:
        shape, name = args.ncu_target
        q, k, v = inputs(torch, shape)
        with sdpa_kernel([backends(SDPBackend)[name]]):
            for _ in range(30):
                F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()
        return 0

    for shape in SHAPES:
        q, k, v = inputs(torch, shape)
        for name, backend in backends(SDPBackend).items():
            def in_context():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v)
            try:
                in_context()
                torch.cuda.synchronize()
            except Exception as err:  # this backend has no kernel for these inputs here
                print(json.dumps({"shape": shape, "backend": name, "error": str(err).splitlines()[0]}))
                continue
            row = {"shape": shape, "backend": name}
            for label, fn in (("isolated", in_context), ("bare", None)):
                if fn is None:
                    ctx = sdpa_kernel([backend])
                    ctx.__enter__()
                    fn = lambda: F.scaled_dot_product_attention(q, k, v)
                samples, mode = baselines_common.time_fn(torch, fn, "isolated", 20, 100, "warm", 0.01, 5.0)
                row[f"{label}_p50_us"] = round(baselines_common.summarize(samples)["p50_us"], 3)
                row[f"{label}_host_late_retakes"] = mode["host_late_retakes"]
                row["timer_overhead_us"] = mode["timer_overhead_us"]
                if label == "bare":
                    samples, mode = baselines_common.time_fn(torch, fn, "graph", 20, 100, "warm", 0.01, 5.0)
                    row["graph_p50_us"] = round(baselines_common.summarize(samples)["p50_us"], 3)
                    row["graph_method"] = mode["method"]
                    row.update(kernels_of_one_call(torch, fn))
                    ctx.__exit__(None, None, None)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
