#!/usr/bin/env bash
# The playground page (docs/playground/index.html) in headless Chromium: for several inputs set
# through its query string, covering every control, the numbers it shows must equal dcp-verify's
# for the same inputs (`layout`: each rank's share of a chunk, the rows it fills, each token's row
# in the strip; `model`: the two attention times, the bytes and collectives of the communication,
# its time, the speedup, whether DCP pays, the break-even length, for the shape, S, B, KV format,
# bandwidths and latency and for N, TP, the combine, the q path and the partials' format, a
# geometry the model refuses refused in its words), and its merge of two shifted partials must
# equal the formula's, with the LSE bases mixed too; a query it cannot hold is refused by name;
# its formulas are MathML. Saves a screenshot of the page in OUT.
# Exit 77 (a skip, with its reason) where Chromium is not installed.
# Usage: playground_test.sh REPO_ROOT path/to/dcp-verify OUT_DIR
set -u
repo=$1 dcp=$2 out=$3
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "skipped: no chromium on this machine (tools/test installs Debian's chromium)"
  exit 77
fi
mkdir -p "$out"
page="file://$repo/docs/playground/index.html"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
# dom QUERY: the page's DOM once its script has run.
dom() {
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --virtual-time-budget=3000 \
    --user-data-dir="$work/profile" --dump-dom "$page?$1" 2>/dev/null
}
# shoot: the screenshot of the page as it opens, into OUT/playground.png.
shoot() {
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --virtual-time-budget=3000 \
    --user-data-dir="$work/profile" --hide-scrollbars --window-size=1000,2350 \
    --screenshot="$out/playground.png" "$page" >/dev/null 2>&1
  [ -s "$out/playground.png" ] || { echo "FAIL: no screenshot written"; fail=1; }
}
# PLAYGROUND_SHOT_ONLY=1: the screenshot alone (tools/figures draws the figure from it; the checks
# below are ctest's docs.playground).
if [ "${PLAYGROUND_SHOT_ONLY:-0}" = 1 ]; then
  shoot
  exit "$fail"
fi
# Layout: N I a L.
for args in "4 2 3 21" "8 1 0 20" "3 5 7 40" "16 16 64 96" "5 3 0 0"; do
  set -- $args
  dom "n=$1&i=$2&a=$3&len=$4" > "$work/page.html"
  "$dcp" layout --dcp-size "$1" --interleave "$2" --offset "$3" --len "$4" > "$work/cli.txt" ||
    { echo "FAIL: dcp-verify layout $args"; fail=1; continue; }
  python3 - "$work/page.html" "$work/cli.txt" "$args" <<'PY' || fail=1
import re, sys
page, cli, what = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
if 'data-ready="yes"' not in page:
    sys.exit(f"FAIL: layout {what}: the page's script did not finish")
if '<p id="query-problems" hidden="">' not in page:
    sys.exit(f"FAIL: layout {what}: the page refused a valid query")
shown = {int(r): (int(s), rows) for r, s, rows in
         re.findall(r'id="share-(\d+)">(\d+)</td><td id="rows-\d+">(\[[^<]*\))', page)}
table = cli.split("# chunk shares")[1].split("# context")[0] if "# context" in cli else cli.split("# chunk shares")[1]
want = {int(m[0]): (int(m[1]), m[2]) for m in
        re.findall(r"^\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s+(\[\d+, \d+\))\s+OK$", table, re.M)}
n = int(what.split()[0])
if len(want) != n or shown != want:
    sys.exit(f"FAIL: layout N I a L = {what}: page {shown}, dcp-verify layout {want}")
