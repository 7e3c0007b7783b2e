#!/usr/bin/env python3
"""A lesson's shown output, checked against what its block printed.

Usage: shown_output.py SHOWN.json STDOUT STDERR DOC REPO_ROOT BUILD_DIR

SHOWN.json holds the ```text block that follows a run block ({"line": N, "lines": [...]}, or
null when none follows). Every shown line must be a line the block printed (stdout or stderr),
compared with runs of blanks collapsed, wall-clock figures masked (see TIME) and the absolute
paths of this checkout written as the lessons write them (BUILD_DIR/ as build/, REPO_ROOT/ as
nothing). A line that is only "..." (or "# ...") marks trimmed output; a line starting with
"$ " shows a command. Exit 1, naming the first lines that differ and the printed line closest to
each, when the shown output has drifted from what the code prints.

With SHOWN_OUTPUT_UPDATE=FILE in the environment, each drifted line that has a close printed line
is also appended to FILE as JSON ({"doc", "line", "old", "new"}), for
tests/docs/apply_shown_updates.py to write into the document (a refresh after an intended change
of what the code prints; the diff is then read line by line)."""
import difflib
import json
import os
import re
import sys

# Wall-clock figures vary from run to run and machine to machine, so they are compared as a mask:
# "time: 3.3 s" anywhere, and in a table with a time(s) or time(us) column (mutants, properties,
# sweep) every number with one or two decimals and every speedup ("1.41x"). Errors, bounds and
# ratios print three or more significant decimals or an exponent, so they stay compared. Whether a
# table is timed is read from what the block printed: a shown excerpt may elide the header.
TIME = re.compile(r"(time: )\d+(?:\.\d+)? ?s\b")
TIMED_TABLE = re.compile(r"time\((s|us)\)")
TIMED_VALUE = re.compile(r"(?<![\w.])\d+\.\d{1,2}x?(?![\w.])")


def normal(line, timed):
    line = TIME.sub(r"\1#", " ".join(line.split()))
    return TIMED_VALUE.sub("#", line) if timed else line


def main():
    shown = json.load(open(sys.argv[1]))
    if not shown:
        return 0
    repo, build = (os.path.realpath(p) + "/" for p in sys.argv[5:7])
    output = []
    for path in sys.argv[2:4]:
        for line in open(path, encoding="utf-8", errors="replace"):
            output.append(line.replace(build, "build/").replace(repo, ""))
    timed = any(TIMED_TABLE.search(line) for line in output + shown["lines"])
    printed = {normal(line, timed) for line in output}
    original = {normal(line, timed): line.rstrip("\n") for line in output}
    drifted = []
    for n, line in enumerate(shown["lines"]):
        text = normal(line, timed)
        if not text or text.lstrip("# ") == "..." or text.startswith("$ "):
            continue
        if text not in printed:
            drifted.append((shown["line"] + n, line))
    updates = os.environ.get("SHOWN_OUTPUT_UPDATE")
    if updates:
        with open(updates, "a", encoding="utf-8") as f:
            for where, line in drifted:
                near = difflib.get_close_matches(normal(line, timed), printed, n=1, cutoff=0.5)
                if near:
                    f.write(json.dumps({"doc": sys.argv[4], "line": where, "old": line,
                                        "new": original[near[0]]}) + "\n")
    for where, line in drifted[:3]:
        print(f"FAILED {sys.argv[4]}:{where}: shown output not printed: {line.strip()}")
        near = difflib.get_close_matches(normal(line, timed), printed, n=1, cutoff=0.5)
        if near:
            print(f"  closest printed line: {near[0]}")
    if len(drifted) > 3:
        print(f"  ... and {len(drifted) - 3} more shown lines")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
