"""PyTorch's CPU flash-attention kernel as a DCP implementation, for dcp_verify.properties.

partial: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu over the rank's own keys, with
the masks (causal, window, top-k) and ALiBi's bias (an additive float mask per head) built from the
keys' global positions and GQA expanded by hand;
combine: the LSE merge in torch, in the partials' base. `bug` plants a merge bug.

    report = dcp_verify.properties(TorchFlash(torch.bfloat16), seed=3, cases=30, **TorchFlash.RANGES)
"""

from __future__ import annotations

import math

import torch

_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_LN2 = math.log(2.0)
# The reduced-precision path's exponential is not the fp32 path's: measured through the kernel
# (docs/format.md, "Claims of measured kernels"; tests/python/sharpness.py), it is off by up to
# 1.58e-4 relative, not the 20 ulp ATen states for exp_u20. The kernel rescales once per block of
# 512 keys (kv_split_size): tile 512, so that error is paid once a block, not once a key.
_BF16_EXP_REL_ERR = 1.6e-4
_TILE = 512


class TorchFlash:
    """dtype: torch.float32 or torch.bfloat16, the kernel's inputs and output.
    bug: None, "base2" (a natural-log LSE merged as if base 2), "mean" (the partials averaged) or
    "alibi_local" (ALiBi's bias on the rank-local row instead of the key's position)."""

    # What the kernel does not support, never drawn: a logit soft-cap and attention sinks.
    RANGES = {"softcap": False, "sink": False}
    # Features added since the package's first release, which it handles: ALiBi, and K/V scales by
    # token (the partial level gets K and V dequantized).
    supports = ("alibi", "token_scales")
    # bf16 inputs must hold the case's values exactly: q and K/V drawn in bf16 only.
    RANGES_BF16 = {**RANGES, "q_dtypes": ("bf16",), "kv_dtypes": ("bf16",)}

    def __init__(self, dtype: torch.dtype = torch.float32, bug: str | None = None):
        self.dtype = dtype
        self.bug = bug
        self.name = f"torch-flash-{str(dtype).split('.')[-1]}" + (f"-bug-{bug}" if bug else "")
        reduced = dtype != torch.float32
        self.claim = {
            "accum": "f32",
            "accum_rounding": "nearest",  # CPU fp32 adds (and FMAs) round to nearest
            "p_cast": "bf16" if reduced else "none",  # P fed to the P.V GEMM in bf16
            "partial_dtype": "bf16" if reduced else "f32",  # the kernel's output format
            "exp_rel_err": _BF16_EXP_REL_ERR if reduced else 0.0,
            "tile": _TILE,
            "merge_accum": "f32",
        }

    def partial(self, a):
        T, H, dv, n = a.tokens, a.heads, a.v_dim, a.keys
        o = torch.zeros(T, H, dv)
        lse = torch.full((T, H), -math.inf)
        if n == 0:  # the kernel dies on zero keys
            return o, lse
        group = a.q_heads_total // a.kv_heads_total
        kv = (a.head0 + torch.arange(H)) // group - a.kv_head0  # each query head's KV head
        k = torch.as_tensor(a.k).to(self.dtype)[:, kv, :]  # [n, H, Dk]
        v = torch.as_tensor(a.k[..., :dv] if a.shared_latent else a.v).to(self.dtype)[:, kv, :]
        # The kernel wants q, K and V equally wide: zero columns change no dot product and no
        # output column kept.
        width = max(a.head_dim, dv)
        k = torch.nn.functional.pad(k, (0, width - a.head_dim))
        v = torch.nn.functional.pad(v, (0, width - dv))
        q_pos = torch.as_tensor(a.q_pos).view(T, 1)
        k_pos = torch.as_tensor(a.k_pos).view(1, n)
        visible = torch.ones(T, n, dtype=torch.bool)
        if a.causal:
            visible &= k_pos <= q_pos
        if a.window > 0:
            visible &= k_pos > q_pos - a.window
        if a.topk is not None:
            chosen = torch.as_tensor(a.topk)  # [T, K], -1 padding
            visible &= (chosen.view(T, -1, 1) == k_pos.view(1, 1, n)).any(dim=1)
        mask = torch.zeros(T, n).masked_fill(~visible, -math.inf).view(1, 1, T, n)
        if a.alibi_slopes is not None:  # the logit loses m_h |j - i|: a bias per head
            where = torch.arange(n).view(1, n) if self.bug == "alibi_local" else k_pos
            distance = (where - q_pos).abs().float()  # [T, n]
            mask = mask - torch.as_tensor(a.alibi_slopes).view(1, H, 1, 1) * distance
        q = torch.nn.functional.pad(torch.as_tensor(a.q).to(self.dtype), (0, width - a.head_dim))
        q = q.permute(1, 0, 2).unsqueeze(0)  # [1, H, T, width]
        out, lse_e = _FLASH(q, k.permute(1, 0, 2).unsqueeze(0), v.permute(1, 0, 2).unsqueeze(0),
                            0.0, False, attn_mask=mask, scale=a.scale)[:2]
        o = out[0].permute(1, 0, 2)[..., :dv].float()  # [T, H, Dv], values in the kernel's format
        lse = lse_e[0].permute(1, 0).float()
        empty = ~visible.any(dim=1)  # the kernel returns LSE 0 there
        o[empty] = 0.0
        lse[empty] = -math.inf
        return o, lse / _LN2 if a.lse_base == 1 else lse

    def combine(self, a):
        o_r = torch.as_tensor(a.o_partial)  # [N, T, H, Dv]
        lse_r = torch.as_tensor(a.lse_partial)  # [N, T, H]
        exp = torch.exp2 if (a.lse_base == 1 or self.bug == "base2") else torch.exp
        log = torch.log2 if a.lse_base == 1 else torch.log
        m = lse_r.max(dim=0).values
        m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # every partial empty
        w = exp(lse_r - m_safe)  # exp(-inf) = 0 for an empty partial
        z = w.sum(dim=0)
        o = (w.unsqueeze(-1) * o_r).sum(dim=0) / torch.where(z > 0, z, 1.0).unsqueeze(-1)
        if self.bug == "mean":  # the partials' outputs averaged, ignoring their LSEs
            o = o_r.mean(dim=0)
        return o, torch.where(z > 0, m_safe + log(z), -math.inf)
