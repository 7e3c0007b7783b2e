"""The property suite from Python: its cases, a run over an implementation, a failure's replay,
and the probe that measures an implementation's arithmetic."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._files import Case, _bridge, _is_path
from ._report import Report, SuiteDied, _call_text, _range_flags, _refused, _run
from ._serve import Claim, _checked_impl, _drive, _hello


def cases(seed: int = 0, n: int = 10, **ranges: Any) -> list[Case]:
    """The property suite's own random DCP cases: n of them from `seed`, as the DCP-path property
    draws them (ranges as for properties). Each is a Case whose ``setup`` says how its step runs.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed: expected a non-negative int, got {seed!r}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10000:
        raise ValueError(f"n: expected an int in [1, 10000], got {n!r}")
    flags = _range_flags(ranges)
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        proc = _run(["cases", "--seed", str(seed), "--count", str(n), "--out", tmp, *flags])
        if proc.returncode != 0:
            raise _refused(proc)
        names = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
        return [Case.load(os.path.join(tmp, f)) for f in names]


def properties(impl: Any, seed: Optional[int] = None, cases: int = 100, *, arrays: str = "numpy",
               timeout: int = 120, only: Optional[Sequence[str]] = None, bound: str = "sound",
               pinned: Any = None, device: Optional[str] = None, **ranges: Any) -> Report:
    """Runs the DCP property suite on an implementation and judges it against the oracle.

    impl: an object with one or more of partial(args), combine(args), step(args) returning
    (o, lse) (step may add (o_partial, lse_partial)), and a ``claim`` mapping in the result
    files' words (accum, accum_rounding, ftz, exp_rel_err, log_rel_err, p_cast, tile, splits,
    partial_dtype, merge_accum). The suite fills the levels it does not provide from dcp-verify's
    production path and judges every level it gets, naming the level and the rank that failed.

    seed: the RapidCheck seed (random when None; the report's reproduce line has it). cases:
    cases per property. arrays: "numpy" or "torch", what the levels receive. timeout: seconds a
    collective waits for a rank and a level call may take, counted from when the call is made
    (the levels are served one at a time, so a call's time includes the wait for the calls
    before it; a call that takes longer ends the run: TimeoutError naming it; a run that ends
    without a report, the suite's process killed by a signal, raises SuiteDied). ranges: what is
    drawn, for an implementation that supports less (max_ranks, max_groups, max_seq,
    max_head_dim, max_v_dim; ranks, head_dims, v_dims: the only N, Dk, Dv drawn, e.g.
    head_dims=(64, 128); softcap, sink, topk, window, shared_latent = False, and any other
    feature `dcp-verify properties --without` names, its name = False; q_dtypes from
    ("f32", "bf16", "f16"); kv_dtypes from those and the quantized caches' formats (those
    `dcp-verify properties --help` lists for --kv-dtypes: fp8e4m3, int8, ...), a quantized cache
    reaching partial and step dequantized in float32, each stored value times its scale;
    lse_bases from ("e", "2")). only: the properties to run (names as the report's rows:
    "pinned", "dcp-path", "dcp-fp8", "dcp-step", "dcp-step-fp8"), all when None. bound: the tier
    the properties assert, "sound" (default) or "statistical" (a SUSPECT case fails too).
    pinned: the pinned counterexamples the "pinned" property replays first, instead of the suite's
    own: a path to a JSON file as fixtures/dcp/pinned.json holds them, or a sequence of setups
    (a report's ``pin``, or entries {"why": ..., "setup": pin}). device: with arrays="torch",
    the device the levels' tensors are on ("cpu", "cuda", "cuda:1"; default the CPU): each call's
    inputs are copied there, and what a level returns may stay there.
    """
    levels = _checked_impl(impl, arrays, timeout, device)
    if bound not in ("sound", "statistical"):
        raise ValueError(f"bound: expected 'sound' or 'statistical', got {bound!r}")
    if only is not None and (isinstance(only, str) or not all(isinstance(x, str) for x in only)
                             or not only):
        raise TypeError(f"only: expected a non-empty sequence of property names, got {only!r}")
    hello = _hello(impl, getattr(impl, "claim", None))
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise TypeError(f"seed: expected an int in [0, 2**64), got {seed!r}")
    if isinstance(cases, bool) or not isinstance(cases, int) or not 1 <= cases <= 1_000_000:
        raise ValueError(f"cases: expected an int in [1, 1000000], got {cases!r}")
    flags = _range_flags(ranges)
    name = str(getattr(impl, "name", type(impl).__name__))
    extra = {} if arrays == "numpy" else {"arrays": arrays}
    if only is not None:
        extra["only"] = tuple(only)
        flags += ["--only", ",".join(only)]
    if bound != "sound":
        extra["bound"] = bound
        flags += ["--bound", bound]
    if device is not None:
        extra["device"] = device
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        if pinned is not None:
            path = _pinned_file(pinned, os.path.join(tmp, "pinned.json"))
            flags += ["--pinned", path]
            extra["pinned"] = os.fspath(pinned) if _is_path(pinned) else [dict(p) for p in pinned]
        reproduce = _call_text("properties", "impl", seed, "cases", cases, ranges, extra)
        try:
            raw, text, errors = _drive(impl, name, levels, hello, arrays,
                                       ["properties", "--seed", str(seed), "--cases", str(cases),
                                        "--timeout", str(timeout), *flags], device)
        except ValueError as e:  # a refusal of an entry of pinned=[...] names its index
            if pinned is None or _is_path(pinned):
                raise
            raise ValueError(re.sub(rf"(pinned counterexamples |--pinned )'{re.escape(path)}': "
                                    r"entry (\d+)", r"pinned[\2]", str(e))) from None
    # dcp-verify's reproduce lines name the bridge; this run is reproduced by the Python call.
    text = "\n".join(line if "reproduce: dcp-verify properties" not in line
                     else line[:line.index("reproduce:")] + "reproduce: " + reproduce
                     for line in text.replace(_bridge(), f"<{name}>").splitlines()) + "\n"
    failed = [p for p in raw["properties"] if p["result"] not in ("OK",)]
    tb = errors[-1] if errors else None
    raised = any("raised " in p.get("message", "") and "(traceback in the report)" in p.get("message", "")
                 for p in failed)
    verdict = ("INTERRUPTED" if raw.get("interrupted") else "OK" if raw["pass"]
               else "ERROR" if raised else "FAILED")
    if raised and tb:
        text += "# the implementation's last traceback:\n" + tb
    counterexample, pin, prop = None, None, None
    shrunk = [p for p in failed if p["name"] != "pinned"] or failed
    if shrunk:  # the shrunk case's report, without RapidCheck's source line of the assertion
        prop = shrunk[0]["name"]
        lines = shrunk[0]["message"].splitlines()
        cut = next((i + 1 for i, line in enumerate(lines) if line.startswith("RC_FAIL(")), 0)
        counterexample = "\n".join(line for line in lines[cut:] if line.strip())
        pin_line = next((x for x in lines if x.startswith("pin: ")), None)
        pin = json.loads(pin_line[len("pin: "):]) if pin_line else None
        # The pinned property replays through the partial and combine levels where an
        # implementation has them: a step level's failure is not replayed by its pin there.
        if prop in ("dcp-step", "dcp-step-fp8") and set(levels) & {"partial", "combine"}:
            pin = None
    return Report(raw, text, verdict, bool(raw["pass"]),
                  failed=[p["name"] for p in failed], property=prop,
                  counterexample=counterexample, pin=pin,
                  reproduce=reproduce, traceback=tb if raised else None)


