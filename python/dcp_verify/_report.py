"""What a run found (Report), how the package calls the dcp-verify binary and words its refusals in
Python's keywords, and check (in this process)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from . import _core
from ._files import _write, binary


class Report:
    """What check or properties found.

    ok                 the verdict passes (within every sound bound; for properties: every
                       property held)
    verdict            "OK", "SUSPECT", "FAILED", "ERROR" (the implementation raised or returned
                       something malformed) or "INTERRUPTED"
    max_err_over_bound the largest error / bound judged (check), or None
    worst              the worst element: part, tensor, index, got, expected, error, bound, ratio,
                       bound_terms (what each step of the derivation adds to its bound, in
                       order: {"keys": ..., "accumulation": ..., ...}, summing to bound)
    failed             the parts ("output", "rank 3") or properties that failed
    counterexample     properties: the shrunk failing case, as the suite describes it (a
                       pinned counterexample's when only those failed)
    pin                properties: that case's setup (a dict), for dcp_verify.replay(impl, pin)
                       or to keep in a pinned file; None when the failure printed none
    reproduce          properties: the call that reruns exactly this (same seed and ranges)
    traceback          the implementation's Python traceback when it raised
    text               the whole report as dcp-verify prints it
    """

    def __init__(self, raw: dict, text: str, verdict: str, ok: bool, **fields: Any):
        self.raw = raw
        self.text = text
        self.verdict = verdict
        self.ok = ok
        self.max_err_over_bound: Optional[float] = fields.get("max_err_over_bound")
        self.worst: Optional[dict] = fields.get("worst")
        self.failed: list = fields.get("failed", [])
        self.counterexample: Optional[str] = fields.get("counterexample")
        self.pin: Optional[dict] = fields.get("pin")
        self.reproduce: Optional[str] = fields.get("reproduce")
        self.traceback: Optional[str] = fields.get("traceback")
        self.property: Optional[str] = fields.get("property")

    def __bool__(self) -> bool:
        return self.ok

    def summary(self) -> str:
        """The report in a few lines: the verdict and, for a failed properties run, the property
        whose case shrank, that case, the elements over their bound, and the calls that replay it
        (a check's report is short already: its whole text). The whole report is ``text``."""
        if self.ok or self.counterexample is None:
            return self.text.rstrip()
        # The case's one-line description (a pinned case's leads with why it was pinned and runs
        # on into its output's line), then the tensors with elements over their bound.
        lines = re.sub(r" \| (output: |partial of )", r"\n\1", self.counterexample).splitlines()
        over = [x for x in lines[1:] if re.search(r"\b[1-9]\d*/\d+ over bound", x)]
        how = "the pinned case" if self.property == "pinned" else "shrunk to"
        out = [f"dcp-verify properties: {self.verdict} ({', '.join(self.failed)})",
               f"  {self.property}: {how} {lines[0]}" if lines else ""]
        out += [f"  {x}" for x in over]
        if self.traceback:
            out.append("  the implementation raised: " + self.traceback.strip().splitlines()[-1])
        if self.pin is not None:
            out.append("  replay: dcp_verify.replay(impl, report.pin)")
        if self.reproduce:
            out.append(f"  reproduce: {self.reproduce}")
        out.append("  (the whole report: report.text)")
        return "\n".join(x for x in out if x)

    def to_json(self) -> str:
        """The report as JSON: dcp-verify's own (docs/cli.md) with the Python-side fields."""
        out = dict(self.raw)
        out["python"] = {"verdict": self.verdict, "ok": self.ok, "reproduce": self.reproduce,
                         "traceback": self.traceback}
        return json.dumps(out, indent=2, allow_nan=False, default=str)

    def __repr__(self) -> str:
        ratio = "" if self.max_err_over_bound is None else f", max err/bound {self.max_err_over_bound:.4f}"
        failed = f", failed {self.failed}" if self.failed else ""
        return f"Report({self.verdict}{ratio}{failed})"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *args], capture_output=True, text=True)


def _signal_of(returncode: int) -> Optional[str]:
    """The signal that ended a process, by name ("SIGSEGV"), from its return code; None if none."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class SuiteDied(RuntimeError):
    """The dcp-verify process that runs the suite ended without a report: killed by a signal (a
    crash in it or in a plug-in it loaded; ``signal`` names it), or an exit that is neither a
    verdict, a refusal of the arguments (ValueError) nor a level past its time (TimeoutError).
    ``returncode`` is the process's (negative: the signal's number)."""

    def __init__(self, message: str, returncode: int):
        super().__init__(message)
        self.returncode = returncode
        self.signal: Optional[str] = _signal_of(returncode)


# The command line's flags as this package's keywords, for the errors the binary reports.
_KEYWORDS = {"--cases": "cases", "--seed": "seed", "--count": "n", "--timeout": "timeout",
             "--lse-base": "lse_base", "--only": "only", "--bound": "bound", "--pinned": "pinned"}


def _in_python_words(line: str) -> str:
    """A refusal of dcp-verify's, naming the keyword where it names a flag."""
    words = {**_KEYWORDS, **{flag: key for key, (flag, _) in _RANGES.items()
                             if flag.startswith("--")}}
    line = re.sub(r"--[a-z][a-z0-9-]*", lambda m: words.get(m.group(0), m.group(0)), line)
    return line.replace(" (see --help)", "")


