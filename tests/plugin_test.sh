#!/usr/bin/env bash
# The C plug-in ABI (include/dcp_verify/impl.h) end to end: the example plug-in passes the property
# suite and the run sweep within the bound of its claim, its copy with a planted bug (a strict
# causal mask) is caught with a shrunk case and a reproduce line that replays it, a level that
# reports an error fails its rows with its message and no err/bound, a level that never returns
# ends the process after --timeout (exit 124, one line naming it), and plug-ins that cannot be
# driven are refused in one line naming --impl.
# Usage: plugin_test.sh path/to/dcp-verify path/to/libdcpv_example.so \
#          path/to/libdcpv_example_bug.so path/to/libdcpv_example_fails.so
set -u
bin=$1
good=$2
buggy=$3
failing=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=0
failures=0

# shellcheck source=support/expect.sh
source "$(dirname "$0")/support/expect.sh"

expect 0 "example plug-in, properties" -- "$bin" properties --impl "$good" --cases 120 --seed 1
contains "$tmp/out" "impl=example (" "properties header names the plug-in"
contains "$tmp/out" "partial+combine+step)" "properties header names its levels"
contains "$tmp/out" "   dcp-step " "the step level runs as a property of its own"
contains "$tmp/out" "# properties: OK" "example plug-in passes the properties"
expect 0 "example plug-in, run sweep" -- "$bin" run --impl "$good" --quiet
contains "$tmp/out" "# run: OK" "example plug-in passes the run sweep"

expect 1 "planted bug, properties" -- "$bin" properties --impl "$buggy" --cases 120 --seed 1 --junit "$tmp/props.xml"
contains "$tmp/out" "dcp-path" "the planted bug fails the dcp-path property"
contains "$tmp/out" "FAILED" "the planted bug is reported FAILED"
contains "$tmp/out" "partial of tp rank" "the report names the rank whose partial is wrong"
contains "$tmp/out" "--only dcp-step --impl" "the step level's failure has its own reproduce line"
contains "$tmp/out" "# properties: FAILED" "the planted bug fails the run"
# The shrunk case: one query head on one rank is enough for a strict causal mask.
contains "$tmp/out" "T=1 Hq=1 Hkv=1 Dk=1 Dv=1" "the counterexample is shrunk"
# --junit: a failing property's test case holds the shrunk case and the line that replays it.
if python3 - "$tmp/props.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot().find("testsuite")
failed = {c.get("name").split(":")[0]: c.find("failure") for c in suite.findall("testcase")}
assert set(failed) == {"pinned", "dcp-path", "dcp-fp8", "dcp-step", "dcp-step-fp8"}, failed
text = failed["dcp-path"].text
assert "T=1 Hq=1 Hkv=1 Dk=1 Dv=1" in text and "reproduce: dcp-verify properties" in text, text
PY
then passes=$((passes + 1)); else echo "FAIL: properties --junit"; failures=$((failures + 1)); fi
line=$(grep -m1 '#    reproduce: ' "$tmp/out" | sed 's/^#    reproduce: dcp-verify //')
cp "$tmp/out" "$tmp/first"
# shellcheck disable=SC2086
expect 1 "planted bug, replayed" -- "$bin" $line
contains "$tmp/out" "FAILED" "the reproduce line replays the failure"
expect 1 "planted bug, run" -- "$bin" run --impl "$buggy" --seq 300 --quiet
contains "$tmp/out" "# run: FAILED" "the planted bug fails a configured run"

# A level that reports an error: the row fails with the plug-in's message; nothing was compared,
# so there is no err/bound to report (not 0).
expect 1 "a failing level, run" -- "$bin" run --impl "$failing" --seq 16 --dcp-size 2 --json "$tmp/fails.json"
contains "$tmp/out" "planted failure: the kernel launch reported an error" "the level's message is shown"
contains "$tmp/out" "max err/bound: -  max err/stat: -" "no err/bound for rows never compared"
if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not (d["max_ratio"] is None and d["max_stat_ratio"] is None and d["failed"] == 1))' "$tmp/fails.json"
then passes=$((passes + 1)); else echo "FAIL: run --json of a failing level: max_ratio not null"; failures=$((failures + 1)); fi

