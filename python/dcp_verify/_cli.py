"""The ``dcp-verify`` console script a wheel installs: the binary carried in the package, run with
the same arguments, standard streams and exit status (docs/cli.md).

    $ pip install dcp_verify-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl
    $ dcp-verify run --dcp-size 4 --seq 2048
"""

import os
import sys

from . import binary


def main() -> None:
    try:
        path = binary()
    except FileNotFoundError as e:
        sys.stderr.write(f"dcp-verify: {e} (install a wheel that tools/wheel built and checked)\n")
        sys.exit(2)
    os.execv(path, ["dcp-verify", *sys.argv[1:]])
