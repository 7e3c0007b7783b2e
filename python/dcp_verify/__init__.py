"""dcp_verify: drive and judge Decode Context Parallelism (DCP) kernels against an exact oracle.

    import dcp_verify

    o, lse = dcp_verify.reference("case.safetensors")           # float64, the oracle's
    report = dcp_verify.check("case.safetensors", {"o": o32, "lse": lse32, "accum": "f32"})
    report = dcp_verify.properties(MyKernel(), seed=1, cases=50, softcap=False)
    assert report.ok, report.text

A case or result is a path to a safetensors file (docs/format.md) or a mapping with the same
names: arrays (numpy, torch or any DLPack exporter on the CPU) for the tensors, strings (or
numbers and booleans, written as the files write them) for the metadata, and optionally
``"dtypes": {"k": "BF16"}`` to store a float32 array in a narrower format it holds exactly.

An implementation given to ``properties`` is any object with one or more of the methods
``partial(args)``, ``combine(args)`` and ``step(args)`` and a ``claim`` mapping (see ``Claim``
in the type stubs and python/README.md). The property suite runs in the ``dcp-verify`` binary;
every level call, for every case and every shrink step, comes back to this process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol, TypedDict

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))

try:
    from . import _core
except ImportError as e:  # a wheel built without its native parts, or for another Python
    raise ImportError(
        f"dcp_verify: its extension module dcp_verify._core does not load from {_HERE} ({e}); "
        "the installed package lacks its native parts or was built for another Python: "
        "install a wheel that tools/wheel built and checked") from None

__all__ = ["Case", "Claim", "LevelArgs", "Probe", "Report", "SuiteDied", "reference", "check",
           "cases", "properties", "replay", "probe", "binary"]
__version__ = "0.1.0"


def binary() -> str:
    """The dcp-verify binary the package runs: $DCP_VERIFY_BIN, else the one installed with it."""
    path = os.environ.get("DCP_VERIFY_BIN") or os.path.join(_HERE, "bin", "dcp-verify")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"dcp-verify binary not found or not executable: {path}")
    return path


def _bridge() -> str:
    path = os.environ.get("DCP_VERIFY_BRIDGE") or os.path.join(_HERE, "lib", "libdcpv_bridge.so")
    if not os.path.exists(path):
        raise FileNotFoundError(f"the bridge plug-in is missing: {path}")
    return path


# --- cases and results as mappings ------------------------------------------------------------

def _meta_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"metadata '{key}': expected a string, number or bool, "
                    f"got {type(value).__name__}")


def _is_array(x: Any) -> bool:
    return hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__") or isinstance(x, np.ndarray)


def _split(what: str, mapping: Mapping) -> tuple[dict, dict, dict]:
    """(tensors, metadata, dtypes) of a case or result mapping."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{what}: expected a path or a mapping, got {type(mapping).__name__}")
    tensors, metadata, dtypes = {}, {}, {}
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"{what}: keys must be strings, got {key!r}")
        if key == "dtypes":
            if not isinstance(value, Mapping):
                raise TypeError(f"{what}['dtypes']: expected a mapping of tensor name to format")
            for name, fmt in value.items():
                if not isinstance(name, str) or not isinstance(fmt, str):
                    raise TypeError(f"{what}['dtypes']: expected str -> str, got {name!r}: {fmt!r}")
                dtypes[name] = fmt
        elif _is_array(value):
            tensors[key] = value
        else:
            metadata[key] = _meta_text(key, value)
    return tensors, metadata, dtypes


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


class Case(Mapping):
    """A case: its arrays, string metadata and storage formats, usable wherever a case is.

    ``case["q"]`` is an array; ``case.metadata`` the string metadata; ``case.dtypes`` each
    tensor's format in the file (16-bit arrays are float32 in numpy, exactly); ``case.setup``,
    for the property suite's cases, how the DCP step runs (N, interleave, combine, chunks, ...).
    """

    def __init__(self, tensors: dict, metadata: dict, dtypes: dict, setup: Optional[dict] = None):
        self.tensors = dict(tensors)
        self.metadata = dict(metadata)
        self.dtypes = dict(dtypes)
        self.setup = setup

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Case":
        tensors, metadata, dtypes = _core.read_file(os.fspath(path))
        setup = json.loads(metadata["x_setup"]) if "x_setup" in metadata else None
        return cls(tensors, metadata, dtypes, setup)

    def __getitem__(self, key: str) -> Any:
        if key == "dtypes":
            return self.dtypes
        if key in self.tensors:
            return self.tensors[key]
        return self.metadata[key]

    def __iter__(self):
        yield from self.tensors
        yield from self.metadata
        yield "dtypes"

    def __len__(self) -> int:
        return len(self.tensors) + len(self.metadata) + 1

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{list(np.shape(v))}" for k, v in self.tensors.items())
        return f"Case({shapes}; {self.metadata})"


