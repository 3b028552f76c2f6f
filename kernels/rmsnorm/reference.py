#!/usr/bin/env python3
"""RMSNorm reference as a command: the `reference: {run: [...]}` form of a workload.

repro runs `reference.py --case CASE --out OUT`: CASE/case.json lists the arguments (see
src/workload/case.rs), each input's raw little-endian bytes beside it. This writes
OUT/y.f64, y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + eps) * weight[c] in float64.

Python's standard library only, so it runs anywhere python3 does: fine for the small and
ragged shapes, slow (about a minute) for 16M elements. The shipped pipeline uses the CUDA
reference (reference.cu); docs/guide/workloads.md shows how to switch.
"""

import argparse
import array
import json
import math
import os
import struct
import sys


def read_halves(path, count):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != 2 * count:
        raise SystemExit(f"{path}: {len(data)} bytes, expected {2 * count}")
    return struct.unpack(f"<{count}e", data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.case, "case.json")) as f:
        case = json.load(f)
    by_name = {a["name"]: a for a in case["args"]}
    rows, hidden = case["dims"]["rows"], case["dims"]["hidden"]
    eps = by_name["eps"]["value"]
    x = read_halves(os.path.join(args.case, by_name["x"]["file"]), rows * hidden)
    w = read_halves(os.path.join(args.case, by_name["weight"]["file"]), hidden)
    y = array.array("d")
    for r in range(rows):
        row = x[r * hidden:(r + 1) * hidden]
        inv = 1.0 / math.sqrt(math.fsum(v * v for v in row) / hidden + eps)
        y.extend(v * inv * wc for v, wc in zip(row, w))
    if sys.byteorder != "little":
        y.byteswap()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "y.f64"), "wb") as f:
        y.tofile(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
