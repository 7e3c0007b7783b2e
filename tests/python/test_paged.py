"""The paged level (impl.h, ABI 2 and 3) driven with a PyTorch paged kernel (torch_paged.py) as
engines call one: each rank's pool in the vLLM (NHD) and FlashInfer HND layouts, in its storage
format (f32, bf16, fp8 or int8 with its scales, by KV head or by token), block tables over a
fragmented pool, decode batches, ALiBi. The correct kernel passes; a K scale applied twice, a block
table read one page off and ALiBi's bias on the local row are killed, each with its shrunk case;
what an implementation does not say it supports never reaches it.
"""

import numpy as np
import pytest
import torch

import dcp_verify
from dcp_verify import testing
from torch_paged import BUGS, TorchPaged

CASES = 40
# The caches the level receives: a value format each, and fp8 or int8 with no, per-tensor,
# per-head, per-token or per-token-and-head scales (the dcp-fp8 property draws those).
CACHES = {"f32": ("f32",), "bf16": ("bf16",), "fp8": ("fp8e4m3", "fp8e5m2", "fp8e4m3fnuz"),
          "int8": ("int8",)}


class Recorded(TorchPaged):
    """The kernel, noting what each call received."""

    def __init__(self, layout):
        super().__init__(layout)
        self.seen = []

    def paged(self, a):
        self.seen.append({"dtype": a.k_cache.dtype, "shape": tuple(a.k_cache.shape),
                          "page": a.page_size, "kv_heads": a.kv_heads, "layout": a.page_layout,
                          "scaled": a.k_scale is not None, "requests": a.requests,
                          "scale_dims": None if a.k_scale is None else a.k_scale.dim(),
                          "alibi": a.alibi_slopes is not None,
                          "table": tuple(a.block_table.shape)})
        return super().paged(a)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("cache", list(CACHES))
def test_a_correct_paged_kernel_passes_in_every_storage_format(layout, cache):
    torch.set_num_threads(1)
    impl = Recorded(layout)
    report = testing.assert_properties(impl, seed=7, cases=CASES, arrays="torch",
                                       kv_dtypes=CACHES[cache])
    # Its claim is fine enough to judge every case drawn: none set aside.
    assert all(p["discarded"] == 0 for p in report.raw["properties"])
    assert impl.seen, "the paged level was never called"
    formats = {s["dtype"] for s in impl.seen}
    want = {"f32": {torch.float32}, "bf16": {torch.bfloat16},
            "fp8": {torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz},
            "int8": {torch.int8}}[cache]
    assert formats == want, formats  # the pool as stored, never dequantized for the kernel
    for s in impl.seen:
        pages, a, b = s["shape"][:3]
        assert s["layout"] == layout
        assert (a, b) == ((s["page"], s["kv_heads"]) if layout == "NHD"
                          else (s["kv_heads"], s["page"]))
        assert s["table"][0] == s["requests"]
    if cache in ("fp8", "int8"):
        assert any(s["scaled"] for s in impl.seen)
        # scales by KV head and, as pools read through the block table, by token (and head)
        assert {s["scale_dims"] for s in impl.seen if s["scaled"]} == {1, 2, 3}
    assert any(s["requests"] > 1 for s in impl.seen)  # the batch property's calls
    assert any(s["alibi"] for s in impl.seen)  # it says it supports ALiBi: drawn


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("bug", BUGS)
def test_planted_paged_cache_bugs_are_killed(layout, bug):
    torch.set_num_threads(1)
    report = dcp_verify.properties(TorchPaged(layout, bug), seed=7, cases=CASES, arrays="torch",
                                   kv_dtypes=CACHES["fp8"])
    assert report.verdict == "FAILED", report.text
    assert report.pin is not None and "over bound" in report.summary()
    # Its shrunk case again, alone: still caught, and the correct kernel passes it.
    assert not dcp_verify.replay(TorchPaged(layout, bug), report.pin, arrays="torch").ok
    assert dcp_verify.replay(TorchPaged(layout), report.pin, arrays="torch").ok


