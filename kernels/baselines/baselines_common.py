"""What the PyTorch baselines share (kernels/baselines/torch_baselines.py runs them): the
BenchFile they write, the inputs `repro exec --dump-inputs` dumps, the profiling mode's
calls, the timing methods and statistics of repro exec, and the accuracy metrics of repro's
correctness check. Nothing here imports torch: the entry does, once, and passes it in.
"""

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

TARGET_SAMPLE_US = 100.0
MAX_BATCH = 1000
NOT_INSTALLED = "PyTorch is not installed ({}); install torch with CUDA to get baselines"
NO_GPU = "PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)"


class Torch:
    """numpy, torch and torch.nn.functional, imported once by the entry."""

    def __init__(self, np, torch, F):
        self.np, self.torch, self.F = np, torch, F


def import_torch():
    """(Torch, None), or (None, why the baselines cannot run here): no numpy or torch. Starts
    no CUDA (see `no_gpu`)."""
    # The entry imported this project's modules without writing bytecode beside them; numpy's
    # and torch's caches are written as any import of them writes them: where a wheel was
    # installed without them, every process would otherwise compile torch's sources again
    # (a third of a second of a 4.5 s import on an H200 machine,
    # benches/results/torch_import_h200.md).
    sys.dont_write_bytecode = False
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as err:
        return None, NOT_INSTALLED.format(err)
    return Torch(np, torch, F), None


def no_gpu(t):
    """Why torch cannot run on this machine's GPU, or None; this starts CUDA."""
    return None if t.torch.cuda.is_available() else NO_GPU


def start_cuda(t):
    """Under the profile stage's gate, create this process's CUDA context before the gate
    opens: one allocation, no copy, no launch, so nothing of it runs on the GPU while another
    process profiles, and its 0.8 s under ncu (benches/results/ncu_prestart_h200.md) is not in
    the script's turn."""
    if os.environ.get("REPRO_PROFILE_GATE") and t.torch.cuda.is_available():
        t.torch.empty(1, device="cuda")


def honour_gate():
    """Under the profile stage, promise at once to wait at its gate (REPRO_PROFILE_GATE)
    before any copy or launch: the stage then profiles its kernel targets while this process
    imports torch, reads its inputs and creates its CUDA context."""
    gate = os.environ.get("REPRO_PROFILE_GATE")
    if gate:
        with open(gate + ".honoured", "w"):
            pass


