"""The Python blocks of the lessons and of python/README.md marked `<!-- run: dcp_verify -->`, run
as written with the installed package (docs/00_start_here.md, "Conventions of these lessons")."""

import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FILES = ["docs/10_gate_your_own_kernel.md", "python/README.md"]


def blocks():
    for name in FILES:
        lines = open(os.path.join(ROOT, name), encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            if re.match(r"^<!--\s*run:\s*dcp_verify\s*-->\s*$", line) and lines[i + 1] == "```python":
                end = lines.index("```", i + 2)
                yield pytest.param("\n".join(lines[i + 2:end]), id=f"{name}:{i + 3}")


@pytest.mark.parametrize("code", list(blocks()))
def test_block_runs(code, capsys):
    namespace = {"__name__": "__doc_block__"}
    exec(compile(code, "<doc block>", "exec"), namespace)
    for name, fn in list(namespace.items()):  # a block's test functions run too
        if name.startswith("test_") and callable(fn):
            fn()


def test_blocks_are_found():
    assert len(list(blocks())) == len(FILES)