def page_scaled_setup(kv_scale, kv_dtype):
    """One step over a paged pool whose scales are kept one a page (and KV head), as a setup
    file (a pinned counterexample) states it: 4 ranks of interleave 2, pages of 8 rows."""
    spec = {"tokens": 2, "q_heads": 4, "kv_heads": 2, "head_dim": 16, "v_dim": 16, "seq": 300,
            "shared_latent": False, "q_dtype": "F32", "kv_dtype": kv_dtype, "causal": True,
            "explicit_pos": True, "window": 0, "softcap": 0.0, "topk": 0, "lse_base": "e",
            "explicit_scale": False, "values": "normal", "seed": 11, "sink": False,
            "kv_scale": kv_scale}
    config = {"tp_size": 4, "dcp_size": 4, "interleave": 2, "comm": "ag_rs",
              "replicate_q": False, "order": "seq", "order_seed": 0, "tile": 64, "splits": 1,
              "out_dtype": "f32", "page_size": 8, "page_seed": 5}
    return {"spec": spec, "config": config, "chunks": [200, 1, 99]}


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_scales_by_page_reach_a_kernel_that_supports_them(layout):
    """ABI version 4: the paged level gets scales kept by page as [pages, 1] or
    [pages, kv_heads] with scale_grain "page"; the correct kernel passes, its K scale applied
    twice and its block table off by one page are caught."""
    class Seen(TorchPaged):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.grains = set()

        def paged(self, a):
            if a.k_scale is not None:
                self.grains.add((a.scale_grain, tuple(a.k_scale.shape[1:])))
            return super().paged(a)

    torch.set_num_threads(1)
    for kv_scale, per_head in (("per_page", False), ("per_page_head", True)):
        for kv_dtype in ("F8_E4M3", "I8"):
            setup = page_scaled_setup(kv_scale, kv_dtype)
            formats = CACHES["int8" if kv_dtype == "I8" else "fp8"]
            good = Seen(layout)
            assert dcp_verify.replay(good, setup, arrays="torch", kv_dtypes=formats).ok
            assert good.grains == {("page", (2 if per_head else 1,))}, good.grains
            for bug in ("k_scale_twice", "page_off_by_one"):
                assert not dcp_verify.replay(TorchPaged(layout, bug), setup, arrays="torch",
                                             kv_dtypes=formats).ok


def test_scales_by_page_alone_are_drawn_without_scales_by_token():
    """An implementation that supports scales by page but not by token: the by-token scales the
    suite would draw are kept by page in a paged cache (by head otherwise), never by token."""
    class Grains(TorchPaged):
        supports = ("page_scales",)

        def __init__(self):
            super().__init__()
            self.grains = set()

        def paged(self, a):
            if a.k_scale is not None:
                self.grains.add(a.scale_grain)
            return super().paged(a)

    torch.set_num_threads(1)
    impl = Grains()
    testing.assert_properties(impl, seed=7, cases=CASES, arrays="torch", kv_dtypes=CACHES["int8"])
    assert "token" not in impl.grains and "page" in impl.grains, impl.grains


def test_lacked_features_are_never_drawn():
    class Seen(TorchPaged):
        def __init__(self, lacks=()):
            super().__init__()
            self.lacks = lacks
            self.seen = set()

        def paged(self, a):
            self.seen.add((a.sink is not None, a.requests > 1))
            return super().paged(a)

    control = Seen()  # the same draws, lacking nothing: sinks and batches come
    testing.assert_properties(control, seed=7, cases=CASES, arrays="torch")
    assert (True, False) in control.seen and any(batch for _, batch in control.seen)
    impl = Seen(("sink", "batch"))
    report = testing.assert_properties(impl, seed=7, cases=CASES, arrays="torch")
    assert impl.seen == {(False, False)}
    assert "dcp-batch" not in {p["name"] for p in report.raw["properties"]}


def test_features_added_since_reach_only_an_implementation_that_supports_them():
    """ALiBi and scales by token (impl.h's version 3) are drawn for an implementation whose
    `supports` names them, never for one written before them (no `supports`), nor for one that
    names one of them in `lacks`; a `supports` naming anything else is refused."""
    class Seen(TorchPaged):
        def __init__(self, supports=None, lacks=()):
            super().__init__()
            if supports is not None:
                self.supports = supports
            self.lacks = lacks
            self.seen = set()

        def paged(self, a):
            self.seen.add((a.alibi_slopes is not None,
                           a.k_scale is not None and a.k_scale.dim() > 1))
            return super().paged(a)

    class Unaware:
        """A kernel written before the two: no `supports` at all."""
        claim = TorchPaged().claim

        def __init__(self):
            self.kernel = TorchPaged()
            self.seen = set()

        def paged(self, a):
            self.seen.add((a.alibi_slopes is not None,
                           a.k_scale is not None and a.k_scale.dim() > 1))
            return self.kernel.paged(a)

    torch.set_num_threads(1)
    everything = Seen()
    testing.assert_properties(everything, seed=7, cases=CASES, arrays="torch",
                              kv_dtypes=CACHES["int8"])
    assert {alibi for alibi, _ in everything.seen} == {True, False}
    assert {by_token for _, by_token in everything.seen} == {True, False}
    for before in (Unaware(), Seen(supports=()),
                   Seen(lacks=("alibi", "token_scales", "page_scales"))):
        testing.assert_properties(before, seed=7, cases=CASES, arrays="torch",
                                  kv_dtypes=CACHES["int8"])
        assert before.seen == {(False, False)}, before.seen
    only_alibi = Seen(supports=("alibi",))
    testing.assert_properties(only_alibi, seed=7, cases=CASES, arrays="torch",
                              kv_dtypes=CACHES["int8"])
    assert {by_token for _, by_token in only_alibi.seen} == {False}
    assert {alibi for alibi, _ in only_alibi.seen} == {True, False}
    for supports in (("alibi_slopes",), "alibi", None):
        impl = TorchPaged()
        impl.supports = supports
        with pytest.raises(ValueError, match="impl.supports: expected a collection of alibi, "
                                             "token_scales, page_scales"):
            dcp_verify.properties(impl, seed=1, cases=1, arrays="torch")