def wait_for_gate():
    """Wait, before any copy or launch, until the file REPRO_PROFILE_GATE names exists: the
    stage writes it once its kernel targets are profiled (see honour_gate)."""
    gate = os.environ.get("REPRO_PROFILE_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.02)


def write_file(out_dir, name, status, reason=None, results=(), defines=None, workload=None):
    os.makedirs(out_dir, exist_ok=True)
    record = {"name": name, "kind": "baseline", "status": status}
    if workload:
        record["workload"] = workload
    if reason:
        record["reason"] = reason
    record["defines"] = defines or {}
    record["results"] = list(results)
    record["gates"] = []
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")


PROFILE_SKIPPED = "repro-profile: skipped: "


class CallSkipped(Exception):
    """A profiling call this script cannot run; the message says why."""


class SameCall(Exception):
    """A profiling call that would run exactly what `baseline`'s call on the same shape runs
    (the same kernels on the same inputs), which the profile stage also asked for: not run
    again, the stage records that call's profile for it too."""

    def __init__(self, baseline, why):
        super().__init__(why)
        self.baseline, self.why = baseline, why


def profile_skip(reason):
    print(PROFILE_SKIPPED + reason, flush=True)
    return 0


def first_line(err):
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def profile_calls(torch, calls, prepare, warmup):
    """The profile stage's calls (BASELINE, SHAPE, RANGE), in order: `prepare(baseline,
    shape)` gives the call (or raises CallSkipped); one trial call and the warm-up calls, then
    one call inside its own NVTX range RANGE, which ncu profiles (every kernel it launches,
    nothing else), for each time the call is listed in a row: the profiled calls of one
    baseline follow one another, as a kernel's profiled launches do. A call that cannot run
    says why and the others still run; a call that repeats another baseline's (SameCall) says
    which, and does not run."""
    for (baseline, shape, nvtx_range), listed in itertools.groupby(map(tuple, calls)):
        try:
            call = prepare(baseline, shape)
            try:
                call()
            except Exception as err:  # no kernel of this backend for the shape (cuDNN and S = 1)
                raise CallSkipped(f"{baseline}: {first_line(err)}") from err
        except CallSkipped as why:
            print(f"repro-profile: call {nvtx_range} skipped: {why}", flush=True)
            continue
        except SameCall as same:
            print(f"repro-profile: call {nvtx_range} same as {same.baseline}: {same.why}", flush=True)
            continue
        for _ in range(warmup):
            call()
        torch.cuda.synchronize()
        for _ in listed:
            torch.cuda.nvtx.range_push(nvtx_range)
            call()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
    return 0


class ShapeInputs:
    """Each shape's timed case (first recipe, seed 0), dumped by `repro exec` once: `read(folder,
    entry)` gives it on the host, `upload(host)` on the GPU. `prefetch(shape)` dumps and reads
    a shape without CUDA, so it can run before the profile stage's gate opens."""

    def __init__(self, pipeline, workload, read, upload):
        self.pipeline, self.workload, self.read, self.upload = pipeline, workload, read, upload
        self.host, self.cases = {}, {}

    def prefetch(self, shape):
        if shape not in self.host:
            folder = tempfile.mkdtemp(prefix="repro-profile-inputs-")
            try:
                index = dump_cases(self.pipeline, self.workload, folder, shape)
                if index is None:
                    raise SystemExit(2)
                self.host[shape] = self.read(folder, timed_entry(index))
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def __call__(self, shape):
        if shape not in self.cases:
            self.prefetch(shape)
            self.cases[shape] = self.upload(self.host.pop(shape))
        return self.cases[shape]


def dump_cases(pipeline, workload, folder, shape=None):
    """`repro exec --dump-inputs` into folder (one shape and seed 0 when shape is given);
    returns its index, or None when repro cannot be found."""
    repro = os.environ.get("REPRO_BIN") or shutil.which("repro")
    if not repro:
        print("error: cannot find repro: set REPRO_BIN or put repro on PATH", file=sys.stderr)
        return None
    argv = [repro, "-f", pipeline, "exec", "--dump-inputs", folder, "--workload", workload]
    if shape:
        argv += ["--shape", shape, "--seed", "0"]
    subprocess.run(argv, check=True)
    with open(os.path.join(folder, "index.json")) as f:
        return json.load(f)


def timed_entry(index):
    return next(e for e in index["entries"] if e["timed"])


def load_cases(pipeline, workload, load):
    """Every case of `workload` (each shape, recipe and seed), dumped by `repro exec
    --dump-inputs` into a scratch folder: the dump's index and [(entry, load(folder, entry))],
    or None when repro cannot be found."""
    folder = tempfile.mkdtemp(prefix=f"repro-{workload}-inputs-")
    try:
        index = dump_cases(pipeline, workload, folder)
        if index is None:
            return None
        return index, [(e, load(folder, e)) for e in index["entries"]]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- statistics: the same definitions as crates/base/src/stats.rs -----------------------

def percentile_sorted(x, p):
    h = (len(x) - 1) * min(max(p, 0.0), 1.0)
    i = math.floor(h)
    if i + 1 < len(x):
        return x[i] + (h - i) * (x[i + 1] - x[i])
    return x[i]


def median_ci_ranks(n):
    half, spread = n / 2.0, 1.96 * math.sqrt(n) / 2.0
    j = min(max(math.floor(half - spread), 1), n)
    k = min(max(math.ceil(half + spread), 1), n)
    return j, k


def summarize(samples):
    x = sorted(samples)
    n = len(x)
    mean = sum(x) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1)) if n > 1 else 0.0
    j, k = median_ci_ranks(n)
    return {
        "p50_us": percentile_sorted(x, 0.5),
        "p90_us": percentile_sorted(x, 0.9),
        "p99_us": percentile_sorted(x, 0.99),
        "mean_us": mean,
        "std_us": std,
        "min_us": x[0],
        "ci95_us": (x[k - 1] - x[j - 1]) / 2.0,
        "cv": std / mean if mean > 0 else 0.0,
        "samples": n,
    }


