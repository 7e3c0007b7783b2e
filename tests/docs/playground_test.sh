#!/usr/bin/env bash
# The playground page (docs/playground/index.html) in headless Chromium: for several inputs set
# through its query string, the numbers it shows must equal dcp-verify's for the same inputs
# (`layout`: each rank's share of a chunk and the rows it fills; `model`: the two attention
# times, the communication, the speedup, whether DCP pays, the break-even length), and its
# merge of two shifted partials must equal the formula's; a query it cannot hold is refused by
# name. Saves a screenshot of the page in OUT.
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
# Two partials with a shifted LSE: the page's O(c) is the weighted merge, not the mean.
for c in -3 0 1 2.5; do
  dom "c=$c" > "$work/page.html"
  python3 - "$work/page.html" "$c" <<'PY' || fail=1
import math, re, sys
page, c = open(sys.argv[1]).read(), float(sys.argv[2])
got = {k: float(re.search(rf'id="{k}" class="out">([^<]*)<', page).group(1)) for k in ("merged", "mean")}
w1 = math.exp(c) / (1 + math.exp(c))  # L0 = L1 = 0, O0 = 1, O1 = 3
want = {"merged": round((1 - w1) * 1 + w1 * 3, 6), "mean": 2.0}
if got != want:
    sys.exit(f"FAIL: shift c = {c}: page {got}, expected {want}")
PY
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
# The page typesets its formulas with KaTeX where Debian's libjs-katex is installed.
if [ -f /usr/share/javascript/katex/katex.min.js ]; then
  dom "" | grep -q 'class="katex"' || { echo "FAIL: KaTeX is installed but typeset nothing"; fail=1; }
fi
timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --virtual-time-budget=3000 \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size=1000,1750 \
  --screenshot="$out/playground.png" "$page" >/dev/null 2>&1
[ -s "$out/playground.png" ] || { echo "FAIL: no screenshot written"; fail=1; }
[ "$fail" = 0 ] && echo "playground: OK (layout 5, model 5, shift 4, bad query 1; screenshot $out/playground.png)"
exit "$fail"
