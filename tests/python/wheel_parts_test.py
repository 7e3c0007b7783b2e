"""A wheel missing any of its parts is refused by tools/py/check_wheel.py with a line naming the part
(tools/wheel --test runs this on the wheel it built and checked).

    python3 tests/python/wheel_parts_test.py build-release/dist/dcp_verify-*.whl

For each part the package cannot work without, a copy of the good wheel without it must fail the
check (exit 1) with the part's name in its message; so must a wheel whose binary lost its
executable bit, whose entry point is gone, that carries the build machine's platform tag, or whose
tag needs a glibc newer than the one it promises. The parts are listed here, not read from the checker, so a part the checker forgot fails this.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECKER = os.path.join(ROOT, "tools", "py", "check_wheel.py")

# (members to drop: a predicate on the member's name, the words the message must hold)
MISSING = [
    (lambda n: n.startswith("dcp_verify/_core.") and n.endswith(".so"), "the extension module"),
    (lambda n: n == "dcp_verify/bin/dcp-verify", "the dcp-verify binary"),
    (lambda n: n == "dcp_verify/lib/libdcpv_bridge.so", "the bridge plug-in"),
    (lambda n: n == "dcp_verify/share/dcp-verify/pinned.json", "the pinned cases"),
    (lambda n: n == "dcp_verify/__init__.py", "the Python package"),
    (lambda n: n == "dcp_verify/_serve.py", "the package's implementation seam"),
    (lambda n: n == "dcp_verify/_core.pyi", "the type stubs"),
    (lambda n: n.endswith(".dist-info/entry_points.txt"), "the console script's entry point"),
]


def rewrite(src: str, dst: str, drop=lambda n: False, mode=None) -> None:
    """Copies the wheel src to dst without the members drop() names; mode(name) -> new mode."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if drop(info.filename):
                continue
            data = zin.read(info.filename)
            if mode is not None and mode(info.filename) is not None:
                info.external_attr = mode(info.filename) << 16
            zout.writestr(info, data)


def refused(wheel: str, words: str) -> str:
    out = subprocess.run([sys.executable, CHECKER, wheel], capture_output=True, text=True)
    lines = out.stderr.strip().splitlines()
    if out.returncode != 1 or len(lines) != 1 or words not in lines[0]:
        return f"expected exit 1 and one line naming '{words}', got exit {out.returncode}: {lines}"
    return ""


def main() -> int:
    good = sys.argv[1]
    name = os.path.basename(good)
    problems = []
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run([sys.executable, CHECKER, good], capture_output=True, text=True)
        if out.returncode != 0:
            problems.append(f"the good wheel itself is refused: {out.stderr.strip()}")
        for drop, words in MISSING:
            bad = os.path.join(scratch, name)
            rewrite(good, bad, drop=drop)
            problem = refused(bad, words)
            if problem:
                problems.append(f"without {words}: {problem}")
        bad = os.path.join(scratch, name)
        rewrite(good, bad, mode=lambda n: 0o644 if n == "dcp_verify/bin/dcp-verify" else None)
        problem = refused(bad, "not executable")
        if problem:
            problems.append(f"a binary without its executable bit: {problem}")
        plat = name[:name.index("manylinux")] + "linux_x86_64.whl"
        shutil.copy(good, os.path.join(scratch, plat))
        problem = refused(os.path.join(scratch, plat), "not manylinux")
        if problem:
            problems.append(f"the build machine's platform tag: {problem}")
        newer = re.sub(r"manylinux_\d+_\d+_", "manylinux_2_35_", name)
        shutil.copy(good, os.path.join(scratch, newer))
        problem = refused(os.path.join(scratch, newer), "needs glibc 2.35")
        if problem:
            problems.append(f"a tag of a newer glibc: {problem}")
    for p in problems:
        print(f"wheel_parts_test: FAIL: {p}")
    checked = len(MISSING) + 4
    print(f"wheel_parts_test: {checked - len(problems)} of {checked} cases as expected "
          f"({len(MISSING)} parts removed one at a time, a lost executable bit, a non-manylinux tag, "
          "a newer glibc's tag, the good wheel)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
