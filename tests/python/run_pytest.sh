#!/usr/bin/env bash
# Runs one pytest file of tests/python with the project's environment, for ctest: the Python
# package must be installed there (`.venv/bin/pip install --no-build-isolation ./python`, which
# tools/test does before it runs the ctest label `python`), and torch too for the files that
# import it. Without them it prints the reason and exits 77, which ctest reports as skipped.
# Usage: run_pytest.sh REPO_ROOT FILE [MODULE...]   (MODULE: what the file needs besides dcp_verify)
set -u
root=$1
file=$2
shift 2
readonly kSkip=77
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "skipped: no project environment at $root/.venv (tools/bootstrap makes it)"
  exit $kSkip
fi
for module in dcp_verify pytest "$@"; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "skipped: $module is not installed in $root/.venv (tools/test installs the package, pytest and torch)"
    exit $kSkip
  fi
done
cd "$root/tests/python" && exec "$python" -m pytest -q -p no:cacheprovider "$file"
