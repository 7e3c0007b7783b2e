"""The Python callback's cost: the DCP-path property through dcp_verify.properties against the same
property on dcp-verify's own host backend, in one run, as cases per second and their ratio.

    .venv/bin/python benchmarks/bench_python.py [--cases 200] [--seed 1]

Rows (same seed, cases and ranges, so the same steps are drawn):
  host           dcp-verify properties --only dcp-path (the production path, no Python)
  numpy-combine  a numpy combine served from Python (every a2a step calls back once per rank)
  torch-flash    PyTorch's CPU flash attention as partial and a torch merge as combine
                 (tests/python/torch_flash.py; skipped without torch)
The time is the dcp-path row's own (the properties' JSON "seconds"), so process start and the
pinned replay are not counted.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

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
    o = ap.parse_args()
    rows = [("host", host_row(o.cases, o.seed), None)]
    impl = NumpyCombine()
    r = dcp_verify.properties(impl, seed=o.seed, cases=o.cases, **RANGES)
    rows.append(("numpy-combine", dcp_path_seconds(r.raw), impl.calls))
    try:
        import torch
        from torch_flash import TorchFlash
        torch.set_num_threads(1)
        r = dcp_verify.properties(TorchFlash(torch.float32), seed=o.seed, cases=o.cases,
                                  arrays="torch", **TorchFlash.RANGES)
        rows.append(("torch-flash", dcp_path_seconds(r.raw), None))
    except ImportError:
        print("# torch-flash: skipped (no torch)")
    base = rows[0][1]
    print(f"# bench_python  cases={o.cases}  seed={o.seed}  (dcp-path property, sound bound)")
    print(f"{'row':<14} {'seconds':>8} {'cases/s':>9} {'x host':>7} {'callbacks':>9}")
    for name, secs, calls in rows:
        print(f"{name:<14} {secs:8.3f} {o.cases / secs:9.1f} {secs / base:7.2f} "
              f"{calls if calls is not None else '-':>9}")


if __name__ == "__main__":
    main()
