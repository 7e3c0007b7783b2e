"""The implementation seam: an object's levels (paged, partial, combine, step) served to the property
suite over the bridge plug-in's socket, one call at a time, with their arguments and outputs
checked."""

from __future__ import annotations

import json
import mmap
import os
import re
import socket
import struct
import subprocess
import tempfile
import traceback
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional, Protocol, TypedDict

import numpy as np

from ._files import _bridge, _is_array, _is_torch_tensor, binary
from ._report import SuiteDied, _in_python_words, _signal_of


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
    kv_dequant: str        # "none" (or "f32"), "bf16", "f16": what the paged level dequantizes
                           # K and V into before its products


class Implementation(Protocol):
    """What properties drives: any of the four levels (each optional) and a claim; optionally
    `lacks` (features never drawn for it, as --without names them: "softcap", "sink", "topk",
    "window", "latent", "batch"), `supports` (features added since, drawn only for an
    implementation that names them and does not name them in `lacks` too: "alibi", its levels get
    `alibi_slopes`; "token_scales", K/V scales by token, which the paged level gets as a pool of
    them; "page_scales", K/V scales kept one a pool page (and KV head), which the paged level gets
    as [pages, 1] or [pages, kv_heads], its `scale_grain` "page") and `page_layout` ("NHD", the default, or "HND": the pool the paged level receives)."""

    claim: Claim

    def paged(self, args: "LevelArgs") -> tuple[Any, Any]: ...
    def partial(self, args: "LevelArgs") -> tuple[Any, Any]: ...
    def combine(self, args: "LevelArgs") -> tuple[Any, Any]: ...
    def step(self, args: "LevelArgs") -> tuple[Any, ...]: ...


_LEVELS = ("paged", "partial", "combine", "step")
_FORMATS = {"f32": "f32", "bf16": "bf16", "f16": "f16"}
_FEATURES = ("softcap", "sink", "topk", "window", "latent", "batch")
# Features an implementation handles only when its `supports` names them (impl.h's versions 3 and
# 4): one written before them never meets them.
_OPT_IN = ("alibi", "token_scales", "page_scales")


def _claim_fields(claim: Any) -> dict:
    """The bridge's claim fields (impl.h's dcpv_claim) from a claim in the result files' words."""
    if claim is None:
        claim = {}
    if not isinstance(claim, Mapping):
        raise TypeError(f"impl.claim: expected a mapping, got {type(claim).__name__}")
    known = ("accum", "accum_rounding", "ftz", "exp_rel_err", "log_rel_err", "p_cast", "tile",
             "splits", "partial_dtype", "merge_accum", "kv_dequant")
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


def _hello(impl: Any, claim: Any) -> dict:
    """What the bridge's hello reply says of impl beside its name and levels (impl.h's
    dcpv_impl_v2, version 4): its claim's fields, the format its paged level dequantizes into,
    the features it lacks and its page layout."""
    fields = _claim_fields(claim)
    dequant = "none" if claim is None else claim.get("kv_dequant", "none")
    if dequant not in ("none", "f32", "bf16", "f16"):
        raise ValueError(f"impl.claim['kv_dequant']: expected one of ('none', 'f32', 'bf16', "
                         f"'f16'), got {dequant!r}")
    given = getattr(impl, "lacks", ())
    try:
        lacks = None if isinstance(given, str) else tuple(given)
    except TypeError:
        lacks = None
    known = _FEATURES + _OPT_IN
    if lacks is None or not all(x in known for x in lacks):
        raise ValueError(f"impl.lacks: expected a collection of {', '.join(known)}, got {given!r}")
    offered = getattr(impl, "supports", ())
    try:
        supports = None if isinstance(offered, str) else tuple(offered)
    except TypeError:
        supports = None
    if supports is None or not all(x in _OPT_IN for x in supports):
        raise ValueError(f"impl.supports: expected a collection of {', '.join(_OPT_IN)}, "
                         f"got {offered!r}")
    lacks += tuple(x for x in _OPT_IN if x not in supports and x not in lacks)
    layout = getattr(impl, "page_layout", "NHD")
    if layout not in ("NHD", "HND"):
        raise ValueError(f"impl.page_layout: expected 'NHD' or 'HND', got {layout!r}")
    return {"abi": 4, "claim": fields, "kv_dequant": "f32" if dequant == "none" else dequant,
            "lacks": list(lacks), "page_layout": layout}


