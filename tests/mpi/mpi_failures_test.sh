#!/usr/bin/env bash
# Under mpirun, a failure found on any rank ends every rank, together and soon: bad input and an
# oracle refusal exit 2 on every rank with one line from rank 0 (no MPI_ABORT banner); a rank
# that is stopped (SIGSTOP) ends the job within --timeout with exit 124 and a line naming it; a
# rank that is killed ends the job. Every case must end within kLimit seconds.
# Usage: mpi_failures_test.sh MPIEXEC path/to/dcp-verify
set -u
mpiexec=$1
bin=$2
tmp=$(mktemp -d)
stopped=""
trap '[ -n "$stopped" ] && kill -CONT $stopped 2>/dev/null; rm -rf "$tmp"' EXIT
limit=10
failures=0

# run_job WHAT WANT -- ARGS...: mpirun ARGS, expecting exit WANT within the limit.
run_job() {
  local what=$1 want=$2
  shift 3
  local start rc
  start=$(date +%s)
  timeout -s KILL "$limit" "$mpiexec" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc after $(($(date +%s) - start)) s, expected $want"
    sed 's/^/  stderr: /' "$tmp/err" | head -8
    failures=$((failures + 1))
  fi
}

# one_line WHAT TEXT: exactly one line of ours on stderr, saying TEXT, and no MPI_ABORT banner.
one_line() {
  local ours
  ours=$(grep -c '^dcp-verify' "$tmp/err")
  if [ "$ours" -ne 1 ] || ! grep -q "^dcp-verify.*$2" "$tmp/err" || grep -q MPI_ABORT "$tmp/err"; then
    echo "FAIL: $1: expected one line saying '$2' and no MPI_ABORT banner"
    sed 's/^/  stderr: /' "$tmp/err" | head -8
    failures=$((failures + 1))
  fi
}

run_job "bad input on every rank" 2 -- -np 4 "$bin" run --comm mpi --dcp-size 3
one_line "bad input on every rank" "not a multiple of --dcp-size 3"
run_job "world size checked before the header" 2 -- -np 4 "$bin" run --comm mpi --tp-size 2 --dcp-size 2
one_line "world size checked before the header" "4 processes but --tp-size is 2"
[ -s "$tmp/out" ] && { echo "FAIL: the header was printed before the world-size check"; failures=$((failures + 1)); }
# An oracle refusal (every rank judges its share; rank 0 the output too) ends both ranks before
# either starts the next case.
run_job "an oracle refusal" 2 -- -np 2 "$bin" run --comm mpi --dcp-size 2 --exp poly3 --tile 1 --seq 8000 --head-dim 8 --v-dim 4 --cases 3
one_line "an oracle refusal" "the oracle cannot judge"

# start_long_job [FLAGS...]: a run of a million small cases in the background (job=its pid),
# returning once it has printed its second row.
start_long_job() {
  "$mpiexec" -np 4 "$bin" run --comm mpi --dcp-size 2 --seq 600 --cases 1000000 "$@" \
    >"$tmp/out" 2>"$tmp/err" &
  job=$!
  for _ in $(seq 100); do grep -q '^   1 ' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
}

# wait_job: waits for the job, killing it after the limit; sets rc and took (seconds).
wait_job() {
  local start watchdog
  start=$(date +%s)
  ( sleep "$limit"; kill -KILL "$job" 2>/dev/null ) &
  watchdog=$!
  wait "$job"
  rc=$?
  kill "$watchdog" 2>/dev/null
  took=$(($(date +%s) - start))
}

# A rank stopped in the middle of a long run: its peers wait --timeout 2, then end the job,
# naming it. The wait is 2 s when rank 2 stops inside its group's step (rank 3 names it), or
# 4 s when it stops after its group's step and before sending its results (rank 0's gather
# waits twice --timeout, so that a group's own wait ends first).
start_long_job --timeout 2
victim=""
for pid in $(pgrep -P "$job"); do  # mpirun's own children: the job's ranks
  rank=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  [ "$rank" = 2 ] && victim=$pid
done
if [ -z "$victim" ]; then
  echo "FAIL: could not find world rank 2 of the running job"
  failures=$((failures + 1))
  kill "$job" 2>/dev/null
else
  kill -STOP "$victim"
  stopped=$victim
  wait_job
  if [ "$rc" -ne 124 ] || ! grep -Eq "rank 2 did not arrive within [24] s" "$tmp/err"; then
    echo "FAIL: a stopped rank: exit $rc after $took s, expected 124 naming rank 2"
    sed 's/^/  stderr: /' "$tmp/err" | head -8
    failures=$((failures + 1))
  fi
  kill -CONT "$victim" 2>/dev/null
  stopped=""
fi

# A rank that dies ends the job at once (mpirun sees it go).
start_long_job
pkill -KILL -n -P "$job"
wait_job
if [ "$rc" -eq 0 ] || [ "$took" -ge "$limit" ] || ! grep -q "signal 9" "$tmp/err"; then
  echo "FAIL: a killed rank: exit $rc after $took s, expected the job to end, reporting the death"
  sed 's/^/  stderr: /' "$tmp/err" | head -8
  failures=$((failures + 1))
fi

echo "mpi_failures_test: $failures failures"
[ "$failures" -eq 0 ]
