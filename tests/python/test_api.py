"""dcp_verify's Python API: reference, check, cases and properties, and how each refuses bad input."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import dcp_verify
from dcp_verify import testing
from dcp_verify._files import _write

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "cases")
CASE = os.path.join(FIXTURES, "gqa_causal_bf16.safetensors")


def test_reference_of_a_file_equals_that_of_its_arrays():
    o, lse = dcp_verify.reference(CASE)
    case = dcp_verify.Case.load(CASE)
    o2, lse2 = dcp_verify.reference(case)
    assert o.dtype == np.float64 and o.shape == o2.shape and lse.shape == case["q"].shape[:2]
    np.testing.assert_array_equal(o, o2)
    np.testing.assert_array_equal(lse, lse2)


def test_check_passes_the_reference_and_names_a_wrong_output():
    o, lse = dcp_verify.reference(CASE)
    good = dcp_verify.check(CASE, {"o": o.astype(np.float32), "lse": lse.astype(np.float32),
                                   "accum": "f32", "p_cast": "none"})
    assert good.ok and good.verdict == "OK" and good.failed == []
    assert 0 <= good.max_err_over_bound <= 1 and "# check: OK" in good.text
    bad_o = o.astype(np.float32).copy()
    bad_o[0, 1, 2] += 0.5
    bad = dcp_verify.check(CASE, {"o": bad_o, "lse": lse.astype(np.float32), "accum": "f32"})
    assert not bad.ok and bad.verdict == "FAILED" and bad.failed == ["output"]
    assert bad.worst["tensor"] == "o" and bad.worst["index"] == (0, 1, 2)
    terms = bad.worst["bound_terms"]
    assert list(terms)[:3] == ["keys", "accumulation", "floors"] and "oracle" in terms
    # the terms telescope to the bound: off by a few roundings of double (16 u, docs/cli.md)
    assert sum(terms.values()) == pytest.approx(bad.worst["bound"], rel=16 * 2.0 ** -53)
    assert bad.max_err_over_bound > 1
    assert '"verdict": "FAILED"' in bad.to_json()
    with pytest.raises(AssertionError, match="FAILED"):
        testing.assert_ok(bad)


@pytest.mark.parametrize("partials", [False, True])
def test_check_in_process_reports_what_the_command_reports(tmp_path, partials):
    # dcp_verify.check judges in this process (the harness in dcp_verify._core); `dcp-verify check`
    # on the same files prints the same text and writes the same report, but for the time taken.
    o, lse = dcp_verify.reference(CASE)
    o = o.astype(np.float32)
    o[0, 1, 2] += 0.5  # over the output's bound
    result = {"o": o, "lse": lse.astype(np.float32), "accum": "f32", "dcp_size": 2,
              "interleave": 1}
    if partials:  # not the ranks' partials: both ranks fail
        result.update(o_partial=np.stack([o, o]),
                      lse_partial=np.stack([lse, lse]).astype(np.float32))
    path = _write(str(tmp_path / "result.safetensors"), "result", result)
    mine = dcp_verify.check(CASE, path)
    report = str(tmp_path / "report.json")
    proc = subprocess.run([dcp_verify.binary(), "check", "--case", CASE, "--result", path,
                           "--json", report], capture_output=True, text=True)
    assert proc.returncode == 1 and mine.verdict == "FAILED", proc.stderr
    with open(report) as f:
        cli = json.load(f)
    assert cli.pop("seconds") >= 0 and mine.raw.pop("seconds") >= 0
    assert cli == mine.raw
    assert mine.failed == (["output", "rank 0", "rank 1"] if partials else ["output"])
    untimed = lambda text: re.sub(r"time: [0-9.]+ s", "time: - s", text)
    assert untimed(proc.stdout) == untimed(mine.text)


def test_ctrl_c_stops_an_in_process_check_with_keyboard_interrupt(tmp_path):
    # A check at the MPFR tier of a case far longer than the wait below: Ctrl-C (SIGINT) while
    # the oracle works ends it with KeyboardInterrupt, as Python code would end, not a report.
    script = tmp_path / "long_check.py"
    script.write_text(
        "import sys, numpy as np, dcp_verify\n"
        "g = np.random.default_rng(0)\n"
        "case = {'q': g.standard_normal((8, 8, 64), dtype=np.float32),\n"
        "        'k': g.standard_normal((20000, 2, 64), dtype=np.float32),\n"
        "        'v': g.standard_normal((20000, 2, 64), dtype=np.float32)}\n"
        "result = {'o': np.zeros((8, 8, 64), np.float32), 'lse': np.zeros((8, 8), np.float32)}\n"
        "print('judging', flush=True)\n"
        "try:\n"
        "    report = dcp_verify.check(case, result, tier='certify')\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt', flush=True)\n"
        "    sys.exit(0)\n"
        "print('finished:', report.verdict, flush=True)\n")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "judging\n"
    time.sleep(1.0)  # into the oracle's work (the arrays are written and read by then)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out == "KeyboardInterrupt\n", out


def test_cases_are_the_suites_and_judge_like_any_case():
    drawn = dcp_verify.cases(seed=4, n=3, max_seq=64, softcap=False, kv_dtypes=("bf16",))
    assert len(drawn) == 3
    for c in drawn:
        assert c.dtypes["k"] == "BF16" and "softcap" not in c.metadata
        assert c.setup["spec"]["seq"] <= 64 and c.setup["config"]["dcp_size"] >= 1
        o, lse = dcp_verify.reference(c)
        assert o.shape[:2] == lse.shape
    again = dcp_verify.cases(seed=4, n=3, max_seq=64, softcap=False, kv_dtypes=("bf16",))
    assert [c.setup for c in again] == [c.setup for c in drawn]


def test_a_feature_of_the_case_model_is_a_range_keyword():
    # ALiBi, a switch of the case model, is drawn in the suite's cases (one in eight) and left out
    # by its name = False, as `properties --without` names it.
    drawn = dcp_verify.cases(seed=1, n=40, max_seq=16)
    with_alibi = [c for c in drawn if "alibi_slopes" in c.tensors]
    assert with_alibi and all(c.setup["spec"].get("alibi") for c in with_alibi)
    assert all("alibi_slopes" not in c.tensors
               for c in dcp_verify.cases(seed=1, n=40, max_seq=16, alibi=False))


class NumpyMerge:
    """A combine in numpy, float64 inside: exact enough for the f32 claim."""
    claim = {"accum": "f32", "accum_rounding": "nearest"}

    def combine(self, a):
        lse = a.lse_partial.astype(np.float64)
        if a.lse_base == 1:
            lse = lse * np.log(2.0)
        m = lse.max(axis=0)
        m = np.where(np.isinf(m), 0.0, m)
        w = np.exp(lse - m)
        z = w.sum(axis=0)
        o = (w[..., None] * a.o_partial).sum(axis=0) / np.where(z > 0, z, 1.0)[..., None]
        out = np.where(z > 0, m + np.log(np.where(z > 0, z, 1.0)), -np.inf)
        return o, out / np.log(2.0) if a.lse_base == 1 else out


class OnADevice:
    """An array a DLPack exporter holds in CUDA memory (device type 2, index 1)."""

    def __dlpack__(self, stream=None):
        raise AssertionError("a device array is never read")

    def __dlpack_device__(self):
        return (2, 1)


def test_a_device_array_is_refused_naming_the_tensor_and_the_device():
    o, lse = dcp_verify.reference(CASE)
    with pytest.raises(ValueError, match=r"^result\['o'\]: in cuda:1 memory; expected host memory"):
        dcp_verify.check(CASE, {"o": OnADevice(), "lse": lse.astype(np.float32)})
    with pytest.raises(ValueError, match=r"^device: levels receive numpy arrays in host memory"):
        dcp_verify.properties(NumpyMerge(), seed=1, cases=1, device="cuda")


def test_sizes_as_sets_draw_only_those():
    drawn = dcp_verify.cases(seed=3, n=12, ranks={4, 2}, head_dims=(4, 8), v_dims=np.array([3, 16]))
    for c in drawn:
        spec = c.setup["spec"]
        assert c.setup["config"]["dcp_size"] in (2, 4), c.setup
        assert spec["head_dim"] in (4, 8) and spec["v_dim"] in (3, 16), c.setup


def test_a_numpy_combine_passes():
    report = testing.assert_properties(NumpyMerge(), seed=2, cases=20)
    assert report.verdict == "OK"


def test_requests_in_flight_cross_in_regions_of_their_own_or_on_the_socket(monkeypatch):
    """The ranks' calls are in flight at once, each with a region of the shared memory of its own
    (one placed after another's: both in flight); a call that finds no room, in a region made
    small here, crosses on the socket; the merges pass either way."""
    from dcp_verify import _serve
    monkeypatch.setattr(_serve._Shared, "BYTES", 1 << 10)
    headers = []
    real = _serve._recv_frame

    def spy(sock, shared=None):
        frame = real(sock, shared)
        if frame is not None:
            headers.append(frame[0])
        return frame

    monkeypatch.setattr(_serve, "_recv_frame", spy)
    report = testing.assert_properties(NumpyMerge(), seed=2, cases=20, only=["dcp-path"])
    assert report.verdict == "OK"
    calls = [h for h in headers if h.get("op") == "combine"]
    shared = [h for h in calls if "shm_bytes" in h]
    assert shared and len(shared) < len(calls), (len(shared), len(calls))
    assert any(h["shm_at"] > 0 for h in shared)
    assert all(h["reply_at"] + h["reply_room"] <= 1 << 10 for h in shared)


_DIES_MID_STEP = """
import os, select, sys
sys.path.insert(0, {here!r})
import dcp_verify
from dcp_verify import _serve
from test_api import NumpyMerge, suite_child

socket_of = []
receive = _serve._recv_frame
def spy(sock, shared=None):
    socket_of[:] = [sock]
    return receive(sock, shared)
_serve._recv_frame = spy

class Dies(NumpyMerge):
    def combine(self, a):
        # Dies once another rank's call is in flight: its request already waits on the socket.
        if a.ranks > 1 and select.select(socket_of, [], [], 0.5)[0]:
            pid, cmd = suite_child()
            print(pid, cmd[cmd.index(b"--json") + 1].decode(), flush=True)
            os._exit(7)
        return super().combine(a)

dcp_verify.properties(Dies(), seed=2, cases=20, only=["dcp-path"])
"""


def test_a_server_that_dies_with_calls_in_flight_fails_them_and_the_suite_ends(tmp_path):
    """The Python process serving the levels dies while it serves one rank's call and another
    rank's call of the step waits behind it on the socket: every call in flight fails ("the server
    closed the connection"), and the suite's process, left alone, ends with its report, never
    waiting. (A run in which no call ever waits behind another exits 0: the test fails.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "dies.py"
    script.write_text(_DIES_MID_STEP.format(here=here))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 7, run.stderr
    pid, report = run.stdout.split()
    deadline = time.monotonic() + 60
    while state_of(int(pid)) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = state_of(int(pid)) not in ("", "Z")
    if alive:
        os.kill(int(pid), signal.SIGKILL)
    assert not alive, "the suite's process still waits for a server that died"
    try:
        with open(report) as f:
            text = f.read()
    finally:
        shutil.rmtree(os.path.dirname(report), ignore_errors=True)
    assert "the server closed the connection" in text, text[:2000]


class Raises(NumpyMerge):
    def combine(self, a):
        raise RuntimeError("kernel launch failed")


def test_an_exception_in_the_implementation_is_its_failure_with_traceback():
    report = dcp_verify.properties(Raises(), seed=2, cases=20)
    assert not report.ok and report.verdict == "ERROR"
    assert "RuntimeError: kernel launch failed" in report.traceback
    assert "in combine" in report.traceback
    assert "level combine" in report.text


class Slow(NumpyMerge):
    def combine(self, a):
        time.sleep(3)
        return super().combine(a)


def test_a_level_slower_than_the_timeout_ends_the_run_naming_it():
    with pytest.raises(TimeoutError, match=r"level combine on dcp rank \d+ did not return within 1 s"):
        dcp_verify.properties(Slow(), seed=2, cases=1, timeout=1)


def test_only_and_bound_choose_the_properties_and_the_tier():
    report = dcp_verify.properties(NumpyMerge(), seed=2, cases=5, only=("dcp-path",),
                                   bound="statistical")
    assert report.ok and [p["name"] for p in report.raw["properties"]] == ["dcp-path"]
    assert report.raw["bound"] == "statistical"
    assert "only=('dcp-path',)" in report.reproduce and "bound='statistical'" in report.reproduce


class ForgetsBase2(NumpyMerge):
    """Returns the merged LSE in base e where the case asks for base 2."""

    def combine(self, a):
        o, lse = super().combine(a)
        return o, lse * np.log(2.0) if a.lse_base == 1 else lse


def test_a_failure_is_summed_up_short_and_its_case_replays():
    report = dcp_verify.properties(ForgetsBase2(), seed=2, cases=30, only=("dcp-path",))
    assert report.verdict == "FAILED" and report.property == "dcp-path"
    assert report.pin["spec"]["lse_base"] == "2" and "base=2" in report.counterexample
    summary = report.summary().splitlines()
    assert summary[0] == "dcp-verify properties: FAILED (dcp-path)"
    assert any(line.strip().startswith("LSE: max err/bound") for line in summary)
    assert "  replay: dcp_verify.replay(impl, report.pin)" in summary
    assert len(summary) < len(report.text.splitlines())
    with pytest.raises(AssertionError) as e:
        testing.assert_ok(report)
    assert "replay: dcp_verify.replay(impl, report.pin)" in str(e.value)
    assert report.text.splitlines()[0] not in str(e.value)  # the table stays in report.text
    again = dcp_verify.replay(ForgetsBase2(), report.pin)
    assert again.verdict == "FAILED" and again.failed == ["pinned"]
    assert again.reproduce.startswith("dcp_verify.replay(impl, {")
    assert [p["cases"] for p in again.raw["properties"]] == [1]
    assert dcp_verify.replay(NumpyMerge(), report.pin).ok
    kept = dcp_verify.properties(ForgetsBase2(), seed=3, cases=1, only=("pinned",),
                                 pinned=[{"why": "the base-2 LSE", "setup": report.pin}])
    assert kept.failed == ["pinned"] and "the base-2 LSE" in kept.text


def test_a_pin_drawn_with_wider_sizes_replays_and_one_never_replayed_is_no_ok():
    wide = dcp_verify.properties(ForgetsBase2(), seed=2, cases=30, only=("dcp-path",),
                                 head_dims=(48,))
    assert wide.pin["spec"]["head_dim"] == 48  # over the default maximum, 32
    assert dcp_verify.replay(ForgetsBase2(), wide.pin).failed == ["pinned"]
    assert dcp_verify.replay(NumpyMerge(), wide.pin).ok
    with pytest.raises(ValueError, match=r"^pin: not replayed: .*outside the drawn limits"):
        dcp_verify.replay(NumpyMerge(), wide.pin, max_head_dim=8)


class StepRaises(NumpyMerge):
    def step(self, a):
        raise RuntimeError("step kernel failed")


def test_a_step_failure_offers_no_replay_where_the_pin_would_run_other_levels():
    report = dcp_verify.properties(StepRaises(), seed=2, cases=5, only=("dcp-step",))
    assert report.verdict == "ERROR" and report.property == "dcp-step" and report.pin is None
    assert "replay:" not in report.summary()


def test_a_nan_output_is_failed_with_its_numbers_as_floats():
    o, lse = dcp_verify.reference(CASE)
    o = o.astype(np.float32)
    o[0, 0, 0] = np.nan
    report = dcp_verify.check(CASE, {"o": o, "lse": lse.astype(np.float32), "accum": "f32"})
    assert report.verdict == "FAILED" and isinstance(report.worst["ratio"], float)
    assert report.max_err_over_bound == float("inf") and "FAILED" in repr(report)


@pytest.mark.parametrize("pinned,error,match", [
    (5, TypeError, r"^pinned: expected a path or a non-empty sequence of setups"),
    ([], TypeError, r"^pinned: expected a path or a non-empty sequence"),
    ([1], TypeError, r"^pinned\[0\]: expected a setup mapping"),
    ([{"config": {}}], ValueError, r"pinned\[0\]: setup\.spec: missing"),
])
def test_bad_pinned_setups_are_refused_by_index(pinned, error, match):
    with pytest.raises(error, match=match):
        dcp_verify.properties(NumpyMerge(), seed=1, cases=1, pinned=pinned)


def test_replay_refuses_what_it_sets_itself():
    with pytest.raises(TypeError, match="replay: only is set by replay itself"):
        dcp_verify.replay(NumpyMerge(), {"spec": {}}, only=("dcp-path",))
    with pytest.raises(TypeError, match="pin: expected a report's pin"):
        dcp_verify.replay(NumpyMerge(), "pin")


def suite_child() -> tuple[int, list[bytes]]:
    """The dcp-verify process this one runs `properties` in (its child), and its command line."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"properties" in cmd:
            return int(pid), cmd
    raise AssertionError("no dcp-verify properties process is this one's child")


def state_of(pid: int) -> str:
    """A process's state letter (Z: ended, not yet reaped); "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


class KillsTheSuite(NumpyMerge):
    """A level whose call takes the suite's process down, as a crash in a kernel would: it sends
    SIGSEGV to the dcp-verify process this one serves (its child running `properties`)."""

    def combine(self, a):
        pid, _ = suite_child()
        os.kill(pid, signal.SIGSEGV)
        time.sleep(1)  # the suite dies while this call is served
        return super().combine(a)


def test_a_suite_process_that_dies_is_suite_died_naming_the_signal():
    with pytest.raises(dcp_verify.SuiteDied, match="killed by SIGSEGV without a report") as e:
        dcp_verify.properties(KillsTheSuite(), seed=2, cases=5)
    assert e.value.signal == "SIGSEGV" and e.value.returncode == -signal.SIGSEGV
    assert not isinstance(e.value, ValueError)


class WrongShape(NumpyMerge):
    def combine(self, a):
        o, lse = super().combine(a)
        return o[..., :1], lse


def test_a_wrong_output_shape_is_the_implementations_failure():
    report = dcp_verify.properties(WrongShape(), seed=2, cases=20, max_v_dim=4)
    assert report.verdict == "ERROR" and "expected shape" in report.traceback


def test_probe_measures_a_merge_and_claims_it():
    """A combine-only implementation: the merge is its own and is measured (float64 inside: the
    fp32 words); its partials are the suite's and nothing is claimed for them."""
    probed = dcp_verify.probe(NumpyMerge())
    assert probed.claim["merge_accum"] == "f32"
    assert probed.words["merge_lse_accum"] == "f32"
    assert "merge_exp_rel_err" not in probed.words  # within the default
    assert probed.claim_words.endswith("merge_accum f32  merge_lse_accum f32")
    measured = {f["measured"]: f["finding"] for f in probed.findings}
    assert measured["partial"] == "not measured"
    assert measured["merge sums"] == "f32"
    assert "<NumpyMerge>" in probed.text


class SumsInBf16(NumpyMerge):
    def combine(self, a):
        o, lse = super().combine(a)
        bits = o.astype(np.float32).view(np.uint32)  # the merged output rounded down to bf16
        return (bits & 0xffff0000).view(np.float32), lse


def test_probe_sees_a_coarse_merge():
    assert dcp_verify.probe(SumsInBf16()).claim["merge_accum"] == "bf16"


def test_probe_of_a_level_that_raises_is_a_runtime_error_with_its_traceback():
    with pytest.raises(RuntimeError, match="kernel launch failed"):
        dcp_verify.probe(Raises())


@pytest.mark.parametrize("call,error,match", [
    (lambda: dcp_verify.reference({"q": np.zeros((1, 1, 4), np.float32)}), ValueError, "k"),
    (lambda: dcp_verify.reference(CASE, tier="exact"), ValueError, "tier"),
    (lambda: dcp_verify.reference({"q": "not an array"}), ValueError, "metadata 'q'"),
    (lambda: dcp_verify.reference({"q": [1.0]}), TypeError, "metadata 'q'"),
    (lambda: dcp_verify.reference(42), TypeError, "case"),
    (lambda: dcp_verify.reference({"q": np.zeros((1, 1, 4), np.complex64)}), TypeError, "tensor 'q'"),
    (lambda: dcp_verify.reference({**dcp_verify.Case.load(CASE), "colour": "blue"}), ValueError,
     "colour"),
    (lambda: dcp_verify.reference({"q": np.full((1, 1, 4), 0.1, np.float32),
                                   "dtypes": {"q": "BF16"}}), ValueError, "tensor 'q'"),
    (lambda: dcp_verify.check(CASE, {"o": np.zeros(3)}), ValueError, "result"),
    (lambda: dcp_verify.check(CASE, CASE, bound="loose"), ValueError, "bound"),
    (lambda: dcp_verify.properties(object()), TypeError, "impl"),
    (lambda: dcp_verify.properties(type("I", (), {"combine": lambda s, a: a, "claim": {"acum": "f32"}})()),
     ValueError, "acum"),
    (lambda: dcp_verify.properties(type("I", (), {"combine": lambda s, a: a,
                                                   "claim": {"partial_dtype": "fp8e4m3"}})()),
     ValueError, r"impl\.claim\['partial_dtype'\]: expected one of \('f32', 'bf16', 'f16'\)"),
    (lambda: dcp_verify.properties(NumpyMerge(), max_sequence=3), TypeError, "max_sequence"),
    (lambda: dcp_verify.properties(NumpyMerge(), cases=0), ValueError, "cases"),
    (lambda: dcp_verify.properties(NumpyMerge(), kv_dtypes=("f8",)), ValueError, "kv_dtypes"),
    (lambda: dcp_verify.properties(NumpyMerge(), max_ranks=10**6), ValueError,
     r"^max_ranks: expected an integer in 1 \.\. 256, got '1000000'$"),
    (lambda: dcp_verify.cases(n=0), ValueError, "n"),
    (lambda: dcp_verify.cases(head_dims="64"), TypeError,
     "^head_dims: expected a set or sequence of ints"),
    (lambda: dcp_verify.cases(ranks=()), ValueError, "^ranks: expected at least one value"),
    (lambda: dcp_verify.cases(nope=False), ValueError, "unknown feature 'nope'"),
    (lambda: dcp_verify.cases(nope=3), TypeError, "^unknown range 'nope'"),
    (lambda: dcp_verify.cases(head_dims=(4, 8), max_head_dim=4), ValueError,
     "^cases: head_dims: 8 is over max_head_dim 4$"),
    (lambda: dcp_verify.properties(NumpyMerge(), only="dcp-path"), TypeError, "only"),
    (lambda: dcp_verify.properties(NumpyMerge(), only=("nope",)), ValueError,
     "^only: unknown property 'nope'"),
    (lambda: dcp_verify.properties(NumpyMerge(), bound="loose"), ValueError, "bound"),
    (lambda: dcp_verify.probe(object()), TypeError, "impl"),
    (lambda: dcp_verify.probe(NumpyMerge(), lse_base="10"), ValueError, "lse_base"),
    (lambda: dcp_verify.probe(NumpyMerge(), arrays="jax"), ValueError, "arrays"),
    (lambda: dcp_verify.probe(NumpyMerge(), timeout=0), ValueError, "timeout"),
])
def test_bad_input_is_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()



class ReferenceStep:
    """A step level that supports ALiBi and scales by token (impl.h's version 3): the oracle's
    answer on the arguments it is handed. Right only if they are the case's: the K/V it gets
    dequantized by the suite with each token's scale, ALiBi's slopes of every query head."""

    name = "reference-step"
    claim = {"accum": "f32", "accum_rounding": "nearest"}
    supports = ("alibi", "token_scales")

    def __init__(self):
        self.alibi = 0

    def step(self, a):
        case = {"q": a.q, "k": a.k, "q_pos": a.q_pos, "scale": float(a.scale),
                "causal": bool(a.causal), "window": int(a.window), "softcap": float(a.softcap),
                "lse_base": "2" if a.lse_base == 1 else "e", "v_dim": int(a.v_dim)}
        if not a.shared_latent:
            case["v"] = a.v
        for name in ("sink", "topk", "alibi_slopes"):
            if getattr(a, name) is not None:
                case[name] = getattr(a, name)
        self.alibi += a.alibi_slopes is not None
        o, lse = dcp_verify.reference(case)
        return o.astype(np.float32), lse.astype(np.float32)


def test_a_version_3_step_level_gets_alibi_and_caches_scaled_by_token():
    impl = ReferenceStep()
    report = testing.assert_properties(impl, seed=5, cases=40, only=("dcp-step", "dcp-step-fp8"))
    assert impl.alibi > 0  # drawn, and the slopes handed over are the case's
    assert {p["name"] for p in report.raw["properties"]} == {"dcp-step", "dcp-step-fp8"}
