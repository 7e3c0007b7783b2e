"""A stand-in for the `safetensors` Python package, for the docs test only.

It exists only so that tests/docs/format_snippet_test.sh can run the Python snippet of
docs/format.md on machines where the real package is absent (it is not a Debian package). The
test puts this directory on PYTHONPATH only when `import safetensors.numpy` fails, so the real
package, when installed, always takes precedence. It provides `safetensors.numpy.save_file` and
nothing else; do not use it outside that test.
"""

__version__ = "0+dcp-verify-docs-shim"
