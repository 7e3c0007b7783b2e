"""`save_file` of the safetensors format for numpy arrays: the docs test's stand-in.

It exists only so that tests/docs/format_snippet_test.sh runs the snippet of docs/format.md where
the real `safetensors` package is absent; the test uses it only when `import safetensors.numpy`
fails, so the real package takes precedence when installed.

The format, as dcp-verify reads it (oracle/safetensors.cpp): an 8-byte little-endian header
length n, n bytes of JSON header, then the data. The header maps each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data, which the tensors cover
exactly, in header order) and "__metadata__" to a map of strings; it is padded with spaces to a
multiple of 8 bytes. Tensors are row-major, little-endian.

    save_file({"o": o, "lse": lse}, "result.safetensors", metadata={"dcp_size": "4"})
"""

import json

import numpy as np

# numpy dtype -> safetensors dtype name (numpy has no bfloat16).
_DTYPES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
}

_HEADER_ALIGN = 8  # the header is padded with spaces so the data starts 8-byte aligned


def save_file(tensors, filename, metadata=None):
    """Writes tensors (dict[str, np.ndarray]) and string metadata to filename."""
    header = {}
    if metadata is not None:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"metadata {key!r}: {value!r}; keys and values must be strings")
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        if array.dtype.newbyteorder("=") not in _DTYPES:
            raise TypeError(f"tensor {name!r}: dtype {array.dtype}; this shim writes "
                            f"float64, float32, float16 and int64")
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": _DTYPES[array.dtype.newbyteorder("=")],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % _HEADER_ALIGN)
    with open(filename, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for data in chunks:
            f.write(data)
