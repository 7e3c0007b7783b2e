#!/usr/bin/env bash
# Runs the command blocks of the lessons (docs/[0-9][0-9]_*.md), their evidence appendices
# (docs/evidence/), the mutation catalogue (docs/mutants.md) and the command-line reference
# (docs/cli.md), so the docs cannot drift from the code. ctest runs one file a test
# (docs.blocks.NAME); with no FILE, all of them in one go.
# Usage: doc_blocks_test.sh REPO_ROOT BUILD_DIR [FILE...]
#
# Conventions (docs/00_start_here.md, "Conventions of these lessons"):
#   ```sh blocks run with bash -euo pipefail, in a scratch directory where build/, fixtures/,
#   tools/, docs/, include/ and plugin/ point at the repository's, so relative paths work and
#   outputs stay out of the tree. The block must exit 0 unless an `<!-- exit: N -->` line stands right above the fence.
#   `<!-- expect: TEXT -->` lines right above the fence: TEXT must appear in the block's stdout.
#   A ```text block right after a run block (only blank lines between) is its shown output: each
#   of its lines must be a line the block printed, wall-clock figures aside (shown_output.py).
#   A ```console block is a session: its "$ " lines run (dcp-verify, also after mpirun -np P, as
#   build/bin/dcp-verify), and its other lines are their shown output, checked the same way.
#   `<!-- run: python -->` above a ```python block runs it with /usr/bin/python3 the same way.
#   Both find tools/py (dcp_st: safetensors with numpy) on PYTHONPATH. (`<!-- run: dcp_verify -->`
#   blocks need the Python package: tests/python/test_docs.py runs those.)
#   Blocks of any other language (text, cpp) are shown, not run.
set -u
repo=$1
build=$2
shift 2
if [ $# -gt 0 ]; then files=("$@"); else
  files=("$repo"/docs/[0-9][0-9]_*.md "$repo"/docs/evidence/*.md "$repo/docs/mutants.md"
         "$repo/docs/cli.md")
fi

# mpirun in a console block: allowed as root, and more processes than cores (as in tests/mpi).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ln -s "$build" "$scratch/build"
for d in fixtures tools docs include plugin; do ln -s "$repo/$d" "$scratch/$d"; done

passed=0 failed=0 shown=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  # Split the file into blocks: for each runnable fence, write its body and its directives.
  rm -rf "$scratch/blocks" && mkdir "$scratch/blocks"
  python3 - "$f" "$scratch/blocks" <<'PY'
import json, re, sys
path, out = sys.argv[1], sys.argv[2]
lines = open(path, encoding="utf-8").read().split("\n")
n, i, pending = 0, 0, []
while i < len(lines):
    line = lines[i]
    m = re.match(r"^<!--\s*(exit|expect|run):\s*(.*?)\s*-->\s*$", line)
    if m:
        pending.append((m.group(1), m.group(2)))
        i += 1
        continue
    fence = re.match(r"^```(\w*)\s*$", line)
    if fence:
        lang, start = fence.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[start:j]) + "\n"
        d = dict(exit=0, expect=[], run=None)
        for k, v in pending:
            if k == "exit": d["exit"] = int(v)
            elif k == "expect": d["expect"].append(v)
            else: d[k] = v
        runnable = lang in ("sh", "console") or (lang == "python" and d["run"] == "python")
        if lang == "console":
            # A session: "$ " lines are commands (a trailing \ continues one), the rest is what
            # they print. Each command runs in turn; one that crashes or is not found (exit 126
            # or more) fails the block, any other exit is judged by the output shown.
            script, shown, k, block = ["set +e"], [], 0, lines[start:j]
            while k < len(block):
                if not block[k].startswith("$ "):
                    shown.append(block[k])
                    k += 1
                    continue
                command = block[k][2:]
                shown.append(block[k])
                while command.endswith("\\") and k + 1 < len(block):
                    k += 1
                    command = command[:-1] + " " + block[k].strip()
                    shown.append("$ " + block[k])
                command = re.sub(r"^(mpirun -np \d+ )?dcp-verify ", r"\1build/bin/dcp-verify ", command)
                script += [command, 's=$?; [ "$s" -lt 126 ] || exit "$s"']
                k += 1
            body = "\n".join(script + ["exit 0"]) + "\n"
        if runnable:
            n += 1
            d.update(lang=lang, line=start, body=body, shown=None)
            # A console block shows its own output; otherwise a ```text block right after the
            # block (blank lines between, nothing else) is its output.
            k = j + 1
            while k < len(lines) and not lines[k].strip():
                k += 1
            if lang == "console":
                d["shown"] = dict(line=start + 1, lines=shown)
            elif k < len(lines) and re.match(r"^```text\s*$", lines[k]):
                e = k + 1
                while e < len(lines) and not lines[e].startswith("```"):
                    e += 1
                d["shown"] = dict(line=k + 2, lines=lines[k + 1:e])
            json.dump(d, open(f"{out}/{n:03d}.json", "w"))
        pending = []
        i = j + 1
        continue
    if line.strip():
        pending = []
    i += 1
PY
  [ $? -eq 0 ] || { echo "FAILED ${f#"$repo"/}: its blocks could not be read"; failed=$((failed + 1)); }
  for spec in "$scratch"/blocks/*.json; do
    [ -e "$spec" ] || continue
    eval "$(python3 - "$spec" <<'PY'
import json, shlex, sys
d = json.load(open(sys.argv[1]))
open(sys.argv[1] + ".body", "w").write(d["body"])
open(sys.argv[1] + ".expect", "w").write("\n".join(d["expect"]) + ("\n" if d["expect"] else ""))
json.dump(d["shown"], open(sys.argv[1] + ".shown", "w"))
print(f"lang={shlex.quote(d['lang'])} line={d['line']} want={d['exit']}")
PY
)"
    where="${f#"$repo"/}:$line"
    if [ "$lang" = python ]; then
      (cd "$scratch" && PYTHONPATH="$repo/tools/py" /usr/bin/python3 "$spec.body") \
        >"$scratch/out" 2>"$scratch/err"
    else
      (cd "$scratch" && PYTHONPATH="$repo/tools/py" bash -euo pipefail "$spec.body") \
        >"$scratch/out" 2>"$scratch/err"
    fi
    got=$?
    ok=1
    [ "$got" -eq "$want" ] || { ok=0; echo "FAILED $where: exit $got, expected $want"; }
    while IFS= read -r text; do
      [ -n "$text" ] || continue
      grep -qF -- "$text" "$scratch/out" || { ok=0; echo "FAILED $where: '$text' not in the output"; }
    done <"$spec.expect"
    python3 "$repo/tests/docs/shown_output.py" "$spec.shown" "$scratch/out" "$scratch/err" \
      "${f#"$repo"/}" "$repo" "$build" || ok=0
    [ "$(cat "$spec.shown")" = null ] || shown=$((shown + 1))
    if [ "$ok" -eq 1 ]; then
      echo "ok      $where"
      passed=$((passed + 1))
    else
      sed 's/^/  stdout: /' "$scratch/out" | tail -8
      sed 's/^/  stderr: /' "$scratch/err" | tail -8
      failed=$((failed + 1))
    fi
  done
done
echo "doc blocks: $passed passed, $failed failed; $shown shown outputs compared with what their block printed"
# A run in which nothing ran proves nothing.
[ "$passed" -gt 0 ] || { echo "doc blocks: no block ran"; exit 1; }
[ "$failed" -eq 0 ]
