#!/usr/bin/env python3
"""Print the version `import torch; print(torch.__version__)` prints, without importing torch.

The baselines stage fingerprints torch's version before any stage runs; importing torch for
that takes seconds. torch.__version__ is `TorchVersion(torch.version.__version__)`, a str
subclass holding the string literal that torch/version.py assigns (written when the wheel is
built, e.g. `2.11.0+cu130`). So this finds the package `import torch` would load (the same
search of sys.path, without running it), and reads that literal from its version.py without
executing the file (milliseconds; the interpreter's start is most of the run).

The installed distribution's version (`importlib.metadata.version("torch")`, `pip list`) is
not the same string: PyPI accepts no local version label, so its wheels' metadata says
`2.11.0` where version.py, and torch.__version__, say `2.11.0+cu130` (seen in the wheel
torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl); a wheel of another CUDA build would
fingerprint alike. It can also name another torch than the one that imports. So it is only
the fallback where torch has no version.py. No torch: a message on stderr and exit 1, as
`import torch` fails.
"""

import ast
import importlib.util
import os
import sys


def literal_version(path):
    """The string literal version.py assigns to `__version__`, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            names, value = [node.target], node.value
        else:
            continue
        if any(isinstance(n, ast.Name) and n.id == "__version__" for n in names) \
                and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return None


def main():
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        print("no module named 'torch'", file=sys.stderr)
        return 1
    for folder in spec.submodule_search_locations or ():
        version = literal_version(os.path.join(folder, "version.py"))
        if version:
            print(version)
            return 0
    from importlib import metadata  # only here: its import costs more than the rest
    try:
        print(metadata.version("torch"))
        return 0
    except metadata.PackageNotFoundError:
        print(f"torch at {spec.origin} has no version.py and no installed metadata", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
