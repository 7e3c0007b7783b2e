#!/usr/bin/env bash
# A plug-in under test that misbehaves (tests/support/misbehaving_impl.cpp, DCPV_MISBEHAVE) never
# ends dcp-verify silently, with exit 0, or by hanging: each case ends within kLimit seconds with a
# non-zero status and a stderr line naming the implementation and what happened (the level and
# the rank for a level), and no verdict line "# ...: OK" on stdout (tests/support/expect.sh).
# Usage: hostile_plugin_test.sh path/to/dcp-verify path/to/libdcpv_misbehaving.so
set -u
bin=$1
plugin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=20
passes=0
failures=0

# shellcheck source=support/expect.sh
source "$(dirname "$0")/support/expect.sh"

# no_ok WHAT: the last command's stdout holds no OK verdict.
no_ok() {
  if grep -qE '^# [a-z]+: OK' "$tmp/out"; then
    echo "FAIL: $1: stdout holds an OK verdict"
    failures=$((failures + 1))
  fi
}

# py_check WHAT ARGS...: the Python script on stdin, run with ARGS, exits 0 (else WHAT fails).
py_check() {
  local what=$1
  shift
  if python3 - "$@"; then
    passes=$((passes + 1))
  else
    echo "FAIL: $what"
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
  ends 1 "implementation 'misbehaving'" "run, combine $m" -- env DCPV_MISBEHAVE=$m "$bin" "${run[@]}"
  no_ok "run, combine $m"
  if ! grep -qF "level combine on dcp rank" "$tmp/err" || ! grep -qF "$cause" "$tmp/err"; then
    echo "FAIL: run, combine $m: stderr names neither the level and rank nor '$cause'"
    sed 's/^/  stderr: /' "$tmp/err" | tail -3
    failures=$((failures + 1))
  fi
  ends 1 "level combine" "properties, combine $m" -- \
    env DCPV_MISBEHAVE=$m "$bin" properties --impl "$plugin" --cases 5 --timeout 5
  no_ok "properties, combine $m"
done

# The properties' report survives the crash: the table, the last line, --json and --junit are
# written, the property in flight ERROR naming the level, the signal and the case.
rm -f "$tmp/crash.json" "$tmp/crash.xml"
ends 1 "# properties: ERROR" "properties, combine segv, the report" -- \
  env DCPV_MISBEHAVE=segv "$bin" properties --impl "$plugin" --only dcp-path --cases 5 \
  --timeout 5 --seed 1 --json "$tmp/crash.json" --junit "$tmp/crash.xml"
py_check "properties, combine segv: no JSON/JUnit naming the crash" "$tmp/crash.json" \
  "$tmp/crash.xml" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["properties"]
m = p[-1]["message"]
xml = open(sys.argv[2]).read()
ok = ([r["result"] for r in p] == ["ERROR"] and "level combine on dcp rank" in m
      and "SIGSEGV" in m and "the case in flight: S=" in m and "<testcase" in xml
      and "ERROR after" in xml)
sys.exit(0 if ok else 1)
PY

# So does run's: the rows that finished, and the row in flight as ERROR naming the level, the
# signal and the case, in the table, the last line, --json and --junit.
rm -f "$tmp/crash.json" "$tmp/crash.xml"
ends 1 "# run: ERROR" "run, combine segv, the report" -- \
  env DCPV_MISBEHAVE=segv "$bin" "${run[@]}" --cases 3 --json "$tmp/crash.json" \
  --junit "$tmp/crash.xml"
py_check "run, combine segv: no JSON/JUnit naming the crash" "$tmp/crash.json" "$tmp/crash.xml" \
  <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows, xml = r["rows"], open(sys.argv[2]).read()
report = rows[-1]["report"]
ok = ([x["verdict"] for x in rows] == ["ERROR"] and r["errors"] == 1 and r["pass"] is False
      and r["rows_planned"] == 3 and "level combine on dcp rank" in report
      and "SIGSEGV" in report and "case: T=" in report and rows[-1]["ratio"] is None
      and "ERROR: the implementation ended the run" in xml)
sys.exit(0 if ok else 1)
PY

# So does probe's: the findings measured before the experiment in flight, which is ERROR naming
# the level and the signal, and no claim; --json the same, its claim null.
rm -f "$tmp/crash.json"
ends 1 "# probe: ERROR (the merge: " "probe, combine segv, the report" -- \
  env DCPV_MISBEHAVE=segv "$bin" probe --impl "$plugin" --timeout 5 --json "$tmp/crash.json"
no_ok "probe, combine segv"
one_line_stderr "probe, combine segv (both ranks' levels crash; one speaks)"
if ! grep -qF "level combine on dcp rank" "$tmp/out" || ! grep -qF "SIGSEGV" "$tmp/out" \
   || ! grep -qF "   partial " "$tmp/out" || grep -qF "# the claim" "$tmp/out"; then
  echo "FAIL: probe, combine segv: the findings so far, the level and signal, no claim"
  sed 's/^/  stdout: /' "$tmp/out" | tail -4
  failures=$((failures + 1))
fi
py_check "probe, combine segv: no JSON naming the crash" "$tmp/crash.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = (r["error"].startswith("the merge: ") and "SIGSEGV" in r["error"]
      and [f["measured"] for f in r["findings"]] == ["partial"]
      and r["claim"] is None and r["words"] is None and r["claim_words"] is None)
