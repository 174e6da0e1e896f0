"""PyTorch functions with the exact math of the nn ops PyTorch 1.13 lacks.

Models that should import into the nn dialect call these instead of writing
the math inline: torch_import.py keeps each call as one node and maps it to
one op (rms_norm -> nn.rms_norm, rope -> nn.rope, causal_attention ->
nn.attention). Run eagerly, they compute what those ops compute (see
docs/planner_nn.md), so a module's PyTorch output is the reference for the
imported graph.
"""

import torch


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2 over the last dim) + eps) * weight."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope(x, theta):
    """Rotary embedding of x [batch, seq, heads, head_dim], rotate-half pairs.

    Feature i pairs with i + head_dim/2 and turns by s * theta^(-2i/head_dim)
    at sequence position s, as GPT-NeoX and Hugging Face Llama do.
    """
    seq, dim = x.shape[1], x.shape[3]
    half = dim // 2
    exponents = torch.arange(half, dtype=x.dtype) * (-2.0 / dim)
    angles = torch.arange(seq, dtype=x.dtype)[:, None] * torch.pow(
        torch.tensor(theta, dtype=x.dtype), exponents)[None, :]
    cos = angles.cos()[None, :, None, :]
    sin = angles.sin()[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def causal_attention(q, k, v):
    """Causal softmax(q k^T / sqrt(head_dim)) v in [batch, seq, heads, dim].

    k and v may have fewer heads than q (grouped-query attention): query
    head h reads kv head h // (q_heads / kv_heads). This is the layout of
    flash-attn's flash_attn_func(q, k, v, causal=True).
    """
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) * q.shape[3] ** -0.5
    seq = q.shape[1]
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    out = torch.einsum("bhij,bjhd->bihd", scores.softmax(dim=-1), v)
    # Contiguous like a kernel's output, so callers may .view() it.
    return out.contiguous()
