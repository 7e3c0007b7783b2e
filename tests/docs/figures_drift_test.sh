#!/usr/bin/env bash
# The figure-drift check of tools/figures (--compare) can fail: err_bound drawn again equals the
# committed file, and the same comparison against a copy with one byte changed fails, naming it.
# Usage: figures_drift_test.sh REPO_ROOT path/to/dcp-verify
set -u
repo=$1 dcp=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/committed" "$work/drawn"
cp "$repo/docs/figures/err_bound.svg" "$repo/docs/figures/versions.txt" "$work/committed/"
fail=0
if ! "$repo/tools/figures" --bin "$dcp" --out "$work/drawn" --compare "$work/committed" err_bound \
    >"$work/same.txt" 2>&1; then
  echo "FAIL: err_bound drawn again differs from the committed file:"; cat "$work/same.txt"; fail=1
fi
grep -q "err_bound.svg equals" "$work/same.txt" ||
  { echo "FAIL: err_bound was not compared:"; cat "$work/same.txt"; fail=1; }
sed -i '0,/<svg/s/<svg/<svg data-drift="1"/' "$work/committed/err_bound.svg"
if "$repo/tools/figures" --bin "$dcp" --out "$work/drawn" --compare "$work/committed" err_bound \
    >"$work/drift.txt" 2>&1; then
  echo "FAIL: a committed err_bound.svg with a changed byte passed the comparison"; fail=1
fi
grep -q "err_bound.svg differs" "$work/drift.txt" ||
  { echo "FAIL: the drift was not named:"; cat "$work/drift.txt"; fail=1; }
[ "$fail" = 0 ] && echo "figures drift: OK (an unchanged figure equals its file; a changed one is named)"
exit "$fail"
