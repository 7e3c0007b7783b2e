#!/usr/bin/env bash
# ABI version 2's paged level (include/dcp_verify/impl.h) end to end, from C: the example paged
# kernel (plugin/examples/paged_impl.cpp) passes the property suite with its cache handed over as
# stored (fp8 pages with their scales, block tables over a fragmented pool, decode batches) and a
# batched run in one step; its copy with the K scale applied twice is caught on the fp8 caches with
# a shrunk case; a version-2 plug-in with a field out of range is refused in one line.
# Usage: paged_plugin_test.sh path/to/dcp-verify path/to/libdcpv_paged_example.so \
#          path/to/libdcpv_paged_example_bug.so path/to/libdcpv_paged_example_bad.so
set -u
bin=$1
good=$2
buggy=$3
bad=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=0
failures=0

# shellcheck source=support/expect.sh
source "$(dirname "$0")/support/expect.sh"

expect 0 "paged example, properties" -- "$bin" properties --impl "$good" --cases 100 --seed 1 --json "$tmp/good.json"
contains "$tmp/out" "impl=paged example (" "the header names the plug-in"
contains "$tmp/out" ", paged)" "the header names its level"
contains "$tmp/out" "# properties: OK" "the paged example passes"
# Every property a paged level takes ran, the batch one included.
if python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["properties"]; sys.exit(not [(r["name"], r["result"]) for r in p] == [("pinned", "OK"), ("dcp-path", "OK"), ("dcp-fp8", "OK"), ("dcp-batch", "OK")])' "$tmp/good.json"
then passes=$((passes + 1)); else echo "FAIL: the paged example's properties: not pinned, dcp-path, dcp-fp8, dcp-batch all OK"; failures=$((failures + 1)); fi

expect 0 "paged example, a batch in one step over fp8 pages" -- "$bin" run --impl "$good" --seq 64 --dcp-size 4 --interleave 2 --batch 3 --page-size 8 --kv-dtype fp8e4m3 --kv-scale head --quiet
contains "$tmp/out" "# run: OK" "a batched fp8 run passes"

expect 1 "K scale applied twice, properties" -- "$bin" properties --impl "$buggy" --only dcp-fp8 --cases 100 --seed 1
contains "$tmp/out" "dcp-fp8" "the fp8 property runs"
contains "$tmp/out" "FAILED" "the planted bug is reported FAILED"
contains "$tmp/out" "over bound" "an element over its bound is named"
contains "$tmp/out" "T=1 Hq=1 Hkv=1 Dk=1 Dv=1" "the counterexample is shrunk"

expect 2 "a page layout out of range" -- "$bin" properties --impl "$bad" --cases 1
one_line_stderr "a page layout out of range"
contains "$tmp/err" "page_layout must be DCPV_PAGES_NHD or DCPV_PAGES_HND" "the field is named"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
