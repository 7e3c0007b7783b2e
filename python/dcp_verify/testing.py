"""pytest helpers: assertions that print dcp-verify's report and the reproduce line on failure.

    from dcp_verify import testing

    def test_my_dcp_kernel():
        testing.assert_properties(MyKernel(), seed=7, cases=40, softcap=False)
"""

from __future__ import annotations

from typing import Any

from . import Report, check, properties


def assert_ok(report: Report) -> Report:
    """Raises AssertionError with the report's summary (the failing property, its shrunk case,
    the elements over their bound, the replay and reproduce calls; report.text holds the whole
    report) unless it passed."""
    __tracebackhide__ = True
    if not report.ok:
        summary = report.summary()  # a properties run's leads with its verdict, check's text not
        lines = [] if summary.startswith("dcp-verify") else [f"dcp-verify: {report.verdict}"]
        lines.append(summary)
        if report.reproduce and report.reproduce not in summary:
            lines.append(f"reproduce: {report.reproduce}")
        raise AssertionError("\n".join(lines))
    return report


def assert_properties(impl: Any, **kwargs: Any) -> Report:
    """dcp_verify.properties(impl, **kwargs), asserted to pass."""
    __tracebackhide__ = True
    return assert_ok(properties(impl, **kwargs))


def assert_check(case: Any, result: Any, **kwargs: Any) -> Report:
    """dcp_verify.check(case, result, **kwargs), asserted to pass."""
    __tracebackhide__ = True
    return assert_ok(check(case, result, **kwargs))
