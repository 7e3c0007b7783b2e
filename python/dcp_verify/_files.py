"""The package's files and binary: the dcp-verify binary and bridge plug-in it carries, cases and
results as safetensors files or mappings (docs/format.md), and the oracle's reference."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from . import _core

_HERE = os.path.dirname(os.path.abspath(__file__))


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
            tensors[key] = _on_host(f"{what}['{key}']", value)
        else:
            metadata[key] = _meta_text(key, value)
    return tensors, metadata, dtypes


# DLPack's device types (dlpack.h, DLDeviceType) by name; the files are written from the CPU's
# (kDLCPU) alone: pinned or managed memory is another device type to DLPack.
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                   9: "vpi", 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}
_DLPACK_CPU = 1


def _is_torch_tensor(x: Any) -> bool:
    """Whether x is a torch tensor (torch is never imported for the question)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _on_host(what: str, x: Any) -> Any:
    """An array in host memory: a torch tensor elsewhere is copied to the CPU; another DLPack
    exporter's array elsewhere is refused, naming the device."""
    if _is_torch_tensor(x) and x.device.type != "cpu":
        if x.device.type == "meta":
            raise ValueError(f"{what}: a meta tensor holds no values")
        return x.detach().cpu()
    if hasattr(x, "__dlpack_device__"):
        kind, index = (int(v) for v in x.__dlpack_device__())
        if kind != _DLPACK_CPU:
            raise ValueError(f"{what}: in {_DLPACK_DEVICES.get(kind, f'device type {kind}')}:"
                             f"{index} memory; expected host memory (copy it to the CPU)")
    return x


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