def _pinned_file(pinned: Any, path: str) -> str:
    """properties(pinned=...): a path as it is, or setups written to `path` as pinned entries."""
    if _is_path(pinned):
        return os.fspath(pinned)
    if isinstance(pinned, Mapping) or not isinstance(pinned, Sequence) or not pinned:
        raise TypeError("pinned: expected a path or a non-empty sequence of setups "
                        f"(a report's pin), got {type(pinned).__name__}")
    entries = []
    for i, p in enumerate(pinned):
        if not isinstance(p, Mapping):
            raise TypeError(f"pinned[{i}]: expected a setup mapping (a report's pin), "
                            f"got {type(p).__name__}")
        entries.append({"why": f"pinned[{i}]", **p} if "setup" in p
                       else {"why": f"pinned[{i}]", "setup": dict(p)})
    with open(path, "w") as f:
        json.dump(entries, f)
    return path


def replay(impl: Any, pin: Mapping, **kwargs: Any) -> Report:
    """Runs one failure's case again, exactly: ``pin`` is a report's ``pin`` (the shrunk case's
    setup), replayed as the only pinned counterexample and nothing else drawn. ok once fixed.

        report = dcp_verify.properties(impl, seed=7)
        ...fix the kernel...
        assert dcp_verify.replay(impl, report.pin).ok

    kwargs: as for properties (arrays, timeout, bound; ranges, which the pin must fall within:
    by default they are the pin's own sizes, so a case drawn with wider ranges replays)."""
    for key in ("pinned", "only", "seed", "cases"):
        if key in kwargs:
            raise TypeError(f"replay: {key} is set by replay itself")
    if not isinstance(pin, Mapping):
        raise TypeError(f"pin: expected a report's pin (a mapping), got {type(pin).__name__}")
    report = properties(impl, seed=0, cases=1, only=("pinned",), pinned=[pin],
                        **{**_covering(pin), **kwargs})
    row = report.raw["properties"][0] if report.raw.get("properties") else {}
    if row.get("cases") == 0:  # nothing ran: never an OK
        what = re.sub(r" \([^)]*\)", "", row.get("what", ""))  # the pinned file: a scratch one
        raise ValueError(f"pin: not replayed: {what}")
    call = f"dcp_verify.replay(impl, {dict(pin)!r}"
    call += "".join(f", {k}={v!r}" for k, v in kwargs.items()) + ")"
    report.text = report.text.replace(report.reproduce or "\0", call)
    report.reproduce = call
    return report