def _refused(proc: subprocess.CompletedProcess) -> ValueError:
    line = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return ValueError(_in_python_words(line.replace("dcp-verify ", "", 1)))


def check(case: Any, result: Any, tier: str = "fast", bound: str = "sound") -> Report:
    """Judges a result against the oracle within the bound derived for what the result claims.

    case, result: paths or mappings (docs/format.md). tier: "fast" or "certify". bound: the tier
    that decides ok: "sound" (default) or "statistical" (also fails a SUSPECT result).
    """
    for name, value, allowed in (("tier", tier, ("fast", "certify")),
                                 ("bound", bound, ("sound", "statistical"))):
        if value not in allowed:
            raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")
    # Judged in this process (the harness in dcp_verify._core), as `dcp-verify check` judges.
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        case_path = _write(os.path.join(tmp, "case.safetensors"), "case", case)
        result_path = _write(os.path.join(tmp, "result.safetensors"), "result", result)
        try:
            report_json, text = _core.check_files(case_path, result_path, tier, bound)
        except ValueError as e:
            raise ValueError(_in_python_words(f"check: {e}")) from None
    raw = json.loads(report_json)
    parts = raw.get("parts") or [p for r in raw.get("requests", []) for p in r["parts"]]
    worst = None
    for p in parts:
        for tensor in ("o", "lse"):
            w = p[tensor]
            ratio = _number(w.get("ratio"))
            if ratio is not None and (worst is None or ratio > worst["ratio"]):
                worst = {"part": p["part"], "tensor": tensor, "index": tuple(w["worst_index"]),
                         "got": _number(w["got"]), "expected": _number(w["expected"]),
                         "error": _number(w["error"]), "bound": _number(w["bound"]),
                         "ratio": ratio,
                         "bound_terms": {t["term"]: _number(t["value"]) for t in w["bound_terms"]}}
    failed = [p["part"] for p in parts if not p["pass"]]
    return Report(raw, text, raw["verdict"], bool(raw["pass"]),
                  max_err_over_bound=_number(raw.get("max_ratio")), worst=worst, failed=failed)


def _number(x: Any) -> Optional[float]:
    """A number of a report: JSON holds no NaN or infinity, so the reports write "nan", "inf" and
    "-inf" as strings (docs/cli.md); None stays None."""
    return float(x) if isinstance(x, str) else x


# --- the property suite's cases and runs --------------------------------------------------------

_RANGES = {  # keyword -> (flag, kind)
    "max_ranks": ("--max-dcp", int), "max_groups": ("--max-groups", int),
    "max_seq": ("--max-seq", int), "max_head_dim": ("--max-head-dim", int),
    "max_v_dim": ("--max-v-dim", int),
    "ranks": ("--dcp-sizes", "ints"), "head_dims": ("--head-dims", "ints"),
    "v_dims": ("--v-dims", "ints"),
    "softcap": ("softcap", bool), "sink": ("sink", bool), "topk": ("topk", bool),
    "window": ("window", bool), "shared_latent": ("latent", bool),
    "q_dtypes": ("--q-dtypes", tuple), "kv_dtypes": ("--kv-dtypes", tuple),
    "lse_bases": ("--lse-bases", tuple),
}


def _range_flags(ranges: dict) -> list[str]:
    flags, without = [], []
    for key, value in ranges.items():
        if key not in _RANGES and isinstance(value, bool):
            # Any other feature of the case model (its switches, as `properties --without` names
            # them): dcp-verify knows them, and refuses a name it does not know.
            if not value:
                without.append(key)
            continue
        if key not in _RANGES:
            raise TypeError(f"unknown range '{key}'; expected one of {', '.join(_RANGES)}, or a "
                            "feature of the case model = False")
        flag, kind = _RANGES[key]
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{key}: expected an int, got {type(value).__name__}")
            flags += [flag, str(int(value))]
        elif kind is bool:
            if not isinstance(value, bool):
                raise TypeError(f"{key}: expected a bool, got {type(value).__name__}")
            if not value:
                without.append(flag)
        elif kind == "ints":  # the only values drawn; shrinking goes toward the first
            if isinstance(value, (set, frozenset)):
                value = sorted(value, key=lambda v: v if isinstance(v, (int, np.integer)) else 0)
            elif isinstance(value, np.ndarray):
                value = value.tolist()
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
                raise TypeError(f"{key}: expected a set or sequence of ints, e.g. {{64, 128}}")
            if not value:
                raise ValueError(f"{key}: expected at least one value")
            flags += [flag, ",".join(str(int(v)) for v in value)]
        else:
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"{key}: expected a sequence of strings, e.g. ('bf16',)")
            if not value:
                raise ValueError(f"{key}: expected at least one value")
            flags += [flag, ",".join(value)]
    if without:
        flags += ["--without", ",".join(without)]
    return flags


def _call_text(fn: str, first: str, seed: int, count_name: str, count: int, ranges: dict,
               extra: dict) -> str:
    args = [first, f"seed={seed}", f"{count_name}={count}"]
    args += [f"{k}={v!r}" for k, v in {**extra, **ranges}.items()]
    return f"dcp_verify.{fn}({', '.join(args)})"
