#!/usr/bin/env bash
# Runs one pytest file of tests/python with the project's environment, for ctest (label python):
# the Python package must be installed there (`.venv/bin/pip install --no-build-isolation ./python`
# after `tools/bootstrap --python`), and torch too for the files that import it; DCP_VERIFY_PYTHON
# names another interpreter. Without them it prints the reason and exits 77, which ctest reports as
# skipped. (CI runs these files against the installed wheel instead: tools/wheel --test.)
# Usage: run_pytest.sh REPO_ROOT FILE [MODULE...]   (MODULE: what the file needs besides dcp_verify)
set -u
root=$1
file=$2
shift 2
readonly kSkip=77
python=${DCP_VERIFY_PYTHON:-$root/.venv/bin/python}
if [ ! -x "$python" ]; then
  echo "skipped: no interpreter at $python (tools/bootstrap --python makes $root/.venv)"
  exit $kSkip
fi
for module in dcp_verify pytest "$@"; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "skipped: $module is not installed for $python (pip install ./python, pytest and torch)"
    exit $kSkip
  fi
done
cd "$root/tests/python" && exec "$python" -m pytest -q -p no:cacheprovider "$file"
