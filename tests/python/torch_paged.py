"""A paged DCP decode kernel in PyTorch, called as an engine calls one: dcp_verify's paged level.

Each rank's cache arrives as the engine keeps it: a pool of pages in the cache's storage format
(fp8 as float8_e4m3fn / float8_e5m2 with its k_scale / v_scale, by KV head or, a token's in its
slot, by token), a block table per request, the requests' lengths and their queries' rows. The
kernel gathers each request's rows through its block table, dequantizes them with the scales, and
attends in float32 (masks and ALiBi's bias by the keys' positions, which it derives from the DCP
layout; GQA; sinks; soft-cap; top-k; a shared latent), returning the rank's partial O and LSE.
`bug` plants one of the engines' paged-cache bugs.

    report = dcp_verify.properties(TorchPaged(), seed=3, cases=30, arrays="torch")
"""

from __future__ import annotations

import math

import torch

_LN2 = math.log(2.0)
BUGS = ("k_scale_twice", "page_off_by_one", "alibi_local")


class TorchPaged:
    """layout: "NHD" (vLLM's [pages, page_size, kv_heads, D]) or "HND" (FlashInfer's).
    bug: None, "k_scale_twice" (K dequantized with its scale applied twice), "page_off_by_one"
    (each row read from the pool page after the one its block table names) or "alibi_local"
    (ALiBi's bias on the rank-local row instead of the key's position).
    dequant: torch.float32, or torch.bfloat16 (each dequantized element rounded to bf16, as a
    kernel feeding a bf16 MMA from an fp8 cache does); claim_dequant: whether the claim says so."""

    # Features added since the package's first release, which it handles: ALiBi, scales by token.
    supports = ("alibi", "token_scales", "page_scales")

    def __init__(self, layout: str = "NHD", bug: str | None = None,
                 dequant: torch.dtype = torch.float32, claim_dequant: bool = True):
        self.page_layout = layout
        self.bug = bug
        self.dequant = dequant
        # float32 GEMMs and exp on the CPU; K and V rounded to `dequant` once dequantized
        self.claim = {"accum": "f32", "accum_rounding": "nearest"}
        if dequant == torch.bfloat16 and claim_dequant:
            self.claim["kv_dequant"] = "bf16"
        self.name = f"torch-paged-{layout}" + (f"-bug-{bug}" if bug else "") + \
            ("-bf16-dequant" if dequant == torch.bfloat16 else "")

    @staticmethod
    def scales(scale, grain, table, n, page_size):
        """A scale to multiply rows [n, kv_heads, D] by, of `grain`: by KV head [kv_heads], by
        token (a pool [pages, page_size] or [pages, page_size, kv_heads]) or by page ([pages, 1]
        or [pages, kv_heads]), read through the table."""
        if grain == "head":
            return scale.view(1, -1, 1)
        r = torch.arange(n)
        pages = table[r // page_size].long()
        if grain == "page":
            return scale[pages].reshape(n, scale.shape[1], 1)
        per_slot = scale[pages, r % page_size]  # [n] or [n, kv_heads]
        return per_slot.reshape(n, 1 if scale.dim() == 2 else scale.shape[2], 1)

    def rows(self, cache, table, n, page_size):
        """Rows 0 .. n-1 of one request from the pool, [n, kv_heads, D], as stored."""
        r = torch.arange(n)
        pages = table[r // page_size].long()
        if self.bug == "page_off_by_one":
            pages = (pages + 1) % cache.shape[0]
        slots = r % page_size
        if self.page_layout == "HND":
            return cache[pages, :, slots]  # [pages, kv_heads, page, D] -> [n, kv_heads, D]
        return cache[pages, slots]

    def paged(self, a):
        T, H, dv, P, N, I = a.tokens, a.heads, a.v_dim, a.page_size, a.ranks, a.interleave
        o = torch.zeros(T, H, dv)
        lse = torch.full((T, H), -math.inf)
        group = a.q_heads_total // a.kv_heads_total
        kv = (a.head0 + torch.arange(H)) // group - a.kv_head0  # each query head's KV head
        q = torch.as_tensor(a.q).float()
        for b in range(a.requests):
            lo, hi = int(a.query_start_loc[b]), int(a.query_start_loc[b + 1])
            n = int(a.local_seq_lens[b])
            if hi == lo:
                continue
            k = self.rows(a.k_cache, a.block_table[b], n, P).float()
            v = self.rows(a.v_cache, a.block_table[b], n, P).float() if not a.shared_latent \
                else k[..., :dv]
            if a.k_scale is not None:
                scale = self.scales(a.k_scale, a.scale_grain, a.block_table[b], n, P)
                k = k * scale * (scale if self.bug == "k_scale_twice" else 1.0)
                if a.shared_latent:
                    v = k[..., :dv] if self.bug != "k_scale_twice" else v * scale
            if a.v_scale is not None:
                v = v * self.scales(a.v_scale, a.scale_grain, a.block_table[b], n, P)
            k, v = k.to(self.dequant).float(), v.to(self.dequant).float()
            k, v = k[:, kv, :], v[:, kv, :]  # [n, H, D]
            # Row r of this rank holds position (r / I) I N + rank I + r mod I.
            r = torch.arange(n)
            k_pos = (r // I) * I * N + a.rank * I + r % I
            q_pos = torch.as_tensor(a.q_pos[lo:hi]).view(-1, 1)
            visible = torch.ones(hi - lo, n, dtype=torch.bool)
            if a.causal:
                visible &= k_pos.view(1, n) <= q_pos
            if a.window > 0:
                visible &= k_pos.view(1, n) > q_pos - a.window
            if a.topk is not None:
                chosen = torch.as_tensor(a.topk[lo:hi])  # [t, K], -1 padding
                visible &= (chosen.view(hi - lo, -1, 1) == k_pos.view(1, 1, n)).any(dim=1)
            s = torch.einsum("thd,nhd->thn", q[lo:hi], k) * a.scale  # [t, H, n]
            if a.softcap > 0:
                s = a.softcap * torch.tanh(s / a.softcap)
            if a.alibi_slopes is not None:  # the logit loses m_h |j - i|
                where = r if self.bug == "alibi_local" else k_pos
                distance = (where.view(1, 1, n) - q_pos.view(-1, 1, 1)).abs().float()
                s = s - torch.as_tensor(a.alibi_slopes).view(1, H, 1) * distance
            s = s.masked_fill(~visible.view(hi - lo, 1, n), -math.inf)
            m = s.max(dim=-1).values if n else torch.full((hi - lo, H), -math.inf)
            if a.sink is not None:
                m = torch.maximum(m, torch.as_tensor(a.sink).view(1, H))
            m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            p = torch.exp(s - m_safe.unsqueeze(-1))
            den = p.sum(dim=-1)
            if a.sink is not None:
                den = den + torch.exp(torch.as_tensor(a.sink).view(1, H) - m_safe)
            num = torch.einsum("thn,nhd->thd", p, v)
            seen = den > 0
            o[lo:hi] = torch.where(seen.unsqueeze(-1), num / den.clamp_min(1e-38).unsqueeze(-1),
                                   0.0)
            lse[lo:hi] = torch.where(seen, m_safe + torch.log(den.clamp_min(1e-38)), -math.inf)
        return o, lse / _LN2 if a.lse_base == 1 else lse
