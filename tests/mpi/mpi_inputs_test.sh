#!/usr/bin/env bash
# Under mpirun the processes must be given the same flags and files, and one process refusing its
# input ends them all: each case below ends every process within kLimit seconds with exit 2 and a
# line naming the flag or file and the processes that differ (MPMD command lines, `A : B`, give
# the processes different flags; per-process folders, -wdir, give the same relative path
# different files). Before: different seeds failed the run blaming the production path, different
# heads ended in MPI_ERR_TRUNCATE, another result file on one process was judged in silence, and a
# process refusing its --json left the others waiting forever.
# Usage: mpi_inputs_test.sh MPIEXEC path/to/dcp-verify path/to/make_result path/to/fixtures/cases
set -u
mpiexec=$1
bin=$2
make_result=$3
cases=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=30
passes=0
failures=0

# shellcheck source=../support/expect.sh
source "$(dirname "$0")/../support/expect.sh"

run=("$bin" run --comm mpi --dcp-size 2 --seq 64 --timeout 10)
ends 2 "--seed: process 1 was given 2, process 0 1" "run, another --seed on process 1" -- \
  "$mpiexec" -np 1 "${run[@]}" --seed 1 : -np 1 "${run[@]}" --seed 2
ends 2 "--heads: process 1 was given 16, process 0 8" "run, other --heads on process 1" -- \
  "$mpiexec" -np 1 "${run[@]}" --heads 8 : -np 1 "${run[@]}" --heads 16
ends 2 "--cases: process 1 was given 3, process 0 nothing (the default)" \
  "run, other --cases on process 1" -- "$mpiexec" -np 1 "${run[@]}" : -np 1 "${run[@]}" --cases 3

# The same relative paths in four folders: b holds another result than a, d another case; c the
# same case and result as a, but no reports/ folder for --json.
mkdir -p "$tmp/a/reports" "$tmp/b/reports" "$tmp/c" "$tmp/d"
cp "$cases/gqa_causal_bf16.safetensors" "$tmp/a/case.safetensors"
"$make_result" --case "$tmp/a/case.safetensors" --out "$tmp/a/result.safetensors" --impl model \
  --dcp-size 2 >/dev/null || { echo "FAIL: make_result"; exit 1; }
cp "$tmp/a/result.safetensors" "$tmp/b/result.safetensors"
printf 'x' >>"$tmp/b/result.safetensors"  # another file: one byte more
cp "$tmp/a/case.safetensors" "$tmp/b/case.safetensors"
cp "$cases/latent_sink_topk_base2.safetensors" "$tmp/d/case.safetensors"  # another case
cp "$tmp/a/case.safetensors" "$tmp/a/result.safetensors" "$tmp/c/"
check=(check --case case.safetensors --result result.safetensors --timeout 10)
ends 2 "--result: process 1's file is not process 0's" "check, another result file on process 1" \
  -- "$mpiexec" -np 1 -wdir "$tmp/a" "$bin" "${check[@]}" : -np 1 -wdir "$tmp/b" "$bin" "${check[@]}"
ends 2 "--case: process 1's file is not process 0's" "reference, another case file on process 1" \
  -- "$mpiexec" -np 1 -wdir "$tmp/a" "$bin" reference --case case.safetensors --out ref.safetensors : \
  -np 1 -wdir "$tmp/d" "$bin" reference --case case.safetensors --out ref.safetensors
# The same flags and files, but process 1 cannot write its --json: it refuses, and every process
# ends, naming it (the others waited forever before).
ends 2 "process 1" "check, process 1 refuses its --json" -- "$mpiexec" \
  -np 1 -wdir "$tmp/a" "$bin" "${check[@]}" --json reports/check.json : \
  -np 1 -wdir "$tmp/c" "$bin" "${check[@]}" --json reports/check.json
if [ "$(grep -c '^dcp-verify check' "$tmp/err")" -ne 2 ]; then
  echo "FAIL: check, process 1 refuses its --json: expected a line from each process"
  sed 's/^/  stderr: /' "$tmp/err" | head -6
  failures=$((failures + 1))
fi
# And when they agree, the job runs (a control: the same folder for both).
ends 0 "# check: OK" "check over two processes given the same input" -- \
  "$mpiexec" -np 2 -wdir "$tmp/a" "$bin" "${check[@]}"

echo "mpi inputs: $passes passed, $failures failures"
[ "$failures" -eq 0 ]