def rounded(record):
    """Fixed precision like repro's artifacts: 4 decimals for times, 6 for errors."""
    out = {}
    for key, v in record.items():
        if isinstance(v, float) and math.isfinite(v):
            v = round(v, 6 if key.endswith("_err") or key in ("pct_bad", "max_err_over_ref_std") else 4)
        out[key] = v
    return out


# ---- timing -------------------------------------------------------------------------------

def capture(torch, fn, n):
    """`n` calls of fn as one CUDA graph replay, or (if capture fails) a loop of calls."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # warm the capture stream
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n):
                fn()
        return graph.replay, "cuda_graph"
    except Exception:  # capture unsupported for this backend: plain launches
        def run():
            for _ in range(n):
                fn()
        return run, "batched_events"


def l2_flusher(torch, l2):
    """A callable that overwrites a buffer twice the L2 size (a new value each call), or None."""
    if l2 != "flush":
        return None
    l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    buf = torch.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=torch.int32, device="cuda")
    count = iter(range(1 << 62))
    return lambda: buf.fill_(next(count))


def settled(stats, max_cv):
    """repro exec's rule: more samples stop mattering once their CV is at most max_cv, or
    the 95% confidence interval of their median is within max_cv of it (a kernel whose
    spread is the timer's resolution keeps its CV however long it is sampled)."""
    return stats["cv"] <= max_cv or stats["ci95_us"] <= max_cv * abs(stats["p50_us"])


def sample_adaptively(iters, max_cv, max_time, take_round, samples):
    """take_round() adds `iters` samples; stop once they are settled, after max_time s,
    or after 10 rounds."""
    began = time.monotonic()
    for _ in range(10):
        take_round()
        if settled(summarize(samples()), max_cv) or time.monotonic() - began >= max_time:
            break


def time_graph(torch, fn, iters, flush, max_cv, max_time):
    # Estimate one call from a graph of ten (host overhead would inflate plain calls).
    probe, _ = capture(torch, fn, 10)
    probe()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    probe()
    end.record()
    end.synchronize()
    estimate = start.elapsed_time(end) * 1000.0 / 10
    batch = MAX_BATCH if estimate <= 0 else min(max(math.ceil(TARGET_SAMPLE_US / estimate), 1), MAX_BATCH)
    run_batch, method = capture(torch, fn, batch)
    run_batch()
    torch.cuda.synchronize()
    samples = []

    def take_round():
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for a, b in events:
            if flush:
                flush()
            a.record()
            run_batch()
            b.record()
        torch.cuda.synchronize()
        samples.extend(a.elapsed_time(b) * 1000.0 / batch for a, b in events)

    sample_adaptively(iters, max_cv, max_time, take_round, lambda: samples)
    return samples, {"method": method, "launches_per_sample": batch}


MAX_HOLD_US = 100_000.0


def time_isolated(torch, fn, iters, flush, max_cv, max_time):
    # GPU sleep cycles per microsecond, at the clocks the samples will run at (a first
    # guess for the hold's length only: whether a hold was long enough is checked per sample).
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(1_000_000)
    b.record()
    b.synchronize()
    cycles_per_us = 1_000_000 / max(a.elapsed_time(b) * 1000.0, 1e-3)
    hold_us = 50.0
    kernel, empty = [], []
    late = 0

    def region(call):
        """hold, start, [call], end, then wait: µs from start to end. The sample counts only
        if the GPU was still in the hold when the host had queued `end`: the host asks
        whether `start` has completed (Event.query()) right after recording `end`. If it
        has, the GPU reached the region while the host was still enqueueing, so the region
        may hold host time: the sample is dropped and retaken behind a hold twice as long.
        The check needs no clock: a GPU that boosts above the calibration's clock cannot
        slip host time into a sample. Waiting leaves the GPU idle before the next hold, as
        repro exec does."""
        nonlocal hold_us, late
        while True:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(hold_us * cycles_per_us))
            start.record()
            if call:
                fn()
            end.record()
            host_was_late = start.query()
            end.synchronize()
            if not host_was_late:
                return start.elapsed_time(end) * 1000.0
            late += 1
            if hold_us >= MAX_HOLD_US:
                raise RuntimeError(f"the host needs over {MAX_HOLD_US / 1000:.0f} ms to enqueue one call")
            hold_us *= 2

    def take_round():
        for _ in range(iters):
            empty.append(region(False))
            if flush:
                flush()
            kernel.append(region(True))

    def samples():
        overhead = summarize(empty)["p50_us"]
        return [k - overhead for k in kernel]

    sample_adaptively(iters, max_cv, max_time, take_round, samples)
    overhead = round(summarize(empty)["p50_us"], 4)
    return samples(), {"method": "isolated", "launches_per_sample": 1, "timer_overhead_us": overhead,
                       "host_late_retakes": late}


