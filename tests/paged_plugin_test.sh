#!/usr/bin/env bash
# The paged level (include/dcp_verify/impl.h, versions 2 to 4) end to end, from C: the example
# paged kernel (plugin/examples/paged_impl.cpp, version 4) passes the property suite with its cache
# handed over as stored (fp8 pages with their scales, by head, token or page, block tables over a
# fragmented pool, decode batches, ALiBi) and a batched run in one step; its copy with the K scale
# applied twice is caught on the fp8 caches with a shrunk case, and with ALiBi's bias on the local
# row on an ALiBi run; a plug-in with any field out of range is refused in one line naming it; the
# same kernel as version 2 is never handed ALiBi or scales by token, nor as version 3 scales by
# page.
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
expect 0 "paged example, int8 pages with scales by token and KV head, ALiBi" -- "$bin" run --impl "$good" --seq 96 --dcp-size 4 --interleave 2 --page-size 8 --kv-dtype int8 --kv-scale token_head --alibi --quiet
contains "$tmp/out" "# run: OK" "scales by token and ALiBi reach a version-3 plug-in and pass"
expect 0 "paged example, E4M3 pages with a scale per page and KV head" -- "$bin" run --impl "$good" --seq 300 --dcp-size 4 --interleave 2 --page-size 8 --kv-dtype fp8e4m3 --kv-scale page_head --quiet
contains "$tmp/out" "# run: OK" "scales by page reach a version-4 plug-in and pass"
expect 1 "K scale applied twice, scales by page" -- "$bin" run --impl "$buggy" --seq 300 --dcp-size 4 --interleave 2 --page-size 8 --kv-dtype int8 --kv-scale page --quiet
contains "$tmp/out" "FAILED" "the K scale twice over scales by page is FAILED"
expect 1 "ALiBi on the local row, run" -- env DCPV_PAGED_BUG=alibi_local "$bin" run --impl "$buggy" --seq 96 --dcp-size 4 --alibi --quiet
contains "$tmp/out" "FAILED" "ALiBi's bias on the rank-local row is FAILED"
# The properties draw ALiBi for the version-3 example: its local-row copy fails there too (the
# correct example passed the same seed above), shrunk to a case that uses it.
expect 1 "ALiBi on the local row, properties" -- env DCPV_PAGED_BUG=alibi_local "$bin" properties --impl "$buggy" --only dcp-path --cases 100 --seed 1
contains "$tmp/out" "ALiBi on the local row" "the header names the planted bug"
contains "$tmp/out" "FAILED" "the drawn ALiBi cases catch it"
contains "$tmp/out" "alibi" "the counterexample uses ALiBi"

expect 1 "K scale applied twice, properties" -- "$bin" properties --impl "$buggy" --only dcp-fp8 --cases 100 --seed 1
contains "$tmp/out" "dcp-fp8" "the fp8 property runs"
contains "$tmp/out" "FAILED" "the planted bug is reported FAILED"
contains "$tmp/out" "over bound" "an element over its bound is named"
contains "$tmp/out" "T=1 Hq=1 Hkv=1 Dk=1 Dv=1" "the counterexample is shrunk"

# Version-2 and 3 fields out of range: exit 2, one line naming the field.
for case in "layout|page_layout must be DCPV_PAGES_NHD or DCPV_PAGES_HND" \
            "dequant|kv_dequant must be DCPV_F32, DCPV_BF16 or DCPV_F16" \
            "lacks|lacks has bits outside DCPV_LACKS_* of ABI version 4" \
            "lacks_v2|lacks has bits outside DCPV_LACKS_* of ABI version 2" \
            "version|dcpv_get_impl_v2 gave ABI version 5; expected 2, 3 or 4" \
            "both|provides both paged and partial" \
            "null|dcpv_get_impl_v2 returned NULL"; do
  field=${case%%|*}
  expect 2 "v2 field: $field" -- env DCPV_PAGED_BAD="$field" "$bin" properties --impl "$bad" --cases 1
  one_line_stderr "v2 field: $field"
  contains "$tmp/err" "${case#*|}" "v2 field $field is named"
done

# A feature the plug-in lacks: run's default sweep leaves its rows out, a case asking for it is
# refused naming it.
expect 0 "run, the whole sweep" -- "$bin" run --impl "$good"
contains "$tmp/out" "+cap" "the default sweep has soft-cap rows"
expect 0 "run, lacking the soft-cap" -- env DCPV_PAGED_BAD=no_softcap "$bin" run --impl "$bad"
contains "$tmp/out" "# run: OK" "a sweep without the lacked feature passes"
if grep -qF "+cap" "$tmp/out"; then
  echo "FAIL: run, lacking the soft-cap: a soft-cap row ran"; failures=$((failures + 1))
else passes=$((passes + 1)); fi
expect 2 "run --softcap, lacking it" -- env DCPV_PAGED_BAD=no_softcap "$bin" run --impl "$bad" --softcap 30
one_line_stderr "run --softcap, lacking it"
contains "$tmp/err" "the implementation lacks softcap" "the lacked feature is named"
# Version 3's features never reach a version-2 plug-in: a run asking for one is refused naming it,
# and its properties pass without drawing them.
expect 2 "run --alibi through a version-2 plug-in" -- env DCPV_PAGED_BAD=v2 "$bin" run --impl "$bad" --alibi
one_line_stderr "run --alibi through a version-2 plug-in"
contains "$tmp/err" "the plug-in's ABI version does not carry alibi" "the feature version 2 lacks is named"
expect 2 "run, scales by token through a version-2 plug-in" -- env DCPV_PAGED_BAD=v2 "$bin" run --impl "$bad" --kv-dtype int8 --kv-scale token
one_line_stderr "run, scales by token through a version-2 plug-in"
contains "$tmp/err" "the plug-in's ABI version does not carry token_scales" "scales by token are named"
expect 0 "a version-2 plug-in, properties" -- env DCPV_PAGED_BAD=v2 "$bin" properties --impl "$bad" --cases 60 --seed 1
contains "$tmp/out" "# properties: OK" "a version-2 paged plug-in still passes"
expect 2 "run, scales by page through a version-3 plug-in" -- env DCPV_PAGED_BAD=v3 "$bin" run --impl "$bad" --kv-dtype int8 --kv-scale page --page-size 8
one_line_stderr "run, scales by page through a version-3 plug-in"
contains "$tmp/err" "the plug-in's ABI version does not carry page_scales" "scales by page are named"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