def _write(path: str, what: str, x: Any) -> str:
    """The path of x as a file: x itself when it is a path, else x written to `path`."""
    if _is_path(x):
        return os.fspath(x)
    tensors, metadata, dtypes = _split(what, x)
    _core.write_file(path, tensors, metadata, dtypes)
    return path


def reference(case: Any, tier: str = "fast") -> tuple[np.ndarray, np.ndarray]:
    """The oracle's (o [T, Hq, Dv], lse [T, Hq]) of a case, float64, lse in the case's base.

    tier: "fast" (double-double, >= 100 bits) or "certify" (MPFR).
    """
    if not isinstance(tier, str):
        raise TypeError(f"tier: expected 'fast' or 'certify', got {type(tier).__name__}")
    if _is_path(case):
        return _core.reference_file(os.fspath(case), tier)
    tensors, metadata, dtypes = _split("case", case)
    return _core.reference(tensors, metadata, dtypes, tier, "case")


# --- reports ------------------------------------------------------------------------------------

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
        lines = self.counterexample.replace(" | output: ", "\noutput: ").splitlines()
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
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        case_path = _write(os.path.join(tmp, "case.safetensors"), "case", case)
        result_path = _write(os.path.join(tmp, "result.safetensors"), "result", result)
        report_path = os.path.join(tmp, "report.json")
        proc = _run(["check", "--case", case_path, "--result", result_path, "--tier", tier,
                     "--bound", bound, "--json", report_path])
        if proc.returncode not in (0, 1):
            raise _refused(proc)
        with open(report_path) as f:
            raw = json.load(f)
    parts = raw.get("parts") or [p for r in raw.get("requests", []) for p in r["parts"]]
    worst = None
    for p in parts:
        for tensor in ("o", "lse"):
            w = p[tensor]
            if w.get("ratio") is not None and (worst is None or w["ratio"] > worst["ratio"]):
                worst = {"part": p["part"], "tensor": tensor, "index": tuple(w["worst_index"]),
                         "got": w["got"], "expected": w["expected"], "error": w["error"],
                         "bound": w["bound"], "ratio": w["ratio"],
                         "bound_terms": {t["term"]: t["value"] for t in w["bound_terms"]}}
    failed = [p["part"] for p in parts if not p["pass"]]
    return Report(raw, proc.stdout, raw["verdict"], bool(raw["pass"]),
                  max_err_over_bound=raw.get("max_ratio"), worst=worst, failed=failed)


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
        if key not in _RANGES:
            raise TypeError(f"unknown range '{key}'; expected one of {', '.join(_RANGES)}")
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
        elif kind == "ints":  # the only values drawn
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
                raise TypeError(f"{key}: expected a sequence of ints, e.g. (64, 128)")
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


class Claim(TypedDict, total=False):
    """How an implementation computes, in the result files' metadata words (docs/format.md)."""

    accum: str             # "f32" or "tf32" (q.k and P.V operands rounded to tf32)
    accum_rounding: str    # "nearest" (CPU, CUDA cores) or "any" (tensor cores; the default)
    ftz: bool              # subnormal results may be flushed to zero
    exp_rel_err: float     # its exp/exp2's largest relative error; 0: 2 ulp
    log_rel_err: float     # its log/log2's; 0: the default budget
    p_cast: str            # "none", "bf16" or "f16": P rounded before P.V
    tile: int              # keys per online-softmax tile, at least (1: any tiling)
    splits: int            # split-KV pieces merged inside a rank
    partial_dtype: str     # "f32", "bf16" or "f16": the format O_r is stored in
    merge_accum: str       # "f32", "bf16" or "f16": the combine's sums


