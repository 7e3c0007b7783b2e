"""PyTorch's CPU flash-attention kernel driven through dcp_verify.properties (tests/python/torch_flash.py).

The kernel passes with the claim that describes it, in fp32 and bf16, ALiBi included; the merge with
a planted bug, and ALiBi's bias on the local row, fail with a shrunk counterexample and a reproduce
line.
"""

import os

import pytest
import torch

import dcp_verify
from dcp_verify import testing
from torch_flash import TorchFlash

# Steps combine by a2a half the time (the only place an implementation's combine runs), so a few
# dozen cases reach the merge many times.
CASES = 60


@pytest.mark.parametrize("dtype,ranges", [(torch.float32, TorchFlash.RANGES),
                                          (torch.bfloat16, TorchFlash.RANGES_BF16)],
                         ids=["f32", "bf16"])
def test_torch_flash_passes_with_its_claim(dtype, ranges):
    report = testing.assert_properties(TorchFlash(dtype), seed=11, cases=CASES, arrays="torch",
                                       **ranges)
    assert report.verdict == "OK"
    assert report.failed == []


@pytest.mark.parametrize("dtype,ranges", [(torch.float32, TorchFlash.RANGES),
                                          (torch.bfloat16, TorchFlash.RANGES_BF16)],
                         ids=["f32", "bf16"])
def test_torch_flash_passes_with_the_claim_the_probe_measures(dtype, ranges):
    """Nothing stated by hand: dcp_verify.probe measures the kernel and the merge, and its claim
    passes the suite (docs/format.md, "Claims of measured kernels")."""
    impl = TorchFlash(dtype)
    probed = dcp_verify.probe(impl, arrays="torch")
    assert probed.claim["tile"] == 512, probed.text  # kv_split_size, seen through subnormals
    assert probed.claim["p_cast"] == ("bf16" if dtype == torch.bfloat16 else "none"), probed.text
    # Its rescales call the library's exp: beside the bf16 path's vectorized one they are stated
    # apart; the f32 path's exp is within the default already.
    rescale = probed.words.get("rescale_exp_rel_err")
    assert rescale == ("2.4e-07" if dtype == torch.bfloat16 else None), probed.text
    # The bf16 path's exponential has a bias (its mean and exp(0)) below its largest error, which
    # the LSE's statistical tier charges whole instead (docs/tolerances.md §10); the f32 path's is
    # within the default, with no bias to state.
    bias = probed.words.get("exp_bias")
    if dtype == torch.bfloat16:
        assert bias is not None and float(bias) < float(probed.words["exp_rel_err"]), probed.text
    else:
        assert bias is None, probed.text
    # The bf16 path sums q.k in 4 lanes along the head dimension (component i in lane i mod 4);
    # the f32 path in no order of lanes, so none is stated (docs/tolerances.md §3).
    lanes = probed.words.get("dot_lanes")
    assert lanes == ("4" if dtype == torch.bfloat16 else None), probed.text
    impl.claim = probed.claim
    report = testing.assert_properties(impl, seed=11, cases=CASES, arrays="torch", **ranges)
    assert report.verdict == "OK"


def test_bf16_kernel_without_its_exp_claim_is_caught():
    """The claim is not decoration: the bf16 path's exponential and bf16 P, unclaimed, violate the
    bound."""
    impl = TorchFlash(torch.bfloat16)
    impl.claim = {"accum": "f32", "accum_rounding": "nearest", "partial_dtype": "bf16"}
    report = dcp_verify.properties(impl, seed=11, cases=CASES, arrays="torch",
                                   **TorchFlash.RANGES_BF16)
    assert not report.ok and report.verdict == "FAILED", report.text


class RecordsAlibi(TorchFlash):
    def __init__(self, bug=None):
        super().__init__(torch.float32, bug)
        self.slopes = []

    def partial(self, a):
        if a.alibi_slopes is not None:
            self.slopes.append((tuple(a.alibi_slopes.shape), a.heads))
        return super().partial(a)


def test_alibi_reaches_the_flash_kernel_as_a_bias_and_its_local_index_bug_is_caught():
    """ALiBi (an implementation that supports it gets alibi_slopes [H]) through PyTorch's flash
    kernel as an additive float mask per head: it passes; with the bias on the rank-local row
    instead of the key's position (DCP's local-index bug class) it fails, shrunk."""
    correct = RecordsAlibi()
    testing.assert_properties(correct, seed=11, cases=CASES, arrays="torch", **TorchFlash.RANGES)
    assert correct.slopes and all(shape == (heads,) for shape, heads in correct.slopes)
    report = dcp_verify.properties(RecordsAlibi("alibi_local"), seed=11, cases=CASES,
                                   arrays="torch", **TorchFlash.RANGES)
    assert report.verdict == "FAILED" and "alibi" in report.counterexample, report.text
    failed = next(p for p in report.raw["properties"] if p["result"] == "FAILED")
    assert failed["shrinks"] > 0
    assert dcp_verify.replay(TorchFlash(torch.float32), report.pin, arrays="torch").ok


