#!/usr/bin/env python3
"""docs/layout-and-flow.md section 9 lists every file a new attention variant touches; checked
against the code, so a new seam cannot go unlisted.

Usage: variant_seams_test.py REPO_ROOT

The list is the "A variant" bullet of section 9 (up to the next top-level bullet): every
`path` in backticks with a '/' in it. The code is every file under the source folders (SOURCES,
tests, benchmarks, fixtures and docs aside) that names `softcap`, the variant that stands for all
of them, as a word. The test fails when a file of the code is not in the list, or a file of the
list is missing or no longer names it (the docs under docs/ it names are exempt: they describe).
"""
import pathlib
import re
import sys

SOURCES = ("oracle", "gpu", "properties", "mutants", "plugin", "include", "python/dcp_verify",
           "tools")
SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py"}
WORD = re.compile(r"\bsoftcap\b")


def listed(doc):
    text = doc.read_text(encoding="utf-8")
    section = text[text.index("## 9. "):]
    start = section.index("* **A variant**")
    end = section.index("\n* **", start + 1)
    return {p for p in re.findall(r"`([\w./-]+/[\w./-]+)`", section[start:end])
            if not p.startswith("docs/")}


def naming(root):
    found = set()
    for folder in SOURCES:
        for path in (root / folder).rglob("*"):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                if WORD.search(path.read_text(encoding="utf-8", errors="replace")):
                    found.add(path.relative_to(root).as_posix())
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    in_doc, in_code = listed(root / "docs" / "layout-and-flow.md"), naming(root)
    problems = [f"{p}: names softcap but is not in the variant list of docs/layout-and-flow.md §9"
                for p in sorted(in_code - in_doc)]
    problems += [f"{p}: in the variant list of docs/layout-and-flow.md §9 but "
                 + ("does not exist" if not (root / p).exists() else "no longer names softcap")
                 for p in sorted(in_doc - in_code)]
    for p in problems:
        print("FAILED", p)
    print(f"variant seams: {len(in_code)} files name the variant, {len(in_doc)} listed, "
          f"{len(problems)} problems")
    # A scan that found nothing checked nothing.
    return 1 if problems or not in_code else 0


if __name__ == "__main__":
    sys.exit(main())