_TENSORS = ("q", "q_pos", "k", "v", "k_pos", "sink", "topk", "alibi_slopes", "o_partial",
            "lse_partial", "query_start_loc", "seq_lens", "local_seq_lens", "block_table",
            "k_cache", "v_cache", "k_scale", "v_scale")


class LevelArgs:
    """One call's arguments: the scalar fields of impl.h's dcpv_*_args as attributes, and its
    tensors as arrays (numpy, or torch with arrays="torch"); absent tensors (no sink, no top-k,
    no ALiBi, V of a shared latent, no scales) are None. The paged level's pool comes in its
    storage format (torch: its own fp8 dtype, int8 for int8 codes; numpy, which has no bfloat16
    or fp8, widens those to float32, exactly). The arrays are only valid during the call: copy
    to keep."""

    def __init__(self, op: str, fields: dict, tensors: dict):
        self.op = op
        self.__dict__.update(fields)
        for name in _TENSORS:
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


class _Shared:
    """The memory this process and the bridge share (plugin/bridge/bridge.cpp, DCPV_BRIDGE_SHM_FD):
    each request in flight has a region there, its payload and then the room for its reply, so
    that arrays cross without the socket. Sparse: only what a payload writes takes memory. open()
    is None where it cannot be made."""

    BYTES = 1 << 30  # a request that finds no room in it goes through the socket

    def __init__(self, fd: int):
        self.fd = fd
        self.map = mmap.mmap(fd, self.BYTES)
        self.view = memoryview(self.map)
        self.f32 = np.frombuffer(self.map, dtype="<f4")  # where replies are written

    @classmethod
    def open(cls) -> Optional["_Shared"]:
        try:
            fd = os.memfd_create("dcp_verify_bridge")
        except (AttributeError, OSError):
            return None
        try:
            os.ftruncate(fd, cls.BYTES)
            return cls(fd)
        except (OSError, ValueError):
            os.close(fd)
            return None

    def close(self) -> None:
        del self.f32
        self.view.release()
        try:
            self.map.close()
        except BufferError:  # a level kept one of its arrays: the mapping goes with it
            pass
        os.close(self.fd)


def _recv_frame(sock: socket.socket, shared: Optional[_Shared] = None):
    """The next frame's header and payload (a view of the shared memory where it came that way);
    None once the socket is closed."""
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
    if "shm_bytes" in header and shared is not None:
        at = int(header.get("shm_at", 0))
        return header, shared.view[at:at + int(header["shm_bytes"])]
    return header, payload


def _send_frame(sock: socket.socket, header: dict, arrays: list[tuple[str, np.ndarray]] = (),
                shared: Optional[_Shared] = None, at: int = 0, room: int = 0) -> None:
    """A frame with `arrays` as f32 tensors: in the shared memory at offset `at` (a multiple of 4)
    where they fit in its `room` bytes, else on the socket."""
    fits = (shared is not None and at % 4 == 0 and 0 <= at and at + room <= len(shared.map)
            and 4 * sum(a.size for _, a in arrays) <= room)  # the room the bridge gave, checked
    if arrays and fits:
        tensors, offset = [], 0
        for name, a in arrays:
            start = (at + offset) // 4
            shared.f32[start:start + a.size].reshape(a.shape)[...] = a
            tensors.append({"name": name, "dtype": "f32", "shape": list(a.shape),
                            "offset": offset, "nbytes": 4 * a.size})
            offset += 4 * a.size
        text = json.dumps(dict(header, bytes=0, tensors=tensors, shm_at=at,
                               shm_bytes=offset)).encode()
        sock.sendall(struct.pack("<Q", len(text)) + text)
        return
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


