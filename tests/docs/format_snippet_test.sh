#!/usr/bin/env bash
# The Python snippet of docs/format.md, run for real, so that the doc cannot drift from the file
# formats: the fenced ```python block that follows the marker <!-- test: format-snippet --> is
# run in an empty directory; it must write case.safetensors and result.safetensors that
# `dcp-verify check` accepts (exit 0, "# check: OK"). Then a copy of the result whose output was
# computed with one token lost must fail (exit 1).
#
# Needs /usr/bin/python3 with numpy (Debian python3-numpy; `python3` on PATH may be another
# interpreter). Without them it prints the reason and exits 77, which ctest reports as skipped.
# The safetensors package is used when installed; otherwise tests/docs/safetensors_shim stands in.
# Usage: format_snippet_test.sh path/to/dcp-verify path/to/source-root
set -u
bin=$1
root=$2
python=/usr/bin/python3
doc="$root/docs/format.md"
shim="$root/tests/docs/safetensors_shim"
marker='<!-- test: format-snippet -->'
readonly kSkip=77

if [ ! -x "$python" ]; then
  echo "SKIP: $python not found (the snippet needs Python 3 with numpy: apt-get install" \
    "python3-numpy)"
  exit "$kSkip"
fi
if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: numpy is not installed for $python (apt-get install python3-numpy)"
  exit "$kSkip"
fi
if [ ! -x "$bin" ]; then
  echo "FAIL: dcp-verify not found at '$bin'"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The fenced python block right after the marker (the marker must be followed by the fence).
if ! awk -v marker="$marker" '
  found == 0 && index($0, marker) == 1 { found = 1; next }
  found == 1 { if ($0 == "```python") { found = 2; next } exit 2 }
  found == 2 { if ($0 == "```") { found = 3; exit 0 } print }
  END { if (found != 3) exit 2 }
' "$doc" >"$tmp/snippet.py" || [ ! -s "$tmp/snippet.py" ]; then
  echo "FAIL: no \`\`\`python block right after '$marker' in $doc"
  exit 1
fi

if "$python" -c 'import safetensors.numpy' 2>/dev/null; then
  echo "using the installed safetensors package"
else
  echo "safetensors is not installed: using the stand-in in $shim"
  export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi

failures=0
fail() {
  echo "FAIL: $1"
  failures=$((failures + 1))
}

(cd "$tmp" && "$python" snippet.py) || {
  echo "FAIL: the snippet of $doc did not run"
  exit 1
}
for f in case.safetensors result.safetensors; do
  [ -s "$tmp/$f" ] || fail "the snippet wrote no $f"
done

"$bin" check --case "$tmp/case.safetensors" --result "$tmp/result.safetensors" >"$tmp/out" 2>&1
code=$?
cat "$tmp/out"
[ "$code" -eq 0 ] || fail "check of the snippet's result: exit $code, expected 0"
grep -qF "# check: OK" "$tmp/out" || fail "check of the snippet's result: no '# check: OK'"

# The same result with the output of a kernel that lost key 0 (the partials are left correct, so
# the merge is blamed). Recomputed in float64 from the case file; the case must be plain: q, k, v
# as floats, causal, the default scale and query positions.
if ! "$python" - "$tmp/case.safetensors" "$tmp/result.safetensors" "$tmp/lost.safetensors" <<'PY'; then
import json
import sys

import numpy as np
from safetensors.numpy import save_file

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8"}


def read(path):
    """Tensors (as numpy arrays) and metadata of a safetensors file with no BF16 tensors."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return tensors, meta


case, case_meta = read(sys.argv[1])
result, result_meta = read(sys.argv[2])
assert set(case) == {"q", "k", "v"}, f"the corruption step expects q, k, v only; got {sorted(case)}"
assert case_meta.get("causal", "1") == "1" and not {"scale", "window", "softcap"} & set(case_meta)
q, k, v = (case[x].astype(np.float64) for x in ("q", "k", "v"))
T, Hq, Dk = q.shape
S, Hkv, _ = k.shape
kv_head = np.arange(Hq) // (Hq // Hkv)
s = np.einsum("thd,shd->ths", q, k[:, kv_head]) / np.sqrt(Dk)  # [T, Hq, S]
visible = np.arange(S)[None, None, :] <= (S - T + np.arange(T))[:, None, None]
visible &= np.arange(S)[None, None, :] != 0  # the lost token
s = np.where(visible, s, -np.inf)
m = s.max(axis=-1, keepdims=True)
p = np.exp(s - m)
o = np.einsum("ths,shd->thd", p, v[:, kv_head]) / p.sum(axis=-1, keepdims=True)
lse = (m + np.log(p.sum(axis=-1, keepdims=True)))[..., 0]
if case_meta.get("lse_base", "e") == "2":
    lse = lse / np.log(2.0)
result["o"] = o.astype(result["o"].dtype)
result["lse"] = lse.astype(result["lse"].dtype)
save_file({name: np.ascontiguousarray(t) for name, t in result.items()}, sys.argv[3],
          metadata=result_meta)
PY
  fail "could not write the result with a lost token"
fi

if [ -s "$tmp/lost.safetensors" ]; then
  "$bin" check --case "$tmp/case.safetensors" --result "$tmp/lost.safetensors" --quiet \
    >"$tmp/out" 2>&1
  code=$?
  cat "$tmp/out"
  [ "$code" -eq 1 ] || fail "check of the result with a lost token: exit $code, expected 1"
  grep -qF "# check: FAILED (the merged output violates its bound" "$tmp/out" ||
    fail "check of the result with a lost token: the merged output is not blamed"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "OK: the snippet of docs/format.md writes files that dcp-verify check accepts;" \
  "a lost token fails"
