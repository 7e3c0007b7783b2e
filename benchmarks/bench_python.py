"""The Python callback's cost: the DCP-path property through dcp_verify.properties against the same
property on dcp-verify's own host backend, in one run, as cases per second and their ratio.

    .venv/bin/python benchmarks/bench_python.py [--cases 200] [--seed 1] [--repeat 3]

Rows (same seed, cases and ranges, so the same steps are drawn):
  host           dcp-verify properties --only dcp-path (the production path, no Python)
  numpy-combine  a numpy combine served from Python (every a2a step calls back once per rank)
  torch-flash    PyTorch's CPU flash attention as partial and a torch merge as combine
                 (tests/python/torch_flash.py; skipped without torch)
  torch-paged    a PyTorch paged kernel as the paged level, over each rank's pool as stored
                 (tests/python/torch_paged.py; skipped without torch)
The time is the dcp-path property's own (the properties' JSON "seconds"), so process start is
not counted; each row runs --repeat times, the rows taking turns, and shows its fastest run (its
levels' time from that run), the one least disturbed by the machine's other work. "vs host" is
a row's cases/s over the host path's; "in levels" the time the implementation's own methods
took; "outside" the rest (the suite, the production path's other levels and the seam between
the processes), and "outside vs host" the host path's time over it: what the package costs
beyond the implementation's own arithmetic.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import dcp_verify

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

RANGES = {"softcap": False, "sink": False}


class NumpyCombine:
    name = "numpy-combine"
    claim = {"accum": "f32", "accum_rounding": "nearest"}

    def __init__(self):
        self.calls = 0

    def combine(self, a):
        self.calls += 1
        scale = np.log(2.0) if a.lse_base == 1 else 1.0
        lse = a.lse_partial.astype(np.float64) * scale
        m = lse.max(axis=0)
        m = np.where(np.isinf(m), 0.0, m)
        w = np.exp(lse - m)
        z = w.sum(axis=0)
        o = (w[..., None] * a.o_partial).sum(axis=0) / np.where(z > 0, z, 1.0)[..., None]
        return o, np.where(z > 0, m + np.log(np.where(z > 0, z, 1.0)), -np.inf) / scale


def timed(impl):
    """impl, its levels' own time summed into impl.level_seconds as they run."""
    impl.level_seconds = 0.0
    for level in ("paged", "partial", "combine", "step"):
        method = getattr(impl, level, None)
        if callable(method):
            def run(a, method=method):
                start = time.perf_counter()
                try:
                    return method(a)
                finally:
                    impl.level_seconds += time.perf_counter() - start
            setattr(impl, level, run)
    return impl


def dcp_path_seconds(raw):
    return next(p["seconds"] for p in raw["properties"] if p["name"] == "dcp-path")


def host_row(cases, seed):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([dcp_verify.binary(), "properties", "--only", "dcp-path", "--cases",
                        str(cases), "--seed", str(seed), "--without", "softcap,sink", "--json",
                        out, "--quiet"], check=True, capture_output=True)
        with open(out) as f:
            return dcp_path_seconds(json.load(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    o = ap.parse_args()
    if o.repeat < 1:
        ap.error(f"--repeat: expected an int >= 1, got {o.repeat}")
    makers = [("host", None, {}), ("numpy-combine", NumpyCombine, RANGES)]
    try:
        import torch
        from torch_flash import TorchFlash
        from torch_paged import TorchPaged
        torch.set_num_threads(1)
        makers += [("torch-flash", lambda: TorchFlash(torch.float32),
                    dict(arrays="torch", **TorchFlash.RANGES)),
                   ("torch-paged", TorchPaged, dict(arrays="torch", **RANGES))]
    except ImportError:
        print("# torch-flash, torch-paged: skipped (no torch)")
    best = {}  # row: (seconds, seconds in levels, callbacks) of its fastest run
    for _ in range(o.repeat):
        for name, make, kwargs in makers:
            if make is None:
                run = (host_row(o.cases, o.seed), None, None)
            else:
                impl = timed(make())
                r = dcp_verify.properties(impl, seed=o.seed, cases=o.cases, only=["dcp-path"],
                                          **kwargs)
                run = (dcp_path_seconds(r.raw), impl.level_seconds, getattr(impl, "calls", None))
            if name not in best or run[0] < best[name][0]:
                best[name] = run
    rows = [(name, *best[name]) for name, _, _ in makers]
    base = rows[0][1]
    print(f"# bench_python  cases={o.cases}  seed={o.seed}  repeat={o.repeat}  "
          "(dcp-path property, sound bound; each row its fastest run)")
    # "vs host": cases/s over the host path's (1 is as fast, below 1 slower).
    print(f"{'row':<14} {'seconds':>8} {'cases/s':>9} {'vs host':>8} {'in levels':>10} "
          f"{'outside':>8} {'outside vs host':>16} {'callbacks':>9}")
    for name, secs, in_levels, calls in rows:
        def cell(x, width, fmt):
            return f"{'-' if x is None else format(x, fmt):>{width}}"
        outside = secs - in_levels if in_levels is not None else None
        print(f"{name:<14} {secs:8.3f} {o.cases / secs:9.1f} {base / secs:8.2f} "
              f"{cell(in_levels, 10, '.3f')} {cell(outside, 8, '.3f')} "
              f"{cell(base / outside if outside else None, 16, '.2f')} "
              f"{cell(calls, 9, 'd')}")


if __name__ == "__main__":
    main()
