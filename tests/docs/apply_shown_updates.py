#!/usr/bin/env python3
"""Writes the printed lines that shown_output.py recorded (SHOWN_OUTPUT_UPDATE=FILE) over the
drifted shown lines of the documents, after an intended change of what the code prints.

Usage: apply_shown_updates.py FILE REPO_ROOT

Each record names a document (relative to REPO_ROOT), a 1-based line and the line it expects
there; a record whose line no longer holds that text is reported and left alone. The replacement
is the closest line the block printed, so read the diff: a shown line that matched the wrong
printed line is fixed by hand."""
import json
import sys


def main():
    records, repo = sys.argv[1], sys.argv[2]
    by_doc = {}
    for raw in open(records, encoding="utf-8"):
        r = json.loads(raw)
        by_doc.setdefault(r["doc"], []).append(r)
    stale = 0
    for doc, rs in by_doc.items():
        path = f"{repo}/{doc}"
        lines = open(path, encoding="utf-8").read().split("\n")
        for r in rs:
            i = r["line"] - 1
            if i >= len(lines) or lines[i] != r["old"]:
                print(f"{doc}:{r['line']}: no longer holds the recorded line; left alone")
                stale += 1
                continue
            lines[i] = r["new"]
        open(path, "w", encoding="utf-8").write("\n".join(lines))
        print(f"{doc}: {len(rs)} shown lines rewritten")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
