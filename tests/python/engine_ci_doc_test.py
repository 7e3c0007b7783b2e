"""Runs docs/engine-ci.md as written: its test file and its CI job's `run:` steps, in an empty
folder laid out as the page says (the wheel in dist/, the test file where the page names it), with
a fresh virtual environment's `python` first on PATH (what actions/setup-python gives a job).
tools/wheel --test runs it; the `uses:` steps are GitHub's and are not run here.

    python3 tests/python/engine_ci_doc_test.py docs/engine-ci.md WHEEL VENV

Checks: the job passes and its JUnit file records every test passed, none skipped; the plain
commands the page shows are the job's `run:` lines; and with a bug planted in the page's kernel
(the merged LSE without its max shift) the same job fails and its JUnit file records the failure
with dcp-verify's verdict.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

PLANTED = ("lse = torch.where(z > 0, m + torch.log(z), -math.inf)",
           "lse = torch.where(z > 0, torch.log(z), -math.inf)")


def fail(message: str) -> None:
    sys.exit(f"engine_ci_doc_test: {message}")


def read_page(path: str):
    lines = open(path, encoding="utf-8").read().split("\n")
    files, job, plain = {}, None, []
    for i, line in enumerate(lines):
        m = re.match(r"^<!--\s*(file|job):\s*(\S+)\s*-->$", line)
        if m:
            end = lines.index("```", i + 2)
            body = "\n".join(lines[i + 2:end]) + "\n"
            if m.group(1) == "file":
                files[m.group(2)] = body
            else:
                job = body
        elif line.startswith("    python -m "):
            plain.append(line.strip())
    if not files or job is None:
        fail(f"{path}: expected a '<!-- file: PATH -->' block and a '<!-- job: NAME -->' block")
    runs = [m.group(1).strip() for m in re.finditer(r"^\s+run:\s*(.+)$", job, re.M)]
    if not runs or any(r.startswith("|") for r in runs):
        fail(f"{path}: the job has no single-line run: steps")
    if plain != runs:
        fail(f"{path}: the plain commands {plain} are not the job's run: steps {runs}")
    junit = re.search(r"--junitxml=(\S+)", runs[-1])
    if not junit:
        fail(f"{path}: the job's last step writes no --junitxml")
    return files, runs, junit.group(1)


def run_job(project: str, runs, venv: str, log=None) -> int:
    """Runs the job's steps in order, as a CI runner would; pip's progress output quieted."""
    env = dict(os.environ, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"],
               PIP_QUIET="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for var in ("DCP_VERIFY_BIN", "DCP_VERIFY_BRIDGE", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(var, None)
    for step in runs:
        print(f"engine_ci_doc_test: $ {step}", flush=True)
        rc = subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=project, env=env,
                            stdout=log, stderr=subprocess.STDOUT if log else None).returncode
        if rc != 0:
            return rc
    return 0


def junit_counts(path: str):
    if not os.path.isfile(path):
        fail(f"the job wrote no JUnit file {os.path.basename(path)}")
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return ({k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")},
            " ".join((f.get("message") or "") + (f.text or "") for f in suite.iter("failure")))


def main() -> int:
    page, wheel, venv = sys.argv[1:4]
    files, runs, junit = read_page(page)
    with tempfile.TemporaryDirectory(prefix="dcp-engine-ci-") as project:
        os.makedirs(os.path.join(project, "dist"))
        shutil.copy(wheel, os.path.join(project, "dist"))
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(project, rel)), exist_ok=True)
            with open(os.path.join(project, rel), "w", encoding="utf-8") as f:
                f.write(body)
        if run_job(project, runs, venv) != 0:
            fail("the job failed on the page's kernel")
        counts, _ = junit_counts(os.path.join(project, junit))
        if counts["tests"] == 0 or counts["failures"] or counts["errors"] or counts["skipped"]:
            fail(f"the job's JUnit file: {counts} (expected every test passed, none skipped)")
        print(f"engine_ci_doc_test: the job passed; {junit}: {counts['tests']} passed")

        # The same job with a bug planted in the kernel: it must fail, and say why.
        planted = [(r, b) for r, b in files.items() if PLANTED[0] in b]
        if len(planted) != 1:
            fail(f"{page}: the kernel's line '{PLANTED[0]}' is not in one test file")
        rel, body = planted[0]
        with open(os.path.join(project, rel), "w", encoding="utf-8") as f:
            f.write(body.replace(PLANTED[0], PLANTED[1]))
        os.remove(os.path.join(project, junit))
        with tempfile.TemporaryFile("w+") as log:
            rc = run_job(project, runs, venv, log)
            log.seek(0)
            said = log.read()
        if rc == 0:
            print(said)
            fail("the job passed with a bug planted in the kernel")
        counts, text = junit_counts(os.path.join(project, junit))
        if counts["failures"] != 1 or "FAILED" not in text:
            print(said)
            fail(f"the planted bug's JUnit file: {counts}, dcp-verify's verdict "
                 f"{'present' if 'FAILED' in text else 'absent'} (expected 1 failure, FAILED)")
        print("engine_ci_doc_test: with the planted bug the job failed; its JUnit file records "
              "1 failure with dcp-verify's FAILED report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
