#!/usr/bin/env python3
"""The shape of the docs, checked: every relative link and #anchor resolves, every lesson's core
is short, and every lesson and its evidence appendix link each other.

Usage: doc_structure_test.py REPO_ROOT

- Links: each `[text](target)` in README.md, python/README.md and docs/**/*.md whose target is
  not a URL must name an existing file; a `#fragment` must be the anchor of a heading of that
  file (GitHub's rule: lower case, punctuation other than '-' and '_' dropped, spaces to '-',
  a repeated heading gets -1, -2, ...). Links inside code blocks are not links. A link labelled
  with a lesson number ("[05 — ...]", "[lesson 05]") must lead to that lesson's file.
- Cores: a lesson's core is its text before its first `## Exercises` heading (or before
  `## What to run next`, or the whole file). It must be at most CORE_LIMIT_BYTES.
- Appendices: a lesson docs/NN_name.md whose appendix docs/evidence/NN_name.md exists links to
  it, and the appendix links back; no appendix is without its lesson.
"""
import pathlib
import re
import sys

# 10 KiB: a lesson's mathematics, read in one sitting; the evidence goes to its appendix.
CORE_LIMIT_BYTES = 10 * 1024

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def strip_code(text, spans=True):
    """The text with fenced code blocks (and inline code spans, if spans) blanked: links in code
    are not links, and a fence's '# comment' is not a heading."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line) if spans else line)
    return "\n".join(out)


def anchors(path):
    seen, result = {}, set()
    for line in strip_code(path.read_text(encoding="utf-8"), spans=False).split("\n"):
        m = HEADING.match(line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))  # a link's text only
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def core_bytes(text):
    for marker in ("\n## Exercises", "\n## What to run next"):
        at = text.find(marker)
        if at >= 0:
            return len(text[:at].encode("utf-8"))
    return len(text.encode("utf-8"))


def main():
    repo = pathlib.Path(sys.argv[1]).resolve()
    docs = repo / "docs"
    files = [repo / "README.md", repo / "python" / "README.md"] + sorted(docs.rglob("*.md"))
    problems, links = [], 0
    for f in files:
        if not f.exists():
            continue
        text = strip_code(f.read_text(encoding="utf-8"))
        for n, line in enumerate(text.split("\n"), 1):
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z]+:", target):
                    continue
                links += 1
                where = f"{f.relative_to(repo)}:{n}"
                name, _, fragment = target.partition("#")
                dest = (f.parent / name).resolve() if name else f
                if not dest.exists():
                    problems.append(f"{where}: link to {target}: no such file")
                    continue
                if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                    problems.append(f"{where}: link to {target}: no heading with anchor #{fragment}")
                # A link labelled with a lesson's number ("[05 — ...]", "[lesson 05]") must lead to
                # that lesson: the lessons were renumbered once, and labels drift.
                said = re.match(r"^!?\[(?:[Ll]esson )?(\d\d)\b", m.group(0))
                lesson = re.match(r"^(\d\d)_", dest.name)
                if said and lesson and said.group(1) != lesson.group(1):
                    problems.append(f"{where}: link labelled {said.group(1)} leads to {dest.name}")

    lessons = sorted(docs.glob("[0-9][0-9]_*.md"))
    for lesson in lessons:
        size = core_bytes(lesson.read_text(encoding="utf-8"))
        verdict = "ok" if size <= CORE_LIMIT_BYTES else "TOO LONG"
        print(f"core {lesson.name:36s} {size:6d} B  (limit {CORE_LIMIT_BYTES})  {verdict}")
        if size > CORE_LIMIT_BYTES:
            problems.append(f"docs/{lesson.name}: core is {size} B, over {CORE_LIMIT_BYTES} B")
        appendix = docs / "evidence" / lesson.name
        if appendix.exists():
            if f"evidence/{lesson.name}" not in lesson.read_text(encoding="utf-8"):
                problems.append(f"docs/{lesson.name}: does not link its appendix evidence/{lesson.name}")
            if f"../{lesson.name}" not in appendix.read_text(encoding="utf-8"):
                problems.append(f"docs/evidence/{lesson.name}: does not link back to ../{lesson.name}")
    for appendix in sorted((docs / "evidence").glob("*.md")):
        if not (docs / appendix.name).exists():
            problems.append(f"docs/evidence/{appendix.name}: no lesson docs/{appendix.name}")

    for p in problems:
        print("FAILED", p)
    print(f"doc structure: {links} links in {len(files)} files, {len(lessons)} lessons, "
          f"{len(problems)} problems")
    # A run that checked nothing proves nothing.
    return 1 if problems or links == 0 or not lessons else 0


if __name__ == "__main__":
    sys.exit(main())
