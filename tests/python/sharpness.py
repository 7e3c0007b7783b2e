"""How sharp dcp-verify's judge is on real third-party kernels, and what it sees that a fixed
tolerance does not (docs/tolerances.md section 9).

PyTorch's CPU flash-attention kernel computes each DCP rank's partial over the rank's own keys
(key p on rank p mod N); a merge written in torch joins them: in fp32 (the fp32 pipeline), or as a
bf16 reduce-scatter of the scaled outputs beside an fp32 LSE merge (the bf16 pipeline, as engines'
DCP merges do). Each result is judged by dcp_verify.check with the claim dcp_verify.probe measures
of the same kernel (torch_flash's partial, on the probe's shapes) and this pipeline's merge, its
words used as they come:

  correct     the output and every partial: err/bound (sound) and err/stat (statistical), per
              part the worst element's; medians over the configurations; any FAILED or SUSPECT
              is a false alarm
  subtle bugs from the output alone, on the same configurations: one rank's merge weight
              times 1 + 2^-10, one rank's partial LSE + 1e-3, one rank's last key dropped;
              flagged when FAILED or SUSPECT, beside torch.testing.assert_close's default
              tolerances on O and the LSE: how often it raises, and how often it sees the bug
              (raises on the bug and not on its correct twin)

    python3 tests/python/sharpness.py --configs 12      # the tables (needs torch, dcp_verify)

tests/python/test_sharpness.py runs it in CI.
"""

from __future__ import annotations

import argparse
import math
import statistics

import torch

import dcp_verify
import torch_flash

_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_HEADS, _KV_HEADS, _DIM = 8, 2, 128
_RANKS = (1, 2, 4, 8)
_KEYS = (250, 700, 1500, 2700)
BUGS = ("weight", "lse", "drop")


class Levels(torch_flash.TorchFlash):
    """A pipeline's kernel and merge as dcp_verify levels, for dcp_verify.probe: the same CPU flash
    kernel per rank (torch_flash's partial) and this pipeline's merge as the combine."""

    def __init__(self, pipe: "Pipeline"):
        super().__init__(pipe.dtype)
        self.pipe = pipe
        self.name = f"sharpness-{pipe.name}"

    def combine(self, a):
        o_r = torch.as_tensor(a.o_partial)  # [N, T, H, Dv]
        lse_r = torch.as_tensor(a.lse_partial) * (math.log(2.0) if a.lse_base == 1 else 1.0)
        n, t, h, dv = o_r.shape
        o, lse = merge(self.pipe, o_r.reshape(n, t * h, dv), lse_r.reshape(n, t * h))
        return o.reshape(t, h, dv), (lse / math.log(2.0) if a.lse_base == 1 else lse).reshape(t, h)


class Pipeline:
    """dtype: torch.float32 (fp32 partials merged in fp32) or torch.bfloat16 (bf16 partials, a bf16
    reduce-scatter of the scaled outputs, the LSE merged in fp32, a bf16 output). Its claim is what
    dcp_verify.probe measures of its kernel and merge, word for word (nothing stated by hand)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.bf16 = dtype == torch.bfloat16
        self.name = "bf16" if self.bf16 else "f32"
        self.probe = dcp_verify.probe(Levels(self), arrays="torch")

    def claim(self, ranks: int) -> dict:
        return {**self.probe.words, "dcp_size": ranks, "interleave": 1}


def make_case(pipe: Pipeline, keys: int, seed: int) -> dict:
    """One decode token: q [1, Hq, D], K/V [S, Hkv, D] of N(0, 1) values held exactly in the
    pipeline's format, GQA, causal, LSE base e."""
    g = torch.Generator().manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g).to(pipe.dtype).float().numpy()
    case = {"q": draw(1, _HEADS, _DIM), "k": draw(keys, _KV_HEADS, _DIM),
            "v": draw(keys, _KV_HEADS, _DIM)}
    if pipe.bf16:
        case["dtypes"] = {"q": "BF16", "k": "BF16", "v": "BF16"}
    return case


