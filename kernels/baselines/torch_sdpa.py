"""PyTorch SDPA baselines of the sdpa_fp8 workload (torch_baselines.py runs them).

For every shape, input recipe and seed of the workload, the inputs come from
`repro exec --dump-inputs DIR --workload sdpa_fp8`: this never draws inputs itself, it reads
the cases repro wrote (each a folder in the layout of crates/pipeline/src/workload/case.rs, so
they are byte-identical to what the kernels see; tests/integration/baseline_inputs.rs checks the chain).
PyTorch runs on fp16 copies of the same *dequantized* K and V:

  torch-sdpa-default  F.scaled_dot_product_attention with PyTorch's own backend choice
  torch-sdpa-best     the fastest native backend on this GPU (flash, cuDNN, efficient),
                      chosen on the primary shape and named in `defines.backend`

Each is timed by baselines_common.time_fn (repro exec's methods and statistics) on each
shape's first recipe; the others are checked for correctness only. Correctness is against an
fp64 computation on the same dequantized inputs, with the workload's gates of its output (at
the workload's precision class, fp16-pv). Records carry the workload's dimensions as `dims`,
and each file the workload it ran.

Profiling: `torch-sdpa-best` runs the backend the baselines stage chose (`defines.backend` of
OUT/torch-sdpa-best.json), `torch-sdpa-default` PyTorch's own choice, on the shape's timed
case (first recipe, seed 0). When PyTorch's own choice on a shape is the backend
`torch-sdpa-best` runs and the stage asked for both, the default's call is the same kernel on
the same inputs: it is not run again (`same as torch-sdpa-best`), and the stage records the
best's profile for it, saying so.
"""

import json
import os
import sys

from baselines_common import (CallSkipped, SameCall, ShapeInputs, accuracy, first_line, load_cases,
                              output_gates, rounded, summarize, time_fn, write_file)

WORKLOAD = "sdpa_fp8"
BASELINES = ("torch-sdpa-default", "torch-sdpa-best")


def unavailable(t):
    """Why this torch cannot run these baselines, or None."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except ImportError:
        return f"torch {t.torch.__version__} has no torch.nn.attention.sdpa_kernel (2.3 or later)"
    return None


def native_backends():
    """The native SDPA backends by the label `defines.backend` records, in the order the
    choice of torch-sdpa-best tries them."""
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def sdpa_call(t, q, k, v, scale, backend):
    """One F.scaled_dot_product_attention call: PyTorch's choice (backend None) or `backend`."""
    from torch.nn.attention import sdpa_kernel
    F = t.F

    def call():
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, scale=scale)
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)

    return call


def reference_f64(torch, q, k, v, scale):
    s = torch.matmul(q.double(), k.double().transpose(-1, -2)) * scale
    return torch.matmul(torch.softmax(s, dim=-1), v.double())


def load_case(np, folder, e):
    """One index entry's case: its dims, Q (fp16) and the dequantized K, V (fp32) as numpy
    arrays [B, H, S, D], and the softmax scale the kernels are given."""
    d = os.path.join(folder, e["dir"])
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    args = {a["name"]: a for a in case["args"]}

    def load(name, file_key, dtype):
        a = args[name]
        return np.fromfile(os.path.join(d, a[file_key]), dtype=dtype).reshape(a["extents"])

    q = load("q", "file", "<f2")
    k = load("k", "values", "<f4")
    v = load("v", "values", "<f4")
    return case["dims"], (q, k, v), args["softmax_scale"]["value"]


def default_choice(t, q, k, v, scale):
    """The backend (its SDPBackend value) F.scaled_dot_product_attention picks for these
    inputs with PyTorch's own choice, or None when this torch cannot say."""
    try:
        return int(t.torch._fused_sdp_choice(q, k, v, scale=scale))
    except Exception:  # a private function: absent or changed in another torch
        return None


def chosen_backend(out_dir):
    """The backend the baselines stage chose for torch-sdpa-best, or (None, why)."""
    path = os.path.join(out_dir, "torch-sdpa-best.json")
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as err:
        return None, f"no chosen backend: cannot read {path} ({err}); run the baselines stage"
    backend = record.get("defines", {}).get("backend")
    if record.get("status") != "ok" or not backend:
        return None, f"{path} is {record.get('status')} ({record.get('reason', 'no backend')})"
    return backend, None


