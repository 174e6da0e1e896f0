"""Plain-PyTorch Llama and GPT-2 models that compute exactly the math of the
model zoo's nn graphs (planner/models/zoo_builder.cc), with state_dict keys
equal to the graphs' `nn.name`s, so a Loom checkpoint loads by name.

The math follows docs/planner_nn.md op by op:

* linear weights are [in, out] (`y = x W + b`), for Llama too: the zoo holds
  Meta's [out, in] nn.Linear weights transposed under the same names;
* GPT-2's fused c_attn is three parameters named after their column slice,
  `transformer.h.0.attn.c_attn.weight[:, 0:64]` and `...bias[0:64]`, etc.;
* GPT-2's LM head is tied: logits = x wte^T;
* rms_norm is `x / sqrt(mean(x^2) + eps) * gamma`, layer_norm uses the biased
  variance, both with eps 1e-5;
* rope rotates the pairs (i, i + D/2) (Hugging Face's rotate-half) by the
  angle `s * theta^(-2i/D)`, s the position in the sequence from 0;
* attention is causal with scale 1/sqrt(D); query head h reads kv head
  h // (heads / kv_heads);
* gelu is the tanh approximation;
* the loss is the mean cross-entropy over every token of the batch.

No loom code is imported: this file is the independent reference.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """TransformerConfig of planner/models/model_config.h."""
    name: str
    family: str  # "gpt2" or "llama"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_seq: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _gpt2(name: str, layers: int, hidden: int, heads: int) -> ModelConfig:
    return ModelConfig(name, "gpt2", layers, hidden, heads, heads, 4 * hidden,
                       50257, 1024)


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int,
           ffn: int, vocab: int, max_seq: int, theta: float) -> ModelConfig:
    return ModelConfig(name, "llama", layers, hidden, heads, kv_heads, ffn,
                       vocab, max_seq, rope_theta=theta)


# The published configurations of model_config.cc (same numbers).
PUBLISHED = {c.name: c for c in [
    _gpt2("gpt2", 12, 768, 12),
    _gpt2("gpt2-medium", 24, 1024, 16),
    _gpt2("gpt2-large", 36, 1280, 20),
    _gpt2("gpt2-xl", 48, 1600, 25),
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 10000.0),
    _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0),
    _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0),
    _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 131072,
           500000.0),
]}

_TINY_KEYS = {"layers": "layers", "hidden": "hidden", "heads": "heads",
              "kv_heads": "kv_heads", "ffn": "ffn", "vocab": "vocab",
              "seq": "max_seq"}


def config_from_spec(spec: str) -> ModelConfig:
    """Parses a zoo model spec as configFromSpec does: a published name or
    `tiny[:key=value,...]` (keys family, layers, hidden, heads, kv_heads,
    ffn, vocab, seq; defaults: Llama, 2 layers, hidden 64, 4 heads, 2 kv
    heads, ffn 128, vocab 256, seq 16; a GPT-2 without kv_heads gets
    kv_heads = heads)."""
    text = spec.strip()
    if not text.lower().startswith("tiny"):
        config = PUBLISHED.get(text.lower())
        if config is None:
            raise ValueError(f"unknown model '{spec}'; known models are "
                             f"{', '.join(PUBLISHED)}, or tiny[:key=value,...]")
        return config
    fields = dict(family="llama", layers=2, hidden=64, heads=4, kv_heads=2,
                  ffn=128, vocab=256, max_seq=16)
    rest = text[4:]
    if rest and not rest.startswith(":"):
        raise ValueError(f"model spec '{spec}': expected ':' after 'tiny'")
    for item in filter(None, (s.strip() for s in rest[1:].split(","))):
        key, _, value = (part.strip() for part in item.partition("="))
        if key == "family":
            if value not in ("gpt2", "llama"):
                raise ValueError(f"model spec '{spec}': family '{value}' is "
                                 "not gpt2 or llama")
            fields["family"] = value
        elif key in _TINY_KEYS:
            fields[_TINY_KEYS[key]] = int(value)
        else:
            raise ValueError(f"model spec '{spec}': unknown key '{key}'")
    if fields["family"] == "gpt2" and "kv_heads" not in rest:
        fields["kv_heads"] = fields["heads"]
    config = ModelConfig(name="tiny", **fields)
    _validate(config)
    return config


def _validate(c: ModelConfig) -> None:
    for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                  "max_seq"):
        if getattr(c, field) <= 0:
            raise ValueError(f"{field} must be positive, got "
                             f"{getattr(c, field)}")
    if c.hidden % c.heads or c.heads % c.kv_heads:
        raise ValueError(f"hidden {c.hidden}, heads {c.heads}, kv_heads "
                         f"{c.kv_heads}: heads must divide hidden and "
                         "kv_heads must divide heads")
    if c.family == "gpt2" and c.kv_heads != c.heads:
        raise ValueError("gpt2 uses multi-head attention: kv_heads == heads")
    if c.family == "llama" and c.head_dim % 2:
        raise ValueError(f"head dim {c.head_dim} is odd; rope needs pairs")


def _param(*shape: int) -> nn.Parameter:
    # Values come from a checkpoint or init specs; start from zeros so an
    # unloaded parameter is obvious rather than random.
    return nn.Parameter(torch.zeros(*shape))


class Linear(nn.Module):
    """nn.linear: weight [in, out], y = x W (+ b)."""

    def __init__(self, fan_in: int, fan_out: int, bias: bool):
        super().__init__()
        self.weight = _param(fan_in, fan_out)
        self.bias = _param(fan_out) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.weight)
        return y if self.bias is None else y + self.bias


class RmsNorm(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = _param(hidden)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) \
            * self.weight


class LayerNorm(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = _param(hidden)
        self.bias = _param(hidden)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias,
                            self.eps)


class Embedding(nn.Module):
    def __init__(self, rows: int, hidden: int):
        super().__init__()
        self.weight = _param(rows, hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """nn.rope on [B, S, H, D]: pairs (i, i + D/2), angle s theta^(-2i/D).
    The tables are computed in float64 and rounded once, as the runtime's
    kernel does."""
    seq, dim = x.shape[1], x.shape[3]
    half = dim // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / dim)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(angle).to(x.dtype)[None, :, None, :]
    sin = torch.sin(angle).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def causal_attention(q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor) -> torch.Tensor:
    """nn.attention: q [B, S, Hq, D], k, v [B, S, Hkv, D] -> [B, S, Hq, D];
    causal, scale 1/sqrt(D), query head h uses kv head h // (Hq / Hkv)."""
    group = q.shape[2] // k.shape[2]
    if group > 1:
        k = k.repeat_interleave(group, dim=2)
        v = v.repeat_interleave(group, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    seq = q.shape[2]
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1), v)
    return out.transpose(1, 2)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """nn.cross_entropy: mean over every token of logsumexp - logit[label],
    in float32 at least (a bf16 model's loss is float32, as Loom's)."""
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           labels.reshape(-1).long())


