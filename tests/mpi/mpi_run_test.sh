#!/usr/bin/env bash
# mpirun -np 4 dcp-verify run --comm mpi: every process judges its own share (its TP rank's
# partial; process 0 the output too) and process 0 folds the shares together. The rows' figures
# (--json: the worst err/bound over the output and every partial, the statistical ratio, the
# output's worst error and bound, the verdict, the count of comparisons) must equal those of the
# same cases run in one process (--comm threads --tp-size 4), for one request per step and for a
# paged batch; and the count must be every live request's output and its 4 partials, so a share
# that never reached process 0 fails the test.
# Usage: mpi_run_test.sh MPIEXEC path/to/dcp-verify
set -u
mpirun=$1 dcp=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {
  local what=$1 retired=$2
  shift 2
  "$dcp" run --tp-size 4 "$@" --json "$work/one.json" > "$work/one" 2>&1 ||
    { echo "FAIL: $what: one process"; cat "$work/one"; fail=1; return; }
  "$mpirun" -np 4 "$dcp" run --comm mpi "$@" --json "$work/many.json" > "$work/many" 2>&1 ||
    { echo "FAIL: $what: 4 processes"; cat "$work/many"; fail=1; return; }
  python3 - "$work/one.json" "$work/many.json" "$what" "$retired" <<'PY' || fail=1
import json, sys
one, many = (json.load(open(f))["rows"] for f in sys.argv[1:3])
keys = ("ratio", "stat_ratio", "max_err", "bound", "verdict", "report", "comparisons")
assert len(one) == len(many) > 0, (len(one), len(many))
partial_worst = 0
for a, b in zip(one, many):
    for k in keys:
        if a[k] != b[k]:
            sys.exit(f"FAIL: {sys.argv[3]}: row {a['row']}: {k} {b[k]} over 4 processes, {a[k]} in one")
    partial_worst += a["ratio"] > a["max_err"] / a["bound"]
    # Every process's share arrived: the output and the 4 TP ranks' partials of each live request.
    live = a["shape"]["batch"] - int(sys.argv[4])
    if b["comparisons"] != live * (1 + 4):
        sys.exit(f"FAIL: {sys.argv[3]}: row {a['row']}: {b['comparisons']} comparisons over 4 "
                 f"processes, expected {live} x (1 + 4)")
# The comparison has teeth only where a partial, not the output, is a row's worst.
if partial_worst == 0:
    sys.exit(f"FAIL: {sys.argv[3]}: no row's worst is a partial; the rows cannot show a lost share")
print(f"{sys.argv[3]}: {len(one)} rows agree ({partial_worst} with a partial worst)")
PY
}
check "one request per step" 0 --dcp-size 2 --heads 8 --kv-heads 2 --interleave 5 --seq 700 \
  --tokens 3 --window 200 --sink --topk 64 --lse-base 2 --comm-backend a2a --order pair \
  --splits 3 --cases 6
check "a paged batch" 1 --dcp-size 2 --heads 8 --kv-heads 2 --interleave 2 --seq 700 --tokens 2 \
  --batch 3 --page-size 8 --shared-prefix 300 --retired 1 --kv-dtype bf16 --cases 4
[ "$fail" = 0 ] && echo "mpi run: OK"
exit "$fail"
