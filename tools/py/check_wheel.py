"""Checks a dcp_verify wheel before it is installed or shipped (tools/wheel runs it on every wheel).

    python3 tools/py/check_wheel.py build-release/dist/dcp_verify-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl \
        --python /usr/bin/python3.11 --case fixtures/cases/gqa_causal_bf16.safetensors

In order, each failure one line on stderr naming what is wrong, exit 1:
  1. the name: a manylinux platform tag (auditwheel repaired it), not the build machine's linux_*;
  2. the parts: the extension module, the dcp-verify binary (executable), the bridge plug-in, the
     pinned cases, the Python sources and type stubs, the console script's entry point;
  3. the native parts need no library outside the C library and what the wheel bundles;
  4. with --python: installed into a fresh virtual environment in an empty folder (numpy from
     PyPI), `import dcp_verify` works from there, a one-case `check` of the case's own reference
     passes, the `dcp-verify` console script answers, and a one-case property run drives a Python
     merge through the bridge.
Exit 0 when every check passed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

# (pattern in the wheel, what it is): each must match exactly one member.
PARTS = [
    ("dcp_verify/__init__.py", "the Python package"),
    ("dcp_verify/_files.py", "the package's files module"),
    ("dcp_verify/_report.py", "the package's report module"),
    ("dcp_verify/_serve.py", "the package's implementation seam"),
    ("dcp_verify/_suite.py", "the package's property-suite module"),
    ("dcp_verify/py.typed", "the typing marker"),
    ("dcp_verify/testing.py", "the pytest helpers"),
    ("dcp_verify/_cli.py", "the console script's module"),
    ("dcp_verify/_core.pyi", "the type stubs"),
    ("dcp_verify/_core.cpython-*.so", "the extension module"),
    ("dcp_verify/bin/dcp-verify", "the dcp-verify binary"),
    ("dcp_verify/lib/libdcpv_bridge.so", "the bridge plug-in"),
    ("dcp_verify/share/dcp-verify/pinned.json", "the pinned cases"),
    ("dcp_verify-*.dist-info/entry_points.txt", "the console script's entry point"),
]
ENTRY_POINT = re.compile(r"^dcp-verify\s*=\s*dcp_verify\._cli:main\s*$", re.M)
# The C library's parts and GCC's unwinder, which every manylinux system has (its policy's list).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
               "ld-linux-x86-64.so.2", "libgcc_s.so.1"}
WHEEL_NAME = re.compile(
    r"^dcp_verify-(?P<version>[^-]+)-(?P<py>cp\d+)-(?P<abi>cp\d+)-(?P<plat>[\w.]+)\.whl$")

# What the installed package runs (step 4): a case's reference checked against itself, the
# console script, and the property suite over a numpy merge through the bridge.
SMOKE = r"""
import subprocess, sys
import numpy as np
import dcp_verify

case = sys.argv[1]
assert dcp_verify.__file__.startswith(sys.prefix), (dcp_verify.__file__, sys.prefix)
o, lse = dcp_verify.reference(case)
report = dcp_verify.check(case, {"o": o.astype(np.float32), "lse": lse.astype(np.float32),
                                 "accum": "f32"})
assert report.ok, report.text
out = subprocess.run(["dcp-verify", "info"], capture_output=True, text=True)
assert out.returncode == 0 and "dcp-verify" in out.stdout, (out.returncode, out.stdout, out.stderr)


class Merge:
    name = "numpy-merge"
    claim = {"accum": "f32"}

    def combine(self, a):
        scale = np.log(2.0) if a.lse_base == 1 else 1.0
        lse = a.lse_partial.astype(np.float64) * scale
        m = lse.max(axis=0)
        m = np.where(np.isinf(m), 0.0, m)
        w = np.exp(lse - m)
        z = w.sum(axis=0)
        o = (w[..., None] * a.o_partial).sum(axis=0) / np.where(z > 0, z, 1.0)[..., None]
        return o, np.where(z > 0, m + np.log(np.where(z > 0, z, 1.0)), -np.inf) / scale