def time_fn(torch, fn, method, warmup, iters, l2, max_cv, max_time):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    flush = l2_flusher(torch, l2)
    timer = time_isolated if method == "isolated" else time_graph
    samples, mode = timer(torch, fn, iters, flush, max_cv, max_time)
    mode["l2"] = l2
    return samples, mode



# ---- correctness --------------------------------------------------------------------------

def accuracy(np, out, ref, gates, absolute=True):
    """The metrics of crates/pipeline/src/workload/accuracy.rs on float64 arrays [B, H, S, D]:
    absolute errors over the finite outputs, rel_l2_err, and max_err_over_ref_std: the largest
    |err| over the spread of the reference where the element lies, max(std of its (batch,
    head) -- else its RMS, else 1 --, std of its channel over the rows of that head).
    `absolute`: whether the absolute gates apply (set for the gaussian recipe; the others are
    judged by the normalized ones)."""
    o = np.asarray(out, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    nan = int(np.isnan(o).sum())
    inf = int(np.isinf(o).sum())
    finite = np.isfinite(o)
    err = np.where(finite, np.abs(np.where(finite, o, 0.0) - r), 0.0)
    n_finite = int(finite.sum())
    bad = int((err > gates["max_abs_err"]).sum()) + nan + inf
    max_abs = float(err.max()) if n_finite else 0.0
    mean_abs = float(err.sum() / n_finite) if n_finite else 0.0
    ref2 = float((np.where(finite, r, 0.0) ** 2).sum())
    diff2 = float((err ** 2).sum())
    rel_l2 = math.sqrt(diff2 / ref2) if ref2 > 0 else math.sqrt(diff2)
    heads = o.shape[0] * o.shape[1]
    rows, channels = o.shape[2], o.shape[3]
    worst = 0.0
    for e_head, r_head in zip(err.reshape(heads, rows, channels), r.reshape(heads, rows, channels)):
        spread = float(r_head.std())
        if not spread > 0:
            spread = float(np.sqrt((r_head ** 2).mean())) or 1.0
        worst = max(worst, float((e_head / np.maximum(spread, r_head.std(axis=0))).max()))
    pct_bad = 100.0 * bad / o.size
    within_absolute = (max_abs <= gates["max_abs_err"] and mean_abs <= gates["mean_abs_err"]
                       and pct_bad <= gates["max_pct_bad"])
    passed = (nan == 0 and inf == 0 and (within_absolute or not absolute)
              and worst <= gates["max_err_over_ref_std"] and rel_l2 <= gates["max_rel_l2_err"])
    return {"max_abs_err": max_abs, "mean_abs_err": mean_abs, "pct_bad": pct_bad,
            "rel_l2_err": rel_l2, "max_err_over_ref_std": worst, "nan_count": nan,
            "inf_count": inf, "correctness_pass": passed}


GATE_KEYS = ("max_abs_err", "mean_abs_err", "max_pct_bad", "max_err_over_ref_std", "max_rel_l2_err")


def output_gates(index, output):
    """The gates of `output` from a --dump-inputs index: one number each, a per-class
    threshold at the workload's default class; a gate not declared never fails."""
    declared = index["gates"][output]
    gates = {}
    for k in GATE_KEYS:
        v = declared.get(k, float("inf"))
        gates[k] = v[index["precision"]] if isinstance(v, dict) else v
    return gates