# The token strip: each position's row, against the CLI's table of positions.
strip = {int(p): int(r) for p, r in re.findall(r'id="tok-(\d+)"[^>]*>\d+<small>row (\d+)</small>', page)}
rows = {int(m[0]): int(m[2]) for m in re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+OK$", cli, re.M)}
if strip != rows:
    sys.exit(f"FAIL: layout N I a L = {what}: the strip's rows {strip}, dcp-verify layout {rows}")
PY
done
# The model: preset, log2 S, B, KV format (preset: the shape's), HBM, link, latency.
for args in "k3-mla 17 1 preset 4800 450 10.6" "llama3-70b 20 8 bf16 4800 450 10.6" \
  "k3-mla-fp8 12 32 preset 3300 200 25" "deepseek-v3 15 4 f16 8000 900 0" \
  "llama3-70b 17 1 preset 4800 450 10.6"; do
  set -- $args
  dom "preset=$1&log2s=$2&batch=$3&kv=$4&hbm=$5&link=$6&latency=$7" > "$work/page.html"
  kv=()
  [ "$4" != preset ] && kv=(--kv-dtype "$4")
  "$dcp" model --preset "$1" --seq $((1 << $2)) --batch "$3" "${kv[@]}" --hbm-gbps "$5" \
    --link-gbps "$6" --latency-us "$7" > "$work/cli.txt" ||
    { echo "FAIL: dcp-verify model $args"; fail=1; continue; }
  python3 - "$work/page.html" "$work/cli.txt" "$args" <<'PY' || fail=1
import re, sys
page, cli, what = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
if 'data-ready="yes"' not in page:
    sys.exit(f"FAIL: model {what}: the page's script did not finish")
if '<p id="query-problems" hidden="">' not in page:
    sys.exit(f"FAIL: model {what}: the page refused a valid query")
def shown(i):
    m = re.search(rf'id="{i}" class="out">([^<]*)<', page)
    return m.group(1) if m else None
row = [l for l in cli.splitlines() if l and not l.startswith("#")]
assert len(row) == 1, row
_, _, _, t_tp, t_dcp, t_comm, speedup, pays = row[0].split()
be = re.search(r"# break-even S\*: (\d+|never)", cli).group(1)
want = {"t-tp": t_tp, "t-dcp": t_dcp, "t-comm": t_comm, "speedup": speedup, "pays": pays,
        "break-even": be}
got = {k: shown(k) for k in want}
if got != want:
    sys.exit(f"FAIL: model {what}: page {got}, dcp-verify model {want}")
PY
done
# The deployment's choices: preset, log2 S, B, N, TP, combine, q path, partial format (preset: the
# shape's), against the same flags of `dcp-verify model`; a geometry the model refuses is refused
# on the page in its words.
model_runs=0
for args in "k3-mla 17 1 4 16 ag_rs gather bf16" "llama3-70b 19 8 2 8 a2a replicate f16" \
  "deepseek-v3 14 32 8 8 preset preset f32" "k3-mla-fp8 20 1 1 1 a2a gather f32" \
  "llama3-70b 16 1 16 16 ag_rs preset bf16" "k3-mla 17 1 16 preset preset preset f32"; do
  set -- $args
  dom "preset=$1&log2s=$2&batch=$3&dcp=$4&tp=$5&comm=$6&qpath=$7&partial=$8" > "$work/page.html"
  flags=(--preset "$1" --seq $((1 << $2)) --batch "$3" --dcp-size "$4" --partial-dtype "$8")
  [ "$5" != preset ] && flags+=(--tp-size "$5")
  [ "$6" != preset ] && flags+=(--comm-backend "$6")
  [ "$7" = gather ] && flags+=(--gather-q)
  [ "$7" = replicate ] && flags+=(--replicate-q)
  "$dcp" model "${flags[@]}" > "$work/cli.txt" 2> "$work/cli.err"
  echo "$?" > "$work/cli.rc"
  model_runs=$((model_runs + 1))
  python3 - "$work/page.html" "$work/cli.txt" "$work/cli.err" "$work/cli.rc" "$args" <<'PY' || fail=1
import re, sys
page, cli, err = (open(f).read() for f in sys.argv[1:4])
rc, what = int(open(sys.argv[4]).read()), sys.argv[5]
if 'data-ready="yes"' not in page or '<p id="query-problems" hidden="">' not in page:
    sys.exit(f"FAIL: model choices {what}: the page did not finish or refused the query")
def shown(i):
    m = re.search(rf'id="{i}" class="out">([^<]*)<', page)
    return m.group(1) if m else None
if rc == 2:  # refused: the page says why, in the CLI's words, and computes nothing
    why = err.strip().split(": ", 1)[1]
    if shown("geometry") != why or shown("t-comm") != "-":
        sys.exit(f"FAIL: model choices {what}: the CLI refused ({why}); the page shows "
                 f"{shown('geometry')!r}, T_comm {shown('t-comm')!r}")
    sys.exit(0)
row = [l for l in cli.splitlines() if l and not l.startswith("#")]
assert rc == 0 and len(row) == 1, (rc, row)
_, _, comm_b, t_tp, t_dcp, t_comm, speedup, pays = row[0].split()
be = re.search(r"# break-even S\*: (\d+|never)", cli).group(1)
count = re.search(r"#  T_comm = (\d+) x", cli)
want = {"t-tp": t_tp, "t-dcp": t_dcp, "t-comm": t_comm, "speedup": speedup, "pays": pays,
        "break-even": be, "collectives": count.group(1) if count else "0",
        "comm-bytes": comm_b}
got = {k: shown(k) for k in want}
got["comm-bytes"] = got["comm-bytes"].rsplit("= ", 1)[-1] if got["comm-bytes"] else None
if got != want:
    sys.exit(f"FAIL: model choices {what}: page {got}, dcp-verify model {want}")
PY
done
# Two partials with a shifted LSE: the page's O(c) is the weighted merge, not the mean; with the
# bases mixed, its merge takes shard 1's base-2 LSE as base e, and is wrong unless c = 0.
shift_runs=0
for mix in 0 1; do
  for c in -3 0 1 2.5; do
    dom "c=$c&mixbase=$mix" > "$work/page.html"
    shift_runs=$((shift_runs + 1))
    python3 - "$work/page.html" "$c" "$mix" <<'PY' || fail=1
import math, re, sys
page, c, mix = open(sys.argv[1]).read(), float(sys.argv[2]), sys.argv[3] == "1"
keys = ("merged", "mean", "as-merged")
got = {k: float(re.search(rf'id="{k}" class="out">([^<]*)<', page).group(1)) for k in keys}
w1 = math.exp(c) / (1 + math.exp(c))  # L0 = L1 = 0, O0 = 1, O1 = 3
l1 = c * math.log2(math.e) if mix else c
v1 = math.exp(l1) / (1 + math.exp(l1))
want = {"merged": round((1 - w1) * 1 + w1 * 3, 6), "mean": 2.0, "as-merged": round(1 + 2 * v1, 6)}
if got != want:
    sys.exit(f"FAIL: shift c = {c}, bases mixed {mix}: page {got}, expected {want}")
if mix and c != 0 and abs(got["as-merged"] - got["merged"]) < 1e-3:
    sys.exit(f"FAIL: shift c = {c}: mixing the bases left the merge right")
PY
  done
done
# A query the inputs cannot hold is refused, one line per key naming it, and the page shows what
# it shows for no query at all (nothing clamped, snapped or left half drawn).
dom "" > "$work/default.html"
dom "preset=nope&tflops=abc&n=99&latency=10.63&zz=1&i=&a=2.5" > "$work/page.html"
python3 - "$work/page.html" "$work/default.html" <<'PY' || fail=1
import re, sys
page, default = open(sys.argv[1]).read(), open(sys.argv[2]).read()
if 'data-ready="yes"' not in page:
    sys.exit("FAIL: bad query: the page's script did not finish")
box = re.search(r'<p id="query-problems">(.*?)</p>', page, re.S)
lines = box.group(1).splitlines() if box else []
keys = [re.match(r"query (\w+)=", l).group(1) for l in lines if re.match(r"query \w+=", l)]
if keys != ["preset", "tflops", "n", "latency", "zz", "i", "a"]:
    sys.exit(f"FAIL: bad query: problems {lines}")
outputs = lambda html: re.findall(r'id="[\w-]+" class="out">[^<]*<|id="(?:share|rows)-\d+">[^<]*<', html)
if outputs(page) != outputs(default):
    sys.exit("FAIL: bad query: the page's numbers differ from its defaults")
PY
# The formulas are MathML, drawn by the browser: five of them, and no TeX source left.
dom "" > "$work/page.html"
maths=$(grep -o '<math' "$work/page.html" | wc -l)
if [ "$maths" -lt 5 ] || grep -qE '\\(frac|mathrm|lfloor)' "$work/page.html"; then
  echo "FAIL: the page holds $maths MathML formulas (expected 5 or more) or TeX source"; fail=1
fi
shoot
[ "$fail" = 0 ] && echo "playground: OK (layout and strip 5, model 5, model choices $model_runs, shift $shift_runs, bad query 1, MathML $maths; screenshot $out/playground.png)"
exit "$fail"