sys.exit(0 if ok else 1)
PY

# A crash whose report cannot be written (the crashed thread holds stdout) ends as a crash once
# its last words run out of time (kLastWordsSeconds, SIGALRM), never as a timeout: the watchdog
# stays quiet when the crashed call's deadline passes meanwhile (it once said "did not return"
# and ended the process 124, cutting the report short).
# (SIGALRM's status, 128 + 14, as the shell reports a process a signal ended.)
ends 142 "crashed: SIGSEGV" "properties, a crash holding stdout" -- \
  env DCPV_MISBEHAVE=segv_locked "$bin" properties --impl "$plugin" --only dcp-path --cases 5 \
  --timeout 1 --seed 1
if grep -qF "did not return" "$tmp/err"; then
  echo "FAIL: properties, a crash holding stdout: the watchdog spoke over the crash"
  failures=$((failures + 1))
fi

# A C++ exception out of the C level is the level's failure, reported in the row (a FAILED
# verdict, exit 1), not an abort.
ends 1 "threw a C++ exception out of its C function" "run, combine throws" -- \
  env DCPV_MISBEHAVE=throw "$bin" "${run[@]}"
no_ok "run, combine throws"
ends 1 "threw a C++ exception" "properties, combine throws" -- \
  env DCPV_MISBEHAVE=throw "$bin" properties --impl "$plugin" --cases 5 --timeout 5
no_ok "properties, combine throws"

ends 1 "threw a C++ exception out of its C function: std::bad_alloc" \
  "properties, a step level throws std::bad_alloc" -- \
  env DCPV_MISBEHAVE=throw_step "$bin" properties --impl "$plugin" --cases 5 --timeout 5
no_ok "properties, a step level throws std::bad_alloc"

# A thread of the plug-in's still running its code at exit: the library stays loaded, the run
# passes (exit 0, its verdict printed).
ends 0 "# run: OK" "a plug-in thread running at exit" -- env DCPV_MISBEHAVE=thread "$bin" "${run[@]}"

# Loading that blocks (a constructor, dcpv_get_impl) ends at --timeout, exit 124, naming it.
ends 124 "loading it did not return within 2 s" "dcpv_get_impl blocks" -- \
  env DCPV_MISBEHAVE=block_load "$bin" run --impl "$plugin" --timeout 2
no_ok "dcpv_get_impl blocks"

# A name that would print a line of its own: escaped in every line it appears in.
ends 0 'impl=misbehaving\n# run: OK (' "a name with a newline, escaped" -- \
  env DCPV_MISBEHAVE=name "$bin" "${run[@]}"
if [ "$(grep -c '^# run: OK' "$tmp/out")" -ne 1 ]; then
  echo "FAIL: a plug-in name with a newline printed a verdict line of its own"
  failures=$((failures + 1))
fi

echo "hostile plug-ins: $passes passed, $failures failures"
[ "$failures" -eq 0 ]