def profiler(t, args):
    """(prefetch(shape), prepare(baseline, shape)) for the profiling mode: a shape's inputs
    read on the host, and the call, or CallSkipped."""
    backends = native_backends()

    def read(folder, entry):
        _, qkv, scale = load_case(t.np, folder, entry)
        return qkv, scale

    def upload(host):
        qkv, scale = host
        return tuple(t.torch.from_numpy(a.copy()).cuda().half() for a in qkv), scale

    inputs = ShapeInputs(args.pipeline, WORKLOAD, read, upload)
    asked = {(baseline, shape) for baseline, shape, _ in args.profile}

    def prepare(baseline, shape):
        backend = None
        if baseline == "torch-sdpa-best":
            label, why = chosen_backend(args.out)
            if why:
                raise CallSkipped(why)
            backend = backends[label]
        (q, k, v), scale = inputs(shape)
        if baseline == "torch-sdpa-default" and ("torch-sdpa-best", shape) in asked:
            label, why = chosen_backend(args.out)
            if not why and default_choice(t, q, k, v, scale) == backends[label].value:
                raise SameCall("torch-sdpa-best", f"PyTorch's own choice on {shape} is the "
                               f"backend torch-sdpa-best runs ({label})")
        return sdpa_call(t, q, k, v, scale, backend)

    return inputs.prefetch, prepare


def run(t, args):
    """Measure both baselines on every case and write their files; 2 when repro cannot be
    found, else 0."""
    np, torch = t.np, t.torch
    to_gpu = lambda a: torch.from_numpy(a.copy()).cuda()

    def load(folder, e):
        dims, tensors, scale = load_case(np, folder, e)
        return dict(e, dims=dims, softmax_scale=scale), tuple(map(to_gpu, tensors))

    dumped = load_cases(args.pipeline, WORKLOAD, load)
    if dumped is None:
        return 2
    index, cases = dumped
    gates = output_gates(index, "o")
    device = torch.cuda.get_device_name(0)
    inputs = {(e["shape"], e["inputs"], e["seed"]): case for e, case in cases}

    def measure(e, tensors, backend):
        q, k32, v32 = tensors
        k, v = k32.half(), v32.half()
        scale = e["softmax_scale"]
        call = sdpa_call(t, q, k, v, scale, backend)
        out = call()
        torch.cuda.synchronize()
        ref = reference_f64(torch, q, k32, v32, scale)
        acc = accuracy(np, out.double().cpu().numpy(), ref.cpu().numpy(), gates,
                       absolute=e["absolute_gates"])
        record = {"shape": e["shape"], "dims": e["dims"],
                  "seed": e["seed"], "inputs": e["inputs"], "warmup": args.warmup,
                  "iters": args.iters, "status": "ok", "device_index": 0, "device_name": device}
        if e["timed"]:
            samples, mode = time_fn(torch, call, args.method, args.warmup, args.iters, args.l2,
                                    args.max_cv, args.max_time)
            record["timing_mode"] = mode
            record.update(summarize(samples))
        record.update(acc)
        return rounded(record)

    # Baseline B's backend: the fastest native one on the primary shape (first seed).
    candidates = list(native_backends().items())
    primary = [key for key in inputs if key[0] == index.get("primary") and inputs[key][0]["timed"]] \
        or [key for key in inputs if inputs[key][0]["timed"]]
    probe_key = sorted(primary)[0]
    timings, failures = {}, {}
    for label, backend in candidates:
        try:
            timings[label] = measure(inputs[probe_key][0], inputs[probe_key][1], backend)["p50_us"]
        except Exception as err:  # backend not available on this card or for these inputs
            failures[label] = first_line(err)
    best = min(timings, key=timings.get) if timings else None

    for name, backend, label in (("torch-sdpa-default", None, "default"),
                                 ("torch-sdpa-best", dict(candidates).get(best), best)):
        if name == "torch-sdpa-best" and best is None:
            write_file(args.out, name, "skipped", f"no native SDPA backend ran: {failures}",
                       workload=WORKLOAD)
            continue
        results = []
        for key in sorted(inputs):
            e, tensors = inputs[key]
            try:
                results.append(measure(e, tensors, backend))
            except Exception as err:
                why = first_line(err)
                # A backend without a kernel for this shape (cuDNN and S = 1): not measured.
                unsupported = "No available kernel" in why
                results.append({"shape": e["shape"], "dims": e["dims"],
                                "seed": e["seed"], "inputs": e["inputs"], "warmup": args.warmup,
                                "iters": args.iters, "status": "skipped" if unsupported else "failed",
                                "error": f"{label}: {why}" if unsupported else why})
        status = "failed" if any(r["status"] == "failed" for r in results) else "ok"
        defines = {"backend": label, "torch": torch.__version__}
        if name == "torch-sdpa-best":
            defines["candidates_p50_us"] = json.dumps({k: round(v, 4) for k, v in sorted(timings.items())})
        write_file(args.out, name, status, results=results, defines=defines, workload=WORKLOAD)
        print(f"{name}: backend {label}, {len(results)} results -> {args.out}/{name}.json", file=sys.stderr)
    return 0