# ----------------------------------------------------------------- Llama


class LlamaAttention(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        d = c.head_dim
        self.wq = Linear(c.hidden, c.heads * d, bias=False)
        self.wk = Linear(c.hidden, c.kv_heads * d, bias=False)
        self.wv = Linear(c.hidden, c.kv_heads * d, bias=False)
        self.wo = Linear(c.heads * d, c.hidden, bias=False)
        self.config = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        b, s = x.shape[:2]
        q = self.wq(x).reshape(b, s, c.heads, c.head_dim)
        k = self.wk(x).reshape(b, s, c.kv_heads, c.head_dim)
        v = self.wv(x).reshape(b, s, c.kv_heads, c.head_dim)
        o = causal_attention(rope(q, c.rope_theta), rope(k, c.rope_theta), v)
        return self.wo(o.reshape(b, s, c.hidden))


class LlamaFeedForward(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.w1 = Linear(c.hidden, c.ffn, bias=False)
        self.w2 = Linear(c.ffn, c.hidden, bias=False)
        self.w3 = Linear(c.hidden, c.ffn, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.attention_norm = RmsNorm(c.hidden, c.norm_eps)
        self.attention = LlamaAttention(c)
        self.ffn_norm = RmsNorm(c.hidden, c.norm_eps)
        self.feed_forward = LlamaFeedForward(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Meta's Llama names (tok_embeddings, layers.N.attention.wq, norm,
    output), untied output head, weights [in, out]."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.tok_embeddings = Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(LlamaBlock(c) for _ in range(c.layers))
        self.norm = RmsNorm(c.hidden, c.norm_eps)
        self.output = Linear(c.hidden, c.vocab, bias=False)

    def forward(self, tokens: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        for block in self.layers:
            x = block(x)
        return cross_entropy(self.output(self.norm(x)), labels)

    def loss(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self(ids, labels)


# ----------------------------------------------------------------- GPT-2


class FusedQkv(nn.Module):
    """GPT-2's c_attn as the zoo declares it: three [H, H] weights and three
    [H] biases, named after the column slice of the Conv1D tensor each is."""

    def __init__(self, hidden: int):
        super().__init__()
        self.slices = [f"{i * hidden}:{(i + 1) * hidden}" for i in range(3)]
        for cols in self.slices:
            self.register_parameter(f"weight[:, {cols}]", _param(hidden, hidden))
            self.register_parameter(f"bias[{cols}]", _param(hidden))

    def forward(self, x: torch.Tensor):
        return [torch.matmul(x, getattr(self, f"weight[:, {cols}]"))
                + getattr(self, f"bias[{cols}]") for cols in self.slices]


class Gpt2Attention(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c_attn = FusedQkv(c.hidden)
        self.c_proj = Linear(c.hidden, c.hidden, bias=True)
        self.config = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        b, s = x.shape[:2]
        q, k, v = (t.reshape(b, s, c.heads, c.head_dim)
                   for t in self.c_attn(x))
        return self.c_proj(causal_attention(q, k, v).reshape(b, s, c.hidden))


class Gpt2Mlp(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c_fc = Linear(c.hidden, c.ffn, bias=True)
        self.c_proj = Linear(c.ffn, c.hidden, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Gpt2Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.ln_1 = LayerNorm(c.hidden, c.norm_eps)
        self.attn = Gpt2Attention(c)
        self.ln_2 = LayerNorm(c.hidden, c.norm_eps)
        self.mlp = Gpt2Mlp(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Transformer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.wte = Embedding(c.vocab, c.hidden)
        self.wpe = Embedding(c.max_seq, c.hidden)
        self.h = nn.ModuleList(Gpt2Block(c) for _ in range(c.layers))
        self.ln_f = LayerNorm(c.hidden, c.norm_eps)


class Gpt2(nn.Module):
    """Hugging Face GPT2LMHeadModel names (transformer.wte, transformer.h.N.
    attn.c_proj, ...), Conv1D [in, out] weights, LM head tied to wte."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.transformer = Gpt2Transformer(c)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor,
                position_ids: torch.Tensor) -> torch.Tensor:
        t = self.transformer
        x = t.wte(input_ids) + t.wpe(position_ids)
        for block in t.h:
            x = block(x)
        logits = torch.matmul(t.ln_f(x), t.wte.weight.t())
        return cross_entropy(logits, labels)

    def loss(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # The data feed's position_ids for plain batches: s at position s.
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        return self(ids, labels, positions)


def build_model(config: ModelConfig) -> nn.Module:
    return Gpt2(config) if config.family == "gpt2" else Llama(config)


def load_named_state(model: nn.Module, tensors: Mapping[str, Any],
                     dtype: Optional[torch.dtype] = None) -> None:
    """Copies every parameter of `model` from `tensors` (zoo name -> array or
    tensor of the parameter's shape). Raises KeyError naming the missing
    parameters and ValueError on a shape mismatch; entries that are not
    parameters (optimizer states, grads) are ignored."""
    params = dict(model.named_parameters())
    missing = [name for name in params if name not in tensors]
    if missing:
        raise KeyError(f"the state has no {', '.join(missing[:5])}"
                       f"{' ...' if len(missing) > 5 else ''} "
                       f"({len(missing)} of {len(params)} parameters missing)")
    with torch.no_grad():
        for name, param in params.items():
            value = torch.as_tensor(tensors[name])
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(f"{name}: state shape {tuple(value.shape)} "
                                 f"!= parameter shape {tuple(param.shape)}")
            param.copy_(value.to(dtype or param.dtype))
