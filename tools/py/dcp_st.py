"""Reads and writes safetensors files with numpy, for the lessons' Python blocks and the figures.

The format as dcp-verify reads it (oracle/safetensors.cpp, docs/format.md): an 8-byte
little-endian header length n, n bytes of JSON header padded with spaces, then the data the
tensors cover exactly. BF16 is read into float32 exactly (numpy has no bfloat16) and written from
float32 values that must already be bf16-exact.

    tensors, metadata = load("ref.safetensors")        # {"o": ndarray, "lse": ndarray}, {...}
    save("case.safetensors", {"q": q, "k": k}, {"v_dim": "64"}, bf16={"q", "k"})
"""

import json
import struct

import numpy as np

_READ = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8"}
_WRITE = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32",
          np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}
_HEADER_ALIGN = 8  # the data starts 8-byte aligned


def load(path):
    """Returns ({name: ndarray}, metadata) of a safetensors file; BF16 comes back as float32."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        raw = data[begin:end]
        if t["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=_READ[t["dtype"]])
        out[name] = arr.reshape(t["shape"])
    return out, metadata


def save(path, tensors, metadata=None, bf16=()):
    """Writes {name: ndarray} with string metadata; names in bf16 are stored as BF16."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if name in bf16:
            f = arr.astype(np.float32)
            bits = f.view(np.uint32)
            if np.any(bits & 0xFFFF):
                raise ValueError(f"tensor {name!r}: values are not bf16-exact")
            raw, dtype = (bits >> 16).astype("<u2").tobytes(), "BF16"
        else:
            dtype = _WRITE[arr.dtype]
            raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % _HEADER_ALIGN)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def round_bf16(x):
    """float32 values rounded to the nearest bf16 (ties to even), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)