def partial(pipe: Pipeline, case: dict, positions: list) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel over the keys at `positions` (in position order): O [Hq, D] and LSE [Hq] (e)."""
    if not positions:
        return torch.zeros(_HEADS, _DIM), torch.full((_HEADS,), -math.inf)
    group = _HEADS // _KV_HEADS
    heads = torch.arange(_HEADS) // group
    k = torch.from_numpy(case["k"])[positions][:, heads, :].to(pipe.dtype)  # [n, Hq, D]
    v = torch.from_numpy(case["v"])[positions][:, heads, :].to(pipe.dtype)
    q = torch.from_numpy(case["q"]).to(pipe.dtype)  # [1, Hq, D]
    out, lse = _FLASH(q.permute(1, 0, 2).unsqueeze(0), k.permute(1, 0, 2).unsqueeze(0),
                      v.permute(1, 0, 2).unsqueeze(0), 0.0, False, scale=1.0 / math.sqrt(_DIM))[:2]
    return out[0, :, 0, :].float(), lse[0, :, 0].float()


def merge(pipe: Pipeline, o_r: torch.Tensor, lse_r: torch.Tensor, weight_bug: float = 1.0):
    """The partials [N, Hq, D] and [N, Hq] merged: fp32, or a bf16 reduce-scatter of
    exp(L_r - L) O_r in rank order beside the fp32 LSE. weight_bug multiplies rank 0's weight."""
    m = lse_r.max(dim=0).values
    w = torch.exp(lse_r - m)
    w[0] = w[0] * weight_bug
    z = w.sum(dim=0)
    lse = m + torch.log(z)
    if not pipe.bf16:
        return (w.unsqueeze(-1) * o_r).sum(dim=0) / z.unsqueeze(-1), lse
    scaled = (w / z).unsqueeze(-1) * o_r  # exp(L_r - L) O_r in fp32
    o = torch.zeros(o_r.shape[1:], dtype=torch.bfloat16)
    for r in range(o_r.shape[0]):
        o = (o.float() + scaled[r].to(torch.bfloat16).float()).to(torch.bfloat16)
    return o.float(), lse


def run(pipe: Pipeline, case: dict, ranks: int, bug: str | None = None):
    """The pipeline on a case: merged (o [1, Hq, D], lse [1, Hq]) and the partials."""
    keys = case["k"].shape[0]
    o_r, lse_r = [], []
    for r in range(ranks):
        mine = [p for p in range(keys) if p % ranks == r]
        if bug == "drop" and r == 0:
            mine = mine[:-1]
        o, lse = partial(pipe, case, mine)
        o_r.append(o.to(pipe.dtype).float())
        lse_r.append(lse)
    o_r, lse_r = torch.stack(o_r), torch.stack(lse_r)
    if bug == "lse":
        lse_r[0] += 1e-3
    if ranks == 1 and bug != "weight":
        o, lse = o_r[0], lse_r[0]
    else:
        o, lse = merge(pipe, o_r, lse_r, 1.0 + 2.0**-10 if bug == "weight" else 1.0)
    return o.unsqueeze(0), lse.unsqueeze(0), o_r.unsqueeze(1), lse_r.unsqueeze(1)


def result(pipe: Pipeline, ranks: int, o, lse, o_r=None, lse_r=None) -> dict:
    res = {"o": o.numpy(), "lse": lse.numpy(), **pipe.claim(ranks)}
    dtypes = {"o": "BF16"} if pipe.bf16 else {}
    if o_r is not None:
        res.update(o_partial=o_r.numpy(), lse_partial=lse_r.numpy())
        if pipe.bf16:
            dtypes["o_partial"] = "BF16"
    if dtypes:
        res["dtypes"] = dtypes
    return res


def flagged(report: dcp_verify.Report) -> bool:
    return report.verdict in ("FAILED", "SUSPECT")


def assert_close_flags(pipe: Pipeline, o, lse, ref_o, ref_lse) -> bool:
    """torch.testing.assert_close with its default tolerances for O's format and the LSE's (f32)."""
    try:
        torch.testing.assert_close(o.to(pipe.dtype), torch.from_numpy(ref_o).to(pipe.dtype))
        torch.testing.assert_close(lse, torch.from_numpy(ref_lse).float())
    except AssertionError:
        return True
    return False


