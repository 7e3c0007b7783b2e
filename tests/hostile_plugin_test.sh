#!/usr/bin/env bash
# A plug-in under test that misbehaves (tests/support/misbehaving_impl.cpp, DCPV_MISBEHAVE) never
# ends dcp-verify silently, with exit 0, or by hanging: each case ends within kLimit seconds with a
# non-zero status and a stderr line naming the implementation and what happened (the level and
# the rank for a level), and no verdict line "# ...: OK" on stdout.
# Usage: hostile_plugin_test.sh path/to/dcp-verify path/to/libdcpv_misbehaving.so
set -u
bin=$1
plugin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=20
failures=0
tried=0

# ends WHAT STATUS TEXT -- COMMAND...: exits STATUS within the limit, stderr or stdout (the report)
# holds TEXT, and stdout holds no OK verdict.
ends() {
  local what=$1 want=$2 text=$3
  shift 4
  tried=$((tried + 1))
  local rc
  timeout -s KILL "$limit" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc (expected $want)"
    sed 's/^/  stderr: /' "$tmp/err" | tail -3
    failures=$((failures + 1))
  elif ! grep -qF -- "$text" "$tmp/err" "$tmp/out"; then
    echo "FAIL: $what: neither stderr nor stdout says '$text'"
    sed 's/^/  stderr: /' "$tmp/err" | tail -3
    failures=$((failures + 1))
  elif grep -qE '^# [a-z]+: OK' "$tmp/out"; then
    echo "FAIL: $what: stdout holds an OK verdict"
    failures=$((failures + 1))
  fi
}

# A level that crashes or ends the process: exit 1, the implementation, level and cause named.
# (a2a steps only call combine: --comm-backend a2a on one row.)
run=(run --impl "$plugin" --comm-backend a2a --dcp-size 2 --seq 64 --timeout 5)
for m in exit0 segv abort fpe; do
  case $m in
    exit0) cause="called exit()" ;;
    segv) cause="SIGSEGV" ;;
    abort) cause="SIGABRT" ;;
    fpe) cause="SIGFPE" ;;
  esac
  ends "run, combine $m" 1 "implementation 'misbehaving'" -- env DCPV_MISBEHAVE=$m "$bin" "${run[@]}"
  if ! grep -qF "level combine on dcp rank" "$tmp/err" || ! grep -qF "$cause" "$tmp/err"; then
    echo "FAIL: run, combine $m: stderr names neither the level and rank nor '$cause'"
    sed 's/^/  stderr: /' "$tmp/err" | tail -3
    failures=$((failures + 1))
  fi
  ends "properties, combine $m" 1 "level combine" -- \
    env DCPV_MISBEHAVE=$m "$bin" properties --impl "$plugin" --cases 5 --timeout 5
done

# A C++ exception out of the C level is the level's failure, reported in the row (a FAILED
# verdict, exit 1), not an abort.
ends "run, combine throws" 1 "threw a C++ exception out of its C function" -- \
  env DCPV_MISBEHAVE=throw "$bin" "${run[@]}"
ends "properties, combine throws" 1 "threw a C++ exception" -- \
  env DCPV_MISBEHAVE=throw "$bin" properties --impl "$plugin" --cases 5 --timeout 5

ends "properties, a step level throws std::bad_alloc" 1 "threw a C++ exception out of its C function: std::bad_alloc" -- \
  env DCPV_MISBEHAVE=throw_step "$bin" properties --impl "$plugin" --cases 5 --timeout 5

# A thread of the plug-in's still running its code at exit: the library stays loaded, the run
# passes (exit 0, its verdict printed).
tried=$((tried + 1))
if ! DCPV_MISBEHAVE=thread timeout -s KILL "$limit" "$bin" "${run[@]}" >"$tmp/out" 2>"$tmp/err" ||
   ! grep -q '^# run: OK' "$tmp/out"; then
  echo "FAIL: a plug-in thread running at exit: exit or verdict wrong"
  tail -3 "$tmp/out" "$tmp/err"
  failures=$((failures + 1))
fi

# Loading that blocks (a constructor, dcpv_get_impl) ends at --timeout, exit 124, naming it.
ends "dcpv_get_impl blocks" 124 "loading it did not return within 2 s" -- \
  env DCPV_MISBEHAVE=block_load "$bin" run --impl "$plugin" --timeout 2

# A name that would print a line of its own: escaped in every line it appears in.
tried=$((tried + 1))
DCPV_MISBEHAVE=name timeout -s KILL "$limit" "$bin" run --impl "$plugin" --comm-backend a2a \
  --dcp-size 2 --seq 64 >"$tmp/out" 2>"$tmp/err"
if grep -qx '# run: OK' "$tmp/out" && [ "$(grep -c '^# run: OK' "$tmp/out")" -ne 1 ]; then
  echo "FAIL: a plug-in name with a newline printed a verdict line of its own"
  failures=$((failures + 1))
fi
if ! grep -qF 'misbehaving\n# run: OK' "$tmp/out"; then
  echo "FAIL: the plug-in's name is not shown escaped"
  head -3 "$tmp/out"
  failures=$((failures + 1))
fi

echo "hostile plug-ins: $tried cases, $failures failures"
[ "$failures" -eq 0 ]