class Implementation(Protocol):
    """What properties drives: any of the three levels (each optional) and a claim."""

    claim: Claim

    def partial(self, args: "LevelArgs") -> tuple[Any, Any]: ...
    def combine(self, args: "LevelArgs") -> tuple[Any, Any]: ...
    def step(self, args: "LevelArgs") -> tuple[Any, ...]: ...


_LEVELS = ("partial", "combine", "step")
_FORMATS = {"f32": "f32", "bf16": "bf16", "f16": "f16"}


def _claim_fields(claim: Any) -> dict:
    """The bridge's claim fields (impl.h's dcpv_claim) from a claim in the result files' words."""
    if claim is None:
        claim = {}
    if not isinstance(claim, Mapping):
        raise TypeError(f"impl.claim: expected a mapping, got {type(claim).__name__}")
    known = ("accum", "accum_rounding", "ftz", "exp_rel_err", "log_rel_err", "p_cast", "tile",
             "splits", "partial_dtype", "merge_accum")
    for key in claim:
        if key not in known:
            raise ValueError(f"impl.claim['{key}']: unknown key; expected one of {', '.join(known)}")

    def choice(key, allowed, default):
        v = claim.get(key, default)
        if v not in allowed:
            raise ValueError(f"impl.claim['{key}']: expected one of {allowed}, got {v!r}")
        return v

    def number(key, lo, hi):
        v = claim.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v < hi:
            raise ValueError(f"impl.claim['{key}']: expected a number in [{lo}, {hi}), got {v!r}")
        return float(v)

    def count(key):
        v = claim.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"impl.claim['{key}']: expected an int >= 1, got {v!r}")
        return v

    ftz = claim.get("ftz", False)
    if ftz not in (True, False, 0, 1):
        raise ValueError(f"impl.claim['ftz']: expected a bool, got {ftz!r}")
    p_cast = choice("p_cast", ("none", "f32", "bf16", "f16"), "none")
    return {
        "tf32": int(choice("accum", ("f32", "tf32"), "f32") == "tf32"),
        "accum_rounding_nearest": int(choice("accum_rounding", ("nearest", "any"), "any") == "nearest"),
        "ftz": int(bool(ftz)),
        "exp_rel_err": number("exp_rel_err", 0.0, 0.5),
        "log_rel_err": number("log_rel_err", 0.0, 0.5),
        "p_cast": "f32" if p_cast == "none" else p_cast,
        "tile": count("tile"),
        "splits": count("splits"),
        "partial_o": choice("partial_dtype", tuple(_FORMATS), "f32"),
        "combine_accum": choice("merge_accum", tuple(_FORMATS), "f32"),
    }


class LevelArgs:
    """One call's arguments: the scalar fields of impl.h's dcpv_*_args as attributes, and its
    tensors as arrays (numpy, or torch with arrays="torch"); absent tensors (no sink, no top-k,
    V of a shared latent) are None. The arrays are only valid during the call: copy to keep."""

    def __init__(self, op: str, fields: dict, tensors: dict):
        self.op = op
        self.__dict__.update(fields)
        for name in ("q", "q_pos", "k", "v", "k_pos", "sink", "topk", "o_partial", "lse_partial"):
            setattr(self, name, tensors.get(name))

    def __repr__(self) -> str:
        scalars = {k: v for k, v in self.__dict__.items() if not _is_array(v) and v is not None}
        return f"LevelArgs({scalars})"


def _recv_exact(sock: socket.socket, n: int, into: Optional[bytearray] = None) -> Optional[bytearray]:
    buf = into if into is not None else bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None
        got += k
    return buf


def _recv_frame(sock: socket.socket) -> Optional[tuple[dict, bytearray]]:
    head = _recv_exact(sock, 8)
    if head is None:
        return None
    (n,) = struct.unpack("<Q", head)
    body = _recv_exact(sock, n)
    if body is None:
        return None
    header = json.loads(bytes(body))
    payload = _recv_exact(sock, int(header.get("bytes", 0)))
    if payload is None:
        return None
    return header, payload


