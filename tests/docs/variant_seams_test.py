#!/usr/bin/env python3
"""docs/layout-and-flow.md section 9 lists every file a new attention variant and a new storage
format touch; checked against the code, so a new seam cannot go unlisted.

Usage: variant_seams_test.py REPO_ROOT

Three lists of section 9's bullets (each up to the next top-level bullet), each every `path` in
backticks with a '/' in it: in the "A variant" bullet, the files of a switch with per-head tensors
(from "ALiBi went in as one commit" to the paragraph on valued variants), against the files that
name `alibi`, and those of a variant with a value (from "A variant with a value" to the bullet's
end), against the files that name `softcap` as a word; in the "A storage format" bullet, the files
the last format added touched (from "E4M3FNUZ went in" to the bullet's end), against the files
that name `fnuz`. The code is every file under the source folders (SOURCES;
tests, benchmarks, fixtures and docs aside). A list fails when a file of the code is not in it, or
a file of it is missing or no longer names the variant (docs/ paths are exempt: they describe).
"""
import pathlib
import re
import sys

SOURCES = ("oracle", "gpu", "properties", "mutants", "plugin", "include", "python/dcp_verify",
           "harness", "tools")
SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py"}
# (the word, its bullet, the list's first words, the words after the list)
LISTS = (("alibi", re.compile(r"alibi", re.I), "A variant", "ALiBi went in as one commit",
          "A variant with a value"),
         ("softcap", re.compile(r"\bsoftcap\b"), "A variant", "A variant with a value", None),
         ("fnuz", re.compile(r"fnuz", re.I), "A storage format", "E4M3FNUZ went in", None))


def listed(doc, title, first, after):
    text = doc.read_text(encoding="utf-8")
    section = text[text.index("## 9. "):]
    start = section.index(f"* **{title}**")
    end = section.index("\n* **", start + 1)
    bullet = section[start:end]
    part = bullet[bullet.index(first):bullet.index(after) if after else len(bullet)]
    return {p for p in re.findall(r"`([\w./-]+/[\w./-]+)`", part) if not p.startswith("docs/")}


def naming(root, word):
    found = set()
    for folder in SOURCES:
        for path in (root / folder).rglob("*"):
            if (path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts
                    and not path.name.startswith("test_")):  # tests kept beside their library
                if word.search(path.read_text(encoding="utf-8", errors="replace")):
                    found.add(path.relative_to(root).as_posix())
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    failed = False
    for name, word, title, first, after in LISTS:
        in_doc = listed(root / "docs" / "layout-and-flow.md", title, first, after)
        in_code = naming(root, word)
        problems = [f"{p}: names {name} but is not in its list in docs/layout-and-flow.md §9"
                    for p in sorted(in_code - in_doc)]
        problems += [f"{p}: in the {name} list of docs/layout-and-flow.md §9 but "
                     + ("does not exist" if not (root / p).exists() else f"no longer names {name}")
                     for p in sorted(in_doc - in_code)]
        for p in problems:
            print("FAILED", p)
        print(f"variant seams ({name}): {len(in_code)} files name it, {len(in_doc)} listed, "
              f"{len(problems)} problems")
        # A scan that found nothing checked nothing.
        failed = failed or bool(problems) or not in_code
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