class _Format(NamedTuple):
    """A wire format: its bytes, numpy's dtype (None: widened to float32, exactly, as numpy has no
    bfloat16 or fp8), torch's dtype, and for fp8 its exponent bits, bias and encoding ("fn": no
    infinity, S.1111.111 is NaN; "fnuz": no infinity, no -0, 0x80 is NaN; "ieee": the all-ones
    exponent is inf and NaN)."""
    bytes: int
    numpy: Optional[str]
    torch: str
    fp8: Optional[tuple] = None


# Every format the suite hands a level, one row each.
_WIRE = {
    "f32": _Format(4, "<f4", "float32"),
    "f16": _Format(2, "<f2", "float16"),
    "bf16": _Format(2, None, "bfloat16"),
    "fp8e4m3": _Format(1, None, "float8_e4m3fn", (4, 7, "fn")),
    "fp8e5m2": _Format(1, None, "float8_e5m2", (5, 15, "ieee")),
    "fp8e4m3fnuz": _Format(1, None, "float8_e4m3fnuz", (4, 8, "fnuz")),
    "i8": _Format(1, "i1", "int8"),
    "i32": _Format(4, "<i4", "int32"),
    "i64": _Format(8, "<i8", "int64"),
}


def _fp8_table(exponent_bits: int, bias: int, encoding: str) -> np.ndarray:
    """Every fp8 code's value as float32, for the encodings of _Format.fp8."""
    mantissa_bits = 7 - exponent_bits
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> mantissa_bits) & ((1 << exponent_bits) - 1)
    m = codes & ((1 << mantissa_bits) - 1)
    value = np.where(e == 0, m * 2.0 ** (1 - bias - mantissa_bits),
                     (1 + m / 2.0 ** mantissa_bits) * 2.0 ** (e.astype(float) - bias))
    top = e == (1 << exponent_bits) - 1
    if encoding == "fn":
        value = np.where(top & (m == (1 << mantissa_bits) - 1), np.nan, value)
    elif encoding == "fnuz":
        value = np.where(codes == 0x80, np.nan, value)
    else:
        value = np.where(top, np.where(m == 0, np.inf, np.nan), value)
    return (sign * value).astype(np.float32)


_FP8 = {name: _fp8_table(*f.fp8) for name, f in _WIRE.items() if f.fp8}