def _send_frame(sock: socket.socket, header: dict, arrays: list[tuple[str, np.ndarray]] = ()) -> None:
    tensors, chunks, offset = [], [], 0
    for name, a in arrays:
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        tensors.append({"name": name, "dtype": "f32", "shape": list(a.shape), "offset": offset,
                        "nbytes": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    header = dict(header, bytes=offset)
    if arrays:
        header["tensors"] = tensors
    text = json.dumps(header).encode()
    sock.sendall(struct.pack("<Q", len(text)) + text + b"".join(chunks))


_NP = {"f32": "<f4", "f16": "<f2", "i64": "<i8"}


def _arrays_of(header: dict, payload: bytearray, kind: str) -> dict:
    out = {}
    for t in header.get("tensors", []):
        shape, off, nbytes, dt = tuple(t["shape"]), t["offset"], t["nbytes"], t["dtype"]
        if kind == "torch":
            import torch
            tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                   "i64": torch.int64}[dt]
            count = nbytes // torch.tensor([], dtype=tdt).element_size()
            arr = (torch.frombuffer(payload, dtype=tdt, count=count, offset=off).reshape(shape)
                   if count else torch.zeros(shape, dtype=tdt))
        elif dt == "bf16":  # numpy has no bfloat16: widened to float32, exactly
            bits = np.frombuffer(payload, dtype="<u2", count=nbytes // 2, offset=off)
            arr = (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        else:
            arr = np.frombuffer(payload, dtype=_NP[dt], count=nbytes // np.dtype(_NP[dt]).itemsize,
                                offset=off).reshape(shape)
        out[t["name"]] = arr
    return out


def _empty_rows(op: str, f: dict, kind: str, have: dict) -> dict:
    """Empty keys as empty arrays, not None, at both levels (an empty buffer crosses the bridge
    as no tensor): k [0, kv_heads, Dk], v [0, kv_heads, Dv] (not for a shared latent), and for
    the partial level k_pos [0]; a partial of a rank that owns no tokens, or a step over an empty
    context."""
    if (op, f.get("keys" if op == "partial" else "seq")) not in (("partial", 0), ("step", 0)):
        return {}
    shapes = {"k": (0, f["kv_heads"], f["head_dim"])}
    if op == "partial":
        shapes["k_pos"] = (0,)
    if not f.get("shared_latent"):
        shapes["v"] = (0, f["kv_heads"], f["v_dim"])
    out = {}
    for name, shape in shapes.items():
        if name in have:
            continue
        if kind == "torch":
            import torch
            out[name] = torch.zeros(shape, dtype=torch.int64 if name == "k_pos" else torch.float32)
        else:
            out[name] = np.zeros(shape, dtype=np.int64 if name == "k_pos" else np.float32)
    return out


def _as_f32(x: Any, what: str, shape: tuple) -> np.ndarray:
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().to("cpu").float().numpy()
    try:
        a = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: expected an array, got {type(x).__name__} ({e})") from None
    if a.shape != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {a.shape}")
    return a


def _outputs(op: str, out: Any, f: dict) -> list[tuple[str, np.ndarray]]:
    """The level's returned arrays, checked against the shapes impl.h gives."""
    if op == "step":
        t, h, n = f["tokens"], f["q_heads"], f["ranks"]
    else:
        t, h, n = f["tokens"], f["heads"], f.get("ranks", 1)
    dv = f["v_dim"]
    if not isinstance(out, (tuple, list)) or len(out) not in ((2, 4) if op == "step" else (2,)):
        want = "(o, lse) or (o, lse, o_partial, lse_partial)" if op == "step" else "(o, lse)"
        raise TypeError(f"{op} returned {type(out).__name__}; expected a tuple {want}")
    arrays = [("o", _as_f32(out[0], f"{op}: o", (t, h, dv))),
              ("lse", _as_f32(out[1], f"{op}: lse", (t, h)))]
    if len(out) == 4:
        arrays += [("o_partial", _as_f32(out[2], f"{op}: o_partial", (n, t, h, dv))),
                   ("lse_partial", _as_f32(out[3], f"{op}: lse_partial", (n, t, h)))]
    return arrays


def _serve(sock: socket.socket, proc: subprocess.Popen, impl: Any, name: str, levels: list,
           claim: dict, kind: str, errors: list) -> None:
    """Answers the bridge's requests until dcp-verify exits."""
    sock.settimeout(1.0)
    while True:
        try:
            frame = _recv_frame(sock)
        except socket.timeout:
            if proc.poll() is not None:
                return
            continue
        if frame is None:
            return
        header, payload = frame
        op = header.get("op")
        if op == "hello":
            _send_frame(sock, {"name": name, "levels": levels, "claim": claim})
            continue
        fields = header.get("args", {})
        try:
            sock.settimeout(None)
            arrays = _arrays_of(header, payload, kind)
            arrays.update(_empty_rows(op, fields, kind, arrays))
            args = LevelArgs(op, fields, arrays)
            arrays = _outputs(op, getattr(impl, op)(args), fields)
        except Exception as e:  # the implementation's failure, reported with its traceback
            where = f" on dcp rank {fields['rank']}" if "rank" in fields else ""
            errors.append(f"level {op}{where} raised:\n{traceback.format_exc()}")
            line = " ".join(f"{type(e).__name__}: {e}".split())
            reply = ({"ok": False, "error": f"raised {line[:300]} (traceback in the report)"}, ())
        else:
            reply = ({"ok": True}, arrays)
        try:
            _send_frame(sock, *reply)
        except OSError as e:
            try:  # dcp-verify ended while the level ran (a level past --timeout ends it)
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise e from None
            return
        finally:
            sock.settimeout(1.0)


def _checked_impl(impl: Any, arrays: str, timeout: int) -> list[str]:
    """The levels impl provides, after checking the arguments properties and probe share."""
    levels = [lv for lv in _LEVELS if callable(getattr(impl, lv, None))]
    if not levels:
        raise TypeError("impl: expected an object with a partial, combine or step method")
    if arrays not in ("numpy", "torch"):
        raise ValueError(f"arrays: expected 'numpy' or 'torch', got {arrays!r}")
    if arrays == "torch":
        import torch  # noqa: F401  (fails here, not inside a level, when torch is missing)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise ValueError(f"timeout: expected an int >= 1 (seconds), got {timeout!r}")
    return levels


def _drive(impl: Any, name: str, levels: list, claim: dict, arrays: str,
           args: list[str]) -> tuple[dict, str, list[str]]:
    """Runs `dcp-verify ARGS --impl <bridge> --json F`, serving the implementation's levels from
    this process until it exits: (the JSON report, stdout, the levels' tracebacks). A refusal
    raises ValueError, a level past --timeout TimeoutError, any other run that wrote no report
    SuiteDied (with the implementation's last traceback where it raised)."""
    parent, child = socket.socketpair()
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        report_path = os.path.join(tmp, "report.json")
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        cmd = [binary(), *args, "--impl", _bridge(), "--json", report_path]
        env = dict(os.environ, DCPV_BRIDGE_FD=str(child.fileno()))
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, pass_fds=(child.fileno(),),
                                    env=env)
            child.close()
            try:
                _serve(parent, proc, impl, name, levels, claim, arrays, errors)
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                parent.close()
        with open(out_path) as f:
            text = f.read()
        with open(err_path) as f:
            err_text = f.read()
        # A level past its time ends the run (exit 124) after the report of what finished:
        # raised as TimeoutError all the same.
        if proc.returncode in (2, 124) or not os.path.exists(report_path):
            rc = proc.returncode
            last = err_text.strip().splitlines()[-1:] or [""]
            line = re.sub(r"^dcp-verify:? ", "", last[0]).replace(_bridge(), "impl")
            if rc == 124:  # a level took longer than `timeout`
                raise TimeoutError(line)
            if rc == 2:  # the arguments, named as this call names them
                raise ValueError(_in_python_words(re.sub(r"^(properties|probe): ", "", line)))
            if errors and "(traceback in the report)" in line:  # no report here: it follows
                line = line.replace("(traceback in the report)", "(its traceback follows)")
                line += "\n" + errors[-1]
            how = f"was killed by {_signal_of(rc)}" if rc < 0 else f"exited {rc}"
            raise SuiteDied(f"the suite's dcp-verify process {how} without a report"
                            + (f": {line}" if line else ""), rc)
        with open(report_path) as f:
            raw = json.load(f)
    return raw, text, errors


def properties(impl: Any, seed: Optional[int] = None, cases: int = 100, *, arrays: str = "numpy",
               timeout: int = 120, only: Optional[Sequence[str]] = None, bound: str = "sound",
               pinned: Any = None, **ranges: Any) -> Report:
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
    head_dims=(64, 128); softcap, sink, topk, window, shared_latent = False; q_dtypes from
    ("f32", "bf16", "f16"); kv_dtypes from those and ("fp8e4m3", "fp8e5m2"), an fp8 cache
    reaching the levels dequantized in float32, each stored value times its KV head's scale;
    lse_bases from ("e", "2")). only: the properties to run (names as the report's rows:
    "pinned", "dcp-path", "dcp-fp8", "dcp-step", "dcp-step-fp8"), all when None. bound: the tier
    the properties assert, "sound" (default) or "statistical" (a SUSPECT case fails too).
    pinned: the pinned counterexamples the "pinned" property replays first, instead of the suite's
    own: a path to a JSON file as fixtures/dcp/pinned.json holds them, or a sequence of setups
    (a report's ``pin``, or entries {"why": ..., "setup": pin}).
    """
    levels = _checked_impl(impl, arrays, timeout)
    if bound not in ("sound", "statistical"):
        raise ValueError(f"bound: expected 'sound' or 'statistical', got {bound!r}")
    if only is not None and (isinstance(only, str) or not all(isinstance(x, str) for x in only)
                             or not only):
        raise TypeError(f"only: expected a non-empty sequence of property names, got {only!r}")
    claim = _claim_fields(getattr(impl, "claim", None))
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
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        if pinned is not None:
            path = _pinned_file(pinned, os.path.join(tmp, "pinned.json"))
            flags += ["--pinned", path]
            extra["pinned"] = os.fspath(pinned) if _is_path(pinned) else [dict(p) for p in pinned]
        reproduce = _call_text("properties", "impl", seed, "cases", cases, ranges, extra)
        try:
            raw, text, errors = _drive(impl, name, levels, claim, arrays,
                                       ["properties", "--seed", str(seed), "--cases", str(cases),
                                        "--timeout", str(timeout), *flags])
        except ValueError as e:  # a refusal of an entry of pinned=[...] names its index
            if pinned is None or _is_path(pinned):
                raise
            raise ValueError(re.sub(rf"pinned counterexamples '{re.escape(path)}': entry (\d+)",
                                    r"pinned[\1]", str(e))) from None
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

    kwargs: as for properties (arrays, timeout, bound)."""
    for key in ("pinned", "only", "seed", "cases"):
        if key in kwargs:
            raise TypeError(f"replay: {key} is set by replay itself")
    if not isinstance(pin, Mapping):
        raise TypeError(f"pin: expected a report's pin (a mapping), got {type(pin).__name__}")
    report = properties(impl, seed=0, cases=1, only=("pinned",), pinned=[pin], **kwargs)
    call = f"dcp_verify.replay(impl, {dict(pin)!r}"
    call += "".join(f", {k}={v!r}" for k, v in kwargs.items()) + ")"
    report.text = report.text.replace(report.reproduce or "\0", call)
    report.reproduce = call
    return report


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


def probe(impl: Any, *, arrays: str = "numpy", timeout: int = 120, lse_base: str = "e") -> Probe:
    """Measures an implementation's arithmetic with crafted cases and returns the claim to state
    for it (docs/cli.md, `dcp-verify probe`): its exponential's accuracy, whether P is rounded
    before P.V, its partial's format, nearest or truncating sums, its rescale tile and, where it
    has a combine level, its merge's. impl: as for properties (its own claim is not used).
    lse_base: "e" or "2", the base its levels are asked for.

        impl.claim = dcp_verify.probe(impl).claim
        assert dcp_verify.properties(impl, seed=1, cases=50).ok

    A measurement is not a proof: the exponential's error is the largest over the arguments
    tried, and log_rel_err, splits, tf32 q.k and a 16-bit accumulator are not measured. A level
    that raises ends the probe with SuiteDied (a RuntimeError) and its traceback; one that takes
    longer than `timeout` with TimeoutError.
    """
    levels = _checked_impl(impl, arrays, timeout)
    if lse_base not in ("e", "2"):
        raise ValueError(f"lse_base: expected 'e' or '2', got {lse_base!r}")
    name = str(getattr(impl, "name", type(impl).__name__))
    raw, text, _ = _drive(impl, name, levels, _claim_fields(None), arrays,
                          ["probe", "--lse-base", lse_base, "--timeout", str(timeout)])
    if raw.get("error"):  # a level crashed the process: what it measured before, and no claim
        measured = ", ".join(f["measured"] for f in raw["findings"]) or "nothing"
        raise SuiteDied(f"the probe's dcp-verify process ended in {raw['error']} (measured "
                        f"before it: {measured})".replace(_bridge(), "impl"), 1)
    return Probe(raw, text.replace(_bridge(), f"<{name}>"))