def test_a_server_that_does_not_say_it_speaks_version_3_is_never_handed_its_features(monkeypatch):
    """The bridge's hello reply without "abi": 3 (a server written to the wire protocol before
    version 3) lacks ALiBi and scales by token, whatever its `lacks` says."""
    from dcp_verify import _suite
    real = _suite._hello
    def without_abi(impl, claim):
        return {k: v for k, v in real(impl, claim).items() if k != "abi"}

    monkeypatch.setattr(_suite, "_hello", without_abi)

    class Seen(TorchPaged):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def paged(self, a):
            self.seen.add((a.alibi_slopes is not None,
                           a.k_scale is not None and a.k_scale.dim() > 1))
            return super().paged(a)

    torch.set_num_threads(1)
    impl = Seen()
    assert set(impl.supports) == {"alibi", "token_scales", "page_scales"}
    testing.assert_properties(impl, seed=7, cases=CASES, arrays="torch", kv_dtypes=CACHES["int8"])
    assert impl.seen == {(False, False)}, impl.seen


def test_a_kernel_dequantizing_into_bf16_is_caught_unless_it_claims_so():
    """fp8 pages times a non-power-of-2 scale, rounded to bf16 (a kernel feeding a bf16 MMA): the
    kernel that does not claim it is caught, and the case it shrinks to passes once it claims
    kv_dequant bf16. Claimed, it passes the suite: the cases whose logits are too large for a
    bf16 key's rounding to be bounded (kappa > 0.1) are set aside, and the report says how many."""
    torch.set_num_threads(1)
    passed = testing.assert_properties(TorchPaged(dequant=torch.bfloat16), seed=7, cases=CASES,
                                       arrays="torch", kv_dtypes=CACHES["fp8"])
    rows = {p["name"]: p for p in passed.raw["properties"]}
    assert rows["dcp-fp8"]["cases"] == CASES and rows["dcp-fp8"]["discarded"] > 0
    assert "drawn cases set aside, the claim too coarse to judge them" in rows["dcp-fp8"]["what"]
    unclaimed = TorchPaged(dequant=torch.bfloat16, claim_dequant=False)
    report = dcp_verify.properties(unclaimed, seed=7, cases=CASES, arrays="torch",
                                   kv_dtypes=CACHES["fp8"], only=["dcp-fp8"])
    assert report.verdict == "FAILED" and "over bound" in report.summary(), report.text
    assert report.pin["spec"].get("kv_scale") in ("per_tensor", "per_head", "per_token",
                                                  "per_token_head", "per_page",
                                                  "per_page_head"), report.pin
    claimed = TorchPaged(dequant=torch.bfloat16)
    assert claimed.claim["kv_dequant"] == "bf16"
    assert dcp_verify.replay(claimed, report.pin, arrays="torch").ok
    assert not dcp_verify.replay(unclaimed, report.pin, arrays="torch").ok


def test_bad_paged_fields_are_refused_by_name():
    with pytest.raises(ValueError, match="impl.page_layout: expected 'NHD' or 'HND'"):
        dcp_verify.properties(TorchPaged("NCHW"), seed=1, cases=1, arrays="torch")
    for lacks in (("sinks",), "sink", None):
        impl = TorchPaged()
        impl.lacks = lacks
        with pytest.raises(ValueError, match="impl.lacks: expected a collection of softcap"):
            dcp_verify.properties(impl, seed=1, cases=1, arrays="torch")
    impl = TorchPaged()
    impl.claim = {**impl.claim, "kv_dequant": "fp8"}
    with pytest.raises(ValueError, match=r"impl.claim\['kv_dequant'\]"):
        dcp_verify.properties(impl, seed=1, cases=1, arrays="torch")


def test_numpy_levels_get_fp8_pools_widened_exactly():
    """numpy has no fp8: the pool's codes arrive as their float32 values, as torch decodes them."""
    from dcp_verify._serve import _FP8

    for name, dtype in (("fp8e4m3", torch.float8_e4m3fn), ("fp8e5m2", torch.float8_e5m2),
                        ("fp8e4m3fnuz", torch.float8_e4m3fnuz)):
        decoded = torch.arange(256, dtype=torch.uint8).view(dtype).float().numpy()
        np.testing.assert_array_equal(_FP8[name], decoded)