@pytest.mark.parametrize("bug", ["base2", "mean"])
def test_planted_merge_bug_is_caught_with_a_shrunk_case(bug):
    report = dcp_verify.properties(TorchFlash(torch.float32, bug=bug), seed=5, cases=CASES,
                                   arrays="torch", lse_bases=("e",), **TorchFlash.RANGES)
    assert not report.ok
    assert report.verdict == "FAILED"
    assert "dcp-path" in report.failed
    # RapidCheck shrank the failure; the counterexample names the shape it shrank to, the merged
    # output over its bound, and is printed with the reproduce line, a Python call.
    dcp_path = next(p for p in report.raw["properties"] if p["name"] == "dcp-path")
    assert dcp_path["shrinks"] > 0
    assert "comm=a2a" in report.counterexample and "output: O: max err/bound" in report.counterexample
    assert report.counterexample.splitlines()[0] in report.text
    assert report.reproduce.startswith("dcp_verify.properties(impl, seed=5, cases=60")
    with pytest.raises(AssertionError, match="reproduce"):
        testing.assert_ok(report)


class RecordsEmptyRanks(TorchFlash):
    """The f32 kernel, noting what a rank that owns no tokens is handed."""

    def __init__(self):
        super().__init__(torch.float32)
        self.empty = []

    def partial(self, a):
        if a.keys == 0:
            self.empty.append((a.shared_latent, a.k, a.v, a.k_pos, a.kv_heads, a.head_dim, a.v_dim))
        return super().partial(a)


def test_a_rank_that_owns_no_tokens_gets_empty_tensors_and_a_truthful_latent_flag():
    impl = RecordsEmptyRanks()
    testing.assert_properties(impl, seed=3, cases=40, arrays="torch", shared_latent=False,
                              max_seq=6, **TorchFlash.RANGES)
    assert impl.empty, "no case drew a rank without tokens"
    for latent, k, v, k_pos, kv_heads, head_dim, v_dim in impl.empty:
        assert latent == 0
        assert tuple(k.shape) == (0, kv_heads, head_dim) and tuple(v.shape) == (0, kv_heads, v_dim)
        assert tuple(k_pos.shape) == (0,)


def test_an_empty_context_reaches_the_step_level_as_empty_tensors():
    f = {"seq": 0, "kv_heads": 2, "head_dim": 8, "v_dim": 4, "shared_latent": 0}
    empty = dcp_verify._serve._empty_rows("step", f, "torch", {})
    assert tuple(empty["k"].shape) == (0, 2, 8) and tuple(empty["v"].shape) == (0, 2, 4)
    assert "k_pos" not in empty
    assert dcp_verify._serve._empty_rows("step", {**f, "seq": 3}, "torch", {}) == {}


class RecordsDevices(TorchFlash):
    """The f32 kernel, noting the device of every tensor its levels are handed; it computes on
    the CPU (PyTorch's CPU flash kernel) and hands its outputs back on the device it was given."""

    def __init__(self):
        super().__init__(torch.float32)
        self.devices = set()

    def _to_cpu(self, a):
        for name in ("q", "q_pos", "k", "v", "k_pos", "sink", "topk", "o_partial", "lse_partial"):
            x = getattr(a, name)
            if x is not None:
                self.devices.add(x.device.type)
                setattr(a, name, x.cpu())
        return a

    def partial(self, a):
        device = a.q.device
        return tuple(x.to(device) for x in super().partial(self._to_cpu(a)))

    def combine(self, a):
        device = a.o_partial.device
        return tuple(x.to(device) for x in super().combine(self._to_cpu(a)))


def test_device_cpu_runs_the_device_path():
    impl = RecordsDevices()
    report = testing.assert_properties(impl, seed=3, cases=20, arrays="torch", device="cpu",
                                       **TorchFlash.RANGES)
    assert impl.devices == {"cpu"} and "device='cpu'" in report.reproduce


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it is used")
def test_device_cuda_without_a_cuda_device_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^device: 'cuda', but torch sees 0 CUDA device\(s\) here$"):
        dcp_verify.properties(RecordsDevices(), seed=3, cases=1, arrays="torch", device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
def test_levels_receive_cuda_tensors_and_may_return_them():
    impl = RecordsDevices()
    testing.assert_properties(impl, seed=3, cases=20, arrays="torch", device="cuda",
                              **TorchFlash.RANGES)
    assert impl.devices == {"cuda"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
def test_check_takes_cuda_tensors():
    case = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "cases",
                        "gqa_causal_bf16.safetensors")
    o, lse = dcp_verify.reference(case)
    result = {"o": torch.from_numpy(o).float().cuda(), "lse": torch.from_numpy(lse).float().cuda()}
    assert dcp_verify.check(case, result).ok
