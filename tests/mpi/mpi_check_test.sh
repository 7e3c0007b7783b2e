#!/usr/bin/env bash
# mpirun -np P dcp-verify check: the parts (the output and every rank's partial) shared among P
# processes, process 0 reporting them all. For a correct result and one that loses a token on
# rank 3, each with partials, and P = 2 and 3: the same exit code, verdict and per-part figures
# (--json) as one process, and the process count in the summary.
set -u
mpirun=$1 dcp=$2 make_result=$3 cases=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
c="$cases/gqa_causal_bf16.safetensors"
"$make_result" --case "$c" --out "$work/good.safetensors" --impl host --dcp-size 4 --interleave 3 \
  --splits 2 --out-dtype bf16 --partials || { echo "FAIL: make_result (correct)"; exit 1; }
"$make_result" --case "$c" --out "$work/bad.safetensors" --impl model --dcp-size 4 --interleave 2 \
  --bug lost_token --partials || { echo "FAIL: make_result (lost token)"; exit 1; }
for r in good bad; do
  "$dcp" check --case "$c" --result "$work/$r.safetensors" --json "$work/one.json" > "$work/one" 2>&1
  want=$?
  for p in 2 3; do
    "$mpirun" -np "$p" "$dcp" check --case "$c" --result "$work/$r.safetensors" \
      --json "$work/many.json" > "$work/many" 2>&1
    got=$?
    if [ "$got" != "$want" ]; then
      echo "FAIL: $r result, $p processes: exit $got, one process $want"; cat "$work/many"; fail=1
      continue
    fi
    grep -q "processes: $p" "$work/many" || { echo "FAIL: no 'processes: $p' in:"; cat "$work/many"; fail=1; }
    diff <(grep "^# check:" "$work/one") <(grep "^# check:" "$work/many") > /dev/null ||
      { echo "FAIL: $r result, $p processes: verdicts differ"; cat "$work/one" "$work/many"; fail=1; }
    if ! python3 - "$work/one.json" "$work/many.json" <<'PY'
import json, sys
one, many = (json.load(open(f)) for f in sys.argv[1:])
assert len(one["parts"]) == 5, len(one["parts"])  # the output and 4 partials
assert one["parts"] == many["parts"], (one["parts"], many["parts"])
assert one["pass"] == many["pass"] and one["failing_ranks"] == many["failing_ranks"]
PY
    then echo "FAIL: $r result, $p processes: the parts differ from one process's"; fail=1; fi
  done
done
grep -q "wrong partial on rank 3)" "$work/many" || { echo "FAIL: the lost token's rank is not named"; cat "$work/many"; fail=1; }
[ "$fail" = 0 ] && echo "mpi check: OK"
exit "$fail"