def _covering(pin: Mapping) -> dict:
    """The maxima that let the pinned property replay `pin`: its own N, TP groups, S, Dk and Dv
    (a malformed pin is left for dcp-verify to refuse by name)."""
    try:
        spec, config = pin["spec"], pin["config"]
        n, tp = int(config["dcp_size"]), int(config["tp_size"])
        return {"max_ranks": n, "max_groups": max(1, tp // max(1, n)),
                "max_seq": max(1, int(spec["seq"])), "max_head_dim": int(spec["head_dim"]),
                "max_v_dim": int(spec["v_dim"])}
    except (KeyError, TypeError, ValueError):
        return {}


class Probe:
    """What probe measured: ``words`` (the claim as result-file metadata, a mapping to put in a
    result for ``check``: every word measured, the merge's own exponential and weight sum too),
    ``claim`` (the claim as an implementation's ``claim`` mapping for ``properties``: the plug-in
    ABI's fields, where it has one word for two the coarser), ``claim_words`` (``words`` as one
    line), ``findings`` (what was measured, the finding, its evidence), ``text`` (the report as
    dcp-verify prints it) and ``raw`` (its JSON)."""

    def __init__(self, raw: dict, text: str):
        self.raw = raw
        self.text = text
        self.words: dict[str, str] = dict(raw["words"])
        self.claim: Claim = dict(raw["claim"])  # type: ignore[assignment]
        self.claim_words: str = raw["claim_words"]
        self.findings: list[dict] = raw["findings"]

    def __repr__(self) -> str:
        return f"Probe({self.claim})"


def probe(impl: Any, *, arrays: str = "numpy", timeout: int = 120, lse_base: str = "e",
          device: Optional[str] = None) -> Probe:
    """Measures an implementation's arithmetic with crafted cases and returns the claim to state
    for it (docs/cli.md, `dcp-verify probe`): its exponential's accuracy, whether P is rounded
    before P.V, its partial's format, nearest or truncating sums, its rescale tile, its logs'
    accuracy and, where it has a combine level, its merge's. impl: as for properties (its own claim is not used).
    lse_base: "e" or "2", the base its levels are asked for. device: as for properties.

        impl.claim = dcp_verify.probe(impl).claim
        assert dcp_verify.properties(impl, seed=1, cases=50).ok

    A measurement is not a proof: the exponential's and the log's errors are the largest over
    the arguments tried, and splits, tf32 q.k and a 16-bit accumulator are not measured. A level
    that raises ends the probe with SuiteDied (a RuntimeError) and its traceback; one that takes
    longer than `timeout` with TimeoutError.
    """
    levels = _checked_impl(impl, arrays, timeout, device)
    if lse_base not in ("e", "2"):
        raise ValueError(f"lse_base: expected 'e' or '2', got {lse_base!r}")
    name = str(getattr(impl, "name", type(impl).__name__))
    raw, text, _ = _drive(impl, name, levels, _hello(impl, None), arrays,
                          ["probe", "--lse-base", lse_base, "--timeout", str(timeout)], device)
    if raw.get("error"):  # a level crashed the process: what it measured before, and no claim
        measured = ", ".join(f["measured"] for f in raw["findings"]) or "nothing"
        raise SuiteDied(f"the probe's dcp-verify process ended in {raw['error']} (measured "
                        f"before it: {measured})".replace(_bridge(), "impl"), 1)
    return Probe(raw, text.replace(_bridge(), f"<{name}>"))
