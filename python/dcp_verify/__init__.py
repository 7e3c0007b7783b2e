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

import os

_HERE = os.path.dirname(os.path.abspath(__file__))

try:
    from . import _core  # noqa: F401  (the oracle; loaded first, to say why it does not load)
except ImportError as e:  # a wheel built without its native parts, or for another Python
    raise ImportError(
        f"dcp_verify: its extension module dcp_verify._core does not load from {_HERE} ({e}); "
        "the installed package lacks its native parts or was built for another Python: "
        "install a wheel that tools/wheel built and checked") from None

from ._files import Case, binary, reference  # noqa: E402
from ._report import Report, SuiteDied, check  # noqa: E402
from ._serve import Claim, Implementation, LevelArgs  # noqa: E402
from ._suite import Probe, cases, probe, properties, replay  # noqa: E402

__all__ = ["Case", "Claim", "Implementation", "LevelArgs", "Probe", "Report", "SuiteDied",
           "reference", "check", "cases", "properties", "replay", "probe", "binary"]
__version__ = "0.1.0"
