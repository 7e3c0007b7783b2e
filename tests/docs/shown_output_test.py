#!/usr/bin/env python3
"""The shown-output rules of shown_output.py on small made-up outputs: a drifted count fails, a
wall-clock figure does not, also when the excerpt shown elides the timed table's header (a time
column read 0.00 on one machine and 0.01 on another), and checkout paths read as build/.

Usage: shown_output_test.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

HEADER = "mutant       kind        result   cases  property   seen  time(s)  counterexample"
ROW = "a2a_lse_bf16 arithmetic  KILLED   {cases}  dcp-path   2     {time}     S=2 | bound violated"


def verdict(script, printed, shown, repo, build):
    """shown_output.py's exit code for these printed and shown lines."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, name) for name in ("shown.json", "stdout", "stderr")]
        with open(paths[0], "w") as f:
            json.dump({"line": 1, "lines": shown}, f)
        with open(paths[1], "w") as f:
            f.write("\n".join(printed) + "\n")
        open(paths[2], "w").close()
        done = subprocess.run([sys.executable, script, *paths, "doc.md", repo, build],
                              capture_output=True, text=True)
        return done.returncode


def main():
    repo = os.path.realpath(sys.argv[1])
    build = os.path.join(repo, "build")
    script = os.path.join(repo, "tests", "docs", "shown_output.py")
    printed = [HEADER, ROW.format(cases=2, time="0.01"), "mutants: 1/1 killed, 0 false alarms",
               f"error: {build}/cases/x.case: no such file", "time: 12.5 s"]
    cases = [
        ("the whole table, another time", [HEADER, ROW.format(cases=2, time="0.00")], 0),
        ("an excerpt without the header, another time", ["...", ROW.format(cases=2, time="0.00")], 0),
        ("an excerpt without the header, another count", ["...", ROW.format(cases=3, time="0.01")], 1),
        ("another summary", ["mutants: 0/1 killed, 0 false alarms"], 1),
        ("a checkout path as build/", ["error: build/cases/x.case: no such file"], 0),
        ("another wall-clock total", ["time: 3.0 s"], 0),
        ("a line never printed", ["mutants: 1/1 killed"], 1),
    ]
    failed = 0
    for name, shown, expected in cases:
        got = verdict(script, printed, shown, repo, build)
        ok = (got == 0) == (expected == 0)
        failed += not ok
        print(f"{'ok' if ok else 'FAILED'}  {name}: exit {got}, expected {expected}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
