#!/usr/bin/env bash
# CLI tests of dcp-verify: exit codes (0 ok, 1 check failed, 2 bad input), the selfcheck table,
# reference files, and one-line errors. Usage: cli_test.sh path/to/dcp-verify path/to/fixtures
set -u
bin=$1
fixtures=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0

# expect CODE DESCRIPTION -- COMMAND...: runs COMMAND, checks its exit status.
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"
    sed 's/^/  stdout: /' "$tmp/out" | head -5
    sed 's/^/  stderr: /' "$tmp/err" | head -5
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

# contains FILE TEXT DESCRIPTION
contains() {
  if grep -qF -- "$2" "$1"; then
    passes=$((passes + 1))
  else
    echo "FAIL: $3: '$2' not in output"
    sed 's/^/  /' "$1" | head -5
    failures=$((failures + 1))
  fi
}

one_line_stderr() {
  if [ "$(wc -l <"$tmp/err")" -eq 1 ]; then
    passes=$((passes + 1))
  else
    echo "FAIL: $1: stderr is not one line"
    cat "$tmp/err"
    failures=$((failures + 1))
  fi
}

expect 0 "default job: the run sweep" -- "$bin"
contains "$tmp/out" "# run: OK" "default job verdict"
contains "$tmp/out" "err/bound  verdict" "run table header"
contains "$tmp/out" "# reproduce: dcp-verify run --seed 1" "run reproduce line"

expect 0 "selfcheck" -- "$bin" selfcheck
contains "$tmp/out" "# selfcheck: OK" "selfcheck summary"
contains "$tmp/out" "tier-bits" "selfcheck table header"

expect 0 "run, configured case" -- "$bin" run --dcp-size 4 --tp-size 8 --heads 16 --kv-heads 4 --interleave 3 --comm-backend a2a --replicate-q --seq 300 --tokens 2 --window 50 --softcap 20 --sink --topk 40 --lse-base 2 --order rand --splits 2 --cases 3 --seed 9
contains "$tmp/out" "rows: 3  passed: 3  failed: 0" "configured rows pass"
contains "$tmp/out" "--seed 9" "configured seed echoed"
expect 0 "run, k3-mla preset" -- "$bin" run --preset k3-mla --seq 256 --quiet
contains "$tmp/out" "# run: OK" "k3 preset verdict"

for bad in "--dcp-size 0" "--dcp-size 4 --tp-size 6" "--interleave 0" "--heads 6 --kv-heads 4" \
           "--heads 6 --dcp-size 4" "--comm nccl" "--backend cuda" "--comm-backend ring" \
           "--lse-base 10" "--dtype f8" "--preset llama" "--seq -1" "--cases 0"; do
  # shellcheck disable=SC2086
  expect 2 "run $bad" -- "$bin" run $bad
  one_line_stderr "run $bad"
done
expect 2 "run: unknown flag" -- "$bin" run --dcp 4

expect 0 "selfcheck with a seed" -- "$bin" selfcheck --seed 5 --quiet
contains "$tmp/out" "reproduce with --seed 5" "seed echoed"

expect 0 "reference, fast tier" -- "$bin" reference --case "$fixtures/cases/gqa_causal_bf16.safetensors" --out "$tmp/r1.safetensors"
contains "$tmp/out" "o [2, 8, 64]  lse [2, 8] (base e, tier fast)" "reference shapes"
[ -s "$tmp/r1.safetensors" ] && passes=$((passes + 1)) || { echo "FAIL: no reference file"; failures=$((failures + 1)); }

expect 0 "reference, certify tier, shared latent" -- "$bin" reference --case "$fixtures/cases/latent_sink_topk_base2.safetensors" --out "$tmp/r2.safetensors" --tier certify
contains "$tmp/out" "o [1, 16, 64]  lse [1, 16] (base 2, tier certify)" "latent reference shapes"

expect 2 "missing case file" -- "$bin" reference --case "$tmp/nope.safetensors" --out "$tmp/x"
contains "$tmp/err" "nope.safetensors" "missing file named"
one_line_stderr "missing case file"

expect 2 "corrupt header" -- "$bin" reference --case "$fixtures/fuzz/safetensors/bad_json.safetensors" --out "$tmp/x"
one_line_stderr "corrupt header"

expect 2 "truncated file" -- "$bin" reference --case "$fixtures/fuzz/safetensors/bad_short.safetensors" --out "$tmp/x"
one_line_stderr "truncated file"

expect 2 "a tensor file that is not a case" -- "$bin" reference --case "$fixtures/fuzz/safetensors/f32.safetensors" --out "$tmp/x"
contains "$tmp/err" "f32.safetensors: " "not a case: file named"
one_line_stderr "not a case"

expect 2 "unwritable output" -- "$bin" reference --case "$fixtures/cases/gqa_causal_bf16.safetensors" --out "$tmp/no/such/dir/r.safetensors"
one_line_stderr "unwritable output"

expect 2 "unknown flag" -- "$bin" --bogus
expect 2 "missing required option" -- "$bin" reference --case "$fixtures/cases/gqa_causal_bf16.safetensors"
expect 2 "bad tier" -- "$bin" reference --case x --out y --tier fastest
expect 0 "help" -- "$bin" --help
contains "$tmp/out" "reference" "help lists subcommands"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
