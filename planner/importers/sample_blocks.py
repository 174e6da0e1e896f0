"""GPT-2-style and Llama-style transformer code in plain PyTorch.

The inputs torch_import.py is tested on, written the way such models are
written in the wild (nanoGPT's fused c_attn split into q, k, v; Meta's
Llama module names), calling loom_torch for the math PyTorch 1.13 has no
op for. Every factory returns (module, example_inputs) with seeded weights.

    /usr/bin/python3 planner/importers/torch_import.py \\
        planner/importers/sample_blocks.py:llama_block -o block.mlir
"""

import torch
import torch.nn.functional as F
from torch import nn

from loom_torch import causal_attention, rms_norm, rope


class Gpt2Attention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.hidden = hidden
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        batch, seq = x.size(0), x.size(1)
        q, k, v = self.c_attn(x).split(self.hidden, dim=2)
        q = q.view(batch, seq, self.heads, self.head_dim)
        k = k.view(batch, seq, self.heads, self.head_dim)
        v = v.view(batch, seq, self.heads, self.head_dim)
        y = causal_attention(q, k, v).reshape(batch, seq, self.hidden)
        return self.c_proj(y)


class Gpt2Mlp(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.c_fc = nn.Linear(hidden, ffn)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(ffn, hidden)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Gpt2Block(nn.Module):
    """Pre-LayerNorm GPT-2 block (HF GPT2Block's structure and names)."""

    def __init__(self, hidden=64, heads=4, ffn=256):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attn = Gpt2Attention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.mlp = Gpt2Mlp(hidden, ffn)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Lm(nn.Module):
    """A small GPT-2 with HF GPT2LMHeadModel's names: learned positions and
    an LM head tied to transformer.wte."""

    def __init__(self, vocab=96, max_seq=16, hidden=64, heads=4, layers=2):
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vocab, hidden),
            "wpe": nn.Embedding(max_seq, hidden),
            "h": nn.ModuleList(
                [Gpt2Block(hidden, heads, 4 * hidden) for _ in range(layers)]),
            "ln_f": nn.LayerNorm(hidden),
        })
        # GPT-2's initialiser; N(0, 1) tables would make the tied head's
        # logits, and so the loss, huge.
        nn.init.normal_(self.transformer.wte.weight, std=0.02)
        nn.init.normal_(self.transformer.wpe.weight, std=0.01)

    def forward(self, input_ids, labels, position_ids):
        t = self.transformer
        x = t.wte(input_ids) + t.wpe(position_ids)
        for block in t.h:
            x = block(x)
        logits = F.linear(t.ln_f(x), t.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               labels.view(-1))


class RmsNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary embeddings (Meta's names)."""

    def __init__(self, hidden, heads, kv_heads, theta):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = hidden // heads
        self.theta = theta
        self.wq = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x):
        batch, seq = x.size(0), x.size(1)
        q = self.wq(x).view(batch, seq, self.heads, self.head_dim)
        k = self.wk(x).view(batch, seq, self.kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq, self.kv_heads, self.head_dim)
        q, k = rope(q, self.theta), rope(k, self.theta)
        y = causal_attention(q, k, v).view(batch, seq, -1)
        return self.wo(y)


class LlamaFeedForward(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    """Meta's TransformerBlock: RMSNorm, GQA with rope, SwiGLU MLP."""

    def __init__(self, hidden=64, heads=4, kv_heads=2, ffn=96, theta=10000.0):
        super().__init__()
        self.attention_norm = RmsNorm(hidden)
        self.attention = LlamaAttention(hidden, heads, kv_heads, theta)
        self.ffn_norm = RmsNorm(hidden)
        self.feed_forward = LlamaFeedForward(hidden, ffn)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class LlamaLm(nn.Module):
    """A small Llama: embeddings, blocks, final norm, untied output."""

    def __init__(self, vocab=96, hidden=64, heads=4, kv_heads=2, ffn=96,
                 layers=2):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            [LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers)])
        self.norm = RmsNorm(hidden)
        self.output = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, labels):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               labels.view(-1))


class ReluBlock(nn.Module):
    """An MLP with a ReLU, which has no nn op: the importer must refuse it."""

    def __init__(self, hidden=16):
        super().__init__()
        self.fc = nn.Linear(hidden, hidden)

    def forward(self, x):
        return F.relu(self.fc(x))


def _randomize_norms(module):
    # Norm scales of 1 and shifts of 0 would hide a swapped operand.
    for param in module.parameters():
        if param.dim() == 1:
            with torch.no_grad():
                param.add_(0.1 * torch.randn_like(param))
    return module


def gpt2_block():
    torch.manual_seed(0)
    return _randomize_norms(Gpt2Block()), (torch.randn(2, 8, 64),)


def llama_block():
    torch.manual_seed(0)
    return _randomize_norms(LlamaBlock()), (torch.randn(2, 8, 64),)


def gpt2_lm():
    torch.manual_seed(0)
    ids = torch.randint(0, 96, (2, 8))
    labels = torch.randint(0, 96, (2, 8))
    positions = torch.arange(8).repeat(2, 1)
    return _randomize_norms(Gpt2Lm()), (ids, labels, positions)


def llama_lm():
    torch.manual_seed(0)
    tokens = torch.randint(0, 96, (2, 8))
    labels = torch.randint(0, 96, (2, 8))
    return _randomize_norms(LlamaLm()), (tokens, labels)


def relu_block():
    torch.manual_seed(0)
    return ReluBlock(), (torch.randn(2, 4, 16),)
