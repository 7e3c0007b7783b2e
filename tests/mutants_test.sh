#!/usr/bin/env bash
# The mutation catalogue in CI: every bug of mutants/catalogue.hpp planted in the step is killed by
# the property suite with a shrunk counterexample, and the correct path raises no false alarm.
# Also checks that the runner reports a survivor (a mutant given too few cases) as a failure, an
# unknown mutant as bad input, and --list.
# Usage: mutants_test.sh path/to/dcp-verify SEED CASES [REPORT]
#   REPORT: the --json report of a run of the whole catalogue that another test already made
#   (ctest's docs.blocks.mutants writes seed 1's), checked instead of running the catalogue again;
#   SEED and CASES then only drive the survivor check.
set -u
bin=$1
seed=$2
cases=$3
report=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

if [ -n "$report" ]; then
  if [ ! -f "$report" ]; then
    echo "FAIL: no report $report (docs.blocks.mutants writes it)"
    exit 1
  fi
  cp "$report" "$tmp/m.json"
  echo "mutants_test: checking $report"
else
  "$bin" mutants --seed "$seed" --cases "$cases" --json "$tmp/m.json" >"$tmp/out" 2>"$tmp/err"
  code=$?
  cat "$tmp/out"
  if [ "$code" -ne 0 ]; then
    echo "FAIL: dcp-verify mutants exited $code"
    cat "$tmp/err"
    failures=$((failures + 1))
  fi
  grep -qE "^mutants: ([0-9]+)/([0-9]+) killed, 0 false alarms$" "$tmp/out" ||
    { echo "FAIL: no 'mutants: K/M killed, 0 false alarms' line"; failures=$((failures + 1)); }
fi
python3 - "$tmp/m.json" <<'PY' || failures=$((failures + 1))
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "dcp-verify/mutants/1", d["schema"]
assert d["mutants"] >= 24, f"only {d['mutants']} mutants in the catalogue"
assert len(d["rows"]) == d["mutants"], "the report holds fewer rows than mutants"
assert d["false_alarms"] == 0 and d["killed"] == d["mutants"] and d["pass"] is True
for r in d["rows"]:
    assert r["killed"] and r["killed_by"] and r["counterexample"], r
    assert r["cases"] >= 1 and r["shrinks"] is not None, r
print(f"mutants_test: {d['killed']}/{d['mutants']} killed, every one with a shrunk counterexample")
PY

# A mutant given one case survives at this seed: the runner must say so and exit 1.
"$bin" mutants --seed "$seed" --cases 1 --only gqa_local_ratio >"$tmp/out" 2>&1
code=$?
if [ "$code" -ne 1 ] || ! grep -q "SURVIVED" "$tmp/out" ||
   ! grep -q "^mutants: 0/1 killed, 0 false alarms$" "$tmp/out"; then
  echo "FAIL: a survivor was not reported (exit $code)"
  cat "$tmp/out"
  failures=$((failures + 1))
fi
"$bin" mutants --only no_such_mutant >"$tmp/out" 2>"$tmp/err"
code=$?
if [ "$code" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
  echo "FAIL: an unknown mutant is not a one-line error with exit 2 (exit $code)"
  failures=$((failures + 1))
fi
"$bin" mutants --list >"$tmp/out" 2>&1 && grep -q "merge_unweighted_mean" "$tmp/out" ||
  { echo "FAIL: mutants --list"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] && echo "mutants_test: all checks passed"
[ "$failures" -eq 0 ]
