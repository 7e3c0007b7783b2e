# expect.sh — assertions shared by the command-line test scripts (cli_test.sh, plugin_test.sh,
# hostile_plugin_test.sh, mpi/mpi_inputs_test.sh).
# The caller sets tmp (a scratch folder), passes=0 and failures=0, and sources this file; each
# assertion adds to one of the two counts.
#   expect 0 "run, default sweep" -- "$bin" run      # exit status; stdout in $tmp/out
#   contains "$tmp/out" "# run: OK" "run verdict"    # a text in a file
#   one_line_stderr "run --dcp-size 0"               # the last command's stderr is one line

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

# one_line_stderr DESCRIPTION: the last command's stderr is exactly one line.
one_line_stderr() {
  if [ "$(wc -l <"$tmp/err")" -eq 1 ]; then
    passes=$((passes + 1))
  else
    echo "FAIL: $1: stderr is not one line"
    cat "$tmp/err"
    failures=$((failures + 1))
  fi
}

# ends CODE TEXT DESCRIPTION -- COMMAND...: COMMAND, killed after $limit seconds (the caller sets
# limit), exits CODE, and TEXT is on its stderr or stdout (the report).
ends() {
  local want=$1 text=$2 what=$3
  shift 4
  timeout -s KILL "$limit" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"
    sed 's/^/  stderr: /' "$tmp/err" | tail -4
    failures=$((failures + 1))
  elif ! grep -qF -- "$text" "$tmp/err" "$tmp/out"; then
    echo "FAIL: $what: neither stderr nor stdout says '$text'"
    sed 's/^/  stderr: /' "$tmp/err" | tail -4
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}