props = dcp_verify.properties(Merge(), seed=1, cases=1)
assert props.ok, props.text
print(f"installed from {dcp_verify.__file__}; check: {report.verdict}; properties: {props.verdict}")
"""


# The oldest C library the wheel installs on: glibc 2.34 (RHEL 9; Ubuntu 22.04 has 2.35), the
# engines' CI images. A function of a newer glibc in any part (std::hypot is hypot@GLIBC_2.35)
# makes auditwheel tag the wheel higher.
MAX_GLIBC = (2, 34)


class WheelError(Exception):
    pass


def check_name(path: str) -> None:
    m = WHEEL_NAME.match(os.path.basename(path))
    if not m:
        raise WheelError(f"{os.path.basename(path)}: not a dcp_verify wheel name "
                         "(dcp_verify-VERSION-cpXY-cpXY-PLATFORM.whl)")
    if not m.group("plat").startswith("manylinux"):
        raise WheelError(f"{os.path.basename(path)}: platform tag '{m.group('plat')}' is the build "
                         "machine's, not manylinux (auditwheel repair was not run on it)")
    glibc = re.match(r"manylinux_(\d+)_(\d+)_", m.group("plat"))
    if glibc and (int(glibc.group(1)), int(glibc.group(2))) > MAX_GLIBC:
        raise WheelError(f"{os.path.basename(path)}: platform tag '{m.group('plat')}' needs glibc "
                         f"{glibc.group(1)}.{glibc.group(2)}, newer than the "
                         f"{MAX_GLIBC[0]}.{MAX_GLIBC[1]} the wheel promises: a part links a newer "
                         "symbol (auditwheel show names its version)")


def check_parts(zf: zipfile.ZipFile) -> None:
    names = zf.namelist()
    for pattern, what in PARTS:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if len(hits) != 1:
            raise WheelError(f"{what} ({pattern}): {'missing' if not hits else 'more than one'} "
                             "in the wheel")
    binary = zf.getinfo("dcp_verify/bin/dcp-verify")
    if not (binary.external_attr >> 16) & stat.S_IXUSR:
        raise WheelError("the dcp-verify binary (dcp_verify/bin/dcp-verify): not executable in "
                         "the wheel")
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    if not ENTRY_POINT.search(zf.read(entry).decode("utf-8", "replace")):
        raise WheelError(f"the console script's entry point ({entry}): no line "
                         "'dcp-verify = dcp_verify._cli:main'")


def needed(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise WheelError(f"{path}: readelf failed: {out.stderr.strip()}")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def check_libraries(zf: zipfile.ZipFile, scratch: str) -> None:
    bundled = {os.path.basename(n) for n in zf.namelist() if n.startswith("dcp_verify.libs/")}
    for name in zf.namelist():
        if zf.read(name)[:4] != b"\x7fELF":
            continue
        path = zf.extract(name, scratch)
        outside = [lib for lib in needed(path) if lib not in SYSTEM_LIBS and lib not in bundled]
        if outside:
            raise WheelError(f"{name}: needs {', '.join(outside)}, neither in the C library nor "
                             "bundled in the wheel")


def check_installed(wheel: str, python: str, case: str) -> str:
    folder = tempfile.mkdtemp(prefix="dcp-wheel-check-")
    try:
        venv = os.path.join(folder, "venv")
        steps = [
            ("a fresh virtual environment", [python, "-m", "venv", venv]),
            ("pip install of the wheel",
             [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
              "--disable-pip-version-check", os.path.abspath(wheel)]),
        ]
        for what, cmd in steps:
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
            if out.returncode != 0:
                raise WheelError(f"{what} failed (exit {out.returncode}): "
                                 f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}")
        shutil.copy(case, os.path.join(folder, "case.safetensors"))
        env = dict(os.environ, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"])
        for var in ("DCP_VERIFY_BIN", "DCP_VERIFY_BRIDGE", "PYTHONPATH"):
            env.pop(var, None)
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", SMOKE, "case.safetensors"],
                             capture_output=True, text=True, cwd=folder, env=env)
        if out.returncode != 0:
            last = (out.stderr or out.stdout).strip().splitlines()[-3:]
            raise WheelError(f"the installed package: import, a one-case check, the console script "
                             f"or a one-case property run failed: {' | '.join(last)}")
        return out.stdout.strip()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel")
    parser.add_argument("--python", help="install into a fresh venv of this interpreter and run it")
    parser.add_argument("--case", help="the case file the installed package's check runs on")
    args = parser.parse_args()
    if not os.path.isfile(args.wheel):
        print(f"check_wheel: {args.wheel}: no such file", file=sys.stderr)
        return 2
    if args.python and not args.case:
        print("check_wheel: --python needs --case", file=sys.stderr)
        return 2
    try:
        check_name(args.wheel)
        with zipfile.ZipFile(args.wheel) as zf, tempfile.TemporaryDirectory() as scratch:
            check_parts(zf)
            check_libraries(zf, scratch)
        said = check_installed(args.wheel, args.python, args.case) if args.python else ""
    except (WheelError, zipfile.BadZipFile) as e:
        print(f"check_wheel: {os.path.basename(args.wheel)}: {e}", file=sys.stderr)
        return 1
    size = os.path.getsize(args.wheel) / 2**20
    print(f"check_wheel: {os.path.basename(args.wheel)} ({size:.1f} MiB): name, parts, libraries "
          + (f"and the installed package OK ({said})" if said else "OK (not installed: no --python)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