def _arrays_of(header: dict, payload: bytearray, kind: str, device: Optional[str] = None) -> dict:
    """The frame's tensors as numpy arrays, or as torch tensors (on `device`, where given)."""
    out = {}
    for t in header.get("tensors", []):
        shape, off, nbytes, dt = tuple(t["shape"]), t["offset"], t["nbytes"], t["dtype"]
        if kind == "torch":
            import torch
            tdt = getattr(torch, _WIRE[dt].torch)
            count = nbytes // _WIRE[dt].bytes
            arr = (torch.frombuffer(payload, dtype=tdt, count=count, offset=off).reshape(shape)
                   if count else torch.zeros(shape, dtype=tdt))
            if device is not None:
                arr = arr.to(device)
        elif dt == "bf16":  # numpy has no bfloat16: widened to float32, exactly
            bits = np.frombuffer(payload, dtype="<u2", count=nbytes // 2, offset=off)
            arr = (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        elif dt in _FP8:  # nor fp8: each code's value, exactly
            codes = np.frombuffer(payload, dtype=np.uint8, count=nbytes, offset=off)
            arr = _FP8[dt][codes].reshape(shape)
        else:
            arr = np.frombuffer(payload, dtype=_WIRE[dt].numpy,
                                count=nbytes // _WIRE[dt].bytes, offset=off).reshape(shape)
        out[t["name"]] = arr
    return out


def _empty_rows(op: str, f: dict, kind: str, have: dict, device: Optional[str] = None) -> dict:
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
            out[name] = torch.zeros(shape, dtype=torch.int64 if name == "k_pos" else torch.float32,
                                    device=device)
        else:
            out[name] = np.zeros(shape, dtype=np.int64 if name == "k_pos" else np.float32)
    return out


def _as_f32(x: Any, what: str, shape: tuple) -> np.ndarray:
    if _is_torch_tensor(x):
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
           hello: dict, kind: str, errors: list, device: Optional[str] = None,
           shared: Optional[_Shared] = None) -> None:
    """Answers the bridge's requests until dcp-verify exits."""
    sock.settimeout(1.0)
    while True:
        try:
            frame = _recv_frame(sock, shared)
        except socket.timeout:
            if proc.poll() is not None:
                return
            continue
        if frame is None:
            return
        header, payload = frame
        op = header.get("op")
        if op == "hello":
            _send_frame(sock, {"name": name, "levels": levels, **hello})
            continue
        fields = header.get("args", {})
        try:
            sock.settimeout(None)
            arrays = _arrays_of(header, payload, kind, device)
            arrays.update(_empty_rows(op, fields, kind, arrays, device))
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
            # Through the shared memory only where the bridge gave the reply room there.
            via = shared if "reply_at" in header else None
            _send_frame(sock, *reply, shared=via, at=int(header.get("reply_at", 0)),
                        room=int(header.get("reply_room", 0)))
        except OSError as e:
            try:  # dcp-verify ended while the level ran (a level past --timeout ends it)
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise e from None
            return
        finally:
            sock.settimeout(1.0)


def _checked_impl(impl: Any, arrays: str, timeout: int, device: Optional[str] = None) -> list[str]:
    """The levels impl provides, after checking the arguments properties and probe share."""
    levels = [lv for lv in _LEVELS if callable(getattr(impl, lv, None))]
    if not levels:
        raise TypeError("impl: expected an object with a paged, partial, combine or step method")
    if arrays not in ("numpy", "torch"):
        raise ValueError(f"arrays: expected 'numpy' or 'torch', got {arrays!r}")
    if arrays == "torch":
        import torch  # noqa: F401  (fails here, not inside a level, when torch is missing)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise ValueError(f"timeout: expected an int >= 1 (seconds), got {timeout!r}")
    if device is not None:
        _check_device(device, arrays)
    return levels


def _check_device(device: Any, arrays: str) -> None:
    """device= names a device torch has here; numpy arrays live in host memory only."""
    if arrays != "torch":
        raise ValueError(f"device: levels receive numpy arrays in host memory; device={device!r} "
                         "needs arrays='torch'")
    import torch
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: expected a torch device ('cpu', 'cuda', 'cuda:1'), "
                         f"got {device!r}") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (dev.index or 0) >= count:
            raise ValueError(f"device: {device!r}, but torch sees {count} CUDA device(s) here")
    elif dev.type != "cpu":
        raise ValueError(f"device: expected 'cpu' or a CUDA device, got {device!r}")


def _drive(impl: Any, name: str, levels: list, hello: dict, arrays: str,
           args: list[str], device: Optional[str] = None) -> tuple[dict, str, list[str]]:
    """Runs `dcp-verify ARGS --impl <bridge> --json F`, serving the implementation's levels from
    this process until it exits: (the JSON report, stdout, the levels' tracebacks). A refusal
    raises ValueError, a level past --timeout TimeoutError, any other run that wrote no report
    SuiteDied (with the implementation's last traceback where it raised)."""
    parent, child = socket.socketpair()
    shared = _Shared.open()
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dcp_verify_") as tmp:
        report_path = os.path.join(tmp, "report.json")
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        cmd = [binary(), *args, "--impl", _bridge(), "--json", report_path]
        env = dict(os.environ, DCPV_BRIDGE_FD=str(child.fileno()))
        fds = (child.fileno(),)
        if shared is not None:
            env["DCPV_BRIDGE_SHM_FD"] = str(shared.fd)
            fds += (shared.fd,)
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, pass_fds=fds, env=env)
            child.close()
            try:
                _serve(parent, proc, impl, name, levels, hello, arrays, errors, device, shared)
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                parent.close()
                if shared is not None:
                    shared.close()
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