# The same level under the properties: the case it did not finish is ERROR, not FAILED (nothing
# was compared), shrunk, with the level's message; the run ends ERROR, exit 1.
expect 1 "a failing level, properties" -- "$bin" properties --impl "$failing" --only dcp-path --cases 5 --seed 1 --json "$tmp/fails_props.json"
contains "$tmp/out" "# properties: ERROR" "a level's error status ends the run ERROR"
contains "$tmp/out" "level partial on dcp rank 0 failed: planted failure" "the level's message is shown"
if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not [p["result"] for p in d["properties"]] == ["ERROR"])' "$tmp/fails_props.json"
then passes=$((passes + 1)); else echo "FAIL: properties --json of a failing level: result not ERROR"; failures=$((failures + 1)); fi

# A level that never returns cannot be stopped: after --timeout the process ends, naming it.
expect 124 "a level that never returns" -- timeout -s KILL 120 "$bin" properties --impl "$failing" --only dcp-step --cases 1 --seed 1 --timeout 1
one_line_stderr "a level that never returns"
contains "$tmp/err" "level step did not return within 1 s (--timeout)" "the hung level is named"
# ... after the report: the property that finished (dcp-path, ERROR: its partial level fails) and
# the hung one, ERROR, in the table, --json and --junit.
rm -f "$tmp/hang.json" "$tmp/hang.xml"
expect 124 "a level that never returns, the report" -- timeout -s KILL 120 "$bin" properties --impl "$failing" --only dcp-path,dcp-step --cases 1 --seed 1 --timeout 1 --json "$tmp/hang.json" --junit "$tmp/hang.xml"
contains "$tmp/out" "# properties: ERROR" "the report of a hung level ends ERROR"
if python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["properties"]; sys.exit(not ([r["name"] for r in p] == ["dcp-path", "dcp-step"] and [r["result"] for r in p] == ["ERROR", "ERROR"] and "did not return within 1 s" in p[1]["message"]))' "$tmp/hang.json" && [ "$(grep -c '<testcase' "$tmp/hang.xml")" -eq 2 ]
then passes=$((passes + 1)); else echo "FAIL: a hung level: the report (--json, --junit) lacks a row"; failures=$((failures + 1)); fi

# probe: the example's arithmetic (fp32, nearest, libm, no P cast, a two-pass softmax, dots left
# to right) measured and printed as a claim in both vocabularies; its JSON has the same words (an
# fp32 merge: its form is not measured, and no merge_form word is claimed; its step level is not
# probed beside its partial and combine, so no log_rel_err either).
expect 0 "probe the example" -- "$bin" probe --impl "$good" --json "$tmp/probe.json"
contains "$tmp/out" "accum f32  accum_rounding nearest  p_cast none  partial_dtype f32  tile 1  dot_lanes 1  merge_accum f32  merge_lse_accum f32" "the probe's claim words"
contains "$tmp/out" '{"accum":"f32","accum_rounding":"nearest"' "the probe's claim as an implementation's"
if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not (d["schema"] == "dcp-verify/probe/1" and d["claim"]["p_cast"] == "none" and len(d["findings"]) == 13 and d["findings"][-2]["measured"] == "merge form" and d["findings"][-1]["measured"] == "log" and d["findings"][-1]["finding"] == "default" and d["words"]["dot_lanes"] == "1" and "log_rel_err" not in d["words"] and "merge_form" not in d["words"]))' "$tmp/probe.json"
then passes=$((passes + 1)); else echo "FAIL: probe --json"; failures=$((failures + 1)); fi
# A level that fails ends the probe: exit 1, one line naming the experiment and the level.
expect 1 "probe a failing level" -- "$bin" probe --impl "$failing"
one_line_stderr "probe a failing level"
contains "$tmp/err" "experiment 'pairs': implementation 'example'" "the failed probe names the experiment"
expect 2 "probe --impl with the production path's flags" -- "$bin" probe --impl "$good" --p-cast bf16
one_line_stderr "probe --impl --p-cast"

# Plug-ins that cannot be driven: exit 2, one line naming --impl.
echo "not a library" >"$tmp/text.so"
for args in "--impl $tmp/missing.so" "--impl $tmp/text.so" "--impl $good --backend cuda" \
            "--impl $good --exp poly3" "--impl $good --batch 2 --page-size 4"; do
  # shellcheck disable=SC2086
  expect 2 "run $args" -- "$bin" run $args
  one_line_stderr "run $args"
  contains "$tmp/err" "--impl" "run $args names --impl"
done
libm=$(ldd "$bin" | awk '/libm\.so/ {print $3; exit}')
if [ -n "$libm" ]; then
  expect 2 "a library without dcpv_get_impl" -- "$bin" properties --impl "$libm"
  contains "$tmp/err" "exports no dcpv_get_impl" "a library without the symbol is named"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