def configurations(count: int) -> list:
    """(ranks, keys, seed) cycling over N 1-8 and S 250-2700."""
    return [(_RANKS[i % len(_RANKS)], _KEYS[(i // len(_RANKS) + i) % len(_KEYS)], 1000 + i)
            for i in range(count)]


def measure(pipe: Pipeline, count: int) -> dict:
    """Ratios of the correct results and detections of the subtle bugs over `count` configurations."""
    out = {"o": [], "o_stat": [], "lse": [], "lse_stat": [], "partial": [], "partial_stat": [],
           "ranks": [], "false_alarms": 0, "close_alarms": 0, "configs": count,
           "claim": pipe.probe.claim_words,
           "bugs": {b: {"dcp_verify": 0, "assert_close": 0, "assert_close_sees": 0, "cases": 0}
                    for b in BUGS}}
    for ranks, keys, seed in configurations(count):
        case = make_case(pipe, keys, seed)
        ref_o, ref_lse = dcp_verify.reference(case)
        o, lse, o_r, lse_r = run(pipe, case, ranks)
        report = dcp_verify.check(case, result(pipe, ranks, o, lse, o_r, lse_r))
        parts = report.raw["parts"]
        output = parts[0]
        for key, tensor in (("o", "o"), ("o_stat", "o_stat"), ("lse", "lse"),
                            ("lse_stat", "lse_stat")):
            out[key].append(output[tensor]["ratio"])
        if len(parts) > 1:
            out["partial"].append(max(p["o"]["ratio"] for p in parts[1:]))
            out["partial_stat"].append(max(p["o_stat"]["ratio"] for p in parts[1:]))
        out["ranks"].append(ranks)
        out["false_alarms"] += int(flagged(report))
        twin_alarm = assert_close_flags(pipe, o, lse, ref_o, ref_lse)
        out["close_alarms"] += int(twin_alarm)
        for bug in BUGS:
            bo, blse, _, _ = run(pipe, case, ranks, bug)
            tally = out["bugs"][bug]
            tally["cases"] += 1
            tally["dcp_verify"] += int(flagged(dcp_verify.check(case, result(pipe, ranks, bo,
                                                                              blse))))
            close = assert_close_flags(pipe, bo, blse, ref_o, ref_lse)
            tally["assert_close"] += int(close)
            tally["assert_close_sees"] += int(close and not twin_alarm)
    return out


def median(x: list) -> str:
    return f"{statistics.median(x):.3g}" if x else "-"


def table(results: list) -> str:
    lines = [f"{name} claim (dcp_verify.probe): {r['claim']}" for name, r in results]
    lines += ["pipeline  configs  O err/bound  O err/stat  LSE err/bound  LSE err/stat  "
             "partial O err/bound  partial O err/stat  false alarms (dcp-verify / assert_close)"]
    for name, r in results:
        lines.append(f"{name:<9} {r['configs']:>7}  {median(r['o']):>11}  {median(r['o_stat']):>10}  "
                     f"{median(r['lse']):>13}  {median(r['lse_stat']):>12}  "
                     f"{median(r['partial']):>19}  {median(r['partial_stat']):>18}  "
                     f"{r['false_alarms']} / {r['close_alarms']}")
    # Where the merge's bound goes: the output's O err/stat by the number of ranks merged.
    for name, r in results:
        by_n = {n: [x for x, m in zip(r["o_stat"], r["ranks"]) if m == n] for n in _RANKS}
        lines.append(f"{name} O err/stat by N (median): " + "  ".join(
            f"{n}: {median(x)}" for n, x in by_n.items() if x))
    lines.append("subtle bug (output only)  " + "  ".join(
        f"{name}: dcp-verify / assert_close raises (sees)" for name, _ in results))
    for bug in BUGS:
        cells = []
        for _, r in results:
            t = r["bugs"][bug]
            cells.append(f"{t['dcp_verify']}/{t['cases']} / {t['assert_close']}/{t['cases']} "
                         f"({t['assert_close_sees']})")
        lines.append(f"{bug:<25} " + "  ".join(f"{c:>41}" for c in cells))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=12, help="configurations per pipeline")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = [(p.name, measure(p, args.configs))
               for p in (Pipeline(torch.float32), Pipeline(torch.bfloat16))]
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
